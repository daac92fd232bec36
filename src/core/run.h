/*
 * core/run.h: the one function every front end (CLI, later the daemon and
 * the MCP server) calls to run something: the level's backend, wrapped in
 * the audit record and the cleanup watchdog.
 */
#pragma once
#include "policy/policy.h"
#include "sandbox/backend.h"

/*
 * Run CALL under P. Returns -1 with ERR only when the run was refused before
 * it started (nothing ran; a run.end is still recorded when auditing);
 * otherwise 0 with RES, whose run_id names the run in the audit log.
 */
int cordon_run(const struct policy *p, const struct sandbox_call *call,
               struct sandbox_result *res, struct cordon_err *err);

struct audit_log;

/*
 * The policy's audit log, opened for a front end's own events (the MCP
 * broker's calls). 0 with *OUT NULL when the policy keeps no log; -1 with
 * ERR when it cannot be opened.
 */
int cordon_audit_open(const struct policy *p, struct audit_log **out, struct cordon_err *err);
