/*
 * egress/relay.c: relaying an allowed request: its body to the server, walked
 * with the strict parser so that nothing after it (a second request) is ever
 * forwarded, and the answer back to the client, through the scrubber when the
 * run has secrets; both under the byte budget.
 */
#include "egress/gateway_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static bool over_byte_budget(struct conn *c, size_t more)
{
    struct gateway *gw = c->gw;
    gw->budget.bytes += more;
    return gw->cfg->max_bytes && gw->budget.bytes > gw->cfg->max_bytes;
}

void relay_end(struct conn *c, const char *why)
{
    if (why && !c->reason[0])
        snprintf(c->reason, sizeof c->reason, "%s", why);
    conn_free(c);
}

/*
 * Move IN to TO's output, writing straight to its socket first when nothing
 * is queued there: a deferred bufferevent write costs two epoll_ctl calls
 * and a loop turn per chunk, most of a bulk relay's time.
 */
static void pass_on(struct evbuffer *in, struct bufferevent *to)
{
    struct evbuffer *out = bufferevent_get_output(to);
    /* A TLS bufferevent must see every byte: it encrypts them. */
    if (evbuffer_get_length(out) == 0 && !bufferevent_get_underlying(to))
        evbuffer_write(in, bufferevent_getfd(to)); /* EAGAIN leaves it all in IN */
    if (evbuffer_get_length(in))
        bufferevent_write_buffer(to, in);
}

/*
 * How much of IN still belongs to the request body; the rest (a pipelined
 * second request) is never forwarded. Chunked bodies are walked chunk by
 * chunk with the strict parser, not trusted to end where the client says.
 * *EXFIL is set to the secret whose placeholder must not go here, if any.
 */
static size_t body_bytes(struct conn *c, struct evbuffer *in, bool *bad, int *exfil)
{
    size_t avail = evbuffer_get_length(in);
    if (c->body == BODY_NONE || c->body_done)
        return 0;
    if (c->body == BODY_LENGTH) {
        size_t n = avail < c->body_left ? avail : (size_t)c->body_left;
        if ((*exfil = credentials_body_exfil(c, in, 0, n)) >= 0)
            return 0;
        c->body_left -= n;
        c->body_done = c->body_left == 0;
        return n;
    }
    /* Chunked: walk a copy of the framing to find where the body ends. */
    size_t pos = 0;
    while (pos < avail && c->chunk != CHUNK_DONE) {
        if (c->chunk == CHUNK_DATA) {
            size_t n = avail - pos < c->body_left ? avail - pos : (size_t)c->body_left;
            if ((*exfil = credentials_body_exfil(c, in, pos, n)) >= 0)
                return 0;
            pos += n;
            c->body_left -= n;
            if (!c->body_left)
                c->chunk = CHUNK_DATA_END;
            continue;
        }
        size_t line_cap = avail - pos < 1024 ? avail - pos : 1024;
        char line[1024];
        struct evbuffer_ptr ptr;
        evbuffer_ptr_set(in, &ptr, pos, EVBUFFER_PTR_SET);
        size_t got = (size_t)evbuffer_copyout_from(in, &ptr, line, line_cap);
        if (c->chunk == CHUNK_SIZE) {
            uint64_t size;
            size_t line_len;
            char why[100];
            int r = http_parse_chunk_size(line, got, &size, &line_len, why, sizeof why);
            if (r < 0) {
                *bad = true;
                return 0;
            }
            if (r == 0)
                break;
            if ((*exfil = credentials_line_exfil(c, line, line_len)) >= 0)
                return 0;
            pos += line_len;
            c->body_left = size;
            c->chunk = size ? CHUNK_DATA : CHUNK_TRAILER;
        } else {
            /* DATA_END needs exactly CRLF; TRAILER lines end at an empty line. */
            char *nl = memchr(line, '\n', got);
            if (!nl && got == sizeof line) {
                *bad = true; /* a framing line no parser would wait for */
                return 0;
            }
            if (!nl)
                break;
            size_t line_len = (size_t)(nl - line) + 1;
            if (line_len < 2 || line[line_len - 2] != '\r') {
                *bad = true;
                return 0;
            }
            /* Trailer fields: no bare CR, no control bytes, no obs-fold. */
            if (c->chunk == CHUNK_TRAILER && line_len > 2) {
                if (line[0] == ' ' || line[0] == '\t') {
                    *bad = true;
                    return 0;
                }
                for (size_t k = 0; k + 2 < line_len; k++)
                    if (((unsigned char)line[k] < 0x20 && line[k] != '\t') || line[k] == 0x7f) {
                        *bad = true;
                        return 0;
                    }
            }
            if ((*exfil = credentials_line_exfil(c, line, line_len)) >= 0)
                return 0;
            pos += line_len;
            if (c->chunk == CHUNK_DATA_END) {
                if (line_len != 2) {
                    *bad = true;
                    return 0;
                }
                c->chunk = CHUNK_SIZE;
            } else if (line_len == 2) {
                c->chunk = CHUNK_DONE;
            }
        }
    }
    c->body_done = c->chunk == CHUNK_DONE;
    return pos;
}

void relay_client_data(struct conn *c, struct evbuffer *in)
{
    size_t n = evbuffer_get_length(in);
    bool framed = !c->target.is_connect || c->inner; /* a request, not an opaque tunnel */
    if (framed) {
        bool bad = false;
        int exfil = -1;
        n = body_bytes(c, in, &bad, &exfil);
        if (exfil >= 0) {
            credentials_refuse_exfil(c, (size_t)exfil);
            return;
        }
        if (bad) {
            relay_end(c, "malformed chunked body");
            return;
        }
    }
    if (n) {
        c->up_bytes += n;
        if (over_byte_budget(c, n)) {
            snprintf(c->rule, sizeof c->rule, "budget:bytes");
            relay_end(c, "byte budget exhausted");
            return;
        }
        if (n == evbuffer_get_length(in)) {
            pass_on(in, c->upstream);
        } else {
            struct evbuffer *part = evbuffer_new();
            if (!part) {
                relay_end(c, "out of memory");
                return;
            }
            evbuffer_remove_buffer(in, part, n);
            pass_on(part, c->upstream);
            evbuffer_free(part);
        }
    }
    if (framed && c->body_done) {
        /* Anything after the body is a second request: never forwarded. */
        evbuffer_drain(in, evbuffer_get_length(in));
    }
    if (evbuffer_get_length(bufferevent_get_output(c->upstream)) > RELAY_HIGH_WATER) {
        if (c->client_rev)
            event_del(c->client_rev);
        else
            bufferevent_disable(c->client, EV_READ);
    }
}

static void upstream_closed(struct conn *c);

/* Output drained below half the high-water mark: read the other side again. */
static void client_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    (void)bev;
    if (c->upstream_rev)
        event_add(c->upstream_rev, NULL);
}

static void upstream_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    /* The client half-closed: pass that on once its last bytes are out. */
    if (c->client_eof) {
        if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
            shutdown(bufferevent_getfd(bev), SHUT_WR);
        return;
    }
    event_add(c->client_rev, NULL);
}

/* The client stopped sending. After a complete request that is a half-close
 * (the answer still comes back); mid-request it ends the relay. */
static void client_closed(struct conn *c)
{
    if ((!c->target.is_connect || c->inner) && !c->body_done) {
        relay_end(c, NULL);
        return;
    }
    c->client_eof = true;
    event_del(c->client_rev);
    bufferevent_setwatermark(c->upstream, EV_WRITE, 0, 0);
    if (evbuffer_get_length(bufferevent_get_output(c->upstream)) == 0)
        shutdown(bufferevent_getfd(c->upstream), SHUT_WR);
}

void relay_upstream_done(struct conn *c)
{
    upstream_closed(c);
}

/* The server is done (or we are with it): flush what reached us, then close. */
static void finish_answer(struct conn *c)
{
    if (c->inner)
        tls_upstream_done(c, BEV_EVENT_EOF);
    else
        upstream_closed(c);
}

/*
 * Answer bytes to the client, as they are: straight to its socket, queueing
 * only what it would not take now (through TLS, all to the bufferevent,
 * which encrypts them); cut where the byte budget runs out. False when C is
 * gone.
 */
static bool answer_data(struct conn *c, const char *buf, size_t n)
{
    uint64_t max = c->gw->cfg->max_bytes;
    bool cut = false;
    if (max && c->gw->budget.bytes + n > max) {
        n = c->gw->budget.bytes >= max ? 0 : (size_t)(max - c->gw->budget.bytes);
        cut = true;
    }
    c->gw->budget.bytes += n;
    c->down_bytes += n;
    struct evbuffer *out = bufferevent_get_output(c->client);
    if (cut) {
        evbuffer_add(out, buf, n);
        snprintf(c->rule, sizeof c->rule, "budget:bytes");
        snprintf(c->reason, sizeof c->reason, "byte budget exhausted");
        finish_answer(c);
        return false;
    }
    if (c->inner) {
        bufferevent_write(c->client, buf, n);
        if (evbuffer_get_length(out) > RELAY_HIGH_WATER)
            bufferevent_disable(c->upstream, EV_READ);
        return true;
    }
    ssize_t sent = 0;
    if (evbuffer_get_length(out) == 0)
        sent = write(bufferevent_getfd(c->client), buf, n);
    if (sent < 0)
        sent = 0; /* EAGAIN, or an error the bufferevent will report */
    if ((size_t)sent < n)
        evbuffer_add(out, buf + sent, n - (size_t)sent);
    if (evbuffer_get_length(out) > RELAY_HIGH_WATER)
        event_del(c->upstream_rev);
    return true;
}

/* Our own read events go before the upstream's socket does (conn_refuse() frees it). */
void relay_stop_reading(struct conn *c)
{
    bulk_release(c);
    if (c->upstream_rev)
        event_free(c->upstream_rev);
    if (c->client_rev)
        event_free(c->client_rev);
    c->upstream_rev = c->client_rev = NULL;
}

/* The answer cannot be relayed (WHY): a 502 if the client has had nothing
 * of it yet, else the connection is cut (a chunked answer without its end). */
static void answer_refused(struct conn *c, const char *why)
{
    if (!c->answer->head_sent && c->down_bytes == 0) {
        relay_stop_reading(c);
        bool encoded = strncmp(why, "compressed", 10) == 0;
        conn_refuse(c, 502, encoded ? "unscannable_answer" : "bad_answer", "answer from %s: %s",
                    c->target.host_text, why);
        return;
    }
    snprintf(c->rule, sizeof c->rule, "bad_answer");
    relay_end(c, why);
}

/*
 * Bytes from the server. With secrets, every answer the gateway can read
 * goes through the scrubber: a server that reflects what it was sent (an
 * echo endpoint, a verbose error, TRACE) must not hand the value to the
 * sandbox. False when C is gone.
 */
bool relay_answer_bytes(struct conn *c, const char *buf, size_t n)
{
    if (!c->answer)
        return answer_data(c, buf, n);
    struct scrub_buf out = { 0 };
    char why[200];
    int r = scrub_answer_feed(c->answer, buf, n, &out, why, sizeof why);
    c->scrubbed |= c->answer->body.hits;
    if (r < 0) {
        scrub_buf_free(&out);
        answer_refused(c, why);
        return false;
    }
    bool alive = answer_data(c, out.data, out.len);
    scrub_buf_free(&out);
    if (alive && r == 1) {
        /* Complete: whatever follows (a second answer) is not relayed. */
        finish_answer(c);
        return false;
    }
    return alive;
}

/* The server closed: the end of a close-delimited answer, or of one cut
 * short (its held-back bytes are dropped). False when C is gone. */
bool relay_answer_eof(struct conn *c)
{
    if (!c->answer)
        return true;
    struct scrub_buf out = { 0 };
    char why[200];
    int r = scrub_answer_end(c->answer, &out, why, sizeof why);
    c->scrubbed |= c->answer->body.hits;
    if (r < 0) {
        scrub_buf_free(&out);
        if (!c->answer->head_sent && c->down_bytes == 0) {
            answer_refused(c, why);
            return false;
        }
        if (!c->reason[0])
            snprintf(c->reason, sizeof c->reason, "%s", why);
        return true;
    }
    bool alive = answer_data(c, out.data, out.len);
    scrub_buf_free(&out);
    return alive;
}

/*
 * A relay read, done here rather than by the bufferevent: libevent 2.1
 * reads at most 4 KiB a turn, which caps a download near 600 MB/s; one
 * large read drains what the kernel holds. Writes stay with the
 * bufferevents (their buffering is the backpressure). Any read is activity:
 * the idle timer restarts, so a long transfer in one direction lives on.
 */
static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    static char buf[RELAY_CHUNK];
    struct conn *c = arg;
    (void)what;
    bool from_upstream = c->upstream && fd == bufferevent_getfd(c->upstream);
    if (from_upstream ? bulk_down(c) : bulk_up(c))
        return;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        if (!from_upstream)
            client_closed(c);
        else if (relay_answer_eof(c))
            upstream_closed(c);
        return;
    }
    conn_arm_timer(c, c->gw->cfg->idle_timeout_ms);
    if (from_upstream) {
        relay_answer_bytes(c, buf, (size_t)n);
        return;
    }
    evbuffer_add(c->client_in, buf, (size_t)n);
    relay_client_data(c, c->client_in);
}

/* Writing failed or timed out (a peer that stopped reading). */
static void relay_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    if (what & BEV_EVENT_TIMEOUT) {
        relay_end(c, "idle timeout");
        return;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        if (bev != c->upstream)
            relay_end(c, NULL);
        else if (relay_answer_eof(c))
            upstream_closed(c);
    }
}

/* The server finished (or failed): flush what it said, then close. */
static void upstream_closed(struct conn *c)
{
    bulk_release(c);
    event_free(c->upstream_rev);
    c->upstream_rev = NULL;
    event_free(c->client_rev);
    c->client_rev = NULL;
    bufferevent_free(c->upstream);
    c->upstream = NULL;
    c->state = S_CLOSING;
    bufferevent_disable(c->client, EV_READ);
    if (evbuffer_get_length(bufferevent_get_output(c->client)) == 0) {
        conn_free(c);
        return;
    }
    /* Called back only once all of it is out, not at the relay's watermark;
     * a client that stops reading is dropped after the idle time. */
    bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
    bufferevent_setcb(c->client, NULL, conn_close_when_flushed, conn_closing_event, c);
    conn_arm_timer(c, c->gw->cfg->idle_timeout_ms);
}

void relay_take_request(struct conn *c, const struct http_request *req)
{
    static const char *const overrides[] = { "x-http-method-override", "x-http-method",
                                             "x-method-override" };
    snprintf(c->target.method, sizeof c->target.method, "%s", req->method);
    c->target.method_override = false;
    for (size_t i = 0; i < sizeof overrides / sizeof *overrides; i++)
        c->target.method_override |= http_find_header(req, overrides[i]) != NULL;
    c->body = req->chunked ? BODY_CHUNKED : req->content_length > 0 ? BODY_LENGTH : BODY_NONE;
    c->body_left = req->content_length > 0 ? (uint64_t)req->content_length : 0;
    c->body_done = c->body == BODY_NONE;
    c->chunk = CHUNK_SIZE;
}

/* The upstream head: origin-form, hop-by-hop headers dropped, Host set to the target. */
void relay_send_head(struct conn *c, const struct http_request *req)
{
    static const char *const hop[] = { "connection",
                                       "proxy-connection",
                                       "keep-alive",
                                       "proxy-authorization",
                                       "proxy-authenticate",
                                       "te",
                                       "trailer",
                                       "upgrade",
                                       "host" };
    /*
     * To a host a secret is bound to: a body we can scan (identity), and the
     * whole of it (a range could hand out a value piece by piece, each
     * piece too short to be recognised).
     */
    static const char *const unscannable[] = { "accept-encoding", "range", "if-range" };
    bool bound = credentials_bound_here(c);
    credentials_prepare_basic(c, req);
    credentials_scrub_answer(c, req, bound);
    struct evbuffer *out = bufferevent_get_output(c->upstream);
    evbuffer_add_printf(out, "%s %s HTTP/1.1\r\n", c->method, c->target.path);
    bool default_port = c->target.port == (c->inner ? 443 : 80);
    char host[300];
    host_format(&c->target.host, host, sizeof host);
    evbuffer_add_printf(out, default_port ? "Host: %s\r\n" : "Host: %s:%u\r\n", host,
                        c->target.port);
    for (size_t i = 0; i < req->n_headers; i++) {
        const struct http_header *h = &req->headers[i];
        bool skip = false;
        for (size_t k = 0; k < sizeof hop / sizeof hop[0]; k++)
            if (http_header_is(h, hop[k]))
                skip = true;
        for (size_t k = 0; bound && k < sizeof unscannable / sizeof unscannable[0]; k++)
            if (http_header_is(h, unscannable[k]))
                skip = true;
        if (skip)
            continue;
        evbuffer_add(out, h->name, h->name_len);
        evbuffer_add(out, ": ", 2);
        if (c->basic_real && http_header_is(h, "authorization"))
            evbuffer_add_printf(out, "Basic %s", c->basic_real);
        else
            credentials_add_value(c, out, h->value, h->value_len);
        evbuffer_add(out, "\r\n", 2);
    }
    if (bound)
        evbuffer_add_printf(out, "Accept-Encoding: identity\r\n");
    evbuffer_add_printf(out, "Connection: close\r\n\r\n");
}

void relay_start(struct conn *c)
{
    c->state = S_RELAY;
    c->allowed = true;
    c->status = 200;
    if (!c->target.is_connect) {
        /* The forwarded head counts against the byte budget too. */
        size_t head = conn_request(c)->head_len;
        c->up_bytes += head;
        c->gw->budget.bytes += head;
    }
    struct timeval idle = ms_timeval(c->gw->cfg->idle_timeout_ms);
    bufferevent_setcb(c->upstream, NULL, upstream_write, relay_event, c);
    bufferevent_setcb(c->client, NULL, client_write, relay_event, c);
    /* Writing resumes reading the other side once this output has drained
     * below half the high-water mark. A write that makes no progress for
     * the idle time means a peer that stopped reading. */
    bufferevent_set_max_single_write(c->upstream, RELAY_CHUNK);
    bufferevent_set_max_single_write(c->client, RELAY_CHUNK);
    bufferevent_setwatermark(c->upstream, EV_WRITE, RELAY_HIGH_WATER / 2, 0);
    bufferevent_setwatermark(c->client, EV_WRITE, RELAY_HIGH_WATER / 2, 0);
    bufferevent_set_timeouts(c->upstream, NULL, &idle);
    bufferevent_set_timeouts(c->client, NULL, &idle);
    bufferevent_disable(c->upstream, EV_READ);
    bufferevent_disable(c->client, EV_READ);
    bufferevent_enable(c->upstream, EV_WRITE);
    bufferevent_enable(c->client, EV_WRITE);
    c->upstream_rev = event_new(c->gw->base, bufferevent_getfd(c->upstream), EV_READ | EV_PERSIST,
                                on_readable, c);
    c->client_rev =
        event_new(c->gw->base, bufferevent_getfd(c->client), EV_READ | EV_PERSIST, on_readable, c);
    c->client_in = evbuffer_new();
    if (!c->upstream_rev || !c->client_rev || !c->client_in) {
        relay_end(c, "out of memory");
        return;
    }
    event_add(c->upstream_rev, NULL);
    event_add(c->client_rev, NULL);
    conn_arm_timer(c, c->gw->cfg->idle_timeout_ms);
    /* Bytes that came with the head (a TLS hello, a body) go out now. */
    evbuffer_add_buffer(c->client_in, bufferevent_get_input(c->client));
    if (evbuffer_get_length(c->client_in))
        relay_client_data(c, c->client_in);
}
