/*
 * cli/audit_cmd.c: `cordon audit verify` and `cordon audit show`: argv in,
 * the verdict or the timeline out, exit 0 / 1 (log not intact) / 125.
 */
#include "audit/audit.h"
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: cordon audit verify FILE [--key PUB.pem] [--witness WITNESS]\n"
    "       cordon audit show FILE [--run ID] [--type T] [--json]\n"
    "\n"
    "verify  check the hash chain of the audit log FILE line by line; with --key,\n"
    "        also that its checkpoints are signed by that Ed25519 public key and\n"
    "        that nothing follows the last one; with --witness (the policy's\n"
    "        audit.witness), that every line it noted is there unchanged: a log\n"
    "        cut short, even at a checkpoint, is reported truncated. Exit 0 and a\n"
    "        one-line summary when intact (then a warning line per run whose\n"
    "        run.end was lost); 1 and FILE:LINE: why at the first broken line;\n"
    "        125 when FILE, the key or the witness cannot be read.\n"
    "show    the log as a timeline of runs with their decisions and results.\n"
    "        --run ID     only this run (a prefix of its id is enough)\n"
    "        --type T     only events of type T (run matches run.start and run.end)\n"
    "        --json       the matching lines themselves, unchanged\n";

/* "--key X" or "--key=X" at argv[*i]; advances *I past the value. */
static int option_value(int argc, char **argv, int *i, const char *name, const char **out)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *out = a + n + 1;
        return 1;
    }
    if (a[n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *out = argv[++*i];
    return 1;
}

static const char *plural(uint64_t n)
{
    return n == 1 ? "" : "s";
}

/* Warnings, not a broken chain: runs whose supervisor and watchdog both died. */
static void print_lost_ends(const char *file, const struct audit_report *r)
{
    uint64_t shown = r->lost_ends < AUDIT_OPEN_RUNS_SHOWN ? r->lost_ends : AUDIT_OPEN_RUNS_SHOWN;
    for (uint64_t i = 0; i < shown; i++)
        printf("%s:%llu: warning: run %.8s has no run.end and is not running: its end was "
               "lost\n", file, (unsigned long long)r->lost[i].line, r->lost[i].run);
    if (r->lost_ends > shown)
        printf("%s: warning: %llu more runs without a run.end\n", file,
               (unsigned long long)(r->lost_ends - shown));
}

static int cmd_verify(int argc, char **argv)
{
    const char *file = NULL, *key = NULL, *witness = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        int r = option_value(argc, argv, &i, "--key", &key);
        if (r < 0)
            return cli_usage_error("audit verify: --key needs a PUB.pem file");
        if (r > 0)
            continue;
        if ((r = option_value(argc, argv, &i, "--witness", &witness)) < 0)
            return cli_usage_error("audit verify: --witness needs a file");
        if (r > 0)
            continue;
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return cli_usage_error("audit verify: unknown option '%s'; try 'cordon audit --help'",
                                   argv[i]);
        if (file)
            return cli_usage_error("audit verify: expected one FILE, got '%s' and '%s'", file,
                                   argv[i]);
        file = argv[i];
    }
    if (!file)
        return cli_usage_error("audit verify: expected a FILE; try 'cordon audit --help'");

    struct audit_report r;
    struct cordon_err err = { 0 };
    if (audit_verify(file, key, witness, &r, &err) < 0)
        return cli_fail(&err);
    if (r.truncated) {
        printf("%s:%llu: truncated last line (the writer was interrupted); the %llu line%s "
               "before it verif%s\n", file, (unsigned long long)r.bad_line,
               (unsigned long long)r.events, plural(r.events), r.events == 1 ? "ies" : "y");
        return 1;
    }
    if (!r.intact) {
        printf("%s:%llu: %s\n", file, (unsigned long long)r.bad_line, r.why);
        return 1;
    }
    printf("%s: intact: %llu event%s, %llu run%s, %s .. %s, head %s", file,
           (unsigned long long)r.events, plural(r.events), (unsigned long long)r.runs,
           plural(r.runs), r.first_ts, r.last_ts, r.head);
    if (key)
        printf(", %llu signed checkpoint%s", (unsigned long long)r.checkpoints,
               plural(r.checkpoints));
    if (witness)
        printf(", witnessed to seq %llu (%llu note%s)", (unsigned long long)r.witness_seq,
               (unsigned long long)r.witness_entries, plural(r.witness_entries));
    putchar('\n');
    print_lost_ends(file, &r);
    return 0;
}

static int cmd_show(int argc, char **argv)
{
    const char *file = NULL;
    struct audit_filter f = { 0 };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        int r;
        if ((r = option_value(argc, argv, &i, "--run", &f.run)) ||
            (r = option_value(argc, argv, &i, "--type", &f.type))) {
            if (r < 0)
                return cli_usage_error("audit show: %s needs a value", argv[i]);
            continue;
        }
        if (!strcmp(argv[i], "--json")) {
            f.json = true;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return cli_usage_error("audit show: unknown option '%s'; try 'cordon audit --help'",
                                   argv[i]);
        if (file)
            return cli_usage_error("audit show: expected one FILE, got '%s' and '%s'", file,
                                   argv[i]);
        file = argv[i];
    }
    if (!file)
        return cli_usage_error("audit show: expected a FILE; try 'cordon audit --help'");
    struct cordon_err err = { 0 };
    if (audit_show(file, &f, stdout, &err) < 0)
        return cli_fail(&err);
    return 0;
}

int cmd_audit(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "verify"))
        return cmd_verify(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "show"))
        return cmd_show(argc - 1, argv + 1);
    if (argc < 2)
        return cli_usage_error("audit: expected 'verify' or 'show'; try 'cordon audit --help'");
    return cli_usage_error("audit: unknown subcommand '%s'; try 'cordon audit --help'",
                           argv[1]);
}
