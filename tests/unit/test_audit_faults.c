/*
 * tests/unit/test_audit_faults.c: the audit log under faults. A write cut
 * short (RLIMIT_FSIZE stands in for a full disk) is cut back and the chain
 * goes on; a run's end is written once whoever tries (audit_append_once);
 * verify flags a run with two ends or two starts, lists runs whose end was
 * lost, and with a witness reports a log cut short, even at a checkpoint.
 * No privileges, no network.
 */
#include "audit/audit.h"
#include "audit/audit_int.h"

#include "tap.h"

#include <openssl/pem.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[4096];
static char key_pem[4200], pub_pem[4200];

static char *path_in(const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", tmp, name) < 0)
        abort();
    return p;
}

static void make_key(void)
{
    snprintf(key_pem, sizeof key_pem, "%s/key.pem", tmp);
    snprintf(pub_pem, sizeof pub_pem, "%s/pub.pem", tmp);
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    FILE *f = fopen(key_pem, "w");
    if (!k || !f || !PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL))
        abort();
    fclose(f);
    if (!(f = fopen(pub_pem, "w")) || !PEM_write_PUBKEY(f, k))
        abort();
    fclose(f);
    EVP_PKEY_free(k);
}

static off_t size_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static bool ends_in_newline(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char c = 0;
    bool nl = fd >= 0 && pread(fd, &c, 1, size_of(path) - 1) == 1 && c == '\n';
    if (fd >= 0)
        close(fd);
    return nl;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 1 << 20);
    if (f && buf)
        buf[fread(buf, 1, (1 << 20) - 1, f)] = '\0';
    if (f)
        fclose(f);
    return buf;
}

static void spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0)
        abort();
    fclose(f);
}

static struct audit_log *open_log(const char *path, const char *witness, const char *key)
{
    struct cordon_err err = { 0 };
    struct audit_options o = { .path = path, .witness = witness, .sign_key = key };
    struct audit_log *log = audit_open(&o, &err);
    if (!log)
        printf("#   %s\n", err.msg);
    return log;
}

static int append(struct audit_log *log, const char *type, const char *run)
{
    struct cordon_err err = { 0 };
    int rc = audit_append(log, type, run, json_pack("{s:s}", "note", type), &err);
    if (rc)
        printf("#   %s\n", err.msg);
    return rc;
}

static struct audit_report verify(const char *path, const char *key, const char *witness)
{
    struct audit_report r;
    struct cordon_err err = { 0 };
    if (audit_verify(path, key, witness, &r, &err) < 0) {
        printf("#   %s\n", err.msg);
        memset(&r, 0, sizeof r);
        snprintf(r.why, sizeof r.why, "error: %.180s", err.msg);
    }
    return r;
}

/* ---- a write cut short ---- */

static void test_short_write(void)
{
    char *path = path_in("short.jsonl");
    struct audit_log *log = open_log(path, NULL, NULL);
    ok(log && append(log, "run.start", "aa") == 0, "a log with one event");
    off_t before = size_of(path);
    /* The next line gets 40 bytes in, then EFBIG: a full disk, as a file size limit. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = (rlim_t)before + 40;
    setrlimit(RLIMIT_FSIZE, &lim);
    struct cordon_err err = { 0 };
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    int rc = audit_append(log, "run.end", "aa", json_pack("{s:s}", "pad", big), &err);
    setrlimit(RLIMIT_FSIZE, &old);
    ok(rc == -1 && err.errnum == EFBIG, "the write fails (%d, %s)", rc, err.msg);
    char want[4200];
    snprintf(want, sizeof want, "cannot write to audit log '%s': File too large", path);
    is_str(err.msg, want, "named, and nothing says the cut failed");
    ok(size_of(path) == before && ends_in_newline(path),
       "the part written is cut back: the log ends on its last whole line");
    ok(append(log, "run.end", "aa") == 0, "the next append extends the chain");
    struct audit_report r = verify(path, NULL, NULL);
    ok(r.intact && r.events == 3 && r.lost_ends == 0, "and it verifies: %s", r.why);
    audit_close(log, &err);
    audit_free(log);
    free(path);
}

/* ---- a run's end, once ---- */

static void test_append_once(void)
{
    char *path = path_in("once.jsonl");
    struct audit_log *log = open_log(path, NULL, NULL);
    uint64_t since = log ? audit_size(log) : 0;
    ok(log && append(log, "run.start", "aa") == 0 && append(log, "run.start", "bb") == 0,
       "two runs start");
    struct cordon_err err = { 0 };
    bool written = true;
    ok(audit_append_once(log, "run.end", "cc", "run.start", NULL, since, &written, &err) == 0 &&
           !written,
       "no run.end for a run that never started");
    ok(audit_append_once(log, "run.end", "aa", "run.start", NULL, since, &written, &err) == 0 &&
           written,
       "a run.end for a started run");
    ok(audit_append_once(log, "run.end", "aa", "run.start", NULL, since, &written, &err) == 0 &&
           !written,
       "never a second one");
    ok(append(log, "run.end", "bb") == 0, "the supervisor writes b's own end");
    ok(audit_append_once(log, "run.end", "bb", "run.start", NULL, since + 7, &written, &err) == 0 &&
           !written,
       "and the watchdog sees it, from inside a line on");
    ok(audit_append_once(log, "run.end", "bb", "run.start", NULL, 1u << 30, &written, &err) == 0 &&
           !written,
       "or from past the end (the file began again): from the start");
    struct audit_report r = verify(path, NULL, NULL);
    ok(r.intact && r.events == 5 && r.runs == 2 && r.lost_ends == 0,
       "one start and one end per run: %s", r.why);
    audit_close(log, &err);
    audit_free(log);
    free(path);
}

/* ---- verify: runs ---- */

static void test_runs(void)
{
    char *path = path_in("runs.jsonl");
    struct audit_log *log = open_log(path, NULL, NULL);
    struct cordon_err err = { 0 };
    /* aa: ended; bb: its end lost (no writer stamp: not of this boot);
     * cc: its writer is this process, still running. */
    ok(log && append(log, "run.start", "aa") == 0 && append(log, "run.end", "aa") == 0 &&
           append(log, "run.start", "bb") == 0 &&
           audit_append(log, "run.start", "cc", json_pack("{s:o}", "writer", audit_writer_stamp()),
                        &err) == 0,
       "three runs");
    struct audit_report r = verify(path, NULL, NULL);
    ok(r.intact && r.lost_ends == 1 && r.live_runs == 1,
       "intact: one end lost, one live (%llu, "
       "%llu)",
       (unsigned long long)r.lost_ends, (unsigned long long)r.live_runs);
    ok(r.lost_ends == 1 && !strcmp(r.lost[0].run, "bb") && r.lost[0].line == 4,
       "the lost one named, at its run.start's line");

    static const struct {
        const char *type, *run;
        uint64_t line;
        const char *why;
    } cases[] = {
        { "run.end", "aa", 6, "second run.end of run aa (the first is line 3)" },
        { "run.start", "aa", 6, "second run.start of run aa (the first is line 2)" },
        { "run.end", "dd", 6, "run.end of run dd without its run.start" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *copy = path_in("runs-copy.jsonl");
        char *text = slurp(path);
        spit(copy, text);
        free(text);
        struct audit_log *c = open_log(copy, NULL, NULL);
        ok(c && append(c, cases[i].type, cases[i].run) == 0, "%s of %s appended", cases[i].type,
           cases[i].run);
        audit_close(c, &err);
        audit_free(c);
        r = verify(copy, NULL, NULL);
        ok(!r.intact && r.bad_line == cases[i].line, "broken at line %llu",
           (unsigned long long)r.bad_line);
        is_str(r.why, cases[i].why, cases[i].why);
        unlink(copy);
        free(copy);
    }
    audit_close(log, &err);
    audit_free(log);
    free(path);
}

/* ---- verify: a witness ---- */

static void cut_after(const char *path, const char *out, int lines)
{
    char *text = slurp(path), *at = text;
    for (int i = 0; i < lines && at; i++)
        at = strchr(at, '\n') ? strchr(at, '\n') + 1 : NULL;
    if (at)
        *at = '\0';
    spit(out, text);
    free(text);
}

static void test_witness(void)
{
    char *path = path_in("w.jsonl"), *witness = path_in("w.witness");
    struct audit_log *log = open_log(path, witness, key_pem);
    /* 1 header, 2 start a, 3 end a, 4 checkpoint (close), then the same for b. */
    struct cordon_err err = { 0 };
    ok(log && append(log, "run.start", "aa") == 0 && append(log, "run.end", "aa") == 0 &&
           audit_close(log, &err) == 0,
       "run a, and the closing checkpoint");
    audit_free(log);
    log = open_log(path, witness, key_pem);
    ok(log && append(log, "run.start", "bb") == 0 && append(log, "run.end", "bb") == 0 &&
           audit_close(log, &err) == 0,
       "run b, and its checkpoint");
    audit_free(log);
    struct audit_report r = verify(path, pub_pem, witness);
    ok(r.intact && r.witness_entries == 4 && r.witness_seq == 6 && r.checkpoints == 2,
       "intact with its witness: 4 notes, to seq 6 (%s)", r.why);

    /* Cut at the first checkpoint: a shorter, well-signed log. */
    char *cut = path_in("w-cut.jsonl");
    cut_after(path, cut, 4);
    r = verify(cut, pub_pem, NULL);
    ok(r.intact && r.events == 4, "without the witness the cut log verifies, signed");
    r = verify(cut, pub_pem, witness);
    ok(!r.intact && r.bad_line == 5, "with it, it does not: line 5");
    is_str(r.why,
           "truncated: the log ends at seq 3, its witness holds seq 6 (audit.checkpoint); "
           "2 noted lines are missing",
           "named truncated, with the last seq the witness holds");
    cut_after(path, cut, 6);
    r = verify(cut, NULL, witness);
    is_str(r.why,
           "truncated: the log ends at seq 5, its witness holds seq 6 (audit.checkpoint); "
           "1 noted line is missing",
           "cut before the last checkpoint");

    /* A witness of another log, and one whose note disagrees. */
    char *other = path_in("other.jsonl");
    struct audit_log *o = open_log(other, NULL, NULL);
    ok(o && append(o, "run.start", "aa") == 0 && append(o, "run.end", "aa") == 0, "another log");
    audit_close(o, &err);
    audit_free(o);
    r = verify(other, NULL, witness);
    ok(!r.intact && r.bad_line == 1 && !strncmp(r.why, "the witness notes another log", 29),
       "a witness of another log: %s", r.why);
    char *text = slurp(witness), *bad = path_in("bad.witness");
    char *digit = strstr(text, "\"sha256\":\"") + 10;
    *digit = *digit == '0' ? '1' : '0';
    spit(bad, text);
    free(text);
    r = verify(path, NULL, bad);
    ok(!r.intact && r.bad_line == 3, "a note that disagrees: line 3");
    is_str(r.why,
           "differs from its witness, which noted this run.end line (seq 2) with another "
           "digest",
           "named");

    /* A torn last note noted nothing; a line that is no note is refused. */
    text = slurp(witness);
    size_t n = strlen(text);
    spit(bad, text);
    FILE *f = fopen(bad, "a");
    fputs("{\"log\":\"12", f);
    fclose(f);
    r = verify(path, NULL, bad);
    ok(r.intact && r.witness_entries == 4, "a torn last note is left out");
    f = fopen(bad, "a");
    fputs("\n", f);
    fclose(f);
    struct audit_report r2;
    ok(audit_verify(path, NULL, bad, &r2, &err) == -1, "a whole line that is no note: refused");
    char want[4200];
    snprintf(want, sizeof want, "audit witness '%s': line 5: premature end of input near '\"12'",
             bad);
    is_str(err.msg, want, "named with its line");

    /* The writer cuts a torn note off before its own. */
    spit(bad, text);
    f = fopen(bad, "a");
    fputs("{\"log\":\"12", f);
    fclose(f);
    log = open_log(path, bad, NULL);
    ok(log && append(log, "run.start", "cc") == 0 && append(log, "run.end", "cc") == 0,
       "a run with a torn witness");
    audit_close(log, &err);
    audit_free(log);
    r = verify(path, NULL, bad);
    char *after = slurp(bad);
    ok(r.intact && r.witness_entries == 5 && !strncmp(after, text, n) && after[n] == '{',
       "the torn note is gone, the new one follows the old: %s", r.why);
    free(after);
    free(text);

    /* A witness that is the log itself is refused. */
    struct audit_options same = { .path = path, .witness = path };
    ok(!audit_open(&same, &err), "the log as its own witness is refused");
    snprintf(want, sizeof want, "audit witness '%s' is the audit log itself", path);
    is_str(err.msg, want, "named");
    free(path), free(witness), free(cut), free(other), free(bad);
}

/* ---- the reserve ---- */

static void test_reserve(void)
{
    char *path = path_in("reserve.jsonl"), *witness = path_in("reserve.witness");
    struct audit_log *log = open_log(path, witness, NULL);
    struct cordon_err err = { 0 };
    ok(log && audit_keep_reserve(log, &err) == 0, "room kept: %s", err.msg);
    struct stat st = { 0 }, ws = { 0 };
    stat(path, &st);
    ok((uint64_t)st.st_blocks * 512 >= AUDIT_RESERVE && st.st_size < 4096,
       "the log holds %llu bytes past its end, unseen", (unsigned long long)st.st_blocks * 512);
    ok(stat(witness, &ws) == 0 && (uint64_t)ws.st_blocks * 512 >= AUDIT_WITNESS_RESERVE &&
           ws.st_size == 0,
       "and its witness its own");
    ok(append(log, "run.start", "aa") == 0 && stat(path, &st) == 0 &&
           (uint64_t)st.st_blocks * 512 >= (uint64_t)st.st_size + AUDIT_RESERVE,
       "kept past each append");
    audit_close(log, &err);
    audit_free(log);
    free(path), free(witness);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/test-audit-faults-XXXXXX");
    if (!mkdtemp(tmp))
        return 1;
    make_key();
    test_short_write();
    test_append_once();
    test_runs();
    test_witness();
    test_reserve();
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        return 1;
    return done_testing();
}
