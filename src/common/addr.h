/*
 * common/addr.h: how the gateway reads destinations: hosts, authorities and
 * URLs parsed the way clients parse them (every IPv4 literal spelling,
 * bracketed IPv6 with zones, trailing dots, percent-encoding, userinfo), and
 * addresses classified into the ranges the SSRF rules refuse. Pure: no
 * syscalls, no DNS.
 */
#pragma once
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* One address, either family, as the gateway stores and compares it. */
struct ip_addr {
    int family;        /* AF_INET or AF_INET6 */
    uint8_t bytes[16]; /* network order; the first 4 for AF_INET */
    uint32_t scope_id; /* IPv6 zone, 0 when none */
};

enum addr_class {
    ADDR_PUBLIC,        /* routable: the only class allowed by default */
    ADDR_UNSPECIFIED,   /* 0.0.0.0, :: */
    ADDR_THIS_NETWORK,  /* 0.0.0.0/8 */
    ADDR_LOOPBACK,      /* 127.0.0.0/8, ::1 */
    ADDR_PRIVATE,       /* 10/8, 172.16/12, 192.168/16 */
    ADDR_CGNAT,         /* 100.64.0.0/10 */
    ADDR_LINK_LOCAL,    /* 169.254.0.0/16 (cloud metadata), fe80::/10 */
    ADDR_ULA,           /* fc00::/7 */
    ADDR_MULTICAST,     /* 224.0.0.0/4, ff00::/8 */
    ADDR_BROADCAST,     /* 255.255.255.255 */
    ADDR_DOCUMENTATION, /* 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32 */
    ADDR_BENCHMARK,     /* 198.18.0.0/15 */
    ADDR_RESERVED,      /* 240.0.0.0/4, 192.0.0.0/24, other IETF special-purpose */
    ADDR_CLASS_COUNT,
};

/* "public", "loopback", "private", "link_local", ... (stable: audit reasons use them). */
const char *addr_class_name(enum addr_class c);

/*
 * The class of A. IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d),
 * NAT64 (64:ff9b::/96, 64:ff9b:1::/48 in its /96 layout) and 6to4 (2002::/16)
 * forms that embed an IPv4 address are classified by the embedded address (so
 * ::ffff:127.0.0.1 is loopback). Teredo hides its address, so it is reserved
 * with the rest of 2001::/23, as is all IPv6 outside 2000::/3 not named above.
 */
enum addr_class addr_classify(const struct ip_addr *a);

/* A from/to a socket address; -1 for other families. */
int ip_addr_from_sockaddr(const struct sockaddr *sa, struct ip_addr *out);
void ip_addr_to_sockaddr(const struct ip_addr *a, uint16_t port, struct sockaddr_storage *out,
                         socklen_t *len);

/* "127.0.0.1", "::1", "fe80::1%2" into OUT (size >= 64). */
void ip_addr_format(const struct ip_addr *a, char *out, size_t size);

/* As ip_addr_format, IPv6 in brackets ("[::1]"): the form a host takes in
 * an authority, a rule or a pin. */
void ip_addr_format_bracketed(const struct ip_addr *a, char *out, size_t size);

struct cidr {
    struct ip_addr base; /* masked */
    unsigned prefix;     /* 0..32 or 0..128 */
};

/* "10.0.0.0/8", "127.0.0.2/32", "fd00::/8", or a bare address (/32, /128). */
int cidr_parse(const char *s, struct cidr *out, char *why, size_t why_len);
/* An IPv4-mapped IPv6 address matches an IPv4 CIDR and vice versa. */
bool cidr_contains(const struct cidr *c, const struct ip_addr *a);

/* A host as a client would read it. */
struct host {
    bool is_ip;        /* an IP literal in any spelling */
    struct ip_addr ip; /* when is_ip */
    char name[256];    /* lower-case, percent-decoded, no trailing dot; when !is_ip */
};

/*
 * Parse the host part of an authority (no port, no userinfo): IPv4 in every
 * form inet_aton() and WHATWG URL parsers accept ("127.1", "0x7f.1",
 * "0177.0.0.1", "2130706433"), "[v6]" and "[v6%zone]" (also "%25zone"),
 * percent-encoding (decoded first), a single trailing dot, upper case.
 * Refuses empty hosts, control bytes, spaces, and characters no DNS name or
 * literal can hold. WHY gets a short reason.
 */
/* Is NAME (lower case, no trailing dot) "localhost" or below it (RFC 6761: loopback)? */
bool host_is_localhost(const char *name);

int host_parse(const char *in, size_t len, struct host *out, char *why, size_t why_len);

/* H as it goes in an authority or a Host header: the name, or the address
 * (bracketed when IPv6). */
void host_format(const struct host *h, char *out, size_t size);

struct authority {
    struct host host;
    uint16_t port;     /* 0 when absent */
    bool has_userinfo; /* "user:pass@" was present (and is ignored for routing) */
};

/* "host", "host:port", "user@host:port", "[v6]:port". */
int authority_parse(const char *in, size_t len, struct authority *out, char *why, size_t why_len);

struct url {
    bool https; /* scheme https (else http) */
    struct authority authority;
    uint16_t port;   /* authority port, or 80/443 by scheme */
    char path[4096]; /* origin-form: "/path?query" ("/" when empty), fragment dropped */
};

/* An absolute http:// or https:// URL (scheme case-insensitive). */
int url_parse(const char *in, struct url *out, char *why, size_t why_len);
