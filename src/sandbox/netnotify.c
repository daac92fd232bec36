/*
 * sandbox/netnotify.c: the process level's network boundary (see
 * netnotify.h). netnotify_program() runs in the supervisor;
 * netnotify_serve() in the boundary's supervisor process, which is not
 * itself confined.
 */
#include "sandbox/netnotify.h"

#include "common/cleanup.h"
#include "common/relay_wire.h"
#include "common/syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "netnotify: unknown architecture"
#endif

#define ARG_LO(n) (offsetof(struct seccomp_data, args) + (n) * sizeof(__u64))
#define STMT(code, k) ((struct sock_filter)BPF_STMT((code), (k)))
#define JUMP(code, k, t, f) ((struct sock_filter)BPF_JUMP((code), (k), (t), (f)))
#define REFUSE (SECCOMP_RET_ERRNO | EACCES)
/* The I-th of N_IPC checks, jumping to the refusal after the last. */
#define N_IPC 13
#define IPC_REFUSED(i, name) JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_##name, N_IPC - (i), 0)

int netnotify_program(bool gateway, struct seccomp_program *out, struct cordon_err *err)
{
    /* Jump offsets count from the next instruction; the labels below are fixed. */
    const struct sock_filter prog[] = {
        /* 0 */ STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        /* 1 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
        /* 2 */ STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), /* the allowlist kills other arches */
        /* 3 */ STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        /* System V IPC and POSIX message queues have no namespace here: the
         * host's segments, semaphores and queues would be a guess away. */
        IPC_REFUSED(0, shmget), IPC_REFUSED(1, shmat), IPC_REFUSED(2, shmctl),
        IPC_REFUSED(3, semget), IPC_REFUSED(4, semop), IPC_REFUSED(5, semtimedop),
        IPC_REFUSED(6, semctl), IPC_REFUSED(7, msgget), IPC_REFUSED(8, msgsnd),
        IPC_REFUSED(9, msgrcv), IPC_REFUSED(10, msgctl), IPC_REFUSED(11, mq_open),
        IPC_REFUSED(12, mq_unlink),
        JUMP(BPF_JMP | BPF_JA, 1, 0, 0),
        STMT(BPF_RET | BPF_K, REFUSE),
        /* from here on, numbered as if the lines above were not there */
        /* 4 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, 6, 0),
        /* 5 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_listen, 5, 0),
        /* 6 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 5, 0),
        /* 7 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_sendto, 23, 0),
        /* 8 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_sendmmsg, 22, 0),
        /* 9 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_sendmsg, 19, 0),
        /* 10 */ STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        /* 11 connect, listen: the supervisor decides */
        /* 11 */ STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        /* 12 socket */
        /* 12 */ STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)),
        /* 13 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 3, 0),
        /* 14 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 2, 0),
        /* 15 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 8, 0),
        /* 16 */ STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        /* 17 inet: a TCP stream (to the gateway), or nothing at all */
        /* 17 */ gateway ? STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)) : STMT(BPF_RET | BPF_K, REFUSE),
        /* 18 */ STMT(BPF_ALU | BPF_AND | BPF_K, ~(unsigned)(SOCK_NONBLOCK | SOCK_CLOEXEC)),
        /* 19 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 0, 8),
        /* 20 */ STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),
        /* 21 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0),
        /* 22 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, 0, 5),
        /* 23 */ STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        /* 24 unix: a datagram is addressed per send, past connect() */
        /* 24 */ STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)),
        /* 25 */ STMT(BPF_ALU | BPF_AND | BPF_K, ~(unsigned)(SOCK_NONBLOCK | SOCK_CLOEXEC)),
        /* 26 */ JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_DGRAM, 1, 0),
        /* 27 */ STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        /* 28 */ STMT(BPF_RET | BPF_K, REFUSE),
        /* 29 sendmsg: flags are the third argument */
        /* 29 */ STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),
        /* 30 */ JUMP(BPF_JMP | BPF_JA, 1, 0, 0),
        /* 31 sendto, sendmmsg: the fourth; MSG_FASTOPEN connects without connect() */
        /* 31 */ STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(3)),
        /* 32 */ JUMP(BPF_JMP | BPF_JSET | BPF_K, MSG_FASTOPEN, 0, 1),
        /* 33 */ STMT(BPF_RET | BPF_K, REFUSE),
        /* 34 */ STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    out->len = sizeof prog / sizeof prog[0];
    out->filter = malloc(sizeof prog);
    if (!out->filter)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    memcpy(out->filter, prog, sizeof prog);
    return 0;
}

/* ---- the boundary's supervisor ---- */

static int respond(int listener, __u64 id, int error, __s64 val)
{
    struct seccomp_notif_resp r = { .id = id, .error = error ? -error : 0, .val = val };
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &r) < 0 && errno != ENOENT)
        return -1;
    return 0; /* ENOENT: the caller is gone (killed, or interrupted) */
}

/* The caller's descriptor FD, as our own; -1 when it has none there. */
static int take_fd(pid_t tid, int fd)
{
    /* The notification names a thread; PIDFD_THREAD (O_EXCL) lets a pidfd name one. */
    _cleanup_close_ int pidfd = sys_pidfd_open(tid, O_EXCL);
    if (pidfd < 0)
        pidfd = sys_pidfd_open(tid, 0);
    if (pidfd < 0)
        return -1;
    return sys_pidfd_getfd(pidfd, fd, 0);
}

/* Whether the caller's FD is close-on-exec (fdinfo's flags carry O_CLOEXEC). */
static bool fd_cloexec(pid_t tid, int fd)
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

/* An IPv4 address and port out of A (an IPv4-mapped IPv6 one too), host order. */
static bool inet4_of(const struct sockaddr_storage *a, socklen_t len, uint32_t *addr, uint16_t *port)
{
    if (a->ss_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const void *)a;
        *addr = ntohl(in->sin_addr.s_addr);
        *port = ntohs(in->sin_port);
        return true;
    }
    if (a->ss_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const void *)a;
        static const unsigned char mapped[12] = { [10] = 0xff, [11] = 0xff };
        if (memcmp(&in6->sin6_addr, mapped, sizeof mapped) != 0)
            return false;
        uint32_t v4;
        memcpy(&v4, in6->sin6_addr.s6_addr + 12, 4);
        *addr = ntohl(v4);
        *port = ntohs(in6->sin6_port);
        return true;
    }
    return false;
}

static bool is_proxy(const struct sockaddr_storage *a, socklen_t len)
{
    uint32_t addr;
    uint16_t port;
    return inet4_of(a, len, &addr, &port) && addr == INADDR_LOOPBACK &&
           port == NETNOTIFY_PROXY_PORT;
}

/* A synthetic address on a port the policy names: what the gateway's stub gave out. */
static bool is_transparent(const struct sockaddr_storage *a, socklen_t len,
                           const struct netnotify *nn, uint32_t *addr, uint16_t *port)
{
    const uint32_t mask = ~0u << (32 - SYNTH_PREFIX);
    if (!inet4_of(a, len, addr, port) || (*addr & mask) != SYNTH_NET)
        return false;
    for (size_t i = 0; i < nn->n_ports; i++)
        if (nn->ports[i] == *port)
            return true;
    return false;
}

/* The preface's magic and KIND into OUT; its length. */
static size_t relay_preface(unsigned char *out, char kind)
{
    memcpy(out, RELAY_MAGIC, RELAY_MAGIC_LEN);
    out[RELAY_MAGIC_LEN] = (unsigned char)kind;
    return RELAY_MAGIC_LEN + 1;
}

/*
 * A fresh connection to the gateway, shaped like the caller's socket
 * (blocking or not, Nagle and keepalive as it set them), in place of it.
 */
/*
 * The keeper answers one notification at a time and must stay free to end
 * the run: no connect it makes may wait longer than this.
 */
#define CONNECT_WAIT_MS 5000

static int dial_gateway(const struct netnotify *nn, const void *preface, size_t plen)
{
    _cleanup_close_ int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -1;
    if (connect(s, (const struct sockaddr *)&nn->gw, sizeof nn->gw) < 0) {
        struct pollfd p = { .fd = s, .events = POLLOUT };
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (errno != EINPROGRESS || poll(&p, 1, CONNECT_WAIT_MS) != 1 ||
            getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr)
            return -1;
    }
    /* Before the caller holds it: a fresh connection's buffer takes it whole. */
    unsigned char head[sizeof nn->token + RELAY_PREFACE_MAX];
    if (plen > RELAY_PREFACE_MAX)
        return -1;
    memcpy(head, nn->token, sizeof nn->token);
    if (plen)
        memcpy(head + sizeof nn->token, preface, plen);
    if (send(s, head, sizeof nn->token + plen, MSG_NOSIGNAL) != (ssize_t)(sizeof nn->token + plen))
        return -1;
    if (fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK) < 0)
        return -1;
    return TAKE_FD(s);
}

static int redirect_to_gateway(int listener, const struct seccomp_notif *n, int theirs,
                               const struct netnotify *nn, const void *preface, size_t plen)
{
    _cleanup_close_ int s = dial_gateway(nn, preface, plen);
    if (s < 0)
        return respond(listener, n->id, ECONNREFUSED, 0);
    int on = 0;
    socklen_t len = sizeof on;
    if (getsockopt(theirs, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0 && on)
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    len = sizeof on;
    if (getsockopt(theirs, SOL_SOCKET, SO_KEEPALIVE, &on, &len) == 0 && on)
        setsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    int fl = fcntl(theirs, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK))
        fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
    struct seccomp_notif_addfd add = {
        .id = n->id,
        .flags = SECCOMP_ADDFD_FLAG_SETFD,
        .srcfd = (__u32)s,
        .newfd = (__u32)n->data.args[0],
        .newfd_flags = fd_cloexec(n->pid, (int)n->data.args[0]) ? O_CLOEXEC : 0,
    };
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0)
        return respond(listener, n->id, errno == ENOENT ? 0 : ECONNREFUSED, 0);
    return respond(listener, n->id, 0, 0);
}

/*
 * A unix socket file beneath one of the run's writable trees: reached
 * through a descriptor of the socket itself, so no link, "..", or
 * renamed directory can lead the connect elsewhere.
 */
static int connect_unix(int theirs, pid_t tid, const struct sockaddr_un *un, socklen_t len,
                        const struct netnotify *nn)
{
    size_t plen = len - offsetof(struct sockaddr_un, sun_path);
    if (plen == 0 || un->sun_path[0] == '\0')
        return EPERM; /* abstract (or unnamed): Landlock scopes them away from the host */
    char path[sizeof un->sun_path + 1], full[PATH_MAX + sizeof un->sun_path + 2];
    memcpy(path, un->sun_path, plen < sizeof un->sun_path ? plen : sizeof un->sun_path);
    path[plen < sizeof un->sun_path ? plen : sizeof un->sun_path] = '\0';
    if (path[0] != '/') {
        char link[64], cwd[PATH_MAX];
        snprintf(link, sizeof link, "/proc/%d/cwd", (int)tid);
        ssize_t n = readlink(link, cwd, sizeof cwd - 1);
        if (n < 0)
            return EACCES;
        cwd[n] = '\0';
        snprintf(full, sizeof full, "%s/%s", cwd, path);
    } else {
        snprintf(full, sizeof full, "%s", path);
    }
    for (size_t i = 0; i < nn->n_roots; i++) {
        size_t rl = strlen(nn->root_paths[i]);
        if (strncmp(full, nn->root_paths[i], rl) != 0 || full[rl] != '/')
            continue;
        struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                           RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
        _cleanup_close_ int sfd = sys_openat2(nn->roots[i], full + rl + 1, &how, sizeof how);
        struct stat st;
        if (sfd < 0)
            return errno == ENOENT ? ENOENT : EACCES;
        if (fstat(sfd, &st) < 0 || !S_ISSOCK(st.st_mode))
            return ECONNREFUSED;
        for (size_t h = 0; h < nn->n_hidden; h++)
            if (nn->hidden[h].dev == st.st_dev && nn->hidden[h].ino == st.st_ino)
                return EACCES;
        struct sockaddr_un via = { .sun_family = AF_UNIX };
        snprintf(via.sun_path, sizeof via.sun_path, "/proc/self/fd/%d", sfd);
        /* A listener that never accepts must not hold the keeper: a blocking
         * connect waits at most the socket's send timeout, set for the call. */
        struct timeval saved = { 0 }, wait = { CONNECT_WAIT_MS / 1000, 0 };
        socklen_t tl = sizeof saved;
        bool timed = getsockopt(theirs, SOL_SOCKET, SO_SNDTIMEO, &saved, &tl) == 0 &&
                     !saved.tv_sec && !saved.tv_usec &&
                     setsockopt(theirs, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof wait) == 0;
        int rc = connect(theirs, (struct sockaddr *)&via, sizeof via) < 0 ? errno : 0;
        if (timed)
            setsockopt(theirs, SOL_SOCKET, SO_SNDTIMEO, &saved, sizeof saved);
        return rc == EAGAIN ? ETIMEDOUT : rc;
    }
    return EACCES; /* a host socket: the docker, dbus or agent socket stay out of reach */
}

/*
 * The caller's socket (its first argument) as a descriptor of ours, once the
 * notification is known to be still live: the same task, waiting in this
 * very call, so what was read from it before was its. -1 with *RC what the
 * handler returns: 0 when the call is gone, the EBADF answer otherwise.
 */
static int claim_socket(int listener, const struct seccomp_notif *n, int *rc)
{
    int fd = take_fd(n->pid, (int)n->data.args[0]);
    __u64 id = n->id;
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0) {
        closep(&fd);
        *rc = 0;
        return -1;
    }
    if (fd < 0)
        *rc = respond(listener, n->id, EBADF, 0);
    return fd;
}

static int on_connect(int listener, const struct seccomp_notif *n, const struct netnotify *nn)
{
    struct sockaddr_storage a = { 0 };
    socklen_t len = (socklen_t)n->data.args[2];
    if (len > sizeof a)
        len = sizeof a;
    struct iovec local = { &a, len };
    struct iovec remote = { (void *)(uintptr_t)n->data.args[1], len };
    if (len < sizeof a.ss_family || process_vm_readv(n->pid, &local, 1, &remote, 1, 0) != len)
        return respond(listener, n->id, EFAULT, 0);
    int rc;
    _cleanup_close_ int theirs = claim_socket(listener, n, &rc);
    if (theirs < 0)
        return rc;
    int domain = 0, type = 0;
    socklen_t olen = sizeof domain;
    if (getsockopt(theirs, SOL_SOCKET, SO_DOMAIN, &domain, &olen) < 0)
        return respond(listener, n->id, ENOTSOCK, 0);
    olen = sizeof type;
    getsockopt(theirs, SOL_SOCKET, SO_TYPE, &type, &olen);

    if (a.ss_family == AF_UNSPEC) /* dissolving an association reaches nothing */
        return respond(listener, n->id, connect(theirs, (struct sockaddr *)&a, len) < 0 ? errno : 0, 0);
    if (domain == AF_UNIX && a.ss_family == AF_UNIX)
        return respond(listener, n->id,
                       connect_unix(theirs, n->pid, (struct sockaddr_un *)&a, len, nn), 0);
    if ((domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM && nn->gateway &&
        is_proxy(&a, len))
        return redirect_to_gateway(listener, n, theirs, nn, NULL, 0);
    uint32_t addr;
    uint16_t port;
    if ((domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM && nn->gateway &&
        is_transparent(&a, len, nn, &addr, &port)) {
        unsigned char pre[RELAY_PREFACE_MAX];
        size_t pl = relay_preface(pre, RELAY_TCP);
        pre[pl++] = (unsigned char)(addr >> 24);
        pre[pl++] = (unsigned char)(addr >> 16);
        pre[pl++] = (unsigned char)(addr >> 8);
        pre[pl++] = (unsigned char)addr;
        pre[pl++] = (unsigned char)(port >> 8);
        pre[pl++] = (unsigned char)port;
        return redirect_to_gateway(listener, n, theirs, nn, pre, pl);
    }
    if (domain == AF_INET || domain == AF_INET6)
        return respond(listener, n->id, ECONNREFUSED, 0);
    return respond(listener, n->id, EACCES, 0);
}

static int on_listen(int listener, const struct seccomp_notif *n)
{
    int rc;
    _cleanup_close_ int theirs = claim_socket(listener, n, &rc);
    if (theirs < 0)
        return rc;
    int domain = 0;
    socklen_t olen = sizeof domain;
    if (getsockopt(theirs, SOL_SOCKET, SO_DOMAIN, &domain, &olen) < 0)
        return respond(listener, n->id, ENOTSOCK, 0);
    /* Only a unix socket listens: an inet one would be a port on the host. */
    if (domain != AF_UNIX)
        return respond(listener, n->id, EACCES, 0);
    return respond(listener, n->id, listen(theirs, (int)n->data.args[1]) < 0 ? errno : 0, 0);
}

int netnotify_serve(int listener, const struct netnotify *nn)
{
    struct seccomp_notif n;
    memset(&n, 0, sizeof n);
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &n) < 0)
        return errno == EINTR || errno == ENOENT ? 0 : -1;
    if (n.data.nr == __NR_connect)
        return on_connect(listener, &n, nn);
    if (n.data.nr == __NR_listen)
        return on_listen(listener, &n);
    return respond(listener, n.id, ENOSYS, 0);
}
