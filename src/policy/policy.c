/*
 * policy/policy.c: a policy's life: made with every default, one key set by
 * its type (the one path a file's value and a flag both take), freed. Each
 * section's rules live in its own file (policy_int.h says which); this one
 * only dispatches. Runs in the CLI or supervisor.
 */
#include "policy/policy_int.h"

#include "common/strv.h"
#include "common/text.h"
#include "policy/syscall_table.h"

#include <stdlib.h>
#include <string.h>

struct policy *policy_new(struct cordon_err *err)
{
    struct policy *p = calloc(1, sizeof *p);
    if (!p) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    if (policy_fs_defaults(p) < 0) {
        policy_free(p);
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    policy_keys_defaults(p);
    p->limits.defaulted = (1u << POLICY_LIMIT_COUNT) - 1;
    return p;
}

void policy_free(struct policy *p)
{
    if (!p)
        return;
    free(p->origin);
    free(p->workspace);
    for (size_t i = 0; i < p->n_binds; i++) {
        free(p->binds[i].source);
        free(p->binds[i].dest);
    }
    free(p->binds);
    policy_strv_free(p->protected, p->n_protected);
    policy_strv_free(p->unprotect, p->n_unprotect);
    policy_strv_free(p->unix_sockets, p->n_unix_sockets);
    policy_strv_free(p->env_pass, p->n_env_pass);
    for (size_t i = 0; i < p->n_env_set; i++) {
        free(p->env_set[i].name);
        free(p->env_set[i].value);
    }
    free(p->env_set);
    policy_strv_free(p->syscalls_allow, p->n_syscalls_allow);
    policy_strv_free(p->syscalls_deny, p->n_syscalls_deny);
    policy_strv_free(p->network.allow, p->network.n_allow);
    policy_strv_free(p->network.deny, p->network.n_deny);
    policy_strv_free(p->network.ask, p->network.n_ask);
    policy_strv_free(p->network.expose, p->network.n_expose);
    policy_strv_free(p->network.allow_private, p->network.n_allow_private);
    policy_strv_free(p->network.dns, p->network.n_dns);
    policy_strv_free(p->network.resolve, p->network.n_resolve);
    policy_presets_release(&p->network);
    for (size_t i = 0; i < p->n_secrets; i++)
        policy_secret_release(&p->secrets[i]);
    free(p->secrets);
    policy_tools_release(&p->tools);
    policy_egress_release(&p->egress);
    free(p->audit.file);
    free(p->audit.sign_key);
    free(p->audit.witness);
    free(p->network.upstream_ca);
    policy_gov_release(&p->gov);
    json_decref(p->break_glass);
    json_decref(p->loaded);
    json_decref(p->flags);
    free(p);
}

int policy_apply_item(struct policy *p, const struct policy_key *k, const char *text, char *why,
                      size_t len)
{
    char expect[160];
    switch (k->type) {
    case KT_NAMES:
        return policy_env_pass(p, text, why, len);
    case KT_SYSCALLS: {
        bool allow = k->flag;
        if (seccomp_check_name(text, allow, why, len) < 0)
            return -1;
        if (strv_contains(allow ? p->syscalls_deny : p->syscalls_allow,
                          allow ? p->n_syscalls_deny : p->n_syscalls_allow, text))
            return why_printf(why, len, "\"%s\" is also in syscalls.%s", text,
                              allow ? "deny" : "allow");
        return allow ? policy_strv_add(&p->syscalls_allow, &p->n_syscalls_allow, text)
                     : policy_strv_add(&p->syscalls_deny, &p->n_syscalls_deny, text);
    }
    case KT_BEST_EFFORT:
        return policy_best_effort_add(p, text, why, len);
    case KT_RULES:
    case KT_CIDRS:
    case KT_PINS:
    case KT_NAMESERVERS:
    case KT_PORTS:
        return policy_net_item(p, k, text, why, len);
    case KT_TOOL_NAMES:
        return k->flag ? policy_tools_ask(p, text, why, len)
                       : policy_tools_allow(p, text, why, len);
    case KT_KEY_PATHS:
        return policy_gov_add_relax(p, text, why, len);
    case KT_TOOL_PINS:
        return policy_tools_pin(p, text, why, len);
    case KT_PROTECTED:
    case KT_UNIX_SOCKETS:
        return policy_fs_item(p, k, text, why, len);
    default:
        return why_printf(why, len, "expected %s, got \"%s\"",
                          policy_key_expect(k, expect, sizeof expect), text);
    }
}

/* Turn a setter's result into ERR, prefixed with the flag (or key). */
static int flag_result(int r, const char *prefix, const char *why, struct cordon_err *err)
{
    if (r == POLICY_ENOMEM)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    if (r < 0)
        return err_set(err, CORDON_E_POLICY, "%s: %s", prefix, why);
    return 0;
}

static int add_bind(struct policy *p, const char *spec, bool writable, const char *prefix,
                    struct cordon_err *err)
{
    char why[200] = "";
    p->evidence_done = false;
    /* The first ':' splits; a path containing ':' needs the {source, dest} form. */
    const char *colon = strchr(spec, ':');
    _cleanup_free_ char *source = strndup(spec, colon ? (size_t)(colon - spec) : strlen(spec));
    if (!source)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    return flag_result(policy_apply_bind(p, source, colon ? colon + 1 : NULL, writable, false,
                                         FROM_FLAG, why, sizeof why),
                       prefix, why, err);
}

int policy_set_unchecked(struct policy *p, const char *key, const char *value, const char *flag,
                         struct cordon_err *err)
{
    const char *prefix = flag ? flag : key;
    const struct policy_key *k = policy_key_find(key);
    char why[200] = "";
    p->evidence_done = false; /* a changed policy's digests are computed anew */
    if (!k)
        return err_set(err, CORDON_E_POLICY, "%s: unknown policy key \"%s\"", prefix, key);
    switch (k->type) {
    case KT_SECTION:
        return err_set(err, CORDON_E_POLICY, "%s: \"%s\" is a section, not a value", prefix, key);
    case KT_RESERVED:
        return err_set(err, CORDON_E_POLICY, "%s: %s: %s", prefix, key, k->note);
    case KT_BINDS:
        return add_bind(p, value, k->flag, prefix, err);
    case KT_ENV_MAP: {
        const char *eq = strchr(value, '=');
        if (!eq)
            return err_set(err, CORDON_E_POLICY, "%s: expected NAME=VALUE, got \"%s\"", prefix,
                           value);
        _cleanup_free_ char *name = strndup(value, (size_t)(eq - value));
        if (!name)
            return err_set(err, CORDON_E_INTERNAL, "out of memory");
        return flag_result(policy_apply_env_set(p, name, eq + 1, strlen(eq + 1), why, sizeof why),
                           prefix, why, err);
    }
    case KT_NAMES:
    case KT_SYSCALLS:
    case KT_RULES:
    case KT_CIDRS:
    case KT_PINS:
    case KT_NAMESERVERS:
    case KT_PORTS:
    case KT_TOOL_NAMES:
    case KT_KEY_PATHS:
    case KT_TOOL_PINS:
    case KT_PROTECTED:
    case KT_UNIX_SOCKETS:
        if (strcmp(key, "network.allow") == 0 || strcmp(key, "network.ask") == 0)
            p->network.rules_by_caller = true;
        return flag_result(policy_apply_item(p, k, value, why, sizeof why), prefix, why, err);
    case KT_SECRETS:
        p->network.rules_by_caller = true;
        return flag_result(policy_secret_from_flag(p, value, why, sizeof why), prefix, why, err);
    case KT_BEST_EFFORT: {
        /* A flag lists several limits at once: --best-effort memory,pids (or all). */
        if (strcmp(value, "all") == 0) {
            policy_set_best_effort_all(p, true);
            return 0;
        }
        if (policy_parse_bool(value) >= 0 || !strchr(value, ','))
            return flag_result(policy_apply_scalar(p, k, value, FROM_FLAG, why, sizeof why), prefix,
                               why, err);
        _cleanup_free_ char *copy = strdup(value);
        if (!copy)
            return err_set(err, CORDON_E_INTERNAL, "out of memory");
        char *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
            TRY(flag_result(policy_apply_item(p, k, t, why, sizeof why), prefix, why, err));
        return 0;
    }
    default:
        return flag_result(policy_apply_scalar(p, k, value, FROM_FLAG, why, sizeof why), prefix,
                           why, err);
    }
}
