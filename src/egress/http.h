/*
 * egress/http.h: a strict HTTP/1.1 request-head parser for the gateway.
 * Strict on purpose: whatever two parsers could read differently (request
 * smuggling) is refused, not guessed. Pure: no syscalls.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_MAX_HEAD 16384 /* request line + headers; more is 431 */
#define HTTP_MAX_HEADERS 100
#define HTTP_MAX_CHUNK_LINE 1024 /* chunk-size line with extensions and CRLF */

enum http_target_kind {
    HTTP_TARGET_ABSOLUTE,  /* "http://host/path": a proxy request */
    HTTP_TARGET_AUTHORITY, /* "host:port": CONNECT */
    HTTP_TARGET_ORIGIN,    /* "/path": not for a proxy (refused by the gateway) */
};

struct http_header {
    const char *name; /* points into the caller's buffer; not NUL-terminated */
    size_t name_len;
    const char *value; /* leading/trailing blanks trimmed */
    size_t value_len;
};

struct http_request {
    char method[24];
    enum http_target_kind kind;
    const char *target; /* into the buffer */
    size_t target_len;
    int version_minor; /* HTTP/1.0 or 1.1 */
    struct http_header headers[HTTP_MAX_HEADERS];
    size_t n_headers;
    int64_t content_length; /* -1 when absent */
    bool chunked;           /* Transfer-Encoding: chunked (the only coding accepted) */
    size_t head_len;        /* bytes up to and including the blank line */
};

/*
 * Parse the head at the start of BUF (LEN bytes, not NUL-terminated).
 * Returns 1 when a complete, valid head was parsed; 0 when more bytes are
 * needed (and LEN is still under HTTP_MAX_HEAD); -1 on error with *STATUS
 * set (400 malformed or smuggling shape, 431 too large, 501 unsupported
 * transfer coding, 505 version) and WHY a one-line reason.
 * Refused: bare LF or CR, obs-fold (continuation lines), whitespace before
 * the colon, control bytes, both Content-Length and Transfer-Encoding,
 * differing or malformed Content-Length values, Transfer-Encoding other than
 * exactly "chunked", CR/LF/space/NUL inside the target, HTTP/0.9 and 2.
 * Stricter than RFC 9112 where it allows leniency: a leading empty line,
 * any repeated Content-Length (even with the same value), a Content-Length
 * with a leading zero, non-ASCII bytes in the target and a lower-case
 * "http/1.1" are 400, and so are "Content_Length", "Transfer_Encoding" and
 * "Host" spelt with '_' (CGI maps them onto the real ones); HTTP/1.x with
 * x > 1 and HTTP/2+ are 505.
 * Errors are reported as soon as the line holding them is complete (a bare
 * CR as soon as the byte after it arrives), so a result of -1 never turns
 * into anything else when more bytes follow; an incomplete head is 431 once
 * LEN reaches HTTP_MAX_HEAD, because the head could then no longer fit.
 * Stateless: each call rescans BUF, linear in min(LEN, HTTP_MAX_HEAD).
 * On 0 or -1 the contents of *OUT are unspecified.
 */
int http_parse_request(const char *buf, size_t len, struct http_request *out, int *status,
                       char *why, size_t why_len);

/* The value of header NAME (case-insensitive), or NULL; first occurrence. */
const struct http_header *http_find_header(const struct http_request *r, const char *name);

/* Case-insensitive comparison of a header's name. */
bool http_header_is(const struct http_header *h, const char *name);

/*
 * Parse one chunk-size line "HEX[;ext]CRLF" at the start of BUF, for relaying
 * a chunked body without trusting the client. Returns 1 with *SIZE and
 * *LINE_LEN (bytes including CRLF); 0 when more bytes are needed; -1 with WHY
 * (the gateway answers 400). Refused: no or more than 16 hex digits, any
 * whitespace (RFC 9112 allows BWS before ';'; no client sends it and two
 * parsers may disagree on it), malformed extensions, bare CR or LF, and a
 * line longer than HTTP_MAX_CHUNK_LINE. Extensions are checked, not
 * returned: a relay should drop them.
 */
int http_parse_chunk_size(const char *buf, size_t len, uint64_t *size, size_t *line_len, char *why,
                          size_t why_len);

/* Do the N bytes at S spell LIT, ignoring ASCII case? ASCII only: a locale
 * must not change what a header name means. */
bool http_equal_ci(const char *s, size_t n, const char *lit);
