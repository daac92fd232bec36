/*
 * audit/verify.c: `cordon audit verify`: walks the log a line at a time
 * (never the whole file in memory), re-derives the chain and checks the
 * signed checkpoints, and names the first line where it breaks. Runs in the
 * CLI, on any host: it needs the file and, for signatures, the public key.
 */
#include "audit/audit.h"
#include "audit/audit_int.h"
#include "common/text.h"
#include "common/json.h"

#include <openssl/err.h>
#include <openssl/pem.h>

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Distinct run ids: an open-addressing set, as a log may hold many runs. */
struct run_set {
    char **slots;
    size_t cap, n;
};

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int run_set_add(struct run_set *s, const char *id)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        char **slots = calloc(cap, sizeof *slots);
        if (!slots)
            return -1;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slots[i])
                continue;
            size_t j = fnv1a(s->slots[i]) & (cap - 1);
            while (slots[j])
                j = (j + 1) & (cap - 1);
            slots[j] = s->slots[i];
        }
        free(s->slots);
        s->slots = slots;
        s->cap = cap;
    }
    size_t j = fnv1a(id) & (s->cap - 1);
    for (; s->slots[j]; j = (j + 1) & (s->cap - 1))
        if (!strcmp(s->slots[j], id))
            return 0;
    if (!(s->slots[j] = strdup(id)))
        return -1;
    s->n++;
    return 0;
}

static void run_set_release(struct run_set *s)
{
    for (size_t i = 0; i < s->cap; i++)
        free(s->slots[i]);
    free(s->slots);
}

struct verifier {
    struct audit_report *r;
    FILE *f;                     /* for the one line of look-ahead a swap needs */
    EVP_PKEY *key;               /* NULL: checkpoints checked for structure only */
    char key_id[65];
    uint64_t line;               /* 1-based number of the line being checked */
    uint64_t next_seq;
    char prev[65];               /* digest of the last line that verified */
    uint64_t last_checkpoint;    /* its line; 0 for none */
    struct run_set runs;
};

/* Record the first problem; returns 1 so callers can `return broken(...)`. */
__attribute__((format(printf, 3, 4)))
static int broken(struct verifier *v, uint64_t line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->r->why, sizeof v->r->why, fmt, ap);
    va_end(ap);
    /* jansson's reasons quote the log's own bytes, and the log is anyone's to edit. */
    text_escape_controls(v->r->why, sizeof v->r->why);
    v->r->intact = false;
    v->r->bad_line = line;
    return 1;
}

static const char *str_of(json_t *ev, const char *key)
{
    return json_string_value(json_object_get(ev, key));
}

static int check_checkpoint(struct verifier *v, json_t *ev, uint64_t seq)
{
    const char *head = str_of(ev, "head"), *key_id = str_of(ev, "key_id");
    const char *sig = str_of(ev, "sig");
    json_t *signed_seq = json_object_get(ev, "signed_seq");
    if (!head || !sha256_hex_valid(head) || !key_id || !sha256_hex_valid(key_id) || !sig ||
        !json_is_integer(signed_seq))
        return broken(v, v->line, "checkpoint: head, signed_seq, key_id or sig missing or "
                      "malformed");
    if (strcmp(head, v->prev) != 0)
        return broken(v, v->line, "checkpoint head is not the digest of the line before it");
    if ((uint64_t)json_integer_value(signed_seq) != seq - 1)
        return broken(v, v->line, "checkpoint signed_seq is %lld, not %llu",
                      (long long)json_integer_value(signed_seq), (unsigned long long)(seq - 1));
    if (!v->key)
        return 0;
    if (strcmp(key_id, v->key_id) != 0)
        return broken(v, v->line, "checkpoint signed by another key (key_id %.8s...)", key_id);
    char msg[128];
    snprintf(msg, sizeof msg, AUDIT_SIGN_FMT, (unsigned long long)(seq - 1), head);
    bool good = sigkey_verify(v->key, msg, strlen(msg), sig);
    if (!good)
        return broken(v, v->line, "bad signature");
    v->r->checkpoints++;
    return 0;
}

/* The header: seq 0, a known version, and prev = SHA-256 of its genesis. */
static int check_header(struct verifier *v, json_t *ev, uint64_t seq, const char *prev)
{
    if (strcmp(str_of(ev, "type"), AUDIT_TYPE_HEADER) != 0)
        return broken(v, 1, "not an audit log: the first line is not an audit.header");
    if (seq != 0)
        return broken(v, 1, "header seq is %llu, not 0", (unsigned long long)seq);
    json_t *version = json_object_get(ev, "version");
    if (!json_is_integer(version) || json_integer_value(version) != AUDIT_VERSION)
        return broken(v, 1, "unsupported audit log version (this cordon reads version %d)",
                      AUDIT_VERSION);
    const char *genesis = str_of(ev, "genesis");
    if (!genesis)
        return broken(v, 1, "header without a genesis");
    char want[65];
    sha256_hex(genesis, strlen(genesis), want);
    if (strcmp(prev, want) != 0)
        return broken(v, 1, "header prev is not the digest of its genesis");
    return 0;
}

/* A seq larger than expected: a missing line, unless the next line fills the hole. */
static int seq_ahead(struct verifier *v, uint64_t seq)
{
    unsigned long long want = v->next_seq, got = seq;
    _cleanup_free_ char *next = malloc(AUDIT_MAX_LINE + 1);
    size_t len = 0;
    bool nl = false;
    if (next && audit_read_line(v->f, next, &len, &nl) == 1) {
        json_auto_t *ev = json_parse_strict(next, len, 0, NULL);
        json_t *s = json_object_get(ev, "seq");
        if (json_is_integer(s) && (uint64_t)json_integer_value(s) == v->next_seq)
            return broken(v, v->line, "seq out of order: expected %llu, got %llu (lines %llu "
                          "and %llu are swapped)", want, got, (unsigned long long)v->line,
                          (unsigned long long)v->line + 1);
    }
    return broken(v, v->line, "seq gap: expected %llu, got %llu (%llu line%s missing)", want,
                  got, got - want, got - want == 1 ? "" : "s");
}

/* 0 when line v->line (BUF, LEN) verifies after everything before it; 1 when not. */
static int check_line(struct verifier *v, const char *buf, size_t len)
{
    json_error_t je;
    json_auto_t *ev = json_parse_strict(buf, len, 0, &je);
    if (!ev)
        return broken(v, v->line, "bad json: %s", je.text);
    if (!json_is_object(ev))
        return broken(v, v->line, "bad json: not an object");
    json_t *jseq = json_object_get(ev, "seq"), *run = json_object_get(ev, "run");
    const char *ts = str_of(ev, "ts"), *type = str_of(ev, "type"), *prev = str_of(ev, "prev");
    if (!json_is_integer(jseq) || json_integer_value(jseq) < 0)
        return broken(v, v->line, "seq missing or not a whole number");
    if (!ts)
        return broken(v, v->line, "ts missing or not a string");
    if (!type)
        return broken(v, v->line, "type missing or not a string");
    if (!run || !(json_is_string(run) || json_is_null(run)))
        return broken(v, v->line, "run missing, or neither a string nor null");
    if (!prev || !sha256_hex_valid(prev))
        return broken(v, v->line, "prev missing or not a SHA-256 digest");
    uint64_t seq = (uint64_t)json_integer_value(jseq);
    char digest[65];
    sha256_hex(buf, len, digest);

    if (v->line == 1) {
        if (check_header(v, ev, seq, prev))
            return 1;
    } else {
        if (!strcmp(digest, v->prev))
            return broken(v, v->line, "duplicate of line %llu",
                          (unsigned long long)v->line - 1);
        if (!strcmp(type, AUDIT_TYPE_HEADER))
            return broken(v, v->line, "second header (another log appended to this one?)");
        if (seq > v->next_seq)
            return seq_ahead(v, seq);
        if (seq < v->next_seq)
            return broken(v, v->line, "seq out of order: expected %llu, got %llu",
                          (unsigned long long)v->next_seq, (unsigned long long)seq);
        if (strcmp(prev, v->prev) != 0)
            return broken(v, v->line,
                          "digest mismatch: the previous line was changed, removed or reordered");
        if (!strcmp(type, AUDIT_TYPE_CHECKPOINT)) {
            if (check_checkpoint(v, ev, seq))
                return 1;
            v->last_checkpoint = v->line;
        }
    }

    struct audit_report *r = v->r;
    if (json_is_string(run) && run_set_add(&v->runs, json_string_value(run)) < 0)
        return -1;
    memcpy(v->prev, digest, sizeof digest);
    memcpy(r->head, digest, sizeof digest);
    v->next_seq = seq + 1;
    if (r->events++ == 0)
        snprintf(r->first_ts, sizeof r->first_ts, "%s", ts);
    snprintf(r->last_ts, sizeof r->last_ts, "%s", ts);
    r->runs = v->runs.n;
    return 0;
}

int audit_verify(const char *path, const char *pubkey, struct audit_report *report,
                 struct cordon_err *err)
{
    *report = (struct audit_report){ .intact = true };
    _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL;
    struct verifier v = { .r = report };
    if (pubkey) {
        if (!(key = sigkey_load_public(pubkey, err)))
            return -1;
        if (sigkey_id(key, v.key_id) < 0)
            return err_set(err, CORDON_E_POLICY, "public key '%s' is not an Ed25519 key",
                           pubkey);
        v.key = key;
    }
    _cleanup_fclose_ FILE *f = audit_open_reader(path, err);
    if (!f)
        return -1;
    _cleanup_free_ char *buf = malloc(AUDIT_MAX_LINE + 1);
    if (!buf)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    v.f = f;

    int rc = 0;
    for (;;) {
        size_t len = 0;
        bool nl = false;
        int got = audit_read_line(f, buf, &len, &nl);
        if (got == 0)
            break;
        if (got == -2) {
            rc = err_sys(err, CORDON_E_SETUP, "cannot read audit log '%s'", path);
            break;
        }
        v.line++;
        if (got == -1) {
            broken(&v, v.line, "line longer than 1 MiB");
            break;
        }
        if (!nl) {
            /* Everything before it verified: a writer interrupted mid-line, not an edit. */
            broken(&v, v.line, "truncated last line");
            report->truncated = true;
            break;
        }
        int c = check_line(&v, buf, len);
        if (c < 0)
            rc = err_set(err, CORDON_E_INTERNAL, "out of memory");
        if (c)
            break;
    }
    run_set_release(&v.runs);
    if (rc < 0)
        return -1;

    report->unsigned_tail = report->events - (v.last_checkpoint ? v.last_checkpoint : 0);
    if (!report->intact)
        return 0;
    if (report->events == 0)
        broken(&v, 1, "empty file: no audit.header");
    else if (key && report->checkpoints == 0)
        broken(&v, 1, "no signed checkpoint");
    else if (key && report->unsigned_tail > 0)
        /* Anyone can extend a chain; only the key's holder can sign its head. */
        broken(&v, v.last_checkpoint + 1,
               "not signed: %llu line%s after the last checkpoint (line %llu)",
               (unsigned long long)report->unsigned_tail, report->unsigned_tail == 1 ? "" : "s",
               (unsigned long long)v.last_checkpoint);
    return 0;
}
