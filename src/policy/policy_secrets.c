/*
 * policy/policy_secrets.c: the secrets section: a credential the sandbox
 * never holds, built field by field (from a file's mapping or a flag) and
 * checked against the env section. Runs in the CLI or supervisor; reads the
 * environment and stats a secret's file, never its value.
 */
#include "policy/policy_int.h"

#include "common/strv.h"
#include "common/text.h"
#include "common/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- secrets ---- */

void policy_secret_release(struct policy_secret *s)
{
    free(s->name);
    free(s->from);
    policy_strv_free(s->hosts, s->n_hosts);
    free(s->host_rules);
    *s = (struct policy_secret){ 0 };
}

int policy_secret_set_name(struct policy_secret *s, const char *text, char *why, size_t len)
{
    if (policy_check_env_name(text, why, len) < 0)
        return -1;
    if (strlen(text) > POLICY_SECRET_NAME_MAX)
        return why_printf(why, len, "\"%.40s...\" is too long (at most %d characters)", text,
                          POLICY_SECRET_NAME_MAX);
    char *n = strdup(text);
    if (!n)
        return POLICY_ENOMEM;
    free(s->name);
    s->name = n;
    return 0;
}

/*
 * Only the reference is checked and kept, never the value: the supervisor
 * reads it when the run starts. A wrong `from` is not echoed back, since
 * the likeliest mistake is pasting the credential itself there.
 */
int policy_secret_set_from(struct policy_secret *s, const char *text, enum value_origin from,
                           char *why, size_t len)
{
    char *canon = NULL;
    if (strncmp(text, "env:", 4) == 0) {
        const char *var = text + 4;
        if (policy_check_env_name(var, why, len) < 0)
            return -1;
        const char *v = getenv(var);
        if (!v)
            return why_printf(why, len, "environment variable \"%s\" is not set", var);
        /* An empty credential would only surface as a puzzling 401 mid-run. */
        if (v[0] == '\0')
            return why_printf(why, len, "environment variable \"%s\" is empty", var);
        if (asprintf(&canon, "env:%s", var) < 0)
            return POLICY_ENOMEM;
    } else if (strncmp(text, "file:", 5) == 0) {
        _cleanup_free_ char *real = NULL;
        int r = policy_resolve_existing(text + 5, from, S_IFREG, &real, why, len);
        if (r < 0)
            return r;
        if (asprintf(&canon, "file:%s", real) < 0)
            return POLICY_ENOMEM;
    } else {
        return why_printf(why, len,
                          "expected env:VAR or file:PATH, a reference to where the "
                          "value is, not the value");
    }
    free(s->from);
    s->from = canon;
    return 0;
}

/*
 * The gateway swaps the value in only for a name it intercepts by TLS with a
 * certificate for that name; an address cannot be bound that way. A host
 * without a port binds 443 only (for an allow rule it means 80 and 443): a
 * token must not cross the network in clear unless the policy names the
 * plain-HTTP port itself.
 */
int policy_secret_add_host(struct policy_secret *s, const char *text, char *why, size_t len)
{
    _cleanup_free_ char *t = policy_trimmed(text);
    if (!t)
        return POLICY_ENOMEM;
    struct egress_rule r;
    if (egress_rule_parse(t, &r, why, len) < 0)
        return -1;
    if (r.kind != EGRESS_RULE_NAME && r.kind != EGRESS_RULE_SUFFIX)
        return why_printf(why, len, "a secret binds to host names, not addresses");
    if (r.port == 0)
        r.port = 443;
    char canon[300];
    egress_rule_format(&r, canon, sizeof canon);
    return policy_strv_add(&s->hosts, &s->n_hosts, canon);
}

int policy_secret_set_ttl(struct policy_secret *s, const char *text, char *why, size_t len)
{
    uint64_t v = 0;
    if (parse_duration_ms(text, &v, why, len) < 0)
        return -1;
    /* Absent means the run's lifetime; a written 0 reads as "already dead" to some. */
    if (v == 0)
        return why_printf(why, len, "must be greater than 0, got \"%s\"", text);
    if (v > (uint64_t)INT64_MAX)
        return why_printf(why, len, "\"%s\" is too large", text);
    s->ttl_ms = v;
    return 0;
}

static void secret_releasep(struct policy_secret *s)
{
    policy_secret_release(s);
}

int policy_add_secret(struct policy *p, struct policy_secret *s, char *why, size_t len)
{
    _cleanup_(secret_releasep) struct policy_secret own = *s;
    *s = (struct policy_secret){ 0 };
    if (!own.name || !own.from || own.n_hosts == 0)
        return why_printf(why, len, "a secret needs a name, from and at least one host");
    if (strv_contains(p->env_pass, p->n_env_pass, own.name))
        return why_printf(why, len, "\"%s\" is also in env.pass", own.name);
    if (policy_env_set_find(p, own.name) >= 0)
        return why_printf(why, len, "\"%s\" is also in env.set", own.name);
    size_t at = 0;
    while (at < p->n_secrets && strcmp(p->secrets[at].name, own.name) < 0)
        at++;
    if (at < p->n_secrets && strcmp(p->secrets[at].name, own.name) == 0)
        return why_printf(why, len, "\"%s\" is already a secret", own.name);
    if (p->n_secrets >= POLICY_MAX_SECRETS)
        return why_printf(why, len, "more than %d secrets", POLICY_MAX_SECRETS);
    struct policy_secret *ns = realloc(p->secrets, (p->n_secrets + 1) * sizeof *ns);
    if (!ns)
        return POLICY_ENOMEM;
    p->secrets = ns;
    memmove(ns + at + 1, ns + at, (p->n_secrets - at) * sizeof *ns);
    ns[at] = own;
    own = (struct policy_secret){ 0 };
    p->n_secrets++;
    return 0;
}

/*
 * --secret NAME=SOURCE@HOST[,HOST...]. NAME cannot hold '=' and a host
 * cannot hold '@', so the first '=' and the last '@' split it, whatever the
 * file path between them holds. The spec is not echoed: it may be the value.
 */
int policy_secret_from_flag(struct policy *p, const char *spec, char *why, size_t len)
{
    const char *eq = strchr(spec, '='), *at = strrchr(spec, '@');
    if (!eq || !at || at < eq)
        return why_printf(why, len,
                          "expected NAME=env:VAR@HOST[,HOST] or "
                          "NAME=file:PATH@HOST[,HOST]");
    _cleanup_(secret_releasep) struct policy_secret s = { 0 };
    _cleanup_free_ char *name = strndup(spec, (size_t)(eq - spec));
    _cleanup_free_ char *from = strndup(eq + 1, (size_t)(at - eq - 1));
    if (!name || !from)
        return POLICY_ENOMEM;
    int r = policy_secret_set_name(&s, name, why, len);
    if (r < 0)
        return r;
    if ((r = policy_secret_set_from(&s, from, FROM_FLAG, why, len)) < 0)
        return r;
    /* Split by hand: strtok would skip an empty item instead of refusing it. */
    for (const char *h = at + 1;;) {
        const char *comma = strchr(h, ',');
        _cleanup_free_ char *host = strndup(h, comma ? (size_t)(comma - h) : strlen(h));
        if (!host)
            return POLICY_ENOMEM;
        if ((r = policy_secret_add_host(&s, host, why, len)) < 0)
            return r;
        if (!comma)
            break;
        h = comma + 1;
    }
    return policy_add_secret(p, &s, why, len);
}
