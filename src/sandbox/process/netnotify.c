/*
 * sandbox/process/netnotify.c: the process level's network boundary (see
 * netnotify.h). netnotify_program() runs in the supervisor;
 * netnotify_serve() in the boundary's supervisor process, which is not
 * itself confined.
 */
#include "sandbox/process/netnotify.h"

#include "common/cleanup.h"
#include "common/relay_wire.h"
#include "common/syscalls.h"
#include "sandbox/notify.h"
#include "sandbox/process/metanotify.h"

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
#define REFUSE (SECCOMP_RET_ERRNO | EACCES)

/*
 * A small assembler: jumps name labels, resolved once the program is
 * laid out, so a branch added later cannot silently shift another.
 */
enum label {
    L_NOTIFY,
    L_SOCKET,
    L_INET,
    L_STREAM,
    L_DGRAM,
    L_UNIX,
    L_SENDTO,
    L_FLAGS2,
    L_FLAGS3,
    L_FLAGS,
    L_SETSOCKOPT,
    L_RECVFROM,
    L_IOCTL,
    L_OPEN1,
    L_OPEN2,
    L_REFUSE,
    L_ALLOW,
    L_NONE,
};
#define PROG_MAX 224

struct prog {
    struct sock_filter f[PROG_MAX];
    enum label jt[PROG_MAX], jf[PROG_MAX];
    size_t at[L_NONE];
    size_t n;
};

static void op(struct prog *p, unsigned short code, unsigned k)
{
    if (p->n == PROG_MAX)
        return; /* refused as a whole below */
    p->jt[p->n] = p->jf[p->n] = L_NONE;
    p->f[p->n++] = (struct sock_filter)BPF_STMT(code, k);
}

/* A conditional jump to T when it holds, to F otherwise (L_NONE: the next). */
static void jmp(struct prog *p, unsigned short code, unsigned k, enum label t, enum label f)
{
    if (p->n == PROG_MAX)
        return;
    p->jt[p->n] = t;
    p->jf[p->n] = f;
    p->f[p->n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | code, k, 0, 0);
}

static void at(struct prog *p, enum label l)
{
    p->at[l] = p->n;
}

static void ret(struct prog *p, unsigned k)
{
    op(p, BPF_RET | BPF_K, k);
}

static void ld_arg(struct prog *p, int n, bool high)
{
    op(p, BPF_LD | BPF_W | BPF_ABS, (unsigned)(ARG_LO(n) + (high ? 4 : 0)));
}

/* A pointer argument N that is not NULL: to T (both halves read). */
static void if_pointer(struct prog *p, int n, enum label t)
{
    ld_arg(p, n, false);
    jmp(p, BPF_JEQ | BPF_K, 0, L_NONE, t);
    ld_arg(p, n, true);
    jmp(p, BPF_JEQ | BPF_K, 0, L_NONE, t);
}

/*
 * The jumps resolved and the program copied out; refused when it outgrew
 * PROG_MAX (op() stopped writing) or a jump would reach past 255.
 */
static int assemble(struct prog *p, struct seccomp_program *out, struct cordon_err *err)
{
    if (p->n == PROG_MAX)
        return err_set(err, CORDON_E_INTERNAL,
                       "netnotify: the filter needs more than %d "
                       "instructions",
                       PROG_MAX);
    for (size_t i = 0; i < p->n; i++) {
        if (BPF_CLASS(p->f[i].code) != BPF_JMP)
            continue;
        if (BPF_OP(p->f[i].code) == BPF_JA) {
            p->f[i].k = (unsigned)(p->at[p->jt[i]] - i - 1);
            continue;
        }
        size_t t = p->jt[i] == L_NONE ? i + 1 : p->at[p->jt[i]];
        size_t f = p->jf[i] == L_NONE ? i + 1 : p->at[p->jf[i]];
        if (t <= i || f <= i || t - i - 1 > 255 || f - i - 1 > 255)
            return err_set(err, CORDON_E_INTERNAL, "netnotify: jump out of range at %zu", i);
        p->f[i].jt = (unsigned char)(t - i - 1);
        p->f[i].jf = (unsigned char)(f - i - 1);
    }
    out->len = (unsigned short)p->n;
    out->filter = malloc(p->n * sizeof p->f[0]);
    if (!out->filter)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    memcpy(out->filter, p->f, p->n * sizeof p->f[0]);
    return 0;
}

/* chmod, chown, times, xattrs: Landlock has no right for them (metanotify.h). */
static void metadata_calls(struct prog *p)
{
    int nrs[32];
    size_t n = metanotify_syscalls(nrs, sizeof nrs / sizeof nrs[0]);
    for (size_t i = 0; i < n; i++)
        jmp(p, BPF_JEQ | BPF_K, (unsigned)nrs[i], L_NOTIFY, L_NONE);
    jmp(p, BPF_JEQ | BPF_K, __NR_ioctl, L_IOCTL, L_NONE);
}

/* L_IOCTL: chattr's commands (the kernel reads a command as an int: the low half). */
static void metadata_ioctls(struct prog *p)
{
    unsigned cmds[16];
    size_t n = metanotify_ioctls(cmds, sizeof cmds / sizeof cmds[0]);
    at(p, L_IOCTL);
    ld_arg(p, 1, false);
    for (size_t i = 0; i < n; i++)
        jmp(p, BPF_JEQ | BPF_K, cmds[i], L_NOTIFY, L_NONE);
    ret(p, SECCOMP_RET_ALLOW);
}

/* A host workspace's changes (names.h): calls always heard, and opens by their flags. */
static void names_calls_of(struct prog *p, enum names_mode mode, unsigned *mask)
{
    struct names_call nc[32];
    size_t n = mode == NAMES_OFF ? 0 : names_calls(mode, nc, sizeof nc / sizeof nc[0]);
    for (size_t i = 0; i < n; i++) {
        enum label at = nc[i].flags < 0 ? L_NOTIFY : nc[i].flags == 1 ? L_OPEN1 : L_OPEN2;
        jmp(p, BPF_JEQ | BPF_K, (unsigned)nc[i].nr, at, L_NONE);
        if (nc[i].flags >= 0)
            *mask = nc[i].mask;
    }
}

/* L_OPEN1 and L_OPEN2: an open whose flags (argument 1 or 2) hold a bit of MASK. */
static void names_opens(struct prog *p, unsigned mask)
{
    at(p, L_OPEN1);
    ld_arg(p, 1, false);
    jmp(p, BPF_JSET | BPF_K, mask, L_NOTIFY, L_ALLOW);
    at(p, L_OPEN2);
    ld_arg(p, 2, false);
    jmp(p, BPF_JSET | BPF_K, mask, L_NOTIFY, L_ALLOW);
}

int netnotify_program(bool gateway, enum names_mode names, struct seccomp_program *out,
                      struct cordon_err *err)
{
    static const int ipc[] = { __NR_shmget,   __NR_shmat,      __NR_shmctl, __NR_semget,
                               __NR_semop,    __NR_semtimedop, __NR_semctl, __NR_msgget,
                               __NR_msgsnd,   __NR_msgrcv,     __NR_msgctl, __NR_mq_open,
                               __NR_mq_unlink };
    struct prog p = { .n = 0 };
    op(&p, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    jmp(&p, BPF_JEQ | BPF_K, NATIVE_ARCH, L_NONE, L_ALLOW); /* the allowlist kills other arches */
    op(&p, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    /* System V IPC and POSIX message queues have no namespace here: the
     * host's segments, semaphores and queues would be a guess away. */
    for (size_t i = 0; i < sizeof ipc / sizeof ipc[0]; i++)
        jmp(&p, BPF_JEQ | BPF_K, (unsigned)ipc[i], L_REFUSE, L_NONE);
    metadata_calls(&p);
    unsigned mask = 0;
    names_calls_of(&p, names, &mask);
    jmp(&p, BPF_JEQ | BPF_K, __NR_connect, L_NOTIFY, L_NONE);
    jmp(&p, BPF_JEQ | BPF_K, __NR_listen, L_NOTIFY, L_NONE);
    jmp(&p, BPF_JEQ | BPF_K, __NR_socket, L_SOCKET, L_NONE);
    jmp(&p, BPF_JEQ | BPF_K, __NR_sendto, L_SENDTO, L_NONE);
    jmp(&p, BPF_JEQ | BPF_K, __NR_sendmmsg, L_FLAGS3, L_NONE);
    jmp(&p, BPF_JEQ | BPF_K, __NR_sendmsg, L_FLAGS2, L_NONE);
    /* Every bind: a unix socket's name is then the run's own (usock.h). */
    jmp(&p, BPF_JEQ | BPF_K, __NR_bind, L_NOTIFY, L_NONE);
    if (gateway) {
        /* What a resolver does to the stand-in of its UDP socket (see
         * netrelay below), which the supervisor answers as UDP would
         * (c-ares reads its own address back after connect()). */
        jmp(&p, BPF_JEQ | BPF_K, __NR_setsockopt, L_SETSOCKOPT, L_NONE);
        jmp(&p, BPF_JEQ | BPF_K, __NR_recvfrom, L_RECVFROM, L_NONE);
        jmp(&p, BPF_JEQ | BPF_K, __NR_getsockname, L_NOTIFY, L_NONE);
        jmp(&p, BPF_JEQ | BPF_K, __NR_getpeername, L_NOTIFY, L_NONE);
    }
    ret(&p, SECCOMP_RET_ALLOW);

    at(&p, L_SOCKET);
    ld_arg(&p, 0, false);
    jmp(&p, BPF_JEQ | BPF_K, AF_INET, L_INET, L_NONE);
    jmp(&p, BPF_JEQ | BPF_K, AF_INET6, L_INET, L_NONE);
    jmp(&p, BPF_JEQ | BPF_K, AF_UNIX, L_UNIX, L_ALLOW);
    /* inet: a TCP stream (to the gateway), a UDP socket the supervisor
     * makes (for DNS), or nothing at all */
    at(&p, L_INET);
    if (!gateway)
        ret(&p, REFUSE);
    ld_arg(&p, 1, false);
    op(&p, BPF_ALU | BPF_AND | BPF_K, ~(unsigned)(SOCK_NONBLOCK | SOCK_CLOEXEC));
    jmp(&p, BPF_JEQ | BPF_K, SOCK_STREAM, L_STREAM, L_NONE);
    jmp(&p, BPF_JEQ | BPF_K, SOCK_DGRAM, L_DGRAM, L_REFUSE);
    at(&p, L_STREAM);
    ld_arg(&p, 2, false);
    jmp(&p, BPF_JEQ | BPF_K, 0, L_ALLOW, L_NONE);
    jmp(&p, BPF_JEQ | BPF_K, IPPROTO_TCP, L_ALLOW, L_REFUSE);
    at(&p, L_DGRAM);
    ld_arg(&p, 2, false);
    jmp(&p, BPF_JEQ | BPF_K, 0, L_NOTIFY, L_NONE);
    jmp(&p, BPF_JEQ | BPF_K, IPPROTO_UDP, L_NOTIFY, L_REFUSE);
    /* unix: a datagram is addressed per send, past connect() */
    at(&p, L_UNIX);
    ld_arg(&p, 1, false);
    op(&p, BPF_ALU | BPF_AND | BPF_K, ~(unsigned)(SOCK_NONBLOCK | SOCK_CLOEXEC));
    jmp(&p, BPF_JEQ | BPF_K, SOCK_DGRAM, L_REFUSE, L_ALLOW);

    /* sendto: MSG_FASTOPEN connects without connect(); an address goes to
     * the supervisor (a UDP stand-in's destination) */
    at(&p, L_SENDTO);
    ld_arg(&p, 3, false);
    jmp(&p, BPF_JSET | BPF_K, MSG_FASTOPEN, L_REFUSE, L_NONE);
    if (gateway)
        if_pointer(&p, 4, L_NOTIFY);
    ret(&p, SECCOMP_RET_ALLOW);
    /* sendmsg: flags are the third argument; sendmmsg: the fourth */
    at(&p, L_FLAGS2);
    ld_arg(&p, 2, false);
    jmp(&p, BPF_JA, 0, L_FLAGS, L_FLAGS);
    at(&p, L_FLAGS3);
    ld_arg(&p, 3, false);
    at(&p, L_FLAGS);
    jmp(&p, BPF_JSET | BPF_K, MSG_FASTOPEN, L_REFUSE, L_ALLOW);
    if (gateway) {
        /* IP and UDP options, which a stand-in (a unix socket) would refuse */
        at(&p, L_SETSOCKOPT);
        ld_arg(&p, 1, false);
        jmp(&p, BPF_JEQ | BPF_K, SOL_IP, L_NOTIFY, L_NONE);
        jmp(&p, BPF_JEQ | BPF_K, SOL_IPV6, L_NOTIFY, L_NONE);
        jmp(&p, BPF_JEQ | BPF_K, IPPROTO_UDP, L_NOTIFY, L_ALLOW); /* SOL_UDP */
        /* a receive that asks who sent: a stand-in's answer names its nameserver */
        at(&p, L_RECVFROM);
        if_pointer(&p, 4, L_NOTIFY);
        ret(&p, SECCOMP_RET_ALLOW);
    }
    metadata_ioctls(&p);
    names_opens(&p, mask);
    /* connect, listen, bind, ...: the supervisor decides (BPF jumps only forward) */
    at(&p, L_NOTIFY);
    ret(&p, SECCOMP_RET_USER_NOTIF);
    at(&p, L_REFUSE);
    ret(&p, REFUSE);
    at(&p, L_ALLOW);
    ret(&p, SECCOMP_RET_ALLOW);

    return assemble(&p, out, err);
}

/* ---- the boundary's supervisor ---- */

/* An IPv4 address and port out of A (an IPv4-mapped IPv6 one too), host order. */
static bool inet4_of(const struct sockaddr_storage *a, socklen_t len, uint32_t *addr,
                     uint16_t *port)
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

/* A fresh connection to the gateway, opening with PREFACE, in place of the caller's socket. */
static int redirect_to_gateway(int listener, const struct seccomp_notif *n, int theirs,
                               const struct netnotify *nn, const void *preface, size_t plen)
{
    _cleanup_close_ int s = door_dial(&nn->door, preface, plen);
    if (s < 0)
        return notify_respond(listener, n->id, ECONNREFUSED, 0);
    return door_install(listener, n, theirs, s);
}

static struct netrelay_sock *standin(struct netrelay *r, int fd);
static int standin_connect(const struct sockaddr_storage *a, socklen_t len,
                           struct netrelay_sock *s);

static int on_connect(int listener, const struct seccomp_notif *n, const struct netnotify *nn,
                      struct netrelay *r)
{
    struct sockaddr_storage a = { 0 };
    socklen_t len = (socklen_t)n->data.args[2];
    if (len > sizeof a)
        len = sizeof a;
    struct iovec local = { &a, len };
    struct iovec remote = { (void *)(uintptr_t)n->data.args[1], len };
    if (len < sizeof a.ss_family || process_vm_readv(n->pid, &local, 1, &remote, 1, 0) != len)
        return notify_respond(listener, n->id, EFAULT, 0);
    int rc;
    _cleanup_close_ int theirs = notify_claim_socket(listener, n, &rc);
    if (theirs < 0)
        return rc;
    int domain = 0, type = 0;
    socklen_t olen = sizeof domain;
    if (getsockopt(theirs, SOL_SOCKET, SO_DOMAIN, &domain, &olen) < 0)
        return notify_respond(listener, n->id, ENOTSOCK, 0);
    olen = sizeof type;
    getsockopt(theirs, SOL_SOCKET, SO_TYPE, &type, &olen);

    struct netrelay_sock *sin = standin(r, theirs);
    if (sin)
        return notify_respond(listener, n->id, standin_connect(&a, len, sin), 0);
    if (a.ss_family == AF_UNSPEC) /* dissolving an association reaches nothing */
        return notify_respond(listener, n->id,
                              connect(theirs, (struct sockaddr *)&a, len) < 0 ? errno : 0, 0);
    if (domain == AF_UNIX && a.ss_family == AF_UNIX)
        return notify_respond(
            listener, n->id,
            usock_connect(nn->usock, theirs, n->pid, (struct sockaddr_un *)&a, len), 0);
    bool tcp = (domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM && nn->door.on;
    if (tcp && is_proxy(&a, len))
        return redirect_to_gateway(listener, n, theirs, nn, NULL, 0);
    uint32_t addr;
    uint16_t port;
    if (tcp && is_transparent(&a, len, nn, &addr, &port)) {
        unsigned char pre[RELAY_PREFACE_MAX];
        size_t pl = door_preface(&a, len, pre);
        return redirect_to_gateway(listener, n, theirs, nn, pre, pl);
    }
    /* An address the client named: the gateway's, or refused and told (door.h). */
    int handed = tcp ? door_connect(&nn->door, listener, n, theirs, &a, len) : 0;
    if (handed)
        return handed < 0 ? -1 : 0;
    if (domain == AF_INET || domain == AF_INET6)
        return notify_respond(listener, n->id, ECONNREFUSED, 0);
    return notify_respond(listener, n->id, EACCES, 0);
}

static int on_listen(int listener, const struct seccomp_notif *n)
{
    int rc;
    _cleanup_close_ int theirs = notify_claim_socket(listener, n, &rc);
    if (theirs < 0)
        return rc;
    int domain = 0;
    socklen_t olen = sizeof domain;
    if (getsockopt(theirs, SOL_SOCKET, SO_DOMAIN, &domain, &olen) < 0)
        return notify_respond(listener, n->id, ENOTSOCK, 0);
    /* Only a unix socket listens: an inet one would be a port on the host. */
    if (domain != AF_UNIX)
        return notify_respond(listener, n->id, EACCES, 0);
    return notify_respond(listener, n->id, listen(theirs, (int)n->data.args[1]) < 0 ? errno : 0, 0);
}

/* ---- DNS: the UDP stand-ins (see netnotify.h) ---- */

/* Close *FD and forget it (closep() leaves the number behind). */
static void drop(int *fd)
{
    closep(fd);
    *fd = -1;
}

void netrelay_init(struct netrelay *r)
{
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < NETRELAY_MAX; i++)
        r->socks[i].mine = r->socks[i].door = -1;
    for (size_t i = 0; i < NETRELAY_WAITS; i++)
        r->waits[i].fd = -1;
}

static void standin_free(struct netrelay_sock *s)
{
    drop(&s->mine);
    drop(&s->door);
    s->ino = 0;
    s->dns = false;
    s->got = 0;
}

/* The stand-in FD (our copy of the command's socket) is, or NULL. */
static struct netrelay_sock *standin(struct netrelay *r, int fd)
{
    struct stat st;
    int domain = 0, type = 0;
    socklen_t dl = sizeof domain, tl = sizeof type;
    /* The kind too: an inode number freed by the command is reused before
     * the loop sees the stand-in go, and a TCP socket is no stand-in. */
    if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode) ||
        getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dl) < 0 || domain != AF_UNIX ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_SEQPACKET)
        return NULL;
    for (size_t i = 0; i < NETRELAY_MAX; i++)
        if (r->socks[i].ino && r->socks[i].ino == st.st_ino)
            return &r->socks[i];
    return NULL;
}

static bool is_nameserver(const struct sockaddr_storage *a, socklen_t len)
{
    if (a->ss_family == AF_INET && len >= sizeof(struct sockaddr_in))
        return ((const struct sockaddr_in *)(const void *)a)->sin_port == htons(53);
    if (a->ss_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
        return ((const struct sockaddr_in6 *)(const void *)a)->sin6_port == htons(53);
    return false;
}

/* A stand-in connected to A: port 53 makes its datagrams queries; nothing else is reached. */
static int standin_connect(const struct sockaddr_storage *a, socklen_t len, struct netrelay_sock *s)
{
    if (a->ss_family == AF_UNSPEC) {
        s->dns = false;
        return 0;
    }
    if (!is_nameserver(a, len))
        return ECONNREFUSED;
    memcpy(&s->peer, a, len);
    s->peer_len = len;
    s->dns = true;
    return 0;
}

/* A socket(AF_INET[6], SOCK_DGRAM): the stand-in, its number the call's answer. */
static int on_socket(int listener, const struct seccomp_notif *n, struct netrelay *r)
{
    struct netrelay_sock *s = NULL;
    for (size_t i = 0; i < NETRELAY_MAX && !s; i++)
        if (!r->socks[i].ino)
            s = &r->socks[i];
    if (!s)
        return notify_respond(listener, n->id, ENOBUFS, 0);
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
        return notify_respond(listener, n->id, errno, 0);
    _cleanup_close_ int theirs = pair[0];
    s->mine = pair[1];
    struct stat st;
    int type = (int)n->data.args[1];
    if (fstat(theirs, &st) < 0 || fcntl(s->mine, F_SETFL, O_NONBLOCK) < 0 ||
        ((type & SOCK_NONBLOCK) && fcntl(theirs, F_SETFL, O_NONBLOCK) < 0)) {
        standin_free(s);
        return notify_respond(listener, n->id, ENOBUFS, 0);
    }
    /* A slot still holding this inode number is a stand-in the command
     * closed whose end the loop has not seen yet: the number is free again. */
    for (size_t i = 0; i < NETRELAY_MAX; i++)
        if (r->socks[i].ino == st.st_ino)
            standin_free(&r->socks[i]);
    s->ino = st.st_ino;
    s->family = (int)n->data.args[0];
    struct seccomp_notif_addfd add = {
        .id = n->id,
        .flags = SECCOMP_ADDFD_FLAG_SEND,
        .srcfd = (__u32)theirs,
        .newfd_flags = (type & SOCK_CLOEXEC) ? O_CLOEXEC : 0,
    };
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0) {
        int e = errno;
        standin_free(s);
        return e == ENOENT ? 0 : notify_respond(listener, n->id, e, 0);
    }
    return 0; /* answered: the call returns the new descriptor */
}

/*
 * A stand-in binds nowhere (it has no inet address) and takes IP options as
 * set. Any other socket's bind is the kernel's (Landlock says where a unix
 * socket may be made); a unix one is noted as the run's first: a racing
 * thread swapping another in leaves that one unnoted, so unreachable.
 */
static int on_bind_or_option(int listener, const struct seccomp_notif *n,
                             const struct netnotify *nn, struct netrelay *r)
{
    int rc;
    _cleanup_close_ int theirs = notify_claim_socket(listener, n, &rc);
    if (theirs < 0)
        return rc;
    if (n->data.nr == __NR_bind && !standin(r, theirs))
        usock_note_bind(nn->usock, theirs);
    if (!standin(r, theirs))
        return notify_continue(listener, n->id); /* Landlock and the kernel's own checks hold */
    return notify_respond(listener, n->id, 0, 0);
}

/*
 * getsockname(), getpeername(): a stand-in's as a UDP socket's would be, on
 * loopback (it has no address) and connected to its nameserver.
 */
static int on_name(int listener, const struct seccomp_notif *n, struct netrelay *r)
{
    int rc;
    _cleanup_close_ int theirs = notify_claim_socket(listener, n, &rc);
    if (theirs < 0)
        return rc;
    const struct netrelay_sock *s = standin(r, theirs);
    if (!s)
        return notify_continue(listener, n->id); /* it writes only to the caller */
    struct sockaddr_storage a = { 0 };
    socklen_t len;
    if (n->data.nr == __NR_getpeername) {
        if (!s->dns)
            return notify_respond(listener, n->id, ENOTCONN, 0);
        memcpy(&a, &s->peer, s->peer_len);
        len = s->peer_len;
    } else if (s->family == AF_INET6) {
        struct sockaddr_in6 *in6 = (void *)&a;
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_loopback;
        in6->sin6_port = htons((uint16_t)(32768 + s->ino % 28000));
        len = sizeof *in6;
    } else {
        struct sockaddr_in *in = (void *)&a;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        in->sin_port = htons((uint16_t)(32768 + s->ino % 28000));
        len = sizeof *in;
    }
    socklen_t room;
    if (notify_read(n->pid, &room, n->data.args[2], sizeof room) < 0 ||
        notify_write(n->pid, n->data.args[1], &a, room < len ? room : len) < 0 ||
        notify_write(n->pid, n->data.args[2], &len, sizeof len) < 0)
        return notify_respond(listener, n->id, EFAULT, 0);
    return notify_respond(listener, n->id, 0, 0);
}

/* Query Q (LEN bytes) from stand-in S, onto its stream to the gateway's stub. */
static void relay_query(const struct netnotify *nn, struct netrelay_sock *s, const void *q,
                        size_t len)
{
    if (len < 12 || len > RELAY_DNS_MAX)
        return; /* no DNS message: dropped, as a lost datagram */
    if (s->door < 0) {
        unsigned char pre[RELAY_PREFACE_MAX];
        s->door = door_dial(&nn->door, pre, relay_preface(pre, RELAY_DNS));
        if (s->door < 0 || fcntl(s->door, F_SETFL, O_NONBLOCK) < 0) {
            drop(&s->door);
            return;
        }
        s->got = 0;
    }
    unsigned char msg[2 + RELAY_DNS_MAX];
    msg[0] = (unsigned char)(len >> 8);
    msg[1] = (unsigned char)len;
    memcpy(msg + 2, q, len);
    if (send(s->door, msg, 2 + len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)(2 + len))
        drop(&s->door); /* a stalled or broken stream: the resolver asks again */
}

/* sendto() with an address: on a stand-in, a query to a nameserver or nothing. */
static int on_sendto(int listener, const struct seccomp_notif *n, const struct netnotify *nn,
                     struct netrelay *r)
{
    int rc;
    _cleanup_close_ int theirs = notify_claim_socket(listener, n, &rc);
    if (theirs < 0)
        return rc;
    struct netrelay_sock *s = standin(r, theirs);
    if (!s) /* a TCP or unix socket: as before (a stand-in swapped in meanwhile ignores it) */
        return notify_continue(listener, n->id);
    struct sockaddr_storage a = { 0 };
    socklen_t alen = (socklen_t)n->data.args[5];
    if (alen > sizeof a)
        alen = sizeof a;
    if (notify_read(n->pid, &a, n->data.args[4], alen) < 0)
        return notify_respond(listener, n->id, EFAULT, 0);
    if (!is_nameserver(&a, alen))
        return notify_respond(listener, n->id, ECONNREFUSED, 0);
    size_t len = (size_t)n->data.args[2];
    unsigned char q[RELAY_DNS_MAX];
    if (len > sizeof q)
        return notify_respond(listener, n->id, EMSGSIZE, 0);
    if (notify_read(n->pid, q, n->data.args[1], len) < 0)
        return notify_respond(listener, n->id, EFAULT, 0);
    memcpy(&s->peer, &a, alen);
    s->peer_len = alen;
    s->dns = true;
    relay_query(nn, s, q, len);
    return notify_respond(listener, n->id, 0, (__s64)len);
}

/*
 * One datagram from the command's end of S (THEIRS, our copy) into the
 * caller's recvfrom() buffer, its sender the nameserver. false when none
 * is waiting (nothing answered then).
 */
static bool deliver(int listener, const struct seccomp_notif *n, int theirs,
                    const struct netrelay_sock *s)
{
    unsigned char buf[RELAY_DNS_MAX];
    size_t want = (size_t)n->data.args[2];
    int flags = (int)n->data.args[3] & (MSG_PEEK | MSG_TRUNC);
    ssize_t got = recv(theirs, buf, want < sizeof buf ? want : sizeof buf, flags | MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return false;
    if (got < 0) {
        notify_respond(listener, n->id, errno, 0);
        return true;
    }
    size_t copy = (size_t)got < want ? (size_t)got : want;
    if (copy > sizeof buf)
        copy = sizeof buf;
    socklen_t room = 0;
    if (notify_write(n->pid, n->data.args[1], buf, copy) < 0 ||
        (n->data.args[5] && notify_read(n->pid, &room, n->data.args[5], sizeof room) < 0)) {
        notify_respond(listener, n->id, EFAULT, 0);
        return true;
    }
    static const struct sockaddr_storage none;
    const struct sockaddr_storage *from = s && s->dns ? &s->peer : &none;
    socklen_t plen = s && s->dns ? s->peer_len : 0;
    if (n->data.args[5] &&
        (notify_write(n->pid, n->data.args[4], from, room < plen ? room : plen) < 0 ||
         notify_write(n->pid, n->data.args[5], &plen, sizeof plen) < 0)) {
        notify_respond(listener, n->id, EFAULT, 0);
        return true;
    }
    notify_respond(listener, n->id, 0, got);
    return true;
}

/* recvfrom() asking for the sender: on a stand-in, the nameserver's answer. */
static int on_recvfrom(int listener, const struct seccomp_notif *n, struct netrelay *r)
{
    int rc;
    int theirs = notify_claim_socket(listener, n, &rc);
    if (theirs < 0)
        return rc;
    struct netrelay_sock *s = standin(r, theirs);
    if (!s) {
        close(theirs);
        return notify_continue(listener, n->id); /* a receive sends nothing */
    }
    if (deliver(listener, n, theirs, s)) {
        close(theirs);
        return 0;
    }
    int fl = fcntl(theirs, F_GETFL);
    if ((fl >= 0 && (fl & O_NONBLOCK)) || (n->data.args[3] & MSG_DONTWAIT)) {
        close(theirs);
        return notify_respond(listener, n->id, EAGAIN, 0);
    }
    /* A blocking receive: answered once a datagram comes (the loop polls
     * our copy), its timeout passes, or the caller gives up. */
    struct netrelay_wait *w = NULL;
    for (size_t i = 0; i < NETRELAY_WAITS && !w; i++)
        if (r->waits[i].fd < 0)
            w = &r->waits[i];
    if (!w) {
        close(theirs);
        return notify_respond(listener, n->id, EINTR, 0); /* the caller's loop asks again */
    }
    struct timeval tv = { 0 };
    socklen_t tl = sizeof tv;
    memset(&w->deadline, 0, sizeof w->deadline);
    if (getsockopt(theirs, SOL_SOCKET, SO_RCVTIMEO, &tv, &tl) == 0 && (tv.tv_sec || tv.tv_usec)) {
        clock_gettime(CLOCK_MONOTONIC, &w->deadline);
        w->deadline.tv_sec += tv.tv_sec + (w->deadline.tv_nsec / 1000 + tv.tv_usec) / 1000000;
        w->deadline.tv_nsec = ((w->deadline.tv_nsec / 1000 + tv.tv_usec) % 1000000) * 1000;
    }
    w->fd = theirs;
    w->n = *n;
    return 0;
}

size_t netrelay_fds(const struct netrelay *r, struct pollfd *p)
{
    size_t k = 0;
    for (size_t i = 0; i < NETRELAY_MAX; i++) {
        if (!r->socks[i].ino)
            continue;
        p[k++] = (struct pollfd){ .fd = r->socks[i].mine, .events = POLLIN };
        if (r->socks[i].door >= 0)
            p[k++] = (struct pollfd){ .fd = r->socks[i].door, .events = POLLIN };
    }
    for (size_t i = 0; i < NETRELAY_WAITS; i++)
        if (r->waits[i].fd >= 0)
            p[k++] = (struct pollfd){ .fd = r->waits[i].fd, .events = POLLIN };
    return k;
}

static short revents_of(const struct pollfd *p, size_t n, int fd)
{
    for (size_t i = 0; i < n; i++)
        if (p[i].fd == fd)
            return p[i].revents;
    return 0;
}

/* Answers on S's stream, each written to the command's end as one datagram. */
static void read_answers(struct netrelay_sock *s)
{
    for (;;) {
        size_t need = 2;
        if (s->got >= 2) {
            size_t len = (size_t)s->buf[0] << 8 | s->buf[1];
            if (!len || len > RELAY_DNS_MAX) {
                drop(&s->door); /* not the stub's framing */
                return;
            }
            need = 2 + len;
        }
        ssize_t got = recv(s->door, s->buf + s->got, need - s->got, MSG_DONTWAIT);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            drop(&s->door); /* the stub ended it (a query it could not read) */
            return;
        }
        if (got < 0)
            return;
        s->got += (size_t)got;
        if (s->got < need || need == 2)
            continue;
        (void)!send(s->mine, s->buf + 2, need - 2, MSG_DONTWAIT | MSG_NOSIGNAL);
        s->got = 0;
    }
}

static bool past(const struct timespec *t)
{
    struct timespec now;
    if (!t->tv_sec && !t->tv_nsec)
        return false;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

void netrelay_serve(int listener, const struct netnotify *nn, struct netrelay *r,
                    const struct pollfd *p, size_t n)
{
    for (size_t i = 0; i < NETRELAY_MAX; i++) {
        struct netrelay_sock *s = &r->socks[i];
        if (!s->ino)
            continue;
        if (s->door >= 0 && revents_of(p, n, s->door))
            read_answers(s);
        short ev = revents_of(p, n, s->mine);
        if (!ev)
            continue;
        unsigned char q[RELAY_DNS_MAX];
        ssize_t got = recv(s->mine, q, sizeof q, MSG_DONTWAIT | MSG_TRUNC);
        if (got > 0 && (size_t)got <= sizeof q && s->dns)
            relay_query(nn, s, q, (size_t)got);
        else if (got == 0 || (got < 0 && (ev & (POLLHUP | POLLERR))))
            standin_free(s); /* the command closed its end (every copy of it) */
    }
    for (size_t i = 0; i < NETRELAY_WAITS; i++) {
        struct netrelay_wait *w = &r->waits[i];
        if (w->fd < 0)
            continue;
        __u64 id = w->n.id;
        bool gone = ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0;
        if (!gone && revents_of(p, n, w->fd) && !deliver(listener, &w->n, w->fd, standin(r, w->fd)))
            continue; /* woken without a datagram: wait on */
        if (!gone && !revents_of(p, n, w->fd)) {
            if (!past(&w->deadline))
                continue;
            notify_respond(listener, w->n.id, EAGAIN, 0);
        }
        drop(&w->fd);
    }
}

int netnotify_serve(int listener, const struct netnotify *nn, struct netrelay *r)
{
    struct seccomp_notif n;
    memset(&n, 0, sizeof n);
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &n) < 0)
        return errno == EINTR || errno == ENOENT ? 0 : -1;
    if (nn->meta && metanotify_handles(&n))
        return metanotify_serve(listener, &n, nn->meta);
    if (nn->names && names_handles(nn->names, &n))
        return names_serve(listener, &n, nn->names);
    if (n.data.nr == __NR_connect)
        return on_connect(listener, &n, nn, r);
    if (n.data.nr == __NR_listen)
        return on_listen(listener, &n);
    if (n.data.nr == __NR_socket)
        return on_socket(listener, &n, r);
    if (n.data.nr == __NR_bind || n.data.nr == __NR_setsockopt)
        return on_bind_or_option(listener, &n, nn, r);
    if (n.data.nr == __NR_sendto)
        return on_sendto(listener, &n, nn, r);
    if (n.data.nr == __NR_recvfrom)
        return on_recvfrom(listener, &n, r);
    if (n.data.nr == __NR_getsockname || n.data.nr == __NR_getpeername)
        return on_name(listener, &n, r);
    return notify_respond(listener, n.id, ENOSYS, 0);
}
