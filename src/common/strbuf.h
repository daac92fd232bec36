/*
 * common/strbuf.h: a growing string. A failed allocation sticks (FAILED),
 * so a caller checks once at the end; the text is NUL-terminated.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct strbuf {
    char *s;
    size_t len, cap;
    bool failed;
};

void strbuf_add(struct strbuf *b, const char *data, size_t n);
void strbuf_puts(struct strbuf *b, const char *s);
void strbuf_printf(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* DATA as valid UTF-8 (JSON strings must be): each bad byte becomes U+FFFD. */
void strbuf_add_utf8(struct strbuf *b, const char *data, size_t n);
void strbuf_free(struct strbuf *b);
