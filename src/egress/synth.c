/*
 * egress/synth.c: transparent egress without I/O: the DNS stub's query
 * parser and answers, and the server name of a TLS ClientHello. Every read
 * goes through a bounded cursor: a short packet ends the parse, it never
 * reads past the end.
 */
#include "egress/synth.h"

#include "policy/policy.h"

#include <ctype.h>
#include <string.h>

/* A bounded reader: P up to END; OK turns false on the first short read. */
struct cursor {
    const uint8_t *p, *end;
    bool ok;
};

static bool take(struct cursor *c, size_t n, const uint8_t **out)
{
    if (!c->ok || (size_t)(c->end - c->p) < n) {
        c->ok = false;
        return false;
    }
    if (out)
        *out = c->p;
    c->p += n;
    return true;
}

static unsigned u8(struct cursor *c)
{
    const uint8_t *b;
    return take(c, 1, &b) ? b[0] : 0;
}

static unsigned u16(struct cursor *c)
{
    const uint8_t *b;
    return take(c, 2, &b) ? (unsigned)b[0] << 8 | b[1] : 0;
}

static unsigned u24(struct cursor *c)
{
    const uint8_t *b;
    return take(c, 3, &b) ? (unsigned)b[0] << 16 | (unsigned)b[1] << 8 | b[2] : 0;
}

/* A sub-cursor over the next N bytes of C (which skips them). */
static struct cursor sub(struct cursor *c, size_t n)
{
    const uint8_t *b = NULL;
    if (!take(c, n, &b))
        return (struct cursor){ NULL, NULL, false };
    return (struct cursor){ b, b + n, true };
}

/* Host name characters only: anything else in a label is refused rather
 * than carried into the text form (a '.' inside a label would change it). */
static bool name_char(unsigned ch)
{
    return isalnum((int)ch) || ch == '-' || ch == '_';
}

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

int dns_parse_query(const uint8_t *pkt, size_t len, struct dns_query *q, int *rcode)
{
    memset(q, 0, sizeof *q);
    *rcode = -1;
    if (len < 12)
        return -1;
    q->id = (uint16_t)(pkt[0] << 8 | pkt[1]);
    q->flags = (uint16_t)(pkt[2] << 8 | pkt[3]);
    if (q->flags & 0x8000)
        return -1; /* a response: never answer one (no reflection loops) */
    if (((q->flags >> 11) & 0xf) != 0) {
        *rcode = DNS_RCODE_NOTIMP;
        return -1;
    }
    *rcode = DNS_RCODE_FORMERR;
    if ((pkt[4] << 8 | pkt[5]) != 1 || pkt[6] || pkt[7] || pkt[8] || pkt[9])
        return -1;
    struct cursor c = { pkt + 12, pkt + len, true };
    size_t n = 0;
    for (;;) {
        unsigned l = u8(&c);
        if (!c.ok || (l & 0xc0))
            return -1; /* truncated, or a pointer: a question has none */
        if (l == 0)
            break;
        const uint8_t *label;
        if (n + (n ? 1 : 0) + l > sizeof q->name - 1 || !take(&c, l, &label))
            return -1;
        if (n)
            q->name[n++] = '.';
        for (unsigned i = 0; i < l; i++) {
            if (!name_char(label[i]))
                return -1;
            q->name[n++] = (char)tolower(label[i]);
        }
    }
    q->name[n] = '\0';
    q->qtype = (uint16_t)u16(&c);
    q->qclass = (uint16_t)u16(&c);
    if (!c.ok)
        return -1;
    q->question_len = (size_t)(c.p - (pkt + 12));
    *rcode = DNS_RCODE_NOERROR;
    return 0;
}

static void header(uint8_t *out, uint16_t id, uint16_t flags, int rcode, unsigned qd, unsigned an)
{
    /* QR, AA, RA; opcode and RD as asked. */
    unsigned f = 0x8000u | (flags & 0x7900u) | 0x0400u | 0x0080u | ((unsigned)rcode & 0xf);
    put16(out, id);
    put16(out + 2, f);
    put16(out + 4, qd);
    put16(out + 6, an);
    put16(out + 8, 0);
    put16(out + 10, 0);
}

size_t dns_answer_bare(uint16_t id, uint16_t flags, int rcode, uint8_t *out)
{
    header(out, id, flags, rcode, 0, 0);
    return 12;
}

size_t dns_answer(const struct dns_query *q, int rcode, uint32_t a, uint32_t ttl, uint8_t *out)
{
    header(out, q->id, q->flags, rcode, 1, a ? 1 : 0);
    size_t n = 12;
    /* The question again, from the name we read (at most 255 bytes). */
    const char *s = q->name;
    while (*s) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        out[n++] = (uint8_t)l;
        memcpy(out + n, s, l);
        n += l;
        s += l + (dot ? 1 : 0);
    }
    out[n++] = 0;
    put16(out + n, q->qtype);
    put16(out + n + 2, q->qclass);
    n += 4;
    if (a) {
        put16(out + n, 0xc00c); /* the question's name */
        put16(out + n + 2, DNS_TYPE_A);
        put16(out + n + 4, DNS_CLASS_IN);
        put16(out + n + 6, ttl >> 16);
        put16(out + n + 8, ttl & 0xffff);
        put16(out + n + 10, 4);
        put16(out + n + 12, a >> 16);
        put16(out + n + 14, a & 0xffff);
        n += 16;
    }
    return n;
}

enum sni_result tls_client_hello_sni(const uint8_t *buf, size_t len, char *name, size_t size)
{
    name[0] = '\0';
    if (len >= 1 && buf[0] != 0x16)
        return SNI_NOT_TLS;
    if (len >= 2 && buf[1] != 3)
        return SNI_NOT_TLS;
    if (len < 5)
        return SNI_MORE;
    size_t rec = (size_t)buf[3] << 8 | buf[4];
    if (rec == 0 || rec > 16384)
        return SNI_BAD;
    if (len < 5 + rec)
        return SNI_MORE;
    struct cursor r = { buf + 5, buf + 5 + rec, true };
    if (u8(&r) != 1)
        return SNI_BAD;                 /* not a ClientHello */
    struct cursor h = sub(&r, u24(&r)); /* a hello beyond its first record is refused */
    take(&h, 2 + 32, NULL);             /* version, random */
    take(&h, u8(&h), NULL);             /* session id */
    take(&h, u16(&h), NULL);            /* cipher suites */
    take(&h, u8(&h), NULL);             /* compression methods */
    if (!h.ok)
        return SNI_BAD;
    if (h.p == h.end)
        return SNI_NONE; /* no extensions */
    struct cursor ext = sub(&h, u16(&h));
    while (ext.ok && ext.p < ext.end) {
        unsigned type = u16(&ext);
        struct cursor body = sub(&ext, u16(&ext));
        if (!ext.ok)
            return SNI_BAD;
        if (type != 0)
            continue;
        struct cursor list = sub(&body, u16(&body));
        while (list.ok && list.p < list.end) {
            unsigned kind = u8(&list);
            size_t l = u16(&list);
            const uint8_t *n;
            if (!take(&list, l, &n))
                return SNI_BAD;
            if (kind != 0)
                continue;
            if (l == 0 || l >= size)
                return SNI_BAD;
            for (size_t i = 0; i < l; i++) {
                if (!name_char(n[i]) && n[i] != '.')
                    return SNI_BAD;
                name[i] = (char)tolower(n[i]);
            }
            name[l] = '\0';
            /* One trailing dot is the same name; a dot alone is none. */
            if (name[l - 1] == '.')
                name[l - 1] = '\0';
            return name[0] ? SNI_FOUND : SNI_BAD;
        }
        return SNI_BAD;
    }
    return ext.ok ? SNI_NONE : SNI_BAD;
}

bool synth_in_range(uint32_t a)
{
    uint32_t mask = ~0u << (32 - SYNTH_PREFIX);
    return (a & mask) == SYNTH_NET;
}
