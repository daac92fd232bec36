/*
 * tests/fuzz/fuzz_synth.c: libFuzzer target for transparent egress's
 * parsers of sandbox bytes (egress/synth.c): the DNS stub's query parser and
 * the TLS ClientHello's server name, both on every input. Beyond crashes and
 * out-of-bounds reads it checks that a query read is a name of host
 * characters the stub's own answer carries back unchanged, and that a
 * prefix of a hello never gets a final verdict the whole does not repeat
 * (the gateway decides on the bytes it has so far).
 * Built only with clang; see tests/fuzz/README.md.
 */
#include "egress/synth.h"

#include <ctype.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        __builtin_trap();
}

static void fuzz_dns(const uint8_t *data, size_t size)
{
    struct dns_query q;
    int rcode;
    if (dns_parse_query(data, size, &q, &rcode) < 0) {
        check(rcode == -1 || rcode == DNS_RCODE_FORMERR || rcode == DNS_RCODE_NOTIMP);
        return;
    }
    size_t n = strlen(q.name);
    check(n <= 253 && q.question_len <= size - 12);
    for (size_t i = 0; i < n; i++)
        check(isalnum((unsigned char)q.name[i]) || strchr("-_.", q.name[i]));
    uint8_t out[DNS_MAX_PACKET];
    size_t len = dns_answer(&q, DNS_RCODE_NOERROR, 0xc6120002u, 300, out);
    check(len <= DNS_MAX_PACKET);
    /* The answer's question, read as a query again, is the same question. */
    out[2] &= 0x7f;
    out[6] = out[7] = 0;
    struct dns_query again;
    check(dns_parse_query(out, len, &again, &rcode) == 0);
    check(strcmp(again.name, q.name) == 0 && again.qtype == q.qtype && again.id == q.id);
}

static void fuzz_sni(const uint8_t *data, size_t size)
{
    char name[256], part[256];
    enum sni_result whole = tls_client_hello_sni(data, size, name, sizeof name);
    if (whole == SNI_FOUND) {
        size_t n = strlen(name);
        check(n > 0 && n < sizeof name);
        for (size_t i = 0; i < n; i++)
            check(isalnum((unsigned char)name[i]) || strchr("-_.", name[i]));
    }
    for (size_t cut = 0; cut < size; cut += 1 + cut / 4) {
        enum sni_result r = tls_client_hello_sni(data, cut, part, sizeof part);
        check(r == SNI_MORE || r == whole);
        if (r == SNI_FOUND)
            check(strcmp(part, name) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_dns(data, size);
    fuzz_sni(data, size);
    return 0;
}
