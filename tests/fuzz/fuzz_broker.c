/*
 * tests/fuzz/fuzz_broker.c: the broker's judges on hostile input. The first
 * line of each input is a path for path_rule_check (and path_normalize);
 * the rest, when it parses as JSON, is both a schema and an instance for
 * schema_check and a message for rpc_classify. Traps when a path the rule
 * allows normalises outside the rule's directory, or when a reason is not
 * one printable line.
 */
#include "common/jsonrpc.h"
#include "broker/paths.h"
#include "broker/schema.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_reason(const char *why)
{
    for (const char *c = why; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f)
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t plen = nl ? (size_t)(nl - data) : size;
    char *path = strndup((const char *)data, plen);
    if (!path)
        return 0;
    static const char *const under[] = { "/workspace" };
    static const char *const deny[] = { "**/.env", "**/.git/**", "*.pem" };
    struct path_rule r = { under, 1, deny, 3 };
    char why[512] = "";
    if (strlen(path) == plen && path_rule_check(&r, path, "/workspace", why, sizeof why) == 0) {
        /* Allowed: its plain reading must be inside /workspace and not denied. */
        char norm[8192];
        if (path_normalize(path, "/workspace", norm, sizeof norm) == 0) {
            if (strncmp(norm, "/workspace", 10) != 0 || (norm[10] && norm[10] != '/'))
                __builtin_trap();
            for (int i = 0; i < 3; i++)
                if (path_glob_match(deny[i], norm))
                    __builtin_trap();
        }
    } else {
        check_reason(why);
    }
    free(path);

    if (!nl)
        return 0;
    json_error_t jerr;
    json_t *j = json_loadb((const char *)nl + 1, size - plen - 1,
                           JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
    if (!j)
        return 0;
    why[0] = '\0';
    if (schema_check(j, j, "arguments", why, sizeof why) < 0)
        check_reason(why);
    const char *method;
    json_t *id;
    rpc_classify(j, &method, &id, why, sizeof why);
    json_decref(j);
    return 0;
}
