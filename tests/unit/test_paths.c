/*
 * tests/unit/test_paths.c: the broker's judgement of path-like tool
 * arguments: every reading a server could make of a value (raw, file URI,
 * percent-decoded, look-alikes folded, backslashes, trimmed), lexical
 * normalisation, and `deny` globs, with exact results and reasons.
 */
#include "broker/paths.h"

#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ws[] = { "/workspace" };
static const char *const ws_slash[] = { "/workspace/" };
static const char *const ws_data[] = { "/workspace", "/data" };
static const char *const root[] = { "/" };
static const char *const env_git[] = { "**/.env", "**/.git/**" };
static const char *const pem_secret[] = { "*.pem", "/workspace/secret/*", "[abc].txt" };
static const char *const everything[] = { "**" };

static const struct path_rule rule_ws = { ws, 1, env_git, 2 };
static const struct path_rule rule_pem = { ws, 1, pem_secret, 3 };
static const struct path_rule rule_slash = { ws_slash, 1, NULL, 0 };
static const struct path_rule rule_two = { ws_data, 2, NULL, 0 };
static const struct path_rule rule_root = { root, 1, NULL, 0 };
static const struct path_rule rule_deny_only = { NULL, 0, env_git, 2 };
static const struct path_rule rule_deny_all = { NULL, 0, everything, 1 };
static const struct path_rule rule_open = { NULL, 0, NULL, 0 };

struct check_case {
    const struct path_rule *rule;
    const char *cwd;
    const char *value;
    const char *why; /* NULL: allowed */
};

#define WS(v, why)                     \
    {                                  \
        &rule_ws, "/workspace", v, why \
    }
#define PEM(v, why)                     \
    {                                   \
        &rule_pem, "/workspace", v, why \
    }

/* U+FF0F FULLWIDTH SOLIDUS, U+FF0E FULLWIDTH FULL STOP, and friends. */
#define FW_SLASH "\xef\xbc\x8f"
#define FW_DOT "\xef\xbc\x8e"
#define FW_PERCENT "\xef\xbc\x85"
#define FW_TILDE "\xef\xbd\x9e"
#define FW_BACKSLASH "\xef\xbc\xbc"
#define ONE_DOT_LEADER "\xe2\x80\xa4"
#define TWO_DOT_LEADER "\xe2\x80\xa5"
#define SMALL_FULL_STOP "\xef\xb9\x92"
#define DIVISION_SLASH "\xe2\x88\x95"
#define FRACTION_SLASH "\xe2\x81\x84"
#define BIG_SOLIDUS "\xe2\xa7\xb8"
#define SMALL_BACKSLASH "\xef\xb9\xa8"
#define SET_MINUS "\xe2\x88\x96"
#define SMALL_PERCENT "\xef\xb9\xaa"
#define IDEO_SPACE "\xe3\x80\x80"

static const struct check_case check_cases[] = {
    /* Plain POSIX readings. */
    WS("../../etc/passwd", "\"../../etc/passwd\" resolves to /etc/passwd, outside /workspace"),
    WS("/workspace/../etc/passwd",
       "\"/workspace/../etc/passwd\" resolves to /etc/passwd, outside /workspace"),
    WS("/workspace/./a//b", NULL),
    WS("/workspace2/x", "\"/workspace2/x\" is outside /workspace"),
    WS("/workspace2", "\"/workspace2\" is outside /workspace"),
    WS("/workspace", NULL),
    WS("/workspace/", NULL),
    WS("//workspace//a", NULL),
    WS("a/b", NULL),
    WS(".", NULL),
    WS("./a/../b", NULL),
    WS("..", "\"..\" resolves to /, outside /workspace"),
    WS("/", "\"/\" is outside /workspace"),
    WS("/etc/passwd", "\"/etc/passwd\" is outside /workspace"),
    WS("/../workspace/a", NULL),
    WS("/../../etc", "\"/../../etc\" resolves to /etc, outside /workspace"),
    WS("./../workspace/x", NULL),
    WS("a/../../workspace2", "\"a/../../workspace2\" resolves to /workspace2, outside /workspace"),
    WS("...", NULL),
    WS("..a/..b", NULL),
    /* Percent-decoding, repeated until stable. */
    WS("%2e%2e%2fetc",
       "\"%2e%2e%2fetc\" decodes to ../etc, which resolves to /etc, outside /workspace"),
    WS("%2E%2E%2Fetc",
       "\"%2E%2E%2Fetc\" decodes to ../etc, which resolves to /etc, outside /workspace"),
    WS("%2e%2e/x", "\"%2e%2e/x\" decodes to ../x, which resolves to /x, outside /workspace"),
    WS("%252e%252e%252f",
       "\"%252e%252e%252f\" decodes to ../, which resolves to /, outside /workspace"),
    WS("%2fetc%2fpasswd",
       "\"%2fetc%2fpasswd\" decodes to /etc/passwd, which is outside /workspace"),
    WS("a%2f..%2f..%2fetc",
       "\"a%2f..%2f..%2fetc\" decodes to a/../../etc, which resolves to /etc, outside /workspace"),
    WS("%2525252e%2525252e",
       "\"%2525252e%2525252e\" decodes to .., which resolves to /, outside /workspace"),
    WS("%25252525252e", "\"%25252525252e\" is percent-encoded more than 4 times"),
    WS("a%2fb", NULL),
    WS("/workspace/100%.txt", NULL),
    WS("/workspace/100%25.txt", NULL),
    WS("/workspace/a%20b", NULL),
    WS("/workspace/%zz%2", NULL),
    WS("/workspace/50%", NULL),
    WS("/workspace/%2e%2e%2fworkspace%2fx", NULL),
    WS("/workspace/naïve.txt", NULL),
    WS("/workspace/na%c3%afve.txt", NULL),
    WS("/workspace/nai\xcc\x88ve.txt", NULL),
    WS("/workspace/日本語/ファイル", NULL),
    /* file:// URIs. */
    WS("file:///etc/passwd",
       "\"file:///etc/passwd\" names /etc/passwd, which is outside /workspace"),
    WS("FILE:///etc/passwd",
       "\"FILE:///etc/passwd\" names /etc/passwd, which is outside /workspace"),
    WS("file:/etc/passwd", "\"file:/etc/passwd\" names /etc/passwd, which is outside /workspace"),
    WS("file:etc/passwd", "\"file:etc/passwd\" names /etc/passwd, which is outside /workspace"),
    WS("file://localhost/etc/passwd",
       "\"file://localhost/etc/passwd\" names /etc/passwd, which is outside /workspace"),
    WS("file:///workspace/ok", NULL),
    WS("file://localhost/workspace/ok", NULL),
    WS("file://LOCALHOST/workspace/ok", NULL),
    WS("file:///workspace/a%20b", NULL),
    WS("file:///workspace/a?x=1#frag", NULL),
    WS("file://", "\"file://\" names /, which is outside /workspace"),
    WS("file:///workspace/a#/../../etc/passwd",
       "\"file:///workspace/a#/../../etc/passwd\" names /workspace/a#/../../etc/passwd, which "
       "resolves to /etc/passwd, outside /workspace"),
    WS("file:///workspace/%2e%2e/etc",
       "\"file:///workspace/%2e%2e/etc\" reads as /workspace/../etc, which resolves to /etc, "
       "outside /workspace"),
    WS("file://evil/share", "\"file://evil/share\" is a file URI with a host"),
    WS("file://user@localhost/x", "\"file://user@localhost/x\" is a file URI with a host"),
    WS("file:%2f%2fevil/share",
       "\"file:%2f%2fevil/share\" decodes to file://evil/share, which is a file URI with a host"),
    WS("file%3a%2f%2f%2fetc", "\"file%3a%2f%2f%2fetc\" reads as /etc, which is outside /workspace"),
    /* Unicode look-alikes. */
    WS(FW_SLASH "etc" FW_SLASH "passwd",
       "\"\\xef\\xbc\\x8fetc\\xef\\xbc\\x8fpasswd\" folds to /etc/passwd, which is outside "
       "/workspace"),
    WS(FW_DOT FW_DOT FW_SLASH "etc",
       "\"\\xef\\xbc\\x8e\\xef\\xbc\\x8e\\xef\\xbc\\x8fetc\" folds to ../etc, which resolves "
       "to /etc, outside /workspace"),
    WS(FW_DOT FW_DOT "/etc",
       "\"\\xef\\xbc\\x8e\\xef\\xbc\\x8e/etc\" folds to ../etc, which resolves to /etc, outside "
       "/workspace"),
    WS(ONE_DOT_LEADER ONE_DOT_LEADER "/etc",
       "\"\\xe2\\x80\\xa4\\xe2\\x80\\xa4/etc\" folds to ../etc, which resolves to /etc, outside "
       "/workspace"),
    WS(SMALL_FULL_STOP SMALL_FULL_STOP "/etc",
       "\"\\xef\\xb9\\x92\\xef\\xb9\\x92/etc\" folds to ../etc, which resolves to /etc, outside "
       "/workspace"),
    WS(TWO_DOT_LEADER "/etc",
       "\"\\xe2\\x80\\xa5/etc\" folds to ../etc, which resolves to /etc, outside /workspace"),
    WS(".." DIVISION_SLASH "etc",
       "\"..\\xe2\\x88\\x95etc\" folds to ../etc, which resolves to /etc, outside /workspace"),
    WS(".." FRACTION_SLASH "etc",
       "\"..\\xe2\\x81\\x84etc\" folds to ../etc, which resolves to /etc, outside /workspace"),
    WS(".." BIG_SOLIDUS "etc",
       "\"..\\xe2\\xa7\\xb8etc\" folds to ../etc, which resolves to /etc, outside /workspace"),
    WS(".." SMALL_BACKSLASH "etc",
       "\"..\\xef\\xb9\\xa8etc\" reads as ../etc, which resolves to /etc, outside /workspace"),
    WS(".." FW_BACKSLASH "etc",
       "\"..\\xef\\xbc\\xbcetc\" reads as ../etc, which resolves to /etc, outside /workspace"),
    WS(".." SET_MINUS "etc",
       "\"..\\xe2\\x88\\x96etc\" reads as ../etc, which resolves to /etc, outside /workspace"),
    WS(FW_PERCENT "2e" FW_PERCENT "2e/x",
       "\"\\xef\\xbc\\x852e\\xef\\xbc\\x852e/x\" reads as ../x, which resolves to /x, outside "
       "/workspace"),
    WS(SMALL_PERCENT "2e" SMALL_PERCENT "2e/x",
       "\"\\xef\\xb9\\xaa2e\\xef\\xb9\\xaa2e/x\" reads as ../x, which resolves to /x, outside "
       "/workspace"),
    WS("/workspace/" FW_DOT "env",
       "\"/workspace/\\xef\\xbc\\x8eenv\" folds to /workspace/.env, which matches denied pattern "
       "\"**/.env\""),
    WS("%EF%BC%8E%EF%BC%8E%EF%BC%8Fetc",
       "\"%EF%BC%8E%EF%BC%8E%EF%BC%8Fetc\" reads as ../etc, which resolves to /etc, outside "
       "/workspace"),
    WS("/workspace/\xe2\x80\xa6", NULL), /* an ellipsis folds to "...", a name */
    WS("/workspace/ｆｕｌｌ", NULL),
    /* Backslash as a separator. */
    WS("..\\..\\etc",
       "\"..\\\\..\\\\etc\" reads as ../../etc, which resolves to /etc, outside "
       "/workspace"),
    WS("a\\b", NULL),
    WS("\\etc\\passwd", "\"\\\\etc\\\\passwd\" reads as /etc/passwd, which is outside /workspace"),
    WS("/workspace\\..\\..\\etc", "\"/workspace\\\\..\\\\..\\\\etc\" is outside /workspace"),
    WS("/workspace/a\\..\\..\\etc",
       "\"/workspace/a\\\\..\\\\..\\\\etc\" reads as /workspace/a/../../etc, which resolves to "
       "/etc, outside /workspace"),
    /* Surrounding whitespace, as JavaScript's trim() strips it. */
    WS(" ../x", "\" ../x\" trims to ../x, which resolves to /x, outside /workspace"),
    WS(IDEO_SPACE "/etc/passwd",
       "\"\\xe3\\x80\\x80/etc/passwd\" trims to /etc/passwd, which is outside /workspace"),
    WS("%20/etc/passwd", "\"%20/etc/passwd\" reads as /etc/passwd, which is outside /workspace"),
    WS("/workspace/a b ", NULL),
    WS("   ", NULL),
    /* Home directories. */
    WS("~/x", "\"~/x\" is home-relative"),
    WS("~root", "\"~root\" is home-relative"),
    WS("~", "\"~\" is home-relative"),
    WS("%7e/x", "\"%7e/x\" decodes to ~/x, which is home-relative"),
    WS(FW_TILDE "/x", "\"\\xef\\xbd\\x9e/x\" folds to ~/x, which is home-relative"),
    WS("/workspace/~x", NULL),
    /* Control characters and bad UTF-8, raw or decoded. */
    WS("a\nb", "\"a\\x0ab\" has a control character"),
    WS("a\tb", "\"a\\x09b\" has a control character"),
    WS("/workspace/a\x7f", "\"/workspace/a\\x7f\" has a control character"),
    WS("/workspace/a\xc2\x85", "\"/workspace/a\\xc2\\x85\" has a control character"),
    WS("a%00b", "\"a%00b\" decodes to a\\x00b, which has a control character"),
    WS("/workspace/ok%00/../../etc/passwd",
       "\"/workspace/ok%00/../../etc/passwd\" decodes to /workspace/ok\\x00/../../etc/passwd, "
       "which has a control character"),
    WS("a%0d%0aX", "\"a%0d%0aX\" decodes to a\\x0d\\x0aX, which has a control character"),
    WS("\xff", "\"\\xff\" is not valid UTF-8"),
    WS("/workspace/\xc3", "\"/workspace/\\xc3\" is not valid UTF-8"),
    WS("\xc0\xaf"
       "etc",
       "\"\\xc0\\xafetc\" is not valid UTF-8"),
    WS("\xed\xa0\x80", "\"\\xed\\xa0\\x80\" is not valid UTF-8"),
    WS("\xf4\x90\x80\x80", "\"\\xf4\\x90\\x80\\x80\" is not valid UTF-8"),
    WS("%c0%ae%c0%ae/etc",
       "\"%c0%ae%c0%ae/etc\" decodes to \\xc0\\xae\\xc0\\xae/etc, which is not valid UTF-8"),
    WS("/workspace/%ff",
       "\"/workspace/%ff\" decodes to /workspace/\\xff, which is not valid UTF-8"),
    WS("", "empty path"),
    /* Only crafted values come near the cap on readings. */
    WS(" file:///w\\"
       "\xef\xbd\x81"
       "%25252541#x",
       "\" file:///w\\\\\\xef\\xbd\\x81%25252541#x\" has more than 64 readings"),
    /* Windows forms. */
    WS("C:\\x", "\"C:\\\\x\" is a windows drive path"),
    WS("c:/x", "\"c:/x\" is a windows drive path"),
    WS("C:x", "\"C:x\" is a windows drive path"),
    WS("\\\\server\\share", "\"\\\\\\\\server\\\\share\" is a windows UNC path"),
    WS("\\\\?\\C:\\x", "\"\\\\\\\\?\\\\C:\\\\x\" is a windows UNC path"),
    WS("/\\server", "\"/\\\\server\" is a windows UNC path"),
    WS("C%3a%5cx", "\"C%3a%5cx\" decodes to C:\\\\x, which is a windows drive path"),
    WS(FW_BACKSLASH FW_BACKSLASH "server",
       "\"\\xef\\xbc\\xbc\\xef\\xbc\\xbcserver\" folds to \\\\\\\\server, which is a windows "
       "UNC path"),
    WS("/workspace/c:x", NULL),
    /* deny globs. */
    WS("/workspace/.env", "\"/workspace/.env\" matches denied pattern \"**/.env\""),
    WS("/workspace/x/.env", "\"/workspace/x/.env\" matches denied pattern \"**/.env\""),
    WS(".env", "\".env\" resolves to /workspace/.env, matching denied pattern \"**/.env\""),
    WS("/workspace/a/../.env",
       "\"/workspace/a/../.env\" resolves to /workspace/.env, matching denied pattern \"**/.env\""),
    WS("/workspace/%2eenv",
       "\"/workspace/%2eenv\" decodes to /workspace/.env, which matches denied pattern "
       "\"**/.env\""),
    WS("file:///workspace/.env",
       "\"file:///workspace/.env\" resolves to /workspace/file:/workspace/.env, matching denied "
       "pattern \"**/.env\""),
    WS("/workspace/.env.example", NULL),
    WS("/workspace/x.env", NULL),
    WS("/workspace/.git", "\"/workspace/.git\" matches denied pattern \"**/.git/**\""),
    WS("/workspace/.git/",
       "\"/workspace/.git/\" resolves to /workspace/.git, matching denied "
       "pattern \"**/.git/**\""),
    WS("/workspace/a/.git/config",
       "\"/workspace/a/.git/config\" matches denied pattern \"**/.git/**\""),
    WS(".git/config",
       "\".git/config\" resolves to /workspace/.git/config, matching denied pattern "
       "\"**/.git/**\""),
    WS("/workspace/.github/x", NULL),
    WS("/workspace/.gitignore", NULL),
    PEM("/workspace/key.pem", "\"/workspace/key.pem\" matches denied pattern \"*.pem\""),
    PEM("/workspace/a/b/.pem", "\"/workspace/a/b/.pem\" matches denied pattern \"*.pem\""),
    PEM("/workspace/key.pem.bak", NULL),
    PEM("/workspace/secret/k",
        "\"/workspace/secret/k\" matches denied pattern \"/workspace/secret/*\""),
    PEM("/workspace/secret/.hidden",
        "\"/workspace/secret/.hidden\" matches denied pattern \"/workspace/secret/*\""),
    PEM("/workspace/secret", NULL),     /* `*` is one component, not zero */
    PEM("/workspace/secret/a/b", NULL), /* nor several: a tree takes secret/ and then ** */
    PEM("/workspace/a.txt", "\"/workspace/a.txt\" matches denied pattern \"[abc].txt\""),
    PEM("/workspace/sub/c.txt", "\"/workspace/sub/c.txt\" matches denied pattern \"[abc].txt\""),
    PEM("/workspace/d.txt", NULL),
    PEM("/workspace/ab.txt", NULL),
    /* under with a trailing slash, several under, none, "/". */
    { &rule_slash, "/workspace", "/workspace/x", NULL },
    { &rule_slash, "/workspace", "/workspace", NULL },
    { &rule_slash, "/workspace", "/workspace2", "\"/workspace2\" is outside /workspace" },
    { &rule_two, "/workspace", "/data/x", NULL },
    { &rule_two, "/workspace", "/etc", "\"/etc\" is outside /workspace, /data" },
    { &rule_two, "/workspace", "/database", "\"/database\" is outside /workspace, /data" },
    { &rule_root, "/workspace", "/etc/passwd", NULL },
    { &rule_root, "/workspace", "../../..", NULL },
    { &rule_deny_only, "/workspace", "/etc/passwd", NULL },
    { &rule_deny_only, "/workspace", "/etc/.env",
      "\"/etc/.env\" matches denied pattern \"**/.env\"" },
    { &rule_deny_all, "/workspace", "/workspace/x",
      "\"/workspace/x\" matches denied pattern \"**\"" },
    { &rule_deny_all, "/workspace", "/", "\"/\" matches denied pattern \"**\"" },
    { &rule_open, "/workspace", "/etc/passwd", NULL },
    { &rule_open, "/workspace", "~/x", "\"~/x\" is home-relative" },
    { &rule_open, "/workspace", "C:\\x", "\"C:\\\\x\" is a windows drive path" },
    /* The working directory. */
    { &rule_ws, NULL, "/workspace/a", NULL },
    { &rule_ws, NULL, "a/b", "\"a/b\" is relative and no working directory is given" },
    { &rule_ws, NULL, "%2fworkspace%2fa",
      "\"%2fworkspace%2fa\" is relative and no working directory is given" },
    { &rule_ws, "/", "workspace/a", NULL },
    { &rule_ws, "/", "a", "\"a\" resolves to /a, outside /workspace" },
    { &rule_ws, "/workspace/sub/", "../x", NULL },
    { &rule_ws, "/workspace/sub", "../../x", "\"../../x\" resolves to /x, outside /workspace" },
    { &rule_ws, "workspace", "a", "working directory \"workspace\" is not an absolute path" },
};

static void test_checks(void)
{
    for (size_t i = 0; i < sizeof check_cases / sizeof check_cases[0]; i++) {
        const struct check_case *c = &check_cases[i];
        char why[512] = "";
        int r = path_rule_check(c->rule, c->value, c->cwd, why, sizeof why);
        if (c->why) {
            ok(r == -1, "%s refused", tap_show(c->value));
            is_str(why, c->why, "  reason");
        } else if (!ok(r == 0, "%s allowed", tap_show(c->value))) {
            printf("#   why: %s\n", why);
        }
    }
}

/* Lengths at and over the limit, and where the limit bites after resolving. */
static void test_lengths(void)
{
    char *v = malloc(5001);
    char why[512] = "";

    if (!v) {
        ok(0, "malloc");
        return;
    }
    memset(v, 'a', 5000);
    v[5000] = '\0';
    memcpy(v, "/workspace/", 11);
    ok(path_rule_check(&rule_ws, v, "/workspace", why, sizeof why) == -1, "5000-byte path refused");
    is_str(why, "path too long (5000 bytes, limit 4096)", "  reason");

    v[4097] = '\0';
    ok(path_rule_check(&rule_ws, v, "/workspace", why, sizeof why) == -1, "4097-byte path refused");
    v[4096] = '\0';
    ok(path_rule_check(&rule_ws, v, "/workspace", why, sizeof why) == 0, "4096-byte path allowed");

    /* Relative: fits as given, not once the working directory is in front. */
    memset(v, 'b', 4090);
    v[4090] = '\0';
    ok(path_rule_check(&rule_ws, v, "/workspace", why, sizeof why) == -1,
       "relative path resolving past 4096 bytes refused");
    ok(strstr(why, "\" resolves to a path over 4096 bytes") != NULL, "  reason: %s", tap_show(why));
    free(v);
}

/* Reasons are bounded and never need a caller's buffer. */
static void test_reason_buffers(void)
{
    char tiny[8];
    ok(path_rule_check(&rule_ws, "/etc", "/workspace", NULL, 0) == -1, "NULL reason buffer");
    ok(path_rule_check(&rule_ws, "/etc", "/workspace", tiny, sizeof tiny) == -1 &&
           strcmp(tiny, "\"/etc\" ") == 0,
       "reason truncated to the buffer");
}

struct norm_case {
    const char *in;
    const char *cwd;
    size_t size;      /* 0: a roomy buffer */
    const char *want; /* NULL: -1 */
};

static const struct norm_case norm_cases[] = {
    { "/", NULL, 0, "/" },
    { "/a/b/", NULL, 0, "/a/b" },
    { "//a//b//", NULL, 0, "/a/b" },
    { "/a/./b/.", NULL, 0, "/a/b" },
    { "/a/b/..", NULL, 0, "/a" },
    { "/..", NULL, 0, "/" },
    { "/../../a", NULL, 0, "/a" },
    { "/a/b/../../../c", NULL, 0, "/c" },
    { "/a/...", NULL, 0, "/a/..." },
    { "/a/..b/.c", NULL, 0, "/a/..b/.c" },
    { "/workspace/", NULL, 0, "/workspace" },
    { "a/b", "/w", 0, "/w/a/b" },
    { "a/b", "/w/", 0, "/w/a/b" },
    { "..", "/w", 0, "/" },
    { "", "/w", 0, "/w" },
    { ".", "/w/", 0, "/w" },
    { "x/../..", "/w/v", 0, "/w" },
    { "a", "/w/../..", 0, "/a" },
    { "/abs", "relative-ignored", 0, "/abs" },
    { "a", NULL, 0, NULL },
    { "a", "rel", 0, NULL },
    { "/abcdef", NULL, 8, "/abcdef" },
    { "/abcdefg", NULL, 8, NULL },
    { "/abcdefgh/..", NULL, 8, NULL },
    { "/", NULL, 2, "/" },
    { "/", NULL, 1, NULL },
};

static void test_normalize(void)
{
    for (size_t i = 0; i < sizeof norm_cases / sizeof norm_cases[0]; i++) {
        const struct norm_case *c = &norm_cases[i];
        char out[64] = "";
        size_t size = c->size ? c->size : sizeof out;
        int r = path_normalize(c->in, c->cwd, out, size);
        char name[160];
        snprintf(name, sizeof name, "normalize \"%s\" in %s (size %zu)", c->in,
                 c->cwd ? c->cwd : "(none)", size);
        if (c->want)
            ok(r == 0 && strcmp(out, c->want) == 0, "%s is %s", name, c->want);
        else
            ok(r == -1, "%s fails", name);
        if (c->want && strcmp(out, c->want) != 0)
            printf("#   got: %s\n", out);
    }
}

struct glob_case {
    const char *pattern;
    const char *path;
    bool match;
};

static const struct glob_case glob_cases[] = {
    { "**/.env", "/workspace/.env", true },
    { "**/.env", "/workspace/x/.env", true },
    { "**/.env", "/.env", true },
    { "**/.env", "/workspace/.env.local", false },
    { "**/.env", "/workspace/.env/x", false },
    { ".env", "/workspace/a/.env", true },
    { "**/.git/**", "/workspace/.git", true },
    { "**/.git/**", "/workspace/a/.git/config", true },
    { "**/.git/**", "/workspace/.git/objects/ab/cdef", true },
    { "**/.git/**", "/workspace/.github", false },
    { "**/.git/**", "/workspace/.gitignore", false },
    { "*.pem", "/a/b/key.pem", true },
    { "*.pem", "/key.pem", true },
    { "*.pem", "/a/.pem", true },
    { "*.pem", "/a/key.pem/x", false },
    { "**.pem", "/a/key.pem", true },
    { "*", "/.hidden", true },
    { "*", "/", false },
    { "/workspace/*", "/workspace/.env", true },
    { "/workspace/*", "/workspace", false },
    { "/workspace/*", "/workspace/a/b", false },
    { "/workspace/**", "/workspace", true },
    { "/workspace/**", "/workspace/a/b", true },
    { "/workspace/**", "/workspace2/a", false },
    { "/workspace/secret/*", "/workspace/secret/k", true },
    { "secret/*", "/workspace/secret/k", true },
    { "secret/*", "/workspace/secret", false },
    { "secret/", "/workspace/secret", true },
    { "**", "/", true },
    { "**", "/a/b/c", true },
    { "/", "/", true },
    { "/", "/a", false },
    { "", "/a", true },
    { "[abc].txt", "/w/b.txt", true },
    { "[abc].txt", "/w/d.txt", false },
    { "[!abc].txt", "/w/d.txt", true },
    { "[^abc].txt", "/w/a.txt", false },
    { "[a-c]x", "/bx", true },
    { "[a-c]x", "/dx", false },
    { "[]]", "/]", true },
    { "[a-]", "/-", true },
    { "[", "/[", true },
    { "[ab", "/[ab", true },
    { "a?c", "/abc", true },
    { "a?c", "/ac", false },
    { "?", "/\xc3\xaf", true },
    { "na?ve.txt", "/w/na\xc3\xafve.txt", true },
    { "[\xc3\xaf]", "/\xc3\xaf", true },
    { "\\*", "/*", true },
    { "\\*", "/a", false },
    { "a\\", "/a\\", true },
    { "*a*b*", "/xaybz", true },
    { "*a*b*", "/xbya", false },
    { "a*", "/a", true },
    { "*x", "/abc", false },
    { "/a/**/b", "/a/b", true },
    { "/a/**/b", "/a/x/y/b", true },
    { "/a/**/b", "/a/x/y/c", false },
    { "/a/**/b/**/c", "/a/1/b/2/b/3/c", true },
    { "**/a/**/a/**/a", "/a/a/a", true },
    { "**/a/**/a/**/a", "/a/x/a", false },
    { "/a//b", "/a/b", true },
};

static void test_globs(void)
{
    for (size_t i = 0; i < sizeof glob_cases / sizeof glob_cases[0]; i++) {
        const struct glob_case *c = &glob_cases[i];
        ok(path_glob_match(c->pattern, c->path) == c->match, "glob \"%s\" %s %s", c->pattern,
           c->match ? "matches" : "does not match", tap_show(c->path));
    }
}

/* Many `**` against a long path: no exponential backtracking. */
static void test_glob_cost(void)
{
    char path[4097];
    for (size_t i = 0; i < 4096; i += 2)
        memcpy(path + i, "/a", 2);
    path[4096] = '\0';
    ok(!path_glob_match("**/a/**/a/**/a/**/a/**/a/**/a/**/b", path), "many ** on 2048 components");
    ok(path_glob_match("**/a/**/a/**/a/**/a/**/a/**/a/**", path), "  and a match");
}

int main(void)
{
    test_checks();
    test_lengths();
    test_reason_buffers();
    test_normalize();
    test_globs();
    test_glob_cost();
    return done_testing();
}
