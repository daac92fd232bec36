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

/* Room for one descriptor, aligned as a cmsghdr must be. */
union fd_cmsg {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
};

int send_fd(int sock, int fd)
{
    char byte = 'F';
    struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
    union fd_cmsg u;
    memset(&u, 0, sizeof u);
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                          .msg_controllen = sizeof u.buf };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

int recv_fd(int sock)
{
    char byte;
    struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
    union fd_cmsg u;
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                          .msg_controllen = sizeof u.buf };
    if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
        return -1;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
        cm->cmsg_len != CMSG_LEN(sizeof(int)))
        return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    return fd;
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

void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}

int signals_to_fd(void)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
        return -1;
    return signalfd(-1, &mask, SFD_CLOEXEC);
}
