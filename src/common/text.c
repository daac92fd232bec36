/*
 * common/text.c: small pure helpers the parsers share.
 */
#include "common/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int why_printf(char *why, size_t len, const char *fmt, ...)
{
    if (why && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int hex_digit(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

const char *text_quote(char *out, size_t size, const char *s, size_t len, bool quoted)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (quoted)
        out[o++] = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        /* Leave room for the longest escape, "...", the quote and the NUL. */
        if (o + 4 + 3 + 2 > size) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            out[o++] = (char)c;
        }
    }
    if (quoted)
        out[o++] = '"';
    out[o] = '\0';
    return out;
}

void utf8_trim_partial(char *s)
{
    size_t n = strlen(s), lead = n;
    while (lead > 0 && ((unsigned char)s[lead - 1] & 0xc0) == 0x80)
        lead--;
    if (lead == 0 || (unsigned char)s[lead - 1] < 0xc0)
        return;
    unsigned char c = (unsigned char)s[lead - 1];
    size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    if (n - (lead - 1) < need)
        s[lead - 1] = '\0';
}
