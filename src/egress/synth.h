/*
 * egress/synth.h: transparent egress, the parts without I/O. The sandbox's
 * DNS stub answers a name the policy allows with an address from a reserved
 * synthetic range (one per name per run) and refuses the rest; a TCP
 * connection to such an address reaches the gateway, which reads the name
 * back from the address and checks that the client's TLS SNI or Host header
 * names it. Parsers of bytes the sandbox chose: bounded, no compression in a
 * question, no allocation. The fuzz target drives them directly.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNS_TYPE_A 1
#define DNS_TYPE_AAAA 28
#define DNS_CLASS_IN 1
#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_FORMERR 1
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_NOTIMP 4
#define DNS_MAX_PACKET 512

struct dns_query {
    uint16_t id;
    uint16_t flags; /* as sent: opcode and RD are echoed */
    char name[254]; /* lower case, dotted, no trailing dot; "" for the root */
    uint16_t qtype, qclass;
    size_t question_len; /* bytes of the question after the header */
};

/*
 * Read a query: one question, opcode QUERY, a name of plain labels (a
 * compression pointer, an over-long label or name, a truncated packet or a
 * response is refused). 0 when it is a query we can answer; -1 with *RCODE
 * what to answer (FORMERR, NOTIMP), or -1 with *RCODE -1 when the packet is
 * too broken to answer at all (shorter than a header, or a response).
 */
int dns_parse_query(const uint8_t *pkt, size_t len, struct dns_query *q, int *rcode);

/*
 * The answer to Q into OUT (at least DNS_MAX_PACKET bytes): RCODE, and when
 * A is not 0, one A record for the question's name with the address A (host
 * order) and TTL. Its length.
 */
size_t dns_answer(const struct dns_query *q, int rcode, uint32_t a, uint32_t ttl, uint8_t *out);

/*
 * An answer with only a header (the question could not be read): ID and
 * RCODE. Its length (12).
 */
size_t dns_answer_bare(uint16_t id, uint16_t flags, int rcode, uint8_t *out);

enum sni_result {
    SNI_FOUND,   /* NAME holds the server name (lower case) */
    SNI_NONE,    /* a complete ClientHello without a server name */
    SNI_MORE,    /* not enough bytes yet */
    SNI_NOT_TLS, /* not a TLS handshake record */
    SNI_BAD,     /* a malformed or over-long ClientHello */
};

/*
 * The server name of the TLS ClientHello at the start of BUF (the first
 * record must hold the whole hello: 16 KiB is a record's limit and far
 * beyond any hello seen in practice).
 */
enum sni_result tls_client_hello_sni(const uint8_t *buf, size_t len, char *name, size_t size);

/* Is the IPv4 address A (host order) in the synthetic range? */
bool synth_in_range(uint32_t a);
