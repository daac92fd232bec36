/*
 * sandbox/workspace.h: what a run may hand back through a host workspace
 * (-w). Whatever it leaves there waits for the user's git, shell, editor and
 * agent afterwards. All of it runs in the supervisor:
 *
 *  - before the run, a bounded scan finds the protected names
 *    (filesystem.protected) that exist, which the mount plan covers with
 *    read-only binds of themselves, and the sockets and FIFOs already there,
 *    which it masks. A missing one is never made on the host: a keeper
 *    refuses it as the run makes it (names.h), so nothing of cordon's
 *    shows in the workspace before, during or after the run;
 *  - after the run, with every process of the sandbox gone, a bounded scan
 *    of what changed since the start (ctime, which the run cannot set back)
 *    removes links that leave the workspace, FIFOs, sockets and device
 *    nodes, and strips o+w and set-id bits, inside the protected trees
 *    too; an entry of those trees whose mode or owner changed gets back what
 *    it had before the run (recorded by the pre-run scan); and in every
 *    repository (a .git at any depth, a bare one), what git would run
 *    later is refused (gitscan.h).
 *
 * The scratch tmpfs workspace hands nothing back and needs none of this.
 */
#pragma once
#include "common/err.h"
#include "sandbox/gitscan.h"

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

struct policy;

/* The bounds of the two scans: how deep, and how many entries examined. */
#define WORKSPACE_PRE_DEPTH 8
#define WORKSPACE_PRE_ENTRIES 50000
#define WORKSPACE_POST_DEPTH 32
#define WORKSPACE_POST_ENTRIES 200000
/* Entries of the protected trees whose modes the pre-run scan records. */
#define WORKSPACE_MODES_MAX 100000
/* Each protected entry or mask is a mount; past this the run is refused. */
#define WORKSPACE_MAX_COVERED 256
/* Paths named in the result and the audit event. */
#define WORKSPACE_NAMES 16

enum workspace_cover {
    WORKSPACE_READ_ONLY, /* a protected file or directory: bound read-only over itself */
    WORKSPACE_MASK,      /* a socket, FIFO or protected link: an empty read-only file on it */
};

struct workspace_entry {
    char *rel; /* relative to the workspace, no leading '/' */
    enum workspace_cover cover;
};

/* A protected tree's entry as it was before the run: what the after-run scan puts back. */
struct workspace_mode {
    dev_t dev;
    ino_t ino;
    mode_t mode;
    uid_t uid;
    gid_t gid;
};

struct workspace_guard {
    int fd;                /* the workspace, O_PATH, opened without following links */
    int lock;              /* the workspace again, read-locked (an OFD record lock) for
                                the run's life, or -1: whoever removes workspaces it hands
                                out (the daemon's sessions) waits until none is held
                                first, so never removes one a run still writes to or
                                commits into; flock() is the commit's own (txn.c) */
    int shared;            /* a direct run's flock(LOCK_SH) on it, for its life (txn_share()):
                                no commit applies while the run can write, or -1 */
    struct timespec start; /* CLOCK_REALTIME_COARSE once scanned, before the run began */
    struct workspace_entry *entries;
    size_t n_entries;
    struct workspace_mode *modes; /* sorted by device and inode */
    size_t n_modes;
    /* The directories holding a protected entry below the root, sorted by device and
     * inode: moved, they would take it along (names.h refuses their rename). */
    struct workspace_mode *holders;
    size_t n_holders;
    struct gitscan git; /* what its repositories' hooks and configs held (direct mode) */
    bool incomplete;    /* the pre-run scan was cut by its bounds */
};

#define WORKSPACE_GUARD_INIT               \
    {                                      \
        .fd = -1, .lock = -1, .shared = -1 \
    }

/* What the after-run scan did, for the result and the audit record. */
struct workspace_report {
    bool scanned;
    unsigned covered_read_only, masked;
    unsigned removed, modes_fixed, created_protected;
    unsigned modes_restored;          /* entries of protected trees given their mode back */
    bool scan_incomplete;             /* either scan was cut by its bounds */
    char names[WORKSPACE_NAMES][128]; /* "removed link a/b", ... */
    unsigned n_names;
    struct gitscan_notes git; /* what git would have run, refused (gitscan.h) */
};

/* REP as JSON (the result's and the audit event's "workspace"); new reference. */
json_t *workspace_report_json(const struct workspace_report *rep);

/*
 * Before the run: finish or undo a commit into P's workspace that died
 * (txn_recover()), and scan it. Leaves nothing on the host.
 */
int workspace_prepare(const struct policy *p, struct workspace_guard *g, struct cordon_err *err);

/*
 * After the run, once no process of it is left: the scan that removes and
 * fixes. Fills REP; failures are counted in it rather than returned (the
 * run's own result stands).
 */
void workspace_finish(const struct policy *p, struct workspace_guard *g,
                      struct workspace_report *rep);

/* Free G; idempotent. */
void workspace_guard_release(struct workspace_guard *g);

/*
 * Does a link at DEPTH directories below the workspace root, holding
 * TARGET, point outside it on its face (absolute, or ".." climbing above
 * the root)? Pure.
 */
bool workspace_target_escapes(unsigned depth, const char *target);

/*
 * Does TARGET, a link's content, name the read-only system tree every
 * sandbox has as the host has it: absolute, no "..", beneath /usr or one
 * of the merged-/usr names (/bin, /lib, /lib64, the loader's, ...)? Such a
 * link (a venv's bin/python3 -> /usr/bin/python3) gives the host nothing
 * new and is kept; every other link out is not. Pure.
 */
bool workspace_target_system(const char *target);
