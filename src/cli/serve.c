/*
 * cli/serve.c: `cordon serve`, the daemon (daemon/daemon.h): its own
 * options, then run's options for the policy every call runs under.
 */
#include "cli/cli.h"

#include "common/cleanup.h"
#include "common/units.h"
#include "daemon/daemon.h"
#include "policy/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const usage[2] = {
    "usage: cordon serve --socket PATH [--pool N] [--max-running N] [--max-queued N]\n"
    "                    [--max-connections N] [--max-sessions N] [--max-buffered SIZE]\n"
    "                    [--allow-uid UID]... [--admin-uid UID]... [--grace DURATION]\n"
    "                    [OPTIONS]\n"
    "\n"
    "Serve JSON-RPC 2.0 (one object per line) on the unix socket PATH (mode 0600,\n"
    "the --allow-uids and --admin-uids let in by its ACL; peers of our uid, root,\n"
    "an --allow-uid or an --admin-uid only). Methods: run,\n"
    "cancel, policy.check, health, stats, kill_all, session.* (live sessions too:\n"
    "pause, resume, expose), process.* (start, write_stdin, signal, resize, wait,\n"
    "list, attach). Each run gets a fresh sandbox built from OPTIONS, taken from a\n"
    "warm pool of N prepared ones (default 2; 0 starts every run cold). A session is\n"
    "its creator's: any other uid is told it does not exist, unless it is an\n"
    "--admin-uid.\n"
    "\n"
    "      --socket PATH        where to listen (a stale socket is replaced)\n"
    "      --pool N             sandboxes kept prepared (0-64, default 2)\n"
    "      --max-running N      runs at once (default 16), and as many sandboxes of\n"
    "                           process.start and live sessions together\n"
    "      --max-queued N       runs waiting beyond that, then \"busy\" (default 256)\n"
    "      --max-connections N  connections at once (default 4096)\n"
    "      --max-sessions N     sessions at once (default 1024)\n"
    "      --max-buffered SIZE  unfinished messages buffered, every connection's\n"
    "                           together (default 256M, at least 32M); no user holds\n"
    "                           more than half of each of these three\n"
    "      --allow-uid UID      another uid that may connect (repeatable, up to 16)\n"
    "      --admin-uid UID      a uid that may connect and see and act on every\n"
    "                           uid's sessions (repeatable, up to 16)\n"
    "      --grace DURATION     SIGTERM: how long running calls may finish (default 10s)\n"
    "      --state-dir DIR      sessions' workspaces (default PATH.d; made 0711, each\n"
    "                           session's 0700; a previous daemon's emptied at start)\n"
    "      --session-idle DURATION  destroy a session unused this long (default 30m)\n"
    "      --sandboxd-grpc HOST:PORT  serve agent-sandbox's in-pod process API (gRPC\n"
    "                           process.v1.ProcessService) on this loopback address;\n"
    "                           each Start or Execute is a fresh sandbox on the workspace\n"
    "      --sandboxd-rest HOST:PORT  and its REST files, health and metadata (needs\n"
    "                           --workspace DIR); port 0 picks one (method health says)\n",
    "  -h, --help               this help\n"
    "\n"
    "Exit status: 0 after SIGTERM or SIGINT and the drain; 125 if cordon failed.\n",
};

int cli_take_option(int *argc, char **argv, const char *name, const char **value)
{
    size_t nlen = strlen(name);
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return 0;
        const char *v = NULL;
        int used = 0;
        if (strcmp(argv[i], name) == 0) {
            if (i + 1 >= *argc)
                return -cli_usage_error("option '%s' needs a value", name);
            v = argv[i + 1];
            used = 2;
        } else if (strncmp(argv[i], name, nlen) == 0 && argv[i][nlen] == '=') {
            v = argv[i] + nlen + 1;
            used = 1;
        } else {
            continue;
        }
        memmove(argv + i, argv + i + used, (size_t)(*argc - i - used + 1) * sizeof *argv);
        *argc -= used;
        *value = v;
        return 1;
    }
    return 0;
}

int cli_take_count(int *argc, char **argv, const char *name, uint64_t max, unsigned *out)
{
    const char *v = NULL;
    int rc = cli_take_option(argc, argv, name, &v);
    if (rc <= 0)
        return rc;
    uint64_t n = 0;
    char why[128];
    if (parse_count(v, &n, why, sizeof why) < 0 || n > max)
        return -cli_usage_error("%s: expected a number from 0 to %llu, got '%s'", name,
                                (unsigned long long)max, v);
    *out = (unsigned)n;
    return 1;
}

int cli_take_duration(int *argc, char **argv, const char *name, uint64_t max_ms, unsigned *out)
{
    const char *v = NULL;
    int rc = cli_take_option(argc, argv, name, &v);
    if (rc <= 0)
        return rc;
    uint64_t ms = 0;
    char why[128];
    if (parse_duration_ms(v, &ms, why, sizeof why) < 0 || ms == 0 || ms > max_ms)
        return -cli_usage_error("%s: expected a duration like 10s, at most %llus, got '%s'", name,
                                (unsigned long long)(max_ms / 1000), v);
    *out = (unsigned)ms;
    return 1;
}

int cli_server_args(const char *cmd, const char *const help[2], int argc, char **argv,
                    struct run_args *a)
{
    int rc = cli_run_args(cmd, help, argc, argv, false, a);
    if (rc)
        return rc;
    if (a->result_file || a->first < argc) {
        policy_free(a->policy);
        a->policy = NULL;
        if (a->result_file)
            return cli_usage_error("%s: --result is for cordon run; each call's result is in "
                                   "its answer",
                                   cmd);
        return cli_usage_error("%s: unexpected argument '%s'; it takes no command", cmd,
                               argv[a->first]);
    }
    return 0;
}

/* Every NAME UID (repeatable) into LIST, at most DAEMON_MAX_ALLOW; a negative exit on error. */
static int take_uids(int *argc, char **argv, const char *name, uid_t *list, size_t *n)
{
    const char *v = NULL;
    int rc;
    while ((rc = cli_take_option(argc, argv, name, &v)) > 0) {
        uint64_t uid = 0;
        char why[128];
        if (parse_count(v, &uid, why, sizeof why) < 0 || uid >= 0xffffffffu)
            return -cli_usage_error("serve: %s: expected a uid, got '%s'", name, v);
        if (*n == DAEMON_MAX_ALLOW)
            return -cli_usage_error("serve: at most %d %s", DAEMON_MAX_ALLOW, name);
        list[(*n)++] = (uid_t)uid;
    }
    return rc;
}

/*
 * --max-buffered SIZE into CFG: at least two of the largest messages, so
 * that a user's share (half) holds one; a negative exit on error.
 */
static int take_buffered(int *argc, char **argv, struct daemon_config *cfg)
{
    const char *v = NULL;
    int rc = cli_take_option(argc, argv, "--max-buffered", &v);
    if (rc <= 0)
        return rc;
    uint64_t n = 0;
    char why[128];
    if (parse_size(v, &n, why, sizeof why) < 0 || n < 2 * (uint64_t)cfg->max_message ||
        n > (64ull << 30))
        return -cli_usage_error("serve: --max-buffered: expected a size from %zuM to 64G, got '%s'",
                                2 * cfg->max_message >> 20, v);
    cfg->max_buffered = (size_t)n;
    return 1;
}

int cmd_serve(int argc, char **argv)
{
    struct daemon_config cfg = {
        .pool = 2,
        .max_running = 16,
        .max_queued = 256,
        .max_clients = 4096,
        .max_buffered = 256u << 20,
        .max_calls_per_client = 64,
        .max_message = 16u << 20,
        .output_cap = 1u << 20,
        .grace_ms = 10000,
        .session_idle_ms = 30 * 60 * 1000,
        .max_sessions = 1024,
    };
    int rc;
    if ((rc = cli_take_option(&argc, argv, "--socket", &cfg.socket_path)) < 0 ||
        (rc = cli_take_count(&argc, argv, "--pool", 64, &cfg.pool)) < 0 ||
        (rc = cli_take_count(&argc, argv, "--max-running", 1024, &cfg.max_running)) < 0 ||
        (rc = cli_take_count(&argc, argv, "--max-queued", 100000, &cfg.max_queued)) < 0 ||
        (rc = cli_take_count(&argc, argv, "--max-connections", 65536, &cfg.max_clients)) < 0 ||
        (rc = cli_take_count(&argc, argv, "--max-sessions", 65536, &cfg.max_sessions)) < 0 ||
        (rc = take_buffered(&argc, argv, &cfg)) < 0)
        return -rc;
    const char *zero = cfg.max_running == 0 ? "--max-running"
        : cfg.max_clients == 0              ? "--max-connections"
        : cfg.max_sessions == 0             ? "--max-sessions"
                                            : NULL;
    if (zero)
        return cli_usage_error("serve: %s must be at least 1", zero);
    if ((rc = take_uids(&argc, argv, "--allow-uid", cfg.allow_uid, &cfg.n_allow_uid)) < 0 ||
        (rc = take_uids(&argc, argv, "--admin-uid", cfg.admin_uid, &cfg.n_admin_uid)) < 0)
        return -rc;
    if ((rc = cli_take_duration(&argc, argv, "--grace", 3600000, &cfg.grace_ms)) < 0 ||
        (rc = cli_take_duration(&argc, argv, "--session-idle", 7 * 86400000ull,
                                &cfg.session_idle_ms)) < 0 ||
        (rc = cli_take_option(&argc, argv, "--state-dir", &cfg.state_dir)) < 0 ||
        (rc = cli_take_option(&argc, argv, "--sandboxd-grpc", &cfg.sandboxd_grpc)) < 0 ||
        (rc = cli_take_option(&argc, argv, "--sandboxd-rest", &cfg.sandboxd_rest)) < 0)
        return -rc;

    struct run_args a;
    rc = cli_server_args("serve", usage, argc, argv, &a);
    if (rc)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    _cleanup_(policy_freep) struct policy *p = a.policy;
    if (!cfg.socket_path || !*cfg.socket_path)
        return cli_usage_error("serve: missing --socket PATH");
    cfg.policy = p;
    _cleanup_free_ char *state = NULL;
    if (!cfg.state_dir) {
        if (asprintf(&state, "%s.d", cfg.socket_path) < 0)
            return cli_usage_error("out of memory");
        cfg.state_dir = state;
    }
    if (cfg.state_dir[0] != '/')
        return cli_usage_error("serve: the state directory must be an absolute path, got '%s'",
                               cfg.state_dir);
    struct cordon_err err = { 0 };
    if (daemon_serve(&cfg, &err) < 0)
        return cli_fail(&err);
    return 0;
}
