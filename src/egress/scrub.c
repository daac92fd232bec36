/*
 * egress/scrub.c: secrets' values out of the answers the gateway relays, and
 * placeholders out of the request bodies it forwards. Runs in the gateway
 * process on bytes from upstream servers and from the sandbox. Pure: no
 * syscalls.
 */
#include "egress/scrub.h"

#include "egress/http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 2^53, as for requests: every consumer down the line holds it exactly. */
#define MAX_CONTENT_LENGTH (UINT64_C(1) << 53)

enum answer_state {
    A_HEAD,   /* collecting a head (an interim 1xx one, or the final one) */
    A_LENGTH, /* Content-Length body */
    A_CHUNK_SIZE,
    A_CHUNK_DATA,
    A_CHUNK_DATA_END,
    A_TRAILER,
    A_CLOSE, /* body delimited by the close */
    A_DONE,
};

int scrub_buf_add(struct scrub_buf *b, const char *p, size_t n)
{
    if (n == 0)
        return 0;
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

/* A chunk-size line for N bytes. */
static int add_chunk_size(struct scrub_buf *b, size_t n)
{
    char tmp[32];
    int len = snprintf(tmp, sizeof tmp, "%zx\r\n", n);
    return scrub_buf_add(b, tmp, (size_t)len);
}

void scrub_buf_free(struct scrub_buf *b)
{
    free(b->data);
    *b = (struct scrub_buf){ 0 };
}

/* ---- the replacer ---- */

void scrubber_init(struct scrubber *s, const struct scrub_pair *pairs, size_t n_pairs)
{
    *s = (struct scrubber){ .pairs = pairs, .n_pairs = n_pairs };
    if (s->n_pairs > SCRUB_MAX_PAIRS)
        s->n_pairs = SCRUB_MAX_PAIRS;
    for (size_t i = 0; i < s->n_pairs; i++)
        if (pairs[i].from_len > s->keep + 1)
            s->keep = pairs[i].from_len - 1;
}

int scrubber_feed(struct scrubber *s, const char *buf, size_t len, bool final,
                  struct scrub_buf *out)
{
    if (scrub_buf_add(&s->work, buf, len) < 0)
        return -1;
    const char *w = s->work.data;
    size_t n = s->work.len;
    /*
     * A match may start only where every value could be seen whole: before
     * SAFE, all of them fit in what we hold, so a shorter value is never
     * taken where a longer one (that it is a prefix of) might still follow.
     */
    size_t safe = final ? n : n > s->keep ? n - s->keep : 0;
    size_t next[SCRUB_MAX_PAIRS];
    for (size_t i = 0; i < s->n_pairs; i++)
        next[i] = SIZE_MAX; /* not searched yet */
    size_t cur = 0;
    for (;;) {
        size_t at = n;
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < s->n_pairs; i++) {
            const struct scrub_pair *p = &s->pairs[i];
            if (p->from_len == 0)
                continue;
            if (next[i] == SIZE_MAX || (next[i] < n && next[i] < cur)) {
                const char *hit = cur < n ? memmem(w + cur, n - cur, p->from, p->from_len) : NULL;
                next[i] = hit ? (size_t)(hit - w) : n;
            }
            if (next[i] < at ||
                (next[i] == at && at < n && p->from_len > s->pairs[best].from_len)) {
                at = next[i];
                best = i;
            }
        }
        if (best == SIZE_MAX || at >= safe)
            break;
        const struct scrub_pair *p = &s->pairs[best];
        if (scrub_buf_add(out, w + cur, at - cur) < 0 || scrub_buf_add(out, p->to, p->to_len) < 0)
            return -1;
        s->hits |= UINT64_C(1) << best;
        cur = at + p->from_len;
    }
    size_t upto = cur > safe ? cur : safe;
    if (scrub_buf_add(out, w + cur, upto - cur) < 0)
        return -1;
    if (n > upto) /* an empty buffer may have no storage yet */
        memmove(s->work.data, w + upto, n - upto);
    s->work.len = n - upto;
    return 0;
}

void scrubber_drop(struct scrubber *s)
{
    s->work.len = 0;
}

void scrubber_release(struct scrubber *s)
{
    scrub_buf_free(&s->work);
}

/* All of BUF, scrubbed at once, into OUT; hits go to S. */
static int scrub_whole(struct scrubber *s, const char *buf, size_t len, struct scrub_buf *out)
{
    struct scrubber once;
    scrubber_init(&once, s->pairs, s->n_pairs);
    int r = scrubber_feed(&once, buf, len, true, out);
    s->hits |= once.hits;
    scrubber_release(&once);
    return r;
}

/* ---- the answer relay ---- */

void scrub_answer_init(struct scrub_answer *a, const struct scrub_pair *pairs, size_t n_pairs,
                       unsigned flags)
{
    *a = (struct scrub_answer){ .flags = flags, .state = A_HEAD };
    scrubber_init(&a->body, pairs, n_pairs);
}

void scrub_answer_release(struct scrub_answer *a)
{
    scrubber_release(&a->body);
    scrub_buf_free(&a->pend);
    scrub_buf_free(&a->data);
}

__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t why_len, const char *fmt,
                                                      ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
    return -1;
}

static bool is_tchar(unsigned char b)
{
    if ((b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z'))
        return true;
    return b && strchr("!#$%&'*+-.^_`|~", b);
}

/* Quoted in a reason: printable ASCII only, cut short. */
static const char *quote(char dst[68], const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o < 64; i++)
        dst[o++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    dst[o] = '\0';
    return dst;
}

struct answer_head {
    int status;
    bool has_length, chunked;
    uint64_t length;
    char coding[68]; /* a Content-Encoding we cannot read through, or "" */
};

/* Drop from what the client gets: hop-by-hop fields, and the framing we redo. */
static bool hop_field(const char *name, size_t n, bool reframe)
{
    if (http_equal_ci(name, n, "connection") || http_equal_ci(name, n, "keep-alive") ||
        http_equal_ci(name, n, "proxy-connection"))
        return true;
    return reframe &&
        (http_equal_ci(name, n, "content-length") || http_equal_ci(name, n, "transfer-encoding"));
}

/*
 * One field of an answer head: framing and coding are read, the field is
 * kept unless SKIP says otherwise. The upstream is not the sandbox, but an
 * answer two parsers could frame differently is still refused.
 */
static int answer_field(struct scrub_answer *a, struct answer_head *h, const char *line, size_t n,
                        char *why, size_t why_len)
{
    char q[68];
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)line[i]))
        i++;
    if (i == 0 || i == n || line[i] != ':')
        return fail(why, why_len, "malformed field line \"%s\" in the answer", quote(q, line, n));
    const char *v = line + i + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t vlen = (size_t)(end - v);
    for (size_t k = 0; k < n; k++)
        if (((unsigned char)line[k] < 0x20 && line[k] != '\t') || line[k] == 0x7f)
            return fail(why, why_len, "control byte in the answer's field \"%s\"",
                        quote(q, line, i));
    if (http_equal_ci(line, i, "content-length")) {
        if (h->has_length)
            return fail(why, why_len, "%s", "more than one Content-Length in the answer");
        uint64_t len = 0;
        if (vlen == 0)
            return fail(why, why_len, "%s", "empty Content-Length in the answer");
        for (size_t k = 0; k < vlen; k++) {
            if (v[k] < '0' || v[k] > '9' ||
                (len = len * 10 + (uint64_t)(v[k] - '0')) > MAX_CONTENT_LENGTH)
                return fail(why, why_len, "invalid Content-Length \"%s\" in the answer",
                            quote(q, v, vlen));
        }
        h->has_length = true;
        h->length = len;
    } else if (http_equal_ci(line, i, "transfer-encoding")) {
        if (h->chunked || !http_equal_ci(v, vlen, "chunked"))
            return fail(why, why_len, "unsupported transfer coding \"%s\" in the answer",
                        quote(q, v, vlen));
        h->chunked = true;
    } else if (http_equal_ci(line, i, "content-encoding") && (a->flags & SCRUB_REFUSE_ENCODED) &&
               vlen && !http_equal_ci(v, vlen, "identity")) {
        /* Only an answer with a body is refused for it; see parse_head(). */
        quote(h->coding, v, vlen);
    }
    return 0;
}

/* Parse the head in A->pend (up to and including its blank line) and write
 * it, scrubbed and re-framed, to OUT. */
static int parse_head(struct scrub_answer *a, struct scrub_buf *out, char *why, size_t why_len)
{
    char q[68];
    const char *p = a->pend.data, *end = p + a->pend.len - 2; /* the blank line's CRLF */
    const char *eol = memchr(p, '\r', (size_t)(end - p));
    size_t n = (size_t)(eol - p);
    if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') || p[8] != ' ' ||
        p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9' ||
        (n > 12 && p[12] != ' '))
        return fail(why, why_len, "malformed status line \"%s\" in the answer", quote(q, p, n));
    struct answer_head h = { .status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0') };
    if (h.status == 101)
        return fail(why, why_len, "%s", "the server switched protocols, which is not relayed");

    /* First pass: framing. Lines end in CRLF (checked when collected). */
    for (const char *l = eol + 2; l < end;) {
        const char *e = memchr(l, '\r', (size_t)(end - l));
        if (l[0] == ' ' || l[0] == '\t')
            return fail(why, why_len, "%s", "obs-fold field line in the answer");
        if (answer_field(a, &h, l, (size_t)(e - l), why, why_len) < 0)
            return -1;
        l = e + 2;
    }
    if (h.has_length && h.chunked)
        return fail(why, why_len, "%s", "both Content-Length and Transfer-Encoding in the answer");
    if (h.chunked && p[7] == '0')
        return fail(why, why_len, "%s", "Transfer-Encoding in an HTTP/1.0 answer");

    bool interim = h.status < 200;
    bool bodiless = interim || h.status == 204 || h.status == 304 ||
        (a->flags & SCRUB_HEAD_REQUEST) || (h.has_length && h.length == 0 && !h.chunked);
    if (h.coding[0] && !bodiless)
        return fail(why, why_len,
                    "compressed answer (Content-Encoding: %s) cannot be scanned for secrets",
                    h.coding);
    bool http10 = a->flags & SCRUB_CLIENT_HTTP10;
    bool reframe = !bodiless && (h.chunked || h.has_length);
    a->chunked_out = reframe && !http10;

    struct scrub_buf head = { 0 };
    int r = scrub_buf_add(&head, p, (size_t)(eol - p) + 2);
    for (const char *l = eol + 2; r == 0 && l < end;) {
        const char *e = memchr(l, '\r', (size_t)(end - l));
        size_t name = (size_t)((const char *)memchr(l, ':', (size_t)(e - l)) - l);
        if (!hop_field(l, name, reframe))
            r = scrub_buf_add(&head, l, (size_t)(e - l) + 2);
        l = e + 2;
    }
    if (r == 0 && !interim)
        r = scrub_buf_add(&head, "Connection: close\r\n", 19);
    if (r == 0 && a->chunked_out)
        r = scrub_buf_add(&head, "Transfer-Encoding: chunked\r\n", 28);
    if (r == 0)
        r = scrub_buf_add(&head, "\r\n", 2);
    if (r == 0)
        r = scrub_whole(&a->body, head.data, head.len, out);
    scrub_buf_free(&head);
    if (r < 0)
        return fail(why, why_len, "%s", "out of memory");
    a->head_sent = true;
    a->pend.len = 0;
    if (interim) {
        a->state = A_HEAD;
        return 0;
    }
    a->status = h.status;
    if (bodiless)
        a->state = A_DONE;
    else if (h.chunked)
        a->state = A_CHUNK_SIZE;
    else if (h.has_length)
        a->state = A_LENGTH, a->left = h.length;
    else
        a->state = A_CLOSE;
    return 0;
}

/* Collect into A->pend until it ends with END (ELEN bytes) or reaches CAP.
 * Returns bytes of BUF used; *DONE once END was seen. */
static size_t collect(struct scrub_answer *a, const char *buf, size_t len, const char *end,
                      size_t elen, size_t cap, bool *done, bool *over)
{
    size_t used = 0;
    *done = *over = false;
    while (used < len) {
        if (a->pend.len == cap) {
            *over = true;
            return used;
        }
        /* Byte by byte up to the terminator: heads and lines are small. */
        const char *nl = memchr(buf + used, '\n', len - used);
        size_t take = nl ? (size_t)(nl - (buf + used)) + 1 : len - used;
        if (take > cap - a->pend.len)
            take = cap - a->pend.len;
        if (scrub_buf_add(&a->pend, buf + used, take) < 0) {
            *over = true;
            return used;
        }
        used += take;
        if (a->pend.len >= elen && memcmp(a->pend.data + a->pend.len - elen, end, elen) == 0) {
            *done = true;
            return used;
        }
    }
    return used;
}

/* Lines in PEND end in CRLF: a bare CR or LF is refused, as in requests. */
static bool crlf_only(const struct scrub_buf *b)
{
    for (size_t i = 0; i < b->len; i++) {
        if (b->data[i] == '\r' && i + 1 < b->len && b->data[i + 1] != '\n')
            return false;
        if (b->data[i] == '\n' && (i == 0 || b->data[i - 1] != '\r'))
            return false;
    }
    return true;
}

/* This feed's scrubbed body bytes, framed for the client. */
static int flush_data(struct scrub_answer *a, struct scrub_buf *out)
{
    if (a->data.len == 0)
        return 0;
    int r = 0;
    if (a->chunked_out)
        r = add_chunk_size(out, a->data.len);
    if (r == 0)
        r = scrub_buf_add(out, a->data.data, a->data.len);
    if (r == 0 && a->chunked_out)
        r = scrub_buf_add(out, "\r\n", 2);
    a->data.len = 0;
    return r;
}

static int body(struct scrub_answer *a, const char *buf, size_t len, bool final)
{
    return scrubber_feed(&a->body, buf, len, final, &a->data);
}

int scrub_answer_feed(struct scrub_answer *a, const char *buf, size_t len, struct scrub_buf *out,
                      char *why, size_t why_len)
{
    size_t pos = 0;
    int r = 0;
    bool done, over;
    if (a->state == A_DONE)
        return 1;
    while (r == 0 && a->state != A_DONE && pos < len) {
        const char *p = buf + pos;
        size_t n = len - pos;
        switch (a->state) {
        case A_HEAD:
            pos += collect(a, p, n, "\r\n\r\n", 4, HTTP_MAX_HEAD, &done, &over);
            if (over)
                return fail(why, why_len, "answer head larger than %d bytes", HTTP_MAX_HEAD);
            if (!crlf_only(&a->pend))
                return fail(why, why_len, "%s", "bare CR or LF in the answer head");
            if (done && parse_head(a, out, why, why_len) < 0)
                return -1;
            break;
        case A_LENGTH: {
            size_t take = n < a->left ? n : (size_t)a->left;
            a->left -= take;
            pos += take;
            r = body(a, p, take, a->left == 0);
            if (a->left == 0)
                a->state = A_DONE;
            break;
        }
        case A_CLOSE:
            pos += n;
            r = body(a, p, n, false);
            break;
        case A_CHUNK_SIZE: {
            pos += collect(a, p, n, "\r\n", 2, HTTP_MAX_CHUNK_LINE, &done, &over);
            uint64_t size;
            size_t line_len;
            int c =
                http_parse_chunk_size(a->pend.data, a->pend.len, &size, &line_len, why, why_len);
            if (c < 0 || over) {
                if (over)
                    snprintf(why, why_len, "chunk-size line too long in the answer");
                return -1;
            }
            if (c == 0)
                break;
            a->pend.len = 0;
            a->left = size;
            a->state = size ? A_CHUNK_DATA : A_TRAILER;
            break;
        }
        case A_CHUNK_DATA: {
            size_t take = n < a->left ? n : (size_t)a->left;
            a->left -= take;
            pos += take;
            /* Not final: the value may go on in the next chunk. */
            r = body(a, p, take, false);
            if (a->left == 0)
                a->state = A_CHUNK_DATA_END;
            break;
        }
        case A_CHUNK_DATA_END:
            pos += collect(a, p, n, "\r\n", 2, 2, &done, &over);
            if (a->pend.len == 2 && !done)
                return fail(why, why_len, "%s", "chunk data not followed by CRLF in the answer");
            if (a->pend.len == 1 && a->pend.data[0] != '\r')
                return fail(why, why_len, "%s", "chunk data not followed by CRLF in the answer");
            if (done) {
                a->pend.len = 0;
                a->state = A_CHUNK_SIZE;
            }
            break;
        case A_TRAILER:
            /* The trailer section: fields, then an empty line (maybe at once). */
            pos += collect(a, p, n, "\r\n", 2, HTTP_MAX_HEAD, &done, &over);
            if (over)
                return fail(why, why_len, "%s", "answer trailer too large");
            if (!crlf_only(&a->pend))
                return fail(why, why_len, "%s", "bare CR or LF in the answer's trailer");
            if (!done ||
                !(a->pend.len == 2 ||
                  (a->pend.len >= 4 && memcmp(a->pend.data + a->pend.len - 4, "\r\n\r\n", 4) == 0)))
                break;
            r = body(a, NULL, 0, true);
            if (r == 0)
                r = flush_data(a, out);
            if (r == 0 && a->chunked_out) {
                /* Trailer fields, scrubbed like the head's; dropped for HTTP/1.0. */
                r = scrub_buf_add(out, "0\r\n", 3);
                if (r == 0)
                    r = scrub_whole(&a->body, a->pend.data, a->pend.len, out);
            }
            a->pend.len = 0;
            a->state = A_DONE;
            if (r < 0)
                return fail(why, why_len, "%s", "out of memory");
            return 1;
        default:
            break;
        }
    }
    if (r == 0)
        r = flush_data(a, out);
    if (r == 0 && a->state == A_DONE && a->chunked_out)
        r = scrub_buf_add(out, "0\r\n\r\n", 5);
    if (r < 0)
        return fail(why, why_len, "%s", "out of memory");
    return a->state == A_DONE ? 1 : 0;
}

int scrub_answer_end(struct scrub_answer *a, struct scrub_buf *out, char *why, size_t why_len)
{
    if (a->state == A_DONE)
        return 0;
    if (a->state == A_CLOSE) {
        a->state = A_DONE;
        if (body(a, NULL, 0, true) < 0 || flush_data(a, out) < 0)
            return fail(why, why_len, "%s", "out of memory");
        return 0;
    }
    scrubber_drop(&a->body);
    a->data.len = 0;
    return fail(why, why_len, "%s",
                a->head_sent || a->pend.len ? "the server closed before the end of its answer"
                                            : "the server closed without answering");
}

/* ---- the finder ---- */

int scrub_find(struct scrub_finder *f, const struct scrub_pair *pairs, size_t n_pairs,
               uint64_t mask, const char *buf, size_t len)
{
    size_t keep = 0;
    if (n_pairs > SCRUB_MAX_PAIRS)
        n_pairs = SCRUB_MAX_PAIRS;
    for (size_t i = 0; i < n_pairs; i++)
        if ((mask >> i & 1) && pairs[i].from_len <= SCRUB_FIND_MAX && pairs[i].from_len > keep + 1)
            keep = pairs[i].from_len - 1;
    /* Across the seam: the held tail and BUF's first KEEP bytes. */
    char seam[2 * SCRUB_FIND_MAX];
    size_t head = len < keep ? len : keep;
    memcpy(seam, f->tail, f->n_tail);
    memcpy(seam + f->n_tail, buf, head);
    size_t seam_len = f->n_tail + head;
    int found = -1;
    for (size_t i = 0; i < n_pairs && found < 0; i++) {
        const struct scrub_pair *p = &pairs[i];
        if (!(mask >> i & 1) || p->from_len == 0 || p->from_len > SCRUB_FIND_MAX)
            continue;
        if (memmem(seam, seam_len, p->from, p->from_len) || memmem(buf, len, p->from, p->from_len))
            found = (int)i;
    }
    /* The new tail: the stream's last KEEP bytes. */
    if (len >= keep) {
        memcpy(f->tail, buf + len - keep, keep);
        f->n_tail = keep;
    } else {
        size_t n = seam_len < keep ? seam_len : keep;
        memmove(f->tail, seam + seam_len - n, n);
        f->n_tail = n;
    }
    return found;
}
