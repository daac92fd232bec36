/*
 * sandbox/backend.c: the table of isolation levels and the result's names
 * and JSON form. Runs in the supervisor.
 */
#include "sandbox/backend.h"
#include "common/json.h"

#include <stddef.h>
#include <string.h>

const char *run_reason_name(enum run_reason r)
{
    static const char *const names[] = {
        [RUN_EXITED] = "exited",
        [RUN_TIMEOUT] = "timeout",
        [RUN_OOM] = "oom",
        [RUN_PIDS_LIMIT] = "pids_limit",
        [RUN_OUTPUT_LIMIT] = "output_limit",
        [RUN_CPU_LIMIT] = "cpu_limit",
        [RUN_FILE_SIZE_LIMIT] = "file_size_limit",
        [RUN_KILLED] = "killed",
        [RUN_SETUP_ERROR] = "setup_error",
    };
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "unknown";
}

const char *enforcement_name(enum enforcement e)
{
    static const char *const names[] = {
        [ENFORCED_NONE] = "none",
        [ENFORCED_CGROUP_V1] = "cgroup-v1",
        [ENFORCED_CGROUP_V2] = "cgroup-v2",
        [ENFORCED_RLIMIT] = "rlimit",
        [ENFORCED_SUPERVISOR] = "supervisor",
        [ENFORCED_KERNEL] = "kernel",
    };
    return (unsigned)e < sizeof names / sizeof names[0] ? names[e] : "unknown";
}

unsigned sandbox_degraded(const enum enforcement enforced[POLICY_LIMIT_COUNT])
{
    static const enum policy_limit tree_wide[] = { POLICY_LIMIT_MEMORY, POLICY_LIMIT_PIDS,
                                                   POLICY_LIMIT_CPU };
    unsigned mask = 0;
    for (size_t i = 0; i < sizeof tree_wide / sizeof tree_wide[0]; i++)
        if (enforced[tree_wide[i]] == ENFORCED_RLIMIT)
            mask |= 1u << tree_wide[i];
    return mask;
}

bool sandbox_needs_cgroup(const struct policy *p)
{
    return p->limits.memory || p->limits.pids || p->limits.cpu_ms;
}

const struct sandbox_backend *sandbox_backend_for(enum cordon_level level, struct cordon_err *err)
{
    switch (level) {
    case CORDON_LEVEL_NAMESPACE:
        return &namespace_backend;
    case CORDON_LEVEL_MICROVM:
        return &microvm_backend;
    case CORDON_LEVEL_PROCESS:
        return &process_backend;
    case CORDON_LEVEL_GVISOR:
        return &gvisor_backend;
    }
    err_set(err, CORDON_E_UNSUPPORTED,
            "isolation level '%s' is not implemented yet; use 'namespace'",
            cordon_level_name(level) ? cordon_level_name(level) : "?");
    return NULL;
}

/* What every level is asked besides its own admits(): the policy's workspace mode. */
static int admits(const struct sandbox_backend *b, const struct policy *p, struct cordon_err *err)
{
    if (p->workspace_mode == POLICY_WS_OVERLAY && !b->overlay)
        return err_set(err, CORDON_E_USAGE,
                       "workspace.mode: overlay needs the namespace "
                       "level; the %s level runs a workspace only directly",
                       b->name);
    return !b->admits || b->admits(p, err) == 0 ? 0 : -1;
}

const struct sandbox_backend *sandbox_backend_choose(const struct policy *p,
                                                     struct sandbox_skips *skipped,
                                                     struct cordon_err *err)
{
    if (skipped)
        skipped->n = 0;
    /* Asked before anything of the run exists: a refusal leaves no host state. */
    if (!p->n_level_fallbacks) {
        const struct sandbox_backend *b = sandbox_backend_for(p->level, err);
        return b && admits(b, p, err) == 0 ? b : NULL;
    }
    char why[sizeof err->msg] = "";
    size_t used = 0;
    for (size_t i = 0; i <= p->n_level_fallbacks; i++) {
        enum cordon_level l = i ? p->level_fallbacks[i - 1] : p->level;
        struct cordon_err e = { 0 };
        const struct sandbox_backend *b = sandbox_backend_for(l, &e);
        if (b && b->probe(&e) == 0 && admits(b, p, &e) == 0)
            return b;
        /* Said when a later level runs: a fallback is never silent. */
        if (skipped && skipped->n < sizeof skipped->skip / sizeof skipped->skip[0]) {
            struct sandbox_skip *s = &skipped->skip[skipped->n++];
            const char *name = cordon_level_name(l);
            size_t n = strlen(name);
            /* "microvm: no QEMU at ..." is said as the level's: without its name again. */
            bool named = !strncmp(e.msg, name, n) && e.msg[n] == ':' && e.msg[n + 1] == ' ';
            s->level = l;
            snprintf(s->why, sizeof s->why, "%s", named ? e.msg + n + 2 : e.msg);
        }
        int n = snprintf(why + used, sizeof why - used, "%s%s: %s", i ? "; " : "",
                         cordon_level_name(l), e.msg);
        used = n < 0 || (size_t)n >= sizeof why - used ? sizeof why - 1 : used + (size_t)n;
    }
    err_set(err, CORDON_E_UNSUPPORTED, "no isolation level of the policy can run here (%s)", why);
    return NULL;
}

/*
 * How the level holds the caps of the run's own filesystems: "tmpfs" (its
 * tmpfs's size or nr_inodes), "memory" (no inode count, but what files cost
 * is the memory limit's: gVisor's tmpfs), or "none" (the process level's
 * host directories, a host workspace, a cap the policy lifts). A host
 * workspace is the caller's directory: only limits.file_size bounds it.
 */
static void fs_caps_json(json_t *enforced, const struct sandbox_result *res, const struct policy *p)
{
    struct cordon_err ignored;
    const struct sandbox_backend *b = sandbox_backend_for(res->level, &ignored);
    const struct {
        const char *size_key, *inodes_key;
        uint64_t inodes;
        bool ours;
    } fs[] = {
        { "tmp_size", "tmp_inodes", p->tmp_inodes, true },
        { "shm_size", "shm_inodes", p->shm_inodes, true },
        /* A host workspace has a layer of the run's own in overlay mode. */
        { "workspace_size", "workspace_inodes", p->workspace_inodes,
          !p->workspace || p->workspace_mode == POLICY_WS_OVERLAY },
    };
    enum enforcement mem = res->enforced[POLICY_LIMIT_MEMORY];
    bool level_memory =
        mem == ENFORCED_CGROUP_V1 || mem == ENFORCED_CGROUP_V2 || mem == ENFORCED_SUPERVISOR;
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        bool sized = b && b->tmpfs_sizes && fs[i].ours;
        const char *inodes = "none";
        if (sized && fs[i].inodes && b->tmpfs_inodes)
            inodes = "tmpfs";
        else if (sized && !b->tmpfs_inodes && level_memory)
            inodes = "memory"; /* the level's own memory, which the whole-run limit counts */
        json_object_set_new(enforced, fs[i].size_key, json_string(sized ? "tmpfs" : "none"));
        json_object_set_new(enforced, fs[i].inodes_key, json_string(inodes));
    }
}

json_t *sandbox_skips_to_json(const struct sandbox_skips *skipped)
{
    if (!skipped->n)
        return NULL;
    json_t *a = json_array();
    for (unsigned i = 0; a && i < skipped->n; i++)
        json_array_append_new(a,
                              json_pack("{s:s, s:s}", "level",
                                        cordon_level_name(skipped->skip[i].level), "reason",
                                        skipped->skip[i].why));
    return a;
}

json_t *sandbox_result_to_json(const struct sandbox_result *res, const struct policy *p)
{
    /* "defaults": the limits nobody wrote, which degrade where the host cannot enforce them. */
    /* "degraded": the tree-wide limits held only per process (sandbox_degraded). */
    json_t *enforced = json_object(), *defaults = json_array(), *degraded = json_array();
    unsigned weak = sandbox_degraded(res->enforced);
    for (int l = 0; l < POLICY_LIMIT_COUNT; l++) {
        json_object_set_new(enforced, policy_limit_name((enum policy_limit)l),
                            json_string(enforcement_name(res->enforced[l])));
        if (p->limits.defaulted & (1u << l))
            json_array_append_new(defaults, json_string(policy_limit_name((enum policy_limit)l)));
        if (weak & (1u << l))
            json_array_append_new(degraded, json_string(policy_limit_name((enum policy_limit)l)));
    }

    fs_caps_json(enforced, res, p);
    /* gVisor has no Landlock: what the bundle mounts is the filesystem
     * boundary, and the run's cgroup holds gVisor's own processes too. */
    if (res->level == CORDON_LEVEL_GVISOR) {
        json_object_set_new(enforced, "filesystem", json_string("mounts"));
        json_object_set_new(enforced, "cgroup_holds", json_string("runsc"));
    }

    /* Times are integers: microseconds exact, milliseconds rounded, never a
     * binary fraction printed as 75.126000000000005. */
    /* clang-format off */
    json_t *o = json_pack("{s:s, s:o, s:o, s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:o}",
        "level", cordon_level_name(res->level),
        "exit_code", res->reason == RUN_SETUP_ERROR && res->error.kind != CORDON_E_NOTFOUND &&
                             res->error.kind != CORDON_E_NOEXEC
                         ? json_null()
                         : (res->signaled ? json_null() : json_integer(res->exit_code)),
        "signal", res->signaled ? json_integer(res->signal) : json_null(),
        "reason", run_reason_name(res->reason),
        "status", res->status,
        "wall_ms", (json_int_t)((res->wall_us + 500) / 1000),
        "cpu_ms", (json_int_t)((res->cpu_us + 500) / 1000),
        "wall_us", (json_int_t)res->wall_us,
        "cpu_us", (json_int_t)res->cpu_us,
        "peak_memory_bytes", (json_int_t)res->peak_memory,
        "stdout_bytes", (json_int_t)res->stdout_bytes,
        "stderr_bytes", (json_int_t)res->stderr_bytes,
        "policy_digest", policy_evidence(p)->policy,
        "enforcement", enforced);
    /* clang-format on */
    json_t *recent = json_array();
    const struct egress_summary *e = &res->egress;
    size_t cap = sizeof e->recent / sizeof e->recent[0];
    for (unsigned i = 0; i < e->n_recent; i++) {
        const char *line = e->recent[(e->next + cap - e->n_recent + i) % cap];
        json_t *d = json_parse_strict_str(line, 0, NULL);
        if (d)
            json_array_append_new(recent, d);
    }
    if (o) {
        json_t *eg =
            json_pack("{s:I, s:I, s:I, s:I, s:o}", "allowed", (json_int_t)e->allowed, "refused",
                      (json_int_t)e->refused, "bytes_up", (json_int_t)e->bytes_up, "bytes_down",
                      (json_int_t)e->bytes_down, "recent", recent);
        if (eg && e->error[0])
            json_object_set_new(eg, "error", json_string(e->error));
        json_object_set_new(o, "egress", eg);
    } else
        json_decref(recent);
    if (o) {
        json_object_set_new(o, "defaults", defaults);
        json_object_set_new(o, "degraded", degraded);
    } else {
        json_decref(defaults);
        json_decref(degraded);
    }
    if (o && res->workspace.scanned)
        json_object_set_new(o, "workspace", workspace_report_json(&res->workspace));
    if (o && res->txn.outcome != TXN_NONE)
        json_object_set_new(o, "transaction", txn_summary_json(&res->txn));
    json_t *boundary = res->boundary[0] ? json_parse_strict_str(res->boundary, 0, NULL) : NULL;
    if (o && boundary)
        json_object_set_new(o, "boundary", boundary);
    else
        json_decref(boundary);
    json_t *skips = sandbox_skips_to_json(&res->skipped);
    if (o && skips)
        json_object_set_new(o, "levels_skipped", skips);
    else
        json_decref(skips);
    if (o && res->run_id[0])
        json_object_set_new(o, "run_id", json_string(res->run_id));
    if (o && res->reason == RUN_SETUP_ERROR)
        json_object_set_new(o, "error", json_string(res->error.msg));
    /* Only where the record is incomplete: then status is 125, whatever the command did. */
    if (o && res->audit[0])
        json_object_set_new(o, "audit", json_string(res->audit));
    return o;
}
