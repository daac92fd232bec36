/*
 * policy/policy_env.c: the env section: variables passed from the host and
 * set to fixed values, each name in one place only (never also a secret).
 * Pure: no syscalls.
 */
#include "policy/policy_int.h"

#include "common/strv.h"
#include "common/text.h"

#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static bool valid_env_name(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (s++; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

int policy_check_env_name(const char *name, char *why, size_t len)
{
    if (!valid_env_name(name))
        return why_printf(why, len,
                          "\"%s\" is not a variable name (expected [A-Za-z_][A-Za-z0-9_]*)", name);
    return 0;
}

ssize_t policy_env_set_find(const struct policy *p, const char *name)
{
    for (size_t i = 0; i < p->n_env_set; i++)
        if (strcmp(p->env_set[i].name, name) == 0)
            return (ssize_t)i;
    return -1;
}

static bool is_secret(const struct policy *p, const char *name)
{
    for (size_t i = 0; i < p->n_secrets; i++)
        if (strcmp(p->secrets[i].name, name) == 0)
            return true;
    return false;
}

/* One env.pass name. */
int policy_env_pass(struct policy *p, const char *text, char *why, size_t len)
{
    if (policy_check_env_name(text, why, len) < 0)
        return -1;
    if (policy_env_set_find(p, text) >= 0)
        return why_printf(why, len, "\"%s\" is also in env.set", text);
    if (is_secret(p, text))
        return why_printf(why, len, "\"%s\" is also in secrets", text);
    return policy_strv_add(&p->env_pass, &p->n_env_pass, text);
}

int policy_apply_env_set(struct policy *p, const char *name, const char *value, size_t value_len,
                         char *why, size_t len)
{
    if (policy_check_env_name(name, why, len) < 0)
        return -1;
    if (memchr(value, '\0', value_len))
        return why_printf(why, len, "value of \"%s\" contains a NUL byte", name);
    if (strv_contains(p->env_pass, p->n_env_pass, name))
        return why_printf(why, len, "\"%s\" is also in env.pass", name);
    if (is_secret(p, name))
        return why_printf(why, len, "\"%s\" is also in secrets", name);
    _cleanup_free_ char *v = strndup(value, value_len);
    if (!v)
        return POLICY_ENOMEM;
    /* The same name again replaces: a flag overrides the file. */
    ssize_t i = policy_env_set_find(p, name);
    if (i >= 0) {
        free(p->env_set[i].value);
        p->env_set[i].value = TAKE_PTR(v);
        return 0;
    }
    _cleanup_free_ char *n = strdup(name);
    if (!n)
        return POLICY_ENOMEM;
    struct policy_env_set *ns = realloc(p->env_set, (p->n_env_set + 1) * sizeof *ns);
    if (!ns)
        return POLICY_ENOMEM;
    p->env_set = ns;
    size_t at = 0;
    while (at < p->n_env_set && strcmp(ns[at].name, name) < 0)
        at++;
    memmove(ns + at + 1, ns + at, (p->n_env_set - at) * sizeof *ns);
    ns[at].name = TAKE_PTR(n);
    ns[at].value = TAKE_PTR(v);
    p->n_env_set++;
    return 0;
}
