/*
 * policy/policy_tools.c: the tools section, what the MCP broker forwards.
 * Tool names, argument rules and their cross-checks; the loader and the
 * flags reach them through policy_int.h like every other key.
 */
#include "policy/policy_int.h"

#include "common/strv.h"
#include "common/text.h"
#include "common/units.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>

/* MCP names tools with 1-128 of [A-Za-z0-9_.-] (and '/' in the wild). */
#define TOOL_NAME_MAX 128

static int check_tool_name(const char *name, char *why, size_t len)
{
    size_t n = strlen(name);
    if (n == 0 || n > TOOL_NAME_MAX)
        return why_printf(why, len, "\"%s\" is not a tool name (1 to %d characters)", name,
                          TOOL_NAME_MAX);
    for (const char *c = name; *c; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '-' || *c == '.' || *c == '/'))
            return why_printf(
                why, len, "\"%s\" is not a tool name (expected letters, digits, _ - . /)", name);
    return 0;
}

int policy_tools_allow(struct policy *p, const char *name, char *why, size_t len)
{
    if (strcmp(name, "*") != 0 && check_tool_name(name, why, len) < 0)
        return -1;
    return policy_strv_add(&p->tools.allow, &p->tools.n_allow, name);
}

int policy_tools_ask(struct policy *p, const char *name, char *why, size_t len)
{
    if (check_tool_name(name, why, len) < 0)
        return -1;
    return policy_strv_add(&p->tools.ask, &p->tools.n_ask, name);
}

int policy_tools_pin(struct policy *p, const char *text, char *why, size_t len)
{
    const char *eq = strrchr(text, '=');
    char name[TOOL_NAME_MAX + 1];
    if (!eq || (size_t)(eq - text) > TOOL_NAME_MAX)
        return why_printf(why, len, "expected TOOL=SHA256, got \"%s\"", text);
    memcpy(name, text, (size_t)(eq - text));
    name[eq - text] = '\0';
    if (check_tool_name(name, why, len) < 0)
        return -1;
    size_t n = strlen(eq + 1);
    bool hex = n == 64;
    for (size_t i = 0; hex && i < n; i++)
        hex = (eq[1 + i] >= '0' && eq[1 + i] <= '9') || (eq[1 + i] >= 'a' && eq[1 + i] <= 'f');
    if (!hex)
        return why_printf(why, len, "\"%s\": the pin is not a lower-case SHA-256", name);
    for (size_t i = 0; i < p->tools.n_pinned; i++)
        if (!strncmp(p->tools.pinned[i], text, (size_t)(eq - text) + 1) &&
            strcmp(p->tools.pinned[i], text) != 0)
            return why_printf(why, len, "\"%s\" is pinned twice", name);
    return policy_strv_add(&p->tools.pinned, &p->tools.n_pinned, text);
}

bool policy_tool_allowed(const struct policy *p, const char *name)
{
    return strv_contains(p->tools.allow, p->tools.n_allow, "*") ||
        strv_contains(p->tools.allow, p->tools.n_allow, name);
}

bool policy_tool_ask(const struct policy *p, const char *name)
{
    for (size_t i = 0; i < p->tools.n_ask; i++)
        if (!strcmp(p->tools.ask[i], name))
            return true;
    return false;
}

const struct policy_tool_rules *policy_tool_rules(const struct policy *p, const char *name)
{
    for (size_t i = 0; i < p->tools.n_rules; i++)
        if (strcmp(p->tools.rules[i].tool, name) == 0)
            return &p->tools.rules[i];
    return NULL;
}

int policy_arg_rule_add_under(struct policy_arg_rule *r, const char *dir, char *why, size_t len)
{
    if (dir[0] != '/')
        return why_printf(why, len, "\"%s\" is not an absolute path", dir);
    bool dotdot = false;
    _cleanup_free_ char *norm = policy_normalize_path(dir, &dotdot);
    if (!norm)
        return POLICY_ENOMEM;
    if (dotdot)
        return why_printf(why, len, "\"%s\" contains \"..\"", dir);
    return policy_strv_add(&r->under, &r->n_under, norm);
}

int policy_arg_rule_add_deny(struct policy_arg_rule *r, const char *glob, char *why, size_t len)
{
    if (glob[0] == '\0')
        return why_printf(why, len, "expected a glob pattern, got \"\"");
    return policy_strv_add(&r->deny, &r->n_deny, glob);
}

int policy_arg_rule_set_max_length(struct policy_arg_rule *r, const char *text, char *why,
                                   size_t len)
{
    uint64_t v = 0;
    if (parse_count(text, &v, why, len) < 0)
        return -1;
    if (v == 0 || v > (uint64_t)INT64_MAX)
        return why_printf(why, len, "expected a length of at least 1, got \"%s\"", text);
    r->max_length = v;
    return 0;
}

/* Compiled here only to refuse a bad pattern at load time; the broker compiles its own. */
int policy_arg_rule_set_pattern(struct policy_arg_rule *r, const char *re, char *why, size_t len)
{
    int code = 0;
    PCRE2_SIZE at = 0;
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                  &code, &at, NULL);
    if (!c) {
        PCRE2_UCHAR msg[120];
        pcre2_get_error_message(code, msg, sizeof msg);
        return why_printf(why, len, "pattern \"%s\" does not compile at offset %zu: %s", re,
                          (size_t)at, (const char *)msg);
    }
    pcre2_code_free(c);
    char *copy = strdup(re);
    if (!copy)
        return POLICY_ENOMEM;
    free(r->pattern);
    r->pattern = copy;
    return 0;
}

void policy_arg_rule_release(struct policy_arg_rule *r)
{
    free(r->arg);
    policy_strv_free(r->under, r->n_under);
    policy_strv_free(r->deny, r->n_deny);
    free(r->pattern);
    *r = (struct policy_arg_rule){ 0 };
}

/* The rules of TOOL, added in sorted position when missing; NULL when out of memory. */
static struct policy_tool_rules *rules_for(struct policy_tools *t, const char *tool)
{
    size_t at = 0;
    while (at < t->n_rules && strcmp(t->rules[at].tool, tool) < 0)
        at++;
    if (at < t->n_rules && strcmp(t->rules[at].tool, tool) == 0)
        return &t->rules[at];
    struct policy_tool_rules *nr = realloc(t->rules, (t->n_rules + 1) * sizeof *nr);
    if (!nr)
        return NULL;
    t->rules = nr;
    char *copy = strdup(tool);
    if (!copy)
        return NULL;
    memmove(nr + at + 1, nr + at, (t->n_rules - at) * sizeof *nr);
    nr[at] = (struct policy_tool_rules){ .tool = copy };
    t->n_rules++;
    return &nr[at];
}

int policy_add_arg_rule(struct policy *p, const char *tool, const char *arg,
                        struct policy_arg_rule *r, char *why, size_t len)
{
    struct policy_arg_rule own = *r;
    *r = (struct policy_arg_rule){ 0 };
    int rc = 0;
    if (check_tool_name(tool, why, len) < 0) {
        rc = -1;
        goto out;
    }
    if (arg[0] == '\0') {
        rc = why_printf(why, len, "expected an argument name, got \"\"");
        goto out;
    }
    if (!own.n_under && !own.n_deny && !own.max_length && !own.pattern) {
        rc = why_printf(why, len, "an empty rule; give under, deny, max_length or pattern");
        goto out;
    }
    struct policy_tool_rules *tr = rules_for(&p->tools, tool);
    if (!tr) {
        rc = POLICY_ENOMEM;
        goto out;
    }
    size_t at = 0;
    while (at < tr->n_args && strcmp(tr->args[at].arg, arg) < 0)
        at++;
    if (at < tr->n_args && strcmp(tr->args[at].arg, arg) == 0) {
        rc = why_printf(why, len, "argument \"%s\" has two rules", arg);
        goto out;
    }
    struct policy_arg_rule *na = realloc(tr->args, (tr->n_args + 1) * sizeof *na);
    if (!na || !(own.arg = strdup(arg))) {
        if (na)
            tr->args = na;
        rc = POLICY_ENOMEM;
        goto out;
    }
    tr->args = na;
    memmove(na + at + 1, na + at, (tr->n_args - at) * sizeof *na);
    na[at] = own;
    tr->n_args++;
    return 0;
out:
    policy_arg_rule_release(&own);
    return rc;
}

int policy_tools_check(const struct policy *p, char *why, size_t len)
{
    for (size_t i = 0; i < p->tools.n_rules; i++)
        if (!policy_tool_allowed(p, p->tools.rules[i].tool))
            return why_printf(why, len, "rules for \"%s\", which is not in tools.allow",
                              p->tools.rules[i].tool);
    return 0;
}

void policy_tools_release(struct policy_tools *t)
{
    policy_strv_free(t->allow, t->n_allow);
    policy_strv_free(t->ask, t->n_ask);
    policy_strv_free(t->pinned, t->n_pinned);
    t->pinned = NULL;
    t->n_pinned = 0;
    free(t->pins);
    t->ask = NULL;
    t->pins = NULL;
    t->n_ask = 0;
    for (size_t i = 0; i < t->n_rules; i++) {
        free(t->rules[i].tool);
        for (size_t j = 0; j < t->rules[i].n_args; j++)
            policy_arg_rule_release(&t->rules[i].args[j]);
        free(t->rules[i].args);
    }
    free(t->rules);
    t->allow = NULL;
    t->rules = NULL;
    t->n_allow = t->n_rules = 0;
}
