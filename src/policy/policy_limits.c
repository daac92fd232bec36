/*
 * policy/policy_limits.c: the limits section's names, which limit a key
 * sets, and limits.best_effort. Pure: no syscalls.
 */
#include "policy/policy_int.h"

#include "common/text.h"

#include <string.h>

static const char *const limit_names[POLICY_LIMIT_COUNT] = {
    [POLICY_LIMIT_WALL] = "wall",
    [POLICY_LIMIT_CPU] = "cpu",
    [POLICY_LIMIT_MEMORY] = "memory",
    [POLICY_LIMIT_PIDS] = "pids",
    [POLICY_LIMIT_OUTPUT] = "output",
    [POLICY_LIMIT_FILE_SIZE] = "file_size",
    [POLICY_LIMIT_OPEN_FILES] = "open_files",
};

const char *policy_limit_name(enum policy_limit l)
{
    if ((unsigned)l >= POLICY_LIMIT_COUNT)
        return NULL;
    return limit_names[l];
}

/* The limit K sets, or POLICY_LIMIT_COUNT when K is not one. */
enum policy_limit policy_key_limit(const struct policy_key *k)
{
    if (strncmp(k->path, "limits.", 7) != 0)
        return POLICY_LIMIT_COUNT;
    for (int l = 0; l < POLICY_LIMIT_COUNT; l++)
        if (strcmp(k->path + 7, limit_names[l]) == 0)
            return (enum policy_limit)l;
    return POLICY_LIMIT_COUNT;
}

/* A file or a flag wrote limit K: it is no longer a default that may degrade. */
void policy_limit_given(struct policy *p, const struct policy_key *k)
{
    enum policy_limit l = policy_key_limit(k);
    if (l < POLICY_LIMIT_COUNT)
        p->limits.defaulted &= ~(1u << l);
}

void policy_set_best_effort_all(struct policy *p, bool all)
{
    p->limits.best_effort = all ? (1u << POLICY_LIMIT_COUNT) - 1 : 0;
}

/* limits.best_effort: one limit's name. */
int policy_best_effort_add(struct policy *p, const char *text, char *why, size_t len)
{
    for (int l = 0; l < POLICY_LIMIT_COUNT; l++) {
        if (strcmp(text, limit_names[l]) == 0) {
            p->limits.best_effort |= 1u << l;
            return 0;
        }
    }
    return why_printf(why, len,
                      "expected one of wall, cpu, memory, pids, output, file_size, "
                      "open_files, got \"%s\"",
                      text);
}
