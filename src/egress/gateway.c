/*
 * egress/gateway.c: the egress gateway process (libevent). Runs outside the
 * sandbox, in the host's network namespace, forked by the supervisor; its
 * listening socket was made inside the sandbox's namespace. This file holds
 * the process and its connections: accepting, reading a request head,
 * refusing, resolving and connecting; the other steps are in the files
 * gateway_int.h lists, with the connection's state table.
 *
 * One request per client connection: requests are checked one by one, and
 * "Connection: close" on both sides means no second request can ride an
 * approved connection unchecked.
 */
#include "egress/gateway.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/landlock.h"
#include "common/relay_wire.h"
#include "common/syscalls.h"
#include "egress/gateway_int.h"
#include "egress/mint.h"
#include "policy/policy.h"

#include <errno.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <fcntl.h>
#include <grp.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t gateway_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void report(struct conn *c)
{
    if (c->reported)
        return;
    c->reported = true;
    struct gateway *gw = c->gw;
    char addr[64] = "";
    if (c->allowed && c->next_addr > 0)
        ip_addr_format(&c->addrs[c->next_addr - 1], addr, sizeof addr);
    /* clang-format off */
    json_t *d = json_pack("{s:b, s:s, s:s, s:i, s:o, s:s, s:s, s:i, s:I, s:I, s:f}",
                          "allowed", c->allowed,
                          "method", c->method,
                          "host", c->target.host_text,
                          "port", (int)c->target.port,
                          "address", addr[0] ? json_string(addr) : json_null(),
                          "rule", c->rule,
                          "reason", c->reason,
                          "status", c->status,
                          "bytes_up", (json_int_t)c->up_bytes,
                          "bytes_down", (json_int_t)c->down_bytes,
                          "duration_ms", (double)(gateway_now_us() - c->started_us) / 1000.0);
    /* clang-format on */
    if (!d)
        return;
    if (c->intercept)
        json_object_set_new(d, "intercepted", json_true());
    if (c->transparent)
        json_object_set_new(d, "transparent", json_true());
    /* Names only: the values never leave the gateway. */
    if (c->secrets_used)
        json_object_set_new(d, "secrets", credentials_names(gw->cfg, c->secrets_used));
    /* Which values the answer carried and lost. */
    if (c->scrubbed)
        json_object_set_new(d, "scrubbed", credentials_names(gw->cfg, credentials_scrubbed(c)));
    gateway_report(gw, d);
}

void gateway_report(struct gateway *gw, json_t *ev)
{
    if (ev && gw->report_fd >= 0) {
        char *line = json_dumps(ev, JSON_COMPACT);
        if (line) {
            size_t len = strlen(line);
            line[len] = '\n';
            (void)!write(gw->report_fd, line, len + 1); /* one line, under PIPE_BUF */
            free(line);
        }
    }
    json_decref(ev);
}

/* The connections past their head the run may hold at once. */
static uint64_t connection_cap(const struct gateway *gw)
{
    return gw->cfg->max_connections ? gw->cfg->max_connections : GATEWAY_MAX_CONNECTIONS;
}

/* C no longer counts against the head budget (its head is in, or it is closing). */
static void head_leave(struct conn *c)
{
    if (c->in_head) {
        c->in_head = false;
        c->gw->heads--;
    }
}

void conn_free(struct conn *c)
{
    report(c);
    head_leave(c);
    if (c->held)
        c->gw->held--;
    if (c->dns_stream)
        c->gw->dns_streams--;
    ask_stop(c);
    if (c->dns_req)
        evdns_getaddrinfo_cancel(c->dns_req);
    if (c->client_rev)
        event_free(c->client_rev);
    if (c->upstream_rev)
        event_free(c->upstream_rev);
    if (c->timer)
        event_free(c->timer);
    if (c->flush_ev)
        event_free(c->flush_ev);
    bulk_release(c);
    if (c->client_in)
        evbuffer_free(c->client_in);
    if (c->answer) {
        scrub_answer_release(c->answer);
        free(c->answer);
    }
    free(c->pairs);
    if (c->basic_real)
        explicit_bzero(c->basic_real, strlen(c->basic_real));
    free(c->basic_real);
    free(c->basic_client);
    if (c->client)
        bufferevent_free(c->client);
    if (c->upstream)
        bufferevent_free(c->upstream);
    struct gateway *gw = c->gw;
    gw->active--;
    *c->pprev = c->next;
    if (c->next)
        c->next->pprev = c->pprev;
    free(c);
    if (gw->serve_one)
        event_base_loopexit(gw->base, NULL);
}

/* How long, and how much, a refused client may still send before we close. */
#define LINGER_MS 2000
#define LINGER_BYTES (4u << 20)
/* Refused connections lingering at once, about: past it the next closes at once. */
#define LINGER_MAX 64

struct timeval ms_timeval(unsigned ms)
{
    return (struct timeval){ ms / 1000, (ms % 1000) * 1000 };
}

/* (Re)arm the connection's one timer: a deadline, or idle time when re-armed on activity. */
void conn_arm_timer(struct conn *c, unsigned ms)
{
    struct timeval tv = ms_timeval(ms);
    event_add(c->timer, &tv);
}

/* The client went away, or lingered too long. */
void conn_closing_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
        conn_free(arg);
}

static void discard_input(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t n = evbuffer_get_length(in);
    c->lingered += n;
    if (!c->allowed)
        c->up_bytes += n; /* a refusal's record: what came after it */
    evbuffer_drain(in, n);
    if (c->lingered > LINGER_BYTES)
        conn_free(c);
}

/* A flood of refused connections must not hold our descriptors: beyond what
 * the cap and the head budget hold, few stay. */
static bool linger_room(const struct gateway *gw)
{
    return gw->active <= connection_cap(gw) + HEAD_BUDGET + LINGER_MAX;
}

/*
 * Our answer is out. Closing now, with the client's unread bytes still in
 * the kernel (the rest of an oversized head), would reset the connection
 * before the client reads the answer; so stop writing, swallow what still
 * comes for a little while, then close.
 */
static void flush_check(evutil_socket_t fd, short what, void *arg);

void conn_close_when_flushed(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    if (evbuffer_get_length(bufferevent_get_output(bev)))
        return; /* not all out yet */
    /* Through TLS, the records may still sit in the socket's bufferevent:
     * look again shortly rather than cut them off. */
    struct bufferevent *under = bufferevent_get_underlying(bev);
    if (under && evbuffer_get_length(bufferevent_get_output(under))) {
        if (!c->flush_ev)
            c->flush_ev = evtimer_new(c->gw->base, flush_check, c);
        struct timeval soon = ms_timeval(20);
        if (!c->flush_ev || evtimer_add(c->flush_ev, &soon) < 0)
            conn_free(c);
        return;
    }
    int fd = bufferevent_getfd(under ? under : bev);
    if (c->state != S_CLOSING || !linger_room(c->gw) || shutdown(fd, SHUT_WR) < 0) {
        conn_free(c);
        return;
    }
    /*
     * An allowed connection's record keeps what it relayed; the bytes
     * swallowed here were never forwarded and count only for the linger.
     */
    c->lingered = 0;
    if (!c->allowed)
        c->up_bytes = 0;
    /* An absolute deadline: a trickle of bytes must not keep us here. */
    conn_arm_timer(c, LINGER_MS);
    bufferevent_set_timeouts(bev, NULL, NULL);
    bufferevent_setcb(bev, discard_input, NULL, conn_closing_event, c);
    bufferevent_enable(bev, EV_READ);
    bufferevent_disable(bev, EV_WRITE);
}

static void flush_check(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)fd;
    (void)what;
    conn_close_when_flushed(c->client, c);
}

/* Answer STATUS and close: every refusal ends here. */
void conn_refuse(struct conn *c, int status, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void conn_refuse(struct conn *c, int status, const char *rule, const char *fmt, ...)
{
    static const struct {
        int status;
        const char *text;
    } texts[] = {
        { 400, "Bad Request" },       { 403, "Forbidden" },
        { 408, "Request Timeout" },   { 414, "URI Too Long" },
        { 429, "Too Many Requests" }, { 431, "Request Header Fields Too Large" },
        { 501, "Not Implemented" },   { 502, "Bad Gateway" },
        { 504, "Gateway Timeout" },   { 505, "HTTP Version Not Supported" },
    };
    const char *text = "Error";
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        if (texts[i].status == status)
            text = texts[i].text;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, ap);
    va_end(ap);
    if (rule != c->rule) /* callers may pass the rule already set */
        snprintf(c->rule, sizeof c->rule, "%s", rule);
    c->status = status;
    c->allowed = false;
    c->state = S_CLOSING;
    head_leave(c);
    if (c->upstream) {
        bufferevent_free(c->upstream);
        c->upstream = NULL;
    }
    report(c);
    if (c->raw_tls) {
        /* The client speaks TLS to a server it thinks it reached: an HTTP
         * answer would only be noise to it. Close. */
        conn_free(c);
        return;
    }
    struct evbuffer *out = bufferevent_get_output(c->client);
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nX-Cordon-Denied: %s\r\n"
                        "Connection: close\r\nContent-Length: %zu\r\n\r\n%s\n",
                        status, text, rule, strlen(c->reason) + 1, c->reason);
    bufferevent_disable(c->client, EV_READ);
    bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
    bufferevent_setcb(c->client, NULL, conn_close_when_flushed, conn_closing_event, c);
    bufferevent_enable(c->client, EV_WRITE);
    conn_arm_timer(c, LINGER_MS + c->gw->cfg->idle_timeout_ms); /* flush, then linger */
    /* A TLS bufferevent may have taken the answer already (encrypting is
     * synchronous): no write callback would come, so look from the loop. */
    if (evbuffer_get_length(out) == 0) {
        if (!c->flush_ev)
            c->flush_ev = evtimer_new(c->gw->base, flush_check, c);
        struct timeval now = { 0, 0 };
        if (c->flush_ev)
            evtimer_add(c->flush_ev, &now);
    }
}

static void try_connect(struct conn *c);

void conn_connect(struct conn *c)
{
    try_connect(c);
}

static void connect_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    (void)bev;
    if (what & BEV_EVENT_CONNECTED) {
        if (c->intercept) {
            tls_intercept_start(c);
            return;
        }
        if (c->target.is_connect) {
            /* A transparent client sent its ClientHello already: no proxy answer. */
            if (!c->transparent)
                evbuffer_add_printf(bufferevent_get_output(c->client),
                                    "HTTP/1.1 200 Connection established\r\n\r\n");
        } else
            relay_send_head(c, conn_request(c));
        relay_start(c);
        return;
    }
    /* Refused or timed out: the next checked address, or 502/504. */
    bufferevent_free(c->upstream);
    c->upstream = NULL;
    if (c->next_addr < c->n_addrs) {
        try_connect(c);
        return;
    }
    if (what & BEV_EVENT_TIMEOUT)
        conn_refuse(c, 504, "upstream_timeout", "connecting to %s:%u timed out",
                    c->target.host_text, c->target.port);
    else
        conn_refuse(c, 502, "upstream_error", "cannot connect to %s:%u: %s", c->target.host_text,
                    c->target.port, evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
}

/* Connect to the next address that was checked: never a fresh lookup. */
static void try_connect(struct conn *c)
{
    struct sockaddr_storage ss;
    socklen_t len;
    ip_addr_to_sockaddr(&c->addrs[c->next_addr++], c->target.port, &ss, &len);
    c->state = S_CONNECTING;
    /* The bufferevent's own timeout comes first. */
    conn_arm_timer(c, c->gw->cfg->connect_timeout_ms + 1000);
    c->upstream = bufferevent_socket_new(c->gw->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!c->upstream) {
        conn_refuse(c, 502, "upstream_error", "out of memory");
        return;
    }
    struct timeval t = { c->gw->cfg->connect_timeout_ms / 1000,
                         (c->gw->cfg->connect_timeout_ms % 1000) * 1000 };
    bufferevent_set_timeouts(c->upstream, &t, &t);
    bufferevent_setcb(c->upstream, NULL, NULL, connect_event, c);
    if (bufferevent_socket_connect(c->upstream, (struct sockaddr *)&ss, (int)len) < 0) {
        bufferevent_free(c->upstream);
        c->upstream = NULL;
        if (c->next_addr < c->n_addrs)
            try_connect(c);
        else
            conn_refuse(c, 502, "upstream_error", "cannot connect to %s:%u", c->target.host_text,
                        c->target.port);
    }
}

/* Every address the name has must pass (decide_addresses()). */
static void proceed(struct conn *c)
{
    struct decision d;
    if (decide_addresses(c->gw->cfg, &c->target, c->addrs, c->n_addrs, &d) < 0) {
        conn_refuse(c, d.status, d.rule, "%s", d.reason);
        return;
    }
    if (!c->rule[0])
        snprintf(c->rule, sizeof c->rule, "%s", d.rule);
    if (c->ask)
        ask_start(c); /* only now: a refused address class is never asked */
    else
        try_connect(c);
}

static void dns_done(int result, struct evutil_addrinfo *res, void *arg)
{
    if (result == EVUTIL_EAI_CANCEL)
        return; /* the connection is gone: do not touch it */
    struct conn *c = arg;
    c->dns_req = NULL;
    if (result != 0) {
        conn_refuse(c, 502, "dns", "cannot resolve %s: %s", c->target.host_text,
                    evutil_gai_strerror(result));
        return;
    }
    for (struct evutil_addrinfo *ai = res; ai && c->n_addrs < MAX_ADDRS; ai = ai->ai_next)
        if (ip_addr_from_sockaddr(ai->ai_addr, &c->addrs[c->n_addrs]) == 0)
            c->n_addrs++;
    evutil_freeaddrinfo(res);
    if (!c->n_addrs) {
        conn_refuse(c, 502, "dns", "%s has no address", c->target.host_text);
        return;
    }
    proceed(c);
}

static void resolve(struct conn *c)
{
    const struct gateway_config *cfg = c->gw->cfg;
    if (c->target.host.is_ip) {
        c->addrs[c->n_addrs++] = c->target.host.ip;
        proceed(c);
        return;
    }
    c->n_addrs = decide_pins(cfg, c->target.host.name, c->addrs, MAX_ADDRS);
    if (c->n_addrs) {
        proceed(c);
        return;
    }
    if (!c->gw->dns) {
        conn_refuse(c, 502, "dns", "cannot resolve %s: no resolver configured",
                    c->target.host_text);
        return;
    }
    if (!transparent_name_counted(c->gw, c->target.host.name)) {
        conn_refuse(c, 429, "budget:dns_names", "more than %d distinct names resolved in this run",
                    SYNTH_MAX_NAMES);
        return;
    }
    struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    c->state = S_RESOLVING;
    conn_arm_timer(c, c->gw->cfg->connect_timeout_ms);
    c->dns_req = evdns_getaddrinfo(c->gw->dns, c->target.host.name, NULL, &hints, dns_done, c);
}

/* The parsed head is kept with the connection until the upstream head is sent. */
struct conn_head {
    struct conn conn;
    char buf[HTTP_MAX_HEAD + 1];
    struct http_request req;
};

struct http_request *conn_request(struct conn *c)
{
    return &((struct conn_head *)c)->req;
}

/* A request on a fresh connection: where it goes, and whether it may. */
static void decide(struct conn *c, struct http_request *req)
{
    snprintf(c->method, sizeof c->method, "%s", req->method);
    if (c->transparent) {
        transparent_http(c, req);
        return;
    }
    struct decision d;
    if (decide_target(req, &c->target, &d) < 0) {
        conn_refuse(c, d.status, d.rule, "%s", d.reason);
        return;
    }
    conn_decide(c, req);
}

bool conn_head_done(struct conn *c, bool hold)
{
    struct gateway *gw = c->gw;
    head_leave(c);
    if (!hold || c->held)
        return true;
    uint64_t cap = connection_cap(gw);
    if (gw->held >= cap) {
        conn_refuse(c, 429, "budget:connections", "more than %llu connections at once",
                    (unsigned long long)cap);
        return false;
    }
    gw->held++;
    c->held = true;
    return true;
}

void conn_decide(struct conn *c, struct http_request *req)
{
    struct gateway *gw = c->gw;
    const struct gateway_config *cfg = gw->cfg;
    struct decision d;
    /* Every head ends here once its target is known: from now on the
     * connection counts against the run's cap. */
    if (!conn_head_done(c, true))
        return;
    if (req && !c->target.is_connect)
        relay_take_request(c, req);
    if (decide_request(cfg, &gw->budget, &c->target, gateway_now_us(), &d) < 0) {
        conn_refuse(c, d.status, d.rule, "%s", d.reason);
        return;
    }
    c->ask = d.ask;
    c->inspect = d.inspect;
    snprintf(c->rule, sizeof c->rule, "%s", d.rule);
    if (req && !credentials_check(c, req))
        return;
    /* A tunnel to a host a secret is bound to ends here, so the requests
     * inside can have their placeholders swapped; so does one only request
     * rules allow, so each request inside can be held to them. */
    c->intercept = c->target.is_connect && cfg->mint && (c->inspect || credentials_bound_here(c));
    if (c->inspect && !c->intercept) {
        conn_refuse(c, 502, "internal", "no run CA to inspect %s with", c->target.host_text);
        return;
    }
    if (c->intercept)
        c->raw_tls = false;
    resolve(c);
}

bool conn_host_names_target(const struct conn *c, const struct http_request *req)
{
    const struct http_header *h = http_find_header(req, "host");
    struct authority a;
    char why[200];
    char named[300] = "";
    if (!h || authority_parse(h->value, h->value_len, &a, why, sizeof why) < 0 ||
        (a.port && a.port != c->target.port))
        return false;
    /* localhost names a loopback address the client connected to itself. */
    if (!a.host.is_ip && host_is_localhost(a.host.name) && c->target.host.is_ip)
        return addr_classify(&c->target.host.ip) == ADDR_LOOPBACK;
    if (a.host.is_ip != c->target.host.is_ip)
        return false;
    if (a.host.is_ip)
        ip_addr_format(&a.host.ip, named, sizeof named);
    else
        snprintf(named, sizeof named, "%s", a.host.name);
    return strcmp(named, c->target.host_text) == 0;
}

/*
 * The request inside an intercepted tunnel: origin-form, for the host the
 * tunnel was opened to, its placeholders checked and swapped like a plain
 * request's. One request per tunnel, as everywhere.
 */
static void decide_tunnel_request(struct conn *c, struct http_request *req)
{
    snprintf(c->method, sizeof c->method, "%s", req->method);
    if (req->kind != HTTP_TARGET_ORIGIN || req->target_len >= sizeof c->target.path) {
        conn_refuse(c, 400, "bad_request", "expected an origin-form request inside the tunnel");
        return;
    }
    if (http_find_header(req, "host") && !conn_host_names_target(c, req)) {
        conn_refuse(c, 400, "bad_request", "Host header does not name %s", c->target.host_text);
        return;
    }
    memcpy(c->target.path, req->target, req->target_len);
    c->target.path[req->target_len] = '\0';
    relay_take_request(c, req);
    struct decision d;
    if (c->inspect && decide_inner(c->gw->cfg, &c->target, &d) < 0) {
        conn_refuse(c, d.status, d.rule, "%s", d.reason);
        return;
    }
    if (c->inspect)
        snprintf(c->rule, sizeof c->rule, "%s", d.rule);
    if (!credentials_check(c, req))
        return;
    relay_send_head(c, req);
    tls_relay_start(c);
}

/* May C's next bytes be a relay's preface? Its first is a NUL, with which no HTTP request starts. */
static bool preface_may_come(const struct conn *c)
{
    return !c->inner && !c->transparent;
}

void conn_head_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct conn_head *ch = (struct conn_head *)c;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t avail = evbuffer_get_length(in);
    size_t take = avail < HTTP_MAX_HEAD + 1 ? avail : HTTP_MAX_HEAD + 1;
    size_t got = (size_t)evbuffer_copyout(in, ch->buf, take);
    if (preface_may_come(c) && got > 0 && ch->buf[0] == '\0') {
        /* No HTTP request starts with a NUL: a relay's preface, or nothing. */
        if (c->gw->relay) {
            transparent_relay_read(bev, c);
        } else {
            snprintf(c->target.host_text, sizeof c->target.host_text, "-");
            conn_refuse(c, 400, "bad_request", "not an HTTP request");
        }
        return;
    }
    int status = 0;
    char why[200];
    int r = http_parse_request(ch->buf, got, &ch->req, &status, why, sizeof why);
    if (r == 0)
        return; /* the parser answers 431 itself once the head outgrows the cap */
    if (r < 0) {
        snprintf(c->target.host_text, sizeof c->target.host_text, "-");
        conn_refuse(c, status ? status : 400, "bad_request", "%s", why);
        return;
    }
    evbuffer_drain(in, ch->req.head_len);
    bufferevent_disable(bev, EV_READ);
    if (c->inner)
        decide_tunnel_request(c, &ch->req);
    else
        decide(c, &ch->req);
}

void conn_head_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        if (c->inner) /* the CONNECT was a decision; its tunnel ended early */
            snprintf(c->reason, sizeof c->reason, "%s",
                     (what & BEV_EVENT_ERROR) ? "TLS with the client failed"
                                              : "the client sent no request in the tunnel");
        else if (c->door_pending) { /* gone at the door: still a try worth a record */
            snprintf(c->rule, sizeof c->rule, "door");
            snprintf(c->reason, sizeof c->reason, "closed before the run token");
        } else {
            c->reported = true; /* nothing was asked: not a decision */
        }
        conn_free(c);
    }
}

/*
 * The client's own first byte on C, or -1 before it came: what came so far
 * (C's input, then what still waits in the socket, unread by the loop) read
 * past the run's door token while it is pending, and past a relay's preface
 * where one opens what follows (*RELAYED then: the client came to an
 * address, not to the proxy). A connection cut at once when accepted is read
 * by neither door_read() nor transparent_relay_read() yet: the token's or the
 * preface's first byte is no sign of what the client speaks.
 */
static int head_first_byte(struct conn *c, bool *relayed)
{
    uint8_t p[GATEWAY_DOOR_TOKEN_LEN + RELAY_PREFACE_MAX + 1];
    ev_ssize_t n = evbuffer_copyout(bufferevent_get_input(c->client), p, sizeof p);
    size_t got = n > 0 ? (size_t)n : 0;
    ssize_t more = 0;
    if (got < sizeof p)
        more = recv(bufferevent_getfd(c->client), p + got, sizeof p - got, MSG_PEEK | MSG_DONTWAIT);
    got += more > 0 ? (size_t)more : 0;
    size_t at = c->door_pending ? GATEWAY_DOOR_TOKEN_LEN : 0, len = 0;
    *relayed = false;
    if (got > at && p[at] == '\0' && preface_may_come(c) && c->gw->relay) {
        *relayed = true;
        enum preface kind = transparent_preface(p + at, got - at, &len);
        if (kind != PREFACE_DNS && kind != PREFACE_TCP)
            return -1;
        at += len;
    }
    return got > at ? p[at] : -1;
}

/*
 * A head cut short where TLS is coming, or may be: a reset, since no HTTP
 * answer would mean anything to that client. That is a client that came to
 * an address (a synthetic one's, or one a relay's preface names) whose first
 * bytes are not an HTTP method, or not here yet.
 */
static void reset_unless_http(struct conn *c)
{
    bool relayed = false;
    int b = head_first_byte(c, &relayed);
    bool http = b >= 'A' && b <= 'Z';
    if (!c->raw_tls && (c->transparent || relayed) && !http) {
        struct linger now = { .l_onoff = 1, .l_linger = 0 };
        c->raw_tls = true;
        setsockopt(bufferevent_getfd(c->client), SOL_SOCKET, SO_LINGER, &now, sizeof now);
    }
}

#define CUT_WHY "more than %d connections sending a request head at once: the oldest is cut"

/* C is the head the budget cut: a 429, or a reset where TLS is coming. */
static void cut_answer(struct conn *c)
{
    reset_unless_http(c);
    conn_refuse(c, 429, "budget:heads", CUT_WHY, HEAD_BUDGET);
}

/* The connection's one timer ran out: which deadline depends on the state. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)fd;
    (void)what;
    switch (c->state) {
    case S_HEAD:
        if (c->cut) { /* its client's first byte never came: answered from what did */
            cut_answer(c);
            return;
        }
        if (c->dns_stream) { /* idle: the relay opens another when it needs one */
            conn_free(c);
            return;
        }
        if (c->door_pending) {
            conn_refuse(c, 403, "door", "no run token within %d s: not the run's connection",
                        DOOR_DEADLINE_MS / 1000);
            return;
        }
        reset_unless_http(c);
        conn_refuse(c, 408, "bad_request", "no complete request head within %d s",
                    HEAD_DEADLINE_MS / 1000);
        return;
    case S_ASKING:
        ask_timeout(c);
        return;
    case S_RESOLVING:
    case S_CONNECTING:
        conn_refuse(c, 504, "upstream_timeout", "%s:%u did not answer in time", c->target.host_text,
                    c->target.port);
        return;
    case S_RELAY:
        relay_end(c, "idle timeout");
        return;
    case S_CLOSING:
        conn_free(c);
        return;
    }
}

/*
 * The door token, before anything is parsed: compared in constant time,
 * then the request head is read as on any door.
 */
static void door_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    unsigned char got[GATEWAY_DOOR_TOKEN_LEN];
    if (evbuffer_get_length(in) < sizeof got)
        return;
    evbuffer_remove(in, got, sizeof got);
    bool ok = CRYPTO_memcmp(got, c->gw->cfg->door_token, sizeof got) == 0;
    OPENSSL_cleanse(got, sizeof got);
    c->door_pending = false;
    if (!ok) {
        conn_refuse(c, 403, "door", "no run token: not the run's connection");
        return;
    }
    conn_arm_head_deadline(c);
    bufferevent_setwatermark(bev, EV_READ, 0, 0);
    bufferevent_setcb(bev, conn_head_read, NULL, conn_head_event, c);
    if (evbuffer_get_length(in) > 0)
        conn_head_read(bev, c);
}

void conn_arm_head_deadline(struct conn *c)
{
    uint64_t spent_ms = (gateway_now_us() - c->started_us) / 1000;
    conn_arm_timer(c, spent_ms < HEAD_DEADLINE_MS ? (unsigned)(HEAD_DEADLINE_MS - spent_ms) : 0);
}

/* Bytes came to a cut head still to be answered (cut_oldest_head()). */
static void cut_read(struct bufferevent *bev, void *arg)
{
    bool relayed = false;
    (void)bev;
    if (head_first_byte(arg, &relayed) >= 0)
        cut_answer(arg);
}

static void cut_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        cut_answer(arg); /* recorded as the cut it is; the answer goes nowhere */
}

/*
 * The head budget is spent: the connection that has been sending its head
 * longest goes, so the newest (most likely a whole request that arrived in
 * one piece) is read. Its answer is its client's first byte's to choose: on
 * a loaded host a backlog is taken in at once, before the bytes of its
 * connections (the door token, a relay's preface, the client's own) are
 * all here. One whose client's first byte has not come leaves the budget
 * now and is answered when it comes, or at its deadline from what did.
 */
static void cut_oldest_head(struct gateway *gw)
{
    struct conn *oldest = NULL;
    for (struct conn *c = gw->conns; c; c = c->next)
        if (c->in_head)
            oldest = c; /* the list is newest first */
    if (!oldest)
        return;
    if (!oldest->target.host_text[0])
        snprintf(oldest->target.host_text, sizeof oldest->target.host_text, "-");
    bool relayed = false;
    if (head_first_byte(oldest, &relayed) >= 0 || oldest->raw_tls || !linger_room(gw)) {
        cut_answer(oldest);
        return;
    }
    head_leave(oldest);
    oldest->cut = true;
    /* Its record, should the run end first. */
    oldest->status = 429;
    snprintf(oldest->rule, sizeof oldest->rule, "budget:heads");
    snprintf(oldest->reason, sizeof oldest->reason, CUT_WHY, HEAD_BUDGET);
    bufferevent_setwatermark(oldest->client, EV_READ, 0, 0);
    bufferevent_setcb(oldest->client, cut_read, NULL, cut_event, oldest);
}

struct conn *conn_start(struct gateway *gw, evutil_socket_t fd)
{
    struct conn_head *ch = calloc(1, sizeof *ch);
    if (!ch) {
        evutil_closesocket(fd);
        return NULL;
    }
    struct conn *c = &ch->conn;
    c->gw = gw;
    c->started_us = gateway_now_us();
    c->next = gw->conns;
    c->pprev = &gw->conns;
    if (gw->conns)
        gw->conns->pprev = &c->next;
    gw->conns = c;
    snprintf(c->method, sizeof c->method, "-");
    gw->active++;
    c->in_head = true;
    gw->heads++;
    c->client = bufferevent_socket_new(gw->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!c->client) {
        evutil_closesocket(fd);
        c->reported = true;
        conn_free(c);
        return NULL;
    }
    c->timer = evtimer_new(gw->base, on_timer, c);
    if (!c->timer) {
        c->reported = true;
        conn_free(c);
        return NULL;
    }
    /* An absolute deadline for the whole head: a slow trickle gains nothing. */
    conn_arm_timer(c, HEAD_DEADLINE_MS);
    bufferevent_setcb(c->client, conn_head_read, NULL, conn_head_event, c);
    if (gw->cfg->door_token_set) {
        snprintf(c->target.host_text, sizeof c->target.host_text, "-");
        c->door_pending = true;
        conn_arm_timer(c, DOOR_DEADLINE_MS);
        bufferevent_setwatermark(c->client, EV_READ, GATEWAY_DOOR_TOKEN_LEN, 0);
        bufferevent_setcb(c->client, door_read, NULL, conn_head_event, c);
    }
    bufferevent_enable(c->client, EV_READ | EV_WRITE);
    if (gw->heads > HEAD_BUDGET)
        cut_oldest_head(gw);
    return c;
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg)
{
    (void)l;
    (void)sa;
    (void)len;
    conn_start(arg, fd);
}

static void resume_accepting(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    evconnlistener_enable(arg);
}

/*
 * accept() failed (out of descriptors, most likely): pause accepting for a
 * moment instead of spinning on a listener that stays readable.
 */
static void accept_failed(struct evconnlistener *l, void *arg)
{
    struct gateway *gw = arg;
    struct timeval pause = ms_timeval(100);
    evconnlistener_disable(l);
    evtimer_add(gw->resume_accept, &pause);
}

/* libevent's own warnings would go to cordon's stderr, outside any cap. */
static void quiet_log(int severity, const char *msg)
{
    (void)severity;
    (void)msg;
}

/* Most of a second past SIGTERM a head still unread is cut: the supervisor drains for two. */
#define HEAD_SETTLE_MS 1000

/* Is a connection still to read a head whose bytes have come (a keeper's told refusal)? */
static bool head_waiting(const struct gateway *gw)
{
    for (const struct conn *c = gw->conns; c; c = c->next) {
        int n = 0;
        if (c->state == S_HEAD && c->client &&
            (evbuffer_get_length(bufferevent_get_input(c->client)) ||
             (ioctl(bufferevent_getfd(c->client), FIONREAD, &n) == 0 && n > 0)))
            return true;
    }
    return false;
}

/* The run has ended: report what is still open, and exit. */
static void finish(evutil_socket_t fd, short what, void *arg)
{
    struct gateway *gw = arg;
    (void)fd;
    (void)what;
    /* What a connection of the run's last moment said is decided and recorded first. */
    struct timeval settle = { 0, 20000 };
    if (gw->term_us && gateway_now_us() - gw->term_us < HEAD_SETTLE_MS * 1000u &&
        head_waiting(gw) && evtimer_add(gw->finish, &settle) == 0)
        return;
    while (gw->conns) {
        if (!gw->conns->reason[0])
            snprintf(gw->conns->reason, sizeof gw->conns->reason, "the run ended");
        conn_free(gw->conns);
    }
    event_base_loopbreak(gw->base);
}

/*
 * SIGTERM from the supervisor at the end of the run. A client's close may
 * still be waiting in the loop: let it be seen first, so a connection the
 * command finished is not reported as cut by the end of the run.
 */
static void on_term(evutil_socket_t sig, short what, void *arg)
{
    struct gateway *gw = arg;
    (void)sig;
    (void)what;
    /* A connection made just before the end may still wait in the backlog: a
     * keeper's refused literal is told and closed at once, and the command
     * may be gone before we accepted it. Each is taken in first, so it is
     * decided and recorded (the settle below reads what it holds). */
    if (gw->door) {
        evutil_socket_t door = evconnlistener_get_fd(gw->door);
        int fd;
        while ((fd = accept4(door, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
            conn_start(gw, fd);
    }
    struct timeval settle = { 0, 20000 };
    gw->term_us = gateway_now_us();
    if (!gw->conns || !gw->finish || evtimer_add(gw->finish, &settle) < 0)
        finish(-1, 0, gw);
}

/*
 * How many pipes the bulk path (bulk.c) may hold at once: the descriptors
 * left once every connection the caps admit (the cap, the head budget, the
 * lingering) has its two sockets, with a margin for the listeners, DNS and
 * the rest. Past it a connection copies: its pipes never cost another one
 * its place.
 */
static uint64_t pipe_budget(const struct gateway *gw)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) < 0)
        return 0;
    if (r.rlim_cur == RLIM_INFINITY)
        return UINT64_MAX;
    uint64_t reserved = 64 + 2 * (connection_cap(gw) + HEAD_BUDGET + LINGER_MAX);
    return r.rlim_cur > reserved ? (r.rlim_cur - reserved) / 2 : 0;
}

static int gateway_init(struct gateway *gw, const struct gateway_config *cfg,
                        struct cordon_err *err)
{
    gw->cfg = cfg;
    event_set_log_callback(quiet_log);
    gw->base = event_base_new();
    if (!gw->base)
        return err_set(err, CORDON_E_SETUP, "cannot create the gateway's event loop");
    /* Names are resolved here, never by the sandbox: through the policy's
     * nameservers, or the host's resolv.conf. Without either only pinned
     * names and literals work. */
    if (cfg->n_dns) {
        gw->dns = evdns_base_new(gw->base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        for (size_t i = 0; gw->dns && i < cfg->n_dns; i++)
            if (evdns_base_nameserver_sockaddr_add(gw->dns, (struct sockaddr *)&cfg->dns[i],
                                                   cfg->dns_len[i], 0) != 0)
                return err_set(err, CORDON_E_SETUP, "cannot use nameserver %zu", i + 1);
    } else {
        gw->dns = evdns_base_new(
            gw->base, EVDNS_BASE_INITIALIZE_NAMESERVERS | EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    }
    budget_init(&gw->budget, cfg, gateway_now_us());
    gw->pipes_left = pipe_budget(gw);
    /* The run's distinct names (transparent.c): those the stub gave out and
     * those resolved for the proxy, counted together at every door. */
    gw->synth = calloc(SYNTH_MAX_NAMES, sizeof *gw->synth);
    gw->refused = calloc(DNS_REFUSED_MAX, sizeof *gw->refused);
    if (!(gw->run_allowed = json_object()) || !gw->synth || !gw->refused)
        return err_set(err, CORDON_E_SETUP, "out of memory");
    if (credentials_init(gw, err) < 0 || tls_init(gw, err) < 0)
        return -1;
    gw->dns_fd = -1;
    return 0;
}

static void gateway_fini(struct gateway *gw)
{
    transparent_fini(gw);
    free(gw->synth);
    free(gw->refused);
    tls_fini(gw);
    credentials_fini(gw);
    json_decref(gw->run_allowed);
    if (gw->dns)
        evdns_base_free(gw->dns, 1);
    if (gw->base)
        event_base_free(gw->base);
}

/*
 * The gateway parses what the sandbox sends, so it holds as little as it
 * can: no privilege (root drops to UID), no new privileges, and under
 * Landlock no file at all (its resolver has read resolv.conf already).
 */
static void confine_gateway(uid_t uid, pid_t parent)
{
    if (geteuid() == 0 &&
        (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0))
        _exit(1);
    /* A credential change clears the parent-death signal: set it again, and
     * leave at once if the supervisor is gone already (a SIGKILLed cordon
     * must not leave its gateway behind). */
    if (parent > 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent))
        _exit(1);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        _exit(1);
    struct landlock_plan plan;
    landlock_plan_init(&plan, landlock_abi());
    struct cordon_err err;
    if (landlock_plan_apply(&plan, &err) < 0)
        _exit(1);
}

pid_t gateway_start(const struct gateway_config *cfg, const struct gateway_doors *doors, uid_t uid,
                    void (*in_child)(void *arg), void *arg, int *report_fd, struct cordon_err *err)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create the gateway's report pipe");
    pid_t parent = getpid();
    /* Born with SIGTERM blocked until its loop handles it: a run that ends at
     * once must not kill the gateway before it has heard what the run did. */
    pid_t pid = fork_stops_blocked();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return err_sys(err, CORDON_E_SETUP, "cannot start the egress gateway");
    }
    if (pid > 0) {
        close(fds[1]);
        *report_fd = fds[0];
        return pid;
    }
    /* The gateway: holds only its listener and its report pipe (never the
     * sandbox's stdio pipes: an open stdin end would keep the command from
     * ever seeing EOF, nor the audit log: the supervisor records decisions);
     * dies with the supervisor; ignores the terminal's signals (the
     * supervisor decides when it ends). */
    if (in_child)
        in_child(arg);
    close(fds[0]);
    int keep[3 + SYNTH_MAX_PORTS] = { doors->proxy, fds[1], doors->dns };
    size_t n_keep = 3;
    for (size_t i = 0; i < doors->n_ports && i < SYNTH_MAX_PORTS; i++)
        keep[n_keep++] = doors->ports[i];
    close_fds_except(keep, n_keep);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    struct gateway gw = { .report_fd = fds[1] };
    struct cordon_err e;
    if (gateway_init(&gw, cfg, &e) < 0)
        _exit(1);
    confine_gateway(uid, parent);
    evutil_make_socket_nonblocking(doors->proxy);
    struct evconnlistener *l =
        evconnlistener_new(gw.base, on_accept, &gw, LEV_OPT_CLOSE_ON_FREE, -1, doors->proxy);
    if (transparent_init(&gw, doors, &e) < 0)
        _exit(1);
    struct event *term = evsignal_new(gw.base, SIGTERM, on_term, &gw);
    gw.finish = evtimer_new(gw.base, finish, &gw);
    struct event *resume = evtimer_new(gw.base, resume_accepting, l);
    if (!l || !term || !resume || event_add(term, NULL) < 0)
        _exit(1);
    evconnlistener_set_error_cb(l, accept_failed);
    gw.resume_accept = resume;
    gw.door = l;
    sigset_t none; /* a SIGTERM that came meanwhile is handled by the loop now */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    event_base_dispatch(gw.base);
    _exit(0);
}

int gateway_serve_one(const struct gateway_config *cfg, int fd, uid_t uid, struct cordon_err *err)
{
    struct gateway gw = { .report_fd = -1, .serve_one = true };
    if (gateway_init(&gw, cfg, err) < 0)
        return -1;
    confine_gateway(uid, 0); /* serves in the caller's own process */
    evutil_make_socket_nonblocking(fd);
    conn_start(&gw, fd);
    event_base_dispatch(gw.base);
    gateway_fini(&gw);
    return 0;
}

int gateway_config_from_policy(const struct policy *p, struct gateway_config *out,
                               struct cordon_err *err)
{
    const struct policy_network *n = &p->network;
    const struct policy_egress *e = &p->egress;
    if (!p->finalized)
        return err_set(err, CORDON_E_INTERNAL, "the gateway needs a finalized policy");
    *out = (struct gateway_config){
        .dns = calloc(e->n_dns + 1, sizeof *out->dns),
        .dns_len = calloc(e->n_dns + 1, sizeof *out->dns_len),
        .max_requests = n->requests,
        .max_bytes = n->bytes,
        .max_connections = n->connections,
        .request_rate = n->request_rate,
        .upstream_ca = n->upstream_ca,
        .decider = p->gov.decider,
        .decider_timeout_ms = p->gov.decider_timeout_ms,
        .connect_timeout_ms = 10000,
        .idle_timeout_ms = 60000,
    };
    if (egress_rules_copy(&e->rules, &out->rules) < 0 || !out->dns || !out->dns_len) {
        gateway_config_release(out);
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    }
    for (; out->n_dns < e->n_dns; out->n_dns++)
        ip_addr_to_sockaddr(&e->dns[out->n_dns].ip, e->dns[out->n_dns].port, &out->dns[out->n_dns],
                            &out->dns_len[out->n_dns]);
    char why[200];
    if (p->n_secrets && credentials_load(p, out, why, sizeof why) < 0) {
        gateway_config_release(out);
        return err_set(err, CORDON_E_SETUP, "secrets: %s", why);
    }
    /* The run's CA: to swap secrets in, and to hold requests to request rules. */
    bool inspect = false;
    for (size_t i = 0; i < out->rules.n_allow; i++)
        inspect = inspect || egress_rule_is_request_rule(&out->rules.allow[i]);
    if ((p->n_secrets || inspect) && !(out->mint = mint_new(err))) {
        gateway_config_release(out);
        return -1;
    }
    return 0;
}

void gateway_config_release(struct gateway_config *cfg)
{
    credentials_release(cfg);
    egress_rules_release(&cfg->rules);
    free(cfg->dns);
    free(cfg->dns_len);
    memset(cfg, 0, sizeof *cfg);
}
