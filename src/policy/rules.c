/*
 * policy/rules.c: allow/deny rules and name pins: parsing, canonical text
 * and matching. Pure; used by the policy (validation) and the gateway.
 */
#include "policy/rules.h"

#include "common/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ":PORT" at the end of SPEC (after a ']' for v6), or none. */
static int split_port(const char *spec, size_t *host_len, uint16_t *port, char *why, size_t len)
{
    const char *colon = strrchr(spec, ':');
    const char *bracket = strrchr(spec, ']');
    *host_len = strlen(spec);
    *port = 0;
    if (spec[0] == '[' && !bracket)
        return why_printf(why, len, "missing ']' in \"%s\"", spec);
    if (!colon || (bracket && colon < bracket))
        return 0;
    if (!bracket && strchr(spec, ':') != colon)
        return why_printf(why, len, "IPv6 addresses need brackets: \"%s\"", spec);
    const char *p = colon + 1;
    if (!*p)
        return why_printf(why, len, "empty port in \"%s\"", spec);
    unsigned long v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9' || (v = v * 10 + (unsigned long)(*p - '0')) > 65535)
            return why_printf(why, len, "bad port in \"%s\" (expected 1 to 65535)", spec);
    }
    if (v == 0)
        return why_printf(why, len, "bad port in \"%s\" (expected 1 to 65535)", spec);
    *port = (uint16_t)v;
    *host_len = (size_t)(colon - spec);
    return 0;
}

int egress_rule_parse(const char *spec, struct egress_rule *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    size_t host_len;
    if (split_port(spec, &host_len, &out->port, why, why_len) < 0)
        return -1;
    char host[300];
    if (host_len == 0 || host_len >= sizeof host)
        return why_printf(why, why_len, "expected HOST[:PORT], got \"%s\"", spec);
    memcpy(host, spec, host_len);
    host[host_len] = '\0';

    if (strchr(host, '/')) {
        /* A CIDR: "10.0.0.0/8" or "[fd00::]/8". */
        char bare[300];
        const char *h = host;
        if (host[0] == '[') {
            const char *close = strchr(host, ']');
            if (!close || close[1] != '/')
                return why_printf(why, why_len, "bad CIDR in \"%s\"", spec);
            if (snprintf(bare, sizeof bare, "%.*s%s", (int)(close - host - 1), host + 1,
                         close + 1) >= (int)sizeof bare)
                return why_printf(why, why_len, "bad CIDR in \"%s\"", spec);
            h = bare;
        }
        char reason[128];
        if (cidr_parse(h, &out->cidr, reason, sizeof reason) < 0) {
            snprintf(why, why_len, "%s", reason);
            return -1;
        }
        out->kind = EGRESS_RULE_CIDR;
        return 0;
    }
    if (strncmp(host, "*.", 2) == 0) {
        struct host h;
        char reason[128];
        if (host_parse(host + 2, strlen(host + 2), &h, reason, sizeof reason) < 0 || h.is_ip)
            return why_printf(why, why_len, "bad wildcard in \"%s\" (expected *.example.com)", spec);
        out->kind = EGRESS_RULE_SUFFIX;
        if (snprintf(out->name, sizeof out->name, ".%s", h.name) >= (int)sizeof out->name)
            return why_printf(why, why_len, "name too long in \"%s\"", spec);
        return 0;
    }
    struct host h;
    char reason[128];
    if (host_parse(host, strlen(host), &h, reason, sizeof reason) < 0) {
        snprintf(why, why_len, "%s", reason);
        return -1;
    }
    if (h.is_ip) {
        out->kind = EGRESS_RULE_IP;
        out->cidr.base = h.ip;
        out->cidr.prefix = h.ip.family == AF_INET ? 32 : 128;
        return 0;
    }
    out->kind = EGRESS_RULE_NAME;
    snprintf(out->name, sizeof out->name, "%s", h.name);
    return 0;
}

void egress_rule_format(const struct egress_rule *r, char *out, size_t size)
{
    char host[300] = "";
    switch (r->kind) {
    case EGRESS_RULE_NAME:
        snprintf(host, sizeof host, "%s", r->name);
        break;
    case EGRESS_RULE_SUFFIX:
        snprintf(host, sizeof host, "*%s", r->name);
        break;
    case EGRESS_RULE_IP:
    case EGRESS_RULE_CIDR:
        ip_addr_format_bracketed(&r->cidr.base, host, sizeof host);
        if (r->kind == EGRESS_RULE_CIDR)
            snprintf(host + strlen(host), sizeof host - strlen(host), "/%u", r->cidr.prefix);
        break;
    }
    if (r->port)
        snprintf(out, size, "%s:%u", host, r->port);
    else
        snprintf(out, size, "%s", host);
}

static bool port_matches(const struct egress_rule *r, uint16_t port)
{
    return r->port ? r->port == port : (port == 80 || port == 443);
}

bool egress_rule_matches_host(const struct egress_rule *r, const struct host *host, uint16_t port)
{
    if (!port_matches(r, port))
        return false;
    if (host->is_ip)
        return egress_rule_matches_addr(r, &host->ip, port);
    switch (r->kind) {
    case EGRESS_RULE_NAME:
        return strcmp(r->name, host->name) == 0;
    case EGRESS_RULE_SUFFIX: {
        size_t n = strlen(host->name), s = strlen(r->name);
        return n > s && strcmp(host->name + n - s, r->name) == 0;
    }
    default:
        return false; /* an address rule never matches a name by its spelling */
    }
}

bool egress_rule_matches_addr(const struct egress_rule *r, const struct ip_addr *a, uint16_t port)
{
    if (!port_matches(r, port))
        return false;
    if (r->kind != EGRESS_RULE_IP && r->kind != EGRESS_RULE_CIDR)
        return false;
    return cidr_contains(&r->cidr, a);
}

int egress_pin_parse(const char *spec, struct egress_pin *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1])
        return why_printf(why, why_len, "expected HOST=IP, got \"%s\"", spec);
    struct host name, ip;
    char reason[128];
    if (host_parse(spec, (size_t)(eq - spec), &name, reason, sizeof reason) < 0 || name.is_ip)
        return why_printf(why, why_len, "expected a host name before '=' in \"%s\"", spec);
    const char *v = eq + 1;
    size_t vlen = strlen(v);
    if (host_parse(v, vlen, &ip, reason, sizeof reason) < 0 || !ip.is_ip)
        return why_printf(why, why_len, "expected an IP address after '=' in \"%s\"", spec);
    snprintf(out->name, sizeof out->name, "%s", name.name);
    out->ip = ip.ip;
    return 0;
}

/* N items of SIZE, and one more zeroed: an empty list is not NULL. */
static void *items_dup(const void *items, size_t n, size_t size)
{
    void *out = calloc(n + 1, size);
    if (out && n)
        memcpy(out, items, n * size);
    return out;
}

int egress_rules_copy(const struct egress_rules *from, struct egress_rules *out)
{
    *out = (struct egress_rules){
        .allow = items_dup(from->allow, from->n_allow, sizeof *from->allow),
        .n_allow = from->n_allow,
        .deny = items_dup(from->deny, from->n_deny, sizeof *from->deny),
        .n_deny = from->n_deny,
        .ask = items_dup(from->ask, from->n_ask, sizeof *from->ask),
        .n_ask = from->n_ask,
        .allow_private = items_dup(from->allow_private, from->n_allow_private,
                                   sizeof *from->allow_private),
        .n_allow_private = from->n_allow_private,
        .pins = items_dup(from->pins, from->n_pins, sizeof *from->pins),
        .n_pins = from->n_pins,
    };
    if (out->allow && out->deny && out->ask && out->allow_private && out->pins)
        return 0;
    egress_rules_release(out);
    return -1;
}

void egress_rules_release(struct egress_rules *r)
{
    free(r->allow);
    free(r->deny);
    free(r->ask);
    free(r->allow_private);
    free(r->pins);
    *r = (struct egress_rules){ 0 };
}

size_t egress_rules_name_ports(const struct egress_rules *r, uint16_t *ports, size_t max)
{
    size_t n = 0;
    const struct egress_rule *lists[] = { r->allow, r->ask };
    size_t counts[] = { r->n_allow, r->n_ask };
    for (size_t l = 0; l < 2; l++)
        for (size_t i = 0; i < counts[l]; i++) {
            const struct egress_rule *rule = &lists[l][i];
            if (rule->kind != EGRESS_RULE_NAME && rule->kind != EGRESS_RULE_SUFFIX)
                continue;
            uint16_t want[2] = { rule->port ? rule->port : 80, rule->port ? 0 : 443 };
            for (size_t w = 0; w < 2 && want[w]; w++) {
                bool seen = false;
                for (size_t j = 0; j < n; j++)
                    seen = seen || ports[j] == want[w];
                if (!seen && n < max)
                    ports[n++] = want[w];
            }
        }
    return n;
}
