/*
 * sandbox/engine.h: the keeper of an engine's own calls: runsc's (gofer and
 * Sentry) at the gvisor level, QEMU's at the microvm level. The engine
 * serves the command; its host calls are cordon's to check where the
 * engine alone cannot tell what they reach:
 *
 *  - connect() (runsc with --host-uds=open): the gofer would connect the
 *    sandbox to any host socket in any of its mounts (a --ro $HOME would
 *    hand in ssh-agent, and a socket made there later too), and runsc has
 *    no per-mount setting for it. A path resolves in the caller's root and
 *    reaches only the gateway's door and the listed sockets, by inode
 *    (usock.h); runsc's own abstract names pass.
 *  - the names it makes in a host workspace written directly (names.h,
 *    NAMES_CHECK): a protected name at the workspace's root is refused on
 *    the host, so none appears even for a moment; the kernel makes the
 *    rest as the engine asked.
 *
 * The command's own calls never reach it: the Sentry serves them (ptrace
 * platform), or the guest's kernel.
 */
#pragma once
#include "common/err.h"
#include "sandbox/names.h"
#include "sandbox/seccomp.h"
#include "sandbox/usock.h"

#include <sys/types.h>

struct engine_keeper {
    pid_t keeper;
    int give; /* the engine's child sends the filter's listener over it */
};

/* Fork the keeper for K (connects; may be NULL without) and NAMES into *U. */
int engine_keeper_start(const struct usock_keeper *k, const struct names_keeper *names,
                        struct engine_keeper *u, struct cordon_err *err);

/* In the engine's child, before exec: no_new_privs, PROG, its listener over GIVE. */
int engine_keeper_confine(const struct seccomp_program *prog, int give);
