/*
 * daemon/workspace_files.h: file operations on a session's workspace from
 * the daemon's side, confined to it whatever the sandbox left there: every
 * path is resolved with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) from the workspace's descriptor,
 * so no link, "..", or mount planted by a run can take an operation outside.
 */
#pragma once
#include "common/err.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define WSFILE_PATH_UP (-2) /* wsfile_normalize: a ".." component */

/*
 * PATH (a leading '/' read as the workspace's own) as a path relative to the
 * workspace in OUT (SIZE bytes): empty and "." components dropped, "." for
 * the workspace itself. WSFILE_PATH_UP for a ".." anywhere, -1 when it does
 * not fit or a name is longer than NAME_MAX.
 */
int wsfile_normalize(const char *path, char *out, size_t size);

/* A relative path with no empty, "." or ".." component; why not in WHY. */
int wsfile_check_path(const char *path, char *why, size_t len);

/* PATH under DIRFD opened with FLAGS (and MODE), confined as above; -1 with errno. */
int wsfile_open(int dirfd, const char *path, int flags, mode_t mode);

/*
 * The directory holding PATH's last component (parents made 0755 when
 * MAKE), confined; *LEAF points into PATH. -1 with ERR (errnum set).
 */
int wsfile_open_parent(int root_fd, const char *path, bool make, const char **leaf,
                       struct cordon_err *err);

/* Write DATA to PATH under ROOT_FD (parents made 0755, the file MODE), replacing it. */
int wsfile_write(int root_fd, const char *path, const char *data, size_t len, mode_t mode,
                 struct cordon_err *err);

/* Read at most MAX bytes of the regular file PATH into *OUT (malloc'd); *SIZE its full size. */
int wsfile_read(int root_fd, const char *path, size_t max, char **out, size_t *len, uint64_t *size,
                struct cordon_err *err);

/* Copy the tree under FROM_FD into the empty directory TO_FD (links copied as links,
 * files by reflink where the filesystem allows: *CLONED of them, *COPIED byte by byte). */
int wsfile_copy_tree(int from_fd, int to_fd, unsigned *cloned, unsigned *copied,
                     struct cordon_err *err);

/*
 * What an emptying keeps: KEEP(DIR, NAME, REL, CTX) true for the entry NAME
 * of DIR (REL its path in the workspace) to keep whole, the directories
 * holding it with it. With DRY nothing is removed: KEPT and FIRST tell
 * what would be kept.
 */
struct wsfile_keep {
    bool (*keep)(int dir, const char *name, const char *rel, void *ctx);
    void *ctx;
    const char *top; /* the emptied directory's path in the workspace ("." for its root) */
    bool dry;
    unsigned kept;        /* out: the entries kept */
    char first[PATH_MAX]; /* out: the first one's path */
};

/* Remove everything in the directory DIR_FD, following no link, but what KEEP (or NULL) keeps. */
int wsfile_empty_dir(int dir_fd, struct wsfile_keep *keep, struct cordon_err *err);

/* Remove DIR (under PARENT_FD) and everything in it, following no link. */
int wsfile_remove_tree(int parent_fd, const char *dir, struct cordon_err *err);
