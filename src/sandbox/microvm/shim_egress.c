/*
 * sandbox/microvm/shim_egress.c: the shim's end of the egress port. Each
 * guest connection is a connection to the gateway here; bytes go both ways
 * within VM_EG_WINDOW per connection, so a client or a gateway connection
 * that stops reading holds up its own connection only. Nothing here blocks:
 * the gateway's sockets and the port are non-blocking, what they cannot take
 * yet waits in a queue, and the port is always read, so neither end of it
 * can wait on the other.
 */
#include "sandbox/microvm/microvm_int.h"
#include "sandbox/microvm/vm_queue.h"

#include <netinet/in.h>
#include <poll.h>

/*
 * Frames for the guest wait in one queue: a gateway connection is read only
 * while it holds less than OUT_LOW, and a guest that leaves it past OUT_MAX
 * unread (only a hostile one can: the agent always reads the port) ends the
 * run.
 */
#define OUT_LOW (2 * VM_DATA_MAX)
#define OUT_MAX (8u << 20)

struct eg_conn {
    int fd;             /* to the gateway; -1: none */
    uint32_t down;      /* sent to the guest, not yet taken */
    uint32_t owed;      /* the guest's bytes the gateway took, not yet said (VM_EG_TAKEN) */
    bool up_end;        /* the guest closed its side: shut the gateway's once UP is written */
    struct vm_queue up; /* the guest's bytes the gateway has not taken yet */
};

struct eg_relay {
    int port;
    struct vm_reader reader;
    struct eg_conn conns[VM_EG_MAX_CONNS];
    char *out; /* frames for the guest not yet written */
    size_t out_len, out_cap;
};

static int connect_gateway(void)
{
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(GATEWAY_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    /* Loopback connects at once: non-blocking only after. */
    if (c >= 0 &&
        (connect(c, (struct sockaddr *)&a, sizeof a) < 0 || fcntl(c, F_SETFL, O_NONBLOCK) < 0)) {
        close(c);
        c = -1;
    }
    return c;
}

struct eg_relay *eg_relay_new(int port)
{
    struct eg_relay *r = calloc(1, sizeof *r);
    if (!r || fcntl(port, F_SETFL, O_NONBLOCK) < 0) {
        free(r);
        return NULL;
    }
    r->port = port;
    vm_reader_init(&r->reader, VM_PORT_EGRESS);
    for (size_t i = 0; i < VM_EG_MAX_CONNS; i++)
        r->conns[i].fd = -1;
    return r;
}

static int out_frame(struct eg_relay *r, uint32_t type, uint32_t id, const void *data, size_t len,
                     struct cordon_err *err)
{
    size_t need = VM_FRAME_HEADER + 4 + len;
    if (r->out_len + need > OUT_MAX)
        return err_set(err, CORDON_E_SETUP, "microvm: the guest does not read its egress port");
    if (r->out_len + need > r->out_cap) {
        size_t cap = r->out_cap ? r->out_cap : OUT_LOW + VM_DATA_MAX;
        while (cap < r->out_len + need)
            cap *= 2;
        char *p = realloc(r->out, cap);
        if (!p)
            return err_set(err, CORDON_E_INTERNAL, "out of memory");
        r->out = p;
        r->out_cap = cap;
    }
    uint32_t h[3] = { type, (uint32_t)(4 + len), id };
    memcpy(r->out + r->out_len, h, sizeof h);
    if (len)
        memcpy(r->out + r->out_len + sizeof h, data, len);
    r->out_len += need;
    return 0;
}

static void conn_drop(struct eg_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    vm_queue_free(&c->up);
    *c = (struct eg_conn){ .fd = -1 };
}

/* The gateway's end of ID is over: the guest hears it, and the id is free here. */
static int conn_end(struct eg_relay *r, uint32_t id, struct cordon_err *err)
{
    conn_drop(&r->conns[id]);
    return out_frame(r, VM_EG_CLOSE, id, NULL, 0, err);
}

/*
 * SENT of the guest's bytes handed to the gateway: the guest is owed the
 * room, and the guest's close is passed on once nothing waits before it.
 * What a gateway that is gone would not take goes nowhere: its end, read
 * next, closes the connection.
 */
static void up_sent(struct eg_conn *c, size_t sent)
{
    c->owed += (uint32_t)sent;
    if (c->up_end && !c->up.len) {
        shutdown(c->fd, SHUT_WR);
        c->up_end = false;
    }
}

/* As much of C's queue as the gateway takes now. */
static void up_flush(struct eg_conn *c)
{
    bool gone = false;
    up_sent(c, vm_queue_send(&c->up, c->fd, &gone));
}

static int guest_frame(struct eg_relay *r, const struct vm_frame *f, struct cordon_err *err)
{
    uint32_t id, v32 = 0;
    memcpy(&id, f->data, 4); /* below VM_EG_MAX_CONNS: the reader checked */
    struct eg_conn *c = &r->conns[id];
    switch (f->type) {
    case VM_EG_OPEN:
        if (c->fd >= 0)
            return 0; /* open already */
        conn_drop(c);
        c->fd = connect_gateway();
        return c->fd < 0 ? out_frame(r, VM_EG_CLOSE, id, NULL, 0, err) : 0;
    case VM_EG_DATA: {
        size_t len = f->len - 4;
        if (c->fd < 0)
            return 0; /* ended here: the guest hears it, or heard it */
        if (len > VM_EG_WINDOW - c->up.len)
            return err_set(err, CORDON_E_SETUP,
                           "microvm: the guest sent past egress connection %u's window", id);
        size_t sent;
        bool gone = false;
        if (!vm_queue_write(&c->up, c->fd, f->data + 4, len, &sent, &gone))
            return err_set(err, CORDON_E_INTERNAL, "out of memory");
        up_sent(c, sent);
        return 0;
    }
    case VM_EG_CLOSE:
        if (c->fd >= 0) {
            c->up_end = true;
            up_flush(c);
        }
        return 0;
    case VM_EG_RESET:
        /* The client is gone: so is the gateway's connection (a reset, as
         * the namespace level's client gives it), and what it still sends. */
        if (c->fd < 0)
            return 0;
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &(struct linger){ .l_onoff = 1 },
                   sizeof(struct linger));
        return conn_end(r, id, err);
    case VM_EG_TAKEN:
        memcpy(&v32, f->data + 4, 4);
        /* Never below nothing: a guest cannot make more room than the window. */
        c->down = v32 < c->down ? c->down - v32 : 0;
        return 0;
    }
    return 0;
}

size_t eg_relay_poll(const struct eg_relay *r, struct pollfd *p)
{
    p[0] = (struct pollfd){ .fd = r->port, .events = POLLIN | (r->out_len ? POLLOUT : 0) };
    for (size_t i = 0; i < VM_EG_MAX_CONNS; i++) {
        const struct eg_conn *c = &r->conns[i];
        short ev = (c->down < VM_EG_WINDOW && r->out_len < OUT_LOW ? POLLIN : 0) |
            (c->up.len ? POLLOUT : 0);
        /* Not polled at all while it waits: its hang-up would wake us for nothing. */
        p[1 + i] = (struct pollfd){ .fd = ev ? c->fd : -1, .events = ev };
    }
    return 1 + VM_EG_MAX_CONNS;
}

/* The port: frames from the guest in, queued frames out. */
static int port_events(struct eg_relay *r, short revents, struct cordon_err *err)
{
    static char buf[VM_DATA_MAX];
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = read(r->port, buf, sizeof buf);
        bool later = n < 0 && (errno == EAGAIN || errno == EINTR);
        if (n <= 0 && !later)
            return err_set(err, CORDON_E_SETUP, "microvm: the guest closed its egress port");
        for (size_t off = 0; n > 0 && off < (size_t)n;) {
            size_t used;
            struct vm_frame f;
            int got = vm_reader_feed(&r->reader, buf + off, (size_t)n - off, &used, &f, err);
            if (got < 0)
                return -1; /* a hostile or broken guest: the run ends */
            off += used;
            if (got == 0)
                break;
            TRY(guest_frame(r, &f, err));
        }
    }
    while (r->out_len && (revents & POLLOUT)) {
        ssize_t n = write(r->port, r->out, r->out_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0)
            return err_sys(err, CORDON_E_SETUP, "microvm: cannot write the egress port");
        memmove(r->out, r->out + n, r->out_len - (size_t)n);
        r->out_len -= (size_t)n;
    }
    return 0;
}

int eg_relay_events(struct eg_relay *r, const struct pollfd *p, struct cordon_err *err)
{
    static char buf[VM_DATA_MAX];
    TRY(port_events(r, p[0].revents, err));
    for (uint32_t i = 0; i < VM_EG_MAX_CONNS; i++) {
        struct eg_conn *c = &r->conns[i];
        short ev = p[1 + i].revents;
        /* Polled before the port's frames changed the table: still this connection? */
        if (c->fd < 0 || c->fd != p[1 + i].fd || !ev)
            continue;
        if (c->up.len && (ev & (POLLOUT | POLLERR)))
            up_flush(c);
        /* Read only as it was polled for, and while the queue has room. */
        if (!(ev & (POLLIN | POLLHUP | POLLERR)) || !(p[1 + i].events & POLLIN) ||
            r->out_len >= OUT_LOW)
            continue;
        size_t room = VM_EG_WINDOW - c->down;
        ssize_t n = read(c->fd, buf, room < sizeof buf ? room : sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n > 0) {
            TRY(out_frame(r, VM_EG_DATA, i, buf, (size_t)n, err));
            c->down += (uint32_t)n;
        } else {
            TRY(conn_end(r, i, err));
        }
    }
    /* The room the gateway made, said half a window at a time (the guest
     * waits only with a whole window out). */
    for (uint32_t i = 0; i < VM_EG_MAX_CONNS && r->out_len < OUT_LOW; i++) {
        struct eg_conn *c = &r->conns[i];
        if (c->owed < VM_EG_WINDOW / 2)
            continue;
        TRY(out_frame(r, VM_EG_TAKEN, i, &c->owed, sizeof c->owed, err));
        c->owed = 0;
    }
    if (r->out_len)
        TRY(port_events(r, POLLOUT, err));
    return 0;
}
