/*
 * policy/rules.h: the gateway's allow/deny rules and name pins, parsed once
 * from their text ("api.example.com", "*.example.com:8443", "10.0.0.0/8",
 * "[::1]:80") and matched against each request's destination. The policy
 * validates with the same parser it will be enforced with. Pure.
 */
#pragma once
#include "common/addr.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum egress_rule_kind {
    EGRESS_RULE_NAME,   /* exact host name */
    EGRESS_RULE_SUFFIX, /* "*.example.com": any name strictly below example.com */
    EGRESS_RULE_IP,     /* one address */
    EGRESS_RULE_CIDR,   /* a range */
};

/* The methods a rule may name, one bit each (EGRESS_METHOD_GET is 1 << 0, ...). */
enum egress_method {
    EGRESS_METHOD_GET,
    EGRESS_METHOD_HEAD,
    EGRESS_METHOD_POST,
    EGRESS_METHOD_PUT,
    EGRESS_METHOD_PATCH,
    EGRESS_METHOD_DELETE,
    EGRESS_METHOD_OPTIONS,
    EGRESS_METHOD_COUNT,
};

/* A rule's path prefix, at most this long. */
#define EGRESS_PATH_MAX 200
/* A rule's canonical text, at most this long (with its NUL). */
#define EGRESS_RULE_TEXT_MAX 512

struct egress_rule {
    enum egress_rule_kind kind;
    char name[256];   /* NAME: the name; SUFFIX: ".example.com" */
    struct cidr cidr; /* IP (as a host route) and CIDR */
    uint16_t port;    /* 0: the default ports, 80 and 443 */
    /*
     * A request rule (network.allow only): the request must also be one of
     * METHODS (bits of enum egress_method; 0: any) for a path under PATH
     * (segment by segment, "*" standing for one whole segment; "": any).
     * The gateway can hold a request to it only where it reads requests:
     * plain HTTP, and TLS it intercepts (it does, for a host only such
     * rules allow).
     */
    unsigned methods;
    char path[EGRESS_PATH_MAX + 1];
};

/*
 * Parse [METHOD[,METHOD...] ]HOST[:PORT][/PATH]: a name, "*.suffix", an IPv4
 * literal, "[v6]", a CIDR ("10.0.0.0/8", "[fd00::]/8"), then optionally
 * ":PORT" (1..65535); before it, methods (GET, HEAD, POST, PUT, PATCH,
 * DELETE, OPTIONS) and a space; after it, a path prefix ("/-/v1/search"; a
 * segment that is "*" stands for any one; after an address, "/" and digits
 * are its prefix length): "GET,HEAD registry.npmjs.org/-/v1".
 */
int egress_rule_parse(const char *spec, struct egress_rule *out, char *why, size_t why_len);

/* Does R hold requests to a method or a path (a request rule)? */
bool egress_rule_is_request_rule(const struct egress_rule *r);

/*
 * Does request rule (or plain rule) R cover METHOD to PATH (origin-form, a
 * query after '?' ignored) on a destination it matches? A path that could
 * be read two ways (dot segments, "//", an escaped '/', '.' or '\\', a
 * backslash) is under no path prefix.
 */
bool egress_rule_matches_request(const struct egress_rule *r, const char *method, const char *path);

/* The canonical text of R (what the policy stores and the audit shows). */
void egress_rule_format(const struct egress_rule *r, char *out, size_t size);

/* Does R cover a request for HOST (as the client named it) on PORT? */
bool egress_rule_matches_host(const struct egress_rule *r, const struct host *host, uint16_t port);

/* Does R cover the resolved address A on PORT? (IP and CIDR rules only.) */
bool egress_rule_matches_addr(const struct egress_rule *r, const struct ip_addr *a, uint16_t port);

/* A --resolve pin "HOST=IP". */
struct egress_pin {
    char name[256];
    struct ip_addr ip;
};

int egress_pin_parse(const char *spec, struct egress_pin *out, char *why, size_t why_len);

/* A run's rules, parsed: what the policy holds and the gateway enforces. */
struct egress_rules {
    struct egress_rule *allow;
    size_t n_allow;
    struct egress_rule *deny;
    size_t n_deny;
    struct egress_rule *ask; /* not allowed, but the decider may allow it now */
    size_t n_ask;
    struct cidr *allow_private; /* let through the SSRF rules */
    size_t n_allow_private;
    struct egress_pin *pins;
    size_t n_pins;
};

/* A deep copy of FROM (no list NULL, even an empty one); -1 when out of memory. */
int egress_rules_copy(const struct egress_rules *from, struct egress_rules *out);
void egress_rules_release(struct egress_rules *r);

/* The ports a name may be reached on by R's allow and ask rules (a rule
 * without one: 80 and 443), each once, at most MAX into PORTS; their count. */
size_t egress_rules_name_ports(const struct egress_rules *r, uint16_t *ports, size_t max);

/*
 * Could R let a connection to the address A on PORT through (an address,
 * not a name: a client's literal)? Not denied, covered by an allow or ask
 * rule, and of a public class or in an allowed private range. The gateway
 * decides each connection again; a keeper asks this to know which to hand
 * to it (sandbox/door.h).
 */
bool egress_rules_admit_addr(const struct egress_rules *r, const struct ip_addr *a, uint16_t port);

/*
 * For a relay that cannot see a connect() (gvisor's netstack, a microvm
 * guest): the IPv4 ranges of R's allow rules it makes its own, so that a
 * connection to one lands on its listeners (loopback is its own already),
 * at most MAX into NETS (host order) and PREFIXES; their count. Their ports
 * are added to PORTS (N of MAX used) as egress_rules_name_ports() gives them;
 * the new count into *N.
 */
size_t egress_rules_literal_v4(const struct egress_rules *r, uint32_t *nets, unsigned *prefixes,
                               size_t max, uint16_t *ports, size_t *n, size_t max_ports);
