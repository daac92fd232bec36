/*
 * tests/unit/test_audit.c: the audit log. Writes logs in a mkdtemp()
 * directory (with and without an Ed25519 key made here), verifies them,
 * then breaks copies in each way the issue lists and checks that verify
 * names the exact line and reason. Also the writer's refusals, concurrent
 * appends from 8 processes, and the timeline. No privileges, no network.
 */
#include "audit/audit.h"
#include "audit/audit_int.h"

#include "tap.h"

#include <openssl/pem.h>

#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmp[4096];
static char key_pem[4200], pub_pem[4200], other_pem[4200], other_pub[4200], ec_pem[4200],
    ec_pub[4200];

static char *path_in(const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", tmp, name) < 0)
        abort();
    return p;
}

/* ---- keys ---- */

static void write_key(EVP_PKEY *k, const char *priv, const char *pub)
{
    FILE *f = fopen(priv, "w");
    if (!f || !PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL))
        abort();
    fclose(f);
    f = fopen(pub, "w");
    if (!f || !PEM_write_PUBKEY(f, k))
        abort();
    fclose(f);
}

static EVP_PKEY *attacker_key;

static void make_keys(void)
{
    snprintf(key_pem, sizeof key_pem, "%s/key.pem", tmp);
    snprintf(pub_pem, sizeof pub_pem, "%s/pub.pem", tmp);
    snprintf(other_pem, sizeof other_pem, "%s/other.pem", tmp);
    snprintf(other_pub, sizeof other_pub, "%s/other.pub.pem", tmp);
    snprintf(ec_pem, sizeof ec_pem, "%s/ec.pem", tmp);
    snprintf(ec_pub, sizeof ec_pub, "%s/ec.pub.pem", tmp);
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    attacker_key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (!k || !attacker_key || !ec)
        abort();
    write_key(k, key_pem, pub_pem);
    write_key(attacker_key, other_pem, other_pub);
    write_key(ec, ec_pem, ec_pub);
    EVP_PKEY_free(k);
    EVP_PKEY_free(ec);
}

/* ---- files as lines ---- */

struct lines {
    char *v[64];
    size_t n;
    bool last_nl;
};

static void read_lines(const char *path, struct lines *l)
{
    FILE *f = fopen(path, "r");
    if (!f)
        abort();
    *l = (struct lines){ .last_nl = true };
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0 && l->n < 64) {
        l->last_nl = line[n - 1] == '\n';
        if (l->last_nl)
            line[n - 1] = '\0';
        l->v[l->n++] = strdup(line);
    }
    free(line);
    fclose(f);
}

static void free_lines(struct lines *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    l->n = 0;
}

static void write_lines(const char *path, char *const *v, size_t n, bool last_nl)
{
    FILE *f = fopen(path, "w");
    if (!f)
        abort();
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%s", v[i], i + 1 < n || last_nl ? "\n" : "");
    fclose(f);
}

static size_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

/* ---- writing ---- */

static char run_a[33], run_b[33];

/* H, run.start A, limit.fired A, run.end A, run.start B, run.end B (+ checkpoint with KEY). */
static int write_sample(const char *path, const char *key, unsigned every)
{
    struct cordon_err err = { 0 };
    struct audit_options o = { .path = path, .sign_key = key, .checkpoint_every = every };
    struct audit_log *log = audit_open(&o, &err);
    if (!log) {
        printf("#   %s\n", err.msg);
        return -1;
    }
    int rc = 0;
    rc |= audit_append(log, "run.start", run_a,
                       json_pack("{s:i, s:s, s:s, s:[sss]}", "uid", 1000, "host", "box", "level",
                                 "namespace", "argv", "python3", "-c", "print('hi there')"),
                       &err);
    rc |= audit_append(log, "limit.fired", run_a,
                       json_pack("{s:s, s:s}", "limit", "wall", "reason", "timeout"), &err);
    rc |= audit_append(log, "run.end", run_a,
                       json_pack("{s:s, s:n, s:n, s:i, s:f, s:f, s:I, s:I, s:I}", "reason",
                                 "timeout", "exit_code", "signal", "status", 124, "wall_ms", 2000.5,
                                 "cpu_ms", 30.1, "peak_memory_bytes", (json_int_t)13002342,
                                 "stdout_bytes", (json_int_t)10, "stderr_bytes", (json_int_t)2),
                       &err);
    rc |= audit_append(log, "run.start", run_b,
                       json_pack("{s:i, s:s, s:[ss]}", "uid", 1000, "level", "process", "argv",
                                 "true", "x\x1b[31m"),
                       &err);
    rc |= audit_append(log, "run.end", run_b,
                       /* clang-format off */
                       json_pack("{s:s, s:i, s:n, s:i, s:f, s:f}", "reason", "exited",
                                 "exit_code", 0, "signal", "status", 0, "wall_ms", 41.2,
                                 "cpu_ms", 0.4), &err);
    /* clang-format on */
    rc |= audit_close(log, &err);
    rc |= audit_close(log, &err); /* safe twice */
    if (rc)
        printf("#   %s\n", err.msg);
    audit_free(log);
    return rc ? -1 : 0;
}

static void test_writer(void)
{
    char *path = path_in("plain.jsonl");
    ok(write_sample(path, NULL, 0) == 0, "an unsigned log is written");
    struct stat st;
    ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "created with mode 0600");
    struct lines l;
    read_lines(path, &l);
    ok(l.n == 6 && l.last_nl, "header and five events, one a line (%zu)", l.n);

    json_t *h = json_loads(l.v[0], 0, NULL);
    const char *genesis = json_string_value(json_object_get(h, "genesis"));
    char want[65] = "";
    if (genesis)
        sha256_hex(genesis, strlen(genesis), want);
    ok(genesis && strlen(genesis) == 64 && sha256_hex_valid(genesis), "genesis is 32 random bytes");
    is_str(json_string_value(json_object_get(h, "prev")), want, "header prev = sha256(genesis)");
    ok(!strncmp(l.v[0], "{\"seq\":0,\"ts\":\"", 15), "header starts with seq, ts");
    ok(strstr(l.v[0], "\"run\":null,\"type\":\"audit.header\",\"prev\":\"") != NULL,
       "then run null, type, prev");
    ok(json_integer_value(json_object_get(h, "version")) == 1, "header version 1");
    is_str(json_string_value(json_object_get(h, "cordon_version")), CORDON_VERSION,
           "header cordon_version");
    ok(json_is_string(json_object_get(h, "host")), "header host");
    const char *ts = json_string_value(json_object_get(h, "ts"));
    ok(ts && strlen(ts) == 27 && ts[10] == 'T' && ts[19] == '.' && ts[26] == 'Z',
       "ts is RFC 3339 UTC with microseconds (%s)", ts ? ts : "-");
    json_decref(h);

    for (size_t i = 1; i < l.n; i++) {
        json_t *e = json_loads(l.v[i], 0, NULL);
        char d[65];
        sha256_hex(l.v[i - 1], strlen(l.v[i - 1]), d);
        ok(json_integer_value(json_object_get(e, "seq")) == (json_int_t)i, "line %zu: seq %zu",
           i + 1, i);
        is_str(json_string_value(json_object_get(e, "prev")), d, "prev = sha256(previous line)");
        json_decref(e);
    }
    char prefix[128];
    snprintf(prefix, sizeof prefix, "\"run\":\"%s\",\"type\":\"limit.fired\",\"prev\":", run_a);
    ok(strstr(l.v[2], prefix) && strstr(l.v[2], "\",\"limit\":\"wall\",\"reason\":\"timeout\"}"),
       "chain keys first, then the fields in their order");
    ok(strstr(l.v[5], "\"wall_ms\":41.2,\"cpu_ms\":0.4}") != NULL, "reals with 15 digits");
    ok(strstr(l.v[4], "x\\u001B[31m") != NULL, "control characters are escaped, ASCII only");
    free_lines(&l);

    /* Reopening appends to the same chain. */
    struct cordon_err err = { 0 };
    struct audit_options o = { .path = path, .fsync = AUDIT_FSYNC_ALWAYS };
    struct audit_log *log = audit_open(&o, &err);
    ok(log && audit_append(log, "note", NULL, NULL, &err) == 0 && audit_close(log, &err) == 0,
       "reopen, append with fsync always");
    audit_free(log);
    read_lines(path, &l);
    ok(l.n == 7 && strstr(l.v[6], "\"seq\":6,") && strstr(l.v[6], "\"run\":null,\"type\":\"note\""),
       "seq continues at 6 with a null run");
    free_lines(&l);
    free(path);
}

static void test_refusals(void)
{
    char *path = path_in("refuse.jsonl");
    struct cordon_err err = { 0 };
    struct audit_options o = { .path = path };
    struct audit_log *log = audit_open(&o, &err);
    ok(log != NULL, "open a new log");
    size_t size = file_size(path);
    ok(size > 0, "the header is written at open");

    static const char *const chain[] = { "seq", "ts", "run", "type", "prev" };
    for (size_t i = 0; i < 5; i++) {
        char want[128];
        snprintf(want, sizeof want, "audit event 'x': field '%s' belongs to the chain", chain[i]);
        int r = audit_append(log, "x", NULL, json_pack("{s:s, s:i}", "ok", "y", chain[i], 1), &err);
        ok(r == -1 && err.kind == CORDON_E_INTERNAL, "field %s refused", chain[i]);
        is_str(err.msg, want, "field override message");
    }
    ok(audit_append(log, "audit.header", NULL, NULL, &err) == -1, "type audit.header refused");
    is_str(err.msg, "audit event type 'audit.header' is reserved for the log", "reserved type");
    ok(audit_append(log, "x", NULL, json_pack("[i]", 1), &err) == -1, "fields must be an object");
    ok(file_size(path) == size, "nothing was written by a refused append");

    /* A torn tail: refused by open and by append, never extended. */
    int fd = open(path, O_WRONLY | O_APPEND);
    ok(fd >= 0 && write(fd, "{\"seq\":1,\"ts\"", 13) == 13, "tear the tail");
    close(fd);
    char want[4400];
    snprintf(want, sizeof want,
             "audit log '%s' ends in a torn line (line 2); verify it and "
             "start a new file",
             path);
    ok(audit_append(log, "x", NULL, NULL, &err) == -1 && err.kind == CORDON_E_SETUP,
       "append onto a torn tail refused");
    is_str(err.msg, want, "torn tail message (append)");
    struct audit_log *again = audit_open(&o, &err);
    ok(!again && err.kind == CORDON_E_SETUP, "open of a torn log refused");
    is_str(err.msg, want, "torn tail message (open)");
    audit_free(again);
    audit_close(log, &err);
    ok(audit_append(log, "x", NULL, NULL, &err) == -1, "append after close refused");
    audit_free(log);

    /* A last line that is not an event. */
    char *junk = path_in("junk.jsonl");
    write_lines(junk, (char *[]){ "hello" }, 1, true);
    struct audit_options oj = { .path = junk };
    ok(audit_open(&oj, &err) == NULL, "a file of something else refused");
    snprintf(want, sizeof want,
             "audit log '%s': the last line (line 1) is not an audit event; "
             "verify it and start a new file",
             junk);
    is_str(err.msg, want, "not an event message");

    /* Keys. */
    char *fresh = path_in("keyed.jsonl");
    struct audit_options ok_ec = { .path = fresh, .sign_key = ec_pem };
    ok(audit_open(&ok_ec, &err) == NULL && err.kind == CORDON_E_POLICY, "EC key refused");
    snprintf(want, sizeof want, "audit signing key '%s' is not an Ed25519 key", ec_pem);
    is_str(err.msg, want, "EC key message");
    struct audit_options pubk = { .path = fresh, .sign_key = pub_pem };
    ok(audit_open(&pubk, &err) == NULL && err.kind == CORDON_E_POLICY, "a public key refused");
    snprintf(want, sizeof want, "audit signing key '%s' is not an unencrypted PEM private key",
             pub_pem);
    is_str(err.msg, want, "public key as signing key message");
    char *nokey = path_in("nokey.pem");
    struct audit_options missing = { .path = fresh, .sign_key = nokey };
    ok(audit_open(&missing, &err) == NULL, "missing key refused");
    snprintf(want, sizeof want, "cannot open audit signing key '%s': No such file or directory",
             nokey);
    is_str(err.msg, want, "missing key message");
    struct audit_options dir = { .path = tmp };
    ok(audit_open(&dir, &err) == NULL && err.kind == CORDON_E_SETUP, "a directory refused");
    snprintf(want, sizeof want, "cannot open audit log '%s': Is a directory", tmp);
    is_str(err.msg, want, "directory message");

    char id1[33], id2[33];
    audit_new_run_id(id1);
    audit_new_run_id(id2);
    ok(strlen(id1) == 32 && strspn(id1, "0123456789abcdef") == 32 && strcmp(id1, id2) != 0,
       "run ids: 32 hex digits, fresh each time");

    unlink(junk);
    unlink(fresh);
    free(nokey);
    free(fresh);
    free(junk);
    free(path);
}

/* ---- verify ---- */

#define MISMATCH "digest mismatch: the previous line was changed, removed or reordered"

static void is_why(const char *got, const char *want, const char *name)
{
    size_t n = strlen(want);
    if (n && want[n - 1] == '*') {
        ok(!strncmp(got, want, n - 1), "%s", name);
        if (strncmp(got, want, n - 1))
            printf("#   got:  %s\n#   want: %s\n", got, want);
    } else {
        is_str(got, want, name);
    }
}

static void expect_broken(const char *name, const char *path, const char *key, uint64_t line,
                          const char *why)
{
    struct audit_report r;
    struct cordon_err err = { 0 };
    int rc = audit_verify(path, key, NULL, &r, &err);
    if (!ok(rc == 0 && !r.intact && !r.truncated, "%s: not intact", name))
        printf("#   rc %d (%s), why: %s\n", rc, err.msg, r.why);
    ok(r.bad_line == line, "%s: line %llu (got %llu)", name, (unsigned long long)line,
       (unsigned long long)r.bad_line);
    is_why(r.why, why, name);
}

static void expect_intact(const char *name, const char *path, const char *key, uint64_t events,
                          struct audit_report *out)
{
    struct audit_report r;
    struct cordon_err err = { 0 };
    int rc = audit_verify(path, key, NULL, &r, &err);
    if (!ok(rc == 0 && r.intact && r.bad_line == 0, "%s: intact", name))
        printf("#   rc %d (%s); line %llu: %s\n", rc, err.msg, (unsigned long long)r.bad_line,
               r.why);
    ok(r.events == events, "%s: %llu events (got %llu)", name, (unsigned long long)events,
       (unsigned long long)r.events);
    if (out)
        *out = r;
}

/* Change one character just after the first occurrence of PAT in LINE (a copy). */
static char *mutate(const char *line, const char *pat, size_t skip)
{
    char *s = strdup(line);
    char *at = strstr(s, pat);
    if (!at)
        abort();
    at += strlen(pat) + skip;
    *at = *at == '0' ? '1' : *at == 'a' ? 'b' : (*at >= '1' && *at <= '9') ? '0' : 'a';
    return s;
}

static char *tmp_variant;

static void variant(char *const *v, size_t n, bool last_nl)
{
    write_lines(tmp_variant, v, n, last_nl);
}

/* Re-chain lines FROM.. after an edit and re-sign checkpoints with KEY (as KEY_ID). */
static void rechain(char **v, size_t n, size_t from, EVP_PKEY *key, const char *key_id)
{
    for (size_t i = from; i < n; i++) {
        json_t *e = json_loads(v[i], JSON_DECODE_ANY, NULL);
        char prev[65];
        sha256_hex(v[i - 1], strlen(v[i - 1]), prev);
        json_object_set_new(e, "prev", json_string(prev));
        if (!strcmp(json_string_value(json_object_get(e, "type")), "audit.checkpoint")) {
            char msg[128];
            snprintf(msg, sizeof msg, AUDIT_SIGN_FMT,
                     (unsigned long long)json_integer_value(json_object_get(e, "seq")) - 1, prev);
            unsigned char sig[64];
            size_t siglen = 64;
            EVP_MD_CTX *ctx = EVP_MD_CTX_new();
            EVP_DigestSignInit(ctx, NULL, NULL, NULL, key);
            EVP_DigestSign(ctx, sig, &siglen, (unsigned char *)msg, strlen(msg));
            EVP_MD_CTX_free(ctx);
            char b64[100];
            EVP_EncodeBlock((unsigned char *)b64, sig, 64);
            char own[65];
            sigkey_id(key, own);
            json_object_set_new(e, "head", json_string(prev));
            json_object_set_new(e, "sig", json_string(b64));
            json_object_set_new(e, "key_id", json_string(key_id ? key_id : own));
        }
        free(v[i]);
        v[i] = json_dumps(e, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
        json_decref(e);
    }
}

static void test_verify(void)
{
    char *path = path_in("signed.jsonl");
    tmp_variant = path_in("variant.jsonl");
    ok(write_sample(path, key_pem, 0) == 0, "a signed log is written");
    struct lines l;
    read_lines(path, &l);
    ok(l.n == 7 && strstr(l.v[6], "\"type\":\"audit.checkpoint\""),
       "closing adds a checkpoint as line 7");

    struct audit_report r;
    expect_intact("signed log with its key", path, pub_pem, 7, &r);
    char head[65];
    sha256_hex(l.v[6], strlen(l.v[6]), head);
    ok(r.runs == 2 && r.checkpoints == 1 && r.unsigned_tail == 0, "2 runs, 1 checkpoint, no tail");
    is_str(r.head, head, "head is the digest of the last line");
    ok(strlen(r.first_ts) == 27 && strcmp(r.first_ts, r.last_ts) <= 0, "first and last ts");
    expect_intact("signed log without a key", path, NULL, 7, &r);
    ok(r.checkpoints == 0, "without a key no signature is counted");
    char *plain = path_in("plain.jsonl");
    expect_broken("unsigned log with a key", plain, pub_pem, 1, "no signed checkpoint");
    free(plain);

    /* A changed byte in each field of line 3 (limit.fired), and in the header. */
    static const struct {
        const char *pat;
        size_t skip;
        uint64_t line;
        const char *why;
    } bytes[] = {
        { "\"seq\":", 0, 3, "seq out of order: expected 2, got 0" },
        { "\"ts\":\"", 21, 4, MISMATCH },
        { "\"run\":\"", 5, 4, MISMATCH },
        { "\"type\":\"", 0, 4, MISMATCH },
        { "\"prev\":\"", 63, 3, MISMATCH },
        { "\"limit\":\"", 1, 4, MISMATCH },
    };
    for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++) {
        char *v[7];
        memcpy(v, l.v, sizeof v);
        v[2] = mutate(l.v[2], bytes[i].pat, bytes[i].skip);
        variant(v, 7, true);
        char name[64];
        snprintf(name, sizeof name, "changed byte in %s", bytes[i].pat);
        expect_broken(name, tmp_variant, NULL, bytes[i].line, bytes[i].why);
        free(v[2]);
    }
    {
        char *v[7];
        memcpy(v, l.v, sizeof v);
        v[0] = mutate(l.v[0], "\"genesis\":\"", 3);
        variant(v, 7, true);
        expect_broken("changed genesis", tmp_variant, NULL, 1,
                      "header prev is not the digest of its genesis");
        free(v[0]);
        v[0] = mutate(l.v[0], "\"host\":\"", 0);
        variant(v, 7, true);
        expect_broken("changed header host", tmp_variant, NULL, 2, MISMATCH);
        free(v[0]);
        /* The seq edited to fit (2 -> 3) is still caught by the chain. */
    }

    /* Deleted, duplicated, swapped lines. */
    variant((char *[]){ l.v[0], l.v[1], l.v[3], l.v[4], l.v[5], l.v[6] }, 6, true);
    expect_broken("deleted line 3", tmp_variant, NULL, 3,
                  "seq gap: expected 2, got 3 (1 line missing)");
    variant((char *[]){ l.v[0], l.v[1], l.v[4], l.v[5], l.v[6] }, 5, true);
    expect_broken("deleted lines 3-4", tmp_variant, NULL, 3,
                  "seq gap: expected 2, got 4 (2 lines missing)");
    variant((char *[]){ l.v[1], l.v[2], l.v[3], l.v[4], l.v[5], l.v[6] }, 6, true);
    expect_broken("deleted header", tmp_variant, NULL, 1,
                  "not an audit log: the first line is not an audit.header");
    variant((char *[]){ l.v[0], l.v[1], l.v[2], l.v[2], l.v[3], l.v[4], l.v[5], l.v[6] }, 8, true);
    expect_broken("duplicated line 3", tmp_variant, NULL, 4, "duplicate of line 3");
    variant((char *[]){ l.v[0], l.v[1], l.v[3], l.v[2], l.v[4], l.v[5], l.v[6] }, 7, true);
    expect_broken("swapped lines 3 and 4", tmp_variant, NULL, 3,
                  "seq out of order: expected 2, got 3 (lines 3 and 4 are swapped)");
    variant((char *[]){ l.v[0], l.v[1], l.v[2], l.v[4], l.v[3], l.v[5], l.v[6] }, 7, true);
    expect_broken("swapped lines 4 and 5", tmp_variant, NULL, 4,
                  "seq out of order: expected 3, got 4 (lines 4 and 5 are swapped)");
    variant((char *[]){ l.v[0], l.v[1], l.v[2], l.v[3], l.v[4], l.v[5], l.v[3] }, 7, true);
    expect_broken("an old line replayed at the end", tmp_variant, NULL, 7,
                  "seq out of order: expected 6, got 3");
    variant((char *[]){ l.v[0], l.v[1], "{\"seq\":2,", l.v[3] }, 4, true);
    expect_broken("bad json", tmp_variant, NULL, 3, "bad json: *");
    variant((char *[]){ l.v[0], l.v[1], "[2]" }, 3, true);
    expect_broken("not an object", tmp_variant, NULL, 3, "bad json: not an object");
    /* jansson quotes the offending byte; a terminal must not get it raw. */
    variant((char *[]){ l.v[0], l.v[1], "{\"seq\"\x1b[2J" }, 3, true);
    expect_broken("escape bytes in bad json", tmp_variant, NULL, 3,
                  "bad json: ':' expected near '\\x1b'");

    /* Appended lines. */
    {
        char prev[65];
        sha256_hex(l.v[6], strlen(l.v[6]), prev);
        char forged[512];
        snprintf(forged, sizeof forged,
                 "{\"seq\":7,\"ts\":\"2026-12-02T15:04:05.123456Z\","
                 "\"run\":null,\"type\":\"note\",\"prev\":\"%s\",\"text\":\"all fine\"}",
                 prev);
        char *v[8];
        memcpy(v, l.v, 7 * sizeof *v);
        v[7] = forged;
        variant(v, 8, true);
        expect_intact("a well-forged appended line, no key (only a key can tell)", tmp_variant,
                      NULL, 8, NULL);
        expect_broken("a well-forged appended line, with the key", tmp_variant, pub_pem, 8,
                      "not signed: 1 line after the last checkpoint (line 7)");
        char *p = strstr(forged, "\"prev\":\"") + 8;
        *p = *p == '0' ? '1' : '0'; /* its prev no longer matches */
        variant(v, 8, true);
        expect_broken("a sloppily forged appended line", tmp_variant, NULL, 8, MISMATCH);
        char *other = path_in("plain.jsonl");
        struct lines o;
        read_lines(other, &o);
        v[7] = o.v[0];
        variant(v, 8, true);
        expect_broken("another log appended", tmp_variant, NULL, 8,
                      "second header (another log appended to this one?)");
        free_lines(&o);
        free(other);
    }

    /* Truncation. */
    {
        char *v[7];
        memcpy(v, l.v, sizeof v);
        v[5] = strndup(l.v[5], strlen(l.v[5]) / 2);
        variant(v, 6, false);
        struct cordon_err err = { 0 };
        ok(audit_verify(tmp_variant, NULL, NULL, &r, &err) == 0 && r.truncated && !r.intact &&
               r.bad_line == 6 && r.events == 5,
           "torn last line: truncated at line 6, 5 verify");
        is_str(r.why, "truncated last line", "truncated why");
        ok(audit_verify(tmp_variant, pub_pem, NULL, &r, &err) == 0 && r.truncated &&
               r.bad_line == 6,
           "torn last line with the key: still reported as truncated");
        free(v[5]);
        v[5] = l.v[5];
        variant(v, 6, true);
        expect_broken("cut at a line boundary, with the key", tmp_variant, pub_pem, 1,
                      "no signed checkpoint");
        variant(v, 0, true);
        expect_broken("empty file", tmp_variant, NULL, 1, "empty file: no audit.header");
        char *one = strndup(l.v[0], 10);
        variant(&one, 1, false);
        ok(audit_verify(tmp_variant, NULL, NULL, &r, &err) == 0 && r.truncated && r.bad_line == 1 &&
               r.events == 0,
           "a torn header is truncated at line 1");
        free(one);
    }

    /* Re-signed: an edit, the chain recomputed, the checkpoint signed by another key. */
    {
        char *v[7];
        for (size_t i = 0; i < 7; i++)
            v[i] = strdup(l.v[i]);
        free(v[2]);
        v[2] = mutate(l.v[2], "\"limit\":\"", 1);
        rechain(v, 7, 3, attacker_key, NULL);
        variant(v, 7, true);
        expect_intact("re-chained edit, no key", tmp_variant, NULL, 7, NULL);
        expect_intact("re-signed log, the attacker's key", tmp_variant, other_pub, 7, NULL);
        char *want = NULL;
        char attacker_id[65];
        sigkey_id(attacker_key, attacker_id);
        if (asprintf(&want, "checkpoint signed by another key (key_id %.8s...)", attacker_id) < 0)
            abort();
        expect_broken("re-signed log, the real key", tmp_variant, pub_pem, 7, want);
        free(want);
        /* The same, claiming the real key's id. */
        json_t *cp = json_loads(l.v[6], 0, NULL);
        char real_id[65];
        snprintf(real_id, sizeof real_id, "%s", json_string_value(json_object_get(cp, "key_id")));
        json_decref(cp);
        rechain(v, 7, 3, attacker_key, real_id);
        variant(v, 7, true);
        expect_broken("re-signed log claiming the real key id", tmp_variant, pub_pem, 7,
                      "bad signature");
        for (size_t i = 0; i < 7; i++)
            free(v[i]);
    }
    /* A checkpoint whose head is edited. */
    {
        char *v[7];
        memcpy(v, l.v, sizeof v);
        v[6] = mutate(l.v[6], "\"head\":\"", 5);
        variant(v, 7, true);
        expect_broken("checkpoint head changed", tmp_variant, NULL, 7,
                      "checkpoint head is not the digest of the line before it");
        free(v[6]);
        v[6] = mutate(l.v[6], "\"sig\":\"", 5);
        variant(v, 7, true);
        expect_broken("checkpoint sig changed", tmp_variant, pub_pem, 7, "bad signature");
        expect_intact("checkpoint sig changed, no key", tmp_variant, NULL, 7, NULL);
        free(v[6]);
    }
    free_lines(&l);

    /* Checkpoints every 2 lines this process writes. */
    char *every = path_in("every.jsonl");
    ok(write_sample(every, key_pem, 2) == 0, "a log with checkpoint_every 2");
    read_lines(every, &l);
    ok(l.n == 9, "header, 5 events, 3 checkpoints (%zu lines)", l.n);
    expect_intact("checkpoint_every 2", every, pub_pem, 9, &r);
    ok(r.checkpoints == 3 && r.unsigned_tail == 0, "3 signed checkpoints (%llu)",
       (unsigned long long)r.checkpoints);
    variant(l.v, 8, true);
    expect_broken("the final checkpoint cut off", tmp_variant, pub_pem, 7,
                  "not signed: 2 lines after the last checkpoint (line 6)");
    free_lines(&l);

    struct cordon_err err = { 0 };
    char *missing = path_in("missing.jsonl");
    ok(audit_verify(missing, NULL, NULL, &r, &err) == -1 && err.kind == CORDON_E_SETUP,
       "a missing log cannot be read");
    char *want = NULL;
    if (asprintf(&want, "cannot open audit log '%s': No such file or directory", missing) < 0)
        abort();
    is_str(err.msg, want, "missing log message");
    free(want);
    ok(audit_verify(path, ec_pub, NULL, &r, &err) == -1 && err.kind == CORDON_E_POLICY,
       "an EC public key refused");
    if (asprintf(&want, "public key '%s' is not an Ed25519 key", ec_pub) < 0)
        abort();
    is_str(err.msg, want, "EC public key message");
    free(want);
    ok(audit_verify(path, key_pem, NULL, &r, &err) == -1, "a private key file is not a public key");

    unlink(every);
    free(every);
    free(missing);
    unlink(path);
    free(path);
}

/* ---- concurrency ---- */

static void append_many(struct audit_log *shared, const char *path, int child, int n)
{
    struct cordon_err err = { 0 };
    struct audit_options o = { .path = path };
    struct audit_log *log = shared ? shared : audit_open(&o, &err);
    if (!log)
        _exit(2);
    char run[33];
    audit_new_run_id(run);
    for (int i = 0; i < n; i++)
        if (audit_append(log, "tick", run, json_pack("{s:i, s:i}", "child", child, "i", i), &err) <
            0) {
            fprintf(stderr, "child %d: %s\n", child, err.msg);
            _exit(1);
        }
    if (!shared) {
        audit_close(log, &err);
        audit_free(log);
    }
}

static int wait_all(pid_t *pids, int n)
{
    int failed = 0;
    for (int i = 0; i < n; i++) {
        int st = 0;
        if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed++;
    }
    return failed;
}

static void check_seq(const char *path, uint64_t n)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    uint64_t lines = 0;
    bool increasing = true;
    while (f && getline(&line, &cap, f) > 0) {
        json_t *e = json_loads(line, 0, NULL);
        increasing &= (uint64_t)json_integer_value(json_object_get(e, "seq")) == lines++;
        json_decref(e);
    }
    free(line);
    if (f)
        fclose(f);
    ok(increasing && lines == n, "seq 0..%llu strictly increasing, one per line",
       (unsigned long long)n - 1);
}

static void test_concurrency(void)
{
    char *path = path_in("busy.jsonl");
    pid_t pids[8];
    for (int c = 0; c < 8; c++) {
        pids[c] = fork();
        if (pids[c] == 0) {
            append_many(NULL, path, c, 50);
            _exit(0);
        }
    }
    ok(wait_all(pids, 8) == 0, "8 processes appended 50 events each");
    struct audit_report r;
    expect_intact("8 concurrent writers", path, NULL, 401, &r);
    ok(r.runs == 8, "8 runs (%llu)", (unsigned long long)r.runs);
    check_seq(path, 401);
    unlink(path);

    /* One log shared across fork(), as the cleanup watchdog inherits it. */
    struct cordon_err err = { 0 };
    struct audit_options o = { .path = path, .sign_key = key_pem };
    struct audit_log *log = audit_open(&o, &err);
    for (int c = 0; c < 4; c++) {
        pids[c] = fork();
        if (pids[c] == 0) {
            append_many(log, path, c, 25);
            audit_close(log, &err);
            _exit(0);
        }
    }
    append_many(log, path, 4, 25);
    ok(wait_all(pids, 4) == 0, "4 children and the parent append through one inherited log");
    ok(audit_close(log, &err) == 0, "parent closes");
    audit_free(log);
    expect_intact("writers sharing an inherited log", path, pub_pem, 1 + 125 + 5, &r);
    ok(r.checkpoints == 5, "a closing checkpoint from each process (%llu)",
       (unsigned long long)r.checkpoints);
    check_seq(path, 131);
    unlink(path);
    free(path);
}

/* ---- show ---- */

static char *show(const char *path, const struct audit_filter *f)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    struct cordon_err err = { 0 };
    if (audit_show(path, f, m, &err) < 0)
        printf("#   %s\n", err.msg);
    fclose(m);
    return text;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_show(void)
{
    char *path = path_in("show.jsonl");
    write_sample(path, key_pem, 0);
    char *all = show(path, NULL);
    char want[256];
    snprintf(want, sizeof want, "run %.8s  ", run_a);
    ok(strstr(all, want) &&
           strstr(all,
                  "  namespace  uid 1000   $ python3 -c 'print('\\''hi "
                  "there'\\'')'\n"),
       "run.start line");
    ok(strstr(all, "log opened on ") != NULL, "header line");
    ok(strstr(all, "  limit wall fired (timeout)\n") != NULL, "limit line");
    ok(strstr(all,
              "  end timeout (status 124) in 2.00 s, cpu 30.1 ms, peak 12.4 MiB, out 12 B\n") !=
           NULL,
       "end line of a timeout");
    ok(strstr(all, "  end exited 0 in 41.2 ms, cpu 0.4 ms\n") != NULL, "end line of an exit");
    ok(strstr(all, "checkpoint #1 signed  ") != NULL, "checkpoint line");
    ok(strstr(all, "\x1b") == NULL && strstr(all, "'x?[31m'") != NULL,
       "no escape sequence reaches the terminal");
    printf("# ---\n");
    for (char *p = all, *nl; (nl = strchr(p, '\n')); p = nl + 1)
        printf("# %.*s\n", (int)(nl - p), p);

    struct audit_filter f = { .run = run_b, .json = true };
    char *json = show(path, &f);
    struct lines l;
    read_lines(path, &l);
    char *lines45 = NULL;
    if (asprintf(&lines45, "%s\n%s\n", l.v[4], l.v[5]) < 0)
        abort();
    is_str(json, lines45, "--run --json passes the run's lines through unchanged");
    struct audit_filter t = { .type = "run" };
    char *runs = show(path, &t);
    ok(count_lines(runs) == 5, "--type run: two runs, each start and end, a blank between");
    struct audit_filter te = { .type = "run.end", .json = true };
    char *ends = show(path, &te);
    ok(count_lines(ends) == 2, "--type run.end --json: two lines");

    /* A torn tail and an unknown event. */
    char *v[8];
    memcpy(v, l.v, 7 * sizeof *v);
    v[6] = "{\"seq\":6,\"ts\":\"2026-12-02T15:04:05.123456Z\",\"run\":null,"
           "\"type\":\"egress.decision\","
           "\"prev\":\"x\",\"host\":\"example.com\",\"port\":443}";
    v[7] = "{\"seq\":7,\"ts\"";
    write_lines(path, v, 8, false);
    char *odd = show(path, NULL);
    ok(strstr(odd, "egress.decision  15:04:05.123 host=example.com port=443\n") != NULL,
       "an unknown event shown generically");
    ok(strstr(odd, "line 8: truncated (the writer was interrupted)\n") != NULL,
       "a torn line is named");
    free_lines(&l);
    free(odd);
    free(lines45);
    free(ends);
    free(runs);
    free(json);
    free(all);
    unlink(path);
    free(path);
}

/* ---- the HTML report ---- */

static char *report(const char *path, const struct audit_html_options *o, int *rc)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    struct cordon_err err = { 0 };
    *rc = audit_html(path, o, m, &err);
    fclose(m);
    if (*rc < 0)
        printf("#   %s\n", err.msg);
    return text;
}

/* Every string of the log is the runs' own: it reaches the page as text, never as markup. */
static void test_report(void)
{
    char *path = path_in("report.jsonl");
    struct cordon_err err = { 0 };
    struct audit_options ao = { .path = path, .sign_key = key_pem };
    struct audit_log *log = audit_open(&ao, &err);
    ok(log &&
           audit_append(log, "run.start", run_a,
                        /* clang-format off */
                           json_pack("{s:s, s:[sss], s:s}", "level", "namespace", "argv", "sh",
                                     "<script>alert(1)</script>", "a\u202egnp.exe", "host",
                                     "\"><img src=x>"),
                        /* clang-format on */
                        &err) == 0,
       "a run with markup in its argv and host");
    ok(audit_append(log, "egress.decision", run_a,
                    json_pack("{s:b, s:s, s:i, s:s}", "allowed", 0, "host",
                              "</td><script>x</script>", "port", 80, "rule", "not_allowed"),
                    &err) == 0 &&
           audit_append(
               log, "mcp.call", run_a,
               json_pack("{s:s, s:s}", "tool", "<style>*{}</style>", "decision", "refused"),
               &err) == 0 &&
           audit_append(
               log, "run.end", run_a,
               json_pack("{s:s, s:i, s:i}", "reason", "exited", "exit_code", 0, "status", 0),
               &err) == 0 &&
           audit_close(log, &err) == 0,
       "its egress decision, tool call and end");
    audit_free(log);
    int rc;
    struct audit_html_options o = { .pubkey = pub_pem };
    char *page = report(path, &o, &rc);
    ok(rc == 0, "an intact signed log: 0");
    ok(page && !strstr(page, "<script") && !strstr(page, "<img") && !strstr(page, "</td><s") &&
           !strstr(page, "<style>*"),
       "no markup of the log's in the page");
    ok(page && strstr(page, "&lt;script&gt;alert(1)&lt;/script&gt;") &&
           strstr(page, "&quot;&gt;&lt;img src=x&gt;") &&
           strstr(page, "&lt;/td&gt;&lt;script&gt;") &&
           strstr(page, "&lt;style&gt;*{}&lt;/style&gt;"),
       "each as escaped text");
    ok(page && !strstr(page, "\u202e") && strstr(page, "a&#xfffd;gnp.exe"),
       "a bidirectional override shown as U+FFFD, reordering nothing");
    ok(page && strstr(page, "verified and signed") && strstr(page, "Chain intact: 6 events"),
       "the chain's verdict, signed");
    ok(page && strstr(page, "content=\"default-src 'none'; style-src 'unsafe-inline'\""),
       "a policy that loads nothing and runs no script");
    free(page);
    FILE *f = fopen(path, "a");
    fputs("{\"seq\":9,\"ts\":\"x\",\"run\":\"<b>\",\"type\":\"run.start\",\"prev\":\"0\"}\n", f);
    fclose(f);
    page = report(path, &(struct audit_html_options){ 0 }, &rc);
    ok(rc == 1 && page && strstr(page, "Chain broken at line 7") && !strstr(page, "<b>") &&
           strstr(page, "data-run=\"&lt;b&gt;\""),
       "an edited log: 1, broken, still text");
    free(page);
    page = report(path, &(struct audit_html_options){ .run = "ffff" }, &rc);
    ok(rc == -1 && !page[0], "--run naming no run: an error, no page");
    free(page);
    unlink(path);
    free(path);
}

int main(void)
{
    char tmpl[] = "/tmp/cordon-audit-XXXXXX";
    if (!mkdtemp(tmpl) || !realpath(tmpl, tmp))
        abort();
    audit_new_run_id(run_a);
    audit_new_run_id(run_b);
    make_keys();
    test_writer();
    test_refusals();
    test_verify();
    test_concurrency();
    test_show();
    test_report();
    EVP_PKEY_free(attacker_key);
    static const char *const names[] = { "key.pem",       "pub.pem",      "other.pem",
                                         "other.pub.pem", "ec.pem",       "ec.pub.pem",
                                         "plain.jsonl",   "refuse.jsonl", "variant.jsonl" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *p = path_in(names[i]);
        unlink(p);
        free(p);
    }
    free(tmp_variant);
    rmdir(tmp);
    return done_testing();
}
