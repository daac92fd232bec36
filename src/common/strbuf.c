/*
 * common/strbuf.c: a growing string (see strbuf.h). Pure: memory only.
 */
#include "common/strbuf.h"

#include "common/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void strbuf_add(struct strbuf *b, const char *data, size_t n)
{
    if (b->failed || n == 0)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->len, data, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void strbuf_printf(struct strbuf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        strbuf_add(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    strbuf_add(b, big, (size_t)n);
    free(big);
}

void strbuf_puts(struct strbuf *b, const char *s)
{
    strbuf_add(b, s, strlen(s));
}

void strbuf_free(struct strbuf *b)
{
    free(b->s);
    *b = (struct strbuf){ 0 };
}

void strbuf_add_utf8(struct strbuf *b, const char *data, size_t n)
{
    size_t run = 0, i = 0;
    while (i < n) {
        size_t len = utf8_decode(data + i, n - i, NULL);
        if (len) {
            i += len;
            continue;
        }
        strbuf_add(b, data + run, i - run);
        strbuf_add(b, "\xef\xbf\xbd", 3);
        run = ++i;
    }
    strbuf_add(b, data + run, n - run);
}
