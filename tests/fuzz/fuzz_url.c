/*
 * tests/fuzz/fuzz_url.c: libFuzzer target for the gateway's URL, authority,
 * host and CIDR parsers (common/addr.c), which read bytes the sandbox chose.
 * Beyond "no crash, no out-of-bounds read" it checks that whatever parses
 * comes back the same when its canonical text is parsed again, so the
 * address classified is the address a second reading would dial.
 * Built only with clang; see tests/fuzz/README.md.
 */
#include "common/addr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        __builtin_trap();
}

static void check_host(const struct host *h)
{
    char text[80], why[128];
    struct host again;
    if (h->is_ip) {
        /*
         * Zones go back in RFC 6874's URI spelling ("%25" then the zone): the
         * bare "%25" would read as an empty zone after an encoded '%'.
         */
        struct ip_addr bare = h->ip;
        char fmt[72];
        bare.scope_id = 0;
        ip_addr_format(&bare, fmt, sizeof fmt);
        if (h->ip.family == AF_INET6 && h->ip.scope_id)
            snprintf(text, sizeof text, "[%s%%25%u]", fmt, (unsigned)h->ip.scope_id);
        else if (h->ip.family == AF_INET6)
            snprintf(text, sizeof text, "[%s]", fmt);
        else
            snprintf(text, sizeof text, "%s", fmt);
        size_t n = strlen(text);
        check(host_parse(text, n, &again, why, sizeof why) == 0);
        check(again.is_ip && again.ip.family == h->ip.family &&
              again.ip.scope_id == h->ip.scope_id &&
              memcmp(again.ip.bytes, h->ip.bytes, sizeof h->ip.bytes) == 0);
        check(addr_class_name(addr_classify(&h->ip)) != NULL);
        return;
    }
    size_t n = strlen(h->name);
    check(n > 0 && n <= 253);
    check(host_parse(h->name, n, &again, why, sizeof why) == 0);
    check(!again.is_ip && strcmp(again.name, h->name) == 0);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    /* An exact-size heap copy, so ASan flags any read past the NUL. */
    char *s = malloc(size + 1);
    char why[64];
    struct url u;
    struct authority a;
    struct host h;
    struct cidr c;

    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    if (url_parse(s, &u, why, sizeof why) == 0) {
        check(u.path[0] == '/' && u.port != 0);
        for (const char *p = u.path; *p; p++)
            check((unsigned char)*p > 0x20 && *p != 0x7f && *p != '#');
        check_host(&u.authority.host);
    }
    /* A small WHY exercises the truncation of quoted reasons. */
    if (authority_parse(s, size, &a, why, 8) == 0)
        check_host(&a.host);
    if (host_parse(s, size, &h, NULL, 0) == 0)
        check_host(&h);
    if (cidr_parse(s, &c, why, sizeof why) == 0) {
        check(c.prefix <= (c.base.family == AF_INET ? 32u : 128u));
        check(cidr_contains(&c, &c.base));
    }
    free(s);
    return 0;
}
