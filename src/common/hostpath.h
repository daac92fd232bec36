/*
 * common/hostpath.h: host paths that an earlier run could have written to.
 * A workspace or a writable bind outlives its run, so any link in it may
 * have been planted; cordon's own processes never follow one there unless
 * the policy says so for that path, and they use the descriptor they
 * opened, never the path string again.
 */
#pragma once
#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * IN as an absolute path with empty and "." components dropped; ".." is
 * folded lexically when FOLD_DOTDOT, else kept (and *DOTDOT set when seen;
 * DOTDOT may be NULL). Malloc'd; NULL on ENOMEM.
 */
char *hostpath_normalize(const char *in, bool fold_dotdot, bool *dotdot);

/*
 * PATH made absolute against the working directory, with "." and ".."
 * folded lexically (the same as the kernel's reading once no component is
 * a link). Malloc'd; NULL on ENOMEM or when the working directory is gone.
 */
char *hostpath_absolute(const char *path);

/* Is PATH equal to DIR or beneath it? Both absolute and normalised. */
bool hostpath_within(const char *path, const char *dir);

/*
 * The first component of PATH that is a symbolic link, copied into OUT
 * ("/a/b" for "/a/b/c" when b is a link), with its target in TARGET.
 * False when no component is one (or PATH cannot be examined).
 */
bool hostpath_find_link(const char *path, char *out, size_t len, char *target, size_t tlen);

/*
 * openat2() of PATH (absolute, or relative to DIRFD) with FLAGS | O_CLOEXEC.
 * Unless FOLLOW, no component may be a symbolic link; magic links
 * (/proc/PID/fd/N, /proc/PID/root) are never followed. -1 with ERR naming
 * the link when one is in the way.
 */
int hostpath_open(int dirfd, const char *path, int flags, mode_t mode, bool follow,
                  struct cordon_err *err);

/* Could hostpath_replace_file(PATH) work: its directory reached without a
 * link and writable, PATH not a directory? 0, or -1 with ERR. */
int hostpath_check_dir_of(const char *path, struct cordon_err *err);

/*
 * Write LEN bytes of DATA as the file PATH, atomically: a new file in the
 * same directory (reached without following links) renamed over PATH, so
 * whatever stood at PATH — a planted link, a FIFO — is replaced, never
 * written through. Mode 0666 less the umask, as an ordinary create.
 */
int hostpath_replace_file(const char *path, const char *data, size_t len, struct cordon_err *err);

/*
 * The whole of the regular file PATH, NUL-terminated, if it holds at most
 * MAX bytes (length in *N). A directory or a larger file is refused; ERR's
 * errnum is ENOENT when PATH does not exist.
 */
char *read_small_file(const char *path, size_t max, size_t *n, struct cordon_err *err);

/*
 * At most SIZE - 1 bytes of the file open as FD into BUF, NUL-terminated
 * (BUF is "" after a failure): its length, or -1 with errno. Only read(), so
 * it serves in a forked child, a signal handler and the cleanup watchdog.
 */
ssize_t read_small_fd(int fd, char *buf, size_t size);

/*
 * read_small_fd() of PATH, opened read-only beneath DIR as openat() takes
 * it (AT_FDCWD, or a descriptor of a /proc/PID or a cgroup directory).
 * -1 with errno when it cannot be opened or read: a /proc/PID file of a
 * process that has gone reads so (ENOENT, ESRCH), which callers take as
 * "gone". Only openat(), read() and close(), as read_small_fd().
 */
ssize_t read_small_at(int dir, const char *path, char *buf, size_t size);

/*
 * Remove the directory tree PATH (absolute) and everything in it, through
 * descriptors: no link is followed and no other mount entered, so what a
 * run wrote there (a directory swapped for a link mid-walk) cannot turn the
 * removal elsewhere. Best effort: what cannot be removed stays.
 */
void hostpath_remove_tree(const char *path);

/*
 * NAME's executable file on $PATH (a usual one when PATH is unset or empty),
 * into OUT; false when there is none.
 */
bool hostpath_find_program(const char *name, char *out, size_t len);

/* The same for the entry NAME of the directory DIR: a file, or a tree. */
void hostpath_remove_at(int dir, const char *name);
