/*
 * common/text.h: small pure helpers the parsers share.
 */
#pragma once
#include <stddef.h>

/* Format a reason into WHY (which may be NULL) and return -1. */
int why_printf(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The value of a hex digit, or -1. */
int hex_digit(unsigned char c);
