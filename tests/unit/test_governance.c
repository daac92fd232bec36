/*
 * tests/unit/test_governance.c: the pure parts of issue 15: Ed25519
 * detached signatures, tool digests and pin verdicts, and the decider
 * client's fail-closed answers; of issue 22, the JSON readers that refuse a
 * key given twice (the parser itself, pins, signatures, approvals).
 */
#include "broker/pins.h"
#include "common/decider.h"
#include "common/hostpath.h"
#include "common/json.h"
#include "common/sigkey.h"
#include "policy/policy.h"

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
        int key;           /* 0: a, 1: b */
        const char *msg;
        const char *sig;   /* NULL: the real one */
        bool want;
    } cases[] = {
        { 0, "policy", NULL, true },
        { 1, "policy", NULL, false },                 /* another key */
        { 0, "polic", NULL, false },                  /* another message */
        { 0, "policy", "", false },
        { 0, "policy", "AAAA", false },
        { 0, "policy", "not base64 at all, and far too short to be a signature==", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ok(sigkey_verify(cases[i].key ? b : a, cases[i].msg, strlen(cases[i].msg),
                         cases[i].sig ? cases[i].sig : sig) == cases[i].want,
           "verify case %zu", i);
    char ida[65], idb[65];
    ok(sigkey_id(a, ida) == 0 && sigkey_id(b, idb) == 0 && strcmp(ida, idb) && sha256_hex_valid(ida),
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
        { "{\"name\":\"t\",\"description\":\"d\"}",
          "{\"name\":\"t\",\"description\":\"d \"}", false },
        { "{\"name\":\"t\"}", "{\"name\":\"t\",\"title\":null}", true },
        { "{\"name\":\"t\"}", "{\"name\":\"t\",\"annotations\":{\"destructiveHint\":true}}", false },
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
        int session;       /* a new session starts when this changes */
        bool done_first;   /* the first listing ended before this tool */
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
    ok(!decider_new(longp, NULL, 100, &err) && strstr(err.msg, "too long"), "long path: %s", err.msg);
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
        const char *reason;     /* a part of it, for a deny */
        bool cached_next;       /* a second question is answered from memory */
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
        const char *error;   /* part of the parser's message; NULL: parses */
    } cases[] = {
        { "{\"a\":1,\"b\":2}", NULL },
        { "{\"decision\":\"deny\",\"decision\":\"allow_once\"}", "duplicate object key" },
        { "{\"a\":1,\"a\":1}", "duplicate object key" },          /* the same value too */
        { "{\"x\":{\"a\":1,\"b\":{\"a\":2,\"a\":3}}}", "duplicate object key" },
        { "[{\"a\":1},{\"a\":1}]", NULL },                          /* two objects */
        { "{\"a\":1,\"x\":{\"a\":2}}", NULL },                      /* two levels */
        { "{\"\\u0061\":1,\"a\":2}", "duplicate object key" },      /* an escape is the key */
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

int main(void)
{
    test_strict_json();
    test_pins_refuse_duplicates();
    test_signature_refuses_duplicates();
    test_signatures();
    test_tool_digests();
    test_pin_verdicts();
    test_decider_fails_closed();
    test_command_decider();
    return done_testing();
}
