/*
 * sandbox/txn.c: a transactional workspace's commit, and its recovery after
 * a crash (see txn.h; the scan is txn_scan.c). Runs in the supervisor once
 * the sandbox is gone; recovery also in the watchdog should the supervisor
 * die mid-commit, and in whoever opens the workspace next (a run's prepare,
 * `cordon check -w`, the daemon at start).
 *
 * A commit is all or nothing, across ENOSPC, EACCES, kill -9 and power loss.
 * W is the host workspace; ID 16 random hex digits; N a record's number.
 *
 *   W/.cordon-txn-ID/        the transaction (0700, at W's root): the files
 *                            intent, journal and committed
 *   P/.cordon-txn-ID.N       record N's new entry, staged beside its target
 *                            P/NAME (one directory: a rename puts it in place,
 *                            a relative link means the same before and after)
 *   P/.cordon-txn-ID.N.old   the old P/NAME, moved aside (removals)
 *
 * A record puts a new file, link or whole new directory (its tree staged
 * inside it) at P/NAME, removes P/NAME, or sets a directory's mode. flock(W)
 * holds one commit or recovery at a time, so a transaction directory found
 * under the lock is a dead commit's; a run writing W directly holds it
 * shared for its life (txn_share()), so no commit applies under it. A host
 * process takes no lock: a record is applied only over the entry the scan
 * read (its inode and ctime), and undoing or finishing one that someone
 * changed meanwhile leaves theirs in place and keeps what the commit had
 * moved beside it ("NAME.cordon-old-ID", keep()), never deleting it on a
 * guess, so the workspace is never left wedged. The states, and what
 * recovery does:
 *
 *   STAGING    the directory and `intent` (every record, fsynced), then the
 *              new entries staged (new directories 0700). W's own entries
 *              are untouched. Recovery removes every staged name `intent`
 *              lists, then the directory: the old tree.
 *   APPLYING   syncfs (the staged data is on disk), then `journal` (the
 *              records with the inodes of each new and old entry; written
 *              whole: a temporary name, fsync, rename, fsync). Each record
 *              in order: a new entry replacing one goes in by
 *              renameat2(RENAME_EXCHANGE) (the old lands on its staged name),
 *              a new one by RENAME_NOREPLACE; a removed one is renamed aside.
 *              Nothing is deleted. A failure here (ENOSPC, EACCES, EBUSY),
 *              and recovery, undo each record in reverse, telling by inode
 *              which of P/NAME, ...N and ...N.old holds what, then remove
 *              what was staged and the directory: the old tree.
 *   COMMITTED  syncfs, then `committed` (fsync, fsync): the point of no
 *              return. The old entries are removed, then the directories'
 *              modes set, deepest first (last: a new 0555 directory took its
 *              entries while it was 0700), then the directory removed.
 *              Recovery finishes each record (making again a rename a power
 *              loss took), the same removals and modes: the new tree.
 *
 * A journal is read as untrusted, since a -w run writes W too: every path
 * is one the run could write itself (beneath W, no link, no protected or
 * reserved name), and only reserved names are created or deleted whole.
 * Every host path is opened beneath W with RESOLVE_NO_SYMLINKS; the rest
 * are single names, taken *at() without following a link.
 */
#include "sandbox/txn_int.h"

#include "common/cleanup.h"
#include "common/syscalls.h"
#include "common/text.h"
#include "policy/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define JOURNAL_MAX (256u << 20)      /* what a recovery reads of a journal */
#define LOCK_WAIT_MS TXN_LOCK_WAIT_MS /* a commit waits this long for the lock */

enum rec_kind { REC_PUT, REC_DEL, REC_MODE };
static const char *const kind_names[] = { "put", "del", "mode" };

struct rec {
    enum rec_kind kind;
    unsigned long long new_ino, old_ino; /* 0: none */
    mode_t mode;                         /* REC_MODE: the permissions to set */
    char *rel;                           /* a journal's own, or the scan's (borrowed) */
    const struct txn_entry *e;           /* a commit's: what the scan saw there (not journaled) */
};

struct journal {
    char id[17];
    struct rec *r;
    size_t n, cap;
    bool own; /* the rels are ours to free */
    /* Entries someone else changed meanwhile, settled without losing theirs or ours. */
    unsigned settled;
    char note[200]; /* the first few, and where what was kept went */
};

static void journal_release(struct journal *j)
{
    for (size_t i = 0; j->own && i < j->n; i++)
        free(j->r[i].rel);
    free(j->r);
    *j = (struct journal){ 0 };
}

static struct rec *journal_add(struct journal *j, enum rec_kind kind, char *rel, mode_t mode)
{
    if (j->n == j->cap) {
        size_t ncap = j->cap ? j->cap * 2 : 64;
        struct rec *nr = realloc(j->r, ncap * sizeof *nr);
        if (!nr)
            return NULL;
        j->r = nr;
        j->cap = ncap;
    }
    j->r[j->n] = (struct rec){ .kind = kind, .rel = rel, .mode = mode };
    return &j->r[j->n++];
}

__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t len, const char *fmt, ...)
{
    int saved = errno;
    char what[224];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (saved)
        snprintf(why, len, "%s: %s", what, strerror(saved));
    else
        snprintf(why, len, "%s", what);
    errno = saved;
    return -1;
}

/* ".cordon-txn-ID.N", or with ".old". */
static void staged_name(char out[64], const char *id, size_t i, bool old)
{
    snprintf(out, 64, TXN_RESERVED "%s.%zu%s", id, i, old ? ".old" : "");
}

static unsigned long long ino_at(int dir, const char *name)
{
    struct stat st;
    return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* The directory holding REL, beneath HOST; *NAME is REL's last component. */
static int open_parent(int host, const char *rel, const char **name)
{
    const char *slash = strrchr(rel, '/');
    *name = slash ? slash + 1 : rel;
    if (!slash)
        return txn_open_beneath(host, ".", O_PATH | O_DIRECTORY);
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%.*s", (int)(slash - rel), rel);
    return txn_open_beneath(host, parent, O_PATH | O_DIRECTORY);
}

/* chmod of what the O_PATH descriptor FD names (fchmod refuses O_PATH). */
static int chmod_fd(int fd, mode_t mode)
{
    char proc[40];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return chmod(proc, mode);
}

/* NAME in DIR and all beneath it, by descriptor; a directory is made 0700 first. */
static int remove_tree(int dir, const char *name, unsigned depth)
{
    if (unlinkat(dir, name, 0) == 0 || errno == ENOENT)
        return 0;
    if ((errno != EISDIR && errno != EPERM) || depth > TXN_MAX_DEPTH + 8)
        return -1;
    _cleanup_close_ int path = txn_open_beneath(dir, name, O_PATH | O_DIRECTORY);
    if (path < 0)
        return -1;
    chmod_fd(path, 0700); /* a 0555 directory of ours: its entries must go too */
    _cleanup_close_ int fd = txn_open_beneath(dir, name, O_RDONLY | O_DIRECTORY);
    size_t n = 0;
    char **names = fd < 0 ? NULL : txn_list_dir(fd, &n);
    int rc = names ? 0 : -1;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = remove_tree(fd, names[i], depth + 1);
    txn_free_list(names, n);
    if (rc == 0 && unlinkat(dir, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        rc = -1;
    return rc;
}

/*
 * Is REL one a run could have written itself: relative, beneath the
 * workspace by its components alone, no protected or reserved name?
 * Every rel of a journal read back is checked so.
 */
static bool rel_ok(const struct policy *p, const char *rel)
{
    size_t len = strlen(rel), depth = 0;
    if (len == 0 || len >= PATH_MAX || rel[0] == '/')
        return false;
    char name[NAME_MAX + 1];
    for (const char *c = rel; *c;) {
        size_t n = strcspn(c, "/");
        if (n == 0 || n > NAME_MAX || ++depth > TXN_MAX_DEPTH + 1)
            return false;
        memcpy(name, c, n);
        name[n] = '\0';
        if (!strcmp(name, ".") || !strcmp(name, "..") || txn_is_protected(p, name) ||
            !strncmp(name, TXN_RESERVED, strlen(TXN_RESERVED)))
            return false;
        c += n;
        if (*c == '/' && !*++c)
            return false;
    }
    return true;
}

/* ---- the journal's text ---- */

/* J as text ("cordon-txn 1 ID", a line per record, "end"); malloc'd. */
static char *journal_text(const struct journal *j, size_t *len)
{
    char *buf = NULL;
    FILE *m = open_memstream(&buf, len);
    if (!m)
        return NULL;
    fprintf(m, "cordon-txn 1 %s\n", j->id);
    char *hex = malloc(2 * PATH_MAX + 1);
    for (size_t i = 0; hex && i < j->n; i++) {
        const struct rec *r = &j->r[i];
        hex_encode((const unsigned char *)r->rel, strlen(r->rel), hex);
        fprintf(m, "%s %llu %llu %o %s\n", kind_names[r->kind], r->new_ino, r->old_ino,
                (unsigned)r->mode, hex);
    }
    fputs("end\n", m);
    bool ok = hex && !ferror(m);
    free(hex);
    if (fclose(m) != 0 || !ok) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int parse_line(struct journal *j, const struct policy *p, char *line)
{
    char kind[8], hex[2 * PATH_MAX + 1];
    unsigned long long new_ino, old_ino;
    unsigned mode;
    int used = 0;
    if (sscanf(line, "%7s %llu %llu %o %8192s%n", kind, &new_ino, &old_ino, &mode, hex, &used) !=
            5 ||
        line[used] != '\0')
        return -1;
    size_t k = 0;
    while (k < 3 && strcmp(kind, kind_names[k]) != 0)
        k++;
    char rel[PATH_MAX];
    if (k == 3 || mode > 0777 || !hex_decode_str(hex, rel, sizeof rel) || !rel_ok(p, rel))
        return -1;
    char *copy = strdup(rel);
    struct rec *r = copy ? journal_add(j, (enum rec_kind)k, copy, mode) : NULL;
    if (!r) {
        free(copy);
        return -1;
    }
    r->new_ino = new_ino;
    r->old_ino = old_ino;
    return 0;
}

/* TEXT (NUL-terminated, ours to cut) as J for transaction ID; every rel checked with P. */
static int journal_parse(char *text, const char *id, const struct policy *p, struct journal *j)
{
    *j = (struct journal){ .own = true };
    snprintf(j->id, sizeof j->id, "%s", id);
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    char head[64];
    snprintf(head, sizeof head, "cordon-txn 1 %s", id);
    if (!line || strcmp(line, head) != 0)
        return -1;
    while ((line = strtok_r(NULL, "\n", &save))) {
        if (strcmp(line, "end") == 0)
            return strtok_r(NULL, "\n", &save) ? -1 : 0;
        if (parse_line(j, p, line) < 0)
            return -1;
    }
    return -1; /* no end: cut short */
}

/* The file NAME of the transaction directory DFD, whole; NULL with errno (ENOENT: none). */
static char *read_journal_file(int dfd, const char *name)
{
    _cleanup_close_ int fd = txn_open_beneath(dfd, name, O_RDONLY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return NULL;
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > JOURNAL_MAX) {
        errno = EFBIG;
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t have = 0;
    ssize_t r = 1;
    while (buf && have < (size_t)st.st_size && (r = read(fd, buf + have, st.st_size - have)) > 0)
        have += (size_t)r;
    if (!buf || r < 0) {
        free(buf);
        return NULL;
    }
    buf[have] = '\0';
    return buf;
}

/* DATA as the file NAME in DFD, durably: a new file, fsync, rename, fsync the directory. */
static int write_durably(int dfd, const char *name, const char *data, size_t len)
{
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    _cleanup_close_ int fd =
        openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0)
            return -1;
        off += (size_t)w;
    }
    if (fsync(fd) < 0 || renameat(dfd, tmp, dfd, name) < 0)
        return -1;
    return fsync(dfd);
}

/* ---- one record: forward, back, and to the end ---- */

/* Put record I of J in place (APPLYING). Nothing is deleted. */
static int rec_apply(int host, const struct journal *j, size_t i, char *why, size_t len)
{
    const struct rec *r = &j->r[i];
    if (r->kind == REC_MODE)
        return 0;
    const char *name;
    _cleanup_close_ int dir = open_parent(host, r->rel, &name);
    if (dir < 0)
        return fail(why, len, "cannot open the directory of '%.160s'", r->rel);
    char s[64], b[64];
    staged_name(s, j->id, i, false);
    staged_name(b, j->id, i, true);
    if (ino_at(dir, name) != r->old_ino)
        return errno = 0, fail(why, len, "'%.160s' changed during the commit", r->rel);
    if (r->kind == REC_DEL) {
        if (renameat2(dir, name, dir, b, RENAME_NOREPLACE) < 0)
            return fail(why, len, "cannot remove '%.160s'", r->rel);
        return 0;
    }
    if (!r->old_ino) {
        if (renameat2(dir, s, dir, name, RENAME_NOREPLACE) < 0)
            return fail(why, len, "cannot put '%.160s' in place", r->rel);
        return 0;
    }
    if (renameat2(dir, s, dir, name, RENAME_EXCHANGE) == 0)
        return 0;
    /* A filesystem without the exchange: aside, then in (a moment without either). */
    if ((errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) ||
        renameat2(dir, name, dir, b, RENAME_NOREPLACE) < 0 ||
        renameat2(dir, s, dir, name, RENAME_NOREPLACE) < 0)
        return fail(why, len, "cannot put '%.160s' in place", r->rel);
    return 0;
}

/* Note in J that REL was settled so (WHAT: where a copy was kept), once per record. */
static void settle_note(struct journal *j, const char *rel, const char *what)
{
    if (j->settled++ >= 3)
        return;
    size_t used = strlen(j->note);
    snprintf(j->note + used, sizeof j->note - used, "%s'%.60s' %s", used ? ", " : "", rel, what);
}

/*
 * Someone else (a host process, which no lock keeps out) changed REL while
 * its commit was under way. The entry on the commit's name FROM, which is
 * no longer ours to delete or to put back, goes to a visible name beside
 * REL, "NAME.cordon-TAG-ID", noted in J.
 */
static int keep(int dir, const char *from, const char *name, struct journal *j, const char *rel,
                const char *tag, char *why, size_t len)
{
    char kept[NAME_MAX + 1], what[NAME_MAX + 16];
    for (unsigned n = 0; n < 100; n++) {
        size_t used = (size_t)snprintf(kept, sizeof kept, "%.200s.cordon-%s-%s", name, tag, j->id);
        if (n)
            snprintf(kept + used, sizeof kept - used, ".%u", n);
        if (renameat2(dir, from, dir, kept, RENAME_NOREPLACE) == 0) {
            snprintf(what, sizeof what, "kept as '%s'", kept);
            settle_note(j, rel, what);
            return 0;
        }
        if (errno != EEXIST)
            break;
    }
    return fail(why, len, "cannot keep the %s '%.160s' beside it", tag, rel);
}

/*
 * Undo record I, however far it got: told by inode which of NAME, its
 * staged name and its ".old" hold the new and the old entry. Then NAME
 * holds the old entry (or nothing, as before) and the staged one is gone.
 * Where someone else changed NAME meanwhile, theirs stays, and the old
 * entry, if the commit had moved it, is kept beside it (keep()).
 */
static int rec_undo(int host, struct journal *j, size_t i, char *why, size_t len)
{
    const struct rec *r = &j->r[i];
    if (r->kind == REC_MODE)
        return 0;
    const char *name;
    _cleanup_close_ int dir = open_parent(host, r->rel, &name);
    if (dir < 0 && (errno == ENOENT || errno == ENOTDIR)) {
        /* Moved or removed by someone else: what was staged there went along. */
        settle_note(j, r->rel, "had its directory moved away");
        return 0;
    }
    if (dir < 0)
        return fail(why, len, "cannot open the directory of '%.160s'", r->rel);
    char s[64], b[64];
    staged_name(s, j->id, i, false);
    staged_name(b, j->id, i, true);
    unsigned long long at = ino_at(dir, name), staged = ino_at(dir, s);
    if (r->new_ino && at == r->new_ino) {
        if (staged && staged != r->old_ino)
            TRY(keep(dir, s, name, j, r->rel, "other", why, len));
        staged = ino_at(dir, s);
        /* Back to its staged name, swapped with the old entry when that is there. */
        if (renameat2(dir, name, dir, s, staged ? RENAME_EXCHANGE : RENAME_NOREPLACE) < 0)
            return fail(why, len, "cannot undo '%.160s'", r->rel);
        at = ino_at(dir, name);
        staged = r->new_ino;
    }
    /* The old entry back from aside, or from the staged name the exchange left it on. */
    const char *old_on = !r->old_ino || at ? NULL
        : ino_at(dir, b) == r->old_ino     ? b
        : staged == r->old_ino             ? s
                                           : NULL;
    if (old_on && renameat2(dir, old_on, dir, name, RENAME_NOREPLACE) < 0)
        return fail(why, len, "cannot put the old '%.160s' back", r->rel);
    if (old_on) {
        at = r->old_ino;
        staged = ino_at(dir, s);
    }
    if (at != r->old_ino) {
        settle_note(j, r->rel, "was changed by someone else: theirs stays");
        if (r->old_ino && ino_at(dir, b) == r->old_ino)
            TRY(keep(dir, b, name, j, r->rel, "old", why, len));
        if (r->old_ino && staged == r->old_ino)
            TRY(keep(dir, s, name, j, r->rel, "old", why, len));
        staged = ino_at(dir, s);
    }
    /* What was staged is the change being undone; anything else there is not ours. */
    if (staged && staged != r->new_ino)
        return keep(dir, s, name, j, r->rel, "other", why, len);
    if (remove_tree(dir, s, 0) < 0)
        return fail(why, len, "cannot remove what was staged for '%.160s'", r->rel);
    return 0;
}

/*
 * Finish record I (COMMITTED): made again if a power loss took its rename,
 * then the old entry, on its staged name or its ".old", removed. Where
 * someone else put an entry at NAME meanwhile, theirs stays and the new one
 * is kept beside it; an entry of the commit's names that is not the old
 * one (a host's, swapped in between the check and the rename) is kept too.
 */
static int rec_finish(int host, struct journal *j, size_t i, char *why, size_t len)
{
    const struct rec *r = &j->r[i];
    if (r->kind == REC_MODE)
        return 0;
    const char *name;
    _cleanup_close_ int dir = open_parent(host, r->rel, &name);
    if (dir < 0 && (errno == ENOENT || errno == ENOTDIR)) {
        settle_note(j, r->rel, "had its directory moved away");
        return 0;
    }
    if (dir < 0)
        return fail(why, len, "cannot open the directory of '%.160s'", r->rel);
    char s[64], b[64];
    staged_name(s, j->id, i, false);
    staged_name(b, j->id, i, true);
    unsigned long long at = ino_at(dir, name);
    bool redo = r->kind == REC_PUT ? at != r->new_ino : at && at == r->old_ino;
    if (redo && at && at == r->old_ino) {
        if (renameat2(dir, name, dir, b, RENAME_NOREPLACE) < 0)
            return fail(why, len, "cannot move the old '%.160s' aside", r->rel);
        at = 0;
    }
    if (redo && r->kind == REC_PUT && ino_at(dir, s) == r->new_ino) {
        if (at) {
            settle_note(j, r->rel, "was changed by someone else: theirs stays");
            TRY(keep(dir, s, name, j, r->rel, "new", why, len));
        } else if (renameat2(dir, s, dir, name, RENAME_NOREPLACE) < 0) {
            return fail(why, len, "cannot put '%.160s' in place", r->rel);
        }
    }
    const char *const aside[] = { s, b };
    for (size_t k = 0; k < 2; k++) {
        unsigned long long ino = ino_at(dir, aside[k]);
        if (ino && ino != r->old_ino)
            TRY(keep(dir, aside[k], name, j, r->rel, "other", why, len));
        else if (remove_tree(dir, aside[k], 0) < 0)
            return fail(why, len, "cannot remove the old '%.160s'", r->rel);
    }
    return 0;
}

static int rec_mode(int host, const struct rec *r, char *why, size_t len)
{
    _cleanup_close_ int fd = txn_open_beneath(host, r->rel, O_PATH | O_DIRECTORY);
    if (fd < 0 && errno == ENOENT)
        return 0; /* gone since: nothing to set */
    if (fd < 0 || chmod_fd(fd, r->mode) < 0)
        return fail(why, len, "cannot set the mode of '%.160s'", r->rel);
    return 0;
}

/* Remove what record I staged (STAGING, or after an undo); the names are reserved. */
static int rec_drop(int host, const struct journal *j, size_t i)
{
    const struct rec *r = &j->r[i];
    if (r->kind != REC_PUT)
        return 0;
    const char *name;
    _cleanup_close_ int dir = open_parent(host, r->rel, &name);
    char s[64];
    staged_name(s, j->id, i, false);
    return dir < 0 ? (errno == ENOENT || errno == ENOTDIR ? 0 : -1) : remove_tree(dir, s, 0);
}

/* ---- the three ends of a transaction ---- */

/* Undo J: its records in reverse (UPTO of them; all, in recovery), then the directory. */
static int roll_back(int host, struct journal *j, size_t upto, const char *dname, char *why,
                     size_t len)
{
    for (size_t i = upto; i-- > 0;)
        if (rec_undo(host, j, i, why, len) < 0)
            return -1;
    for (size_t i = upto; i < j->n; i++)
        if (rec_drop(host, j, i) < 0)
            return fail(why, len, "cannot remove what was staged for '%.160s'", j->r[i].rel);
    if (remove_tree(host, dname, 0) < 0)
        return fail(why, len, "cannot remove '%s'", dname);
    return 0;
}

/* Past the point of no return: old entries removed, modes set deepest first, the directory. */
static int roll_forward(int host, struct journal *j, const char *dname, char *why, size_t len)
{
    for (size_t i = 0; i < j->n; i++)
        if (rec_finish(host, j, i, why, len) < 0)
            return -1;
    for (size_t i = j->n; i-- > 0;)
        if (j->r[i].kind == REC_MODE && rec_mode(host, &j->r[i], why, len) < 0)
            return -1;
    if (remove_tree(host, dname, 0) < 0)
        return fail(why, len, "cannot remove '%s'", dname);
    return 0;
}

/* ---- the lock, and transactions a dead commit left ---- */

/*
 * The workspace, opened for flock and held exclusively: one commit or
 * recovery at a time, and none while a run writes it directly (they hold
 * it shared: txn_share()). Waits up to WAIT_MS; -1 with EWOULDBLOCK when
 * it did not come free in time.
 */
static int lock_workspace(int host, unsigned wait_ms)
{
    int fd = txn_open_beneath(host, ".", O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    for (unsigned waited = 0;; waited += 10) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        if (errno != EWOULDBLOCK || waited >= wait_ms) {
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
    }
}

/* Who holds HOST so that a commit cannot have it: direct runs alone (shared), or a commit. */
static const char *holder(int host)
{
    _cleanup_close_ int fd = txn_open_beneath(host, ".", O_RDONLY | O_DIRECTORY);
    if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) == 0)
        return "a run writing it directly (-w, workspace.mode: direct)";
    return "another commit or recovery";
}

/* ".cordon-txn-" and 16 hex digits: a transaction's directory. */
static bool is_txn_dir(const char *name)
{
    size_t n = strlen(TXN_RESERVED);
    if (strncmp(name, TXN_RESERVED, n) != 0 || strlen(name) != n + 16)
        return false;
    for (const char *c = name + n; *c; c++)
        if (hex_digit((unsigned char)*c) < 0)
            return false;
    return true;
}

/* Finish or undo the dead transaction DNAME (open as DFD) as its files say (the states above). */
static int recover_dir(int host, const struct policy *p, const char *dname, int dfd,
                       struct txn_recovery *rec)
{
    char *why = rec->reason;
    size_t len = sizeof rec->reason;
    bool committed = faccessat(dfd, "committed", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
    bool applying = true;
    char *text = read_journal_file(dfd, "journal");
    if (!text && errno == ENOENT && !committed) {
        applying = false; /* STAGING: nothing was applied */
        text = read_journal_file(dfd, "intent");
    }
    if (!text && errno != ENOENT)
        return fail(why, len, "cannot read '%s'", dname);
    struct journal j = { .own = true };
    if (text && journal_parse(text, dname + strlen(TXN_RESERVED), p, &j) < 0) {
        free(text);
        journal_release(&j);
        return errno = 0,
               fail(why, len,
                    "'%s' holds no journal cordon wrote, or one naming a "
                    "path this policy protects: left alone",
                    dname);
    }
    free(text);
    int rc;
    if (committed)
        rc = roll_forward(host, &j, dname, why, len);
    else
        rc = roll_back(host, &j, applying ? j.n : 0, dname, why, len);
    if (j.settled) {
        rec->settled += j.settled;
        snprintf(rec->settled_note, sizeof rec->settled_note, "%s", j.note);
    }
    journal_release(&j);
    if (rc == 0 && committed)
        rec->rolled_forward++;
    else if (rc == 0)
        rec->rolled_back++;
    return rc;
}

/* UID and GID alone: no supplementary group, no capability (uid 0 keeps them otherwise). */
static int become(uid_t uid, gid_t gid)
{
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct none[2] = { { 0 } };
    if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
        return -1;
    return sys_capset(&hdr, none);
}

/* What a recovering child hands back. */
struct recovered {
    int rc;
    struct txn_recovery rec;
};

/* recover_dir() in a child that is UID and GID alone (become()); its outcome into REC. */
static int recover_as(int host, const struct policy *p, const char *dname, int dfd, uid_t uid,
                      gid_t gid, struct txn_recovery *rec)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return fail(rec->reason, sizeof rec->reason, "cannot recover '%s'", dname);
    pid_t pid = fork();
    if (pid == 0) {
        struct recovered out = { .rc = -1 };
        close(pfd[0]);
        if (become(uid, gid) < 0)
            fail(out.rec.reason, sizeof out.rec.reason, "cannot act as uid %u to recover '%s'",
                 (unsigned)uid, dname);
        else
            out.rc = recover_dir(host, p, dname, dfd, &out.rec);
        _exit(write(pfd[1], &out, sizeof out) == (ssize_t)sizeof out ? 0 : 1);
    }
    close(pfd[1]);
    struct recovered got = { .rc = -1 };
    ssize_t n = pid < 0 ? -1 : read(pfd[0], &got, sizeof got);
    int e = errno;
    close(pfd[0]);
    while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)sizeof got) {
        errno = pid < 0 ? e : 0;
        return fail(rec->reason, sizeof rec->reason, "cannot recover '%s'", dname);
    }
    rec->rolled_back += got.rec.rolled_back;
    rec->rolled_forward += got.rec.rolled_forward;
    rec->settled += got.rec.settled;
    if (got.rec.settled)
        memcpy(rec->settled_note, got.rec.settled_note, sizeof rec->settled_note);
    if (got.rc < 0)
        snprintf(rec->reason, sizeof rec->reason, "%s", got.rec.reason);
    return got.rc;
}

/*
 * DNAME, recovered with no more power than its maker had. The workspace is
 * the run's to write when it runs -w in direct mode or binds it --rw, so a
 * transaction directory may be of a run's making, and its journal may name
 * any path beneath W: a root caller's recovery would move, delete or chmod
 * with root's power other users' files, which the run (uid 0 without a
 * capability over them) could not. So the recovery acts as the directory's
 * owner, with no capability and no supplementary group: a root caller in a
 * child that becomes that uid; another caller recovers only its own, as
 * itself. Its group is the directory's, unless W is set-group-ID (then the
 * group came from W, not its maker: nogroup). cordon makes the directory
 * 0700: one open to others (another user's, renamed here) is none of ours.
 */
static int recover_one(int host, const struct policy *p, const char *dname,
                       struct txn_recovery *rec)
{
    char *why = rec->reason;
    size_t len = sizeof rec->reason;
    _cleanup_close_ int dfd = txn_open_beneath(host, dname, O_RDONLY | O_DIRECTORY);
    struct stat st, top;
    if (dfd < 0 || fstat(dfd, &st) < 0 || fstat(host, &top) < 0)
        return fail(why, len, "cannot open '%s'", dname);
    if (st.st_mode & 077)
        return errno = 0,
               fail(why, len,
                    "'%s' is open to others (mode %04o), so cordon did "
                    "not make it: left alone",
                    dname, (unsigned)(st.st_mode & 07777));
    if (geteuid() == 0)
        return recover_as(host, p, dname, dfd, st.st_uid,
                          (top.st_mode & S_ISGID) ? 65534 : st.st_gid, rec);
    if (st.st_uid != geteuid())
        return errno = 0, fail(why, len, "'%s' belongs to uid %u", dname, (unsigned)st.st_uid);
    return recover_dir(host, p, dname, dfd, rec);
}

/* Every dead transaction in the workspace; the caller holds the lock. */
static int recover_all(int host, const struct policy *p, struct txn_recovery *rec)
{
    _cleanup_close_ int top = txn_open_beneath(host, ".", O_RDONLY | O_DIRECTORY);
    size_t n = 0;
    char **names = top < 0 ? NULL : txn_list_dir(top, &n);
    if (!names) {
        rec->failed++;
        return fail(rec->reason, sizeof rec->reason, "cannot read the workspace");
    }
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (!is_txn_dir(names[i]) || fstatat(top, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISDIR(st.st_mode))
            continue;
        if (recover_one(host, p, names[i], rec) < 0)
            rec->failed++;
    }
    txn_free_list(names, n);
    if (rec->rolled_back + rec->rolled_forward)
        fsync(top);
    return rec->failed ? -1 : 0;
}

static int recover_locked(int host, const struct policy *p, unsigned wait_ms,
                          struct txn_recovery *rec)
{
    _cleanup_close_ int lock = lock_workspace(host, wait_ms);
    if (lock < 0 && errno == EWOULDBLOCK) {
        rec->busy = true; /* a commit or recovery is under way: it is theirs */
        return 0;
    }
    if (lock < 0) {
        rec->failed++;
        return fail(rec->reason, sizeof rec->reason, "cannot lock the workspace");
    }
    return recover_all(host, p, rec);
}

int txn_recover(int host, const struct policy *p, unsigned wait_ms, struct txn_recovery *rec)
{
    memset(rec, 0, sizeof *rec);
    int rc = recover_locked(host, p, wait_ms, rec);
    text_escape_controls(rec->reason, sizeof rec->reason); /* it quotes names from the disk */
    text_escape_controls(rec->settled_note, sizeof rec->settled_note);
    return rc;
}

/*
 * Exclusive first, to recover what a dead commit left, then down to shared;
 * or shared at once when only other direct runs hold it (each recovered as
 * it came). Neither while a commit holds it: that is waited out.
 */
static int share_locked(int host, const struct policy *p, unsigned wait_ms,
                        struct txn_recovery *rec)
{
    _cleanup_close_ int fd = txn_open_beneath(host, ".", O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return fail(rec->reason, sizeof rec->reason, "cannot lock the workspace");
    for (unsigned waited = 0;; waited += 10) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            if (recover_all(host, p, rec) < 0)
                return -1;
            /* Not atomic: a commit may come in between, and is waited out. */
            if (flock(fd, LOCK_SH | LOCK_NB) == 0)
                return TAKE_FD(fd);
        } else if (errno == EWOULDBLOCK && flock(fd, LOCK_SH | LOCK_NB) == 0) {
            return TAKE_FD(fd);
        }
        if (errno != EWOULDBLOCK)
            return fail(rec->reason, sizeof rec->reason, "cannot lock the workspace");
        if (waited >= wait_ms) {
            rec->busy = true;
            return errno = 0,
                   fail(rec->reason, sizeof rec->reason, "a commit into it held it for %u s",
                        wait_ms / 1000);
        }
        nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
    }
}

int txn_share(int host, const struct policy *p, unsigned wait_ms, struct txn_recovery *rec)
{
    memset(rec, 0, sizeof *rec);
    int fd = share_locked(host, p, wait_ms, rec);
    text_escape_controls(rec->reason, sizeof rec->reason);
    text_escape_controls(rec->settled_note, sizeof rec->settled_note);
    return fd;
}

/* ---- a commit ---- */

static bool under(const char *rel, const char *root)
{
    size_t n = strlen(root);
    return strncmp(rel, root, n) == 0 && rel[n] == '/';
}

/*
 * The records of T's entries: a removal, a new entry (a new directory is
 * one, its tree staged inside it), a directory's mode. PUT[k] is entry
 * k's record, or -1 (a removal, a merged directory, inside a new one).
 */
static int plan(const struct txn *t, struct journal *j, ssize_t *put, bool *probe)
{
    const char *root = NULL;
    for (size_t k = 0; k < t->n; k++) {
        const struct txn_entry *e = &t->e[k];
        bool dir = S_ISDIR(e->mode), merged = dir && e->op == OP_CHANGE && !e->clear_first;
        put[k] = -1;
        if (root && !under(e->rel, root))
            root = NULL;
        struct rec *r = NULL;
        if (!root && e->op == OP_REMOVE) {
            if (!(r = journal_add(j, REC_DEL, e->rel, 0)))
                return -1;
            r->e = e;
            continue;
        }
        if (!root && !merged) {
            put[k] = (ssize_t)j->n;
            if (!(r = journal_add(j, REC_PUT, e->rel, 0)))
                return -1;
            r->e = e;
            root = dir ? e->rel : NULL;
        }
        /* A directory's mode is set last: a new one is 0700 until then. */
        if (dir && (merged || txn_safe_mode(e->mode) != 0700)) {
            probe[j->n] = merged;
            if (!journal_add(j, REC_MODE, e->rel, txn_safe_mode(e->mode) & 0777))
                return -1;
        }
    }
    return 0;
}

/* Could the directory NAME in DIR go, with all it holds: writable and searchable, or ours? */
static bool removable(int dir, const char *name, unsigned depth)
{
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
        return true;
    bool ours = st.st_uid == geteuid();
    if (depth > TXN_MAX_DEPTH + 8 ||
        (!ours && faccessat(dir, name, W_OK | X_OK, AT_EACCESS | AT_SYMLINK_NOFOLLOW) != 0))
        return false;
    _cleanup_close_ int fd = txn_open_beneath(dir, name, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return ours; /* made readable by the removal's chmod */
    size_t n = 0;
    char **names = txn_list_dir(fd, &n);
    bool ok = names != NULL;
    for (size_t i = 0; ok && i < n; i++)
        ok = removable(fd, names[i], depth + 1);
    txn_free_list(names, n);
    return ok;
}

/*
 * Before anything is staged: each record's old entry (its inode), which
 * must be removable when it goes; a merged directory's mode must be ours
 * to set. What fails here fails the commit with nothing applied.
 */
static int check_olds(int host, struct journal *j, const bool *probe, char *why, size_t len)
{
    for (size_t i = 0; i < j->n; i++) {
        struct rec *r = &j->r[i];
        if (r->kind == REC_MODE && !probe[i])
            continue; /* a new directory's: ours */
        const char *name;
        _cleanup_close_ int dir = open_parent(host, r->rel, &name);
        if (dir < 0)
            return fail(why, len, "cannot open the directory of '%.160s'", r->rel);
        if (r->kind == REC_MODE) {
            struct stat st;
            _cleanup_close_ int fd = txn_open_beneath(dir, name, O_PATH | O_DIRECTORY);
            if (fd < 0 || fstat(fd, &st) < 0 || chmod_fd(fd, st.st_mode & 07777) < 0)
                return fail(why, len, "cannot set the mode of '%.160s'", r->rel);
            continue;
        }
        struct stat st;
        bool there = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
        r->old_ino = there ? (unsigned long long)st.st_ino : 0;
        /* Applied only over what the scan read: a change made since would be lost. */
        if (r->e &&
            (r->old_ino != r->e->host_ino ||
             (there &&
              (st.st_ctim.tv_sec != r->e->host_ctime.tv_sec ||
               st.st_ctim.tv_nsec != r->e->host_ctime.tv_nsec))))
            return errno = 0,
                   fail(why, len,
                        "'%.160s' was changed in the workspace after the run's change "
                        "was read",
                        r->rel);
        if (r->old_ino && !removable(dir, name, 0))
            return errno = EACCES, fail(why, len, "cannot remove the old '%.160s'", r->rel);
    }
    return 0;
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

/* E's new version as NAME in DIR: a file copied from the layer, a link, a directory (0700). */
static int make_entry(const struct txn *t, const struct txn_entry *e, int dir, const char *name)
{
    if (S_ISDIR(e->mode))
        return mkdirat(dir, name, 0700);
    if (S_ISLNK(e->mode))
        return symlinkat(e->link, dir, name);
    _cleanup_close_ int from = txn_open_beneath(t->upper, e->rel, O_RDONLY | O_NONBLOCK);
    _cleanup_close_ int to =
        openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (from < 0 || to < 0 || copy_data(from, to) < 0 || fchmod(to, txn_safe_mode(e->mode)) < 0)
        return -1;
    return 0;
}

/* Every new entry beside its target (a new directory's tree inside it); the inodes noted. */
static int stage(const struct txn *t, struct journal *j, const ssize_t *put, char *why, size_t len)
{
    _cleanup_close_ int root = -1;
    const char *root_rel = NULL;
    for (size_t k = 0; k < t->n; k++) {
        const struct txn_entry *e = &t->e[k];
        const char *name;
        if (root >= 0 && under(e->rel, root_rel)) {
            _cleanup_close_ int dir = open_parent(root, e->rel + strlen(root_rel) + 1, &name);
            if (dir < 0 || make_entry(t, e, dir, name) < 0)
                return fail(why, len, "cannot stage '%.160s'", e->rel);
            continue;
        }
        closep(&root);
        if (put[k] < 0)
            continue;
        struct rec *r = &j->r[put[k]];
        char s[64];
        staged_name(s, j->id, (size_t)put[k], false);
        _cleanup_close_ int dir = open_parent(t->host, e->rel, &name);
        if (dir < 0 || make_entry(t, e, dir, s) < 0 || !(r->new_ino = ino_at(dir, s)))
            return fail(why, len, "cannot stage '%.160s'", e->rel);
        if (S_ISDIR(e->mode) && (root = txn_open_beneath(dir, s, O_PATH | O_DIRECTORY)) < 0)
            return fail(why, len, "cannot stage '%.160s'", e->rel);
        root_rel = e->rel;
    }
    return 0;
}

/* Journal J's text durably as NAME in DFD. */
static int write_journal(int dfd, const struct journal *j, const char *name, char *why, size_t len)
{
    size_t n = 0;
    _cleanup_free_ char *text = journal_text(j, &n);
    if (!text || write_durably(dfd, name, text, n) < 0)
        return fail(why, len, "cannot write the commit's %s", name);
    return 0;
}

/* STAGING to APPLYING: the directory, intent, checks, staging, syncfs, journal. */
static int prepare_commit(const struct txn *t, struct journal *j, const ssize_t *put,
                          const bool *probe, int lock, const char *dname, char *why, size_t len)
{
    if (mkdirat(t->host, dname, 0700) < 0)
        return fail(why, len, "cannot make '%s' in the workspace", dname);
    _cleanup_close_ int dfd = txn_open_beneath(t->host, dname, O_RDONLY | O_DIRECTORY);
    if (dfd < 0 || fsync(lock) < 0)
        return fail(why, len, "cannot make '%s' in the workspace", dname);
    TRY(write_journal(dfd, j, "intent", why, len));
    TRY(check_olds(t->host, j, probe, why, len));
    TRY(stage(t, j, put, why, len));
    if (syncfs(lock) < 0)
        return fail(why, len, "cannot flush the staged entries");
    return write_journal(dfd, j, "journal", why, len);
}

/* APPLYING to COMMITTED: every record in place, syncfs, the marker. -1: undo UPTO records. */
static int apply_records(const struct txn *t, const struct journal *j, int lock, const char *dname,
                         size_t *upto, char *why, size_t len)
{
    for (*upto = 0; *upto < j->n;) {
        size_t i = (*upto)++; /* a record that failed may have got half way: undone too */
        TRY(rec_apply(t->host, j, i, why, len));
    }
    _cleanup_close_ int dfd = txn_open_beneath(t->host, dname, O_RDONLY | O_DIRECTORY);
    if (syncfs(lock) < 0 || dfd < 0 || write_durably(dfd, "committed", "", 0) < 0)
        return fail(why, len, "cannot mark the commit done");
    return 0;
}

/* The commit of T's records as the comment at the top says; SUM says how it went. */
static void commit(struct txn *t, struct txn_summary *sum, int lock)
{
    char why[224], undo[224], dname[40];
    size_t len = sizeof why, upto = 0;
    struct journal j = { 0 };
    unsigned char id[8] = { 0 };
    (void)!getrandom(id, sizeof id, 0);
    hex_encode(id, sizeof id, j.id);
    snprintf(dname, sizeof dname, TXN_RESERVED "%s", j.id);
    _cleanup_free_ ssize_t *put = calloc(t->n + 1, sizeof *put);
    _cleanup_free_ bool *probe = calloc(2 * t->n + 1, sizeof *probe);
    int rc = put && probe && plan(t, &j, put, probe) == 0 ? 0 : fail(why, len, "out of memory");
    bool made = false;
    if (rc == 0 && (rc = prepare_commit(t, &j, put, probe, lock, dname, why, len)) < 0)
        made = errno != EEXIST && faccessat(t->host, dname, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
    else if (rc == 0 && (rc = apply_records(t, &j, lock, dname, &upto, why, len)) < 0)
        made = true;
    sum->outcome = rc < 0 ? TXN_FAILED : TXN_COMMITTED;
    if (rc < 0 && made && roll_back(t->host, &j, upto, dname, undo, sizeof undo) < 0)
        snprintf(sum->reason, sizeof sum->reason,
                 "%.100s; undoing it failed (%.100s): "
                 "`cordon check -w` finishes it",
                 why, undo);
    else if (rc < 0)
        snprintf(sum->reason, sizeof sum->reason, "%s; nothing was applied", why);
    else if (roll_forward(t->host, &j, dname, why, len) < 0)
        snprintf(sum->reason, sizeof sum->reason,
                 "committed, but %.200s: `cordon check -w` "
                 "finishes it",
                 why);
    if (j.settled) {
        /* Someone else's change met it: what was kept where, for the user to see. */
        size_t used = strlen(sum->reason);
        snprintf(sum->reason + used, sizeof sum->reason - used, "; %s", j.note);
        text_escape_controls(sum->reason, sizeof sum->reason);
    }
    fsync(lock);
    journal_release(&j);
}

void txn_apply(struct txn *t, struct txn_summary *sum)
{
    if (sum->outcome == TXN_REFUSED)
        return;
    sum->reason[0] = '\0';
    if (t->n == 0) {
        sum->outcome = TXN_COMMITTED;
        return;
    }
    sum->outcome = TXN_FAILED;
    _cleanup_close_ int lock = lock_workspace(t->host, LOCK_WAIT_MS);
    if (lock < 0 && errno == EWOULDBLOCK) {
        snprintf(sum->reason, sizeof sum->reason,
                 "the workspace was held by %s for %u s; nothing was applied", holder(t->host),
                 LOCK_WAIT_MS / 1000);
        return;
    }
    if (lock < 0) {
        fail(sum->reason, sizeof sum->reason, "cannot lock the workspace; nothing was applied");
        return;
    }
    /* Under the lock, a transaction left there is a dead commit's: finished or undone first. */
    struct txn_recovery rec = { 0 };
    if (recover_all(t->host, t->p, &rec) < 0) {
        snprintf(sum->reason, sizeof sum->reason,
                 "an interrupted commit is in the way "
                 "(%.160s); nothing was applied",
                 rec.reason);
        return;
    }
    commit(t, sum, lock);
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
