/*
 * tests/unit/test_decide.c: the gateway's verdicts without the gateway:
 * targets, allow and deny rules by name and by address, ports, the SSRF
 * address classes, pins and budgets. Built from the decision's own sources
 * only (meson.build): no libevent, no sockets.
 */
#include "egress/decide.h"
#include "tap.h"

#include <stdio.h>
#include <string.h>

/* The policy every case below runs against. */
static const char *const allow_texts[] = {
    "api.example.com",
    "*.example.org",
    "10.0.0.0/8:5432",
    "[2001:db8::1]:8080",
};
static const char *const deny_texts[] = { "bad.example.org", "10.9.0.0/16", "10.8.0.0/16:5432" };
static const char *const private_texts[] = { "127.0.0.2/32" };
static const char *const pin_texts[] = {
    "pinned.example.org=127.0.0.2",
    "pinned.example.org=[2001:db8::2]",
    "other.example.org=5.6.7.8",
};
#define N(a) (sizeof a / sizeof a[0])

static struct egress_rule allow[N(allow_texts)], deny[N(deny_texts)];
static struct cidr private_ranges[N(private_texts)];
static struct egress_pin pins[N(pin_texts)];

static struct gateway_config config(void)
{
    return (struct gateway_config){
        .rules = {
            .allow = allow, .n_allow = N(allow), .deny = deny, .n_deny = N(deny),
            .allow_private = private_ranges, .n_allow_private = N(private_ranges),
            .pins = pins, .n_pins = N(pins),
        },
    };
}

static int setup(void)
{
    char why[200];
    for (size_t i = 0; i < N(allow); i++)
        if (egress_rule_parse(allow_texts[i], &allow[i], why, sizeof why) < 0)
            return ok(0, "allow rule %s: %s", allow_texts[i], why), -1;
    for (size_t i = 0; i < N(deny); i++)
        if (egress_rule_parse(deny_texts[i], &deny[i], why, sizeof why) < 0)
            return ok(0, "deny rule %s: %s", deny_texts[i], why), -1;
    for (size_t i = 0; i < N(private_ranges); i++)
        if (cidr_parse(private_texts[i], &private_ranges[i], why, sizeof why) < 0)
            return ok(0, "range %s: %s", private_texts[i], why), -1;
    for (size_t i = 0; i < N(pins); i++)
        if (egress_pin_parse(pin_texts[i], &pins[i], why, sizeof why) < 0)
            return ok(0, "pin %s: %s", pin_texts[i], why), -1;
    return 0;
}

/* A target as decide_target() reads it from a request line. */
static int target_of(enum http_target_kind kind, const char *text, struct target *t,
                     struct decision *d)
{
    struct http_request req = { .kind = kind, .target = text, .target_len = strlen(text) };
    *t = (struct target){ 0 };
    return decide_target(&req, t, d);
}

static const struct {
    enum http_target_kind kind;
    const char *target;
    int status; /* 0: read */
    const char *rule;
    const char *reason;
    const char *host; /* host_text, also when refused */
    unsigned port;
    const char *path;
} target_cases[] = {
    { HTTP_TARGET_ABSOLUTE, "http://api.example.com/v1?q=1#frag", 0, NULL, NULL, "api.example.com",
      80, "/v1?q=1" },
    { HTTP_TARGET_ABSOLUTE, "http://API.example.com.:8080", 0, NULL, NULL, "api.example.com", 8080,
      "/" },
    { HTTP_TARGET_ABSOLUTE, "http://0x7f.1/", 0, NULL, NULL, "127.0.0.1", 80, "/" },
    { HTTP_TARGET_ABSOLUTE, "https://api.example.com/", 400, "bad_request",
      "https URLs go through CONNECT", "https://api.example.com/", 0, "" },
    { HTTP_TARGET_ABSOLUTE, "ftp://api.example.com/", 400, "bad_request", NULL,
      "ftp://api.example.com/", 0, "" },
    { HTTP_TARGET_AUTHORITY, "api.example.com:443", 0, NULL, NULL, "api.example.com", 443, "" },
    { HTTP_TARGET_AUTHORITY, "[2001:db8::1]:8080", 0, NULL, NULL, "2001:db8::1", 8080, "" },
    { HTTP_TARGET_AUTHORITY, "api.example.com:80", 403, "connect_port",
      "CONNECT to port 80 is refused: send http:// requests as absolute URIs", "api.example.com:80",
      80, "" },
    { HTTP_TARGET_AUTHORITY, "api.example.com", 400, "bad_request", "bad CONNECT target: no port",
      "api.example.com", 0, "" },
    { HTTP_TARGET_AUTHORITY, "user@api.example.com:443", 400, "bad_request", NULL,
      "user@api.example.com:443", 0, "" },
    { HTTP_TARGET_ORIGIN, "/index.html", 400, "bad_request",
      "not a proxy request (origin-form target)", "", 0, "" },
};

static void test_targets(void)
{
    for (size_t i = 0; i < N(target_cases); i++) {
        const __typeof__(target_cases[0]) *tc = &target_cases[i];
        struct target t;
        struct decision d;
        int r = target_of(tc->kind, tc->target, &t, &d);
        char name[300];
        snprintf(name, sizeof name, "target %s", tc->target);
        if (!tc->status) {
            ok(r == 0 && d.allowed, "%s is read", name);
            ok(t.is_connect == (tc->kind == HTTP_TARGET_AUTHORITY), "%s: CONNECT or not", name);
            ok(t.port == tc->port, "%s: port %u (got %u)", name, tc->port, t.port);
            is_str(t.path, tc->path, name);
        } else {
            ok(r == -1 && !d.allowed && d.status == tc->status, "%s refused with %d (got %d)", name,
               tc->status, d.status);
            is_str(d.rule, tc->rule, name);
            if (tc->reason)
                is_str(d.reason, tc->reason, name);
        }
        is_str(t.host_text, tc->host, name);
    }
    /* Longer than any target the gateway keeps: 414, not a truncated host. */
    static char longer[5000];
    memcpy(longer, "http://a.example.org/", 21);
    memset(longer + 21, 'x', sizeof longer - 22);
    struct target t;
    struct decision d;
    ok(target_of(HTTP_TARGET_ABSOLUTE, longer, &t, &d) == -1 && d.status == 414,
       "an over-long target is 414");
    is_str(d.reason, "request target longer than 4199 bytes", "the 414 says the limit");
}

static const struct {
    const char *target; /* CONNECT authority */
    int allowed;
    const char *rule;
    const char *reason; /* when refused */
} request_cases[] = {
    { "api.example.com:443", 1, "allow:api.example.com", NULL },
    { "API.EXAMPLE.COM:443", 1, "allow:api.example.com", NULL },
    { "api.example.com:8443", 0, "not_allowed", "api.example.com:8443 is not on the allowlist" },
    { "x.api.example.com:443", 0, "not_allowed", "x.api.example.com:443 is not on the allowlist" },
    { "a.example.org:443", 1, "allow:*.example.org", NULL },
    { "a.b.example.org:443", 1, "allow:*.example.org", NULL },
    { "example.org:443", 0, "not_allowed", "example.org:443 is not on the allowlist" },
    { "bad.example.org:443", 0, "deny:bad.example.org", "bad.example.org:443 is on the denylist" },
    { "10.1.2.3:5432", 1, "allow:10.0.0.0/8:5432", NULL },
    { "10.1.2.3:443", 0, "not_allowed", "10.1.2.3:443 is not on the allowlist" },
    { "0x0a.1.2.3:5432", 1, "allow:10.0.0.0/8:5432", NULL },
    { "10.8.1.1:5432", 0, "deny:10.8.0.0/16:5432", "10.8.1.1:5432 is on the denylist" },
    /* A rule without a port, deny as allow, covers the default ports only. */
    { "10.9.1.1:5432", 1, "allow:10.0.0.0/8:5432", NULL },
    { "[2001:db8::1]:8080", 1, "allow:[2001:db8::1]:8080", NULL },
    { "[2001:db8::1]:443", 0, "not_allowed", "2001:db8::1:443 is not on the allowlist" },
    /* A name is never looked up to see whether it lands in an allowed range. */
    { "db.internal:5432", 0, "not_allowed", "db.internal:5432 is not on the allowlist" },
};

static void test_rules(void)
{
    struct gateway_config cfg = config();
    for (size_t i = 0; i < N(request_cases); i++) {
        struct target t;
        struct decision d;
        struct budget b;
        budget_init(&b, &cfg, 0);
        if (!ok(target_of(HTTP_TARGET_AUTHORITY, request_cases[i].target, &t, &d) == 0,
                "%s is a target", request_cases[i].target))
            continue;
        int r = decide_request(&cfg, &b, &t, 0, &d);
        ok((r == 0) == request_cases[i].allowed && d.allowed == request_cases[i].allowed,
           "%s is %s", request_cases[i].target, request_cases[i].allowed ? "allowed" : "refused");
        is_str(d.rule, request_cases[i].rule, request_cases[i].target);
        if (!request_cases[i].allowed) {
            ok(d.status == 403, "%s: 403", request_cases[i].target);
            is_str(d.reason, request_cases[i].reason, request_cases[i].target);
        }
    }
}

static const struct {
    const char *target;
    const char *addrs[3]; /* what the name resolved to */
    const char *rule;     /* allow:... or the refusal's */
    const char *reason;   /* when refused */
} address_cases[] = {
    { "api.example.com:443", { "93.184.216.34" }, "allow:api.example.com", NULL },
    { "api.example.com:443",
      { "127.0.0.1" },
      "ssrf:loopback",
      "api.example.com resolves to 127.0.0.1, a loopback address" },
    { "api.example.com:443", { "::ffff:127.0.0.1" }, "ssrf:loopback", NULL },
    { "api.example.com:443", { "169.254.169.254" }, "ssrf:link_local", NULL },
    { "api.example.com:443", { "192.168.1.1" }, "ssrf:private", NULL },
    { "api.example.com:443", { "100.64.0.1" }, "ssrf:cgnat", NULL },
    { "api.example.com:443", { "0.0.0.0" }, "ssrf:unspecified", NULL },
    { "api.example.com:443", { "fd00::1" }, "ssrf:ula", NULL },
    { "api.example.com:443", { "fe80::1" }, "ssrf:link_local", NULL },
    { "api.example.com:443", { "64:ff9b::a9fe:a9fe" }, "ssrf:link_local", NULL },
    { "api.example.com:443", { "224.0.0.1" }, "ssrf:multicast", NULL },
    /* One bad address refuses the lot: a mixed answer cannot reach inside. */
    { "api.example.com:443",
      { "93.184.216.34", "10.0.0.1" },
      "ssrf:private",
      "api.example.com resolves to 10.0.0.1, a private address" },
    /* network.allow_private lets exactly its range through. */
    { "api.example.com:443", { "127.0.0.2" }, "allow:api.example.com", NULL },
    { "api.example.com:443", { "127.0.0.3" }, "ssrf:loopback", NULL },
    /* The denylist by address, before the classes. */
    { "a.example.org:443",
      { "93.184.216.34", "10.9.1.1" },
      "deny:10.9.0.0/16",
      "a.example.org (10.9.1.1) is on the denylist" },
    /* An address rule is no exception to the classes. */
    { "10.1.2.3:5432", { "10.1.2.3" }, "ssrf:private", NULL },
};

static void test_addresses(void)
{
    struct gateway_config cfg = config();
    for (size_t i = 0; i < N(address_cases); i++) {
        char name[200];
        snprintf(name, sizeof name, "%s at %s%s%s", address_cases[i].target,
                 address_cases[i].addrs[0], address_cases[i].addrs[1] ? ", " : "",
                 address_cases[i].addrs[1] ? address_cases[i].addrs[1] : "");
        struct target t;
        struct decision d;
        struct ip_addr addrs[3];
        size_t n = 0;
        char why[200];
        for (; n < 3 && address_cases[i].addrs[n]; n++) {
            struct host h;
            const char *a = address_cases[i].addrs[n];
            char text[80];
            snprintf(text, sizeof text, strchr(a, ':') ? "[%s]" : "%s", a);
            if (host_parse(text, strlen(text), &h, why, sizeof why) < 0 || !h.is_ip)
                break;
            addrs[n] = h.ip;
        }
        if (!ok(target_of(HTTP_TARGET_AUTHORITY, address_cases[i].target, &t, &d) == 0 && n > 0 &&
                    !address_cases[i].addrs[n],
                "%s: set up", name))
            continue;
        int r = decide_addresses(&cfg, &t, addrs, n, &d);
        bool want = strncmp(address_cases[i].rule, "allow:", 6) == 0;
        ok((r == 0) == want && d.allowed == want, "%s is %s", name, want ? "allowed" : "refused");
        is_str(d.rule, address_cases[i].rule, name);
        if (!want)
            ok(d.status == 403, "%s: 403", name);
        if (address_cases[i].reason)
            is_str(d.reason, address_cases[i].reason, name);
    }
}

static void test_pins(void)
{
    struct gateway_config cfg = config();
    struct ip_addr got[4];
    char a[64], b[64];
    size_t n = decide_pins(&cfg, "pinned.example.org", got, 4);
    ok(n == 2, "both pins of a name are its addresses (got %zu)", n);
    if (n == 2) {
        ip_addr_format(&got[0], a, sizeof a);
        ip_addr_format(&got[1], b, sizeof b);
        is_str(a, "127.0.0.2", "first pin, in the policy's order");
        is_str(b, "2001:db8::2", "second pin");
    }
    ok(decide_pins(&cfg, "pinned.example.org", got, 1) == 1, "no more than MAX addresses");
    ok(decide_pins(&cfg, "example.org", got, 4) == 0, "a pin names one host, not its parent");
    ok(decide_pins(&cfg, "x.pinned.example.org", got, 4) == 0, "nor a name below it");
    /* A pin decides where a name goes, not whether it may: the classes still apply. */
    struct target t;
    struct decision d;
    n = decide_pins(&cfg, "other.example.org", got, 4);
    ok(n == 1 && target_of(HTTP_TARGET_AUTHORITY, "other.example.org:443", &t, &d) == 0 &&
           decide_addresses(&cfg, &t, got, n, &d) == 0 &&
           strcmp(d.rule, "allow:*.example.org") == 0,
       "a pinned public address passes under its allow rule");
}

/* Decide one CONNECT to TARGET at NOW_US; its status (0 when allowed). */
static int request(const struct gateway_config *cfg, struct budget *b, const char *target,
                   uint64_t now_us, struct decision *d)
{
    struct target t;
    if (target_of(HTTP_TARGET_AUTHORITY, target, &t, d) < 0)
        return -1;
    return decide_request(cfg, b, &t, now_us, d) == 0 ? 0 : d->status;
}

static void test_budgets(void)
{
    struct gateway_config cfg = config();
    struct budget b;
    struct decision d;

    cfg.max_requests = 2;
    budget_init(&b, &cfg, 0);
    ok(request(&cfg, &b, "api.example.com:443", 0, &d) == 0 &&
           request(&cfg, &b, "api.example.com:443", 0, &d) == 0,
       "requests within the budget pass");
    ok(request(&cfg, &b, "api.example.com:443", 0, &d) == 429, "the third of 2 is 429");
    is_str(d.rule, "budget:requests", "request budget rule");
    is_str(d.reason, "request budget of 2 exhausted", "request budget reason");
    ok(b.requests == 2, "a refused request is not counted (got %llu)",
       (unsigned long long)b.requests);

    /* A request the rules refuse has still asked: it counts. */
    cfg.max_requests = 1;
    budget_init(&b, &cfg, 0);
    ok(request(&cfg, &b, "bad.example.org:443", 0, &d) == 403 &&
           request(&cfg, &b, "api.example.com:443", 0, &d) == 429,
       "a denied request uses up the request budget");

    cfg.max_requests = 0;
    cfg.request_rate = 2;
    budget_init(&b, &cfg, 1000000);
    ok(request(&cfg, &b, "api.example.com:443", 1000000, &d) == 0 &&
           request(&cfg, &b, "api.example.com:443", 1000000, &d) == 0,
       "a full bucket holds request_rate requests");
    ok(request(&cfg, &b, "api.example.com:443", 1000000, &d) == 429, "then it is empty");
    is_str(d.rule, "budget:request_rate", "rate rule");
    is_str(d.reason, "more than 2 requests per second", "rate reason");
    ok(request(&cfg, &b, "api.example.com:443", 1400000, &d) == 429,
       "0.4 s later less than one token has come back");
    ok(request(&cfg, &b, "api.example.com:443", 1600000, &d) == 0,
       "0.6 s later (1.2 tokens) one request passes");
    ok(request(&cfg, &b, "api.example.com:443", 60000000, &d) == 0 &&
           request(&cfg, &b, "api.example.com:443", 60000000, &d) == 0 &&
           request(&cfg, &b, "api.example.com:443", 60000000, &d) == 429,
       "an idle minute refills the bucket to request_rate, no more");

    cfg.request_rate = 0;
    cfg.max_bytes = 100;
    budget_init(&b, &cfg, 0);
    b.bytes = 99;
    ok(request(&cfg, &b, "api.example.com:443", 0, &d) == 0, "bytes left: a request passes");
    b.bytes = 100;
    ok(request(&cfg, &b, "api.example.com:443", 0, &d) == 429, "no bytes left: 429");
    is_str(d.rule, "budget:bytes", "byte budget rule");
    is_str(d.reason, "byte budget exhausted", "byte budget reason");
}

/* network.ask: what is asked, what never is, and how an answer decides. */
static const char *const ask_texts[] = { "*.ask.example", "bad.example.org", "127.0.0.0/8:9000",
                                         "api.example.com:8443" };
static struct egress_rule ask[N(ask_texts)];

static const struct {
    const char *target;
    int status; /* 0: goes on */
    bool ask;
    const char *rule;
} ask_cases[] = {
    { "a.ask.example:443", 0, true, "ask:*.ask.example" },
    { "api.example.com:443", 0, false, "allow:api.example.com" }, /* allowed: never asked */
    { "api.example.com:8443", 0, true, "ask:api.example.com:8443" },
    { "bad.example.org:443", 403, false, "deny:bad.example.org" }, /* the denylist comes first */
    { "ask.example:443", 403, false, "not_allowed" },
    { "a.ask.example:8443", 403, false, "not_allowed" },
    { "127.0.0.1:9000", 0, true, "ask:127.0.0.0/8:9000" },
};

static const struct {
    enum decider_decision decision;
    bool failed;
    const char *reason;
    const char *rule; /* NULL: allowed */
    const char *text;
} answer_cases[] = {
    { DECIDER_ALLOW_ONCE, false, "ok", NULL, "allowed by the decider once" },
    { DECIDER_ALLOW_RUN, false, "", NULL, "allowed by the decider for the run" },
    { DECIDER_ALLOW_SESSION, false, "", NULL, "allowed by the decider for the run" },
    { DECIDER_DENY, false, "no rule", "decider_denied",
      "a.ask.example:443 was asked of the decider: denied: no rule" },
    { DECIDER_DENY, false, "", "decider_denied",
      "a.ask.example:443 was asked of the decider: denied: no reason given" },
    { DECIDER_DENY, true, "timeout: no answer before the deadline", "decider_timeout",
      "a.ask.example:443 was asked of the decider: timeout: no answer before the deadline" },
    { DECIDER_DENY, true, "the decider's answer is not a decision", "decider_failed",
      "a.ask.example:443 was asked of the decider: the decider's answer is not a decision" },
    /* A failed answer never allows, whatever it claims. */
    { DECIDER_ALLOW_RUN, true, "decider unreachable: No such file", "decider_failed",
      "a.ask.example:443 was asked of the decider: decider unreachable: No such file" },
};

static void test_ask(void)
{
    char why[200];
    for (size_t i = 0; i < N(ask); i++)
        if (!ok(egress_rule_parse(ask_texts[i], &ask[i], why, sizeof why) == 0, "ask rule %s",
                ask_texts[i]))
            return;
    struct gateway_config cfg = config();
    cfg.rules.ask = ask;
    cfg.rules.n_ask = N(ask);
    for (size_t i = 0; i < N(ask_cases); i++) {
        struct decision d;
        struct budget b;
        budget_init(&b, &cfg, 0);
        int st = request(&cfg, &b, ask_cases[i].target, 0, &d);
        ok(st == ask_cases[i].status && d.ask == ask_cases[i].ask, "%s: status %d, ask %d",
           ask_cases[i].target, st, d.ask);
        is_str(d.rule, ask_cases[i].rule, ask_cases[i].target);
    }

    /* An asked address is still checked first: a private one is refused
     * before any question (the gateway asks only after this passes). */
    struct target t;
    struct decision d;
    target_of(HTTP_TARGET_AUTHORITY, "127.0.0.1:9000", &t, &d);
    ok(decide_addresses(&cfg, &t, &t.host.ip, 1, &d) < 0 && !d.ask &&
           strcmp(d.rule, "ssrf:loopback") == 0,
       "an ask rule does not let a loopback address through (%s)", d.rule);

    target_of(HTTP_TARGET_AUTHORITY, "a.ask.example:443", &t, &d);
    for (size_t i = 0; i < N(answer_cases); i++) {
        struct decision a = { 0 };
        int r = decide_answer(&t, answer_cases[i].decision, answer_cases[i].failed,
                              answer_cases[i].reason, &a);
        bool want = answer_cases[i].rule == NULL;
        ok((r == 0) == want && a.allowed == want && (want || a.status == 403), "answer %zu: %s", i,
           want ? "allowed" : "refused");
        if (!want)
            is_str(a.rule, answer_cases[i].rule, "answer rule");
        is_str(a.reason, answer_cases[i].text, "answer reason");
    }
}

/* The names the DNS stub gives an address: those a rule could let through. */
static void test_names(void)
{
    static const struct {
        const char *name;
        bool known;
    } rows[] = {
        { "api.example.com", true },                            /* exact */
        { "x.example.org", true },                              /* the wildcard */
        { "a.b.example.org", true },  { "example.org", false }, /* a wildcard is strictly below */
        { "bad.example.org", false }, /* denied on the ports its allow rule has */
        { "example.com", false },     { "evil.test", false },
        { "10.0.0.1", false }, /* an address is not a name */
    };
    struct gateway_config cfg = config();
    for (size_t i = 0; i < N(rows); i++) {
        struct host h;
        char why[200];
        int r = host_parse(rows[i].name, strlen(rows[i].name), &h, why, sizeof why);
        ok(r == 0 && decide_name(&cfg, &h) == rows[i].known, "dns name %s: %s", rows[i].name,
           rows[i].known ? "answered" : "NXDOMAIN");
    }
}

/* Request rules: a method and a path prefix, held where requests are read. */
static const char *const request_texts[] = {
    "GET,HEAD registry.example",
    "POST registry.example/-/npm/v1/security",
    "open.example",
    "GET,HEAD mixed.example",
    "mixed.example:443",
};
static struct egress_rule request_rules[N(request_texts)];

/* METHOD URL as a plain proxy request: 0 when allowed, else its status. */
static int plain(const struct gateway_config *cfg, const char *method, const char *url,
                 struct decision *d)
{
    struct http_request req = { .kind = HTTP_TARGET_ABSOLUTE,
                                .target = url,
                                .target_len = strlen(url) };
    snprintf(req.method, sizeof req.method, "%s", method);
    struct target t = { 0 };
    struct budget b = { 0 };
    if (decide_target(&req, &t, d) < 0)
        return d->status;
    return decide_request(cfg, &b, &t, 0, d) == 0 ? 0 : d->status;
}

static void test_request_rules(void)
{
    char why[200];
    for (size_t i = 0; i < N(request_rules); i++)
        if (!ok(egress_rule_parse(request_texts[i], &request_rules[i], why, sizeof why) == 0,
                "request rule %s", request_texts[i]))
            return;
    struct gateway_config cfg = { .rules = { .allow = request_rules,
                                             .n_allow = N(request_rules) } };
    struct budget b = { 0 };
    struct decision d;
    static const struct {
        const char *target;
        int status;
        bool inspect;
    } tunnels[] = {
        { "registry.example:443", 0, true }, /* only request rules: inspected */
        { "open.example:443", 0, false },
        { "mixed.example:443", 0, false }, /* a plain rule covers 443 */
        { "other.example:443", 403, false },
    };
    for (size_t i = 0; i < N(tunnels); i++) {
        int st = request(&cfg, &b, tunnels[i].target, 0, &d);
        ok(st == tunnels[i].status && d.inspect == tunnels[i].inspect, "CONNECT %s: %d%s",
           tunnels[i].target, tunnels[i].status, tunnels[i].inspect ? ", inspected" : "");
    }
    static const struct {
        const char *method, *url;
        int status;
        const char *rule;
    } plains[] = {
        { "GET", "http://registry.example/is-number", 0, "allow:GET,HEAD registry.example" },
        { "HEAD", "http://registry.example/", 0, "allow:GET,HEAD registry.example" },
        { "PUT", "http://registry.example/is-number", 403, "method_not_allowed" },
        { "POST", "http://registry.example/-/npm/v1/security/advisories/bulk", 0,
          "allow:POST registry.example/-/npm/v1/security" },
        { "POST", "http://registry.example/-/npm/v1/security/../../../x", 403,
          "method_not_allowed" },
        { "POST", "http://registry.example/-/user/x", 403, "method_not_allowed" },
        { "DELETE", "http://open.example/x", 0, "allow:open.example" },
        { "PUT", "http://other.example/x", 403, "not_allowed" },
    };
    for (size_t i = 0; i < N(plains); i++) {
        int st = plain(&cfg, plains[i].method, plains[i].url, &d);
        ok(st == plains[i].status, "%s %s: %d (got %d)", plains[i].method, plains[i].url,
           plains[i].status, st);
        is_str(d.rule, plains[i].rule, "its rule");
    }
    plain(&cfg, "PUT", "http://registry.example/is-number?token=x", &d);
    is_str(d.reason,
           "PUT registry.example:80/is-number is not allowed: the rules for "
           "registry.example hold its requests to certain methods and paths",
           "the reason");
    /* Inside an inspected tunnel. */
    struct target t = { .port = 443 };
    host_parse("registry.example", 16, &t.host, why, sizeof why);
    snprintf(t.host_text, sizeof t.host_text, "registry.example");
    snprintf(t.method, sizeof t.method, "PUT");
    snprintf(t.path, sizeof t.path, "/is-number");
    ok(decide_inner(&cfg, &t, &d) < 0 && d.status == 403, "PUT inside the tunnel: 403");
    is_str(d.rule, "method_not_allowed", "its rule");
    snprintf(t.method, sizeof t.method, "GET");
    ok(decide_inner(&cfg, &t, &d) == 0, "GET inside the tunnel passes");
    is_str(d.rule, "allow:GET,HEAD registry.example", "its rule");
    /* A GET that asks the server to take it as another method (X-HTTP-Method-Override). */
    t.method_override = true;
    ok(decide_inner(&cfg, &t, &d) < 0 && strcmp(d.rule, "method_not_allowed") == 0,
       "a GET with a method override, where the rules hold the methods: 403");
    host_parse("open.example", 12, &t.host, why, sizeof why);
    ok(decide_inner(&cfg, &t, &d) == 0, "the same to a host whose rule holds no method passes");
}

/* What a person is told of a refusal: the subject, and the flags that would allow it. */
static void test_notices(void)
{
    static const struct {
        const char *method, *host;
        unsigned port;
        const char *rule;
        int status;
        bool none;
        const char *line;
    } rows[] = {
        { "DNS", "registry.npmjs.org", 53, "not_allowed", 403, false,
          "egress refused: registry.npmjs.org (no rule; --allow registry.npmjs.org)" },
        { "CONNECT", "registry.npmjs.org", 443, "not_allowed", 403, true,
          "egress refused: registry.npmjs.org (no rule: --net none; --allow "
          "registry.npmjs.org implies --net gateway)" },
        { "GET", "example.com", 8080, "not_allowed", 403, false,
          "egress refused: example.com:8080 (no rule; --allow example.com:8080)" },
        { "TLS", "203.0.113.5", 443, "not_allowed", 403, false,
          "egress refused: 203.0.113.5 (no rule; --allow 203.0.113.5 --allow-private "
          "203.0.113.5/32)" },
        { "TLS", "1.2.3.4", 443, "not_allowed", 403, false,
          "egress refused: 1.2.3.4 (no rule; --allow 1.2.3.4)" },
        { "GET", "127.0.0.1", 8080, "not_allowed", 403, true,
          "egress refused: 127.0.0.1:8080 (no rule: --net none; --allow 127.0.0.1:8080 "
          "--allow-private 127.0.0.1/32 imply --net gateway)" },
        { "CONNECT", "::1", 8443, "not_allowed", 403, false,
          "egress refused: [::1]:8443 (no rule; --allow [::1]:8443 --allow-private ::1/128)" },
        { "PUT", "registry.npmjs.org", 443, "method_not_allowed", 403, false,
          "egress refused: PUT registry.npmjs.org (no rule for PUT; --allow 'PUT "
          "registry.npmjs.org')" },
        { "CONNECT", "intranet.example", 443, "ssrf:private", 403, false,
          "egress refused: intranet.example (ssrf:private; --allow-private CIDR lets its range "
          "through)" },
        { "GET", "bad.example.org", 80, "deny:bad.example.org", 403, false,
          "egress refused: bad.example.org (deny:bad.example.org)" },
        { "GET", "gone.example", 80, "dns", 502, false, "egress failed: gone.example (dns)" },
    };
    for (size_t i = 0; i < N(rows); i++) {
        char line[600];
        decide_notice(rows[i].method, rows[i].host, rows[i].port, rows[i].rule, rows[i].status,
                      rows[i].none, line, sizeof line);
        is_str(line, rows[i].line, rows[i].line);
    }
}

int main(void)
{
    if (setup() == 0) {
        test_targets();
        test_rules();
        test_addresses();
        test_pins();
        test_budgets();
        test_ask();
        test_names();
        test_notices();
        test_request_rules();
    }
    return done_testing();
}
