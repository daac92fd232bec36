/*
 * sandbox/door.c: connections a keeper hands to the gateway (see door.h).
 * Runs in the keeper: the namespace level's init, the process level's
 * supervisor.
 */
#include "sandbox/door.h"

#include "common/addr.h"
#include "common/cleanup.h"
#include "policy/policy.h"
#include "sandbox/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/*
 * The keeper answers one notification at a time and must stay free to end
 * the run: no connect it makes may wait longer than this.
 */
#define DOOR_WAIT_MS 5000

/*
 * A's IPv4 form where it is IPv4-mapped (a dual-stack socket's, as a JVM
 * makes them: ::ffff:198.18.0.2 is the synthetic address itself), into *V4.
 */
static const struct sockaddr_storage *unmapped(const struct sockaddr_storage *a, socklen_t *len,
                                               struct sockaddr_storage *v4)
{
    static const unsigned char prefix[12] = { [10] = 0xff, [11] = 0xff };
    const struct sockaddr_in6 *in6 = (const void *)a;
    if (a->ss_family != AF_INET6 || *len < sizeof *in6 ||
        memcmp(&in6->sin6_addr, prefix, sizeof prefix) != 0)
        return a;
    struct sockaddr_in *in = (struct sockaddr_in *)v4;
    *in = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = in6->sin6_port };
    memcpy(&in->sin_addr, in6->sin6_addr.s6_addr + 12, 4);
    *len = sizeof *in;
    return v4;
}

size_t door_preface(const struct sockaddr_storage *a, socklen_t len,
                    unsigned char out[RELAY_PREFACE_MAX])
{
    struct ip_addr ip;
    struct sockaddr_storage plain;
    a = unmapped(a, &len, &plain);
    if (len < sizeof(sa_family_t) || ip_addr_from_sockaddr((const struct sockaddr *)a, &ip) < 0)
        return 0;
    /* Both families keep the port at the same place, in network order. */
    const unsigned char *port = (const unsigned char *)&((const struct sockaddr_in *)a)->sin_port;
    size_t alen = ip.family == AF_INET ? 4 : 16;
    memcpy(out, RELAY_MAGIC, RELAY_MAGIC_LEN);
    out[RELAY_MAGIC_LEN] = ip.family == AF_INET ? RELAY_TCP : RELAY_TCP6;
    memcpy(out + RELAY_MAGIC_LEN + 1, ip.bytes, alen);
    memcpy(out + RELAY_MAGIC_LEN + 1 + alen, port, 2);
    return RELAY_MAGIC_LEN + 1 + alen + 2;
}

int door_dial(const struct egress_door *d, const void *preface, size_t plen)
{
    _cleanup_close_ int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -1;
    if (connect(s, (const struct sockaddr *)&d->addr, sizeof d->addr) < 0) {
        struct pollfd p = { .fd = s, .events = POLLOUT };
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (errno != EINPROGRESS || poll(&p, 1, DOOR_WAIT_MS) != 1 ||
            getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr)
            return -1;
    }
    /* Before the caller holds it: a fresh connection's buffer takes it whole. */
    unsigned char head[sizeof d->token + RELAY_PREFACE_MAX];
    size_t t = d->token_set ? sizeof d->token : 0;
    if (plen > RELAY_PREFACE_MAX)
        return -1;
    memcpy(head, d->token, t);
    if (plen)
        memcpy(head + t, preface, plen);
    if (t + plen && send(s, head, t + plen, MSG_NOSIGNAL) != (ssize_t)(t + plen))
        return -1;
    if (fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK) < 0)
        return -1;
    return TAKE_FD(s);
}

int door_install(int listener, const struct seccomp_notif *n, int theirs, int s)
{
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
        .newfd_flags = notify_fd_cloexec(n->pid, (int)n->data.args[0]) ? O_CLOEXEC : 0,
    };
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0)
        return notify_respond(listener, n->id, errno == ENOENT ? 0 : ECONNREFUSED, 0);
    return notify_respond(listener, n->id, 0, 0);
}

static bool is_loopback(const struct ip_addr *ip)
{
    enum addr_class c = addr_classify(ip);
    return c == ADDR_LOOPBACK || c == ADDR_UNSPECIFIED;
}

int door_connect(const struct egress_door *d, int listener, const struct seccomp_notif *n,
                 int theirs, const struct sockaddr_storage *a, socklen_t len)
{
    struct ip_addr ip;
    struct sockaddr_storage plain;
    int type = 0;
    socklen_t tl = sizeof type;
    a = unmapped(a, &len, &plain);
    if (!d->on || getsockopt(theirs, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_STREAM ||
        ip_addr_from_sockaddr((const struct sockaddr *)a, &ip) < 0)
        return 0;
    uint16_t port = ntohs(((const struct sockaddr_in *)a)->sin_port);
    uint32_t v4 = 0;
    memcpy(&v4, ip.bytes, 4);
    if (ip.family == AF_INET && (ntohl(v4) & (~0u << (32 - SYNTH_PREFIX))) == SYNTH_NET)
        return 0; /* the stub's addresses: the run's listeners, or the keeper's own path */
    bool admitted = egress_rules_admit_addr(d->rules, &ip, port);
    if (!admitted && d->own_loopback && is_loopback(&ip))
        return 0; /* the run's own loopback, which no rule takes over */
    unsigned char pre[RELAY_PREFACE_MAX];
    size_t plen = door_preface(a, len, pre);
    _cleanup_close_ int s = plen ? door_dial(d, pre, plen) : -1;
    if (admitted && s >= 0)
        return door_install(listener, n, theirs, s) < 0 ? -1 : 1;
    /* Refused: the gateway, told through the connection we now close, records it. */
    return notify_respond(listener, n->id, ECONNREFUSED, 0) < 0 ? -1 : 1;
}
