/*
 * tests/fuzz/fuzz_policy.c: libFuzzer target for the policy loader
 * (policy/policy_load.c and the key table's setters), which reads YAML or
 * JSON a user, or an agent writing one, handed to the CLI or the daemon.
 * Beyond "no crash, no out-of-bounds read, no leak" it traps when
 *   - a refusal is not one printable line naming the file, or not a policy error;
 *   - a loaded policy's own JSON (policy_to_json) does not load again to the
 *     same JSON and the same digest: what `cordon policy check` prints must be
 *     a policy that means exactly what was checked;
 *   - input that is JSON (a YAML 1.2 subset) is called invalid YAML, or the
 *     same JSON value written another way (jansson's compact re-dump) gets
 *     another verdict or another digest.
 * Built by meson with -Dfuzz=true; see tests/fuzz/README.md.
 */
#include "policy/policy.h"

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

/* P's JSON, compact with sorted keys; the caller frees it. */
static char *dump_policy(const struct policy *p)
{
    json_auto_t *j = policy_to_json(p);
    check(j != NULL);
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    check(text != NULL);
    return text;
}

/* The policy TEXT loads, and to the digest WANT; returns it (the caller frees it). */
static struct policy *load_same(const char *text, const unsigned char want[32])
{
    struct cordon_err err = { 0 };
    struct policy *q = policy_load_string(text, strlen(text), NAME, &err);
    check(q != NULL);
    unsigned char got[32];
    policy_digest(q, got);
    check(memcmp(got, want, sizeof got) == 0);
    return q;
}

static void check_round_trip(const struct policy *p)
{
    unsigned char digest[32];
    policy_digest(p, digest);
    _cleanup_free_ char *text = dump_policy(p);
    _cleanup_(policy_freep) struct policy *q = load_same(text, digest);
    _cleanup_free_ char *again = dump_policy(q);
    check(strcmp(text, again) == 0);
}

/*
 * DATA as JSON: every JSON text is YAML 1.2, so the loader may refuse what it
 * says but never its syntax, and the value's meaning cannot depend on its
 * spelling. Duplicate keys are left out: jansson keeps the last, YAML refuses.
 */
static void check_json(const unsigned char *data, size_t size, const struct policy *p,
                       const struct cordon_err *perr)
{
    json_auto_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!j || !json_is_object(j))
        return;
    check(p || strstr(perr->msg, "invalid YAML") == NULL);
    _cleanup_free_ char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    check(text != NULL);
    struct cordon_err err = { 0 };
    _cleanup_(policy_freep) struct policy *q = policy_load_string(text, strlen(text), NAME, &err);
    check((p != NULL) == (q != NULL));
    if (!q) {
        check(strstr(err.msg, "invalid YAML") == NULL);
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
        check_round_trip(p);
    else
        check_refusal(&err);
    check_json(data, size, p, &err);
    return 0;
}
