/*
 * sandbox/notify.c: seccomp user notifications, the keeper's side (see
 * notify.h). Runs in a keeper process, never in the confined command.
 */
#include "sandbox/notify.h"

#include "common/cleanup.h"
#include "common/compat.h"
#include "common/hostpath.h"
#include "common/syscalls.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

void notify_sync_wakeup(int listener)
{
    if (listener >= 0)
        (void)ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
}

int notify_respond(int listener, __u64 id, int error, __s64 val)
{
    struct seccomp_notif_resp r = { .id = id, .error = error ? -error : 0, .val = val };
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &r) < 0 && errno != ENOENT)
        return -1;
    return 0; /* ENOENT: the caller is gone (killed, or interrupted) */
}

int notify_continue(int listener, __u64 id)
{
    struct seccomp_notif_resp r = { .id = id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE };
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &r) < 0 && errno != ENOENT)
        return -1;
    return 0;
}

int notify_take_fd(pid_t tid, int fd)
{
    /* The notification names a thread; PIDFD_THREAD (O_EXCL) lets a pidfd name one. */
    _cleanup_close_ int pidfd = sys_pidfd_open(tid, O_EXCL);
    if (pidfd < 0)
        pidfd = sys_pidfd_open(tid, 0);
    if (pidfd < 0)
        return -1;
    return sys_pidfd_getfd(pidfd, fd, 0);
}

bool notify_fd_cloexec(pid_t tid, int fd)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int)tid, fd);
    if (read_small_at(AT_FDCWD, path, buf, sizeof buf) <= 0)
        return true;
    char *flags = strstr(buf, "flags:");
    return !flags || (strtoul(flags + 6, NULL, 8) & O_CLOEXEC);
}

int notify_claim_socket(int listener, const struct seccomp_notif *n, int *rc)
{
    int fd = notify_take_fd(n->pid, (int)n->data.args[0]);
    __u64 id = n->id;
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0) {
        closep(&fd);
        *rc = 0;
        return -1;
    }
    if (fd < 0)
        *rc = notify_respond(listener, n->id, EBADF, 0);
    return fd;
}

int notify_read_string(pid_t pid, __u64 from, char *buf, size_t size, int too_long)
{
    size_t got = 0;
    if (!from)
        return EFAULT;
    while (got < size) {
        size_t chunk = 4096 - (size_t)((from + got) % 4096);
        if (chunk > size - got)
            chunk = size - got;
        if (notify_read(pid, buf + got, from + got, chunk) < 0)
            return EFAULT;
        if (memchr(buf + got, '\0', chunk))
            return 0;
        got += chunk;
    }
    return too_long;
}

mode_t notify_umask(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (read_small_at(AT_FDCWD, path, buf, sizeof buf) <= 0)
        return 022;
    const char *u = strstr(buf, "\nUmask:");
    return u ? (mode_t)(strtoul(u + 7, NULL, 8) & 0777) : 022;
}

int notify_lower_caps(struct notify_caps *c)
{
    c->hdr = (struct __user_cap_header_struct){ .version = _LINUX_CAPABILITY_VERSION_3 };
    c->lowered = false;
    if (sys_capget(&c->hdr, c->data) < 0)
        return EPERM;
    if (!c->data[0].effective && !c->data[1].effective)
        return 0;
    struct __user_cap_data_struct none[2];
    memcpy(none, c->data, sizeof none);
    none[0].effective = none[1].effective = 0;
    if (sys_capset(&c->hdr, none) < 0)
        return EPERM;
    c->lowered = true;
    return 0;
}

void notify_restore_caps(struct notify_caps *c)
{
    if (c->lowered)
        (void)!sys_capset(&c->hdr, c->data);
}

/*
 * PATH with empty and "." components dropped, in place; ".." is kept (the
 * kernel resolves it beneath the tree, which a lexical fold could not).
 */
void notify_tidy(char *path)
{
    char *out = path;
    for (const char *in = path; *in;) {
        if (in[0] == '/' && (in[1] == '/' || (in[1] == '.' && (in[2] == '/' || !in[2])))) {
            in += in[1] == '/' ? 1 : 2;
            continue;
        }
        *out++ = *in++;
    }
    if (out == path)
        *out++ = '/';
    *out = '\0';
}

/* The caller's PATH (read from it once) made absolute against its directory DIR. */
int notify_absolute(pid_t tid, long long dir, const char *path, char *out, size_t size)
{
    if (path[0] == '/') {
        if ((size_t)snprintf(out, size, "%s", path) >= size)
            return ENAMETOOLONG;
        notify_tidy(out);
        return 0;
    }
    char link[64], base[PATH_MAX];
    if ((int)dir == AT_FDCWD)
        snprintf(link, sizeof link, "/proc/%d/cwd", (int)tid);
    else
        snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)tid, (int)dir);
    ssize_t n = readlink(link, base, sizeof base - 1);
    if (n < 0)
        return (int)dir == AT_FDCWD ? ENOENT : EBADF;
    base[n] = '\0';
    if (base[0] != '/')
        return ENOTDIR; /* a pipe, a socket: no directory to start at */
    if ((size_t)snprintf(out, size, "%s/%s", base, path) >= size)
        return ENAMETOOLONG;
    notify_tidy(out);
    return 0;
}

/* The thread group of the thread TID, or -1 (TID gone: no /proc/N names it then). */
static long tgid_of(pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
    if (read_small_at(AT_FDCWD, path, buf, sizeof buf) <= 0)
        return -1;
    const char *t = strstr(buf, "\nTgid:");
    return t ? strtol(t + 6, NULL, 10) : -1;
}

/*
 * Is PATH (absolute, tidied) one of the caller's own descriptors by a magic
 * link: /proc/self/fd/N and its spellings, /dev/fd/N, /dev/stdin...? glibc
 * makes lchmod() and fchmodat(AT_SYMLINK_NOFOLLOW) a chmod() of
 * /proc/self/fd/N on an O_PATH descriptor. N into *FD.
 */
bool notify_magic_fd(const char *path, pid_t tid, int *fd)
{
    static const char *const stdio[] = { "/dev/stdin", "/dev/stdout", "/dev/stderr" };
    for (int i = 0; i < 3; i++)
        if (!strcmp(path, stdio[i])) {
            *fd = i;
            return true;
        }
    const char *rest = NULL;
    if (!strncmp(path, "/dev/fd/", 8))
        rest = path + 8;
    else if (!strncmp(path, "/proc/", 6)) {
        char *end;
        const char *p = path + 6;
        long who = strtol(p, &end, 10);
        if (!strncmp(p, "self/", 5))
            end = (char *)p + 4;
        else if (!strncmp(p, "thread-self/", 12))
            end = (char *)p + 11;
        else if (end == p || (who != tid && who != tgid_of(tid)))
            return false;
        if (!strncmp(end, "/task/", 6)) {
            long task = strtol(end + 6, &end, 10);
            if (task != tid)
                return false;
        }
        if (!strncmp(end, "/fd/", 4))
            rest = end + 4;
    }
    if (!rest || *rest < '0' || *rest > '9')
        return false;
    char *end;
    long n = strtol(rest, &end, 10);
    if (*end || n > INT_MAX)
        return false;
    *fd = (int)n;
    return true;
}

int notify_read(pid_t pid, void *to, __u64 from, size_t len)
{
    /* cppcheck-suppress ctuuninitvar ; process_vm_readv() writes TO, never reads it */
    struct iovec local = { to, len }, remote = { (void *)(uintptr_t)from, len };
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

int notify_write(pid_t pid, __u64 to, const void *from, size_t len)
{
    struct iovec local = { (void *)from, len }, remote = { (void *)(uintptr_t)to, len };
    return !len || process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}
