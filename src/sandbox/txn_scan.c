/*
 * sandbox/txn_scan.c: a transactional workspace's scan (see txn.h): what
 * the run's layer changes, and whether it may be committed at all. Runs in
 * the supervisor once the sandbox is gone. Every path is walked by
 * descriptor: the layer with RESOLVE_BENEATH, the host workspace with
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, so a link either side holds (planted
 * by this run, or an earlier one) is read as a link, never followed.
 */
#include "sandbox/txn_int.h"

#include "common/cleanup.h"
#include "common/syscalls.h"
#include "common/text.h"
#include "policy/policy.h"
#include "sandbox/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define UPPER "upper"

const char *txn_outcome_name(enum txn_outcome o)
{
    static const char *const names[] = { "none",    "committed", "discarded",
                                         "refused", "pending",   "failed" };
    return (unsigned)o < sizeof names / sizeof names[0] ? names[o] : "?";
}

json_t *txn_summary_json(const struct txn_summary *s)
{
    json_t *names = json_array();
    for (unsigned i = 0; i < s->n_names; i++)
        json_array_append_new(names, json_string(s->names[i]));
    /* clang-format off */
    json_t *o = json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:s, s:o, s:I, s:o}",
                          "outcome", txn_outcome_name(s->outcome),
                          "committed", s->outcome == TXN_COMMITTED,
                          "added", (json_int_t)s->added, "changed", (json_int_t)s->changed,
                          "removed", (json_int_t)s->removed, "bytes", (json_int_t)s->bytes,
                          "digest", s->digest, "paths", names,
                          "git_refused", (json_int_t)s->git.total,
                          "git", gitscan_notes_json(&s->git));
    /* clang-format on */
    if (o && s->reason[0]) {
        /* Paths are the run's bytes: controls and bad UTF-8 quoted, as jansson needs. */
        char reason[sizeof s->reason];
        memcpy(reason, s->reason, sizeof reason);
        text_escape_controls(reason, sizeof reason);
        json_object_set_new(o, "reason", json_string(reason));
    }
    return o;
}

/* The first refusal is the one told; the scan goes on for the summary. */
__attribute__((format(printf, 2, 3))) static void refuse(struct txn_summary *sum, const char *fmt,
                                                         ...)
{
    if (sum->outcome == TXN_REFUSED)
        return;
    sum->outcome = TXN_REFUSED;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sum->reason, sizeof sum->reason, fmt, ap);
    va_end(ap);
}

bool txn_is_protected(const struct policy *p, const char *name)
{
    for (size_t i = 0; i < p->n_protected; i++)
        if (!policy_protected_checked(p->protected[i]) &&
            policy_protected_match(p->protected[i], name))
            return true;
    return false;
}

int txn_open_beneath(int dir, const char *rel, int flags)
{
    struct open_how how = {
        .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    return sys_openat2(dir, rel, &how, sizeof how);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* DIR's entry names, sorted (the digest and the apply order depend on it). */
char **txn_list_dir(int dir, size_t *n)
{
    *n = 0;
    int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return NULL;
    }
    char **v = NULL;
    size_t cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nv = realloc(v, cap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
        }
        if (!(v[*n] = strdup(de->d_name)))
            break;
        (*n)++;
    }
    closedir(d);
    if (!v)
        v = calloc(1, sizeof *v);
    if (v && *n)
        qsort(v, *n, sizeof *v, cmp_names);
    return v;
}

void txn_free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void name_path(struct txn_summary *sum, const char *what, const char *rel)
{
    if (sum->n_names < TXN_NAMES)
        snprintf(sum->names[sum->n_names++], sizeof sum->names[0], "%s %.*s", what,
                 (int)(sizeof sum->names[0] - strlen(what) - 2), rel);
}

static int add_entry(struct txn *t, struct txn_summary *sum, const char *rel, enum txn_op op,
                     mode_t mode, const struct stat *hst, bool clear_first, const char *link,
                     const char *content)
{
    if (t->n == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        struct txn_entry *ne = realloc(t->e, ncap * sizeof *ne);
        if (!ne)
            return -1;
        t->e = ne;
        t->cap = ncap;
    }
    struct txn_entry *e = &t->e[t->n];
    *e = (struct txn_entry){ .rel = strdup(rel),
                             .op = op,
                             .mode = mode,
                             .clear_first = clear_first,
                             .link = link ? strdup(link) : NULL,
                             .host_ino = hst ? (unsigned long long)hst->st_ino : 0,
                             .host_ctime = hst ? hst->st_ctim : (struct timespec){ 0 } };
    if (!e->rel || (link && !e->link)) {
        free(e->rel);
        free(e->link);
        return -1;
    }
    t->n++;
    static const char *const ops[] = { "added", "changed", "removed" };
    if (op == OP_ADD)
        sum->added++;
    else if (op == OP_CHANGE)
        sum->changed++;
    else
        sum->removed++;
    name_path(sum, ops[op], rel);
    /* One line per change: what, the type and permissions, the path, and
     * the content's SHA-256 or the link's target. */
    char line[64];
    int len = snprintf(line, sizeof line, "%s %o ", ops[op], (unsigned)mode);
    EVP_DigestUpdate(t->md, line, (size_t)len);
    EVP_DigestUpdate(t->md, rel, strlen(rel) + 1);
    if (content)
        EVP_DigestUpdate(t->md, content, strlen(content));
    EVP_DigestUpdate(t->md, "\n", 1);
    return 0;
}

/* SHA-256 of the regular file FD, hex; false on a read error. */
static bool hash_fd(int fd, char hex[65], uint64_t *size)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return false;
    }
    char buf[65536];
    ssize_t r;
    *size = 0;
    while ((r = read(fd, buf, sizeof buf)) > 0) {
        EVP_DigestUpdate(md, buf, (size_t)r);
        *size += (uint64_t)r;
    }
    unsigned char out[32];
    unsigned len = 0;
    bool ok = r == 0 && EVP_DigestFinal_ex(md, out, &len) == 1;
    EVP_MD_CTX_free(md);
    for (unsigned i = 0; ok && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", out[i]);
    return ok;
}

/*
 * A host subtree a change removes or replaces: refused if any name in it is
 * protected (removing "sub" removes "sub/.git"), and counted against the cap.
 */
static void check_removed(struct txn *t, struct txn_summary *sum, int parent, const char *name,
                          const char *rel, unsigned depth)
{
    if (txn_is_protected(t->p, name))
        refuse(sum, "'%s' is protected (filesystem.protected): the commit is refused", rel);
    if (++t->visited > TXN_MAX_ENTRIES || depth > TXN_MAX_DEPTH) {
        refuse(sum, "the change is past the commit's caps (at '%s')", rel);
        return;
    }
    _cleanup_close_ int fd = txn_open_beneath(parent, name, O_PATH | O_DIRECTORY);
    if (fd < 0)
        return; /* not a directory: nothing beneath */
    size_t n = 0;
    char **names = txn_list_dir(fd, &n);
    for (size_t i = 0; names && i < n && sum->outcome != TXN_REFUSED; i++) {
        char sub[PATH_MAX];
        if (snprintf(sub, sizeof sub, "%s/%s", rel, names[i]) >= (int)sizeof sub)
            refuse(sum, "path too long under '%s'", rel);
        else
            check_removed(t, sum, fd, names[i], sub, depth + 1);
    }
    txn_free_list(names, n);
}

/* A directory the run made over one it removed: it replaces the host's, not merges. */
static bool is_opaque(int dirfd)
{
    char v[4];
    ssize_t n = fgetxattr(dirfd, "user.overlay.opaque", v, sizeof v);
    return n >= 1 && v[0] == 'y';
}

/* ---- what git would run (gitscan.h): refused alone ---- */

/* Where a directory of the layer lies in a repository. */
enum git_role { GIT_NONE, GIT_DIR, GIT_HOOKS, GIT_INFO, GIT_WORKTREES, GIT_WORKTREE };

static bool is_whiteout(const struct stat *st)
{
    return S_ISCHR(st->st_mode) && st->st_rdev == 0;
}

/* Does the merged view (the layer's UFD over the host's HFD) hold NAME as a directory (or not)? */
/* Is NAME in the merged view of UFD over HFD (any type: ANY; else a file or link)? */
static bool merged_has(int ufd, int hfd, const char *name, bool any)
{
    struct stat st;
    bool up = ufd >= 0 && fstatat(ufd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!up && (hfd < 0 || fstatat(hfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0))
        return false;
    if (up && is_whiteout(&st))
        return false;
    return any || S_ISREG(st.st_mode) || S_ISLNK(st.st_mode);
}

static enum git_role role_of(enum git_role parent, const char *name, int usub, int hsub)
{
    if (parent == GIT_DIR && !strcmp(name, "hooks"))
        return GIT_HOOKS;
    if (parent == GIT_DIR && !strcmp(name, "info"))
        return GIT_INFO;
    if (parent == GIT_DIR && !strcmp(name, "worktrees"))
        return GIT_WORKTREES;
    if (parent == GIT_WORKTREES)
        return GIT_WORKTREE;
    if (parent == GIT_HOOKS)
        return GIT_HOOKS; /* a hook manager's directory (pre-commit.d/): scripts too */
    /*
     * A .git that is not a repository yet is one after a git init there (which keeps hooks);
     * else what git may take for one (gitscan_is_gitdir(): objects and refs of any type, as
     * access(X_OK) passes a link or a 0755 file, or a commondir).
     */
    return !strcmp(name, ".git") ||
            (merged_has(usub, hsub, "HEAD", false) &&
             ((merged_has(usub, hsub, "objects", true) && merged_has(usub, hsub, "refs", true)) ||
              merged_has(usub, hsub, "commondir", true)))
        ? GIT_DIR
        : GIT_NONE;
}

/* A gitdir or commondir pointer NAME of the layer's UFD: rewritten in the layer, or refused. */
static bool pointer_refused(struct txn *t, struct txn_summary *sum, int ufd, const char *name,
                            const char *path, bool gitdir, unsigned depth, bool refuse)
{
    size_t len = 0;
    char out[PATH_MAX + 16];
    _cleanup_free_ char *text = gitscan_read(ufd, name, 4096, &len);
    enum gitscan_pointer v = text
        ? gitscan_pointer(text, len, gitdir, depth, t->p->workspace, out, sizeof out)
        : GITSCAN_POINTER_OUT;
    if (v == GITSCAN_POINTER_REWRITE) {
        /* The layer is ours now: the host's spelling is what commits. */
        _cleanup_close_ int f = txn_open_beneath(ufd, name, O_WRONLY | O_TRUNC);
        if (f >= 0 && write(f, out, strlen(out)) == (ssize_t)strlen(out))
            return false;
        v = GITSCAN_POINTER_OUT;
    }
    if (v == GITSCAN_POINTER_OUT && refuse) {
        gitscan_note(&sum->git, "refused %s (a gitdir link out of the workspace)", path);
        return true;
    }
    return false;
}

/* Is a linked worktree's commondir NAME of UFD the repository it is in ("../..")? */
static bool commondir_is_parent(int ufd, const char *name)
{
    size_t len = 0;
    _cleanup_free_ char *text = gitscan_read(ufd, name, 64, &len);
    while (text && len && (text[len - 1] == '\n' || text[len - 1] == '/'))
        len--;
    return text && len == 5 && !memcmp(text, "../..", 5);
}

/* A config NAME of the layer's UFD (the host's HFD) in a git directory DEPTH down. */
static bool config_refused(struct txn_summary *sum, int ufd, int hfd, const char *name,
                           const char *path, const struct stat *st, unsigned depth)
{
    size_t nl = 0, ol = 0;
    char why[256] = "not a regular file";
    _cleanup_free_ char *now =
        S_ISREG(st->st_mode) ? gitscan_read(ufd, name, GITSCAN_FILE_MAX, &nl) : NULL;
    _cleanup_free_ char *old = hfd >= 0 ? gitscan_read(hfd, name, GITSCAN_FILE_MAX, &ol) : NULL;
    enum gitscan_config v = now
        ? gitscan_config(now, nl, old, ol, depth, path, &sum->git, why, sizeof why, NULL, NULL)
        : GITSCAN_CONFIG_SYNTAX;
    if (v == GITSCAN_CONFIG_SYNTAX)
        gitscan_note(&sum->git, "refused %s: %s", path, why);
    return v != GITSCAN_CONFIG_OK;
}

/*
 * Is the layer's entry NAME (ST, PATH) of a directory of ROLE, DEPTH down,
 * something git would run: refused alone (not applied), and noted?
 */
static bool git_refused(struct txn *t, struct txn_summary *sum, int ufd, int hfd, const char *name,
                        const char *path, const struct stat *st, enum git_role role, unsigned depth)
{
    bool gone = is_whiteout(st);
    if (!gitscan_enabled(t->p))
        return false; /* filesystem.unsafe_unprotect: [.git] */
    if (!strcmp(name, ".git") && S_ISREG(st->st_mode))
        return pointer_refused(t, sum, ufd, name, path, true, depth, true);
    if ((role == GIT_DIR || role == GIT_WORKTREE) &&
        (!strcmp(name, "config") || !strcmp(name, "config.worktree")))
        return !gone && config_refused(sum, ufd, hfd, name, path, st, depth);
    /*
     * A common dir is where git takes config and hooks from: only a linked worktree's, and
     * only to its own repository (git writes "../.."), not to a directory no scan checks.
     */
    if (role == GIT_DIR && !strcmp(name, "commondir") && !gone) {
        gitscan_note(&sum->git, "refused %s (a commondir outside a linked worktree)", path);
        return true;
    }
    if (role == GIT_WORKTREE && !strcmp(name, "commondir") && !gone) {
        if (commondir_is_parent(ufd, name))
            return false;
        gitscan_note(&sum->git, "refused %s (not the commondir of its own repository)", path);
        return true;
    }
    if (role == GIT_WORKTREE && !strcmp(name, "gitdir") && !gone)
        return pointer_refused(t, sum, ufd, name, path, false, depth, false);
    if (role == GIT_DIR && !strcmp(name, "hooks")) {
        _cleanup_close_ int d =
            S_ISDIR(st->st_mode) ? txn_open_beneath(ufd, name, O_RDONLY | O_DIRECTORY) : -1;
        if (d >= 0 && !is_opaque(d))
            return false; /* merged: each hook judged below */
        gitscan_note(&sum->git, "refused %s (the hooks replaced or removed whole)", path);
        return true;
    }
    if (role == GIT_HOOKS && S_ISDIR(st->st_mode) && hfd >= 0) {
        /* A directory the host has, merged: each entry judged below. */
        struct stat hst;
        _cleanup_close_ int d = txn_open_beneath(ufd, name, O_RDONLY | O_DIRECTORY);
        if (d >= 0 && !is_opaque(d) && fstatat(hfd, name, &hst, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(hst.st_mode))
            return false;
    }
    /* A sample removed is as inert as one kept. */
    if (role == GIT_HOOKS && !gitscan_hook_inert(name, gone ? S_IFREG : st->st_mode)) {
        gitscan_note(&sum->git, gone ? "kept the hook %s the run removed" : "refused the hook %s",
                     path);
        return true;
    }
    if (role == GIT_INFO && !strcmp(name, "attributes") && !gone) {
        size_t len = 0;
        char why[160] = "not a regular file";
        _cleanup_free_ char *text =
            S_ISREG(st->st_mode) ? gitscan_read(ufd, name, GITSCAN_FILE_MAX, &len) : NULL;
        if (text && !gitscan_attributes_refused(text, len, why, sizeof why))
            return false;
        gitscan_note(&sum->git, "refused %s: %s", path, why);
        return true;
    }
    return false;
}

/*
 * One directory of the layer, UFD, against the host's HFD (-1: the host has
 * nothing there, or it is being replaced). REL is its path, "" at the top;
 * ROLE where it lies in a repository.
 */
static int walk(struct txn *t, struct txn_summary *sum, int ufd, int hfd, const char *rel,
                unsigned depth, enum git_role role)
{
    if (depth > TXN_MAX_DEPTH) {
        refuse(sum, "the change is deeper than the commit's cap (at '%s')", rel);
        return 0;
    }
    size_t n = 0;
    char **names = txn_list_dir(ufd, &n);
    if (!names)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *name = names[i];
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s%s%s", rel, *rel ? "/" : "", name) >= (int)sizeof path) {
            refuse(sum, "path too long: '%s'", rel);
            continue;
        }
        if (++t->visited > TXN_MAX_ENTRIES) {
            refuse(sum, "the change is past the commit's cap on entries (at '%s')", path);
            break;
        }
        struct stat st, hst;
        if (fstatat(ufd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = -1;
            break;
        }
        bool host_has = hfd >= 0 && fstatat(hfd, name, &hst, AT_SYMLINK_NOFOLLOW) == 0;
        if (txn_is_protected(t->p, name))
            refuse(sum, "'%s' is protected (filesystem.protected): the commit is refused", path);
        else if (strncmp(name, TXN_RESERVED, strlen(TXN_RESERVED)) == 0)
            refuse(sum, "'%s' is a name cordon's commit uses: the commit is refused", path);
        if (git_refused(t, sum, ufd, hfd, name, path, &st, role, depth))
            continue; /* the host keeps what it had there */
        mode_t mode = st.st_mode & (S_IFMT | 0777);

        if (S_ISCHR(st.st_mode) && st.st_rdev == 0) { /* a whiteout: removed */
            if (!host_has)
                continue;
            if (S_ISDIR(hst.st_mode))
                check_removed(t, sum, hfd, name, path, depth + 1);
            rc = add_entry(t, sum, path, OP_REMOVE, 0, &hst, false, NULL, NULL);
        } else if (S_ISDIR(st.st_mode)) {
            _cleanup_close_ int sub = txn_open_beneath(ufd, name, O_RDONLY | O_DIRECTORY);
            if (sub < 0) {
                rc = -1;
                break;
            }
            bool merge = host_has && S_ISDIR(hst.st_mode) && !is_opaque(sub);
            _cleanup_close_ int hsub =
                merge ? txn_open_beneath(hfd, name, O_PATH | O_DIRECTORY) : -1;
            if (merge && hsub < 0)
                merge = false;
            if (!merge && host_has && S_ISDIR(hst.st_mode))
                check_removed(t, sum, hfd, name, path, depth + 1);
            if (!merge)
                rc = add_entry(t, sum, path, host_has ? OP_CHANGE : OP_ADD, mode,
                               host_has ? &hst : NULL, host_has, NULL, NULL);
            else if ((hst.st_mode & 0777) != (st.st_mode & 0777))
                rc = add_entry(t, sum, path, OP_CHANGE, mode, &hst, false, NULL, NULL);
            if (rc == 0)
                rc = walk(t, sum, sub, hsub, path, depth + 1, role_of(role, name, sub, hsub));
        } else if (S_ISREG(st.st_mode)) {
            _cleanup_close_ int f = txn_open_beneath(ufd, name, O_RDONLY | O_NONBLOCK);
            char hex[65], hhex[65];
            uint64_t size = 0, hsize = 0;
            if (f < 0 || !hash_fd(f, hex, &size)) {
                rc = -1;
                break;
            }
            if (host_has && S_ISREG(hst.st_mode) && hst.st_size == st.st_size &&
                (hst.st_mode & 0777) == (st.st_mode & 0777)) {
                /* Copied up without a change (opened for writing, say): nothing to apply. */
                _cleanup_close_ int h = txn_open_beneath(hfd, name, O_RDONLY | O_NONBLOCK);
                if (h >= 0 && hash_fd(h, hhex, &hsize) && !strcmp(hex, hhex))
                    continue;
            }
            if (host_has && S_ISDIR(hst.st_mode))
                check_removed(t, sum, hfd, name, path, depth + 1);
            sum->bytes += size;
            rc = add_entry(t, sum, path, host_has ? OP_CHANGE : OP_ADD, mode,
                           host_has ? &hst : NULL, host_has && S_ISDIR(hst.st_mode), NULL, hex);
        } else if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX], htarget[PATH_MAX];
            ssize_t len = readlinkat(ufd, name, target, sizeof target - 1);
            if (len < 0) {
                rc = -1;
                break;
            }
            target[len] = '\0';
            if (workspace_target_escapes(depth, target) && !workspace_target_system(target))
                refuse(sum, "'%s' is a link leading out of the workspace: the commit is refused",
                       path);
            if (host_has && S_ISLNK(hst.st_mode)) {
                ssize_t hl = readlinkat(hfd, name, htarget, sizeof htarget - 1);
                if (hl == len && !memcmp(target, htarget, (size_t)len))
                    continue;
            }
            if (host_has && S_ISDIR(hst.st_mode))
                check_removed(t, sum, hfd, name, path, depth + 1);
            rc =
                add_entry(t, sum, path, host_has ? OP_CHANGE : OP_ADD, mode, host_has ? &hst : NULL,
                          host_has && S_ISDIR(hst.st_mode), target, target);
        } else {
            refuse(sum, "'%s' is a device, FIFO or socket: the commit is refused", path);
        }
    }
    txn_free_list(names, n);
    return rc;
}

struct txn *txn_scan(int layer, int host, const struct policy *p, struct txn_summary *sum,
                     struct cordon_err *err)
{
    memset(sum, 0, sizeof *sum);
    struct txn *t = calloc(1, sizeof *t);
    if (!t) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    t->host = host;
    t->p = p;
    t->upper = txn_open_beneath(layer, UPPER, O_RDONLY | O_DIRECTORY);
    t->md = EVP_MD_CTX_new();
    if (t->upper < 0 || !t->md || EVP_DigestInit_ex(t->md, EVP_sha256(), NULL) != 1) {
        err_sys(err, CORDON_E_SETUP, "workspace: cannot read the run's layer");
        txn_free(t);
        return NULL;
    }
    _cleanup_close_ int top = txn_open_beneath(host, ".", O_PATH | O_DIRECTORY);
    if (top < 0 || walk(t, sum, t->upper, top, "", 0, role_of(GIT_NONE, "", t->upper, top)) < 0) {
        err_sys(err, CORDON_E_SETUP, "workspace: cannot read the run's layer");
        txn_free(t);
        return NULL;
    }
    unsigned char out[32];
    unsigned len = 0;
    EVP_DigestFinal_ex(t->md, out, &len);
    for (unsigned i = 0; i < 32; i++)
        snprintf(sum->digest + 2 * i, 3, "%02x", out[i]);
    return t;
}

void txn_free(struct txn *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->e[i].rel);
        free(t->e[i].link);
    }
    free(t->e);
    if (t->upper >= 0)
        close(t->upper);
    EVP_MD_CTX_free(t->md);
    free(t);
}
