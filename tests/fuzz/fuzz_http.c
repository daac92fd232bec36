/*
 * tests/fuzz/fuzz_http.c: libFuzzer target for the gateway's request-head
 * and chunk-size parsers, which read raw bytes from the sandbox. Beyond
 * "no crash, no out-of-bounds read" (ASan, UBSan) it checks what the
 * gateway relies on: every pointer of a parsed head lies inside the head,
 * refusals carry a known status and a printable reason, and a result never
 * changes once reported when more bytes arrive (the gateway parses a
 * growing buffer). Build and run: see tests/fuzz/README.md.
 */
#include "egress/http.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "fuzz_http: check failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                     \
        }                                                                                \
    } while (0)

static bool within(const char *p, size_t n, const char *lo, size_t len)
{
    return p >= lo && n <= len && (size_t)(p - lo) <= len - n;
}

/* A reason goes into audit events: printable ASCII, never empty. */
static void check_reason(const char *why)
{
    CHECK(why[0] != '\0');
    for (const char *p = why; *p; p++)
        CHECK(*p >= 0x20 && *p < 0x7f);
}

static struct http_request req, prefix_req;

static int parse(const char *buf, size_t len, struct http_request *r, int *status, char *why)
{
    *status = 0;
    why[0] = '\0';
    int ret = http_parse_request(buf, len, r, status, why, 256);
    CHECK(ret == -1 || ret == 0 || ret == 1);
    if (ret == 0)
        CHECK(len < HTTP_MAX_HEAD);
    if (ret == -1) {
        CHECK(*status == 400 || *status == 431 || *status == 501 || *status == 505);
        check_reason(why);
    }
    if (ret == 1) {
        size_t hl = r->head_len;
        CHECK(hl >= 4 && hl <= len && hl <= HTTP_MAX_HEAD);
        CHECK(memcmp(buf + hl - 4, "\r\n\r\n", 4) == 0);
        CHECK(strlen(r->method) >= 1 && strlen(r->method) <= 20);
        CHECK(r->version_minor == 0 || r->version_minor == 1);
        CHECK(r->target_len > 0 && within(r->target, r->target_len, buf, hl));
        CHECK(r->n_headers <= HTTP_MAX_HEADERS);
        for (size_t i = 0; i < r->n_headers; i++) {
            const struct http_header *h = &r->headers[i];
            CHECK(h->name_len > 0 && within(h->name, h->name_len, buf, hl));
            CHECK(within(h->value, h->value_len, buf, hl));
            CHECK(memchr(h->value, '\r', h->value_len) == NULL);
            CHECK(memchr(h->value, '\n', h->value_len) == NULL);
            CHECK(memchr(h->value, '\0', h->value_len) == NULL);
            CHECK(http_find_header(r, "host") != NULL || !http_header_is(h, "host"));
        }
        CHECK(!(r->chunked && r->content_length >= 0));
        CHECK(r->content_length >= -1 && r->content_length <= (INT64_C(1) << 53));
        if (r->chunked)
            CHECK(r->version_minor == 1);
        if (r->kind == HTTP_TARGET_AUTHORITY)
            CHECK(strcmp(r->method, "CONNECT") == 0);
    }
    return ret;
}

static int chunk(const char *buf, size_t len, uint64_t *size, size_t *line_len, char *why)
{
    why[0] = '\0';
    int ret = http_parse_chunk_size(buf, len, size, line_len, why, 256);
    CHECK(ret == -1 || ret == 0 || ret == 1);
    if (ret == 0)
        CHECK(len < HTTP_MAX_CHUNK_LINE);
    if (ret == -1)
        check_reason(why);
    if (ret == 1) {
        CHECK(*line_len >= 3 && *line_len <= len && *line_len <= HTTP_MAX_CHUNK_LINE);
        CHECK(buf[*line_len - 2] == '\r' && buf[*line_len - 1] == '\n');
    }
    return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    char why[256], pwhy[256];
    int status, pstatus;

    int ret = parse(buf, size, &req, &status, why);

    /* A prefix's answer, once not "need more", is the whole input's answer. */
    if (size > 1) {
        size_t cut = (size_t)data[size - 1] * size / 256;
        int pret = parse(buf, cut, &prefix_req, &pstatus, pwhy);
        if (pret == -1)
            CHECK(ret == -1 && status == pstatus && strcmp(why, pwhy) == 0);
        if (pret == 1)
            CHECK(ret == 1 && req.head_len == prefix_req.head_len &&
                  req.n_headers == prefix_req.n_headers);
    }

    uint64_t csize = 0, psize = 0;
    size_t line_len = 0, pline_len = 0;
    ret = chunk(buf, size, &csize, &line_len, why);
    if (size > 1) {
        size_t cut = (size_t)data[0] * size / 256;
        int pret = chunk(buf, cut, &psize, &pline_len, pwhy);
        if (pret == -1)
            CHECK(ret == -1 && strcmp(why, pwhy) == 0);
        if (pret == 1)
            CHECK(ret == 1 && csize == psize && line_len == pline_len);
    }
    return 0;
}
