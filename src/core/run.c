/*
 * core/run.c: the one run path under every front end and every level:
 * prepare (everything the policy alone decides, up to a boundary waiting at
 * the start seam), start (the call: argv, environment, stdio), wait
 * (supervision, result, run.end) and release. Runs in the supervisor and
 * changes no process-wide state: signals reach a run only through the
 * signalfd its front end passes in.
 */
#include "core/run.h"
#include "common/json.h"

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/strv.h"
#include "common/text.h"
#include "common/units.h"
#include "core/limits.h"
#include "sandbox/watchdog.h"
#include "egress/decide.h"
#include "egress/gateway.h"
#include "egress/mint.h"
#include "sandbox/cgroup.h"
#include "sandbox/meter.h"
#include "sandbox/names.h"
#include "sandbox/plan.h"
#include "sandbox/seccomp.h"
#include "sandbox/start.h"
#include "sandbox/supervise.h"
#include "sandbox/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/utsname.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Root-started sandboxes run as unprivileged host ids from this range. */
#define HOST_ID_BASE 0x6c000000u

enum run_state { RUN_PREPARED, RUN_STARTED, RUN_WAITED };

struct run {
    const struct policy *p;
    const struct sandbox_backend *backend;
    enum run_state state;
    char run_id[33];
    struct audit_log *log;
    struct watchdog *wd;
    struct cgroup_set cg;
    struct confine_plan confine; /* the core's part: rlimits */
    enum enforcement enforced[POLICY_LIMIT_COUNT];
    struct gateway_config gw;
    /* With no network too (but for an OCI container, whose engine decides):
     * then the gateway allows nothing, answering each lookup and connection
     * at once and saying what was refused (a client would otherwise wait out
     * its own retries, and no one hear which name it wanted). */
    bool gateway;
    pid_t gw_pid;
    int gw_report;
    uid_t host_base;
    struct workspace_guard ws; /* a host workspace's protections and scans */
    struct sandbox_boundary b;
    struct sandbox_call call;    /* the front end's; valid until wait returns */
    int in_w, out_r, errout_r;   /* the supervisor's ends of the command's stdio */
    int tty_w;                   /* the run's terminal (--tty), for its size, or -1 */
    struct policy_limits limits; /* the policy's, with the call's wall clock */
    struct mem_meter meter;      /* the level's memory, where the supervisor holds it */
    uint64_t start_us;
    const struct sandbox_container *container; /* an OCI bundle's (the front end's), or NULL */
    bool keep_cgroup;                          /* a container's: its front end removes it */
    char audit_lost[320];                      /* what of the run's record failed at its start */
    struct sandbox_skips skipped;              /* the policy's levels passed over for this one */
    uint64_t noticed[64]; /* hashes of the refusal lines told (notice_refusal) */
    size_t n_noticed;
    bool noticed_full;
};

/* Evidence of the boundary the run had, written before it starts. */
static json_t *start_fields(const struct policy *p, enum cordon_level level,
                            const struct sandbox_call *call, const char *evidence)
{
    const struct policy_evidence *ev = policy_evidence(p);
    struct utsname u;
    uname(&u);

    json_t *argv = json_array();
    for (char *const *a = call->argv; *a; a++)
        json_array_append_new(argv, json_string(*a));
    json_t *policy = policy_to_json(p);
    json_t *limits = json_incref(json_object_get(policy, "limits"));
    json_t *network = json_incref(json_object_get(policy, "network"));
    json_decref(policy);

    /* Names only: values never reach the record. */
    json_t *secrets = json_array();
    for (size_t i = 0; i < p->n_secrets; i++)
        json_array_append_new(secrets, json_string(p->secrets[i].name));

    /* clang-format off */
    json_t *fields = json_pack("{s:i, s:s, s:s, s:s, s:o, s:o, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o}",
                     "uid", (int)getuid(),
                     "host", u.nodename,
                     "cordon_version", CORDON_VERSION,
                     "level", cordon_level_name(level),
                     "argv", argv,
                     "workspace", p->workspace ? json_string(p->workspace) : json_null(),
                     "policy_digest", ev->policy,
                     "network_digest", ev->network,
                     "tools_digest", ev->tools,
                     "syscalls_digest", ev->syscalls,
                     "secrets", secrets,
                     "limits", limits ? limits : json_null(),
                     "policy_signer", p->signer[0] ? json_string(p->signer) : json_null(),
                     "network", network ? network : json_null());
    /* clang-format on */
    /* What the flags did: the file's own digest beside the effective one, and the flags. */
    if (fields && p->loaded)
        json_object_set_new(fields, "policy_file_digest", json_string(ev->file));
    if (fields && p->flags)
        json_object_set(fields, "policy_flags", p->flags);
    if (fields && call->session_id)
        json_object_set_new(fields, "session", json_string(call->session_id));
    if (fields && call->container_id)
        json_object_set_new(fields, "container", json_string(call->container_id));
    /* Who writes the run's end: verify tells a run going on from one whose end was lost. */
    if (fields)
        json_object_set_new(fields, "writer", audit_writer_stamp());
    if (fields && call->n_files) {
        /* Names and sizes: contents are the call's, like its stdin. */
        json_t *files = json_array();
        for (size_t i = 0; i < call->n_files; i++)
            json_array_append_new(files,
                                  json_pack("{s:s, s:I}", "path", call->files[i].path, "bytes",
                                            (json_int_t)call->files[i].len));
        json_object_set_new(fields, "files", files);
    }
    /* The level's own facts: a microvm's accelerator, snapshot, kernel digest. */
    json_t *boundary = evidence && *evidence ? json_parse_strict_str(evidence, 0, NULL) : NULL;
    if (fields && boundary)
        json_object_set_new(fields, "boundary", boundary);
    else
        json_decref(boundary);
    return fields;
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

static int audit_open_for(const struct policy *p, const char *container, struct audit_log **out,
                          struct cordon_err *err);

int cordon_audit_open(const struct policy *p, struct audit_log **out, struct cordon_err *err)
{
    return audit_open_for(p, NULL, out, err);
}

/* The policy's log, each line of it stamped with CONTAINER (an OCI container's id) if set. */
static int audit_open_for(const struct policy *p, const char *container, struct audit_log **out,
                          struct cordon_err *err)
{
    *out = NULL;
    if (!p->audit.file)
        return 0;
    struct audit_options o = {
        .path = p->audit.file,
        .sign_key = p->audit.sign_key,
        .witness = p->audit.witness,
        .checkpoint_every = p->audit.checkpoint_every,
        .fsync =
            p->audit.fsync == POLICY_AUDIT_FSYNC_ALWAYS ? AUDIT_FSYNC_ALWAYS : AUDIT_FSYNC_CLOSE,
    };
    /* A break-glass run says so in every line it leaves. */
    json_auto_t *stamp = p->break_glass ? json_pack("{s:O}", "break_glass", p->break_glass) : NULL;
    if (container) {
        if (!stamp)
            stamp = json_object();
        json_object_set_new(stamp, "container", json_string(container));
    }
    o.stamp = stamp;
    if (p->gov.export)
        o.export_otlp = p->gov.export_endpoint;
    *out = audit_open(&o, err);
    return *out ? 0 : err_prefix(err, "audit");
}

/*
 * A part of the run's record that audit_append (RC) could not write, or
 * wrote without what follows it: the first is said in RES, whose status
 * becomes 125 (cordon failed to keep its record) while the command's own
 * stays in reason, exit_code and signal.
 */
static void record_lost(struct sandbox_result *res, const char *what, int rc,
                        const struct cordon_err *e)
{
    if (rc == 0)
        return;
    if (!res->audit[0])
        snprintf(res->audit, sizeof res->audit, "%s %s: %s", what,
                 rc < 0 ? "not recorded" : "recorded, but", e->msg);
    res->status = 125;
}

static void record_end(struct audit_log *log, const struct policy *p,
                       const struct sandbox_call *call, struct sandbox_result *res)
{
    struct cordon_err e = { 0 };
    const char *limit = fired_limit(res->reason);
    if (limit)
        record_lost(res, "limit.fired",
                    audit_append(log, "limit.fired", res->run_id,
                                 json_pack("{s:s, s:s}", "limit", limit, "reason",
                                           run_reason_name(res->reason)),
                                 &e),
                    &e);
    json_t *end = sandbox_result_to_json(res, p);
    json_object_del(end, "run_id"); /* already the event's run */
    if (end && call->session_id)
        json_object_set_new(end, "session", json_string(call->session_id));
    record_lost(res, "run.end", audit_append(log, "run.end", res->run_id, end, &e), &e);
    if (p->break_glass)
        record_lost(res, "breakglass.end",
                    audit_append(log, "breakglass.end", res->run_id,
                                 json_pack("{s:s}", "reason", run_reason_name(res->reason)), &e),
                    &e);
    /* Its closing checkpoint now, so that the result can still say it failed. */
    record_lost(res, "the log's closing checkpoint", audit_close(log, &e), &e);
}

/* ---- the environment, decided at start ---- */

static int env_add(char ***envp, size_t *n, const char *name, const char *value)
{
    size_t nlen = strlen(name);
    char *entry = NULL;
    if (asprintf(&entry, "%s=%s", name, value) < 0)
        return -1;
    for (size_t i = 0; i < *n; i++)
        if (strncmp((*envp)[i], name, nlen) == 0 && (*envp)[i][nlen] == '=') {
            free((*envp)[i]);
            (*envp)[i] = entry;
            return 0;
        }
    char **grown = realloc(*envp, (*n + 2) * sizeof *grown);
    if (!grown) {
        free(entry);
        return -1;
    }
    *envp = grown;
    grown[(*n)++] = entry;
    grown[*n] = NULL;
    return 0;
}

DEFINE_CLEANUP(char **, strv_free)

/* The proxy's variables: every spelling clients look for. */
static const char *const proxy_vars[] = { "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                          "http_proxy", "https_proxy", "all_proxy" };
/* Where clients read a CA bundle from; the run's CA alone goes in NODE_EXTRA_CA_CERTS. */
static const char *const bundle_vars[] = { "SSL_CERT_FILE",     "REQUESTS_CA_BUNDLE",
                                           "CURL_CA_BUNDLE",    "GIT_SSL_CAINFO",
                                           "npm_config_cafile", "CARGO_HTTP_CAINFO" };

/*
 * Git refuses a repository owned by another uid ("dubious ownership"), and
 * every bind is one: the host's files, seen by the sandbox user. Git before
 * 2.46 matches safe.directory only as a whole path or "*", and the
 * repositories of a bind lie at any depth beneath it (a clone from
 * /src/repo, a bare repo under a --ro tree): so "*", through git's
 * environment config (GIT_CONFIG_COUNT/KEY_0/VALUE_0), not a file in
 * anyone's HOME. Inside, the only repositories are the binds', the
 * workspace's and the run's own; none of it holds on the host.
 */
static int git_config_add(char ***envp, size_t *n, size_t *k, const char *key, const char *value)
{
    char name[32];
    snprintf(name, sizeof name, "GIT_CONFIG_KEY_%zu", *k);
    int rc = env_add(envp, n, name, key);
    snprintf(name, sizeof name, "GIT_CONFIG_VALUE_%zu", (*k)++);
    return rc | env_add(envp, n, name, value);
}

/*
 * A secret bound to a host serves git there as git asks for a password:
 * a credential helper for https://HOST that answers the placeholder (the
 * gateway swaps it for the value in the Basic credentials git sends), so
 * `git push` to a bound host needs no token in the sandbox.
 */
static int git_credential_helpers(char ***envp, size_t *n, size_t *k,
                                  const struct gateway_config *gw)
{
    int rc = 0;
    for (size_t i = 0; i < gw->n_secrets; i++) {
        const struct gateway_secret *sec = &gw->secrets[i];
        char helper[256];
        snprintf(helper, sizeof helper,
                 "!f() { test \"$1\" = get && printf 'username=%s\\n"
                 "password=%s\\n'; }; f",
                 "x-access-token", sec->placeholder);
        for (size_t h = 0; h < sec->n_hosts; h++) {
            const struct egress_rule *r = &sec->hosts[h];
            char key[320], port[8] = "";
            if (r->port && r->port != 443)
                snprintf(port, sizeof port, ":%u", r->port);
            snprintf(key, sizeof key, "credential.https://%s%s%s.helper",
                     r->kind == EGRESS_RULE_SUFFIX ? "*" : "", r->name, port);
            rc |= git_config_add(envp, n, k, key, helper);
        }
    }
    return rc;
}

static int git_config_env(char ***envp, size_t *n, const struct gateway_config *gw)
{
    size_t k = 0;
    char count[24];
    int rc = git_config_add(envp, n, &k, "safe.directory", "*");
    rc |= git_credential_helpers(envp, n, &k, gw);
    snprintf(count, sizeof count, "%zu", k);
    return rc | env_add(envp, n, "GIT_CONFIG_COUNT", count);
}

/* Empty but for PATH, HOME, LANG, TERM (on a terminal), git's safe
 * directories and credential helpers, and what the policy passes. */
static char **plan_env(const struct run *run, const struct sandbox_call *call)
{
    const struct policy *p = run->p;
    _cleanup_(strv_freep) char **envp = NULL;
    size_t n = 0;
    const char *lang = getenv("LANG");
    int rc = 0;
    rc |= env_add(&envp, &n, "PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin");
    const struct sandbox_boundary *b = &run->b;
    /* A private home: the namespace level's own /tmp/home, the process
     * level's per-run directory (it has no private /tmp). */
    rc |= env_add(&envp, &n, "HOME", b->tmpdir ? b->tmpdir : SANDBOX_HOME);
    if (b->tmpdir)
        rc |= env_add(&envp, &n, "TMPDIR", b->tmpdir);
    rc |= env_add(&envp, &n, "LANG", lang && *lang ? lang : "C.UTF-8");
    const char *term = getenv("TERM");
    if (term && (isatty(call->out_fd) || isatty(call->err_fd)))
        rc |= env_add(&envp, &n, "TERM", term);
    if (run->gateway) {
        /* Every spelling clients look for. Only loopback is exempt: the
         * run's own (a test's local server) where it has one, and where it
         * is the host's (process level) a direct connection is the keeper's
         * to refuse, or to hand to the gateway when the policy allows it. */
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d", GATEWAY_PORT);
        for (size_t i = 0; i < sizeof proxy_vars / sizeof proxy_vars[0]; i++)
            rc |= env_add(&envp, &n, proxy_vars[i], url);
        rc |= env_add(&envp, &n, "NO_PROXY", SANDBOX_NO_PROXY);
        rc |= env_add(&envp, &n, "no_proxy", SANDBOX_NO_PROXY);
    }
    rc |= git_config_env(&envp, &n, &run->gw);
    /* Secrets: the sandbox holds placeholders; the gateway holds the values. */
    for (size_t i = 0; i < run->gw.n_secrets; i++)
        rc |= env_add(&envp, &n, run->gw.secrets[i].name, run->gw.secrets[i].placeholder);
    if (run->gw.mint) {
        /* Trust the run's CA (for the hosts it intercepts: secrets, request
         * rules) besides the usual ones, under every name common clients
         * read; npm's own cafile (Debian's npmrc names the system bundle)
         * would otherwise replace node's trust, NODE_EXTRA_CA_CERTS with it. */
        const char *bundle = b->ca_bundle ? b->ca_bundle : SANDBOX_CA_BUNDLE;
        for (size_t i = 0; i < sizeof bundle_vars / sizeof bundle_vars[0]; i++)
            rc |= env_add(&envp, &n, bundle_vars[i], bundle);
        rc |= env_add(&envp, &n, "NODE_EXTRA_CA_CERTS", b->ca_cert ? b->ca_cert : SANDBOX_CA_CERT);
    }
    for (size_t i = 0; i < p->n_env_pass; i++) {
        const char *v = getenv(p->env_pass[i]);
        if (v)
            rc |= env_add(&envp, &n, p->env_pass[i], v);
    }
    for (size_t i = 0; i < p->n_env_set; i++)
        rc |= env_add(&envp, &n, p->env_set[i].name, p->env_set[i].value);
    return rc ? NULL : TAKE_PTR(envp);
}

/* Is NAME one the run path sets itself (the proxy, the CA, a secret's placeholder)? */
static bool env_reserved(const struct run *run, const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof proxy_vars / sizeof proxy_vars[0]; i++)
        if (strlen(proxy_vars[i]) == len && memcmp(proxy_vars[i], name, len) == 0)
            return run->gateway;
    if (len == 8 && (!memcmp(name, "NO_PROXY", 8) || !memcmp(name, "no_proxy", 8)))
        return run->gateway;
    for (size_t i = 0; i < sizeof bundle_vars / sizeof bundle_vars[0]; i++)
        if (strlen(bundle_vars[i]) == len && memcmp(bundle_vars[i], name, len) == 0)
            return run->gw.mint != NULL;
    if (len == 19 && !memcmp(name, "NODE_EXTRA_CA_CERTS", 19))
        return run->gw.mint != NULL;
    for (size_t i = 0; i < run->gw.n_secrets; i++)
        if (strlen(run->gw.secrets[i].name) == len &&
            memcmp(run->gw.secrets[i].name, name, len) == 0)
            return true;
    return false;
}

/* The call's own entries on top of the policy's; the run's own names stay the run's. */
static int add_call_env(const struct run *run, char ***envp, char *const *extra,
                        struct cordon_err *err)
{
    size_t n = 0;
    while ((*envp)[n])
        n++;
    for (char *const *e = extra; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e)
            return err_set(err, CORDON_E_USAGE, "environment entry '%s' is not NAME=VALUE", *e);
        size_t len = (size_t)(eq - *e);
        if (env_reserved(run, *e, len))
            continue;
        char name[256];
        if (len >= sizeof name)
            return err_set(err, CORDON_E_USAGE, "environment name too long: '%.64s...'", *e);
        memcpy(name, *e, len);
        name[len] = '\0';
        if (env_add(envp, &n, name, eq + 1) < 0)
            return err_set(err, CORDON_E_INTERNAL, "out of memory");
    }
    return 0;
}

/* ---- prepare ---- */

static void wipe_secret_values(void *gw)
{
    gateway_config_wipe_values(gw);
}

static int guard_dir(void *wd, const char *dir, struct cordon_err *err)
{
    return watchdog_guard_dir(wd, dir, err);
}

/* In the gateway's first moments: into the run's cgroup (best effort, as
 * moving it was: its own limits still hold it). */
static void join_cgroup(void *ticket)
{
    (void)cgroup_ticket_use(ticket);
}

static int guard_cgroup(void *wd, const char *dir, struct cordon_err *err)
{
    return watchdog_guard_cgroup(wd, dir, err);
}

static int prepare_limits(struct run *run, uint16_t rnd, const struct cgroup_set *lent,
                          struct cordon_err *err)
{
    const struct policy *p = run->p;
    confine_add_rlimit(&run->confine, RLIMIT_CORE, 0, 0);
    if (run->container && run->container->cgroup) {
        /* An engine reads a container's cgroup (its stats, its OOM events). */
        if (cgroup_create_at(&run->cg, run->container->cgroup, guard_cgroup, run->wd, err) < 0) {
            if (!run->container->cgroup_optional)
                return -1;
            memset(&run->cg, 0, sizeof run->cg);
        }
    } else if (sandbox_needs_cgroup(p) && lent) {
        /* A pool's: its owner guards, resets and removes it; the run only uses it. */
        run->cg = *lent;
    } else if (sandbox_needs_cgroup(p)) {
        char name[64];
        snprintf(name, sizeof name, "cordon-%d-%04x", (int)getpid(), rnd);
        /* Each named to the watchdog before it exists: a kill at any point
         * leaves none. A slot needs none: the run dies with its supervisor. */
        const struct cgroup_slot_use use = { .memory = p->limits.memory };
        TRY(cgroup_create(&run->cg, name, run->backend->ends_with_supervisor ? &use : NULL,
                          guard_cgroup, run->wd, err));
    }
    return limits_plan(p, &run->cg, run->backend, &run->confine, run->enforced, err);
}

struct run_template {
    const struct sandbox_backend *backend;
    struct sandbox_template *t;
};

int run_template_new(const struct policy *p, struct run_template **out, struct cordon_err *err)
{
    *out = NULL;
    struct cordon_err ignored;
    struct sandbox_skips skipped = { 0 };
    const struct sandbox_backend *backend = sandbox_backend_choose(p, &skipped, &ignored);
    if (!backend || !backend->template_build)
        return 0; /* no level (each run says why), or none with templates */
    struct run_template *rt = calloc(1, sizeof *rt);
    if (!rt)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    rt->backend = backend;
    int rc = backend->template_build(p, HOST_ID_BASE, &rt->t, err);
    if (rc < 0 || !rt->t) {
        free(rt);
        return rc;
    }
    *out = rt;
    return 0;
}

size_t run_template_fds(const struct run_template *t, int *out, size_t max)
{
    return t ? t->backend->template_fds(t->t, out, max) : 0;
}

void run_template_free(struct run_template *t)
{
    if (!t)
        return;
    t->backend->template_free(t->t);
    free(t);
}

/* Nothing of RUN held yet: what run_release() looks at says so. */
static void run_init_empty(struct run *run)
{
    run->gw_pid = -1;
    run->gw_report = run->in_w = run->out_r = run->errout_r = run->tty_w = -1;
    run->b = (struct sandbox_boundary){
        .pid = -1, .err_r = -1, .status_r = -1, .start_w = -1, .door = -1, .layer = -1
    };
    run->ws = (struct workspace_guard)WORKSPACE_GUARD_INIT;
    run->meter = (struct mem_meter)MEM_METER_INIT;
}

/*
 * Killed by its own memory limit while it was built: the limit fired, and
 * the run ends as oom (see run_call), not as a failure.
 */
static void tell_oom_while_built(const struct run *run, struct cordon_err *err)
{
    struct cgroup_stats st = { 0 };
    if (cgroup_has(&run->cg, CGROUP_MEMORY))
        cgroup_read_stats(&run->cg, CGROUP_STAT_MEMORY, &st);
    if (st.oom_kills > 0) {
        char v[32];
        format_size(run->p->limits.memory, v, sizeof v);
        err_set(err, CORDON_E_SETUP, "limits.memory: %s is too small for the sandbox to start", v);
        err->errnum = ENOMEM;
    }
}

/*
 * The run of P, prepared up to its start; -1 with ERR, -2 when no level of
 * P can run here. On a failure ENFORCED (when given) gets how each limit was
 * held so far: a run its memory limit ended while it was built has a result.
 */
static int prepare(const struct policy *p, const char *run_id, bool ahead,
                   const struct run_lent *lent, const struct sandbox_container *container,
                   struct run **out, enum enforcement *enforced, struct cordon_err *err)
{
    *out = NULL;
    struct sandbox_skips skipped;
    const struct sandbox_backend *backend = sandbox_backend_choose(p, &skipped, err);
    if (!backend)
        return -2; /* refused: no level of the policy can run here (see run_call) */
    if (container && !backend->containers)
        return err_set(err, CORDON_E_UNSUPPORTED, "the %s level cannot run an OCI bundle",
                       backend->name);
    struct run *run = calloc(1, sizeof *run);
    if (!run)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    run->p = p;
    run->backend = backend;
    run->skipped = skipped;
    run->container = container;
    run_init_empty(run);
    run->gateway = !container || p->network.mode == POLICY_NET_GATEWAY;
    /* A front end that records events of its own about the run names it first. */
    if (run_id && strlen(run_id) == 32)
        memcpy(run->run_id, run_id, sizeof run->run_id);
    else
        audit_new_run_id(run->run_id);
    uint16_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, 0) < 0)
        rnd = (uint16_t)getpid();
    run->host_base = HOST_ID_BASE + ((uid_t)rnd << 2);

    if (audit_open_for(p, container ? container->id : NULL, &run->log, err) < 0 ||
        !(run->wd = watchdog_new(run->log, run->run_id, p, err)))
        goto fail;
    /* A run that fills the log's filesystem must still find room for its end. */
    if (run->log && audit_keep_reserve(run->log, err) < 0) {
        err_prefix(err, "audit");
        goto fail;
    }
    /* Armed up front when it has a record to close or a workspace commit to
     * finish, before any descriptor of the run exists for it to inherit; for
     * a cgroup alone, when one is made (a caller who cannot make one pays
     * for no watchdog). */
    if ((run->log || p->workspace) && watchdog_arm(run->wd, err) < 0)
        goto fail;
    if (prepare_limits(run, rnd, lent ? lent->cg : NULL, err) < 0 ||
        workspace_prepare(p, &run->ws, err) < 0 ||
        (run->gateway && gateway_config_from_policy(p, &run->gw, err) < 0))
        goto fail;
    memcpy(run->gw.run_id, run->run_id, sizeof run->gw.run_id);

    struct sandbox_setup setup = {
        .p = p,
        .cg = &run->cg,
        .confine = &run->confine,
        .ca_pem = run->gw.mint ? mint_ca_pem(run->gw.mint) : NULL,
        .workspace = p->workspace ? &run->ws : NULL,
        .gateway = run->gateway,
        .in_child = wipe_secret_values,
        .in_child_arg = &run->gw,
        .guard_dir = guard_dir,
        .guard_arg = run->wd,
        .host_base = run->host_base,
        .ahead = ahead,
        .tmpl = lent && lent->tmpl && lent->tmpl->backend == backend ? lent->tmpl->t : NULL,
        .meter = run->enforced[POLICY_LIMIT_MEMORY] == ENFORCED_SUPERVISOR ? &run->meter : NULL,
        .container = container,
    };
    if (backend->prepare(&setup, &run->b, err) < 0) {
        tell_oom_while_built(run, err);
        goto fail;
    }
    run->keep_cgroup = container != NULL;
    *out = run;
    return 0;
fail:
    if (enforced)
        memcpy(enforced, run->enforced, sizeof run->enforced);
    run_release(run);
    return -1;
}

int run_prepare(const struct policy *p, const char *run_id, struct run **out,
                struct cordon_err *err)
{
    return prepare(p, run_id, false, NULL, NULL, out, NULL, err) < 0 ? -1 : 0;
}

int run_prepare_ahead(const struct policy *p, const struct run_lent *lent, struct run **out,
                      struct cordon_err *err)
{
    return prepare(p, NULL, true, lent, NULL, out, NULL, err) < 0 ? -1 : 0;
}

int run_prepare_container(const struct policy *p, const char *run_id,
                          const struct sandbox_container *c, struct run **out,
                          struct cordon_err *err)
{
    return prepare(p, run_id, false, NULL, c, out, NULL, err) < 0 ? -1 : 0;
}

pid_t run_boundary_pid(const struct run *run)
{
    return run->b.pid;
}

int run_take_terminal(struct run *run)
{
    if (!run->container)
        return -1;
    int fd = run->b.tty_master;
    run->b.tty_master = -1;
    return fd;
}

/* ---- start ---- */

/* Limits this run holds only per process, said once the command runs (a
 * command that never starts has its one line of error alone). */
static void notice_degraded(void *arg)
{
    const struct run *run = arg;
    const struct sandbox_call *call = &run->call;
    unsigned weak = sandbox_degraded(run->enforced);
    if (!weak)
        return;
    char line[256], *end = line + sizeof line, *at = line;
    const char *sep = "limits ";
    for (int l = 0; l < POLICY_LIMIT_COUNT && at < end; l++)
        if (weak & (1u << l)) {
            at += snprintf(at, (size_t)(end - at), "%s%s", sep, policy_limit_name(l));
            sep = ", ";
        }
    if (at < end)
        snprintf(at, (size_t)(end - at),
                 " hold per process only (rlimits): no cgroup for this "
                 "run; cordon check says how to get one");
    call->notice(call->notice_arg, line);
}

/* A level of the policy's list that could not run here, said as the run at a later one starts. */
static void notice_skipped(const struct run *run)
{
    const struct sandbox_call *call = &run->call;
    for (unsigned i = 0; call->notice && i < run->skipped.n; i++) {
        char line[400];
        snprintf(line, sizeof line, "level %s skipped: %s; running at %s",
                 cordon_level_name(run->skipped.skip[i].level), run->skipped.skip[i].why,
                 cordon_level_name(run->backend->level));
        call->notice(call->notice_arg, line);
    }
}

static void close_pipes(int in[2], int out[2], int errout[2])
{
    int fds[] = { in[0], in[1], out[0], out[1], errout[0], errout[1] };
    for (size_t i = 0; i < 6; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/*
 * The record's first lines. The watchdog learns of the run before them:
 * should we die anywhere from here on, it closes the record, once, if
 * there is one to close (audit_append_once from where it began).
 */
static int record_start(struct run *run, const struct sandbox_call *call, struct cordon_err *err)
{
    TRY(watchdog_started(run->wd, run->run_id, audit_size(run->log), err));
    if (run->p->break_glass &&
        audit_append(run->log, "breakglass.start", run->run_id, NULL, err) < 0)
        return err_prefix(err, "audit");
    json_t *fields = start_fields(run->p, run->backend->level, call, run->b.evidence);
    json_t *skips = sandbox_skips_to_json(&run->skipped);
    if (fields && skips)
        json_object_set(fields, "levels_skipped", skips);
    json_decref(skips);
    int rc = audit_append(run->log, "run.start", run->run_id, fields, err);
    if (rc < 0)
        return err_prefix(err, "audit");
    if (rc > 0)
        snprintf(run->audit_lost, sizeof run->audit_lost, "run.start recorded, but %s", err->msg);
    return 0;
}

int run_start(struct run *run, const struct sandbox_call *call, struct cordon_err *err)
{
    if (run->state != RUN_PREPARED)
        return err_set(err, CORDON_E_USAGE, "run %s was started already", run->run_id);
    if (!call->argv || !call->argv[0])
        return err_set(err, CORDON_E_USAGE, "no command to run");
    /*
     * What the level cannot give the call is refused, never dropped (the
     * process level would need the host's devpts, gVisor's runsc a host pty,
     * the microvm guest's agent gives a call none).
     */
    if (call->tty && !run->backend->tty)
        return err_set(err, CORDON_E_UNSUPPORTED, "%s: --tty is not supported at this level",
                       run->backend->name);
    /* A host workspace's protected names are the call's files' to keep out of, as the command's. */
    for (size_t i = 0; names_mode_for(run->p, NAMES_CHECK) != NAMES_OFF && i < call->n_files; i++)
        if (names_refused_path(run->p, call->files[i].path))
            return err_set(err, CORDON_E_USAGE,
                           "files: '%s' would make a protected name in the workspace",
                           call->files[i].path);
    /*
     * As the command could not write it: the same answer at every level,
     * whoever places the files and under whichever rlimit.
     */
    for (size_t i = 0; run->p->limits.file_size && i < call->n_files; i++)
        if (call->files[i].len > run->p->limits.file_size)
            return err_set(err, CORDON_E_USAGE,
                           "files: '%.100s' is %zu bytes, over limits.file_size (%llu)",
                           call->files[i].path, call->files[i].len,
                           (unsigned long long)run->p->limits.file_size);
    _cleanup_(strv_freep) char **envp = plan_env(run, call);
    if (!envp)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    if (add_call_env(run, &envp, call->envp, err) < 0)
        return -1;
    /* A pooled run was prepared before its call had a name: it takes the call's. */
    if (call->run_id && strlen(call->run_id) == 32)
        memcpy(run->run_id, call->run_id, sizeof run->run_id);
    run->call = *call;
    run->limits = run->p->limits;
    if (call->wall_ms && (!run->limits.wall_ms || call->wall_ms < run->limits.wall_ms))
        run->limits.wall_ms = call->wall_ms;
    if (call->direct_stdio) {
        /* A container's stdio is its engine's: handed to the command as it is. */
        if (run->log && record_start(run, call, err) < 0)
            return -1;
        int stdio[3] = { call->in_fd, call->out_fd, call->err_fd };
        run->state = RUN_STARTED;
        run->start_us = monotonic_us();
        int rc = start_message_send(run->b.start_w, call->argv, envp, stdio, call->files,
                                    call->n_files, false, err);
        closep(&run->b.start_w);
        run->b.start_w = -1;
        return rc < 0 && run->b.err_r < 0 ? -1 : 0;
    }
    /* Made before the record begins: once run.start is written, only the start may fail. */
    int in[2] = { -1, -1 }, out[2] = { -1, -1 }, errout[2] = { -1, -1 };
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(errout, O_CLOEXEC) < 0) {
        close_pipes(in, out, errout);
        return err_sys(err, CORDON_E_SETUP, "cannot create pipes");
    }
    /*
     * A pipe is its maker's, mode 0600: the command, another uid for a root
     * caller, could not open /dev/stdout (its /proc/self/fd/1) again. Only a
     * process that may ptrace a holder of the pipe reaches it by that path.
     */
    (void)fchmod(in[0], 0666);
    (void)fchmod(out[1], 0666);
    (void)fchmod(errout[1], 0666);
    if (run->log && record_start(run, call, err) < 0) {
        close_pipes(in, out, errout);
        return -1;
    }
    notice_skipped(run);
    int stdio[3] = { in[0], out[1], errout[1] };
    run->state = RUN_STARTED;
    run->start_us = monotonic_us();
    int rc = start_message_send(run->b.start_w, call->argv, envp, stdio, call->files, call->n_files,
                                call->tty, err);
    for (int i = 0; i < 3; i++)
        close(stdio[i]);
    run->in_w = in[1];
    run->out_r = out[0];
    run->errout_r = errout[0];
    if (rc == 0 && call->tty) {
        /* The terminal is the sandbox's own: its master carries the command's
         * input and output both, and its size; the pipes go unused. */
        int master = start_terminal_recv(run->b.start_w);
        closep(&run->in_w);
        closep(&run->out_r);
        run->in_w = run->out_r = -1;
        if (master >= 0) {
            run->out_r = master;
            run->in_w = fcntl(master, F_DUPFD_CLOEXEC, 3);
            run->tty_w = fcntl(master, F_DUPFD_CLOEXEC, 3);
        }
    }
    closep(&run->b.start_w);
    run->b.start_w = -1;
    /* A boundary that died at the seam says why through its error records. */
    return rc < 0 && run->b.err_r < 0 ? -1 : 0;
}

/* ---- wait ---- */

/* A refusal the gateway reports, told to whoever watches the run as it
 * happens: once per line (a name's lookup and its connection say the same),
 * so a client retrying for a minute is one line, not a screenful. */
static void notice_refusal(void *arg, const json_t *d)
{
    struct run *run = arg;
    const struct sandbox_call *call = &run->call;
    if (json_is_true(json_object_get(d, "allowed")))
        return;
    const char *method = json_string_value(json_object_get(d, "method"));
    const char *host = json_string_value(json_object_get(d, "host"));
    const char *rule = json_string_value(json_object_get(d, "rule"));
    char line[600];
    decide_notice(method ? method : "-", host ? host : "",
                  (unsigned)json_integer_value(json_object_get(d, "port")), rule ? rule : "",
                  (int)json_integer_value(json_object_get(d, "status")),
                  run->p->network.mode == POLICY_NET_NONE, line, sizeof line);
    uint64_t h = text_hash64(line);
    for (size_t i = 0; i < run->n_noticed; i++)
        if (run->noticed[i] == h)
            return;
    if (run->n_noticed == sizeof run->noticed / sizeof run->noticed[0]) {
        if (!run->noticed_full)
            call->notice(call->notice_arg,
                         "egress: further refusals are not told here (the "
                         "audit log and the result have them)");
        run->noticed_full = true;
        return;
    }
    run->noticed[run->n_noticed++] = h;
    call->notice(call->notice_arg, line);
}

/* One notice line per refusal of what git would have run (gitscan.h). */
static void tell_git(const struct run *run, const struct gitscan_notes *git)
{
    char line[sizeof git->line[0] + 64];
    for (unsigned i = 0; run->call.notice && i < git->n; i++) {
        snprintf(line, sizeof line, "workspace: git: %s", git->line[i]);
        text_escape_controls(line, sizeof line);
        run->call.notice(run->call.notice_arg, line);
    }
    if (run->call.notice && git->total > git->n) {
        snprintf(line, sizeof line, "workspace: git: %u more refused (--result has the count)",
                 git->total - git->n);
        run->call.notice(run->call.notice_arg, line);
    }
}

/*
 * The egress gateway, forked only when the sandbox first reaches one of its
 * doors (a connection waiting at a listener, a DNS datagram): a run that
 * never reaches out pays for no gateway (its fork, start and exit were a
 * tenth of a cold run's CPU). The boundary made the doors listening at
 * prepare, so nothing the run sends is lost meanwhile, and what reached them
 * as the run ended is still answered and reported (supervise()).
 */
static int start_gateway(struct run *run, struct cordon_err *err)
{
    /* What the gateway buffers and spends on the run's behalf is the
     * run's: its memory, pids and CPU count against the run's limits.
     * It joins the run's cgroup itself, as the boundary does (moving it
     * from here would wait out an RCU grace period). */
    bool join = run->cg.version && !run->container;
    struct cgroup_ticket ticket = CGROUP_TICKET_INIT;
    if (join && cgroup_ticket_open(&run->cg, &ticket, err) < 0)
        return -1;
    _Static_assert(sizeof run->b.door_token == sizeof run->gw.door_token, "door token");
    run->gw.door_token_set = run->b.door_token_set;
    memcpy(run->gw.door_token, run->b.door_token, sizeof run->gw.door_token);
    struct gateway_doors doors = { .proxy = run->b.door,
                                   .dns = -1,
                                   .relay = run->b.relay_transparent };
    if (run->b.n_extra_doors) {
        doors.dns = run->b.extra_doors[0];
        for (size_t i = 1; i < run->b.n_extra_doors && i <= SYNTH_MAX_PORTS; i++)
            doors.ports[doors.n_ports++] = run->b.extra_doors[i];
    }
    /* A container's cgroup holds its egress lock: the gateway stays out of it. */
    run->gw_pid = gateway_start(&run->gw, &doors, run->host_base + 2, join ? join_cgroup : NULL,
                                &ticket, &run->gw_report, err);
    cgroup_ticket_close(&ticket);
    closep(&run->b.door);
    run->b.door = -1;
    for (size_t i = 0; i < run->b.n_extra_doors; i++)
        closep(&run->b.extra_doors[i]);
    run->b.n_extra_doors = 0;
    return run->gw_pid < 0 ? -1 : 0;
}

/* supervise()'s wake: the gateway started, its report pipe handed over (or -1 with ERR). */
static int wake_gateway(void *arg, struct cordon_err *err)
{
    struct run *run = arg;
    if (start_gateway(run, err) < 0) {
        /* Its doors are closed: what waits there is refused, not left hanging. */
        if (run->call.notice)
            run->call.notice(run->call.notice_arg, err->msg);
        return -1;
    }
    return TAKE_FD(run->gw_report);
}

int run_wait(struct run *run, struct sandbox_result *res, struct cordon_err *err)
{
    memset(res, 0, sizeof *res);
    memcpy(res->run_id, run->run_id, sizeof res->run_id);
    memcpy(res->enforced, run->enforced, sizeof res->enforced);
    res->level = run->backend->level;
    res->skipped = run->skipped;
    memcpy(res->boundary, run->b.evidence, sizeof res->boundary);
    if (run->state != RUN_STARTED)
        return err_set(err, CORDON_E_USAGE, "run %s is not running", run->run_id);
    run->state = RUN_WAITED;
    const struct policy *p = run->p;
    int doors[SUPERVISE_MAX_DOORS];
    size_t n_doors = 0;
    if (run->b.door >= 0) {
        doors[n_doors++] = run->b.door;
        for (size_t i = 0; i < run->b.n_extra_doors && n_doors < SUPERVISE_MAX_DOORS; i++)
            doors[n_doors++] = run->b.extra_doors[i];
    }
    struct supervision sv = {
        .init_pid = run->b.pid,
        .err_r = run->b.err_r,
        .status_r = run->b.status_r,
        .out_r = run->out_r,
        .errout_r = run->errout_r,
        .in_w = run->in_w,
        .tty_w = run->tty_w,
        .sig_fd = run->call.sig_fd,
        .report_r = -1, /* the gateway's, once woken */
        .doors = doors,
        .n_doors = n_doors,
        .wake = wake_gateway,
        .wake_arg = run,
        .audit = run->log,
        .decided = run->call.notice ? notice_refusal : NULL,
        .decided_arg = run,
        .started = run->call.notice ? notice_degraded : NULL,
        .started_arg = run,
        .run_id = run->run_id,
        .call = &run->call,
        .limits = &run->limits,
        .cg = &run->cg,
        .poll_cpu = cgroup_has(&run->cg, CGROUP_CPU) && p->limits.cpu_ms,
        .poll_pids = cgroup_has(&run->cg, CGROUP_PIDS) && p->limits.pids,
        .meter = run->meter.file >= 0 ? &run->meter : NULL,
        .poll_tree_cpu = run->enforced[POLICY_LIMIT_CPU] == ENFORCED_SUPERVISOR,
        .start_us = run->start_us,
    };
    /* supervise() owns and closes these now, and reaps the boundary, unless
     * it answered before the boundary's exit: then release reaps it. */
    run->b.err_r = run->b.status_r = run->out_r = run->errout_r = run->in_w = run->tty_w = -1;
    supervise(&sv, res);
    if (sv.init_reaped)
        run->b.pid = -1;
    res->level = run->backend->level;
    /* Init has exited, and with it every process of the PID namespace:
     * the layer is still, and what commit writes the scan below examines. */
    if (run->b.layer >= 0) {
        bool ok = res->reason == RUN_EXITED && !res->signaled && res->exit_code == 0;
        /* Should we die mid-commit, the watchdog finishes or undoes it (else the next
         * run on the workspace, or cordon check -w, does). */
        struct cordon_err unguarded;
        if (p->workspace_commit != POLICY_WS_COMMIT_MANUAL)
            watchdog_guard_txn(run->wd, p->workspace, p->workspace_follow_symlinks, &unguarded);
        if (run->call.parent > 0 && getppid() != run->call.parent) {
            /* Its front end is gone (we were reparented): nobody will hear of the
             * change, and a restarted daemon removes the session it was for. */
            res->txn.outcome = TXN_DISCARDED;
            snprintf(res->txn.reason, sizeof res->txn.reason,
                     "the front end that asked for the run is gone");
        } else {
            txn_finish(run->b.layer, run->ws.fd, p, p->workspace_commit, ok, &res->txn);
            tell_git(run, &res->txn.git);
        }
        if (res->txn.outcome == TXN_PENDING && run->call.keep_layer)
            *run->call.keep_layer = TAKE_FD(run->b.layer);
        /* A caller that checks the status must not believe the change landed. */
        if (res->txn.outcome == TXN_REFUSED || res->txn.outcome == TXN_FAILED)
            res->status = TXN_EXIT_NOT_COMMITTED;
        if (run->call.notice && res->txn.outcome != TXN_COMMITTED &&
            res->txn.outcome != TXN_PENDING) {
            char line[320];
            snprintf(line, sizeof line, "workspace: the run's change %s: %s",
                     res->txn.outcome == TXN_FAILED        ? "could not be applied"
                         : res->txn.outcome == TXN_REFUSED ? "was refused"
                                                           : "was discarded",
                     res->txn.reason);
            run->call.notice(run->call.notice_arg, line);
        }
    }
    workspace_finish(p, &run->ws, &res->workspace); /* run.end carries it to the audit log */
    tell_git(run, &res->workspace.git);
    if (run->gw_pid > 0) {
        /* The gateway reports the connections the run left open, then exits. */
        kill(run->gw_pid, SIGTERM);
        supervise_drain_reports(&sv, res, 2000);
        kill(run->gw_pid, SIGKILL);
        waitpid(run->gw_pid, NULL, 0);
        run->gw_pid = -1;
    }
    run->gw_report = -1; /* closed by the drain, or by supervise() */
    memcpy(res->run_id, run->run_id, sizeof res->run_id);
    if (run->audit_lost[0]) {
        snprintf(res->audit, sizeof res->audit, "%s", run->audit_lost);
        res->status = 125;
    }
    if (run->log)
        record_end(run->log, p, &run->call, res);
    return 0;
}

/* ---- release ---- */

void run_release(struct run *run)
{
    if (!run)
        return;
    if (run->backend)
        run->backend->release(&run->b);
    mem_meter_close(&run->meter);
    if (run->gw_pid > 0) {
        kill(run->gw_pid, SIGKILL);
        waitpid(run->gw_pid, NULL, 0);
    }
    int *fds[] = { &run->gw_report, &run->in_w, &run->out_r, &run->errout_r, &run->tty_w };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        closep(fds[i]);
    workspace_guard_release(&run->ws);
    if (run->cg.version && !run->keep_cgroup && !run->cg.pooled)
        cgroup_destroy(&run->cg);
    gateway_config_release(&run->gw);
    if (run->log) {
        struct cordon_err ignored;
        audit_close(run->log, &ignored);
        audit_free(run->log);
    }
    watchdog_release(run->wd);
    free(run);
}

const struct policy *run_policy(const struct run *run)
{
    return run->p;
}

const char *run_get_id(const struct run *run)
{
    return run->run_id;
}

/* ---- the four in a row ---- */

/* A run refused before it started still has a result, and a record when audited. */
static int refused(const struct policy *p, const struct sandbox_call *call, const char *run_id,
                   bool no_level, const enum enforcement *enforced, struct sandbox_result *res,
                   const struct cordon_err *err)
{
    memset(res, 0, sizeof *res);
    if (enforced) /* what held the limits while it was built: its memory limit's cgroup */
        memcpy(res->enforced, enforced, sizeof res->enforced);
    memcpy(res->run_id, run_id, 33);
    res->level = p->level;
    res->reason = RUN_SETUP_ERROR;
    res->error = *err;
    res->status = err_exit_code(err);
    if (err->kind == CORDON_E_SETUP && err->errnum == ENOMEM) {
        /* run_prepare(): the memory limit's OOM killer ended the run. */
        res->reason = RUN_OOM;
        res->signaled = true;
        res->signal = SIGKILL;
        res->status = 128 + SIGKILL;
    }
    /* Refused before anything of it existed: an attempt, not a run that failed. */
    if (no_level) {
        run_record_refused(p, true, NULL, run_id, call->argv, "run", err);
        return -1;
    }
    struct audit_log *log = NULL;
    struct cordon_err ignored;
    if (cordon_audit_open(p, &log, &ignored) == 0 && log) {
        if (p->break_glass)
            audit_append(log, "breakglass.start", run_id, NULL, &ignored);
        if (audit_append(log, "run.start", run_id, start_fields(p, p->level, call, NULL),
                         &ignored) >= 0)
            record_end(log, p, call, res);
        audit_close(log, &ignored);
        audit_free(log);
    }
    return -1;
}

int run_call(struct run *run, const struct policy *p, const struct sandbox_call *call,
             struct sandbox_result *res, struct cordon_err *err)
{
    char run_id[33];
    if (call->run_id && strlen(call->run_id) == 32)
        memcpy(run_id, call->run_id, sizeof run_id);
    else if (run)
        memcpy(run_id, run->run_id, sizeof run_id);
    else
        audit_new_run_id(run_id);
    enum enforcement enforced[POLICY_LIMIT_COUNT] = { 0 };
    int prepared = run ? 0 : prepare(p, run_id, false, NULL, NULL, &run, enforced, err);
    if (prepared < 0) {
        refused(p, call, run_id, prepared == -2, prepared == -2 ? NULL : enforced, res, err);
        if (call->answer)
            call->answer(call->answer_arg, res);
        return res->reason == RUN_OOM ? 0 : -1; /* a limit fired: the run happened */
    }
    struct sandbox_call named = *call;
    named.run_id = run_id;
    int rc = run_start(run, &named, err);
    if (rc == 0 || run->state == RUN_STARTED)
        rc = run_wait(run, res, err);
    else
        refused(p, call, run_id, false, run->enforced, res, err);
    if (call->answer)
        call->answer(call->answer_arg, res);
    run_release(run);
    return rc;
}

int run_once(const struct policy *p, const struct sandbox_call *call, struct sandbox_result *res,
             struct cordon_err *err)
{
    return run_call(NULL, p, call, res, err);
}
