/*
 * egress/decide.c: the gateway's verdicts (see decide.h). Pure.
 */
#include "egress/decide.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int refused(struct decision *d, int status, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refused(struct decision *d, int status, const char *rule, const char *fmt, ...)
{
    d->allowed = false;
    d->ask = false;
    d->inspect = false;
    d->status = status;
    if (rule != d->rule) /* set_rule() may have written it already */
        snprintf(d->rule, sizeof d->rule, "%s", rule);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->reason, sizeof d->reason, fmt, ap);
    va_end(ap);
    return -1;
}

static int allowed(struct decision *d)
{
    d->allowed = true;
    d->ask = false;
    d->inspect = false;
    d->status = 200;
    d->reason[0] = '\0';
    return 0;
}

/* "deny:10.0.0.0/8", "allow:api.example.com". */
static void set_rule(struct decision *d, const char *kind, const struct egress_rule *r)
{
    char text[EGRESS_RULE_TEXT_MAX];
    egress_rule_format(r, text, sizeof text);
    snprintf(d->rule, sizeof d->rule, "%s:%s", kind, text);
}

static const struct egress_rule *match_host(const struct egress_rule *rules, size_t n,
                                            const struct host *h, uint16_t port)
{
    for (size_t i = 0; i < n; i++)
        if (egress_rule_matches_host(&rules[i], h, port))
            return &rules[i];
    return NULL;
}

/* The first rule of RULES covering T's request whole: destination, method and path. */
static const struct egress_rule *match_request(const struct egress_rule *rules, size_t n,
                                               const struct target *t)
{
    for (size_t i = 0; i < n; i++)
        if (egress_rule_matches_host(&rules[i], &t->host, t->port) &&
            egress_rule_matches_request(&rules[i], t->method, t->path) &&
            !(rules[i].methods && t->method_override))
            return &rules[i];
    return NULL;
}

/* Are the rules of RULES that cover T's destination all request rules? */
static bool only_request_rules(const struct egress_rule *rules, size_t n, const struct target *t)
{
    for (size_t i = 0; i < n; i++)
        if (egress_rule_matches_host(&rules[i], &t->host, t->port) &&
            !egress_rule_is_request_rule(&rules[i]))
            return false;
    return true;
}

static int refuse_method(struct decision *d, const struct target *t)
{
    size_t plen = strcspn(t->path, "?#");
    return refused(d, 403, "method_not_allowed",
                   "%s %s:%u%.*s is not allowed: the rules for %s "
                   "hold its requests to certain methods and paths",
                   t->method, t->host_text, t->port, (int)(plen > 80 ? 80 : plen), t->path,
                   t->host_text);
}

static const struct egress_rule *match_addr(const struct egress_rule *rules, size_t n,
                                            const struct ip_addr *a, uint16_t port)
{
    for (size_t i = 0; i < n; i++)
        if (egress_rule_matches_addr(&rules[i], a, port))
            return &rules[i];
    return NULL;
}

bool decide_tunnel_port(unsigned port)
{
    return port != 80;
}

int decide_target(const struct http_request *req, struct target *t, struct decision *d)
{
    *d = (struct decision){ 0 };
    char why[200];
    char target[4200];
    if (req->target_len >= sizeof target) {
        snprintf(t->host_text, sizeof t->host_text, "-");
        return refused(d, 414, "bad_request", "request target longer than %zu bytes",
                       sizeof target - 1);
    }
    snprintf(target, sizeof target, "%.*s", (int)req->target_len, req->target);

    if (req->kind == HTTP_TARGET_AUTHORITY) {
        struct authority a = { 0 };
        if (authority_parse(target, strlen(target), &a, why, sizeof why) < 0 || !a.port ||
            a.has_userinfo) {
            snprintf(t->host_text, sizeof t->host_text, "%.255s", target);
            return refused(d, 400, "bad_request", "bad CONNECT target: %s",
                           a.port ? why : "no port");
        }
        t->is_connect = true;
        t->host = a.host;
        t->port = a.port;
        if (!decide_tunnel_port(t->port)) {
            snprintf(t->host_text, sizeof t->host_text, "%.255s", target);
            return refused(d, 403, "connect_port",
                           "CONNECT to port 80 is refused: send "
                           "http:// requests as absolute URIs");
        }
    } else if (req->kind == HTTP_TARGET_ABSOLUTE) {
        struct url u;
        if (url_parse(target, &u, why, sizeof why) < 0) {
            snprintf(t->host_text, sizeof t->host_text, "%.255s", target);
            return refused(d, 400, "bad_request", "bad URL: %s", why);
        }
        if (u.https) {
            snprintf(t->host_text, sizeof t->host_text, "%.255s", target);
            return refused(d, 400, "bad_request", "https URLs go through CONNECT");
        }
        t->host = u.authority.host;
        t->port = u.port;
        snprintf(t->method, sizeof t->method, "%s", req->method);
        snprintf(t->path, sizeof t->path, "%s", u.path);
    } else {
        return refused(d, 400, "bad_request", "not a proxy request (origin-form target)");
    }
    if (t->host.is_ip)
        ip_addr_format(&t->host.ip, t->host_text, sizeof t->host_text);
    else
        snprintf(t->host_text, sizeof t->host_text, "%s", t->host.name);
    return allowed(d);
}

void budget_init(struct budget *b, const struct gateway_config *cfg, uint64_t now_us)
{
    *b = (struct budget){ .tokens = (double)cfg->request_rate, .tokens_at_us = now_us };
}

static bool take_token(const struct gateway_config *cfg, struct budget *b, uint64_t now_us)
{
    uint64_t rate = cfg->request_rate;
    if (!rate)
        return true;
    b->tokens += (double)(now_us - b->tokens_at_us) / 1e6 * (double)rate;
    if (b->tokens > (double)rate)
        b->tokens = (double)rate;
    b->tokens_at_us = now_us;
    if (b->tokens < 1.0)
        return false;
    b->tokens -= 1.0;
    return true;
}

int decide_request(const struct gateway_config *cfg, struct budget *b, const struct target *t,
                   uint64_t now_us, struct decision *d)
{
    *d = (struct decision){ 0 };
    const struct egress_rules *r = &cfg->rules;
    if (cfg->max_requests && b->requests >= cfg->max_requests)
        return refused(d, 429, "budget:requests", "request budget of %llu exhausted",
                       (unsigned long long)cfg->max_requests);
    if (!take_token(cfg, b, now_us))
        return refused(d, 429, "budget:request_rate", "more than %llu requests per second",
                       (unsigned long long)cfg->request_rate);
    if (cfg->max_bytes && b->bytes >= cfg->max_bytes)
        return refused(d, 429, "budget:bytes", "byte budget exhausted");
    b->requests++;

    const struct egress_rule *deny = match_host(r->deny, r->n_deny, &t->host, t->port);
    if (deny) {
        set_rule(d, "deny", deny);
        return refused(d, 403, d->rule, "%s:%u is on the denylist", t->host_text, t->port);
    }
    /*
     * Names are allowed by name rules, addresses by address rules: a name
     * is never looked up to see whether it lands in an allowed range, or
     * the sandbox could make the gateway send DNS queries for any name it
     * likes (a channel out).
     */
    const struct egress_rule *allow = match_host(r->allow, r->n_allow, &t->host, t->port);
    if (allow && t->method[0]) {
        /* A plain request: decided whole, method and path. */
        const struct egress_rule *whole = match_request(r->allow, r->n_allow, t);
        if (!whole)
            return refuse_method(d, t);
        set_rule(d, "allow", whole);
        return allowed(d);
    }
    if (allow) {
        set_rule(d, "allow", allow);
        allowed(d);
        d->inspect = only_request_rules(r->allow, r->n_allow, t);
        return 0;
    }
    /* Not allowed, but the policy lets the decider allow it: the gateway
     * asks once the addresses passed (so an address class is never asked). */
    const struct egress_rule *ask = match_host(r->ask, r->n_ask, &t->host, t->port);
    if (!ask)
        return refused(d, 403, "not_allowed", "%s:%u is not on the allowlist", t->host_text,
                       t->port);
    set_rule(d, "ask", ask);
    allowed(d);
    d->ask = true;
    return 0;
}

int decide_literal(const struct gateway_config *cfg, const struct target *t, struct decision *d)
{
    *d = (struct decision){ 0 };
    const struct egress_rules *r = &cfg->rules;
    const struct egress_rule *deny = match_host(r->deny, r->n_deny, &t->host, t->port);
    if (deny) {
        set_rule(d, "deny", deny);
        return refused(d, 403, d->rule, "%s:%u is on the denylist", t->host_text, t->port);
    }
    if (!match_host(r->allow, r->n_allow, &t->host, t->port) &&
        !match_host(r->ask, r->n_ask, &t->host, t->port))
        return refused(d, 403, "not_allowed", "%s:%u is not on the allowlist", t->host_text,
                       t->port);
    return decide_addresses(cfg, t, &t->host.ip, 1, d);
}

int decide_inner(const struct gateway_config *cfg, const struct target *t, struct decision *d)
{
    *d = (struct decision){ 0 };
    const struct egress_rule *whole = match_request(cfg->rules.allow, cfg->rules.n_allow, t);
    if (!whole)
        return refuse_method(d, t);
    set_rule(d, "allow", whole);
    return allowed(d);
}

int decide_answer(const struct target *t, enum decider_decision decision, bool failed,
                  const char *reason, struct decision *d)
{
    *d = (struct decision){ 0 };
    if (decision != DECIDER_DENY && !failed) {
        snprintf(d->reason, sizeof d->reason, "allowed by the decider%s",
                 decision == DECIDER_ALLOW_ONCE ? " once" : " for the run");
        d->allowed = true;
        d->ask = false;
        d->status = 200;
        return 0;
    }
    const char *rule = !failed               ? "decider_denied"
        : strncmp(reason, "timeout", 7) == 0 ? "decider_timeout"
                                             : "decider_failed";
    return refused(d, 403, rule, "%s:%u was asked of the decider: %s%s", t->host_text, t->port,
                   failed ? "" : "denied: ", reason[0] ? reason : "no reason given");
}

size_t decide_pins(const struct gateway_config *cfg, const char *name, struct ip_addr *addrs,
                   size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < cfg->rules.n_pins && n < max; i++)
        if (strcmp(cfg->rules.pins[i].name, name) == 0)
            addrs[n++] = cfg->rules.pins[i].ip;
    return n;
}

static bool private_allowed(const struct gateway_config *cfg, const struct ip_addr *a)
{
    for (size_t k = 0; k < cfg->rules.n_allow_private; k++)
        if (cidr_contains(&cfg->rules.allow_private[k], a))
            return true;
    return false;
}

int decide_addresses(const struct gateway_config *cfg, const struct target *t,
                     const struct ip_addr *addrs, size_t n, struct decision *d)
{
    *d = (struct decision){ 0 };
    const struct egress_rules *r = &cfg->rules;
    for (size_t i = 0; i < n; i++) {
        const struct ip_addr *a = &addrs[i];
        char text[64];
        ip_addr_format(a, text, sizeof text);
        const struct egress_rule *deny = match_addr(r->deny, r->n_deny, a, t->port);
        if (deny) {
            set_rule(d, "deny", deny);
            return refused(d, 403, d->rule, "%s (%s) is on the denylist", t->host_text, text);
        }
        enum addr_class cls = addr_classify(a);
        if (cls != ADDR_PUBLIC && !private_allowed(cfg, a)) {
            char rule[64];
            snprintf(rule, sizeof rule, "ssrf:%s", addr_class_name(cls));
            return refused(d, 403, rule, "%s resolves to %s, a %s address", t->host_text, text,
                           addr_class_name(cls));
        }
    }
    const struct egress_rule *allow = match_host(r->allow, r->n_allow, &t->host, t->port);
    if (allow)
        set_rule(d, "allow", allow);
    return allowed(d);
}

bool decide_name(const struct gateway_config *cfg, const struct host *name)
{
    const struct egress_rules *r = &cfg->rules;
    const struct egress_rule *lists[] = { r->allow, r->ask };
    size_t counts[] = { r->n_allow, r->n_ask };
    if (name->is_ip)
        return false;
    for (size_t l = 0; l < 2; l++)
        for (size_t i = 0; i < counts[l]; i++) {
            const struct egress_rule *rule = &lists[l][i];
            uint16_t ports[2] = { rule->port ? rule->port : 80, rule->port ? rule->port : 443 };
            for (size_t k = 0; k < 2; k++)
                if (egress_rule_matches_host(rule, name, ports[k]) &&
                    !match_host(r->deny, r->n_deny, name, ports[k]))
                    return true;
        }
    return false;
}

/* HOST[:PORT] as --allow takes it: no port for a lookup or 80 and 443, v6 bracketed. */
static void notice_subject(const char *host, unsigned port, bool dns, char *out, size_t len)
{
    bool v6 = strchr(host, ':') != NULL;
    if (dns || port == 80 || port == 443)
        snprintf(out, len, v6 ? "[%s]" : "%s", host);
    else
        snprintf(out, len, v6 ? "[%s]:%u" : "%s:%u", host, port);
}

/* " --allow-private A/32" when HOST is an address the SSRF rules hold back, else "". */
static void notice_private(const char *host, char *out, size_t len)
{
    struct host h;
    char why[128], text[300];
    out[0] = '\0';
    snprintf(text, sizeof text, strchr(host, ':') ? "[%s]" : "%s", host);
    if (host_parse(text, strlen(text), &h, why, sizeof why) < 0 || !h.is_ip ||
        addr_classify(&h.ip) == ADDR_PUBLIC)
        return;
    ip_addr_format(&h.ip, text, sizeof text);
    snprintf(out, len, " --allow-private %s/%u", text, h.ip.family == AF_INET ? 32u : 128u);
}

void decide_notice(const char *method, const char *host, unsigned port, const char *rule,
                   int status, bool net_none, char *out, size_t len)
{
    char subject[300], priv[90];
    bool dns = strcmp(method, "DNS") == 0;
    notice_subject(host[0] ? host : "?", port, dns, subject, sizeof subject);
    if (status >= 500) {
        /* dns, upstream_*: a failure to get there, which the rules allowed. */
        snprintf(out, len, "egress failed: %s (%s)", subject, rule[0] ? rule : "failed");
    } else if (strcmp(rule, "not_allowed") == 0) {
        notice_private(host, priv, sizeof priv);
        if (net_none)
            snprintf(out, len,
                     "egress refused: %s (no rule: --net none; --allow %s%s %s "
                     "--net gateway)",
                     subject, subject, priv, priv[0] ? "imply" : "implies");
        else
            snprintf(out, len, "egress refused: %s (no rule; --allow %s%s)", subject, subject,
                     priv);
    } else if (strcmp(rule, "method_not_allowed") == 0) {
        snprintf(out, len, "egress refused: %s %s (no rule for %s; --allow '%s %s')", method,
                 subject, method, method, subject);
    } else if (strncmp(rule, "ssrf:", 5) == 0) {
        snprintf(out, len,
                 "egress refused: %s (%s; --allow-private CIDR lets its range "
                 "through)",
                 subject, rule);
    } else {
        snprintf(out, len, "egress refused: %s (%s)", subject, rule[0] ? rule : "refused");
    }
}
