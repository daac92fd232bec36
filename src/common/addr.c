/*
 * common/addr.c: destinations read the way clients read them (WHATWG URL host
 * parsing, which also covers every inet_aton() spelling), and the address
 * classes the SSRF rules refuse. Runs in the supervisor's gateway on bytes the
 * sandbox chose, so every parser here is bounded and refuses rather than
 * guesses. Pure: no syscalls, no DNS.
 */
#include "common/addr.h"

#include "common/text.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Room for a decoded host before refusing it as too long (names stop at 253). */
#define HOST_DECODED_MAX 512
/* Longest IPv6 text inet_pton() can accept: INET6_ADDRSTRLEN less the NUL. */
#define IPV6_TEXT_MAX 45
#define ZONE_MAX 63
#define QUOTE_SIZE 100

/*
 * Untrusted bytes end up in audit reasons and logs: quote them with
 * non-printable bytes escaped (no forged log lines) and the length capped.
 */
static const char *quote(char out[QUOTE_SIZE], const char *s, size_t len)
{
    return text_quote(out, QUOTE_SIZE, s, len, true);
}

static bool is_ctl_or_space(unsigned char c)
{
    return c <= 0x20 || c == 0x7f;
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* ---- classes ---------------------------------------------------------- */

const char *addr_class_name(enum addr_class c)
{
    static const char *const names[ADDR_CLASS_COUNT] = {
        [ADDR_PUBLIC] = "public",
        [ADDR_UNSPECIFIED] = "unspecified",
        [ADDR_THIS_NETWORK] = "this_network",
        [ADDR_LOOPBACK] = "loopback",
        [ADDR_PRIVATE] = "private",
        [ADDR_CGNAT] = "cgnat",
        [ADDR_LINK_LOCAL] = "link_local",
        [ADDR_ULA] = "ula",
        [ADDR_MULTICAST] = "multicast",
        [ADDR_BROADCAST] = "broadcast",
        [ADDR_DOCUMENTATION] = "documentation",
        [ADDR_BENCHMARK] = "benchmark",
        [ADDR_RESERVED] = "reserved",
    };
    if ((unsigned)c >= ADDR_CLASS_COUNT)
        return "invalid";
    return names[c];
}

static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;
    if (memcmp(a, b, whole) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

/* First match wins, so more specific ranges come first. */
static const struct {
    uint8_t net[4];
    unsigned bits;
    enum addr_class cls;
} v4_ranges[] = {
    { { 0, 0, 0, 0 }, 32, ADDR_UNSPECIFIED },
    { { 255, 255, 255, 255 }, 32, ADDR_BROADCAST },
    { { 0, 0, 0, 0 }, 8, ADDR_THIS_NETWORK },
    { { 10, 0, 0, 0 }, 8, ADDR_PRIVATE },
    { { 100, 64, 0, 0 }, 10, ADDR_CGNAT },
    { { 127, 0, 0, 0 }, 8, ADDR_LOOPBACK },
    { { 169, 254, 0, 0 }, 16, ADDR_LINK_LOCAL },
    { { 172, 16, 0, 0 }, 12, ADDR_PRIVATE },
    { { 192, 0, 0, 0 }, 24, ADDR_RESERVED }, /* IETF protocol assignments */
    { { 192, 0, 2, 0 }, 24, ADDR_DOCUMENTATION },
    { { 192, 88, 99, 0 }, 24, ADDR_RESERVED }, /* deprecated 6to4 relay anycast */
    { { 192, 168, 0, 0 }, 16, ADDR_PRIVATE },
    { { 198, 18, 0, 0 }, 15, ADDR_BENCHMARK },
    { { 198, 51, 100, 0 }, 24, ADDR_DOCUMENTATION },
    { { 203, 0, 113, 0 }, 24, ADDR_DOCUMENTATION },
    { { 224, 0, 0, 0 }, 4, ADDR_MULTICAST },
    { { 240, 0, 0, 0 }, 4, ADDR_RESERVED },
};

static enum addr_class classify4(const uint8_t b[4])
{
    for (size_t i = 0; i < sizeof v4_ranges / sizeof v4_ranges[0]; i++)
        if (prefix_match(b, v4_ranges[i].net, v4_ranges[i].bits))
            return v4_ranges[i].cls;
    return ADDR_PUBLIC;
}

static const struct {
    uint8_t net[16];
    unsigned bits;
    enum addr_class cls;
} v6_ranges[] = {
    { { 0x01, 0x00 }, 64, ADDR_RESERVED },                          /* 100::/64 discard */
    { { 0x20, 0x01, 0x00, 0x02, 0x00, 0x00 }, 48, ADDR_BENCHMARK }, /* 2001:2::/48 */
    { { 0x20, 0x01, 0x0d, 0xb8 }, 32, ADDR_DOCUMENTATION },         /* 2001:db8::/32 */
    /* 2001::/23 IETF protocol assignments, with Teredo (2001::/32), whose
     * embedded IPv4 is obfuscated: nothing here is a plain destination. */
    { { 0x20, 0x01, 0x00 }, 23, ADDR_RESERVED },
    { { 0x3f, 0xff, 0x00 }, 20, ADDR_DOCUMENTATION }, /* 3fff::/20 (RFC 9637) */
    { { 0xfc }, 7, ADDR_ULA },
    { { 0xfe, 0x80 }, 10, ADDR_LINK_LOCAL },
    { { 0xfe, 0xc0 }, 10, ADDR_RESERVED }, /* deprecated site-local */
    { { 0xff }, 8, ADDR_MULTICAST },
};

static bool all_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return false;
    return true;
}

static bool is_v4_mapped(const uint8_t b[16])
{
    return all_zero(b, 10) && b[10] == 0xff && b[11] == 0xff;
}

static enum addr_class classify6(const uint8_t b[16])
{
    static const uint8_t nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
    static const uint8_t nat64_local[6] = { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 };

    if (all_zero(b, 16))
        return ADDR_UNSPECIFIED;
    if (all_zero(b, 15) && b[15] == 1)
        return ADDR_LOOPBACK;
    if (is_v4_mapped(b) || all_zero(b, 12)) /* mapped, or deprecated compatible */
        return classify4(b + 12);
    if (memcmp(b, nat64, sizeof nat64) == 0)
        return classify4(b + 12);
    /*
     * Local-use NAT64 (RFC 8215) may embed the IPv4 address at other offsets
     * depending on the operator's prefix length; only the /96 layout (zeros
     * before the last four bytes) is read, anything else is refused whole.
     */
    if (memcmp(b, nat64_local, sizeof nat64_local) == 0)
        return all_zero(b + 6, 6) ? classify4(b + 12) : ADDR_RESERVED;
    if (b[0] == 0x20 && b[1] == 0x02) /* 6to4 */
        return classify4(b + 2);
    for (size_t i = 0; i < sizeof v6_ranges / sizeof v6_ranges[0]; i++)
        if (prefix_match(b, v6_ranges[i].net, v6_ranges[i].bits))
            return v6_ranges[i].cls;
    /*
     * Global unicast is 2000::/3; the rest of the space is unallocated or
     * IETF-reserved (including ::/8 beyond the forms above, e.g. the SIIT
     * ::ffff:0:a.b.c.d), so nothing public can live there.
     */
    if ((b[0] & 0xe0) != 0x20)
        return ADDR_RESERVED;
    return ADDR_PUBLIC;
}

enum addr_class addr_classify(const struct ip_addr *a)
{
    if (a->family == AF_INET)
        return classify4(a->bytes);
    if (a->family == AF_INET6)
        return classify6(a->bytes);
    /* Not an address we can reason about: never let it pass as public. */
    return ADDR_RESERVED;
}

/* ---- sockaddr and text ------------------------------------------------ */

int ip_addr_from_sockaddr(const struct sockaddr *sa, struct ip_addr *out)
{
    memset(out, 0, sizeof *out);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
        out->family = AF_INET;
        memcpy(out->bytes, &sin->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
        out->family = AF_INET6;
        memcpy(out->bytes, &sin6->sin6_addr, 16);
        out->scope_id = sin6->sin6_scope_id;
        return 0;
    }
    return -1;
}

void ip_addr_to_sockaddr(const struct ip_addr *a, uint16_t port, struct sockaddr_storage *out,
                         socklen_t *len)
{
    memset(out, 0, sizeof *out);
    if (a->family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)out;
        sin->sin_family = AF_INET;
        sin->sin_port = htons(port);
        memcpy(&sin->sin_addr, a->bytes, 4);
        *len = sizeof *sin;
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(port);
        memcpy(&sin6->sin6_addr, a->bytes, 16);
        sin6->sin6_scope_id = a->scope_id;
        *len = sizeof *sin6;
    }
}

void ip_addr_format(const struct ip_addr *a, char *out, size_t size)
{
    char text[INET6_ADDRSTRLEN] = "";
    if (size == 0)
        return;
    if (a->family == AF_INET) {
        snprintf(out, size, "%u.%u.%u.%u", a->bytes[0], a->bytes[1], a->bytes[2], a->bytes[3]);
        return;
    }
    if (a->family != AF_INET6 || !inet_ntop(AF_INET6, a->bytes, text, sizeof text)) {
        snprintf(out, size, "?");
        return;
    }
    if (a->scope_id)
        snprintf(out, size, "%s%%%u", text, (unsigned)a->scope_id);
    else
        snprintf(out, size, "%s", text);
}

void ip_addr_format_bracketed(const struct ip_addr *a, char *out, size_t size)
{
    char text[64];
    ip_addr_format(a, text, sizeof text);
    snprintf(out, size, a->family == AF_INET6 ? "[%s]" : "%s", text);
}

void host_format(const struct host *h, char *out, size_t size)
{
    if (h->is_ip)
        ip_addr_format_bracketed(&h->ip, out, size);
    else
        snprintf(out, size, "%s", h->name);
}

/* ---- IPv4 literals, as WHATWG's URL host parser reads them ------------- */

/*
 * One dot-separated part: "0x"/"0X" hex, a leading "0" octal, else decimal;
 * "0x" alone is 0 (WHATWG and inet_aton agree). Saturates just above 2^32 so
 * a long run of digits cannot wrap into a small, valid-looking value.
 */
static int ipv4_number(const char *s, size_t len, uint64_t *out)
{
    unsigned radix = 10;
    uint64_t v = 0;
    if (len == 0)
        return -1;
    if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        radix = 16;
        s += 2;
        len -= 2;
    } else if (len >= 2 && s[0] == '0') {
        radix = 8;
        s++;
        len--;
    }
    for (size_t i = 0; i < len; i++) {
        int d = hex_digit((unsigned char)s[i]);
        if (d < 0 || (unsigned)d >= radix)
            return -1;
        v = v * radix + (unsigned)d;
        if (v > UINT32_MAX)
            v = (uint64_t)UINT32_MAX + 1;
    }
    *out = v;
    return 0;
}

/*
 * WHATWG "ends in a number": a host whose last label (ignoring one trailing
 * dot) is all digits or 0x-hex is parsed as IPv4, and fails outright when that
 * parse fails. Treating "1.2.3.256" as a name instead would let it reach DNS.
 */
static bool ends_in_number(const char *s, size_t len)
{
    size_t end = len, start;
    if (end && s[end - 1] == '.') {
        if (end == 1)
            return false;
        end--;
    }
    start = end;
    while (start > 0 && s[start - 1] != '.')
        start--;
    size_t n = end - start;
    const char *last = s + start;
    if (n == 0)
        return false;
    bool digits = true;
    for (size_t i = 0; i < n; i++)
        digits = digits && is_digit((unsigned char)last[i]);
    if (digits)
        return true;
    if (n >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X')) {
        for (size_t i = 2; i < n; i++)
            if (hex_digit((unsigned char)last[i]) < 0)
                return false;
        return true;
    }
    return false;
}

/* 1 to 4 parts, the last filling the remaining bytes; one trailing dot. */
static int ipv4_parse(const char *s, size_t len, uint8_t out[4])
{
    uint64_t parts[4];
    size_t n = 0, start = 0;
    if (len && s[len - 1] == '.')
        len--;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.')
            continue;
        if (n == 4 || ipv4_number(s + start, i - start, &parts[n]) < 0)
            return -1;
        n++;
        start = i + 1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        if (parts[i] > 255)
            return -1;
    if (parts[n - 1] >= (uint64_t)1 << (8 * (5 - n)))
        return -1;
    uint32_t v = (uint32_t)parts[n - 1];
    for (size_t i = 0; i + 1 < n; i++)
        v += (uint32_t)parts[i] << (8 * (3 - i));
    out[0] = (uint8_t)(v >> 24);
    out[1] = (uint8_t)(v >> 16);
    out[2] = (uint8_t)(v >> 8);
    out[3] = (uint8_t)v;
    return 0;
}

/* Policy text wants one unambiguous spelling: four decimal parts, no leading zeros. */
static int ipv4_parse_strict(const char *s, size_t len, uint8_t out[4])
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        unsigned v = 0;
        size_t start = i;
        if (part > 0) {
            if (i >= len || s[i] != '.')
                return -1;
            start = ++i;
        }
        while (i < len && is_digit((unsigned char)s[i]) && i - start < 3)
            v = v * 10 + (unsigned)(s[i++] - '0');
        if (i == start || v > 255 || (s[start] == '0' && i - start > 1))
            return -1;
        out[part] = (uint8_t)v;
    }
    return i == len ? 0 : -1;
}

/* ---- IPv6 literals ---------------------------------------------------- */

/* Validate the characters and length first so inet_pton() sees only plausible text. */
static int ipv6_text(const char *s, size_t len, uint8_t out[16])
{
    char buf[IPV6_TEXT_MAX + 1];
    if (len < 2 || len > IPV6_TEXT_MAX)
        return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (hex_digit(c) < 0 && c != ':' && c != '.')
            return -1;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    return inet_pton(AF_INET6, buf, out) == 1 ? 0 : -1;
}

/*
 * A zone as written after '%' (RFC 4007) or "%25" (RFC 6874's URI form). A
 * zone starting "25" is always read as the encoded '%', so "%25" alone is an
 * empty zone and "%251" is zone 1. Numeric zones become the scope id; named
 * ones are accepted with scope id 0, since resolving an interface name would
 * need a syscall.
 */
static int zone_parse(const char *z, size_t len, uint32_t *scope)
{
    if (len >= 2 && z[0] == '2' && z[1] == '5') {
        z += 2;
        len -= 2;
    }
    if (len == 0 || len > ZONE_MAX)
        return -1;
    bool numeric = true;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)z[i];
        bool unreserved = is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            c == '-' || c == '.' || c == '_' || c == '~';
        if (!unreserved)
            return -1;
        numeric = numeric && is_digit(c);
    }
    *scope = 0;
    if (!numeric)
        return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        v = v * 10 + (uint64_t)(z[i] - '0');
        if (v > UINT32_MAX)
            return -1;
    }
    *scope = (uint32_t)v;
    return 0;
}

static int host_parse_bracketed(const char *in, size_t len, struct host *out, char *why,
                                size_t why_len)
{
    char q[QUOTE_SIZE];
    if (len < 2 || in[len - 1] != ']')
        return why_printf(why, why_len, "unterminated IPv6 literal %s", quote(q, in, len));
    const char *inner = in + 1;
    size_t ilen = len - 2;
    const char *pct = memchr(inner, '%', ilen);
    size_t alen = pct ? (size_t)(pct - inner) : ilen;
    if (ipv6_text(inner, alen, out->ip.bytes) < 0)
        return why_printf(why, why_len, "invalid IPv6 literal %s", quote(q, in, len));
    if (pct && zone_parse(pct + 1, ilen - alen - 1, &out->ip.scope_id) < 0)
        return why_printf(why, why_len, "bad IPv6 zone in %s", quote(q, in, len));
    out->is_ip = true;
    out->ip.family = AF_INET6;
    return 0;
}

/* ---- hosts ------------------------------------------------------------ */

static bool looks_like_ipv6(const char *s, size_t len)
{
    size_t colons = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ':')
            colons++;
        else if (hex_digit((unsigned char)s[i]) < 0 && s[i] != '.')
            return false;
    }
    return colons >= 2;
}

static bool name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '_' || c == '.';
}

static int name_check(const char *s, size_t len, const char *in, size_t in_len, char *why,
                      size_t why_len)
{
    char q[QUOTE_SIZE];
    size_t label = 0;
    if (len && s[len - 1] == '.')
        len--;
    if (len == 0)
        return why_printf(why, why_len, "empty host");
    if (len > 253)
        return why_printf(why, why_len, "host too long %s", quote(q, in, in_len));
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.') {
            label++;
            continue;
        }
        if (label == 0)
            return why_printf(why, why_len, "empty label in host %s", quote(q, in, in_len));
        if (label > 63)
            return why_printf(why, why_len, "label too long in host %s", quote(q, in, in_len));
        label = 0;
    }
    return 0;
}

int host_parse(const char *in, size_t len, struct host *out, char *why, size_t why_len)
{
    char q[QUOTE_SIZE];
    char buf[HOST_DECODED_MAX];
    size_t n = 0;

    memset(out, 0, sizeof *out);
    if (len == 0)
        return why_printf(why, why_len, "empty host");
    for (size_t i = 0; i < len; i++)
        if (is_ctl_or_space((unsigned char)in[i]))
            return why_printf(why, why_len, "control character or space in host %s",
                              quote(q, in, len));
    /* Brackets are looked at before any decoding, as clients do: "%5B::1%5D" is no literal. */
    if (in[0] == '[')
        return host_parse_bracketed(in, len, out, why, why_len);

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == '%') {
            int hi = i + 2 < len ? hex_digit((unsigned char)in[i + 1]) : -1;
            int lo = i + 2 < len ? hex_digit((unsigned char)in[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return why_printf(why, why_len, "bad percent-encoding in host %s",
                                  quote(q, in, len));
            c = (unsigned char)(hi << 4 | lo);
            i += 2;
        }
        if (n == sizeof buf)
            return why_printf(why, why_len, "host too long %s", quote(q, in, len));
        buf[n++] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    }

    /*
     * Checked after decoding, once: "%25" yields a '%' that is refused here
     * rather than decoded again, and "%2f", "%40", "%00" cannot smuggle a
     * delimiter or a terminator into the name.
     */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c == ':' && looks_like_ipv6(buf, n))
            return why_printf(why, why_len, "unbracketed IPv6 address %s", quote(q, in, len));
        if (!name_char(c))
            return why_printf(why, why_len, "invalid character in host %s", quote(q, in, len));
    }

    if (ends_in_number(buf, n)) {
        if (ipv4_parse(buf, n, out->ip.bytes) < 0)
            return why_printf(why, why_len, "invalid IPv4 literal %s", quote(q, in, len));
        out->is_ip = true;
        out->ip.family = AF_INET;
        return 0;
    }
    if (name_check(buf, n, in, len, why, why_len) < 0)
        return -1;
    if (buf[n - 1] == '.')
        n--;
    memcpy(out->name, buf, n);
    out->name[n] = '\0';
    return 0;
}

/* ---- CIDRs ------------------------------------------------------------ */

static void mask_bytes(uint8_t *b, size_t size, unsigned prefix)
{
    for (size_t i = 0; i < size; i++) {
        unsigned keep = prefix >= 8 * (i + 1) ? 8 : prefix > 8 * i ? prefix - 8 * (unsigned)i : 0;
        b[i] &= (uint8_t)(0xff00 >> keep);
    }
}

int cidr_parse(const char *s, struct cidr *out, char *why, size_t why_len)
{
    char q[QUOTE_SIZE];
    size_t len = strlen(s);
    const char *slash = memchr(s, '/', len);
    size_t alen = slash ? (size_t)(slash - s) : len;
    unsigned max;

    memset(out, 0, sizeof *out);
    if (memchr(s, ':', alen)) {
        if (ipv6_text(s, alen, out->base.bytes) < 0)
            return why_printf(why, why_len, "invalid CIDR %s", quote(q, s, len));
        out->base.family = AF_INET6;
        max = 128;
    } else {
        if (ipv4_parse_strict(s, alen, out->base.bytes) < 0)
            return why_printf(why, why_len, "invalid CIDR %s", quote(q, s, len));
        out->base.family = AF_INET;
        max = 32;
    }
    out->prefix = max;
    if (slash) {
        const char *p = slash + 1;
        size_t plen = len - alen - 1;
        unsigned v = 0;
        bool ok = plen >= 1 && plen <= 3;
        for (size_t i = 0; ok && i < plen; i++) {
            ok = is_digit((unsigned char)p[i]);
            v = v * 10 + (unsigned)(p[i] - '0');
        }
        if (!ok || v > max)
            return why_printf(why, why_len, "bad prefix length in CIDR %s", quote(q, s, len));
        out->prefix = v;
    }
    mask_bytes(out->base.bytes, max / 8, out->prefix);
    return 0;
}

bool cidr_contains(const struct cidr *c, const struct ip_addr *a)
{
    uint8_t mapped[16] = { [10] = 0xff, [11] = 0xff };
    if (c->base.family == a->family)
        return prefix_match(c->base.bytes, a->bytes, c->prefix);
    /* A mapped address reaches the IPv4 host on a dual-stack socket, so it is that host. */
    if (c->base.family == AF_INET && a->family == AF_INET6)
        return is_v4_mapped(a->bytes) && prefix_match(c->base.bytes, a->bytes + 12, c->prefix);
    if (c->base.family == AF_INET6 && a->family == AF_INET) {
        memcpy(mapped + 12, a->bytes, 4);
        return prefix_match(c->base.bytes, mapped, c->prefix);
    }
    return false;
}

/* ---- authorities and URLs -------------------------------------------- */

/* Decimal, leading zeros allowed as WHATWG does, 1..65535. */
static int port_parse(const char *s, size_t len, uint16_t *out)
{
    uint32_t v = 0;
    if (len == 0)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (uint32_t)(s[i] - '0');
        if (v > 65535)
            return -1;
    }
    if (v == 0)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

int authority_parse(const char *in, size_t len, struct authority *out, char *why, size_t why_len)
{
    char q[QUOTE_SIZE];
    const char *host, *port = NULL;
    size_t hlen, plen = 0;

    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (is_ctl_or_space(c))
            return why_printf(why, why_len, "control character or space in authority %s",
                              quote(q, in, len));
        /* These end an authority in every client; inside one they mean a confused parser. */
        if (c == '/' || c == '\\' || c == '?' || c == '#')
            return why_printf(why, why_len, "invalid character in authority %s", quote(q, in, len));
    }
    /* The last '@' separates userinfo, so "allowed.com@127.0.0.1" is 127.0.0.1. */
    host = in;
    for (size_t i = len; i > 0; i--) {
        if (in[i - 1] == '@') {
            host = in + i;
            out->has_userinfo = true;
            break;
        }
    }
    hlen = len - (size_t)(host - in);
    if (hlen == 0)
        return why_printf(why, why_len, "empty host");
    if (host[0] == '[') {
        const char *close = memchr(host, ']', hlen);
        if (!close)
            return why_printf(why, why_len, "unterminated IPv6 literal %s", quote(q, host, hlen));
        size_t blen = (size_t)(close - host) + 1;
        if (blen < hlen && host[blen] != ':')
            return why_printf(why, why_len, "unexpected characters after IPv6 literal in %s",
                              quote(q, in, len));
        if (blen < hlen) {
            port = host + blen + 1;
            plen = hlen - blen - 1;
        }
        hlen = blen;
    } else {
        if (looks_like_ipv6(host, hlen))
            return why_printf(why, why_len, "unbracketed IPv6 address %s", quote(q, host, hlen));
        const char *colon = memchr(host, ':', hlen);
        if (colon) {
            port = colon + 1;
            plen = hlen - (size_t)(colon - host) - 1;
            hlen = (size_t)(colon - host);
        }
    }
    if (host_parse(host, hlen, &out->host, why, why_len) < 0)
        return -1;
    /* "host:" is "host" with no port, as WHATWG reads it. */
    if (plen && port_parse(port, plen, &out->port) < 0)
        return why_printf(why, why_len, "bad port %s", quote(q, port, plen));
    return 0;
}

int url_parse(const char *in, struct url *out, char *why, size_t why_len)
{
    char q[QUOTE_SIZE];
    size_t len = strlen(in), i = 0;

    memset(out, 0, sizeof *out);
    /* Clients strip or encode these; a proxy that forwarded them would smuggle. */
    for (size_t k = 0; k < len; k++)
        if (is_ctl_or_space((unsigned char)in[k]))
            return why_printf(why, why_len, "control character or space in url %s",
                              quote(q, in, len));

    bool scheme_ok = len > 0 && ((in[0] | 0x20) >= 'a' && (in[0] | 0x20) <= 'z');
    while (scheme_ok && i < len && in[i] != ':') {
        unsigned char c = (unsigned char)in[i];
        scheme_ok = is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '+' ||
            c == '-' || c == '.';
        i++;
    }
    if (!scheme_ok || i == len)
        return why_printf(why, why_len, "missing scheme in url %s", quote(q, in, len));
    if (i == 5 && strncasecmp(in, "https", 5) == 0)
        out->https = true;
    else if (!(i == 4 && strncasecmp(in, "http", 4) == 0))
        return why_printf(why, why_len, "unsupported scheme %s", quote(q, in, i));
    i++;
    if (len - i < 2 || in[i] != '/' || in[i + 1] != '/')
        return why_printf(why, why_len, "expected \"//\" after the scheme in url %s",
                          quote(q, in, len));
    i += 2;

    /* WHATWG ends a special-scheme authority at '\\' too, so must we. */
    size_t a = i;
    while (i < len && in[i] != '/' && in[i] != '\\' && in[i] != '?' && in[i] != '#')
        i++;
    if (authority_parse(in + a, i - a, &out->authority, why, why_len) < 0)
        return -1;
    out->port = out->authority.port ? out->authority.port : out->https ? 443 : 80;

    size_t end = i, o = 0;
    while (end < len && in[end] != '#')
        end++;
    if (i == end || in[i] == '?')
        out->path[o++] = '/';
    if (o + (end - i) >= sizeof out->path)
        return why_printf(why, why_len, "path too long in url %s", quote(q, in, len));
    bool in_query = false;
    for (; i < end; i++) {
        char c = in[i];
        in_query = in_query || c == '?';
        /* What a client sends for a '\\' in a special URL's path; the query keeps it. */
        out->path[o++] = c == '\\' && !in_query ? '/' : c;
    }
    out->path[o] = '\0';
    return 0;
}

bool host_is_localhost(const char *name)
{
    size_t n = strlen(name);
    return strcmp(name, "localhost") == 0 || (n > 10 && strcmp(name + n - 10, ".localhost") == 0);
}
