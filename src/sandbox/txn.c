/*
 * sandbox/txn.c: a transactional workspace's scan and commit (see txn.h).
 * Runs in the supervisor once the sandbox is gone. Every path is walked by
 * descriptor: the layer with RESOLVE_BENEATH, the host workspace with
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, so a link either side holds (planted
 * by this run, or an earlier one) is copied or replaced, never followed.
 */
#include "sandbox/txn.h"

#include "common/cleanup.h"
#include "common/syscalls.h"
#include "policy/policy.h"
#include "sandbox/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define UPPER "upper"

enum txn_op { OP_ADD, OP_CHANGE, OP_REMOVE };

struct txn_entry {
    char *rel;          /* relative to the workspace */
    enum txn_op op;
    mode_t mode;        /* the layer's (type and permissions); 0 for OP_REMOVE */
    bool clear_first;   /* the host has something else there (or a directory to replace) */
    char *link;         /* a link's target */
};

struct txn {
    int upper;          /* the layer's upper directory, O_PATH */
    int host;           /* the host workspace, O_PATH (borrowed) */
    const struct policy *p;
    struct txn_entry *e;
    size_t n, cap;
    EVP_MD_CTX *md;
    size_t visited;
};

const char *txn_outcome_name(enum txn_outcome o)
{
    static const char *const names[] = { "none", "committed", "discarded", "refused", "pending",
                                         "failed" };
    return (unsigned)o < sizeof names / sizeof names[0] ? names[o] : "?";
}

json_t *txn_summary_json(const struct txn_summary *s)
{
    json_t *names = json_array();
    for (unsigned i = 0; i < s->n_names; i++)
        json_array_append_new(names, json_string(s->names[i]));
    json_t *o = json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:s, s:o}",
                          "outcome", txn_outcome_name(s->outcome),
                          "committed", s->outcome == TXN_COMMITTED,
                          "added", (json_int_t)s->added, "changed", (json_int_t)s->changed,
                          "removed", (json_int_t)s->removed, "bytes", (json_int_t)s->bytes,
                          "digest", s->digest, "paths", names);
    if (o && s->reason[0])
        json_object_set_new(o, "reason", json_string(s->reason));
    return o;
}

/* The first refusal is the one told; the scan goes on for the summary. */
__attribute__((format(printf, 2, 3)))
static void refuse(struct txn_summary *sum, const char *fmt, ...)
{
    if (sum->outcome == TXN_REFUSED)
        return;
    sum->outcome = TXN_REFUSED;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sum->reason, sizeof sum->reason, fmt, ap);
    va_end(ap);
}

static bool is_protected(const struct policy *p, const char *name)
{
    for (size_t i = 0; i < p->n_protected; i++)
        if (policy_protected_match(p->protected[i], name))
            return true;
    return false;
}

static int open_beneath(int dir, const char *rel, int flags)
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
static char **list_dir(int dir, size_t *n)
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

static void free_list(char **v, size_t n)
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
                     mode_t mode, bool clear_first, const char *link, const char *content)
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
    *e = (struct txn_entry){ .rel = strdup(rel), .op = op, .mode = mode,
                             .clear_first = clear_first, .link = link ? strdup(link) : NULL };
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
    if (is_protected(t->p, name))
        refuse(sum, "'%s' is protected (filesystem.protected): the commit is refused", rel);
    if (++t->visited > TXN_MAX_ENTRIES || depth > TXN_MAX_DEPTH) {
        refuse(sum, "the change is past the commit's caps (at '%s')", rel);
        return;
    }
    _cleanup_close_ int fd = open_beneath(parent, name, O_PATH | O_DIRECTORY);
    if (fd < 0)
        return; /* not a directory: nothing beneath */
    size_t n = 0;
    char **names = list_dir(fd, &n);
    for (size_t i = 0; names && i < n && sum->outcome != TXN_REFUSED; i++) {
        char sub[PATH_MAX];
        if (snprintf(sub, sizeof sub, "%s/%s", rel, names[i]) >= (int)sizeof sub)
            refuse(sum, "path too long under '%s'", rel);
        else
            check_removed(t, sum, fd, names[i], sub, depth + 1);
    }
    free_list(names, n);
}

/* A directory the run made over one it removed: it replaces the host's, not merges. */
static bool is_opaque(int dirfd)
{
    char v[4];
    ssize_t n = fgetxattr(dirfd, "user.overlay.opaque", v, sizeof v);
    return n >= 1 && v[0] == 'y';
}

/*
 * One directory of the layer, UFD, against the host's HFD (-1: the host has
 * nothing there, or it is being replaced). REL is its path, "" at the top.
 */
static int walk(struct txn *t, struct txn_summary *sum, int ufd, int hfd, const char *rel,
                unsigned depth)
{
    if (depth > TXN_MAX_DEPTH) {
        refuse(sum, "the change is deeper than the commit's cap (at '%s')", rel);
        return 0;
    }
    size_t n = 0;
    char **names = list_dir(ufd, &n);
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
        if (is_protected(t->p, name))
            refuse(sum, "'%s' is protected (filesystem.protected): the commit is refused", path);
        mode_t mode = st.st_mode & (S_IFMT | 0777);

        if (S_ISCHR(st.st_mode) && st.st_rdev == 0) { /* a whiteout: removed */
            if (!host_has)
                continue;
            if (S_ISDIR(hst.st_mode))
                check_removed(t, sum, hfd, name, path, depth + 1);
            rc = add_entry(t, sum, path, OP_REMOVE, 0, false, NULL, NULL);
        } else if (S_ISDIR(st.st_mode)) {
            _cleanup_close_ int sub = open_beneath(ufd, name, O_RDONLY | O_DIRECTORY);
            if (sub < 0) {
                rc = -1;
                break;
            }
            bool merge = host_has && S_ISDIR(hst.st_mode) && !is_opaque(sub);
            _cleanup_close_ int hsub = merge ? open_beneath(hfd, name, O_PATH | O_DIRECTORY) : -1;
            if (merge && hsub < 0)
                merge = false;
            if (!merge && host_has && S_ISDIR(hst.st_mode))
                check_removed(t, sum, hfd, name, path, depth + 1);
            if (!merge)
                rc = add_entry(t, sum, path, host_has ? OP_CHANGE : OP_ADD, mode, host_has, NULL,
                               NULL);
            else if ((hst.st_mode & 0777) != (st.st_mode & 0777))
                rc = add_entry(t, sum, path, OP_CHANGE, mode, false, NULL, NULL);
            if (rc == 0)
                rc = walk(t, sum, sub, hsub, path, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            _cleanup_close_ int f = open_beneath(ufd, name, O_RDONLY | O_NONBLOCK);
            char hex[65], hhex[65];
            uint64_t size = 0, hsize = 0;
            if (f < 0 || !hash_fd(f, hex, &size)) {
                rc = -1;
                break;
            }
            if (host_has && S_ISREG(hst.st_mode) && hst.st_size == st.st_size &&
                (hst.st_mode & 0777) == (st.st_mode & 0777)) {
                /* Copied up without a change (opened for writing, say): nothing to apply. */
                _cleanup_close_ int h = open_beneath(hfd, name, O_RDONLY | O_NONBLOCK);
                if (h >= 0 && hash_fd(h, hhex, &hsize) && !strcmp(hex, hhex))
                    continue;
            }
            if (host_has && S_ISDIR(hst.st_mode))
                check_removed(t, sum, hfd, name, path, depth + 1);
            sum->bytes += size;
            rc = add_entry(t, sum, path, host_has ? OP_CHANGE : OP_ADD, mode,
                           host_has && S_ISDIR(hst.st_mode), NULL, hex);
        } else if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX], htarget[PATH_MAX];
            ssize_t len = readlinkat(ufd, name, target, sizeof target - 1);
            if (len < 0) {
                rc = -1;
                break;
            }
            target[len] = '\0';
            if (workspace_target_escapes(depth, target))
                refuse(sum, "'%s' is a link leading out of the workspace: the commit is refused",
                       path);
            if (host_has && S_ISLNK(hst.st_mode)) {
                ssize_t hl = readlinkat(hfd, name, htarget, sizeof htarget - 1);
                if (hl == len && !memcmp(target, htarget, (size_t)len))
                    continue;
            }
            if (host_has && S_ISDIR(hst.st_mode))
                check_removed(t, sum, hfd, name, path, depth + 1);
            rc = add_entry(t, sum, path, host_has ? OP_CHANGE : OP_ADD, mode,
                           host_has && S_ISDIR(hst.st_mode), target, target);
        } else {
            refuse(sum, "'%s' is a device, FIFO or socket: the commit is refused", path);
        }
    }
    free_list(names, n);
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
    t->upper = open_beneath(layer, UPPER, O_RDONLY | O_DIRECTORY);
    t->md = EVP_MD_CTX_new();
    if (t->upper < 0 || !t->md || EVP_DigestInit_ex(t->md, EVP_sha256(), NULL) != 1) {
        err_sys(err, CORDON_E_SETUP, "workspace: cannot read the run's layer");
        txn_free(t);
        return NULL;
    }
    _cleanup_close_ int top = open_beneath(host, ".", O_PATH | O_DIRECTORY);
    if (top < 0 || walk(t, sum, t->upper, top, "", 0) < 0) {
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

/* ---- applying ---- */

/* NAME in DIR and all beneath it, by descriptor. */
static int remove_at(int dir, const char *name, unsigned depth)
{
    if (unlinkat(dir, name, 0) == 0 || errno == ENOENT)
        return 0;
    if ((errno != EISDIR && errno != EPERM) || depth > TXN_MAX_DEPTH + 8)
        return -1;
    int fd = open_beneath(dir, name, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    size_t n = 0;
    char **names = list_dir(fd, &n);
    int rc = names ? 0 : -1;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = remove_at(fd, names[i], depth + 1);
    free_list(names, n);
    close(fd);
    if (rc == 0 && unlinkat(dir, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        rc = -1;
    return rc;
}

static int copy_data(int from, int to)
{
    for (;;) {
        ssize_t r = copy_file_range(from, NULL, to, NULL, 1 << 30, 0);
        if (r == 0)
            return 0;
        if (r > 0)
            continue;
        if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
            return -1;
        break; /* across filesystems on an older kernel: by hand */
    }
    char buf[65536];
    ssize_t r;
    while ((r = read(from, buf, sizeof buf)) > 0)
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(to, buf + off, (size_t)(r - off));
            if (w < 0)
                return -1;
            off += w;
        }
    return r < 0 ? -1 : 0;
}

/* What a committed entry may keep of its permissions: no set-id, no o+w. */
static mode_t safe_mode(mode_t m)
{
    return m & 0775;
}

static int apply_one(struct txn *t, const struct txn_entry *e, char *why, size_t len)
{
    char parent_rel[PATH_MAX];
    snprintf(parent_rel, sizeof parent_rel, "%s", e->rel);
    char *slash = strrchr(parent_rel, '/');
    const char *name = slash ? slash + 1 : parent_rel;
    if (slash)
        *slash = '\0';
    _cleanup_close_ int parent = open_beneath(t->host, slash ? parent_rel : ".",
                                              O_PATH | O_DIRECTORY);
    if (parent < 0)
        return snprintf(why, len, "cannot open '%.160s' in the workspace: %s",
                        slash ? parent_rel : ".", strerror(errno)), -1;
    if ((e->op == OP_REMOVE || e->clear_first) && remove_at(parent, name, 0) < 0)
        return snprintf(why, len, "cannot remove '%.160s': %s", e->rel, strerror(errno)), -1;
    if (e->op == OP_REMOVE)
        return 0;

    if (S_ISDIR(e->mode)) {
        if (mkdirat(parent, name, safe_mode(e->mode)) < 0 && errno != EEXIST)
            return snprintf(why, len, "cannot create '%.160s': %s", e->rel, strerror(errno)), -1;
        _cleanup_close_ int d = open_beneath(parent, name, O_RDONLY | O_DIRECTORY);
        if (d < 0 || fchmod(d, safe_mode(e->mode)) < 0)
            return snprintf(why, len, "cannot set the mode of '%.160s': %s", e->rel,
                            strerror(errno)), -1;
        return 0;
    }
    /* A file or link is made under a name of its own, then renamed over the
     * host's entry: a link there is replaced, not written through. */
    unsigned long long r = 0;
    (void)!getrandom(&r, sizeof r, 0);
    char tmp[64];
    snprintf(tmp, sizeof tmp, ".cordon-commit-%016llx", r);
    if (S_ISLNK(e->mode)) {
        if (symlinkat(e->link, parent, tmp) < 0)
            return snprintf(why, len, "cannot create link '%.160s': %s", e->rel, strerror(errno)), -1;
    } else {
        _cleanup_close_ int from = open_beneath(t->upper, e->rel, O_RDONLY | O_NONBLOCK);
        _cleanup_close_ int to = openat(parent, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                                        O_CLOEXEC, 0600);
        if (from < 0 || to < 0 || copy_data(from, to) < 0 || fchmod(to, safe_mode(e->mode)) < 0) {
            int saved = errno;
            unlinkat(parent, tmp, 0);
            return snprintf(why, len, "cannot write '%.160s': %s", e->rel, strerror(saved)), -1;
        }
    }
    if (renameat(parent, tmp, parent, name) < 0) {
        int saved = errno;
        unlinkat(parent, tmp, 0);
        return snprintf(why, len, "cannot put '%.160s' in place: %s", e->rel, strerror(saved)), -1;
    }
    return 0;
}

void txn_apply(struct txn *t, struct txn_summary *sum)
{
    if (sum->outcome == TXN_REFUSED)
        return;
    for (size_t i = 0; i < t->n; i++)
        if (apply_one(t, &t->e[i], sum->reason, sizeof sum->reason) < 0) {
            sum->outcome = TXN_FAILED;
            return;
        }
    sum->outcome = TXN_COMMITTED;
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

void txn_finish(int layer, int host, const struct policy *p, enum policy_ws_commit how,
                bool succeeded, struct txn_summary *sum)
{
    struct cordon_err err = { 0 };
    struct txn *t = txn_scan(layer, host, p, sum, &err);
    if (!t) {
        sum->outcome = TXN_FAILED;
        snprintf(sum->reason, sizeof sum->reason, "%s", err.msg);
        return;
    }
    if (sum->outcome != TXN_REFUSED) {
        if (how == POLICY_WS_COMMIT_MANUAL) {
            sum->outcome = TXN_PENDING;
        } else if (how == POLICY_WS_COMMIT_ON_SUCCESS && !succeeded) {
            sum->outcome = TXN_DISCARDED;
            snprintf(sum->reason, sizeof sum->reason,
                     "the run did not succeed (workspace.commit: on_success)");
        } else {
            txn_apply(t, sum);
        }
    }
    txn_free(t);
}
