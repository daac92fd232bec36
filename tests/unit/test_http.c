/*
 * tests/unit/test_http.c: the gateway's strict request-head parser and
 * chunk-size parser. Tables of raw heads with the exact result, status and
 * reason; the smuggling shapes from the egress issue; incremental feeding;
 * the size caps. No privileges, no network.
 */
#include "egress/http.h"

#include "tap.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Inputs carry NUL bytes, so lengths come from the literal, not strlen(). */
#define RAW(s) s, sizeof(s) - 1

struct refusal_case {
    const char *name;
    const char *in;
    size_t len;
    int ret;    /* 0 or -1 */
    int status; /* when ret is -1 */
    const char *why;
};

#define GET_ABS "GET http://example.com/ HTTP/1.1\r\n"
#define POST_ABS "POST http://example.com/upload HTTP/1.1\r\nHost: example.com\r\n"

static const struct refusal_case refusals[] = {
    /* request line */
    { "leading empty line", RAW("\r\nGET http://a/ HTTP/1.1\r\n\r\n"), -1, 400,
      "empty line before request line" },
    { "leading bare LF", RAW("\nGET http://a/ HTTP/1.1\r\n\r\n"), -1, 400,
      "bare LF in request head" },
    { "no spaces", RAW("GET\r\n\r\n"), -1, 400, "request line without spaces" },
    { "starts with space", RAW(" GET http://a/ HTTP/1.1\r\n\r\n"), -1, 400,
      "request line starts with a space" },
    { "HTTP/0.9 style line", RAW("GET http://a/\r\n\r\n"), -1, 400,
      "request line without http version" },
    { "double space after method", RAW("GET  http://a/ HTTP/1.1\r\n\r\n"), -1, 400,
      "repeated space in request line" },
    { "double space before version", RAW("GET http://a/  HTTP/1.1\r\n\r\n"), -1, 400,
      "repeated space in request line" },
    { "trailing space", RAW("GET http://a/ HTTP/1.1 \r\n\r\n"), -1, 400,
      "trailing space in request line" },
    { "tab as separator", RAW("GET\thttp://a/ HTTP/1.1\r\n\r\n"), -1, 400,
      "invalid byte 0x09 in method" },
    { "method with slash", RAW("GE/T http://a/ HTTP/1.1\r\n\r\n"), -1, 400,
      "invalid byte 0x2f in method" },
    { "method 21 bytes", RAW("AAAAAAAAAAAAAAAAAAAAA http://a/ HTTP/1.1\r\n\r\n"), -1, 400,
      "method longer than 20 bytes" },
    { "lower-case http version", RAW("GET http://a/ http/1.1\r\n\r\n"), -1, 400,
      "malformed http version \"http/1.1\"" },
    { "version without minor", RAW("GET http://a/ HTTP/1\r\n\r\n"), -1, 400,
      "malformed http version \"HTTP/1\"" },
    { "version with NUL", RAW("GET http://a/ HTTP/1.\0\r\n\r\n"), -1, 400,
      "malformed http version \"HTTP/1.\\x00\"" },
    { "HTTP/2.0", RAW("GET http://a/ HTTP/2.0\r\n\r\n"), -1, 505,
      "unsupported http version \"HTTP/2.0\"" },
    { "HTTP/1.2", RAW("GET http://a/ HTTP/1.2\r\n\r\n"), -1, 505,
      "unsupported http version \"HTTP/1.2\"" },
    { "HTTP/0.9", RAW("GET http://a/ HTTP/0.9\r\n\r\n"), -1, 505,
      "unsupported http version \"HTTP/0.9\"" },
    { "asterisk-form", RAW("OPTIONS * HTTP/1.1\r\n\r\n"), -1, 400, "asterisk-form request target" },
    { "authority-form without CONNECT", RAW("GET example.com:443 HTTP/1.1\r\n\r\n"), -1, 400,
      "request target \"example.com:443\" is neither absolute nor origin form" },
    { "scheme without //", RAW("GET http:example.com HTTP/1.1\r\n\r\n"), -1, 400,
      "request target \"http:example.com\" is neither absolute nor origin form" },
    /* targets: injection */
    { "space in target", RAW("GET http://a/x y HTTP/1.1\r\n\r\n"), -1, 400,
      "space in request target" },
    { "CR in target", RAW("GET http://a/\rx HTTP/1.1\r\n\r\n"), -1, 400,
      "bare CR in request head" },
    { "LF in target", RAW("GET http://a/\nHost: b HTTP/1.1\r\n\r\n"), -1, 400,
      "bare LF in request head" },
    { "NUL in target", RAW("GET http://a/\0 HTTP/1.1\r\n\r\n"), -1, 400,
      "control byte 0x00 in request target" },
    { "tab in target", RAW("GET http://a/\tx HTTP/1.1\r\n\r\n"), -1, 400,
      "control byte 0x09 in request target" },
    { "DEL in target", RAW("GET http://a/\x7f HTTP/1.1\r\n\r\n"), -1, 400,
      "control byte 0x7f in request target" },
    { "UTF-8 in target", RAW("GET http://\xc3\xa9.com/ HTTP/1.1\r\n\r\n"), -1, 400,
      "non-ascii byte 0xc3 in request target" },
    /* CONNECT */
    { "CONNECT without port", RAW("CONNECT example.com HTTP/1.1\r\n\r\n"), -1, 400,
      "CONNECT target without a port" },
    { "CONNECT empty port", RAW("CONNECT example.com: HTTP/1.1\r\n\r\n"), -1, 400,
      "CONNECT target without a port" },
    { "CONNECT without host", RAW("CONNECT :443 HTTP/1.1\r\n\r\n"), -1, 400,
      "CONNECT target without a host" },
    { "CONNECT absolute URI", RAW("CONNECT http://example.com:443/ HTTP/1.1\r\n\r\n"), -1, 400,
      "'/' in CONNECT target (CONNECT needs host:port)" },
    { "CONNECT userinfo", RAW("CONNECT allowed.com@127.0.0.1:443 HTTP/1.1\r\n\r\n"), -1, 400,
      "userinfo ('@') in CONNECT target" },
    { "CONNECT unbracketed IPv6", RAW("CONNECT ::1:443 HTTP/1.1\r\n\r\n"), -1, 400,
      "unbracketed IPv6 address in CONNECT target" },
    { "CONNECT unclosed bracket", RAW("CONNECT [::1:443 HTTP/1.1\r\n\r\n"), -1, 400,
      "unclosed '[' in CONNECT target" },
    { "CONNECT bracket without port", RAW("CONNECT [::1] HTTP/1.1\r\n\r\n"), -1, 400,
      "CONNECT target without a port" },
    { "CONNECT empty brackets", RAW("CONNECT []:443 HTTP/1.1\r\n\r\n"), -1, 400,
      "empty IPv6 literal in CONNECT target" },
    { "CONNECT port 0", RAW("CONNECT example.com:0 HTTP/1.1\r\n\r\n"), -1, 400,
      "invalid port in CONNECT target" },
    { "CONNECT port 65536", RAW("CONNECT example.com:65536 HTTP/1.1\r\n\r\n"), -1, 400,
      "invalid port in CONNECT target" },
    { "CONNECT port +443", RAW("CONNECT example.com:+443 HTTP/1.1\r\n\r\n"), -1, 400,
      "invalid port in CONNECT target" },
    { "CONNECT host with quote", RAW("CONNECT exa\"mple.com:443 HTTP/1.1\r\n\r\n"), -1, 400,
      "invalid character in CONNECT target's host" },
    { "CONNECT asterisk", RAW("CONNECT * HTTP/1.1\r\n\r\n"), -1, 400,
      "CONNECT target without a port" },
    /* line endings */
    { "bare LF ending request line", RAW("GET http://a/ HTTP/1.1\n\r\n"), -1, 400,
      "bare LF in request head" },
    { "bare LF ending header", RAW(GET_ABS "Host: a\n\r\n"), -1, 400, "bare LF in request head" },
    { "bare LF as blank line", RAW(GET_ABS "Host: a\r\n\n"), -1, 400, "bare LF in request head" },
    { "bare CR as blank line", RAW(GET_ABS "Host: a\r\n\r\r\n"), -1, 400,
      "bare CR in request head" },
    { "header injection via CR", RAW(GET_ABS "X-A: 1\rTransfer-Encoding: chunked\r\n\r\n"), -1, 400,
      "bare CR in request head" },
    { "bare CR in incomplete line", RAW(GET_ABS "X-A: 1\rX"), -1, 400, "bare CR in request head" },
    { "bare CR before bare LF on one line", RAW(GET_ABS "X-A: 1\r2\n\r\n"), -1, 400,
      "bare CR in request head" },
    { "CR at end of input waits", RAW(GET_ABS "X-A: 1\r"), 0, 0, NULL },
    /* header syntax */
    { "obs-fold with space", RAW(GET_ABS "X-A: 1\r\n 2\r\n\r\n"), -1, 400, "obs-fold header line" },
    { "obs-fold with tab", RAW(GET_ABS "X-A: 1\r\n\t2\r\n\r\n"), -1, 400, "obs-fold header line" },
    { "first header folded", RAW(GET_ABS " Host: a\r\n\r\n"), -1, 400, "obs-fold header line" },
    { "space before colon", RAW(GET_ABS "Foo : bar\r\n\r\n"), -1, 400,
      "whitespace before colon in header \"Foo\"" },
    { "tab before colon", RAW(GET_ABS "Foo\t: bar\r\n\r\n"), -1, 400,
      "whitespace before colon in header \"Foo\"" },
    { "space inside name", RAW(GET_ABS "Foo Bar: x\r\n\r\n"), -1, 400,
      "invalid byte 0x20 in header name" },
    { "NUL in name", RAW(GET_ABS "Fo\0o: bar\r\n\r\n"), -1, 400,
      "invalid byte 0x00 in header name" },
    { "empty name", RAW(GET_ABS ": bar\r\n\r\n"), -1, 400, "empty header name" },
    { "no colon", RAW(GET_ABS "Foo\r\n\r\n"), -1, 400, "header line without a colon" },
    { "NUL in value", RAW(GET_ABS "X-A: a\0b\r\n\r\n"), -1, 400,
      "control byte 0x00 in header \"X-A\"" },
    { "ESC in value", RAW(GET_ABS "X-A: a\x1b[0m\r\n\r\n"), -1, 400,
      "control byte 0x1b in header \"X-A\"" },
    { "DEL in value", RAW(GET_ABS "X-A: a\x7f\r\n\r\n"), -1, 400,
      "control byte 0x7f in header \"X-A\"" },
    /* framing: the smuggling shapes */
    { "CL then TE", RAW(POST_ABS "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"), -1,
      400, "both Content-Length and Transfer-Encoding" },
    { "TE then CL", RAW(POST_ABS "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"), -1,
      400, "both Content-Length and Transfer-Encoding" },
    { "TE then CL 0", RAW(POST_ABS "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n"), -1,
      400, "both Content-Length and Transfer-Encoding" },
    { "CL list differing", RAW(POST_ABS "Content-Length: 5, 6\r\n\r\n"), -1, 400,
      "invalid Content-Length \"5, 6\"" },
    { "CL list same", RAW(POST_ABS "Content-Length: 5, 5\r\n\r\n"), -1, 400,
      "invalid Content-Length \"5, 5\"" },
    { "CL duplicated same value", RAW(POST_ABS "Content-Length: 5\r\nContent-Length: 5\r\n\r\n"),
      -1, 400, "duplicate Content-Length" },
    { "CL duplicated other case", RAW(POST_ABS "Content-Length: 5\r\ncontent-length: 6\r\n\r\n"),
      -1, 400, "duplicate Content-Length" },
    { "CL plus sign", RAW(POST_ABS "Content-Length: +5\r\n\r\n"), -1, 400,
      "invalid Content-Length \"+5\"" },
    { "CL minus", RAW(POST_ABS "Content-Length: -1\r\n\r\n"), -1, 400,
      "invalid Content-Length \"-1\"" },
    { "CL hex", RAW(POST_ABS "Content-Length: 0x5\r\n\r\n"), -1, 400,
      "invalid Content-Length \"0x5\"" },
    { "CL space inside", RAW(POST_ABS "Content-Length: 1 0\r\n\r\n"), -1, 400,
      "invalid Content-Length \"1 0\"" },
    { "CL empty", RAW(POST_ABS "Content-Length: \r\n\r\n"), -1, 400, "empty Content-Length" },
    { "CL leading zero", RAW(POST_ABS "Content-Length: 010\r\n\r\n"), -1, 400,
      "leading zero in Content-Length" },
    { "CL over 2^53", RAW(POST_ABS "Content-Length: 9007199254740993\r\n\r\n"), -1, 400,
      "Content-Length larger than 2^53" },
    { "CL huge", RAW(POST_ABS "Content-Length: 99999999999999999999999999\r\n\r\n"), -1, 400,
      "Content-Length larger than 2^53" },
    { "TE space before colon", RAW(POST_ABS "Transfer-Encoding : chunked\r\n\r\n"), -1, 400,
      "whitespace before colon in header \"Transfer-Encoding\"" },
    { "TE chunked, identity", RAW(POST_ABS "Transfer-Encoding: chunked, identity\r\n\r\n"), -1, 400,
      "chunked is not the final transfer coding" },
    { "TE chunked, gzip", RAW(POST_ABS "Transfer-Encoding: chunked, gzip\r\n\r\n"), -1, 400,
      "chunked is not the final transfer coding" },
    { "TE gzip", RAW(POST_ABS "Transfer-Encoding: gzip\r\n\r\n"), -1, 501,
      "unsupported transfer coding \"gzip\"" },
    { "TE gzip, chunked", RAW(POST_ABS "Transfer-Encoding: gzip, chunked\r\n\r\n"), -1, 501,
      "unsupported transfer coding \"gzip, chunked\"" },
    { "TE xchunked", RAW(POST_ABS "Transfer-Encoding: xchunked\r\n\r\n"), -1, 501,
      "unsupported transfer coding \"xchunked\"" },
    { "TE chunked with parameter", RAW(POST_ABS "Transfer-Encoding: chunked;q=1\r\n\r\n"), -1, 501,
      "unsupported transfer coding \"chunked;q=1\"" },
    { "TE empty", RAW(POST_ABS "Transfer-Encoding: \r\n\r\n"), -1, 400,
      "malformed Transfer-Encoding \"\"" },
    { "TE empty list element", RAW(POST_ABS "Transfer-Encoding: gzip,,chunked\r\n\r\n"), -1, 400,
      "malformed Transfer-Encoding \"gzip,,chunked\"" },
    { "TE two words", RAW(POST_ABS "Transfer-Encoding: chunked chunked\r\n\r\n"), -1, 400,
      "malformed Transfer-Encoding \"chunked chunked\"" },
    { "TE vertical tab",
      RAW(POST_ABS "Transfer-Encoding: \x0b"
                   "chunked\r\n\r\n"),
      -1, 400, "control byte 0x0b in header \"Transfer-Encoding\"" },
    { "TE duplicated",
      RAW(POST_ABS "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"), -1, 400,
      "duplicate Transfer-Encoding" },
    { "TE in HTTP/1.0", RAW("POST http://a/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), -1,
      400, "Transfer-Encoding in an HTTP/1.0 request" },
    { "Content_Length", RAW(POST_ABS "Content_Length: 5\r\n\r\n"), -1, 400,
      "underscore in header name \"Content_Length\"" },
    { "transfer_encoding", RAW(POST_ABS "transfer_encoding: chunked\r\n\r\n"), -1, 400,
      "underscore in header name \"transfer_encoding\"" },
    { "duplicate Host", RAW(GET_ABS "Host: a\r\nHost: b\r\n\r\n"), -1, 400,
      "duplicate Host header" },
    { "duplicate Host other case", RAW(GET_ABS "Host: a\r\nhOST: a\r\n\r\n"), -1, 400,
      "duplicate Host header" },
    /* incomplete */
    { "empty input", RAW(""), 0, 0, NULL },
    { "request line only", RAW(GET_ABS), 0, 0, NULL },
    { "one CRLF short", RAW(GET_ABS "Host: a\r\n\r"), 0, 0, NULL },
    { "partial garbage waits for its line", RAW("GET http://a/\0"), 0, 0, NULL },
    { "error before the end is final", RAW(GET_ABS "Foo : x\r\nHost: a"), -1, 400,
      "whitespace before colon in header \"Foo\"" },
};

struct valid_case {
    const char *name;
    const char *in;
    size_t len;
    const char *method;
    enum http_target_kind kind;
    const char *target;
    int minor;
    size_t n_headers;
    int64_t content_length;
    bool chunked;
};

static const struct valid_case valids[] = {
    { "absolute GET with headers",
      RAW("GET http://example.com/a?b=c HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8\r\n"
          "Accept: */*\r\n\r\n"),
      "GET", HTTP_TARGET_ABSOLUTE, "http://example.com/a?b=c", 1, 3, -1, false },
    { "CONNECT host:443", RAW("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"),
      "CONNECT", HTTP_TARGET_AUTHORITY, "example.com:443", 1, 1, -1, false },
    { "CONNECT [::1]:443", RAW("CONNECT [::1]:443 HTTP/1.1\r\n\r\n"), "CONNECT",
      HTTP_TARGET_AUTHORITY, "[::1]:443", 1, 0, -1, false },
    { "CONNECT IPv4 literal HTTP/1.0", RAW("CONNECT 127.0.0.1:8080 HTTP/1.0\r\n\r\n"), "CONNECT",
      HTTP_TARGET_AUTHORITY, "127.0.0.1:8080", 0, 0, -1, false },
    { "CONNECT zone id", RAW("CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n"), "CONNECT",
      HTTP_TARGET_AUTHORITY, "[fe80::1%25eth0]:443", 1, 0, -1, false },
    { "origin-form", RAW("GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n"), "GET", HTTP_TARGET_ORIGIN,
      "/index.html", 1, 1, -1, false },
    { "POST with Content-Length", RAW(POST_ABS "Content-Length: 42\r\n\r\n"), "POST",
      HTTP_TARGET_ABSOLUTE, "http://example.com/upload", 1, 2, 42, false },
    { "Content-Length 0", RAW(POST_ABS "Content-Length: 0\r\n\r\n"), "POST", HTTP_TARGET_ABSOLUTE,
      "http://example.com/upload", 1, 2, 0, false },
    { "Content-Length 2^53", RAW(POST_ABS "Content-Length: 9007199254740992\r\n\r\n"), "POST",
      HTTP_TARGET_ABSOLUTE, "http://example.com/upload", 1, 2, INT64_C(9007199254740992), false },
    { "TE chunked", RAW(POST_ABS "Transfer-Encoding: chunked\r\n\r\n"), "POST",
      HTTP_TARGET_ABSOLUTE, "http://example.com/upload", 1, 2, -1, true },
    { "TE CHUNKED with trailing space", RAW(POST_ABS "Transfer-Encoding: CHUNKED \r\n\r\n"), "POST",
      HTTP_TARGET_ABSOLUTE, "http://example.com/upload", 1, 2, -1, true },
    { "TE chunked with tabs", RAW(POST_ABS "Transfer-Encoding:\tchunked\t\r\n\r\n"), "POST",
      HTTP_TARGET_ABSOLUTE, "http://example.com/upload", 1, 2, -1, true },
    { "extension method, https scheme", RAW("PROPFIND https://a.example/dav HTTP/1.1\r\n\r\n"),
      "PROPFIND", HTTP_TARGET_ABSOLUTE, "https://a.example/dav", 1, 0, -1, false },
    { "underscore in other names", RAW(GET_ABS "X_Trace_Id: 1\r\nHost_Name: a\r\n\r\n"), "GET",
      HTTP_TARGET_ABSOLUTE, "http://example.com/", 1, 2, -1, false },
    { "obs-text value, empty value", RAW(GET_ABS "X-Name: caf\xc3\xa9\r\nX-Empty:\r\n\r\n"), "GET",
      HTTP_TARGET_ABSOLUTE, "http://example.com/", 1, 2, -1, false },
};

static void run_refusals(void)
{
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        const struct refusal_case *c = &refusals[i];
        static struct http_request r;
        int status = 0;
        char why[256] = "";
        int ret = http_parse_request(c->in, c->len, &r, &status, why, sizeof why);
        if (c->ret == 0) {
            ok(ret == 0, "%s: needs more (got %d)", c->name, ret);
            continue;
        }
        if (!ok(ret == -1 && status == c->status && strcmp(why, c->why) == 0, "%s: %d %s", c->name,
                c->status, c->why))
            printf("#   got: %d %d %s\n", ret, status, why);
    }
}

static void check_valid(const struct valid_case *c, const struct http_request *r, const char *how)
{
    bool same = strcmp(r->method, c->method) == 0 && r->kind == c->kind &&
        r->target_len == strlen(c->target) && memcmp(r->target, c->target, r->target_len) == 0 &&
        r->version_minor == c->minor && r->n_headers == c->n_headers &&
        r->content_length == c->content_length && r->chunked == c->chunked && r->head_len == c->len;
    if (!ok(same, "%s%s", c->name, how))
        printf("#   got: %s kind %d target %.*s minor %d headers %zu cl %" PRId64
               " chunked %d head_len %zu\n",
               r->method, (int)r->kind, (int)r->target_len, r->target, r->version_minor,
               r->n_headers, r->content_length, (int)r->chunked, r->head_len);
}

static void run_valids(void)
{
    for (size_t i = 0; i < sizeof valids / sizeof valids[0]; i++) {
        const struct valid_case *c = &valids[i];
        static struct http_request r;
        int status = 0;
        char why[256] = "";
        int ret = http_parse_request(c->in, c->len, &r, &status, why, sizeof why);
        if (!ok(ret == 1, "%s: parses", c->name)) {
            printf("#   got: %d %d %s\n", ret, status, why);
            continue;
        }
        check_valid(c, &r, "");
    }
}

/* A body after the head is not part of it; header values come out trimmed. */
static void test_details(void)
{
    static const char in[] = "POST http://a/ HTTP/1.1\r\nHost:  a.example \r\n"
                             "Content-Length: 5\r\nX-Tab:\tv\t\r\n\r\nhello";
    static struct http_request r;
    int status = 0;
    char why[256] = "";
    ok(http_parse_request(in, sizeof in - 1, &r, &status, why, sizeof why) == 1 &&
           r.head_len == sizeof in - 1 - 5,
       "head_len excludes the body");
    const struct http_header *h = http_find_header(&r, "HOST");
    ok(h && h->value_len == 9 && memcmp(h->value, "a.example", 9) == 0,
       "find_header is case-insensitive, value trimmed");
    h = http_find_header(&r, "x-tab");
    ok(h && h->value_len == 1 && h->value[0] == 'v', "tabs trimmed from a value");
    ok(http_find_header(&r, "Hos") == NULL && http_find_header(&r, "Hostx") == NULL,
       "find_header needs the whole name");
    ok(h && http_header_is(h, "X-TAB") && !http_header_is(h, "X-Ta"), "header_is");
}

/* Feeding a head one byte at a time: 0 until the last byte, then the same result. */
static void test_incremental(void)
{
    for (size_t i = 0; i < sizeof valids / sizeof valids[0]; i++) {
        const struct valid_case *c = &valids[i];
        static struct http_request r;
        int status = 0;
        char why[256] = "";
        bool all_zero = true;
        for (size_t n = 0; n < c->len; n++)
            if (http_parse_request(c->in, n, &r, &status, why, sizeof why) != 0)
                all_zero = false;
        int ret = http_parse_request(c->in, c->len, &r, &status, why, sizeof why);
        ok(all_zero && ret == 1, "%s: byte by byte, 0 until the last byte", c->name);
        if (ret == 1)
            check_valid(c, &r, " (after byte-by-byte)");
    }

    /* A refusal stays the same refusal whatever follows it. */
    static const char bad[] = GET_ABS "Foo : x\r\nHost: a\r\n\r\n";
    size_t first = 0;
    bool stable = true;
    for (size_t n = 0; n <= sizeof bad - 1; n++) {
        static struct http_request r;
        int status = 0;
        char why[256] = "";
        int ret = http_parse_request(bad, n, &r, &status, why, sizeof why);
        if (ret == -1 && !first)
            first = n;
        if (first &&
            (ret != -1 || status != 400 ||
             strcmp(why, "whitespace before colon in header \"Foo\"") != 0))
            stable = false;
    }
    ok(stable && first == strlen(GET_ABS "Foo : x\r\n"),
       "refusal reported once its line is complete, then stable (at %zu)", first);
}

/* Builds heads of a chosen size in a static buffer. */
static char big[3 * HTTP_MAX_HEAD];

static size_t head_of_size(size_t total)
{
    /* "GET http://a/ HTTP/1.1\r\nX-Pad: ppp...\r\n\r\n" */
    static const char pre[] = GET_ABS "X-Pad: ";
    size_t fixed = sizeof pre - 1 + 4;
    memcpy(big, pre, sizeof pre - 1);
    memset(big + sizeof pre - 1, 'p', total - fixed);
    memcpy(big + total - 4, "\r\n\r\n", 4);
    return total;
}

static void test_limits(void)
{
    static struct http_request r;
    int status = 0;
    char why[256] = "";

    size_t n = head_of_size(HTTP_MAX_HEAD);
    ok(http_parse_request(big, n, &r, &status, why, sizeof why) == 1 && r.head_len == n,
       "a head of exactly %d bytes parses", HTTP_MAX_HEAD);
    n = head_of_size(HTTP_MAX_HEAD + 1);
    int ret = http_parse_request(big, n, &r, &status, why, sizeof why);
    ok(ret == -1 && status == 431 && strcmp(why, "request head larger than 16384 bytes") == 0,
       "a complete head of %d bytes is 431", HTTP_MAX_HEAD + 1);
    ret = http_parse_request(big, HTTP_MAX_HEAD - 1, &r, &status, why, sizeof why);
    ok(ret == 0, "an incomplete head under the cap needs more");
    ret = http_parse_request(big, HTTP_MAX_HEAD, &r, &status, why, sizeof why);
    ok(ret == -1 && status == 431 && strcmp(why, "request head larger than 16384 bytes") == 0,
       "an incomplete head reaching the cap is 431");

    /* A complete head followed by a large body is fine. */
    n = head_of_size(200);
    memset(big + n, 'b', sizeof big - n);
    ok(http_parse_request(big, sizeof big, &r, &status, why, sizeof why) == 1 && r.head_len == 200,
       "a small head followed by a large body parses");

    /* Header count: 100 parse, 101 are 431. */
    size_t o = 0;
    o += (size_t)sprintf(big + o, GET_ABS);
    for (int i = 0; i < HTTP_MAX_HEADERS; i++)
        o += (size_t)sprintf(big + o, "X-H%d: %d\r\n", i, i);
    memcpy(big + o, "\r\n", 2);
    ok(http_parse_request(big, o + 2, &r, &status, why, sizeof why) == 1 &&
           r.n_headers == HTTP_MAX_HEADERS,
       "%d headers parse", HTTP_MAX_HEADERS);
    o += (size_t)sprintf(big + o, "X-Last: 1\r\n\r\n");
    ret = http_parse_request(big, o, &r, &status, why, sizeof why);
    ok(ret == -1 && status == 431 && strcmp(why, "more than 100 header fields") == 0,
       "%d headers are 431", HTTP_MAX_HEADERS + 1);

    /* A long request line is held to the same cap. */
    o = (size_t)sprintf(big, "GET http://a/");
    memset(big + o, 'a', HTTP_MAX_HEAD);
    ret = http_parse_request(big, o + HTTP_MAX_HEAD, &r, &status, why, sizeof why);
    ok(ret == -1 && status == 431, "a request line over the cap is 431");

    /* A reason quoting untrusted bytes is escaped and cut short. */
    o = (size_t)sprintf(big, POST_ABS "Content-Length: ");
    memset(big + o, '7', 3);
    memcpy(big + o + 3, "\x80\"\\", 3);
    memset(big + o + 6, 'x', 40);
    memcpy(big + o + 46, "\r\n\r\n", 4);
    ret = http_parse_request(big, o + 50, &r, &status, why, sizeof why);
    is_str(why, "invalid Content-Length \"777\\x80\\x22\\x5cxxxxxxxxxxxxxxxxxxxxxxxxxx...\"",
           "untrusted bytes in a reason are escaped and cut short");
    ok(http_parse_request(big, o + 50, &r, NULL, NULL, 0) == -1, "status and why may be NULL");
}

struct chunk_case {
    const char *name;
    const char *in;
    size_t len;
    int ret;
    uint64_t size;
    size_t line_len;
    const char *why;
};

static const struct chunk_case chunks[] = {
    { "simple", RAW("5\r\nhello"), 1, 5, 3, NULL },
    { "zero (last chunk)", RAW("0\r\n\r\n"), 1, 0, 3, NULL },
    { "hex mixed case", RAW("aB\r\n"), 1, 0xab, 4, NULL },
    { "16 digits", RAW("ffffffffffffffff\r\n"), 1, UINT64_MAX, 18, NULL },
    { "leading zeros within 16", RAW("000000000000000a\r\n"), 1, 10, 18, NULL },
    { "extension", RAW("5;name\r\n"), 1, 5, 8, NULL },
    { "extension with token value", RAW("5;name=val;other\r\n"), 1, 5, 18, NULL },
    { "extension with quoted value", RAW("5;n=\"a b\\\"c\";m\r\n"), 1, 5, 16, NULL },
    { "needs more: digits", RAW("5"), 0, 0, 0, NULL },
    { "needs more: CR", RAW("5\r"), 0, 0, 0, NULL },
    { "needs more: empty", RAW(""), 0, 0, 0, NULL },
    { "17 digits", RAW("00000000000000001\r\n"), -1, 0, 0, "chunk size longer than 16 hex digits" },
    { "no digits", RAW("\r\n"), -1, 0, 0, "chunk-size line without a size" },
    { "only extension", RAW(";a\r\n"), -1, 0, 0, "chunk-size line without a size" },
    { "0x prefix", RAW("0x5\r\n"), -1, 0, 0, "invalid byte 0x78 after chunk size" },
    { "minus", RAW("-5\r\n"), -1, 0, 0, "chunk-size line without a size" },
    { "space after size", RAW("5 \r\n"), -1, 0, 0, "invalid byte 0x20 after chunk size" },
    { "space before ext", RAW("5 ;a\r\n"), -1, 0, 0, "invalid byte 0x20 after chunk size" },
    { "leading space", RAW(" 5\r\n"), -1, 0, 0, "chunk-size line without a size" },
    { "bare LF", RAW("5\n"), -1, 0, 0, "bare LF in chunk-size line" },
    { "bare CR", RAW("5\rx"), -1, 0, 0, "bare CR in chunk-size line" },
    { "empty extension", RAW("5;\r\n"), -1, 0, 0, "malformed chunk extension" },
    { "empty extension value", RAW("5;a=\r\n"), -1, 0, 0, "malformed chunk extension" },
    { "NUL in extension", RAW("5;a\0\r\n"), -1, 0, 0, "malformed chunk extension" },
    { "unterminated quote", RAW("5;a=\"x\r\n"), -1, 0, 0, "unterminated quoted chunk extension" },
    { "text after quote", RAW("5;a=\"x\"y\r\n"), -1, 0, 0, "malformed chunk extension" },
    { "garbage fails early", RAW("5;a b"), -1, 0, 0, "malformed chunk extension" },
};

static void run_chunks(void)
{
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        const struct chunk_case *c = &chunks[i];
        uint64_t size = 12345;
        size_t line_len = 12345;
        char why[256] = "";
        int ret = http_parse_chunk_size(c->in, c->len, &size, &line_len, why, sizeof why);
        bool same = ret == c->ret;
        if (same && ret == 1)
            same = size == c->size && line_len == c->line_len;
        if (same && ret == -1)
            same = strcmp(why, c->why) == 0;
        if (!ok(same, "chunk %s", c->name))
            printf("#   got: %d size %" PRIu64 " line_len %zu why %s\n", ret, size, line_len, why);
    }

    /* Extensions are bounded by the line cap. */
    uint64_t size = 0;
    size_t line_len = 0;
    char why[256] = "";
    big[0] = '1';
    big[1] = ';';
    memset(big + 2, 'e', HTTP_MAX_CHUNK_LINE);
    int ret =
        http_parse_chunk_size(big, HTTP_MAX_CHUNK_LINE - 1, &size, &line_len, why, sizeof why);
    ok(ret == 0, "a long extension under the cap needs more");
    ret = http_parse_chunk_size(big, HTTP_MAX_CHUNK_LINE + 2, &size, &line_len, why, sizeof why);
    ok(ret == -1 && strcmp(why, "chunk-size line longer than 1024 bytes") == 0,
       "a chunk-size line over %d bytes is refused", HTTP_MAX_CHUNK_LINE);
    memcpy(big + HTTP_MAX_CHUNK_LINE - 2, "\r\n", 2);
    ret = http_parse_chunk_size(big, HTTP_MAX_CHUNK_LINE, &size, &line_len, why, sizeof why);
    ok(ret == 1 && size == 1 && line_len == HTTP_MAX_CHUNK_LINE,
       "a chunk-size line of exactly %d bytes parses", HTTP_MAX_CHUNK_LINE);
}

int main(void)
{
    run_refusals();
    run_valids();
    test_details();
    test_incremental();
    test_limits();
    run_chunks();
    return done_testing();
}
