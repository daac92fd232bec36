/*
 * oci/cmds.c: the commands after create: start, state, kill, delete, ps,
 * pause, resume, update, features, and the spec's hooks. Each takes the
 * container's lock and reads its state; whether it runs is asked of its
 * init, not of the file.
 */
#include "oci/oci.h"

#include "common/json.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/syscalls.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The one positional argument, the container's id; NULL after logging why. */
static const char *one_id(int argc, char **argv, int first)
{
    if (first != argc - 1) {
        oci_log("error", "%s: expected one container id", argv[0]);
        return NULL;
    }
    return argv[first];
}

/* Options of commands that take none but flags: the index of the first operand, or -1. */
static int flags_only(int argc, char **argv, const char *const *names, bool *set)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *o = argv[i] + (argv[i][1] == '-' ? 2 : 1);
        size_t k = 0;
        while (names[k] && strcmp(o, names[k]))
            k++;
        if (!names[k]) {
            oci_log("error", "%s: unknown option '%s'", argv[0], argv[i]);
            return -1;
        }
        set[k] = true;
    }
    return i;
}

/* A container runsc runs (the gvisor level): the command is runsc's. */
static int delegate(struct oci_state *st, int argc, char **argv)
{
    int rc = oci_gvisor_forward(st, argc, argv);
    oci_state_close(st);
    return rc;
}

int oci_signal_parse(const char *text)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {
        { "HUP", SIGHUP },       { "INT", SIGINT },   { "QUIT", SIGQUIT },   { "ILL", SIGILL },
        { "TRAP", SIGTRAP },     { "ABRT", SIGABRT }, { "BUS", SIGBUS },     { "FPE", SIGFPE },
        { "KILL", SIGKILL },     { "USR1", SIGUSR1 }, { "SEGV", SIGSEGV },   { "USR2", SIGUSR2 },
        { "PIPE", SIGPIPE },     { "ALRM", SIGALRM }, { "TERM", SIGTERM },   { "CHLD", SIGCHLD },
        { "CONT", SIGCONT },     { "STOP", SIGSTOP }, { "TSTP", SIGTSTP },   { "TTIN", SIGTTIN },
        { "TTOU", SIGTTOU },     { "URG", SIGURG },   { "XCPU", SIGXCPU },   { "XFSZ", SIGXFSZ },
        { "VTALRM", SIGVTALRM }, { "PROF", SIGPROF }, { "WINCH", SIGWINCH }, { "IO", SIGIO },
        { "PWR", SIGPWR },       { "SYS", SIGSYS },
    };
    char *end;
    long n = strtol(text, &end, 10);
    if (*text && !*end)
        return n >= 0 && n < 65 ? (int)n : -1; /* 0: is it there, as kill(2) asks */
    if (!strncasecmp(text, "SIG", 3))
        text += 3;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(text, names[i].name))
            return names[i].sig;
    return -1;
}

void oci_signal_all(const struct oci_state *st, int sig)
{
    _cleanup_free_ pid_t *pids = NULL;
    size_t n = oci_state_pids(st, &pids);
    for (size_t i = 0; i < n; i++)
        kill(pids[i], sig);
}

int oci_hooks_run(const json_t *config, const char *kind, const struct oci_state *st,
                  struct cordon_err *err)
{
    const json_t *hooks = json_object_get(json_object_get(config, "hooks"), kind);
    size_t i;
    json_t *h;
    json_array_foreach(hooks, i, h)
    {
        const char *path = json_string_value(json_object_get(h, "path"));
        if (!path)
            return err_set(err, CORDON_E_USAGE, "hooks.%s[%zu]: no path", kind, i);
        json_auto_t *state = oci_state_json(st);
        _cleanup_free_ char *text = json_dumps(state, JSON_COMPACT);
        int in[2];
        if (!text || pipe2(in, O_CLOEXEC) < 0)
            return err_sys(err, CORDON_E_SETUP, "hooks.%s: cannot start '%s'", kind, path);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(in[0], 0);
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0)
                dup2(null, 1);
            size_t n = json_array_size(json_object_get(h, "args"));
            char **argv = calloc(n + 2, sizeof *argv), **envp;
            size_t m = json_array_size(json_object_get(h, "env"));
            envp = calloc(m + 1, sizeof *envp);
            for (size_t k = 0; argv && k < n; k++)
                argv[k] = (char *)json_string_value(json_array_get(json_object_get(h, "args"), k));
            for (size_t k = 0; envp && k < m; k++)
                envp[k] = (char *)json_string_value(json_array_get(json_object_get(h, "env"), k));
            if (argv && !n)
                argv[0] = (char *)path;
            /* No env: the runtime's own, as runc's hooks inherit it. */
            if (argv && envp)
                execve(path, argv, json_object_get(h, "env") ? envp : environ);
            _exit(127);
        }
        close(in[0]);
        if (pid > 0)
            (void)!write(in[1], text, strlen(text));
        close(in[1]);
        int ws = 0;
        if (pid < 0 || waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            return err_set(err, CORDON_E_SETUP, "hooks.%s: '%s' failed (status %d)", kind, path,
                           WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
    }
    return 0;
}

int oci_start(int argc, char **argv)
{
    const char *id = one_id(argc, argv, 1);
    if (!id)
        return 1;
    struct oci_state st;
    struct cordon_err err = { 0 };
    if (oci_state_open(id, &st, &err) < 0)
        return oci_fail(&err);
    if (oci_gvisor_delegated(&st))
        return delegate(&st, argc, argv);
    enum oci_status s = oci_state_status(&st);
    int rc = 0;
    if (s != OCI_CREATED) {
        err_set(&err, CORDON_E_USAGE, "cannot start a container that is %s: %s", oci_status_name(s),
                id);
        rc = -1;
    }
    /* The keeper takes the lock to note "running"; it is not ours to hold meanwhile. */
    json_auto_t *config = NULL;
    if (rc == 0) {
        char path[4200];
        snprintf(path, sizeof path, "%s/config.json", oci_state_str(&st, "bundle"));
        config = json_parse_strict_file(path, 0, NULL);
        closep(&st.lock);
        st.lock = -1;
        rc = oci_keeper_start(&st, &err);
    }
    if (rc == 0 && oci_hooks_run(config, "poststart", &st, &err) < 0)
        oci_log("warning", "%s", err.msg); /* the container runs: a poststart hook only warns */
    oci_state_close(&st);
    return rc < 0 ? oci_fail(&err) : 0;
}

int oci_state_cmd(int argc, char **argv)
{
    const char *id = one_id(argc, argv, 1);
    if (!id)
        return 1;
    struct oci_state st;
    struct cordon_err err = { 0 };
    if (oci_state_open(id, &st, &err) < 0)
        return oci_fail(&err);
    if (oci_gvisor_delegated(&st))
        return delegate(&st, argc, argv);
    json_auto_t *j = oci_state_json(&st);
    oci_state_close(&st);
    _cleanup_free_ char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
    if (!text)
        return err_set(&err, CORDON_E_INTERNAL, "out of memory"), oci_fail(&err);
    printf("%s\n", text);
    return 0;
}

/* The workload: init's first child (init itself forwards only a few signals). */
static pid_t workload(pid_t init)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)init, (int)init);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    long pid = 0;
    return f && fscanf(f, "%ld", &pid) == 1 ? (pid_t)pid : 0;
}

int oci_kill(int argc, char **argv)
{
    static const char *const names[] = { "all", "a", NULL };
    bool set[3] = { false };
    int first = flags_only(argc, argv, names, set);
    if (first < 0)
        return 1;
    if (first >= argc || argc - first > 2) {
        oci_log("error", "kill: usage: kill [--all] ID [SIGNAL]");
        return 1;
    }
    const char *id = argv[first];
    struct cordon_err err = { 0 };
    int sig = first + 1 < argc ? oci_signal_parse(argv[first + 1]) : SIGTERM;
    if (sig < 0)
        return err_set(&err, CORDON_E_USAGE, "unknown signal '%s'", argv[first + 1]),
               oci_fail(&err);
    struct oci_state st;
    if (oci_state_open(id, &st, &err) < 0)
        return oci_fail(&err);
    if (oci_gvisor_delegated(&st))
        return delegate(&st, argc, argv);
    enum oci_status s = oci_state_status(&st);
    pid_t init = oci_state_init(&st);
    int rc = 0;
    if (set[0] || set[1]) {
        oci_signal_all(&st, sig);
    } else if (!init || (s != OCI_CREATED && s != OCI_RUNNING && s != OCI_PAUSED)) {
        rc = err_set(&err, CORDON_E_USAGE, "container not running: %s", id);
    } else {
        pid_t w = sig == SIGKILL ? 0 : workload(init);
        if (kill(w ? w : init, sig) < 0 && errno != ESRCH)
            rc = err_sys(&err, CORDON_E_SETUP, "cannot signal container %s", id);
        if (sig == SIGKILL && s == OCI_PAUSED)
            oci_freeze(&st, false, &err); /* a frozen task dies only once thawed */
    }
    oci_state_close(&st);
    return rc < 0 ? oci_fail(&err) : 0;
}

/* Wait (generously) until PID, started at START, is gone. */
static bool wait_gone(pid_t pid, unsigned long long start, int seconds)
{
    for (int i = 0; i < seconds * 100; i++) {
        if (!oci_proc_is(pid, start))
            return true;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return false;
}

int oci_delete(int argc, char **argv)
{
    static const char *const names[] = { "force", "f", NULL };
    bool set[3] = { false };
    int first = flags_only(argc, argv, names, set);
    bool force = set[0] || set[1];
    const char *id = first < 0 ? NULL : one_id(argc, argv, first);
    if (!id)
        return 1;
    struct oci_state st;
    struct cordon_err err = { 0 };
    if (oci_state_open(id, &st, &err) < 0) {
        if (force && strstr(err.msg, "does not exist"))
            return 0; /* idempotent, as runc is with --force */
        return oci_fail(&err);
    }
    if (oci_gvisor_delegated(&st))
        return delegate(&st, argc, argv);
    enum oci_status s = oci_state_status(&st);
    if ((s == OCI_RUNNING || s == OCI_PAUSED) && !force) {
        err_set(&err, CORDON_E_USAGE, "cannot delete container %s that is not stopped: %s", id,
                oci_status_name(s));
        oci_state_close(&st);
        return oci_fail(&err);
    }
    if (s == OCI_PAUSED)
        oci_freeze(&st, false, &err);
    pid_t init = oci_state_init(&st);
    if (init)
        kill(init, SIGKILL);
    oci_signal_all(&st, SIGKILL);
    if (init)
        wait_gone(init, (unsigned long long)oci_state_int(&st, "pid_start"), 10);
    /* The keeper records the run's end and leaves once the init is gone. */
    pid_t keeper = (pid_t)oci_state_int(&st, "keeper");
    unsigned long long kstart = (unsigned long long)oci_state_int(&st, "keeper_start");
    closep(&st.lock); /* it may want the lock for its last note */
    st.lock = -1;
    if (keeper > 0 && kstart && !wait_gone(keeper, kstart, 10) &&
        oci_proc_start_time(keeper) == kstart)
        kill(keeper, SIGKILL);
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", oci_state_str(&st, "bundle") ?: "/nonexistent");
    json_auto_t *config = json_parse_strict_file(path, 0, NULL);
    if (config && oci_hooks_run(config, "poststop", &st, &err) < 0)
        oci_log("warning", "%s", err.msg);
    oci_cgroups_remove(&st);
    oci_state_remove(&st);
    oci_state_close(&st);
    return 0;
}

int oci_ps(int argc, char **argv)
{
    const char *format = "table";
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *o = argv[i] + (argv[i][1] == '-' ? 2 : 1);
        if (!strncmp(o, "format=", 7))
            format = o + 7;
        else if ((!strcmp(o, "format") || !strcmp(o, "f")) && i + 1 < argc)
            format = argv[++i];
        else
            return oci_log("error", "ps: unknown option '%s'", argv[i]), 1;
    }
    const char *id = one_id(argc, argv, i);
    if (!id)
        return 1;
    struct oci_state st;
    struct cordon_err err = { 0 };
    if (oci_state_open(id, &st, &err) < 0)
        return oci_fail(&err);
    if (oci_gvisor_delegated(&st))
        return delegate(&st, argc, argv);
    _cleanup_free_ pid_t *pids = NULL;
    size_t n = oci_state_pids(&st, &pids);
    oci_state_close(&st);
    if (!strcmp(format, "json")) {
        printf("[");
        for (size_t k = 0; k < n; k++)
            printf("%s%d", k ? "," : "", (int)pids[k]);
        printf("]\n");
        return 0;
    }
    printf("PID\n");
    for (size_t k = 0; k < n; k++)
        printf("%d\n", (int)pids[k]);
    return 0;
}

static int pause_resume(int argc, char **argv, bool frozen)
{
    const char *id = one_id(argc, argv, 1);
    if (!id)
        return 1;
    struct oci_state st;
    struct cordon_err err = { 0 };
    if (oci_state_open(id, &st, &err) < 0)
        return oci_fail(&err);
    if (oci_gvisor_delegated(&st))
        return delegate(&st, argc, argv);
    enum oci_status s = oci_state_status(&st);
    int rc = 0;
    if (s != (frozen ? OCI_RUNNING : OCI_PAUSED) && !(frozen && s == OCI_CREATED))
        rc = err_set(&err, CORDON_E_USAGE, "container %s is %s, not %s", id, oci_status_name(s),
                     frozen ? "running" : "paused");
    if (rc == 0)
        rc = oci_freeze(&st, frozen, &err);
    oci_state_close(&st);
    return rc < 0 ? oci_fail(&err) : 0;
}

int oci_pause(int argc, char **argv)
{
    return pause_resume(argc, argv, true);
}

int oci_resume(int argc, char **argv)
{
    return pause_resume(argc, argv, false);
}

int oci_update(int argc, char **argv)
{
    (void)argc;
    struct cordon_err err;
    err_set(&err, CORDON_E_UNSUPPORTED,
            "%s: a container's limits are fixed at create (its "
            "policy's); update is not supported",
            argv[0]);
    return oci_fail(&err);
}

int oci_features(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    /* clang-format off */
    json_auto_t *f = json_pack(
        "{s:s, s:s, s:[s,s,s,s], s:[s,s,s,s,s,s,s,s,s,s,s,s,s,s,s,s], "
        "s:{s:[s,s,s,s,s,s,s], s:[], s:{s:b, s:b, s:b}, "
        "s:{s:b, s:[s,s,s,s,s,s,s], s:[s,s,s,s,s,s,s], s:[s]}, s:{s:b}, s:{s:b}}, "
        "s:{s:s, s:s}}",
        "ociVersionMin", "1.0.0", "ociVersionMax", "1.0.2",
        "hooks", "prestart", "createRuntime", "poststart", "poststop",
        "mountOptions", "ro", "rw", "bind", "rbind", "nosuid", "nodev", "noexec", "private",
        "rprivate", "slave", "rslave", "strictatime", "relatime", "noatime", "nodiratime",
        "newinstance",
        "linux", "namespaces", "pid", "network", "ipc", "uts", "mount", "user", "cgroup",
        "capabilities",
        "cgroup", "v1", true, "v2", true, "systemd", false,
        "seccomp", "enabled", true, "actions", "SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO",
        "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG",
        "SCMP_ACT_TRAP", "operators", "SCMP_CMP_NE", "SCMP_CMP_LT", "SCMP_CMP_LE",
        "SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_MASKED_EQ", "archs",
        "SCMP_ARCH_X86_64",
        "apparmor", "enabled", false, "selinux", "enabled", false,
        "annotations", "run.cordon.policy", "a policy file name under the admin's oci/ "
        "directory", "run.cordon.level", "process, namespace, gvisor or microvm: stronger only");
    /* clang-format on */
    _cleanup_free_ char *text = f ? json_dumps(f, JSON_INDENT(2)) : NULL;
    if (!text)
        return 1;
    printf("%s\n", text);
    return 0;
}

/* The terminal's master to our stdio and back until the workload is gone (run's foreground). */
static void relay_terminal(int master, pid_t init)
{
    _cleanup_close_ int pidfd = sys_pidfd_open(init, 0);
    bool in_open = true;
    char buf[4096];
    for (;;) {
        struct pollfd p[3] = { { .fd = master, .events = POLLIN },
                               { .fd = in_open ? 0 : -1, .events = POLLIN },
                               { .fd = pidfd, .events = POLLIN } };
        if (poll(p, 3, -1) < 0 && errno != EINTR)
            return;
        if (p[0].revents) {
            ssize_t n = read(master, buf, sizeof buf);
            if (n <= 0)
                return; /* EIO: the last of the terminal's users is gone */
            (void)!write(1, buf, (size_t)n);
        }
        if (p[1].revents) {
            ssize_t n = read(0, buf, sizeof buf);
            if (n <= 0)
                in_open = false;
            else
                (void)!write(master, buf, (size_t)n);
        }
        if (p[2].revents && !(p[0].revents & POLLIN))
            return;
    }
}

/* A console socket of our own, for a foreground run with a terminal: its listener. */
static int own_console(char *path, size_t size)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(path, size, "/tmp/cordon-oci-console-%d.sock", (int)getpid());
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    unlink(path);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l >= 0 &&
        (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || chmod(path, 0600) < 0 ||
         listen(l, 1) < 0)) {
        close(l);
        unlink(path);
        return -1;
    }
    return l;
}

int oci_run(int argc, char **argv)
{
    /* create then start; in the foreground (without --detach) the caller waits, with a
     * terminal on our own stdio where the spec asks for one and no socket was given. */
    bool detach = false, console = false;
    for (int i = 1; i < argc - 1; i++) {
        detach |=
            !strcmp(argv[i], "--detach") || !strcmp(argv[i], "-d") || !strcmp(argv[i], "-detach");
        console |=
            !strncmp(argv[i], "--console-socket", 16) || !strncmp(argv[i], "-console-socket", 15);
    }
    char path[100];
    int l = !detach && !console ? own_console(path, sizeof path) : -1;
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!args)
        return 1;
    int n = 0;
    for (int i = 0; i < argc - 1; i++)
        args[n++] = argv[i];
    if (l >= 0) {
        args[n++] = "--console-socket";
        args[n++] = path;
    }
    args[n++] = argv[argc - 1];
    int rc = oci_create(n, args);
    free(args);
    int master = -1;
    struct pollfd ready = { .fd = l, .events = POLLIN };
    if (rc == 0 && l >= 0 && poll(&ready, 1, 0) == 1) {
        _cleanup_close_ int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        char name[256];
        int fd = -1;
        if (c >= 0 && recv_fds(c, name, 1, &fd, 1) == 0)
            master = fd;
    }
    if (l >= 0) {
        close(l);
        unlink(path);
    }
    if (rc != 0)
        return rc;
    const char *id = argv[argc - 1];
    char *start[] = { "start", (char *)id, NULL };
    optind = 0;
    rc = oci_start(2, start);
    if (rc != 0 || detach) {
        closep(&master);
        return rc;
    }
    struct oci_state st;
    struct cordon_err err;
    if (oci_state_open(id, &st, &err) < 0)
        return oci_fail(&err);
    pid_t init = (pid_t)oci_state_int(&st, "pid");
    oci_state_close(&st);
    if (master >= 0) {
        relay_terminal(master, init);
        close(master);
    }
    int ws = 0;
    if (waitpid(init, &ws, 0) < 0)
        return 1;
    char *del[] = { "delete", "--force", (char *)id, NULL };
    oci_delete(3, del);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

int oci_list(int argc, char **argv)
{
    bool quiet = false, json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet"))
            quiet = true;
        else if (!strcmp(argv[i], "--format=json") ||
                 ((!strcmp(argv[i], "--format") || !strcmp(argv[i], "-f")) && i + 1 < argc &&
                  !strcmp(argv[++i], "json")))
            json = true;
    }
    DIR *d = opendir(oci_opts.root);
    json_auto_t *all = json_array();
    if (!quiet && !json)
        printf("%-24s %-8s %-10s %-40s %-32s %s\n", "ID", "PID", "STATUS", "BUNDLE", "CREATED",
               "OWNER");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        struct oci_state st;
        struct cordon_err err;
        if (e->d_name[0] == '.' || oci_state_open(e->d_name, &st, &err) < 0)
            continue;
        json_t *j = oci_state_json(&st);
        if (quiet)
            printf("%s\n", st.id);
        else if (!json)
            printf("%-24s %-8lld %-10s %-40s %-32s %s\n", st.id,
                   json_integer_value(json_object_get(j, "pid")),
                   json_string_value(json_object_get(j, "status")),
                   json_string_value(json_object_get(j, "bundle")) ?: "",
                   json_string_value(json_object_get(j, "created")) ?: "", geteuid() ? "" : "root");
        json_array_append_new(all, j);
        oci_state_close(&st);
    }
    if (d)
        closedir(d);
    if (json) {
        _cleanup_free_ char *text = json_dumps(all, JSON_COMPACT);
        printf("%s\n", text ? text : "[]");
    }
    return 0;
}
