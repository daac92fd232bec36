/*
 * common/json.h: the one way cordon reads JSON text, whoever wrote it (a
 * decider, an MCP client or server, a daemon client, a pins, signature,
 * approval or evidence file, our own audit log). A key given twice is
 * refused, never resolved: jansson would keep the last one, so
 * {"decision":"deny","decision":"allow_once"} would read as an allow to us
 * and as a deny to a reader that keeps the first. tests/check-layers.sh
 * fails when a json_load*() call appears anywhere but common/json.c.
 */
#pragma once
#include <jansson.h>
#include <stddef.h>

/*
 * Parse the LEN bytes at TEXT with jansson's FLAGS (JSON_DECODE_ANY,
 * JSON_ALLOW_NUL...) and JSON_REJECT_DUPLICATES. A new reference, or NULL
 * with ERROR (may be NULL) saying why: "duplicate object key near ...".
 */
json_t *json_parse_strict(const char *text, size_t len, size_t flags, json_error_t *error);

/* The same of a NUL-terminated string; NULL TEXT gives NULL. */
json_t *json_parse_strict_str(const char *text, size_t flags, json_error_t *error);

/* The same of the file at PATH. */
json_t *json_parse_strict_file(const char *path, size_t flags, json_error_t *error);
