/*
 * broker/ecma_regex.h: JSON Schema patterns are ECMA 262 regexes; this
 * turns one into the PCRE2 pattern that means the same (schema.c compiles
 * and matches it). Pure: no syscalls.
 */
#pragma once
#include "common/strbuf.h"

#include <stddef.h>

/*
 * The PCRE2 pattern for ECMA pattern SRC (N bytes) appended to OUT: 0, or
 * -1 with *BAD the escape refused (one PCRE2 would read differently). OUT's
 * FAILED says whether memory ran out.
 */
int ecma_to_pcre(const char *src, size_t n, struct strbuf *out, char *bad);
