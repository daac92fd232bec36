/*
 * sandbox/cgroup.h: a run's cgroup, always created beneath the supervisor's
 * own cgroup: v2 where the controllers can be enabled there, v1 per
 * controller otherwise. Runs in the supervisor (and its cleanup watchdog).
 */
#pragma once
#include "common/err.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum cgroup_controller {
    CGROUP_MEMORY,
    CGROUP_PIDS,
    CGROUP_CPU, /* CPU-time accounting: cpuacct on v1, cpu.stat on v2 */
    CGROUP_COUNT,
};

struct cgroup_stats {
    uint64_t memory_peak; /* bytes */
    uint64_t oom_kills;
    uint64_t pids_max_hits; /* forks refused by pids.max */
    uint64_t cpu_usage_us;
};

struct cgroup_set {
    int version;                      /* 1 or 2; 0 when nothing was created */
    char dir[CGROUP_COUNT][PATH_MAX]; /* "" where that controller is unavailable */
    char why[CGROUP_COUNT][200];      /* why a controller is unavailable */
    /* A pool's (see cgroup_reuse): made ahead with its limits set, reset
     * after each run instead of removed; its owner removes it. */
    bool pooled;
    /* What cgroup_read_stats() subtracts: the counters a reused cgroup had
     * when its run began (the memory charged then for its peak). */
    struct cgroup_stats base;
    /* Per controller: the cgroup is one of the user's slots (cgroup_slot_use),
     * locked by SLOT_LOCK for the run, reset rather than made, and left
     * (emptied, unlocked) rather than removed. */
    bool slot[CGROUP_COUNT];
    int slot_lock[CGROUP_COUNT];
};

/*
 * A cold run's v1 cgroups may come from slots: up to CGROUP_SLOT_MAX per
 * user and hierarchy, cordon-slot-uUID-K beside where a run's cgroup would
 * be made, each held by an flock on its directory for as long as a run uses
 * it (the kernel drops the lock when the holders die, however they die).
 * Claiming one resets it as the daemon's pool does (cgroup_reuse) and
 * lifts the last run's limits; one that holds a process or memory of the
 * last run, or is not the user's, is passed over. Only for runs whose every
 * process dies with their supervisor (a PID namespace whose init has
 * PDEATHSIG), so that a killed supervisor leaves nothing in its slot and
 * needs no watchdog: that, mkdir and rmdir are what a cold run's default
 * limits cost.
 */
struct cgroup_slot_use {
    /* The run's memory limit (0: none). A slot still charged with more than
     * a quarter of it is passed over: the limit could not be set below what
     * is charged (EBUSY), and a run must not start with most of it gone. */
    uint64_t memory;
};

/* The most memory a reused cgroup (slot or pool) may still have charged. */
#define CGROUP_REUSE_MAX_CHARGE (8ull << 20)
#define CGROUP_SLOT_MAX 8
#define CGROUP_SLOT_PREFIX "cordon-slot-u"

/*
 * Create the run's cgroup(s) named NAME under the supervisor's own, or with
 * SLOTS (NULL: none) claim a slot where one is free (v1). Missing
 * controllers are not an error here: each is recorded in cg->why, and the
 * caller decides whether a limit may degrade. GUARD (may be NULL) is told
 * each directory before it is made (the watchdog, which removes it should
 * the supervisor die, even between the mkdir and the next line); -1 with
 * ERR when it fails, and nothing is made after.
 */
int cgroup_create(struct cgroup_set *cg, const char *name, const struct cgroup_slot_use *slots,
                  int (*guard)(void *arg, const char *dir, struct cordon_err *err), void *arg,
                  struct cordon_err *err);

/*
 * The same at PATH ("/default/ID", an OCI container's cgroupsPath) from the
 * root of each hierarchy rather than beneath the supervisor's cgroup, its
 * parents made as needed, each cgroup named to GUARD before it is made; a
 * cgroup already there is an error.
 */
int cgroup_create_at(struct cgroup_set *cg, const char *path,
                     int (*guard)(void *arg, const char *dir, struct cordon_err *err), void *arg,
                     struct cordon_err *err);

bool cgroup_has(const struct cgroup_set *cg, enum cgroup_controller c);

/* The cgroup v2 directory runs are made beneath (the supervisor's own, or
 * the delegated scope above its leaf): 0, or -1 without a v2 hierarchy. */
int cgroup_v2_dir(char *out, size_t size);

/*
 * In a scope delegated to us (systemd's Delegate=yes), move this process
 * into a leaf of its own, so that the scope can enable controllers for the
 * runs made beside it. Process-wide: only a front end's main() calls it.
 */
int cgroup_enter_delegated(struct cordon_err *err);

/*
 * Where PID's cgroup of CONTROLLER ("" for the v2 hierarchy) lies, as this
 * process sees the hierarchies: 0 with OUT, or -1.
 */
int cgroup_dir_of(pid_t pid, const char *controller, char *out, size_t size);

/* 0 = no limit. */
int cgroup_set_memory(const struct cgroup_set *cg, uint64_t bytes, struct cordon_err *err);
int cgroup_set_pids(const struct cgroup_set *cg, uint64_t max, struct cordon_err *err);

/*
 * A way for a new process to join the run's cgroups itself, opened by the
 * supervisor (the kernel checks the opener's credentials, so it works from
 * inside a user namespace too). Moving another process takes the kernel's
 * global threadgroup lock, whose first writer waits an RCU grace period
 * (10-20 ms on a quiet host); a single-threaded process moving itself
 * through a v1 'tasks' file takes no such lock (~40 us). On v2 a process is
 * best created in its cgroup (clone3 CLONE_INTO_CGROUP with DIR); joining
 * through cgroup.procs is the slow path there.
 */
struct cgroup_ticket {
    int fd[CGROUP_COUNT]; /* v1 'tasks' (v2: cgroup.procs) per hierarchy; -1 when none */
    int dir;              /* v2: the cgroup's directory, for CLONE_INTO_CGROUP; else -1 */
};

#define CGROUP_TICKET_INIT \
    {                      \
        { -1, -1, -1 }, -1 \
    }

int cgroup_ticket_open(const struct cgroup_set *cg, struct cgroup_ticket *t,
                       struct cordon_err *err);

/* In the joining process, single-threaded: 0, or -1 with errno. Async-signal-safe. */
int cgroup_ticket_use(const struct cgroup_ticket *t);

void cgroup_ticket_close(struct cgroup_ticket *t);

/* Which counters to read: each is a file to open in the cgroup, so only those asked for. */
enum {
    CGROUP_STAT_MEMORY = 1 << 0, /* memory_peak, oom_kills */
    CGROUP_STAT_PIDS = 1 << 1,   /* pids_max_hits */
    CGROUP_STAT_CPU = 1 << 2,    /* cpu_usage_us */
    CGROUP_STAT_ALL = (1 << 3) - 1,
};

/* The run's counters in WANT (CGROUP_STAT_*; the others 0): since its start,
 * for a reused cgroup (cg->base). */
void cgroup_read_stats(const struct cgroup_set *cg, unsigned want, struct cgroup_stats *out);

/* What cgroup_reuse() made of a pool's cgroup. */
enum cgroup_reuse {
    CGROUP_REUSED,   /* ready for the next run */
    CGROUP_SETTLING, /* the last run's memory is still being freed: ask again later */
    CGROUP_SPENT,    /* cannot be reused: its owner removes it */
};

/*
 * A pool's cgroup once its run's processes are gone. REUSED when it holds
 * no process and none of the last run's tmpfs or System V memory (which
 * the kernel uncharges only as it tears down the run's mount and IPC
 * namespaces, after the last process has gone), its resettable counters
 * reset (v1: the memory peak, failures, CPU time) and the others read into
 * cg->base; SETTLING while that memory is still charged (reset now, the
 * next run would start with less than its limit, and the charge in its
 * baseline would hide that much of its own peak); SPENT when it cannot be
 * reused so (a process left, more than CGROUP_REUSE_MAX_CHARGE of other
 * memory charged, or cgroup v2, whose memory.peak resets only for one open
 * file).
 */
enum cgroup_reuse cgroup_reuse(struct cgroup_set *cg);

/* SIGKILL everything left in the cgroups and remove them (a slot: empty it
 * and unlock it). Async-signal-safe. */
void cgroup_destroy(struct cgroup_set *cg);

/* cgroup_destroy() without waiting: true once every directory is gone (its
 * processes were killed, and they have left by the next try). */
bool cgroup_try_destroy(struct cgroup_set *cg);

/* A cgroup filesystem as /proc/self/mountinfo shows it. */
struct cgroup_mount {
    const char *root;  /* the hierarchy's path shown at MNT ("/": its root) */
    const char *mnt;   /* where */
    const char *super; /* the super options; v1: its controllers among them */
    bool v2;
};

/* This process's cgroup mounts, read and parsed in one pass. */
struct cgroup_mounts {
    char *text; /* mountinfo, cut in place: the strings above point into it */
    struct cgroup_mount *at;
    size_t n, cap;
};

/* 0, or -1 when mountinfo cannot be read (then none are found). */
int cgroup_mounts_load(struct cgroup_mounts *ms);
/* The same from MOUNTINFO's text (malloc'd, NULL for none), which MS takes. */
void cgroup_mounts_parse(struct cgroup_mounts *ms, char *mountinfo);
void cgroup_mounts_free(struct cgroup_mounts *ms);

/* Does M hold CONTROLLER ("" for the v2 hierarchy)? */
bool cgroup_mount_holds(const struct cgroup_mount *m, const char *controller);

/* The same for one cgroup directory and those beneath it (the watchdog's view of a run). */
void cgroup_remove_dir(const char *dir);
