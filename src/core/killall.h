/*
 * core/killall.h: end every running sandbox this process can see and may
 * signal (`cordon kill --all`, the daemon's kill_all). A sandbox is found
 * by its boundary's init: a process named "cordon-init" in a PID namespace
 * below ours. SIGKILL to it ends the whole namespace; the run's supervisor
 * sees that and records the run's end as usual.
 */
#pragma once
#include "common/err.h"

#include <jansson.h>
#include <sys/types.h>

struct audit_log;

#define KILLALL_MAX 4096

struct killall_report {
    size_t found;
    size_t killed;
    size_t refused;          /* kill() said EPERM: another user's sandbox */
    pid_t pids[KILLALL_MAX]; /* of the inits killed */
};

/* Find and kill; with LOG, append one kill.all event (REASON, pids, counts). */
int run_kill_all(struct audit_log *log, const char *reason, struct killall_report *r,
                 struct cordon_err *err);

/* The report as JSON (new reference). */
json_t *killall_report_json(const struct killall_report *r);
