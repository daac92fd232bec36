/*
 * cli/mcp.c: `cordon mcp wrap` (a third-party MCP server, sandboxed and
 * brokered) and `cordon mcp serve` (cordon as an MCP server that runs
 * commands and code in per-call sandboxes). Both take run's options.
 */
#include "cli/cli.h"

#include "broker/broker.h"
#include "broker/pins.h"
#include "broker/serve.h"
#include "policy/policy.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: cordon mcp wrap [OPTIONS] -- SERVER-COMMAND [ARG...]\n"
    "       cordon mcp serve [OPTIONS]\n"
    "       cordon mcp pins approve (--pins FILE | -p POLICY) [--server ID] [TOOL...]\n"
    "\n"
    "  wrap   run an MCP server (stdio) in a sandbox and broker every message between\n"
    "         it and the client on our stdin/stdout: only the policy's tools.allow are\n"
    "         listed and callable, and each call's arguments are checked against the\n"
    "         tool's inputSchema and the policy's tools.rules first\n"
    "  serve  be an MCP server (stdio) whose tools run_command and run_code run each\n"
    "         call in a fresh sandbox under the policy\n"
    "\n"
    "See 'cordon mcp wrap --help' and 'cordon mcp serve --help' for the options.\n";

static const char *const wrap_usage[2] = {
    "usage: cordon mcp wrap [OPTIONS] -- SERVER-COMMAND [ARG...]\n"
    "\n"
    "Run SERVER-COMMAND, an MCP server speaking stdio, in a sandbox, and broker MCP\n"
    "between it and the client on stdin/stdout under the policy's tools section.\n"
    "\n"
    "      --allow-tool NAME    forward tool NAME (repeatable; adds to tools.allow)\n",
    "  -h, --help               this help\n"
    "\n"
    "Exit status: 0 when the session ended; the server's when it failed; 125 if\n"
    "cordon failed or refused.\n",
};

static const char *const serve_usage[2] = {
    "usage: cordon mcp serve [OPTIONS]\n"
    "\n"
    "Serve MCP on stdin/stdout with the tools run_command and run_code; each call\n"
    "runs in a fresh sandbox built from these options.\n"
    "\n"
    "      --pool N             sandboxes kept prepared for the calls (0-64, default 0)\n",
    "  -h, --help               this help\n"
    "\n"
    "Exit status: 0 when the client ended the session; 125 if cordon failed.\n",
};

static int wrap(int argc, char **argv)
{
    struct run_args a;
    int rc = cli_run_args("mcp wrap", wrap_usage, argc, argv, true, &a);
    if (rc && a.error.kind != CORDON_E_OK)
        mcp_refuse_session(a.error.msg); /* the client learns why, not only our stderr */
    if (rc)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    _cleanup_(policy_freep) struct policy *p = a.policy;
    if (a.result_file)
        return cli_usage_error("mcp wrap: --result is for cordon run; the session's end is in "
                               "the audit log (mcp.session.end)");
    if (a.first >= argc)
        return cli_usage_error("mcp wrap: missing server command: "
                               "cordon mcp wrap [OPTIONS] -- SERVER-COMMAND [ARG...]");
    /*
     * The server lives for the whole session, not for one tool call: the
     * per-run defaults of wall, CPU and output would end a session midway.
     * tools.call_timeout and max_result_bytes bound each call instead;
     * what the policy or a flag sets still applies to the session.
     */
    struct policy_limits *lim = &p->limits;
    if (lim->defaulted & (1u << POLICY_LIMIT_WALL))
        lim->wall_ms = 0;
    if (lim->defaulted & (1u << POLICY_LIMIT_CPU))
        lim->cpu_ms = 0;
    if (lim->defaulted & (1u << POLICY_LIMIT_OUTPUT))
        lim->output = 0;
    if (p->tools.n_allow == 0)
        fprintf(stderr,
                "cordon: mcp wrap: tools.allow is empty, so the client will see no "
                "tools; allow some with --allow-tool or the policy\n");
    struct cordon_err err = { 0 };
    int status = 0;
    if (mcp_wrap(p, argv + a.first, &status, &err) < 0) {
        mcp_refuse_session(err.msg);
        return cli_fail(&err);
    }
    return status;
}

static int serve(int argc, char **argv)
{
    unsigned pool = 0;
    int rc = cli_take_count(&argc, argv, "--pool", 64, &pool);
    if (rc < 0)
        return -rc;
    struct run_args a;
    rc = cli_server_args("mcp serve", serve_usage, argc, argv, &a);
    if (rc)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    _cleanup_(policy_freep) struct policy *p = a.policy;
    cli_scope_enter(p);
    struct cordon_err err = { 0 };
    if (mcp_serve(p, pool, &err) < 0) {
        mcp_refuse_session(err.msg);
        return cli_fail(&err);
    }
    return 0;
}

/* mcp pins approve (--pins FILE | -p POLICY) [--server ID] [TOOL...] */
static int pins(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "approve") != 0)
        return cli_usage_error("mcp pins: expected approve (--pins FILE | -p POLICY) "
                               "[--server ID] [TOOL...]");
    const char *file = NULL, *policy = NULL, *server = NULL;
    _cleanup_free_ char **names = calloc((size_t)argc, sizeof *names);
    size_t n = 0;
    if (!names)
        return cli_usage_error("out of memory");
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--pins") && i + 1 < argc)
            file = argv[++i];
        else if ((!strcmp(argv[i], "-p") || !strcmp(argv[i], "--policy")) && i + 1 < argc)
            policy = argv[++i];
        else if (!strcmp(argv[i], "--server") && i + 1 < argc)
            server = argv[++i];
        else if (argv[i][0] == '-')
            return cli_usage_error("mcp pins approve: unknown option '%s'", argv[i]);
        else
            names[n++] = argv[i];
    }
    struct cordon_err err = { 0 };
    _cleanup_(policy_freep) struct policy *p = NULL;
    if (!file && policy) {
        if (!(p = policy_load(policy, &err)))
            return cli_fail(&err);
        if (!p->tools.pins)
            return cli_usage_error("mcp pins approve: '%s' names no tools.pins file", policy);
        file = p->tools.pins;
    }
    if (!file)
        return cli_usage_error("mcp pins approve: which pins? --pins FILE or -p POLICY");
    size_t approved = 0;
    if (mcp_pins_approve(file, server, names, n, &approved, &err) < 0)
        return cli_fail(&err);
    printf("approved %zu tool%s\n", approved, approved == 1 ? "" : "s");
    return 0;
}

int cmd_mcp(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("mcp: missing subcommand: wrap or serve; try 'cordon mcp --help'");
    const char *sub = argv[1];
    if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(sub, "wrap"))
        return wrap(argc - 1, argv + 1);
    if (!strcmp(sub, "serve"))
        return serve(argc - 1, argv + 1);
    if (!strcmp(sub, "pins"))
        return pins(argc - 1, argv + 1);
    return cli_usage_error("mcp: unknown subcommand '%s'; expected wrap or serve", sub);
}
