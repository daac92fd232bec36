/*
 * tests/unit/test_synth.c: transparent egress's parsers of sandbox bytes:
 * DNS queries (what the stub answers, and what it refuses to read) and the
 * server name of a TLS ClientHello, each case a row; and the stub's answer
 * read back as a resolver would.
 */
#include "egress/synth.h"
#include "policy/policy.h"
#include "tap.h"

#include <stdio.h>
#include <string.h>

#define N(a) (sizeof a / sizeof a[0])

/* A query: header (ID 0x1234, FLAGS, QDCOUNT), then BODY as given. */
static size_t query(uint8_t *out, uint16_t flags, uint16_t qd, const char *body, size_t body_len)
{
    uint8_t h[12] = { 0x12, 0x34, (uint8_t)(flags >> 8), (uint8_t)flags, 0, (uint8_t)qd };
    memcpy(out, h, 12);
    memcpy(out + 12, body, body_len);
    return 12 + body_len;
}

#define Q(s) s, sizeof s - 1
#define A_IN "\0\1\0\1"

static void test_dns_queries(void)
{
    static const struct {
        const char *what;
        uint16_t flags, qd;
        const char *body;
        size_t body_len;
        int ret, rcode;
        const char *name;
        uint16_t qtype;
    } rows[] = {
        { "an A query", 0x0100, 1, Q("\3api\7Example\3com\0" A_IN), 0, 0, "api.example.com", 1 },
        { "an AAAA query", 0x0100, 1, Q("\3api\3com\0\0\x1c\0\1"), 0, 0, "api.com", 28 },
        { "the root", 0x0100, 1, Q("\0" A_IN), 0, 0, "", 1 },
        { "a compression pointer", 0x0100, 1, Q("\3api\xc0\x0c" A_IN), -1, DNS_RCODE_FORMERR, "",
          0 },
        { "a reserved label type", 0x0100, 1,
          Q("\x40"
            "abc\0" A_IN),
          -1, DNS_RCODE_FORMERR, "", 0 },
        { "a label past the end", 0x0100, 1,
          Q("\x20"
            "abc"),
          -1, DNS_RCODE_FORMERR, "", 0 },
        { "no type and class", 0x0100, 1, Q("\3api\0\0"), -1, DNS_RCODE_FORMERR, "", 0 },
        { "no terminating label", 0x0100, 1, Q("\3api"), -1, DNS_RCODE_FORMERR, "", 0 },
        { "a dot inside a label", 0x0100, 1, Q("\3a.b\3com\0" A_IN), -1, DNS_RCODE_FORMERR, "", 0 },
        { "a NUL inside a label", 0x0100, 1, Q("\3a\0b\0" A_IN), -1, DNS_RCODE_FORMERR, "", 0 },
        { "two questions", 0x0100, 2, Q("\1a\0" A_IN "\1b\0" A_IN), -1, DNS_RCODE_FORMERR, "", 0 },
        { "no question", 0x0100, 0, Q(""), -1, DNS_RCODE_FORMERR, "", 0 },
        { "opcode STATUS", 0x1000, 1, Q("\1a\0" A_IN), -1, DNS_RCODE_NOTIMP, "", 0 },
        { "a response", 0x8180, 1, Q("\1a\0" A_IN), -1, -1, "", 0 },
    };
    for (size_t i = 0; i < N(rows); i++) {
        uint8_t pkt[600];
        size_t len = query(pkt, rows[i].flags, rows[i].qd, rows[i].body, rows[i].body_len);
        struct dns_query q;
        int rcode;
        int r = dns_parse_query(pkt, len, &q, &rcode);
        ok(r == rows[i].ret && (r == 0 || rcode == rows[i].rcode), "dns: %s (%d, rcode %d)",
           rows[i].what, r, rcode);
        if (r == 0) {
            is_str(q.name, rows[i].name, rows[i].what);
            ok(q.qtype == rows[i].qtype && q.id == 0x1234, "dns: %s: type and id", rows[i].what);
        }
    }
    /* Shorter than a header: nothing to answer. */
    struct dns_query q;
    int rcode;
    ok(dns_parse_query((const uint8_t *)"\x12\x34\x01", 3, &q, &rcode) < 0 && rcode == -1,
       "dns: a short packet is dropped");
    /* A name of 63-byte labels past 253 bytes is refused; one just under is read. */
    uint8_t body[400];
    size_t n = 0;
    for (int l = 0; l < 4; l++) {
        body[n++] = 63;
        memset(body + n, 'a', 63);
        n += 63;
    }
    memcpy(body + n, "\0" A_IN, 5);
    uint8_t pkt[600];
    size_t len = query(pkt, 0x0100, 1, (const char *)body, n + 5);
    ok(dns_parse_query(pkt, len, &q, &rcode) < 0 && rcode == DNS_RCODE_FORMERR,
       "dns: a 255-byte name is refused");
    body[3 * 64] = 61; /* 3 x 63 + 61 + 3 dots = 253 */
    memcpy(body + 3 * 64 + 1 + 61, "\0" A_IN, 5);
    len = query(pkt, 0x0100, 1, (const char *)body, 3 * 64 + 1 + 61 + 5);
    ok(dns_parse_query(pkt, len, &q, &rcode) == 0 && strlen(q.name) == 253,
       "dns: a 253-byte name is read");
}

static void test_dns_answers(void)
{
    uint8_t pkt[100], out[DNS_MAX_PACKET];
    size_t len = query(pkt, 0x0100, 1, Q("\3api\3com\0" A_IN));
    struct dns_query q;
    int rcode;
    ok(dns_parse_query(pkt, len, &q, &rcode) == 0, "answer: the query reads");
    uint32_t a = SYNTH_NET + 7;
    size_t n = dns_answer(&q, DNS_RCODE_NOERROR, a, 300, out);
    /* Header, the question again, one A record pointing at it. */
    ok(n == 12 + (len - 12) + 16, "answer: its length (%zu)", n);
    ok(out[0] == 0x12 && out[1] == 0x34 && (out[2] & 0x80) && (out[2] & 0x01) &&
           (out[3] & 0x0f) == 0,
       "answer: id, QR, RD echoed, NOERROR");
    ok(out[5] == 1 && out[7] == 1 && memcmp(out + 12, pkt + 12, len - 12) == 0,
       "answer: one question (the same), one answer");
    ok(memcmp(out + n - 4, "\xc6\x12\x00\x07", 4) == 0, "answer: the address 198.18.0.7");
    ok(synth_in_range(a) && synth_in_range(SYNTH_NET + 0x1ffff) &&
           !synth_in_range(SYNTH_NET + 0x20000) && !synth_in_range(0x7f000001u),
       "the synthetic range is 198.18.0.0/15");
    n = dns_answer(&q, DNS_RCODE_NXDOMAIN, 0, 0, out);
    ok(n == len && (out[3] & 0x0f) == DNS_RCODE_NXDOMAIN && out[7] == 0,
       "answer: NXDOMAIN, no record");
    n = dns_answer_bare(0x1234, 0x0100, DNS_RCODE_FORMERR, out);
    ok(n == 12 && (out[3] & 0x0f) == DNS_RCODE_FORMERR && out[5] == 0,
       "answer: FORMERR, no question");
}

/* A ClientHello record carrying EXT (its extensions block body), as a client sends it. */
static size_t hello(uint8_t *out, const uint8_t *ext, size_t ext_len, bool with_ext)
{
    uint8_t body[1024];
    size_t n = 0;
    body[n++] = 3, body[n++] = 3;                                     /* version */
    memset(body + n, 0x42, 32), n += 32;                              /* random */
    body[n++] = 0;                                                    /* session id */
    body[n++] = 0, body[n++] = 2, body[n++] = 0x13, body[n++] = 0x01; /* one suite */
    body[n++] = 1, body[n++] = 0;                                     /* null compression */
    if (with_ext) {
        body[n++] = (uint8_t)(ext_len >> 8), body[n++] = (uint8_t)ext_len;
        memcpy(body + n, ext, ext_len), n += ext_len;
    }
    size_t hs = 4 + n, m = 0;
    out[m++] = 0x16, out[m++] = 3, out[m++] = 1, out[m++] = (uint8_t)(hs >> 8),
    out[m++] = (uint8_t)hs;
    out[m++] = 1, out[m++] = 0, out[m++] = (uint8_t)(n >> 8), out[m++] = (uint8_t)n;
    memcpy(out + m, body, n);
    return m + n;
}

/* A server_name extension naming NAME (its NAME_LEN bytes), after a padding extension. */
static size_t sni_ext(uint8_t *out, const char *name, size_t name_len)
{
    size_t n = 0;
    out[n++] = 0, out[n++] = 21, out[n++] = 0, out[n++] = 3, out[n++] = 0, out[n++] = 0,
    out[n++] = 0;
    out[n++] = 0, out[n++] = 0;
    size_t list = 3 + name_len;
    out[n++] = (uint8_t)((list + 2) >> 8), out[n++] = (uint8_t)(list + 2);
    out[n++] = (uint8_t)(list >> 8), out[n++] = (uint8_t)list;
    out[n++] = 0, out[n++] = (uint8_t)(name_len >> 8), out[n++] = (uint8_t)name_len;
    memcpy(out + n, name, name_len);
    return n + name_len;
}

static void test_sni(void)
{
    static const struct {
        const char *what;
        const char *name; /* NULL: no server_name extension */
        bool with_ext;
        long cut; /* bytes dropped from the end; -1: the hello length overstated */
        enum sni_result want;
        const char *found;
    } rows[] = {
        { "a server name", "Api.Example.com", true, 0, SNI_FOUND, "api.example.com" },
        { "a trailing dot", "api.example.com.", true, 0, SNI_FOUND, "api.example.com" },
        { "no server_name extension", NULL, true, 0, SNI_NONE, "" },
        { "no extensions at all", NULL, false, 0, SNI_NONE, "" },
        { "one byte short", "api.example.com", true, 1, SNI_MORE, "" },
        { "only the record header", "api.example.com", true, -2, SNI_MORE, "" },
        { "a hello longer than its record", "api.example.com", true, -1, SNI_BAD, "" },
        { "a name with a slash", "a/b.example.com", true, 0, SNI_BAD, "" },
        { "a name with a NUL", "a\0b", true, 0, SNI_BAD, "" },
        { "an empty name", "", true, 0, SNI_BAD, "" },
        { "a dot alone", ".", true, 0, SNI_BAD, "" },
    };
    for (size_t i = 0; i < N(rows); i++) {
        uint8_t ext[600], buf[1200];
        size_t ext_len = 0;
        if (rows[i].name)
            ext_len = sni_ext(ext, rows[i].name,
                              strcmp(rows[i].what, "a name with a NUL") ? strlen(rows[i].name) : 3);
        size_t len = hello(buf, ext, ext_len, rows[i].with_ext);
        if (rows[i].cut > 0)
            len -= (size_t)rows[i].cut;
        else if (rows[i].cut == -2)
            len = 5;
        else if (rows[i].cut == -1)
            buf[8] += 1; /* the handshake's length, one more than the record holds */
        char name[256];
        enum sni_result r = tls_client_hello_sni(buf, len, name, sizeof name);
        ok(r == rows[i].want, "sni: %s (%d)", rows[i].what, r);
        if (r == SNI_FOUND)
            is_str(name, rows[i].found, rows[i].what);
    }
    char name[256];
    ok(tls_client_hello_sni((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name, sizeof name) ==
           SNI_NOT_TLS,
       "sni: plain HTTP is not TLS");
    ok(tls_client_hello_sni((const uint8_t *)"\x16\x03\x01\xff\xff", 5, name, sizeof name) ==
           SNI_BAD,
       "sni: a record longer than TLS allows");
    uint8_t ext[600], buf[1200];
    char longname[300];
    memset(longname, 'a', 299);
    size_t len = hello(buf, ext, sni_ext(ext, longname, 299), true);
    ok(tls_client_hello_sni(buf, len, name, sizeof name) == SNI_BAD,
       "sni: a name too long to hold");
}

int main(void)
{
    test_dns_queries();
    test_dns_answers();
    test_sni();
    return done_testing();
}
