/*
 * common/procfs.c: /proc/PID/stat (see procfs.h). Only openat(), read()
 * and close() with a string or two: the boundary's child uses it after fork.
 */
#include "common/procfs.h"

#include "common/hostpath.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *stat_of(const char *path, char *buf, size_t size)
{
    if (read_small_at(AT_FDCWD, path, buf, size) <= 0)
        return NULL;
    /* "PID (COMM) STATE ...": COMM ends at the last ')'. */
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] ? rp + 2 : NULL;
}

const char *proc_stat(pid_t pid, char *buf, size_t size)
{
    char path[32];
    if (pid <= 0) {
        buf[0] = '\0';
        return NULL;
    }
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    return stat_of(path, buf, size);
}

const char *proc_stat_self(char *buf, size_t size)
{
    return stat_of("/proc/self/stat", buf, size);
}

bool proc_stat_field(const char *stat, int field, unsigned long long *value)
{
    const char *p = stat;
    for (int at = 3; at < field; at++) {
        p = strchr(p, ' ');
        if (!p)
            return false;
        p++;
    }
    char *end;
    *value = strtoull(p, &end, 10);
    return end != p;
}
