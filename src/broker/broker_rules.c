/*
 * broker/broker_rules.c: `cordon mcp wrap`'s policy checks that need no
 * broker state: which methods and notifications pass each way, and the
 * tools' argument rules. Pure: no syscalls.
 */
#include "broker/broker_int.h"

#include "broker/paths.h"
#include "common/text.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdio.h>
#include <string.h>

/* ---- the policy's view of methods ---- */

/* May the client call METHOD at all? */
bool client_method_allowed(const struct policy *p, const char *method)
{
    static const char *const always[] = { "initialize", "ping", "tools/list", "tools/call" };
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        if (!strcmp(method, always[i]))
            return true;
    if (!strncmp(method, "resources/", 10))
        return p->tools.resources;
    if (!strncmp(method, "prompts/", 8))
        return p->tools.prompts;
    if (!strcmp(method, "completion/complete"))
        return p->tools.resources || p->tools.prompts;
    if (!strcmp(method, "logging/setLevel"))
        return p->tools.logging;
    return false;
}

/* May the server ask the client METHOD? */
bool server_request_allowed(const struct policy *p, const char *method)
{
    if (!strcmp(method, "sampling/createMessage"))
        return p->tools.sampling;
    if (!strcmp(method, "elicitation/create"))
        return p->tools.elicitation;
    if (!strcmp(method, "roots/list"))
        return p->tools.roots;
    return false;
}

/* Which notifications pass, in each direction. */
bool notification_allowed(const struct policy *p, const char *method, bool from_server)
{
    if (!strcmp(method, "notifications/cancelled") || !strcmp(method, "notifications/progress"))
        return true;
    if (from_server) {
        if (!strcmp(method, "notifications/tools/list_changed"))
            return true;
        if (!strcmp(method, "notifications/message"))
            return p->tools.logging;
        if (!strncmp(method, "notifications/resources/", 24))
            return p->tools.resources;
        if (!strcmp(method, "notifications/prompts/list_changed"))
            return p->tools.prompts;
        return false;
    }
    if (!strcmp(method, "notifications/initialized"))
        return true;
    if (!strcmp(method, "notifications/roots/list_changed"))
        return p->tools.roots;
    return false;
}

/* ---- argument rules ---- */

/* The whole of S must match RE; a match that runs out of budget is a refusal. */
static int full_match(const char *re, const char *s, char *why, size_t len)
{
    int code = 0;
    PCRE2_SIZE at = 0;
    pcre2_code *c =
        pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &code, &at, NULL);
    if (!c)
        return snprintf(why, len, "pattern \"%s\" does not compile", re), -1;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(c, NULL);
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    int rc = -1;
    if (md && mc) {
        pcre2_set_match_limit(mc, 100000);
        pcre2_set_depth_limit(mc, 1000);
        rc = pcre2_match(c, (PCRE2_SPTR)s, PCRE2_ZERO_TERMINATED, 0, 0, md, mc);
    }
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
    pcre2_code_free(c);
    if (rc >= 0)
        return 0;
    if (rc == PCRE2_ERROR_NOMATCH)
        snprintf(why, len, "does not match pattern \"%s\"", re);
    else
        snprintf(why, len, "cannot be checked against pattern \"%s\"", re);
    return -1;
}

static int check_string(const struct policy_arg_rule *r, const char *s, char *why, size_t len)
{
    char sub[300];
    if (r->max_length && utf8_length(s, strlen(s)) > r->max_length)
        return snprintf(why, len, "arguments.%s: longer than %llu characters", r->arg,
                        (unsigned long long)r->max_length),
               -1;
    if (r->pattern && full_match(r->pattern, s, sub, sizeof sub) < 0)
        return snprintf(why, len, "arguments.%s: %s", r->arg, sub), -1;
    if (r->n_under || r->n_deny) {
        struct path_rule pr = { (const char *const *)r->under, r->n_under,
                                (const char *const *)r->deny, r->n_deny };
        if (path_rule_check(&pr, s, SERVER_CWD, sub, sizeof sub) < 0)
            return snprintf(why, len, "arguments.%s: %s", r->arg, sub), -1;
    }
    return 0;
}

/* The policy's rules for TOOL over ARGS; a list is judged item by item. */
int check_rules(const struct policy *p, const char *tool, const json_t *args, char *rule,
                size_t rule_len, char *why, size_t len)
{
    const struct policy_tool_rules *tr = policy_tool_rules(p, tool);
    for (size_t i = 0; tr && i < tr->n_args; i++) {
        const struct policy_arg_rule *r = &tr->args[i];
        json_t *v = json_object_get(args, r->arg);
        if (!v)
            continue;
        snprintf(rule, rule_len, "rule:%s", r->arg);
        if (json_is_string(v)) {
            TRY(check_string(r, json_string_value(v), why, len));
            continue;
        }
        if (!json_is_array(v))
            return snprintf(why, len, "arguments.%s: expected a string", r->arg), -1;
        size_t k;
        json_t *item;
        json_array_foreach(v, k, item)
        {
            if (!json_is_string(item))
                return snprintf(why, len, "arguments.%s[%zu]: expected a string", r->arg, k), -1;
            TRY(check_string(r, json_string_value(item), why, len));
        }
    }
    return 0;
}
