/*
 * common/units.h: parsing and printing of sizes and durations, shared by the
 * policy file and the command-line flags. Pure: no syscalls.
 */
#pragma once
#include <stdint.h>
#include <stddef.h>

/*
 * "64M", "1G", "512K", "4096" (bytes), "1.5G"; binary multiples (K = 1024).
 * On failure returns -1 and writes a reason like
 * `expected a size like 256M, got "lots"` into WHY.
 */
int parse_size(const char *s, uint64_t *out, char *why, size_t why_len);

/* "30s", "2m", "500ms", "1h", "1.5s", bare "10" or "1e2" = seconds; result in ms. */
int parse_duration_ms(const char *s, uint64_t *out, char *why, size_t why_len);

/* A non-negative integer with no suffix ("-0" is 0). */
int parse_count(const char *s, uint64_t *out, char *why, size_t why_len);

/* BYTES as the shortest exact "64M", "1G", "512K", or plain bytes. */
void format_size(uint64_t bytes, char *out, size_t len);

/* MS as the largest exact unit of "2h", "10m", "90s", "1500ms"; parse_duration_ms reads it back. */
void format_duration_ms(uint64_t ms, char *out, size_t len);
