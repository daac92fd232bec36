/*
 * sandbox/microvm/vm_queue.h: one egress connection's bytes waiting for its
 * socket to take them, at most VM_EG_WINDOW, in a ring: a socket that takes
 * a little at a time costs no copying of what is left (a memmove of the
 * whole window per partial write was most of a download's time under TCG).
 * Shared by guest/forwarder.c and the shim; plain C, no cordon headers.
 */
#pragma once
#include "vm_wire.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

struct vm_queue {
    char *buf; /* VM_EG_WINDOW bytes once the first wait needs them */
    size_t head, len;
};

/* Append N bytes of P; false when they would pass the window (or no memory). */
static inline bool vm_queue_put(struct vm_queue *q, const void *p, size_t n)
{
    if (!n)
        return true;
    if (n > VM_EG_WINDOW - q->len || (!q->buf && !(q->buf = malloc(VM_EG_WINDOW))))
        return false;
    size_t tail = (q->head + q->len) % VM_EG_WINDOW, first = VM_EG_WINDOW - tail;
    if (first > n)
        first = n;
    memcpy(q->buf + tail, p, first);
    memcpy(q->buf, (const char *)p + first, n - first);
    q->len += n;
    return true;
}

/*
 * As much of the queue as socket FD takes now (without waiting, without
 * SIGPIPE): the bytes it took. A socket that is gone takes them all (they
 * go nowhere) and sets *GONE.
 */
static inline size_t vm_queue_send(struct vm_queue *q, int fd, bool *gone)
{
    size_t sent = 0;
    while (q->len) {
        size_t first = VM_EG_WINDOW - q->head;
        if (first > q->len)
            first = q->len;
        struct iovec iov[2] = { { q->buf + q->head, first }, { q->buf, q->len - first } };
        struct msghdr m = { .msg_iov = iov, .msg_iovlen = iov[1].iov_len ? 2 : 1 };
        ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            *gone = true;
            n = (ssize_t)q->len;
        }
        q->head = (q->head + (size_t)n) % VM_EG_WINDOW;
        q->len -= (size_t)n;
        sent += (size_t)n;
    }
    if (!q->len)
        q->head = 0;
    return sent;
}

/*
 * N bytes of P for socket FD, after what waits: as much as it takes now goes
 * to it (*SENT: how much), the rest is queued. With nothing waiting they go
 * straight to the socket, so a connection that keeps up never touches its
 * queue's memory. False when the rest would pass the window (or no memory);
 * *GONE as vm_queue_send's.
 */
static inline bool vm_queue_write(struct vm_queue *q, int fd, const void *p, size_t n, size_t *sent,
                                  bool *gone)
{
    if (q->len) {
        if (!vm_queue_put(q, p, n))
            return false;
        *sent = vm_queue_send(q, fd, gone);
        return true;
    }
    size_t done = 0;
    while (done < n) {
        ssize_t k = send(fd, (const char *)p + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (k <= 0) {
            *gone = true;
            k = (ssize_t)(n - done);
        }
        done += (size_t)k;
    }
    *sent = done;
    return vm_queue_put(q, (const char *)p + done, n - done);
}

static inline void vm_queue_free(struct vm_queue *q)
{
    free(q->buf);
    *q = (struct vm_queue){ 0 };
}
