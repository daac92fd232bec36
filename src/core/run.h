/*
 * core/run.h: the one run path every front end (CLI, MCP server and broker,
 * the daemon, libcordon) takes, at every level:
 *
 *   run_prepare(policy) -> run   everything the policy alone decides: run id,
 *                                audit log, watchdog, cgroup and limits,
 *                                gateway, and the level's boundary, built
 *                                and waiting at the start seam
 *   run_start(run, call)         argv, environment and stdio handed in
 *   run_wait(run, &result)       supervised to the end; run.end recorded
 *   run_release(run)             whatever is left torn down
 *
 * libcordon's cordon_prepare/start/wait/release (include/cordon.h) wrap these.
 * run_once() is the four in a row. Nothing here changes process-wide state
 * (signal masks, handlers): several runs may be prepared and started from one
 * process at once.
 */
#pragma once
#include "policy/policy.h"
#include "sandbox/backend.h"
#include "sandbox/container.h"

struct run;
struct run_template;
struct audit_log;
struct cgroup_set;

/* What a front end preparing many runs of one policy (the pool) lends each. */
struct run_lent {
    const struct run_template *tmpl; /* the boundary is a clone of it (run_template_new), or NULL */
    const struct cgroup_set *cg;     /* a pooled cgroup (core/cgpool.h), limits set and reset,
                                        that the run uses and leaves: or NULL */
};

/*
 * Prepare a run under P (borrowed: it must outlive the run). RUN_ID (32 hex
 * digits) names it, or NULL for a fresh one. 0 with *OUT; -1 with ERR and
 * nothing left on the host (no process, cgroup or record).
 */
int run_prepare(const struct policy *p, const char *run_id, struct run **out,
                struct cordon_err *err);

/*
 * P's template, for a front end that prepares many runs of P (the pool):
 * what every run shares and none may write, built once (the namespace
 * level's: sandbox/template.h). 0 with *OUT, 0 with *OUT NULL where P's level
 * has none for P, -1 with ERR. Free it once no run is being prepared from it.
 */
int run_template_new(const struct policy *p, struct run_template **out, struct cordon_err *err);
void run_template_free(struct run_template *t);

/* The descriptors T holds (a process preparing runs from it keeps them): at most MAX into OUT. */
size_t run_template_fds(const struct run_template *t, int *out, size_t max);

/*
 * run_prepare() for a run prepared before anyone asks (the daemon's pool):
 * the level may spend the wait making the start faster (microvm: a
 * throwaway command warms the guest), and what LENT (may be NULL) lends is
 * used: the boundary a clone of its template where that is of the level P
 * runs at, the cgroup its.
 */
int run_prepare_ahead(const struct policy *p, const struct run_lent *lent, struct run **out,
                      struct cordon_err *err);

/*
 * run_prepare() for an OCI bundle's container C (borrowed, like P): the
 * level builds C's root, user and namespaces instead of its own, and the
 * boundary is detached (sandbox/container.h). The container's cgroup stays
 * after release, for its front end to remove.
 */
int run_prepare_container(const struct policy *p, const char *run_id,
                          const struct sandbox_container *c, struct run **out,
                          struct cordon_err *err);

/* The boundary's top process (a container's init), or -1 once supervision took it. */
pid_t run_boundary_pid(const struct run *run);

/* A container's terminal (the pty master made at prepare), now the caller's; -1 if none. */
int run_take_terminal(struct run *run);

/*
 * Start CALL in the prepared RUN; CALL's descriptors must stay open until
 * run_wait() returns. -1 with ERR when the command was not handed in (the
 * run can only be released); a command that fails to exec is reported by
 * run_wait().
 */
int run_start(struct run *run, const struct sandbox_call *call, struct cordon_err *err);

/* Supervise a started RUN to its end and fill RES (0); -1 with ERR when it was never started. */
int run_wait(struct run *run, struct sandbox_result *res, struct cordon_err *err);

/* Tear down what is left of RUN, prepared, started or waited, and free it. NULL is fine. */
void run_release(struct run *run);

/* The policy RUN was prepared under. */
const struct policy *run_policy(const struct run *run);

/* The run's id (32 hex digits); valid until release. */
const char *run_get_id(const struct run *run);

/*
 * Run CALL under P. Returns -1 with ERR only when the run was refused before
 * it started (nothing ran; a run.end is still recorded when auditing);
 * otherwise 0 with RES, whose run_id names the run in the audit log.
 */
int run_once(const struct policy *p, const struct sandbox_call *call, struct sandbox_result *res,
             struct cordon_err *err);

/*
 * run_once() with RUN already prepared under P (NULL: prepare it now), as a
 * pool hands one out; RUN is released either way.
 */
int run_call(struct run *run, const struct policy *p, const struct sandbox_call *call,
             struct sandbox_result *res, struct cordon_err *err);

/*
 * A run refused before it started (a signature that does not hold, a flag
 * relaxing a signed policy, a refused break-glass, a level that cannot run):
 * one run.refused event, {reason: WHY's message, front_end ("run", "serve",
 * "session.exec"...), uid, argv (ARGV, may be NULL), and what is known of P
 * (may be NULL): policy_file, its digest, signer, flags; with EFFECTIVE (P is
 * the finished policy the run would have had) its digest and level too},
 * under RUN_ID (may be NULL), in P's audit log, or in LOG_PATH when P keeps
 * none (a --audit flag's, when P never loaded). Best effort: nothing when
 * neither names a log, and a log that cannot be written loses the event.
 */
void run_record_refused(const struct policy *p, bool effective, const char *log_path,
                        const char *run_id, char *const *argv, const char *front_end,
                        const struct cordon_err *why);

/*
 * The policy's audit log, opened for a front end's own events (the MCP
 * broker's calls). 0 with *OUT NULL when the policy keeps no log; -1 with
 * ERR when it cannot be opened.
 */
int cordon_audit_open(const struct policy *p, struct audit_log **out, struct cordon_err *err);
