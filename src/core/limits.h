/*
 * core/limits.h: how each of the policy's limits is enforced on this host, the
 * same at every level: a cgroup for the whole tree where one is delegated,
 * an rlimit per process where the policy lets a limit degrade, refusal
 * otherwise. Runs in the supervisor.
 */
#pragma once
#include "policy/policy.h"
#include "sandbox/backend.h"
#include "sandbox/cgroup.h"
#include "sandbox/confine.h"

/*
 * Write the cgroup's limits, add the rlimits to C and say in ENFORCED how
 * each is held at level B (which rlimits mean what there: see struct
 * sandbox_backend).
 */
int limits_plan(const struct policy *p, const struct cgroup_set *cg,
                const struct sandbox_backend *b, struct confine_plan *c,
                enum enforcement enforced[POLICY_LIMIT_COUNT], struct cordon_err *err);
