/*
 * oci/cgroups.c: the container's cgroup beyond the run's own (memory, pids
 * and CPU accounting, which the core makes at linux.cgroupsPath): the CPU
 * bandwidth and share of linux.resources, the freezer that pause and resume
 * use, and on a host with both, the v2 hierarchy (the cgroup namespace's
 * root inside). Everything is found from the path in the state and each
 * hierarchy's mount, so delete removes what create made even after a crash.
 */
#include "oci/oci.h"

#include "common/cleanup.h"
#include "common/hostpath.h"
#include "sandbox/cgroup.h"
#include "sandbox/egress_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Does a v1 mount's SUPER name a controller, not just options (name=systemd)? */
static bool controls(const char *super)
{
    static const char *const options[] = {
        "rw",           "ro",      "xattr", "noprefix", "clone_children", "cpuset_v2_mode",
        "favordynmods", "relatime"
    };
    for (const char *t = super; *t;) {
        size_t len = strcspn(t, ",");
        bool option = strncmp(t, "name=", 5) == 0 || strncmp(t, "release_agent=", 14) == 0;
        for (size_t i = 0; !option && i < sizeof options / sizeof *options; i++)
            option = strlen(options[i]) == len && strncmp(t, options[i], len) == 0;
        if (!option)
            return true;
        t += len + (t[len] == ',');
    }
    return false;
}

/* The cgroup hierarchies mounted here from their root, each with a controller, into HS. */
static void hierarchies(struct cgroup_mounts *hs)
{
    (void)cgroup_mounts_load(hs);
    size_t kept = 0;
    for (size_t i = 0; i < hs->n; i++)
        if (strcmp(hs->at[i].root, "/") == 0 && (hs->at[i].v2 || controls(hs->at[i].super)))
            hs->at[kept++] = hs->at[i];
    hs->n = kept;
}

/* The container's directory in the hierarchy holding CONTROLLER ("" v2): 0, or -1. */
static int dir_of(const char *path, const char *controller, char *out, size_t size)
{
    _cleanup_(cgroup_mounts_free) struct cgroup_mounts hs = { 0 };
    hierarchies(&hs);
    for (size_t i = 0; i < hs.n; i++)
        if (cgroup_mount_holds(&hs.at[i], controller))
            return snprintf(out, size, "%s%s", hs.at[i].mnt, path) < (int)size ? 0 : -1;
    return -1;
}

static int put(const char *dir, const char *file, const char *value)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    return fd >= 0 && write(fd, value, strlen(value)) == (ssize_t)strlen(value) ? 0 : -1;
}

static int mkdirs(const char *dir)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *s = buf + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return mkdir(buf, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* One more hierarchy for INIT: made at PATH, INIT moved in; the directory into EXTRA. */
static int join_extra(const char *mount, const char *path, pid_t init, json_t *extra,
                      struct cordon_err *err)
{
    char dir[PATH_MAX], pid[32];
    if (snprintf(dir, sizeof dir, "%s%s", mount, path) >= (int)sizeof dir || mkdirs(dir) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create cgroup '%s'", dir);
    json_array_append_new(extra, json_string(dir));
    snprintf(pid, sizeof pid, "%d", (int)init);
    if (put(dir, "cgroup.procs", pid) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot move the container into '%s'", dir);
    return 0;
}

static int cpu_v1(const char *dir, const struct oci_spec *spec, struct cordon_err *err)
{
    char v[32];
    if (spec->cpu_period) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)spec->cpu_period);
        if (put(dir, "cpu.cfs_period_us", v) < 0)
            return err_sys(err, CORDON_E_SETUP, "linux.resources.cpu.period: cannot set it");
    }
    if (spec->cpu_quota) {
        snprintf(v, sizeof v, "%lld", (long long)spec->cpu_quota);
        if (put(dir, "cpu.cfs_quota_us", v) < 0)
            return err_sys(err, CORDON_E_SETUP, "linux.resources.cpu.quota: cannot set it");
    }
    if (spec->cpu_shares) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)spec->cpu_shares);
        if (put(dir, "cpu.shares", v) < 0)
            return err_sys(err, CORDON_E_SETUP, "linux.resources.cpu.shares: cannot set it");
    }
    return 0;
}

static int cpu_v2(const char *dir, const struct oci_spec *spec, struct cordon_err *err)
{
    char v[64];
    if (spec->cpu_quota) {
        snprintf(v, sizeof v, "%lld %llu", (long long)spec->cpu_quota,
                 (unsigned long long)(spec->cpu_period ? spec->cpu_period : 100000));
        if (put(dir, "cpu.max", v) < 0)
            return err_sys(err, CORDON_E_SETUP, "linux.resources.cpu: cannot set cpu.max");
    }
    if (spec->cpu_shares) {
        /* runc's conversion of shares [2, 262144] to weight [1, 10000]. */
        unsigned long long w = 1 + ((spec->cpu_shares - 2) * 9999) / 262142;
        snprintf(v, sizeof v, "%llu", w);
        if (put(dir, "cpu.weight", v) < 0)
            return err_sys(err, CORDON_E_SETUP, "linux.resources.cpu: cannot set cpu.weight");
    }
    return 0;
}

/*
 * The egress lock on the container's cgroup v2 directory. A network namespace the
 * spec joins (a pod's, made by CNI) or that a hook may give an interface has routes
 * out that bypass the gateway: there the lock is required, and its absence refuses
 * the container. In a namespace of cordon's own it is a second layer, where the host
 * allows it.
 */
static int lock_egress(const struct oci_spec *spec, struct cordon_err *err)
{
    const json_t *hooks = json_object_get(spec->config, "hooks");
    bool needed = spec->c.ns_path[CONTAINER_NS_NET] ||
        json_array_size(json_object_get(hooks, "prestart")) ||
        json_array_size(json_object_get(hooks, "createRuntime"));
    char dir[PATH_MAX];
    struct cordon_err why;
    if (geteuid() != 0)
        err_set(&why, CORDON_E_UNSUPPORTED, "cordon-oci is not the host's root");
    else if (dir_of(spec->cgroup, "", dir, sizeof dir) < 0)
        err_set(&why, CORDON_E_UNSUPPORTED, "this host has no cgroup v2 hierarchy");
    else if (egress_lock_attach(dir, &why) == 0)
        return 0;
    if (!needed)
        return 0;
    return err_set(err, CORDON_E_UNSUPPORTED,
                   "the container's network namespace is not "
                   "cordon's own (%s), so its egress needs cordon's egress lock, which cannot "
                   "be set here: %s",
                   spec->c.ns_path[CONTAINER_NS_NET] ? "joined by path" : "a hook configures it",
                   why.msg);
}

int oci_cgroups_extra(const struct oci_spec *spec, pid_t init, json_t *state,
                      struct cordon_err *err)
{
    json_t *extra = json_array();
    json_object_set_new(state, "cgroup_extra", extra);
    /* A rootless engine's container without resources may have no cgroup of its own. */
    char probe[PATH_MAX];
    struct stat sb;
    if (spec->c.cgroup_optional &&
        (dir_of(spec->cgroup, "memory", probe, sizeof probe) < 0 || stat(probe, &sb) < 0) &&
        (dir_of(spec->cgroup, "", probe, sizeof probe) < 0 || stat(probe, &sb) < 0))
        return lock_egress(spec, err);
    _cleanup_(cgroup_mounts_free) struct cgroup_mounts hs = { 0 };
    hierarchies(&hs);
    bool v1 = false;
    for (size_t i = 0; i < hs.n; i++)
        v1 |= cgroup_mount_holds(&hs.at[i], "memory");
    for (size_t i = 0; i < hs.n; i++) {
        const struct cgroup_mount *m = &hs.at[i];
        if (m->v2 && !v1) { /* v2 alone: the core made the cgroup with +cpu enabled */
            char dir[PATH_MAX];
            if (snprintf(dir, sizeof dir, "%s%s", m->mnt, spec->cgroup) >= (int)sizeof dir)
                return err_set(err, CORDON_E_USAGE, "cgroup path too long");
            TRY(cpu_v2(dir, spec, err));
            continue;
        }
        /* The run's own are memory, pids and cpuacct; these are the container's. */
        bool want = m->v2 || cgroup_mount_holds(m, "freezer") ||
            (cgroup_mount_holds(m, "cpu") && !cgroup_mount_holds(m, "cpuacct"));
        if (!want || cgroup_mount_holds(m, "memory") || cgroup_mount_holds(m, "pids"))
            continue;
        TRY(join_extra(m->mnt, spec->cgroup, init, extra, err));
        if (cgroup_mount_holds(m, "cpu"))
            TRY(cpu_v1(json_string_value(json_array_get(extra, json_array_size(extra) - 1)), spec,
                       err));
    }
    if (v1 && (spec->cpu_quota || spec->cpu_shares) && !json_array_size(extra))
        return err_set(err, CORDON_E_UNSUPPORTED, "linux.resources.cpu: no cpu cgroup here");
    return lock_egress(spec, err);
}

int oci_cgroups_join(const struct oci_state *st, struct cordon_err *err)
{
    const char *path = oci_state_str(st, "cgroup");
    if (!path)
        return 0;
    _cleanup_(cgroup_mounts_free) struct cgroup_mounts hs = { 0 };
    hierarchies(&hs);
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    for (size_t i = 0; i < hs.n; i++) {
        char dir[PATH_MAX];
        struct stat sb;
        if (snprintf(dir, sizeof dir, "%s%s", hs.at[i].mnt, path) >= (int)sizeof dir ||
            stat(dir, &sb) < 0)
            continue; /* a hierarchy the container was not given (cpuset, blkio) */
        if (put(dir, "cgroup.procs", pid) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot join cgroup '%s'", dir);
    }
    return 0;
}

void oci_cgroups_remove(const struct oci_state *st)
{
    const char *path = oci_state_str(st, "cgroup");
    if (!path || !*path)
        return;
    _cleanup_(cgroup_mounts_free) struct cgroup_mounts hs = { 0 };
    hierarchies(&hs);
    for (size_t i = 0; i < hs.n; i++) {
        char dir[PATH_MAX];
        struct stat sb;
        if (snprintf(dir, sizeof dir, "%s%s", hs.at[i].mnt, path) < (int)sizeof dir &&
            stat(dir, &sb) == 0)
            cgroup_remove_dir(dir);
    }
}

static int freezer_dir(const struct oci_state *st, char *dir, size_t size, bool *v2)
{
    const char *path = oci_state_str(st, "cgroup");
    *v2 = false;
    if (!path)
        return -1;
    if (dir_of(path, "freezer", dir, size) == 0)
        return 0;
    *v2 = true;
    return dir_of(path, "", dir, size);
}

bool oci_frozen(const struct oci_state *st)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], buf[32];
    bool v2;
    if (freezer_dir(st, dir, sizeof dir, &v2) < 0)
        return false;
    snprintf(path, sizeof path, "%s/%s", dir, v2 ? "cgroup.freeze" : "freezer.state");
    if (read_small_at(AT_FDCWD, path, buf, sizeof buf) <= 0)
        return false;
    return v2 ? buf[0] == '1' : strncmp(buf, "FROZEN", 6) == 0;
}

int oci_freeze(const struct oci_state *st, bool frozen, struct cordon_err *err)
{
    char dir[PATH_MAX];
    bool v2;
    if (freezer_dir(st, dir, sizeof dir, &v2) < 0)
        return err_set(err, CORDON_E_UNSUPPORTED, "container %s has no freezer cgroup", st->id);
    const char *value = v2 ? (frozen ? "1" : "0") : (frozen ? "FROZEN" : "THAWED");
    if (put(dir, v2 ? "cgroup.freeze" : "freezer.state", value) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot %s container %s", frozen ? "pause" : "resume",
                       st->id);
    /* v1 passes through FREEZING: wait, generously, for the state asked for. */
    for (int i = 0; i < 2000 && oci_frozen(st) != frozen; i++) {
        struct timespec ts = { 0, 5 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        if (!v2 && frozen)
            put(dir, "freezer.state", value);
    }
    if (oci_frozen(st) != frozen)
        return err_set(err, CORDON_E_SETUP, "container %s did not %s", st->id,
                       frozen ? "freeze" : "thaw");
    return 0;
}

size_t oci_state_pids(const struct oci_state *st, pid_t **out)
{
    *out = NULL;
    const char *path = oci_state_str(st, "cgroup");
    char dir[PATH_MAX], file[PATH_MAX + 32];
    if (!path ||
        (dir_of(path, "pids", dir, sizeof dir) < 0 && dir_of(path, "memory", dir, sizeof dir) < 0 &&
         dir_of(path, "", dir, sizeof dir) < 0))
        return 0;
    snprintf(file, sizeof file, "%s/cgroup.procs", dir);
    _cleanup_fclose_ FILE *f = fopen(file, "re");
    size_t n = 0, cap = 0;
    long v;
    while (f && fscanf(f, "%ld", &v) == 1) {
        if (n == cap) {
            pid_t *more = realloc(*out, (cap = cap * 2 + 16) * sizeof *more);
            if (!more)
                break;
            *out = more;
        }
        (*out)[n++] = (pid_t)v;
    }
    return n;
}
