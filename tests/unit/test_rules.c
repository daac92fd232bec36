/*
 * tests/unit/test_rules.c: the gateway's allow/deny rules and pins: parsing,
 * canonical text, and what each rule matches.
 */
#include "policy/rules.h"
#include "tap.h"

#include <string.h>

static const struct {
    const char *spec;
    const char *canon; /* NULL: refused */
    const char *why;   /* expected reason when refused */
} parse_cases[] = {
    { "api.example.com", "api.example.com", NULL },
    { "API.Example.COM.", "api.example.com", NULL },
    { "api.example.com:8443", "api.example.com:8443", NULL },
    { "*.example.com", "*.example.com", NULL },
    { "*.example.com:443", "*.example.com:443", NULL },
    { "10.0.0.0/8", "10.0.0.0/8", NULL },
    { "10.1.2.3/8:5432", "10.0.0.0/8:5432", NULL },
    { "127.1", "127.0.0.1", NULL },
    { "0x7f.1:80", "127.0.0.1:80", NULL },
    { "[::1]", "[::1]", NULL },
    { "[::1]:80", "[::1]:80", NULL },
    { "[fd00::]/8", "[fd00::]/8", NULL },
    { "::1", NULL, "IPv6 addresses need brackets: \"::1\"" },
    { "api.example.com:0", NULL, "bad port in \"api.example.com:0\" (expected 1 to 65535)" },
    { "api.example.com:65536", NULL,
      "bad port in \"api.example.com:65536\" (expected 1 to 65535)" },
    { "api.example.com:", NULL, "empty port in \"api.example.com:\"" },
    { ":80", NULL, "expected HOST[:PORT], got \":80\"" },
    { "*.10.0.0.1", NULL, "bad wildcard in \"*.10.0.0.1\" (expected *.example.com)" },
    { "[fd00::/8", NULL, "missing ']' in \"[fd00::/8\"" },
    { "[fd00::]x/8", NULL, "bad CIDR in \"[fd00::]x/8\"" },
    /* request rules: methods, a path prefix */
    { "GET,HEAD registry.npmjs.org", "GET,HEAD registry.npmjs.org", NULL },
    { "HEAD,GET,GET registry.npmjs.org/", "GET,HEAD registry.npmjs.org", NULL },
    { "POST registry.npmjs.org/-/npm/v1/security/", "POST registry.npmjs.org/-/npm/v1/security",
      NULL },
    { "registry.npmjs.org:8443/a/b", "registry.npmjs.org:8443/a/b", NULL },
    { "POST github.com/*/*/git-upload-pack", "POST github.com/*/*/git-upload-pack", NULL },
    { "GET 10.0.0.0/8:80/health", "GET 10.0.0.0/8:80/health", NULL },
    { "GET 10.1.2.3/health", "GET 10.1.2.3/health", NULL },
    { "10.1.2.3/8/api", "10.0.0.0/8/api", NULL },
    { "GET [::1]:8080/x", "GET [::1]:8080/x", NULL },
    { "GET [fd00::]/8/x", "GET [fd00::]/8/x", NULL },
    { "GETS example.com", NULL,
      "unknown method \"GETS\" in \"GETS example.com\" (expected GET, "
      "HEAD, POST, PUT, PATCH, DELETE or OPTIONS)" },
    { "get example.com", NULL, "control character or space in host \"get example.com\"" },
    { "GET, HEAD example.com", NULL,
      "expected [METHOD,...] HOST[:PORT][/PATH], got \"GET, HEAD example.com\"" },
    { "TRACE example.com", NULL,
      "unknown method \"TRACE\" in \"TRACE example.com\" (expected "
      "GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS)" },
    { "GET example.com/a/../b", NULL,
      "bad path in \"GET example.com/a/../b\" (no empty, \".\" or \"..\" segment)" },
    { "GET example.com/a//b", NULL,
      "bad path in \"GET example.com/a//b\" (no empty, \".\" or \"..\" segment)" },
    { "GET example.com/a%2fb", NULL, "a path may not hold '%' in \"GET example.com/a%2fb\"" },
    { "GET example.com/a?b", NULL, "a path may not hold '?' in \"GET example.com/a?b\"" },
    { "GET example.com/a*", NULL,
      "'*' stands for a whole segment only, in \"GET "
      "example.com/a*\"" },
};

static const struct {
    const char *rule, *method, *path;
    int matches;
} request_cases[] = {
    { "GET,HEAD registry.npmjs.org", "GET", "/is-number", 1 },
    { "GET,HEAD registry.npmjs.org", "HEAD", "/", 1 },
    { "GET,HEAD registry.npmjs.org", "PUT", "/is-number", 0 },
    { "GET,HEAD registry.npmjs.org", "get", "/is-number", 0 }, /* methods are exact */
    { "registry.npmjs.org", "PUT", "/is-number", 1 },          /* no methods: any */
    { "POST registry.npmjs.org/-/npm/v1/security", "POST", "/-/npm/v1/security/advisories/bulk",
      1 },
    { "POST registry.npmjs.org/-/npm/v1/security", "POST", "/-/npm/v1/security", 1 },
    { "POST registry.npmjs.org/-/npm/v1/security", "POST", "/-/npm/v1/security?x=1", 1 },
    { "POST registry.npmjs.org/-/npm/v1/security", "POST", "/-/npm/v1/securityx", 0 },
    { "POST registry.npmjs.org/-/npm/v1/security", "POST", "/-/npm/v1", 0 },
    { "POST registry.npmjs.org/-/npm/v1/security", "POST", "/-/npm/v1/security/../../../x", 0 },
    { "POST registry.npmjs.org/-/npm/v1/security", "POST", "/-/npm/v1/security/%2e%2e/x", 0 },
    { "POST registry.npmjs.org/-/npm/v1/security", "POST", "/-/npm/v1/security/..%2F..", 0 },
    { "POST registry.npmjs.org/-/npm/v1/security", "POST", "/-/npm//v1/security/x", 0 },
    { "POST registry.npmjs.org/-/npm/v1/security", "POST", "/-/npm/v1/security\\..\\x", 0 },
    { "POST registry.npmjs.org/-/npm/v1/security", "POST", "*", 0 },
    /* what some server turns into a step up: ";params" dropped, an escape decoded twice */
    { "GET example.com/pub", "GET", "/pub/..;/admin", 0 },
    { "GET example.com/pub", "GET", "/pub/x;jsessionid=1", 0 },
    { "GET example.com/pub", "GET", "/pub/%252e%252e/admin", 0 },
    { "GET example.com/pub", "GET", "/pub/%00/x", 0 },
    { "GET example.com/pub", "GET", "/pub/%u002e%u002e/admin", 0 },
    { "GET example.com/pub", "GET", "/pub/a%2", 0 },
    { "GET example.com/pub", "GET", "/pub/a%20b", 1 },
    { "POST github.com/*/*/git-upload-pack", "POST", "/org/repo.git/git-upload-pack", 1 },
    { "POST github.com/*/*/git-upload-pack", "POST", "/org/repo.git/git-receive-pack", 0 },
    { "POST github.com/*/*/git-upload-pack", "POST", "/org/git-upload-pack", 0 },
    { "GET example.com/a", "GET", "/a/b/c?d=/e", 1 },
    { "GET example.com/a", "GET", "/b?x=/a", 0 },
};

struct match_case {
    const char *rule;
    const char *host; /* as a client names it */
    unsigned port;
    int matches;
};

static const struct match_case match_cases[] = {
    { "api.example.com", "api.example.com", 443, 1 },
    { "api.example.com", "api.example.com", 80, 1 },
    { "api.example.com", "api.example.com", 8080, 0 }, /* default ports only */
    { "api.example.com:8080", "api.example.com", 8080, 1 },
    { "api.example.com:8080", "api.example.com", 443, 0 },
    { "api.example.com", "x.api.example.com", 443, 0 }, /* exact means exact */
    { "*.example.com", "api.example.com", 443, 1 },
    { "*.example.com", "a.b.example.com", 443, 1 },
    { "*.example.com", "example.com", 443, 0 }, /* strictly below */
    { "*.example.com", "badexample.com", 443, 0 },
    { "10.0.0.0/8", "10.9.8.7", 80, 1 },
    { "10.0.0.0/8", "11.0.0.1", 80, 0 },
    { "10.0.0.0/8", "ten.example", 80, 0 }, /* names never match addresses */
    { "127.0.0.1", "2130706433", 80, 1 },   /* any spelling of the address */
    { "127.0.0.1", "[::ffff:127.0.0.1]", 80, 1 },
    { "[::1]", "[::1]", 443, 1 },
};

int main(void)
{
    for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
        struct egress_rule r;
        char why[200] = "", canon[EGRESS_RULE_TEXT_MAX] = "";
        int rc = egress_rule_parse(parse_cases[i].spec, &r, why, sizeof why);
        if (parse_cases[i].canon) {
            ok(rc == 0, "parse %s", parse_cases[i].spec);
            egress_rule_format(&r, canon, sizeof canon);
            is_str(canon, parse_cases[i].canon, parse_cases[i].spec);
        } else {
            ok(rc < 0, "refuse %s", parse_cases[i].spec);
            is_str(why, parse_cases[i].why, parse_cases[i].spec);
        }
    }
    for (size_t i = 0; i < sizeof match_cases / sizeof match_cases[0]; i++) {
        const struct match_case *m = &match_cases[i];
        struct egress_rule r;
        struct host h;
        char why[200];
        ok(egress_rule_parse(m->rule, &r, why, sizeof why) == 0 &&
               host_parse(m->host, strlen(m->host), &h, why, sizeof why) == 0 &&
               egress_rule_matches_host(&r, &h, (uint16_t)m->port) == m->matches,
           "%s %s %s:%u", m->rule, m->matches ? "matches" : "does not match", m->host, m->port);
    }

    for (size_t i = 0; i < sizeof request_cases / sizeof request_cases[0]; i++) {
        struct egress_rule r;
        char why[200];
        ok(egress_rule_parse(request_cases[i].rule, &r, why, sizeof why) == 0 &&
               egress_rule_matches_request(&r, request_cases[i].method, request_cases[i].path) ==
                   request_cases[i].matches,
           "%s %s %s %s", request_cases[i].rule,
           request_cases[i].matches ? "lets through" : "holds back", request_cases[i].method,
           tap_show(request_cases[i].path));
    }
    struct egress_rule rr;
    char reason[200];
    ok(egress_rule_parse("GET example.com/a", &rr, reason, sizeof reason) == 0 &&
           egress_rule_is_request_rule(&rr) && rr.port == 0 && strcmp(rr.name, "example.com") == 0,
       "a request rule is still a rule for its host");
    ok(egress_rule_parse("example.com/", &rr, reason, sizeof reason) == 0 &&
           !egress_rule_is_request_rule(&rr),
       "a path of / is no path");

    struct egress_pin pin;
    char why[200] = "";
    ok(egress_pin_parse("api.example.com=127.0.0.2", &pin, why, sizeof why) == 0 &&
           strcmp(pin.name, "api.example.com") == 0 && pin.ip.family == AF_INET,
       "pin parses");
    ok(egress_pin_parse("api.example.com=[::1]", &pin, why, sizeof why) == 0 &&
           pin.ip.family == AF_INET6,
       "IPv6 pin parses");
    ok(egress_pin_parse("api.example.com:127.0.0.2", &pin, why, sizeof why) < 0, "pin needs =");
    is_str(why, "expected HOST=IP, got \"api.example.com:127.0.0.2\"", "pin reason");
    ok(egress_pin_parse("1.2.3.4=127.0.0.2", &pin, why, sizeof why) < 0, "pin needs a name");
    ok(egress_pin_parse("a.example=b.example", &pin, why, sizeof why) < 0, "pin needs an IP");
    return done_testing();
}
