/*
 * sandbox/workspace.c: the scans of a host workspace before and after a run
 * (see workspace.h). Runs in the supervisor. Every walk goes by descriptor,
 * one component at a time, never through a link.
 */
#include "sandbox/workspace.h"

#include "common/cleanup.h"
#include "common/hostpath.h"
#include "common/syscalls.h"
#include "sandbox/txn.h"
#include "policy/policy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Trees the pre-run scan does not enter: git's own (protected whole) and package trees. */
static const char *const pre_skip[] = { ".git", "node_modules" };

bool workspace_target_escapes(unsigned depth, const char *target)
{
    if (target[0] == '/' || target[0] == '\0')
        return true;
    long level = depth;
    const char *c = target;
    while (*c) {
        const char *end = strchrnul(c, '/');
        size_t n = (size_t)(end - c);
        if (n == 2 && c[0] == '.' && c[1] == '.') {
            if (--level < 0)
                return true;
        } else if (n && !(n == 1 && c[0] == '.')) {
            level++;
        }
        c = *end ? end + 1 : end;
    }
    return false;
}

bool workspace_target_system(const char *target)
{
    static const char *const tops[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
    if (target[0] != '/')
        return false;
    bool top = true, known = false;
    for (const char *c = target; *c;) {
        while (*c == '/')
            c++;
        const char *end = strchrnul(c, '/');
        size_t n = (size_t)(end - c);
        if (n == 2 && c[0] == '.' && c[1] == '.')
            return false;
        if (n && !(n == 1 && c[0] == '.') && top) {
            for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++)
                known |= strlen(tops[i]) == n && memcmp(tops[i], c, n) == 0;
            top = false;
        }
        c = end;
    }
    return known;
}

/* Is NAME protected: covered where it exists, refused where it does not (.git is checked). */
static bool protected_name(const struct policy *p, const char *name)
{
    for (size_t i = 0; i < p->n_protected; i++)
        if (!policy_protected_checked(p->protected[i]) &&
            policy_protected_match(p->protected[i], name))
            return true;
    return false;
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* A directory beneath DIR, opened for reading, never through a link. */
static int open_subdir(int dir, const char *name)
{
    return openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static int join(char *out, size_t size, const char *rel, const char *name)
{
    int n = snprintf(out, size, "%s%s%s", rel, rel[0] ? "/" : "", name);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* ---- before the run ---- */

static int cover(struct workspace_guard *g, const char *rel, enum workspace_cover how,
                 struct cordon_err *err)
{
    if (g->n_entries >= WORKSPACE_MAX_COVERED)
        return err_set(err, CORDON_E_SETUP,
                       "workspace: more than %d protected entries, sockets and fifos to cover "
                       "(at '%s'); unprotect some or use a smaller workspace",
                       WORKSPACE_MAX_COVERED, rel);
    struct workspace_entry *n = realloc(g->entries, (g->n_entries + 1) * sizeof *n);
    if (!n)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    g->entries = n;
    if (!(n[g->n_entries].rel = strdup(rel)))
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    n[g->n_entries++].cover = how;
    return 0;
}

static int pre_walk(const struct policy *p, struct workspace_guard *g, int fd, const char *rel,
                    unsigned depth, unsigned *budget, struct cordon_err *err)
{
    /* A repository (a bare one, the workspace itself): what git runs from it, kept. */
    bool direct = p->workspace_mode == POLICY_WS_DIRECT && gitscan_enabled(p);
    if (direct && gitscan_is_gitdir(fd) &&
        gitscan_record(&g->git, g->fd, rel[0] ? rel : ".", err) < 0) {
        close(fd);
        return -1;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return err_sys(err, CORDON_E_SETUP, "workspace: cannot read '%s'", rel[0] ? rel : ".");
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (errno = 0, e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (*budget == 0) {
            g->incomplete = true;
            break;
        }
        (*budget)--;
        char path[PATH_MAX];
        struct stat st;
        if (join(path, sizeof path, rel, e->d_name) < 0 ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            g->incomplete = true;
            continue;
        }
        if (direct && S_ISDIR(st.st_mode) && !strcmp(e->d_name, ".git")) {
            rc = gitscan_record(&g->git, g->fd, path, err);
            continue;
        }
        if (protected_name(p, e->d_name)) {
            /* A link cannot be bound over itself: it is hidden instead. */
            rc = cover(g, path, S_ISLNK(st.st_mode) ? WORKSPACE_MASK : WORKSPACE_READ_ONLY, err);
            continue;
        }
        if (S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode)) {
            rc = cover(g, path, WORKSPACE_MASK, err);
            continue;
        }
        if (!S_ISDIR(st.st_mode))
            continue;
        bool skip = false;
        for (size_t i = 0; i < sizeof pre_skip / sizeof pre_skip[0]; i++)
            skip |= strcmp(e->d_name, pre_skip[i]) == 0;
        if (skip)
            continue;
        if (depth + 1 >= WORKSPACE_PRE_DEPTH) {
            g->incomplete = true;
            continue;
        }
        int sub = open_subdir(dirfd(d), e->d_name);
        if (sub < 0) {
            g->incomplete = true; /* unreadable: the sandbox user cannot enter it either */
            continue;
        }
        rc = pre_walk(p, g, sub, path, depth + 1, budget, err);
    }
    closedir(d);
    return rc;
}

static int mode_cmp(const void *a, const void *b);

/* The directories between the root and each protected entry, by inode (see workspace.h). */
static int record_holders(struct workspace_guard *g, struct cordon_err *err)
{
    for (size_t i = 0; i < g->n_entries; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s", g->entries[i].rel);
        for (char *slash = strrchr(path, '/'); slash; slash = strrchr(path, '/')) {
            *slash = '\0';
            struct stat st;
            if (fstatat(g->fd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                continue;
            struct workspace_mode *n = realloc(g->holders, (g->n_holders + 1) * sizeof *n);
            if (!n)
                return err_set(err, CORDON_E_INTERNAL, "out of memory");
            g->holders = n;
            n[g->n_holders++] = (struct workspace_mode){ .dev = st.st_dev, .ino = st.st_ino };
        }
    }
    if (g->n_holders)
        qsort(g->holders, g->n_holders, sizeof g->holders[0], mode_cmp);
    return 0;
}

static int mode_cmp(const void *a, const void *b)
{
    const struct workspace_mode *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static int remember(struct workspace_guard *g, const struct stat *st, size_t *cap,
                    struct cordon_err *err)
{
    if (g->n_modes == WORKSPACE_MODES_MAX) {
        g->incomplete = true;
        return 0;
    }
    if (g->n_modes == *cap) {
        size_t n = *cap ? 2 * *cap : 256;
        struct workspace_mode *m = realloc(g->modes, n * sizeof *m);
        if (!m)
            return err_set(err, CORDON_E_INTERNAL, "out of memory");
        g->modes = m;
        *cap = n;
    }
    g->modes[g->n_modes++] = (struct workspace_mode){ .dev = st->st_dev,
                                                      .ino = st->st_ino,
                                                      .mode = st->st_mode,
                                                      .uid = st->st_uid,
                                                      .gid = st->st_gid };
    return 0;
}

/*
 * Is REL (a directory) git's object store or in it? Loose objects and packs
 * are content-addressed, checked by git on every read and made 0444 by it:
 * the scans pass over the files there (thousands, in a repository of any
 * age) by their directory entry's type, without a stat each.
 */
static bool git_objects(const char *rel)
{
    for (const char *m = rel; (m = strstr(m, ".git/objects")); m++)
        if ((m == rel || m[-1] == '/') && (m[12] == '\0' || m[12] == '/'))
            return true;
    return false;
}

/* Every entry beneath the directory FD (taken; REL), as remember() keeps them. */
static int record_tree(struct workspace_guard *g, int fd, const char *rel, unsigned depth,
                       size_t *cap, struct cordon_err *err)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        g->incomplete = true;
        return 0;
    }
    bool objects = git_objects(rel);
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        struct stat st;
        char path[PATH_MAX];
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || (objects && e->d_type == DT_REG))
            continue;
        if (join(path, sizeof path, rel, e->d_name) < 0 ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            g->incomplete = true;
            continue;
        }
        rc = remember(g, &st, cap, err);
        if (rc < 0 || !S_ISDIR(st.st_mode) || objects)
            continue; /* objects/ab holds objects only: its own mode is what is kept */
        int sub = depth + 1 < WORKSPACE_POST_DEPTH ? open_subdir(dirfd(d), e->d_name) : -1;
        if (sub < 0)
            g->incomplete = true;
        else
            rc = record_tree(g, sub, path, depth + 1, cap, err);
    }
    closedir(d);
    return rc;
}

/*
 * The modes and owners of the protected entries found (the whole tree of
 * each directory: .vscode with its tasks), before the run: the after-run
 * scan puts back any that changed.
 */
static int record_modes(struct workspace_guard *g, struct cordon_err *err)
{
    size_t cap = 0;
    for (size_t i = 0; i < g->n_entries; i++) {
        struct stat st;
        if (g->entries[i].cover != WORKSPACE_READ_ONLY ||
            fstatat(g->fd, g->entries[i].rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        TRY(remember(g, &st, &cap, err));
        int sub = S_ISDIR(st.st_mode) ? open_subdir(g->fd, g->entries[i].rel) : -1;
        if (sub >= 0)
            TRY(record_tree(g, sub, g->entries[i].rel, 0, &cap, err));
    }
    if (g->n_modes) /* qsort and bsearch take no NULL array, even of none */
        qsort(g->modes, g->n_modes, sizeof g->modes[0], mode_cmp);
    return 0;
}

/*
 * The run's start, as inode times will compare with it. A change gets a
 * ctime from the coarse clock (one tick behind) or, under multigrain
 * timestamps, the fine one; taking the fine time and waiting until the
 * coarse clock has passed it makes every later change compare >= START,
 * and no host change made before compare so. At most a tick's wait.
 */
static void mark_start(struct timespec *start)
{
    clock_gettime(CLOCK_REALTIME, start);
    for (int i = 0; i < 100; i++) {
        struct timespec coarse;
        clock_gettime(CLOCK_REALTIME_COARSE, &coarse);
        if (!ts_before(&coarse, start))
            return;
        nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
    }
}

int workspace_prepare(const struct policy *p, struct workspace_guard *g, struct cordon_err *err)
{
    if (!p->workspace)
        return 0;
    g->fd = hostpath_open(AT_FDCWD, p->workspace, O_PATH | O_DIRECTORY, 0,
                          p->workspace_follow_symlinks, err);
    if (g->fd < 0)
        return err_prefix(err, "workspace");
    /*
     * A commit into it that died is finished or undone first: the run sees a
     * whole tree. A run writing it directly then holds it shared for its
     * life, so that no commit applies under its feet (a commit is short: a
     * direct run waits for one; a commit waits for direct runs, bounded).
     */
    struct txn_recovery rec;
    bool direct = p->workspace_mode == POLICY_WS_DIRECT;
    if (direct)
        g->shared = txn_share(g->fd, p, TXN_LOCK_WAIT_MS, &rec);
    if (direct && g->shared < 0 && rec.busy) {
        err_set(err, CORDON_E_SETUP, "workspace: %s; try again when it is done", rec.reason);
        goto fail;
    }
    if ((direct && g->shared < 0) || (!direct && txn_recover(g->fd, p, 0, &rec) < 0)) {
        err_set(err, CORDON_E_SETUP,
                "workspace: an interrupted commit could not be finished or "
                "undone (%s); cordon check -w '%s' tries again",
                rec.reason, p->workspace);
        goto fail;
    }
    /*
     * The run is live on this tree: a read lock (an OFD record lock, which
     * leaves flock() to the commit's own lock) that a restarted daemon waits
     * out before it removes a session. Never waited for: a writer's lock is
     * none of ours to respect, and that run's commit is discarded anyway
     * (sandbox_call.parent).
     */
    g->lock = openat(g->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (g->lock >= 0 && sys_ofd_lock(g->lock, F_RDLCK) < 0) {
        close(g->lock);
        g->lock = -1;
    }
    int top = openat(g->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (top < 0)
        return err_sys(err, CORDON_E_SETUP, "workspace: cannot read '%s'", p->workspace);
    unsigned budget = WORKSPACE_PRE_ENTRIES;
    if (pre_walk(p, g, top, "", 0, &budget, err) < 0)
        goto fail;
    /* An overlay's run never writes the host tree: nothing to put back. */
    if (p->workspace_mode == POLICY_WS_DIRECT &&
        (record_modes(g, err) < 0 || record_holders(g, err) < 0))
        goto fail;
    mark_start(&g->start);
    return 0;
fail:
    workspace_guard_release(g);
    return -1;
}

/* ---- after the run ---- */

static void note(struct workspace_report *rep, const char *what, const char *rel)
{
    if (rep->n_names < WORKSPACE_NAMES)
        snprintf(rep->names[rep->n_names++], sizeof rep->names[0], "%s %.*s", what,
                 (int)(sizeof rep->names[0] - strlen(what) - 2), rel); /* cut, not overrun */
}

static bool is_covered(const struct workspace_guard *g, const char *rel)
{
    for (size_t i = 0; i < g->n_entries; i++)
        if (g->entries[i].cover == WORKSPACE_READ_ONLY && strcmp(g->entries[i].rel, rel) == 0)
            return true;
    return false;
}

/*
 * Does the link REL lead out of the workspace: on its face, or when
 * resolved beneath the workspace (through links that were already there)?
 * A dangling link that stays inside on its face is kept.
 */
static bool link_leaves(int ws, int dir, const char *name, const char *rel, unsigned depth)
{
    char target[PATH_MAX];
    ssize_t n = readlinkat(dir, name, target, sizeof target - 1);
    if (n < 0)
        return true; /* unreadable: not a link worth keeping */
    target[n] = '\0';
    if (workspace_target_system(target))
        return false; /* the host's own /usr: nothing new (a venv's interpreter) */
    if (workspace_target_escapes(depth, target))
        return true;
    struct open_how how = {
        .flags = O_PATH | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    int fd = sys_openat2(ws, rel, &how, sizeof how);
    if (fd >= 0) {
        close(fd);
        return false;
    }
    return errno == EXDEV || errno == ELOOP;
}

/*
 * An entry of a protected tree (ST, NAME in DFD) whose mode or owner is not
 * what the pre-run scan recorded gets it back, by descriptor. False when it
 * was not recorded (new since: the ordinary rules apply).
 */
static bool restore_mode(const struct workspace_guard *g, int dfd, const char *name,
                         const struct stat *st, const char *rel, struct workspace_report *rep)
{
    struct workspace_mode key = { .dev = st->st_dev, .ino = st->st_ino };
    const struct workspace_mode *m =
        g->n_modes ? bsearch(&key, g->modes, g->n_modes, sizeof key, mode_cmp) : NULL;
    if (!m || (m->mode & S_IFMT) != (st->st_mode & S_IFMT))
        return false;
    if ((m->mode & 07777) == (st->st_mode & 07777) && m->uid == st->st_uid && m->gid == st->st_gid)
        return true;
    int f = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", f);
    bool done = f >= 0 &&
        ((m->uid == st->st_uid && m->gid == st->st_gid) ||
         fchownat(f, "", m->uid, m->gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0) &&
        (S_ISLNK(st->st_mode) || chmod(proc, m->mode & 07777) == 0);
    if (f >= 0)
        close(f);
    if (done) {
        rep->modes_restored++;
        note(rep, "restored mode of", rel);
    } else {
        rep->scan_incomplete = true;
    }
    return true;
}

static void post_walk(const struct policy *p, struct workspace_guard *g, int fd, const char *rel,
                      unsigned depth, bool guarded, unsigned *budget, struct workspace_report *rep)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        rep->scan_incomplete = true;
        return;
    }
    bool objects = guarded && git_objects(rel);
    bool direct = p->workspace_mode == POLICY_WS_DIRECT && gitscan_enabled(p);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || (objects && e->d_type == DT_REG))
            continue;
        if (*budget == 0) {
            rep->scan_incomplete = true;
            break;
        }
        (*budget)--;
        char path[PATH_MAX];
        struct stat st;
        int dfd = dirfd(d);
        if (join(path, sizeof path, rel, e->d_name) < 0 ||
            fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rep->scan_incomplete = true;
            continue;
        }
        bool recent = !ts_before(&st.st_ctim, &g->start), changed = recent;
        mode_t type = st.st_mode & S_IFMT;
        bool protected = guarded || is_covered(g, path);
        if (recent && protected && restore_mode(g, dfd, e->d_name, &st, path, rep)) {
            recent = false; /* what it was before the run: the rules below are not for it */
            if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
        }
        if (recent && protected_name(p, e->d_name) && !is_covered(g, path)) {
            /* Refused at the root as it is made (names.h); below, the run's: reported. */
            rep->created_protected++;
            note(rep, "created protected", path);
        }
        /* A .git file is a gitdir link: to the workspace's own repositories only. */
        if (recent && direct && type == S_IFREG && !strcmp(e->d_name, ".git") &&
            !gitscan_gitfile(dfd, e->d_name, path, depth, p->workspace, &rep->git))
            continue;
        if (recent &&
            (type == S_IFLNK || type == S_IFIFO || type == S_IFSOCK || type == S_IFCHR ||
             type == S_IFBLK)) {
            if (type == S_IFLNK && !link_leaves(g->fd, dfd, e->d_name, path, depth))
                continue;
            if (unlinkat(dfd, e->d_name, 0) == 0) {
                rep->removed++;
                note(rep, type == S_IFLNK ? "removed link" : "removed special file", path);
            } else {
                rep->scan_incomplete = true;
            }
            continue;
        }
        mode_t bad = S_IWOTH | (type == S_IFREG ? S_ISUID | S_ISGID : 0);
        if (recent && (type == S_IFREG || type == S_IFDIR) && (st.st_mode & bad)) {
            /* By descriptor, so the name cannot turn into a link in between. */
            int f = openat(dfd, e->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
            char proc[64];
            snprintf(proc, sizeof proc, "/proc/self/fd/%d", f);
            if (f >= 0 && chmod(proc, st.st_mode & 07777 & ~bad) == 0) {
                rep->modes_fixed++;
                note(rep, "fixed mode of", path);
            } else {
                rep->scan_incomplete = true;
            }
            if (f >= 0)
                close(f);
        }
        if (type != S_IFDIR || (objects && !changed))
            continue; /* objects/ab with no entry made since the start: nothing new in it */
        /* Protected trees too: read-only all run long where a level holds
         * them, and looked at all the same in case one did not. */
        if (depth + 1 >= WORKSPACE_POST_DEPTH) {
            rep->scan_incomplete = true;
            continue;
        }
        int sub = open_subdir(dfd, e->d_name);
        if (sub < 0) {
            rep->scan_incomplete = true;
            continue;
        }
        /* A .git that is not a repository yet is one after a git init there. */
        if (direct && (!strcmp(e->d_name, ".git") || gitscan_is_gitdir(sub)))
            gitscan_dir(&g->git, sub, path, depth + 1, p->workspace, &rep->git,
                        &rep->scan_incomplete);
        post_walk(p, g, sub, path, depth + 1, protected, budget, rep);
    }
    closedir(d);
}

void workspace_finish(const struct policy *p, struct workspace_guard *g,
                      struct workspace_report *rep)
{
    if (g->fd < 0)
        return;
    rep->scanned = true;
    rep->scan_incomplete = g->incomplete;
    for (size_t i = 0; i < g->n_entries; i++) {
        if (g->entries[i].cover == WORKSPACE_READ_ONLY)
            rep->covered_read_only++;
        else
            rep->masked++;
    }
    int top = openat(g->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (top < 0) {
        rep->scan_incomplete = true;
        return;
    }
    /* The workspace may be a repository itself (a bare one). */
    if (p->workspace_mode == POLICY_WS_DIRECT && gitscan_enabled(p) && gitscan_is_gitdir(top))
        gitscan_dir(&g->git, top, ".", 0, p->workspace, &rep->git, &rep->scan_incomplete);
    rep->scan_incomplete |= g->git.incomplete;
    unsigned budget = WORKSPACE_POST_ENTRIES;
    post_walk(p, g, top, "", 0, false, &budget, rep);
}

json_t *workspace_report_json(const struct workspace_report *w)
{
    json_t *paths = json_array();
    for (unsigned i = 0; paths && i < w->n_names; i++)
        json_array_append_new(paths, json_string(w->names[i]));
    /* clang-format off */
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:o, s:I, s:o}",
                     "read_only", (json_int_t)w->covered_read_only,
                     "masked", (json_int_t)w->masked,
                     "removed", (json_int_t)w->removed,
                     "modes_fixed", (json_int_t)w->modes_fixed,
                     "modes_restored", (json_int_t)w->modes_restored,
                     "created_protected", (json_int_t)w->created_protected,
                     "scan_incomplete", w->scan_incomplete, "paths", paths,
                     "git_refused", (json_int_t)w->git.total, "git", gitscan_notes_json(&w->git));
    /* clang-format on */
}

void workspace_guard_release(struct workspace_guard *g)
{
    for (size_t i = 0; i < g->n_entries; i++)
        free(g->entries[i].rel);
    free(g->entries);
    free(g->modes);
    free(g->holders);
    gitscan_release(&g->git);
    closep(&g->fd);
    closep(&g->lock);   /* a restarted daemon may now remove the workspace */
    closep(&g->shared); /* commits may apply again */
    *g = (struct workspace_guard)WORKSPACE_GUARD_INIT;
}
