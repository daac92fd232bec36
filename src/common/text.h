/*
 * common/text.h: small pure helpers the parsers share.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* Format a reason into WHY (which may be NULL) and return -1. */
int why_printf(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The value of a hex digit, or -1. */
int hex_digit(unsigned char c);

/*
 * Untrusted bytes bound for messages and audit reasons: S[0..LEN) into OUT
 * (SIZE bytes, at least 16) with '"' and '\\' backslash-escaped, everything
 * else but printable ASCII as \xNN (no forged log lines, no bidi tricks),
 * cut with "..." when it does not fit, in double quotes when QUOTED.
 */
const char *text_quote(char *out, size_t size, const char *s, size_t len, bool quoted);

/*
 * Cut S (NUL-terminated, valid UTF-8 but for its end) before a character
 * that snprintf's truncation left incomplete, so it is valid UTF-8 again.
 */
void utf8_trim_partial(char *s);
