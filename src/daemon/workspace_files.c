/*
 * daemon/workspace_files.c: confined file operations on a session's
 * workspace (see workspace_files.h). Runs in the daemon, with every run of
 * the session possibly still writing there.
 */
#include "daemon/workspace_files.h"

#include "common/cleanup.h"
#include "common/syscalls.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Deeper than this a copy or removal refuses: a run could nest without end. */
#define MAX_DEPTH 128

#define CONFINED (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

int wsfile_open(int dirfd, const char *path, int flags, mode_t mode)
{
    struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC),
                            .mode = mode,
                            .resolve = CONFINED };
    int fd;
    while ((fd = sys_openat2(dirfd, path, &how, sizeof how)) < 0 && errno == EINTR)
        ;
    return fd;
}

int wsfile_normalize(const char *path, char *out, size_t size)
{
    size_t n = 0;
    for (const char *c = path; *c;) {
        size_t seg = strcspn(c, "/");
        if (seg == 2 && c[0] == '.' && c[1] == '.')
            return WSFILE_PATH_UP;
        if (seg && !(seg == 1 && *c == '.')) {
            if (n + seg + 2 > size || seg > NAME_MAX)
                return -1;
            if (n)
                out[n++] = '/';
            memcpy(out + n, c, seg);
            n += seg;
        }
        c += seg + (c[seg] == '/');
    }
    if (size < 2)
        return -1;
    if (!n)
        out[n++] = '.';
    out[n] = '\0';
    return 0;
}

int wsfile_check_path(const char *path, char *why, size_t len)
{
    if (!*path || *path == '/') {
        snprintf(why, len, "path must be relative to the workspace, got \"%.200s\"", path);
        return -1;
    }
    if (strlen(path) >= PATH_MAX) {
        snprintf(why, len, "path too long");
        return -1;
    }
    /* Every component, the one after a trailing slash too ("a/" has an empty one). */
    for (const char *p = path, *e;; p = e + 1) {
        e = strchrnul(p, '/');
        size_t n = (size_t)(e - p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
            snprintf(why, len, "path \"%.200s\" has an empty, \".\" or \"..\" component", path);
            return -1;
        }
        if (!*e)
            break;
    }
    return 0;
}

int wsfile_open_parent(int root_fd, const char *path, bool make, const char **leaf,
                       struct cordon_err *err)
{
    int dir = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
    if (dir < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot use the workspace");
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        if (!slash)
            break;
        char comp[NAME_MAX + 1];
        size_t n = (size_t)(slash - p);
        if (n > NAME_MAX) {
            close(dir);
            return err_set(err, CORDON_E_USAGE, "a name in '%s' is too long", path);
        }
        memcpy(comp, p, n);
        comp[n] = '\0';
        if (make && mkdirat(dir, comp, 0755) < 0 && errno != EEXIST) {
            int e = errno;
            close(dir);
            errno = e;
            return err_sys(err, CORDON_E_SETUP, "cannot make directory '%.*s'", (int)(slash - path),
                           path);
        }
        int next = wsfile_open(dir, comp, O_PATH | O_DIRECTORY, 0);
        int e = errno;
        close(dir);
        if (next < 0) {
            errno = e;
            return err_sys(err, e == ENOENT ? CORDON_E_NOTFOUND : CORDON_E_SETUP,
                           "cannot open directory '%.*s' in the workspace", (int)(slash - path),
                           path);
        }
        dir = next;
        p = slash + 1;
    }
    *leaf = p;
    return dir;
}

int wsfile_write(int root_fd, const char *path, const char *data, size_t len, mode_t mode,
                 struct cordon_err *err)
{
    const char *leaf = NULL;
    _cleanup_close_ int dir = wsfile_open_parent(root_fd, path, true, &leaf, err);
    if (dir < 0)
        return -1;
    /* A new file beside the old, renamed over it: whatever stood there (a
     * FIFO, a link the sandbox planted) is replaced, never written through. */
    char tmp[NAME_MAX + 1];
    snprintf(tmp, sizeof tmp, ".cordon-write-%d", (int)getpid());
    unlinkat(dir, tmp, 0);
    _cleanup_close_ int fd = wsfile_open(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
                                         mode & 07777 & ~(mode_t)06000);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create '%s' in the workspace", path);
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            unlinkat(dir, tmp, 0);
            return err_sys(err, CORDON_E_SETUP, "cannot write '%s' in the workspace", path);
        }
        off += (size_t)n;
    }
    if (renameat(dir, tmp, dir, leaf) < 0) {
        int e = errno;
        unlinkat(dir, tmp, 0);
        errno = e;
        return err_sys(err, CORDON_E_SETUP, "cannot write '%s' in the workspace", path);
    }
    return 0;
}

int wsfile_read(int root_fd, const char *path, size_t max, char **out, size_t *len, uint64_t *size,
                struct cordon_err *err)
{
    /* O_NONBLOCK: a FIFO the sandbox left must not hang the daemon. */
    _cleanup_close_ int fd = wsfile_open(root_fd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    if (fd < 0)
        return err_sys(err, errno == ENOENT ? CORDON_E_NOTFOUND : CORDON_E_SETUP,
                       "cannot open '%s' in the workspace", path);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return err_set(err, CORDON_E_USAGE, "'%s' is not a regular file", path);
    size_t want = (uint64_t)st.st_size < max ? (size_t)st.st_size : max;
    _cleanup_free_ char *buf = malloc(want + 1);
    if (!buf)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, buf + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot read '%s'", path);
        if (n == 0)
            break;
        got += (size_t)n;
    }
    *out = TAKE_PTR(buf);
    *len = got;
    *size = (uint64_t)st.st_size;
    return 0;
}

struct copy_count {
    unsigned cloned, copied;
};

static int copy_file(int from_dir, int to_dir, const char *name, const struct stat *st,
                     struct copy_count *count, struct cordon_err *err)
{
    _cleanup_close_ int in = wsfile_open(from_dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    if (in < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open '%s' to copy it", name);
    _cleanup_close_ int out =
        wsfile_open(to_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, st->st_mode & 0777);
    if (out < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create '%s' in the copy", name);
    /* A reflink shares the blocks until either side writes. */
    if (ioctl(out, FICLONE, in) == 0)
        return count->cloned++, 0;
    count->copied++;
    for (;;) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, 1u << 30, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot copy '%s'", name);
        if (n == 0)
            return 0;
    }
}

static int copy_dir(int from, int to, unsigned depth, struct copy_count *count,
                    struct cordon_err *err)
{
    if (depth > MAX_DEPTH)
        return err_set(err, CORDON_E_USAGE, "the workspace is nested deeper than %d", MAX_DEPTH);
    int dup = fcntl(from, F_DUPFD_CLOEXEC, 3);
    DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
    if (!d) {
        if (dup >= 0)
            close(dup);
        return err_sys(err, CORDON_E_SETUP, "cannot list a workspace directory");
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        struct stat st;
        if (fstatat(from, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* gone meanwhile */
        if (S_ISDIR(st.st_mode)) {
            if (mkdirat(to, e->d_name, st.st_mode & 0777) < 0) {
                rc = err_sys(err, CORDON_E_SETUP, "cannot make '%s' in the copy", e->d_name);
                break;
            }
            _cleanup_close_ int sf = wsfile_open(from, e->d_name, O_RDONLY | O_DIRECTORY, 0);
            _cleanup_close_ int tf = wsfile_open(to, e->d_name, O_RDONLY | O_DIRECTORY, 0);
            if (sf < 0 || tf < 0)
                rc = err_sys(err, CORDON_E_SETUP, "cannot open '%s' to copy it", e->d_name);
            else
                rc = copy_dir(sf, tf, depth + 1, count, err);
        } else if (S_ISREG(st.st_mode)) {
            rc = copy_file(from, to, e->d_name, &st, count, err);
        } else if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t n = readlinkat(from, e->d_name, target, sizeof target - 1);
            if (n >= 0) {
                target[n] = '\0';
                if (symlinkat(target, to, e->d_name) < 0)
                    rc = err_sys(err, CORDON_E_SETUP, "cannot copy link '%s'", e->d_name);
            }
        }
        /* FIFOs, sockets and devices are not a workspace's content: not copied. */
    }
    closedir(d);
    return rc;
}

int wsfile_copy_tree(int from_fd, int to_fd, unsigned *cloned, unsigned *copied,
                     struct cordon_err *err)
{
    _cleanup_close_ int from = wsfile_open(from_fd, ".", O_RDONLY | O_DIRECTORY, 0);
    _cleanup_close_ int to = wsfile_open(to_fd, ".", O_RDONLY | O_DIRECTORY, 0);
    if (from < 0 || to < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open the workspaces to copy");
    struct copy_count n = { 0, 0 };
    int rc = copy_dir(from, to, 0, &n, err);
    *cloned += n.cloned;
    *copied += n.copied;
    return rc;
}

/* A removal's walk: what it keeps (or NULL), the directory's path in the workspace ("": root). */
struct walk {
    struct wsfile_keep *keep;
    char rel[PATH_MAX];
    size_t len;
};

/* Into W's path, the entry NAME: -1 when it does not fit. */
static int walk_in(struct walk *w, const char *name)
{
    int n = snprintf(w->rel + w->len, sizeof w->rel - w->len, "%s%s", w->len ? "/" : "", name);
    if (n < 0 || (size_t)n >= sizeof w->rel - w->len) {
        w->rel[w->len] = '\0';
        return -1;
    }
    w->len += (size_t)n;
    return 0;
}

/* Is the entry NAME of DIR (W's path now) one W keeps? */
static bool kept(struct walk *w, int dir, const char *name)
{
    if (!w->keep || !w->keep->keep(dir, name, w->rel, w->keep->ctx))
        return false;
    if (!w->keep->kept++)
        snprintf(w->keep->first, sizeof w->keep->first, "%s", w->rel);
    return true;
}

static int remove_in(int dir, unsigned depth, struct walk *w);

/* Remove DIR's entry NAME (W's path now), but what W keeps: as remove_in() tells. */
static int remove_entry(int dir, const char *name, unsigned depth, struct walk *w)
{
    if (kept(w, dir, name))
        return 1;
    bool dry = w->keep && w->keep->dry;
    struct stat st;
    if (dry ? fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)
            : unlinkat(dir, name, 0) == 0 || errno == ENOENT)
        return 0; /* a file removed, one gone meanwhile, or one a dry walk passes */
    /* A directory: emptied (opened without following), then removed. */
    int sub = wsfile_open(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    int below = sub < 0 ? (errno == ENOENT ? 0 : -1) : remove_in(sub, depth + 1, w);
    if (sub >= 0)
        close(sub);
    if (below > 0 || dry)
        return below; /* it holds what is kept: it stays */
    if (unlinkat(dir, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return -1;
    return below;
}

/*
 * Remove what DIR holds, but what W keeps (a dry walk: nothing). -1 on a
 * failure, 1 when something was kept in it, 0 when it is empty.
 */
static int remove_in(int dir, unsigned depth, struct walk *w)
{
    if (depth > MAX_DEPTH)
        return -1;
    int dup = fcntl(dir, F_DUPFD_CLOEXEC, 3);
    DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
    if (!d) {
        if (dup >= 0)
            close(dup);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        size_t len = w->len;
        int one =
            w->keep && walk_in(w, e->d_name) < 0 ? -1 : remove_entry(dir, e->d_name, depth, w);
        w->len = len;
        w->rel[len] = '\0';
        if (one < 0 || (one > 0 && rc == 0))
            rc = one;
    }
    closedir(d);
    return rc;
}

int wsfile_empty_dir(int dir_fd, struct wsfile_keep *keep, struct cordon_err *err)
{
    _cleanup_close_ int fd = wsfile_open(dir_fd, ".", O_RDONLY | O_DIRECTORY, 0);
    struct walk w = { .keep = keep };
    if (keep && strcmp(keep->top, ".") != 0)
        w.len = (size_t)snprintf(w.rel, sizeof w.rel, "%s", keep->top);
    if (keep)
        keep->kept = 0;
    if (w.len >= sizeof w.rel || fd < 0 || remove_in(fd, 0, &w) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot empty the directory");
    return 0;
}

int wsfile_remove_tree(int parent_fd, const char *dir, struct cordon_err *err)
{
    int fd = wsfile_open(parent_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (fd < 0)
        return errno == ENOENT ? 0 : err_sys(err, CORDON_E_SETUP, "cannot open '%s'", dir);
    struct walk w = { 0 };
    int rc = remove_in(fd, 0, &w);
    close(fd);
    if (rc < 0 || (unlinkat(parent_fd, dir, AT_REMOVEDIR) < 0 && errno != ENOENT))
        return err_sys(err, CORDON_E_SETUP, "cannot remove '%s' whole", dir);
    return 0;
}
