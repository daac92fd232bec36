/*
 * common/text.h: small pure helpers the parsers share.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Format a reason into WHY (which may be NULL) and return -1. */
int why_printf(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The value of a hex digit, or -1. */
int hex_digit(unsigned char c);

/* N bytes of IN as 2N lower-case hex digits and a NUL in OUT. */
void hex_encode(const unsigned char *in, size_t n, char *out);

/*
 * The text HEX encodes (as hex_encode writes it) into OUT of SIZE bytes,
 * NUL-terminated; false when HEX is malformed, decodes to a NUL, or does
 * not fit.
 */
bool hex_decode_str(const char *hex, char *out, size_t size);

/*
 * Untrusted bytes bound for messages and audit reasons: S[0..LEN) into OUT
 * (SIZE bytes, at least 16) with '"' and '\\' backslash-escaped, everything
 * else but printable ASCII as \xNN (no forged log lines, no bidi tricks),
 * cut with "..." when it does not fit, in double quotes when QUOTED.
 */
const char *text_quote(char *out, size_t size, const char *s, size_t len, bool quoted);

/*
 * Make the message S (NUL-terminated, in a buffer of SIZE bytes, at most
 * 1024) safe to print: every C0 control, DEL, C1 control (U+0080..U+009F)
 * and byte of malformed UTF-8 becomes \xNN, in place, cut with "..." when
 * the result does not fit. Error records and audit reasons quote bytes from
 * files anyone may have written; a terminal must not act on them.
 */
void text_escape_controls(char *s, size_t size);

/*
 * Cut S (NUL-terminated, valid UTF-8 but for its end) before a character
 * that snprintf's truncation left incomplete, so it is valid UTF-8 again.
 */
void utf8_trim_partial(char *s);

/*
 * The length (1 to 4) of the valid UTF-8 sequence at S (N > 0 bytes left),
 * with its code point in *CP (which may be NULL); 0 when it is malformed:
 * a bad or truncated sequence, an overlong form, a surrogate, or a code
 * point past U+10FFFF.
 */
size_t utf8_decode(const char *s, size_t n, uint32_t *cp);

/* Code points in S[0..N), which is valid UTF-8 (as jansson's strings are). */
size_t utf8_length(const char *s, size_t n);

/* FNV-1a of S: a hash for tables of names, not a digest (no secret input). */
uint64_t text_hash64(const char *s);

/* The base64 (RFC 4648, padded) of IN[0..N) into OUT (room for 4 * ((N + 2) / 3) + 1); its length. */
size_t base64_encode(const void *in, size_t n, char *out);

/*
 * Strict base64 of IN[0..N) (padded, no blank, nothing after the padding)
 * into OUT (room for N / 4 * 3); 0 with *OUT_LEN, or -1 when it is not.
 */
int base64_decode(const char *in, size_t n, void *out, size_t *out_len);
