/*
 * common/json.c: every JSON text cordon reads is parsed here, with
 * duplicate keys refused (see json.h). Pure: no syscalls but the file
 * variant's read.
 */
#include "common/json.h"

json_t *json_parse_strict(const char *text, size_t len, size_t flags, json_error_t *error)
{
    return json_loadb(text, len, flags | JSON_REJECT_DUPLICATES, error);
}

json_t *json_parse_strict_str(const char *text, size_t flags, json_error_t *error)
{
    if (!text)
        return NULL;
    return json_loads(text, flags | JSON_REJECT_DUPLICATES, error);
}

json_t *json_parse_strict_file(const char *path, size_t flags, json_error_t *error)
{
    return json_load_file(path, flags | JSON_REJECT_DUPLICATES, error);
}
