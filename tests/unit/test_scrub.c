/*
 * tests/unit/test_scrub.c: the gateway's answer scrubber and placeholder
 * finder. Tables of upstream answers with the exact bytes the client gets,
 * each fed whole and split at every offset (a value across two reads); the
 * replacer's leftmost-longest rule; the finder across feeds. No privileges,
 * no network.
 */
#include "egress/scrub.h"

#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct scrub_pair pairs[] = {
    { "SECRETvalue", 11, "<PH-A>", 6 },
    { "SECRETvalue-longer", 18, "<PH-B>", 6 }, /* A is a prefix of B */
    { "tok", 3, "<PH-C-much-longer-than-tok>", 27 },
};
#define N_PAIRS (sizeof pairs / sizeof pairs[0])

struct replace_case {
    const char *in;
    const char *want;
    unsigned long long hits;
};

static const struct replace_case replaces[] = {
    { "", "", 0 },
    { "nothing here", "nothing here", 0 },
    { "SECRETvalue", "<PH-A>", 1 },
    { "xSECRETvaluex", "x<PH-A>x", 1 },
    { "SECRETvalue-longer", "<PH-B>", 2 },
    { "SECRETvalue-longe", "<PH-A>-longe", 1 },
    { "SECRETvalueSECRETvalue-longer", "<PH-A><PH-B>", 3 },
    { "tok tok", "<PH-C-much-longer-than-tok> <PH-C-much-longer-than-tok>", 4 },
    { "SECRETvaluetok", "<PH-A><PH-C-much-longer-than-tok>", 5 },
    { "SECRETvalu", "SECRETvalu", 0 },
    { "SSECRETvalue", "S<PH-A>", 1 },
};

/* IN through a fresh scrubber, cut at CUT (and, when CUT2 > CUT, at CUT2). */
static char *replace(const char *in, size_t cut, size_t cut2, unsigned long long *hits)
{
    struct scrubber s;
    struct scrub_buf out = { 0 };
    size_t len = strlen(in);
    scrubber_init(&s, pairs, N_PAIRS);
    if (cut2 < cut)
        cut2 = cut;
    scrubber_feed(&s, in, cut, false, &out);
    scrubber_feed(&s, in + cut, cut2 - cut, false, &out);
    scrubber_feed(&s, in + cut2, len - cut2, true, &out);
    scrub_buf_add(&out, "", 1);
    *hits = s.hits;
    scrubber_release(&s);
    return out.data;
}

static void test_replace(void)
{
    for (size_t i = 0; i < sizeof replaces / sizeof replaces[0]; i++) {
        const struct replace_case *c = &replaces[i];
        size_t len = strlen(c->in);
        int bad = 0;
        for (size_t cut = 0; cut <= len; cut++)
            for (size_t cut2 = cut; cut2 <= len; cut2++) {
                unsigned long long hits;
                char *got = replace(c->in, cut, cut2, &hits);
                if (strcmp(got ? got : "", c->want) != 0 || hits != c->hits) {
                    if (!bad++)
                        printf("#   cut %zu,%zu: got \"%s\" hits %llu\n", cut, cut2, got, hits);
                }
                free(got);
            }
        ok(!bad, "replace \"%s\" at every split", c->in);
    }
}

/* The held-back bytes never exceed the longest value - 1, and are dropped
 * (not sent) when a stream is cut. */
static void test_hold_and_drop(void)
{
    struct scrubber s;
    struct scrub_buf out = { 0 };
    scrubber_init(&s, pairs, N_PAIRS);
    scrubber_feed(&s, "hello SECRETvalue-lon", 21, false, &out);
    /* The longest value is 18 bytes: the last 17 could still start one. */
    ok(out.len == 4 && memcmp(out.data, "hell", 4) == 0 && s.work.len == 17,
       "a possible value is held back, the rest goes on");
    scrubber_drop(&s);
    scrubber_feed(&s, NULL, 0, true, &out);
    ok(out.len == 4, "dropped bytes are never sent");
    scrubber_release(&s);
    scrub_buf_free(&out);
}

struct answer_case {
    const char *name;
    unsigned flags;
    const char *in;
    const char *want; /* what the client gets */
    int ret;          /* of the last feed: 1 complete, 0 more wanted, -1 refused */
    int end;          /* of scrub_answer_end() when ret is 0 */
    const char *why;
};

#define OK_HEAD "HTTP/1.1 200 OK\r\n"

static const struct answer_case answers[] = {
    { "length body, value in it", 0,
      OK_HEAD "Content-Length: 17\r\nConnection: keep-alive\r\nX: 1\r\n\r\nkey=SECRETvalue\r\n",
      OK_HEAD "X: 1\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n", 1, 0, NULL },
    { "value in a header", 0, OK_HEAD "X-Echo: Bearer SECRETvalue\r\nContent-Length: 0\r\n\r\n",
      OK_HEAD "X-Echo: Bearer <PH-A>\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 1, 0,
      NULL },
    { "value in the reason phrase", 0,
      "HTTP/1.1 404 no SECRETvalue here\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 404 no <PH-A> here\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 1, 0, NULL },
    { "chunked, value across chunks", 0,
      OK_HEAD "Transfer-Encoding: chunked\r\n\r\n6\r\nSECRET\r\n5;x=y\r\nvalue\r\n0\r\n"
              "X-T: SECRETvalue\r\n\r\n",
      OK_HEAD "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n", 1, 0, NULL },
    { "http/1.0 client: close-delimited", SCRUB_CLIENT_HTTP10,
      OK_HEAD "Content-Length: 11\r\n\r\nSECRETvalue", OK_HEAD "Connection: close\r\n\r\n<PH-A>", 1,
      0, NULL },
    { "body until close", 0, "HTTP/1.0 200 OK\r\n\r\nSECRETvalue-longer!",
      "HTTP/1.0 200 OK\r\nConnection: close\r\n\r\n<PH-B>!", 0, 0, NULL },
    { "HEAD keeps its Content-Length", SCRUB_HEAD_REQUEST,
      OK_HEAD "Content-Length: 99\r\nX: SECRETvalue\r\n\r\n",
      OK_HEAD "Content-Length: 99\r\nX: <PH-A>\r\nConnection: close\r\n\r\n", 1, 0, NULL },
    { "204 has no body", 0, "HTTP/1.1 204 No Content\r\n\r\n",
      "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", 1, 0, NULL },
    { "100 continue, then the answer", 0,
      "HTTP/1.1 100 Continue\r\n\r\n" OK_HEAD "Content-Length: 3\r\n\r\ntok",
      "HTTP/1.1 100 Continue\r\n\r\n" OK_HEAD
      "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
      1, 0, NULL },
    { "a second answer is ignored", 0,
      OK_HEAD "Content-Length: 1\r\n\r\nx" OK_HEAD "Content-Length: 3\r\n\r\ntok",
      OK_HEAD "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", 1, 0,
      NULL },
    { "compressed, refused", SCRUB_REFUSE_ENCODED,
      OK_HEAD "Content-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc", "", -1, 0,
      "compressed answer (Content-Encoding: gzip) cannot be scanned for secrets" },
    { "compressed but bodiless", SCRUB_REFUSE_ENCODED | SCRUB_HEAD_REQUEST,
      OK_HEAD "Content-Encoding: gzip\r\nContent-Length: 3\r\n\r\n",
      OK_HEAD "Content-Encoding: gzip\r\nContent-Length: 3\r\nConnection: close\r\n\r\n", 1, 0,
      NULL },
    { "identity is not compressed", SCRUB_REFUSE_ENCODED,
      OK_HEAD "Content-Encoding: identity\r\nContent-Length: 1\r\n\r\nx",
      OK_HEAD "Content-Encoding: identity\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n"
              "\r\n1\r\nx\r\n0\r\n\r\n",
      1, 0, NULL },
    { "both framings", 0, OK_HEAD "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", "", -1,
      0, "both Content-Length and Transfer-Encoding in the answer" },
    { "gzip transfer coding", 0, OK_HEAD "Transfer-Encoding: gzip, chunked\r\n\r\n", "", -1, 0,
      "unsupported transfer coding \"gzip, chunked\" in the answer" },
    { "switching protocols", 0, "HTTP/1.1 101 Switching Protocols\r\n\r\n", "", -1, 0,
      "the server switched protocols, which is not relayed" },
    { "not http", 0, "SSH-2.0-OpenSSH\r\n\r\n", "", -1, 0,
      "malformed status line \"SSH-2.0-OpenSSH\" in the answer" },
    { "bare LF", 0, "HTTP/1.1 200 OK\nX: 1\r\n\r\n", "", -1, 0,
      "bare CR or LF in the answer head" },
    { "cut short: the held bytes stay", 0,
      OK_HEAD "Content-Length: 40\r\n\r\n0123456789012345678901234 SECRETval",
      OK_HEAD "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n", 0, -1,
      "the server closed before the end of its answer" },
};

/* The client's bytes for answer C fed in pieces cut at CUT; *RET the last feed's. */
static char *run_answer(const struct answer_case *c, size_t cut, int *ret, int *end, char *why,
                        size_t why_len)
{
    struct scrub_answer a;
    struct scrub_buf out = { 0 };
    size_t len = strlen(c->in);
    scrub_answer_init(&a, pairs, N_PAIRS, c->flags);
    why[0] = '\0';
    *ret = scrub_answer_feed(&a, c->in, cut, &out, why, why_len);
    if (*ret == 0)
        *ret = scrub_answer_feed(&a, c->in + cut, len - cut, &out, why, why_len);
    *end = 0;
    if (*ret == 0)
        *end = scrub_answer_end(&a, &out, why, why_len);
    scrub_buf_add(&out, "", 1);
    scrub_answer_release(&a);
    return out.data;
}

/* The expected body: the scrubbed data in one chunk per feed is not fixed,
 * so compare the client's view: the head exactly, and the de-chunked body. */
static void dechunk(const char *s, char *head, char *body)
{
    const char *b = strstr(s, "\r\n\r\n");
    if (b && strncmp(s, "HTTP/1.1 1", 10) == 0) /* an interim answer goes with the head */
        b = strstr(b + 4, "\r\n\r\n");
    size_t hl = b ? (size_t)(b - s) + 4 : strlen(s);
    memcpy(head, s, hl);
    head[hl] = '\0';
    body[0] = '\0';
    if (!b || !strstr(head, "Transfer-Encoding: chunked")) {
        strcpy(body, s + hl);
        return;
    }
    const char *p = s + hl;
    for (;;) {
        char *e;
        unsigned long n = strtoul(p, &e, 16);
        const char *nl = strstr(p, "\r\n");
        if (!nl || e == p) {
            strcat(body, "<cut>");
            return;
        }
        if (n == 0) {
            strcat(body, "<end>");
            strcat(body, nl + 2);
            return;
        }
        strncat(body, nl + 2, n);
        p = nl + 2 + n + 2;
    }
}

static const char *const bodies[] = {
    "key=<PH-A>\r\n<end>\r\n",
    "",
    "",
    "<PH-A><end>X-T: <PH-A>\r\n\r\n",
    "",
    "",
    "",
    "",
    "<PH-C-much-longer-than-tok><end>\r\n",
    "x<end>\r\n",
    "",
    "",
    "x<end>\r\n",
    "",
    "",
    "",
    "",
    "",
    "012345678901234567<cut>",
};

static void test_answers(void)
{
    _Static_assert(sizeof bodies / sizeof bodies[0] == sizeof answers / sizeof answers[0],
                   "one body per answer");
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
        const struct answer_case *c = &answers[i];
        size_t len = strlen(c->in);
        int bad = 0;
        for (size_t cut = 0; cut <= len; cut++) {
            char why[200], head[1024], body[1024], want_head[1024], want_body[1024];
            int ret, end;
            char *got = run_answer(c, cut, &ret, &end, why, sizeof why);
            dechunk(got, head, body);
            dechunk(c->want, want_head, want_body);
            /* Close-delimited and refused answers compare whole; chunked by content. */
            const char *wb = strstr(c->want, "chunked") ? bodies[i] : want_body;
            bool same = ret == c->ret && end == c->end &&
                (c->ret < 0 ? true : strcmp(head, want_head) == 0) &&
                (c->ret < 0 ? true : strcmp(body, wb) == 0) &&
                strcmp(why, c->why ? c->why : "") == 0;
            if (!same && !bad++)
                printf("#   cut %zu: ret %d end %d why \"%s\"\n#   got:  %s\n#   body: %s\n", cut,
                       ret, end, why, tap_show(got), tap_show(body));
            free(got);
        }
        ok(!bad, "answer: %s, at every split", c->name);
    }
}

static void test_find(void)
{
    static const char *const stream = "xx cordon-placeholder-00ff yy";
    static const struct scrub_pair ph[] = {
        { "cordon-placeholder-00ee", 23, "", 0 },
        { "cordon-placeholder-00ff", 23, "", 0 },
    };
    size_t len = strlen(stream);
    int bad = 0;
    for (size_t cut = 0; cut <= len; cut++)
        for (size_t cut2 = cut; cut2 <= len; cut2++) {
            struct scrub_finder f = { 0 };
            int r1 = scrub_find(&f, ph, 2, 3, stream, cut);
            int r2 = scrub_find(&f, ph, 2, 3, stream + cut, cut2 - cut);
            int r3 = scrub_find(&f, ph, 2, 3, stream + cut2, len - cut2);
            int found = r1 >= 0 ? r1 : r2 >= 0 ? r2 : r3;
            if (found != 1 && !bad++)
                printf("#   cut %zu,%zu: %d %d %d\n", cut, cut2, r1, r2, r3);
        }
    ok(!bad, "a placeholder split in three is found at every split");
    struct scrub_finder f = { 0 };
    ok(scrub_find(&f, ph, 2, 1, stream, len) == -1,
       "a placeholder outside the mask is not looked for");
    f = (struct scrub_finder){ 0 };
    ok(scrub_find(&f, ph, 2, 3, "cordon-placeholder-00f", 22) == -1 &&
           scrub_find(&f, ph, 2, 3, "e", 1) == -1,
       "a near miss is not a match");
}

int main(void)
{
    test_replace();
    test_hold_and_drop();
    test_answers();
    test_find();
    return done_testing();
}
