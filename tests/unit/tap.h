/*
 * tests/unit/tap.h: a minimal TAP producer for `meson test` (protocol tap).
 */
#pragma once
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

__attribute__((format(printf, 2, 3))) static int ok(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!cond)
        tap_failed++;
    return cond;
}

/* Compare strings; prints both on mismatch. */
__attribute__((unused)) static int is_str(const char *got, const char *want, const char *name)
{
    int same = (got == NULL && want == NULL) || (got && want && strcmp(got, want) == 0);
    ok(same, "%s", name);
    if (!same)
        printf("#   got:  %s\n#   want: %s\n", got ? got : "(null)", want ? want : "(null)");
    return same;
}

/* Test names must stay on one TAP line: control and non-ASCII bytes as \xNN. */
__attribute__((unused)) __attribute__((unused)) static const char *tap_show(const char *s)
{
    static char bufs[2][300];
    static int turn;
    char *out = bufs[turn++ & 1];
    size_t o = 0;
    for (; *s && o + 5 < sizeof bufs[0]; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c >= 0x7f)
            o += (size_t)snprintf(out + o, 5, "\\x%02x", c);
        else
            out[o++] = (char)c;
    }
    out[o] = '\0';
    return out;
}

static int done_testing(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}
