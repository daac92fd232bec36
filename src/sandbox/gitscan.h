/*
 * sandbox/gitscan.h: what git would run, later on the host, from a
 * repository the run wrote in a host workspace. Its objects, refs, index,
 * logs and HEAD are the run's to write (commit, branch, clone work); these
 * are not, in any repository of the workspace (a .git directory at any
 * depth, a bare one, a submodule's under .git/modules, a linked worktree's):
 *
 *  - a hook: an entry of hooks/ made or changed by the run (its .sample
 *    files aside, which git never runs) is removed, or given back the bytes
 *    and mode it had; one the run removed is put back;
 *  - a config key that makes git run a program or read another file
 *    (policy/gitconfig.h, `cordon check --protected`) in config,
 *    config.worktree or a worktree's config.worktree, unless the file held
 *    the same key and value before: its lines are taken out (the rest of
 *    the file stays); a file not in git's syntax is put back, or removed;
 *  - info/attributes naming a filter, diff or merge driver (hidden from
 *    git status, unlike .gitattributes): put back, or removed; so is an
 *    info/ that is a link (git reads through it, the scan does not);
 *  - a gitdir or commondir pointer (a .git file, a worktree's) leading out
 *    of the workspace: removed, as is a commondir leading to a directory
 *    that is no repository the scan checks (objects, refs and a config
 *    with no HEAD: git reads that config), or one that is not a regular
 *    file (git reads it through a link); one written as the sandbox sees the
 *    workspace (/workspace/...) is rewritten to the host's path, so a
 *    worktree made inside works outside.
 *
 * A repository is what git may take for one (gitscan_is_gitdir()): HEAD,
 * and objects and refs or a commondir, each of any type.
 *
 * Direct mode: gitscan_record() before the run keeps what the repositories
 * found hold; the post-run scan (workspace.c) calls gitscan_dir() on every
 * git directory and gitscan_gitfile() on every .git file. Overlay mode: the
 * commit's scan (txn_scan.c) refuses such an entry alone and commits the
 * rest. Every refusal is named (struct gitscan_notes) in the result, the
 * audit's run.end and one line on stderr. Runs in the supervisor once no
 * process of the run is left; files are read and written by descriptor,
 * never through a link.
 */
#pragma once
#include "common/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

struct policy;

/* Does P keep .git among its protected names (unless filesystem.unsafe_unprotect took it out)? */
bool gitscan_enabled(const struct policy *p);

/* Bounds: a file read whole, what is kept of the repositories before the run. */
#define GITSCAN_FILE_MAX (1u << 20)
#define GITSCAN_KEPT_MAX (16u << 20)
#define GITSCAN_REPOS_MAX 256
#define GITSCAN_NOTES 96

/* The refusals, as "what where" lines; TOTAL counts past the lines kept. */
struct gitscan_notes {
    unsigned total;
    unsigned n;
    char line[GITSCAN_NOTES][200];
};

/* One more refusal in NOTES (counted past the lines kept). */
__attribute__((format(printf, 2, 3))) void gitscan_note(struct gitscan_notes *notes,
                                                        const char *fmt, ...);

/* NOTES as a JSON array of its lines; new reference. */
json_t *gitscan_notes_json(const struct gitscan_notes *notes);

struct gitscan_file;

/* What the repositories of a workspace held before the run (direct mode). */
struct gitscan {
    struct gitscan_file *files;
    size_t n_files;
    size_t kept; /* bytes */
    unsigned n_repos;
    bool incomplete; /* a bound was reached: what was not kept is removed, not put back */
};

/*
 * Keep what the git directory REL (of the workspace WS, an O_PATH
 * descriptor) holds that git runs or reads: configs, hooks, info/
 * attributes; and its submodules' (modules/). 0, or -1 with ERR (memory).
 */
int gitscan_record(struct gitscan *gs, int ws, const char *rel, struct cordon_err *err);

void gitscan_release(struct gitscan *gs);

/*
 * Would DIR (a directory) be a git directory to git, were the entry ADDING
 * (NULL: none) made in it: HEAD, and objects and refs or a commondir
 * pointer, each of any type (git asks access(X_OK) of objects and refs, which a
 * file with an exec bit passes, and takes them from the commondir when
 * there is one). For a write to refuse, and (nothing added) for the scans.
 */
bool gitscan_gitdir_shaped(int dir, const char *adding);

/*
 * Might git take DIR (a directory) for a git directory (is_git_directory():
 * HEAD, and objects and refs or a commondir)? Each entry of any type, as
 * gitscan_gitdir_shaped() with nothing added: what the scans look at.
 */
bool gitscan_is_gitdir(int dir);

/*
 * Is the path component NAME (LEN bytes) a .git to git on some filesystem
 * Linux mounts: ".git" whatever its case (a casefolded directory, vfat),
 * trailing dots and spaces aside (vfat and ntfs3 drop them), or its 8.3
 * short name "git~1"?
 */
bool gitscan_dotgit_name(const char *name, size_t len);

/*
 * After the run: the git directory DIR (REL in the workspace, DEPTH
 * directories below its root) made to hold nothing the run chose for git
 * to run (see above), against what GS kept. HOST_WS is the workspace's
 * host path. *INCOMPLETE is set when something could not be checked.
 */
void gitscan_dir(const struct gitscan *gs, int dir, const char *rel, unsigned depth,
                 const char *host_ws, struct gitscan_notes *notes, bool *incomplete);

/*
 * After the run: the .git file NAME in DIR (REL, DEPTH directories below
 * the root): a gitdir pointer that leaves the workspace is removed, one to
 * /workspace/... rewritten to HOST_WS. True when it is left (rewritten or not).
 */
bool gitscan_gitfile(int dir, const char *name, const char *rel, unsigned depth,
                     const char *host_ws, struct gitscan_notes *notes);

/* ---- the judgements, shared with the overlay commit's scan ---- */

enum gitscan_config {
    GITSCAN_CONFIG_OK,     /* nothing to refuse */
    GITSCAN_CONFIG_KEYS,   /* keys to refuse: each noted */
    GITSCAN_CONFIG_SYNTAX, /* not git's syntax (or not readable so): why, in WHY */
};

/*
 * The config NEW (NLEN bytes) WHERE, of a git directory DEPTH below the
 * root, against OLD (NULL: none before). Each key refused is noted in
 * NOTES ("refused KEY in WHERE: why"). When KEEP is set and keys are
 * refused, *KEEP is the text without their lines (malloc'd, *KEEP_LEN).
 */
enum gitscan_config gitscan_config(const char *new, size_t nlen, const char *old, size_t olen,
                                   unsigned depth, const char *where, struct gitscan_notes *notes,
                                   char *why, size_t why_len, char **keep, size_t *keep_len);

/* Does the attributes text TEXT name a filter, diff or merge driver? Which, in WHY. */
bool gitscan_attributes_refused(const char *text, size_t len, char *why, size_t why_len);

/* Is the hooks/ entry NAME (of MODE) one git never runs? */
bool gitscan_hook_inert(const char *name, mode_t mode);

enum gitscan_pointer {
    GITSCAN_POINTER_OK,      /* stays inside the workspace as written */
    GITSCAN_POINTER_REWRITE, /* names /workspace/...: OUT holds the host's spelling */
    GITSCAN_POINTER_OUT,     /* leaves the workspace: refused */
};

/*
 * A pointer file's TEXT: a .git file's "gitdir: X" (GITDIR) or a
 * commondir's "X", in a directory DEPTH below the root of the workspace at
 * HOST_WS. Relative paths count from that directory.
 */
enum gitscan_pointer gitscan_pointer(const char *text, size_t len, bool gitdir, unsigned depth,
                                     const char *host_ws, char *out, size_t out_len);

/* Read the regular file NAME in DIR (not through a link) whole, up to CAP bytes: malloc'd. */
char *gitscan_read(int dir, const char *name, size_t cap, size_t *len);
