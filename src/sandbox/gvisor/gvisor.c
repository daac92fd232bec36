/*
 * sandbox/gvisor/gvisor.c: the `gvisor` isolation level. The command runs on
 * gVisor's user-space kernel (runsc, ptrace platform), so it never makes a
 * system call to the host kernel.
 *
 * prepare (supervisor): a private 0700 directory gets an OCI bundle built
 * from the same mount plan as the namespace level (a read-only root of
 * empty directories and the merged-/usr links, /usr and the policy's binds,
 * sized tmpfs /tmp, the workspace, generated /etc files), the static helper
 * cordon-gvisor-init, the seccomp profile and, for egress, the gateway's
 * unix socket, to which the helper relays the proxy port, its DNS stub and
 * the synthetic addresses (transparent egress, gvisor/init.c). A shim, our
 * child, joins the run's cgroup and starts the container (`runsc run`,
 * attached) whose first process is the helper: the sandbox is warm. The
 * shim then blocks at the start seam.
 *
 * start: the shim receives argv, environment and stdio and hands them to
 * the helper's caller over the call channel (call_wire.h), which the
 * caller dialled before the sandbox was ready: the command is a fork and
 * exec inside the booted sandbox, never a second `runsc` (no `runsc exec`
 * per call, at a cold run or from the pool). Its wait status goes to
 * status_r; then the shim kills the container and exits.
 *
 * Every runsc process dies with the shim (parent-death signals along the
 * chain shim -> runsc run -> sandbox and gofer), and the shim with the
 * supervisor, so killing the shim ends the run, and the watchdog only has
 * the directory left to remove.
 */
#include "sandbox/gvisor/gvisor.h"
#include "sandbox/gvisor/gvisor_int.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/hostpath.h"
#include "common/syscalls.h"
#include "sandbox/backend.h"
#include "sandbox/boundary.h"
#include "sandbox/cgroup.h"
#include "sandbox/engine.h"
#include "sandbox/meter.h"
#include "sandbox/plan.h"
#include "sandbox/start.h"
#include "sandbox/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- runsc ---- */

int gvisor_find_runsc(char *buf, size_t len, struct cordon_err *err)
{
    return hostpath_find_program("runsc", buf, len)
        ? 0
        : err_set(err, CORDON_E_UNSUPPORTED,
                  "runsc is not installed (Debian: apt-get install runsc)");
}

/* ---- runsc's command lines ---- */

/* A + B + C in the state's own storage (the shim reads it after fork). */
static char *keep(struct gv_state *st, const char *a, const char *b, const char *c)
{
    char *slot = st->store[st->n_store++];
    const char *parts[] = { a, b, c };
    size_t n = 0;
    for (size_t i = 0; i < 3; i++)
        for (const char *x = parts[i]; *x && n + 1 < sizeof st->store[0]; x++)
            slot[n++] = *x;
    slot[n] = '\0';
    return slot;
}

/* runsc and its global flags into ARGV; returns how many. */
static size_t global_args(struct gv_state *st, char **argv)
{
    size_t n = 0;
    argv[n++] = st->runsc;
    argv[n++] = st->root_arg;
    argv[n++] = "--platform=ptrace";
    argv[n++] = "--network=none";
    /* The run's cgroup already holds runsc's processes: runsc makes none. */
    argv[n++] = "--ignore-cgroups";
    /* Ours and the listed sockets, each connect checked by our keeper (sandbox/engine.h). */
    argv[n++] = "--host-uds=open";
    if (st->rootless)
        argv[n++] = "--rootless";
    return n;
}

static void plan_commands(struct gv_state *st)
{
    st->root_arg = keep(st, "--root=", st->dir, "/state");
    size_t n = global_args(st, st->argv_run);
    st->argv_run[n++] = "run";
    st->argv_run[n++] = keep(st, "--bundle=", st->dir, "/bundle");
    st->argv_run[n++] = st->cid;
    st->argv_run[n] = NULL;
}

/* ---- the shim: our child, the boundary's top process ---- */

struct shim_fds {
    int err_w, status_w, start_r, call_l;
    struct cgroup_ticket cg;
};

static _Noreturn void shim_fail(const struct shim_fds *fds, struct cordon_err *err)
{
    (void)!write(fds->err_w, err, sizeof *err);
    _exit(err_exit_code(err));
}

/*
 * Fork and exec ARGV with STDIO, dying with the shim; under UDS's filter
 * when it is given (runsc run: its gofer's connect()s go to our keeper).
 */
static pid_t spawn_filtered(char *const *argv, const int stdio[3], const struct gv_state *st,
                            const struct engine_keeper *uds)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (uds && engine_keeper_confine(&st->uds_filter, uds->give) < 0)
        _exit(125);
    for (int i = 0; i < 3; i++)
        if (dup2(stdio[i], i) < 0)
            _exit(125);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    sys_close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    execv(argv[0], argv);
    _exit(127);
}

static pid_t spawn(char *const *argv, const int stdio[3])
{
    return spawn_filtered(argv, stdio, NULL, NULL);
}

/* The tail of runsc's log: why it failed, in its own words. */
static void runsc_error(const char *log, struct cordon_err *err)
{
    char buf[4096];
    ssize_t n = -1;
    int fd = open(log, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        off_t size = lseek(fd, 0, SEEK_END);
        n = pread(fd, buf, sizeof buf - 1,
                  size > (off_t)sizeof buf - 1 ? size - (off_t)sizeof buf + 1 : 0);
        close(fd);
    }
    if (n <= 0) {
        err_set(err, CORDON_E_SETUP, "gvisor: runsc failed to start the sandbox");
        return;
    }
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    char *line = strrchr(buf, '\n');
    err_set(err, CORDON_E_SETUP, "gvisor: runsc failed to start the sandbox: %s",
            line ? line + 1 : buf);
}

/* ---- the call channel (call_wire.h) ---- */

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

/* M's command to the caller: its argv and environment, stdio and files. */
static int send_call(int s, const struct start_message *m, struct cordon_err *err)
{
    size_t len = 0, argc = 0;
    for (char **a = m->argv; *a; a++, argc++)
        len += strlen(*a) + 1;
    for (char **e = m->envp; *e; e++)
        len += strlen(*e) + 1;
    if (len > CALL_PAYLOAD_MAX)
        return err_set(err, CORDON_E_USAGE,
                       "gvisor: the call's arguments and environment "
                       "are too large");
    _cleanup_free_ char *payload = malloc(len ? len : 1);
    if (!payload)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    char *at = payload;
    for (char **a = m->argv; *a; a++)
        at = stpcpy(at, *a) + 1;
    for (char **e = m->envp; *e; e++)
        at = stpcpy(at, *e) + 1;
    struct call_record r = {
        .kind = CALL_RUN, .value = (int32_t)argc, .value2 = m->files >= 0, .len = (uint32_t)len
    };
    int fds[4] = { m->stdio[0], m->stdio[1], m->stdio[2], m->files };
    if (send_fds(s, &r, sizeof r, fds, m->files >= 0 ? 4 : 3) < 0 || !write_all(s, payload, len))
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot hand the call to the sandbox");
    return 0;
}

/*
 * One record from the caller, a CALL_ERROR's text read whole and kept in
 * WHY as far as it goes; -1 at EOF (the sandbox is gone) or out of bounds.
 */
static int read_record(int s, struct call_record *r, char *why, size_t why_len)
{
    char text[CALL_ERROR_MAX];
    if (!read_full(s, r, sizeof *r))
        return -1;
    if (r->kind != CALL_ERROR)
        return 0;
    if (r->len > CALL_ERROR_MAX || !read_full(s, text, r->len))
        return -1;
    snprintf(why, why_len, "%.*s", (int)r->len, text);
    return 0;
}

/* A CALL_ERROR of KIND as the run's error: the call's own as every level tells it. */
static void call_error(int32_t kind, const char *why, struct cordon_err *err)
{
    if (kind == CALL_FAILED_NOTFOUND)
        err_set(err, CORDON_E_NOTFOUND, "%s", why);
    else if (kind == CALL_FAILED_NOEXEC)
        err_set(err, CORDON_E_NOEXEC, "%s", why);
    else if (kind == CALL_FAILED_CALL)
        err_set(err, CORDON_E_SETUP, "%s", why);
    else
        err_set(err, CORDON_E_SETUP, "gvisor: %s", why);
}

/*
 * From CALL_STARTED until the command ends: the supervisor's signals passed
 * on to it (the caller signals it by its pid inside), its wait status back.
 * An exec that failed (CALL_ERROR before CALL_RUNNING) fails the shim: the
 * command never ran. A sandbox killed under the command (gVisor's memory
 * limit, the OOM killer), or a caller the command killed, ends the channel
 * without a status: it was killed.
 */
static int wait_command(int s, int sfd, const struct shim_fds *fds)
{
    bool running = false;
    for (;;) {
        struct pollfd p[2] = { { .fd = s, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
        if (poll(p, sfd >= 0 ? 2 : 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            return SIGKILL;
        }
        if (sfd >= 0 && p[1].revents) {
            struct signalfd_siginfo si;
            struct call_record sig = { .kind = CALL_SIGNAL };
            if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                sig.value = (int32_t)si.ssi_signo;
                (void)write_all(s, &sig, sizeof sig);
            }
        }
        if (!p[0].revents)
            continue;
        struct call_record r;
        char why[CALL_ERROR_MAX + 1];
        if (read_record(s, &r, why, sizeof why) < 0)
            return SIGKILL;
        if (r.kind == CALL_RUNNING && !running) {
            running = true;
            close(fds->err_w); /* what follows is the command's status, not a setup error */
        } else if (r.kind == CALL_ERROR && !running) {
            struct cordon_err err = { 0 };
            call_error(r.value, why, &err);
            shim_fail(fds, &err);
        } else if (r.kind == CALL_EXIT && running) {
            return r.value;
        }
    }
}

/*
 * The caller's connection: of those waiting when the helper said it is
 * ready (its hello was written before that), the one that carries
 * CALL_HELLO; the others, dials lost on the way and retried, are closed.
 * Then the socket is removed: nothing else ever connects.
 */
static int accept_caller(const struct gv_state *st, int l, struct cordon_err *err)
{
    int caller = -1;
    fcntl(l, F_SETFL, O_NONBLOCK);
    for (;;) {
        int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (s < 0 && errno == EINTR)
            continue;
        if (s < 0)
            break;
        struct call_record hello;
        if (caller < 0 && recv(s, &hello, sizeof hello, MSG_DONTWAIT) == (ssize_t)sizeof hello &&
            hello.kind == CALL_HELLO)
            caller = s;
        else
            close(s);
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" HOST_CALL_SOCK, st->dir);
    unlink(path);
    if (caller < 0)
        return err_set(err, CORDON_E_SETUP, "gvisor: the sandbox's helper did not dial in");
    return caller;
}
/*
 * The call's arguments in the run's directory (NUL-separated, as
 * /proc/PID/cmdline): the command is gVisor's, no host process, so this is
 * where the host sees what the shim serves.
 */
static void note_call(const struct gv_state *st, char *const *argv)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/call", st->dir);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    for (char *const *a = argv; fd >= 0 && *a; a++)
        if (!write_all(fd, *a, strlen(*a) + 1))
            break;
}

/* M's command through the caller; its wait status. Fails the shim while it has not started. */
static int run_call(const struct gv_state *st, const struct shim_fds *fds, int caller,
                    struct start_message *m, const char *log)
{
    struct cordon_err err = { 0 };
    sigset_t block;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaddset(&block, forwarded[i]);
    sigprocmask(SIG_BLOCK, &block, NULL);
    int sfd = signalfd(-1, &block, SFD_CLOEXEC);
    note_call(st, m->argv);
    if (send_call(caller, m, &err) < 0)
        shim_fail(fds, &err);
    for (int i = 0; i < 3; i++)
        close(m->stdio[i]);
    closep(&m->files);
    struct call_record r = { 0 };
    char why[CALL_ERROR_MAX + 1];
    int got = read_record(caller, &r, why, sizeof why);
    if (got < 0 || r.kind != CALL_STARTED) {
        if (got == 0 && r.kind == CALL_ERROR)
            call_error(r.value, why, &err);
        else
            runsc_error(log, &err);
        shim_fail(fds, &err);
    }
    return wait_command(caller, sfd, fds);
}

static _Noreturn void shim_main(struct gv_state *st, const struct shim_fds *fds, pid_t parent)
{
    struct cordon_err err = { 0 };
    if (cgroup_ticket_use(&fds->cg) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot join the run's cgroup");
        shim_fail(fds, &err);
    }
    for (int c = 0; c < CGROUP_COUNT; c++)
        if (fds->cg.fd[c] >= 0)
            close(fds->cg.fd[c]);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != parent)
        _exit(125);
    prctl(PR_SET_NAME, "cordon-gvisor", 0, 0, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

    /* The keeper first: a fork, it must not hold the ready pipe open (nor runsc's log). */
    struct engine_keeper uds = { -1, -1 };
    if (engine_keeper_start(&st->uds, &st->names, &uds, &err) < 0)
        shim_fail(fds, &err);
    int ready[2];
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/runsc.log", st->dir);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (null < 0 || logfd < 0 || pipe2(ready, O_CLOEXEC) < 0) {
        err_sys(&err, CORDON_E_SETUP, "gvisor: cannot set up the sandbox's stdio");
        shim_fail(fds, &err);
    }
    int run_stdio[3] = { null, ready[1], logfd };
    pid_t sandbox = spawn_filtered(st->argv_run, run_stdio, st, &uds);
    if (uds.give >= 0)
        close(uds.give);
    if (sandbox < 0) {
        err_sys(&err, CORDON_E_SETUP, "gvisor: cannot start runsc");
        shim_fail(fds, &err);
    }
    close(ready[1]);
    close(logfd);
    /* The helper says "R" once it runs (and listens, for egress). */
    char c = 0;
    ssize_t n = -1;
    struct pollfd pf = { .fd = ready[0], .events = POLLIN };
    int r;
    /* A runsc that fails to mount may hang instead of exiting. */
    do
        r = poll(&pf, 1, START_TIMEOUT_MS);
    while (r < 0 && errno == EINTR);
    if (r == 1)
        n = read(ready[0], &c, 1);
    close(ready[0]);
    if (n != 1 || c != 'R') {
        kill(sandbox, SIGKILL);
        waitpid(sandbox, NULL, 0);
        runsc_error(log, &err);
        shim_fail(fds, &err);
    }

    int caller = accept_caller(st, fds->call_l, &err);
    close(fds->call_l);
    if (caller < 0) {
        kill(sandbox, SIGKILL);
        shim_fail(fds, &err);
    }

    struct start_message m;
    if (start_ready_send(fds->start_r) < 0 || start_message_recv(fds->start_r, &m) < 0)
        _exit(125); /* released without a start; the sandbox dies with us */
    close(fds->start_r);
    int status = run_call(st, fds, caller, &m, log);
    /* Whatever the command left running dies with the sandbox, now. */
    kill(sandbox, SIGKILL);
    (void)!write(fds->status_w, &status, sizeof status);
    /* A subreaper, we inherit the sandbox and gofer when runsc run dies:
     * once they are reaped, no process of the run is left on the host. */
    if (uds.keeper > 0)
        kill(uds.keeper, SIGKILL);
    for (;;) {
        pid_t w = waitpid(-1, NULL, 0);
        if (w < 0 && errno != EINTR)
            break;
    }
    _exit(0);
}

/* ---- supervisor side ---- */

static int gv_probe(struct cordon_err *err)
{
    char runsc[PATH_MAX];
    return gvisor_find_runsc(runsc, sizeof runsc, err);
}

int gvisor_platform_probe(const char *name, struct cordon_err *err)
{
    char runsc[PATH_MAX];
    TRY(gvisor_find_runsc(runsc, sizeof runsc, err));
    char dir[48];
    snprintf(dir, sizeof dir, "/tmp/cordon-gvisor-probe-%d-XXXXXX", (int)getpid());
    if (!mkdtemp(dir))
        return err_sys(err, CORDON_E_SETUP, "cannot make a directory in /tmp");
    char root[64], platform[64];
    snprintf(root, sizeof root, "--root=%s", dir); /* 7 + 47 bytes at most */
    snprintf(platform, sizeof platform, "--platform=%s", name);
    char *argv[] = { runsc,
                     root,
                     platform,
                     "--network=none",
                     "--ignore-cgroups",
                     geteuid() ? "--rootless" : "--network=none",
                     "do",
                     "true",
                     NULL };
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    int stdio[3] = { null, null, null };
    pid_t pid = spawn(argv, stdio);
    close(null);
    int ws = -1, rc = -1;
    _cleanup_close_ int pidfd = pid > 0 ? sys_pidfd_open(pid, 0) : -1;
    struct pollfd pf = { .fd = pidfd, .events = POLLIN };
    if (pid > 0 && pidfd >= 0 && poll(&pf, 1, 3000) == 1) {
        waitpid(pid, &ws, 0);
        rc = WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : -1;
        if (rc < 0)
            err_set(err, CORDON_E_UNSUPPORTED, "runsc --platform=%s do true failed (status %d)",
                    name, WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
    } else if (pid > 0) {
        /* Its sandbox dies with it (runsc do runs attached). */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        err_set(err, CORDON_E_UNSUPPORTED, "runsc --platform=%s do true did not finish in 3 s",
                name);
    } else {
        err_sys(err, CORDON_E_SETUP, "cannot start runsc");
    }
    hostpath_remove_tree(dir);
    return rc;
}

static void gv_release(struct sandbox_boundary *b)
{
    struct gv_state *st = b->state;
    boundary_release(b);
    if (st) {
        seccomp_program_release(&st->uds_filter);
        if (st->names.root >= 0)
            close(st->names.root);
        hostpath_remove_tree(st->dir);
        free(st);
        b->state = NULL;
    }
}

/*
 * A unix socket of ours at NAME in the run's directory, which the sandbox
 * reaches through --host-uds=open: the gateway's door, the call channel.
 * Listed to the keeper, the one host socket the gofer reaches besides the
 * policy's.
 */
static int listen_for_sandbox(struct gv_state *st, const char *name, struct cordon_err *err)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if ((size_t)snprintf(a.sun_path, sizeof a.sun_path, "%s/%s", st->dir, name) >=
        sizeof a.sun_path)
        return err_set(err, CORDON_E_SETUP, "gvisor: socket path too long");
    _cleanup_close_ int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 128) < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot listen on '%s'", a.sun_path);
    _cleanup_close_ int fd = open(a.sun_path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot open '%s'", a.sun_path);
    if (usock_keeper_list(&st->uds, fd, err) < 0)
        return -1;
    return TAKE_FD(l);
}

/*
 * runsc's gofer reaches host sockets for ours and the listed ones alone,
 * and makes names in a host workspace as the policy says: its connect()s
 * and those calls go to a keeper of ours (sandbox/engine.h).
 */
static int plan_keeper(const struct sandbox_setup *s, struct gv_state *st, struct cordon_err *err)
{
    names_keeper_init(&st->names, s->workspace ? names_mode_for(s->p, NAMES_CHECK) : NAMES_OFF,
                      s->p);
    st->names.g = s->workspace; /* the keeper's copy (a fork): the entries not to be moved */
    if (st->names.mode != NAMES_OFF &&
        names_keeper_root(&st->names, fcntl(s->workspace->fd, F_DUPFD_CLOEXEC, 0)) < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot open the workspace's root");
    if (usock_keeper_init(&st->uds, s->p, false, err) < 0 ||
        names_program(st->names.mode, true, &st->uds_filter, err) < 0)
        return -1;
    st->uds.gofer = true;
    return 0;
}

/* /dev/shm a tmpfs we may write. */
static bool shm_usable(void)
{
    struct statfs sf;
    return statfs("/dev/shm", &sf) == 0 && sf.f_type == TMPFS_MAGIC &&
        access("/dev/shm", W_OK) == 0;
}

static int gv_prepare(const struct sandbox_setup *s, struct sandbox_boundary *b,
                      struct cordon_err *err)
{
    *b = (struct sandbox_boundary){
        .pid = -1, .err_r = -1, .status_r = -1, .start_w = -1, .door = -1, .layer = -1
    };
    struct gv_state *st = calloc(1, sizeof *st);
    if (!st)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    b->state = st;
    st->names.root = -1;
    st->rootless = geteuid() != 0;
    st->ahead = s->ahead;
    st->gateway = s->gateway;
    if (s->gateway) {
        st->transparent = true;
        st->n_ports = boundary_transparent_ports(s->p, st->ports, st->nets, st->prefixes,
                                                 SYNTH_MAX_PORTS, &st->n_nets);
    }
    int rc = -1;
    pid_t shim = -1;
    int errp[2] = { -1, -1 }, statp[2] = { -1, -1 }, startp[2] = { -1, -1 }, call_l = -1;
    struct cgroup_ticket ticket = CGROUP_TICKET_INIT;

    if (gvisor_find_runsc(st->runsc, sizeof st->runsc, err) < 0)
        goto out;
    /*
     * The bundle (the helper's megabyte among its files) and runsc's state
     * on a tmpfs where there is one, not the disk /tmp may be. Should the
     * supervisor die, the watchdog removes it.
     */
    if (boundary_private_dir(s, shm_usable() ? "/dev/shm" : "/tmp", "gvisor", st->dir,
                             sizeof st->dir, err) < 0) {
        err_prefix(err, "gvisor");
        goto out;
    }
    snprintf(st->cid, sizeof st->cid, "cordon-%s", strrchr(st->dir, '-') + 1);
    if (gvisor_build_bundle(s, st, err) < 0)
        goto out;
    if (plan_keeper(s, st, err) < 0 ||
        (s->gateway && (b->door = listen_for_sandbox(st, HOST_GW_SOCK, err)) < 0) ||
        (call_l = listen_for_sandbox(st, HOST_CALL_SOCK, err)) < 0)
        goto out;
    /* The helper serves the stub and the synthetic addresses: the gateway
     * takes its relay's prefaces on the door (gvisor/init.c). */
    b->relay_transparent = st->transparent;
    plan_commands(st);

    if (pipe2(errp, O_CLOEXEC) < 0 || pipe2(statp, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, startp) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot create pipes");
        goto out;
    }
    const struct policy_limits *lim = &s->p->limits;
    if ((cgroup_has(s->cg, CGROUP_PIDS) && lim->pids &&
         cgroup_set_pids(s->cg, lim->pids * GVISOR_TASKS_PER_PROCESS + GVISOR_PIDS_OVERHEAD, err) <
             0) ||
        (cgroup_has(s->cg, CGROUP_MEMORY) && lim->memory &&
         cgroup_set_memory(s->cg, lim->memory + GVISOR_MEMORY_OVERHEAD, err) < 0))
        goto out;
    if (s->cg->version && cgroup_ticket_open(s->cg, &ticket, err) < 0)
        goto out;
    pid_t parent = getpid();
    shim = fork();
    if (shim < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot start the gvisor shim");
        goto out;
    }
    if (shim == 0) {
        if (s->in_child)
            s->in_child(s->in_child_arg);
        struct shim_fds fds = { .err_w = errp[1],
                                .status_w = statp[1],
                                .start_r = startp[1],
                                .call_l = call_l,
                                .cg = ticket };
        int keepfds[4 + CGROUP_COUNT] = { errp[1], statp[1], startp[1], call_l };
        size_t n = 4;
        for (int c = 0; c < CGROUP_COUNT; c++)
            if (ticket.fd[c] >= 0)
                keepfds[n++] = ticket.fd[c];
        close_fds_except(keepfds, n);
        shim_main(st, &fds, parent);
    }
    closep(&errp[1]);
    closep(&statp[1]);
    closep(&startp[1]);
    closep(&call_l);
    errp[1] = statp[1] = startp[1] = call_l = -1;
    cgroup_ticket_close(&ticket);
    if (start_ready_wait(startp[0]) < 0) {
        boundary_child_error(errp[0], err);
        goto out;
    }
    /* The sandbox runs: where no cgroup holds its memory, the supervisor's
     * meter does, or the run does not start. */
    if (s->meter && mem_meter_open(shim, GVISOR_MEMORY_FILE, s->meter, err) < 0) {
        err_prefix(err, "gvisor");
        goto out;
    }
    b->pid = shim;
    shim = -1;
    b->err_r = TAKE_FD(errp[0]);
    b->status_r = TAKE_FD(statp[0]);
    b->start_w = TAKE_FD(startp[0]);
    rc = 0;
out:
    if (shim > 0) {
        kill(shim, SIGKILL);
        waitpid(shim, NULL, 0);
    }
    int *fds[] = { &errp[0], &errp[1], &statp[0], &statp[1], &startp[0], &startp[1], &call_l };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        closep(fds[i]);
    cgroup_ticket_close(&ticket);
    if (rc < 0)
        gv_release(b);
    return rc;
}

const struct sandbox_backend gvisor_backend = {
    .name = "gvisor",
    .level = CORDON_LEVEL_GVISOR,
    .meters_memory = true,
    .meters_cpu = true,
    .counts_pids = true,
    .tmpfs_sizes = true, /* gVisor's tmpfs takes a size, not nr_inodes (tmpfs_mount) */
    .probe = gv_probe,
    .prepare = gv_prepare,
    .release = gv_release,
};
