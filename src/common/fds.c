/*
 * common/fds.c: descriptors across fork() and between processes: closing
 * what a child must not hold, passing one over a unix socket. Any process.
 */
#include "common/fds.h"

#include "common/syscalls.h"

#include <string.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <errno.h>
#include <unistd.h>

/* Room for FDS_MAX descriptors, aligned as a cmsghdr must be. */
union fds_cmsg {
    char buf[CMSG_SPACE(FDS_MAX * sizeof(int))];
    struct cmsghdr align;
};

int send_fds(int sock, const void *data, size_t len, const int *fds, size_t n)
{
    if (n == 0 || n > FDS_MAX || len == 0)
        return errno = EINVAL, -1;
    struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
    union fds_cmsg u;
    memset(&u, 0, sizeof u);
    struct msghdr msg = { .msg_iov = &iov,
                          .msg_iovlen = 1,
                          .msg_control = u.buf,
                          .msg_controllen = CMSG_SPACE(n * sizeof(int)) };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(n * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
    ssize_t r;
    do
        r = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    return r == (ssize_t)len ? 0 : -1;
}

int recv_fds(int sock, void *data, size_t len, int *fds, size_t n)
{
    struct iovec iov = { .iov_base = data, .iov_len = len };
    union fds_cmsg u;
    struct msghdr msg = { .msg_iov = &iov,
                          .msg_iovlen = 1,
                          .msg_control = u.buf,
                          .msg_controllen = CMSG_SPACE(n * sizeof(int)) };
    if (n == 0 || n > FDS_MAX)
        return errno = EINVAL, -1;
    ssize_t r;
    do
        r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    while (r < 0 && errno == EINTR);
    struct cmsghdr *cm = r > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
    if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
        cm->cmsg_len != CMSG_LEN(n * sizeof(int)))
        return -1;
    memcpy(fds, CMSG_DATA(cm), n * sizeof(int));
    if (r != (ssize_t)len || (msg.msg_flags & MSG_CTRUNC)) {
        for (size_t i = 0; i < n; i++)
            close(fds[i]);
        return -1;
    }
    return 0;
}

ssize_t read_maybe_fd(int sock, void *data, size_t len, int *fd)
{
    struct iovec iov = { .iov_base = data, .iov_len = len };
    union fds_cmsg u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf
    };
    ssize_t r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0 && errno == ENOTSOCK)
        return read(sock, data, len);
    for (struct cmsghdr *cm = r >= 0 ? CMSG_FIRSTHDR(&msg) : NULL; cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int got[FDS_MAX];
        memcpy(got, CMSG_DATA(cm), n * sizeof(int));
        for (size_t i = 0; i < n; i++) {
            if (i == 0 && *fd < 0)
                *fd = got[i];
            else
                close(got[i]); /* one is all a caller of this asked for */
        }
    }
    return r;
}

int send_fd(int sock, int fd)
{
    return send_fds(sock, "F", 1, &fd, 1);
}

int recv_fd(int sock)
{
    char byte;
    int fd;
    return recv_fds(sock, &byte, 1, &fd, 1) < 0 ? -1 : fd;
}

bool read_full(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

bool pwrite_full(int fd, const void *buf, size_t len, off_t at)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
        at += n;
    }
    return true;
}

void close_fds_except(int *keep, size_t n)
{
    /* Insertion sort: the lists are a handful long and qsort may allocate. */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    unsigned next = 3;
    for (size_t i = 0; i < n; i++) {
        if (keep[i] < 0 || (unsigned)keep[i] < next)
            continue;
        if ((unsigned)keep[i] > next)
            sys_close_range(next, (unsigned)keep[i] - 1, 0);
        next = (unsigned)keep[i] + 1;
    }
    sys_close_range(next, ~0U, 0);
}

bool write_all(int fd, const void *data, size_t len)
{
    const char *buf = data;
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

int signals_to_fd(void)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGWINCH); /* a resized terminal, passed on to a run's own */
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
        return -1;
    return signalfd(-1, &mask, SFD_CLOEXEC);
}
