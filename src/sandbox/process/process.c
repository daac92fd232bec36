/*
 * sandbox/process/process.c: the `process` isolation level, for hosts without user
 * namespaces (hardened distributions, Kubernetes pods, containers). No
 * namespace and no privilege: the command sees the host's filesystem,
 * process list and network stack, and is held by what a process can put on
 * itself: Landlock as the only filesystem layer (deny by default, reads
 * allowed where the namespace level binds, writes only in the workspace,
 * its own /tmp and writable binds; signals and abstract unix sockets scoped
 * to the run), the shared seccomp allowlist, and a second filter whose
 * connect() and listen() its supervisor answers (netnotify.c).
 *
 * Three processes, all forks of the supervisor:
 *   top      the boundary the core waits for and signals; passes signals on
 *            and exits with the keeper. If it is killed (a timeout), the
 *            keeper sees it and ends the run.
 *   keeper   a child subreaper: waits at the start seam, forks the command,
 *            answers its network notifications, reports its status, then
 *            kills whatever of its tree is left (daemons included: orphans
 *            come back to it) and exits.
 *   command  confines itself and execs.
 */
#include "sandbox/backend.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/home.h"
#include "common/hostpath.h"
#include "common/syscalls.h"
#include "sandbox/boundary.h"
#include "sandbox/cgroup.h"
#include "sandbox/notify.h"
#include "sandbox/process/metanotify.h"
#include "sandbox/process/netnotify.h"
#include "sandbox/ns_int.h"
#include "sandbox/plan.h"
#include "sandbox/start.h"
#include "sandbox/usock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The run's private directory on the host: tmp/, workspace/ (scratch), the CA. */
struct process_state {
    char run_dir[64]; /* /tmp/cordon-run-PID-XXXXXX */
    char workdir[PATH_MAX];
    char tmpdir[PATH_MAX];
    char ca_cert[PATH_MAX];
    char ca_bundle[PATH_MAX];
};

/* What the command and its keeper need, planned before fork. */
struct process_plan {
    struct confine_plan confine;
    struct seccomp_program notify;
    struct netnotify nn;
    struct metanotify meta;    /* the writable trees: confine.landlock's rules */
    struct names_keeper names; /* a host workspace's changes (names.h) */
    const char *workdir;
    const char *run_dir;     /* removed by the keeper as it ends, whatever ends the run */
    struct cgroup_ticket cg; /* the command joins the run's cgroups through it */
    bool root;
    struct usock_keeper usock; /* nn's: the keeper's copy notes the run's binds */
};

/* File descriptors of the boundary; every other is closed at once. */
struct boundary_fds {
    int sync_r;   /* a byte once the supervisor set us up; HUP when it died */
    int err_w;    /* error records */
    int status_w; /* the command's wait status */
    int start_r;  /* the start seam */
    int bpf_r;    /* the allowlist, compiled meanwhile */
};

/* Each right a Landlock ABI adds that this level cannot do without. */
static const struct {
    int abi;
    const char *right;
} needed_rights[] = {
    { 1, "filesystem access control" },
    { 2, "LANDLOCK_ACCESS_FS_REFER (renames and links across directories)" },
    { 3, "LANDLOCK_ACCESS_FS_TRUNCATE (read-only files truncated)" },
    { 4, "LANDLOCK_ACCESS_NET_BIND_TCP and _CONNECT_TCP (host ports)" },
    { 5, "LANDLOCK_ACCESS_FS_IOCTL_DEV (device ioctls)" },
    { 6, "LANDLOCK_SCOPE_SIGNAL and _ABSTRACT_UNIX_SOCKET (host processes and sockets)" },
};

static int check_landlock(int abi, struct cordon_err *err)
{
    for (size_t i = 0; i < sizeof needed_rights / sizeof needed_rights[0]; i++)
        if (abi < needed_rights[i].abi)
            return err_set(err, CORDON_E_UNSUPPORTED,
                           "the process level needs Landlock ABI 6; this kernel has %s%d, "
                           "without %s",
                           abi ? "ABI " : "no Landlock (ABI ", abi, needed_rights[i].right);
    return 0;
}

static int proc_probe(struct cordon_err *err)
{
    return check_landlock(landlock_abi(), err);
}

/* ---- the command and its keeper: between fork and exec, allocating nothing ---- */

struct command_confine {
    const struct process_plan *plan;
    const struct seccomp_program *filter;
    int notify_w;
};

static int confine_process_command(void *arg, struct cordon_err *err)
{
    const struct command_confine *c = arg;
    /* Root-started: no capability may come back at exec, the bounding set empty. */
    if (c->plan->root)
        TRY(confine_drop_bounding_set(0, err));
    return confine_command_notified(&c->plan->confine, c->filter, &c->plan->notify, c->notify_w,
                                    err);
}

/*
 * Kill what is left of the tree. The keeper is a subreaper, so an orphan
 * (a double-forked daemon) is its child: each round kills the children,
 * reaps them, and so adopts their children, until none is left. A child
 * not yet reaped keeps its pid, so the signal cannot reach a stranger.
 */
static void kill_tree(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    for (int round = 0; round < 10000; round++) {
        bool any = false;
        char buf[4096];
        read_small_at(AT_FDCWD, path, buf, sizeof buf); /* "" when it cannot be read */
        for (char *p = buf; *p;) {
            char *end;
            long pid = strtol(p, &end, 10);
            if (end == p)
                break;
            int pidfd = sys_pidfd_open((pid_t)pid, 0);
            if (pidfd >= 0) {
                sys_pidfd_send_signal(pidfd, SIGKILL, 0);
                close(pidfd);
            }
            any = true;
            p = end;
        }
        int st;
        pid_t w;
        while ((w = waitpid(-1, &st, any ? 0 : WNOHANG)) > 0)
            any = false; /* reaped one; read the list again after the rest */
        if (w < 0 && errno == ECHILD)
            return;
    }
}

static _Noreturn void keeper_exit(const struct process_plan *plan, int status)
{
    kill_tree();
    /* The run's directory, once nothing of the run is left to use it. */
    hostpath_remove_tree(plan->run_dir);
    _exit(status);
}

static void noop(int sig)
{
    (void)sig;
}

static _Noreturn void keeper_main(const struct process_plan *plan, const struct boundary_fds *fds,
                                  int top_alive)
{
    struct cordon_err err = { 0 };
    /* A group of its own: a kill of cordon's process group (a shell's, or a
     * test's killpg) takes the top, and the keeper is left to end the run. */
    setpgid(0, 0);
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot become the run's subreaper");
        boundary_fail(fds->err_w, &err);
    }
    struct seccomp_program filter;
    if (!boundary_receive_filter(fds->bpf_r, &filter))
        keeper_exit(plan, 125); /* the supervisor could not compile it and reports why */
    close(fds->bpf_r);

    /* The seam: the call arrives now, or never. */
    struct start_message m;
    if (start_ready_send(fds->start_r) < 0 || start_message_recv(fds->start_r, &m) < 0)
        keeper_exit(plan, 125); /* released, or the supervisor died, before a start */
    close(fds->start_r);
    /* The call's files in its workspace, as the caller's uid (the command's). */
    if (start_place_files(&m, plan->workdir, &err) < 0)
        boundary_fail(fds->err_w, &err);

    int nsock[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, nsock) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot create the network filter's socket");
        boundary_fail(fds->err_w, &err);
    }
    pid_t cmd = fork();
    if (cmd < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot fork the command");
        boundary_fail(fds->err_w, &err);
    }
    if (cmd == 0) {
        close(nsock[0]);
        close(top_alive);
        /* The command joins the run's cgroup, the keeper does not: the
         * watchdog's kill of the cgroup (cordon died) leaves the keeper to
         * finish the tree and remove the run's directory. */
        if (cgroup_ticket_use(&plan->cg) < 0) {
            err_sys(&err, CORDON_E_SETUP, "cannot join the run's cgroup");
            boundary_fail(fds->err_w, &err);
        }
        for (int c = 0; c < CGROUP_COUNT; c++)
            if (plan->cg.fd[c] >= 0)
                close(plan->cg.fd[c]);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
            err_sys(&err, CORDON_E_SETUP, "cannot set parent-death signal");
            boundary_fail(fds->err_w, &err);
        }
        struct command_confine cc = { plan, &filter, nsock[1] };
        boundary_exec(&m, -1, plan->workdir, fds->err_w, confine_process_command, &cc);
    }
    close(nsock[1]);
    /* The command's /proc/PID, the inode its Landlock rule names, kept (see plan_proc). */
    char self[32];
    snprintf(self, sizeof self, "/proc/%d", (int)cmd);
    int pin = open(self, O_PATH | O_DIRECTORY | O_CLOEXEC);
    (void)pin; /* held until the keeper exits */
    for (int c = 0; c < CGROUP_COUNT; c++)
        if (plan->cg.fd[c] >= 0)
            close(plan->cg.fd[c]); /* the command's alone: the keeper stays out */
    close(fds->err_w);
    for (int i = 0; i < 3; i++)
        close(m.stdio[i]);
    boundary_forward_signals(cmd);
    /* SIGCHLD wakes the loop to reap (an orphan's zombie would linger otherwise);
     * a keeper's own call (a connect, a chmod for the command) is restarted. */
    struct sigaction sa = { .sa_handler = noop, .sa_flags = SA_RESTART }; /* poll still wakes */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);

    int listener = recv_fd(nsock[0]); /* -1: the command failed before it sent one */
    close(nsock[0]);
    /* Every connect and chmod waits on us: answered on the caller's CPU where the kernel can. */
    if (listener >= 0)
        notify_sync_wakeup(listener);
    struct netrelay relay;
    netrelay_init(&relay);
    for (;;) {
        int st;
        pid_t w;
        while ((w = waitpid(-1, &st, WNOHANG)) > 0)
            if (w == cmd) {
                (void)!write(fds->status_w, &st, sizeof st);
                goto done;
            }
        if (w < 0 && errno == ECHILD)
            goto done;
        struct pollfd p[2 + NETRELAY_MAX_FDS] = { { .fd = top_alive, .events = POLLIN },
                                                  { .fd = listener, .events = POLLIN } };
        size_t nr = netrelay_fds(&relay, p + 2);
        int r = poll(p, 2 + nr, 1000);
        if (r < 0)
            continue; /* EINTR: a child ended or a signal was passed on */
        if (p[0].revents)
            goto done; /* the top was killed: the run is over */
        if (listener >= 0 && (p[1].revents & (POLLHUP | POLLERR | POLLNVAL))) {
            close(listener);
            listener = -1;
        } else if (listener >= 0 && (p[1].revents & POLLIN)) {
            if (netnotify_serve(listener, &plan->nn, &relay) < 0) {
                close(listener);
                listener = -1;
            }
            /* It may have made or ended stand-ins: the relay's events are
             * stale (a descriptor number reused), so ask again, not waiting. */
            nr = netrelay_fds(&relay, p + 2);
            if (poll(p + 2, nr, 0) < 0)
                nr = 0;
        }
        if (listener >= 0)
            netrelay_serve(listener, &plan->nn, &relay, p + 2, nr);
    }
done:
    keeper_exit(plan, 0);
}

static _Noreturn void top_main(const struct process_plan *plan, const struct boundary_fds *fds)
{
    struct cordon_err err = { 0 };
    char go;
    boundary_scrub_args_and_env("cordon-process");
    if (read(fds->sync_r, &go, 1) != 1)
        _exit(125); /* the supervisor is gone */
    /* Die with the supervisor; the keeper then ends the run. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot set parent-death signal");
        boundary_fail(fds->err_w, &err);
    }
    struct pollfd alive = { .fd = fds->sync_r, .events = POLLIN };
    if (poll(&alive, 1, 0) > 0 && (alive.revents & (POLLHUP | POLLERR)))
        _exit(125);
    int hup[2];
    if (pipe2(hup, O_CLOEXEC) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot create a pipe");
        boundary_fail(fds->err_w, &err);
    }
    pid_t keeper = fork();
    if (keeper < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot fork the run's keeper");
        boundary_fail(fds->err_w, &err);
    }
    if (keeper == 0) {
        close(hup[1]);
        close(fds->sync_r);
        keeper_main(plan, fds, hup[0]);
    }
    close(hup[0]);
    close(fds->err_w);
    close(fds->status_w);
    close(fds->start_r);
    close(fds->bpf_r);
    boundary_forward_signals(keeper);
    for (;;) {
        pid_t w = waitpid(keeper, NULL, 0);
        if (w == keeper || (w < 0 && errno != EINTR))
            _exit(0);
    }
}

/* ---- supervisor side ---- */

static void remove_run_dir(struct process_state *st)
{
    if (!st->run_dir[0])
        return;
    hostpath_remove_tree(st->run_dir);
    st->run_dir[0] = '\0';
}

static int write_file(const char *path, const char *data, size_t len, struct cordon_err *err)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create '%s'", path);
    if (!write_all(fd, data, len))
        return err_sys(err, CORDON_E_SETUP, "cannot write '%s'", path);
    return 0;
}

/* The run's CA alone and after the host's trust store, as the namespace level shows them. */
static int write_ca(struct process_state *st, const char *ca_pem, struct cordon_err *err)
{
    snprintf(st->ca_cert, sizeof st->ca_cert, "%s/run-ca.pem", st->run_dir);
    snprintf(st->ca_bundle, sizeof st->ca_bundle, "%s/ca-bundle.pem", st->run_dir);
    TRY(write_file(st->ca_cert, ca_pem, strlen(ca_pem), err));
    _cleanup_free_ char *bundle = NULL;
    size_t len;
    TRY(sandbox_ca_bundle(ca_pem, &bundle, &len, err));
    return write_file(st->ca_bundle, bundle, len, err);
}

static int make_run_dir(const struct sandbox_setup *s, struct process_state *st,
                        struct cordon_err *err)
{
    TRY(boundary_private_dir(s, "/tmp", "run", st->run_dir, sizeof st->run_dir, err));
    snprintf(st->tmpdir, sizeof st->tmpdir, "%s/tmp", st->run_dir);
    /* Its HOME too (no private /tmp here): made, with its .gitconfig, as the caller. */
    if (mkdir(st->tmpdir, 0700) < 0 || home_make(st->tmpdir) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create '%s'", st->tmpdir);
    if (s->p->workspace) {
        snprintf(st->workdir, sizeof st->workdir, "%s", s->p->workspace);
        return 0;
    }
    snprintf(st->workdir, sizeof st->workdir, "%s/workspace", st->run_dir);
    if (mkdir(st->workdir, 0700) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create '%s'", st->workdir);
    return 0;
}

/* Is PATH TOP or beneath it? */
static bool beneath(const char *path, const char *top)
{
    size_t n = strlen(top);
    if (n == 1 && top[0] == '/')
        return true;
    return strncmp(path, top, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* The writable tree (workspace or writable bind, other than bind SELF) holding PATH, or NULL. */
static const char *writable_around(const struct policy *p, const char *path, size_t self)
{
    if (p->workspace && beneath(path, p->workspace))
        return p->workspace;
    for (size_t i = 0; i < p->n_binds; i++)
        if (i != self && p->binds[i].writable && beneath(path, p->binds[i].source))
            return p->binds[i].source;
    return NULL;
}

/*
 * A protected name Landlock cannot hold: the workspace lies inside a
 * writable tree, whose rule every entry beneath inherits (rights only add
 * up, never subtract).
 */
static int refuse_protected(const char *name, const char *tree, struct cordon_err *err)
{
    return err_set(err, CORDON_E_UNSUPPORTED,
                   "the process level cannot keep '%s' read-only in the workspace: it is inside "
                   "the writable '%s' (Landlock only adds rights beneath a tree); use --level "
                   "namespace, or take the names out with filesystem.unsafe_unprotect",
                   name, tree);
}

static int check_policy(const struct sandbox_setup *s, struct cordon_err *err)
{
    const struct policy *p = s->p;
    for (size_t i = 0; i < p->n_binds; i++)
        if (strcmp(p->binds[i].source, p->binds[i].dest) != 0)
            return err_set(err, CORDON_E_UNSUPPORTED,
                           "the process level has no mounts: bind '%s' cannot appear at '%s' "
                           "(bind it at its own path)",
                           p->binds[i].source, p->binds[i].dest);
    /* Landlock rights only add up: nothing is read-only inside a writable tree. */
    for (size_t i = 0; i < p->n_binds; i++) {
        const char *w = writable_around(p, p->binds[i].source, i);
        if (!p->binds[i].writable && w)
            return err_set(err, CORDON_E_UNSUPPORTED,
                           "the process level cannot make '%s' read-only inside the writable "
                           "'%s' (Landlock only adds rights beneath a tree)",
                           p->binds[i].source, w);
    }
    /* Nor hidden inside a readable one: the namespace level masks them. */
    const char *hidden[SANDBOX_N_HIDDEN_FILES];
    sandbox_hidden_files(p, hidden);
    for (size_t h = 0; h < SANDBOX_N_HIDDEN_FILES; h++) {
        _cleanup_free_ char *real = hidden[h] ? realpath(hidden[h], NULL) : NULL;
        for (size_t i = 0; real && i < p->n_binds; i++)
            if (beneath(real, p->binds[i].source))
                return err_set(err, CORDON_E_UNSUPPORTED,
                               "the process level cannot hide '%s' inside the bind '%s' (no "
                               "mounts to mask it with)",
                               hidden[h], p->binds[i].source);
    }
    /* A writable bind inside the workspace would hand its rights to the
     * protected entries beneath it (a pattern's matches are known only now). */
    const struct workspace_guard *g = s->workspace;
    for (size_t e = 0; g && e < g->n_entries; e++) {
        char full[PATH_MAX];
        snprintf(full, sizeof full, "%s/%s", p->workspace, g->entries[e].rel);
        for (size_t i = 0; i < p->n_binds; i++)
            if (p->binds[i].writable && beneath(full, p->binds[i].source))
                return refuse_protected(g->entries[e].rel, p->binds[i].source, err);
    }
    return 0;
}

/* Before the run exists: a workspace inside a writable bind cannot keep a protected name read-only. */
static int proc_admits(const struct policy *p, struct cordon_err *err)
{
    if (!p->workspace || !p->n_protected)
        return 0;
    for (size_t i = 0; i < p->n_binds; i++)
        if (p->binds[i].writable && beneath(p->workspace, p->binds[i].source))
            return refuse_protected(p->protected[0], p -> binds[i].source, err);
    return 0;
}

/*
 * A host tree the policy names, opened here as the namespace level's mounts
 * open it (no link on the way unless the policy follows them), so the rule
 * covers what was checked and nothing a planted link points at.
 */
static int add_host_tree(struct landlock_plan *ll, const char *path, bool follow, unsigned access,
                         struct cordon_err *err)
{
    int fd = hostpath_open(AT_FDCWD, path, O_PATH, 0, follow, err);
    if (fd < 0)
        return err_prefix(err, "'%s'", path);
    if (landlock_plan_add_fd(ll, fd, path, access, err) < 0) {
        close(fd);
        return -1;
    }
    return 0;
}

/*
 * The host workspace, read-only to Landlock: Landlock rights only add up, so
 * a writable workspace could not keep a protected entry in it read-only,
 * nor refuse a protected name. The keeper makes every change there instead
 * (names.h, NAMES_WRITE), refusing those. The scratch workspace is the
 * run's whole (make_run_dir).
 */
static int plan_workspace(struct landlock_plan *ll, const struct policy *p,
                          const struct workspace_guard *g, struct cordon_err *err)
{
    int root = fcntl(g->fd, F_DUPFD_CLOEXEC, 0);
    if (root < 0)
        return err_sys(err, CORDON_E_SETUP, "workspace: cannot reopen '%s'", p->workspace);
    if (landlock_plan_add_fd(ll, root, p->workspace, LANDLOCK_RO, err) < 0) {
        close(root);
        return -1;
    }
    return 0;
}

/*
 * What of the host's /proc a root caller's program may read (another
 * caller's reads the tree, as the host lets it). A root caller's run is uid 0
 * (with no capability) and so the owner of the kernel's own files there:
 * kpageflags, slabinfo, vmallocinfo, timer_list, pagetypeinfo (memory and
 * kernel layout), and another process's command line or status. So not the
 * tree: every directory may be listed (the pids, a /proc/self/fd), and
 * these files read, the sysctl values named here too (read-only: no write
 * to /proc at all), and the command's own /proc/PID. Landlock
 * cannot name a process that does not exist yet: the command's children
 * find their /proc/self listed but not readable (ps, top, /proc/self/maps).
 */
static const char *const proc_readable[] = {
    "cpuinfo",     /* lscpu, libuv's os.cpus(), BLAS libraries */
    "meminfo",     /* free, libuv's total memory, runtimes sizing their heaps */
    "stat",        /* glibc's get_nprocs() fallback, CPU times */
    "filesystems", /* libselinux at the start of ls, cp, ... */
    "loadavg",     /* getloadavg(): make -l, uptime */
    "uptime",
    "version",
    "swaps",   /* free */
    "cgroups", /* runtimes looking for their limits */
    /* sysctl values, not /proc/sys whole: net holds secrets only root reads
     * (tcp_fastopen_key, stable_secret) */
    "sys/kernel",             /* osrelease, pid_max, ngroups_max, cap_last_cap, random/boot_id */
    "sys/vm",                 /* overcommit_memory (jemalloc), max_map_count */
    "sys/fs",                 /* nr_open, inotify limits (file watchers) */
    "sys/crypto",             /* fips_enabled (OpenSSL, Go) */
    "sys/user",               /* max_user_namespaces */
    "sys/net/core/somaxconn", /* Go's listen backlog */
    "sys/net/ipv4/ip_local_port_range",
};

/*
 * PATH, opened here (no link followed) and held by the plan, so the rule
 * names what was opened; -ENOENT's absence is 0 when OPTIONAL.
 */
static int add_opened(struct landlock_plan *ll, const char *path, unsigned access, bool optional,
                      struct cordon_err *err)
{
    int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && optional && errno == ENOENT)
        return 0;
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open '%s'", path);
    if (landlock_plan_add_fd(ll, fd, path, access, err) < 0) {
        close(fd);
        return -1;
    }
    return 0;
}

static int plan_proc(struct landlock_plan *ll, struct cordon_err *err)
{
    TRY(add_opened(ll, "/proc", LANDLOCK_LIST, false, err));
    /* Each held open by the boundary for the run's life: procfs makes a new
     * inode for an entry whose dentry was evicted, which the rule would not name. */
    for (size_t i = 0; i < sizeof proc_readable / sizeof proc_readable[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%s", proc_readable[i]);
        TRY(add_opened(ll, path, LANDLOCK_RO, true, err));
    }
    /* Opened by the command itself: /proc/self is its own pid's (the keeper pins it). */
    return landlock_plan_add(ll, "/proc/self", LANDLOCK_RO, true, err);
}

/*
 * PATH, beneath one of cordon's host entries, as far as anyone may read it
 * (U): where an unreadable part lies beneath, its readable parts one by one.
 */
static int add_readable(struct landlock_plan *ll, const char *path,
                        const struct sandbox_unreadable *u, struct cordon_err *err)
{
    size_t len = strlen(path);
    bool above = false;
    for (size_t i = 0; i < u->n; i++) {
        if (strcmp(u->path[i], path) == 0)
            return 0;
        above |= strncmp(u->path[i], path, len) == 0 && u->path[i][len] == '/';
    }
    if (!above)
        return landlock_plan_add(ll, path, LANDLOCK_RO, true, err);
    DIR *d = opendir(path);
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && d && (e = readdir(d))) {
        char child[PATH_MAX];
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            snprintf(child, sizeof child, "%s/%s", path, e->d_name) < (int)sizeof child)
            rc = add_readable(ll, child, u, err);
    }
    if (d)
        closedir(d);
    return rc;
}

/*
 * A host /etc entry of cordon's. A root caller's run owns root's files, so
 * what only root may read there (/etc/ssl/private) is left out of its rules.
 */
static int add_etc_entry(struct landlock_plan *ll, const char *entry, struct cordon_err *err)
{
    if (geteuid() != 0)
        return landlock_plan_add(ll, entry, LANDLOCK_RO, true, err);
    struct sandbox_unreadable u;
    sandbox_find_unreadable(entry, &u);
    int rc = u.all ? 0 : add_readable(ll, entry, &u, err);
    sandbox_unreadable_free(&u);
    return rc;
}

static int plan_landlock(const struct sandbox_setup *s, const struct process_state *st,
                         struct confine_plan *c, struct cordon_err *err)
{
    const struct policy *p = s->p;
    struct landlock_plan *ll = &c->landlock;
    landlock_plan_init(ll, landlock_abi());
    TRY(check_landlock(ll->abi, err));
    c->landlock_required = true;
    /* No network namespace: TCP binds and connects are the kernel's to refuse
     * (the gateway's socket arrives connected, from outside). */
    ll->handled_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;

    TRY(landlock_plan_add(ll, "/usr", LANDLOCK_RO, false, err));
    for (size_t i = 0; i < SANDBOX_N_USR_LINKS; i++)
        TRY(landlock_plan_add(ll, sandbox_usr_links[i], LANDLOCK_RO, true, err));
    for (size_t i = 0; i < SANDBOX_N_ETC_FILES; i++)
        TRY(add_etc_entry(ll, sandbox_etc_files[i], err));
    /* For uid 0 the host's kernel files are readable (owner root): narrowed.
     * Another uid reads what the host gives it, as any process of its own:
     * the whole tree, so a child's /proc/self stays readable (ps, a JVM). */
    if (geteuid() == 0)
        TRY(plan_proc(ll, err));
    else
        TRY(landlock_plan_add(ll, "/proc", LANDLOCK_RO, false, err));
    for (size_t i = 0; i < SANDBOX_N_DEV_NODES; i++) {
        char dev[32];
        snprintf(dev, sizeof dev, "/dev/%s", sandbox_dev_nodes[i]);
        TRY(landlock_plan_add(ll, dev, LANDLOCK_DEV, true, err));
    }
    TRY(landlock_plan_add(ll, "/dev/pts", LANDLOCK_DEV, true, err));
    TRY(landlock_plan_add(ll, "/dev/ptmx", LANDLOCK_DEV, true, err));
    /* By descriptor: the keeper resolves metadata changes beneath them (metanotify.h). */
    TRY(add_opened(ll, st->tmpdir, LANDLOCK_RW, false, err));
    if (!p->workspace)
        TRY(add_opened(ll, st->workdir, LANDLOCK_RW, false, err));
    if (st->ca_cert[0]) {
        TRY(landlock_plan_add(ll, st->ca_cert, LANDLOCK_RO, false, err));
        TRY(landlock_plan_add(ll, st->ca_bundle, LANDLOCK_RO, false, err));
    }
    for (size_t i = 0; i < p->n_binds; i++)
        TRY(add_host_tree(ll, p->binds[i].source, p->binds[i].follow_symlinks,
                          p->binds[i].writable ? LANDLOCK_HOST_RW : LANDLOCK_RO, err));
    if (p->workspace)
        TRY(plan_workspace(ll, p, s->workspace, err));
    return 0;
}

/* A host workspace's keeper (names.h): its root, protected entries and the other writable trees. */
static int plan_names(const struct sandbox_setup *s, struct process_plan *plan,
                      struct cordon_err *err)
{
    names_keeper_init(&plan->names, s->workspace ? names_mode_for(s->p, NAMES_WRITE) : NAMES_OFF,
                      s->p);
    if (plan->names.mode == NAMES_OFF)
        return 0;
    plan->names.g = s->workspace;
    plan->names.ll = &plan->confine.landlock; /* the keeper's copy is at the same address */
    if (names_keeper_root(&plan->names, fcntl(s->workspace->fd, F_DUPFD_CLOEXEC, 0)) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open the workspace '%s'", s->p->workspace);
    return 0;
}

/*
 * The gateway's listener, on the host's loopback: any host process can
 * connect to it, so each connection must open with a token of the run's,
 * which only the keeper writes (on the sockets it dials for the command).
 */
static int open_door(const struct policy *p, struct netnotify *nn, struct sandbox_boundary *b,
                     struct cordon_err *err)
{
    struct egress_door *d = &nn->door;
    if (getrandom(d->token, sizeof d->token, 0) != (ssize_t)sizeof d->token)
        return err_sys(err, CORDON_E_SETUP, "cannot draw the gateway's door token");
    _Static_assert(sizeof d->token == sizeof b->door_token, "door token");
    memcpy(b->door_token, d->token, sizeof b->door_token);
    b->door_token_set = true;
    _cleanup_close_ int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 128) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &len) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open the gateway's socket on 127.0.0.1");
    d->on = d->token_set = true;
    d->addr = a;
    d->rules = &p->egress.rules; /* loopback is the host's: no own_loopback */
    /* Transparent egress: the ports a name rule allows (the proxy's own is its door's). */
    nn->n_ports = boundary_transparent_ports(p, nn->ports, NULL, NULL, 0, NULL);
    return TAKE_FD(l);
}

static void proc_release(struct sandbox_boundary *b)
{
    if (b->container)
        return container_boundary_release(b);
    boundary_release(b);
    struct process_state *st = b->state;
    if (st) {
        remove_run_dir(st);
        free(st);
        b->state = NULL;
    }
    b->workdir = b->tmpdir = b->ca_cert = b->ca_bundle = NULL;
}

struct pipes {
    int sync[2], err[2], status[2], start[2], bpf[2];
};

static void pipes_close(struct pipes *pp)
{
    int *all = (int *)pp;
    for (size_t i = 0; i < sizeof *pp / sizeof(int); i++)
        closep(&all[i]);
}

static void plan_release(struct process_plan *plan)
{
    struct landlock_plan *ll = &plan->confine.landlock;
    for (size_t i = 0; i < ll->n_rules; i++)
        if (ll->rules[i].fd >= 0)
            close(ll->rules[i].fd);
    ll->n_rules = 0;
    seccomp_program_release(&plan->notify);
    if (plan->names.root >= 0)
        close(plan->names.root);
    plan->names.root = -1;
    explicit_bzero(plan->nn.door.token, sizeof plan->nn.door.token); /* the keeper has its copy */
}

static int proc_prepare(const struct sandbox_setup *s, struct sandbox_boundary *b,
                        struct cordon_err *err)
{
    if (s->container)
        return container_prepare(s, b, false, err);
    const struct policy *p = s->p;
    *b = (struct sandbox_boundary){
        .pid = -1, .err_r = -1, .status_r = -1, .start_w = -1, .door = -1, .layer = -1
    };
    struct process_plan plan = { .confine = *s->confine,
                                 .cg = CGROUP_TICKET_INIT,
                                 .root = geteuid() == 0,
                                 .names = { .root = -1 } };
    struct seccomp_program filter = { 0 };
    struct pipes pp;
    memset(&pp, -1, sizeof pp);
    pid_t top = -1;
    int rc = -1;
    struct cgroup_ticket ticket = CGROUP_TICKET_INIT;

    struct process_state *st = calloc(1, sizeof *st);
    if (!st)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    b->state = st;
    if (check_policy(s, err) < 0 || make_run_dir(s, st, err) < 0 ||
        (s->ca_pem && write_ca(st, s->ca_pem, err) < 0) ||
        plan_landlock(s, st, &plan.confine, err) < 0 ||
        usock_keeper_init(&plan.usock, p, false, err) < 0 || plan_names(s, &plan, err) < 0 ||
        netnotify_program(s->gateway, plan.names.mode, &plan.notify, err) < 0)
        goto out;
    plan.nn.usock = &plan.usock; /* the same address in the keeper, a fork */
    plan.workdir = st->workdir;
    plan.run_dir = st->run_dir;
    plan.meta.ll = &plan.confine.landlock; /* the boundary's copy is at the same address */
    plan.nn.meta = &plan.meta;
    if (plan.names.mode != NAMES_OFF)
        plan.meta.names = plan.nn.names = &plan.names;
    if (s->gateway && (b->door = open_door(p, &plan.nn, b, err)) < 0)
        goto out;
    /* The keeper is the relay: DNS stand-ins and synthetic addresses (netnotify.h). */
    b->relay_transparent = s->gateway;
    if (pipe2(pp.sync, O_CLOEXEC) < 0 || pipe2(pp.err, O_CLOEXEC) < 0 ||
        pipe2(pp.status, O_CLOEXEC) < 0 || pipe2(pp.bpf, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pp.start) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot create pipes");
        goto out;
    }

    /* The command joins the run's cgroups itself (see cgroup.h); the keeper stays out. */
    if (s->cg->version && cgroup_ticket_open(s->cg, &ticket, err) < 0)
        goto out;
    plan.cg = ticket;
    top = fork();
    if (top < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot start the sandbox");
        goto out;
    }
    if (top == 0) {
        if (s->in_child)
            s->in_child(s->in_child_arg);
        struct boundary_fds fds = { .sync_r = pp.sync[0],
                                    .err_w = pp.err[1],
                                    .status_w = pp.status[1],
                                    .start_r = pp.start[1],
                                    .bpf_r = pp.bpf[0] };
        int keep[6 + CGROUP_COUNT + LANDLOCK_PLAN_MAX_RULES];
        size_t n = 0;
        for (int c = 0; c < CGROUP_COUNT; c++)
            if (ticket.fd[c] >= 0)
                keep[n++] = ticket.fd[c];
        for (size_t i = 0; i < plan.confine.landlock.n_rules; i++)
            if (plan.confine.landlock.rules[i].fd >= 0)
                keep[n++] = plan.confine.landlock.rules[i].fd;
        if (plan.names.root >= 0)
            keep[n++] = plan.names.root;
        const int *f = (const int *)&fds;
        for (size_t i = 0; i < sizeof fds / sizeof(int); i++)
            keep[n++] = f[i];
        close_fds_except(keep, n);
        top_main(&plan, &fds);
    }
    closep(&pp.sync[0]);
    closep(&pp.err[1]);
    closep(&pp.status[1]);
    closep(&pp.start[1]);
    closep(&pp.bpf[0]);
    pp.sync[0] = pp.err[1] = pp.status[1] = pp.start[1] = pp.bpf[0] = -1;

    cgroup_ticket_close(&ticket);
    if (write(pp.sync[1], "g", 1) != 1 || boundary_send_filter(p, &filter, pp.bpf[1], err) < 0) {
        if (err->kind == CORDON_E_OK)
            err_sys(err, CORDON_E_SETUP, "cannot start the sandbox");
        goto out;
    }
    if (start_ready_wait(pp.start[0]) < 0) {
        boundary_child_error(pp.err[0], err);
        goto out;
    }
    b->pid = top;
    top = -1;
    b->err_r = TAKE_FD(pp.err[0]);
    b->status_r = TAKE_FD(pp.status[0]);
    b->start_w = TAKE_FD(pp.start[0]);
    b->workdir = st->workdir;
    b->tmpdir = st->tmpdir;
    b->ca_cert = st->ca_cert[0] ? st->ca_cert : NULL;
    b->ca_bundle = st->ca_bundle[0] ? st->ca_bundle : NULL;
    rc = 0;

out:
    if (top > 0) {
        kill(top, SIGKILL);
        waitpid(top, NULL, 0);
    }
    pipes_close(&pp);
    cgroup_ticket_close(&ticket);
    plan_release(&plan);
    seccomp_program_release(&filter);
    if (rc < 0)
        proc_release(b);
    return rc;
}

const struct sandbox_backend process_backend = {
    .name = "process",
    .level = CORDON_LEVEL_PROCESS,
    .shares = "no namespaces: the command sees the host's process list and /proc as its "
              "uid may (command lines included; not other processes' memory or environment); "
              "for a root caller /proc reads only cpuinfo, meminfo, stat and a few more, "
              "/proc/sys, and the command's own /proc/PID (no kernel files: a child's "
              "/proc/self is listed, not readable, and ps shows nothing); it shares the host's "
              "PID and IPC namespaces "
              "(System V IPC and POSIX queues are refused), its hostname and users, and its "
              "network stack (held to the gateway by seccomp and Landlock); files: Landlock "
              "only, /tmp is a private host directory without a size limit; modes, owners, "
              "times and xattrs change only in the writable trees (each call checked by the "
              "keeper); a host workspace is read-only to Landlock and every change there (a "
              "file made, opened for writing, removed or renamed) is made by the keeper, which "
              "refuses the protected entries and names: each costs a round trip",
    .host_uid = true,
    .containers = true,
    .probe = proc_probe,
    .admits = proc_admits,
    .prepare = proc_prepare,
    .release = proc_release,
};
