/*
 * egress/gateway.c: the egress gateway process (libevent). Runs outside the
 * sandbox, in the host's network namespace, forked by the supervisor; its
 * listening socket was made inside the sandbox's namespace.
 *
 * One request per client connection: requests are checked one by one, and
 * "Connection: close" on both sides means no second request can ride an
 * approved connection unchecked.
 */
#include "egress/gateway.h"

#include "common/landlock.h"
#include "common/cleanup.h"
#include "common/fds.h"
#include "common/text.h"
#include "egress/http.h"
#include "egress/mint.h"
#include "egress/scrub.h"
#include "policy/policy.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_ADDRS 16
/* Connections at once when the policy sets no budget: well under the fds we have. */
#define GATEWAY_MAX_CONNECTIONS 256
/* Stop reading one side while the other has this much unsent. */
#define RELAY_HIGH_WATER (1024 * 1024)
#define RELAY_CHUNK (256 * 1024)

struct gateway {
    const struct gateway_config *cfg;
    struct event_base *base;
    struct evdns_base *dns;
    int report_fd;
    uint64_t requests, bytes, active;
    double tokens;            /* request_rate bucket */
    uint64_t tokens_at_us;
    bool serve_one;           /* cordon fetch: exit after the one connection */
    struct conn *conns;       /* open connections, reported when we are stopped */
    struct event *resume_accept; /* re-enables accepting after a failed accept() */
    struct event *finish;        /* the end of the run, a moment after SIGTERM */
    SSL_CTX *upstream_tls;    /* verifying client side of intercepted connections */
    struct scrub_pair *values;       /* secret i's value -> its placeholder */
    struct scrub_pair *placeholders; /* secret i's placeholder, to find in bodies */
    size_t n_pairs;
};

enum conn_state { S_HEAD, S_RESOLVING, S_CONNECTING, S_RELAY, S_CLOSING };
enum body_kind { BODY_NONE, BODY_LENGTH, BODY_CHUNKED };
enum chunk_state { CHUNK_SIZE, CHUNK_DATA, CHUNK_DATA_END, CHUNK_TRAILER, CHUNK_DONE };

struct conn {
    struct gateway *gw;
    struct conn *next, **pprev;
    struct bufferevent *client, *upstream;
    struct event *client_rev, *upstream_rev; /* relay reads, done by us (see on_readable) */
    struct event *timer;       /* head and linger deadlines; idle time while relaying */
    struct event *flush_ev;    /* re-checks that a TLS answer reached the socket */
    struct evbuffer *client_in; /* client bytes not yet forwarded (partial chunk framing) */
    bool client_eof;           /* the client half-closed after a complete request */
    bool intercept;            /* CONNECT to a host a secret is bound to: TLS ends here */
    bool inner;                /* reading the request inside an intercepted tunnel */
    uint64_t secrets_used;     /* bit i: secret i's value was swapped in */
    uint64_t foreign;          /* bit i: secret i is not bound here (its placeholder stays in) */
    uint64_t scrubbed;         /* bit i: secret i's value was taken out of the answer */
    struct scrub_answer *answer; /* the answer, parsed and scrubbed (with secrets, in plaintext) */
    struct scrub_finder find_body; /* foreign placeholders in the request body's data */
    enum conn_state state;
    bool is_connect;
    char method[24];
    struct host host;
    char host_text[300];
    uint16_t port;
    char path[4096];
    struct ip_addr addrs[MAX_ADDRS];
    size_t n_addrs, next_addr;
    struct evdns_getaddrinfo_request *dns_req;
    enum body_kind body;
    uint64_t body_left;
    enum chunk_state chunk;
    bool body_done;
    uint64_t up_bytes, down_bytes;
    uint64_t started_us;
    int status;               /* what we answered, or 200 once relaying */
    bool allowed;
    char rule[320];
    char reason[200];
    bool reported;
};

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- decisions ---- */

static void report(struct conn *c)
{
    if (c->reported)
        return;
    c->reported = true;
    struct gateway *gw = c->gw;
    char addr[64] = "";
    if (c->allowed && c->next_addr > 0)
        ip_addr_format(&c->addrs[c->next_addr - 1], addr, sizeof addr);
    json_t *d = json_pack("{s:b, s:s, s:s, s:i, s:o, s:s, s:s, s:i, s:I, s:I, s:f}",
                          "allowed", c->allowed,
                          "method", c->method,
                          "host", c->host_text,
                          "port", (int)c->port,
                          "address", addr[0] ? json_string(addr) : json_null(),
                          "rule", c->rule,
                          "reason", c->reason,
                          "status", c->status,
                          "bytes_up", (json_int_t)c->up_bytes,
                          "bytes_down", (json_int_t)c->down_bytes,
                          "duration_ms", (double)(now_us() - c->started_us) / 1000.0);
    if (!d)
        return;
    if (c->intercept)
        json_object_set_new(d, "intercepted", json_true());
    if (c->secrets_used) {
        /* Names only: the values never leave the gateway. */
        json_t *names = json_array();
        for (size_t i = 0; i < gw->cfg->n_secrets; i++)
            if (c->secrets_used & (1ull << i))
                json_array_append_new(names, json_string(gw->cfg->secrets[i].name));
        json_object_set_new(d, "secrets", names);
    }
    if (c->scrubbed) {
        /* Names only, as above: which values the answer carried and lost. */
        json_t *names = json_array();
        for (size_t i = 0; i < gw->cfg->n_secrets; i++)
            if (c->scrubbed & (1ull << i))
                json_array_append_new(names, json_string(gw->cfg->secrets[i].name));
        json_object_set_new(d, "scrubbed", names);
    }
    if (gw->report_fd >= 0) {
        char *line = json_dumps(d, JSON_COMPACT);
        if (line) {
            size_t len = strlen(line);
            line[len] = '\n';
            (void)!write(gw->report_fd, line, len + 1); /* one line, under PIPE_BUF */
            free(line);
        }
    }
    json_decref(d);
}

static void conn_free(struct conn *c)
{
    report(c);
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
    if (c->client_in)
        evbuffer_free(c->client_in);
    if (c->answer) {
        scrub_answer_release(c->answer);
        free(c->answer);
    }
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
/* A whole request head must arrive within this, however slowly it trickles. */
#define HEAD_DEADLINE_MS 30000

static struct timeval ms_tv(unsigned ms)
{
    return (struct timeval){ ms / 1000, (ms % 1000) * 1000 };
}

/* (Re)arm the connection's one timer: a deadline, or idle time when re-armed on activity. */
static void arm_timer(struct conn *c, unsigned ms)
{
    struct timeval tv = ms_tv(ms);
    event_add(c->timer, &tv);
}

/* The client went away, or lingered too long. */
static void closing_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
        conn_free(arg);
}

static void discard_input(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    c->up_bytes += evbuffer_get_length(in);
    evbuffer_drain(in, evbuffer_get_length(in));
    if (c->up_bytes > LINGER_BYTES)
        conn_free(c);
}

/*
 * Our answer is out. Closing now, with the client's unread bytes still in
 * the kernel (the rest of an oversized head), would reset the connection
 * before the client reads the answer; so stop writing, swallow what still
 * comes for a little while, then close.
 */
static void flush_check(evutil_socket_t fd, short what, void *arg);

static void close_when_flushed(struct bufferevent *bev, void *arg)
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
        struct timeval soon = ms_tv(20);
        if (!c->flush_ev || evtimer_add(c->flush_ev, &soon) < 0)
            conn_free(c);
        return;
    }
    int fd = bufferevent_getfd(under ? under : bev);
    if (c->state != S_CLOSING || shutdown(fd, SHUT_WR) < 0) {
        conn_free(c);
        return;
    }
    c->up_bytes = 0;
    /* An absolute deadline: a trickle of bytes must not keep us here. */
    arm_timer(c, LINGER_MS);
    bufferevent_set_timeouts(bev, NULL, NULL);
    bufferevent_setcb(bev, discard_input, NULL, closing_event, c);
    bufferevent_enable(bev, EV_READ);
    bufferevent_disable(bev, EV_WRITE);
}

static void flush_check(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)fd;
    (void)what;
    close_when_flushed(c->client, c);
}

/* Answer STATUS and close: every refusal ends here. */
static void refuse(struct conn *c, int status, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void refuse(struct conn *c, int status, const char *rule, const char *fmt, ...)
{
    static const struct {
        int status;
        const char *text;
    } texts[] = {
        { 400, "Bad Request" }, { 403, "Forbidden" }, { 408, "Request Timeout" },
        { 414, "URI Too Long" }, { 429, "Too Many Requests" },
        { 431, "Request Header Fields Too Large" }, { 501, "Not Implemented" },
        { 502, "Bad Gateway" }, { 504, "Gateway Timeout" }, { 505, "HTTP Version Not Supported" },
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
    if (c->upstream) {
        bufferevent_free(c->upstream);
        c->upstream = NULL;
    }
    report(c);
    struct evbuffer *out = bufferevent_get_output(c->client);
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nX-Cordon-Denied: %s\r\n"
                        "Connection: close\r\nContent-Length: %zu\r\n\r\n%s\n",
                        status, text, rule, strlen(c->reason) + 1, c->reason);
    bufferevent_disable(c->client, EV_READ);
    bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
    bufferevent_setcb(c->client, NULL, close_when_flushed, closing_event, c);
    bufferevent_enable(c->client, EV_WRITE);
    arm_timer(c, LINGER_MS + c->gw->cfg->idle_timeout_ms); /* flush, then linger */
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

/* ---- policy checks ---- */

static bool take_token(struct gateway *gw)
{
    uint64_t rate = gw->cfg->request_rate;
    if (!rate)
        return true;
    uint64_t now = now_us();
    gw->tokens += (double)(now - gw->tokens_at_us) / 1e6 * (double)rate;
    if (gw->tokens > (double)rate)
        gw->tokens = (double)rate;
    gw->tokens_at_us = now;
    if (gw->tokens < 1.0)
        return false;
    gw->tokens -= 1.0;
    return true;
}

static const struct egress_rule *match_host(const struct egress_rule *rules, size_t n,
                                            const struct host *h, uint16_t port)
{
    for (size_t i = 0; i < n; i++)
        if (egress_rule_matches_host(&rules[i], h, port))
            return &rules[i];
    return NULL;
}

static const struct egress_rule *match_addr(const struct egress_rule *rules, size_t n,
                                            const struct ip_addr *a, uint16_t port)
{
    for (size_t i = 0; i < n; i++)
        if (egress_rule_matches_addr(&rules[i], a, port))
            return &rules[i];
    return NULL;
}

static void set_rule(struct conn *c, const char *kind, const struct egress_rule *r)
{
    char text[300];
    egress_rule_format(r, text, sizeof text);
    snprintf(c->rule, sizeof c->rule, "%s:%s", kind, text);
}

/*
 * Every resolved address must pass: denylist, allowlist (by name, or by
 * address for IP and CIDR rules), and the address classes. One bad address
 * refuses the request, so a mixed answer cannot be used to reach inside.
 */
static bool check_addresses(struct conn *c)
{
    const struct gateway_config *cfg = c->gw->cfg;
    const struct egress_rule *allow = match_host(cfg->allow, cfg->n_allow, &c->host, c->port);
    for (size_t i = 0; i < c->n_addrs; i++) {
        const struct ip_addr *a = &c->addrs[i];
        char text[64];
        ip_addr_format(a, text, sizeof text);
        const struct egress_rule *deny = match_addr(cfg->deny, cfg->n_deny, a, c->port);
        if (deny) {
            set_rule(c, "deny", deny);
            refuse(c, 403, c->rule, "%s (%s) is on the denylist", c->host_text, text);
            return false;
        }
        enum addr_class cls = addr_classify(a);
        if (cls != ADDR_PUBLIC) {
            bool excepted = false;
            for (size_t k = 0; k < cfg->n_allow_private; k++)
                if (cidr_contains(&cfg->allow_private[k], a))
                    excepted = true;
            if (!excepted) {
                char rule[64];
                snprintf(rule, sizeof rule, "ssrf:%s", addr_class_name(cls));
                refuse(c, 403, rule, "%s resolves to %s, a %s address", c->host_text, text,
                       addr_class_name(cls));
                return false;
            }
        }
        if (!c->rule[0])
            set_rule(c, "allow", allow);
    }
    return true;
}

/* ---- relaying ---- */

static bool over_byte_budget(struct conn *c, size_t more)
{
    struct gateway *gw = c->gw;
    gw->bytes += more;
    return gw->cfg->max_bytes && gw->bytes > gw->cfg->max_bytes;
}

static void end_relay(struct conn *c, const char *why)
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
 * A placeholder of a secret not bound here in the body's data IN[FROM,
 * FROM + LEN), or across its seam with the data before: the secret's index,
 * or -1. Data only, so that chunk framing cannot split one unseen. Called
 * before the bytes are forwarded: the upstream never gets a whole one.
 */
static int body_exfil(struct conn *c, struct evbuffer *in, size_t from, size_t len)
{
    struct gateway *gw = c->gw;
    if (!c->foreign)
        return -1;
    struct evbuffer_ptr ptr;
    if (evbuffer_ptr_set(in, &ptr, from, EVBUFFER_PTR_SET) < 0)
        return -1;
    while (len) {
        struct evbuffer_iovec v[16];
        int nv = evbuffer_peek(in, (ev_ssize_t)len, &ptr, v, 16);
        size_t done = 0;
        for (int i = 0; i < nv && i < 16 && done < len; i++) {
            size_t take = v[i].iov_len < len - done ? v[i].iov_len : len - done;
            int hit = scrub_find(&c->find_body, gw->placeholders, gw->n_pairs, c->foreign,
                                 v[i].iov_base, take);
            if (hit >= 0)
                return hit;
            done += take;
        }
        if (!done || evbuffer_ptr_set(in, &ptr, done, EVBUFFER_PTR_ADD) < 0)
            break;
        len -= done;
    }
    return -1;
}

/* The same for one whole framing line (a chunk-size line, a trailer field). */
static int line_exfil(const struct conn *c, const char *line, size_t len)
{
    const struct gateway *gw = c->gw;
    for (size_t i = 0; i < gw->n_pairs; i++)
        if ((c->foreign >> i & 1) && memmem(line, len, gw->placeholders[i].from,
                                            gw->placeholders[i].from_len))
            return (int)i;
    return -1;
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
        if ((*exfil = body_exfil(c, in, 0, n)) >= 0)
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
            if ((*exfil = body_exfil(c, in, pos, n)) >= 0)
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
            if ((*exfil = line_exfil(c, line, line_len)) >= 0)
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
            if ((*exfil = line_exfil(c, line, line_len)) >= 0)
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

static void refuse_exfil(struct conn *c, size_t secret);

static void client_data(struct conn *c, struct evbuffer *in)
{
    size_t n = evbuffer_get_length(in);
    bool framed = !c->is_connect || c->inner; /* a request, not an opaque tunnel */
    if (framed) {
        bool bad = false;
        int exfil = -1;
        n = body_bytes(c, in, &bad, &exfil);
        if (exfil >= 0) {
            refuse_exfil(c, (size_t)exfil);
            return;
        }
        if (bad) {
            end_relay(c, "malformed chunked body");
            return;
        }
    }
    if (n) {
        c->up_bytes += n;
        if (over_byte_budget(c, n)) {
            snprintf(c->rule, sizeof c->rule, "budget:bytes");
            end_relay(c, "byte budget exhausted");
            return;
        }
        if (n == evbuffer_get_length(in)) {
            pass_on(in, c->upstream);
        } else {
            struct evbuffer *part = evbuffer_new();
            if (!part) {
                end_relay(c, "out of memory");
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
    if ((!c->is_connect || c->inner) && !c->body_done) {
        end_relay(c, NULL);
        return;
    }
    c->client_eof = true;
    event_del(c->client_rev);
    bufferevent_setwatermark(c->upstream, EV_WRITE, 0, 0);
    if (evbuffer_get_length(bufferevent_get_output(c->upstream)) == 0)
        shutdown(bufferevent_getfd(c->upstream), SHUT_WR);
}

static void tls_upstream_done(struct conn *c, short what);

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
    if (max && c->gw->bytes + n > max) {
        n = c->gw->bytes >= max ? 0 : (size_t)(max - c->gw->bytes);
        cut = true;
    }
    c->gw->bytes += n;
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

/* Our own read events go before the upstream's socket does (refuse() frees it). */
static void stop_reading(struct conn *c)
{
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
        stop_reading(c);
        bool encoded = strncmp(why, "compressed", 10) == 0;
        refuse(c, 502, encoded ? "unscannable_answer" : "bad_answer", "answer from %s: %s",
               c->host_text, why);
        return;
    }
    snprintf(c->rule, sizeof c->rule, "bad_answer");
    end_relay(c, why);
}

/*
 * Bytes from the server. With secrets, every answer the gateway can read
 * goes through the scrubber: a server that reflects what it was sent (an
 * echo endpoint, a verbose error, TRACE) must not hand the value to the
 * sandbox. False when C is gone.
 */
static bool answer_bytes(struct conn *c, const char *buf, size_t n)
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
static bool answer_eof(struct conn *c)
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
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        if (!from_upstream)
            client_closed(c);
        else if (answer_eof(c))
            upstream_closed(c);
        return;
    }
    arm_timer(c, c->gw->cfg->idle_timeout_ms);
    if (from_upstream) {
        answer_bytes(c, buf, (size_t)n);
        return;
    }
    evbuffer_add(c->client_in, buf, (size_t)n);
    client_data(c, c->client_in);
}

/* Writing failed or timed out (a peer that stopped reading). */
static void relay_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    if (what & BEV_EVENT_TIMEOUT) {
        end_relay(c, "idle timeout");
        return;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        if (bev != c->upstream)
            end_relay(c, NULL);
        else if (answer_eof(c))
            upstream_closed(c);
    }
}

/* The server finished (or failed): flush what it said, then close. */
static void upstream_closed(struct conn *c)
{
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
    bufferevent_setcb(c->client, NULL, close_when_flushed, closing_event, c);
    arm_timer(c, c->gw->cfg->idle_timeout_ms);
}

/* ---- credentials ---- */

static bool secret_bound_here(const struct gateway_secret *sec, const struct conn *c)
{
    for (size_t k = 0; k < sec->n_hosts; k++)
        if (egress_rule_matches_host(&sec->hosts[k], &c->host, c->port))
            return true;
    return false;
}

/* Is any secret bound to this destination? (Then its TLS is intercepted.) */
static bool any_secret_bound_here(const struct conn *c)
{
    const struct gateway_config *cfg = c->gw->cfg;
    for (size_t i = 0; i < cfg->n_secrets; i++)
        if (secret_bound_here(&cfg->secrets[i], c))
            return true;
    return false;
}

static bool carries(const char *buf, size_t len, const struct gateway_secret *sec)
{
    return memmem(buf, len, sec->placeholder, strlen(sec->placeholder)) != NULL;
}

/*
 * Which placeholders the request carries (in its target or any header).
 * One bound elsewhere is an exfiltration attempt: refused and recorded.
 * One bound here is swapped for its value in the headers sent upstream.
 */
static bool check_secrets(struct conn *c, const struct http_request *req)
{
    const struct gateway_config *cfg = c->gw->cfg;
    for (size_t i = 0; i < cfg->n_secrets; i++) {
        const struct gateway_secret *sec = &cfg->secrets[i];
        if (!secret_bound_here(sec, c))
            c->foreign |= 1ull << i; /* looked for in the body too */
        bool found = carries(req->target, req->target_len, sec);
        for (size_t h = 0; h < req->n_headers && !found; h++)
            found = carries(req->headers[h].value, req->headers[h].value_len, sec) ||
                    carries(req->headers[h].name, req->headers[h].name_len, sec);
        if (!found)
            continue;
        char rule[200];
        if (!secret_bound_here(sec, c)) {
            snprintf(rule, sizeof rule, "exfil:%s", sec->name);
            refuse(c, 403, rule, "secret %s may only be sent to its own hosts, not %s",
                   sec->name, c->host_text);
            return false;
        }
        if (sec->expires_us && now_us() > sec->expires_us) {
            snprintf(rule, sizeof rule, "secret_expired:%s", sec->name);
            refuse(c, 403, rule, "secret %s has expired", sec->name);
            return false;
        }
        c->secrets_used |= 1ull << i;
    }
    /*
     * TRACE echoes the request, value and all. The answer is scrubbed, but
     * a method whose whole point is the reflection is refused outright.
     * Any case: some servers read "trace" as TRACE.
     */
    if (c->secrets_used && (strcasecmp(req->method, "TRACE") == 0 ||
                            strcasecmp(req->method, "TRACK") == 0)) {
        refuse(c, 403, "trace_with_secret", "%s would echo a secret back; refused",
               req->method);
        return false;
    }
    return true;
}

/* A placeholder of secret I in the body of a request to a host it is not
 * bound to: refused like one in a header, or cut if the answer has begun. */
static void refuse_exfil(struct conn *c, size_t i)
{
    const struct gateway_secret *sec = &c->gw->cfg->secrets[i];
    char rule[200];
    snprintf(rule, sizeof rule, "exfil:%s", sec->name);
    if (c->down_bytes == 0 && !(c->answer && c->answer->head_sent)) {
        stop_reading(c);
        refuse(c, 403, rule, "secret %s may only be sent to its own hosts, not %s", sec->name,
               c->host_text);
        return;
    }
    snprintf(c->rule, sizeof c->rule, "%s", rule);
    c->allowed = false;
    c->status = 403;
    end_relay(c, "a secret's placeholder in the body, for a host it is not bound to");
}

/* A header value on its way upstream, with the placeholders of the secrets
 * bound here replaced by their values. */
static void add_value(struct conn *c, struct evbuffer *out, const char *v, size_t n)
{
    const struct gateway_config *cfg = c->gw->cfg;
    size_t pos = 0;
    while (pos < n) {
        const struct gateway_secret *hit = NULL;
        const char *at = v + n;
        for (size_t i = 0; i < cfg->n_secrets; i++) {
            if (!(c->secrets_used & (1ull << i)))
                continue;
            const struct gateway_secret *sec = &cfg->secrets[i];
            const char *p = memmem(v + pos, n - pos, sec->placeholder, strlen(sec->placeholder));
            if (p && p < at) {
                at = p;
                hit = sec;
            }
        }
        evbuffer_add(out, v + pos, (size_t)(at - (v + pos)));
        if (!hit)
            return;
        evbuffer_add(out, hit->value, hit->value_len);
        pos = (size_t)(at - v) + strlen(hit->placeholder);
    }
}

/* The upstream head: origin-form, hop-by-hop headers dropped, Host set to the target. */
static void send_upstream_head(struct conn *c, const struct http_request *req)
{
    static const char *const hop[] = { "connection", "proxy-connection", "keep-alive",
                                       "proxy-authorization", "proxy-authenticate", "te",
                                       "trailer", "upgrade", "host" };
    /*
     * To a host a secret is bound to: a body we can scan (identity), and the
     * whole of it (a range could hand out a value piece by piece, each
     * piece too short to be recognised).
     */
    static const char *const unscannable[] = { "accept-encoding", "range", "if-range" };
    struct gateway *gw = c->gw;
    bool bound = any_secret_bound_here(c);
    if (gw->n_pairs) {
        c->answer = calloc(1, sizeof *c->answer);
        if (c->answer)
            scrub_answer_init(c->answer, gw->values, gw->n_pairs,
                              (strcmp(c->method, "HEAD") == 0 ? SCRUB_HEAD_REQUEST : 0) |
                              (req->version_minor == 0 ? SCRUB_CLIENT_HTTP10 : 0) |
                              (bound ? SCRUB_REFUSE_ENCODED : 0));
    }
    struct evbuffer *out = bufferevent_get_output(c->upstream);
    evbuffer_add_printf(out, "%s %s HTTP/1.1\r\n", c->method, c->path);
    bool default_port = c->port == (c->inner ? 443 : 80);
    char host[300];
    host_format(&c->host, host, sizeof host);
    evbuffer_add_printf(out, default_port ? "Host: %s\r\n" : "Host: %s:%u\r\n", host, c->port);
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
        add_value(c, out, h->value, h->value_len);
        evbuffer_add(out, "\r\n", 2);
    }
    if (bound)
        evbuffer_add_printf(out, "Accept-Encoding: identity\r\n");
    evbuffer_add_printf(out, "Connection: close\r\n\r\n");
}

static struct http_request *pending_request(struct conn *c);

static void start_relay(struct conn *c)
{
    c->state = S_RELAY;
    c->allowed = true;
    c->status = 200;
    if (!c->is_connect) {
        /* The forwarded head counts against the byte budget too. */
        size_t head = pending_request(c)->head_len;
        c->up_bytes += head;
        c->gw->bytes += head;
    }
    struct timeval idle = ms_tv(c->gw->cfg->idle_timeout_ms);
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
    c->client_rev = event_new(c->gw->base, bufferevent_getfd(c->client), EV_READ | EV_PERSIST,
                              on_readable, c);
    c->client_in = evbuffer_new();
    if (!c->upstream_rev || !c->client_rev || !c->client_in) {
        end_relay(c, "out of memory");
        return;
    }
    event_add(c->upstream_rev, NULL);
    event_add(c->client_rev, NULL);
    arm_timer(c, c->gw->cfg->idle_timeout_ms);
    /* Bytes that came with the head (a TLS hello, a body) go out now. */
    evbuffer_add_buffer(c->client_in, bufferevent_get_input(c->client));
    if (evbuffer_get_length(c->client_in))
        client_data(c, c->client_in);
}

/* ---- intercepted TLS (hosts a secret is bound to) ---- */

/* The answer is encrypted: free the connection once its records have left
 * the socket's bufferevent too (the idle timer bounds the wait). */
static void free_when_sent(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)fd;
    (void)what;
    struct bufferevent *under = bufferevent_get_underlying(c->client);
    if (!under || evbuffer_get_length(bufferevent_get_output(under)) == 0) {
        conn_free(c);
        return;
    }
    if (!c->flush_ev)
        c->flush_ev = evtimer_new(c->gw->base, free_when_sent, c);
    struct timeval soon = ms_tv(20);
    if (!c->flush_ev || evtimer_add(c->flush_ev, &soon) < 0) {
        conn_free(c);
        return;
    }
    arm_timer(c, c->gw->cfg->idle_timeout_ms);
}

static void head_read(struct bufferevent *bev, void *arg);
static void head_event(struct bufferevent *bev, short what, void *arg);

/* The server's TLS failed, or it finished: refuse if nothing was relayed yet,
 * else flush what it said and close. */
static void tls_upstream_done(struct conn *c, short what)
{
    if ((what & BEV_EVENT_ERROR) && c->down_bytes == 0) {
        char msg[160] = "connection failed";
        unsigned long e = bufferevent_get_openssl_error(c->upstream);
        if (e)
            ERR_error_string_n(e, msg, sizeof msg);
        ERR_clear_error();
        refuse(c, 502, "upstream_tls", "TLS with %s failed: %s", c->host_text, msg);
        return;
    }
    bufferevent_free(c->upstream);
    c->upstream = NULL;
    c->state = S_CLOSING;
    bufferevent_disable(c->client, EV_READ);
    if (evbuffer_get_length(bufferevent_get_output(c->client)) == 0) {
        free_when_sent(-1, 0, c);
        return;
    }
    bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
    bufferevent_setcb(c->client, NULL, close_when_flushed, closing_event, c);
    arm_timer(c, c->gw->cfg->idle_timeout_ms);
}

static void tls_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    if (what & BEV_EVENT_CONNECTED)
        return; /* a handshake finished */
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
        return;
    if (bev == c->upstream) {
        /* A failed handshake is refused as such; a close ends the answer. */
        if (((what & BEV_EVENT_ERROR) && c->down_bytes == 0 &&
             !(c->answer && c->answer->head_sent)) || answer_eof(c))
            tls_upstream_done(c, what);
        return;
    }
    /* The client: a close after a complete request still gets the answer. */
    if ((what & BEV_EVENT_EOF) && c->state == S_RELAY && c->body_done) {
        bufferevent_disable(c->client, EV_READ);
        return;
    }
    end_relay(c, (what & BEV_EVENT_ERROR) ? "TLS with the client failed" : NULL);
}

static void tls_client_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    arm_timer(c, c->gw->cfg->idle_timeout_ms);
    client_data(c, bufferevent_get_input(bev));
}

static void tls_upstream_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    arm_timer(c, c->gw->cfg->idle_timeout_ms);
    char buf[16384];
    size_t n;
    while ((n = (size_t)evbuffer_remove(in, buf, sizeof buf)) > 0 && n != (size_t)-1)
        if (!answer_bytes(c, buf, n))
            return;
}

/* Output drained: read the other side again. */
static void tls_client_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    (void)bev;
    if (c->upstream)
        bufferevent_enable(c->upstream, EV_READ);
}

static void tls_upstream_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    (void)bev;
    if (c->state == S_RELAY && !c->body_done)
        bufferevent_enable(c->client, EV_READ);
}

/* The inner request was checked and sent: relay its body and the answer. */
static void start_tls_relay(struct conn *c)
{
    c->state = S_RELAY;
    c->allowed = true;
    c->status = 200;
    size_t head = pending_request(c)->head_len;
    c->up_bytes += head;
    c->gw->bytes += head;
    bufferevent_setcb(c->client, tls_client_read, tls_client_write, tls_event, c);
    bufferevent_setcb(c->upstream, tls_upstream_read, tls_upstream_write, tls_event, c);
    bufferevent_enable(c->client, EV_READ | EV_WRITE);
    bufferevent_enable(c->upstream, EV_READ | EV_WRITE);
    arm_timer(c, c->gw->cfg->idle_timeout_ms);
    if (evbuffer_get_length(bufferevent_get_input(c->client)))
        client_data(c, bufferevent_get_input(c->client));
}

/*
 * CONNECT to a host a secret is bound to: answer 200, then speak TLS to the
 * client with a certificate from the run's CA (which only the sandbox
 * trusts) and to the server with verification against the host's trust
 * store, and read the request in between like a plain one.
 */
static void start_intercept(struct conn *c)
{
    struct gateway *gw = c->gw;
    struct cordon_err err = { 0 };
    SSL_CTX *sctx = mint_server_ctx(gw->cfg->mint, &c->host, &err);
    SSL *server = sctx ? SSL_new(sctx) : NULL;
    SSL *client = gw->upstream_tls ? SSL_new(gw->upstream_tls) : NULL;
    if (!server || !client) {
        SSL_free(server);
        SSL_free(client);
        ERR_clear_error();
        refuse(c, 502, "intercept", "cannot intercept TLS to %s%s%s", c->host_text,
               err.msg[0] ? ": " : "", err.msg);
        return;
    }
    if (c->host.is_ip) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(client), c->host_text);
    } else {
        SSL_set_tlsext_host_name(client, c->host.name);
        SSL_set1_host(client, c->host.name);
    }
    evbuffer_add_printf(bufferevent_get_output(c->client),
                        "HTTP/1.1 200 Connection established\r\n\r\n");
    struct bufferevent *tc = bufferevent_openssl_filter_new(
        gw->base, c->client, server, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    if (!tc) {
        SSL_free(server);
        SSL_free(client);
        refuse(c, 502, "intercept", "cannot intercept TLS to %s", c->host_text);
        return;
    }
    c->client = tc;
    struct bufferevent *tu = bufferevent_openssl_filter_new(
        gw->base, c->upstream, client, BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
    if (!tu) {
        SSL_free(client);
        refuse(c, 502, "intercept", "cannot intercept TLS to %s", c->host_text);
        return;
    }
    c->upstream = tu;
    c->inner = true;
    c->state = S_HEAD;
    c->allowed = true; /* the tunnel was; what happens inside is its reason */
    c->status = 200;
    bufferevent_setcb(tc, head_read, NULL, head_event, c);
    bufferevent_enable(tc, EV_READ | EV_WRITE);
    bufferevent_setcb(tu, NULL, NULL, tls_event, c);
    bufferevent_enable(tu, EV_READ | EV_WRITE);
    arm_timer(c, HEAD_DEADLINE_MS);
}

static void try_connect(struct conn *c);

static void connect_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    (void)bev;
    if (what & BEV_EVENT_CONNECTED) {
        if (c->intercept) {
            start_intercept(c);
            return;
        }
        if (c->is_connect)
            evbuffer_add_printf(bufferevent_get_output(c->client),
                                "HTTP/1.1 200 Connection established\r\n\r\n");
        else
            send_upstream_head(c, pending_request(c));
        start_relay(c);
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
        refuse(c, 504, "upstream_timeout", "connecting to %s:%u timed out", c->host_text, c->port);
    else
        refuse(c, 502, "upstream_error", "cannot connect to %s:%u: %s", c->host_text, c->port,
               evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
}

/* Connect to the next address that was checked: never a fresh lookup. */
static void try_connect(struct conn *c)
{
    struct sockaddr_storage ss;
    socklen_t len;
    ip_addr_to_sockaddr(&c->addrs[c->next_addr++], c->port, &ss, &len);
    c->state = S_CONNECTING;
    arm_timer(c, c->gw->cfg->connect_timeout_ms + 1000); /* the bufferevent's own comes first */
    c->upstream = bufferevent_socket_new(c->gw->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!c->upstream) {
        refuse(c, 502, "upstream_error", "out of memory");
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
            refuse(c, 502, "upstream_error", "cannot connect to %s:%u", c->host_text, c->port);
    }
}

static void proceed(struct conn *c)
{
    if (check_addresses(c))
        try_connect(c);
}

static void dns_done(int result, struct evutil_addrinfo *res, void *arg)
{
    if (result == EVUTIL_EAI_CANCEL)
        return; /* the connection is gone: do not touch it */
    struct conn *c = arg;
    c->dns_req = NULL;
    if (result != 0) {
        refuse(c, 502, "dns", "cannot resolve %s: %s", c->host_text,
               evutil_gai_strerror(result));
        return;
    }
    for (struct evutil_addrinfo *ai = res; ai && c->n_addrs < MAX_ADDRS; ai = ai->ai_next)
        if (ip_addr_from_sockaddr(ai->ai_addr, &c->addrs[c->n_addrs]) == 0)
            c->n_addrs++;
    evutil_freeaddrinfo(res);
    if (!c->n_addrs) {
        refuse(c, 502, "dns", "%s has no address", c->host_text);
        return;
    }
    proceed(c);
}

static void resolve(struct conn *c)
{
    const struct gateway_config *cfg = c->gw->cfg;
    if (c->host.is_ip) {
        c->addrs[c->n_addrs++] = c->host.ip;
        proceed(c);
        return;
    }
    for (size_t i = 0; i < cfg->n_pins && c->n_addrs < MAX_ADDRS; i++)
        if (strcmp(cfg->pins[i].name, c->host.name) == 0)
            c->addrs[c->n_addrs++] = cfg->pins[i].ip;
    if (c->n_addrs) {
        proceed(c);
        return;
    }
    if (!c->gw->dns) {
        refuse(c, 502, "dns", "cannot resolve %s: no resolver configured", c->host_text);
        return;
    }
    struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    c->state = S_RESOLVING;
    arm_timer(c, c->gw->cfg->connect_timeout_ms);
    c->dns_req = evdns_getaddrinfo(c->gw->dns, c->host.name, NULL, &hints, dns_done, c);
}

/* The parsed head is kept with the connection until the upstream head is sent. */
struct conn_head {
    struct conn conn;
    char buf[HTTP_MAX_HEAD + 1];
    struct http_request req;
};

static struct http_request *pending_request(struct conn *c)
{
    return &((struct conn_head *)c)->req;
}

static void decide(struct conn *c, struct http_request *req)
{
    struct gateway *gw = c->gw;
    const struct gateway_config *cfg = gw->cfg;
    snprintf(c->method, sizeof c->method, "%s", req->method);
    char why[200];
    char target[4200];
    if (req->target_len >= sizeof target) {
        snprintf(c->host_text, sizeof c->host_text, "-");
        refuse(c, 414, "bad_request", "request target longer than %zu bytes", sizeof target - 1);
        return;
    }
    snprintf(target, sizeof target, "%.*s", (int)req->target_len, req->target);

    if (req->kind == HTTP_TARGET_AUTHORITY) {
        struct authority a = { 0 };
        if (authority_parse(target, strlen(target), &a, why, sizeof why) < 0 || !a.port ||
            a.has_userinfo) {
            snprintf(c->host_text, sizeof c->host_text, "%.255s", target);
            refuse(c, 400, "bad_request", "bad CONNECT target: %s", a.port ? why : "no port");
            return;
        }
        c->is_connect = true;
        c->host = a.host;
        c->port = a.port;
        if (c->port == 80) {
            /* A tunnel to port 80 would carry plain HTTP past the per-request
             * checks (Host, one request per connection, budgets, audit). */
            snprintf(c->host_text, sizeof c->host_text, "%.255s", target);
            refuse(c, 403, "connect_port", "CONNECT to port 80 is refused: send http:// "
                   "requests as absolute URIs");
            return;
        }
    } else if (req->kind == HTTP_TARGET_ABSOLUTE) {
        struct url u;
        if (url_parse(target, &u, why, sizeof why) < 0) {
            snprintf(c->host_text, sizeof c->host_text, "%.255s", target);
            refuse(c, 400, "bad_request", "bad URL: %s", why);
            return;
        }
        if (u.https) {
            snprintf(c->host_text, sizeof c->host_text, "%.255s", target);
            refuse(c, 400, "bad_request", "https URLs go through CONNECT");
            return;
        }
        c->host = u.authority.host;
        c->port = u.port;
        snprintf(c->path, sizeof c->path, "%s", u.path);
        c->body = req->chunked ? BODY_CHUNKED : req->content_length > 0 ? BODY_LENGTH : BODY_NONE;
        c->body_left = req->content_length > 0 ? (uint64_t)req->content_length : 0;
        c->body_done = c->body == BODY_NONE;
        c->chunk = CHUNK_SIZE;
    } else {
        refuse(c, 400, "bad_request", "not a proxy request (origin-form target)");
        return;
    }
    if (c->host.is_ip)
        ip_addr_format(&c->host.ip, c->host_text, sizeof c->host_text);
    else
        snprintf(c->host_text, sizeof c->host_text, "%s", c->host.name);

    /* Budgets before anything reaches out. */
    if (cfg->max_requests && gw->requests >= cfg->max_requests) {
        refuse(c, 429, "budget:requests", "request budget of %llu exhausted",
               (unsigned long long)cfg->max_requests);
        return;
    }
    if (!take_token(gw)) {
        refuse(c, 429, "budget:request_rate", "more than %llu requests per second",
               (unsigned long long)cfg->request_rate);
        return;
    }
    if (cfg->max_bytes && gw->bytes >= cfg->max_bytes) {
        refuse(c, 429, "budget:bytes", "byte budget exhausted");
        return;
    }
    gw->requests++;

    const struct egress_rule *deny = match_host(cfg->deny, cfg->n_deny, &c->host, c->port);
    if (deny) {
        set_rule(c, "deny", deny);
        refuse(c, 403, c->rule, "%s:%u is on the denylist", c->host_text, c->port);
        return;
    }
    /*
     * Names are allowed by name rules, addresses by address rules: a name
     * is never looked up to see whether it lands in an allowed range, or
     * the sandbox could make the gateway send DNS queries for any name it
     * likes (a channel out).
     */
    if (!match_host(cfg->allow, cfg->n_allow, &c->host, c->port)) {
        refuse(c, 403, "not_allowed", "%s:%u is not on the allowlist", c->host_text, c->port);
        return;
    }
    if (!check_secrets(c, req))
        return;
    /* A tunnel to a host a secret is bound to ends here, so the requests
     * inside can have their placeholders swapped. */
    c->intercept = c->is_connect && cfg->mint && any_secret_bound_here(c);
    resolve(c);
}

/*
 * The request inside an intercepted tunnel: origin-form, for the host the
 * tunnel was opened to, its placeholders checked and swapped like a plain
 * request's. One request per tunnel, as everywhere.
 */
static void decide_inner(struct conn *c, struct http_request *req)
{
    snprintf(c->method, sizeof c->method, "%s", req->method);
    if (req->kind != HTTP_TARGET_ORIGIN || req->target_len >= sizeof c->path) {
        refuse(c, 400, "bad_request", "expected an origin-form request inside the tunnel");
        return;
    }
    const struct http_header *h = http_find_header(req, "host");
    if (h) {
        struct authority a;
        char why[200];
        char named[300] = "";
        bool same = authority_parse(h->value, h->value_len, &a, why, sizeof why) == 0 &&
                    a.host.is_ip == c->host.is_ip && (!a.port || a.port == c->port);
        if (same && a.host.is_ip)
            ip_addr_format(&a.host.ip, named, sizeof named);
        else if (same)
            snprintf(named, sizeof named, "%s", a.host.name);
        same = same && strcmp(named, c->host_text) == 0;
        if (!same) {
            refuse(c, 400, "bad_request", "Host header does not name %s", c->host_text);
            return;
        }
    }
    memcpy(c->path, req->target, req->target_len);
    c->path[req->target_len] = '\0';
    c->body = req->chunked ? BODY_CHUNKED : req->content_length > 0 ? BODY_LENGTH : BODY_NONE;
    c->body_left = req->content_length > 0 ? (uint64_t)req->content_length : 0;
    c->body_done = c->body == BODY_NONE;
    c->chunk = CHUNK_SIZE;
    if (!check_secrets(c, req))
        return;
    send_upstream_head(c, req);
    start_tls_relay(c);
}

static void head_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct conn_head *ch = (struct conn_head *)c;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t avail = evbuffer_get_length(in);
    size_t take = avail < HTTP_MAX_HEAD + 1 ? avail : HTTP_MAX_HEAD + 1;
    size_t got = (size_t)evbuffer_copyout(in, ch->buf, take);
    int status = 0;
    char why[200];
    int r = http_parse_request(ch->buf, got, &ch->req, &status, why, sizeof why);
    if (r == 0)
        return; /* the parser answers 431 itself once the head outgrows the cap */
    if (r < 0) {
        snprintf(c->host_text, sizeof c->host_text, "-");
        refuse(c, status ? status : 400, "bad_request", "%s", why);
        return;
    }
    evbuffer_drain(in, ch->req.head_len);
    bufferevent_disable(bev, EV_READ);
    if (c->inner)
        decide_inner(c, &ch->req);
    else
        decide(c, &ch->req);
}

static void head_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        if (c->inner) /* the CONNECT was a decision; its tunnel ended early */
            snprintf(c->reason, sizeof c->reason, "%s",
                     (what & BEV_EVENT_ERROR) ? "TLS with the client failed"
                                              : "the client sent no request in the tunnel");
        else
            c->reported = true; /* nothing was asked: not a decision */
        conn_free(c);
    }
}

/* The connection's one timer ran out: which deadline depends on the state. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)fd;
    (void)what;
    switch (c->state) {
    case S_HEAD:
        refuse(c, 408, "bad_request", "no complete request head within %d s",
               HEAD_DEADLINE_MS / 1000);
        return;
    case S_RESOLVING:
    case S_CONNECTING:
        refuse(c, 504, "upstream_timeout", "%s:%u did not answer in time", c->host_text, c->port);
        return;
    case S_RELAY:
        end_relay(c, "idle timeout");
        return;
    case S_CLOSING:
        conn_free(c);
        return;
    }
}

static void start_conn(struct gateway *gw, evutil_socket_t fd)
{
    struct conn_head *ch = calloc(1, sizeof *ch);
    if (!ch) {
        evutil_closesocket(fd);
        return;
    }
    struct conn *c = &ch->conn;
    c->gw = gw;
    c->started_us = now_us();
    c->next = gw->conns;
    c->pprev = &gw->conns;
    if (gw->conns)
        gw->conns->pprev = &c->next;
    gw->conns = c;
    snprintf(c->method, sizeof c->method, "-");
    gw->active++;
    c->client = bufferevent_socket_new(gw->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!c->client) {
        evutil_closesocket(fd);
        c->reported = true;
        conn_free(c);
        return;
    }
    c->timer = evtimer_new(gw->base, on_timer, c);
    if (!c->timer) {
        c->reported = true;
        conn_free(c);
        return;
    }
    /* An absolute deadline for the whole head: a slow trickle gains nothing. */
    arm_timer(c, HEAD_DEADLINE_MS);
    bufferevent_setcb(c->client, head_read, NULL, head_event, c);
    bufferevent_enable(c->client, EV_READ | EV_WRITE);
    uint64_t cap = gw->cfg->max_connections ? gw->cfg->max_connections : GATEWAY_MAX_CONNECTIONS;
    if (gw->active > cap) {
        snprintf(c->host_text, sizeof c->host_text, "-");
        refuse(c, 429, "budget:connections", "more than %llu connections at once",
               (unsigned long long)cap);
    }
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                      int len, void *arg)
{
    (void)l;
    (void)sa;
    (void)len;
    start_conn(arg, fd);
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
    struct timeval pause = ms_tv(100);
    evconnlistener_disable(l);
    evtimer_add(gw->resume_accept, &pause);
}

/* libevent's own warnings would go to cordon's stderr, outside any cap. */
static void quiet_log(int severity, const char *msg)
{
    (void)severity;
    (void)msg;
}

/* The run has ended: report what is still open, and exit. */
static void finish(evutil_socket_t fd, short what, void *arg)
{
    struct gateway *gw = arg;
    (void)fd;
    (void)what;
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
    struct timeval settle = { 0, 20000 };
    if (!gw->finish || evtimer_add(gw->finish, &settle) < 0)
        finish(-1, 0, gw);
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
        gw->dns = evdns_base_new(gw->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                               EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    }
    gw->tokens = (double)cfg->request_rate;
    gw->tokens_at_us = now_us();
    if (cfg->n_secrets) {
        gw->values = calloc(cfg->n_secrets, sizeof *gw->values);
        gw->placeholders = calloc(cfg->n_secrets, sizeof *gw->placeholders);
        if (!gw->values || !gw->placeholders)
            return err_set(err, CORDON_E_SETUP, "out of memory for the gateway's secrets");
        for (size_t i = 0; i < cfg->n_secrets; i++) {
            const struct gateway_secret *sec = &cfg->secrets[i];
            size_t ph = strlen(sec->placeholder);
            gw->values[i] = (struct scrub_pair){ sec->value, sec->value_len, sec->placeholder, ph };
            gw->placeholders[i] = (struct scrub_pair){ sec->placeholder, ph, "", 0 };
        }
        gw->n_pairs = cfg->n_secrets;
    }
    if (cfg->mint) {
        /* The trust store is loaded now, whole: once confined, the gateway
         * cannot open files (SSL_CERT_FILE is honoured, as OpenSSL does). */
        gw->upstream_tls = SSL_CTX_new(TLS_client_method());
        const char *env = getenv(X509_get_default_cert_file_env());
        const char *file = cfg->upstream_ca        ? cfg->upstream_ca
                           : env && *env           ? env
                                                   : X509_get_default_cert_file();
        if (!gw->upstream_tls || SSL_CTX_load_verify_locations(gw->upstream_tls, file, NULL) != 1) {
            ERR_clear_error();
            return err_set(err, CORDON_E_SETUP, "cannot load the trust store '%s'", file);
        }
        SSL_CTX_set_verify(gw->upstream_tls, SSL_VERIFY_PEER, NULL);
        SSL_CTX_set_min_proto_version(gw->upstream_tls, TLS1_2_VERSION);
    }
    return 0;
}

static void gateway_fini(struct gateway *gw)
{
    SSL_CTX_free(gw->upstream_tls);
    free(gw->values);
    free(gw->placeholders);
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

pid_t gateway_start(const struct gateway_config *cfg, int listen_fd, uid_t uid, int *report_fd,
                    struct cordon_err *err)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create the gateway's report pipe");
    pid_t parent = getpid();
    pid_t pid = fork();
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
    close(fds[0]);
    int keep[2] = { listen_fd, fds[1] };
    close_fds_except(keep, 2);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    struct gateway gw = { .report_fd = fds[1] };
    struct cordon_err e;
    if (gateway_init(&gw, cfg, &e) < 0)
        _exit(1);
    confine_gateway(uid, parent);
    evutil_make_socket_nonblocking(listen_fd);
    struct evconnlistener *l =
        evconnlistener_new(gw.base, on_accept, &gw, LEV_OPT_CLOSE_ON_FREE, -1, listen_fd);
    struct event *term = evsignal_new(gw.base, SIGTERM, on_term, &gw);
    gw.finish = evtimer_new(gw.base, finish, &gw);
    struct event *resume = evtimer_new(gw.base, resume_accepting, l);
    if (!l || !term || !resume || event_add(term, NULL) < 0)
        _exit(1);
    evconnlistener_set_error_cb(l, accept_failed);
    gw.resume_accept = resume;
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
    start_conn(&gw, fd);
    event_base_dispatch(gw.base);
    gateway_fini(&gw);
    return 0;
}

/* A copy of N items of SIZE (one more, zeroed, so an empty list is not NULL). */
static void *copy_items(const void *items, size_t n, size_t size)
{
    void *out = calloc(n + 1, size);
    if (out && n)
        memcpy(out, items, n * size);
    return out;
}

/* A secret's real value from "env:VAR" or "file:PATH", read by the supervisor. */
static int read_secret_value(const char *from, char **value, size_t *len, char *why,
                             size_t why_len)
{
    if (strncmp(from, "env:", 4) == 0) {
        const char *v = getenv(from + 4);
        if (!v || !*v)
            return why_printf(why, why_len, "environment variable \"%s\" is not set", from + 4);
        *len = strlen(v);
        *value = strdup(v);
        return *value ? 0 : why_printf(why, why_len, "out of memory");
    }
    if (strncmp(from, "file:", 5) != 0)
        return why_printf(why, why_len, "unknown secret source \"%s\"", from);
    _cleanup_close_ int fd = open(from + 5, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return why_printf(why, why_len, "cannot open \"%s\": %s", from + 5, strerror(errno));
    char buf[65536];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 || n == (ssize_t)sizeof buf)
        return why_printf(why, why_len, "cannot read \"%s\" (at most 64 KiB)", from + 5);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--; /* the newline an editor adds is not part of a token */
    *value = malloc((size_t)n + 1);
    if (!*value) {
        explicit_bzero(buf, sizeof buf);
        return why_printf(why, why_len, "out of memory");
    }
    memcpy(*value, buf, (size_t)n);
    (*value)[n] = '\0';
    *len = (size_t)n;
    explicit_bzero(buf, sizeof buf);
    return 0;
}

/* Values, placeholders and the run's CA for P's secrets. */
static int load_secrets(const struct policy *p, struct gateway_config *out, char *why,
                        size_t why_len)
{
    /* The policy refuses more; each secret is a bit of secrets_used. */
    _Static_assert(POLICY_MAX_SECRETS <= 64, "secrets_used is a 64-bit mask");
    if (p->n_secrets > POLICY_MAX_SECRETS)
        return why_printf(why, why_len, "at most %d secrets", POLICY_MAX_SECRETS);
    out->secrets = calloc(p->n_secrets, sizeof *out->secrets);
    if (!out->secrets)
        return why_printf(why, why_len, "out of memory");
    for (size_t i = 0; i < p->n_secrets; i++, out->n_secrets++) {
        const struct policy_secret *ps = &p->secrets[i];
        struct gateway_secret *gs = &out->secrets[i];
        snprintf(gs->name, sizeof gs->name, "%s", ps->name);
        if (read_secret_value(ps->from, &gs->value, &gs->value_len, why, why_len) < 0)
            return -1;
        /* Random per run: a placeholder seen in one run is worth nothing in another. */
        unsigned char rnd[16];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            return why_printf(why, why_len, "cannot make a placeholder: %s", strerror(errno));
        int o = snprintf(gs->placeholder, sizeof gs->placeholder, "cordon-placeholder-");
        for (size_t k = 0; k < sizeof rnd; k++)
            o += snprintf(gs->placeholder + o, sizeof gs->placeholder - (size_t)o, "%02x", rnd[k]);
        gs->hosts = copy_items(ps->host_rules, ps->n_hosts, sizeof *gs->hosts);
        if (!gs->hosts)
            return why_printf(why, why_len, "out of memory");
        gs->n_hosts = ps->n_hosts;
        gs->expires_us = ps->ttl_ms ? now_us() + ps->ttl_ms * 1000 : 0;
    }
    struct cordon_err err = { 0 };
    out->mint = mint_new(&err);
    if (!out->mint)
        return why_printf(why, why_len, "%s", err.msg);
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
        .allow = copy_items(e->allow, e->n_allow, sizeof *e->allow),
        .n_allow = e->n_allow,
        .deny = copy_items(e->deny, e->n_deny, sizeof *e->deny),
        .n_deny = e->n_deny,
        .allow_private = copy_items(e->allow_private, e->n_allow_private,
                                    sizeof *e->allow_private),
        .n_allow_private = e->n_allow_private,
        .pins = copy_items(e->pins, e->n_pins, sizeof *e->pins),
        .n_pins = e->n_pins,
        .dns = calloc(e->n_dns + 1, sizeof *out->dns),
        .dns_len = calloc(e->n_dns + 1, sizeof *out->dns_len),
        .max_requests = n->requests,
        .max_bytes = n->bytes,
        .max_connections = n->connections,
        .request_rate = n->request_rate,
        .upstream_ca = n->upstream_ca,
        .connect_timeout_ms = 10000,
        .idle_timeout_ms = 60000,
    };
    if (!out->allow || !out->deny || !out->allow_private || !out->pins || !out->dns ||
        !out->dns_len) {
        gateway_config_release(out);
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    }
    for (; out->n_dns < e->n_dns; out->n_dns++)
        ip_addr_to_sockaddr(&e->dns[out->n_dns].ip, e->dns[out->n_dns].port,
                            &out->dns[out->n_dns], &out->dns_len[out->n_dns]);
    char why[200];
    if (p->n_secrets && load_secrets(p, out, why, sizeof why) < 0) {
        gateway_config_release(out);
        return err_set(err, CORDON_E_SETUP, "secrets: %s", why);
    }
    return 0;
}

void gateway_config_wipe_values(struct gateway_config *cfg)
{
    for (size_t i = 0; i < cfg->n_secrets; i++)
        if (cfg->secrets[i].value)
            explicit_bzero(cfg->secrets[i].value, cfg->secrets[i].value_len);
}

void gateway_config_release(struct gateway_config *cfg)
{
    for (size_t i = 0; i < cfg->n_secrets; i++) {
        if (cfg->secrets[i].value) {
            explicit_bzero(cfg->secrets[i].value, cfg->secrets[i].value_len);
            free(cfg->secrets[i].value);
        }
        free(cfg->secrets[i].hosts);
    }
    free(cfg->secrets);
    mint_free(cfg->mint);
    free(cfg->allow);
    free(cfg->deny);
    free(cfg->allow_private);
    free(cfg->pins);
    free(cfg->dns);
    free(cfg->dns_len);
    memset(cfg, 0, sizeof *cfg);
}
