/*
 * core/jobs.c: runs on an event loop (see jobs.h). Runs in the front end's
 * process; each run is a run handle (core/handle.h), a forked supervisor.
 */
#include "core/jobs.h"

#include "audit/audit.h"
#include "core/handle.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The run's result JSON; a larger one is not a result. */
#define MAX_RESULT_JSON (256u << 10)
/* A supervisor told to stop gets its 2s grace, and then some, before SIGKILL. */
#define KILL_AFTER_MS 10000
#define REAP_RETRY_MS 5

/* One of the run's output pipes, read on the loop, kept up to LIMIT bytes. */
struct capture {
    struct job *job;
    struct event *ev;
    char *data;
    size_t len, limit;
    uint64_t total;
    bool truncated, done;
};

struct job {
    struct jobs *js;
    struct job *next;              /* in js->jobs, oldest first */
    void *ctx;
    char **argv;                   /* NULL-terminated, owned */
    char *input;
    size_t input_len, input_off;
    bool running, stopped, reaped;
    int wstatus;
    char run_id[33];
    struct run_handle h;
    struct capture out, err, res;
    struct event *in_ev, *reap_ev, *kill_ev;
};

struct jobs {
    struct jobs_config cfg;
    struct job *jobs;              /* queued and running, oldest first */
    unsigned n_running;
    bool stdin_pending;            /* a running job's stdin is still being written */
    bool pumping, stopping;
};

static void pump(struct jobs *js);

static void capture_close(struct capture *cap)
{
    if (cap->ev)
        event_free(cap->ev);
    cap->ev = NULL;
    cap->done = true;
}

static void unlink_job(struct jobs *js, struct job *j)
{
    for (struct job **pp = &js->jobs; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    j->next = NULL;
}

static void job_free(struct job *j)
{
    if (!j)
        return;
    if (j->h.pid > 0 && !j->reaped) {
        /* Only at a teardown that could not wait: never leave a run behind. */
        kill(j->h.pid, SIGKILL);
        while (waitpid(j->h.pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    struct capture *caps[] = { &j->out, &j->err, &j->res };
    for (size_t i = 0; i < 3; i++) {
        capture_close(caps[i]);
        free(caps[i]->data);
    }
    struct event *evs[] = { j->in_ev, j->reap_ev, j->kill_ev };
    for (size_t i = 0; i < 3; i++)
        if (evs[i])
            event_free(evs[i]);
    run_handle_close(&j->h);
    for (char **a = j->argv; a && *a; a++)
        free(*a);
    free(j->argv);
    free(j->input);
    free(j);
}

/* Hand J's end to the front end, and forget J. */
static void complete(struct job *j, const struct cordon_err *start_error)
{
    struct jobs *js = j->js;
    json_t *result = j->res.data && !j->res.truncated
                         ? json_loadb(j->res.data, j->res.len, 0, NULL)
                         : NULL;
    struct job_end end = {
        .run_id = j->run_id,
        .out = { j->out.data, j->out.len, j->out.total, j->out.truncated },
        .err = { j->err.data, j->err.len, j->err.total, j->err.truncated },
        .result = json_is_object(result) ? result : NULL,
        .wstatus = j->wstatus,
        .start_error = start_error,
    };
    if (j->running)
        js->n_running--;
    if (j->in_ev)
        js->stdin_pending = false;
    unlink_job(js, j);
    js->cfg.done(j->ctx, &end);
    json_decref(result);
    job_free(j);
    pump(js);
}

static void try_reap(struct job *j)
{
    int st = 0;
    pid_t r;
    while ((r = waitpid(j->h.pid, &st, WNOHANG)) < 0 && errno == EINTR)
        ;
    if (r == 0) {
        /* Its pipes are closed, so it is exiting now: look again shortly. */
        struct timeval tv = { 0, REAP_RETRY_MS * 1000 };
        evtimer_add(j->reap_ev, &tv);
        return;
    }
    j->reaped = true;
    j->wstatus = r > 0 ? st : 0;
    complete(j, NULL);
}

static void on_reap_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    try_reap(arg);
}

/* All of the run's output and its result are in: the supervisor is ending. */
static void progress(struct job *j)
{
    if (j->out.done && j->err.done && j->res.done)
        try_reap(j);
}

static void on_capture(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct capture *cap = arg;
    char buf[65536];
    for (int i = 0; i < 16; i++) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            capture_close(cap);
            progress(cap->job);
            return;
        }
        cap->total += (uint64_t)n;
        size_t take = cap->limit - cap->len < (size_t)n ? cap->limit - cap->len : (size_t)n;
        if (take) {
            char *grown = realloc(cap->data, cap->len + take);
            if (!grown) {
                take = 0;
            } else {
                cap->data = grown;
                memcpy(cap->data + cap->len, buf, take);
                cap->len += take;
            }
        }
        /* What does not fit is read and dropped: the command must not block on it. */
        if (take < (size_t)n)
            cap->truncated = true;
    }
}

static int capture_start(struct job *j, struct capture *cap, int fd, size_t limit)
{
    cap->job = j;
    cap->limit = limit;
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
        return -1;
    cap->ev = event_new(j->js->cfg.base, fd, EV_READ | EV_PERSIST, on_capture, cap);
    return cap->ev && event_add(cap->ev, NULL) == 0 ? 0 : -1;
}

static void stdin_done(struct job *j)
{
    if (j->h.stdin_fd >= 0) {
        close(j->h.stdin_fd);
        j->h.stdin_fd = -1;
    }
    if (j->in_ev) {
        event_free(j->in_ev);
        j->in_ev = NULL;
        j->js->stdin_pending = false;
        pump(j->js);
    }
}

/* Write what the pipe takes; true when all of the input is in (or unwanted). */
static bool feed_stdin(struct job *j)
{
    while (j->input_off < j->input_len) {
        ssize_t n = write(j->h.stdin_fd, j->input + j->input_off, j->input_len - j->input_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return false;
        if (n <= 0)
            return true; /* EPIPE: the command is done reading */
        j->input_off += (size_t)n;
    }
    return true;
}

static void on_stdin(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct job *j = arg;
    if (feed_stdin(j))
        stdin_done(j);
}

static void on_kill_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct job *j = arg;
    if (j->running && !j->reaped)
        kill(j->h.pid, SIGKILL);
}

static void start_job(struct jobs *js, struct job *j)
{
    struct cordon_err err = { 0 };
    j->reap_ev = evtimer_new(js->cfg.base, on_reap_timer, j);
    j->kill_ev = evtimer_new(js->cfg.base, on_kill_timer, j);
    if (!j->reap_ev || !j->kill_ev) {
        err_set(&err, CORDON_E_INTERNAL, "out of memory");
        j->reaped = true;
        complete(j, &err);
        return;
    }
    if (run_handle_start(js->cfg.policy, j->argv, j->run_id, true, &j->h, &err) < 0) {
        j->reaped = true;
        complete(j, &err);
        return;
    }
    j->running = true;
    js->n_running++;
    if (capture_start(j, &j->out, j->h.stdout_fd, js->cfg.output_cap) < 0 ||
        capture_start(j, &j->err, j->h.stderr_fd, js->cfg.output_cap) < 0 ||
        capture_start(j, &j->res, j->h.result_fd, MAX_RESULT_JSON) < 0) {
        /* Cannot watch it: stop it, and let the reap find out. */
        capture_close(&j->out);
        capture_close(&j->err);
        capture_close(&j->res);
        job_stop(j, true);
        try_reap(j);
        return;
    }
    if (j->input_len == 0) {
        stdin_done(j);
        return;
    }
    /*
     * Every later run handle is a fork that would inherit this pipe's write
     * end and hold the command's EOF back until its own run ended. A pipe big
     * enough for the whole input is closed at once; otherwise no job starts
     * until this one's stdin is written (pump() waits on stdin_pending).
     */
    if ((size_t)fcntl(j->h.stdin_fd, F_GETPIPE_SZ) < j->input_len)
        fcntl(j->h.stdin_fd, F_SETPIPE_SZ, (int)j->input_len);
    fcntl(j->h.stdin_fd, F_SETFL, fcntl(j->h.stdin_fd, F_GETFL) | O_NONBLOCK);
    if (feed_stdin(j)) {
        stdin_done(j);
        return;
    }
    j->in_ev = event_new(js->cfg.base, j->h.stdin_fd, EV_WRITE | EV_PERSIST, on_stdin, j);
    if (!j->in_ev || event_add(j->in_ev, NULL) < 0) {
        stdin_done(j);
        return;
    }
    js->stdin_pending = true;
}

/* Start queued jobs while there is room. */
static void pump(struct jobs *js)
{
    /* complete() calls back in here; the loop below goes on by itself. */
    if (js->pumping)
        return;
    js->pumping = true;
    while (!js->stopping && js->n_running < js->cfg.max_running && !js->stdin_pending) {
        struct job *j = js->jobs;
        while (j && j->running)
            j = j->next;
        if (!j)
            break;
        start_job(js, j);
    }
    js->pumping = false;
}

struct jobs *jobs_new(const struct jobs_config *cfg, struct cordon_err *err)
{
    struct jobs *js = calloc(1, sizeof *js);
    if (!js) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    js->cfg = *cfg;
    return js;
}

unsigned jobs_queued(const struct jobs *js)
{
    unsigned n = 0;
    for (const struct job *j = js->jobs; j; j = j->next)
        n += !j->running;
    return n;
}

bool jobs_idle(const struct jobs *js)
{
    return !js->jobs;
}

struct job *jobs_submit(struct jobs *js, char *const *argv, const char *input, size_t input_len,
                        void *ctx, struct cordon_err *err)
{
    unsigned queued = jobs_queued(js);
    if (queued >= js->cfg.max_queued) {
        err_set(err, CORDON_E_USAGE, "%u calls are already waiting to run; try again later",
                queued);
        return NULL;
    }
    struct job *j = calloc(1, sizeof *j);
    size_t n = 0;
    while (argv[n])
        n++;
    if (j)
        j->argv = calloc(n + 1, sizeof *j->argv);
    bool ok = j && j->argv;
    for (size_t i = 0; ok && i < n; i++)
        ok = (j->argv[i] = strdup(argv[i])) != NULL;
    if (ok && input_len) {
        ok = (j->input = malloc(input_len)) != NULL;
        if (ok)
            memcpy(j->input, input, input_len);
    }
    if (!ok) {
        job_free(j);
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    j->js = js;
    j->ctx = ctx;
    j->input_len = input_len;
    j->h = (struct run_handle){ .pid = -1, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1,
                                .result_fd = -1 };
    audit_new_run_id(j->run_id);
    struct job **tail = &js->jobs;
    while (*tail)
        tail = &(*tail)->next;
    *tail = j;
    pump(js);
    return j;
}

const char *job_run_id(const struct job *j)
{
    return j->run_id;
}

bool job_stop(struct job *j, bool now)
{
    if (!j->running) {
        unlink_job(j->js, j);
        job_free(j);
        return false;
    }
    if (j->reaped)
        return true;
    if (now) {
        kill(j->h.pid, SIGKILL);
        return true;
    }
    if (j->stopped)
        return true;
    j->stopped = true;
    kill(j->h.pid, SIGTERM);
    struct timeval tv = { KILL_AFTER_MS / 1000, (KILL_AFTER_MS % 1000) * 1000 };
    evtimer_add(j->kill_ev, &tv);
    return true;
}

void jobs_stop_all(struct jobs *js, bool now, void (*dropped)(void *ctx))
{
    js->stopping = true;
    for (struct job *j = js->jobs, *next; j; j = next) {
        next = j->next;
        if (!j->running && dropped)
            dropped(j->ctx);
        job_stop(j, now);
    }
}

void jobs_free(struct jobs *js)
{
    if (!js)
        return;
    while (js->jobs) {
        struct job *j = js->jobs;
        js->jobs = j->next;
        job_free(j);
    }
    free(js);
}
