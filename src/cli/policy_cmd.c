/*
 * cli/policy_cmd.c: `cordon policy check [FILE]`: validate and show the
 * effective policy with its digest; and where the policy is when no -p names it.
 */
#include "cli/cli.h"
#include "policy/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: cordon policy check [FILE]\n"
    "       cordon policy sign FILE --key KEY.pem\n"
    "       cordon policy verify FILE --key PUB.pem\n"
    "       cordon policy approve FILE --key KEY.pem --reason REASON --until WHEN\n"
    "\n"
    "Validate FILE (YAML or JSON) and print the effective policy, every default\n"
    "filled in, as JSON with its SHA-256 digest; limits.defaults names the limits\n"
    "FILE left at their defaults, which degrade where the host cannot enforce them.\n"
    "Without FILE, the policy cordon run, mcp serve and mcp wrap use when given no\n"
    "-p: $CORDON_POLICY, else ~/.config/cordon/policy.yaml ($XDG_CONFIG_HOME), else\n"
    "/etc/cordon/policy.yaml, else the built-in defaults; \"file\" and \"from\" say\n"
    "which.\n"
    "Exit 0 when valid, 125 with FILE:LINE: key: problem when not.\n"
    "\n"
    "sign writes FILE.sig, a detached Ed25519 signature of FILE's bytes; verify\n"
    "checks it against PUB. A policy with require_signature, or any policy when\n"
    "/etc/cordon/trust.d holds keys, is refused unless FILE.sig verifies.\n"
    "approve prints a signed break-glass approval token for FILE (give it to\n"
    "cordon run --break-glass REASON --until WHEN --approval TOKEN).\n";

static int approve(int argc, char **argv)
{
    const char *key = NULL, *reason = NULL, *until = NULL;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--key"))
            key = argv[i + 1];
        else if (!strcmp(argv[i], "--reason"))
            reason = argv[i + 1];
        else if (!strcmp(argv[i], "--until"))
            until = argv[i + 1];
        else
            return cli_usage_error("policy approve: unknown option '%s'", argv[i]);
    }
    if (argc < 3 || argc % 2 == 0 || !key || !reason || !until)
        return cli_usage_error("policy approve: expected FILE --key KEY.pem --reason REASON "
                               "--until WHEN");
    struct cordon_err err = { 0 };
    _cleanup_(policy_freep) struct policy *p = policy_load(argv[2], &err);
    _cleanup_free_ char *token = NULL;
    if (!p || policy_approve_break_glass(p, key, reason, until, &token, &err) < 0)
        return cli_fail(&err);
    printf("%s\n", token);
    return 0;
}

/* sign|verify FILE --key K */
static int sign_or_verify(int argc, char **argv)
{
    const char *verb = argv[1];
    if (argc != 5 || strcmp(argv[3], "--key") != 0)
        return cli_usage_error("policy %s: expected FILE --key %s", verb,
                               !strcmp(verb, "sign") ? "KEY.pem" : "PUB.pem");
    struct cordon_err err = { 0 };
    char key_id[65];
    if (!strcmp(verb, "sign") ? policy_sign_file(argv[2], argv[4], key_id, &err) < 0
                              : policy_verify_file(argv[2], argv[4], key_id, &err) < 0)
        return cli_fail(&err);
    printf("%s %s: key_id %s\n", !strcmp(verb, "sign") ? "signed" : "verified", argv[2], key_id);
    return 0;
}

int cli_default_policy(char *path, size_t len, const char **from, struct cordon_err *err)
{
    const char *env = getenv("CORDON_POLICY");
    if (env && *env) {
        /* Named explicitly: a missing file is an error, not a fallback. */
        snprintf(path, len, "%s", env);
        *from = "$CORDON_POLICY";
        if (access(path, F_OK) < 0)
            return err_sys(err, CORDON_E_POLICY, "$CORDON_POLICY: cannot use '%s'", env);
        return 1;
    }
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (xdg && *xdg == '/')
        snprintf(path, len, "%s/cordon/policy.yaml", xdg);
    else if (home && *home == '/')
        snprintf(path, len, "%s/.config/cordon/policy.yaml", home);
    else
        path[0] = '\0';
    *from = "~/.config/cordon/policy.yaml";
    if (path[0] && access(path, F_OK) == 0)
        return 1;
    snprintf(path, len, "/etc/cordon/policy.yaml");
    *from = "/etc/cordon/policy.yaml";
    if (access(path, F_OK) == 0)
        return 1;
    path[0] = '\0';
    *from = "built-in defaults";
    return 0;
}

int cmd_policy(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "approve"))
        return approve(argc, argv);
    if (argc >= 2 && (!strcmp(argv[1], "sign") || !strcmp(argv[1], "verify")))
        return sign_or_verify(argc, argv);
    if (argc < 2 || strcmp(argv[1], "check") != 0)
        return cli_usage_error(
            "policy: expected check, sign, verify or approve; try 'cordon policy --help'");
    if (argc > 3)
        return cli_usage_error("policy check: expected at most one FILE");

    struct cordon_err err = { 0 };
    char path[4096];
    const char *from = "argument";
    int found = 1;
    if (argc == 3)
        snprintf(path, sizeof path, "%s", argv[2]);
    else if ((found = cli_default_policy(path, sizeof path, &from, &err)) < 0)
        return cli_fail(&err);
    _cleanup_(policy_freep) struct policy *p = found ? policy_load(path, &err) : policy_new(&err);
    if (!p || policy_finalize(p, &err) < 0)
        return cli_fail(&err);

    char digest[65];
    policy_digest_hex(p, digest);
    json_t *out = json_pack("{s:o, s:s, s:o, s:s}", "policy", policy_to_json(p), "digest", digest,
                            "file", found ? json_string(path) : json_null(), "from", from);
    if (p->signer[0])
        json_object_set_new(out, "signer", json_string(p->signer));
    /* What each preset named expanded to here, and from which file. */
    if (p->network.n_presets)
        json_object_set_new(out, "presets", policy_presets_json(&p->network, true));
    json_dumpf(out, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
    fputc('\n', stdout);
    json_decref(out);
    return 0;
}
