/*
 * sandbox/namespace.c: the `namespace` isolation level. The supervisor plans
 * everything, clones a child into fresh user, PID, mount, network, IPC and
 * UTS namespaces (cgroup namespace once it sits in its cgroup), and
 * supervises it. The child becomes PID 1 (a minimal init that reaps and
 * reports) and forks the command, which confines itself and execs.
 */
#include "egress/gateway.h"
#include "sandbox/backend.h"
#include "sandbox/cgroup.h"
#include "sandbox/plan.h"
#include "sandbox/start.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | \
                  CLONE_NEWUTS)

/* File descriptors the child needs; every other is closed before exec. */
struct child_fds {
    int sync_r;    /* a byte when the supervisor has set us up; HUP when it died */
    int err_w;     /* error record, close-on-exec */
    int status_w;  /* the command's wait status */
    int start_r;   /* the start seam: ready goes out, the start message comes in */
    int bpf_r;     /* the seccomp program, compiled while the child builds its root */
    int gw_sock;   /* where the gateway's listening socket goes, or -1 (no network) */
};

/* ---- child side: runs between clone() and exec(), allocates nothing ---- */

static _Noreturn void child_fail(const struct child_fds *fds, struct cordon_err *err)
{
    (void)!write(fds->err_w, err, sizeof *err);
    _exit(err_exit_code(err));
}

static int loopback_up(struct cordon_err *err)
{
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open a socket to configure loopback");
    struct ifreq ifr = { 0 };
    strcpy(ifr.ifr_name, "lo");
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot read loopback flags");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot bring loopback up");
    return 0;
}

/* Needs CAP_SETPCAP, so init does it before it changes uid. */
static int drop_bounding_set(struct cordon_err *err)
{
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            return err_sys(err, CORDON_E_SETUP, "cannot drop capability %d", cap);
    return 0;
}

static int become_sandbox_user(const struct ns_plan *plan, struct cordon_err *err)
{
    /* Root's supplementary groups (0 among them) must not follow it in. */
    if (plan->caller_is_root && setgroups(0, NULL) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot drop supplementary groups");
    if (setresgid(SANDBOX_GID, SANDBOX_GID, SANDBOX_GID) < 0 ||
        setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot become the sandbox user");
    return 0;
}

static _Noreturn void exec_command(const struct ns_plan *plan, const struct child_fds *fds,
                                   const struct start_message *m,
                                   const struct seccomp_program *filter)
{
    struct cordon_err err = { 0 };
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);

    /* A session of its own: no controlling terminal to inject input into. */
    if (setsid() < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot start a session");
        child_fail(fds, &err);
    }
    if (dup2(m->stdio[0], 0) < 0 || dup2(m->stdio[1], 1) < 0 || dup2(m->stdio[2], 2) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot set up stdio");
        child_fail(fds, &err);
    }
    /* Whatever else is open dies at exec, the error pipe included. */
    if (sys_close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot mark descriptors close-on-exec");
        child_fail(fds, &err);
    }
    if (chdir("/workspace") < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot enter /workspace");
        child_fail(fds, &err);
    }
    if (confine_command(&plan->confine, filter, &err) < 0)
        child_fail(fds, &err);

    execvpe(m->argv[0], m->argv, m->envp);
    if (errno == ENOENT || errno == ENOTDIR)
        err_set(&err, CORDON_E_NOTFOUND, "command not found: '%s'", m->argv[0]);
    else
        err_sys(&err, errno == EACCES || errno == ENOEXEC || errno == EISDIR || errno == EPERM
                          ? CORDON_E_NOEXEC
                          : CORDON_E_SETUP,
                "cannot execute '%s'", m->argv[0]);
    child_fail(fds, &err);
}

/*
 * Close every descriptor the supervisor happened to hold (its caller's
 * sockets, say) except the child's own and the prepared mount trees.
 */
static void close_inherited(const struct ns_plan *plan, const struct child_fds *fds)
{
    int keep[16 + 64];
    size_t n = 0;
    const int *f = (const int *)fds;
    for (size_t i = 0; i < sizeof *fds / sizeof(int); i++)
        keep[n++] = f[i];
    for (size_t i = 0; i < plan->n_steps && n < sizeof keep / sizeof keep[0]; i++)
        if (plan->steps[i].tree_fd >= 0)
            keep[n++] = plan->steps[i].tree_fd;
    close_fds_except(keep, n);
}

/*
 * Init is a fork of the supervisor, so /proc/1/cmdline and environ inside
 * would show the supervisor's: host paths, flag values, the host's variables.
 * Blank them in place (the kernel reads them from our memory).
 */
static void scrub_args_and_env(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    /* Fields count from the one after the command name, which may hold spaces. */
    char *p = strrchr(buf, ')');
    unsigned long long v[4] = { 0 };
    for (int field = 3; p && field <= 51; field++) {
        p = strchr(p, ' ');
        if (!p)
            return;
        p++;
        if (field >= 48) /* arg_start, arg_end, env_start, env_end */
            v[field - 48] = strtoull(p, NULL, 10);
    }
    static const char name[] = "cordon-init";
    if (v[1] > v[0] + sizeof name) {
        memset((void *)(uintptr_t)v[0], 0, v[1] - v[0]);
        memcpy((void *)(uintptr_t)v[0], name, sizeof name);
    }
    prctl(PR_SET_NAME, name, 0, 0, 0);
    if (v[3] > v[2])
        memset((void *)(uintptr_t)v[2], 0, v[3] - v[2]);
}

static pid_t forward_to; /* init: the command, whose session gets our signals */

static void forward_signal(int sig)
{
    int saved = errno;
    if (kill(-forward_to, sig) < 0) /* before the command's setsid() */
        kill(forward_to, sig);
    errno = saved;
}

/* Init passes on what the supervisor passes on (cordon's own SIGINT, ...). */
static void forward_signals(pid_t cmd)
{
    static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
    forward_to = cmd;
    struct sigaction sa = { .sa_handler = forward_signal, .sa_flags = SA_RESTART };
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaction(forwarded[i], &sa, NULL);
    /* The supervisor's mask came along through clone(): open it now. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/*
 * The gateway's door: a listening socket on the sandbox's loopback, made
 * here (so it lives in the sandbox's network namespace) and handed out to
 * the gateway, which serves it from the host's. The sandbox keeps no copy.
 */
static int open_gateway_door(int sock, struct cordon_err *err)
{
    _cleanup_close_ int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create the gateway's socket");
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(GATEWAY_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 128) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot listen on 127.0.0.1:%d", GATEWAY_PORT);
    if (send_fd(sock, l) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot hand the gateway its socket");
    return 0;
}

/* The supervisor's compiled filter, into static storage: no allocation here. */
static bool receive_filter(int fd, struct seccomp_program *out)
{
    static struct sock_filter insns[BPF_MAXINSNS];
    unsigned short len = 0;
    if (!read_full(fd, &len, sizeof len) || len == 0 || len > BPF_MAXINSNS ||
        !read_full(fd, insns, len * sizeof insns[0]))
        return false;
    *out = (struct seccomp_program){ .filter = insns, .len = len };
    return true;
}

static _Noreturn void child_main(const struct ns_plan *plan, const struct child_fds *fds)
{
    struct cordon_err err = { 0 };
    char go;
    close_inherited(plan, fds);
    scrub_args_and_env();
    if (read(fds->sync_r, &go, 1) != 1)
        _exit(125); /* the supervisor is gone */

    /* Now inside the run's cgroup: make it this namespace's root. */
    if (unshare(CLONE_NEWCGROUP) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot create cgroup namespace");
        child_fail(fds, &err);
    }
    /* Root-started: act as the namespace's root (mapped to an unprivileged
     * host uid) so what setup creates has a mapped owner. */
    if (plan->caller_is_root && (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)) {
        err_sys(&err, CORDON_E_SETUP, "cannot switch to the namespace's root");
        child_fail(fds, &err);
    }
    if (sethostname(SANDBOX_HOSTNAME, strlen(SANDBOX_HOSTNAME)) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot set hostname");
        child_fail(fds, &err);
    }
    if (mounts_enter_root(plan, &err) < 0 || loopback_up(&err) < 0 ||
        (fds->gw_sock >= 0 && open_gateway_door(fds->gw_sock, &err) < 0))
        child_fail(fds, &err);
    if (fds->gw_sock >= 0)
        close(fds->gw_sock);
    struct seccomp_program filter;
    if (!receive_filter(fds->bpf_r, &filter))
        _exit(125); /* the supervisor could not compile it and reports why */
    close(fds->bpf_r);

    if (drop_bounding_set(&err) < 0 || become_sandbox_user(plan, &err) < 0)
        child_fail(fds, &err);
    /* After the uid change, which clears it: die with the supervisor. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot set parent-death signal");
        child_fail(fds, &err);
    }
    struct pollfd alive = { .fd = fds->sync_r, .events = POLLIN };
    if (poll(&alive, 1, 0) > 0 && (alive.revents & (POLLHUP | POLLERR)))
        _exit(125); /* the supervisor died before the signal was armed */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    /* The seam: built from the policy alone; the call arrives now, or never. */
    struct start_message m;
    if (start_ready_send(fds->start_r) < 0 || start_message_recv(fds->start_r, &m) < 0)
        _exit(125); /* released without a start */
    close(fds->start_r);
    if (m.files >= 0) {
        /* As the sandbox user, before the command: the call's files are its own. */
        int ws = open("/workspace", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ws < 0 || start_place_files(&m, ws, &err) < 0) {
            if (ws < 0)
                err_sys(&err, CORDON_E_SETUP, "cannot open /workspace");
            child_fail(fds, &err);
        }
        close(ws);
    }

    pid_t cmd = fork();
    if (cmd < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot fork the command");
        child_fail(fds, &err);
    }
    if (cmd == 0)
        exec_command(plan, fds, &m, &filter);

    /* Init: holds nothing the command could use, reaps, reports, exits. */
    close(fds->err_w);
    for (int i = 0; i < 3; i++)
        close(m.stdio[i]);
    confine_drop_capabilities(&err);
    forward_signals(cmd);
    for (;;) {
        int ws;
        pid_t w = waitpid(-1, &ws, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            _exit(125);
        if (w == cmd) {
            (void)!write(fds->status_w, &ws, sizeof ws);
            /* Exiting kills everything else in the PID namespace. */
            _exit(0);
        }
    }
}

/* ---- supervisor side ---- */

static int write_proc(pid_t pid, const char *file, const char *text, struct cordon_err *err)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        return err_sys(err, CORDON_E_SETUP, "cannot write '%s'", path);
    return 0;
}

static int write_id_maps(pid_t pid, bool root, uid_t host_base, struct cordon_err *err)
{
    char map[96];
    if (root) {
        /* In-namespace root and the sandbox user, both unprivileged on the host. */
        snprintf(map, sizeof map, "0 %u 1\n%d %u 1\n", host_base, SANDBOX_UID, host_base + 1);
        TRY(write_proc(pid, "uid_map", map, err));
        TRY(write_proc(pid, "gid_map", map, err));
        return 0;
    }
    snprintf(map, sizeof map, "%d %u 1\n", SANDBOX_UID, (unsigned)getuid());
    TRY(write_proc(pid, "uid_map", map, err));
    TRY(write_proc(pid, "setgroups", "deny", err));
    snprintf(map, sizeof map, "%d %u 1\n", SANDBOX_GID, (unsigned)getgid());
    return write_proc(pid, "gid_map", map, err);
}

/*
 * Compiling the filter takes about as long as the child takes to build its
 * root, so it happens meanwhile, on the other core; the child only installs it.
 */
static int send_filter(const struct policy *p, struct seccomp_program *prog, int fd,
                       struct cordon_err *err)
{
    TRY(seccomp_program_build(p, prog, err));
    /* One write well under the pipe's capacity (2 + 8 * 4096 bytes at most). */
    size_t size = sizeof prog->len + prog->len * sizeof prog->filter[0];
    char buf[sizeof prog->len + BPF_MAXINSNS * sizeof(struct sock_filter)];
    memcpy(buf, &prog->len, sizeof prog->len);
    memcpy(buf + sizeof prog->len, prog->filter, prog->len * sizeof prog->filter[0]);
    ssize_t n = write(fd, buf, size);
    if (n < 0 && errno == EPIPE)
        return 0; /* the child failed first: its own error record says why */
    if (n != (ssize_t)size)
        return err_sys(err, CORDON_E_SETUP, "cannot hand the seccomp filter to the sandbox");
    return 0;
}

struct pipes {
    int sync[2], err[2], status[2], start[2], bpf[2], gw[2];
};

static void pipes_close(struct pipes *pp)
{
    int *all = (int *)pp;
    for (size_t i = 0; i < sizeof *pp / sizeof(int); i++)
        closep(&all[i]);
}

static int ns_probe(struct cordon_err *err)
{
    pid_t pid = sys_clone_ns(NS_FLAGS);
    if (pid < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED, "cannot create user/pid/mount/net namespaces");
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    return 0;
}

static void ns_release(struct sandbox_boundary *b)
{
    if (b->pid > 0) {
        kill(b->pid, SIGKILL);
        waitpid(b->pid, NULL, 0);
        b->pid = -1;
    }
    closep(&b->err_r);
    closep(&b->status_r);
    closep(&b->start_w);
    closep(&b->door);
    b->err_r = b->status_r = b->start_w = b->door = -1;
}

/* The child's error record, once it has failed (its end closed without "ready"). */
static int child_error(int err_r, struct cordon_err *err)
{
    struct cordon_err rec;
    if (read_full(err_r, &rec, sizeof rec)) {
        rec.msg[sizeof rec.msg - 1] = '\0';
        *err = rec;
        return -1;
    }
    return err_set(err, CORDON_E_SETUP, "the sandbox failed while it was being built");
}

static int ns_prepare(const struct sandbox_setup *s, struct sandbox_boundary *b,
                      struct cordon_err *err)
{
    const struct policy *p = s->p;
    bool root = geteuid() == 0;
    *b = (struct sandbox_boundary){ .pid = -1, .err_r = -1, .status_r = -1, .start_w = -1,
                                    .door = -1 };
    struct ns_plan plan = { .caller_is_root = root, .confine = *s->confine };
    struct pipes pp;
    memset(&pp, -1, sizeof pp);
    int rc = -1;
    pid_t init = -1;

    if (mounts_plan(p, &plan, s->host_base + 1, s->workspace, err) < 0 ||
        (s->ca_pem && mounts_add_ca(&plan, s->ca_pem, err) < 0))
        goto out;
    if (pipe2(pp.sync, O_CLOEXEC) < 0 || pipe2(pp.err, O_CLOEXEC) < 0 ||
        pipe2(pp.status, O_CLOEXEC) < 0 || pipe2(pp.bpf, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pp.start) < 0 ||
        (s->gateway && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pp.gw) < 0)) {
        err_sys(err, CORDON_E_SETUP, "cannot create pipes");
        goto out;
    }

    init = sys_clone_ns(NS_FLAGS);
    if (init < 0) {
        err_sys(err, CORDON_E_UNSUPPORTED, "cannot create the sandbox's namespaces");
        goto out;
    }
    if (init == 0) {
        if (s->in_child)
            s->in_child(s->in_child_arg);
        struct child_fds fds = {
            .sync_r = pp.sync[0], .err_w = pp.err[1], .status_w = pp.status[1],
            .start_r = pp.start[1], .bpf_r = pp.bpf[0], .gw_sock = s->gateway ? pp.gw[1] : -1,
        };
        child_main(&plan, &fds); /* closes everything that is not in FDS */
    }

    /* The child's ends live only in the child now. */
    closep(&pp.sync[0]);
    closep(&pp.err[1]);
    closep(&pp.status[1]);
    closep(&pp.start[1]);
    closep(&pp.bpf[0]);
    closep(&pp.gw[1]);
    pp.sync[0] = pp.err[1] = pp.status[1] = pp.start[1] = pp.bpf[0] = pp.gw[1] = -1;

    if (write_id_maps(init, root, s->host_base, err) < 0 ||
        (s->cg->version && cgroup_attach(s->cg, init, err) < 0) ||
        write(pp.sync[1], "g", 1) != 1 ||
        send_filter(p, &plan.seccomp, pp.bpf[1], err) < 0) {
        if (err->kind == CORDON_E_OK)
            err_sys(err, CORDON_E_SETUP, "cannot start the sandbox");
        goto out;
    }
    /* The door, then "ready" at the seam; either missing means the child failed. */
    if ((s->gateway && (b->door = recv_fd(pp.gw[0])) < 0) || start_ready_wait(pp.start[0]) < 0) {
        child_error(pp.err[0], err);
        goto out;
    }
    b->pid = init;
    init = -1;
    b->err_r = TAKE_FD(pp.err[0]);
    b->status_r = TAKE_FD(pp.status[0]);
    b->start_w = TAKE_FD(pp.start[0]);
    rc = 0;

out:
    if (init > 0) {
        kill(init, SIGKILL);
        waitpid(init, NULL, 0);
    }
    if (rc < 0)
        closep(&b->door);
    pipes_close(&pp);
    mounts_plan_release(&plan);
    seccomp_program_release(&plan.seccomp);
    return rc;
}

const struct sandbox_backend namespace_backend = {
    .name = "namespace",
    .level = CORDON_LEVEL_NAMESPACE,
    .probe = ns_probe,
    .prepare = ns_prepare,
    .release = ns_release,
};
