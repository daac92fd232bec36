/*
 * daemon/worker.c: a slow operation in a forked process (see worker.h). The
 * answer comes back through a pipe read on the loop; the worker is reaped
 * once its pidfd says it has exited (a short timer where there is none).
 */
#include "daemon/worker.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/json.h"
#include "common/syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int worker_wait_sole(int dir_fd, unsigned max_ms)
{
    for (unsigned waited = 0;; waited += 20) {
        int held = sys_ofd_conflict(dir_fd, F_WRLCK);
        if (held <= 0)
            return held;
        if (max_ms && waited >= max_ms)
            return -1;
        nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
    }
}

/* An answer is a summary or a list of ids; beyond this it is not one. */
#define MAX_ANSWER (1u << 20)
#define REAP_RETRY_MS 5

struct worker {
    pid_t pid;
    int out_fd, pidfd;
    struct event *out_ev, *exit_ev;
    char *buf;
    size_t len;
    bool overflow;
    worker_done_fn *done;
    void *ctx;
};

__attribute__((noreturn)) static void child_main(const struct worker_spec *spec, pid_t parent,
                                                 int out_fd)
{
    int keep[WORKER_MAX_KEEP + 2];
    size_t n = 0;
    for (size_t i = 0; i < spec->n_keep; i++)
        keep[n++] = spec->keep[i];
    keep[n++] = out_fd;
    keep[n++] = spec->lock_dir;
    close_fds_except(keep, n);
    /* The daemon's handlers write to its loop, which is not ours. */
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    prctl(PR_SET_NAME, spec->name, 0, 0, 0);
    if (spec->lock_dir >= 0) {
        /* Our own open file description: the lock is this process's alone. */
        int lock = openat(spec->lock_dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lock < 0 || (spec->exclusive && worker_wait_sole(lock, 0) < 0) ||
            sys_ofd_lock(lock, F_RDLCK) < 0)
            _exit(1);
    }
    /* Checked with the lock held: a daemon gone by now has been replaced, or will be. */
    if (getppid() != parent)
        _exit(1);
    json_t *answer = spec->fn(spec->arg);
    char *text = answer ? json_dumps(answer, JSON_COMPACT) : NULL;
    if (text)
        write_all(out_fd, text, strlen(text));
    _exit(text ? 0 : 1);
}

static void finish(struct worker *w)
{
    json_t *answer = !w->overflow && w->len ? json_parse_strict(w->buf, w->len, 0, NULL) : NULL;
    w->done(w->ctx, answer);
    json_decref(answer);
    w->done = NULL;
    worker_kill(w);
}

static void on_exit_ready(evutil_socket_t fd, short what, void *arg);

/* The answer is in; the worker is exiting: reap it, then hand the answer on. */
static void try_reap(struct worker *w)
{
    pid_t r;
    while ((r = waitpid(w->pid, NULL, WNOHANG)) < 0 && errno == EINTR)
        ;
    if (r != 0) {
        w->pid = -1;
        finish(w);
        return;
    }
    struct event_base *base = event_get_base(w->out_ev);
    if (!w->exit_ev && (w->pidfd = sys_pidfd_open(w->pid, 0)) >= 0)
        w->exit_ev = event_new(base, w->pidfd, EV_READ, on_exit_ready, w);
    else if (!w->exit_ev)
        w->exit_ev = evtimer_new(base, on_exit_ready, w);
    struct timeval tv = { 0, REAP_RETRY_MS * 1000 };
    if (!w->exit_ev || event_add(w->exit_ev, w->pidfd >= 0 ? NULL : &tv) < 0) {
        /* Cannot wait for it on the loop: it is exiting, so not for long. */
        while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        w->pid = -1;
        finish(w);
    }
}

static void on_exit_ready(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    try_reap(arg);
}

static void on_output(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct worker *w = arg;
    char chunk[16384];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) < 0 && errno == EINTR)
        ;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n > 0) {
        char *grown = w->len + (size_t)n <= MAX_ANSWER ? realloc(w->buf, w->len + (size_t)n) : NULL;
        if (!grown) {
            w->overflow = true; /* read on and dropped: the worker must not block */
            return;
        }
        memcpy(grown + w->len, chunk, (size_t)n);
        w->buf = grown;
        w->len += (size_t)n;
        return;
    }
    event_del(w->out_ev);
    try_reap(w);
}

struct worker *worker_start(struct event_base *base, const struct worker_spec *spec,
                            struct cordon_err *err)
{
    int out[2];
    if (spec->n_keep > WORKER_MAX_KEEP) {
        err_set(err, CORDON_E_INTERNAL, "a worker keeps at most %d descriptors", WORKER_MAX_KEEP);
        return NULL;
    }
    if (pipe2(out, O_CLOEXEC) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot make a pipe for a worker");
        return NULL;
    }
    struct worker *w = calloc(1, sizeof *w);
    if (!w) {
        close(out[0]);
        close(out[1]);
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    *w = (struct worker){
        .pid = -1, .out_fd = out[0], .pidfd = -1, .done = spec->done, .ctx = spec->ctx
    };
    fcntl(w->out_fd, F_SETFL, fcntl(w->out_fd, F_GETFL) | O_NONBLOCK);
    w->out_ev = event_new(base, w->out_fd, EV_READ | EV_PERSIST, on_output, w);
    if (!w->out_ev || event_add(w->out_ev, NULL) < 0) {
        close(out[1]);
        worker_kill(w);
        err_set(err, CORDON_E_INTERNAL, "cannot watch a worker");
        return NULL;
    }
    /* Until it has put them back to their defaults, the daemon's handlers would take them. */
    pid_t parent = getpid();
    w->pid = fork_stops_blocked();
    if (w->pid == 0)
        child_main(spec, parent, out[1]);
    close(out[1]);
    if (w->pid < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot fork a worker");
        worker_kill(w);
        return NULL;
    }
    return w;
}

void worker_kill(struct worker *w)
{
    if (!w)
        return;
    if (w->pid > 0) {
        kill(w->pid, SIGKILL);
        while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (w->out_ev)
        event_free(w->out_ev);
    if (w->exit_ev)
        event_free(w->exit_ev);
    if (w->pidfd >= 0)
        close(w->pidfd);
    if (w->out_fd >= 0)
        close(w->out_fd);
    free(w->buf);
    free(w);
}
