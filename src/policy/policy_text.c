/*
 * policy/policy_text.c: the small value helpers every section shares: sorted
 * string sets, booleans as YAML 1.2 and JSON write them, values trimmed of
 * surrounding blanks. Pure: no syscalls.
 */
#include "policy/policy_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int policy_parse_bool(const char *s)
{
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
        return 1;
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
        return 0;
    return -1;
}

/* Insert S in sorted position, ignoring a duplicate: order never matters. */
int policy_strv_add(char ***v, size_t *n, const char *s)
{
    size_t at = 0;
    while (at < *n && strcmp((*v)[at], s) < 0)
        at++;
    if (at < *n && strcmp((*v)[at], s) == 0)
        return 0;
    char **nv = realloc(*v, (*n + 1) * sizeof **v);
    if (!nv)
        return POLICY_ENOMEM;
    *v = nv;
    char *copy = strdup(s);
    if (!copy)
        return POLICY_ENOMEM;
    memmove(nv + at + 1, nv + at, (*n - at) * sizeof *nv);
    nv[at] = copy;
    (*n)++;
    return 0;
}

void policy_strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/*
 * Surrounding blanks are dropped before parsing: a quoted " api.example.com"
 * in YAML or a pasted flag value means the name, not a refusal.
 */
char *policy_trimmed(const char *text)
{
    while (isspace((unsigned char)*text))
        text++;
    size_t n = strlen(text);
    while (n && isspace((unsigned char)text[n - 1]))
        n--;
    return strndup(text, n);
}
