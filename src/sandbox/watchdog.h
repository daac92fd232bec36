/*
 * sandbox/watchdog.h: what a run leaves behind if its supervisor dies, even by
 * SIGKILL. A small detached process holds one end of a socket; the
 * supervisor tells it each cgroup and directory before it creates it, and
 * "done" when it has cleaned up and closed the audit record itself. If the
 * socket closes without "done", the watchdog empties and removes the
 * cgroups and directories, finishes or undoes
 * a workspace commit it was told of, and appends the run's run.end unless
 * the supervisor wrote it.
 */
#pragma once
#include "common/err.h"

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct audit_log;
struct policy;
struct watchdog;

/* An unarmed watchdog for RUN_ID under policy P, logging to LOG (may be
 * NULL). Borrowed pointers must outlive it. */
struct watchdog *watchdog_new(struct audit_log *log, const char *run_id, const struct policy *p,
                              struct cordon_err *err);

/* Fork the watchdog now (idempotent). */
int watchdog_arm(struct watchdog *wd, struct cordon_err *err);

/* Arm if needed, and have DIR (a cgroup) removed should the supervisor die. */
int watchdog_guard_cgroup(struct watchdog *wd, const char *dir, struct cordon_err *err);

/* Arm if needed, and have directory DIR (a backend's private state) removed
 * should the supervisor die. */
int watchdog_guard_dir(struct watchdog *wd, const char *dir, struct cordon_err *err);

/*
 * Arm if needed, and have a commit into WORKSPACE (opened again without
 * links unless FOLLOW) finished or undone should the supervisor die while
 * it runs (txn_recover(), with the policy's protected names). Sent before
 * the commit begins.
 */
int watchdog_guard_txn(struct watchdog *wd, const char *workspace, bool follow,
                       struct cordon_err *err);

/*
 * The run RUN_ID (which may differ from the one it was prepared under) is
 * about to record its run.start, in the log from byte SINCE on: from now on
 * a supervisor's death is recorded as the run's end, once: the watchdog
 * writes run.end only if the log holds the run's run.start and no run.end
 * (the supervisor may die between writing its own and telling us "done").
 * A prepared run that never started leaves no record. No-op when the
 * watchdog is not armed (nothing to record).
 */
int watchdog_started(struct watchdog *wd, const char *run_id, uint64_t since,
                     struct cordon_err *err);

/* The supervisor cleaned up itself: stop the watchdog and reap it. Frees WD. */
void watchdog_release(struct watchdog *wd);
