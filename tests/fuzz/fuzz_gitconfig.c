/*
 * tests/fuzz/fuzz_gitconfig.c: libFuzzer target for git's config syntax
 * (policy/gitconfig.c) and the git scan's judgements (sandbox/gitscan.c),
 * which read files a run wrote. Beyond "no crash, no out-of-bounds read":
 * every entry's span lies in the text, in order; a config with its refused
 * keys taken out parses, and holds none of them any more (what the post-run
 * scan writes back is what it vouched for). Built only with clang; see
 * tests/fuzz/README.md.
 */
#include "policy/gitconfig.h"
#include "sandbox/gitscan.h"

#include <stdlib.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        __builtin_trap();
}

struct spans {
    size_t len, last;
};

static bool each(void *ctx, const struct gitconfig_entry *e)
{
    struct spans *s = ctx;
    check(e->start < e->end && e->end <= s->len && e->start >= s->last);
    /* A key cut at its bound may have lost its dot; the scan refuses a cut entry whole. */
    check(strlen(e->key) < sizeof e->key && (e->cut || strchr(e->key, '.')));
    s->last = e->end;
    return true;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    /* An exact-size heap copy, so ASan flags any read past the end. */
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    char why[256], out[4200];
    struct spans sp = { size, 0 };
    gitconfig_parse(s, size, each, &sp, why, sizeof why);
    struct gitscan_notes notes = { 0 };
    char *keep = NULL;
    size_t klen = 0;
    if (gitscan_config(s, size, NULL, 0, 1, "config", &notes, why, sizeof why, &keep, &klen) ==
            GITSCAN_CONFIG_KEYS &&
        keep) {
        struct gitscan_notes again = { 0 };
        check(gitscan_config(keep, klen, NULL, 0, 1, "config", &again, why, sizeof why, NULL,
                             NULL) == GITSCAN_CONFIG_OK);
        free(keep);
    }
    gitscan_attributes_refused(s, size, why, sizeof why);
    gitscan_pointer(s, size, true, 2, "/home/u/ws", out, sizeof out);
    gitscan_pointer(s, size, false, 2, "/home/u/ws", out, sizeof out);
    free(s);
    return 0;
}
