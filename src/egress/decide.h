/*
 * egress/decide.h: what the gateway lets through, decided without I/O: the
 * request's target, the budgets, the deny and allow rules, the pins and the
 * address classes, each giving a verdict with the rule and the reason that
 * the audit records. No sockets, no clock, no event loop: the unit test
 * drives it directly.
 */
#pragma once
#include "common/addr.h"
#include "common/decider.h"
#include "egress/gateway.h"
#include "egress/http.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Written whole by each decide_*() that fills one, whatever it answers. */
struct decision {
    bool allowed;
    bool ask; /* allowed only if the decider allows it (rule "ask:...") */
    /* A tunnel only request rules allow (policy/rules.h): its TLS must be
     * intercepted, and each request inside decided (decide_inner()). */
    bool inspect;
    int status;                           /* the HTTP status a refusal answers with */
    char rule[EGRESS_RULE_TEXT_MAX + 16]; /* "allow:api.example.com", "deny:...", "ssrf:loopback" */
    char reason[200];                     /* one line for the client and the audit log */
};

/* Where a request goes, read from its target. */
struct target {
    bool is_connect; /* CONNECT host:port (else an absolute http:// URI) */
    struct host host;
    char host_text[300]; /* the host as reported; the target as written when unreadable */
    uint16_t port;
    char method[24]; /* a plain request's ("" for a tunnel) */
    /* It names another method for the server to take (X-HTTP-Method-Override
     * and its kin): no rule that holds the methods covers it. */
    bool method_override;
    char path[4096]; /* origin-form, for a plain request */
};

/* The budgets' running counts, over every connection of the run. */
struct budget {
    uint64_t requests;
    uint64_t bytes; /* both directions; the relays count them */
    double tokens;  /* request_rate bucket */
    uint64_t tokens_at_us;
};

/* A full bucket at NOW_US. */
void budget_init(struct budget *b, const struct gateway_config *cfg, uint64_t now_us);

/*
 * May a tunnel (CONNECT, or TLS passed through on a transparent port) go to
 * PORT? Not to 80: bytes passed through there could carry plain HTTP past
 * the per-request checks (Host, one request per connection, budgets, audit).
 */
bool decide_tunnel_port(unsigned port);

/*
 * Read REQ's target: CONNECT host:port (refused where decide_tunnel_port()
 * says so), or an absolute http:// URI.
 * 0 with T filled; -1 with D a refusal (T's host_text still set).
 */
int decide_target(const struct http_request *req, struct target *t, struct decision *d);

/*
 * Before anything reaches out: the request, rate and byte budgets (a
 * request that passes them is counted in B), then the denylist and the
 * allowlist by name, or by address for an IP literal. A plain request
 * (T's method set) must be covered whole, method and path; a tunnel by
 * any rule for its destination (D's inspect set when only request rules
 * are). 0 when allowed.
 */
int decide_request(const struct gateway_config *cfg, struct budget *b, const struct target *t,
                   uint64_t now_us, struct decision *d);

/*
 * A connection a client made to an address (T's host is an IP), carried to
 * the gateway transparently: could any rule take it? Not denied, on an
 * allow or ask rule, and of an allowed address class. Decided at once, so
 * a refused one is cut before the client sends a byte; an admitted one is
 * decided again in full (budgets, method) when its first bytes come. 0
 * when admitted.
 */
int decide_literal(const struct gateway_config *cfg, const struct target *t, struct decision *d);

/*
 * A request inside a tunnel decide_request() let through to be inspected:
 * T's method and path must be covered by an allow rule for its destination
 * (else 403 method_not_allowed). 0 when allowed.
 */
int decide_inner(const struct gateway_config *cfg, const struct target *t, struct decision *d);

/*
 * The decider's answer about an `ask` destination (after its addresses
 * passed): allowed for allow_once, allow_run and allow_session, else a 403
 * whose rule says how: decider_denied (it said deny), decider_timeout (no
 * answer in time) or decider_failed (unreachable, crashed, garbage).
 */
int decide_answer(const struct target *t, enum decider_decision decision, bool failed,
                  const char *reason, struct decision *d);

/* The pinned addresses of NAME (--resolve), at most MAX into ADDRS; their count. */
size_t decide_pins(const struct gateway_config *cfg, const char *name, struct ip_addr *addrs,
                   size_t max);

/*
 * After resolving: every address must pass the denylist and the address
 * classes (only public ones, unless network.allow_private lets a range
 * through). One bad address refuses the request, so a mixed answer cannot
 * be used to reach inside. 0 when allowed, with D's rule the allow rule
 * ("" when only an ask rule covers the name).
 */
int decide_addresses(const struct gateway_config *cfg, const struct target *t,
                     const struct ip_addr *addrs, size_t n, struct decision *d);

/*
 * Does the DNS stub give NAME an address? When an allow or ask rule covers
 * it on one of the rule's ports and the denylist does not on that port.
 * (The connection is decided again, as a request, when it comes.)
 */
bool decide_name(const struct gateway_config *cfg, const struct host *name);

/*
 * The one line a person is told of a decision the gateway reported
 * (METHOD, HOST, PORT, RULE, STATUS as in its record), saying what was
 * refused and what would allow it: "registry.npmjs.org (no rule; --allow
 * registry.npmjs.org)". NET_NONE: the run has no network (--net none),
 * which an --allow would change. Empty for an allowed decision.
 */
void decide_notice(const char *method, const char *host, unsigned port, const char *rule,
                   int status, bool net_none, char *out, size_t len);
