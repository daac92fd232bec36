/*
 * cli/cli.h: the subcommands. Only src/cli/ prints to the terminal or picks
 * exit statuses; everything below returns error records.
 */
#pragma once
#include "common/err.h"

#define EXIT_CORDON_FAILED 125

int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_fetch(int argc, char **argv);
int cmd_audit(int argc, char **argv);

/* Print "cordon: MSG" (one line) and return the exit status for ERR. */
int cli_fail(const struct cordon_err *err);

/* The one-line error for getopt's ':' (missing value) or '?' (unknown) in CMD. */
int cli_option_error(const char *cmd, int opt, char **argv);

/* Print "cordon: FMT" and return 125. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
