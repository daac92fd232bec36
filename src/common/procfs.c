/*
 * common/procfs.c: /proc/PID/stat (see procfs.h). Only openat(), read()
 * and close() with a string or two: the boundary's child uses it after fork.
 */
#include "common/procfs.h"

#include "common/hostpath.h"

#include <dirent.h>
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

void proc_add_children(pid_t pid, pid_t **pids, size_t *n, size_t *cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char file[64 + sizeof e->d_name + 16];
        snprintf(file, sizeof file, "%s/%s/children", path, e->d_name);
        FILE *f = fopen(file, "re");
        int child;
        while (f && fscanf(f, "%d", &child) == 1) {
            if (*n == *cap) {
                size_t more = *cap ? *cap * 2 : 64;
                pid_t *grown = realloc(*pids, more * sizeof *grown);
                if (!grown)
                    break;
                *pids = grown;
                *cap = more;
            }
            (*pids)[(*n)++] = child;
        }
        if (f)
            fclose(f);
    }
    closedir(d);
}
