/*
 * policy/policy_net.c: the network section: allow, deny and ask rules,
 * private ranges, pins and nameservers, each kept as its canonical text, and
 * at finalize parsed once into what the gateway enforces. Pure: no syscalls.
 */
#include "policy/policy_int.h"

#include "common/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The rule's canonical text, or a preset's rules (policy_presets.c). */
static int apply_rule(struct policy *p, const char *path, const char *text, char *why, size_t len)
{
    _cleanup_free_ char *t = policy_trimmed(text);
    if (!t)
        return POLICY_ENOMEM;
    return policy_net_add_rule(p, path, t, why, len);
}

static int apply_cidr(struct policy *p, const char *text, char *why, size_t len)
{
    _cleanup_free_ char *t = policy_trimmed(text);
    if (!t)
        return POLICY_ENOMEM;
    /* "[fd00::]/8" as network.allow writes it is the same range as "fd00::/8". */
    size_t n = strlen(t);
    char *close = t[0] == '[' ? strchr(t, ']') : NULL;
    if (close && close[1] == '/') {
        memmove(close, close + 1, n - (size_t)(close - t));
        memmove(t, t + 1, n);
    }
    struct cidr c;
    if (cidr_parse(t, &c, why, len) < 0)
        return -1;
    char addr[64], canon[80];
    ip_addr_format(&c.base, addr, sizeof addr);
    snprintf(canon, sizeof canon, "%s/%u", addr, c.prefix);
    return policy_strv_add(&p->network.allow_private, &p->network.n_allow_private, canon);
}

/* A nameserver the gateway asks instead of the host's resolv.conf. */
static int apply_nameserver(struct policy *p, const char *text, char *why, size_t len)
{
    _cleanup_free_ char *t = policy_trimmed(text);
    if (!t)
        return POLICY_ENOMEM;
    struct authority a;
    if (authority_parse(t, strlen(t), &a, why, len) < 0)
        return -1;
    if (!a.host.is_ip || a.has_userinfo)
        return why_printf(why, len, "expected IP[:PORT] of a nameserver, got \"%s\"", t);
    char addr[64], canon[80];
    ip_addr_format_bracketed(&a.host.ip, addr, sizeof addr);
    snprintf(canon, sizeof canon, "%s:%u", addr, a.port ? (unsigned)a.port : 53u);
    return policy_strv_add(&p->network.dns, &p->network.n_dns, canon);
}

/*
 * Two pins for one name are two addresses for it, as a DNS answer may
 * hold; the gateway checks each like any other answer.
 */
static int apply_pin(struct policy *p, const char *text, char *why, size_t len)
{
    _cleanup_free_ char *t = policy_trimmed(text);
    if (!t)
        return POLICY_ENOMEM;
    struct egress_pin pin;
    if (egress_pin_parse(t, &pin, why, len) < 0)
        return -1;
    /* Bracketed as the parser wants IPv6, so the canonical text parses back. */
    char addr[64], canon[330];
    ip_addr_format_bracketed(&pin.ip, addr, sizeof addr);
    snprintf(canon, sizeof canon, "%s=%s", pin.name, addr);
    return policy_strv_add(&p->network.resolve, &p->network.n_resolve, canon);
}

/* A port of network.expose, as its decimal number. */
static int apply_port(struct policy *p, const char *text, char *why, size_t len)
{
    _cleanup_free_ char *t = policy_trimmed(text);
    if (!t)
        return POLICY_ENOMEM;
    char *end = NULL;
    errno = 0;
    unsigned long port = *t >= '0' && *t <= '9' ? strtoul(t, &end, 10) : 0;
    if (errno || !end || *end || port < 1 || port > 65535)
        return why_printf(why, len, "expected a port from 1 to 65535, got \"%s\"", t);
    char canon[8];
    snprintf(canon, sizeof canon, "%lu", port);
    return policy_strv_add(&p->network.expose, &p->network.n_expose, canon);
}

bool policy_exposes(const struct policy *p, unsigned port)
{
    char text[8];
    snprintf(text, sizeof text, "%u", port);
    for (size_t i = 0; i < p->network.n_expose; i++)
        if (strcmp(p->network.expose[i], text) == 0)
            return true;
    return false;
}

/* One item of network.allow, deny, ask, allow_private, resolve, dns or expose. */
int policy_net_item(struct policy *p, const struct policy_key *k, const char *text, char *why,
                    size_t len)
{
    switch (k->type) {
    case KT_RULES:
        return apply_rule(p, k->path, text, why, len);
    case KT_CIDRS:
        return apply_cidr(p, text, why, len);
    case KT_PINS:
        return apply_pin(p, text, why, len);
    case KT_PORTS:
        return apply_port(p, text, why, len);
    default:
        return apply_nameserver(p, text, why, len);
    }
}

void policy_egress_release(struct policy_egress *e)
{
    egress_rules_release(&e->rules);
    free(e->dns);
    *e = (struct policy_egress){ 0 };
}

/* ---- the parsed network section, built at finalize ---- */

static int parse_rules(char *const *texts, size_t n, struct egress_rule **out, char *why,
                       size_t len)
{
    *out = calloc(n + 1, sizeof **out);
    if (!*out)
        return POLICY_ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (egress_rule_parse(texts[i], &(*out)[i], why, len) < 0)
            return -1;
    return 0;
}

/* The canonical texts the setters stored, parsed once for the gateway. */
int policy_net_build(struct policy *p, char *why, size_t len)
{
    const struct policy_network *n = &p->network;
    struct policy_egress *e = &p->egress;
    struct egress_rules *rules = &e->rules;
    policy_egress_release(e);
    int r = 0;
    for (size_t i = 0; i < p->n_secrets && r == 0; i++) {
        struct policy_secret *s = &p->secrets[i];
        free(s->host_rules);
        r = parse_rules(s->hosts, s->n_hosts, &s->host_rules, why, len);
    }
    if (r < 0 || (r = parse_rules(n->allow, n->n_allow, &rules->allow, why, len)) < 0 ||
        (r = parse_rules(n->deny, n->n_deny, &rules->deny, why, len)) < 0 ||
        (r = parse_rules(n->ask, n->n_ask, &rules->ask, why, len)) < 0)
        return r;
    rules->n_allow = n->n_allow;
    rules->n_deny = n->n_deny;
    rules->n_ask = n->n_ask;
    rules->allow_private = calloc(n->n_allow_private + 1, sizeof *rules->allow_private);
    rules->pins = calloc(n->n_resolve + 1, sizeof *rules->pins);
    e->dns = calloc(n->n_dns + 1, sizeof *e->dns);
    if (!rules->allow_private || !rules->pins || !e->dns)
        return POLICY_ENOMEM;
    for (; rules->n_allow_private < n->n_allow_private; rules->n_allow_private++)
        if (cidr_parse(n->allow_private[rules->n_allow_private],
                       &rules->allow_private[rules->n_allow_private], why, len) < 0)
            return -1;
    for (; rules->n_pins < n->n_resolve; rules->n_pins++)
        if (egress_pin_parse(n->resolve[rules->n_pins], &rules->pins[rules->n_pins], why, len) < 0)
            return -1;
    for (; e->n_dns < n->n_dns; e->n_dns++) {
        const char *t = n->dns[e->n_dns];
        struct authority a;
        if (authority_parse(t, strlen(t), &a, why, len) < 0)
            return -1;
        if (!a.host.is_ip)
            return why_printf(why, len, "nameserver \"%s\" is not an address", t);
        e->dns[e->n_dns] = (struct policy_nameserver){ a.host.ip, a.port ? a.port : 53 };
    }
    return 0;
}
