/*
 * tests/unit/test_governance.c: the pure parts of issue 15: Ed25519
 * detached signatures, tool digests and pin verdicts, and the decider
 * client's fail-closed answers; of issue 22, which way each key of a signed
 * policy may move, and the JSON readers that refuse a key given twice (the
 * parser itself, pins, signatures).
 */
#include "broker/pins.h"
#include "common/decider.h"
#include "common/hostpath.h"
#include "common/json.h"
#include "common/sigkey.h"
#include "policy/policy_int.h"

#include "tap.h"

#include <openssl/pem.h>
#include <stdlib.h>
#include <unistd.h>

static EVP_PKEY *new_key(void)
{
    EVP_PKEY *k = NULL;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
    if (c && EVP_PKEY_keygen_init(c) == 1)
        EVP_PKEY_keygen(c, &k);
    EVP_PKEY_CTX_free(c);
    return k;
}

static void test_signatures(void)
{
    EVP_PKEY *a = new_key(), *b = new_key();
    char sig[SIGKEY_B64_LEN];
    struct cordon_err err = { 0 };
    ok(a && b && sigkey_sign(a, "policy", 6, sig, &err) == 0, "sign");
    static const struct {
        int key; /* 0: a, 1: b */
        const char *msg;
        const char *sig; /* NULL: the real one */
        bool want;
    } cases[] = {
        { 0, "policy", NULL, true },
        { 1, "policy", NULL, false }, /* another key */
        { 0, "polic", NULL, false },  /* another message */
        { 0, "policy", "", false },
        { 0, "policy", "AAAA", false },
        { 0, "policy", "not base64 at all, and far too short to be a signature==", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ok(sigkey_verify(cases[i].key ? b : a, cases[i].msg, strlen(cases[i].msg),
                         cases[i].sig ? cases[i].sig : sig) == cases[i].want,
           "verify case %zu", i);
    char ida[65], idb[65];
    ok(sigkey_id(a, ida) == 0 && sigkey_id(b, idb) == 0 && strcmp(ida, idb) &&
           sha256_hex_valid(ida),
       "key ids differ and are digests");
    EVP_PKEY_free(a);
    EVP_PKEY_free(b);
}

static void test_tool_digests(void)
{
    static const struct {
        const char *a, *b;
        bool same;
    } cases[] = {
        { "{\"name\":\"t\",\"description\":\"d\",\"inputSchema\":{\"type\":\"object\"}}",
          "{\"inputSchema\":{\"type\":\"object\"},\"description\":\"d\",\"name\":\"t\"}", true },
        { "{\"name\":\"t\",\"description\":\"d\"}", "{\"name\":\"t\",\"description\":\"d \"}",
          false },
        { "{\"name\":\"t\"}", "{\"name\":\"t\",\"title\":null}", true },
        { "{\"name\":\"t\"}", "{\"name\":\"t\",\"annotations\":{\"destructiveHint\":true}}",
          false },
        { "{\"name\":\"t\"}", "{\"name\":\"u\"}", false },
        { "{\"name\":\"t\"}", "{\"name\":\"t\",\"_meta\":{\"x\":1}}", true },
        { "{\"name\":\"t\"}", "{\"name\":\"t\",\"outputSchema\":{}}", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *a = json_loads(cases[i].a, 0, NULL), *b = json_loads(cases[i].b, 0, NULL);
        char da[65], db[65];
        mcp_tool_digest(a, da);
        mcp_tool_digest(b, db);
        ok((strcmp(da, db) == 0) == cases[i].same, "tool digest case %zu", i);
        json_decref(a);
        json_decref(b);
    }
}

static void test_pin_verdicts(void)
{
    char path[] = "/tmp/cordon-pins-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    unlink(path);
    struct cordon_err err = { 0 };
    static const struct {
        int session;     /* a new session starts when this changes */
        bool done_first; /* the first listing ended before this tool */
        const char *tool;
        enum pin_verdict want;
    } cases[] = {
        { 1, false, "{\"name\":\"a\",\"description\":\"x\"}", PIN_FIRST },
        { 1, false, "{\"name\":\"b\"}", PIN_FIRST },
        { 1, true, "{\"name\":\"a\",\"description\":\"x\"}", PIN_OK },
        { 1, true, "{\"name\":\"c\"}", PIN_NEW },
        { 2, false, "{\"name\":\"a\",\"description\":\"y\"}", PIN_CHANGED },
        { 2, false, "{\"name\":\"b\"}", PIN_OK },
        { 2, false, "{\"name\":\"c\"}", PIN_NEW },
    };
    struct mcp_pins *pins = NULL;
    int session = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].session != session) {
            if (pins && mcp_pins_save(pins, &err) < 0)
                ok(0, "save: %s", err.msg);
            mcp_pins_free(pins);
            pins = mcp_pins_open(path, &err);
            mcp_pins_set_server(pins, "srv");
            session = cases[i].session;
        }
        if (cases[i].done_first)
            mcp_pins_first_done(pins);
        json_t *t = json_loads(cases[i].tool, 0, NULL);
        char d[65], old[65];
        enum pin_verdict v = mcp_pins_check(pins, t, d, old);
        ok(v == cases[i].want, "pin case %zu: %s, want %s", i, pin_verdict_name(v),
           pin_verdict_name(cases[i].want));
        json_decref(t);
    }
    ok(mcp_pins_save(pins, &err) == 0, "save");
    mcp_pins_free(pins);
    size_t n = 0;
    char *names[] = { "a" };
    ok(mcp_pins_approve(path, "srv", names, 1, &n, &err) == 0 && n == 1, "approve a");
    pins = mcp_pins_open(path, &err);
    mcp_pins_set_server(pins, "srv");
    json_t *t = json_loads("{\"name\":\"a\",\"description\":\"y\"}", 0, NULL);
    char d[65], old[65];
    ok(mcp_pins_check(pins, t, d, old) == PIN_OK, "approved change is the pin now");
    json_decref(t);
    mcp_pins_free(pins);
    ok(mcp_pins_approve(path, "srv", names, 1, &n, &err) < 0, "nothing left to approve: %s",
       err.msg);
    unlink(path);
}

static void test_decider_fails_closed(void)
{
    struct cordon_err err = { 0 };
    struct decider *d = decider_new("/nonexistent/cordon-decider.sock", NULL, 200, &err);
    json_t *q = json_object();
    struct decider_answer a;
    decider_ask(d, "tool_call", "t", NULL, q, &a);
    ok(a.decision == DECIDER_DENY && strstr(a.reason, "unreachable"), "no socket: %s", a.reason);
    json_decref(q);
    decider_free(d);
    char longp[200];
    memset(longp, 'x', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    ok(!decider_new(longp, NULL, 100, &err) && strstr(err.msg, "too long"), "long path: %s",
       err.msg);
}

/* A command decider: a shell line per case, each answer as the client sees it. */
static void test_command_decider(void)
{
    static const char answer[] =
        "sed -E 's/.*\"id\":\"([0-9a-f]+)\".*/{\"id\":\"\\1\",\"decision\":\"%s\","
        "\"decider\":\"sed\"}/'";
    char allow_once[300], allow_run[300], deny_allow[300];
    snprintf(allow_once, sizeof allow_once, answer, "allow_once");
    snprintf(allow_run, sizeof allow_run, answer, "allow_run");
    snprintf(deny_allow, sizeof deny_allow, answer, "deny\",\"decision\":\"allow_once");
    static const char dup_id[] =
        "sed -E 's/.*\"id\":\"([0-9a-f]+)\".*/{\"id\":\"x\",\"id\":\"\\1\","
        "\"decision\":\"allow_once\"}/'";
    const struct {
        const char *command;
        enum decider_decision want;
        const char *reason; /* a part of it, for a deny */
        bool cached_next;   /* a second question is answered from memory */
    } cases[] = {
        { allow_once, DECIDER_ALLOW_ONCE, NULL, false },
        { allow_run, DECIDER_ALLOW_RUN, NULL, true },
        { "sleep 5", DECIDER_DENY, "timeout", false },
        { "sleep 5 & exec sleep 6", DECIDER_DENY, "timeout", false },
        { "exit 3", DECIDER_DENY, "closed", false },
        { "echo '{\"id\":\"x\",\"decision\":\"allow_once\"}'", DECIDER_DENY, "another question",
          false },
        { "echo '{\"decision\":\"maybe\"}'", DECIDER_DENY, "another question", false },
        { "echo nonsense", DECIDER_DENY, "not a decision", false },
        /* Ambiguous: jansson alone would keep the last key, an allow. */
        { deny_allow, DECIDER_DENY, "duplicate object key", false },
        { dup_id, DECIDER_DENY, "duplicate object key", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cordon_err err = { 0 };
        struct decider *d = decider_new(NULL, cases[i].command, 300, &err);
        json_t *q = json_pack("{s:s}", "tool", "t");
        struct decider_answer a, b;
        decider_ask(d, "tool_call", "t", NULL, q, &a);
        decider_ask(d, "tool_call", "t", NULL, q, &b);
        ok(a.decision == cases[i].want && a.elapsed_ms < 3000 &&
               (!cases[i].reason || strstr(a.reason, cases[i].reason)) &&
               b.cached == cases[i].cached_next,
           "command decider case %zu: %s (%s)", i, decider_decision_name(a.decision), a.reason);
        json_decref(q);
        decider_free(d);
    }
}

static void test_strict_json(void)
{
    static const struct {
        const char *text;
        const char *error; /* part of the parser's message; NULL: parses */
    } cases[] = {
        { "{\"a\":1,\"b\":2}", NULL },
        { "{\"decision\":\"deny\",\"decision\":\"allow_once\"}", "duplicate object key" },
        { "{\"a\":1,\"a\":1}", "duplicate object key" }, /* the same value too */
        { "{\"x\":{\"a\":1,\"b\":{\"a\":2,\"a\":3}}}", "duplicate object key" },
        { "[{\"a\":1},{\"a\":1}]", NULL },                     /* two objects */
        { "{\"a\":1,\"x\":{\"a\":2}}", NULL },                 /* two levels */
        { "{\"\\u0061\":1,\"a\":2}", "duplicate object key" }, /* an escape is the key */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_error_t je;
        json_t *j = json_parse_strict(cases[i].text, strlen(cases[i].text), 0, &je);
        if (cases[i].error)
            ok(!j && strstr(je.text, cases[i].error), "strict json case %zu refused: %s", i,
               j ? "parsed" : je.text);
        else
            ok(j != NULL, "strict json case %zu parses", i);
        json_decref(j);
        j = json_parse_strict_str(cases[i].text, 0, NULL);
        ok(!j == !!cases[i].error, "strict json case %zu, as a string", i);
        json_decref(j);
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* A pins file with its servers twice: which would be trusted is not ours to guess. */
static void test_pins_refuse_duplicates(void)
{
    char path[] = "/tmp/cordon-pins-XXXXXX";
    close(mkstemp(path));
    write_file(path, "{\"servers\":{},\"servers\":{\"srv\":{}}}");
    struct cordon_err err = { 0 };
    struct mcp_pins *pins = mcp_pins_open(path, &err);
    ok(!pins && strstr(err.msg, "not a pin file") && strstr(err.msg, "duplicate"),
       "pins with a key twice: %s", err.msg);
    mcp_pins_free(pins);
    unlink(path);
}

/*
 * A valid signature file with its "sig" given twice, a bogus one first and
 * the real one last (the one jansson would keep): refused, not verified.
 */
static void test_signature_refuses_duplicates(void)
{
    char dir[] = "/tmp/cordon-sig-XXXXXX", key[64], pub[64], pol[64], sig[80];
    if (!mkdtemp(dir))
        return (void)ok(0, "mkdtemp");
    snprintf(key, sizeof key, "%s/k.pem", dir);
    snprintf(pub, sizeof pub, "%s/k.pub", dir);
    snprintf(pol, sizeof pol, "%s/p.yaml", dir);
    snprintf(sig, sizeof sig, "%s/p.yaml.sig", dir);
    EVP_PKEY *k = new_key();
    FILE *f = fopen(key, "w");
    PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
    fclose(f);
    f = fopen(pub, "w");
    PEM_write_PUBKEY(f, k);
    fclose(f);
    EVP_PKEY_free(k);
    write_file(pol, "version: 1\n");
    struct cordon_err err = { 0 };
    char id[65];
    ok(policy_sign_file(pol, key, id, &err) == 0 && policy_verify_file(pol, pub, id, &err) == 0,
       "signed and verified: %s", err.msg);
    size_t n = 0;
    char *text = read_small_file(sig, 4096, &n, &err);
    json_t *j = text ? json_parse_strict(text, n, 0, NULL) : NULL;
    char doubled[1024];
    snprintf(doubled, sizeof doubled,
             "{\"format\":\"%s\",\"key_id\":\"%s\",\"sha256\":\"%s\",\"sig\":\"AAAA\","
             "\"sig\":\"%s\"}\n",
             json_string_value(json_object_get(j, "format")),
             json_string_value(json_object_get(j, "key_id")),
             json_string_value(json_object_get(j, "sha256")),
             json_string_value(json_object_get(j, "sig")));
    write_file(sig, doubled);
    ok(policy_verify_file(pol, pub, id, &err) < 0 &&
           strstr(err.msg, "not a cordon policy signature"),
       "a signature with \"sig\" twice is refused: %s", err.msg);
    json_decref(j);
    free(text);
    unlink(key), unlink(pub), unlink(pol), unlink(sig), rmdir(dir);
}

/*
 * A trust directory with a key and a file that is none: an unsigned policy is
 * refused for the bad file, each time, and the key read before it is freed
 * (make sanitize's LeakSanitizer fails the run on a leak: libcordon checks
 * this on every prepare).
 */
static void test_trust_dir_with_a_bad_key(void)
{
    char dir[] = "/tmp/cordon-trust-XXXXXX", good[64], bad[64];
    if (!mkdtemp(dir))
        return (void)ok(0, "mkdtemp");
    snprintf(good, sizeof good, "%s/a.pem", dir);
    snprintf(bad, sizeof bad, "%s/b.pem", dir);
    EVP_PKEY *k = new_key();
    FILE *f = fopen(good, "w");
    PEM_write_PUBKEY(f, k);
    fclose(f);
    EVP_PKEY_free(k);
    write_file(bad, "not a key\n");
    const char *was = getenv("CORDON_TRUST_DIR");
    char *saved = was ? strdup(was) : NULL;
    setenv("CORDON_TRUST_DIR", dir, 1);
    struct cordon_err err = { 0 };
    struct policy *p = policy_new(&err);
    for (int i = 0; i < 2; i++)
        ok(p && policy_require_trusted(p, &err) < 0 && strstr(err.msg, "b.pem"),
           "a trust directory with a bad file refuses an unsigned policy: %s", err.msg);
    unlink(bad);
    ok(p && policy_require_trusted(p, &err) < 0 && strstr(err.msg, "requires a signed policy"),
       "with the key alone, still refused: %s", err.msg);
    policy_free(p);
    if (saved)
        setenv("CORDON_TRUST_DIR", saved, 1);
    else
        unsetenv("CORDON_TRUST_DIR");
    free(saved);
    unlink(good), rmdir(dir);
}

/* A signed policy's keys, each set by a caller: tightened, or refused as relaxing. */
static const char narrow_base[] = "version: 1\n"
                                  "isolation: [gvisor, namespace]\n"
                                  "filesystem:\n"
                                  "  read_only: ['/usr/share:/share']\n"
                                  "  read_write: ['/var/tmp:/scratch']\n"
                                  "  tmp_size: 32M\n"
                                  "env:\n"
                                  "  pass: [HOME]\n"
                                  "  set: {A: '1'}\n"
                                  "limits:\n"
                                  "  memory: 512M\n"
                                  "  pids: 64\n"
                                  "  wall: 1m\n"
                                  "  best_effort: [memory]\n"
                                  "network:\n"
                                  "  allow: [example.com]\n"
                                  "  deny: [bad.example.com]\n"
                                  "  budgets: {requests: 10}\n"
                                  "tools:\n"
                                  "  allow: [echo]\n"
                                  "audit:\n"
                                  "  file: /tmp/cordon-narrow-test.log\n";

static void test_narrowing(void)
{
    static const struct {
        const char *key, *value;
        bool relaxes;
    } cases[] = {
        { "limits.memory", "256M", false },
        { "limits.memory", "512M", false },
        { "limits.memory", "1G", true },
        { "limits.memory", "unlimited", true },
        { "limits.pids", "10", false },
        { "limits.pids", "unlimited", true },
        { "limits.wall", "30s", false },
        { "limits.wall", "2m", true },
        { "limits.cpu", "5m", false }, /* the default 10m */
        { "limits.cpu", "20m", true },
        { "limits.best_effort", "memory", false },
        { "limits.best_effort", "false", false },
        { "limits.best_effort", "pids", true },
        { "limits.best_effort", "all", true },
        { "isolation", "gvisor", false },
        { "isolation", "microvm,gvisor", false },
        { "isolation", "microvm,namespace", false },
        { "isolation", "namespace", true }, /* where gvisor runs, weaker */
        { "isolation", "process", true },
        { "isolation", "gvisor,process", true }, /* a weaker fallback */
        { "filesystem.read_only", "/usr/share:/share", false },
        { "filesystem.read_only", "/var/tmp:/scratch", false }, /* read-write made read-only */
        { "filesystem.read_only", "/etc:/etc", true },
        { "filesystem.read_only", "/usr/share:/elsewhere", true },
        { "filesystem.read_write", "/var/tmp:/scratch", false },
        { "filesystem.read_write", "/usr/share:/share", true },
        { "filesystem.tmp_size", "16M", false },
        { "filesystem.tmp_size", "64M", true },
        { "filesystem.workspace", "/tmp", true },
        { "filesystem.workspace_follow_symlinks", "true", true },
        { "filesystem.protected", "secrets.txt", false },
        { "filesystem.unsafe_unprotect", ".git", true },
        { "filesystem.unix_sockets", "/run/cordon-test.sock", true },
        { "workspace.mode", "overlay", false },
        { "workspace.mode", "direct", false },
        { "workspace.commit", "on_success", false },
        { "workspace.commit", "manual", true },
        { "workspace.commit", "always", true },
        { "env.pass", "HOME", false },
        { "env.pass", "PATH", true },
        { "env.set", "A=1", false },
        { "env.set", "A=2", true },
        { "env.set", "B=1", true },
        { "network.mode", "none", false },
        { "network.mode", "gateway", false }, /* what network.allow made it */
        { "network.allow", "example.com", false },
        { "network.allow", "other.example", true },
        { "network.deny", "x.example", false },
        { "network.ask", "other.example", true },
        { "network.allow_private", "10.0.0.0/8", true },
        { "network.resolve", "example.com=127.0.0.2", true },
        { "network.dns", "127.0.0.53", true },
        { "network.budgets.requests", "5", false },
        { "network.budgets.requests", "20", true },
        { "network.budgets.bytes", "1M", false }, /* unlimited before */
        { "secrets", "X=env:HOME@example.com", true },
        { "tools.allow", "echo", false },
        { "tools.allow", "rm", true },
        { "tools.ask", "echo", false },
        { "tools.record_arguments", "true", false },
        { "tools.resources", "true", true },
        { "tools.max_calls", "5", false }, /* unlimited before */
        { "syscalls.allow", "sethostname", true },
        { "syscalls.deny", "mkdir", false },
        { "microvm.accel", "kvm", false },
        { "microvm.accel", "tcg", true },
        { "audit.file", "/tmp/cordon-narrow-test.log", false },
        { "audit.file", "/tmp/cordon-elsewhere.log", true },
        { "audit.fsync", "always", false },
        { "decider.timeout", "1s", true },
        { "break_glass.max_duration", "1h", true },
    };
    struct cordon_err err = { 0 };
    struct policy *p = policy_load_string(narrow_base, strlen(narrow_base), "signed.yaml", &err);
    if (!ok(p != NULL, "the base policy loads: %s", err.msg))
        return;
    policy_narrow_only(p, POLICY_NARROW_SIGNED);
    char before[65], after[65];
    policy_digest_hex(p, before);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err = (struct cordon_err){ 0 };
        int rc = policy_check_tighten(p, cases[i].key, cases[i].value, "--flag", &err);
        char want[200], shown[80];
        policy_value_shown(cases[i].key, cases[i].value, shown, sizeof shown);
        snprintf(want, sizeof want, "--flag %s relaxes %s of a signed policy", shown, cases[i].key);
        ok(cases[i].relaxes ? rc < 0 && strstr(err.msg, want) : rc == 0, "%s=%s %s: %s",
           cases[i].key, cases[i].value, cases[i].relaxes ? "relaxes" : "tightens", err.msg);
    }
    /* An env.set value may be a credential: the message names the variable alone. */
    ok(policy_check_tighten(p, "env.set", "TOKEN=s3cr3t", "--env", &err) < 0 &&
           !strstr(err.msg, "s3cr3t") && strstr(err.msg, "--env TOKEN=... relaxes env.set"),
       "env.set value withheld: %s", err.msg);
    /* The setters ask first: a refused value leaves the policy as it was. */
    ok(policy_set(p, "limits.memory", "unlimited", "--memory", &err) < 0 &&
           policy_add_bind(p, "/etc:/etc", true, "--rw", &err) < 0 &&
           policy_add_env(p, "PATH", "--env", &err) < 0,
       "policy_set, policy_add_bind, policy_add_env refuse: %s", err.msg);
    policy_digest_hex(p, after);
    is_str(after, before, "a refused change leaves the policy as it was");
    ok(policy_set(p, "limits.memory", "128M", "--memory", &err) == 0 &&
           p->limits.memory == 128u << 20,
       "a tightening one applies");
    /* Then the tightened value is the bar: a flag may not undo another's tightening. */
    ok(policy_set(p, "limits.memory", "256M", "--memory", &err) < 0, "nor widen it again");
    policy_narrow_only(p, POLICY_NARROW_BREAK_GLASS);
    ok(policy_check_tighten(p, "limits.pids", "unlimited", "--pids", &err) < 0 &&
           strstr(err.msg, "of a signed policy"),
       "a signature outranks break-glass in the message");
    policy_free(p);

    p = policy_load_string(narrow_base, strlen(narrow_base), "plain.yaml", &err);
    ok(p && policy_set(p, "limits.memory", "unlimited", "--memory", &err) == 0,
       "an unsigned policy takes any value");
    policy_narrow_only(p, POLICY_NARROW_BREAK_GLASS);
    ok(policy_check_tighten(p, "filesystem.read_write", "/etc:/etc", "--rw", &err) < 0 &&
           strstr(err.msg,
                  "--rw /etc:/etc relaxes filesystem.read_write, which a break-glass "
                  "run relaxes only by --relax filesystem.read_write=/etc:/etc"),
       "break-glass: %s", err.msg);
    ok(policy_check_tighten(p, "limits.memory", "lots", "--memory", &err) < 0 &&
           strstr(err.msg, "--memory: expected a size"),
       "a bad value fails as its setter would: %s", err.msg);
    policy_free(p);

    /* --relax relaxes what may_relax lists, and its record withholds an env value. */
    static const char bg_text[] = "version: 1\nbreak_glass:\n  may_relax: [env.set]\n"
                                  "  max_duration: 1h\n";
    p = policy_load_string(bg_text, strlen(bg_text), "bg.yaml", &err);
    policy_narrow_only(p, POLICY_NARROW_SIGNED);
    char *relax_env[] = { "env.set=TOKEN=s3cr3t" };
    struct policy_break_glass_request req = { "incident", "10m", relax_env, 1, NULL };
    ok(policy_break_glass(p, &req, &err) == 0 && p->n_env_set == 1, "--relax env.set: %s", err.msg);
    char *rec = json_dumps(p->break_glass, JSON_COMPACT | JSON_SORT_KEYS);
    ok(rec && strstr(rec, "\"env.set\":[\"TOKEN=...\"]") && !strstr(rec, "s3cr3t"),
       "the break-glass record withholds the value: %s", rec);
    free(rec);
    policy_free(p);

    /* Every key has a direction: none falls to "any change relaxes" unseen. */
    size_t missing = 0;
    for (size_t i = 0; policy_key_at(i); i++) {
        const struct policy_key *k = policy_key_at(i);
        if (k->type != KT_SECTION && policy_key_direction(k->path) < 0) {
            ok(0, "no direction for %s", k->path);
            missing++;
        }
    }
    ok(missing == 0, "every key has a direction");
}

/*
 * An enumerated key names its choices once: each name, value and rank
 * distinct (a tie in rank would let a signed policy move sideways unseen),
 * the default among them, and the key ranked by them.
 */
static void test_choice_tables(void)
{
    size_t n_enums = 0, stray = 0;
    for (size_t i = 0; policy_key_at(i); i++) {
        const struct policy_key *k = policy_key_at(i);
        if (k->type != KT_ENUM && k->type != KT_LEVEL) {
            stray += k->choices != NULL;
            continue;
        }
        n_enums++;
        const struct policy_enum *e = k->choices;
        bool distinct = e && e->n >= 2;
        for (size_t a = 0; distinct && a < e->n; a++)
            for (size_t b = a + 1; b < e->n; b++)
                distinct &= strcmp(e->choices[a].name, e->choices[b].name) != 0 &&
                    e->choices[a].value != e->choices[b].value &&
                    e->choices[a].rank != e->choices[b].rank;
        ok(distinct, "%s: names, values and ranks distinct", k->path);
        ok(e && policy_choice_name(e, (int)k->def) != NULL, "%s: its default is a choice", k->path);
        ok(policy_key_direction(k->path) == policy_key_direction("isolation"),
           "%s is ranked by its choices", k->path);
    }
    ok(n_enums == 6, "six enumerated keys (%zu)", n_enums);
    ok(stray == 0, "no other key has choices");
}

int main(void)
{
    test_narrowing();
    test_choice_tables();
    test_strict_json();
    test_pins_refuse_duplicates();
    test_signature_refuses_duplicates();
    test_trust_dir_with_a_bad_key();
    test_signatures();
    test_tool_digests();
    test_pin_verdicts();
    test_decider_fails_closed();
    test_command_decider();
    return done_testing();
}
