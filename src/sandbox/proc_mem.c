/*
 * sandbox/proc_mem.c: proc_mem.force_override as this kernel has it. Pure
 * parsing of text the caller read (for `cordon check`); runs in no sandbox.
 * A run does not depend on the answer: /proc is read-only inside, so
 * /proc/PID/mem never opens for writing whatever the kernel would force.
 */
#include "sandbox/proc_mem.h"

#include "common/text.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARAM "proc_mem.force_override="

static const struct {
    enum proc_mem_force force;
    const char *value;  /* on the command line */
    const char *config; /* the Kconfig choice that makes it the default */
} settings[] = {
    { PROC_MEM_FORCE_ALWAYS, "always", "CONFIG_PROC_MEM_ALWAYS_FORCE" },
    { PROC_MEM_FORCE_PTRACE, "ptrace", "CONFIG_PROC_MEM_FORCE_PTRACE" },
    { PROC_MEM_FORCE_NEVER, "never", "CONFIG_PROC_MEM_NO_FORCE" },
};

#define N_SETTINGS (sizeof settings / sizeof settings[0])

/* Whether RELEASE ("6.11.0-foo") is older than MAJOR.MINOR; false when unreadable. */
static bool release_before(const char *release, long major, long minor)
{
    char *end;
    long ma = strtol(release, &end, 10);
    if (end == release || *end != '.')
        return false;
    const char *p = end + 1;
    long mi = strtol(p, &end, 10);
    if (end == p)
        return false;
    return ma < major || (ma == major && mi < minor);
}

/*
 * The setting the command line asks for, as an index into settings, or -1.
 * Like the kernel, the last recognised value wins, an unknown one is
 * ignored, and nothing after "--" (the init's arguments) counts.
 */
static int from_cmdline(const char *cmdline)
{
    int found = -1;
    for (const char *p = cmdline; p && *p;) {
        p += strspn(p, " \t\n");
        size_t n = strcspn(p, " \t\n");
        if (n == 2 && strncmp(p, "--", 2) == 0)
            break;
        size_t plen = strlen(PARAM);
        for (size_t i = 0; n > plen && strncmp(p, PARAM, plen) == 0 && i < N_SETTINGS; i++)
            if (n - plen == strlen(settings[i].value) &&
                strncmp(p + plen, settings[i].value, n - plen) == 0)
                found = (int)i;
        p += n;
    }
    return found;
}

/* The default CONFIG chose (a line "CONFIG_...=y"), as an index, or -1. */
static int from_config(const char *config)
{
    for (const char *line = config; line && *line;) {
        size_t n = strcspn(line, "\n");
        for (size_t i = 0; i < N_SETTINGS; i++) {
            size_t k = strlen(settings[i].config);
            if (n == k + 2 && strncmp(line, settings[i].config, k) == 0 &&
                strncmp(line + k, "=y", 2) == 0)
                return (int)i;
        }
        line += n + (line[n] == '\n');
    }
    return -1;
}

enum proc_mem_force proc_mem_force(const char *release, const char *cmdline, const char *config,
                                   char *why, size_t len)
{
    if (release && release_before(release, 6, 12)) {
        why_printf(why, len, "always (the kernel predates proc_mem.force_override, 6.12)");
        return PROC_MEM_FORCE_ALWAYS;
    }
    int set = from_cmdline(cmdline);
    int def = from_config(config);
    char dflt[64];
    if (def >= 0)
        snprintf(dflt, sizeof dflt, "%s, %s", settings[def].value, settings[def].config);
    else
        snprintf(dflt, sizeof dflt, "unknown, %s",
                 config ? "not in the kernel config" : "no kernel config found");
    if (set >= 0) {
        why_printf(why, len, "%s (" PARAM "%s on the kernel command line; default: %s)",
                   settings[set].value, settings[set].value, dflt);
        return settings[set].force;
    }
    if (def >= 0) {
        why_printf(why, len, "%s (default: %s)", settings[def].value, dflt);
        return settings[def].force;
    }
    why_printf(why, len, "unknown (not on the kernel command line; default: %s)", dflt);
    return PROC_MEM_FORCE_UNKNOWN;
}
