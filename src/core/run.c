/*
 * core/run.c: cordon_run(): audit record, watchdog and backend for one run.
 * Runs in the supervisor.
 */
#include "core/run.h"

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/text.h"
#include "core/watchdog.h"
#include "sandbox/seccomp.h"

#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* Evidence of the boundary the run had, written before it starts. */
static json_t *start_fields(const struct policy *p, const struct sandbox_call *call)
{
    struct utsname u;
    uname(&u);
    char policy_digest[65], syscalls_digest[65], network_digest[65], tools_digest[65];
    policy_digest_hex(p, policy_digest);
    unsigned char sd[32];
    seccomp_profile_digest(p, sd);
    hex_encode(sd, sizeof sd, syscalls_digest);
    policy_network_digest_hex(p, network_digest);
    policy_tools_digest_hex(p, tools_digest);

    json_t *argv = json_array();
    for (char *const *a = call->argv; *a; a++)
        json_array_append_new(argv, json_string(*a));
    json_t *policy = policy_to_json(p);
    json_t *limits = json_incref(json_object_get(policy, "limits"));
    json_decref(policy);

    /* Names only: values never reach the record. */
    json_t *secrets = json_array();
    for (size_t i = 0; i < p->n_secrets; i++)
        json_array_append_new(secrets, json_string(p->secrets[i].name));

    return json_pack("{s:i, s:s, s:s, s:s, s:o, s:o, s:s, s:s, s:s, s:s, s:o, s:o}",
                     "uid", (int)getuid(),
                     "host", u.nodename,
                     "cordon_version", CORDON_VERSION,
                     "level", cordon_level_name(p->level),
                     "argv", argv,
                     "workspace", p->workspace ? json_string(p->workspace) : json_null(),
                     "policy_digest", policy_digest,
                     "network_digest", network_digest,
                     "tools_digest", tools_digest,
                     "syscalls_digest", syscalls_digest,
                     "secrets", secrets,
                     "limits", limits ? limits : json_null());
}

/* The limit behind a reason, for the limit.fired event; NULL if none fired. */
static const char *fired_limit(enum run_reason r)
{
    switch (r) {
    case RUN_TIMEOUT:
        return "wall";
    case RUN_OOM:
        return "memory";
    case RUN_PIDS_LIMIT:
        return "pids";
    case RUN_OUTPUT_LIMIT:
        return "output";
    case RUN_CPU_LIMIT:
        return "cpu";
    case RUN_FILE_SIZE_LIMIT:
        return "file_size";
    default:
        return NULL;
    }
}

int cordon_audit_open(const struct policy *p, struct audit_log **out, struct cordon_err *err)
{
    *out = NULL;
    if (!p->audit.file)
        return 0;
    struct audit_options o = {
        .path = p->audit.file,
        .sign_key = p->audit.sign_key,
        .checkpoint_every = p->audit.checkpoint_every,
        .fsync = p->audit.fsync == POLICY_AUDIT_FSYNC_ALWAYS ? AUDIT_FSYNC_ALWAYS
                                                             : AUDIT_FSYNC_CLOSE,
    };
    *out = audit_open(&o, err);
    return *out ? 0 : err_prefix(err, "audit");
}

static void record_end(struct audit_log *log, const struct policy *p,
                       const struct sandbox_result *res)
{
    struct cordon_err ignored;
    const char *limit = fired_limit(res->reason);
    if (limit)
        audit_append(log, "limit.fired", res->run_id,
                     json_pack("{s:s, s:s}", "limit", limit, "reason", run_reason_name(res->reason)),
                     &ignored);
    json_t *end = sandbox_result_to_json(res, p);
    json_object_del(end, "run_id"); /* already the event's run */
    audit_append(log, "run.end", res->run_id, end, &ignored);
}

/* A run refused before it started still has a result to report. */
static int refused(struct sandbox_result *res, const struct cordon_err *err)
{
    res->reason = RUN_SETUP_ERROR;
    res->error = *err;
    res->status = err_exit_code(err);
    return -1;
}

int cordon_run(const struct policy *p, const struct sandbox_call *call,
               struct sandbox_result *res, struct cordon_err *err)
{
    memset(res, 0, sizeof *res);
    char run_id[33];
    /* A front end that records events of its own about the run names it first. */
    if (call->run_id && strlen(call->run_id) == 32)
        memcpy(run_id, call->run_id, sizeof run_id);
    else
        audit_new_run_id(run_id);
    memcpy(res->run_id, run_id, sizeof run_id);

    const struct sandbox_backend *backend = sandbox_backend_for(p->level, err);
    if (!backend)
        return refused(res, err);

    _cleanup_(audit_freep) struct audit_log *log = NULL;
    if (cordon_audit_open(p, &log, err) < 0)
        return refused(res, err);
    if (log && audit_append(log, "run.start", run_id, start_fields(p, call), err) < 0) {
        err_prefix(err, "audit");
        return refused(res, err);
    }

    struct watchdog *wd = watchdog_new(log, run_id, err);
    if (!wd)
        return refused(res, err);
    /* Armed up front when it has a record to close, before any descriptor
     * of the run exists for it to inherit; for a cgroup alone, the backend
     * arms it when it has made one. */
    if (log && watchdog_arm(wd, err) < 0) {
        watchdog_release(wd);
        return refused(res, err);
    }

    struct sandbox_call guarded = *call;
    guarded.watchdog = wd;
    guarded.audit = log;
    guarded.run_id = run_id;
    int rc = backend->run(p, &guarded, res, err);
    memcpy(res->run_id, run_id, sizeof run_id); /* the backend starts from a blank result */
    if (rc < 0)
        refused(res, err);
    if (log) {
        record_end(log, p, res);
        struct cordon_err ignored;
        audit_close(log, &ignored);
    }
    watchdog_release(wd);
    return rc;
}
