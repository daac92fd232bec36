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

/* A run as its run.start and run.end lines leave it. */
struct run_entry {
    char *id;
    uint64_t start_line, end_line;   /* 0: none yet */
    pid_t writer;                    /* its start's writer (audit_writer_stamp) on this boot, */
    unsigned long long writer_start; /* and when it started; 0: not of this boot */
};

/* Distinct run ids: an open-addressing set, as a log may hold many runs. */
struct run_set {
    struct run_entry *slots;
    size_t cap, n;
};

/* The entry of ID, added if new; NULL when out of memory. */
static struct run_entry *run_set_add(struct run_set *s, const char *id)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        struct run_entry *slots = calloc(cap, sizeof *slots);
        if (!slots)
            return NULL;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slots[i].id)
                continue;
            size_t j = text_hash64(s->slots[i].id) & (cap - 1);
            while (slots[j].id)
                j = (j + 1) & (cap - 1);
            slots[j] = s->slots[i];
        }
        free(s->slots);
        s->slots = slots;
        s->cap = cap;
    }
    size_t j = text_hash64(id) & (s->cap - 1);
    for (; s->slots[j].id; j = (j + 1) & (s->cap - 1))
        if (!strcmp(s->slots[j].id, id))
            return &s->slots[j];
    if (!(s->slots[j].id = strdup(id)))
        return NULL;
    s->n++;
    return &s->slots[j];
}

static void run_set_release(struct run_set *s)
{
    for (size_t i = 0; i < s->cap; i++)
        free(s->slots[i].id);
    free(s->slots);
}

static const char *str_of(json_t *ev, const char *key)
{
    return json_string_value(json_object_get(ev, key));
}

/* One line of a witness: the log's line SEQ had digest SHA256 and type TYPE. */
struct witness_entry {
    uint64_t seq;
    char sha256[65];
    char type[24];
};

/* What a witness noted of one log, in order. */
struct witness {
    struct witness_entry *v;
    size_t n, cap;
    size_t next;  /* the first entry the log has not reached yet */
    char log[65]; /* the log all its entries name: its header's digest */
};

static int bad_witness(struct cordon_err *err, const char *path, uint64_t line, const char *why)
{
    err_set(err, CORDON_E_USAGE, "audit witness '%s': line %llu: %s", path,
            (unsigned long long)line, why);
    /* jansson's reasons quote the file's own bytes. */
    text_escape_controls(err->msg, sizeof err->msg);
    return -1;
}

/* Line LINE of the witness at PATH into E (of the log W names, after W's last entry). */
static int witness_line(const char *path, uint64_t line, const char *buf, size_t len,
                        struct witness *w, struct witness_entry *e, struct cordon_err *err)
{
    json_error_t je;
    json_auto_t *o = json_parse_strict(buf, len, 0, &je);
    if (!o)
        return bad_witness(err, path, line, je.text);
    const char *log = str_of(o, "log"), *sha = str_of(o, "sha256"), *type = str_of(o, "type");
    json_t *seq = json_object_get(o, "seq");
    if (!json_is_object(o) || !log || !sha256_hex_valid(log) || !sha || !sha256_hex_valid(sha) ||
        !type || strlen(type) >= sizeof e->type || !json_is_integer(seq) ||
        json_integer_value(seq) < 1)
        return bad_witness(err, path, line, "not a witness entry (log, seq, sha256, type)");
    if (w->n && strcmp(log, w->log) != 0)
        return bad_witness(err, path, line,
                           "notes another log than the lines before it (one "
                           "witness per log)");
    if (w->n && (uint64_t)json_integer_value(seq) <= w->v[w->n - 1].seq)
        return bad_witness(err, path, line, "seq does not rise");
    snprintf(w->log, sizeof w->log, "%s", log);
    e->seq = (uint64_t)json_integer_value(seq);
    snprintf(e->sha256, sizeof e->sha256, "%s", sha);
    snprintf(e->type, sizeof e->type, "%s", type);
    return 0;
}

/*
 * The witness at PATH into W. Every whole line must be an entry, all of one
 * log, in rising seq; a torn last line (its writer was killed mid-line)
 * noted nothing and is left out. -1 with ERR.
 */
static int load_witness(const char *path, struct witness *w, struct cordon_err *err)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    struct stat st;
    if (!f)
        return err_sys(err, CORDON_E_SETUP, "cannot open audit witness '%s'", path);
    if (fstat(fileno(f), &st) == 0 && !S_ISREG(st.st_mode))
        return err_set(err, CORDON_E_SETUP, "audit witness '%s' is not a regular file", path);
    _cleanup_free_ char *buf = malloc(AUDIT_MAX_LINE + 1);
    if (!buf)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    size_t len;
    bool nl;
    int got;
    for (uint64_t line = 1; (got = audit_read_line(f, buf, &len, &nl)) != 0; line++) {
        if (got == -2)
            return err_sys(err, CORDON_E_SETUP, "cannot read audit witness '%s'", path);
        if (got == -1)
            return bad_witness(err, path, line, "longer than 1 MiB");
        if (!nl)
            break;
        if (w->n == w->cap) {
            size_t cap = w->cap ? 2 * w->cap : 64;
            struct witness_entry *v = realloc(w->v, cap * sizeof *v);
            if (!v)
                return err_set(err, CORDON_E_INTERNAL, "out of memory");
            w->v = v;
            w->cap = cap;
        }
        TRY(witness_line(path, line, buf, len, w, &w->v[w->n], err));
        w->n++;
    }
    return 0;
}

struct verifier {
    struct audit_report *r;
    FILE *f;       /* for the one line of look-ahead a swap needs */
    EVP_PKEY *key; /* NULL: checkpoints checked for structure only */
    char key_id[65];
    uint64_t line; /* 1-based number of the line being checked */
    uint64_t next_seq;
    char prev[65];            /* digest of the last line that verified */
    uint64_t last_checkpoint; /* its line; 0 for none */
    struct run_set runs;
    char boot_id[40];  /* this boot's, or "" */
    struct witness *w; /* NULL without one */
    /* A run's second start or end, told once the next line shows the line
     * itself unedited: an edit is named as the chain names it. */
    uint64_t pending_line;
    char pending[200];
};

/* Record the first problem; returns 1 so callers can `return broken(...)`. */
__attribute__((format(printf, 3, 4))) static int broken(struct verifier *v, uint64_t line,
                                                        const char *fmt, ...)
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

static int check_checkpoint(struct verifier *v, json_t *ev, uint64_t seq)
{
    const char *head = str_of(ev, "head"), *key_id = str_of(ev, "key_id");
    const char *sig = str_of(ev, "sig");
    json_t *signed_seq = json_object_get(ev, "signed_seq");
    if (!head || !sha256_hex_valid(head) || !key_id || !sha256_hex_valid(key_id) || !sig ||
        !json_is_integer(signed_seq))
        return broken(v, v->line,
                      "checkpoint: head, signed_seq, key_id or sig missing or "
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
            return broken(v, v->line,
                          "seq out of order: expected %llu, got %llu (lines %llu "
                          "and %llu are swapped)",
                          want, got, (unsigned long long)v->line, (unsigned long long)v->line + 1);
    }
    return broken(v, v->line, "seq gap: expected %llu, got %llu (%llu line%s missing)", want, got,
                  got - want, got - want == 1 ? "" : "s");
}

__attribute__((format(printf, 2, 3))) static int contradicts(struct verifier *v, const char *fmt,
                                                             ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->pending, sizeof v->pending, fmt, ap);
    va_end(ap);
    v->pending_line = v->line;
    return 0;
}

/*
 * A run has one run.start and, after it, one run.end: a second of either
 * contradicts the first. The writer's stamp is kept to tell, at the end, a
 * run still going from one whose end was lost.
 */
static int check_run(struct verifier *v, json_t *ev, const char *type, struct run_entry *e)
{
    bool start = !strcmp(type, "run.start"), end = !strcmp(type, "run.end");
    if (start && e->start_line)
        return contradicts(v, "second run.start of run %.8s (the first is line %llu)", e->id,
                           (unsigned long long)e->start_line);
    if (end && !e->start_line)
        return contradicts(v, "run.end of run %.8s without its run.start", e->id);
    if (end && e->end_line)
        return contradicts(v, "second run.end of run %.8s (the first is line %llu)", e->id,
                           (unsigned long long)e->end_line);
    if (end)
        e->end_line = v->line;
    if (!start)
        return 0;
    e->start_line = v->line;
    json_t *w = json_object_get(ev, "writer");
    json_t *pid = json_object_get(w, "pid"), *ticks = json_object_get(w, "start_ticks");
    const char *boot = json_string_value(json_object_get(w, "boot_id"));
    if (json_is_integer(pid) && json_is_integer(ticks) && boot && v->boot_id[0] &&
        !strcmp(boot, v->boot_id)) {
        e->writer = (pid_t)json_integer_value(pid);
        e->writer_start = (unsigned long long)json_integer_value(ticks);
    }
    return 0;
}

/* Line v->line (of SEQ, DIGEST) against the witness's next entry. */
static int check_witnessed(struct verifier *v, uint64_t seq, const char *digest)
{
    struct witness *w = v->w;
    if (!w || w->next >= w->n)
        return 0;
    if (v->line == 1 && strcmp(w->log, digest) != 0)
        return broken(v, 1, "the witness notes another log (its header's sha256 is %.16s...)",
                      w->log);
    const struct witness_entry *e = &w->v[w->next];
    if (e->seq != seq)
        return 0;
    if (strcmp(e->sha256, digest) != 0)
        return broken(v, v->line,
                      "differs from its witness, which noted this %s line (seq "
                      "%llu) with another digest",
                      e->type, (unsigned long long)seq);
    w->next++;
    return 0;
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
            return broken(v, v->line, "duplicate of line %llu", (unsigned long long)v->line - 1);
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

    if (v->pending_line)
        return broken(v, v->pending_line, "%s", v->pending);
    struct audit_report *r = v->r;
    if (json_is_string(run)) {
        struct run_entry *e = run_set_add(&v->runs, json_string_value(run));
        if (!e)
            return -1;
        if (check_run(v, ev, type, e))
            return 1;
    }
    if (check_witnessed(v, seq, digest))
        return 1;
    memcpy(v->prev, digest, sizeof digest);
    memcpy(r->head, digest, sizeof digest);
    v->next_seq = seq + 1;
    if (r->events++ == 0)
        snprintf(r->first_ts, sizeof r->first_ts, "%s", ts);
    snprintf(r->last_ts, sizeof r->last_ts, "%s", ts);
    r->runs = v->runs.n;
    return 0;
}

/*
 * Runs with a run.start and no run.end: still going where the process that
 * wrote the start lives, their end lost where it does not. The first lost
 * ones (by line) into the report.
 */
static void open_runs(const struct run_set *s, struct audit_report *r)
{
    for (size_t i = 0; i < s->cap; i++) {
        const struct run_entry *e = &s->slots[i];
        if (!e->id || !e->start_line || e->end_line)
            continue;
        unsigned long long now;
        if (e->writer_start && audit_process_start(e->writer, &now) == 0 &&
            now == e->writer_start) {
            r->live_runs++;
            continue;
        }
        const size_t max = AUDIT_OPEN_RUNS_SHOWN;
        size_t n = r->lost_ends < max ? (size_t)r->lost_ends : max;
        r->lost_ends++;
        size_t at = n;
        while (at > 0 && r->lost[at - 1].line > e->start_line)
            at--;
        if (at == max)
            continue;
        size_t stay = n < max ? n : max - 1; /* a full list drops its last */
        memmove(&r->lost[at + 1], &r->lost[at], (stay - at) * sizeof r->lost[0]);
        r->lost[at].line = e->start_line;
        snprintf(r->lost[at].run, sizeof r->lost[at].run, "%s", e->id);
    }
}

/* After the walk: what the witness holds that the log does not. */
static void witness_beyond(struct verifier *v, const struct witness *w)
{
    struct audit_report *r = v->r;
    r->witness_entries = w->n;
    r->witness_seq = w->n ? w->v[w->n - 1].seq : 0;
    /* A break before the log's end is its own verdict; a torn last line is not. */
    if ((!r->intact && !r->truncated) || w->next >= w->n)
        return;
    const struct witness_entry *last = &w->v[w->n - 1];
    size_t missing = w->n - w->next;
    r->truncated = false;
    broken(v, r->events + 1,
           "truncated: the log ends at seq %llu, its witness holds seq %llu "
           "(%s); %zu noted line%s missing",
           (unsigned long long)(r->events ? v->next_seq - 1 : 0), (unsigned long long)last->seq,
           last->type, missing, missing == 1 ? " is" : "s are");
}

/* Read PATH a line at a time into V: 0, or -1 with ERR when it cannot be read. */
static int walk(struct verifier *v, const char *path, struct cordon_err *err)
{
    _cleanup_fclose_ FILE *f = audit_open_reader(path, err);
    if (!f)
        return -1;
    _cleanup_free_ char *buf = malloc(AUDIT_MAX_LINE + 1);
    if (!buf)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    v->f = f;
    for (;;) {
        size_t len = 0;
        bool nl = false;
        int got = audit_read_line(f, buf, &len, &nl);
        if (got == 0)
            return 0;
        if (got == -2)
            return err_sys(err, CORDON_E_SETUP, "cannot read audit log '%s'", path);
        v->line++;
        if (got == -1) {
            broken(v, v->line, "line longer than 1 MiB");
            return 0;
        }
        if (!nl) {
            /* Everything before it verified: a writer interrupted mid-line, not an edit. */
            broken(v, v->line, "truncated last line");
            v->r->truncated = true;
            return 0;
        }
        int c = check_line(v, buf, len);
        if (c < 0)
            return err_set(err, CORDON_E_INTERNAL, "out of memory");
        if (c)
            return 0;
    }
}

int audit_verify(const char *path, const char *pubkey, const char *witness,
                 struct audit_report *report, struct cordon_err *err)
{
    *report = (struct audit_report){ .intact = true };
    _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL;
    struct verifier v = { .r = report };
    if (pubkey) {
        if (!(key = sigkey_load_public(pubkey, err)))
            return -1;
        if (sigkey_id(key, v.key_id) < 0)
            return err_set(err, CORDON_E_POLICY, "public key '%s' is not an Ed25519 key", pubkey);
        v.key = key;
    }
    struct witness w = { 0 };
    if (witness && load_witness(witness, &w, err) < 0) {
        free(w.v);
        return -1;
    }
    v.w = witness ? &w : NULL;
    if (audit_boot_id(v.boot_id) < 0)
        v.boot_id[0] = '\0';
    int rc = walk(&v, path, err);
    if (rc == 0 && v.pending_line && (report->intact || report->truncated)) {
        report->truncated = false;
        broken(&v, v.pending_line, "%s", v.pending);
    }
    if (rc == 0)
        open_runs(&v.runs, report);
    run_set_release(&v.runs);
    if (rc == 0 && witness)
        witness_beyond(&v, &w);
    free(w.v);
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
