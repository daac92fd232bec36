/*
 * tests/unit/test_text.c: text_escape_controls, which every error record and
 * audit reason passes through before anyone prints it; base64, which the
 * gateway reads Basic credentials with.
 */
#include "common/err.h"
#include "common/text.h"

#include "tap.h"

#include <stdio.h>
#include <string.h>

struct escape_case {
    const char *in;
    size_t size; /* the buffer's size; 0: sizeof the case's buffer */
    const char *want;
};

static const struct escape_case cases[] = {
    { "", 0, "" },
    { "plain text, 'quoted' and \"double\"", 0, "plain text, 'quoted' and \"double\"" },
    { "tab\there", 0, "tab\\x09here" },
    { "two\nlines\r", 0, "two\\x0alines\\x0d" },
    { "\x1b[2J\x1b]0;owned\x07", 0, "\\x1b[2J\\x1b]0;owned\\x07" },
    { "del\x7f", 0, "del\\x7f" },
    /* UTF-8 stays; C1 controls and malformed bytes do not */
    { "caf\xc3\xa9 \xe2\x9c\x93", 0, "caf\xc3\xa9 \xe2\x9c\x93" },
    { "c1 \xc2\x9b"
      "31m",
      0, "c1 \\xc2\\x9b31m" },
    { "bare \x9b and \xff", 0, "bare \\x9b and \\xff" },
    { "overlong \xc0\xaf", 0, "overlong \\xc0\\xaf" },
    { "cut \xe2\x9c", 0, "cut \\xe2\\x9c" },
    /* too long once escaped: cut with "..." and still NUL-terminated in SIZE */
    { "0123456789abc\x01", 16, "0123456789ab..." },
    { "0123456789ab\x01", 17, "0123456789ab\\x01" },
    { "0123456789ab\x01", 16, "0123456789ab..." },
    { "0123456789abcdef\x01", 20, "0123456789abcdef..." },
    { "\x01\x01\x01\x01\x01", 16, "\\x01\\x01\\x01..." },
};

/* RFC 4648's vectors, and what a strict reader refuses. */
static void test_base64(void)
{
    static const struct {
        const char *plain, *b64;
    } vectors[] = {
        { "", "" },
        { "f", "Zg==" },
        { "fo", "Zm8=" },
        { "foo", "Zm9v" },
        { "foob", "Zm9vYg==" },
        { "fooba", "Zm9vYmE=" },
        { "foobar", "Zm9vYmFy" },
        { "x-access-token:ghp_\xff", "eC1hY2Nlc3MtdG9rZW46Z2hwX/8=" },
    };
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        char enc[64], dec[64];
        size_t n = 0;
        base64_encode(vectors[i].plain, strlen(vectors[i].plain), enc);
        is_str(enc, vectors[i].b64, vectors[i].b64);
        ok(base64_decode(vectors[i].b64, strlen(vectors[i].b64), dec, &n) == 0 &&
               n == strlen(vectors[i].plain) && memcmp(dec, vectors[i].plain, n) == 0,
           "decode %s", vectors[i].b64);
    }
    static const char *const bad[] = { "Zg=",   "Zg",     "Z===", "Zg==Zg==",
                                       "Zm 9v", "Zm9v\n", "Zm9-", "=Zm9" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char dec[64];
        size_t n;
        ok(base64_decode(bad[i], strlen(bad[i]), dec, &n) < 0, "refuse %s", tap_show(bad[i]));
    }
}

int main(void)
{
    test_base64();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct escape_case *c = &cases[i];
        char buf[64];
        memset(buf, 'Z', sizeof buf);
        snprintf(buf, sizeof buf, "%s", c->in);
        size_t size = c->size ? c->size : sizeof buf;
        text_escape_controls(buf, size);
        is_str(buf, c->want, tap_show(c->in));
        ok(strlen(buf) < size, "%s: fits in %zu bytes", tap_show(c->in), size);
    }

    /* Every error record goes through it: a path or token with an escape in it. */
    struct cordon_err err;
    err_set(&err, CORDON_E_POLICY, "cannot open '%s'", "/tmp/\x1b[31mred\n");
    is_str(err.msg, "cannot open '/tmp/\\x1b[31mred\\x0a'", "err_set escapes the subject");
    return done_testing();
}
