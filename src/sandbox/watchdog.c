/*
 * sandbox/watchdog.c: the cleanup watchdog. Runs in the supervisor (start,
 * messages) and as its own detached process afterwards.
 */
#include "sandbox/watchdog.h"

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/fds.h"
#include "common/hostpath.h"
#include "common/text.h"
#include "sandbox/cgroup.h"
#include "sandbox/txn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_GUARDED 8
/* A run's tree is removed again while what dies with the run still writes there. */
#define TREE_SETTLE_TRIES 100
#define TREE_SETTLE_STEP_MS 50

struct watchdog {
    struct audit_log *log;
    const char *run_id;
    const struct policy *p;
    pid_t pid;
    int pipe_w;
};

struct watchdog *watchdog_new(struct audit_log *log, const char *run_id, const struct policy *p,
                              struct cordon_err *err)
{
    struct watchdog *wd = calloc(1, sizeof *wd);
    if (!wd) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    *wd = (struct watchdog){ .log = log, .run_id = run_id, .p = p, .pid = -1, .pipe_w = -1 };
    return wd;
}

/*
 * The commit into WS the supervisor was making when it died, finished or
 * undone; what became of it, for run.end ("" when there was none).
 */
static const char *recover_commit(const char *ws, bool follow, const struct policy *p)
{
    if (!ws[0] || !p)
        return "";
    struct cordon_err err;
    int fd = hostpath_open(AT_FDCWD, ws, O_PATH | O_DIRECTORY, 0, follow, &err);
    if (fd < 0)
        return "failed: cannot open the workspace";
    static struct txn_recovery rec;
    static char what[320];
    int rc = txn_recover(fd, p, 30000, &rec);
    close(fd);
    if (rc < 0)
        snprintf(what, sizeof what, "failed: %s", rec.reason);
    else
        snprintf(what, sizeof what, "%s",
                 rec.rolled_forward    ? "finished"
                     : rec.rolled_back ? "undone"
                     : rec.busy        ? "left to another commit"
                                       : "none");
    if (rc == 0 && rec.settled) /* where what someone else's change met was kept */
        snprintf(what + strlen(what), sizeof what - strlen(what), " (%s)", rec.settled_note);
    return what;
}

/*
 * PATH, a run's tree, removed; again while it is still there. Where no
 * cgroup was emptied first (an ordinary caller's gVisor run), runsc's
 * processes die with the run a moment after its supervisor, and may write
 * their state there meanwhile: bounded, TREE_SETTLE_TRIES times.
 */
static void remove_tree_settled(const char *path)
{
    for (int i = 0; i < TREE_SETTLE_TRIES; i++) {
        hostpath_remove_tree(path);
        if (access(path, F_OK) < 0 && errno == ENOENT)
            return;
        nanosleep(&(struct timespec){ .tv_nsec = TREE_SETTLE_STEP_MS * 1000000L }, NULL);
    }
}

/*
 * Read "started RUN SINCE", "cgroup DIR", "tree HEX", "txn FOLLOW HEX"
 * and "done" lines until EOF; then do what is left.
 */
static _Noreturn void watch(struct watchdog *wd, int fd)
{
    static char dirs[MAX_GUARDED][PATH_MAX];
    static char trees[MAX_GUARDED][PATH_MAX];
    static char buf[2 * PATH_MAX + 64];
    static char run_id[33];
    static char txn_ws[PATH_MAX];
    unsigned long long since = 0;
    size_t n_dirs = 0, n_trees = 0, len = 0;
    bool done = false, started = false, txn_follow = false;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = '\0';
            if (strcmp(line, "done") == 0)
                done = true;
            else if (sscanf(line, "started %32s %llu", run_id, &since) == 2 && strlen(run_id) == 32)
                started = true;
            else if (strncmp(line, "cgroup ", 7) == 0 && n_dirs < MAX_GUARDED)
                snprintf(dirs[n_dirs++], PATH_MAX, "%s", line + 7);
            else if (strncmp(line, "tree ", 5) == 0 && n_trees < MAX_GUARDED) {
                if (hex_decode_str(line + 5, trees[n_trees], PATH_MAX))
                    n_trees++;
            } else if (strncmp(line, "txn ", 4) == 0 && (line[4] == '0' || line[4] == '1')) {
                txn_follow = line[4] == '1';
                if (line[5] != ' ' || !hex_decode_str(line + 6, txn_ws, sizeof txn_ws))
                    txn_ws[0] = '\0';
            }
            line = nl + 1;
        }
        len = strlen(line);
        memmove(buf, line, len + 1);
    }
    if (done)
        _exit(0);
    /* The cgroups first: emptying them kills what could still write there. */
    for (size_t i = 0; i < n_dirs; i++)
        cgroup_remove_dir(dirs[i]);
    for (size_t i = 0; i < n_trees; i++)
        remove_tree_settled(trees[i]);
    const char *commit = recover_commit(txn_ws, txn_follow, wd->p);
    if (wd->log && started) {
        /* The sandbox died with its supervisor (PDEATHSIG on its init). */
        json_t *fields = json_pack("{s:s, s:i, s:s}", "reason", "killed", "status", 128 + SIGKILL,
                                   "error", "the supervisor died before the run ended");
        if (fields && commit[0])
            json_object_set_new(fields, "workspace_commit", json_string(commit));
        struct cordon_err err;
        bool written;
        audit_append_once(wd->log, "run.end", run_id, "run.start", fields, since, &written, &err);
        audit_close(wd->log, &err);
    }
    _exit(0);
}

int watchdog_arm(struct watchdog *wd, struct cordon_err *err)
{
    if (wd->pid > 0)
        return 0;
    /* A socket, not a pipe: a watchdog killed first costs the supervisor an
     * EPIPE (MSG_NOSIGNAL), not a SIGPIPE its host program may not ignore. */
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create the watchdog's socket");
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return err_sys(err, CORDON_E_SETUP, "cannot start the cleanup watchdog");
    }
    if (pid == 0) {
        /* Out of the terminal's process group: a ^C meant for cordon must
         * not take its cleanup with it. */
        setsid();
        /* Named, as cordon-init is: ps and tests tell it from the gateway. */
        prctl(PR_SET_NAME, "cordon-watchdog", 0, 0, 0);
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* Hold nobody's pipes open: a caller waiting for EOF on our
         * stdout must not wait for the watchdog. */
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        /* Nor any other run's descriptors: a copy of another watchdog's pipe
         * would keep that watchdog from ever seeing its supervisor leave. */
        int keep[1 + AUDIT_LOG_FDS_MAX] = { fds[0] };
        size_t n = 1 + audit_log_fds(wd->log, keep + 1);
        close_fds_except(keep, n);
        watch(wd, fds[0]);
    }
    close(fds[0]);
    wd->pid = pid;
    wd->pipe_w = fds[1];
    return 0;
}

static int send_line(struct watchdog *wd, const char *line, struct cordon_err *err)
{
    size_t len = strlen(line);
    ssize_t n;
    while ((n = send(wd->pipe_w, line, len, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)len)
        return err_sys(err, CORDON_E_SETUP, "cannot reach the cleanup watchdog");
    return 0;
}

int watchdog_started(struct watchdog *wd, const char *run_id, uint64_t since,
                     struct cordon_err *err)
{
    if (wd->pid <= 0)
        return 0;
    char line[80];
    snprintf(line, sizeof line, "started %.32s %llu\n", run_id, (unsigned long long)since);
    return send_line(wd, line, err);
}

int watchdog_guard_cgroup(struct watchdog *wd, const char *dir, struct cordon_err *err)
{
    TRY(watchdog_arm(wd, err));
    char line[PATH_MAX + 16];
    if (snprintf(line, sizeof line, "cgroup %s\n", dir) >= (int)sizeof line)
        return err_set(err, CORDON_E_SETUP, "cgroup path too long: '%s'", dir);
    return send_line(wd, line, err);
}

int watchdog_guard_dir(struct watchdog *wd, const char *dir, struct cordon_err *err)
{
    TRY(watchdog_arm(wd, err));
    size_t len = strlen(dir);
    if (len >= PATH_MAX)
        return err_set(err, CORDON_E_SETUP, "directory path too long: '%s'", dir);
    char line[2 * PATH_MAX + 8];
    memcpy(line, "tree ", 5);
    hex_encode((const unsigned char *)dir, len, line + 5);
    strcat(line, "\n");
    return send_line(wd, line, err);
}

int watchdog_guard_txn(struct watchdog *wd, const char *workspace, bool follow,
                       struct cordon_err *err)
{
    TRY(watchdog_arm(wd, err));
    size_t len = strlen(workspace);
    if (len >= PATH_MAX)
        return err_set(err, CORDON_E_SETUP, "workspace path too long: '%s'", workspace);
    char line[2 * PATH_MAX + 16];
    snprintf(line, sizeof line, "txn %d ", follow ? 1 : 0);
    hex_encode((const unsigned char *)workspace, len, line + 6);
    strcat(line, "\n");
    return send_line(wd, line, err);
}

void watchdog_release(struct watchdog *wd)
{
    if (!wd)
        return;
    if (wd->pid > 0) {
        struct cordon_err err;
        send_line(wd, "done\n", &err);
        close(wd->pipe_w);
        while (waitpid(wd->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    free(wd);
}
