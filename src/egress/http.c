/*
 * egress/http.c: the gateway's strict HTTP/1.1 request-head and chunk-size
 * parsers. Runs in the supervisor on bytes that come straight from the
 * sandbox, so whatever two HTTP parsers could read differently (request
 * smuggling) is refused, never interpreted. Pure: no syscalls, no
 * allocation; results point into the caller's buffer.
 */
#include "egress/http.h"

#include "common/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_METHOD 20
/* 2^53: every consumer down the line (JSON, JavaScript) holds it exactly. */
#define MAX_CONTENT_LENGTH (INT64_C(1) << 53)
/* Untrusted bytes quoted in a reason: at most this many, escaped. */
#define QUOTE_MAX 32

struct ctx {
    struct http_request *out;
    int *status;
    char *why;
    size_t why_len;
    bool seen_cl, seen_te, seen_host;
};

__attribute__((format(printf, 5, 6))) static int fail(int *status, char *why, size_t why_len,
                                                      int code, const char *fmt, ...)
{
    if (status)
        *status = code;
    if (why && why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap); /* why_printf() takes no va_list */
        va_end(ap);
    }
    return -1;
}

#define FAIL(c, code, ...) fail((c)->status, (c)->why, (c)->why_len, (code), __VA_ARGS__)

/* RFC 9110 tchar: what a method, header name or coding may be made of. */
static bool is_tchar(unsigned char b)
{
    if ((b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z'))
        return true;
    return b && strchr("!#$%&'*+-.^_`|~", b);
}

static bool is_ows(unsigned char b)
{
    return b == ' ' || b == '\t';
}

static bool is_digit(unsigned char b)
{
    return b >= '0' && b <= '9';
}

static unsigned char lower(unsigned char b)
{
    return b >= 'A' && b <= 'Z' ? b + ('a' - 'A') : b;
}

/* memrchr() is a GNU extension; the fuzz build does not define _GNU_SOURCE. */
static const char *last_byte(const char *s, int c, size_t n)
{
    while (n > 0)
        if (s[--n] == (char)c)
            return s + n;
    return NULL;
}

bool http_equal_ci(const char *s, size_t n, const char *lit)
{
    size_t i = 0;
    for (; i < n && lit[i]; i++)
        if (lower((unsigned char)s[i]) != lower((unsigned char)lit[i]))
            return false;
    return i == n && lit[i] == '\0';
}

/* Like http_equal_ci(), with '_' in S read as '-'. */
static bool equal_dash(const char *s, size_t n, const char *lit)
{
    size_t i = 0;
    for (; i < n && lit[i]; i++) {
        unsigned char b = s[i] == '_' ? '-' : lower((unsigned char)s[i]);
        if (b != (unsigned char)lit[i])
            return false;
    }
    return i == n && lit[i] == '\0';
}

/*
 * Reasons end up in audit events and logs, so untrusted bytes are quoted
 * with anything but printable ASCII escaped, and cut short.
 */
static const char *quote(char dst[QUOTE_MAX * 4 + 4], const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && i < QUOTE_MAX; i++) {
        unsigned char b = (unsigned char)s[i];
        if (b >= 0x20 && b < 0x7f && b != '"' && b != '\\')
            dst[o++] = (char)b;
        else
            o += (size_t)snprintf(dst + o, 5, "\\x%02x", b);
    }
    if (n > QUOTE_MAX) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
    return dst;
}

/* Header names in reasons are tchar only, so printable; just cut short. */
#define NAME_FMT "\"%.*s%s\""
#define NAME_ARG(p, n) (int)((n) > QUOTE_MAX ? QUOTE_MAX : (n)), (p), ((n) > QUOTE_MAX ? "..." : "")

/* Authority-form for CONNECT: host:port, bracketed IPv6, nothing else. */
static const char *authority_error(const char *t, size_t n)
{
    if (memchr(t, '@', n))
        return "userinfo ('@') in CONNECT target";
    if (memchr(t, '/', n))
        return "'/' in CONNECT target (CONNECT needs host:port)";
    const char *port;
    if (t[0] == '[') {
        const char *close = memchr(t, ']', n);
        if (!close)
            return "unclosed '[' in CONNECT target";
        if (close == t + 1)
            return "empty IPv6 literal in CONNECT target";
        /* Hex, ':' and '.' for the address; '%' and unreserved for a zone. */
        for (const char *p = t + 1; p < close; p++)
            if (!(hex_digit((unsigned char)*p) >= 0 || *p == ':' || *p == '.' || *p == '%' ||
                  *p == '-' || *p == '_' || *p == '~' || (*p >= 'g' && *p <= 'z') ||
                  (*p >= 'G' && *p <= 'Z')))
                return "invalid character in CONNECT target's IPv6 literal";
        if (close + 1 == t + n || close[1] != ':')
            return "CONNECT target without a port";
        port = close + 2;
    } else {
        const char *colon = last_byte(t, ':', n);
        if (!colon)
            return "CONNECT target without a port";
        if (colon == t)
            return "CONNECT target without a host";
        for (const char *p = t; p < colon; p++) {
            unsigned char b = (unsigned char)*p;
            if (b == ':')
                return "unbracketed IPv6 address in CONNECT target";
            /* RFC 3986 reg-name: unreserved, sub-delims, pct-encoded. */
            if (!((b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') ||
                  strchr("-._~!$&'()*+,;=%", b)))
                return "invalid character in CONNECT target's host";
        }
        port = colon + 1;
    }
    size_t plen = (size_t)(t + n - port);
    if (plen == 0)
        return "CONNECT target without a port";
    if (plen > 5)
        return "invalid port in CONNECT target";
    unsigned value = 0;
    for (size_t i = 0; i < plen; i++) {
        if (!is_digit((unsigned char)port[i]))
            return "invalid port in CONNECT target";
        value = value * 10 + (unsigned)(port[i] - '0');
    }
    if (value == 0 || value > 65535)
        return "invalid port in CONNECT target";
    return NULL;
}

/* RFC 3986 scheme followed by "://". */
static bool has_scheme(const char *t, size_t n)
{
    size_t i = 0;
    if (!((t[0] >= 'a' && t[0] <= 'z') || (t[0] >= 'A' && t[0] <= 'Z')))
        return false;
    for (i = 1; i < n; i++) {
        unsigned char b = (unsigned char)t[i];
        if (!((b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') ||
              b == '+' || b == '-' || b == '.'))
            break;
    }
    return n - i >= 3 && memcmp(t + i, "://", 3) == 0;
}

static int parse_request_line(struct ctx *c, const char *line, size_t n)
{
    struct http_request *out = c->out;
    char q[QUOTE_MAX * 4 + 4];

    const char *sp1 = memchr(line, ' ', n);
    if (!sp1)
        return FAIL(c, 400, "request line without spaces");
    size_t mlen = (size_t)(sp1 - line);
    if (mlen == 0)
        return FAIL(c, 400, "request line starts with a space");
    if (mlen > MAX_METHOD)
        return FAIL(c, 400, "method longer than %d bytes", MAX_METHOD);
    for (size_t i = 0; i < mlen; i++)
        if (!is_tchar((unsigned char)line[i]))
            return FAIL(c, 400, "invalid byte 0x%02x in method", (unsigned char)line[i]);
    memcpy(out->method, line, mlen);
    out->method[mlen] = '\0';

    /* The last space, so that a space inside the target is named as such. */
    const char *sp2 = last_byte(line, ' ', n);
    if (sp2 == sp1)
        return FAIL(c, 400, "request line without http version");
    const char *v = sp2 + 1;
    size_t vlen = (size_t)(line + n - v);
    if (vlen == 0)
        return FAIL(c, 400, "trailing space in request line");
    /* HTTP-name is case-sensitive (RFC 9112 2.3): "http/1.1" is malformed. */
    if (vlen != 8 || memcmp(v, "HTTP/", 5) != 0 || !is_digit((unsigned char)v[5]) || v[6] != '.' ||
        !is_digit((unsigned char)v[7]))
        return FAIL(c, 400, "malformed http version \"%s\"", quote(q, v, vlen));
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return FAIL(c, 505, "unsupported http version \"%.8s\"", v);
    out->version_minor = v[7] - '0';

    const char *t = sp1 + 1;
    size_t tlen = (size_t)(sp2 - t);
    if (tlen == 0 || t[0] == ' ' || t[tlen - 1] == ' ')
        return FAIL(c, 400, "repeated space in request line");
    for (size_t i = 0; i < tlen; i++) {
        unsigned char b = (unsigned char)t[i];
        if (b == ' ')
            return FAIL(c, 400, "space in request target");
        if (b < 0x20 || b == 0x7f)
            return FAIL(c, 400, "control byte 0x%02x in request target", b);
        /* A URI is ASCII; raw UTF-8 is a second parser's guess. */
        if (b >= 0x80)
            return FAIL(c, 400, "non-ascii byte 0x%02x in request target", b);
    }
    out->target = t;
    out->target_len = tlen;

    if (strcmp(out->method, "CONNECT") == 0) {
        const char *err = authority_error(t, tlen);
        if (err)
            return FAIL(c, 400, "%s", err);
        out->kind = HTTP_TARGET_AUTHORITY;
    } else if (tlen == 1 && t[0] == '*') {
        return FAIL(c, 400, "asterisk-form request target");
    } else if (t[0] == '/') {
        out->kind = HTTP_TARGET_ORIGIN;
    } else if (has_scheme(t, tlen)) {
        out->kind = HTTP_TARGET_ABSOLUTE;
    } else {
        return FAIL(c, 400, "request target \"%s\" is neither absolute nor origin form",
                    quote(q, t, tlen));
    }
    return 0;
}

static int parse_content_length(struct ctx *c, const struct http_header *h)
{
    char q[QUOTE_MAX * 4 + 4];

    /* RFC 9110 8.6 lets a recipient accept repeats of one value; we refuse. */
    if (c->seen_cl)
        return FAIL(c, 400, "duplicate Content-Length");
    if (c->seen_te)
        return FAIL(c, 400, "both Content-Length and Transfer-Encoding");
    c->seen_cl = true;
    if (h->value_len == 0)
        return FAIL(c, 400, "empty Content-Length");
    int64_t v = 0;
    for (size_t i = 0; i < h->value_len; i++) {
        unsigned char b = (unsigned char)h->value[i];
        if (!is_digit(b))
            return FAIL(c, 400, "invalid Content-Length \"%s\"", quote(q, h->value, h->value_len));
        v = v * 10 + (b - '0');
        if (v > MAX_CONTENT_LENGTH)
            return FAIL(c, 400, "Content-Length larger than 2^53");
    }
    /* Legal per the grammar, but a base-guessing parser reads "010" as 8. */
    if (h->value_len > 1 && h->value[0] == '0')
        return FAIL(c, 400, "leading zero in Content-Length");
    c->out->content_length = v;
    return 0;
}

static int parse_transfer_encoding(struct ctx *c, const struct http_header *h)
{
    char q[QUOTE_MAX * 4 + 4];

    /* HTTP/1.0 has no chunked framing; a 1.0 upstream would read the body raw. */
    if (c->out->version_minor == 0)
        return FAIL(c, 400, "Transfer-Encoding in an HTTP/1.0 request");
    if (c->seen_te)
        return FAIL(c, 400, "duplicate Transfer-Encoding");
    if (c->seen_cl)
        return FAIL(c, 400, "both Content-Length and Transfer-Encoding");
    c->seen_te = true;
    if (http_equal_ci(h->value, h->value_len, "chunked")) {
        c->out->chunked = true;
        return 0;
    }

    /*
     * Not exactly "chunked": tell a well-formed list of codings we do not
     * support (501) from a malformed one (400). Parameters are skipped up to
     * the next comma; they only ever make a coding unsupported.
     */
    const char *p = h->value, *end = h->value + h->value_len;
    bool chunked_not_last = false, last_was_chunked = false;
    for (;;) {
        while (p < end && is_ows((unsigned char)*p))
            p++;
        const char *tok = p;
        while (p < end && is_tchar((unsigned char)*p))
            p++;
        if (p == tok)
            return FAIL(c, 400, "malformed Transfer-Encoding \"%s\"",
                        quote(q, h->value, h->value_len));
        if (last_was_chunked)
            chunked_not_last = true;
        last_was_chunked = http_equal_ci(tok, (size_t)(p - tok), "chunked");
        while (p < end && is_ows((unsigned char)*p))
            p++;
        if (p < end && *p == ';') {
            last_was_chunked = false;
            while (p < end && *p != ',')
                p++;
        }
        if (p == end)
            break;
        if (*p != ',')
            return FAIL(c, 400, "malformed Transfer-Encoding \"%s\"",
                        quote(q, h->value, h->value_len));
        p++;
    }
    /* RFC 9112 6.3: chunked anywhere but last leaves the length unknowable. */
    if (chunked_not_last)
        return FAIL(c, 400, "chunked is not the final transfer coding");
    return FAIL(c, 501, "unsupported transfer coding \"%s\"", quote(q, h->value, h->value_len));
}

static int parse_header_line(struct ctx *c, const char *line, size_t n)
{
    struct http_request *out = c->out;

    /* obs-fold: RFC 9112 5.2 allows a proxy to refuse it, and we do. */
    if (is_ows((unsigned char)line[0]))
        return FAIL(c, 400, "obs-fold header line");
    if (out->n_headers == HTTP_MAX_HEADERS)
        return FAIL(c, 431, "more than %d header fields", HTTP_MAX_HEADERS);

    size_t i = 0;
    while (i < n && is_tchar((unsigned char)line[i]))
        i++;
    if (i == n)
        return FAIL(c, 400, "header line without a colon");
    if (line[i] != ':') {
        size_t j = i;
        while (j < n && is_ows((unsigned char)line[j]))
            j++;
        if (i > 0 && j > i && j < n && line[j] == ':')
            return FAIL(c, 400, "whitespace before colon in header " NAME_FMT, NAME_ARG(line, i));
        return FAIL(c, 400, "invalid byte 0x%02x in header name", (unsigned char)line[i]);
    }
    if (i == 0)
        return FAIL(c, 400, "empty header name");

    size_t vs = i + 1, ve = n;
    while (vs < ve && is_ows((unsigned char)line[vs]))
        vs++;
    while (ve > vs && is_ows((unsigned char)line[ve - 1]))
        ve--;
    for (size_t k = vs; k < ve; k++) {
        unsigned char b = (unsigned char)line[k];
        /* field-vchar, SP, HTAB and obs-text; NUL and other CTLs are not. */
        if ((b < 0x20 && b != '\t') || b == 0x7f)
            return FAIL(c, 400, "control byte 0x%02x in header " NAME_FMT, b, NAME_ARG(line, i));
    }

    struct http_header *h = &out->headers[out->n_headers++];
    h->name = line;
    h->name_len = i;
    h->value = line + vs;
    h->value_len = ve - vs;

    /*
     * CGI-style backends map '_' and '-' to the same variable, so
     * "Content_Length" would frame the body there but not here.
     */
    if (memchr(h->name, '_', h->name_len) &&
        (equal_dash(h->name, h->name_len, "content-length") ||
         equal_dash(h->name, h->name_len, "transfer-encoding") ||
         equal_dash(h->name, h->name_len, "host")))
        return FAIL(c, 400, "underscore in header name " NAME_FMT, NAME_ARG(h->name, h->name_len));
    if (http_header_is(h, "content-length"))
        return parse_content_length(c, h);
    if (http_header_is(h, "transfer-encoding"))
        return parse_transfer_encoding(c, h);
    if (http_header_is(h, "host")) {
        if (c->seen_host)
            return FAIL(c, 400, "duplicate Host header");
        c->seen_host = true;
    }
    return 0;
}

int http_parse_request(const char *buf, size_t len, struct http_request *out, int *status,
                       char *why, size_t why_len)
{
    struct ctx c = { .out = out, .status = status, .why = why, .why_len = why_len };
    /* Past the cap nothing counts: a head must end within it. */
    size_t limit = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
    size_t pos = 0;
    bool first = true;

    out->method[0] = '\0';
    out->kind = HTTP_TARGET_ORIGIN;
    out->target = NULL;
    out->target_len = 0;
    out->version_minor = 0;
    out->n_headers = 0;
    out->content_length = -1;
    out->chunked = false;
    out->head_len = 0;

    while (pos < limit) {
        const char *lf = memchr(buf + pos, '\n', limit - pos);
        if (!lf)
            break;
        size_t end = (size_t)(lf - buf);
        /*
         * The first bad line ending wins, in byte order, and before anything
         * else on the line: the answer must not depend on where the input
         * was cut. A CR before the last byte has a non-LF after it.
         */
        if (end > pos && memchr(buf + pos, '\r', end - 1 - pos))
            return FAIL(&c, 400, "bare CR in request head");
        if (end == pos || buf[end - 1] != '\r')
            return FAIL(&c, 400, "bare LF in request head");
        const char *line = buf + pos;
        size_t n = end - 1 - pos;
        pos = end + 1;
        if (first) {
            /* RFC 9112 2.2 lets a server skip one; strict is simpler. */
            if (n == 0)
                return FAIL(&c, 400, "empty line before request line");
            if (parse_request_line(&c, line, n) < 0)
                return -1;
            first = false;
            continue;
        }
        if (n == 0) {
            out->head_len = pos;
            return 1;
        }
        if (parse_header_line(&c, line, n) < 0)
            return -1;
    }

    /* The incomplete last line: a CR already followed by something else. */
    for (size_t i = pos; i + 1 < limit; i++)
        if (buf[i] == '\r' && buf[i + 1] != '\n')
            return FAIL(&c, 400, "bare CR in request head");
    if (len >= HTTP_MAX_HEAD)
        return FAIL(&c, 431, "request head larger than %d bytes", HTTP_MAX_HEAD);
    return 0;
}

const struct http_header *http_find_header(const struct http_request *r, const char *name)
{
    for (size_t i = 0; i < r->n_headers; i++)
        if (http_header_is(&r->headers[i], name))
            return &r->headers[i];
    return NULL;
}

bool http_header_is(const struct http_header *h, const char *name)
{
    return http_equal_ci(h->name, h->name_len, name);
}

/* RFC 9110 5.6.4 qdtext and quoted-pair's second byte. */
static bool is_qdtext(unsigned char b)
{
    return b == '\t' || b == ' ' || b == 0x21 || (b >= 0x23 && b <= 0x5b) ||
        (b >= 0x5d && b <= 0x7e) || b >= 0x80;
}

int http_parse_chunk_size(const char *buf, size_t len, uint64_t *size, size_t *line_len, char *why,
                          size_t why_len)
{
    /*
     * A byte-at-a-time state machine, so an error is reported at the first
     * byte that makes it one, whatever follows.
     */
    enum {
        HEX,
        EXT_START,
        EXT_NAME,
        EXT_VALUE_START,
        EXT_TOKEN,
        EXT_QUOTED,
        EXT_QUOTED_PAIR,
        EXT_AFTER_QUOTE,
        CR
    } st = HEX;
    uint64_t v = 0;
    size_t digits = 0;
    size_t limit = len < HTTP_MAX_CHUNK_LINE ? len : HTTP_MAX_CHUNK_LINE;

    for (size_t i = 0; i < limit; i++) {
        unsigned char b = (unsigned char)buf[i];
        if (b == '\n' && st != CR)
            return fail(NULL, why, why_len, 400, "bare LF in chunk-size line");
        if (st == CR) {
            if (b != '\n')
                return fail(NULL, why, why_len, 400, "bare CR in chunk-size line");
            *size = v;
            *line_len = i + 1;
            return 1;
        }
        if (b == '\r') {
            if (st == HEX && digits == 0)
                return fail(NULL, why, why_len, 400, "chunk-size line without a size");
            if (st == EXT_START || st == EXT_VALUE_START)
                return fail(NULL, why, why_len, 400, "malformed chunk extension");
            if (st == EXT_QUOTED || st == EXT_QUOTED_PAIR)
                return fail(NULL, why, why_len, 400, "unterminated quoted chunk extension");
            st = CR;
            continue;
        }
        switch (st) {
        case HEX:
            if (hex_digit(b) >= 0) {
                if (++digits > 16)
                    return fail(NULL, why, why_len, 400, "chunk size longer than 16 hex digits");
                v = v << 4 | (uint64_t)hex_digit(b);
            } else if (b == ';' && digits > 0) {
                st = EXT_START;
            } else if (digits == 0) {
                return fail(NULL, why, why_len, 400, "chunk-size line without a size");
            } else {
                return fail(NULL, why, why_len, 400, "invalid byte 0x%02x after chunk size", b);
            }
            break;
        case EXT_START: /* after ';': a name must follow */
            if (!is_tchar(b))
                return fail(NULL, why, why_len, 400, "malformed chunk extension");
            st = EXT_NAME;
            break;
        case EXT_NAME:
        case EXT_TOKEN:
            if (b == ';')
                st = EXT_START;
            else if (b == '=' && st == EXT_NAME)
                st = EXT_VALUE_START;
            else if (!is_tchar(b))
                return fail(NULL, why, why_len, 400, "malformed chunk extension");
            break;
        case EXT_VALUE_START:
            if (b == '"')
                st = EXT_QUOTED;
            else if (is_tchar(b))
                st = EXT_TOKEN;
            else
                return fail(NULL, why, why_len, 400, "malformed chunk extension");
            break;
        case EXT_QUOTED:
            if (b == '"')
                st = EXT_AFTER_QUOTE;
            else if (b == '\\')
                st = EXT_QUOTED_PAIR;
            else if (!is_qdtext(b))
                return fail(NULL, why, why_len, 400, "malformed chunk extension");
            break;
        case EXT_AFTER_QUOTE: /* CR was handled above; only ';' may follow */
            if (b != ';')
                return fail(NULL, why, why_len, 400, "malformed chunk extension");
            st = EXT_START;
            break;
        case EXT_QUOTED_PAIR:
            if (!is_qdtext(b) && b != '"' && b != '\\')
                return fail(NULL, why, why_len, 400, "malformed chunk extension");
            st = EXT_QUOTED;
            break;
        case CR:
            break;
        }
    }
    if (len >= HTTP_MAX_CHUNK_LINE)
        return fail(NULL, why, why_len, 400, "chunk-size line longer than %d bytes",
                    HTTP_MAX_CHUNK_LINE);
    return 0;
}
