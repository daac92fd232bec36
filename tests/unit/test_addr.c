/*
 * tests/unit/test_addr.c: the gateway's reading of hosts, authorities and
 * URLs (every literal spelling a client accepts) and the address classes the
 * SSRF rules refuse, with exact results and refusal messages.
 */
#include "common/addr.h"

#include "tap.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

struct host_case {
    const char *in;
    const char *want; /* formatted address, or the name; NULL on error */
    bool is_ip;
    const char *why; /* NULL: must parse */
};

#define LOOP(s)                    \
    {                              \
        s, "127.0.0.1", true, NULL \
    }

static const struct host_case host_cases[] = {
    /* Every spelling of 127.0.0.1 a client would connect to. */
    LOOP("127.0.0.1"),
    LOOP("127.1"),
    LOOP("127.0.1"),
    LOOP("2130706433"),
    LOOP("0x7f000001"),
    LOOP("0X7F000001"),
    LOOP("0x0000007f000001"),
    LOOP("017700000001"),
    LOOP("0177.0.0.1"),
    LOOP("0177.0000.0000.0001"),
    LOOP("127.000.000.001"),
    LOOP("0177.1"),
    LOOP("0x7f.1"),
    LOOP("0x7F.0.1"),
    LOOP("0x7f.0x0.0x0.0x1"),
    LOOP("0x7f.0.0.1"),
    LOOP("127.0.0.1."),
    LOOP("127.1."),
    LOOP("%31%32%37.0.0.1"),
    LOOP("127.0.0.%31"),
    LOOP("%30x7f.1"),
    LOOP("0x7f.0x.0.1"),
    { "0", "0.0.0.0", true, NULL },
    { "0x", "0.0.0.0", true, NULL },
    { "4294967295", "255.255.255.255", true, NULL },
    { "1.16777215", "1.255.255.255", true, NULL },
    { "1.2.65535", "1.2.255.255", true, NULL },
    { "169.254.43518", "169.254.169.254", true, NULL },
    { "0xa9fea9fe", "169.254.169.254", true, NULL },
    /* Bracketed IPv6, zones in both spellings. */
    { "[::1]", "::1", true, NULL },
    { "[::FFFF:127.0.0.1]", "::ffff:127.0.0.1", true, NULL },
    { "[0:0:0:0:0:0:0:1]", "::1", true, NULL },
    { "[fe80::1%2]", "fe80::1%2", true, NULL },
    { "[fe80::1%252]", "fe80::1%2", true, NULL },
    { "[fe80::1%eth0]", "fe80::1", true, NULL },
    { "[fe80::1%25eth0]", "fe80::1", true, NULL },
    { "[fe80::1%4294967295]", "fe80::1%4294967295", true, NULL },
    { "[fe80::1%4294967296]", NULL, false, "bad IPv6 zone in \"[fe80::1%4294967296]\"" },
    { "[fe80::1%]", NULL, false, "bad IPv6 zone in \"[fe80::1%]\"" },
    { "[fe80::1%25]", NULL, false, "bad IPv6 zone in \"[fe80::1%25]\"" },
    { "[fe80::1%e/0]", NULL, false, "bad IPv6 zone in \"[fe80::1%e/0]\"" },
    { "[::1", NULL, false, "unterminated IPv6 literal \"[::1\"" },
    { "[127.0.0.1]", NULL, false, "invalid IPv6 literal \"[127.0.0.1]\"" },
    { "[::ffff:127.0.0.01]", NULL, false, "invalid IPv6 literal \"[::ffff:127.0.0.01]\"" },
    { "[1::2::3]", NULL, false, "invalid IPv6 literal \"[1::2::3]\"" },
    { "[]", NULL, false, "invalid IPv6 literal \"[]\"" },
    { "[%3a%3a1]", NULL, false, "invalid IPv6 literal \"[%3a%3a1]\"" },
    { "%5B::1%5D", NULL, false, "invalid character in host \"%5B::1%5D\"" },
    { "::1", NULL, false, "unbracketed IPv6 address \"::1\"" },
    /* Names: lower case, decoded, one trailing dot. */
    { "example.com", "example.com", false, NULL },
    { "EXAMPLE.Com", "example.com", false, NULL },
    { "example.com.", "example.com", false, NULL },
    { "ex%61mple.com", "example.com", false, NULL },
    { "ex%41mple.com", "example.com", false, NULL },
    { "example%2ecom", "example.com", false, NULL },
    { "my_host-1.internal", "my_host-1.internal", false, NULL },
    { "1.2.3.example", "1.2.3.example", false, NULL },
    { "0x7f.example", "0x7f.example", false, NULL },
    { "example.1a", "example.1a", false, NULL },
    { "localhost", "localhost", false, NULL },
    /* Numeric-looking hosts that are no valid IPv4: refused, never names. */
    { "1.2.3.256", NULL, false, "invalid IPv4 literal \"1.2.3.256\"" },
    { "256.0.0.1", NULL, false, "invalid IPv4 literal \"256.0.0.1\"" },
    { "0x100000000", NULL, false, "invalid IPv4 literal \"0x100000000\"" },
    { "4294967296", NULL, false, "invalid IPv4 literal \"4294967296\"" },
    { "99999999999999999999999", NULL, false, "invalid IPv4 literal \"99999999999999999999999\"" },
    { "08", NULL, false, "invalid IPv4 literal \"08\"" },
    { "1.2.3.09", NULL, false, "invalid IPv4 literal \"1.2.3.09\"" },
    { "1.2.3.4.5", NULL, false, "invalid IPv4 literal \"1.2.3.4.5\"" },
    { "1.256.1", NULL, false, "invalid IPv4 literal \"1.256.1\"" },
    { "1.2.16777216", NULL, false, "invalid IPv4 literal \"1.2.16777216\"" },
    { "0x7g.1", NULL, false, "invalid IPv4 literal \"0x7g.1\"" },
    { "example.123", NULL, false, "invalid IPv4 literal \"example.123\"" },
    { "foo.0x", NULL, false, "invalid IPv4 literal \"foo.0x\"" },
    { "1..1", NULL, false, "invalid IPv4 literal \"1..1\"" },
    { "127.0.0.1..", NULL, false, "empty label in host \"127.0.0.1..\"" },
    /* Refusals. */
    { "", NULL, false, "empty host" },
    { ".", NULL, false, "empty host" },
    { "example..com", NULL, false, "empty label in host \"example..com\"" },
    { ".example.com", NULL, false, "empty label in host \".example.com\"" },
    { "example.com..", NULL, false, "empty label in host \"example.com..\"" },
    { "exa mple.com", NULL, false, "control character or space in host \"exa mple.com\"" },
    { "example.com\r\nX: y", NULL, false,
      "control character or space in host \"example.com\\x0d\\x0aX: y\"" },
    { "a%00b", NULL, false, "invalid character in host \"a%00b\"" },
    { "a%20b", NULL, false, "invalid character in host \"a%20b\"" },
    { "%2531%2532%2537.0.0.1", NULL, false, "invalid character in host \"%2531%2532%2537.0.0.1\"" },
    { "allowed.com%40127.0.0.1", NULL, false,
      "invalid character in host \"allowed.com%40127.0.0.1\"" },
    { "a%2fb", NULL, false, "invalid character in host \"a%2fb\"" },
    { "a%", NULL, false, "bad percent-encoding in host \"a%\"" },
    { "a%4", NULL, false, "bad percent-encoding in host \"a%4\"" },
    { "a%zz", NULL, false, "bad percent-encoding in host \"a%zz\"" },
    { "*.example.com", NULL, false, "invalid character in host \"*.example.com\"" },
    { "ex\"ample", NULL, false, "invalid character in host \"ex\\\"ample\"" },
    { "b\xc3\xbc"
      "cher.de",
      NULL, false, "invalid character in host \"b\\xc3\\xbccher.de\"" },
    { "a:b", NULL, false, "invalid character in host \"a:b\"" },
};

static void test_hosts(void)
{
    for (size_t i = 0; i < sizeof host_cases / sizeof host_cases[0]; i++) {
        const struct host_case *c = &host_cases[i];
        struct host h;
        char why[200] = "", got[256] = "";
        int r = host_parse(c->in, strlen(c->in), &h, why, sizeof why);
        if (c->why) {
            ok(r == -1, "host %s refused", tap_show(c->in));
            is_str(why, c->why, "  reason");
            continue;
        }
        if (!ok(r == 0, "host %s parses", tap_show(c->in))) {
            printf("#   why: %s\n", why);
            continue;
        }
        if (h.is_ip)
            ip_addr_format(&h.ip, got, sizeof got);
        else
            snprintf(got, sizeof got, "%s", h.name);
        ok(h.is_ip == c->is_ip && strcmp(got, c->want) == 0, "host %s is %s %s", c->in,
           c->is_ip ? "ip" : "name", c->want);
        if (strcmp(got, c->want) != 0)
            printf("#   got: %s\n", got);
    }
}

static void test_host_limits(void)
{
    char name[400], why[200];
    struct host h;
    size_t n = 0;

    /* 63-byte labels are the limit, 64 is refused. */
    memset(name, 'a', 63);
    memcpy(name + 63, ".com", 5);
    ok(host_parse(name, strlen(name), &h, why, sizeof why) == 0, "63-byte label accepted");
    memset(name, 'a', 64);
    memcpy(name + 64, ".com", 5);
    ok(host_parse(name, strlen(name), &h, why, sizeof why) == -1 &&
           strncmp(why, "label too long in host", 22) == 0,
       "64-byte label refused");

    /* 253 bytes total, with or without the trailing dot; 254 refused. */
    while (n < 253) {
        size_t take = 253 - n >= 50 ? 49 : 253 - n;
        memset(name + n, 'b', take);
        n += take;
        if (n < 253)
            name[n++] = '.';
    }
    name[n] = '\0';
    ok(host_parse(name, n, &h, why, sizeof why) == 0 && strlen(h.name) == 253,
       "253-byte name accepted");
    name[n] = '.';
    name[n + 1] = '\0';
    ok(host_parse(name, n + 1, &h, why, sizeof why) == 0 && strlen(h.name) == 253,
       "253-byte name with trailing dot accepted");
    name[n] = 'b';
    ok(host_parse(name, n + 1, &h, why, sizeof why) == -1 && strncmp(why, "host too long", 13) == 0,
       "254-byte name refused");

    /* Long quoted inputs are capped in the reason. */
    memset(name, '1', 300);
    ok(host_parse(name, 300, &h, why, sizeof why) == -1 && strlen(why) < 140 &&
           strstr(why, "...\"") != NULL,
       "reason for a 300-byte literal is capped");

    /* Embedded NUL within LEN is a control byte, not an early end. */
    ok(host_parse("a\0b", 3, &h, why, sizeof why) == -1, "embedded NUL refused");
}

/* Parse "1.2.3.4" or an unbracketed IPv6 text through host_parse(). */
static int parse_ip(const char *s, struct ip_addr *out)
{
    char buf[128];
    struct host h;
    snprintf(buf, sizeof buf, strchr(s, ':') ? "[%s]" : "%s", s);
    if (host_parse(buf, strlen(buf), &h, NULL, 0) < 0 || !h.is_ip)
        return -1;
    *out = h.ip;
    return 0;
}

struct class_case {
    const char *addr;
    const char *cls;
};

static const struct class_case class_cases[] = {
    { "0.0.0.0", "unspecified" },
    { "0.0.0.1", "this_network" },
    { "0.255.255.255", "this_network" },
    { "1.0.0.0", "public" },
    { "8.8.8.8", "public" },
    { "9.255.255.255", "public" },
    { "10.0.0.0", "private" },
    { "10.255.255.255", "private" },
    { "11.0.0.0", "public" },
    { "100.63.255.255", "public" },
    { "100.64.0.0", "cgnat" },
    { "100.127.255.255", "cgnat" },
    { "100.128.0.0", "public" },
    { "126.255.255.255", "public" },
    { "127.0.0.0", "loopback" },
    { "127.0.0.1", "loopback" },
    { "127.255.255.255", "loopback" },
    { "128.0.0.0", "public" },
    { "169.253.255.255", "public" },
    { "169.254.0.0", "link_local" },
    { "169.254.169.254", "link_local" },
    { "169.254.255.255", "link_local" },
    { "169.255.0.0", "public" },
    { "172.15.255.255", "public" },
    { "172.16.0.0", "private" },
    { "172.31.255.255", "private" },
    { "172.32.0.0", "public" },
    { "191.255.255.255", "public" },
    { "192.0.0.0", "reserved" },
    { "192.0.0.255", "reserved" },
    { "192.0.1.0", "public" },
    { "192.0.2.1", "documentation" },
    { "192.88.99.1", "reserved" },
    { "192.167.255.255", "public" },
    { "192.168.0.0", "private" },
    { "192.168.255.255", "private" },
    { "192.169.0.0", "public" },
    { "198.17.255.255", "public" },
    { "198.18.0.0", "benchmark" },
    { "198.19.255.255", "benchmark" },
    { "198.20.0.0", "public" },
    { "198.51.100.7", "documentation" },
    { "203.0.113.255", "documentation" },
    { "223.255.255.255", "public" },
    { "224.0.0.0", "multicast" },
    { "239.255.255.255", "multicast" },
    { "240.0.0.0", "reserved" },
    { "255.255.255.254", "reserved" },
    { "255.255.255.255", "broadcast" },
    /* IPv6. */
    { "::", "unspecified" },
    { "::1", "loopback" },
    { "2606:4700::1111", "public" },
    { "2a00:1450:4001::200e", "public" },
    { "fe80::1", "link_local" },
    { "febf:ffff::1", "link_local" },
    { "fec0::1", "reserved" },
    { "fc00::1", "ula" },
    { "fd12:3456::1", "ula" },
    { "fbff:ffff::1", "reserved" },
    { "ff02::1", "multicast" },
    { "2001:db8::1", "documentation" },
    { "2001:db9::1", "public" },
    { "3fff::1", "documentation" },
    { "100::1", "reserved" },
    { "100:0:0:1::1", "reserved" },
    { "2001::1", "reserved" },
    { "2001:0:4136:e378:8000:63bf:3fff:fdd2", "reserved" },
    { "2001:1ff::1", "reserved" },
    { "2001:200::1", "public" },
    { "2001:2::1", "benchmark" },
    { "::ffff:0:7f00:1", "reserved" },
    { "4000::1", "reserved" },
    /* Every embedding of 127.0.0.1, 10.0.0.1 and 169.254.169.254. */
    { "::ffff:127.0.0.1", "loopback" },
    { "::ffff:7f00:1", "loopback" },
    { "::127.0.0.1", "loopback" },
    { "64:ff9b::127.0.0.1", "loopback" },
    { "64:ff9b:1::127.0.0.1", "loopback" },
    { "2002:7f00:1::", "loopback" },
    { "2002:7f00:1:abcd::1", "loopback" },
    { "::ffff:10.0.0.1", "private" },
    { "::10.0.0.1", "private" },
    { "64:ff9b::a00:1", "private" },
    { "64:ff9b:1::10.0.0.1", "private" },
    { "2002:a00:1::1", "private" },
    { "::ffff:169.254.169.254", "link_local" },
    { "::169.254.169.254", "link_local" },
    { "64:ff9b::169.254.169.254", "link_local" },
    { "64:ff9b:1::169.254.169.254", "link_local" },
    { "2002:a9fe:a9fe::", "link_local" },
    { "::ffff:8.8.8.8", "public" },
    { "64:ff9b::8.8.8.8", "public" },
    { "2002:808:808::1", "public" },
    { "::2", "this_network" },
    { "::ffff:0.0.0.0", "unspecified" },
    { "64:ff9b:1:1::8.8.8.8", "reserved" },
};

static void test_classes(void)
{
    for (size_t i = 0; i < sizeof class_cases / sizeof class_cases[0]; i++) {
        const struct class_case *c = &class_cases[i];
        struct ip_addr a;
        if (!ok(parse_ip(c->addr, &a) == 0, "%s parses", c->addr))
            continue;
        const char *got = addr_class_name(addr_classify(&a));
        if (!ok(strcmp(got, c->cls) == 0, "%s is %s", c->addr, c->cls))
            printf("#   got: %s\n", got);
    }

    static const char *const names[ADDR_CLASS_COUNT] = {
        "public",        "unspecified", "this_network", "loopback",  "private",
        "cgnat",         "link_local",  "ula",          "multicast", "broadcast",
        "documentation", "benchmark",   "reserved",
    };
    int same = 1;
    for (int c = 0; c < ADDR_CLASS_COUNT; c++)
        same = same && strcmp(addr_class_name((enum addr_class)c), names[c]) == 0;
    ok(same, "class names are stable");
    is_str(addr_class_name(ADDR_CLASS_COUNT), "invalid", "out-of-range class name");
}

struct cidr_case {
    const char *cidr;
    const char *addr;
    bool contains;
};

static const struct cidr_case cidr_cases[] = {
    { "10.0.0.0/8", "10.0.0.0", true },
    { "10.0.0.0/8", "10.255.255.255", true },
    { "10.0.0.0/8", "11.0.0.0", false },
    { "10.0.0.0/8", "9.255.255.255", false },
    { "10.1.2.3/8", "10.200.0.1", true },
    { "127.0.0.2/32", "127.0.0.2", true },
    { "127.0.0.2/32", "127.0.0.1", false },
    { "127.0.0.2/32", "127.0.0.3", false },
    { "127.0.0.2", "127.0.0.2", true },
    { "127.0.0.2/32", "::ffff:127.0.0.2", true },
    { "127.0.0.2/32", "::127.0.0.2", false },
    { "127.0.0.2/32", "64:ff9b::127.0.0.2", false },
    { "0.0.0.0/0", "1.2.3.4", true },
    { "0.0.0.0/0", "::ffff:1.2.3.4", true },
    { "0.0.0.0/0", "::1", false },
    { "172.16.0.0/12", "172.31.255.255", true },
    { "172.16.0.0/12", "172.32.0.0", false },
    { "100.64.0.0/10", "100.127.255.255", true },
    { "100.64.0.0/10", "100.128.0.0", false },
    { "fd00::/8", "fd12::1", true },
    { "fd00::/8", "fc00::1", false },
    { "fd00::/8", "10.0.0.1", false },
    { "fe80::/10", "febf::1", true },
    { "fe80::/10", "fec0::1", false },
    { "fe80::/10", "fe80::1%2", true },
    { "::ffff:10.0.0.0/104", "10.9.8.7", true },
    { "::ffff:10.0.0.0/104", "11.0.0.1", false },
    { "::ffff:0:0/96", "8.8.8.8", true },
    { "::1", "::1", true },
    { "::1/128", "::2", false },
    { "::/0", "2001:db8::1", true },
    { "::/0", "1.2.3.4", true },
    { "2001:db8::/127", "2001:db8::1", true },
    { "2001:db8::/127", "2001:db8::2", false },
};

struct cidr_parse_case {
    const char *in;
    const char *want; /* base/prefix as formatted; NULL on error */
    const char *why;
};

static const struct cidr_parse_case cidr_parse_cases[] = {
    { "10.1.2.3/8", "10.0.0.0/8", NULL },
    { "192.168.1.255/23", "192.168.0.0/23", NULL },
    { "127.0.0.2", "127.0.0.2/32", NULL },
    { "0.0.0.0/0", "0.0.0.0/0", NULL },
    { "fd00::ffff/8", "fd00::/8", NULL },
    { "2001:db8::1/33", "2001:db8::/33", NULL },
    { "::1", "::1/128", NULL },
    { "10.0.0.0/33", NULL, "bad prefix length in CIDR \"10.0.0.0/33\"" },
    { "fd00::/129", NULL, "bad prefix length in CIDR \"fd00::/129\"" },
    { "10.0.0.0/", NULL, "bad prefix length in CIDR \"10.0.0.0/\"" },
    { "10.0.0.0/+8", NULL, "bad prefix length in CIDR \"10.0.0.0/+8\"" },
    { "10.0.0.0/-1", NULL, "bad prefix length in CIDR \"10.0.0.0/-1\"" },
    { "10.0.0.0/8 ", NULL, "bad prefix length in CIDR \"10.0.0.0/8 \"" },
    { "10.0.0.0/0008", NULL, "bad prefix length in CIDR \"10.0.0.0/0008\"" },
    { "10/8", NULL, "invalid CIDR \"10/8\"" },
    { "010.0.0.0/8", NULL, "invalid CIDR \"010.0.0.0/8\"" },
    { "10.0.0.256/32", NULL, "invalid CIDR \"10.0.0.256/32\"" },
    { "10.0.0.0.0/8", NULL, "invalid CIDR \"10.0.0.0.0/8\"" },
    { "", NULL, "invalid CIDR \"\"" },
    { "[::1]/128", NULL, "invalid CIDR \"[::1]/128\"" },
    { "fe80::1%2/64", NULL, "invalid CIDR \"fe80::1%2/64\"" },
    { "example.com/8", NULL, "invalid CIDR \"example.com/8\"" },
};

static void test_cidrs(void)
{
    for (size_t i = 0; i < sizeof cidr_parse_cases / sizeof cidr_parse_cases[0]; i++) {
        const struct cidr_parse_case *c = &cidr_parse_cases[i];
        struct cidr cidr;
        char why[200] = "", text[80], got[96];
        int r = cidr_parse(c->in, &cidr, why, sizeof why);
        if (c->why) {
            ok(r == -1, "cidr %s refused", c->in);
            is_str(why, c->why, "  reason");
            continue;
        }
        if (!ok(r == 0, "cidr %s parses", c->in)) {
            printf("#   why: %s\n", why);
            continue;
        }
        ip_addr_format(&cidr.base, text, sizeof text);
        snprintf(got, sizeof got, "%s/%u", text, cidr.prefix);
        is_str(got, c->want, "  masked");
    }
    for (size_t i = 0; i < sizeof cidr_cases / sizeof cidr_cases[0]; i++) {
        const struct cidr_case *c = &cidr_cases[i];
        struct cidr cidr;
        struct ip_addr a;
        if (cidr_parse(c->cidr, &cidr, NULL, 0) < 0 || parse_ip(c->addr, &a) < 0) {
            ok(0, "%s / %s parse", c->cidr, c->addr);
            continue;
        }
        ok(cidr_contains(&cidr, &a) == c->contains, "%s %s %s", c->cidr,
           c->contains ? "contains" : "does not contain", c->addr);
    }
}

struct auth_case {
    const char *in;
    const char *host; /* formatted address or name */
    uint16_t port;
    bool userinfo;
    const char *why;
};

static const struct auth_case auth_cases[] = {
    { "example.com", "example.com", 0, false, NULL },
    { "example.com:443", "example.com", 443, false, NULL },
    { "example.com:", "example.com", 0, false, NULL },
    { "example.com:080", "example.com", 80, false, NULL },
    { "example.com:65535", "example.com", 65535, false, NULL },
    { "allowed.com@127.0.0.1", "127.0.0.1", 0, true, NULL },
    { "allowed.com@127.0.0.1:80", "127.0.0.1", 80, true, NULL },
    { "user:pass@allowed.com@0x7f.1:8080", "127.0.0.1", 8080, true, NULL },
    { "@example.com", "example.com", 0, true, NULL },
    { "allowed.com:443@10.0.0.1", "10.0.0.1", 0, true, NULL },
    { "[::1]", "::1", 0, false, NULL },
    { "[::1]:8443", "::1", 8443, false, NULL },
    { "[::1]:", "::1", 0, false, NULL },
    { "u@[fe80::1%25eth0]:80", "fe80::1", 80, true, NULL },
    { "[fe80::a%3]:22", "fe80::a%3", 22, false, NULL },
    { "EXAMPLE.COM.:80", "example.com", 80, false, NULL },
    { "2130706433:80", "127.0.0.1", 80, false, NULL },
    { "", NULL, 0, false, "empty host" },
    { "user@", NULL, 0, true, "empty host" },
    { ":80", NULL, 0, false, "empty host" },
    { "example.com:99999", NULL, 0, false, "bad port \"99999\"" },
    { "example.com:65536", NULL, 0, false, "bad port \"65536\"" },
    { "example.com:0", NULL, 0, false, "bad port \"0\"" },
    { "example.com:+80", NULL, 0, false, "bad port \"+80\"" },
    { "example.com:-1", NULL, 0, false, "bad port \"-1\"" },
    { "example.com:80:90", NULL, 0, false, "bad port \"80:90\"" },
    { "example.com:8a", NULL, 0, false, "bad port \"8a\"" },
    { "[::1]:0x50", NULL, 0, false, "bad port \"0x50\"" },
    { "example.com :80", NULL, 0, false,
      "control character or space in authority \"example.com :80\"" },
    { "example.com:80\t", NULL, 0, false,
      "control character or space in authority \"example.com:80\\x09\"" },
    { "evil.com\\@allowed.com", NULL, 0, false,
      "invalid character in authority \"evil.com\\\\@allowed.com\"" },
    { "evil.com/@allowed.com", NULL, 0, false,
      "invalid character in authority \"evil.com/@allowed.com\"" },
    { "::1", NULL, 0, false, "unbracketed IPv6 address \"::1\"" },
    { "fe80::1:80", NULL, 0, false, "unbracketed IPv6 address \"fe80::1:80\"" },
    { "[::1]x", NULL, 0, false, "unexpected characters after IPv6 literal in \"[::1]x\"" },
    { "[::1]]:80", NULL, 0, false, "unexpected characters after IPv6 literal in \"[::1]]:80\"" },
    { "[::1:80", NULL, 0, false, "unterminated IPv6 literal \"[::1:80\"" },
    { "x@1.2.3.256:80", NULL, 0, false, "invalid IPv4 literal \"1.2.3.256\"" },
};

static void test_authorities(void)
{
    for (size_t i = 0; i < sizeof auth_cases / sizeof auth_cases[0]; i++) {
        const struct auth_case *c = &auth_cases[i];
        struct authority a;
        char why[200] = "", got[256];
        int r = authority_parse(c->in, strlen(c->in), &a, why, sizeof why);
        if (c->why) {
            ok(r == -1, "authority %s refused", tap_show(c->in));
            is_str(why, c->why, "  reason");
            continue;
        }
        if (!ok(r == 0, "authority %s parses", tap_show(c->in))) {
            printf("#   why: %s\n", why);
            continue;
        }
        if (a.host.is_ip)
            ip_addr_format(&a.host.ip, got, sizeof got);
        else
            snprintf(got, sizeof got, "%s", a.host.name);
        ok(strcmp(got, c->host) == 0 && a.port == c->port && a.has_userinfo == c->userinfo,
           "authority %s is host %s port %u%s", c->in, c->host, c->port,
           c->userinfo ? " with userinfo" : "");
        if (strcmp(got, c->host) != 0 || a.port != c->port || a.has_userinfo != c->userinfo)
            printf("#   got: host %s port %u userinfo %d\n", got, a.port, a.has_userinfo);
    }
}

struct url_case {
    const char *in;
    bool https;
    const char *host;
    uint16_t port;
    const char *path;
    const char *why;
};

static const struct url_case url_cases[] = {
    { "http://example.com", false, "example.com", 80, "/", NULL },
    { "https://example.com", true, "example.com", 443, "/", NULL },
    { "HTTPS://Example.COM/", true, "example.com", 443, "/", NULL },
    { "HtTp://example.com:8080/a/b?c=d", false, "example.com", 8080, "/a/b?c=d", NULL },
    { "http://example.com/a/../b/%2e%2e/c", false, "example.com", 80, "/a/../b/%2e%2e/c", NULL },
    { "http://example.com?q=1", false, "example.com", 80, "/?q=1", NULL },
    { "http://example.com#frag", false, "example.com", 80, "/", NULL },
    { "http://example.com/p?q#f?g", false, "example.com", 80, "/p?q", NULL },
    { "http://example.com:/x", false, "example.com", 80, "/x", NULL },
    { "https://example.com:8443", true, "example.com", 8443, "/", NULL },
    { "http://allowed.com@127.0.0.1/", false, "127.0.0.1", 80, "/", NULL },
    { "http://user:pw@allowed.com@0177.1:81/x", false, "127.0.0.1", 81, "/x", NULL },
    { "http://[::1]:8080/", false, "::1", 8080, "/", NULL },
    { "http://[::ffff:169.254.169.254]/latest/meta-data/", false, "::ffff:169.254.169.254", 80,
      "/latest/meta-data/", NULL },
    { "http://169.254.169.254/latest", false, "169.254.169.254", 80, "/latest", NULL },
    { "http://0xa9fea9fe/", false, "169.254.169.254", 80, "/", NULL },
    { "http://%31%32%37.1/", false, "127.0.0.1", 80, "/", NULL },
    { "http://evil.com\\@allowed.com/", false, "evil.com", 80, "/@allowed.com/", NULL },
    { "http://evil.com\\a\\b?x\\y", false, "evil.com", 80, "/a/b?x\\y", NULL },
    { "http://evil.com#@allowed.com/", false, "evil.com", 80, "/", NULL },
    { "http://evil.com?@allowed.com/", false, "evil.com", 80, "/?@allowed.com/", NULL },
    { "http://a/@b/", false, "a", 80, "/@b/", NULL },
    { "ftp://example.com/", false, NULL, 0, NULL, "unsupported scheme \"ftp\"" },
    { "httpx://example.com/", false, NULL, 0, NULL, "unsupported scheme \"httpx\"" },
    { "file:///etc/passwd", false, NULL, 0, NULL, "unsupported scheme \"file\"" },
    { "gopher://127.0.0.1:70/", false, NULL, 0, NULL, "unsupported scheme \"gopher\"" },
    { "example.com/", false, NULL, 0, NULL, "missing scheme in url \"example.com/\"" },
    { "/path", false, NULL, 0, NULL, "missing scheme in url \"/path\"" },
    { "", false, NULL, 0, NULL, "missing scheme in url \"\"" },
    { "://x", false, NULL, 0, NULL, "missing scheme in url \"://x\"" },
    { "http:example.com", false, NULL, 0, NULL,
      "expected \"//\" after the scheme in url \"http:example.com\"" },
    { "http:/example.com", false, NULL, 0, NULL,
      "expected \"//\" after the scheme in url \"http:/example.com\"" },
    { "http:\\\\example.com", false, NULL, 0, NULL,
      "expected \"//\" after the scheme in url \"http:\\\\\\\\example.com\"" },
    { "http://", false, NULL, 0, NULL, "empty host" },
    { "http:///path", false, NULL, 0, NULL, "empty host" },
    { "http://example.com:99999/", false, NULL, 0, NULL, "bad port \"99999\"" },
    { "http://1.2.3.256/", false, NULL, 0, NULL, "invalid IPv4 literal \"1.2.3.256\"" },
    { "http://example.com/a b", false, NULL, 0, NULL,
      "control character or space in url \"http://example.com/a b\"" },
    { "http://example.com/a\r\nHost: x", false, NULL, 0, NULL,
      "control character or space in url \"http://example.com/a\\x0d\\x0aHost: x\"" },
    { " http://example.com/", false, NULL, 0, NULL,
      "control character or space in url \" http://example.com/\"" },
    { "http://::1/", false, NULL, 0, NULL, "unbracketed IPv6 address \"::1\"" },
};

static void test_urls(void)
{
    for (size_t i = 0; i < sizeof url_cases / sizeof url_cases[0]; i++) {
        const struct url_case *c = &url_cases[i];
        struct url u;
        char why[200] = "", got[256];
        int r = url_parse(c->in, &u, why, sizeof why);
        if (c->why) {
            ok(r == -1, "url %s refused", tap_show(c->in));
            is_str(why, c->why, "  reason");
            continue;
        }
        if (!ok(r == 0, "url %s parses", tap_show(c->in))) {
            printf("#   why: %s\n", why);
            continue;
        }
        if (u.authority.host.is_ip)
            ip_addr_format(&u.authority.host.ip, got, sizeof got);
        else
            snprintf(got, sizeof got, "%s", u.authority.host.name);
        bool same = u.https == c->https && strcmp(got, c->host) == 0 && u.port == c->port &&
            strcmp(u.path, c->path) == 0;
        ok(same, "url %s is %s %s:%u %s", c->in, c->https ? "https" : "http", c->host, c->port,
           c->path);
        if (!same)
            printf("#   got: %s %s:%u %s\n", u.https ? "https" : "http", got, u.port, u.path);
    }

    /* The path buffer is 4096 with the NUL: 4095 fits, 4096 does not. */
    static char big[4200];
    struct url u;
    char why[200];
    size_t pre = strlen("http://a");
    memcpy(big, "http://a", pre);
    memset(big + pre, 'x', 4095);
    big[pre] = '/';
    big[pre + 4095] = '\0';
    ok(url_parse(big, &u, why, sizeof why) == 0 && strlen(u.path) == 4095, "4095-byte path fits");
    big[pre + 4095] = 'x';
    big[pre + 4096] = '\0';
    ok(url_parse(big, &u, why, sizeof why) == -1 && strncmp(why, "path too long", 13) == 0,
       "4096-byte path refused");
    ok(url_parse("http://x", &u, NULL, 0) == 0, "NULL why is allowed");
    ok(url_parse("ftp://x", &u, NULL, 0) == -1, "NULL why on error is allowed");
}

static void test_sockaddr(void)
{
    struct ip_addr a, back;
    struct sockaddr_storage ss;
    socklen_t len = 0;
    char text[64];

    parse_ip("fe80::1%7", &a);
    ip_addr_to_sockaddr(&a, 8443, &ss, &len);
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
    ok(len == sizeof(struct sockaddr_in6) && s6->sin6_family == AF_INET6 &&
           ntohs(s6->sin6_port) == 8443 && s6->sin6_scope_id == 7,
       "IPv6 to sockaddr keeps port and zone");
    ok(ip_addr_from_sockaddr((const struct sockaddr *)&ss, &back) == 0 &&
           memcmp(&a, &back, sizeof a) == 0,
       "IPv6 sockaddr round trip");

    parse_ip("10.1.2.3", &a);
    ip_addr_to_sockaddr(&a, 80, &ss, &len);
    ip_addr_from_sockaddr((const struct sockaddr *)&ss, &back);
    ip_addr_format(&back, text, sizeof text);
    ok(len == sizeof(struct sockaddr_in) && ntohs(((struct sockaddr_in *)&ss)->sin_port) == 80,
       "IPv4 to sockaddr keeps port");
    is_str(text, "10.1.2.3", "IPv4 sockaddr round trip");

    struct sockaddr unix_sa = { .sa_family = AF_UNIX };
    ok(ip_addr_from_sockaddr(&unix_sa, &back) == -1, "AF_UNIX is refused");
}

int main(void)
{
    test_hosts();
    test_host_limits();
    test_classes();
    test_cidrs();
    test_authorities();
    test_urls();
    test_sockaddr();
    return done_testing();
}
