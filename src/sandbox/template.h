/*
 * sandbox/template.h: the namespace level's template, a zygote made of
 * namespaces rather than a process. What every run of one policy shares and
 * nothing may write is built once: a user namespace and a mount namespace
 * holding the finished, read-only root (binds, generated /etc, /dev), with
 * the seccomp program compiled and the Landlock rules planned. No process
 * stays in it: two descriptors pin it. Each run is a clone of it: a helper
 * enters the template and clones the run's init with a user, mount, PID,
 * network, IPC and UTS namespace of its own, where the init mounts a fresh
 * /proc, devpts, /dev/shm, /tmp and scratch /workspace over the template's
 * empty mountpoints (doc/pool.md says what is shared and why nothing of a
 * run outlives it). Runs in the supervisor (a front end's, once per policy:
 * jobs.c) and, for the builder and the helper, in short-lived children.
 */
#pragma once
#include "common/err.h"
#include "policy/policy.h"
#include "sandbox/cgroup.h"
#include "sandbox/plan.h"

#include <stdbool.h>
#include <sys/types.h>

/* The host ids a root-started template's user namespace maps, from its base
 * on: every run's own base (root, sandbox user, gateway) lies in it. */
#define TEMPLATE_HOST_IDS (1u << 18)

struct sandbox_template {
    int userns, mntns;   /* the template's namespaces, O_RDONLY nsfs descriptors */
    bool root;           /* built by root: its user namespace maps TEMPLATE_HOST_IDS ids */
    uid_t host_base;     /* root: where they start on the host */
    struct ns_plan plan; /* the per-call steps, the Landlock plan, the compiled filters */
};

/*
 * Can P's runs at the namespace level be clones of a template? Not with a
 * host workspace (scanned and covered per run), the policy's unix sockets
 * (their inodes are checked per run), secrets (a CA of the run's own), nor
 * binds: for root they are idmapped to each run's own host ids, and for
 * anyone their Landlock rules are opened by host path, which a clone, already
 * in the template's root, no longer sees.
 */
bool template_admits(const struct policy *p);

/*
 * Build P's template; root-started, its ids start at HOST_BASE on the host.
 * 0 with *OUT, or 0 with *OUT NULL where P admits none; -1 with ERR (the
 * builder's own error when it failed inside), nothing left behind.
 */
int template_build(const struct policy *p, uid_t host_base, struct sandbox_template **out,
                   struct cordon_err *err);

void template_free(struct sandbox_template *t);

/* T's namespaces' descriptors (a process preparing runs from T keeps them open). */
size_t template_fds(const struct sandbox_template *t, int *out, size_t max);

/*
 * The run's init, cloned from T: a helper enters the template's namespaces
 * and clones CHILD(ARG) (which does not return; IN_CGROUP: created in the
 * v2 cgroup already) into new user, mount, PID, network, IPC and UTS
 * namespaces (into the v2 cgroup TICKET->dir where there is one), as a child
 * of the caller, mapping the sandbox's ids to the run's own host ids (root:
 * HOST_BASE, +1 for the sandbox user). Its pid, or -1 with ERR.
 */
pid_t template_spawn(const struct sandbox_template *t, uid_t host_base,
                     const struct cgroup_ticket *ticket, void (*child)(void *arg, bool in_cgroup),
                     void *arg, struct cordon_err *err);
