/*
 * sandbox/notify.c: seccomp user notifications, the keeper's side (see
 * notify.h). Runs in a keeper process, never in the confined command.
 */
#include "sandbox/notify.h"

#include "common/cleanup.h"
#include "common/compat.h"
#include "common/syscalls.h"

#include <errno.h>
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
    _cleanup_close_ int f = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = f < 0 ? -1 : read(f, buf, sizeof buf - 1);
    if (n <= 0)
        return true;
    buf[n] = '\0';
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
