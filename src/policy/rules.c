/*
 * policy/rules.c: allow/deny rules and name pins: parsing, canonical text
 * and matching. Pure; used by the policy (validation) and the gateway.
 */
#include "policy/rules.h"

#include "common/text.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
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

/* HOST[:PORT] into OUT (whose method and path the caller sets). */
static int parse_destination(const char *spec, struct egress_rule *out, char *why, size_t why_len)
{
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
            return why_printf(why, why_len, "bad wildcard in \"%s\" (expected *.example.com)",
                              spec);
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

static const char *const method_names[EGRESS_METHOD_COUNT] = {
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS",
};

/* "GET,HEAD" into *BITS. */
static int parse_methods(const char *text, size_t len, const char *spec, unsigned *bits, char *why,
                         size_t why_len)
{
    *bits = 0;
    const char *p = text, *end = text + len;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t n = (size_t)((comma ? comma : end) - p);
        int m = -1;
        for (int i = 0; i < EGRESS_METHOD_COUNT; i++)
            if (strlen(method_names[i]) == n && memcmp(method_names[i], p, n) == 0)
                m = i;
        if (m < 0)
            return why_printf(why, why_len,
                              "unknown method \"%.*s\" in \"%s\" (expected GET, "
                              "HEAD, POST, PUT, PATCH, DELETE or OPTIONS)",
                              (int)n, p, spec);
        *bits |= 1u << m;
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

/* The request path characters a rule may name (RFC 3986's pchar and '/', no '%'). */
static bool path_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
        strchr("-._~!$&'()*+,;=:@/", c) != NULL;
}

/*
 * A path that reads one way only: from '/', no empty, "." or ".." segment,
 * nothing escaped that a server could turn into one ('%2e', '%2f', '%5c';
 * '%25', which a server decoding twice makes an escape; '%00'; a '%'
 * without two hex digits), no backslash, no ';' (Tomcat and Spring drop a
 * segment's ";params", so "/pub/..;/admin" is their "/admin"). LEN bytes
 * (the query already cut).
 */
static bool path_plain(const char *p, size_t len)
{
    if (len == 0 || p[0] != '/')
        return false;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '\\' || p[i] == ';')
            return false;
        if (p[i] == '%' &&
            (i + 2 >= len || !isxdigit((unsigned char)p[i + 1]) ||
             !isxdigit((unsigned char)p[i + 2]) || (p[i + 1] == '2' && strchr("eEfF5", p[i + 2])) ||
             (p[i + 1] == '5' && strchr("cC", p[i + 2])) || (p[i + 1] == '0' && p[i + 2] == '0')))
            return false;
        if (p[i] != '/')
            continue;
        size_t seg = i + 1, e = seg;
        while (e < len && p[e] != '/')
            e++;
        size_t n = e - seg;
        if ((n == 0 && e < len) || (n == 1 && p[seg] == '.') ||
            (n == 2 && p[seg] == '.' && p[seg + 1] == '.'))
            return false;
    }
    return true;
}

/* The rule's path, checked and without a trailing slash ("/" alone is no path at all). */
static int parse_path(const char *text, const char *spec, char *out, char *why, size_t why_len)
{
    size_t len = strlen(text);
    if (len > EGRESS_PATH_MAX)
        return why_printf(why, why_len, "path longer than %d bytes in \"%s\"", EGRESS_PATH_MAX,
                          spec);
    for (size_t i = 0; i < len; i++)
        if (!path_char(text[i]))
            return why_printf(why, why_len, "a path may not hold '%c' in \"%s\"", text[i], spec);
    while (len > 1 && text[len - 1] == '/')
        len--;
    if (!path_plain(text, len))
        return why_printf(why, why_len,
                          "bad path in \"%s\" (no empty, \".\" or \"..\" "
                          "segment)",
                          spec);
    for (size_t i = 0; i < len; i++)
        if (text[i] == '*' && (text[i - 1] != '/' || (i + 1 < len && text[i + 1] != '/')))
            return why_printf(why, why_len, "'*' stands for a whole segment only, in \"%s\"", spec);
    if (len > 1)
        memcpy(out, text, len);
    out[len > 1 ? len : 0] = '\0';
    return 0;
}

/*
 * Where DEST's path begins, or NULL: at its first '/', unless that begins a
 * prefix length ("10.0.0.0/8", "[fd00::]/8:443": digits, then the end, a
 * port or the path), then at the next. After a port, a '/' is the path's.
 */
static const char *path_start(const char *dest)
{
    const char *slash = strchr(dest, '/');
    if (!slash)
        return NULL;
    const char *bracket = memchr(dest, ']', (size_t)(slash - dest));
    if (dest[0] == '[' && !bracket)
        return NULL; /* no address yet: its parser says what is wrong */
    const char *colon =
        memchr(bracket ? bracket : dest, ':', (size_t)(slash - (bracket ? bracket : dest)));
    const char *d = slash + 1;
    while (*d >= '0' && *d <= '9' && d - slash <= 3)
        d++;
    if (!colon && d > slash + 1 && (*d == '\0' || *d == ':' || *d == '/'))
        return strchr(slash + 1, '/');
    return slash;
}

int egress_rule_parse(const char *spec, struct egress_rule *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    const char *dest = spec;
    const char *space = strchr(spec, ' ');
    /* Methods are upper case: anything else before a space is a bad host. */
    if (space && strspn(spec, "ABCDEFGHIJKLMNOPQRSTUVWXYZ,") == (size_t)(space - spec)) {
        if (space == spec || space[1] == '\0' || strchr(space + 1, ' '))
            return why_printf(why, why_len,
                              "expected [METHOD,...] HOST[:PORT][/PATH], got "
                              "\"%s\"",
                              spec);
        if (parse_methods(spec, (size_t)(space - spec), spec, &out->methods, why, why_len) < 0)
            return -1;
        dest = space + 1;
    }
    char host[300 + EGRESS_PATH_MAX];
    if (strlen(dest) >= sizeof host)
        return why_printf(why, why_len, "expected HOST[:PORT], got \"%s\"", spec);
    snprintf(host, sizeof host, "%s", dest);
    char *path = (char *)path_start(host);
    if (path) {
        if (parse_path(path, spec, out->path, why, why_len) < 0)
            return -1;
        *path = '\0';
    }
    return parse_destination(host, out, why, why_len);
}

bool egress_rule_is_request_rule(const struct egress_rule *r)
{
    return r->methods || r->path[0];
}

/* Is PATH (LEN bytes) at or below the rule's prefix PREFIX, segment by segment? */
static bool path_under(const char *prefix, const char *path, size_t len)
{
    const char *p = prefix, *q = path, *end = path + len;
    while (*p) {
        /* both at a '/': compare one segment */
        if (*p != '/' || q >= end || *q != '/')
            return false;
        p++;
        q++;
        const char *pe = strchrnul(p, '/');
        const char *qe = q;
        while (qe < end && *qe != '/')
            qe++;
        bool any = pe - p == 1 && *p == '*';
        if (!any && (pe - p != qe - q || memcmp(p, q, (size_t)(pe - p)) != 0))
            return false;
        p = pe;
        q = qe;
    }
    return true;
}

bool egress_rule_matches_request(const struct egress_rule *r, const char *method, const char *path)
{
    if (r->methods) {
        bool known = false;
        for (int i = 0; i < EGRESS_METHOD_COUNT && !known; i++)
            known = (r->methods & (1u << i)) && strcmp(method, method_names[i]) == 0;
        if (!known)
            return false;
    }
    if (!r->path[0])
        return true;
    size_t len = strcspn(path, "?#");
    return path_plain(path, len) && path_under(r->path, path, len);
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
    char methods[64] = "";
    for (int i = 0, o = 0; i < EGRESS_METHOD_COUNT; i++)
        if (r->methods & (1u << i))
            o += snprintf(methods + o, sizeof methods - (size_t)o, "%s%s", o ? "," : "",
                          method_names[i]);
    char port[8] = "";
    if (r->port)
        snprintf(port, sizeof port, ":%u", r->port);
    snprintf(out, size, "%s%s%s%s%s", methods, methods[0] ? " " : "", host, port, r->path);
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
        .allow_private =
            items_dup(from->allow_private, from->n_allow_private, sizeof *from->allow_private),
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

bool egress_rules_admit_addr(const struct egress_rules *r, const struct ip_addr *a, uint16_t port)
{
    for (size_t i = 0; i < r->n_deny; i++)
        if (egress_rule_matches_addr(&r->deny[i], a, port))
            return false;
    bool ruled = false;
    for (size_t i = 0; i < r->n_allow && !ruled; i++)
        ruled = egress_rule_matches_addr(&r->allow[i], a, port);
    for (size_t i = 0; i < r->n_ask && !ruled; i++)
        ruled = egress_rule_matches_addr(&r->ask[i], a, port);
    if (!ruled)
        return false;
    if (addr_classify(a) == ADDR_PUBLIC)
        return true;
    for (size_t i = 0; i < r->n_allow_private; i++)
        if (cidr_contains(&r->allow_private[i], a))
            return true;
    return false;
}

/* Add PORT to PORTS (N of MAX used), once. */
static void add_port(uint16_t *ports, size_t *n, size_t max, uint16_t port)
{
    for (size_t j = 0; j < *n; j++)
        if (ports[j] == port)
            return;
    if (*n < max)
        ports[(*n)++] = port;
}

size_t egress_rules_literal_v4(const struct egress_rules *r, uint32_t *nets, unsigned *prefixes,
                               size_t max, uint16_t *ports, size_t *n, size_t max_ports)
{
    size_t k = 0;
    for (size_t i = 0; i < r->n_allow; i++) {
        const struct egress_rule *x = &r->allow[i];
        if (x->kind != EGRESS_RULE_IP && x->kind != EGRESS_RULE_CIDR)
            continue;
        add_port(ports, n, max_ports, x->port ? x->port : 80);
        if (!x->port)
            add_port(ports, n, max_ports, 443);
        uint32_t v4 = 0;
        memcpy(&v4, x->cidr.base.bytes, 4);
        v4 = ntohl(v4);
        if (x->cidr.base.family != AF_INET || x->cidr.prefix < 8 || (v4 >> 24) == 127 || k == max)
            continue;
        nets[k] = v4;
        prefixes[k++] = x->cidr.prefix;
    }
    return k;
}
