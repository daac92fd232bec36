/*
 * cli/kill_cmd.c: `cordon kill --all`: end every running sandbox this user
 * may signal, and record it.
 */
#include "audit/audit.h"
#include "cli/cli.h"
#include "core/killall.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: cordon kill --all [--audit FILE] [--reason TEXT] [--json]\n"
    "\n"
    "End every running sandbox this user may signal (root: all of them). Each\n"
    "run's own log records its end; --audit FILE also records a kill.all event.\n"
    "Exit 0 when every sandbox found was ended, 125 when some could not be.\n";

int cmd_kill(int argc, char **argv)
{
    bool all = false, json = false;
    const char *audit = NULL, *reason = "cordon kill --all";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--all")) {
            all = true;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--audit") && i + 1 < argc) {
            audit = argv[++i];
        } else if (!strcmp(argv[i], "--reason") && i + 1 < argc) {
            reason = argv[++i];
        } else {
            return cli_usage_error("kill: unknown argument '%s'; try 'cordon kill --help'",
                                   argv[i]);
        }
    }
    if (!all)
        return cli_usage_error("kill: expected --all");
    struct cordon_err err = { 0 };
    _cleanup_(audit_freep) struct audit_log *log = NULL;
    if (audit && !(log = audit_open(&(struct audit_options){ .path = audit }, &err)))
        return cli_fail(&err);
    static struct killall_report r;
    if (run_kill_all(log, reason, &r, &err) < 0 || (log && audit_close(log, &err) < 0))
        return cli_fail(&err);
    if (json) {
        json_t *j = killall_report_json(&r);
        json_dumpf(j, stdout, JSON_SORT_KEYS);
        fputc('\n', stdout);
        json_decref(j);
    } else {
        printf("killed %zu sandbox%s\n", r.killed, r.killed == 1 ? "" : "es");
    }
    if (r.refused)
        return cli_usage_error("kill: %zu sandbox%s of other users not ended (permission "
                               "denied)",
                               r.refused, r.refused == 1 ? "" : "es");
    return 0;
}
