/*
 * cli/cli.h: the subcommands. Only src/cli/ prints to the terminal or picks
 * exit statuses; everything below returns error records.
 */
#pragma once
#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy;

#define EXIT_CORDON_FAILED 125

int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_fetch(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_kill(int argc, char **argv);
int cmd_evidence(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* cordon-oci (src/oci/), a front end of its own beside this one: main() hands it argv. */
int oci_main(int argc, char **argv);

/*
 * Remove option NAME ("--pool", with its value as the next argument or
 * after '=') from ARGV before the "--", for options a subcommand takes
 * besides run's. 1 with *VALUE, 0 when absent, or minus the exit status of
 * a printed refusal.
 */
int cli_take_option(int *argc, char **argv, const char *name, const char **value);

/* cli_take_option() for a count from 0 to MAX. */
int cli_take_count(int *argc, char **argv, const char *name, uint64_t max, unsigned *out);

/* cli_take_option() for a duration (like 10s) from 1 ms to MAX_MS, in ms. */
int cli_take_duration(int *argc, char **argv, const char *name, uint64_t max_ms, unsigned *out);

/* The sandbox options `run`, `mcp wrap` and `mcp serve` share, for their --help. */
extern const char cli_run_options_help[];

struct run_args {
    struct policy *policy;   /* from -p and the flags, finalised; the caller owns it */
    const char *result_file; /* --result, or NULL */
    int first;               /* argv index of the command (argc when there is none) */
    bool quiet;              /* run: --quiet, no notices on stderr */
    bool json;               /* run: --json, the result on stdout after the run */
    bool tty;                /* run: --tty, the command on a terminal of its own */
    struct cordon_err error; /* why the policy or a flag was refused (kind OK otherwise) */
};

/* cli_run_args() printed the --help text: USAGE[0], the shared options, USAGE[1]. */
#define CLI_HELP_SHOWN (-1)

/*
 * Parse `cordon CMD [OPTIONS] [--] [COMMAND...]` into A. MCP allows
 * --allow-tool. Returns 0, CLI_HELP_SHOWN, or the exit status of a
 * refusal whose one-line message is already printed.
 */
int cli_run_args(const char *cmd, const char *const usage[2], int argc, char **argv, bool mcp,
                 struct run_args *a);

/*
 * cli_run_args() for a server, which takes no command and answers each call
 * with its result (so no --result either). 0, CLI_HELP_SHOWN, or an exit status.
 */
int cli_server_args(const char *cmd, const char *const usage[2], int argc, char **argv,
                    struct run_args *a);

/* Print "cordon: MSG" (one line) and return the exit status for ERR. */
int cli_fail(const struct cordon_err *err);

/* The one-line error for getopt's ':' (missing value) or '?' (unknown) in CMD. */
int cli_option_error(const char *cmd, int opt, char **argv);

/* main()'s argv: the whole command line, for a re-run of cordon itself. */
extern char **cli_main_argv;

struct cgroup_set;

/*
 * Before a run that needs a cgroup: an ordinary user whose own cgroup v2 is
 * not writable re-runs this cordon (cli_main_argv) in a delegated systemd
 * user scope when there is a user manager (never returns then); inside that
 * scope, moves into a leaf of it. Otherwise returns and changes nothing.
 */
void cli_scope_enter(const struct policy *p);

/* How this caller gets the cgroups CG lacks, one line for cordon check. */
void cli_delegation_advice(const struct cgroup_set *cg, char *out, size_t len);

/*
 * The policy file used when no -p names one: $CORDON_POLICY (which must
 * exist), ~/.config/cordon/policy.yaml, /etc/cordon/policy.yaml. 1 with
 * PATH and *FROM naming the place; 0 when there is none (built-in defaults);
 * -1 with ERR.
 */
int cli_default_policy(char *path, size_t len, const char **from, struct cordon_err *err);

/* Print "cordon: FMT" and return 125. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
