/*
 * sandbox/namespace.c: the `namespace` isolation level. The supervisor plans
 * everything, clones a child into fresh user, PID, mount, network, IPC and
 * UTS namespaces (cgroup namespace once it sits in its cgroup), and
 * supervises it. The child becomes PID 1 (a minimal init that reaps and
 * reports) and forks the command, which confines itself and execs.
 */
#include "policy/policy.h"
#include "sandbox/backend.h"
#include "sandbox/boundary.h"
#include "sandbox/container.h"
#include "sandbox/ns_int.h"
#include "sandbox/cgroup.h"
#include "sandbox/notify.h"
#include "sandbox/plan.h"
#include "sandbox/start.h"
#include "sandbox/template.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/home.h"
#include "common/route.h"
#include "common/syscalls.h"

#include <arpa/inet.h>
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

#define NS_FLAGS \
    (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)

/* File descriptors the child needs; every other is closed before exec. */
struct child_fds {
    int sync_r;     /* a byte when the supervisor has set us up; HUP when it died */
    int err_w;      /* error record, close-on-exec */
    int status_w;   /* the command's wait status */
    int start_r;    /* the start seam: ready goes out, the start message comes in */
    int bpf_r;      /* the seccomp program, compiled while the child builds its root */
    int gw_sock;    /* where the gateway's listening socket goes, or -1 (no network) */
    int layer_sock; /* where an overlay workspace's layer goes, or -1 (none) */
    struct cgroup_ticket
        cg; /* the run's cgroups, joined first (none: created in it, or no cgroup) */
};

/* ---- child side: runs between clone() and exec(), allocates nothing ---- */

static _Noreturn void child_fail(const struct child_fds *fds, struct cordon_err *err)
{
    boundary_fail(fds->err_w, err);
}

int ns_loopback_up(struct cordon_err *err)
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

struct command_confine {
    const struct ns_plan *plan;
    const struct seccomp_program *filter;
    int notify_w; /* the connect() filter's listener goes to init over it */
};

static int confine_ns_command(void *arg, struct cordon_err *err)
{
    const struct command_confine *c = arg;
    if (home_make(SANDBOX_HOME) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot make %s", SANDBOX_HOME);
    return confine_command_notified(&c->plan->confine, c->filter, &c->plan->keeper_filter,
                                    c->notify_w, err);
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
 * The gateway's door: a listening socket on the sandbox's loopback, made
 * here (so it lives in the sandbox's network namespace) and handed out to
 * the gateway, which serves it from the host's. The sandbox keeps no copy.
 */
int ns_open_gateway_door(int sock, struct cordon_err *err)
{
    _cleanup_close_ int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create the gateway's socket");
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(GATEWAY_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 128) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot listen on 127.0.0.1:%d", GATEWAY_PORT);
    if (send_fd(sock, l) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot hand the gateway its socket");
    return 0;
}

/*
 * `ip route add local 198.18.0.0/15 dev lo`: every synthetic address is then
 * the sandbox's own, so a connection to one lands on the gateway's listener
 * for its port (and on nothing for any other port).
 */
static int route_synthetic_range(struct cordon_err *err)
{
    if (route_local_range(SYNTH_NET, SYNTH_PREFIX) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot route the synthetic range to loopback");
    return 0;
}

/* A socket of TYPE bound to ADDR:PORT (host order) in the sandbox's namespace. */
static int bound_socket(int type, uint32_t addr, uint16_t port, struct cordon_err *err)
{
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create a socket for transparent egress");
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(addr) };
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        (type == SOCK_STREAM && listen(fd, 128) < 0)) {
        int e = errno;
        close(fd);
        errno = e;
        char text[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
        return err_sys(err, CORDON_E_SETUP, "cannot listen on %s:%u", text, port);
    }
    return fd;
}

/*
 * Transparent egress: the synthetic range routed here, then the DNS stub's
 * socket and a listener on 0.0.0.0:PORT for each port the policy lets a name
 * be reached on, handed to the gateway in that order.
 */
int ns_open_transparent_doors(const struct ns_plan *plan, int sock, struct cordon_err *err)
{
    if (route_synthetic_range(err) < 0)
        return -1;
    _cleanup_close_ int dns = bound_socket(SOCK_DGRAM, DNS_STUB_ADDR, 53, err);
    if (dns < 0)
        return -1;
    if (send_fd(sock, dns) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot hand the gateway its DNS socket");
    for (size_t i = 0; i < plan->n_ports; i++) {
        _cleanup_close_ int l = bound_socket(SOCK_STREAM, INADDR_ANY, plan->ports[i], err);
        if (l < 0)
            return -1;
        if (send_fd(sock, l) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot hand the gateway its sockets");
    }
    return 0;
}

/* The host workspace's root as init sees it, once the root is built: the names' keeper's. */
static int open_names_root(struct names_keeper *names, struct cordon_err *err)
{
    if (names->mode == NAMES_OFF)
        return 0;
    int fd = open("/workspace", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || names_keeper_root(names, fd) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open the workspace's root");
    return 0;
}

static void noop(int sig)
{
    (void)sig;
}

/*
 * The command has ended: the rest of the run goes now, before the supervisor
 * hears of it, so that its answer can go at once; init's own exit, and with
 * it the namespaces' teardown, follows off the answer's path. kill(-1)
 * reaches every process of the PID namespace but init, and each orphan
 * comes to init: no child left means no process left. Then the command's
 * status, with what the whole tree spent.
 */
static _Noreturn void end_tree(int ws, int status_w)
{
    do {
        kill(-1, SIGKILL);
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
            ;
    } while (kill(-1, 0) == 0);
    struct rusage kids, self;
    getrusage(RUSAGE_CHILDREN, &kids);
    getrusage(RUSAGE_SELF, &self);
    struct timeval t[] = { kids.ru_utime, kids.ru_stime, self.ru_utime, self.ru_stime };
    struct boundary_status st = { .ws = ws,
                                  .seen = BOUNDARY_TREE_GONE,
                                  .maxrss_kib = (uint64_t)kids.ru_maxrss };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        st.cpu_us += (uint64_t)t[i].tv_sec * 1000000u + (uint64_t)t[i].tv_usec;
    (void)!write(status_w, &st, sizeof st);
    _exit(0);
}

/*
 * Init's loop once the command runs: reap every child (orphans come here),
 * and make the command's connect()s (usock.h) and the names it makes in a
 * host workspace (NAMES, names.h) while LISTENER lasts. SIGCHLD is held but
 * for the wait itself, so no child's end goes unseen.
 */
static _Noreturn void keep_and_reap(const struct ns_plan *plan, const struct names_keeper *names,
                                    pid_t cmd, int listener, int status_w)
{
    sigset_t chld, during;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    struct sigaction sa = { .sa_handler = noop, .sa_flags = SA_RESTART };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    sigprocmask(SIG_BLOCK, &chld, &during);
    sigdelset(&during, SIGCHLD);
    for (;;) {
        int ws;
        pid_t w;
        while ((w = waitpid(-1, &ws, WNOHANG)) > 0)
            if (w == cmd)
                end_tree(ws, status_w);
        if (w < 0 && errno == ECHILD)
            _exit(125);
        struct pollfd p = { .fd = listener, .events = POLLIN };
        if (ppoll(&p, listener >= 0 ? 1 : 0, NULL, &during) <= 0)
            continue; /* a child ended (or a signal passed on) */
        if ((p.revents & (POLLHUP | POLLERR | POLLNVAL)) ||
            ((p.revents & POLLIN) && usock_serve(listener, &plan->usock, &plan->door, names) < 0)) {
            close(listener);
            listener = -1; /* no task of the run holds the filter any more */
        }
    }
}

/* Has the supervisor gone (its end of the sync pipe closed)? */
static bool supervisor_gone(const struct child_fds *fds)
{
    struct pollfd alive = { .fd = fds->sync_r, .events = POLLIN };
    return poll(&alive, 1, 0) > 0 && (alive.revents & (POLLHUP | POLLERR));
}

static _Noreturn void child_main(const struct ns_plan *plan, const struct child_fds *fds)
{
    struct cordon_err err = { 0 };
    char go;
    close_inherited(plan, fds);
    /* Dying with the supervisor from here on (armed again after the uid
     * change, which clears it), and never joining a cgroup it no longer
     * holds: its slot is the next run's once it is gone. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || supervisor_gone(fds))
        _exit(125);
    /* Into the run's cgroups before anything else: all the boundary ever
     * runs is limited and counted there. */
    if (cgroup_ticket_use(&fds->cg) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot join the run's cgroup");
        child_fail(fds, &err);
    }
    for (int c = 0; c < CGROUP_COUNT; c++)
        if (fds->cg.fd[c] >= 0)
            close(fds->cg.fd[c]);
    boundary_scrub_args_and_env("cordon-init");
    if (read(fds->sync_r, &go, 1) != 1)
        _exit(125); /* the supervisor is gone */

    /* Inside the run's cgroup: make it this namespace's root. */
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
    int layer = -1;
    struct names_keeper names = plan->names;
    if ((plan->cloned ? mounts_enter_clone(plan, &err) : mounts_enter_root(plan, &layer, &err)) <
            0 ||
        open_names_root(&names, &err) < 0 || ns_loopback_up(&err) < 0 ||
        (fds->gw_sock >= 0 && ns_open_gateway_door(fds->gw_sock, &err) < 0) ||
        (fds->gw_sock >= 0 && plan->transparent &&
         ns_open_transparent_doors(plan, fds->gw_sock, &err) < 0))
        child_fail(fds, &err);
    if (layer >= 0) {
        /* The supervisor commits the layer after the run: its handle leaves
         * now, before anything of the call can run, and none stays here. */
        if (send_fd(fds->layer_sock, layer) < 0) {
            err_sys(&err, CORDON_E_SETUP, "cannot hand out the workspace's layer");
            child_fail(fds, &err);
        }
        close(layer);
    }
    if (fds->layer_sock >= 0)
        close(fds->layer_sock);
    if (fds->gw_sock >= 0)
        close(fds->gw_sock);
    /* A clone has its template's, compiled once; else it comes while the root is built. */
    struct seccomp_program filter = plan->seccomp;
    if (!plan->cloned && !boundary_receive_filter(fds->bpf_r, &filter))
        _exit(125); /* the supervisor could not compile it and reports why */
    close(fds->bpf_r);

    if (confine_drop_bounding_set(0, &err) < 0 || become_sandbox_user(plan, &err) < 0)
        child_fail(fds, &err);
    /* After the uid change, which clears it: die with the supervisor. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot set parent-death signal");
        child_fail(fds, &err);
    }
    if (supervisor_gone(fds))
        _exit(125); /* the supervisor died before the signal was armed */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    /* The seam: built from the policy alone; the call arrives now, or never. */
    struct start_message m;
    if (start_ready_send(fds->start_r) < 0 || start_message_recv(fds->start_r, &m) < 0)
        _exit(125); /* released without a start */
    int tty = m.tty ? start_terminal_send(fds->start_r, &err) : -1;
    if (m.tty && tty < 0)
        child_fail(fds, &err);
    close(fds->start_r);
    /* As the sandbox user, before the command: the call's files are its own. */
    if (start_place_files(&m, "/workspace", &err) < 0)
        child_fail(fds, &err);

    int nsock[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, nsock) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot create the connect filter's socket");
        child_fail(fds, &err);
    }
    pid_t cmd = fork();
    if (cmd < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot fork the command");
        child_fail(fds, &err);
    }
    if (cmd == 0) {
        close(nsock[0]);
        struct command_confine cc = { plan, &filter, nsock[1] };
        boundary_exec(&m, tty, "/workspace", fds->err_w, confine_ns_command, &cc);
    }
    close(nsock[1]);
    if (tty >= 0)
        close(tty); /* the command's alone: its end is the terminal's hangup */

    /* Init: holds nothing the command could use, reaps, reports, exits. */
    close(fds->err_w);
    for (int i = 0; i < 3; i++)
        close(m.stdio[i]);
    confine_drop_capabilities(&err);
    boundary_forward_signals(cmd);
    /* -1: the command failed before it installed its filter (it reports why). */
    int listener = recv_fd(nsock[0]);
    close(nsock[0]);
    notify_sync_wakeup(listener);
    keep_and_reap(plan, &names, cmd, listener, fds->status_w);
}

/* ---- supervisor side ---- */

int ns_write_proc(pid_t pid, const char *file, const char *text, struct cordon_err *err)
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
        TRY(ns_write_proc(pid, "uid_map", map, err));
        TRY(ns_write_proc(pid, "gid_map", map, err));
        return 0;
    }
    snprintf(map, sizeof map, "%d %u 1\n", SANDBOX_UID, (unsigned)getuid());
    TRY(ns_write_proc(pid, "uid_map", map, err));
    TRY(ns_write_proc(pid, "setgroups", "deny", err));
    snprintf(map, sizeof map, "%d %u 1\n", SANDBOX_GID, (unsigned)getgid());
    return ns_write_proc(pid, "gid_map", map, err);
}

struct pipes {
    int sync[2], err[2], status[2], start[2], bpf[2], gw[2], layer[2];
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

/*
 * Transparent egress: for names, a listener per port a name rule allows (the
 * proxy's own port excepted: its door holds it on loopback); for literals,
 * init, the keeper of every connect(), hands them to the door (door.h).
 */
/* A connect to a literal address goes to the gateway by its door (door.h). */
static void plan_egress(const struct policy *p, struct ns_plan *plan)
{
    plan->transparent = true;
    plan->n_ports = boundary_transparent_ports(p, plan->ports, NULL, NULL, 0, NULL);
    plan->door = (struct egress_door){
        .on = true,
        .rules = &p->egress.rules,
        .own_loopback = true,
        .addr = { .sin_family = AF_INET,
                  .sin_port = htons(GATEWAY_PORT),
                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) },
    };
}

/* What ns_open_transparent_doors() handed out, in its order; -1 when one is missing. */
int ns_recv_transparent_doors(const struct ns_plan *plan, int sock, struct sandbox_boundary *b)
{
    for (size_t i = 0; i < 1 + plan->n_ports; i++) {
        int fd = recv_fd(sock);
        if (fd < 0)
            return -1;
        b->extra_doors[b->n_extra_doors++] = fd;
    }
    return 0;
}

static void ns_release(struct sandbox_boundary *b)
{
    if (b->container)
        return container_boundary_release(b);
    boundary_release(b);
}

int ns_plan_sandbox(const struct policy *p, bool gateway, const struct workspace_guard *ws,
                    uid_t map_host_uid, struct ns_plan *plan, struct cordon_err *err)
{
    /* Transparent egress for names: a listener per port a name rule allows
     * (the proxy's own port excepted: its door holds it on loopback). */
    if (gateway)
        plan_egress(p, plan);
    names_keeper_init(&plan->names, names_mode_for(p, NAMES_MAKE), p);
    plan->names.g = ws; /* init's copy: its protected entries, not to be moved */
    if (usock_keeper_init(&plan->usock, p, true, err) < 0 ||
        names_program(plan->names.mode, true, &plan->keeper_filter, err) < 0 ||
        mounts_plan(p, plan, map_host_uid, ws, err) < 0)
        return -1;
    return 0;
}

/*
 * The run's plan: TMPL's, shared and borrowed (only the core's rlimits are
 * the run's own), or made for it alone.
 */
static int plan_run(const struct sandbox_setup *s, const struct sandbox_template *tmpl,
                    struct ns_plan *plan, struct cordon_err *err)
{
    if (tmpl) {
        *plan = tmpl->plan;
        plan->template = false;
        plan->cloned = true;
    } else {
        plan->caller_is_root = geteuid() == 0;
    }
    /* The core's part is its rlimits alone: its unused Landlock table is not copied. */
    memcpy(plan->confine.rlimits, s->confine->rlimits, sizeof plan->confine.rlimits);
    plan->confine.n_rlimits = s->confine->n_rlimits;
    if (tmpl)
        return 0;
    if (ns_plan_sandbox(s->p, s->gateway, s->workspace, s->host_base + 1, plan, err) < 0 ||
        (s->ca_pem && mounts_add_ca(plan, s->ca_pem, err) < 0))
        return -1;
    return 0;
}

static void plan_release(struct ns_plan *plan)
{
    if (plan->cloned)
        return; /* the template's */
    mounts_plan_release(plan);
    seccomp_program_release(&plan->seccomp);
    seccomp_program_release(&plan->keeper_filter);
}

struct child_args {
    const struct sandbox_setup *s;
    const struct ns_plan *plan;
    struct child_fds fds;
};

/* The init, cloned from a template by its helper (in its cgroup already, or to join it). */
static _Noreturn void cloned_child(void *arg, bool in_cgroup)
{
    struct child_args *a = arg;
    if (in_cgroup)
        for (int c = 0; c < CGROUP_COUNT; c++)
            a->fds.cg.fd[c] = -1; /* the helper's copies, closed with the rest */
    if (a->s->in_child)
        a->s->in_child(a->s->in_child_arg);
    child_main(a->plan, &a->fds);
}

/*
 * The init, in its namespaces and cgroup: a clone of the run's template,
 * or cloned from here; 0 in the child (never returns there: child_main).
 */
static pid_t spawn_init(const struct sandbox_setup *s, const struct sandbox_template *tmpl,
                        struct child_args *a, struct cgroup_ticket *ticket, struct cordon_err *err)
{
    if (tmpl)
        return template_spawn(tmpl, s->host_base, ticket, cloned_child, a, err);
    /* Created in its cgroup where the kernel can (v2), else it joins first thing. */
    pid_t init = -1;
    if (ticket->dir >= 0) {
        init = sys_clone_ns_into_cgroup(NS_FLAGS, ticket->dir);
        if (init >= 0)
            for (int c = 0; c < CGROUP_COUNT; c++)
                closep(&ticket->fd[c]), ticket->fd[c] = -1;
    }
    if (init < 0)
        init = sys_clone_ns(NS_FLAGS);
    if (init < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED, "cannot create the sandbox's namespaces");
    if (init == 0) {
        if (s->in_child)
            s->in_child(s->in_child_arg);
        a->fds.cg = *ticket;
        child_main(a->plan, &a->fds); /* closes everything that is not in FDS */
    }
    return init;
}

static int open_pipes(struct pipes *pp, bool gateway, bool overlay)
{
    if (pipe2(pp->sync, O_CLOEXEC) < 0 || pipe2(pp->err, O_CLOEXEC) < 0 ||
        pipe2(pp->status, O_CLOEXEC) < 0 || pipe2(pp->bpf, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pp->start) < 0 ||
        (gateway && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pp->gw) < 0) ||
        (overlay && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pp->layer) < 0))
        return -1;
    return 0;
}

/* The child's ends live only in the child once it exists. */
static void close_child_ends(struct pipes *pp)
{
    int *ends[] = { &pp->sync[0], &pp->err[1], &pp->status[1], &pp->start[1],
                    &pp->bpf[0],  &pp->gw[1],  &pp->layer[1] };
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        closep(ends[i]);
        *ends[i] = -1;
    }
}

static int ns_prepare(const struct sandbox_setup *s, struct sandbox_boundary *b,
                      struct cordon_err *err)
{
    const struct policy *p = s->p;
    bool root = geteuid() == 0;
    if (s->container)
        return container_prepare(s, b, true, err);
    *b = (struct sandbox_boundary){
        .pid = -1, .err_r = -1, .status_r = -1, .start_w = -1, .door = -1, .layer = -1
    };
    bool overlay = p->workspace && p->workspace_mode == POLICY_WS_OVERLAY;
    /*
     * On the heap, zeroed by the kernel (it is larger than malloc's mmap
     * threshold): a plan on the stack was cleared and copied whole, 147 KB
     * of page faults a run, though most of its Landlock table stays unused.
     */
    _cleanup_free_ struct ns_plan *plan = calloc(1, sizeof *plan);
    if (!plan)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    /* A template holds neither the run's CA nor a gateway-less plan: a run
     * that needs either is planned whole (template_admits() says the rest). */
    const struct sandbox_template *tmpl = s->gateway && !s->ca_pem ? s->tmpl : NULL;
    struct pipes pp;
    memset(&pp, -1, sizeof pp);
    int rc = -1;
    pid_t init = -1;
    struct cgroup_ticket ticket = CGROUP_TICKET_INIT;

    if (plan_run(s, tmpl, plan, err) < 0)
        goto out;
    if (open_pipes(&pp, s->gateway, overlay) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot create pipes");
        goto out;
    }
    if (s->cg->version && cgroup_ticket_open(s->cg, &ticket, err) < 0)
        goto out;
    struct child_args a = {
        .s = s,
        .plan = plan,
        .fds = { .sync_r = pp.sync[0],
                 .err_w = pp.err[1],
                 .status_w = pp.status[1],
                 .start_r = pp.start[1],
                 .bpf_r = pp.bpf[0],
                 .gw_sock = s->gateway ? pp.gw[1] : -1,
                 .layer_sock = overlay ? pp.layer[1] : -1,
                 .cg = ticket },
    };
    if ((init = spawn_init(s, tmpl, &a, &ticket, err)) < 0)
        goto out;
    close_child_ends(&pp);
    cgroup_ticket_close(&ticket);
    /* A clone's ids are mapped by its helper, its filter is its template's. */
    if ((!tmpl && write_id_maps(init, root, s->host_base, err) < 0) ||
        write(pp.sync[1], "g", 1) != 1 ||
        (!tmpl && boundary_send_filter(p, &plan->seccomp, pp.bpf[1], err) < 0)) {
        if (err->kind == CORDON_E_OK)
            err_sys(err, CORDON_E_SETUP, "cannot start the sandbox");
        goto out;
    }
    /* The door, then "ready" at the seam; either missing means the child failed. */
    if ((overlay && (b->layer = recv_fd(pp.layer[0])) < 0) ||
        (s->gateway && (b->door = recv_fd(pp.gw[0])) < 0) ||
        (plan->transparent && ns_recv_transparent_doors(plan, pp.gw[0], b) < 0) ||
        start_ready_wait(pp.start[0]) < 0) {
        boundary_child_error(pp.err[0], err);
        goto out;
    }
    /* Init's prefaces: a literal handed over (door.h). */
    b->relay_transparent = plan->door.on;
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
    if (rc < 0) {
        closep(&b->door);
        closep(&b->layer);
        b->door = b->layer = -1;
        for (size_t i = 0; i < b->n_extra_doors; i++)
            closep(&b->extra_doors[i]);
        b->n_extra_doors = 0;
    }
    pipes_close(&pp);
    cgroup_ticket_close(&ticket);
    plan_release(plan);
    return rc;
}

static int ns_template_build(const struct policy *p, uid_t host_base, struct sandbox_template **out,
                             struct cordon_err *err)
{
    return template_build(p, host_base, out, err);
}

const struct sandbox_backend namespace_backend = {
    .name = "namespace",
    .level = CORDON_LEVEL_NAMESPACE,
    .ends_with_supervisor = true,
    .overlay = true,
    .tmpfs_sizes = true,
    .tmpfs_inodes = true,
    .containers = true,
    .tty = true,
    .probe = ns_probe,
    .prepare = ns_prepare,
    .release = ns_release,
    .template_build = ns_template_build,
    .template_free = template_free,
    .template_fds = template_fds,
};
