/*
 * cli/main.c: `cordon` entry point: global flags and subcommand dispatch.
 */
#include "cli/cli.h"

#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: cordon COMMAND [ARGS]\n"
    "\n"
    "Run what an AI agent decides to do inside a boundary.\n"
    "\n"
    "commands:\n"
    "  run [OPTIONS] -- CMD [ARG...]   run CMD in a fresh sandbox (see cordon run --help)\n"
    "  check [--json]                 report what this host supports and which levels run\n"
    "  fetch [OPTIONS] URL            fetch a URL under the egress rules (see --help)\n"
    "  mcp wrap [OPTIONS] -- SERVER    run an MCP server sandboxed, behind the tool broker\n"
    "  mcp serve [OPTIONS]            be an MCP server that runs code in sandboxes\n"
    "  serve --socket PATH [OPTIONS]  a JSON-RPC daemon: sandboxed runs from a warm pool\n"
    "  policy check [FILE]            validate a policy (default: the one run would use);\n"
    "                                 print it as JSON with its digest\n"
    "  policy sign|verify|approve FILE --key KEY   signed policies, break-glass approvals\n"
    "  kill --all [--audit FILE]      end every running sandbox, and record it\n"
    "  evidence RUN_ID --audit FILE   the boundary a run had, verifiable offline\n"
    "  audit verify FILE [--key PUB.pem] [--witness FILE]\n"
    "                                 check an audit log's hash chain (and signatures)\n"
    "  oci [GLOBAL] COMMAND ...       the OCI runtime engines call (also as cordon-oci;\n"
    "                                 see cordon oci --help)\n"
    "  audit show FILE [--run ID] [--type T] [--json]\n"
    "                                 the audit log as a timeline of runs\n"
    "\n"
    "  -h, --help                     this help\n"
    "  -V, --version                  print the version\n"
    "\n"
    "Exit status of run: the command's own; 128+N if killed by signal N; 124 on\n"
    "timeout; 125 if cordon failed or refused; 126 not executable; 127 not found;\n"
    "122 if an overlay workspace's change was refused or not applied.\n";

/* A closed 0, 1 or 2 would be handed to the next pipe we open: fill them. */
static void ensure_stdio(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) < 0)
            _exit(EXIT_CORDON_FAILED);
}

char **cli_main_argv;

int main(int argc, char **argv)
{
    cli_main_argv = argv;
    ensure_stdio();
    /* Called as cordon-oci (an engine's OCI runtime), or `cordon oci ...`. */
    const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (!strcmp(base, "cordon-oci"))
        return oci_main(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "oci"))
        return oci_main(argc - 1, argv + 1);
    if (argc < 2)
        return cli_usage_error("missing command; try 'cordon --help'");
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        printf("cordon %s\n", CORDON_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "check"))
        return cmd_check(argc - 1, argv + 1);
    if (!strcmp(cmd, "fetch"))
        return cmd_fetch(argc - 1, argv + 1);
    if (!strcmp(cmd, "mcp"))
        return cmd_mcp(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve"))
        return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "policy"))
        return cmd_policy(argc - 1, argv + 1);
    if (!strcmp(cmd, "audit"))
        return cmd_audit(argc - 1, argv + 1);
    if (!strcmp(cmd, "kill"))
        return cmd_kill(argc - 1, argv + 1);
    if (!strcmp(cmd, "evidence"))
        return cmd_evidence(argc - 1, argv + 1);
    return cli_usage_error("unknown command '%s'; try 'cordon --help'", cmd);
}
