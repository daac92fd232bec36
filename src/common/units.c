/*
 * common/units.c: sizes, durations and counts as people write them. Pure.
 */
#include "common/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * Accepts "12", "1.5", and with EXPONENT "1e2" or "2.5E-1": the decimal
 * forms a JSON or YAML number takes, so a value means the same however a
 * tool re-spells it (a JSON writer prints 1e2 back as 100.0, and -0 as 0).
 * A minus sign only on a zero; no "+", hex, blanks, "inf" or a bare ".5".
 */
static int parse_number(const char *s, bool exponent, const char **end, double *out)
{
    const char *p = s;
    bool negative = *p == '-';
    if (negative)
        p++;
    if (!isdigit((unsigned char)*p))
        return -1;
    while (isdigit((unsigned char)*p))
        p++;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return -1;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (exponent && (*p == 'e' || *p == 'E')) {
        const char *e = p + 1;
        if (*e == '+' || *e == '-')
            e++;
        if (isdigit((unsigned char)*e)) {
            while (isdigit((unsigned char)*e))
                e++;
            p = e;
        }
    }
    /* strtod reads more forms than the above (hex, "1e3" without EXPONENT):
     * it must stop exactly where the grammar did. */
    char *stop;
    errno = 0;
    double v = strtod(s, &stop);
    if (stop != p || (errno == ERANGE && isinf(v)))
        return -1; /* an underflow reads as the 0 or tiny value it is */
    if (negative && v != 0)
        return -1;
    *out = fabs(v);
    *end = p;
    return 0;
}

int parse_size(const char *s, uint64_t *out, char *why, size_t why_len)
{
    static const struct {
        const char *suffix;
        double mult;
    } units[] = {
        { "", 1 },
        { "B", 1 },
        { "K", 1024.0 },
        { "KB", 1024.0 },
        { "KiB", 1024.0 },
        { "M", 1048576.0 },
        { "MB", 1048576.0 },
        { "MiB", 1048576.0 },
        { "G", 1073741824.0 },
        { "GB", 1073741824.0 },
        { "GiB", 1073741824.0 },
        { "T", 1099511627776.0 },
        { "TB", 1099511627776.0 },
        { "TiB", 1099511627776.0 },
    };
    const char *end = NULL;
    double v;
    if (s && parse_number(s, false, &end, &v) == 0) {
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            if (strcasecmp(end, units[i].suffix) != 0)
                continue;
            double bytes = v * units[i].mult;
            if (bytes >= 18446744073709551615.0)
                break;
            if (units[i].mult == 1 && strchr(s, '.'))
                break; /* a fraction of a byte means nothing */
            if (v > 0 && bytes < 1)
                break; /* rounding to 0 would turn a limit into "no limit" */
            *out = (uint64_t)bytes;
            return 0;
        }
    }
    snprintf(why, why_len, "expected a size like 256M, got \"%s\"", s ? s : "");
    return -1;
}

int parse_duration_ms(const char *s, uint64_t *out, char *why, size_t why_len)
{
    static const struct {
        const char *suffix;
        double ms;
    } units[] = {
        { "", 1000.0 }, { "ms", 1.0 }, { "s", 1000.0 }, { "m", 60000.0 }, { "h", 3600000.0 },
    };
    const char *end = NULL;
    double v;
    if (s && parse_number(s, true, &end, &v) == 0) {
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            if (strcmp(end, units[i].suffix) != 0)
                continue;
            double ms = v * units[i].ms;
            if (ms >= 9.2e18)
                break;
            if (v > 0 && llround(ms) == 0)
                break; /* rounding to 0 would turn a limit into "no limit" */
            *out = (uint64_t)llround(ms);
            return 0;
        }
    }
    snprintf(why, why_len, "expected a duration like 30s, 2m or 500ms, got \"%s\"", s ? s : "");
    return -1;
}

int parse_count(const char *s, uint64_t *out, char *why, size_t why_len)
{
    /* -0 is 0, as a JSON writer prints it back. */
    const char *digits = s && !strcmp(s, "-0") ? s + 1 : s;
    const char *p = digits;
    if (p && isdigit((unsigned char)*p)) {
        while (isdigit((unsigned char)*p))
            p++;
        if (*p == '\0') {
            errno = 0;
            unsigned long long v = strtoull(digits, NULL, 10);
            if (!errno) {
                *out = v;
                return 0;
            }
        }
    }
    snprintf(why, why_len, "expected a whole number, got \"%s\"", s ? s : "");
    return -1;
}

void format_size(uint64_t bytes, char *out, size_t len)
{
    static const char units[] = "KMGT";
    unsigned u = 0;
    uint64_t v = bytes;
    while (v && v % 1024 == 0 && u < sizeof units - 1) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, len, "%llu", (unsigned long long)bytes);
    else
        snprintf(out, len, "%llu%c", (unsigned long long)v, units[u - 1]);
}

void format_duration_ms(uint64_t ms, char *out, size_t len)
{
    static const struct {
        uint64_t ms;
        const char *suffix;
    } units[] = { { 3600000, "h" }, { 60000, "m" }, { 1000, "s" } };
    for (size_t i = 0; ms && i < sizeof units / sizeof units[0]; i++) {
        if (ms % units[i].ms == 0) {
            snprintf(out, len, "%llu%s", (unsigned long long)(ms / units[i].ms), units[i].suffix);
            return;
        }
    }
    snprintf(out, len, "%llums", (unsigned long long)ms);
}
