/*
 * broker/paths.c: path-like MCP tool arguments judged against `under` and
 * `deny`. Runs in the broker on bytes the sandboxed client chose, before the
 * call reaches the server. We cannot know how the server reads a path (as
 * POSIX text, as a URI, percent-decoded, through a normalising file system),
 * so we expand the value into every reading a plausible server would make
 * and pass it only when all of them pass. Pure: no syscalls.
 */
#include "broker/paths.h"

#include "common/cleanup.h"
#include "common/err.h"
#include "common/text.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* As PATH_MAX: longer paths fail in the kernel anyway. */
#define VALUE_MAX 4096
#define DECODE_ROUNDS_MAX 4
/* Real values have a handful of readings; only crafted ones get near this. */
#define READINGS_MAX 64
#define SHOW_SIZE 128
#define UNDER_LIST_SIZE 256
/* Code points for bytes that are no valid UTF-8: equal only to themselves. */
#define BAD_BYTE_BASE 0x110000

/* How a reading was derived from the value (bits, combined along a chain). */
enum reading_kind {
    READ_URI = 1 << 0,
    READ_DECODE = 1 << 1,
    READ_FOLD = 1 << 2,
    READ_BACKSLASH = 1 << 3,
    READ_TRIM = 1 << 4,
};

struct reading {
    char *text;
    size_t len;       /* a refused reading may hold a NUL */
    unsigned kinds;   /* 0 for the value itself */
    unsigned decodes; /* percent-decoding rounds along the chain */
};

struct readings {
    struct reading r[READINGS_MAX];
    size_t n;
};

static void readings_release(struct readings *rs)
{
    for (size_t i = 0; i < rs->n; i++)
        free(rs->r[i].text);
}

/*
 * Untrusted bytes end up in audit reasons: escape what is not printable
 * ASCII (no forged log lines, no bidi tricks) and cap the length.
 */
static const char *show(char out[SHOW_SIZE], const char *s, size_t len, bool quoted)
{
    return text_quote(out, SHOW_SIZE, s, len, quoted);
}

static const char *show_str(char out[SHOW_SIZE], const char *s, bool quoted)
{
    return show(out, s, strlen(s), quoted);
}

/* ---- text ------------------------------------------------------------- */

/*
 * The code point at S[*I] (of LEN bytes), advancing *I; a malformed
 * sequence (overlong, surrogate, truncated, past U+10FFFF) yields
 * BAD_BYTE_BASE + its first byte and advances one byte.
 */
static int32_t utf8_next(const char *s, size_t len, size_t *i)
{
    uint32_t cp = 0;
    size_t n = utf8_decode(s + *i, len - *i, &cp);
    if (n == 0)
        return BAD_BYTE_BASE + (unsigned char)s[(*i)++];
    *i += n;
    return (int32_t)cp;
}

enum text_problem {
    TEXT_OK,
    TEXT_CONTROL,
    TEXT_UTF8,
    TEXT_HOME,
    TEXT_DRIVE,
    TEXT_UNC,
    TEXT_URI_HOST,
};

static const char *text_problem_what(enum text_problem p)
{
    switch (p) {
    case TEXT_CONTROL:
        return "has a control character";
    case TEXT_UTF8:
        return "is not valid UTF-8";
    case TEXT_HOME:
        return "is home-relative";
    case TEXT_DRIVE:
        return "is a windows drive path";
    case TEXT_UNC:
        return "is a windows UNC path";
    case TEXT_URI_HOST:
        return "is a file URI with a host";
    case TEXT_OK:
        break;
    }
    return "is refused";
}

static bool is_sep(char c)
{
    return c == '/' || c == '\\';
}

/* What refuses S (LEN bytes, maybe holding NULs) whatever the rule says. */
static enum text_problem text_check(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return TEXT_CONTROL;
    }
    for (size_t i = 0; i < len;) {
        int32_t cp = utf8_next(s, len, &i);
        if (cp >= BAD_BYTE_BASE)
            return TEXT_UTF8;
        if (cp >= 0x80 && cp <= 0x9f)
            return TEXT_CONTROL;
    }
    /* Expanded by shells and by servers that call expandHome(). */
    if (s[0] == '~')
        return TEXT_HOME;
    /* C:\x, C:/x and drive-relative C:x: no POSIX server means these. */
    if (len >= 2 && ((s[0] | 0x20) >= 'a' && (s[0] | 0x20) <= 'z') && s[1] == ':')
        return TEXT_DRIVE;
    /* \\server\share, \\?\C:, //server with a backslash either side. */
    if (len >= 2 && is_sep(s[0]) && is_sep(s[1]) && (s[0] == '\\' || s[1] == '\\'))
        return TEXT_UNC;
    return TEXT_OK;
}

/* ---- readings ---------------------------------------------------------- */

/* One round of %XX decoding; malformed escapes stay literal. */
static size_t decode_once(const char *in, char *out)
{
    size_t o = 0;
    for (size_t i = 0; in[i]; i++) {
        int hi, lo;
        if (in[i] == '%' && (hi = hex_digit((unsigned char)in[i + 1])) >= 0 &&
            (lo = hex_digit((unsigned char)in[i + 2])) >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = in[i];
        }
    }
    out[o] = '\0';
    return o;
}

/*
 * The NFKC-style mappings that matter to a path: fullwidth ASCII, and the
 * dots, slashes, backslashes and percent signs a normalising server or file
 * system would turn into the real ones. IN is valid UTF-8.
 */
static size_t fold(const char *in, char *out)
{
    size_t len = strlen(in), o = 0;
    for (size_t i = 0; i < len;) {
        size_t start = i;
        int32_t cp = utf8_next(in, len, &i);
        const char *to = NULL;
        char one[2] = "";
        if (cp >= 0xff01 && cp <= 0xff5e) {
            one[0] = (char)(cp - 0xfee0);
            to = one;
        } else {
            switch (cp) {
            case 0x2024: /* ONE DOT LEADER */
            case 0xfe52: /* SMALL FULL STOP */
                to = ".";
                break;
            case 0x2025: /* TWO DOT LEADER */
            case 0xfe30: /* VERTICAL TWO DOT LEADER */
                to = "..";
                break;
            case 0x2026: /* HORIZONTAL ELLIPSIS */
                to = "...";
                break;
            case 0x2215: /* DIVISION SLASH */
            case 0x2044: /* FRACTION SLASH */
            case 0x29f8: /* BIG SOLIDUS */
                to = "/";
                break;
            case 0xfe68: /* SMALL REVERSE SOLIDUS */
            case 0x2216: /* SET MINUS */
                to = "\\";
                break;
            case 0xfe6a: /* SMALL PERCENT SIGN */
                to = "%";
                break;
            }
        }
        if (to) {
            size_t n = strlen(to);
            memcpy(out + o, to, n);
            o += n;
        } else {
            memcpy(out + o, in + start, i - start);
            o += i - start;
        }
    }
    out[o] = '\0';
    return o;
}

static size_t backslash_to_slash(const char *in, char *out)
{
    size_t o = 0;
    for (; in[o]; o++)
        out[o] = in[o] == '\\' ? '/' : in[o];
    out[o] = '\0';
    return o;
}

/* As JavaScript's String.prototype.trim(): servers written in node may. */
static bool js_space(int32_t cp)
{
    return cp == ' ' || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
        cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000 ||
        cp == 0xfeff;
}

static size_t trim(const char *in, char *out)
{
    size_t len = strlen(in), start = 0, end = 0;
    bool seen = false;
    for (size_t i = 0; i < len;) {
        size_t at = i;
        if (!js_space(utf8_next(in, len, &i))) {
            if (!seen)
                start = at;
            seen = true;
            end = i;
        }
    }
    memcpy(out, in + start, end - start);
    out[end - start] = '\0';
    return end - start;
}

/*
 * file:///p, file://localhost/p, file:/p and file:p (as WHATWG URL parsers
 * read them) into the path, with the ?query/#fragment cut (CUT) or kept as
 * a naive server would. 0 when IN is no file URI, 1 with OUT filled, -1 for
 * a URI naming another host (a UNC share on Windows, an error elsewhere).
 */
static int file_uri_path(const char *in, bool cut, char *out, size_t *out_len)
{
    const char *p;
    size_t n, o = 0;

    if (strncasecmp(in, "file:", 5) != 0)
        return 0;
    p = in + 5;
    if (is_sep(p[0]) && is_sep(p[1])) {
        const char *host = p + 2;
        size_t hn = strcspn(host, "/\\?#");
        if (hn && !(hn == 9 && strncasecmp(host, "localhost", 9) == 0))
            return -1;
        p = host + hn;
    }
    n = cut ? strcspn(p, "?#") : strlen(p);
    if (n == 0 || !is_sep(p[0]))
        out[o++] = '/';
    memcpy(out + o, p, n);
    o += n;
    out[o] = '\0';
    *out_len = o;
    return 1;
}

static const char *reading_verb(unsigned kinds)
{
    switch (kinds) {
    case READ_URI:
        return "names";
    case READ_DECODE:
        return "decodes to";
    case READ_FOLD:
        return "folds to";
    case READ_TRIM:
        return "trims to";
    default:
        return "reads as";
    }
}

/*
 * Why a reading fails, in one shape: the value, how it was read when not
 * as itself, then WHAT ("resolves to /x, outside /w", "is a windows drive
 * path").
 */
static int refuse(char *why, size_t len, const char *value, const struct reading *rd,
                  const char *what)
{
    char qv[SHOW_SIZE], qr[SHOW_SIZE];
    show_str(qv, value, true);
    if (rd->kinds == 0)
        return why_printf(why, len, "%s %s", qv, what);
    return why_printf(why, len, "%s %s %s, which %s", qv, reading_verb(rd->kinds),
                      show(qr, rd->text, rd->len, false), what);
}

/*
 * Add TEXT (LEN bytes), read from FROM by KIND, unless already known. A
 * reading that is refused whatever the rule says refuses the value here.
 */
static int add_reading(struct readings *rs, const struct reading *from, unsigned kind,
                       const char *text, size_t len, const char *value, char *why, size_t why_len)
{
    struct reading rd = {
        .text = (char *)text, /* borrowed for a reason; copied when kept */
        .len = len,
        .kinds = from ? from->kinds | kind : 0,
        .decodes = from ? from->decodes + (kind == READ_DECODE) : 0,
    };
    enum text_problem p = text_check(text, len);
    char qv[SHOW_SIZE];

    if (p != TEXT_OK)
        return refuse(why, why_len, value, &rd, text_problem_what(p));
    for (size_t i = 0; i < rs->n; i++)
        if (strcmp(rs->r[i].text, text) == 0)
            return 0;
    if (rd.decodes > DECODE_ROUNDS_MAX)
        return why_printf(why, why_len, "%s is percent-encoded more than %d times",
                          show_str(qv, value, true), DECODE_ROUNDS_MAX);
    if (rs->n == READINGS_MAX)
        return why_printf(why, why_len, "%s has more than %d readings", show_str(qv, value, true),
                          READINGS_MAX);
    rd.text = strndup(text, len);
    if (!rd.text)
        return why_printf(why, why_len, "out of memory");
    rs->r[rs->n++] = rd;
    return 0;
}

/*
 * Every reading of VALUE, breadth first: the value itself comes first and
 * each reading is named by its shortest derivation.
 */
static int expand(struct readings *rs, const char *value, char *why, size_t why_len)
{
    char buf[VALUE_MAX + 2];

    TRY(add_reading(rs, NULL, 0, value, strlen(value), value, why, why_len));
    for (size_t i = 0; i < rs->n; i++) {
        const struct reading *from = &rs->r[i]; /* rs->r is fixed: adding does not move it */
        size_t n = 0;

        for (int cut = 1; cut >= 0; cut--) {
            int u = file_uri_path(from->text, cut, buf, &n);
            if (u < 0)
                return refuse(why, why_len, value, from, text_problem_what(TEXT_URI_HOST));
            if (u > 0)
                TRY(add_reading(rs, from, READ_URI, buf, n, value, why, why_len));
        }
        n = decode_once(from->text, buf);
        TRY(add_reading(rs, from, READ_DECODE, buf, n, value, why, why_len));
        n = fold(from->text, buf);
        TRY(add_reading(rs, from, READ_FOLD, buf, n, value, why, why_len));
        n = backslash_to_slash(from->text, buf);
        TRY(add_reading(rs, from, READ_BACKSLASH, buf, n, value, why, why_len));
        n = trim(from->text, buf);
        TRY(add_reading(rs, from, READ_TRIM, buf, n, value, why, why_len));
    }
    return 0;
}

/* ---- paths ------------------------------------------------------------ */

/* Append the components of S to OUT[0..*O), resolving "." and "..". */
static int push_components(const char *s, char *out, size_t len, size_t *o)
{
    while (*s) {
        const char *end;
        size_t n;

        while (*s == '/')
            s++;
        if (!*s)
            break;
        end = strchrnul(s, '/');
        n = (size_t)(end - s);
        if (n == 2 && s[0] == '.' && s[1] == '.') {
            while (*o > 0 && out[*o - 1] != '/')
                (*o)--;
            if (*o > 0)
                (*o)--;
        } else if (!(n == 1 && s[0] == '.')) {
            /* The slash, the component and a NUL must fit. */
            if (*o + 1 + n + 1 > len)
                return -1;
            out[(*o)++] = '/';
            memcpy(out + *o, s, n);
            *o += n;
        }
        s = end;
    }
    return 0;
}

int path_normalize(const char *in, const char *cwd, char *out, size_t len)
{
    size_t o = 0;

    if (!in || !out || len < 2)
        return -1;
    if (in[0] != '/') {
        if (!cwd || cwd[0] != '/')
            return -1;
        TRY(push_components(cwd, out, len, &o));
    }
    TRY(push_components(in, out, len, &o));
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    return 0;
}

/* Inside DIR (normalised) by whole components; DIR itself counts. */
static bool is_under(const char *dir, const char *path)
{
    size_t n = strlen(dir);
    if (n == 1)
        return true;
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool under_any(const struct path_rule *r, const char *path)
{
    char dir[VALUE_MAX + 1];

    if (r->n_under == 0)
        return true;
    for (size_t i = 0; i < r->n_under; i++) {
        /* An entry that is not absolute contains nothing. */
        if (r->under[i][0] == '/' && path_normalize(r->under[i], NULL, dir, sizeof dir) == 0 &&
            is_under(dir, path))
            return true;
    }
    return false;
}

/* "/workspace, /data" for a reason, normalised and escaped. */
static const char *under_list(const struct path_rule *r, char out[UNDER_LIST_SIZE])
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->n_under && o < UNDER_LIST_SIZE; i++) {
        char dir[VALUE_MAX + 1], shown[SHOW_SIZE];
        if (path_normalize(r->under[i], NULL, dir, sizeof dir) < 0)
            snprintf(dir, sizeof dir, "%s", r->under[i]);
        int k = snprintf(out + o, UNDER_LIST_SIZE - o, "%s%s", i ? ", " : "",
                         show_str(shown, dir, false));
        if (k < 0)
            break;
        o += (size_t)k;
    }
    return out;
}

/* Judge one reading's location: inside `under`, outside every `deny`. */
static int check_location(const struct path_rule *r, const char *value, const struct reading *rd,
                          const char *cwd, char *why, size_t len)
{
    char path[VALUE_MAX + 1], what[2 * SHOW_SIZE + UNDER_LIST_SIZE + 64];
    char qp[SHOW_SIZE], qd[SHOW_SIZE], list[UNDER_LIST_SIZE];
    bool moved;

    if (rd->text[0] != '/' && !cwd)
        return refuse(why, len, value, rd, "is relative and no working directory is given");
    if (path_normalize(rd->text, cwd, path, sizeof path) < 0)
        return refuse(why, len, value, rd, "resolves to a path over 4096 bytes");
    moved = strcmp(path, rd->text) != 0;
    if (!under_any(r, path)) {
        if (moved)
            snprintf(what, sizeof what, "resolves to %s, outside %s", show_str(qp, path, false),
                     under_list(r, list));
        else
            snprintf(what, sizeof what, "is outside %s", under_list(r, list));
        return refuse(why, len, value, rd, what);
    }
    for (size_t i = 0; i < r->n_deny; i++) {
        if (!path_glob_match(r->deny[i], path))
            continue;
        if (moved)
            snprintf(what, sizeof what, "resolves to %s, matching denied pattern %s",
                     show_str(qp, path, false), show_str(qd, r->deny[i], true));
        else
            snprintf(what, sizeof what, "matches denied pattern %s",
                     show_str(qd, r->deny[i], true));
        return refuse(why, len, value, rd, what);
    }
    return 0;
}

int path_rule_check(const struct path_rule *r, const char *value, const char *cwd, char *why,
                    size_t len)
{
    _cleanup_(readings_release) struct readings rs = { .n = 0 };
    char cwd_norm[VALUE_MAX + 1], qv[SHOW_SIZE];
    size_t n;

    if (!value || !*value)
        return why_printf(why, len, "empty path");
    n = strlen(value);
    if (n > VALUE_MAX)
        return why_printf(why, len, "path too long (%zu bytes, limit %d)", n, VALUE_MAX);
    if (cwd && path_normalize(cwd, NULL, cwd_norm, sizeof cwd_norm) < 0)
        return why_printf(why, len, "working directory %s is not an absolute path",
                          show_str(qv, cwd, true));
    TRY(expand(&rs, value, why, len));
    for (size_t i = 0; i < rs.n; i++)
        TRY(check_location(r, value, &rs.r[i], cwd ? cwd_norm : NULL, why, len));
    return 0;
}

/* ---- globs ------------------------------------------------------------ */

/* A pattern's code point at P[*I], taking a backslash as an escape. */
static int32_t pattern_next(const char *p, size_t pn, size_t *i)
{
    if (p[*i] == '\\' && *i + 1 < pn)
        (*i)++;
    return utf8_next(p, pn, i);
}

/*
 * Whether C is in the class opening at P[*I] ('['), advancing *I past its
 * ']'; -1 when the class is unterminated (then '[' is literal).
 */
static int class_match(const char *p, size_t pn, size_t *i, int32_t c)
{
    size_t k = *i + 1;
    bool negate = false, hit = false, first = true;

    if (k < pn && (p[k] == '!' || p[k] == '^')) {
        negate = true;
        k++;
    }
    while (k < pn) {
        int32_t lo, hi;
        if (p[k] == ']' && !first) {
            *i = k + 1;
            return hit != negate;
        }
        first = false;
        lo = hi = pattern_next(p, pn, &k);
        if (k + 1 < pn && p[k] == '-' && p[k + 1] != ']') {
            k++;
            hi = pattern_next(p, pn, &k);
        }
        if (lo <= c && c <= hi)
            hit = true;
    }
    return -1;
}

/* One pattern element at P[*PI] against one character at S[*SI]. */
static bool match_one(const char *p, size_t pn, size_t *pi, const char *s, size_t sn, size_t *si)
{
    int32_t c = utf8_next(s, sn, si);

    if (p[*pi] == '?') {
        (*pi)++;
        return true;
    }
    if (p[*pi] == '[') {
        int m = class_match(p, pn, pi, c);
        if (m >= 0)
            return m;
    }
    return pattern_next(p, pn, pi) == c;
}

/* A component pattern against one component, '*' by backtracking. */
static bool component_match(const char *p, size_t pn, const char *s, size_t sn)
{
    size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0;

    while (si < sn) {
        if (pi < pn && p[pi] == '*') {
            star_p = ++pi;
            star_s = si;
            continue;
        }
        if (pi < pn) {
            size_t pj = pi, sj = si;
            if (match_one(p, pn, &pj, s, sn, &sj)) {
                pi = pj;
                si = sj;
                continue;
            }
        }
        if (star_p == SIZE_MAX)
            return false;
        (void)utf8_next(s, sn, &star_s);
        pi = star_p;
        si = star_s;
    }
    while (pi < pn && p[pi] == '*')
        pi++;
    return pi == pn;
}

/* The next component of S from *AT, skipping slashes; false at the end. */
static bool next_component(const char *s, size_t *at, const char **c, size_t *n)
{
    size_t i = *at, j;
    while (s[i] == '/')
        i++;
    if (!s[i]) {
        *at = i;
        return false;
    }
    for (j = i; s[j] && s[j] != '/'; j++)
        ;
    *c = s + i;
    *n = j - i;
    *at = j;
    return true;
}

static bool is_globstar(const char *c, size_t n)
{
    return n == 2 && c[0] == '*' && c[1] == '*';
}

/*
 * Components as wildcard items: `**` like `*` over a string, everything else
 * matching exactly one component; so the last `**` seen is the only
 * backtracking point needed, and the match is O(pattern * path).
 */
bool path_glob_match(const char *pattern, const char *path)
{
    size_t pp = 0, sp = 0, star_pp = SIZE_MAX, star_sp = 0;
    const char *pc, *sc;
    size_t pn, sn;

    /* Unanchored: an implicit leading `**`. */
    if (pattern[0] != '/')
        star_pp = 0;
    for (;;) {
        size_t sq = sp;
        if (!next_component(path, &sq, &sc, &sn))
            break;
        if (next_component(pattern, &pp, &pc, &pn)) {
            if (is_globstar(pc, pn)) {
                star_pp = pp;
                star_sp = sp;
                continue;
            }
            if (component_match(pc, pn, sc, sn)) {
                sp = sq;
                continue;
            }
        }
        if (star_pp == SIZE_MAX)
            return false;
        /* Let the last `**` take one more component and retry after it. */
        (void)next_component(path, &star_sp, &sc, &sn);
        sp = star_sp;
        pp = star_pp;
    }
    while (next_component(pattern, &pp, &pc, &pn))
        if (!is_globstar(pc, pn))
            return false;
    return true;
}
