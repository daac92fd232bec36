/*
 * tests/unit/tap.h: a minimal TAP producer for `meson test` (protocol tap).
 */
#pragma once
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

__attribute__((format(printf, 2, 3)))
static int ok(int cond, const char *fmt, ...)
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
static int is_str(const char *got, const char *want, const char *name)
{
    int same = (got == NULL && want == NULL) ||
               (got && want && strcmp(got, want) == 0);
    ok(same, "%s", name);
    if (!same)
        printf("#   got:  %s\n#   want: %s\n", got ? got : "(null)", want ? want : "(null)");
    return same;
}

static int done_testing(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}
