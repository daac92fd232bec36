/*
 * core/limits.c: the limits plan (see limits.h). Supervisor only.
 */
#include "core/limits.h"

#include "common/units.h"

#include <dirent.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/resource.h>

/*
 * A limit the policy marks best_effort may degrade, and so may one nobody
 * wrote: a default must not refuse a run that asked for nothing.
 */
static bool may_degrade(const struct policy *p, enum policy_limit l)
{
    return (p->limits.best_effort | p->limits.defaulted) & (1u << l);
}

static int refuse_limit(const struct policy *p, enum policy_limit l, const char *value,
                        const char *why, const char *fallback, struct cordon_err *err)
{
    (void)p;
    /* The remedy first, in the exact words to type: the reason may be long
     * (a cgroup path) and the record is fixed-size. */
    const char *name = policy_limit_name(l);
    return err_set(err, CORDON_E_UNSUPPORTED,
                   "limits.%s: cannot enforce %s on this host; to fall back to %s, pass "
                   "--best-effort %s or write best_effort: [%s] under limits (%s)",
                   name, value, fallback, name, name, why);
}

/*
 * A limit a cgroup enforces for the whole tree (SET writes it; NULL when the
 * supervisor polls the cgroup instead), or an rlimit per process (RLIMIT;
 * -1 when already set) where the policy lets it degrade; refused otherwise.
 */
static int enforce_by_cgroup(const struct policy *p, const struct cgroup_set *cg,
                             struct confine_plan *plan, enum enforcement *enforced,
                             enum policy_limit l, enum cgroup_controller c, const char *shown,
                             int (*set)(const struct cgroup_set *, uint64_t, struct cordon_err *),
                             uint64_t value, int rlimit, uint64_t rlimit_extra,
                             const char *fallback, struct cordon_err *err)
{
    if (cgroup_has(cg, c)) {
        if (set && !cg->pooled) /* a pool's has the policy's limits already */
            TRY(set(cg, value, err));
        enforced[l] = cg->version == 2 ? ENFORCED_CGROUP_V2 : ENFORCED_CGROUP_V1;
        return 0;
    }
    if (may_degrade(p, l)) {
        if (rlimit >= 0)
            confine_add_rlimit(plan, rlimit, value + rlimit_extra, value + rlimit_extra);
        enforced[l] = ENFORCED_RLIMIT;
        return 0;
    }
    return refuse_limit(p, l, shown, cg->why[c], fallback, err);
}

/*
 * Decide how each limit is enforced: a cgroup where one is available,
 * an rlimit where the policy allows degrading, refusal otherwise.
 */
/*
 * The tasks (threads included) whose real uid is UID, as RLIMIT_NPROC counts
 * them in the host's user namespace; read from /proc, so a moment's count.
 */
static uint64_t tasks_of_uid(uid_t uid)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    uint64_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char path[32 + sizeof e->d_name], line[256];
        snprintf(path, sizeof path, "/proc/%s/status", e->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue; /* gone meanwhile */
        unsigned long real = (unsigned long)-1, threads = 0;
        while (fgets(line, sizeof line, f)) {
            sscanf(line, "Uid: %lu", &real);
            sscanf(line, "Threads: %lu", &threads);
        }
        fclose(f);
        if (real == (unsigned long)uid)
            n += threads;
    }
    closedir(d);
    return n;
}

int limits_plan(const struct policy *p, const struct cgroup_set *cg,
                const struct sandbox_backend *b, struct confine_plan *plan,
                enum enforcement enforced[POLICY_LIMIT_COUNT], struct cordon_err *err)
{
    const struct policy_limits *lim = &p->limits;
    char v[32];

    confine_add_rlimit(plan, RLIMIT_CORE, 0, 0);
    if (lim->wall_ms)
        enforced[POLICY_LIMIT_WALL] = ENFORCED_SUPERVISOR;
    if (lim->output)
        enforced[POLICY_LIMIT_OUTPUT] = ENFORCED_SUPERVISOR;

    if (lim->memory) {
        format_size(lim->memory, v, sizeof v);
        /*
         * RLIMIT_DATA, not RLIMIT_AS: it counts the private writable memory
         * a process can fill (heap, anonymous maps, thread stacks) and not
         * address space merely reserved, which a JVM or Go runtime reserves
         * far beyond 1G and then fails to start under RLIMIT_AS.
         */
        if (b->meters_memory && !cgroup_has(cg, CGROUP_MEMORY))
            /* The level ignores RLIMIT_DATA (gVisor): the supervisor holds
             * the limit by the level's meter, for the whole sandbox, as a
             * cgroup would (no degrading: nothing to refuse). */
            enforced[POLICY_LIMIT_MEMORY] = ENFORCED_SUPERVISOR;
        else
            TRY(enforce_by_cgroup(p, cg, plan, enforced, POLICY_LIMIT_MEMORY, CGROUP_MEMORY, v,
                                  cgroup_set_memory, lim->memory, RLIMIT_DATA, 0,
                                  "a per-process RLIMIT_DATA", err));
    }
    if (lim->pids && b->counts_pids) {
        /* Counted by the level's own kernel (the backend bounds its own
         * threads on the host): exact, and the whole sandbox's. */
        confine_add_rlimit(plan, RLIMIT_NPROC, lim->pids, lim->pids);
        enforced[POLICY_LIMIT_PIDS] = ENFORCED_KERNEL;
    } else if (lim->pids) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)lim->pids);
        /*
         * RLIMIT_NPROC counts the tasks of a uid in the run's own user
         * namespace (ucounts, Linux 5.14+): the sandbox user's tasks of this
         * run only, not the caller's elsewhere on the host, and init (uid 0
         * inside) is not among them. A level without a user namespace shares
         * the count with the caller's every process: the run gets the limit
         * on top of what the caller has now (root is never held by it).
         */
        uint64_t outside = 0;
        if (b->host_uid && !cgroup_has(cg, CGROUP_PIDS) && may_degrade(p, POLICY_LIMIT_PIDS))
            outside = tasks_of_uid(getuid());
        TRY(enforce_by_cgroup(p, cg, plan, enforced, POLICY_LIMIT_PIDS, CGROUP_PIDS, v,
                              cgroup_set_pids, lim->pids, RLIMIT_NPROC, outside, "RLIMIT_NPROC",
                              err));
    }
    if (lim->cpu_ms) {
        /* Always a per-process cap too; the cgroup adds the whole tree. */
        uint64_t secs = (lim->cpu_ms + 999) / 1000;
        confine_add_rlimit(plan, RLIMIT_CPU, secs, secs + 1);
        snprintf(v, sizeof v, "%llums", (unsigned long long)lim->cpu_ms);
        if (b->meters_cpu && !cgroup_has(cg, CGROUP_CPU))
            /* The level ignores RLIMIT_CPU (gVisor): the supervisor counts
             * the sandbox's CPU time, as a cgroup would. */
            enforced[POLICY_LIMIT_CPU] = ENFORCED_SUPERVISOR;
        else
            TRY(enforce_by_cgroup(p, cg, plan, enforced, POLICY_LIMIT_CPU, CGROUP_CPU, v, NULL,
                                  lim->cpu_ms, -1, 0, "a per-process RLIMIT_CPU", err));
    }
    if (lim->file_size) {
        confine_add_rlimit(plan, RLIMIT_FSIZE, lim->file_size, lim->file_size);
        enforced[POLICY_LIMIT_FILE_SIZE] = ENFORCED_RLIMIT;
    }
    if (lim->open_files) {
        struct rlimit cur;
        getrlimit(RLIMIT_NOFILE, &cur);
        if (lim->open_files > cur.rlim_max) {
            if (!may_degrade(p, POLICY_LIMIT_OPEN_FILES))
                return err_set(err, CORDON_E_UNSUPPORTED,
                               "limits.open_files: %llu exceeds this host's hard limit %llu; "
                               "to fall back to it, pass --best-effort open_files or write "
                               "best_effort: [open_files] under limits",
                               (unsigned long long)lim->open_files,
                               (unsigned long long)cur.rlim_max);
            confine_add_rlimit(plan, RLIMIT_NOFILE, cur.rlim_max, cur.rlim_max);
        } else {
            confine_add_rlimit(plan, RLIMIT_NOFILE, lim->open_files, lim->open_files);
        }
        enforced[POLICY_LIMIT_OPEN_FILES] = ENFORCED_RLIMIT;
    }
    return 0;
}
