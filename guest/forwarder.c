/*
 * guest/forwarder.c: the guest's egress forwarder (see agent.h). Each
 * connection to 127.0.0.1:3128, and with transparent egress each one to a
 * synthetic address's port and each DNS query to the stub, goes over the
 * egress port to the host, which hands it to cordon's gateway. Bytes go
 * each way within VM_EG_WINDOW per connection, and the clients' sockets are
 * non-blocking: a client that does not read holds up its own connection,
 * never the port.
 */
#include "agent.h"

#include "../src/sandbox/microvm/vm_queue.h"
#include "../src/sandbox/microvm/vm_wire.h"
#include "common/fds.h"
#include "common/home.h"
#include "common/relay_wire.h"
#include "common/route.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/random.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS ((int)VM_EG_MAX_CONNS)
/* After the host's end of a connection: how long its client may take to read the rest and close. */
#define LINGER_MS 2000
/* DNS queries sent on the stream and not yet answered: their clients, in order. */
#define MAX_PENDING 64
/* Frames from the host handled in one round at most. */
#define FRAMES_PER_ROUND 64

/*
 * A connection id stays taken until both sides have closed it: the host
 * frees its end when it sends its close, so an id reused before the host's
 * close arrived would land on the host's old connection to the gateway.
 */
struct conn {
    int fd; /* the client's socket; -1 once it closed (or for the DNS stream) */
    bool used;
    bool local_done;      /* the client sent all it will (and the host heard, unless done) */
    bool remote_done;     /* the host sent VM_EG_CLOSE */
    bool remote_ended;    /* ... and the client was told, once DOWN was written */
    bool reset_sent;      /* the client is gone, and the host was told (VM_EG_RESET) */
    bool transparent;     /* to a synthetic address: a close before any byte is a reset */
    bool answered;        /* the host sent a byte */
    uint64_t linger_ms;   /* the host is done: when the client is closed regardless */
    uint32_t up;          /* bytes sent to the host it has not said it took */
    struct vm_queue down; /* the host's bytes the client has not read yet */
    uint32_t down_taken;  /* of them, read since the host was last told (VM_EG_TAKEN) */
};

struct forwarder {
    int port;                    /* the egress port */
    int proxy;                   /* 127.0.0.1:3128: bytes as they come */
    int dns;                     /* 127.0.0.53:53 (UDP), or -1 */
    int listeners[VM_MAX_PORTS]; /* 0.0.0.0:port, for the synthetic addresses */
    uint32_t n_listeners;
    struct conn conns[MAX_CONNS];
    /* The DNS stream: its id (-1: none open), the answers' bytes so far,
     * and the clients of the queries not yet answered, oldest first. */
    int dns_id;
    unsigned char dns_in[2 + RELAY_DNS_MAX];
    size_t dns_have;
    struct sockaddr_in pending[MAX_PENDING];
    size_t pending_head, n_pending;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* FD's close, which follows, sends a reset. */
static void reset_on_close(int fd)
{
    struct linger now = { .l_onoff = 1, .l_linger = 0 };
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
}

/* A new id for FD, opened at the host, and PREFACE (N bytes) sent first; -1 when all are taken. */
static int conn_open(struct forwarder *f, int fd, const void *preface, size_t n)
{
    for (int i = 0; i < MAX_CONNS; i++) {
        if (f->conns[i].used)
            continue;
        f->conns[i] = (struct conn){
            .fd = fd, .used = true, .transparent = fd >= 0 && n > 0, .up = (uint32_t)n
        };
        uint32_t id = (uint32_t)i;
        send_frame(f->port, VM_EG_OPEN, &id, sizeof id, NULL, 0);
        if (n)
            send_frame(f->port, VM_EG_DATA, &id, sizeof id, preface, n);
        return i;
    }
    return -1;
}

/*
 * Connection I's client is gone (its socket closed, or reset): a read of its
 * end could not tell that from a half close, and the host would relay the
 * rest of an answer nobody reads (and count it against the run's budget).
 */
static void client_gone(struct forwarder *f, int i)
{
    struct conn *c = &f->conns[i];
    uint32_t id = (uint32_t)i;
    if (c->reset_sent || c->remote_done)
        return;
    send_frame(f->port, VM_EG_RESET, &id, sizeof id, NULL, 0);
    c->reset_sent = true;
}

/* N of the host's bytes on connection I handed on (or dropped): room for as many again. */
static void give_room(struct forwarder *f, int i, size_t n)
{
    uint32_t id = (uint32_t)i, taken = (uint32_t)n;
    if (n)
        send_frame(f->port, VM_EG_TAKEN, &id, sizeof id, &taken, sizeof taken);
}

static void conn_close_local(struct forwarder *f, int i)
{
    struct conn *c = &f->conns[i];
    /* What the client left unread goes nowhere; the host may send on. */
    if (!c->remote_done)
        give_room(f, i, c->down_taken + c->down.len);
    vm_queue_free(&c->down);
    c->down_taken = 0;
    if (!c->local_done) {
        uint32_t id = (uint32_t)i;
        send_frame(f->port, VM_EG_CLOSE, &id, sizeof id, NULL, 0);
        c->local_done = true;
    }
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    if (i == f->dns_id) {
        /* Queries in flight on it are lost: their clients ask again. */
        f->dns_id = -1;
        f->dns_have = 0;
        f->n_pending = 0;
    }
    if (c->remote_done)
        c->used = false;
}

/*
 * The host's end: the gateway is done with the connection. The client reads
 * what it said and the end; a client that then neither closes nor stops
 * sending is closed after LINGER_MS (its id is free again once both sides
 * are). A transparent client the gateway refused before any byte gets a
 * reset, as from the namespace level's listeners.
 */
static void conn_close_remote(struct forwarder *f, int i)
{
    struct conn *c = &f->conns[i];
    c->remote_done = true;
    if (c->down.len)
        return; /* told once the client has read what came before (down_flush) */
    c->remote_ended = true;
    if (c->transparent && !c->answered && c->fd >= 0)
        reset_on_close(c->fd);
    if (i == f->dns_id || c->fd < 0 || c->local_done || (c->transparent && !c->answered)) {
        conn_close_local(f, i); /* both ways done */
        return;
    }
    shutdown(c->fd, SHUT_WR); /* the client reads the end, then closes */
    c->linger_ms = now_ms() + LINGER_MS;
}

/*
 * SENT of the host's bytes on connection I handed to its client (or dropped,
 * where it is GONE); then the host's end, if it came and nothing waits
 * before it. The room goes back half a window at a time: the host
 * waits only with a whole window out, so what is taken and not yet said
 * never stalls it, and a frame per write costs a download under TCG.
 */
static void down_sent(struct forwarder *f, int i, size_t sent, bool gone)
{
    struct conn *c = &f->conns[i];
    c->down_taken += (uint32_t)sent;
    if (gone)
        client_gone(f, i);
    if (c->down_taken >= VM_EG_WINDOW / 2) {
        give_room(f, i, c->down_taken);
        c->down_taken = 0;
    }
    if (!c->down.len && c->remote_done && !c->remote_ended)
        conn_close_remote(f, i);
}

/* As much of connection I's queue as its client takes now. */
static void down_flush(struct forwarder *f, int i)
{
    bool gone = false;
    size_t sent = vm_queue_send(&f->conns[i].down, f->conns[i].fd, &gone);
    down_sent(f, i, sent, gone);
}

/* The host's bytes for connection I's client: as many written as it takes, the rest queued. */
static void down_put(struct forwarder *f, int i, const char *data, size_t len)
{
    size_t sent;
    bool gone = false;
    /* The host keeps within the window; one that did not is broken. */
    if (!vm_queue_write(&f->conns[i].down, f->conns[i].fd, data, len, &sent, &gone))
        _exit(1);
    down_sent(f, i, sent, gone);
}

/*
 * Every connection id is taken (the client holds more connections than
 * the host lets the run have; the gateway would refuse them): answered here
 * as the gateway would, with its 429, or a reset at a synthetic address.
 */
static void refuse_full(int fd, bool transparent)
{
    static const char body[] = "the guest's egress relay holds all the connections it can\n";
    char answer[256];
    int n = snprintf(answer, sizeof answer,
                     "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain\r\n"
                     "X-Cordon-Denied: budget:connections\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     sizeof body - 1, body);
    if (transparent) {
        reset_on_close(fd);
    } else {
        (void)!send(fd, answer, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        /* What it sent so far is read: a close over unread bytes is a reset,
         * which can take the answer with it. */
        char sink[4096];
        while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0)
            ;
    }
    close(fd);
}

/* The client sent all it will (a half close): the host's side learns it, and
 * the answer still comes back on the same socket until the host's end. */
static void conn_local_end(struct forwarder *f, int i)
{
    struct conn *c = &f->conns[i];
    if (c->remote_done && !c->down.len) {
        conn_close_local(f, i);
        return;
    }
    /* Once what waits for it is read, the host's end closes it (down_flush). */
    if (!c->remote_done) {
        uint32_t id = (uint32_t)i;
        send_frame(f->port, VM_EG_CLOSE, &id, sizeof id, NULL, 0);
    }
    c->local_done = true;
}

/* A query from a client of the stub: onto the DNS stream, opened if need be. */
static void dns_query(struct forwarder *f)
{
    unsigned char q[2 + RELAY_DNS_MAX + 1];
    struct sockaddr_in from;
    socklen_t flen = sizeof from;
    ssize_t n =
        recvfrom(f->dns, q + 2, sizeof q - 2, MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
    /* Shorter than a header, longer than the stream carries, or more in
     * flight than we remember clients for: dropped, as a busy server would. */
    if (n < 12 || (size_t)n > RELAY_DNS_MAX || f->n_pending == MAX_PENDING)
        return;
    if (f->dns_id >= 0 && f->conns[f->dns_id].up + 2 + (size_t)n > VM_EG_WINDOW)
        return; /* the host has not taken the last ones yet */
    if (f->dns_id < 0) {
        unsigned char preface[RELAY_MAGIC_LEN + 1];
        memcpy(preface, RELAY_MAGIC, RELAY_MAGIC_LEN);
        preface[RELAY_MAGIC_LEN] = RELAY_DNS;
        f->dns_id = conn_open(f, -1, preface, sizeof preface);
        if (f->dns_id < 0)
            return;
    }
    q[0] = (unsigned char)(n >> 8);
    q[1] = (unsigned char)n;
    uint32_t id = (uint32_t)f->dns_id;
    send_frame(f->port, VM_EG_DATA, &id, sizeof id, q, 2 + (size_t)n);
    f->conns[f->dns_id].up += 2 + (uint32_t)n;
    f->pending[(f->pending_head + f->n_pending++) % MAX_PENDING] = from;
}

/* Answers from the DNS stream, each to the client of the oldest query. */
static void dns_answers(struct forwarder *f, const char *data, size_t len)
{
    int id = f->dns_id;
    while (len) {
        size_t take = sizeof f->dns_in - f->dns_have;
        if (take > len)
            take = len;
        memcpy(f->dns_in + f->dns_have, data, take);
        f->dns_have += take;
        data += take;
        len -= take;
        for (;;) {
            if (f->dns_have < 2)
                break;
            size_t mlen = (size_t)f->dns_in[0] << 8 | f->dns_in[1];
            if (mlen > RELAY_DNS_MAX || !f->n_pending) {
                conn_close_local(f, id); /* not the stream we asked for */
                return;
            }
            if (f->dns_have < 2 + mlen)
                break;
            struct sockaddr_in *to = &f->pending[f->pending_head];
            sendto(f->dns, f->dns_in + 2, mlen, MSG_DONTWAIT, (struct sockaddr *)to, sizeof *to);
            f->pending_head = (f->pending_head + 1) % MAX_PENDING;
            f->n_pending--;
            memmove(f->dns_in, f->dns_in + 2 + mlen, f->dns_have - 2 - mlen);
            f->dns_have -= 2 + mlen;
        }
    }
}

/*
 * A connection to a listener: opened with the address and port it was made
 * to, a synthetic one (the name behind it) or an address the client named
 * (an allowed literal, or loopback): the gateway decides either, and resets
 * what it refuses before a byte.
 */
static void transparent_accept(struct forwarder *f, int listener)
{
    int c = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0)
        return;
    struct sockaddr_in to;
    socklen_t tlen = sizeof to;
    unsigned char preface[RELAY_PREFACE_TCP_LEN];
    if (getsockname(c, (struct sockaddr *)&to, &tlen) < 0 || to.sin_family != AF_INET) {
        close(c);
        return;
    }
    memcpy(preface, RELAY_MAGIC, RELAY_MAGIC_LEN);
    preface[RELAY_MAGIC_LEN] = RELAY_TCP;
    /* Both already in network order, as the preface wants them. */
    memcpy(preface + RELAY_MAGIC_LEN + 1, &to.sin_addr.s_addr, 4);
    memcpy(preface + RELAY_MAGIC_LEN + 5, &to.sin_port, 2);
    if (conn_open(f, c, preface, sizeof preface) < 0)
        refuse_full(c, true);
}

/* One frame from the host, whole (the host writes the rest of one as the
 * port takes it); the data it brought. */
static size_t host_frame(struct forwarder *f)
{
    static char buf[VM_DATA_MAX];
    uint32_t hdr[2];
    if (!read_full(f->port, hdr, sizeof hdr) || hdr[1] < 4 || hdr[1] > VM_DATA_MAX + 4)
        _exit(1);
    uint32_t id;
    if (!read_full(f->port, &id, sizeof id) || !read_full(f->port, buf, hdr[1] - 4))
        _exit(1);
    struct conn *c = id < MAX_CONNS ? &f->conns[id] : NULL;
    size_t len = hdr[1] - 4;
    if (c && c->used && !c->remote_done) {
        if (hdr[0] == VM_EG_DATA && (int)id == f->dns_id) {
            dns_answers(f, buf, len);
            give_room(f, (int)id, len);
        } else if (hdr[0] == VM_EG_DATA && c->fd >= 0) {
            c->answered = true;
            down_put(f, (int)id, buf, len);
        } else if (hdr[0] == VM_EG_DATA) {
            give_room(f, (int)id, len); /* its client is gone */
            client_gone(f, (int)id);
        } else if (hdr[0] == VM_EG_TAKEN && len == 4) {
            uint32_t n;
            memcpy(&n, buf, 4);
            c->up = n < c->up ? c->up - n : 0;
        } else if (hdr[0] == VM_EG_CLOSE)
            conn_close_remote(f, (int)id);
    }
    return hdr[0] == VM_EG_DATA ? len : 0;
}

static _Noreturn void forwarder(struct forwarder *f)
{
    static char buf[VM_DATA_MAX];
    static struct pollfd p[3 + VM_MAX_PORTS + MAX_CONNS];
    enum { FIXED = 3 };
    /* A descriptor per connection (its client's socket), and the ports and listeners. */
    struct rlimit nofile = { MAX_CONNS + 64, MAX_CONNS + 64 };
    setrlimit(RLIMIT_NOFILE, &nofile);
    for (;;) {
        int timeout = -1;
        uint64_t now = now_ms();
        for (int i = 0; i < MAX_CONNS; i++) {
            struct conn *c = &f->conns[i];
            if (c->fd >= 0 && c->linger_ms && now >= c->linger_ms)
                conn_close_local(f, i); /* the host's end was long enough ago */
            else if (c->fd >= 0 && c->linger_ms) {
                int left = (int)(c->linger_ms - now);
                timeout = timeout < 0 || left < timeout ? left : timeout;
            }
        }
        p[0] = (struct pollfd){ .fd = f->port, .events = POLLIN };
        p[1] = (struct pollfd){ .fd = f->proxy, .events = POLLIN };
        p[2] = (struct pollfd){ .fd = f->dns, .events = POLLIN };
        for (uint32_t i = 0; i < f->n_listeners; i++)
            p[FIXED + i] = (struct pollfd){ .fd = f->listeners[i], .events = POLLIN };
        struct pollfd *pc = p + FIXED + f->n_listeners;
        /* A client is read while the host has room for its bytes (one the
         * host is done with, to drop what it still sends), written while
         * its queue holds any; one that half-closed is watched for its
         * hang-up. */
        for (int i = 0; i < MAX_CONNS; i++) {
            const struct conn *c = &f->conns[i];
            bool in = !c->local_done && (c->remote_done || c->up < VM_EG_WINDOW);
            pc[i] = (struct pollfd){ .fd = c->fd,
                                     .events =
                                         (short)((in ? POLLIN : 0) | (c->down.len ? POLLOUT : 0)) };
        }
        if (poll(p, FIXED + f->n_listeners + MAX_CONNS, timeout) < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        /* The frames waiting, up to FRAMES_PER_ROUND and half a window of
         * data: at one a round, a flood of short connections (each brings
         * the host's DATA, CLOSE and room, and a round accepts one) outran
         * it and took every id; with no cap on data, a download's frames
         * (4 MB a round) left an upload beside it, read once a round, a
         * 64th of the guest. */
        struct pollfd port_in = { .fd = f->port, .events = POLLIN };
        size_t data_in = 0;
        for (int k = 0; k < FRAMES_PER_ROUND && data_in < VM_EG_WINDOW / 2 &&
             (p[0].revents & (POLLIN | POLLHUP)) && (k == 0 || poll(&port_in, 1, 0) > 0);
             k++)
            data_in += host_frame(f);
        for (int i = 0; i < MAX_CONNS; i++) {
            struct conn *c = &f->conns[i];
            /* Polled before the frames above changed the table: still this
             * connection? (No new one yet: accepts come after this loop.) */
            short ev = pc[i].revents;
            if (c->fd < 0 || c->fd != pc[i].fd || !ev)
                continue;
            if (c->down.len && (ev & (POLLOUT | POLLERR)))
                down_flush(f, i);
            if (c->fd < 0 || !(ev & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (c->local_done || !(pc[i].events & POLLIN)) {
                /* Hung up, or gone while its bytes wait for room: nobody reads the answer now. */
                if (ev & (POLLHUP | POLLERR))
                    conn_close_local(f, i);
                continue;
            }
            size_t room = c->remote_done ? VM_DATA_MAX : VM_EG_WINDOW - c->up;
            ssize_t n = read(c->fd, buf, room < VM_DATA_MAX ? room : VM_DATA_MAX);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            uint32_t id = (uint32_t)i;
            if (n > 0 && c->remote_done)
                continue; /* lingering: what it still sends goes nowhere */
            if (n > 0) {
                send_frame(f->port, VM_EG_DATA, &id, sizeof id, buf, (size_t)n);
                c->up += (uint32_t)n;
            } else if (n == 0 && i != f->dns_id)
                conn_local_end(f, i);
            else
                conn_close_local(f, i);
        }
        /* New clients last: a descriptor closed above can come back from
         * accept(), and the events polled for the old one must not land on
         * the new connection (a hang-up there closed it unanswered). */
        if (p[1].revents & POLLIN) {
            int c = accept4(f->proxy, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (c >= 0 && conn_open(f, c, NULL, 0) < 0)
                refuse_full(c, false);
        }
        if (p[2].revents & POLLIN)
            dns_query(f);
        for (uint32_t i = 0; i < f->n_listeners; i++)
            if (p[FIXED + i].revents & POLLIN)
                transparent_accept(f, f->listeners[i]);
    }
}

/* A socket of TYPE bound to ADDR:PORT (host order); -1 with WHY. */
static int bound_socket(int type, uint32_t addr, uint16_t port, char *why, size_t why_len)
{
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(addr) };
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        (type == SOCK_STREAM && listen(fd, 128) < 0)) {
        snprintf(why, why_len, "cannot listen on %u.%u.%u.%u:%u: %s", addr >> 24, addr >> 16 & 255,
                 addr >> 8 & 255, addr & 255, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* PORT: the egress port, opened before the command's root hid it. */
bool start_forwarder(const struct call *call, int port, char *why, size_t why_len)
{
    static struct forwarder f;
    f = (struct forwarder){ .port = port, .dns = -1, .dns_id = -1 };
    for (int i = 0; i < MAX_CONNS; i++)
        f.conns[i].fd = -1;
    if ((f.proxy = bound_socket(SOCK_STREAM, INADDR_LOOPBACK, VM_GATEWAY_PORT, why, why_len)) < 0)
        return false;
    if (call->flags & VM_CALL_TRANSPARENT) {
        if (route_local_range(VM_SYNTH_NET, VM_SYNTH_PREFIX) < 0) {
            snprintf(why, why_len, "cannot route the synthetic range to loopback: %s",
                     strerror(errno));
            return false;
        }
        for (uint32_t i = 0; i < call->n_nets; i++)
            if (route_local_range(call->nets[i], call->prefixes[i]) < 0 && errno != EEXIST) {
                snprintf(why, why_len, "cannot route an allowed address to loopback: %s",
                         strerror(errno));
                return false;
            }
        if ((f.dns = bound_socket(SOCK_DGRAM, VM_DNS_STUB_ADDR, 53, why, why_len)) < 0)
            return false;
        for (uint32_t i = 0; i < call->n_ports; i++) {
            f.listeners[i] = bound_socket(SOCK_STREAM, INADDR_ANY, call->ports[i], why, why_len);
            if (f.listeners[i] < 0)
                return false;
            f.n_listeners++;
        }
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, why_len, "cannot fork the egress forwarder: %s", strerror(errno));
        return false;
    }
    if (pid == 0)
        forwarder(&f);
    close(f.port);
    close(f.proxy);
    if (f.dns >= 0)
        close(f.dns);
    for (uint32_t i = 0; i < f.n_listeners; i++)
        close(f.listeners[i]);
    return true;
}
