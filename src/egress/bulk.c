/*
 * egress/bulk.c: the relay's bulk path, in the gateway's process. Where
 * nothing of the bytes must be read (an answer without a scrubber, a tunnel
 * that is not intercepted, a request body of known length with no
 * placeholder to look for), they go from one socket to the other by
 * splice(2) through a pipe of the connection's own: the kernel moves their
 * pages, the gateway never copies them. Every byte is still counted (the
 * connection's and the run's byte budget, the audit's byte counts) and the
 * budget still cuts where it runs out: a pass takes at most one byte more
 * than the budget has left, and only what it allows goes on.
 *
 * A pass starts only when nothing is queued on the copying path for the
 * same direction (its bufferevent's output, the client's unparsed input),
 * and the copying path only runs while the pipe is empty: the two never
 * reorder bytes. Whatever cannot have a pipe (out of descriptors, or past
 * the gateway's pipe budget, see pipe_budget()) copies.
 */
#include "egress/gateway_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

/* The pipe's size, asked for: one pass moves at most this much. */
#define PUMP_PIPE_SIZE RELAY_CHUNK

static bool pump_open(struct conn *c, struct pump *p, evutil_socket_t to,
                      event_callback_fn writable);
static void on_down_writable(evutil_socket_t fd, short what, void *arg);
static void on_up_writable(evutil_socket_t fd, short what, void *arg);

/* The budget's room, or UINT64_MAX without a byte budget. */
static uint64_t budget_left(const struct conn *c)
{
    uint64_t max = c->gw->cfg->max_bytes;
    if (!max)
        return UINT64_MAX;
    return c->gw->budget.bytes >= max ? 0 : max - c->gw->budget.bytes;
}

/* How much one pass may take in: a byte past the budget's room, to learn that it is spent. */
static size_t pass_cap(const struct conn *c, uint64_t want)
{
    uint64_t left = budget_left(c);
    uint64_t cap = PUMP_PIPE_SIZE;
    if (want < cap)
        cap = want;
    if (left != UINT64_MAX && left < cap)
        cap = left + 1;
    return (size_t)cap;
}

/*
 * A socket splice(2) does not serve (EINVAL: a kind without splice_read):
 * nothing was taken from it, so that direction copies from now on.
 */
static bool unspliceable(struct pump *p)
{
    if (errno != EINVAL)
        return false;
    p->failed = true;
    return true;
}

static void pump_close(struct conn *c, struct pump *p)
{
    if (p->wev)
        event_free(p->wev);
    p->wev = NULL;
    if (p->made) {
        close(p->r);
        close(p->w);
        c->gw->pipes_left++;
    }
    p->made = false;
    p->held = 0;
}

void bulk_release(struct conn *c)
{
    pump_close(c, &c->down);
    pump_close(c, &c->up);
}

/* ---- answer bytes: upstream to client ---- */

/*
 * May the answer's next bytes be spliced? Not through a scrubber or TLS
 * (both must read them), nor while the client's bufferevent holds bytes
 * that must reach it first.
 */
static bool down_ok(const struct conn *c)
{
    return !c->answer && !c->intercept && !c->inner && c->state == S_RELAY &&
        evbuffer_get_length(bufferevent_get_output(c->client)) == 0;
}

/*
 * What P holds into TO until it is empty (true), or until TO is full (false,
 * its write event armed) or gone (false, the connection ended).
 */
static bool drain(struct conn *c, struct pump *p, struct bufferevent *to)
{
    while (p->held) {
        ssize_t n = splice(p->r, NULL, bufferevent_getfd(to), NULL, p->held,
                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            struct timeval idle = ms_timeval(c->gw->cfg->idle_timeout_ms);
            event_add(p->wev, &idle);
            return false;
        }
        if (n <= 0) {
            relay_end(c, NULL); /* the other end is gone */
            return false;
        }
        p->held -= (size_t)n;
    }
    event_del(p->wev);
    return true;
}

/* What the down pipe holds goes to the client; once it is empty, the upstream is read again. */
static void drain_down(struct conn *c)
{
    struct pump *p = &c->down;
    if (!drain(c, p, c->client))
        return;
    if (p->cut) {
        /* The budget ran out in this pass: its allowed part is out, the rest dropped. */
        snprintf(c->rule, sizeof c->rule, "budget:bytes");
        snprintf(c->reason, sizeof c->reason, "byte budget exhausted");
        relay_upstream_done(c);
        return;
    }
    if (c->upstream_rev)
        event_add(c->upstream_rev, NULL);
}

bool bulk_down(struct conn *c)
{
    struct pump *p = &c->down;
    if (p->held) {
        /* Woken by the copying path's write callback: the pipe goes first. */
        event_del(c->upstream_rev);
        return true;
    }
    if (!down_ok(c) || !pump_open(c, p, bufferevent_getfd(c->client), on_down_writable))
        return false;
    size_t cap = pass_cap(c, UINT64_MAX);
    ssize_t n = splice(bufferevent_getfd(c->upstream), NULL, p->w, NULL, cap,
                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    if (n < 0 && unspliceable(p))
        return false;
    if (n <= 0) {
        /*
         * The server is done (or failed), and the pipe is empty: the end of
         * a close-delimited answer, as on the copying path.
         */
        relay_upstream_done(c);
        return true;
    }
    conn_arm_timer(c, c->gw->cfg->idle_timeout_ms);
    uint64_t left = budget_left(c);
    size_t pass = (size_t)n;
    if ((uint64_t)pass > left) {
        pass = (size_t)left;
        p->cut = true;
    }
    c->gw->budget.bytes += pass;
    c->down_bytes += pass;
    p->held = pass;
    event_del(c->upstream_rev); /* read again once the pipe is empty */
    drain_down(c);
    return true;
}

/* ---- request bytes: client to upstream ---- */

/*
 * May the client's next bytes be spliced, and how many? An opaque tunnel's
 * all; a plain request's body only while its declared length runs and no
 * placeholder of a secret not bound here must be looked for; nothing the
 * copying path still holds (unparsed input, an upstream queue) may be
 * overtaken. 0: copy.
 */
static uint64_t up_room(const struct conn *c)
{
    if (c->intercept || c->inner || c->state != S_RELAY || c->client_eof ||
        evbuffer_get_length(c->client_in) ||
        evbuffer_get_length(bufferevent_get_output(c->upstream)))
        return 0;
    if (c->target.is_connect)
        return UINT64_MAX;
    if (c->body != BODY_LENGTH || c->body_done || c->foreign)
        return 0;
    return c->body_left;
}

static void drain_up(struct conn *c)
{
    struct pump *p = &c->up;
    if (!drain(c, p, c->upstream))
        return;
    if (c->client_rev)
        event_add(c->client_rev, NULL);
}

bool bulk_up(struct conn *c)
{
    struct pump *p = &c->up;
    if (p->held) {
        event_del(c->client_rev);
        return true;
    }
    uint64_t room = up_room(c);
    if (!room || !pump_open(c, p, bufferevent_getfd(c->upstream), on_up_writable))
        return false;
    size_t cap = pass_cap(c, room);
    ssize_t n = splice(bufferevent_getfd(c->client), NULL, p->w, NULL, cap,
                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    if (n < 0)
        (void)unspliceable(p);
    if (n <= 0)
        return false; /* the client's end (the pipe is empty): the copying path's to handle */
    conn_arm_timer(c, c->gw->cfg->idle_timeout_ms);
    if ((uint64_t)n > budget_left(c)) {
        /* As on the copying path: a request past the budget goes nowhere. */
        snprintf(c->rule, sizeof c->rule, "budget:bytes");
        relay_end(c, "byte budget exhausted");
        return true;
    }
    c->gw->budget.bytes += (uint64_t)n;
    c->up_bytes += (uint64_t)n;
    if (!c->target.is_connect) {
        c->body_left -= (uint64_t)n;
        c->body_done = c->body_left == 0;
    }
    p->held = (size_t)n;
    event_del(c->client_rev); /* read again once the pipe is empty */
    drain_up(c);
    return true;
}

/* ---- the pipes ---- */

/* A destination that takes no bytes for the idle time has stopped reading. */
static void on_down_writable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    if (what & EV_TIMEOUT)
        relay_end(arg, "idle timeout");
    else
        drain_down(arg);
}

static void on_up_writable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    if (what & EV_TIMEOUT)
        relay_end(arg, "idle timeout");
    else
        drain_up(arg);
}

/* P's pipe to TO, made on its first use; false when it cannot be (the copying path serves). */
static bool pump_open(struct conn *c, struct pump *p, evutil_socket_t to,
                      event_callback_fn writable)
{
    if (p->failed)
        return false;
    if (p->made)
        return true;
    int fds[2];
    if (!c->gw->pipes_left || pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
        p->failed = true;
        return false;
    }
    /* Larger than the default 64 KiB, where the host allows it: fewer passes. */
    (void)fcntl(fds[1], F_SETPIPE_SZ, PUMP_PIPE_SIZE);
    p->wev = event_new(c->gw->base, to, EV_WRITE, writable, c);
    if (!p->wev) {
        close(fds[0]);
        close(fds[1]);
        p->failed = true;
        return false;
    }
    p->r = fds[0];
    p->w = fds[1];
    p->made = true;
    c->gw->pipes_left--;
    return true;
}
