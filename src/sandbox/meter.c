/*
 * sandbox/meter.c: the memory meter (see meter.h). Supervisor only: it reads
 * /proc, where the process it looks for runs as the caller's uid (in a user
 * namespace the caller owns), so no privilege is needed.
 */
#include "sandbox/meter.h"

#include "common/cleanup.h"
#include "common/hostpath.h"
#include "common/procfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The process's anonymous resident memory (RssAnon), from its /proc directory PROC. */
static uint64_t anon_bytes(int proc)
{
    char buf[4096];
    if (read_small_at(proc, "status", buf, sizeof buf) <= 0)
        return 0;
    const char *at = strstr(buf, "\nRssAnon:");
    unsigned long long kib = 0;
    if (!at || sscanf(at, "\nRssAnon: %llu", &kib) != 1)
        return 0;
    return (uint64_t)kib << 10;
}

/* Does PID hold a descriptor whose link reads WANT? Its number, or -1. */
static int find_fd(pid_t pid, const char *want)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int found = -1;
    struct dirent *e;
    char link[256];
    while (found < 0 && (e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link[n] = '\0';
        if (strcmp(link, want) == 0)
            found = atoi(e->d_name);
    }
    closedir(d);
    return found;
}

int mem_meter_open(pid_t top, const char *name, struct mem_meter *m, struct cordon_err *err)
{
    char want[128];
    snprintf(want, sizeof want, "/memfd:%s (deleted)", name);
    _cleanup_free_ pid_t *pids = NULL;
    size_t n = 0, cap = 0;
    proc_add_children(top, &pids, &n, &cap);
    for (size_t i = 0; i < n; i++) {
        int fd = find_fd(pids[i], want);
        if (fd < 0) {
            proc_add_children(pids[i], &pids, &n, &cap);
            continue;
        }
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pids[i], fd);
        m->file = open(path, O_RDONLY | O_CLOEXEC);
        snprintf(path, sizeof path, "/proc/%d", (int)pids[i]);
        m->proc = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (m->file < 0 || m->proc < 0) {
            mem_meter_close(m);
            return err_sys(err, CORDON_E_SETUP,
                           "cannot open '%s' of process %d to meter its "
                           "memory",
                           name, (int)pids[i]);
        }
        m->base = anon_bytes(m->proc);
        m->peak = 0;
        return 0;
    }
    return err_set(err, CORDON_E_SETUP,
                   "no process of the sandbox holds '%s' to meter its "
                   "memory by",
                   name);
}

uint64_t mem_meter_read(struct mem_meter *m)
{
    struct stat st;
    if (m->file < 0 || fstat(m->file, &st) < 0)
        return 0;
    uint64_t used = (uint64_t)st.st_blocks * 512u, anon = anon_bytes(m->proc);
    if (anon > m->base)
        used += anon - m->base;
    if (used > m->peak)
        m->peak = used;
    return used;
}

/* PID's utime, stime, cutime and cstime, in clock ticks. */
static uint64_t cpu_ticks(pid_t pid)
{
    char buf[1024];
    const char *stat = proc_stat(pid, buf, sizeof buf);
    unsigned long long sum = 0, t;
    for (int field = 14; field <= 17; field++) { /* utime, stime, cutime, cstime */
        if (!stat || !proc_stat_field(stat, field, &t))
            return 0;
        sum += t;
    }
    return sum;
}

uint64_t tree_cpu_us(pid_t top)
{
    _cleanup_free_ pid_t *pids = NULL;
    size_t n = 0, cap = 0;
    uint64_t ticks = cpu_ticks(top);
    proc_add_children(top, &pids, &n, &cap);
    for (size_t i = 0; i < n; i++) {
        ticks += cpu_ticks(pids[i]);
        proc_add_children(pids[i], &pids, &n, &cap);
    }
    long hz = sysconf(_SC_CLK_TCK);
    return ticks * 1000000u / (uint64_t)(hz > 0 ? hz : 100);
}

void mem_meter_close(struct mem_meter *m)
{
    if (m->file >= 0)
        close(m->file);
    if (m->proc >= 0)
        close(m->proc);
    m->file = m->proc = -1;
}
