/*
 * cli/policy_cmd.c: `cordon policy check FILE`: validate and show the
 * effective policy with its digest.
 */
#include "cli/cli.h"
#include "policy/policy.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: cordon policy check FILE\n"
    "\n"
    "Validate FILE (YAML or JSON) and print the effective policy, every default\n"
    "filled in, as JSON with its SHA-256 digest; limits.defaults names the limits\n"
    "FILE left at their defaults, which degrade where the host cannot enforce them.\n"
    "Exit 0 when valid, 125 with FILE:LINE: key: problem when not.\n";

int cmd_policy(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "check") != 0)
        return cli_usage_error("policy: expected 'check FILE'; try 'cordon policy --help'");
    if (argc != 3)
        return cli_usage_error("policy check: expected exactly one FILE");

    struct cordon_err err = { 0 };
    _cleanup_(policy_freep) struct policy *p = policy_load(argv[2], &err);
    if (!p || policy_finalize(p, &err) < 0)
        return cli_fail(&err);

    char digest[65];
    policy_digest_hex(p, digest);
    json_t *out = json_pack("{s:o, s:s}", "policy", policy_to_json(p), "digest", digest);
    json_dumpf(out, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
    fputc('\n', stdout);
    json_decref(out);
    return 0;
}
