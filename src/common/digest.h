/*
 * common/digest.h: SHA-256 of a JSON value's canonical text, the one form
 * every digest in the audit record takes (policy, network, tools, a tool
 * call's arguments).
 */
#pragma once
#include <jansson.h>

/*
 * SHA-256 of J's compact, key-sorted text. All zero when it cannot be
 * computed (J NULL, out of memory), which no real value hashes to: the
 * callers record a digest and have no way to report a failure.
 */
void json_sha256(const json_t *j, unsigned char out[32]);

/* The same as 64 lower-case hex digits. */
void json_sha256_hex(const json_t *j, char out[65]);
