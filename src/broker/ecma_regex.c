/*
 * broker/ecma_regex.c: JSON Schema's ECMA 262 patterns rewritten for PCRE2
 * (see ecma_regex.h). Pure: no syscalls.
 */
#include "broker/ecma_regex.h"

#include <string.h>

/*
 * JSON Schema patterns are ECMA 262 regexes. PCRE2 reads most of them the
 * same way; where it does not, the pattern is rewritten to what ECMA means:
 * \d \w \s and their negations are ECMA's exact sets (\d and \w ASCII, \s
 * ECMA's white space and line terminators), '.' excludes exactly ECMA's
 * line terminators, '[' inside a class is a literal, and a '-' next to a
 * class escape is a literal (Annex B) where PCRE2 would see a range or an
 * error. Without PCRE2_UCP, \b too is ECMA's ASCII word boundary.
 */
static const char SET_SPACE[] = "\\t\\n\\x0b\\f\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029"
                                "\\u202f\\u205f\\u3000\\ufeff";
static const char SET_NOT_SPACE[] = "\\x00-\\x08\\x0e-\\x1f\\x21-\\x9f\\xa1-\\u167f\\u1681-\\u1fff"
                                    "\\u200b-\\u2027\\u202a-\\u202e\\u2030-\\u205e\\u2060-\\u2fff"
                                    "\\u3001-\\ufefe\\uff00-\\u{10ffff}";
static const char SET_DIGIT[] = "0-9";
static const char SET_NOT_DIGIT[] = "\\x00-\\x2f\\x3a-\\u{10ffff}";
static const char SET_WORD[] = "A-Za-z0-9_";
static const char SET_NOT_WORD[] = "\\x00-\\x2f\\x3a-\\x40\\x5b-\\x5e\\x60\\x7b-\\u{10ffff}";
static const char ANY_CHAR[] = "[^\\n\\r\\u2028\\u2029]";

/* The class body for escape \C, or NULL when C is no class escape. */
static const char *class_escape(char c)
{
    switch (c) {
    case 'd':
        return SET_DIGIT;
    case 'D':
        return SET_NOT_DIGIT;
    case 'w':
        return SET_WORD;
    case 'W':
        return SET_NOT_WORD;
    case 's':
        return SET_SPACE;
    case 'S':
        return SET_NOT_SPACE;
    default:
        return NULL;
    }
}

/*
 * Copy the escape \C (no class escape). ECMA's \v is one character; the
 * escapes that are PCRE2's own (\h is white space there, a plain 'h' in
 * ECMA without the u flag) are refused: 0, or -1 with *BAD set.
 */
static int copy_escape(struct strbuf *out, char c, char *bad)
{
    if (c == 'v') {
        strbuf_puts(out, "\\x0b");
        return 0;
    }
    if (c && strchr("ACEGHKNQRVXZaeghoz", c)) {
        *bad = c;
        return -1;
    }
    strbuf_puts(out, "\\");
    strbuf_add(out, &c, 1);
    return 0;
}

int ecma_to_pcre(const char *src, size_t n, struct strbuf *out, char *bad)
{
    /* Inside a class, what the last token was decides what a '-' means. */
    enum { AT_START, AT_ATOM, AT_HYPHEN, AT_RANGE_END, AT_SET } last = AT_START;
    bool in_class = false;

    for (size_t i = 0; i < n; i++) {
        char c = src[i];
        const char *set = c == '\\' && i + 1 < n ? class_escape(src[i + 1]) : NULL;
        if (!in_class) {
            if (set) {
                bool negated = src[i + 1] == 'D' || src[i + 1] == 'W' || src[i + 1] == 'S';
                /* Outside a class, the negations read better negated. */
                strbuf_puts(out, "[");
                strbuf_puts(out, negated ? "^" : "");
                strbuf_puts(out, negated ? class_escape((char)(src[i + 1] | 0x20)) : set);
                strbuf_puts(out, "]");
                i++;
            } else if (c == '\\' && i + 1 < n) {
                if (copy_escape(out, src[++i], bad) < 0)
                    return -1;
            } else if (c == '[') {
                in_class = true;
                last = AT_START;
                strbuf_puts(out, "[");
                if (i + 1 < n && src[i + 1] == '^') {
                    strbuf_puts(out, "^");
                    i++;
                }
            } else if (c == '.') {
                strbuf_puts(out, ANY_CHAR);
            } else {
                strbuf_add(out, &c, 1);
            }
            continue;
        }
        if (set) {
            if (last == AT_HYPHEN && !out->failed) {
                out->len--; /* "a-\d" is 'a', '-' and digits, no range */
                strbuf_puts(out, "\\-");
            }
            strbuf_puts(out, set);
            last = AT_SET;
            i++;
        } else if (c == '\\' && i + 1 < n) {
            if (copy_escape(out, src[++i], bad) < 0)
                return -1;
            last = last == AT_HYPHEN ? AT_RANGE_END : AT_ATOM;
        } else if (c == ']') {
            /* PCRE2_ALLOW_EMPTY_CLASS: "[]" and "[^]" close at once, as in ECMA. */
            strbuf_puts(out, "]");
            in_class = false;
        } else if (c == '[') {
            strbuf_puts(out, "\\["); /* no POSIX "[:alpha:]" in ECMA */
            last = last == AT_HYPHEN ? AT_RANGE_END : AT_ATOM;
        } else if (c == '-' && (last == AT_SET || last == AT_RANGE_END)) {
            strbuf_puts(out, "\\-");
            last = AT_ATOM;
        } else if (c == '-' && last == AT_ATOM) {
            strbuf_puts(out, "-");
            last = AT_HYPHEN;
        } else {
            strbuf_add(out, &c, 1);
            last = last == AT_HYPHEN ? AT_RANGE_END : AT_ATOM;
        }
    }
    return 0;
}
