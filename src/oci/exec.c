/*
 * oci/exec.c: exec, a process started in a running container. It joins the
 * container's cgroups and namespaces (those the host owns first, while it
 * still has the privilege to, its user namespace last), forks into its PID
 * namespace, and confines itself as the container's command is confined:
 * the spec's user, capabilities and filter, cordon's no_new_privs, Landlock
 * and seccomp allowlist. Its egress goes where the container's does: the
 * network namespace has the gateway's door and nothing else. It is recorded
 * in the run's audit chain (oci.exec).
 */
#include "oci/oci.h"

#include "common/json.h"

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/fds.h"
#include "common/strv.h"
#include "common/syscalls.h"
#include "core/run.h"
#include "sandbox/boundary.h"
#include "sandbox/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

struct exec_args {
    const char *process, *pid_file, *console, *cwd, *user;
    bool detach, tty;
    char *env[64];
    size_t n_env;
    const char *id;
    char **argv; /* after the id */
};

static int parse(int argc, char **argv, struct exec_args *a)
{
    enum {
        O_PROCESS = 1,
        O_PID,
        O_CONSOLE,
        O_CWD,
        O_USER,
        O_DETACH,
        O_TTY,
        O_ENV,
        O_IGNORED,
        O_IGNORED_ARG
    };
    static const struct option opts[] = {
        { "process", required_argument, NULL, O_PROCESS },
        { "pid-file", required_argument, NULL, O_PID },
        { "console-socket", required_argument, NULL, O_CONSOLE },
        { "cwd", required_argument, NULL, O_CWD },
        { "user", required_argument, NULL, O_USER },
        { "detach", no_argument, NULL, O_DETACH },
        { "tty", no_argument, NULL, O_TTY },
        { "env", required_argument, NULL, O_ENV },
        { "no-new-privs", no_argument, NULL, O_IGNORED },
        { "preserve-fds", required_argument, NULL, O_IGNORED_ARG },
        { "process-label", required_argument, NULL, O_IGNORED_ARG },
        { "apparmor", required_argument, NULL, O_IGNORED_ARG },
        { "cap", required_argument, NULL, O_IGNORED_ARG },
        { 0 },
    };
    *a = (struct exec_args){ 0 };
    opterr = 0;
    int c;
    while ((c = getopt_long_only(argc, argv, "+dtu:e:p:c:", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
        case O_PROCESS:
            a->process = optarg;
            break;
        case O_PID:
            a->pid_file = optarg;
            break;
        case O_CONSOLE:
            a->console = optarg;
            break;
        case O_CWD:
            a->cwd = optarg;
            break;
        case 'u':
        case O_USER:
            a->user = optarg;
            break;
        case 'd':
        case O_DETACH:
            a->detach = true;
            break;
        case 't':
        case O_TTY:
            a->tty = true;
            break;
        case 'e':
        case O_ENV:
            if (a->n_env == sizeof a->env / sizeof a->env[0] - 1)
                return oci_log("error", "exec: too many --env"), -1;
            a->env[a->n_env++] = optarg;
            break;
        case O_IGNORED:
        case O_IGNORED_ARG:
            break;
        default:
            return oci_log("error", "exec: unknown option '%s'", argv[optind - 1]), -1;
        }
    }
    if (optind >= argc)
        return oci_log("error", "exec: expected a container id"), -1;
    a->id = argv[optind];
    a->argv = argv + optind + 1;
    if (!a->process && !a->argv[0])
        return oci_log("error", "exec: a process (--process FILE, or arguments) is needed"), -1;
    return 0;
}

/* The process to run: --process's, else the spec's with the command line's changes. */
static int process_of(const struct exec_args *a, struct oci_spec *s, struct cordon_err *err)
{
    json_auto_t *proc = NULL;
    if (a->process) {
        json_error_t je;
        proc = json_parse_strict_file(a->process, 0, &je);
        if (!proc)
            return err_set(err, CORDON_E_USAGE, "%s:%d: %s", a->process, je.line, je.text);
    } else {
        proc = json_deep_copy(json_object_get(s->config, "process"));
        json_t *args = json_array();
        for (char **v = a->argv; *v; v++)
            json_array_append_new(args, json_string(*v));
        json_object_set_new(proc, "args", args);
        json_object_set_new(proc, "terminal", json_boolean(a->tty));
        json_t *env = json_object_get(proc, "env");
        if (!env)
            json_object_set_new(proc, "env", env = json_array());
        for (size_t i = 0; i < a->n_env; i++) {
            /* A name given again replaces the spec's, as runc's --env does. */
            const char *eq = strchr(a->env[i], '=');
            size_t len = eq ? (size_t)(eq - a->env[i]) + 1 : strlen(a->env[i]);
            size_t k;
            json_t *e;
            json_array_foreach(env, k, e) if (json_is_string(e) &&
                                              !strncmp(json_string_value(e), a->env[i], len)) break;
            if (k < json_array_size(env))
                json_array_set_new(env, k, json_string(a->env[i]));
            else
                json_array_append_new(env, json_string(a->env[i]));
        }
        if (a->cwd)
            json_object_set_new(proc, "cwd", json_string(a->cwd));
        if (a->user) {
            unsigned uid = 0, gid = 0;
            int n = sscanf(a->user, "%u:%u", &uid, &gid);
            if (n < 1)
                return err_set(err, CORDON_E_USAGE, "exec: --user '%s' is not UID[:GID]", a->user);
            json_object_set_new(
                proc, "user",
                json_pack("{s:i, s:i}", "uid", (int)uid, "gid", (int)(n == 2 ? gid : uid)));
        }
    }
    return oci_spec_process(proc, s, err);
}

static int join_namespaces(pid_t init, struct cordon_err *err)
{
    static const struct {
        const char *name;
        int type;
    } ns[] = {
        { "cgroup", CLONE_NEWCGROUP }, { "ipc", CLONE_NEWIPC }, { "uts", CLONE_NEWUTS },
        { "net", CLONE_NEWNET },       { "pid", CLONE_NEWPID }, { "mnt", CLONE_NEWNS },
        { "user", CLONE_NEWUSER },
    };
    int fds[7];
    for (size_t i = 0; i < 7; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)init, ns[i].name);
        if ((fds[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
            for (size_t k = 0; k < i; k++)
                close(fds[k]);
            return err_sys(err, CORDON_E_SETUP, "cannot open '%s'", path);
        }
    }
    /* Looked at before any is joined: /proc is the container's after its mounts. */
    bool same[7];
    for (size_t i = 0; i < 7; i++) {
        char self[64];
        struct stat mine, theirs;
        snprintf(self, sizeof self, "/proc/self/ns/%s", ns[i].name);
        same[i] = stat(self, &mine) == 0 && fstat(fds[i], &theirs) == 0 &&
            mine.st_ino == theirs.st_ino && mine.st_dev == theirs.st_dev;
    }
    /* The host's root joins the user namespace last (its privilege opens the others);
     * an ordinary user first (it is the namespace's owner, which gives it that). */
    bool root = geteuid() == 0;
    int rc = 0;
    for (size_t k = 0; k < 7 && rc == 0; k++) {
        size_t i = root ? k : (k + 6) % 7;
        /* The process level has no user namespace of its own: that one is ours already. */
        if (same[i])
            continue;
        if (setns(fds[i], ns[i].type) < 0)
            rc = err_sys(err, CORDON_E_SETUP, "cannot join the container's %s namespace",
                         ns[i].name);
    }
    for (size_t i = 0; i < 7; i++)
        close(fds[i]);
    return rc;
}

struct child_plan {
    const struct oci_spec *s;
    struct confine_plan confine;
    struct seccomp_program filter;
    char **envp;
    int console;        /* connected to the console socket before the namespaces were joined */
    uint32_t id_offset; /* the process level's: the container's ids on the host */
};

/* In the container (its namespaces joined): a pty from its devpts, the master to CONSOLE. */
static int open_terminal(int console, struct cordon_err *err)
{
    int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
    int unlock = 0;
    if (master < 0 || ioctl(master, TIOCSPTLCK, &unlock) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open a terminal in the container");
    int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    unsigned n = 0;
    char name[64] = "/dev/ptmx";
    if (ioctl(master, TIOCGPTN, &n) == 0)
        snprintf(name, sizeof name, "/dev/pts/%u", n);
    if (slave < 0 || send_fds(console, name, strlen(name), &master, 1) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot hand the terminal to the console socket");
    close(console);
    close(master);
    return slave;
}

/* The console socket, a host path: connected before the container's mounts are ours. */
static int connect_console(const char *path, struct cordon_err *err)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (snprintf(a.sun_path, sizeof a.sun_path, "%s", path) >= (int)sizeof a.sun_path)
        return err_set(err, CORDON_E_USAGE, "--console-socket '%s' is too long", path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
        if (s >= 0)
            close(s);
        return err_sys(err, CORDON_E_SETUP, "cannot connect to console socket '%s'", path);
    }
    return s;
}

static int confine_exec(void *arg, struct cordon_err *err)
{
    const struct child_plan *cp = arg;
    const struct sandbox_container *c = &cp->s->c;
    uint32_t off = cp->id_offset;
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
    return confine_command(&cp->confine, &cp->filter, err);
}

static _Noreturn void child(const struct child_plan *cp, int err_w)
{
    struct cordon_err err = { 0 };
    int tty = -1;
    if (cp->s->c.terminal && (tty = open_terminal(cp->console, &err)) < 0)
        boundary_fail(err_w, &err);
    struct start_message m = {
        .argv = cp->s->argv, .envp = cp->envp, .stdio = { 0, 1, 2 }, .files = -1
    };
    boundary_exec(&m, tty, cp->s->c.cwd, err_w, confine_exec, (void *)cp);
}

/* The proxy variables the run's own command has, when the policy has the gateway. */
static char **exec_env(const struct oci_spec *s, bool gateway)
{
    static const char *const names[] = { "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                         "http_proxy", "https_proxy", "all_proxy" };
    size_t n = 0;
    for (char **e = s->env; e && *e; e++)
        n++;
    char **out = calloc(n + 10, sizeof *out);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++)
        out[i] = strdup(s->env[i]);
    for (size_t i = 0; gateway && i < sizeof names / sizeof names[0]; i++)
        if (asprintf(&out[n++], "%s=http://127.0.0.1:%d", names[i], GATEWAY_PORT) < 0)
            out[--n] = NULL;
    return out;
}

static void record(const struct oci_spec *s, const struct oci_state *st, pid_t pid)
{
    struct audit_log *log = NULL;
    struct cordon_err err;
    if (cordon_audit_open(s->policy, &log, &err) < 0 || !log)
        return;
    json_t *argv = json_array();
    for (char **a = s->argv; *a; a++)
        json_array_append_new(argv, json_string(*a));
    const char *run = oci_state_str(st, "run_id");
    audit_append(log, "oci.exec", run ? run : "",
                 json_pack("{s:s, s:o, s:i, s:i}", "container", st->id, "argv", argv, "uid",
                           (int)s->c.uid, "pid", (int)pid),
                 &err);
    audit_close(log, &err);
    audit_free(log);
}

static int plan(const struct exec_args *a, struct oci_state *st, struct oci_spec *s,
                struct child_plan *cp, struct cordon_err *err)
{
    const char *bundle = oci_state_str(st, "bundle");
    if (!bundle || oci_spec_load(bundle, oci_state_str(st, "config"), st->id, s, err) < 0)
        return bundle ? -1 : err_set(err, CORDON_E_SETUP, "container %s has no bundle", st->id);
    const char *digest = oci_state_str(st, "policy_digest");
    if (!digest || strcmp(digest, policy_evidence(s->policy)->policy) != 0)
        return err_set(err, CORDON_E_POLICY,
                       "the policy of container %s changed since it was "
                       "created: exec refused",
                       st->id);
    TRY(process_of(a, s, err));
    if (s->c.terminal && !a->console)
        return err_set(err, CORDON_E_USAGE, "exec: a terminal needs --console-socket");
    cp->s = s;
    cp->console = -1;
    if (s->c.terminal && (cp->console = connect_console(a->console, err)) < 0)
        return -1;
    /* The per-process limits the run's own command has (core/limits.c's rlimits). */
    const struct policy_limits *l = &s->policy->limits;
    confine_add_rlimit(&cp->confine, RLIMIT_CORE, 0, 0);
    if (l->open_files)
        confine_add_rlimit(&cp->confine, RLIMIT_NOFILE, l->open_files, l->open_files);
    if (l->file_size)
        confine_add_rlimit(&cp->confine, RLIMIT_FSIZE, l->file_size, l->file_size);
    const char *level = oci_state_str(st, "level");
    if (level && !strcmp(level, "process")) {
        cp->id_offset = (uint32_t)oci_state_int(st, "id_base");
        cp->confine.landlock_required = true;
    }
    TRY(container_confine_plan(&s->c, &cp->confine, err));
    TRY(seccomp_program_build(s->policy, &cp->filter, err));
    cp->envp = exec_env(s, json_is_true(json_object_get(st->doc, "gateway")));
    return cp->envp ? 0 : err_set(err, CORDON_E_INTERNAL, "out of memory");
}

static int write_pid(const char *path, pid_t pid, struct cordon_err *err)
{
    char text[32];
    int n = snprintf(text, sizeof text, "%d", (int)pid);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, (size_t)n) != n)
        return err_sys(err, CORDON_E_SETUP, "cannot write pid file '%s'", path);
    return 0;
}

/*
 * In a child of ours that joins the container and exits: the process, cloned beside it
 * (CLONE_PARENT) so that it is our child, in the container's PID namespace. Its pid goes
 * to PID_W; setup errors to ERR_W. The host's paths (the pid file, the audit log) stay
 * ours to write: we never join.
 */
static _Noreturn void joiner(const struct child_plan *cp, const struct oci_state *st, pid_t init,
                             int pid_w, int err_w)
{
    struct cordon_err err = { 0 };
    if (oci_cgroups_join(st, &err) < 0 || join_namespaces(init, &err) < 0)
        boundary_fail(err_w, &err);
    pid_t pid = sys_clone_ns(CLONE_PARENT);
    if (pid == 0)
        child(cp, err_w);
    if (pid < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot fork into the container");
        boundary_fail(err_w, &err);
    }
    (void)!write(pid_w, &pid, sizeof pid);
    _exit(0);
}

/* Start the process; its pid, or -1 with ERR (nothing left running). */
static pid_t start_process(const struct child_plan *cp, const struct oci_state *st, pid_t init,
                           struct cordon_err *err)
{
    int ep[2], pp[2];
    if (pipe2(ep, O_CLOEXEC) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create a pipe");
    if (pipe2(pp, O_CLOEXEC) < 0) {
        close(ep[0]);
        close(ep[1]);
        return err_sys(err, CORDON_E_SETUP, "cannot create a pipe");
    }
    pid_t j = fork();
    if (j == 0) {
        close(ep[0]);
        close(pp[0]);
        joiner(cp, st, init, pp[1], ep[1]);
    }
    close(ep[1]);
    close(pp[1]);
    pid_t pid = -1;
    if (j < 0 || !read_full(pp[0], &pid, sizeof pid))
        pid = -1;
    if (j > 0)
        waitpid(j, NULL, 0);
    close(pp[0]);
    /* Setup or exec failures come back as one record; EOF means it exec'd. */
    struct cordon_err child_err;
    if (read_full(ep[0], &child_err, sizeof child_err)) {
        *err = child_err;
        if (pid > 0)
            waitpid(pid, NULL, 0);
        pid = -1;
    } else if (pid < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot start the process in the container");
    }
    close(ep[0]);
    return pid;
}

int oci_exec(int argc, char **argv)
{
    struct exec_args a;
    if (parse(argc, argv, &a) < 0)
        return 1;
    struct cordon_err err = { 0 };
    struct oci_state st;
    if (oci_state_open(a.id, &st, &err) < 0)
        return oci_fail(&err);
    if (oci_gvisor_delegated(&st)) {
        int rc = oci_gvisor_forward(&st, argc, argv);
        oci_state_close(&st);
        return rc;
    }
    struct oci_spec s;
    struct child_plan cp = { .console = -1 };
    memset(&s, 0, sizeof s);
    enum oci_status status = oci_state_status(&st);
    pid_t init = oci_state_init(&st);
    int rc = status == OCI_RUNNING || status == OCI_CREATED
        ? 0
        : err_set(&err, CORDON_E_USAGE, "cannot exec in a container that is %s: %s",
                  oci_status_name(status), a.id);
    if (rc == 0)
        rc = plan(&a, &st, &s, &cp, &err);
    pid_t pid = rc == 0 ? start_process(&cp, &st, init, &err) : -1;
    if (pid > 0)
        record(&s, &st, pid);
    if (pid > 0 && a.pid_file && write_pid(a.pid_file, pid, &err) < 0) {
        kill(pid, SIGKILL);
        a.detach = false;
        rc = -1;
    }
    oci_state_close(&st);
    int code = rc < 0 || pid < 0 ? oci_fail(&err) : 0;
    if (pid > 0 && !a.detach) {
        int ws = 0;
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
            ;
        if (rc == 0)
            code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    }
    if (cp.console >= 0)
        close(cp.console);
    strv_free(cp.envp);
    seccomp_program_release(&cp.filter);
    oci_spec_release(&s);
    return code;
}
