/*
 * tests/unit/test_units.c: sizes, durations and counts as the policy file and
 * the flags accept them, with the exact refusal messages.
 */
#include "common/units.h"

#include "tap.h"

#include <inttypes.h>
#include <stdio.h>

struct unit_case {
    const char *in;
    uint64_t want;
    const char *why; /* NULL: must parse */
};

#define SIZE_WHY(s) "expected a size like 256M, got \"" s "\""
#define DUR_WHY(s) "expected a duration like 30s, 2m or 500ms, got \"" s "\""
#define COUNT_WHY(s) "expected a whole number, got \"" s "\""

static const struct unit_case size_cases[] = {
    { "0", 0, NULL },
    { "4096", 4096, NULL },
    { "64M", 64ull << 20, NULL },
    { "64m", 64ull << 20, NULL },
    { "1G", 1ull << 30, NULL },
    { "512K", 512ull << 10, NULL },
    { "512KiB", 512ull << 10, NULL },
    { "2MB", 2ull << 20, NULL },
    { "10B", 10, NULL },
    { "1.5G", 3ull << 29, NULL },
    { "1T", 1ull << 40, NULL },
    { "lots", 0, SIZE_WHY("lots") },
    { "", 0, SIZE_WHY("") },
    { "-1M", 0, SIZE_WHY("-1M") },
    { "+1M", 0, SIZE_WHY("+1M") },
    { " 1M", 0, SIZE_WHY(" 1M") },
    { "1M ", 0, SIZE_WHY("1M ") },
    { "1.5", 0, SIZE_WHY("1.5") },
    { "1.5B", 0, SIZE_WHY("1.5B") },
    { "1.", 0, SIZE_WHY("1.") },
    { ".5M", 0, SIZE_WHY(".5M") },
    { "1e3", 0, SIZE_WHY("1e3") },
    { "1e3M", 0, SIZE_WHY("1e3M") },
    { "-0", 0, NULL },
    { "-0.0", 0, SIZE_WHY("-0.0") },
    { "100.0", 0, SIZE_WHY("100.0") },
    { "0x10", 0, SIZE_WHY("0x10") },
    { "1P", 0, SIZE_WHY("1P") },
    { "16777216T", 0, SIZE_WHY("16777216T") },
    /* a fraction that rounds to nothing would silently mean "no limit" */
    { "0.0000001K", 0, SIZE_WHY("0.0000001K") },
};

static const struct unit_case duration_cases[] = {
    { "0", 0, NULL },
    { "10", 10000, NULL },
    { "30s", 30000, NULL },
    { "500ms", 500, NULL },
    { "2m", 120000, NULL },
    { "1h", 3600000, NULL },
    { "1.5s", 1500, NULL },
    { "0.5ms", 1, NULL },
    /* a JSON or YAML number in any spelling: 1e2 is written back as 100.0 */
    { "1e2", 100000, NULL },
    { "100.0", 100000, NULL },
    { "2.5E-1", 250, NULL },
    { "1e+1s", 10000, NULL },
    { "-0", 0, NULL },
    { "1e-400", 0, NULL },
    { "0.00000000000000000000000000000000000000000000000000000000000000000000000001", 0,
      DUR_WHY("0.00000000000000000000000000000000000000000000000000000000000000000000000001") },
    { "1e400", 0, DUR_WHY("1e400") },
    { "1e", 0, DUR_WHY("1e") },
    { "0x10", 0, DUR_WHY("0x10") },
    { "-1e2", 0, DUR_WHY("-1e2") },
    { "inf", 0, DUR_WHY("inf") },
    { "soon", 0, DUR_WHY("soon") },
    { "", 0, DUR_WHY("") },
    { "-1s", 0, DUR_WHY("-1s") },
    { "1S", 0, DUR_WHY("1S") },
    { "1d", 0, DUR_WHY("1d") },
    { "1m30s", 0, DUR_WHY("1m30s") },
    { "10 s", 0, DUR_WHY("10 s") },
    { "0.1ms", 0, DUR_WHY("0.1ms") },
    { "3000000000000h", 0, DUR_WHY("3000000000000h") },
};

static const struct unit_case count_cases[] = {
    { "0", 0, NULL },
    { "1024", 1024, NULL },
    { "18446744073709551615", UINT64_MAX, NULL },
    { "18446744073709551616", 0, COUNT_WHY("18446744073709551616") },
    { "many", 0, COUNT_WHY("many") },
    { "", 0, COUNT_WHY("") },
    { "-1", 0, COUNT_WHY("-1") },
    { "-0", 0, NULL },
    { "-00", 0, COUNT_WHY("-00") },
    { "1e2", 0, COUNT_WHY("1e2") },
    { "1.5", 0, COUNT_WHY("1.5") },
    { "1K", 0, COUNT_WHY("1K") },
    { " 1", 0, COUNT_WHY(" 1") },
};

static void run(const char *what, int (*parse)(const char *, uint64_t *, char *, size_t),
                const struct unit_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct unit_case *c = &cases[i];
        uint64_t got = 12345;
        char why[256] = "";
        int r = parse(c->in, &got, why, sizeof why);
        char name[128];
        snprintf(name, sizeof name, "%s \"%s\"", what, c->in);
        if (c->why) {
            ok(r == -1, "%s fails", name);
            is_str(why, c->why, name);
        } else {
            ok(r == 0 && got == c->want, "%s = %" PRIu64 " (got %" PRIu64 ", %s)", name, c->want,
               got, why);
        }
    }
}

int main(void)
{
    run("size", parse_size, size_cases, sizeof size_cases / sizeof size_cases[0]);
    run("duration", parse_duration_ms, duration_cases,
        sizeof duration_cases / sizeof duration_cases[0]);
    run("count", parse_count, count_cases, sizeof count_cases / sizeof count_cases[0]);

    /* Printed durations, and that each reads back as the same value. */
    static const struct {
        uint64_t ms;
        const char *text;
    } shown[] = { { 600000, "10m" },  { 7200000, "2h" }, { 90000, "90s" },
                  { 1500, "1500ms" }, { 0, "0ms" },      { 3600000 + 1000, "3601s" } };
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
        char text[32], name[64];
        uint64_t back = 1;
        format_duration_ms(shown[i].ms, text, sizeof text);
        snprintf(name, sizeof name, "duration %" PRIu64 " shown", shown[i].ms);
        is_str(text, shown[i].text, name);
        snprintf(name, sizeof name, "duration %s reads back", text);
        ok(parse_duration_ms(text, &back, NULL, 0) == 0 && back == shown[i].ms, "%s", name);
    }

    char why[256] = "";
    uint64_t v = 0;
    ok(parse_size(NULL, &v, why, sizeof why) == -1, "size NULL fails");
    is_str(why, SIZE_WHY(""), "size NULL message");
    char small[8];
    ok(parse_size("lots", &v, small, sizeof small) == -1 && small[7] == '\0',
       "a short WHY buffer is truncated, not overrun");
    return done_testing();
}
