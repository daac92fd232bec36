/*
 * sandbox/meter.h: the memory a level's own kernel holds for a run, for the
 * supervisor to hold the memory limit by where no cgroup counts it (gVisor
 * started by an ordinary user): the blocks of the file that kernel keeps
 * the command's memory in (gVisor's memory file: the command's pages and
 * its tmpfs files) and what that kernel's process has grown by on its own
 * heap since the start (its objects: inodes, sockets, pipes). Supervisor
 * only.
 */
#pragma once
#include "common/err.h"

#include <stdint.h>
#include <sys/types.h>

struct mem_meter {
    int file;      /* the memory file, reopened; -1: no meter */
    int proc;      /* /proc/PID of the process holding it (O_PATH) */
    uint64_t base; /* that process's anonymous memory when the meter was opened */
    uint64_t peak; /* the most read so far */
};

#define MEM_METER_INIT                               \
    {                                                \
        .file = -1, .proc = -1, .base = 0, .peak = 0 \
    }

/*
 * The meter of the process beneath TOP (TOP's descendants) holding a
 * descriptor whose link reads NAME (a memfd's "/memfd:NAME (deleted)");
 * -1 with ERR when there is none or it cannot be opened.
 */
int mem_meter_open(pid_t top, const char *name, struct mem_meter *m, struct cordon_err *err);

/* Bytes held now (and the peak updated); 0 without a meter. */
uint64_t mem_meter_read(struct mem_meter *m);

void mem_meter_close(struct mem_meter *m);

/* The CPU time (user and system) of TOP and every process beneath it, those
 * they have reaped included: the supervisor's count where no cgroup's is. */
uint64_t tree_cpu_us(pid_t top);
