/*
 * sandbox/namespace.c: the `namespace` isolation level. The supervisor plans
 * everything, clones a child into fresh user, PID, mount, network, IPC and
 * UTS namespaces (cgroup namespace once it sits in its cgroup), and
 * supervises it. The child becomes PID 1 (a minimal init that reaps and
 * reports) and forks the command, which confines itself and execs.
 */
#include "core/watchdog.h"
#include "egress/gateway.h"
#include "egress/mint.h"
#include "sandbox/backend.h"
#include "sandbox/cgroup.h"
#include "sandbox/plan.h"
#include "sandbox/supervise.h"
#include "sandbox/workspace.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/syscalls.h"
#include "common/units.h"

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
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | \
                  CLONE_NEWUTS)

/* Root-started sandboxes run as unprivileged host ids from this range. */
#define HOST_ID_BASE 0x6c000000u

/* File descriptors the child needs; every other is closed before exec. */
struct child_fds {
    int sync_r;    /* a byte when the supervisor has set us up; HUP when it died */
    int err_w;     /* error record, close-on-exec */
    int status_w;  /* the command's wait status */
    int in_r, out_w, errout_w;
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

static int drop_capabilities(struct cordon_err *err)
{
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot clear ambient capabilities");
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct data[2] = { { 0 } };
    if (syscall(SYS_capset, &hdr, data) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot drop capabilities");
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
    if (dup2(fds->in_r, 0) < 0 || dup2(fds->out_w, 1) < 0 || dup2(fds->errout_w, 2) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot set up stdio");
        child_fail(fds, &err);
    }
    /* Whatever else is open dies at exec, the error pipe included. */
    if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot mark descriptors close-on-exec");
        child_fail(fds, &err);
    }
    if (chdir("/workspace") < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot enter /workspace");
        child_fail(fds, &err);
    }
    for (size_t i = 0; i < plan->n_rlimits; i++)
        if (setrlimit(plan->rlimits[i].resource, &plan->rlimits[i].value) < 0) {
            err_sys(&err, CORDON_E_SETUP, "cannot set resource limit %d",
                    plan->rlimits[i].resource);
            child_fail(fds, &err);
        }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot set no_new_privs");
        child_fail(fds, &err);
    }
    if (landlock_plan_apply(&plan->landlock, &err) < 0)
        child_fail(fds, &err);
    if (drop_capabilities(&err) < 0)
        child_fail(fds, &err);
    /* Last: the filter forbids some of the steps above. */
    if (seccomp_program_install(filter, &err) < 0)
        child_fail(fds, &err);

    execvpe(plan->argv[0], plan->argv, plan->envp);
    if (errno == ENOENT || errno == ENOTDIR)
        err_set(&err, CORDON_E_NOTFOUND, "command not found: '%s'", plan->argv[0]);
    else
        err_sys(&err, errno == EACCES || errno == ENOEXEC || errno == EISDIR || errno == EPERM
                          ? CORDON_E_NOEXEC
                          : CORDON_E_SETUP,
                "cannot execute '%s'", plan->argv[0]);
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

/* Read exactly LEN bytes; false on EOF or error. */
static bool read_full(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
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

    pid_t cmd = fork();
    if (cmd < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot fork the command");
        child_fail(fds, &err);
    }
    if (cmd == 0)
        exec_command(plan, fds, &filter);

    /* Init: holds nothing the command could use, reaps, reports, exits. */
    close(fds->err_w);
    close(fds->in_r);
    close(fds->out_w);
    close(fds->errout_w);
    drop_capabilities(&err);
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

static int env_add(char ***envp, size_t *n, const char *name, const char *value)
{
    size_t nlen = strlen(name);
    char *entry = NULL;
    if (asprintf(&entry, "%s=%s", name, value) < 0)
        return -1;
    for (size_t i = 0; i < *n; i++)
        if (strncmp((*envp)[i], name, nlen) == 0 && (*envp)[i][nlen] == '=') {
            free((*envp)[i]);
            (*envp)[i] = entry;
            return 0;
        }
    char **grown = realloc(*envp, (*n + 2) * sizeof *grown);
    if (!grown) {
        free(entry);
        return -1;
    }
    *envp = grown;
    grown[(*n)++] = entry;
    grown[*n] = NULL;
    return 0;
}

/* Empty but for PATH, HOME, LANG, TERM (on a terminal) and what the policy passes. */
static int plan_env(const struct policy *p, const struct sandbox_call *call,
                    const struct gateway_config *gw, struct ns_plan *plan, struct cordon_err *err)
{
    size_t n = 0;
    const char *lang = getenv("LANG");
    int rc = 0;
    rc |= env_add(&plan->envp, &n, "PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin");
    rc |= env_add(&plan->envp, &n, "HOME", "/workspace");
    rc |= env_add(&plan->envp, &n, "LANG", lang && *lang ? lang : "C.UTF-8");
    const char *term = getenv("TERM");
    if (term && (isatty(call->out_fd) || isatty(call->err_fd)))
        rc |= env_add(&plan->envp, &n, "TERM", term);
    if (p->network.mode == POLICY_NET_GATEWAY) {
        /* Every spelling clients look for; nothing is exempt from the proxy. */
        static const char *const names[] = { "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                             "http_proxy", "https_proxy", "all_proxy" };
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d", GATEWAY_PORT);
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            rc |= env_add(&plan->envp, &n, names[i], url);
        rc |= env_add(&plan->envp, &n, "NO_PROXY", "");
        rc |= env_add(&plan->envp, &n, "no_proxy", "");
    }
    /* Secrets: the sandbox holds placeholders; the gateway holds the values. */
    for (size_t i = 0; i < gw->n_secrets; i++)
        rc |= env_add(&plan->envp, &n, gw->secrets[i].name, gw->secrets[i].placeholder);
    if (gw->mint) {
        /* Trust the run's CA (for the hosts secrets are bound to) besides the
         * usual ones, under every name common clients read. */
        rc |= env_add(&plan->envp, &n, "SSL_CERT_FILE", SANDBOX_CA_BUNDLE);
        rc |= env_add(&plan->envp, &n, "REQUESTS_CA_BUNDLE", SANDBOX_CA_BUNDLE);
        rc |= env_add(&plan->envp, &n, "CURL_CA_BUNDLE", SANDBOX_CA_BUNDLE);
        rc |= env_add(&plan->envp, &n, "NODE_EXTRA_CA_CERTS", SANDBOX_CA_CERT);
    }
    for (size_t i = 0; i < p->n_env_pass; i++) {
        const char *v = getenv(p->env_pass[i]);
        if (v)
            rc |= env_add(&plan->envp, &n, p->env_pass[i], v);
    }
    for (size_t i = 0; i < p->n_env_set; i++)
        rc |= env_add(&plan->envp, &n, p->env_set[i].name, p->env_set[i].value);
    if (rc || !plan->envp)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    return 0;
}

/* Our own copy: init blanks the supervisor's argument memory it inherited. */
static int plan_argv(const struct sandbox_call *call, struct ns_plan *plan, struct cordon_err *err)
{
    size_t n = 0;
    while (call->argv[n])
        n++;
    plan->argv = calloc(n + 1, sizeof *plan->argv);
    if (!plan->argv)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (!(plan->argv[i] = strdup(call->argv[i])))
            return err_set(err, CORDON_E_INTERNAL, "out of memory");
    return 0;
}

static void free_strv(char **v)
{
    if (!v)
        return;
    for (char **e = v; *e; e++)
        free(*e);
    free(v);
}

static void add_rlimit(struct ns_plan *plan, int resource, uint64_t soft, uint64_t hard)
{
    plan->rlimits[plan->n_rlimits++] = (struct rlimit_step){
        resource, { .rlim_cur = soft, .rlim_max = hard }
    };
}

static bool best_effort(const struct policy *p, enum policy_limit l)
{
    return p->limits.best_effort & (1u << l);
}

static int refuse_limit(const struct policy *p, enum policy_limit l, const char *value,
                        const char *why, const char *fallback, struct cordon_err *err)
{
    (void)p;
    return err_set(err, CORDON_E_UNSUPPORTED,
                   "limits.%s: cannot enforce %s on this host: %s; mark it best_effort to "
                   "fall back to %s",
                   policy_limit_name(l), value, why, fallback);
}

/*
 * A limit a cgroup enforces for the whole tree (SET writes it; NULL when the
 * supervisor polls the cgroup instead), or an rlimit per process (RLIMIT;
 * -1 when already set) where the policy lets it degrade; refused otherwise.
 */
static int enforce_by_cgroup(const struct policy *p, const struct cgroup_set *cg,
                             struct ns_plan *plan, struct sandbox_result *res,
                             enum policy_limit l, enum cgroup_controller c, const char *shown,
                             int (*set)(const struct cgroup_set *, uint64_t, struct cordon_err *),
                             uint64_t value, int rlimit, const char *fallback,
                             struct cordon_err *err)
{
    if (cgroup_has(cg, c)) {
        if (set)
            TRY(set(cg, value, err));
        res->enforced[l] = cg->version == 2 ? ENFORCED_CGROUP_V2 : ENFORCED_CGROUP_V1;
        return 0;
    }
    if (best_effort(p, l)) {
        if (rlimit >= 0)
            add_rlimit(plan, rlimit, value, value);
        res->enforced[l] = ENFORCED_RLIMIT;
        return 0;
    }
    return refuse_limit(p, l, shown, cg->why[c], fallback, err);
}

/*
 * Decide how each limit is enforced: a cgroup where one is available,
 * an rlimit where the policy allows degrading, refusal otherwise.
 */
static int plan_limits(const struct policy *p, const struct cgroup_set *cg, struct ns_plan *plan,
                       struct sandbox_result *res, struct cordon_err *err)
{
    const struct policy_limits *lim = &p->limits;
    char v[32];

    add_rlimit(plan, RLIMIT_CORE, 0, 0);
    if (lim->wall_ms)
        res->enforced[POLICY_LIMIT_WALL] = ENFORCED_SUPERVISOR;
    if (lim->output)
        res->enforced[POLICY_LIMIT_OUTPUT] = ENFORCED_SUPERVISOR;

    if (lim->memory) {
        format_size(lim->memory, v, sizeof v);
        TRY(enforce_by_cgroup(p, cg, plan, res, POLICY_LIMIT_MEMORY, CGROUP_MEMORY, v,
                              cgroup_set_memory, lim->memory, RLIMIT_AS,
                              "a per-process RLIMIT_AS", err));
    }
    if (lim->pids) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)lim->pids);
        /* RLIMIT_NPROC counts per user in the run's own user namespace. */
        TRY(enforce_by_cgroup(p, cg, plan, res, POLICY_LIMIT_PIDS, CGROUP_PIDS, v,
                              cgroup_set_pids, lim->pids, RLIMIT_NPROC, "RLIMIT_NPROC", err));
    }
    if (lim->cpu_ms) {
        /* Always a per-process cap too; the cgroup adds the whole tree. */
        uint64_t secs = (lim->cpu_ms + 999) / 1000;
        add_rlimit(plan, RLIMIT_CPU, secs, secs + 1);
        snprintf(v, sizeof v, "%llums", (unsigned long long)lim->cpu_ms);
        TRY(enforce_by_cgroup(p, cg, plan, res, POLICY_LIMIT_CPU, CGROUP_CPU, v, NULL,
                              lim->cpu_ms, -1, "a per-process RLIMIT_CPU", err));
    }
    if (lim->file_size) {
        add_rlimit(plan, RLIMIT_FSIZE, lim->file_size, lim->file_size);
        res->enforced[POLICY_LIMIT_FILE_SIZE] = ENFORCED_RLIMIT;
    }
    if (lim->open_files) {
        struct rlimit cur;
        getrlimit(RLIMIT_NOFILE, &cur);
        if (lim->open_files > cur.rlim_max) {
            if (!best_effort(p, POLICY_LIMIT_OPEN_FILES))
                return err_set(err, CORDON_E_UNSUPPORTED,
                               "limits.open_files: %llu exceeds this host's hard limit %llu",
                               (unsigned long long)lim->open_files,
                               (unsigned long long)cur.rlim_max);
            add_rlimit(plan, RLIMIT_NOFILE, cur.rlim_max, cur.rlim_max);
        } else {
            add_rlimit(plan, RLIMIT_NOFILE, lim->open_files, lim->open_files);
        }
        res->enforced[POLICY_LIMIT_OPEN_FILES] = ENFORCED_RLIMIT;
    }
    return 0;
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
    int sync[2], err[2], status[2], in[2], out[2], errout[2], bpf[2], gw[2];
};

static void pipes_close(struct pipes *pp)
{
    int *all = (int *)pp;
    for (size_t i = 0; i < sizeof *pp / sizeof(int); i++)
        closep(&all[i]);
}

static int ns_probe(struct cordon_err *err)
{
    pid_t pid = (pid_t)syscall(SYS_clone, NS_FLAGS | SIGCHLD, 0, 0, 0, 0);
    if (pid < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED, "cannot create user/pid/mount/net namespaces");
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    return 0;
}

static int ns_run(const struct policy *p, const struct sandbox_call *call,
                  struct sandbox_result *res, struct cordon_err *err)
{
    memset(res, 0, sizeof *res);
    bool root = geteuid() == 0;
    uint16_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, 0) < 0)
        rnd = (uint16_t)getpid();
    /* base: the namespace's root; +1 the sandbox user; +2 the gateway. */
    uid_t host_base = HOST_ID_BASE + ((uid_t)rnd << 2);

    struct ns_plan plan = { .caller_is_root = root };
    struct workspace_guard ws = WORKSPACE_GUARD_INIT;
    struct cgroup_set cg = { 0 };
    struct pipes pp;
    memset(&pp, -1, sizeof pp);
    int sig_fd = -1, rc = -1;
    pid_t init = -1;
    struct watchdog *own_watchdog = NULL, *watchdog = call->watchdog;
    bool gateway = p->network.mode == POLICY_NET_GATEWAY;
    struct gateway_config gw_cfg = { 0 };
    pid_t gw_pid = -1;
    int gw_listen = -1, gw_report = -1;
    sigset_t mask, old;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, &old);

    /* Placeholders are host state: a watchdog must be there to take them back. */
    if (p->workspace && !watchdog && !(watchdog = own_watchdog = watchdog_new(NULL, NULL, err)))
        goto out;
    if ((gateway && gateway_config_from_policy(p, &gw_cfg, err) < 0) ||
        plan_argv(call, &plan, err) < 0 || workspace_prepare(p, watchdog, &ws, err) < 0 ||
        mounts_plan(p, &plan, host_base + 1, p->workspace ? &ws : NULL, err) < 0 ||
        (gw_cfg.mint && mounts_add_ca(&plan, mint_ca_pem(gw_cfg.mint), err) < 0) ||
        plan_env(p, call, &gw_cfg, &plan, err) < 0)
        goto out;

    if (sandbox_needs_cgroup(p)) {
        char name[64];
        snprintf(name, sizeof name, "cordon-%d-%04x", (int)getpid(), rnd);
        cgroup_create(&cg, name);
        if (cg.version && !watchdog && !(watchdog = own_watchdog = watchdog_new(NULL, NULL, err)))
            goto out;
        for (int c = 0; c < CGROUP_COUNT; c++)
            if (cgroup_has(&cg, c) && watchdog_guard_cgroup(watchdog, cg.dir[c], err) < 0)
                goto out;
    }
    if (plan_limits(p, &cg, &plan, res, err) < 0)
        goto out;

    if (pipe2(pp.sync, O_CLOEXEC) < 0 || pipe2(pp.err, O_CLOEXEC) < 0 ||
        pipe2(pp.status, O_CLOEXEC) < 0 || pipe2(pp.in, O_CLOEXEC) < 0 ||
        pipe2(pp.out, O_CLOEXEC) < 0 || pipe2(pp.errout, O_CLOEXEC) < 0 ||
        pipe2(pp.bpf, O_CLOEXEC) < 0 ||
        (gateway && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pp.gw) < 0)) {
        err_sys(err, CORDON_E_SETUP, "cannot create pipes");
        goto out;
    }
    sig_fd = signalfd(-1, &mask, SFD_CLOEXEC);

    uint64_t start = monotonic_us();
    init = (pid_t)syscall(SYS_clone, NS_FLAGS | SIGCHLD, 0, 0, 0, 0);
    if (init < 0) {
        err_sys(err, CORDON_E_UNSUPPORTED, "cannot create the sandbox's namespaces");
        goto out;
    }
    if (init == 0) {
        gateway_config_wipe_values(&gw_cfg);
        close(pp.sync[1]);
        close(pp.err[0]);
        close(pp.status[0]);
        close(pp.in[1]);
        close(pp.out[0]);
        close(pp.errout[0]);
        close(pp.bpf[1]);
        if (gateway)
            close(pp.gw[0]);
        if (sig_fd >= 0)
            close(sig_fd);
        struct child_fds fds = {
            .sync_r = pp.sync[0], .err_w = pp.err[1], .status_w = pp.status[1],
            .in_r = pp.in[0], .out_w = pp.out[1], .errout_w = pp.errout[1],
            .bpf_r = pp.bpf[0], .gw_sock = gateway ? pp.gw[1] : -1,
        };
        child_main(&plan, &fds);
    }

    /* The child's ends live only in the child now. */
    closep(&pp.sync[0]);
    closep(&pp.err[1]);
    closep(&pp.status[1]);
    closep(&pp.in[0]);
    closep(&pp.out[1]);
    closep(&pp.errout[1]);
    closep(&pp.bpf[0]);
    closep(&pp.gw[1]);
    pp.sync[0] = pp.err[1] = pp.status[1] = pp.in[0] = pp.out[1] = pp.errout[1] = pp.bpf[0] =
        pp.gw[1] = -1;

    if (write_id_maps(init, root, host_base, err) < 0 ||
        (cg.version && cgroup_attach(&cg, init, err) < 0) ||
        write(pp.sync[1], "g", 1) != 1 ||
        send_filter(p, &plan.seccomp, pp.bpf[1], err) < 0) {
        if (err->kind == CORDON_E_OK)
            err_sys(err, CORDON_E_SETUP, "cannot start the sandbox");
        kill(init, SIGKILL);
        waitpid(init, NULL, 0);
        init = -1;
        goto out;
    }
    /* No door means the child failed first: supervision reports its error. */
    if (gateway && (gw_listen = recv_fd(pp.gw[0])) >= 0) {
        gw_pid = gateway_start(&gw_cfg, gw_listen, host_base + 2, &gw_report, err);
        closep(&gw_listen);
        /* What the gateway buffers and spends on the run's behalf is the
         * run's: its memory, pids and CPU count against the run's limits. */
        if (gw_pid > 0 && cg.version) {
            struct cordon_err ignored;
            cgroup_attach(&cg, gw_pid, &ignored);
        }
        if (gw_pid < 0) {
            kill(init, SIGKILL);
            waitpid(init, NULL, 0);
            init = -1;
            goto out;
        }
    }

    struct supervision sv = {
        .init_pid = init,
        .err_r = TAKE_FD(pp.err[0]),
        .status_r = TAKE_FD(pp.status[0]),
        .out_r = TAKE_FD(pp.out[0]),
        .errout_r = TAKE_FD(pp.errout[0]),
        .in_w = TAKE_FD(pp.in[1]),
        .sig_fd = sig_fd,
        .report_r = gw_report,
        .audit = call->audit,
        .run_id = call->run_id,
        .call = call,
        .limits = &p->limits,
        .cg = &cg,
        .poll_cpu = cgroup_has(&cg, CGROUP_CPU) && p->limits.cpu_ms,
        .poll_pids = cgroup_has(&cg, CGROUP_PIDS) && p->limits.pids,
        .start_us = start,
    };
    supervise(&sv, res);
    /* Init has exited, and with it every process of the PID namespace. */
    workspace_finish(p, &ws, &res->workspace); /* run.end carries it to the audit log */
    if (gw_pid > 0) {
        /* The gateway reports the connections the run left open, then exits. */
        kill(gw_pid, SIGTERM);
        supervise_drain_reports(&sv, res, 2000);
        kill(gw_pid, SIGKILL);
        waitpid(gw_pid, NULL, 0);
        gw_pid = -1;
    }
    init = -1;
    rc = 0;

out:
    if (gw_pid > 0) {
        kill(gw_pid, SIGKILL);
        waitpid(gw_pid, NULL, 0);
    }
    pipes_close(&pp);
    closep(&sig_fd);
    workspace_guard_release(&ws);
    if (cg.version)
        cgroup_destroy(&cg);
    watchdog_release(own_watchdog);
    gateway_config_release(&gw_cfg);
    sigprocmask(SIG_SETMASK, &old, NULL);
    mounts_plan_release(&plan);
    seccomp_program_release(&plan.seccomp);
    free_strv(plan.envp);
    free_strv(plan.argv);
    return rc;
}

const struct sandbox_backend namespace_backend = {
    .name = "namespace",
    .level = CORDON_LEVEL_NAMESPACE,
    .probe = ns_probe,
    .run = ns_run,
};
