/*
 * core/cgpool.h: a small pool of prepared cgroups, for a front end that
 * prepares many runs of one policy (jobs.c). Each is made once beneath a
 * parent of the pool's own, with the policy's limits, lent to one run at a
 * time and reset after it (sandbox/cgroup.h, cgroup_reuse), never while a
 * process of the run is left in it; one that cannot be reset is removed and
 * another made. One watchdog guards the parent: should the front end die,
 * it removes every cgroup of the pool. cgroup v1 only: v2 makes a run's
 * cgroup by clone3 anyway, and cannot reset its memory peak. Runs in the
 * front end's process (its event loop: nothing here waits).
 */
#pragma once
#include "common/err.h"
#include "policy/policy.h"
#include "sandbox/cgroup.h"

struct cgroup_pool;

/*
 * A pool for runs of P, or NULL (with ERR unset) where it would not help:
 * P needs no cgroup, or this host makes v2 ones; NULL with ERR when its
 * parent or watchdog could not be made.
 */
struct cgroup_pool *cgroup_pool_new(const struct policy *p, struct cordon_err *err);

/* A cgroup ready for one run (*SLOT names it to cgroup_pool_put), or NULL: make one. */
const struct cgroup_set *cgroup_pool_take(struct cgroup_pool *cp, int *slot);

/* SLOT's run is over and its supervisor gone: reset it for the next, or remove it. */
void cgroup_pool_put(struct cgroup_pool *cp, int slot);

/* Every cgroup of the pool removed (their runs over), the watchdog stopped. NULL is fine. */
void cgroup_pool_free(struct cgroup_pool *cp);
