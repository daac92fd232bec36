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

void hex_encode(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

bool hex_decode_str(const char *hex, char *out, size_t size)
{
    size_t n = strlen(hex);
    if (n % 2 || n / 2 >= size)
        return false;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hex_digit((unsigned char)hex[2 * i]),
            lo = hex_digit((unsigned char)hex[2 * i + 1]);
        if (hi < 0 || lo < 0 || (hi | lo) == 0)
            return false;
        out[i] = (char)(hi << 4 | lo);
    }
    out[n / 2] = '\0';
    return true;
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

void text_escape_controls(char *s, size_t size)
{
    char in[1024];
    size_t n = strlen(s);
    if (size < 16 || size > sizeof in)
        return;
    memcpy(in, s, n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t len = utf8_decode(in + i, n - i, &cp);
        bool bad = len == 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
        if (bad)
            len = 1;
        /* Room for this, and for "..." and the NUL if more follows: so "..." always fits. */
        if (o + (bad ? 4 : len) + (i + len < n ? 4 : 1) > size) {
            memcpy(s + o, "...", 3);
            o += 3;
            break;
        }
        if (bad) {
            o += (size_t)snprintf(s + o, 5, "\\x%02x", (unsigned char)in[i]);
        } else {
            memcpy(s + o, in + i, len);
            o += len;
        }
        i += len;
    }
    s[o] = '\0';
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

size_t utf8_decode(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t len;
    uint32_t c, min;
    if (u[0] < 0x80) {
        len = 1, c = u[0], min = 0;
    } else if ((u[0] & 0xe0) == 0xc0) {
        len = 2, c = u[0] & 0x1f, min = 0x80;
    } else if ((u[0] & 0xf0) == 0xe0) {
        len = 3, c = u[0] & 0x0f, min = 0x800;
    } else if ((u[0] & 0xf8) == 0xf0) {
        len = 4, c = u[0] & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((u[k] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (u[k] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    if (cp)
        *cp = c;
    return len;
}

size_t utf8_length(const char *s, size_t n)
{
    size_t cps = 0;
    for (size_t i = 0; i < n; i++)
        cps += ((unsigned char)s[i] & 0xc0) != 0x80;
    return cps;
}

uint64_t text_hash64(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encode(const void *in, size_t n, char *out)
{
    const unsigned char *p = in;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
            (i + 2 < n ? p[i + 2] : 0);
        out[o++] = b64_alphabet[v >> 18 & 63];
        out[o++] = b64_alphabet[v >> 12 & 63];
        out[o++] = i + 1 < n ? b64_alphabet[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? b64_alphabet[v & 63] : '=';
    }
    out[o] = '\0';
    return o;
}

static int b64_value(char c)
{
    const char *at = c ? strchr(b64_alphabet, c) : NULL;
    return at ? (int)(at - b64_alphabet) : -1;
}

int base64_decode(const char *in, size_t n, void *out, size_t *out_len)
{
    unsigned char *o = out;
    size_t k = 0;
    if (n % 4)
        return -1;
    for (size_t i = 0; i < n; i += 4) {
        bool last = i + 4 == n;
        int pad = (in[i + 3] == '=') + (in[i + 2] == '=' && in[i + 3] == '=');
        int v[4];
        for (int j = 0; j < 4; j++)
            v[j] = j >= 4 - pad ? 0 : b64_value(in[i + j]);
        if ((pad && !last) || v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0)
            return -1;
        uint32_t w =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        o[k++] = (unsigned char)(w >> 16);
        if (pad < 2)
            o[k++] = (unsigned char)(w >> 8);
        if (pad < 1)
            o[k++] = (unsigned char)w;
    }
    *out_len = k;
    return 0;
}
