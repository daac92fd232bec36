/*
 * cli/evidence_cmd.c: `cordon evidence RUN --audit FILE` (the record of the
 * boundary a run had) and `cordon evidence verify FILE` (offline check).
 */
#include "audit/audit.h"
#include "cli/cli.h"
#include "common/json.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: cordon evidence RUN_ID --audit FILE [--format text|json]\n"
    "       cordon evidence verify EVIDENCE.json [--key PUB.pem]\n"
    "\n"
    "The record of the boundary run RUN_ID (or a unique prefix) had, from the\n"
    "audit log: level, policy digest and signer, network, secret names, tool and\n"
    "syscall digests, limits as enforced, egress decisions, tool calls, the\n"
    "result, and the log lines from the run's first to the nearest signed\n"
    "checkpoint. --format json writes it for machines and for verify, which\n"
    "checks it offline: the lines chain, the checkpoint signs them (with --key),\n"
    "the summary is what they say. Exit 0 when it verifies, 1 when not.\n";

static const char *s(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "-";
}

static void print_list(const char *title, const json_t *a)
{
    printf("%-16s%zu\n", title, json_array_size(a));
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e)
    {
        char *t = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
        printf("  %s\n", t ? t : "?");
        free(t);
    }
}

static void print_text(const json_t *doc, const struct evidence_report *r)
{
    const json_t *sm = json_object_get(doc, "summary");
    const json_t *res = json_object_get(sm, "result");
    const json_t *a = json_object_get(doc, "audit");
    char *limits = json_dumps(json_object_get(sm, "limits"), JSON_COMPACT);
    char *enforced = json_dumps(json_object_get(sm, "limits_enforced"), JSON_COMPACT);
    char *secrets = json_dumps(json_object_get(sm, "secrets"), JSON_COMPACT);
    char *egress = json_dumps(json_object_get(sm, "egress"), JSON_COMPACT);
    char *bg = json_dumps(json_object_get(sm, "break_glass"), JSON_COMPACT);
    printf("run             %s\n", s(doc, "run"));
    printf("level           %s\n", s(sm, "level"));
    printf("policy          %s\n", s(sm, "policy_digest"));
    printf("signer          %s\n", s(sm, "policy_signer"));
    char *net = json_dumps(json_object_get(sm, "network"), JSON_COMPACT | JSON_SORT_KEYS);
    printf("network         %s %s\n", s(sm, "network_digest"), net ? net : "");
    free(net);
    printf("egress          %s\n", egress ? egress : "-");
    printf("secrets         %s\n", secrets ? secrets : "[]");
    printf("tools           %s\n", s(sm, "tools_digest"));
    printf("syscalls        %s\n", s(sm, "syscalls_digest"));
    printf("limits          %s\n", limits ? limits : "-");
    printf("enforced        %s\n", enforced ? enforced : "-");
    printf("break_glass     %s\n", bg ? bg : "none");
    print_list("egress calls", json_object_get(sm, "egress_decisions"));
    print_list("tool calls", json_object_get(sm, "tool_calls"));
    print_list("limits fired", json_object_get(sm, "limits_fired"));
    printf("result          %s, status %lld\n", s(res, "reason"),
           (long long)json_integer_value(json_object_get(res, "status")));
    const json_t *cp = json_object_get(a, "checkpoint");
    printf("audit lines     %zu from %s\n", json_array_size(json_object_get(a, "lines")),
           s(a, "file"));
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(a, "lines"), i, l)
        printf("  %6lld %s%s\n", (long long)json_integer_value(json_object_get(l, "seq")),
               s(l, "sha256"), json_is_true(json_object_get(l, "run")) ? " *" : "");
    if (json_is_object(cp))
        printf("checkpoint      seq %lld signs %s (key_id %.16s...)\n",
               (long long)json_integer_value(json_object_get(cp, "seq")), s(cp, "head"),
               s(cp, "key_id"));
    else
        printf("checkpoint      none after the run: chain only, not signed\n");
    printf("verifies        %s%s\n", r->intact ? "yes" : "NO: ", r->intact ? "" : r->why);
    free(limits), free(enforced), free(secrets), free(egress), free(bg);
}

static int verify(int argc, char **argv)
{
    const char *file = NULL, *key = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--key") && i + 1 < argc)
            key = argv[++i];
        else if (!file && argv[i][0] != '-')
            file = argv[i];
        else
            return cli_usage_error("evidence verify: unexpected argument '%s'", argv[i]);
    }
    if (!file)
        return cli_usage_error("evidence verify: expected EVIDENCE.json [--key PUB.pem]");
    json_error_t je;
    json_auto_t *doc = json_parse_strict_file(file, 0, &je);
    if (!doc)
        return cli_usage_error("evidence verify: '%s': %s", file, je.text);
    struct evidence_report r;
    struct cordon_err err = { 0 };
    if (audit_evidence_verify(doc, key, &r, &err) < 0)
        return cli_fail(&err);
    if (!r.intact) {
        printf("%s: NOT verified: %s\n", file, r.why);
        return 1;
    }
    printf("%s: verified: %llu lines chain%s\n", file, (unsigned long long)r.lines,
           r.signature_checked ? ", signed checkpoint verified"
               : r.checkpoint  ? ", checkpoint present (give --key to check its signature)"
                               : ", no checkpoint (unsigned)");
    return 0;
}

int cmd_evidence(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "verify"))
        return verify(argc, argv);
    const char *run = NULL, *audit = NULL, *format = "text", *key = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--audit") && i + 1 < argc)
            audit = argv[++i];
        else if (!strcmp(argv[i], "--format") && i + 1 < argc)
            format = argv[++i];
        else if (!strcmp(argv[i], "--key") && i + 1 < argc)
            key = argv[++i];
        else if (!run && argv[i][0] != '-')
            run = argv[i];
        else
            return cli_usage_error("evidence: unexpected argument '%s'; try 'cordon evidence "
                                   "--help'",
                                   argv[i]);
    }
    if (!run || !audit)
        return cli_usage_error("evidence: expected RUN_ID --audit FILE");
    if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0)
        return cli_usage_error("evidence: --format: expected text or json, got \"%s\"", format);
    struct cordon_err err = { 0 };
    json_auto_t *doc = audit_evidence(audit, run, &err);
    if (!doc)
        return cli_fail(&err);
    struct evidence_report r;
    if (audit_evidence_verify(doc, key, &r, &err) < 0)
        return cli_fail(&err);
    if (!strcmp(format, "json")) {
        json_dumpf(doc, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    } else {
        print_text(doc, &r);
    }
    return r.intact ? 0 : 1;
}
