/*
 * common/hostpath.c: opening host paths without following links a run could
 * have planted (see hostpath.h). Supervisor, and the namespace child while
 * it takes binds from the host tree.
 */
#include "common/hostpath.h"

#include "common/cleanup.h"
#include "common/syscalls.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *hostpath_normalize(const char *in, bool fold_dotdot, bool *dotdot)
{
    char *out = malloc(strlen(in) + 2);
    if (!out)
        return NULL;
    size_t o = 0;
    if (dotdot)
        *dotdot = false;
    for (const char *s = in; *s;) {
        while (*s == '/')
            s++;
        const char *e = s;
        while (*e && *e != '/')
            e++;
        size_t clen = (size_t)(e - s);
        bool up = clen == 2 && s[0] == '.' && s[1] == '.';
        if (up && dotdot)
            *dotdot = true;
        if (up && fold_dotdot) {
            while (o > 0 && out[--o] != '/')
                ;
        } else if (clen > 0 && !(clen == 1 && s[0] == '.')) {
            out[o++] = '/';
            memcpy(out + o, s, clen);
            o += clen;
        }
        s = e;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    return out;
}

char *hostpath_absolute(const char *path)
{
    if (path[0] == '/')
        return hostpath_normalize(path, true, NULL);
    _cleanup_free_ char *cwd = getcwd(NULL, 0);
    if (!cwd)
        return NULL;
    _cleanup_free_ char *joined = NULL;
    if (asprintf(&joined, "%s/%s", cwd, path) < 0)
        return NULL;
    return hostpath_normalize(joined, true, NULL);
}

bool hostpath_within(const char *path, const char *dir)
{
    if (strcmp(dir, "/") == 0)
        return true;
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

bool hostpath_find_link(const char *path, char *out, size_t len, char *target, size_t tlen)
{
    char buf[PATH_MAX];
    if (!path[0] || snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return false;
    for (char *s = buf + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        struct stat st;
        if (lstat(buf, &st) < 0)
            return false;
        if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlink(buf, target, tlen - 1);
            target[n < 0 ? 0 : n] = '\0';
            snprintf(out, len, "%s", buf);
            return true;
        }
        if (c == '\0')
            return false;
        *s = c;
    }
}

int hostpath_open(int dirfd, const char *path, int flags, mode_t mode, bool follow,
                  struct cordon_err *err)
{
    struct open_how how = {
        .flags = (uint64_t)(flags | O_CLOEXEC),
        .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
        .resolve = RESOLVE_NO_MAGICLINKS | (follow ? 0 : RESOLVE_NO_SYMLINKS),
    };
    int fd = sys_openat2(dirfd, path, &how, sizeof how);
    if (fd >= 0)
        return fd;
    if (errno == ELOOP && !follow) {
        char link[PATH_MAX], target[PATH_MAX];
        int saved = errno;
        if (hostpath_find_link(path, link, sizeof link, target, sizeof target)) {
            errno = saved;
            return err_set(err, CORDON_E_SETUP,
                           "'%s' is a symbolic link (to '%s'); cordon does not follow links in "
                           "host paths",
                           link, target);
        }
        errno = saved;
    }
    if (errno == ENXIO) /* O_WRONLY | O_NONBLOCK on a FIFO (or socket) with no reader */
        return err_set(err, CORDON_E_SETUP, "'%s' is not a regular file", path);
    return err_sys(err, CORDON_E_SETUP, "cannot open '%s'", path);
}

/* The directory PATH's file is in, opened without following links; *BASE its name. */
static int open_dir_of(const char *path, char **abs, const char **base, struct cordon_err *err)
{
    *abs = hostpath_absolute(path);
    if (!*abs)
        return err_sys(err, CORDON_E_SETUP, "cannot resolve '%s'", path);
    char *slash = strrchr(*abs, '/');
    *base = slash + 1;
    if (!**base)
        return err_set(err, CORDON_E_SETUP, "'%s' names a directory, not a file", path);
    *slash = '\0';
    int dir = hostpath_open(AT_FDCWD, (*abs)[0] ? *abs : "/", O_PATH | O_DIRECTORY, 0, false, err);
    *slash = '/';
    return dir;
}

int hostpath_check_dir_of(const char *path, struct cordon_err *err)
{
    _cleanup_free_ char *abs = NULL;
    const char *base;
    _cleanup_close_ int dir = open_dir_of(path, &abs, &base, err);
    if (dir < 0)
        return -1;
    /* The file is replaced by a rename in its directory: that must be writable
     * (AT_EACCESS: as cordon, which root passes only on a writable mount). */
    struct stat st;
    if (fstatat(dir, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        return err_set(err, CORDON_E_SETUP, "'%s' is a directory, not a file", path);
    if (faccessat(dir, ".", W_OK, AT_EACCESS) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot write in the directory of '%s'", path);
    return 0;
}

int hostpath_replace_file(const char *path, const char *data, size_t len, struct cordon_err *err)
{
    _cleanup_free_ char *abs = NULL;
    const char *base;
    _cleanup_close_ int dir = open_dir_of(path, &abs, &base, err);
    if (dir < 0)
        return -1;

    char tmp[NAME_MAX + 1];
    _cleanup_close_ int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        unsigned r;
        if (getentropy(&r, sizeof r) < 0)
            r = (unsigned)getpid() ^ (unsigned)tries;
        snprintf(tmp, sizeof tmp, ".cordon-%08x.tmp", r);
        fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create a file beside '%s'", path);
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err_sys(err, CORDON_E_SETUP, "cannot write '%s'", path);
            unlinkat(dir, tmp, 0);
            return -1;
        }
        off += (size_t)n;
    }
    if (renameat(dir, tmp, dir, base) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot write '%s'", path);
        unlinkat(dir, tmp, 0);
        return -1;
    }
    return 0;
}

char *read_small_file(const char *path, size_t max, size_t *n, struct cordon_err *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_sys(err, CORDON_E_POLICY, "cannot open '%s'", path);
        return NULL;
    }
    /* Room for one byte more than MAX: a file that fills it is larger. */
    _cleanup_free_ char *buf = malloc(max + 2);
    if (!buf) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    ssize_t len = read_small_fd(fd, buf, max + 2);
    if (len < 0 && errno == EISDIR) {
        err_set(err, CORDON_E_POLICY, "cannot read '%s': it is a directory", path);
        return NULL;
    }
    if (len < 0) {
        err_sys(err, CORDON_E_POLICY, "cannot read '%s'", path);
        return NULL;
    }
    if ((size_t)len > max) {
        err_set(err, CORDON_E_POLICY, "%s: larger than %zu bytes", path, max);
        return NULL;
    }
    *n = (size_t)len;
    return TAKE_PTR(buf);
}

ssize_t read_small_fd(int fd, char *buf, size_t size)
{
    size_t len = 0;
    while (len + 1 < size) {
        ssize_t n = read(fd, buf + len, size - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            buf[0] = '\0';
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return (ssize_t)len;
}

ssize_t read_small_at(int dir, const char *path, char *buf, size_t size)
{
    int fd = openat(dir, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        buf[0] = '\0';
        return -1;
    }
    ssize_t len = read_small_fd(fd, buf, size);
    int saved = errno;
    close(fd);
    errno = saved;
    return len;
}

/* DIR's contents, beneath FD (closed here) on device DEV. */
static void remove_beneath(int fd, dev_t dev)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0 || (errno != EISDIR && errno != EPERM))
            continue;
        int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (sub >= 0 && fstat(sub, &st) == 0 && st.st_dev == dev)
            remove_beneath(sub, dev);
        else if (sub >= 0)
            close(sub);
        unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

/* Empty the directory open as FD (taken), beneath its own file system; false when FD is not one. */
static bool empty_dir(int fd)
{
    struct stat st;
    if (fd < 0)
        return false;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return false;
    }
    remove_beneath(fd, st.st_dev);
    return true;
}

void hostpath_remove_at(int dir, const char *name)
{
    if (unlinkat(dir, name, 0) == 0 || (errno != EISDIR && errno != EPERM))
        return;
    if (empty_dir(openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)))
        unlinkat(dir, name, AT_REMOVEDIR);
}

void hostpath_remove_tree(const char *path)
{
    if (path && path[0] == '/' &&
        empty_dir(open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)))
        rmdir(path);
}

bool hostpath_find_program(const char *name, char *out, size_t len)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
    for (const char *p = path; *p;) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n && (size_t)snprintf(out, len, "%.*s/%s", (int)n, p, name) < len &&
            access(out, X_OK) == 0)
            return true;
        p += n + (end ? 1 : 0);
    }
    return false;
}
