/*
 * egress/transparent.c: egress for clients that ignore HTTP(S)_PROXY. The
 * sandbox's resolv.conf names the DNS stub served here: a name the policy
 * allows gets an address from the synthetic range (one per name per run),
 * every other name NXDOMAIN; nothing is ever forwarded, so no query for a
 * name off the allowlist leaves the sandbox. A connection to a synthetic
 * address lands on one of our listeners (the range is routed to the
 * sandbox's loopback); the address says which name the client meant, and
 * the client's TLS server name or Host header must say the same (else it is
 * domain fronting). From there the connection is a CONNECT (TLS passes
 * through, or is intercepted where a secret is bound) or a proxy request,
 * decided by the same code as the proxy's.
 */
#include "egress/gateway_int.h"
#include "egress/synth.h"
#include "common/relay_wire.h"
#include "common/text.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The stub's answers last the run; the TTL only bounds a client's cache. */
#define SYNTH_TTL 300
/* Queries read per wake-up, so a flood cannot starve the connections. */
#define DNS_BURST 64
/* A ClientHello's first record, at most. */
#define HELLO_MAX (5 + 16384)

static uint32_t synth_addr(size_t i)
{
    return SYNTH_NET + 2 + (uint32_t)i; /* .0 is the network, .1 kept back */
}

/* The address NAME stands behind, given out now if it is new; 0 past the cap. */
static uint32_t synth_lookup_or_add(struct gateway *gw, const char *name)
{
    for (size_t i = 0; i < gw->n_synth; i++)
        if (strcmp(gw->synth[i], name) == 0)
            return synth_addr(i);
    if (gw->n_synth >= SYNTH_MAX_NAMES)
        return 0;
    snprintf(gw->synth[gw->n_synth], sizeof gw->synth[0], "%s", name);
    return synth_addr(gw->n_synth++);
}

bool transparent_name_counted(struct gateway *gw, const char *name)
{
    if (strlen(name) >= sizeof gw->synth[0])
        return false; /* no DNS name is that long; truncated, it would count as another */
    return synth_lookup_or_add(gw, name) != 0;
}

static const char *synth_name(const struct gateway *gw, uint32_t a)
{
    if (!synth_in_range(a) || a < SYNTH_NET + 2 || a - SYNTH_NET - 2 >= gw->n_synth)
        return NULL;
    return gw->synth[a - SYNTH_NET - 2];
}

/*
 * A name the stub refused, as a decision for the audit log: once per name
 * (a retry, or its AAAA after its A, is not recorded again), and for at most
 * DNS_REFUSED_MAX names a run, then once more to say the rest go unrecorded
 * (a run that looks up a million random names must not fill the log).
 */
static void refused_name(struct gateway *gw, const char *name, const char *rule, const char *reason)
{
    uint64_t h = text_hash64(name);
    for (size_t i = 0; i < gw->n_refused; i++)
        if (gw->refused[i] == h)
            return;
    if (gw->n_refused == DNS_REFUSED_MAX) {
        if (gw->refused_capped)
            return;
        gw->refused_capped = true;
        rule = "budget:dns_refusals";
        reason = "more than " DNS_REFUSED_MAX_TEXT " names refused: the rest go unrecorded";
    } else {
        gw->refused[gw->n_refused++] = h;
    }
    /* clang-format off */
    gateway_report(gw, json_pack("{s:b, s:s, s:s, s:i, s:n, s:s, s:s, s:i, s:I, s:I, s:f, s:b}",
                                 "allowed", 0, "method", "DNS", "host", name, "port", 53,
                                 "address", "rule", rule, "reason", reason, "status", 403,
                                 "bytes_up", (json_int_t)0, "bytes_down", (json_int_t)0,
                                 "duration_ms", 0.0, "transparent", 1));
    /* clang-format on */
}

/* The answer to the query IN, into OUT; 0 when there is none to send. */
static size_t dns_respond(struct gateway *gw, const uint8_t *in, size_t n, uint8_t *out)
{
    struct dns_query q;
    int rcode;
    if (dns_parse_query(in, n, &q, &rcode) < 0)
        return rcode < 0 ? 0 : dns_answer_bare(q.id, q.flags, rcode, out);
    if (q.qclass != DNS_CLASS_IN)
        return dns_answer(&q, DNS_RCODE_NOTIMP, 0, 0, out);
    struct host h = { .is_ip = false };
    snprintf(h.name, sizeof h.name, "%s", q.name);
    char why[200];
    /* RFC 6761: localhost is loopback, asked of no one (the process level's
     * /etc/hosts is the host's, which a client may not read). */
    if (host_is_localhost(q.name))
        return dns_answer(&q, DNS_RCODE_NOERROR, q.qtype == DNS_TYPE_A ? INADDR_LOOPBACK : 0,
                          SYNTH_TTL, out);
    if (!q.name[0] || !decide_name(gw->cfg, &h)) {
        snprintf(why, sizeof why, "%.150s is not on the allowlist (DNS)", q.name[0] ? q.name : ".");
        refused_name(gw, q.name, "not_allowed", why);
        return dns_answer(&q, DNS_RCODE_NXDOMAIN, 0, 0, out);
    }
    uint32_t a = synth_lookup_or_add(gw, q.name);
    if (!a) {
        snprintf(why, sizeof why, "more than %d distinct names in this run (DNS stub and proxy)",
                 SYNTH_MAX_NAMES);
        refused_name(gw, q.name, "budget:dns_names", why);
        return dns_answer(&q, DNS_RCODE_NXDOMAIN, 0, 0, out);
    }
    /* IPv4 only: AAAA and the rest get an empty answer, so clients fall back to A. */
    return dns_answer(&q, DNS_RCODE_NOERROR, q.qtype == DNS_TYPE_A ? a : 0, SYNTH_TTL, out);
}

static void on_dns(evutil_socket_t fd, short what, void *arg)
{
    struct gateway *gw = arg;
    (void)what;
    for (int i = 0; i < DNS_BURST; i++) {
        uint8_t in[1500], out[DNS_MAX_PACKET];
        struct sockaddr_storage from;
        socklen_t from_len = sizeof from;
        ssize_t n = recvfrom(fd, in, sizeof in, MSG_DONTWAIT, (struct sockaddr *)&from, &from_len);
        if (n < 0)
            return; /* EAGAIN: all read */
        size_t len = dns_respond(gw, in, (size_t)n, out);
        if (len)
            (void)!sendto(fd, out, len, MSG_DONTWAIT, (struct sockaddr *)&from, from_len);
    }
}

/* The first bytes of a transparent connection: a TLS ClientHello, or an HTTP head. */
static void sniff_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t avail = evbuffer_get_length(in);
    size_t want = avail < HELLO_MAX ? avail : HELLO_MAX;
    const uint8_t *p = evbuffer_pullup(in, (ssize_t)want);
    if (!p || !want)
        return;
    if (p[0] != 0x16) {
        /* Plain HTTP (or not even that: the head parser says which). */
        bufferevent_setcb(bev, conn_head_read, NULL, conn_head_event, c);
        conn_head_read(bev, c);
        return;
    }
    char sni[256];
    enum sni_result r = tls_client_hello_sni(p, want, sni, sizeof sni);
    if (r == SNI_MORE)
        return;
    bufferevent_disable(bev, EV_READ);
    snprintf(c->method, sizeof c->method, "TLS");
    c->raw_tls = true;
    if (r == SNI_BAD || r == SNI_NOT_TLS) {
        conn_refuse(c, 400, "bad_request", "not a TLS ClientHello the gateway can read");
        return;
    }
    if (!decide_tunnel_port(c->target.port)) {
        /* Passed through, the bytes after the ClientHello are no one's to check. */
        conn_refuse(c, 403, "connect_port",
                    "TLS to %s:%u is refused: port 80 takes plain HTTP, "
                    "checked request by request",
                    c->target.host_text, c->target.port);
        return;
    }
    /* To an address the client named, the address is what was decided: any name goes. */
    if (!c->target.host.is_ip && (r == SNI_NONE || strcmp(sni, c->target.host.name) != 0)) {
        conn_refuse(c, 403, "fronting", "TLS server name %s is not %s, the host %s stands for",
                    r == SNI_NONE ? "(none)" : sni, c->target.host_text, c->via);
        return;
    }
    conn_decide(c, NULL); /* the ClientHello is still in the input: it goes out first */
}

/* Cut C with a reset, not a clean close: the nearest to the refusal a port
 * nobody listened on would give. */
static void reset_refuse(struct conn *c, int fd, int status, const char *rule, const char *why)
{
    c->raw_tls = true;
    struct linger now = { .l_onoff = 1, .l_linger = 0 };
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
    conn_refuse(c, status, rule, "%s", why);
}

/*
 * C came to TO:PORT (a listener's address, or the one a relay's preface
 * names): for a synthetic address, the name the stub gave out for it is C's
 * target, and the first bytes must agree with it; any other address is C's
 * target itself (a client that named an address, handed over by a keeper or
 * a relay), decided at once as a CONNECT to it would be. A reset when
 * nothing may stand behind it.
 */
static void transparent_begin(struct conn *c, const struct ip_addr *to, uint16_t port, int fd)
{
    uint32_t v4 = 0;
    if (to->family == AF_INET)
        memcpy(&v4, to->bytes, 4);
    v4 = ntohl(v4);
    const char *name = to->family == AF_INET ? synth_name(c->gw, v4) : NULL;
    c->transparent = true;
    c->target.port = port;
    char addr[64] = "?";
    ip_addr_format(to, addr, sizeof addr);
    snprintf(c->via, sizeof c->via, "%.15s", addr);
    snprintf(c->target.host_text, sizeof c->target.host_text, "%s", addr);
    c->target.is_connect = true; /* until the first bytes say it is plain HTTP */
    if (name) {
        c->target.host.is_ip = false;
        snprintf(c->target.host.name, sizeof c->target.host.name, "%s", name);
        snprintf(c->target.host_text, sizeof c->target.host_text, "%s", name);
    } else if ((to->family == AF_INET && synth_in_range(v4)) || port == 0) {
        /* An address of the range the stub never gave out: nothing to stand for. */
        char why[120];
        snprintf(why, sizeof why, "%s:%u is no address the DNS stub gave out", addr, port);
        reset_refuse(c, fd, 403, "not_allowed", why);
        return;
    } else {
        c->target.host.is_ip = true;
        c->target.host.ip = *to;
        struct decision d;
        if (decide_literal(c->gw->cfg, &c->target, &d) < 0) {
            reset_refuse(c, fd, d.status, d.rule, d.reason);
            return;
        }
    }
    bufferevent_setcb(c->client, sniff_read, NULL, conn_head_event, c);
    if (evbuffer_get_length(bufferevent_get_input(c->client)) > 0)
        sniff_read(c->client, c);
}

static void on_port_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                           int len, void *arg)
{
    (void)l;
    (void)sa;
    (void)len;
    struct sockaddr_storage local = { 0 };
    socklen_t local_len = sizeof local;
    struct ip_addr to = { .family = AF_INET };
    uint16_t port = 0; /* 0.0.0.0:0: no name, no address */
    if (getsockname(fd, (struct sockaddr *)&local, &local_len) == 0 &&
        ip_addr_from_sockaddr((struct sockaddr *)&local, &to) == 0)
        port = ntohs(((struct sockaddr_in *)&local)->sin_port);
    struct conn *c = conn_start(arg, fd);
    if (c)
        transparent_begin(c, &to, port, fd);
}

/* A relay's DNS stream: length-prefixed queries in, answers out in order. */
static void dns_stream_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    for (;;) {
        uint8_t len_be[2], q[RELAY_DNS_MAX], out[2 + DNS_MAX_PACKET];
        if (evbuffer_copyout(in, len_be, 2) < 2)
            return;
        size_t n = (size_t)len_be[0] << 8 | len_be[1];
        if (n == 0 || n > sizeof q) {
            conn_free(c); /* no DNS message is that long here: not a relay speaking */
            return;
        }
        if (evbuffer_get_length(in) < 2 + n)
            return;
        evbuffer_drain(in, 2);
        evbuffer_remove(in, q, n);
        size_t len = dns_respond(c->gw, q, n, out + 2);
        /* An answer the relay does not read in time ends the stream, not our memory. */
        if (!len || evbuffer_get_length(bufferevent_get_output(bev)) > 64 * DNS_MAX_PACKET) {
            conn_free(c);
            return;
        }
        out[0] = (uint8_t)(len >> 8);
        out[1] = (uint8_t)len;
        bufferevent_write(bev, out, 2 + len);
        conn_arm_timer(c, DNS_STREAM_IDLE_MS);
    }
}

enum preface transparent_preface(const uint8_t *p, size_t n, size_t *len)
{
    size_t cmp = n < RELAY_MAGIC_LEN ? n : RELAY_MAGIC_LEN;
    if (memcmp(p, RELAY_MAGIC, cmp) != 0)
        return PREFACE_NONE;
    if (n <= RELAY_MAGIC_LEN)
        return PREFACE_MORE;
    switch (p[RELAY_MAGIC_LEN]) {
    case RELAY_DNS:
        *len = RELAY_MAGIC_LEN + 1;
        return PREFACE_DNS;
    case RELAY_TCP:
        *len = RELAY_PREFACE_TCP_LEN;
        return PREFACE_TCP;
    case RELAY_TCP6:
        *len = RELAY_PREFACE_TCP6_LEN;
        return PREFACE_TCP;
    default:
        return PREFACE_UNKNOWN;
    }
}

void transparent_relay_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    uint8_t pre[RELAY_PREFACE_MAX];
    size_t got = (size_t)evbuffer_copyout(in, pre, sizeof pre), want = 0;
    enum preface kind = transparent_preface(pre, got, &want);
    if (kind == PREFACE_NONE || kind == PREFACE_UNKNOWN) {
        snprintf(c->target.host_text, sizeof c->target.host_text, "-");
        conn_refuse(c, 400, "bad_request", "%s",
                    kind == PREFACE_NONE ? "not an HTTP request, nor a relay's preface"
                                         : "a relay's preface of an unknown kind");
        return;
    }
    if (kind == PREFACE_MORE || got < want)
        return;
    if (kind == PREFACE_DNS) {
        if (c->gw->dns_streams >= GATEWAY_DNS_STREAMS) {
            conn_refuse(c, 429, "budget:connections", "more than %d DNS streams at once",
                        GATEWAY_DNS_STREAMS);
            return;
        }
        evbuffer_drain(in, want);
        c->dns_stream = true;
        c->gw->dns_streams++;
        c->reported = true;       /* the stub records its own refusals */
        conn_head_done(c, false); /* not one of the connection cap's */
        conn_arm_timer(c, DNS_STREAM_IDLE_MS);
        bufferevent_setcb(bev, dns_stream_read, NULL, conn_head_event, c);
        dns_stream_read(bev, c);
        return;
    }
    bool v6 = pre[RELAY_MAGIC_LEN] == RELAY_TCP6;
    size_t alen = v6 ? 16 : 4;
    const uint8_t *a = pre + RELAY_MAGIC_LEN + 1;
    struct ip_addr to = { .family = v6 ? AF_INET6 : AF_INET };
    memcpy(to.bytes, a, alen); /* big-endian, as an address is kept */
    uint16_t port = (uint16_t)(a[alen] << 8 | a[alen + 1]);
    evbuffer_drain(in, want);
    transparent_begin(c, &to, port, bufferevent_getfd(bev));
}

void transparent_http(struct conn *c, struct http_request *req)
{
    c->target.is_connect = false;
    if (req->kind != HTTP_TARGET_ORIGIN || req->target_len >= sizeof c->target.path) {
        conn_refuse(c, 400, "bad_request", "expected an origin-form request for %s",
                    c->target.host_text);
        return;
    }
    if (!conn_host_names_target(c, req)) {
        conn_refuse(c, 403, "fronting", "the Host header does not name %s, the host %s stands for",
                    c->target.host_text, c->via);
        return;
    }
    memcpy(c->target.path, req->target, req->target_len);
    c->target.path[req->target_len] = '\0';
    conn_decide(c, req);
}

static void resume_port(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    evconnlistener_enable(arg);
}

/* accept() failed (out of descriptors): pause this listener rather than spin. */
static void port_accept_failed(struct evconnlistener *l, void *arg)
{
    struct gateway *gw = arg;
    struct timeval pause = ms_timeval(100);
    evconnlistener_disable(l);
    if (event_base_once(gw->base, -1, EV_TIMEOUT, resume_port, l, &pause) < 0)
        evconnlistener_enable(l);
}

int transparent_init(struct gateway *gw, const struct gateway_doors *doors, struct cordon_err *err)
{
    gw->dns_fd = doors->dns;
    gw->relay = doors->relay;
    if (doors->dns < 0)
        return 0; /* relays serve the stub and the addresses, or proxy only */
    evutil_make_socket_nonblocking(doors->dns);
    gw->dns_ev = event_new(gw->base, doors->dns, EV_READ | EV_PERSIST, on_dns, gw);
    if (!gw->dns_ev || event_add(gw->dns_ev, NULL) < 0)
        return err_set(err, CORDON_E_SETUP, "cannot serve the DNS stub");
    for (size_t i = 0; i < doors->n_ports && i < SYNTH_MAX_PORTS; i++) {
        evutil_make_socket_nonblocking(doors->ports[i]);
        struct evconnlistener *l = evconnlistener_new(gw->base, on_port_accept, gw,
                                                      LEV_OPT_CLOSE_ON_FREE, -1, doors->ports[i]);
        if (!l)
            return err_set(err, CORDON_E_SETUP, "cannot serve a transparent port");
        evconnlistener_set_error_cb(l, port_accept_failed);
        gw->ports[gw->n_ports++] = l;
    }
    return 0;
}

void transparent_fini(struct gateway *gw)
{
    for (size_t i = 0; i < gw->n_ports; i++)
        evconnlistener_free(gw->ports[i]);
    gw->n_ports = 0;
    if (gw->dns_ev)
        event_free(gw->dns_ev);
    gw->dns_ev = NULL;
    if (gw->dns_fd >= 0)
        close(gw->dns_fd);
    gw->dns_fd = -1;
}
