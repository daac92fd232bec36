/*
 * policy/policy_gov_keys.c: the governance keys (require_signature, decider,
 * break_glass, audit.export): their setters, cross-checks and JSON. What
 * they govern (signatures, trust, break-glass) is policy_gov.c's, above the
 * loader. Pure: no syscalls.
 */
#include "policy/policy_int.h"

#include "common/text.h"

#include <stdlib.h>
#include <string.h>

/*
 * Governance itself is never relaxable: a break-glass run that could swap
 * its decider, its signer or the log it is recorded in would leave no trace
 * of what it did.
 */
static const char *const never_relaxed[] = {
    "version", "require_signature", "decider", "break_glass", "audit",
};

int policy_gov_add_relax(struct policy *p, const char *path, char *why, size_t len)
{
    const struct policy_key *k = policy_key_find(path);
    if (!k || k->type == KT_RESERVED)
        return why_printf(why, len, "\"%s\" is not a policy key", path);
    for (size_t i = 0; i < sizeof never_relaxed / sizeof never_relaxed[0]; i++) {
        size_t n = strlen(never_relaxed[i]);
        if (!strncmp(path, never_relaxed[i], n) && (path[n] == '\0' || path[n] == '.'))
            return why_printf(why, len, "\"%s\" cannot be relaxed by break-glass", path);
    }
    return policy_strv_add(&p->gov.may_relax, &p->gov.n_may_relax, path);
}

bool policy_may_relax(const struct policy *p, const char *key)
{
    for (size_t i = 0; i < p->gov.n_may_relax; i++) {
        const char *r = p->gov.may_relax[i];
        size_t n = strlen(r);
        /* A section relaxes the keys under it. */
        if (!strncmp(key, r, n) && (key[n] == '\0' || key[n] == '.'))
            return true;
    }
    return false;
}

int policy_gov_check(const struct policy *p, char *why, size_t len)
{
    const struct policy_gov *g = &p->gov;
    if (g->export && strcmp(g->export, "otlp") != 0)
        return why_printf(why, len, "audit.export: expected otlp, got \"%s\"", g->export);
    if (g->export && !g->export_endpoint)
        return why_printf(why, len, "audit.export: otlp needs audit.export_endpoint");
    if (g->export_endpoint && strncmp(g->export_endpoint, "http://", 7) != 0)
        return why_printf(why, len,
                          "audit.export_endpoint: expected http://HOST:PORT/PATH, "
                          "got \"%s\"",
                          g->export_endpoint);
    if (g->export && !p->audit.file)
        return why_printf(why, len,
                          "audit.export: needs audit.file (the export follows the "
                          "chain, never replaces it)");
    if (p->tools.pins && p->tools.n_pinned)
        return why_printf(why, len,
                          "tools: pins (a file) and pinned (in the policy) exclude "
                          "each other");
    for (size_t i = 0; i < p->tools.n_ask; i++) {
        if (!policy_tool_allowed(p, p->tools.ask[i]))
            return why_printf(why, len, "tools.ask: \"%s\" is not in tools.allow", p->tools.ask[i]);
        if (!g->decider && !g->decider_command && !g->decider_elicit)
            return why_printf(why, len,
                              "tools.ask: needs decider.socket, decider.command or "
                              "decider.elicit to ask");
    }
    /* The gateway asks only a socket: it holds no file and runs nothing
     * (see confine_gateway()), so a command could not be started there. */
    if (p->network.n_ask && !g->decider)
        return why_printf(why, len,
                          "network.ask: needs decider.socket (the gateway cannot run "
                          "decider.command)");
    if (g->decider && g->decider_command)
        return why_printf(why, len, "decider: socket and command exclude each other");
    if ((g->n_may_relax || g->approval_key) && !g->break_glass_max_ms)
        return why_printf(why, len, "break_glass: needs max_duration");
    return 0;
}

void policy_gov_release(struct policy_gov *g)
{
    free(g->require_signature);
    free(g->decider);
    free(g->decider_command);
    policy_strv_free(g->may_relax, g->n_may_relax);
    free(g->approval_key);
    free(g->export);
    free(g->export_endpoint);
    *g = (struct policy_gov){ 0 };
}

/* Steals V. */
static int put(json_t *o, const char *key, json_t *v)
{
    if (!o || !v || json_object_set_new(o, key, v) < 0) {
        if (o)
            json_decref(v);
        return -1;
    }
    return 0;
}

static json_t *section(json_t *root, const char *name)
{
    json_t *s = json_object_get(root, name);
    if (!s && put(root, name, json_object()) == 0)
        s = json_object_get(root, name);
    return s;
}

int policy_gov_json(const struct policy *p, json_t *root)
{
    const struct policy_gov *g = &p->gov;
    if (g->require_signature &&
        put(root, "require_signature", json_string(g->require_signature)) < 0)
        return -1;
    if (g->decider && put(section(root, "decider"), "socket", json_string(g->decider)) < 0)
        return -1;
    if (g->decider_command &&
        put(section(root, "decider"), "command", json_string(g->decider_command)) < 0)
        return -1;
    if (g->decider_elicit && put(section(root, "decider"), "elicit", json_true()) < 0)
        return -1;
    if ((g->decider || g->decider_command || g->decider_elicit) &&
        put(section(root, "decider"), "timeout_ms",
            json_integer((json_int_t)g->decider_timeout_ms)) < 0)
        return -1;
    if (g->break_glass_max_ms) {
        json_t *bg = section(root, "break_glass"), *relax = json_array();
        for (size_t i = 0; relax && i < g->n_may_relax; i++)
            json_array_append_new(relax, json_string(g->may_relax[i]));
        if (put(bg, "may_relax", relax) < 0 ||
            put(bg, "max_duration_ms", json_integer((json_int_t)g->break_glass_max_ms)) < 0 ||
            (g->approval_key && put(bg, "approval_key", json_string(g->approval_key)) < 0))
            return -1;
    }
    if (g->export &&
        (put(section(root, "audit"), "export", json_string(g->export)) < 0 ||
         put(section(root, "audit"), "export_endpoint", json_string(g->export_endpoint)) < 0))
        return -1;
    return 0;
}
