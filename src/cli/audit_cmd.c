/*
 * cli/audit_cmd.c: `cordon audit verify`, `show` and `report`: argv in,
 * the verdict, the timeline or the page out, exit 0 / 1 (log not intact) / 125.
 */
#include "audit/audit.h"
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/hostpath.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: cordon audit verify FILE [--key PUB.pem] [--witness WITNESS]\n"
    "       cordon audit show FILE [--run ID] [--type T] [--json]\n"
    "       cordon audit report FILE --html OUT [--run ID] [--key PUB.pem] [--witness W]\n"
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
    "        --json       the matching lines themselves, unchanged\n"
    "report  a self-contained HTML page of the log for a person (OUT, or - for\n"
    "        stdout): the chain's verdict as verify gives it (--key, --witness),\n"
    "        the runs on a timeline, and each run's level, policy digest, limits\n"
    "        as enforced, egress decisions, tool calls, break-glass and\n"
    "        verification status. It loads nothing and runs no script. --run ID\n"
    "        shows only runs whose id starts with ID. Exit 0 when written and\n"
    "        intact, 1 when written and the chain is not intact, 125 on errors.\n";

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
               "lost\n",
               file, (unsigned long long)r->lost[i].line, r->lost[i].run);
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
               "before it verif%s\n",
               file, (unsigned long long)r.bad_line, (unsigned long long)r.events, plural(r.events),
               r.events == 1 ? "ies" : "y");
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

/* The page into memory first: a file half written is never left at OUT. */
static int write_report(const char *file, const char *out, const struct audit_html_options *o)
{
    struct cordon_err err = { 0 };
    _cleanup_free_ char *page = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&page, &len);
    if (!m)
        return cli_fail(&(struct cordon_err){ .kind = CORDON_E_INTERNAL, .msg = "out of memory" });
    int rc = audit_html(file, o, m, &err);
    if (fclose(m) != 0 && rc >= 0)
        rc = err_set(&err, CORDON_E_INTERNAL, "out of memory");
    if (rc < 0)
        return cli_fail(&err);
    if (!strcmp(out, "-")) {
        if (fwrite(page, 1, len, stdout) != len || fflush(stdout) != 0)
            return cli_fail(&(struct cordon_err){ .kind = CORDON_E_SETUP,
                                                  .msg = "cannot write the report to stdout" });
    } else if (hostpath_replace_file(out, page, len, &err) < 0) {
        err_prefix(&err, "audit report");
        return cli_fail(&err);
    }
    return rc; /* 1: written, and the chain is not intact */
}

static int cmd_report(int argc, char **argv)
{
    const char *file = NULL, *out = NULL;
    struct audit_html_options o = { 0 };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        int r;
        if ((r = option_value(argc, argv, &i, "--run", &o.run)) ||
            (r = option_value(argc, argv, &i, "--html", &out)) ||
            (r = option_value(argc, argv, &i, "--key", &o.pubkey)) ||
            (r = option_value(argc, argv, &i, "--witness", &o.witness))) {
            if (r < 0)
                return cli_usage_error("audit report: %s needs a value", argv[i]);
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0')
            return cli_usage_error("audit report: unknown option '%s'; try 'cordon audit --help'",
                                   argv[i]);
        if (file)
            return cli_usage_error("audit report: expected one FILE, got '%s' and '%s'", file,
                                   argv[i]);
        file = argv[i];
    }
    if (!file)
        return cli_usage_error("audit report: expected a FILE; try 'cordon audit --help'");
    if (!out || !*out)
        return cli_usage_error("audit report: expected --html OUT (- for stdout)");
    if (o.run && !*o.run)
        return cli_usage_error("audit report: --run needs a run id");
    return write_report(file, out, &o);
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
    if (argc >= 2 && !strcmp(argv[1], "report"))
        return cmd_report(argc - 1, argv + 1);
    if (argc < 2)
        return cli_usage_error("audit: expected 'verify', 'show' or 'report'; try 'cordon audit "
                               "--help'");
    return cli_usage_error("audit: unknown subcommand '%s'; try 'cordon audit --help'", argv[1]);
}
