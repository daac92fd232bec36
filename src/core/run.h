/*
 * core/run.h: the one run path every front end (CLI, MCP server and broker,
 * the daemon, libcordon) takes, at every level:
 *
 *   cordon_prepare(policy)  -> run   everything the policy alone decides: run id,
 *                                     audit log, watchdog, cgroup and limits,
 *                                     gateway, and the level's boundary, built
 *                                     and waiting at the start seam
 *   cordon_start(run, call)          argv, environment and stdio handed in
 *   cordon_wait(run, &result)        supervised to the end; run.end recorded
 *   cordon_release(run)              whatever is left torn down
 *
 * cordon_run() is the four in a row. Nothing here changes process-wide state
 * (signal masks, handlers): several runs may be prepared and started from one
 * process at once.
 */
#pragma once
#include "policy/policy.h"
#include "sandbox/backend.h"

struct cordon_run;
struct audit_log;

/*
 * Prepare a run under P (borrowed: it must outlive the run). RUN_ID (32 hex
 * digits) names it, or NULL for a fresh one. 0 with *OUT; -1 with ERR and
 * nothing left on the host (no process, cgroup or record).
 */
int cordon_prepare(const struct policy *p, const char *run_id, struct cordon_run **out,
                   struct cordon_err *err);

/*
 * Start CALL in the prepared RUN; CALL's descriptors must stay open until
 * cordon_wait() returns. -1 with ERR when the command was not handed in (the
 * run can only be released); a command that fails to exec is reported by
 * cordon_wait().
 */
int cordon_start(struct cordon_run *run, const struct sandbox_call *call, struct cordon_err *err);

/* Supervise a started RUN to its end and fill RES (0); -1 with ERR when it was never started. */
int cordon_wait(struct cordon_run *run, struct sandbox_result *res, struct cordon_err *err);

/* Tear down what is left of RUN, prepared, started or waited, and free it. NULL is fine. */
void cordon_release(struct cordon_run *run);

/* The run's id (32 hex digits); valid until release. */
const char *cordon_run_id(const struct cordon_run *run);

/*
 * Run CALL under P. Returns -1 with ERR only when the run was refused before
 * it started (nothing ran; a run.end is still recorded when auditing);
 * otherwise 0 with RES, whose run_id names the run in the audit log.
 */
int cordon_run(const struct policy *p, const struct sandbox_call *call,
               struct sandbox_result *res, struct cordon_err *err);

/*
 * The policy's audit log, opened for a front end's own events (the MCP
 * broker's calls). 0 with *OUT NULL when the policy keeps no log; -1 with
 * ERR when it cannot be opened.
 */
int cordon_audit_open(const struct policy *p, struct audit_log **out, struct cordon_err *err);
