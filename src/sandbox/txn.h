/*
 * sandbox/txn.h: a transactional workspace (workspace.mode: overlay). The
 * run writes on an overlayfs upper layer, on a size-capped tmpfs of its own;
 * the host workspace is its read-only lower layer. Once every process of the
 * sandbox is gone the supervisor reads the layer through a descriptor the
 * sandbox handed out before it ran anything:
 *
 *  - txn_scan() walks the layer and decides, before anything is applied,
 *    what the change is (added, changed, removed paths, bytes, a SHA-256 of
 *    the change) and whether it may be committed at all: a device, FIFO or
 *    socket, a link leading out of the workspace, any path with a protected
 *    name (filesystem.protected) or a name the commit itself uses, at any
 *    depth, or a change past the caps refuses the whole commit; in a
 *    repository (a .git at any depth, a bare one), what git would run (a
 *    hook, a config key, info/attributes naming a driver, a gitdir link
 *    out: gitscan.h) is refused alone, named, and the rest commits;
 *  - txn_apply() then commits it all or nothing, by a journal in the
 *    workspace (txn.c says how), each component opened with
 *    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, so a link on either side is
 *    never followed; txn_recover() finishes or undoes a commit whose
 *    process died.
 */
#pragma once
#include "common/err.h"
#include "policy/policy.h"
#include "sandbox/gitscan.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * The names a commit makes in the host workspace (txn.c): its directory
 * ".cordon-txn-ID" at the root, and ".cordon-txn-ID.N[.old]" beside each
 * target. A run's change holding such a name is refused, and a run writing
 * the workspace directly makes none (names.h), so that no commit can hand
 * a later recovery a journal of the run's making.
 */
#define TXN_RESERVED ".cordon-txn-"

/* Caps on what a commit applies; the layer itself is capped by its tmpfs
 * (filesystem.workspace_size and workspace_inodes). */
#define TXN_MAX_ENTRIES 100000
#define TXN_MAX_DEPTH 64
/*
 * How long a commit waits for the workspace's lock (direct runs hold it
 * shared for their lives), and a direct run for a commit under way.
 */
#define TXN_LOCK_WAIT_MS 120000u
/* Paths named in the summary. */
#define TXN_NAMES 16

/*
 * cordon run's exit status when the run's change was refused or could not
 * be applied: the command ran (its output, its egress happened), so not
 * 125, which says cordon could not run it; below timeout(1)'s 124-127 and
 * apart from xargs's 123. The command's own code stays in the result's
 * exit_code and signal.
 */
#define TXN_EXIT_NOT_COMMITTED 122

enum txn_outcome {
    TXN_NONE, /* no layer: direct mode, or the run never started */
    TXN_COMMITTED,
    TXN_DISCARDED, /* by workspace.commit (on_success and the run failed) or a discard */
    TXN_REFUSED,   /* the scan refused it; nothing applied */
    TXN_PENDING,   /* manual: kept until session.commit / session.discard */
    TXN_FAILED,    /* applying failed part way (an I/O error on the host) */
};

const char *txn_outcome_name(enum txn_outcome o);

struct txn_summary {
    enum txn_outcome outcome;
    unsigned added, changed, removed;
    uint64_t bytes;             /* of the regular files added or changed */
    char digest[65];            /* SHA-256 of the change, hex */
    char names[TXN_NAMES][160]; /* "added a/b", "removed c", ... in path order */
    unsigned n_names;
    char reason[256];         /* why it was refused, discarded or failed; "" otherwise */
    struct gitscan_notes git; /* entries refused alone (what git would run); the rest commits */
};

/* S as JSON (the result's and run.end's "transaction"); new reference. */
json_t *txn_summary_json(const struct txn_summary *s);

struct txn;

/*
 * Walk the layer LAYER (the tmpfs holding "upper") against the host
 * workspace HOST (an O_PATH directory) and fill SUM, outcome TXN_REFUSED
 * with the reason when it may not be committed. NULL with ERR only when
 * the layer cannot be read at all.
 */
struct txn *txn_scan(int layer, int host, const struct policy *p, struct txn_summary *sum,
                     struct cordon_err *err);

/* Apply T (not refused) to the host workspace; SUM's outcome says how it went. */
void txn_apply(struct txn *t, struct txn_summary *sum);

void txn_free(struct txn *t);

/*
 * Scan LAYER, then commit or discard it as HOW (a workspace.commit) says
 * for a run that SUCCEEDED or not. Manual keeps it: the outcome is
 * TXN_PENDING and the layer stays with the caller, whose session.commit
 * comes back here with always. Protected names are P's.
 */
void txn_finish(int layer, int host, const struct policy *p, enum policy_ws_commit how,
                bool succeeded, struct txn_summary *sum);

/* What txn_recover() found and did. */
struct txn_recovery {
    unsigned rolled_back;    /* interrupted before their point of no return: undone */
    unsigned rolled_forward; /* past it: finished */
    unsigned failed;         /* left as they were; REASON says why */
    bool busy;               /* a commit or recovery held the workspace: left to it */
    char reason[256];
    /*
     * Entries someone else (a host process) changed while the commit was
     * under way: theirs stays, and what the commit had moved is kept
     * beside it as "NAME.cordon-old-ID" (or -new-, -other-); NOTE says
     * which and where. The tree is whole again all the same.
     */
    unsigned settled;
    char settled_note[200];
};

/*
 * Finish or undo every commit that died in the host workspace HOST (an
 * O_PATH directory), as its journal says, so the tree is wholly old or
 * wholly new again and no name of the commit's is left. Waits up to
 * WAIT_MS for a commit under way (then REC's busy). P's protected names
 * check every path a journal names. -1 when one could not be recovered.
 */
int txn_recover(int host, const struct policy *p, unsigned wait_ms, struct txn_recovery *rec);

/*
 * For a run that writes HOST directly (-w, workspace.mode: direct): as
 * txn_recover(), then hold the workspace shared for the run's life, so no
 * commit applies while the run can write (a commit waits for the lock, up
 * to TXN_LOCK_WAIT_MS, then is not applied). Waits up to WAIT_MS for a commit under
 * way. The descriptor holding the lock (the caller closes it when the run
 * is over), or -1 with REC's reason (busy: a commit held it so long).
 */
int txn_share(int host, const struct policy *p, unsigned wait_ms, struct txn_recovery *rec);
