/*
 * egress/gateway_int.h: what the gateway's files share: the process
 * (struct gateway), one client connection (struct conn), and the steps each
 * file owns:
 *   gateway.c      the process, its connections, their heads and refusals,
 *                  resolving and connecting
 *   decide.c       the verdicts (pure)
 *   relay.c        relaying a request's body and its answer
 *   bulk.c         the relay's bulk path: splice(2) where nothing must be read
 *   tls.c          TLS interception, for hosts a secret is bound to
 *   credentials.c  secrets: their values, placeholders, swapping and exfiltration
 *   transparent.c  transparent egress: the DNS stub, connections to synthetic addresses
 */
#pragma once
#include "egress/decide.h"
#include "egress/gateway.h"
#include "egress/http.h"
#include "egress/scrub.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <jansson.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/time.h>

#define MAX_ADDRS 16
/* Connections at once when the policy sets no budget: well under the fds we have. */
#define GATEWAY_MAX_CONNECTIONS 256
/* Stop reading one side while the other has this much unsent. */
#define RELAY_HIGH_WATER (1024 * 1024)
#define RELAY_CHUNK (256 * 1024)
/* A whole request head must arrive within this of the accept, however slowly it trickles. */
#define HEAD_DEADLINE_MS 10000
/*
 * Connections still sending their request head, at once. Past it the oldest
 * is cut (429, or a reset where TLS was coming): slow or stalled heads never
 * take the run's connection cap, which counts only connections past their
 * head, and a request that arrives whole still gets through.
 */
#define HEAD_BUDGET 32
/*
 * Relays' DNS streams open at once: one per relay, and at the process level
 * one per UDP socket of the command's; more are the command's own, speaking
 * the preface (a bound on the fds and memory they take).
 */
#define GATEWAY_DNS_STREAMS 256
/* A relay's DNS stream (transparent.c) idle this long is closed; it dials another. */
#define DNS_STREAM_IDLE_MS 30000
/* Distinct names the DNS stub's refusals are recorded for, a run (transparent.c). */
#define DNS_REFUSED_MAX 1024
#define DNS_REFUSED_MAX_TEXT "1024"
/* For the door token, written with the connection by the run's dialer. */
#define DOOR_DEADLINE_MS 5000

struct gateway {
    const struct gateway_config *cfg;
    struct event_base *base;
    struct evdns_base *dns;
    int report_fd;
    struct budget budget;
    uint64_t active;                 /* connections open */
    uint64_t heads;                  /* of them, still sending their head (HEAD_BUDGET) */
    uint64_t held;                   /* of them, past their head: the connection cap counts these */
    unsigned dns_streams;            /* relays' DNS streams open (GATEWAY_DNS_STREAMS at most) */
    bool serve_one;                  /* cordon fetch: exit after the one connection */
    struct conn *conns;              /* open connections, reported when we are stopped */
    struct event *resume_accept;     /* re-enables accepting after a failed accept() */
    struct event *finish;            /* the end of the run, a moment after SIGTERM */
    struct evconnlistener *door;     /* the proxy's door: keepers' connections come there too */
    uint64_t term_us;                /* when SIGTERM came (0: not yet) */
    SSL_CTX *upstream_tls;           /* verifying client side of intercepted connections */
    struct scrub_pair *values;       /* secret i's value -> its placeholder */
    struct scrub_pair *placeholders; /* secret i's placeholder, to find in bodies */
    size_t n_pairs;
    json_t *run_allowed; /* "HOST:PORT" -> true: the decider allowed it for the run */
    /* Transparent egress (transparent.c): name i stands behind SYNTH_NET + 2 + i. */
    char (*synth)[254];
    size_t n_synth;
    int dns_fd;
    struct event *dns_ev;
    struct evconnlistener *ports[SYNTH_MAX_PORTS];
    size_t n_ports;
    uint64_t *refused; /* hashes of the names the stub refused and recorded */
    size_t n_refused;
    bool refused_capped; /* past the cap: recorded once that the rest are not */
    bool relay;          /* relays may open the proxy door with a preface (relay_wire.h) */
    uint64_t pipes_left; /* the bulk path's pipes still to be had (bulk.c) */
};

/*
 * A connection's states, and what moves it (every state has one timer, see
 * on_timer in gateway.c; any refusal goes to S_CLOSING by conn_refuse):
 *
 *   S_HEAD        reading a request head (or a door token, a relay preface,
 *                 a ClientHello at a transparent port); a checked head goes
 *                 to S_RESOLVING, or with a pinned name or a literal
 *                 address straight on as if resolved
 *   S_RESOLVING   the gateway's own lookup; the addresses are classified
 *                 (proceed), a refused class closes, a destination the
 *                 policy's ask rules name goes to S_ASKING, the rest to
 *                 S_CONNECTING
 *   S_ASKING      the decider's answer awaited (ask.c), asked only about
 *                 permitted addresses: allowed goes to S_CONNECTING, denied
 *                 or silent to S_CLOSING
 *   S_CONNECTING  one checked address after another (never a new lookup);
 *                 connected goes to S_RELAY (relay.c), or for an
 *                 intercepted tunnel back to S_HEAD for the inner request
 *                 (tls.c), which is checked as any head is
 *   S_RELAY       bytes both ways, bodies counted and scrubbed where a
 *                 secret is bound, spliced socket to socket where nothing
 *                 must be read (bulk.c); the upstream's end goes to S_CLOSING
 *   S_CLOSING     the answer or refusal flushed to the client, then freed
 */
/* One direction of the bulk path (bulk.c): a pipe of the connection's own. */
struct pump {
    int r, w;          /* the pipe, once MADE */
    bool made, failed; /* FAILED: none could be had; that direction copies */
    bool cut;          /* the byte budget ran out in the pass HELD is from */
    size_t held;       /* bytes in the pipe not yet passed on */
    struct event *wev; /* the destination's writability, while HELD */
};

enum conn_state { S_HEAD, S_RESOLVING, S_ASKING, S_CONNECTING, S_RELAY, S_CLOSING };
enum body_kind { BODY_NONE, BODY_LENGTH, BODY_CHUNKED };
enum chunk_state { CHUNK_SIZE, CHUNK_DATA, CHUNK_DATA_END, CHUNK_TRAILER, CHUNK_DONE };

struct conn {
    struct gateway *gw;
    struct conn *next, **pprev;
    struct bufferevent *client, *upstream;
    struct event *client_rev, *upstream_rev; /* relay reads, done by us (see on_readable) */
    struct event *timer;        /* head and linger deadlines; idle time while relaying */
    struct event *flush_ev;     /* re-checks that a TLS answer reached the socket */
    struct evbuffer *client_in; /* client bytes not yet forwarded (partial chunk framing) */
    struct pump down, up;       /* the bulk path (bulk.c): answer bytes, request bytes */
    bool client_eof;            /* the client half-closed after a complete request */
    bool intercept;             /* CONNECT to a host a secret is bound to: TLS ends here */
    bool inspect;               /* only request rules allow the tunnel: each request decided */
    bool inner;                 /* reading the request inside an intercepted tunnel */
    bool door_pending;          /* the run's door token has not arrived yet */
    bool transparent;         /* came to a synthetic address: TARGET's host is the name behind it */
    bool raw_tls;             /* transparent TLS passed through: a refusal only closes */
    char via[16];             /* transparent: the synthetic address it came to */
    bool dns_stream;          /* a relay's DNS stream: answers, never a decision */
    bool in_head;             /* counted in gw->heads */
    bool cut;                 /* by the head budget, before its client's first byte came */
    bool held;                /* counted in gw->held */
    uint64_t secrets_used;    /* bit i: secret i's value was swapped in */
    uint64_t foreign;         /* bit i: secret i is not bound here (its placeholder stays in) */
    uint64_t scrubbed;        /* bit i: secret i's value was taken out of the answer */
    char *basic_real;         /* Basic credentials with values in, as sent upstream; or NULL */
    char *basic_client;       /* the same as the client sent them (placeholders) */
    struct scrub_pair *pairs; /* the values' pairs and the Basic one, for C's answer */
    struct scrub_answer *answer; /* the answer, parsed and scrubbed (with secrets, in plaintext) */
    struct scrub_finder find_body; /* foreign placeholders in the request body's data */
    enum conn_state state;
    char method[24];
    struct target target;
    struct ip_addr addrs[MAX_ADDRS];
    size_t n_addrs, next_addr;
    struct evdns_getaddrinfo_request *dns_req;
    enum body_kind body;
    uint64_t body_left;
    enum chunk_state chunk;
    bool body_done;
    uint64_t up_bytes, down_bytes;
    uint64_t lingered; /* swallowed after our answer, before closing (LINGER_BYTES) */
    uint64_t started_us;
    int status; /* what we answered, or 200 once relaying */
    bool allowed;
    char rule[EGRESS_RULE_TEXT_MAX + 16];
    char reason[200];
    bool reported;
    bool ask;              /* network.ask: connect only if the decider allows it */
    struct asking *asking; /* the question under way (ask.c) */
};

/* ---- gateway.c ---- */

uint64_t gateway_now_us(void);
struct timeval ms_timeval(unsigned ms);

/* The parsed head, kept with the connection until the upstream head is sent. */
struct http_request *conn_request(struct conn *c);
/* One JSON line to the supervisor (EV is consumed). */
void gateway_report(struct gateway *gw, json_t *ev);
/* Connect to C's checked addresses, one after the other. */
void conn_connect(struct conn *c);
/* Report C (once) and free it. */
void conn_free(struct conn *c);
/* (Re)arm C's one timer: a deadline, or idle time when re-armed on activity. */
void conn_arm_timer(struct conn *c, unsigned ms);
/* Answer STATUS and close: every refusal ends here. */
void conn_refuse(struct conn *c, int status, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Bufferevent callbacks: close C once its output is out; free it when the client goes. */
void conn_close_when_flushed(struct bufferevent *bev, void *arg);
void conn_closing_event(struct bufferevent *bev, short what, void *arg);
/* A connection accepted on FD; NULL when it could not be set up (FD closed). */
struct conn *conn_start(struct gateway *gw, evutil_socket_t fd);
/* C's head is in: it leaves the head budget and, when HOLD, takes a place
 * under the connection cap; false when the cap refused it (C is closing). */
bool conn_head_done(struct conn *c, bool hold);
/* The absolute head deadline (HEAD_DEADLINE_MS from the accept), armed again. */
void conn_arm_head_deadline(struct conn *c);
/* C's target is set (and REQ, a plain request's head, or NULL for a tunnel):
 * the budgets and rules, its secrets, then resolving and connecting. */
void conn_decide(struct conn *c, struct http_request *req);
/* Does REQ's Host header name C's target (its port, when it has one)? */
bool conn_host_names_target(const struct conn *c, const struct http_request *req);
/* Bufferevent callbacks reading a request head (also inside a tunnel). */
void conn_head_read(struct bufferevent *bev, void *arg);
void conn_head_event(struct bufferevent *bev, short what, void *arg);

/* ---- transparent.c ---- */

/* The DNS stub and the synthetic addresses' listeners, on the loop. */
int transparent_init(struct gateway *gw, const struct gateway_doors *doors, struct cordon_err *err);
void transparent_fini(struct gateway *gw);
/*
 * May the gateway's resolver be asked about NAME? A name counts once a run,
 * given an address by the stub or asked for through the proxy: past
 * SYNTH_MAX_NAMES distinct names no query leaves, so a wildcard rule is no
 * channel for arbitrary labels through either door.
 */
bool transparent_name_counted(struct gateway *gw, const char *name);
/* A connection opening with a NUL on a door relays may use: their preface
 * (see common/relay_wire.h), read from the client's input. */
void transparent_relay_read(struct bufferevent *bev, void *arg);
/* What N bytes P open with, as a relay's preface (relay_wire.h) frames it. */
enum preface {
    PREFACE_NONE,    /* not a preface: its magic is not a relay's */
    PREFACE_MORE,    /* the magic so far: its kind has not come */
    PREFACE_UNKNOWN, /* a kind no relay sends */
    PREFACE_DNS,     /* a DNS stream's, or a connection's to an address: */
    PREFACE_TCP,     /*   *LEN bytes long in all, perhaps more than N */
};
enum preface transparent_preface(const uint8_t *p, size_t n, size_t *len);
/* A plain request on a transparent connection: its Host must name the host
 * behind the address. */
void transparent_http(struct conn *c, struct http_request *req);

/* ---- ask.c ---- */

/* C's destination is network.ask and its addresses passed: ask the decider,
 * then connect or refuse. The loop goes on meanwhile. */
void ask_start(struct conn *c);
/* The answer is later than the decider's deadline and a grace: deny. */
void ask_timeout(struct conn *c);
/* C goes: the question with it. */
void ask_stop(struct conn *c);

/* ---- relay.c ---- */

/* The upstream is connected and the request allowed: relay both ways. */
void relay_start(struct conn *c);
/* A plain request's method, what it asks another method of, and its body's framing, into C. */
void relay_take_request(struct conn *c, const struct http_request *req);
/* The upstream head: origin-form, hop-by-hop headers dropped, Host set. */
void relay_send_head(struct conn *c, const struct http_request *req);
/* Client bytes in IN: the request body's part goes upstream, nothing after it. */
void relay_client_data(struct conn *c, struct evbuffer *in);
/* Answer bytes from the server (scrubbed with secrets); false when C is gone. */
bool relay_answer_bytes(struct conn *c, const char *buf, size_t n);
/* The server closed; false when C is gone. */
bool relay_answer_eof(struct conn *c);
/* Free our own read events (before refusing, which frees the upstream). */
void relay_stop_reading(struct conn *c);
/* End C, with WHY as its reason unless it has one. */
void relay_end(struct conn *c, const char *why);

/* The server is done (EOF, an error, or the budget cut it): flush, then close. */
void relay_upstream_done(struct conn *c);

/* ---- bulk.c ---- */

/*
 * The upstream is readable: splice what it has to the client if nothing
 * must read it (false: the copying path reads it).
 */
bool bulk_down(struct conn *c);
/* The client is readable: likewise towards the upstream. */
bool bulk_up(struct conn *c);
/* The pipes and their events go (the upstream is gone, or C). */
void bulk_release(struct conn *c);

/* ---- tls.c ---- */

/* The trust store intercepted servers are verified with; with a mint only. */
int tls_init(struct gateway *gw, struct cordon_err *err);
void tls_fini(struct gateway *gw);
/* The tunnel is connected: TLS to both sides, then read the request inside. */
void tls_intercept_start(struct conn *c);
/* The request inside was checked and sent: relay its body and the answer. */
void tls_relay_start(struct conn *c);
/* The server's TLS failed, or it finished. */
void tls_upstream_done(struct conn *c, short what);

/* ---- credentials.c ---- */

/* The values and placeholders of P's secrets, and the run's CA, into OUT. */
int credentials_load(const struct policy *p, struct gateway_config *out, char *why, size_t why_len);
/* Wipe and free what credentials_load() made. */
void credentials_release(struct gateway_config *cfg);
/* The scrubber's pairs for the gateway's process. */
int credentials_init(struct gateway *gw, struct cordon_err *err);
void credentials_fini(struct gateway *gw);
/* The names of the secrets in MASK, as a JSON array (values never leave). */
json_t *credentials_names(const struct gateway_config *cfg, uint64_t mask);
/* Is any secret bound to C's destination? (Then its TLS is intercepted.) */
bool credentials_bound_here(const struct conn *c);
/* The request's placeholders: swapped where bound, refused elsewhere; false when refused. */
bool credentials_check(struct conn *c, const struct http_request *req);
/* A header value on its way upstream, with bound placeholders replaced by values. */
void credentials_add_value(struct conn *c, struct evbuffer *out, const char *v, size_t n);
/* The index of a secret whose placeholder must not go here, in body data or a framing line; -1. */
int credentials_body_exfil(struct conn *c, struct evbuffer *in, size_t from, size_t len);
int credentials_line_exfil(const struct conn *c, const char *line, size_t len);
/*
 * Basic credentials in REQ holding a bound placeholder: decoded, swapped
 * and encoded again into C->basic_real (sent upstream instead), with the
 * client's own text kept to scrub the answer with. Before
 * credentials_scrub_answer().
 */
void credentials_prepare_basic(struct conn *c, const struct http_request *req);
/* With secrets, REQ's answer is parsed and scrubbed of their values on its way
 * back (C->answer); to a host one is BOUND to, an encoded body is refused. */
void credentials_scrub_answer(struct conn *c, const struct http_request *req, bool bound);
/* The secrets whose values C's answer carried and lost (Basic credentials too). */
uint64_t credentials_scrubbed(const struct conn *c);
/* A placeholder in the body for a host it is not bound to: refuse, or cut. */
void credentials_refuse_exfil(struct conn *c, size_t secret);
