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
    "\n"
    "Validate FILE (YAML or JSON) and print the effective policy, every default\n"
    "filled in, as JSON with its SHA-256 digest; limits.defaults names the limits\n"
    "FILE left at their defaults, which degrade where the host cannot enforce them.\n"
    "Without FILE, the policy cordon run, mcp serve and mcp wrap use when given no\n"
    "-p: $CORDON_POLICY, else ~/.config/cordon/policy.yaml ($XDG_CONFIG_HOME), else\n"
    "/etc/cordon/policy.yaml, else the built-in defaults; \"file\" and \"from\" say\n"
    "which.\n"
    "Exit 0 when valid, 125 with FILE:LINE: key: problem when not.\n";

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
    if (argc < 2 || strcmp(argv[1], "check") != 0)
        return cli_usage_error("policy: expected 'check [FILE]'; try 'cordon policy --help'");
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
    json_dumpf(out, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
    fputc('\n', stdout);
    json_decref(out);
    return 0;
}
