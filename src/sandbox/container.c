/*
 * sandbox/container.c: an OCI bundle's container at the namespace level (see
 * container.h). The supervisor plans the bundle's root and mounts as mount
 * steps (mounts.c builds them, as it builds cordon's own root) and clones the
 * boundary beside itself (CLONE_PARENT), after joining the namespaces the
 * spec names by path in a short-lived first stage where it must. The
 * boundary becomes the container's init: it builds the root, makes the
 * terminal, waits at the start seam, forks the command (the spec's user,
 * capabilities, cwd; cordon's no_new_privs, Landlock and seccomp on top) and
 * exits with its status.
 */
#include "sandbox/container.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/route.h"
#include "common/syscalls.h"
#include "sandbox/boundary.h"
#include "sandbox/cgroup.h"
#include "sandbox/ns_int.h"
#include "sandbox/plan.h"
#include "sandbox/start.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Close and forget: the cleanup at the end closes what is still set. */
static void drop(int *fd)
{
    closep(fd);
    *fd = -1;
}

void container_release(struct sandbox_container *c)
{
    for (size_t i = 0; i < c->n_mounts; i++) {
        free(c->mounts[i].dest);
        free(c->mounts[i].source);
        free(c->mounts[i].data);
    }
    free(c->mounts);
    for (size_t i = 0; i < c->n_masked; i++)
        free(c->masked[i]);
    free(c->masked);
    for (size_t i = 0; i < c->n_readonly; i++)
        free(c->readonly[i]);
    free(c->readonly);
    seccomp_program_release(&c->filter);
    c->mounts = NULL;
    c->masked = c->readonly = NULL;
    c->n_mounts = c->n_masked = c->n_readonly = 0;
}

/* ---- the plan, in the supervisor ---- */

/* How the supervisor stands: host root, root of a user namespace (rootless
 * engines run their runtime so), or an ordinary user. */
enum ids { IDS_HOST_ROOT, IDS_NESTED_ROOT, IDS_USER };

static enum ids who_am_i(uint32_t *nested_count)
{
    *nested_count = 1;
    if (geteuid() != 0)
        return IDS_USER;
    _cleanup_fclose_ FILE *f = fopen("/proc/self/uid_map", "re");
    unsigned long long inside, outside, count, next = 0;
    bool initial = false;
    while (f && fscanf(f, "%llu %llu %llu", &inside, &outside, &count) == 3) {
        if (inside == 0 && outside == 0 && count == 4294967295ull)
            initial = true;
        if (inside == next) /* ids contiguous from 0 are ours to hand on */
            next += count;
    }
    if (initial)
        return IDS_HOST_ROOT;
    *nested_count = next > CONTAINER_IDS ? CONTAINER_IDS : (uint32_t)(next ? next : 1);
    return IDS_NESTED_ROOT;
}

static struct mount_step *last_step(struct ns_plan *plan)
{
    return &plan->steps[plan->n_steps - 1];
}

static int plan_bind(const struct container_mount *m, struct ns_plan *plan, size_t *cap,
                     enum ids ids, uint32_t id_base, struct cordon_err *err)
{
    TRY(mounts_plan_add(plan, cap, MOUNT_BIND, m->dest, m->source, NULL, !m->readonly, false, err));
    struct mount_step *s = last_step(plan);
    s->device = m->device;
    s->follow_symlinks = true; /* the engine's own paths (its state, volumes) */
    if (ids == IDS_HOST_ROOT && !m->device) {
        /* Owned as the container sees its own files; a filesystem that cannot
         * idmap is bound as it is (its files then show as nobody's). */
        struct cordon_err ignored;
        s->tree_fd = mounts_idmapped_tree(m->source, true, id_base, CONTAINER_IDS, &ignored);
    }
    /* The engine's paths (its state, 0700 and root's) are reachable from here, not from
     * inside: taken now, by the supervisor, as they are. */
    if (ids != IDS_USER && s->tree_fd < 0 &&
        (s->tree_fd = mounts_cloned_tree(m->source, true, err)) < 0)
        return err_prefix(err, "mount '%s'", m->dest);
    return 0;
}

/* The host files a bind must never show (the audit log, its key): masked where they would. */
static int plan_hidden(const struct sandbox_container *c, struct ns_plan *plan, size_t *cap,
                       struct cordon_err *err)
{
    for (size_t h = 0; h < 2; h++) {
        _cleanup_free_ char *real = c->hidden[h] ? realpath(c->hidden[h], NULL) : NULL;
        for (size_t i = 0; real && i < c->n_mounts; i++) {
            const struct container_mount *m = &c->mounts[i];
            _cleanup_free_ char *src = m->type == CONTAINER_BIND ? realpath(m->source, NULL) : NULL;
            size_t n = src ? strlen(src) : 0;
            if (!src || strncmp(real, src, n) != 0 || (real[n] != '/' && real[n] != '\0'))
                continue;
            char at[PATH_MAX];
            if (snprintf(at, sizeof at, "%s%s", m->dest, real + n) >= (int)sizeof at)
                return err_set(err, CORDON_E_SETUP, "path too long: '%s'", m->dest);
            TRY(mounts_plan_add(plan, cap, MOUNT_MASK, at, NULL, NULL, false, false, err));
        }
    }
    return 0;
}

static int plan_devices(struct ns_plan *plan, size_t *cap, bool devpts, struct cordon_err *err)
{
    for (size_t i = 0; i < SANDBOX_N_DEV_NODES; i++) {
        char path[32];
        snprintf(path, sizeof path, "/dev/%s", sandbox_dev_nodes[i]);
        TRY(mounts_plan_add(plan, cap, MOUNT_BIND, path, path, NULL, true, false, err));
        last_step(plan)->device = true;
    }
    static const char *const links[][2] = { { "/dev/fd", "/proc/self/fd" },
                                            { "/dev/stdin", "/proc/self/fd/0" },
                                            { "/dev/stdout", "/proc/self/fd/1" },
                                            { "/dev/stderr", "/proc/self/fd/2" } };
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
        TRY(mounts_plan_add(plan, cap, MOUNT_SYMLINK, links[i][0], links[i][1], NULL, false, false,
                            err));
    if (devpts)
        TRY(mounts_plan_add(plan, cap, MOUNT_SYMLINK, "/dev/ptmx", "pts/ptmx", NULL, false, false,
                            err));
    return 0;
}

/* A missing cwd is made (as runc makes it), before a read-only root is made read-only. */
static int plan_cwd(const struct sandbox_container *c, struct ns_plan *plan, size_t *cap,
                    struct cordon_err *err)
{
    char path[PATH_MAX];
    struct stat st;
    if (!c->cwd || !strcmp(c->cwd, "/") ||
        snprintf(path, sizeof path, "%s%s", c->root, c->cwd) >= (int)sizeof path ||
        lstat(path, &st) == 0 || errno != ENOENT)
        return 0;
    return mounts_plan_add(plan, cap, MOUNT_DIR, c->cwd, NULL, NULL, false, false, err);
}

static int plan_landlock(const struct sandbox_container *c, struct confine_plan *cp,
                         struct cordon_err *err)
{
    struct landlock_plan *ll = &cp->landlock;
    landlock_plan_init(ll, landlock_abi());
    if (!ll->abi)
        return 0;
    TRY(landlock_plan_add(ll, "/", c->root_readonly ? LANDLOCK_RO : LANDLOCK_RW, false, err));
    TRY(landlock_plan_add(ll, "/dev", LANDLOCK_DEV, true, err));
    for (size_t i = 0; i < c->n_mounts; i++) {
        const struct container_mount *m = &c->mounts[i];
        bool writable = (m->type == CONTAINER_BIND && !m->readonly && !m->device) ||
            m->type == CONTAINER_TMPFS || m->type == CONTAINER_MQUEUE;
        if (writable && strcmp(m->dest, "/dev") != 0)
            TRY(landlock_plan_add(ll, m->dest, LANDLOCK_RW, true, err));
    }
    return 0;
}

/* The spec's rlimits where they are stricter than the run's own. */
static int plan_rlimits(const struct sandbox_container *c, struct confine_plan *cp,
                        struct cordon_err *err)
{
    for (size_t i = 0; i < c->n_rlimits; i++) {
        struct rlimit want = c->rlimits[i].value;
        size_t k = 0;
        while (k < cp->n_rlimits && cp->rlimits[k].resource != c->rlimits[i].resource)
            k++;
        if (k == cp->n_rlimits && k == CONFINE_MAX_RLIMITS)
            return err_set(err, CORDON_E_UNSUPPORTED, "process.rlimits: more than %d in all",
                           CONFINE_MAX_RLIMITS);
        if (k < cp->n_rlimits) {
            struct rlimit have = cp->rlimits[k].value;
            if (have.rlim_cur < want.rlim_cur)
                want.rlim_cur = have.rlim_cur;
            if (have.rlim_max < want.rlim_max)
                want.rlim_max = have.rlim_max;
        }
        /* Never above what this process has: raising a hard limit takes a privilege
         * (CAP_SYS_RESOURCE in the host's namespace) a supervisor may not hold. */
        struct rlimit now;
        if (getrlimit(c->rlimits[i].resource, &now) == 0 && want.rlim_max > now.rlim_max)
            want.rlim_max = now.rlim_max;
        if (want.rlim_cur > want.rlim_max)
            want.rlim_cur = want.rlim_max;
        confine_add_rlimit(cp, c->rlimits[i].resource, want.rlim_cur, want.rlim_max);
    }
    return 0;
}

/* Is DEST beneath the destination of a step before step I that mounts a fresh tree? */
static bool on_earlier_mount(const struct ns_plan *plan, size_t i, const char *dest)
{
    for (size_t k = 0; k < i; k++) {
        const struct mount_step *e = &plan->steps[k];
        size_t n = strlen(e->dest);
        bool mounts = e->kind != MOUNT_SYMLINK && e->kind != MOUNT_DIR && e->kind != MOUNT_MASK;
        if (mounts && !strncmp(dest, e->dest, n) && dest[n] == '/')
            return true;
    }
    return false;
}

/* DEST beneath ROOT (a directory, or a file when FILE), its parents made, never through a link. */
static void make_mountpoint(int root, const char *dest, bool file)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", dest + 1);
    int dir = dup(root);
    char *comp = buf;
    for (char *slash; dir >= 0 && (slash = strchr(comp, '/')); comp = slash + 1) {
        *slash = '\0';
        struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                                .resolve =
                                    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        (void)mkdirat(dir, comp, 0755);
        int next = sys_openat2(dir, comp, &how, sizeof how);
        close(dir);
        dir = next;
    }
    if (dir < 0 || !*comp)
        return;
    if (file)
        closep(&(int){
            openat(dir, comp, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644) });
    else
        (void)mkdirat(dir, comp, 0755);
    close(dir);
}

/*
 * Where the root could not be idmapped, the sandbox's own root owns nothing in it and
 * could make no mountpoint: the supervisor makes them (as an engine's runtime does as
 * root), beneath the root and through no link, for the mounts that land on the root
 * itself. Whatever fails here fails again, with its reason, inside.
 */
static void premake_mountpoints(const struct ns_plan *plan)
{
    _cleanup_close_ int root = open(plan->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    for (size_t i = 0; root >= 0 && i < plan->n_steps; i++) {
        const struct mount_step *st = &plan->steps[i];
        if (st->kind == MOUNT_SYMLINK || st->kind == MOUNT_MASK || st->source_in_root ||
            on_earlier_mount(plan, i, st->dest))
            continue;
        struct stat sb;
        bool file = st->kind == MOUNT_FILE ||
            (st->kind == MOUNT_BIND && stat(st->source, &sb) == 0 && !S_ISDIR(sb.st_mode));
        make_mountpoint(root, st->dest, file);
    }
}

static int plan_container(const struct sandbox_setup *s, enum ids ids, struct ns_plan *plan,
                          bool *root_idmapped, struct cordon_err *err)
{
    const struct sandbox_container *c = s->container;
    size_t cap = 0;
    plan->root = c->root;
    plan->root_writable = !c->root_readonly;
    plan->root_tree = -1;
    if (ids == IDS_HOST_ROOT) {
        /* Overlayfs (Docker's overlay2, containerd's snapshots) cannot be idmapped on every
         * kernel: its files then show as nobody's inside, and only what is writable to
         * all is the container's to write. Nothing is widened; the run's evidence says so. */
        struct cordon_err ignored;
        plan->root_tree = mounts_idmapped_tree(c->root, true, c->id_base, CONTAINER_IDS, &ignored);
    }
    *root_idmapped = plan->root_tree >= 0 || ids != IDS_HOST_ROOT;
    if (ids != IDS_USER && plan->root_tree < 0 &&
        (plan->root_tree = mounts_cloned_tree(c->root, true, err)) < 0)
        return err_prefix(err, "root filesystem");
    static const enum mount_kind kinds[] = {
        [CONTAINER_TMPFS] = MOUNT_TMPFS,   [CONTAINER_PROC] = MOUNT_PROC,
        [CONTAINER_SYSFS] = MOUNT_SYSFS,   [CONTAINER_DEVPTS] = MOUNT_DEVPTS,
        [CONTAINER_MQUEUE] = MOUNT_MQUEUE, [CONTAINER_CGROUP] = MOUNT_CGROUP2,
    };
    bool devpts = false;
    for (size_t i = 0; i < c->n_mounts; i++) {
        const struct container_mount *m = &c->mounts[i];
        if (m->type == CONTAINER_BIND) {
            TRY(plan_bind(m, plan, &cap, ids, c->id_base, err));
            continue;
        }
        devpts |= m->type == CONTAINER_DEVPTS;
        TRY(mounts_plan_add(plan, &cap, kinds[m->type], m->dest, NULL, m->data, !m->readonly, false,
                            err));
    }
    TRY(plan_devices(plan, &cap, devpts, err));
    TRY(plan_cwd(c, plan, &cap, err));
    if (plan->transparent)
        TRY(mounts_plan_add(plan, &cap, MOUNT_FILE, "/etc/resolv.conf", sandbox_resolv_conf(true),
                            NULL, false, false, err));
    if (plan->transparent)
        last_step(plan)->over = true;
    if (s->ca_pem) {
        _cleanup_free_ char *bundle = NULL;
        size_t len;
        TRY(sandbox_ca_bundle(s->ca_pem, &bundle, &len, err));
        TRY(mounts_plan_add(plan, &cap, MOUNT_FILE, SANDBOX_CA_CERT, s->ca_pem, NULL, false, false,
                            err));
        last_step(plan)->over = true;
        TRY(mounts_plan_add(plan, &cap, MOUNT_FILE, SANDBOX_CA_BUNDLE, bundle, NULL, false, false,
                            err));
        last_step(plan)->over = true;
    }
    for (size_t i = 0; i < c->n_masked; i++)
        TRY(mounts_plan_add(plan, &cap, MOUNT_MASK, c->masked[i], NULL, NULL, false, false, err));
    for (size_t i = 0; i < c->n_readonly; i++) {
        TRY(mounts_plan_add(plan, &cap, MOUNT_BIND, c->readonly[i], c->readonly[i], NULL, false,
                            true, err));
        last_step(plan)->source_in_root = true;
        last_step(plan)->follow_symlinks = false;
    }
    TRY(plan_hidden(c, plan, &cap, err));
    if (!*root_idmapped)
        premake_mountpoints(plan);
    return container_confine_plan(c, &plan->confine, err);
}

int container_confine_plan(const struct sandbox_container *c, struct confine_plan *cp,
                           struct cordon_err *err)
{
    TRY(plan_landlock(c, cp, err));
    TRY(plan_rlimits(c, cp, err));
    cp->keep_caps = c->caps;
    cp->extra_filter = c->filter.len ? &c->filter : NULL;
    return 0;
}

/* ---- the boundary: the container's init ---- */

struct ct_fds {
    uint32_t id_offset; /* without a user namespace: the container's ids on the host */
    bool userns;
    int sync_r;   /* a byte once the supervisor wrote our id maps */
    int err_w;    /* error records */
    int status_w; /* the command's wait status */
    int start_r;  /* the start seam (and the terminal's master on its way out) */
    int bpf_r;    /* cordon's filter */
    int gw_sock;  /* the gateway's doors, or -1 (none, or made by the first stage) */
    struct cgroup_ticket cg;
};

struct ct_child {
    const struct sandbox_container *c;
    const struct ns_plan *plan;
    const struct seccomp_program *filter;
    uint32_t id_offset;
};

static _Noreturn void fail(const struct ct_fds *fds, struct cordon_err *err)
{
    boundary_fail(fds->err_w, err);
}

static void close_inherited(const struct ns_plan *plan, const struct ct_fds *fds)
{
    int keep[16 + 256];
    size_t n = 0;
    int own[] = { fds->sync_r, fds->err_w,   fds->status_w, fds->start_r,
                  fds->bpf_r,  fds->gw_sock, fds->cg.dir,   plan->root_tree };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        keep[n++] = own[i];
    for (int c = 0; c < CGROUP_COUNT; c++)
        keep[n++] = fds->cg.fd[c];
    for (size_t i = 0; i < plan->n_steps && n < sizeof keep / sizeof keep[0]; i++)
        if (plan->steps[i].tree_fd >= 0)
            keep[n++] = plan->steps[i].tree_fd;
    close_fds_except(keep, n);
}

/* In the command, after the seam: the spec's user, then cordon's chain. */
static int confine_container_command(void *arg, struct cordon_err *err)
{
    const struct ct_child *ch = arg;
    const struct sandbox_container *c = ch->c;
    uint32_t off = ch->id_offset;
    gid_t groups[sizeof c->groups / sizeof c->groups[0]];
    for (size_t i = 0; i < c->n_groups; i++)
        groups[i] = c->groups[i] + off;
    umask(c->umask);
    if (c->caps && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot keep capabilities");
    /* A rootless engine's namespace may deny setgroups(): with no group asked for, the
     * caller's own (an ordinary user's) are all there is to keep. */
    if ((setgroups(c->n_groups, groups) < 0 && (errno != EPERM || c->n_groups)) ||
        setresgid(c->gid + off, c->gid + off, c->gid + off) < 0 ||
        setresuid(c->uid + off, c->uid + off, c->uid + off) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot become uid %u gid %u", (unsigned)c->uid,
                       (unsigned)c->gid);
    return confine_command(&ch->plan->confine, ch->filter, err);
}

/* The spec's sysctls, through the host's /proc while it is still there (the container's is
 * read-only): each names a namespace of the container's own, so it is that one's. */
static int write_sysctls(const struct sandbox_container *c, unsigned long max_gid,
                         struct cordon_err *err)
{
    for (size_t i = 0; i < c->n_sysctl; i++) {
        char path[256];
        int n = snprintf(path, sizeof path, "/proc/sys/%s", c->sysctl[i][0]);
        for (char *p = path + 10; n > 0 && *p; p++)
            if (*p == '.')
                *p = '/';
        const char *value = c->sysctl[i][1];
        char clamped[64];
        unsigned long lo, hi;
        /* Groups are the container's, which has no more than it maps ("all groups"). */
        if (!strcmp(c->sysctl[i][0], "net.ipv4.ping_group_range") &&
            sscanf(value, "%lu %lu", &lo, &hi) == 2 && hi >= max_gid) {
            snprintf(clamped, sizeof clamped, "%lu %lu", lo < max_gid ? lo : max_gid, max_gid);
            value = clamped;
        }
        int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        size_t len = strlen(value);
        if (fd < 0 || write(fd, value, len) != (ssize_t)len) {
            err_sys(err, CORDON_E_SETUP, "cannot set sysctl %s", c->sysctl[i][0]);
            if (fd >= 0)
                close(fd);
            return -1;
        }
        close(fd);
    }
    return 0;
}

/* Build the root, the network and the terminal; -1 with ERR. */
static int build(const struct sandbox_container *c, const struct ns_plan *plan,
                 const struct ct_fds *fds, int *tty, struct cordon_err *err)
{
    if (unshare(CLONE_NEWCGROUP) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create cgroup namespace");
    if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot switch to the namespace's root");
    if (!c->ns_path[CONTAINER_NS_UTS] && c->hostname &&
        sethostname(c->hostname, strlen(c->hostname)) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot set hostname '%s'", c->hostname);
    TRY(write_sysctls(c, plan->caller_is_root ? CONTAINER_IDS - 1 : 0, err));
    /* Without a user namespace this is the host's root, which an idmapped root does not
     * map: what it makes there is made as the container's root. */
    if (!fds->userns) {
        setfsgid(fds->id_offset);
        setfsuid(fds->id_offset);
    }
    int layer = -1;
    int rc = mounts_enter_root(plan, &layer, err);
    if (!fds->userns) {
        setfsuid(0);
        setfsgid(0);
    }
    TRY(rc);
    if (!c->ns_path[CONTAINER_NS_NET]) {
        TRY(ns_loopback_up(err));
        if (fds->gw_sock >= 0)
            TRY(ns_open_gateway_door(fds->gw_sock, err));
        if (fds->gw_sock >= 0 && plan->transparent)
            TRY(ns_open_transparent_doors(plan, fds->gw_sock, err));
    }
    if (fds->gw_sock >= 0)
        close(fds->gw_sock);
    TRY(confine_drop_bounding_set(c->caps, err));
    *tty = -1;
    if (c->terminal && (*tty = start_terminal_send(fds->start_r, err)) < 0)
        return -1;
    return 0;
}

static void keep_kill_only(void)
{
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct data[2] = { { 0 } };
    data[0].effective = data[0].permitted = 1u << CAP_KILL;
    (void)sys_capset(&hdr, data);
}

/* The process's cwd, made where missing (as runc does), as the container's root. */
static void make_cwd(const char *cwd, const struct ct_fds *fds)
{
    char buf[PATH_MAX];
    if (!cwd || snprintf(buf, sizeof buf, "%s", cwd) >= (int)sizeof buf)
        return;
    if (!fds->userns) {
        setfsgid(fds->id_offset);
        setfsuid(fds->id_offset);
    }
    for (char *s = buf + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        (void)mkdir(buf, 0755);
        *s = '/';
    }
    (void)mkdir(buf, 0755);
    if (!fds->userns) {
        setfsuid(0);
        setfsgid(0);
    }
}

static int exit_status(int ws)
{
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

static _Noreturn void child_main(const struct sandbox_container *c, const struct ns_plan *plan,
                                 const struct ct_fds *fds)
{
    struct cordon_err err = { 0 };
    char go;
    close_inherited(plan, fds);
    if (cgroup_ticket_use(&fds->cg) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot join the container's cgroup");
        fail(fds, &err);
    }
    boundary_scrub_args_and_env("cordon-init");
    if (read(fds->sync_r, &go, 1) != 1)
        _exit(125); /* the supervisor is gone */
    close(fds->sync_r);
    int tty = -1;
    if (build(c, plan, fds, &tty, &err) < 0)
        fail(fds, &err);
    struct seccomp_program filter;
    if (!boundary_receive_filter(fds->bpf_r, &filter))
        _exit(125);
    close(fds->bpf_r);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    struct start_message m;
    if (start_ready_send(fds->start_r) < 0 || start_message_recv(fds->start_r, &m) < 0)
        _exit(125); /* released without a start */
    close(fds->start_r);
    make_cwd(c->cwd, fds);
    umask(c->umask); /* the init's too: it is the pid 1 an engine looks at */
    pid_t cmd = fork();
    if (cmd < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot fork the command");
        fail(fds, &err);
    }
    if (cmd == 0) {
        struct ct_child ch = { c, plan, &filter, fds->id_offset };
        boundary_exec(&m, tty, c->cwd ? c->cwd : "/", fds->err_w, confine_container_command, &ch);
    }
    if (tty >= 0)
        close(tty);
    close(fds->err_w);
    for (int i = 0; i < 3; i++)
        close(m.stdio[i]);
    /* Init holds nothing; without a user namespace it is the host's root, and passes
     * signals on to a command of another uid only with CAP_KILL. */
    if (fds->userns)
        confine_drop_capabilities(&err);
    else
        keep_kill_only();
    boundary_forward_signals(cmd);
    for (;;) {
        int ws;
        pid_t w = waitpid(-1, &ws, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            _exit(125);
        if (w == cmd) {
            (void)!write(fds->status_w, &ws, sizeof ws);
            /* The caller of create reaps us: our status is the workload's. */
            _exit(exit_status(ws));
        }
    }
}

/* ---- the supervisor's side ---- */

static int write_maps(pid_t pid, enum ids ids, uint32_t base, uint32_t count,
                      struct cordon_err *err)
{
    char map[64];
    if (ids == IDS_USER) {
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)getuid());
        TRY(ns_write_proc(pid, "uid_map", map, err));
        TRY(ns_write_proc(pid, "setgroups", "deny", err));
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)getgid());
        return ns_write_proc(pid, "gid_map", map, err);
    }
    snprintf(map, sizeof map, "0 %u %u\n", ids == IDS_HOST_ROOT ? base : 0, count);
    TRY(ns_write_proc(pid, "uid_map", map, err));
    return ns_write_proc(pid, "gid_map", map, err);
}

struct pipes {
    int sync[2], err[2], status[2], start[2], bpf[2], gw[2], pid[2];
};

static const int ns_types[CONTAINER_NS_COUNT] = { CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS };

/*
 * The first stage, where the spec joins namespaces by path: a child of the
 * front end's caller too, it enters them with the supervisor's privilege
 * (a user namespace of the container's own could not), makes the gateway's
 * doors in a joined network namespace, clones the boundary into the rest,
 * says its pid and exits.
 */
static _Noreturn void first_stage(const struct sandbox_setup *s, const struct ns_plan *plan,
                                  const int ns_fd[CONTAINER_NS_COUNT], unsigned long flags,
                                  struct pipes *pp, const struct ct_fds *fds)
{
    struct cordon_err err = { 0 };
    const struct sandbox_container *c = s->container;
    for (int i = 0; i < CONTAINER_NS_COUNT; i++)
        if (ns_fd[i] >= 0 && setns(ns_fd[i], ns_types[i]) < 0) {
            err_sys(&err, CORDON_E_SETUP, "cannot join namespace '%s'", c->ns_path[i]);
            boundary_fail(fds->err_w, &err);
        }
    if (ns_fd[CONTAINER_NS_NET] >= 0 && fds->gw_sock >= 0 &&
        (ns_loopback_up(&err) < 0 || ns_open_gateway_door(fds->gw_sock, &err) < 0 ||
         (plan->transparent && ns_open_transparent_doors(plan, fds->gw_sock, &err) < 0)))
        boundary_fail(fds->err_w, &err);
    pid_t init = sys_clone_ns(flags);
    if (init == 0) {
        struct ct_fds mine = *fds;
        if (ns_fd[CONTAINER_NS_NET] >= 0)
            mine.gw_sock = -1; /* its doors are made */
        child_main(c, plan, &mine);
    }
    if (init < 0) {
        err_sys(&err, CORDON_E_UNSUPPORTED, "cannot create the container's namespaces");
        boundary_fail(fds->err_w, &err);
    }
    (void)!write(pp->pid[1], &init, sizeof init);
    _exit(0);
}

static void pipes_close(struct pipes *pp)
{
    int *all = (int *)pp;
    for (size_t i = 0; i < sizeof *pp / sizeof(int); i++)
        drop(&all[i]);
}

/*
 * Is the namespace FD (of /proc's kind NAME) the host's: the supervisor's
 * own, or pid 1's where that can be looked at? In the host's network
 * namespace loopback is the host's, open to the egress lock (127.0.0.0/8
 * passes: a pod's loopback holds its sidecars), and the door and the route
 * would be made on the host; the host's IPC namespace holds its shared
 * memory. So only a namespace of someone else's making (a pod's) is joined.
 */
static bool hosts_own(int fd, const char *name)
{
    struct stat ns, mine;
    if (fstat(fd, &ns) < 0)
        return true;
    for (int who = 0; who < 2; who++) {
        char path[32];
        snprintf(path, sizeof path, "/proc/%s/ns/%s", who ? "1" : "self", name);
        if (stat(path, &mine) == 0 && mine.st_dev == ns.st_dev && mine.st_ino == ns.st_ino)
            return true;
    }
    return false;
}

static int open_joined(const struct sandbox_container *c, int ns_fd[CONTAINER_NS_COUNT],
                       bool *joins, struct cordon_err *err)
{
    static const char *const names[CONTAINER_NS_COUNT] = { "net", "ipc", "uts" };
    static const char *const kinds[CONTAINER_NS_COUNT] = { "network", "ipc", "uts" };
    *joins = false;
    for (int i = 0; i < CONTAINER_NS_COUNT; i++)
        ns_fd[i] = -1;
    for (int i = 0; i < CONTAINER_NS_COUNT; i++) {
        if (!c->ns_path[i])
            continue;
        *joins = true;
        if ((ns_fd[i] = open(c->ns_path[i], O_RDONLY | O_CLOEXEC)) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot open namespace '%s'", c->ns_path[i]);
        if (hosts_own(ns_fd[i], names[i]))
            return err_set(err, CORDON_E_UNSUPPORTED,
                           "namespace %s: '%s' is the host's own: "
                           "cordon joins a pod's, never the host's",
                           kinds[i], c->ns_path[i]);
    }
    return 0;
}

/* Clone the boundary (through the first stage when it joins); its pid, -1 with ERR, or -2
 * when the first stage failed (its record is on the error pipe). */
static pid_t clone_boundary(const struct sandbox_setup *s, const struct ns_plan *plan,
                            struct pipes *pp, const struct ct_fds *fds, struct cordon_err *err)
{
    const struct sandbox_container *c = s->container;
    int ns_fd[CONTAINER_NS_COUNT];
    bool joins;
    unsigned long flags =
        CLONE_PARENT | CLONE_NEWPID | CLONE_NEWNS | (fds->userns ? CLONE_NEWUSER : 0);
    for (int i = 0; i < CONTAINER_NS_COUNT; i++)
        if (!c->ns_path[i])
            flags |= (unsigned long)ns_types[i];
    pid_t pid = -1;
    if (open_joined(c, ns_fd, &joins, err) < 0)
        goto out;
    pid = sys_clone_ns(joins ? CLONE_PARENT : flags);
    if (pid == 0) {
        if (s->in_child)
            s->in_child(s->in_child_arg);
        if (joins)
            first_stage(s, plan, ns_fd, flags, pp, fds);
        child_main(c, plan, fds);
    }
    if (pid < 0) {
        err_sys(err, CORDON_E_UNSUPPORTED, "cannot create the container's namespaces");
        goto out;
    }
    if (joins) {
        drop(&pp->pid[1]);
        pid = -1;
        if (!read_full(pp->pid[0], &pid, sizeof pid) || pid <= 0)
            pid = -2; /* the first stage said why on the error pipe */
    }
out:
    for (int i = 0; i < CONTAINER_NS_COUNT; i++)
        if (ns_fd[i] >= 0)
            close(ns_fd[i]);
    return pid;
}

/* What a container's boundary keeps for its release: a joined network namespace whose
 * synthetic route the first stage added. */
struct ct_state {
    int netns;
};

void container_boundary_release(struct sandbox_boundary *b)
{
    struct ct_state *st = b->state;
    boundary_release(b);
    if (!st)
        return;
    b->state = NULL;
    if (st->netns >= 0) {
        /* The namespace is the pod's and outlives us: our route leaves it. */
        pid_t pid = fork();
        if (pid == 0)
            _exit(setns(st->netns, CLONE_NEWNET) == 0 &&
                          route_local_range_del(SYNTH_NET, SYNTH_PREFIX) == 0
                      ? 0
                      : 1);
        if (pid > 0)
            waitpid(pid, NULL, 0);
        close(st->netns);
    }
    free(st);
}

static int receive(const struct sandbox_setup *s, const struct ns_plan *plan, struct pipes *pp,
                   struct sandbox_boundary *b, struct cordon_err *err)
{
    if ((s->gateway && (b->door = recv_fd(pp->gw[0])) < 0) ||
        (s->gateway && plan->transparent && ns_recv_transparent_doors(plan, pp->gw[0], b) < 0) ||
        (s->container->terminal && (b->tty_master = start_terminal_recv(pp->start[0])) < 0) ||
        start_ready_wait(pp->start[0]) < 0)
        return boundary_child_error(pp->err[0], err);
    return 0;
}

/* Who this runtime is (*IDS) and how many ids it has to map (*COUNT): enough for C's user? */
static int container_ids(const struct sandbox_container *c, bool userns, enum ids *ids,
                         uint32_t *count, struct cordon_err *err)
{
    *ids = who_am_i(count);
    if (!userns && *ids != IDS_HOST_ROOT)
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "the process level runs a container only for "
                       "the host's root: it makes the spec's namespaces without a user "
                       "namespace, with the engine's privilege");
    if (*ids == IDS_HOST_ROOT)
        *count = CONTAINER_IDS;
    if (*ids != IDS_HOST_ROOT && (c->uid >= *count || c->gid >= *count))
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "uid %u gid %u: this runtime has %u id%s to "
                       "map into the container",
                       (unsigned)c->uid, (unsigned)c->gid, *count, *count == 1 ? "" : "s");
    return 0;
}

int container_prepare(const struct sandbox_setup *s, struct sandbox_boundary *b, bool userns,
                      struct cordon_err *err)
{
    const struct sandbox_container *c = s->container;
    *b = (struct sandbox_boundary){ .pid = -1,
                                    .err_r = -1,
                                    .status_r = -1,
                                    .start_w = -1,
                                    .door = -1,
                                    .layer = -1,
                                    .tty_master = -1 };
    uint32_t count;
    enum ids ids;
    if (container_ids(c, userns, &ids, &count, err) < 0)
        return -1;
    struct ns_plan plan = { .caller_is_root = ids != IDS_USER,
                            .confine = *s->confine,
                            .root_tree = -1 };
    struct pipes pp;
    memset(&pp, -1, sizeof pp);
    int rc = -1;
    pid_t init = -1;
    struct cgroup_ticket ticket = CGROUP_TICKET_INIT;
    if (s->gateway) {
        plan.transparent = true;
        plan.n_ports = boundary_transparent_ports(s->p, plan.ports, NULL, NULL, 0, NULL);
    }
    bool root_idmapped = false;
    plan.confine.landlock_required = !userns; /* the process level's only file layer */
    if (plan_container(s, ids, &plan, &root_idmapped, err) < 0)
        goto out;
    if (pipe2(pp.sync, O_CLOEXEC) < 0 || pipe2(pp.err, O_CLOEXEC) < 0 ||
        pipe2(pp.status, O_CLOEXEC) < 0 || pipe2(pp.bpf, O_CLOEXEC) < 0 ||
        pipe2(pp.pid, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pp.start) < 0 ||
        (s->gateway && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pp.gw) < 0)) {
        err_sys(err, CORDON_E_SETUP, "cannot create pipes");
        goto out;
    }
    if (s->cg->version && cgroup_ticket_open(s->cg, &ticket, err) < 0)
        goto out;
    struct ct_fds fds = {
        .userns = userns,
        .id_offset = userns ? 0 : c->id_base,
        .sync_r = pp.sync[0],
        .err_w = pp.err[1],
        .status_w = pp.status[1],
        .start_r = pp.start[1],
        .bpf_r = pp.bpf[0],
        .gw_sock = s->gateway ? pp.gw[1] : -1,
        .cg = ticket,
    };
    init = clone_boundary(s, &plan, &pp, &fds, err);
    if (init < 0) {
        drop(&pp.err[1]);
        if (init == -2)
            boundary_child_error(pp.err[0], err);
        init = -1;
        goto out;
    }
    int *child_ends[] = { &pp.sync[0], &pp.err[1], &pp.status[1], &pp.start[1],
                          &pp.bpf[0],  &pp.gw[1],  &pp.pid[1] };
    for (size_t i = 0; i < sizeof child_ends / sizeof child_ends[0]; i++)
        drop(child_ends[i]);
    cgroup_ticket_close(&ticket);
    if (userns && write_maps(init, ids, c->id_base, count, err) < 0)
        goto out;
    if (c->set_oom_score_adj) {
        char v[16];
        snprintf(v, sizeof v, "%d", c->oom_score_adj);
        if (ns_write_proc(init, "oom_score_adj", v, err) < 0)
            goto out;
    }
    if (write(pp.sync[1], "g", 1) != 1 ||
        boundary_send_filter(s->p, &plan.seccomp, pp.bpf[1], err) < 0) {
        if (err->kind == CORDON_E_OK)
            boundary_child_error(pp.err[0], err);
        goto out;
    }
    if (receive(s, &plan, &pp, b, err) < 0)
        goto out;
    if (c->ns_path[CONTAINER_NS_NET] && s->gateway) {
        struct ct_state *st = calloc(1, sizeof *st);
        if (!st) {
            err_set(err, CORDON_E_INTERNAL, "out of memory");
            goto out;
        }
        st->netns = open(c->ns_path[CONTAINER_NS_NET], O_RDONLY | O_CLOEXEC);
        b->state = st;
    }
    snprintf(b->evidence, sizeof b->evidence, "{\"container\":true,\"root_idmapped\":%s}",
             root_idmapped ? "true" : "false");
    b->container = true;
    b->pid = init;
    init = -1;
    b->err_r = TAKE_FD(pp.err[0]);
    b->status_r = TAKE_FD(pp.status[0]);
    b->start_w = TAKE_FD(pp.start[0]);
    rc = 0;
out:
    if (init > 0)
        kill(init, SIGKILL); /* the caller of create reaps it */
    if (rc < 0) {
        drop(&b->door);
        drop(&b->tty_master);
        for (size_t i = 0; i < b->n_extra_doors; i++)
            drop(&b->extra_doors[i]);
        b->n_extra_doors = 0;
    }
    pipes_close(&pp);
    cgroup_ticket_close(&ticket);
    mounts_plan_release(&plan);
    seccomp_program_release(&plan.seccomp);
    return rc;
}
