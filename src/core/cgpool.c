/*
 * core/cgpool.c: the prepared cgroups a front end lends its runs (see
 * cgpool.h). Runs in the front end's process.
 */
#include "core/cgpool.h"

#include "sandbox/backend.h"
#include "sandbox/watchdog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Prepared, lent and tearing down together: the pool's target, the runs and their teardowns. */
#define MAX_SLOTS 192

struct slot {
    struct cgroup_set cg;
    bool lent;
    bool settling; /* its last run's memory is still being freed: reset once it is */
    bool stale;    /* could not be reset: removed as soon as it can be */
};

struct cgroup_pool {
    const struct policy *p;
    struct watchdog *wd;
    struct cgroup_set parent; /* cordon-PID-pool, in each hierarchy */
    struct slot *slots[MAX_SLOTS];
    unsigned made; /* s0 .. s(made-1) named so far */
};

static int guard(void *wd, const char *dir, struct cordon_err *err)
{
    return watchdog_guard_cgroup(wd, dir, err);
}

struct cgroup_pool *cgroup_pool_new(const struct policy *p, struct cordon_err *err)
{
    if (!sandbox_needs_cgroup(p))
        return NULL;
    struct cgroup_pool *cp = calloc(1, sizeof *cp);
    if (!cp) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    cp->p = p;
    char name[64];
    snprintf(name, sizeof name, "cordon-%d-pool", (int)getpid());
    /* The parent is named to the watchdog before it exists; its children go with it. */
    if (!(cp->wd = watchdog_new(NULL, "", p, err)) ||
        cgroup_create(&cp->parent, name, NULL, guard, cp->wd, err) < 0) {
        cgroup_pool_free(cp);
        return NULL;
    }
    if (cp->parent.version != 1) {
        cgroup_pool_free(cp); /* v2 (or no cgroup at all): each run makes its own */
        return NULL;
    }
    return cp;
}

/* A new cgroup in slot I beneath the parent, with the policy's limits; false if it cannot be. */
static bool make_slot(struct cgroup_pool *cp, unsigned i)
{
    struct slot *s = calloc(1, sizeof *s);
    if (!s)
        return false;
    s->cg.version = 1;
    s->cg.pooled = true;
    for (int c = 0; c < CGROUP_COUNT; c++) {
        memcpy(s->cg.why[c], cp->parent.why[c], sizeof s->cg.why[c]);
        if (!cgroup_has(&cp->parent, c))
            continue;
        bool shared = false; /* co-mounted controllers share one directory */
        for (int d = 0; d < c; d++)
            if (cgroup_has(&cp->parent, d) && strcmp(cp->parent.dir[d], cp->parent.dir[c]) == 0) {
                memcpy(s->cg.dir[c], s->cg.dir[d], sizeof s->cg.dir[c]);
                shared = true;
            }
        if (shared)
            continue;
        if (snprintf(s->cg.dir[c], sizeof s->cg.dir[c], "%s/s%u", cp->parent.dir[c], i) >=
                (int)sizeof s->cg.dir[c] ||
            mkdir(s->cg.dir[c], 0755) < 0) {
            s->cg.dir[c][0] = '\0';
            cgroup_destroy(&s->cg);
            free(s);
            return false;
        }
    }
    struct cordon_err ignored;
    if (cgroup_set_memory(&s->cg, cp->p->limits.memory, &ignored) < 0 ||
        cgroup_set_pids(&s->cg, cp->p->limits.pids, &ignored) < 0) {
        cgroup_destroy(&s->cg);
        free(s);
        return false;
    }
    cp->slots[i] = s;
    return true;
}

/* S, back from its run: reset for the next, left to settle, or marked for removal. */
static void reset(struct slot *s)
{
    enum cgroup_reuse r = cgroup_reuse(&s->cg);
    s->settling = r == CGROUP_SETTLING;
    s->stale = r == CGROUP_SPENT;
}

/*
 * Settling slots whose last run's memory has been freed by now, reset; stale
 * ones whose processes have gone, removed (without waiting for either).
 */
static void sweep(struct cgroup_pool *cp)
{
    for (unsigned i = 0; i < cp->made; i++) {
        struct slot *s = cp->slots[i];
        if (s && s->settling)
            reset(s);
        if (s && s->stale && cgroup_try_destroy(&s->cg)) {
            free(s);
            cp->slots[i] = NULL;
        }
    }
}

const struct cgroup_set *cgroup_pool_take(struct cgroup_pool *cp, int *slot)
{
    *slot = -1;
    if (!cp)
        return NULL;
    sweep(cp);
    unsigned i, empty = MAX_SLOTS;
    for (i = 0; i < cp->made; i++) {
        struct slot *s = cp->slots[i];
        if (s && !s->lent && !s->settling && !s->stale)
            break;
        if (!s && empty == MAX_SLOTS)
            empty = i;
    }
    if (i == cp->made) {
        i = empty < MAX_SLOTS ? empty : cp->made;
        if (i >= MAX_SLOTS || !make_slot(cp, i))
            return NULL;
        if (i == cp->made)
            cp->made++;
    }
    cp->slots[i]->lent = true;
    *slot = (int)i;
    return &cp->slots[i]->cg;
}

void cgroup_pool_put(struct cgroup_pool *cp, int slot)
{
    if (!cp || slot < 0 || (unsigned)slot >= cp->made || !cp->slots[slot])
        return;
    struct slot *s = cp->slots[slot];
    s->lent = false;
    /* Nothing of the run may be left in it for the next: else it waits, or goes. */
    reset(s);
    sweep(cp);
}

void cgroup_pool_free(struct cgroup_pool *cp)
{
    if (!cp)
        return;
    for (unsigned i = 0; i < cp->made; i++)
        if (cp->slots[i]) {
            cgroup_destroy(&cp->slots[i]->cg);
            free(cp->slots[i]);
        }
    if (cp->parent.version)
        cgroup_destroy(&cp->parent);
    watchdog_release(cp->wd);
    free(cp);
}
