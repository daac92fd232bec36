/*
 * sandbox/confine.h: the command's own confinement, the last steps before
 * exec, in one chain that every level runs (nsjail's containProc is the
 * model): no_new_privs, Landlock, rlimits, capabilities, seccomp. The plan is
 * made in the supervisor; the command only installs it and allocates nothing.
 */
#pragma once
#include "common/err.h"
#include "common/landlock.h"
#include "sandbox/seccomp.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>

struct rlimit_step {
    int resource;
    struct rlimit value;
};

#define CONFINE_MAX_RLIMITS 8

struct confine_plan {
    struct rlimit_step rlimits[CONFINE_MAX_RLIMITS];
    size_t n_rlimits;
    struct landlock_plan landlock;
    /* Landlock is the only filesystem layer (no mount namespace): a kernel
     * without it refuses the run instead of running unconfined. */
    bool landlock_required;
    /* An OCI container's: the capabilities its command keeps (bounding,
     * permitted, effective, inheritable and ambient: bit N = CAP_N; 0 drops
     * them all, as every other run does), and the spec's own filter,
     * installed just before cordon's, so that the stricter of the two wins. */
    uint64_t keep_caps;
    const struct seccomp_program *extra_filter;
};

/* Add an rlimit (soft SOFT, hard HARD), replacing one for the same RESOURCE. */
void confine_add_rlimit(struct confine_plan *c, int resource, rlim_t soft, rlim_t hard);

/* Empty every capability set, ambient included. */
int confine_drop_capabilities(struct cordon_err *err);

/* Drop every capability but those in KEEP (bit N = CAP_N) from the bounding
 * set; needs CAP_SETPCAP. */
int confine_drop_bounding_set(uint64_t keep, struct cordon_err *err);

/*
 * In the command, as the sandbox user, just before exec: the whole chain,
 * FILTER installed last since it forbids some of the steps before it.
 */
int confine_command(const struct confine_plan *c, const struct seccomp_program *filter,
                    struct cordon_err *err);

/*
 * The same chain with NOTIFY, a filter whose user-notification listener is
 * sent over NOTIFY_SOCK (to the boundary's supervisor), installed just
 * before FILTER: the allowlist may refuse seccomp() itself.
 */
int confine_command_notified(const struct confine_plan *c, const struct seccomp_program *filter,
                             const struct seccomp_program *notify, int notify_sock,
                             struct cordon_err *err);
