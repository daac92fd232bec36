/*
 * cli/fail.c: how every subcommand reports a failure: one line on stderr,
 * "cordon: ...", and the exit status it means.
 */
#include "cli/cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>

int cli_fail(const struct cordon_err *err)
{
    fprintf(stderr, "cordon: %s\n", err->msg);
    return err_exit_code(err);
}

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cordon: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_CORDON_FAILED;
}

int cli_option_error(const char *cmd, int opt, char **argv)
{
    if (opt == ':')
        return cli_usage_error("%s: option '%s' needs a value", cmd, argv[optind - 1]);
    if (optopt)
        return cli_usage_error("%s: unknown option '-%c'; try 'cordon %s --help'", cmd, optopt,
                               cmd);
    return cli_usage_error("%s: unknown option '%s'; try 'cordon %s --help'", cmd, argv[optind - 1],
                           cmd);
}
