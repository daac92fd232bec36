/*
 * tests/fuzz/fuzz_policy.c: libFuzzer target for the policy loader
 * (policy/policy_load.c and the key table's setters), which reads YAML or
 * JSON a user, or an agent writing one, handed to the CLI or the daemon.
 * Beyond "no crash, no out-of-bounds read, no leak" it traps when
 *   - a refusal is not one printable line naming the file, or not a policy error;
 *   - loading the same text twice gives two different policies (policy_to_json);
 *   - a loaded policy's document, written out as JSON, loads to another
 *     digest, or not at all: YAML and JSON spell one schema;
 *   - input that is JSON (a YAML 1.2 subset) is called invalid YAML, or the
 *     same JSON value written another way (jansson's compact re-dump) gets
 *     another verdict or another digest.
 * Built by meson with -Dfuzz=true; see tests/fuzz/README.md.
 */
#include "policy/policy.h"

#include <libfyaml.h>

#include <stdlib.h>
#include <string.h>

#define NAME "fuzz.yaml"

static void check(int cond)
{
    if (!cond)
        __builtin_trap();
}

/* One line, printable ASCII or UTF-8 continuation bytes, starting with the file's name. */
static void check_refusal(const struct cordon_err *err)
{
    check(err->kind == CORDON_E_POLICY);
    check(strncmp(err->msg, NAME, strlen(NAME)) == 0);
    for (const unsigned char *c = (const unsigned char *)err->msg; *c; c++)
        check(*c >= 0x20 && *c != 0x7f);
}

/* Does MSG read "fuzz.yaml[:LINE]: invalid YAML..." (policy_load.c's syntax_error)? */
static bool is_syntax_error(const char *msg)
{
    const char *c = msg + strlen(NAME);
    if (*c == ':')
        for (c++; *c >= '0' && *c <= '9'; c++)
            ;
    return strncmp(c, ": invalid YAML", 14) == 0;
}

/* P's JSON, compact with sorted keys; the caller frees it. */
static char *dump_policy(const struct policy *p)
{
    json_auto_t *j = policy_to_json(p);
    check(j != NULL);
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    check(text != NULL);
    return text;
}

static void fy_document_destroyp(struct fy_document **d)
{
    fy_document_destroy(*d);
}

struct text {
    char *s;
    size_t len, cap;
};

static void put(struct text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        check(t->s != NULL);
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static void put_string(struct text *t, const char *s, size_t n)
{
    json_auto_t *j = json_stringn(s, n);
    check(j != NULL);
    _cleanup_free_ char *q = json_dumps(j, JSON_ENCODE_ANY);
    check(q != NULL);
    put(t, q, strlen(q));
}

/* A plain scalar JSON reads as the same token: a number, true, false or null. */
static bool json_token(const char *s, size_t n)
{
    json_auto_t *j = json_loadb(s, n, JSON_DECODE_ANY, NULL);
    return j && (json_is_number(j) || json_is_boolean(j) || json_is_null(j));
}

/*
 * N as JSON that libfyaml reads back to the same tree: quoted scalars as
 * strings, plain ones as the same token when JSON has it, else as strings;
 * YAML's other spellings of null as null. libfyaml's own JSON emitter is not
 * used: it writes a plain NULL as "NULL". Recursion is bounded: only loaded
 * policies get here, and the key table is a few levels deep.
 */
static bool put_node(struct text *t, struct fy_node *n)
{
    if (!n) {
        put(t, "null", 4);
        return true;
    }
    if (fy_node_is_alias(n) || fy_node_get_tag(n, NULL))
        return false;
    switch (fy_node_get_type(n)) {
    case FYNT_SCALAR: {
        size_t len = 0;
        const char *s = fy_node_get_scalar(n, &len);
        if (fy_node_get_style(n) != FYNS_PLAIN)
            put_string(t, s, len);
        else if (len == 0 || (len == 1 && s[0] == '~') ||
                 (len == 4 && (!memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4))))
            put(t, "null", 4);
        else if (json_token(s, len))
            put(t, s, len);
        else
            put_string(t, s, len);
        return true;
    }
    case FYNT_SEQUENCE: {
        void *it = NULL;
        struct fy_node *item;
        put(t, "[", 1);
        for (bool first = true; (item = fy_node_sequence_iterate(n, &it)); first = false) {
            if (!first)
                put(t, ",", 1);
            if (!put_node(t, item))
                return false;
        }
        put(t, "]", 1);
        return true;
    }
    case FYNT_MAPPING: {
        void *it = NULL;
        struct fy_node_pair *pair;
        put(t, "{", 1);
        for (bool first = true; (pair = fy_node_mapping_iterate(n, &it)); first = false) {
            struct fy_node *k = fy_node_pair_key(pair);
            if (!k || fy_node_get_type(k) != FYNT_SCALAR)
                return false;
            size_t len = 0;
            const char *s = fy_node_get_scalar(k, &len);
            if (!first)
                put(t, ",", 1);
            put_string(t, s, len);
            put(t, ":", 1);
            if (!put_node(t, fy_node_pair_value(pair)))
                return false;
        }
        put(t, "}", 1);
        return true;
    }
    }
    return false;
}

/* TEXT's document as JSON, or NULL when it has no JSON spelling (a non-string key). */
static char *yaml_as_json(const char *text, size_t len)
{
    struct fy_parse_cfg cfg = { .flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_1_2 };
    _cleanup_(fy_document_destroyp) struct fy_document *doc =
        fy_document_build_from_string(&cfg, text, policy_yaml_len(text, len));
    check(doc != NULL);
    struct text t = { 0 };
    if (!put_node(&t, fy_document_root(doc))) {
        free(t.s);
        return NULL;
    }
    return t.s;
}

/*
 * A policy loads to the same thing every time, and the same document
 * written as JSON loads to the same digest.
 */
static void check_loaded(const char *text, size_t len, const struct policy *p)
{
    unsigned char digest[32];
    policy_digest(p, digest);
    _cleanup_free_ char *dump = dump_policy(p);

    struct cordon_err err = { 0 };
    _cleanup_(policy_freep) struct policy *again = policy_load_string(text, len, NAME, &err);
    check(again != NULL);
    _cleanup_free_ char *dump_again = dump_policy(again);
    check(strcmp(dump, dump_again) == 0);

    _cleanup_free_ char *json = yaml_as_json(text, len);
    if (!json)
        return;
    _cleanup_(policy_freep) struct policy *q = policy_load_string(json, strlen(json), NAME, &err);
    check(q != NULL);
    unsigned char got[32];
    policy_digest(q, got);
    check(memcmp(got, digest, sizeof got) == 0);
}

/*
 * DATA as JSON: every JSON text is YAML 1.2, so the loader may refuse what it
 * says but never its syntax, and the value's meaning cannot depend on its
 * spelling. Duplicate keys are left out: jansson keeps the last, YAML refuses.
 * So is a NUL byte: JSON forbids it outside strings, yet jansson reads on past
 * one between tokens, where the loader rightly refuses it.
 */
static void check_json(const unsigned char *data, size_t size, const struct policy *p,
                       const struct cordon_err *perr)
{
    if (memchr(data, '\0', size))
        return;
    json_auto_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!j || !json_is_object(j))
        return;
    check(p || !is_syntax_error(perr->msg));
    _cleanup_free_ char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    check(text != NULL);
    struct cordon_err err = { 0 };
    _cleanup_(policy_freep) struct policy *q = policy_load_string(text, strlen(text), NAME, &err);
    check((p != NULL) == (q != NULL));
    if (!q) {
        check(!is_syntax_error(err.msg));
        return;
    }
    unsigned char a[32], b[32];
    policy_digest(p, a);
    policy_digest(q, b);
    check(memcmp(a, b, sizeof a) == 0);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    /* An exact-size heap copy, so ASan flags any read past the NUL. */
    _cleanup_free_ char *text = malloc(size + 1);
    check(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';

    struct cordon_err err = { 0 };
    _cleanup_(policy_freep) struct policy *p = policy_load_string(text, size, NAME, &err);
    if (p)
        check_loaded(text, size, p);
    else
        check_refusal(&err);
    check_json(data, size, p, &err);
    return 0;
}
