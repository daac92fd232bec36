/*
 * broker/schema.h: checks a tools/call's arguments against the tool's own
 * inputSchema (the JSON Schema subset MCP servers publish: draft-04/07 and
 * 2020-12 as zod-to-json-schema and zod's toJSONSchema write them). Runs in
 * the broker before a call is forwarded. Pure: no syscalls, no I/O.
 */
#pragma once
#include <jansson.h>
#include <stddef.h>

/*
 * Check INSTANCE against SCHEMA. 0 when valid; -1 with a one-line reason in
 * WHY (which may be NULL) naming the JSON path of the first failure, e.g.
 * `arguments.path: expected a string, got number`. ROOT_NAME names the
 * top-level value in messages ("arguments").
 *
 * Fails closed: a schema it cannot check (a keyword it does not implement, a
 * pattern PCRE2 refuses or a match that hits its limits, an unresolvable
 * $ref, nesting deeper than 64, a malformed keyword) also returns -1.
 */
int schema_check(const json_t *schema, const json_t *instance, const char *root_name, char *why,
                 size_t len);
