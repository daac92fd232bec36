/*
 * egress/scrub.h: what keeps a secret's real value from coming back into the
 * sandbox in an answer the gateway relays in plaintext (plain HTTP, and the
 * inside of an intercepted TLS tunnel), and what finds a placeholder in a
 * request body on its way out. Runs in the gateway process. Pure: no
 * syscalls; it allocates its own buffers.
 *
 * Three pieces:
 *  - a streaming replacer: every occurrence of a value becomes its
 *    placeholder, leftmost first and the longest value on a tie (one value
 *    may be a prefix of another), holding back len(longest value) - 1 bytes
 *    between reads so that a value split across reads is still found;
 *  - an HTTP/1.1 answer relay built on it: it parses the upstream's head and
 *    framing, scrubs the status line, the fields, the body and the trailer,
 *    and frames the body anew for the client, since a placeholder is not as
 *    long as the value it stands for (see scrub_answer_feed());
 *  - a streaming finder for placeholders that must not leave.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What is replaced (FROM) and by what (TO); at most 64 pairs (a 64-bit mask). */
struct scrub_pair {
    const char *from;
    size_t from_len; /* > 0 */
    const char *to;
    size_t to_len;
};

#define SCRUB_MAX_PAIRS 64

/* A growable byte buffer; the caller frees DATA. */
struct scrub_buf {
    char *data;
    size_t len, cap;
};

int scrub_buf_add(struct scrub_buf *b, const char *p, size_t n);
void scrub_buf_free(struct scrub_buf *b);

struct scrubber {
    const struct scrub_pair *pairs; /* borrowed */
    size_t n_pairs;
    size_t keep;           /* longest FROM - 1: what may still become a match */
    struct scrub_buf work; /* held-back bytes, then the current read */
    uint64_t hits;         /* bit i: pair i was replaced at least once */
};

void scrubber_init(struct scrubber *s, const struct scrub_pair *pairs, size_t n_pairs);

/*
 * Scrub the next LEN bytes of a stream into OUT. Bytes that could still be
 * the start of a value stay held back until more input or FINAL (the end of
 * the stream) decides them. -1 only when out of memory.
 */
int scrubber_feed(struct scrubber *s, const char *buf, size_t len, bool final,
                  struct scrub_buf *out);

/* Forget the held-back bytes without passing them on (a stream cut short:
 * they may be the first part of a value). */
void scrubber_drop(struct scrubber *s);

void scrubber_release(struct scrubber *s);

enum scrub_answer_flags {
    SCRUB_HEAD_REQUEST = 1 << 0,   /* the request was HEAD: no body follows */
    SCRUB_CLIENT_HTTP10 = 1 << 1,  /* the client spoke HTTP/1.0: no chunked framing */
    SCRUB_REFUSE_ENCODED = 1 << 2, /* a Content-Encoding body cannot be scanned: refuse it */
};

struct scrub_answer {
    struct scrubber body;
    unsigned flags;
    int state;        /* private */
    bool head_sent;   /* the client has been sent a head (after that, only cutting) */
    bool chunked_out; /* the client gets the body chunked, as we frame it */
    int status;       /* the final answer's status */
    uint64_t left;
    struct scrub_buf pend; /* a head, chunk-size line or trailer being collected */
    struct scrub_buf data; /* one feed's scrubbed body bytes, before framing */
};

void scrub_answer_init(struct scrub_answer *a, const struct scrub_pair *pairs, size_t n_pairs,
                       unsigned flags);

/*
 * The next LEN bytes from the upstream. What the client should get is
 * appended to OUT. Returns 0 when more is wanted; 1 once the answer is
 * complete (anything after it, a second answer, is ignored); -1 with WHY
 * when the answer cannot be relayed (a malformed or unscannable one; a 502
 * if !head_sent, else the connection is to be cut).
 *
 * Framing: the body's length changes by (placeholder - value) per hit, and
 * streaming means the head leaves before the body is seen; so a body with
 * Content-Length, or chunked, goes to an HTTP/1.1 client chunked, with
 * chunk sizes counted after scrubbing, and to an HTTP/1.0 client delimited
 * by the close (the gateway closes after every answer). A body delimited by
 * the close stays so. A bodiless answer (HEAD, 1xx, 204, 304) keeps its
 * Content-Length, which describes a body that is not there.
 */
int scrub_answer_feed(struct scrub_answer *a, const char *buf, size_t len, struct scrub_buf *out,
                      char *why, size_t why_len);

/* The upstream closed: 0 when that ends the answer properly (OUT gets the
 * rest), -1 with WHY when the answer was cut short (held-back bytes are
 * dropped, not sent: they may be the first part of a value). */
int scrub_answer_end(struct scrub_answer *a, struct scrub_buf *out, char *why, size_t why_len);

void scrub_answer_release(struct scrub_answer *a);

/* Longest FROM a finder looks for. */
#define SCRUB_FIND_MAX 64

struct scrub_finder {
    char tail[SCRUB_FIND_MAX - 1]; /* the stream's last bytes, for a match across feeds */
    size_t n_tail;
};

/*
 * Does the stream so far (earlier feeds' last bytes, then BUF) contain the
 * FROM of a pair in MASK? The index of the first such pair, or -1. FROMs
 * longer than SCRUB_FIND_MAX are not looked for.
 */
int scrub_find(struct scrub_finder *f, const struct scrub_pair *pairs, size_t n_pairs,
               uint64_t mask, const char *buf, size_t len);
