/*
 * oci/keeper.c: create and start. `create` forks the keeper, a detached
 * supervisor that holds the run (its audit log, watchdog, gateway, cgroup)
 * for the container's whole life; the keeper prepares the run, whose
 * boundary (the container's init) is cloned beside it as a child of
 * `create` itself, so that `create`'s caller (a subreaper shim) reaps the
 * init, whose status is the workload's. `create` writes the pid file and
 * exits; the init waits at the start seam until `start` asks the keeper,
 * over a socket in the state directory, to hand it the command.
 *
 *   shim ─ cordon-oci create (exits) ─┬─ keeper (setsid; run_prepare, run_wait)
 *                                     │    └─ gateway, watchdog
 *                                     └─ init (the pid file's; CLONE_PARENT)
 *                                          └─ the workload
 */
#include "oci/oci.h"

#include "common/json.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/hostpath.h"
#include "common/strv.h"
#include "common/syscalls.h"
#include "core/run.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEEPER_SOCK "keeper.sock"

/*
 * The keeper's socket, named through an O_PATH descriptor of the state directory:
 * an engine's state paths are longer than a socket address may be.
 */
static int sock_path(int dir, struct sockaddr_un *a)
{
    *a = (struct sockaddr_un){ .sun_family = AF_UNIX };
    snprintf(a->sun_path, sizeof a->sun_path, "/proc/self/fd/%d/" KEEPER_SOCK, dir);
    return 0;
}

/* The terminal's master to the engine (the runtime-spec console socket protocol). */
static int send_console(const char *path, int master, struct cordon_err *err)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (snprintf(a.sun_path, sizeof a.sun_path, "%s", path) >= (int)sizeof a.sun_path)
        return err_set(err, CORDON_E_USAGE, "--console-socket '%s' is too long", path);
    _cleanup_close_ int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot connect to console socket '%s'", path);
    unsigned n = 0;
    char name[64] = "/dev/ptmx";
    if (ioctl(master, TIOCGPTN, &n) == 0)
        snprintf(name, sizeof name, "/dev/pts/%u", n);
    if (send_fds(s, name, strlen(name), &master, 1) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot send the terminal to '%s'", path);
    return 0;
}

static void report_error(int report, const struct cordon_err *err)
{
    json_t *j = json_pack("{s:s, s:i}", "error", err->msg, "kind", (int)err->kind);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (text)
        (void)!write(report, text, strlen(text));
    free(text);
    json_decref(j);
}

/* Update the state file under its lock: the keeper's view of the run. */
static void keeper_note(const char *id, const char *status, int exit_status)
{
    struct oci_state st;
    struct cordon_err err;
    if (oci_state_open(id, &st, &err) < 0)
        return;
    json_object_set_new(st.doc, "status", json_string(status));
    if (exit_status >= 0)
        json_object_set_new(st.doc, "exit_status", json_integer(exit_status));
    oci_state_save(&st, &err);
    oci_state_close(&st);
}

/* Serve one start request on L; 1 once the workload runs, 0 to go on waiting. */
static int serve_start(int l, struct run *run, const struct oci_spec *spec, int stdio[3])
{
    _cleanup_close_ int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    char req[16] = "";
    if (c < 0 || read(c, req, sizeof req - 1) <= 0 || strncmp(req, "start", 5) != 0)
        return 0;
    struct sandbox_call call = {
        .argv = spec->argv,
        .envp = spec->env,
        .container_id = spec->c.id,
        .in_fd = stdio[0],
        .out_fd = stdio[1],
        .err_fd = stdio[2],
        .sig_fd = -1,
        .direct_stdio = true,
    };
    struct cordon_err err = { 0 };
    int rc = run_start(run, &call, &err);
    /* The engine's stdio is the command's alone now: its reader sees EOF when it ends. */
    for (int i = 0; i < 3; i++)
        closep(&stdio[i]), stdio[i] = -1;
    if (rc == 0)
        keeper_note(spec->c.id, "running", -1);
    const char *answer = rc == 0 ? "ok" : err.msg;
    (void)!send(c, answer, strlen(answer), MSG_NOSIGNAL);
    return rc == 0 ? 1 : -1;
}

/* Our stdio becomes the container's (kept above 2), ours /dev/null. */
static void take_stdio(bool terminal, int stdio[3])
{
    for (int i = 0; i < 3; i++) {
        stdio[i] = terminal ? open("/dev/null", O_RDWR | O_CLOEXEC) : fcntl(i, F_DUPFD_CLOEXEC, 3);
        if (stdio[i] < 0)
            stdio[i] = open("/dev/null", O_RDWR | O_CLOEXEC);
    }
    int null = open("/dev/null", O_RDWR);
    for (int i = 0; null >= 0 && i < 3; i++)
        dup2(null, i);
    if (null > 2)
        close(null);
}

static int keeper_listen(const struct oci_state *st, struct cordon_err *err)
{
    _cleanup_close_ int dir = open(st->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct sockaddr_un a;
    if (dir < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open '%s'", st->dir);
    sock_path(dir, &a);
    unlinkat(dir, KEEPER_SOCK, 0);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 ||
        fchmodat(dir, KEEPER_SOCK, 0600, 0) < 0 || listen(l, 4) < 0) {
        if (l >= 0)
            close(l);
        return err_sys(err, CORDON_E_SETUP, "cannot listen in '%s'", st->dir);
    }
    return l;
}

_Noreturn void oci_keeper(struct oci_spec *spec, struct oci_state *st, const char *console,
                          int report)
{
    struct cordon_err err = { 0 };
    struct run *run = NULL;
    int stdio[3];
    closep(&st->lock); /* the lock is create's; ours is taken when we write */
    st->lock = -1;
    setsid();
    signal(SIGPIPE, SIG_IGN);
    take_stdio(spec->c.terminal, stdio);
    int l = keeper_listen(st, &err);
    if (l < 0 || run_prepare_container(spec->policy, NULL, &spec->c, &run, &err) < 0) {
        report_error(report, &err);
        _exit(1);
    }
    pid_t init = run_boundary_pid(run);
    int master = run_take_terminal(run);
    if ((master >= 0 && send_console(console, master, &err) < 0) ||
        oci_cgroups_extra(spec, init, st->doc, &err) < 0) {
        report_error(report, &err);
        run_release(run);
        _exit(1);
    }
    closep(&master);
    json_t *ok = json_pack("{s:i, s:s, s:O}", "pid", (int)init, "run_id", run_get_id(run), "extra",
                           json_object_get(st->doc, "cgroup_extra") ?: json_null());
    char *text = ok ? json_dumps(ok, JSON_COMPACT) : NULL;
    if (!text || write(report, text, strlen(text)) != (ssize_t)strlen(text))
        _exit(1);
    free(text);
    json_decref(ok);
    close(report);

    _cleanup_close_ int pidfd = sys_pidfd_open(init, 0);
    int started = 0;
    while (!started) {
        struct pollfd p[2] = { { .fd = l, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
        if (poll(p, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? -1 : 500) < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            started = serve_start(l, run, spec, stdio);
        if (started < 0 || (pidfd >= 0 && p[1].revents) || (pidfd < 0 && kill(init, 0) < 0))
            break;
    }
    close(l);
    char path[4200];
    snprintf(path, sizeof path, "%s/" KEEPER_SOCK, st->dir);
    unlink(path);
    if (started > 0) {
        struct sandbox_result res;
        if (run_wait(run, &res, &err) == 0)
            keeper_note(spec->c.id, "stopped", res.status);
        /* The command never ran: its exit status (125-127) says so, and the log why. */
        if (res.reason == RUN_SETUP_ERROR && res.error.msg[0])
            oci_log("error", "%s", res.error.msg);
    }
    run_release(run);
    _exit(0);
}

int oci_keeper_start(const struct oci_state *st, struct cordon_err *err)
{
    struct sockaddr_un a;
    _cleanup_close_ int dir = open(st->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    sock_path(dir, &a);
    _cleanup_close_ int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (dir < 0 || s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot reach the keeper of container %s", st->id);
    if (send(s, "start", 5, MSG_NOSIGNAL) != 5)
        return err_sys(err, CORDON_E_SETUP, "cannot ask the keeper to start %s", st->id);
    char answer[300] = "";
    ssize_t n = read(s, answer, sizeof answer - 1);
    if (n <= 0)
        return err_set(err, CORDON_E_SETUP, "the keeper of container %s went away", st->id);
    answer[n] = '\0';
    if (strcmp(answer, "ok") != 0)
        return err_set(err, CORDON_E_SETUP, "%s", answer);
    return 0;
}

/* ---- create ---- */

static int write_pid_file(const char *path, pid_t pid, struct cordon_err *err)
{
    char tmp[4200], text[32];
    snprintf(tmp, sizeof tmp, "%s.cordon-%d", path, (int)getpid());
    int n = snprintf(text, sizeof text, "%d", (int)pid);
    _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, (size_t)n) != n || rename(tmp, path) < 0) {
        unlink(tmp);
        return err_sys(err, CORDON_E_SETUP, "cannot write pid file '%s'", path);
    }
    return 0;
}

static void rfc3339_now(char *out, size_t size)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, size, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, size - n, ".%09ldZ", ts.tv_nsec);
}

/* Read the keeper's one report: 0 with *DOC, -1 with ERR. */
static int read_report(int fd, json_t **doc, struct cordon_err *err)
{
    char buf[4096];
    read_small_fd(fd, buf, sizeof buf); /* "" when it cannot be read: no report */
    *doc = json_parse_strict_str(buf, 0, NULL);
    const char *msg = json_string_value(json_object_get(*doc, "error"));
    if (!*doc)
        return err_set(err, CORDON_E_SETUP, "the keeper died before the container was made");
    if (msg)
        return err_set(err, (enum cordon_err_kind)json_integer_value(json_object_get(*doc, "kind")),
                       "%s", msg);
    return 0;
}

struct create_args {
    const char *bundle, *pid_file, *console, *config;
    int preserve_fds;
    const char *id;
};

static int parse_create(int argc, char **argv, struct create_args *a)
{
    enum { O_BUNDLE = 1, O_PID, O_CONSOLE, O_NOPIVOT, O_KEYRING, O_PRESERVE, O_NOTIFY, O_CONFIG };
    static const struct option opts[] = {
        { "bundle", required_argument, NULL, O_BUNDLE },
        { "pid-file", required_argument, NULL, O_PID },
        { "console-socket", required_argument, NULL, O_CONSOLE },
        { "no-pivot", no_argument, NULL, O_NOPIVOT },
        { "no-new-keyring", no_argument, NULL, O_KEYRING },
        { "preserve-fds", required_argument, NULL, O_PRESERVE },
        { "notify-socket", required_argument, NULL, O_NOTIFY },
        { "detach", no_argument, NULL, O_NOPIVOT },
        { "config", required_argument, NULL, O_CONFIG }, /* crun's: config.json elsewhere */
        { 0 },
    };
    *a = (struct create_args){ .bundle = "." };
    int c;
    opterr = 0;
    while ((c = getopt_long_only(argc, argv, "+b:d", opts, NULL)) != -1) {
        switch (c) {
        case 'b':
        case O_BUNDLE:
            a->bundle = optarg;
            break;
        case O_PID:
            a->pid_file = optarg;
            break;
        case O_CONSOLE:
            a->console = optarg;
            break;
        case O_PRESERVE:
            a->preserve_fds = atoi(optarg);
            break;
        case O_CONFIG:
            a->config = optarg;
            break;
        case 'd':
        case O_NOPIVOT: /* cordon always pivots: the stricter */
        case O_KEYRING:
        case O_NOTIFY:
            break;
        default:
            oci_log("error", "%s: unknown option '%s'", argv[0], argv[optind - 1]);
            return -1;
        }
    }
    if (optind != argc - 1) {
        oci_log("error", "%s: expected one container id", argv[0]);
        return -1;
    }
    a->id = argv[optind];
    return 0;
}

/* Record what start, kill, exec and delete will need. */
static void fill_state(struct oci_state *st, const struct oci_spec *spec, const json_t *report)
{
    char now[64];
    rfc3339_now(now, sizeof now);
    pid_t pid = (pid_t)json_integer_value(json_object_get(report, "pid"));
    json_t *d = st->doc;
    json_object_set_new(d, "status", json_string("created"));
    json_object_set_new(d, "pid", json_integer(pid));
    json_object_set_new(d, "pid_start", json_integer((json_int_t)oci_proc_start_time(pid)));
    json_object_set_new(d, "bundle", json_string(spec->bundle));
    if (spec->config_path[0])
        json_object_set_new(d, "config", json_string(spec->config_path));
    json_object_set_new(d, "rootfs", json_string(spec->root));
    json_object_set_new(d, "created", json_string(now));
    json_object_set(d, "run_id", json_object_get(report, "run_id"));
    json_object_set_new(d, "policy", json_string(spec->policy_file));
    json_object_set_new(d, "policy_digest", json_string(policy_evidence(spec->policy)->policy));
    json_object_set_new(d, "level", json_string(cordon_level_name(spec->policy->level)));
    json_object_set_new(d, "gateway",
                        json_boolean(spec->policy->network.mode == POLICY_NET_GATEWAY));
    json_object_set_new(d, "cgroup", json_string(spec->cgroup));
    json_object_set(d, "cgroup_extra", json_object_get(report, "extra"));
    json_t *ann = json_object_get(spec->config, "annotations");
    if (ann)
        json_object_set(d, "annotations", ann);
}

/* After a failure: the container's processes and cgroups gone, as if never made. */
static void undo(struct oci_state *st, pid_t keeper)
{
    oci_signal_all(st, SIGKILL);
    pid_t init = (pid_t)oci_state_int(st, "pid");
    if (init > 0)
        kill(init, SIGKILL);
    if (keeper > 0) {
        kill(keeper, SIGKILL);
        waitpid(keeper, NULL, 0);
    }
    oci_cgroups_remove(st);
}

/* Host ids 0x70000000 and up, 65536 a container, none another container here holds. */
#define ID_RANGES_BASE 0x70000000u
#define ID_RANGES 0x7fffu

static bool id_base_taken(uint32_t base)
{
    DIR *d = opendir(oci_opts.root);
    struct dirent *e;
    bool taken = false;
    while (d && !taken && (e = readdir(d))) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s/state.json", oci_opts.root, e->d_name);
        json_auto_t *doc = e->d_name[0] == '.' ? NULL : json_parse_strict_file(path, 0, NULL);
        taken = doc && (uint32_t)json_integer_value(json_object_get(doc, "id_base")) == base;
    }
    if (d)
        closedir(d);
    return taken;
}

static int pick_id_base(uint32_t *out, struct cordon_err *err)
{
    for (int tries = 0; tries < 64; tries++) {
        uint16_t k;
        if (getrandom(&k, sizeof k, 0) != sizeof k)
            return err_sys(err, CORDON_E_SETUP, "cannot draw a random number");
        *out = ID_RANGES_BASE + ((uint32_t)(k % ID_RANGES) << 16);
        if (!id_base_taken(*out))
            return 0;
    }
    return err_set(err, CORDON_E_SETUP, "no free range of host ids for the container");
}

static int create_in(struct oci_spec *spec, struct oci_state *st, const struct create_args *a,
                     struct cordon_err *err)
{
    TRY(pick_id_base(&spec->c.id_base, err));
    json_object_set_new(st->doc, "id_base", json_integer(spec->c.id_base));
    TRY(oci_state_save(st, err)); /* the range is held from now on */
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create a pipe");
    fflush(NULL);
    pid_t keeper = fork();
    if (keeper < 0) {
        close(pp[0]);
        close(pp[1]);
        return err_sys(err, CORDON_E_SETUP, "cannot fork the keeper");
    }
    if (keeper == 0) {
        close(pp[0]);
        oci_keeper(spec, st, a->console, pp[1]);
    }
    close(pp[1]);
    json_t *report = NULL;
    int rc = read_report(pp[0], &report, err);
    close(pp[0]);
    json_object_set_new(st->doc, "keeper", json_integer(keeper));
    json_object_set_new(st->doc, "keeper_start",
                        json_integer((json_int_t)oci_proc_start_time(keeper)));
    if (rc == 0) {
        fill_state(st, spec, report);
        rc = oci_state_save(st, err);
    }
    if (rc == 0)
        rc = oci_hooks_run(spec->config, "createRuntime", st, err);
    if (rc == 0)
        rc = oci_hooks_run(spec->config, "prestart", st, err);
    if (rc == 0 && a->pid_file)
        rc = write_pid_file(a->pid_file, (pid_t)oci_state_int(st, "pid"), err);
    json_decref(report);
    if (rc < 0)
        undo(st, keeper);
    return rc;
}

int oci_create(int argc, char **argv)
{
    struct create_args a;
    if (parse_create(argc, argv, &a) < 0)
        return 1;
    struct cordon_err err = { 0 };
    if (a.preserve_fds > 0)
        return err_set(&err, CORDON_E_UNSUPPORTED,
                       "--preserve-fds: cordon hands a container "
                       "its stdio only"),
               oci_fail(&err);
    struct oci_spec spec;
    struct oci_state st;
    char config[4096];
    if (a.config && !realpath(a.config, config))
        return err_sys(&err, CORDON_E_USAGE, "--config '%s'", a.config), oci_fail(&err);
    if (oci_spec_load(a.bundle, a.config ? config : NULL, a.id, &spec, &err) < 0) {
        oci_spec_release(&spec);
        return oci_fail(&err);
    }
    if (spec.c.terminal && !a.console) {
        oci_spec_release(&spec);
        return err_set(&err, CORDON_E_USAGE, "process.terminal needs --console-socket"),
               oci_fail(&err);
    }
    if (oci_state_new(a.id, &st, &err) < 0) {
        oci_spec_release(&spec);
        return oci_fail(&err);
    }
    int rc = spec.policy->level == CORDON_LEVEL_GVISOR
        ? oci_gvisor_create(&spec, &st, a.pid_file, a.console, &err)
        : create_in(&spec, &st, &a, &err);
    if (rc < 0)
        oci_state_remove(&st);
    oci_state_close(&st);
    oci_spec_release(&spec);
    return rc < 0 ? oci_fail(&err) : 0;
}
