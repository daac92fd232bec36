/*
 * common/strv.h: small helpers for NULL-free string vectors with a count.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Free a NULL-terminated vector and its strings. NULL is fine. */
static inline void strv_free(char **v)
{
    for (char **e = v; e && *e; e++)
        free(*e);
    free(v);
}

static inline bool strv_contains(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
}
