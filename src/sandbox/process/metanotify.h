/*
 * sandbox/process/metanotify.h: the process level's metadata boundary.
 * Landlock has no right for a file's mode, owner, times or extended
 * attributes, and with no mount namespace every host file is there to be
 * named: a root caller's run (uid 0, no capability) owns most of the host,
 * and the owner may chmod, chown to its own groups, set times and user
 * xattrs, and chattr. So every such call (chmod, fchmod, fchmodat,
 * fchmodat2, chown, fchown, lchown, fchownat, utime, utimes, futimesat,
 * utimensat, setxattr, lsetxattr, fsetxattr, removexattr, lremovexattr,
 * fremovexattr, setxattrat, removexattrat, and the ioctls that set inode
 * flags) goes to the keeper as a seccomp user notification.
 *
 * The keeper reads the path once from the caller's memory, makes it
 * absolute against the caller's working directory or directory
 * descriptor, and opens it itself beneath one of the run's writable trees
 * (the Landlock rules with write rights: the workspace or its entries beside
 * the protected ones, the writable binds, the run's /tmp), with openat2's
 * RESOLVE_BENEATH: a link or ".." that leaves the tree is refused, and a
 * rename racing the call cannot lead the change elsewhere. A call on a
 * descriptor is checked on the caller's own file (pidfd_getfd): a pipe,
 * socket or unlinked file has no host path and is the caller's alone; any
 * other must be the very inode its path opens to beneath a writable tree.
 * The keeper then makes the change itself, on what it opened, with its
 * effective capabilities dropped for the call (a root caller's command has
 * none), and answers with the result. Anything else is refused with EPERM,
 * and the host file is untouched. The protected entries of a host workspace
 * (.envrc, .vscode, ...) are refused too: a host workspace is beneath no
 * writable rule, and its keeper (names.h) allows its unprotected entries.
 */
#pragma once
#include "common/landlock.h"
#include "sandbox/names.h"

#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>

/* The calls the process level's filter hands to the keeper, by number, into NRS; how many. */
size_t metanotify_syscalls(int *nrs, size_t room);
/* The ioctl(2) commands that set inode flags or attributes (chattr), handed over too. */
size_t metanotify_ioctls(unsigned *cmds, size_t room);

struct metanotify {
    /* The run's Landlock plan: its rules with write rights (each an O_PATH
     * descriptor the keeper holds) are the trees a change may land in. */
    const struct landlock_plan *ll;
    /* And a host workspace, read-only to Landlock, but for its protected entries
     * (names.h): NULL without one. */
    const struct names_keeper *names;
};

/* Is N one of the calls above? */
bool metanotify_handles(const struct seccomp_notif *n);

/* In the keeper: decide, act on and answer N. -1 when LISTENER is gone. */
int metanotify_serve(int listener, const struct seccomp_notif *n, const struct metanotify *m);
