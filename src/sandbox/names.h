/*
 * sandbox/names.h: the names a run makes in a host workspace (direct mode),
 * made through a keeper.
 *
 * A protected name (filesystem.protected: .bashrc, .envrc, .vscode, ...)
 * must never appear at the workspace's root from inside, not even for a
 * moment: the user's shell, editor and agent look there, during the run
 * too. A mount can hold a name only where a file already is, so cordon
 * once made an empty placeholder for each missing name on the host and
 * bound it read-only: thirty-odd empty files in every workspace while a
 * run lasted, seen by the command and by the user's tools. Instead every
 * call that makes a name (open, openat and creat with O_CREAT, openat2,
 * mkdir, mknod, link, symlink, rename and their *at forms) is a seccomp
 * user notification, and its keeper resolves the directory the name goes
 * into as the caller would, from what it read of the caller once: a
 * protected name whose directory is the workspace's root is refused
 * (EACCES), however the path is spelled (a link to the root, "..", a
 * rename or a hard link from below, an O_TMPFILE linked in). Nothing is
 * made on the host before, during or after the run. .git is not refused:
 * its repository is the run's to write, and what git would run from it is
 * checked after the run (gitscan.h). Below the root, names are the run's
 * (a clone carries .vscode and .env.example), reported after the run.
 *
 * The keeper acts by MODE:
 *   NAMES_MAKE  (namespace level) Landlock gives the command no right to
 *               make a name in the workspace (MAKE_REG, MAKE_DIR, MAKE_SYM,
 *               REFER): the keeper, the sandbox's init (the same user and
 *               mounts, no Landlock), makes it itself with its own copy of
 *               the path and answers (an open's descriptor handed over with
 *               SECCOMP_IOCTL_NOTIF_ADDFD). A call it lets the kernel run
 *               (elsewhere, on a name that exists, through a magic link) is
 *               still bounded by Landlock, whatever the caller changes in
 *               its memory meanwhile.
 *   NAMES_WRITE (process level) the workspace is read-only to Landlock,
 *               which cannot subtract a protected entry from a writable
 *               tree: the keeper also opens files there for writing,
 *               truncates, removes and renames, refusing any change to a
 *               protected entry that exists (the pre-run scan's, by path
 *               and by inode).
 *   NAMES_CHECK (gvisor's runsc, microvm's QEMU) the caller is cordon's
 *               engine serving the command, not the command: a protected
 *               name at the root is refused, the kernel runs the rest.
 */
#pragma once
#include "common/err.h"

#include <limits.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct landlock_plan;
struct policy;
struct seccomp_program;
struct workspace_guard;

enum names_mode { NAMES_OFF, NAMES_CHECK, NAMES_MAKE, NAMES_WRITE };

struct names_keeper {
    enum names_mode mode;
    const struct policy *p;          /* its filesystem.protected */
    const struct workspace_guard *g; /* NAMES_WRITE: the protected entries that exist */
    const struct landlock_plan *ll;  /* NAMES_WRITE: the other writable trees (a source) */
    /* The workspace's root, set by names_keeper_root() where the keeper runs. */
    int root;
    dev_t dev;
    ino_t ino;
    uint64_t mnt;        /* its mount (NAMES_MAKE: the name's must be it) */
    char real[PATH_MAX]; /* as /proc/self/fd shows it (NAMES_WRITE) */
};

/* K for P's workspace in MODE; the root is set later. */
void names_keeper_init(struct names_keeper *k, enum names_mode mode, const struct policy *p);

/* Where the keeper runs: ROOT (O_PATH, the workspace's root; taken) is the root. 0 or -1. */
int names_keeper_root(struct names_keeper *k, int root);

/* The mode P's host workspace needs at a level whose fallback is MODE (NAMES_OFF: none). */
enum names_mode names_mode_for(const struct policy *p, enum names_mode mode);

/*
 * Would the relative PATH (no ".", ".." or empty component), written into
 * P's workspace from outside the command (a call's files), make what the
 * keeper refuses the command: a protected name at the root, a commit's own?
 */
bool names_refused_path(const struct policy *p, const char *path);

/* A call the keeper of MODE hears: always (FLAGS -1), or when argument FLAGS has a bit of MASK. */
struct names_call {
    int nr;
    int flags;
    unsigned mask;
};

/* MODE's calls into OUT; how many. */
size_t names_calls(enum names_mode mode, struct names_call *out, size_t room);

/*
 * A filter sending MODE's calls (and connect() when CONNECT: usock.h) to
 * the keeper, allowing the rest (other arches: the allowlist kills them).
 */
int names_program(enum names_mode mode, bool connect, struct seccomp_program *out,
                  struct cordon_err *err);

/* Is N one of K's calls? */
bool names_handles(const struct names_keeper *k, const struct seccomp_notif *n);

/* In the keeper: decide, act on and answer N. -1 when LISTENER is gone. */
int names_serve(int listener, const struct seccomp_notif *n, const struct names_keeper *k);

/*
 * NAMES_WRITE, for the metadata keeper: open the absolute PATH (O_PATH, the
 * last component not followed when NOFOLLOW) if it lies in the workspace
 * and is no protected entry, into *FD. 0, -1 when PATH is not in the
 * workspace at all, or the errno the caller gets.
 */
int names_open_writable(const struct names_keeper *k, const char *path, bool nofollow, int *fd);
