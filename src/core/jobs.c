/*
 * core/jobs.c: runs on an event loop (see jobs.h). Runs in the front end's
 * process; each run is a run handle (core/handle.h), a forked supervisor.
 */
#include "core/jobs.h"
#include "common/json.h"

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/fds.h"
#include "common/strv.h"
#include "common/syscalls.h"
#include "core/cgpool.h"
#include "core/handle.h"
#include "core/run.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The run's result JSON; a larger one is not a result. */
#define MAX_RESULT_JSON (256u << 10)
/* A supervisor told to stop gets its 2s grace, and then some, before SIGKILL. */
#define KILL_AFTER_MS 10000
#define REAP_RETRY_MS 5
/* After a pooled preparation fails, the pool waits this long before the next. */
#define POOL_RETRY_MS 1000
/* Start latencies kept for the percentiles. */
#define LATENCY_RING 1024
/*
 * A call's replacement in the pool is prepared once the call is answered
 * (not beside it, on the same cores), or, should the pool have fallen under
 * half, after this long into a call that runs on: a long call (a gVisor
 * one takes tens of ms) does not share its cores with a refill while the
 * pool can still serve the next.
 */
#define REFILL_AFTER_MS 20

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
    struct job *next; /* in js->jobs, oldest first */
    void *ctx;
    char **argv; /* NULL-terminated, owned */
    char **envp; /* likewise, or NULL */
    uint64_t wall_ms;
    const struct policy *policy; /* borrowed; NULL: the jobs' own */
    char session_id[33];
    struct start_file *files; /* paths and data owned */
    size_t n_files;
    bool stream, pooled;
    uint64_t submit_us;
    char *input;
    size_t input_len, input_off;
    bool running, stopped, reaped;
    int wstatus;
    json_t *result; /* the result, once all of it is in */
    char run_id[33];
    struct run_handle h;
    int slot; /* the pool's cgroup its run uses (core/cgpool.h), or -1 */
    struct capture out, err, res;
    int layer; /* passed with the result (a manual commit's), or -1 */
    struct event *in_ev, *reap_ev, *kill_ev;
    struct event *exit_ev; /* the supervisor's pidfd: readable once it has exited */
    int pidfd;
};

/* A handle that answered and now tears its run down; reaped when it exits. */
struct teardown {
    struct teardown *next;
    struct jobs *js;
    pid_t pid;
    int slot; /* its run's pooled cgroup, returned once it is reaped */
    int pidfd;
    struct event *ev;
};

/* A handle prepared ahead of its call. */
struct pooled {
    struct pooled *next;
    struct jobs *js;
    struct run_handle h;
    int slot;         /* the pooled cgroup its run will use, or -1 */
    struct event *ev; /* its answer on ctl_fd, then its death */
    bool ready;
};

struct jobs {
    struct jobs_config cfg;
    struct job *jobs; /* queued and running, oldest first */
    unsigned n_running;
    bool stdin_pending; /* a running job's stdin is still being written */
    bool pumping, stopping;
    bool pool_off;              /* the policy holds secrets: nothing is prepared ahead */
    struct run_template *tmpl;  /* what every pooled run of the policy is cloned from, or NULL */
    struct cgroup_pool *cgpool; /* cgroups the pooled runs use and the pool resets, or NULL */
    struct pooled *pool;
    unsigned n_pool;
    uint64_t pool_retry_us; /* no preparation before this, after a failure */
    struct event *pool_ev;  /* the retry */
    struct orphan {
        pid_t pid;
        int slot;
    } * orphans; /* released handles still to reap */
    size_t n_orphans, cap_orphans;
    struct event *orphan_ev;
    struct teardown *teardowns; /* answered runs still tearing down */
    unsigned n_teardown;
    struct event *refill_ev;
    uint64_t lat[LATENCY_RING];
    uint64_t n_lat;
    uint64_t started, pooled, cold, pool_failures, refused;
};

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- the pool ---- */

static void pool_fill(struct jobs *js);

static void reap_orphans(struct jobs *js, bool block)
{
    size_t kept = 0;
    for (size_t i = 0; i < js->n_orphans; i++) {
        pid_t r;
        while ((r = waitpid(js->orphans[i].pid, NULL, block ? 0 : WNOHANG)) < 0 && errno == EINTR)
            ;
        if (r == 0)
            js->orphans[kept++] = js->orphans[i];
        else
            cgroup_pool_put(js->cgpool, js->orphans[i].slot);
    }
    js->n_orphans = kept;
    if (kept && js->orphan_ev) {
        struct timeval tv = { 0, 20000 };
        evtimer_add(js->orphan_ev, &tv);
    }
}

static void on_orphan_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    reap_orphans(arg, false);
}

/* PID, whose run used the pool's cgroup SLOT (or -1), is ending: reaped by a timer. */
static void orphan_add(struct jobs *js, pid_t pid, int slot)
{
    if (js->n_orphans == js->cap_orphans) {
        size_t cap = js->cap_orphans ? 2 * js->cap_orphans : 16;
        struct orphan *grown = realloc(js->orphans, cap * sizeof *grown);
        if (grown) {
            js->orphans = grown;
            js->cap_orphans = cap;
        }
    }
    if (js->n_orphans < js->cap_orphans) {
        js->orphans[js->n_orphans++] = (struct orphan){ pid, slot };
    } else {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        cgroup_pool_put(js->cgpool, slot);
    }
    reap_orphans(js, false);
}

static void pump(struct jobs *js);

static void teardown_free(struct teardown *t)
{
    struct jobs *js = t->js;
    for (struct teardown **pp = &js->teardowns; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            js->n_teardown--;
            break;
        }
    if (t->ev)
        event_free(t->ev);
    if (t->pidfd >= 0)
        close(t->pidfd);
    free(t);
}

static void on_teardown_done(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct teardown *t = arg;
    struct jobs *js = t->js;
    pid_t r;
    while ((r = waitpid(t->pid, NULL, WNOHANG)) < 0 && errno == EINTR)
        ;
    if (r == 0)
        return; /* not yet: the pidfd stays armed */
    cgroup_pool_put(js->cgpool, t->slot);
    teardown_free(t);
    pump(js);
}

/*
 * The handle PID answered its call and tears its run down now (the
 * boundary's exit, the cgroup, the watchdog): reaped when it exits, and
 * counted meanwhile, so that teardowns are bounded like the runs.
 */
static void teardown_add(struct jobs *js, pid_t pid, int slot)
{
    struct teardown *t = calloc(1, sizeof *t);
    if (t) {
        *t = (struct teardown){
            .js = js, .pid = pid, .slot = slot, .pidfd = sys_pidfd_open(pid, 0)
        };
        if (t->pidfd >= 0)
            t->ev = event_new(js->cfg.base, t->pidfd, EV_READ | EV_PERSIST, on_teardown_done, t);
    }
    if (!t || !t->ev || event_add(t->ev, NULL) < 0) {
        /* No pidfd (an older kernel) or no memory: reaped by the orphans' timer. */
        if (t) {
            if (t->ev)
                event_free(t->ev);
            if (t->pidfd >= 0)
                close(t->pidfd);
            free(t);
        }
        orphan_add(js, pid, slot);
        return;
    }
    t->next = js->teardowns;
    js->teardowns = t;
    js->n_teardown++;
}

/* Let a pooled handle go: without its call it releases its run and exits. */
static void pooled_free(struct jobs *js, struct pooled *ph)
{
    for (struct pooled **pp = &js->pool; *pp; pp = &(*pp)->next)
        if (*pp == ph) {
            *pp = ph->next;
            js->n_pool--;
            break;
        }
    if (ph->ev)
        event_free(ph->ev);
    run_handle_close(&ph->h);
    if (ph->h.pid > 0)
        orphan_add(js, ph->h.pid, ph->slot);
    else
        cgroup_pool_put(js->cgpool, ph->slot);
    free(ph);
}

static void on_pooled(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct pooled *ph = arg;
    struct jobs *js = ph->js;
    char answer = 0;
    ssize_t n;
    while ((n = read(fd, &answer, 1)) < 0 && errno == EINTR)
        ;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n == 1 && answer == RUN_HANDLE_READY && !ph->ready) {
        ph->ready = true;
        return;
    }
    /* It could not prepare, or died waiting: drop it and try again later. */
    if (n != 1 || answer != RUN_HANDLE_READY) {
        js->pool_failures++;
        js->pool_retry_us = now_us() + POOL_RETRY_MS * 1000u;
    }
    pooled_free(js, ph);
    pool_fill(js);
}

static void pool_fill_to(struct jobs *js, unsigned target);

static void on_pool_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    pool_fill(arg);
}

static void on_refill_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct jobs *js = arg;
    pool_fill_to(js, (js->cfg.pool + 1) / 2);
}

static void pool_fill(struct jobs *js)
{
    pool_fill_to(js, js->cfg.pool);
}

/* Prepare handles in the background until the pool holds TARGET. */
static void pool_fill_to(struct jobs *js, unsigned target)
{
    if (js->pool_off || js->stopping)
        return;
    while (js->n_pool < target) {
        uint64_t now = now_us();
        if (now < js->pool_retry_us) {
            uint64_t wait = js->pool_retry_us - now;
            struct timeval tv = { (time_t)(wait / 1000000u), (suseconds_t)(wait % 1000000u) };
            if (js->pool_ev)
                evtimer_add(js->pool_ev, &tv);
            return;
        }
        struct pooled *ph = calloc(1, sizeof *ph);
        struct cordon_err err = { 0 };
        struct run_lent lent = { .tmpl = js->tmpl };
        if (ph)
            lent.cg = cgroup_pool_take(js->cgpool, &ph->slot);
        if (!ph || run_handle_spawn_ahead(js->cfg.policy, &lent, true, &ph->h, &err) < 0) {
            if (ph)
                cgroup_pool_put(js->cgpool, ph->slot);
            free(ph);
            js->pool_failures++;
            js->pool_retry_us = now + POOL_RETRY_MS * 1000u;
            continue;
        }
        ph->js = js;
        fcntl(ph->h.ctl_fd, F_SETFL, fcntl(ph->h.ctl_fd, F_GETFL) | O_NONBLOCK);
        ph->ev = event_new(js->cfg.base, ph->h.ctl_fd, EV_READ | EV_PERSIST, on_pooled, ph);
        ph->next = js->pool;
        js->pool = ph;
        js->n_pool++;
        if (!ph->ev || event_add(ph->ev, NULL) < 0) {
            js->pool_retry_us = now + POOL_RETRY_MS * 1000u;
            pooled_free(js, ph);
        }
    }
}

/* A prepared handle for a call (a ready one first) and its cgroup's SLOT, or false: start cold. */
static bool pool_take(struct jobs *js, struct run_handle *h, int *slot)
{
    struct pooled *pick = NULL;
    for (struct pooled *ph = js->pool; ph; ph = ph->next)
        if (!pick || (ph->ready && !pick->ready))
            pick = ph;
    if (!pick)
        return false;
    *h = pick->h;
    *slot = pick->slot;
    pick->slot = -1;
    pick->h = (struct run_handle){
        .pid = -1, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .result_fd = -1, .ctl_fd = -1
    };
    /* Blocking again: the call is written whole even while it still prepares. */
    fcntl(h->ctl_fd, F_SETFL, fcntl(h->ctl_fd, F_GETFL) & ~O_NONBLOCK);
    pooled_free(js, pick);
    return true;
}

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
    /* Its supervisor is gone (reaped here, or by try_reap): nothing of the run is left. */
    if (j->js)
        cgroup_pool_put(j->js->cgpool, j->slot);
    struct capture *caps[] = { &j->out, &j->err, &j->res };
    for (size_t i = 0; i < 3; i++) {
        capture_close(caps[i]);
        free(caps[i]->data);
    }
    struct event *evs[] = { j->in_ev, j->reap_ev, j->kill_ev, j->exit_ev };
    for (size_t i = 0; i < 4; i++)
        if (evs[i])
            event_free(evs[i]);
    if (j->pidfd >= 0)
        close(j->pidfd);
    if (j->layer >= 0)
        close(j->layer);
    run_handle_close(&j->h);
    strv_free(j->argv);
    strv_free(j->envp);
    for (size_t i = 0; i < j->n_files; i++) {
        free((char *)j->files[i].path);
        free((char *)j->files[i].data);
    }
    free(j->files);
    free(j->input);
    json_decref(j->result);
    free(j);
}

/* Hand J's end to the front end, and forget J. */
static void complete(struct job *j, const struct cordon_err *start_error)
{
    struct jobs *js = j->js;
    json_t *result = TAKE_PTR(j->result);
    struct job_end end = {
        .run_id = j->run_id,
        .out = { j->out.data, j->out.len, j->out.total, j->out.truncated },
        .err = { j->err.data, j->err.len, j->err.total, j->err.truncated },
        .result = json_is_object(result) ? result : NULL,
        .wstatus = j->wstatus,
        .start_error = start_error,
        .layer = &j->layer,
    };
    if (j->running)
        js->n_running--;
    if (j->in_ev)
        js->stdin_pending = false;
    unlink_job(js, j);
    js->cfg.done(j->ctx, &end);
    json_decref(result);
    job_free(j);
    /* Answered: now its replacement, while the cores are not the call's. */
    pool_fill(js);
    pump(js);
}

static void on_reap_timer(evutil_socket_t fd, short what, void *arg);

static void try_reap(struct job *j)
{
    int st = 0;
    pid_t r;
    while ((r = waitpid(j->h.pid, &st, WNOHANG)) < 0 && errno == EINTR)
        ;
    if (r == 0) {
        /* Its pipes are closed, so it is exiting now: its pidfd says when
         * (a timer where there is none: an older kernel). */
        if (!j->exit_ev && (j->pidfd = sys_pidfd_open(j->h.pid, 0)) >= 0) {
            j->exit_ev = event_new(j->js->cfg.base, j->pidfd, EV_READ, on_reap_timer, j);
            if (j->exit_ev && event_add(j->exit_ev, NULL) == 0)
                return;
        } else if (j->exit_ev && event_add(j->exit_ev, NULL) == 0) {
            return;
        }
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

/*
 * All of the run's output and its result are in: the call is answered now,
 * while its supervisor tears the run down; one that ended without a
 * result is reaped first, for its wait status.
 */
static void progress(struct job *j)
{
    if (!j->out.done || !j->err.done || !j->res.done)
        return;
    json_t *result = j->res.data && !j->res.truncated
        ? json_parse_strict(j->res.data, j->res.len, 0, NULL)
        : NULL;
    if (!json_is_object(result)) {
        json_decref(result);
        try_reap(j);
        return;
    }
    j->result = result;
    j->reaped = true;
    teardown_add(j->js, j->h.pid, j->slot);
    j->slot = -1;
    complete(j, NULL);
}

static void on_capture(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct capture *cap = arg;
    char buf[65536];
    for (int i = 0; i < 16; i++) {
        struct job *jb = cap->job;
        /* The result's stream may carry a descriptor (a manual commit's layer). */
        ssize_t n = cap == &jb->res ? read_maybe_fd(fd, buf, sizeof buf, &jb->layer)
                                    : read(fd, buf, sizeof buf);
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
        struct job *j = cap->job;
        if (take && j->stream && j->js->cfg.output && cap != &j->res)
            j->js->cfg.output(j->ctx, cap == &j->out ? 1 : 2, cap->data + cap->len - take, take);
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
    j->pooled = !j->policy && pool_take(js, &j->h, &j->slot);
    if (!j->pooled &&
        run_handle_spawn(j->policy ? j->policy : js->cfg.policy, false, true, &j->h, &err) < 0) {
        j->reaped = true;
        complete(j, &err);
        return;
    }
    struct run_handle_call call = { .argv = j->argv,
                                    .envp = j->envp,
                                    .run_id = j->run_id,
                                    .wall_ms = j->wall_ms,
                                    .session_id = j->session_id[0] ? j->session_id : NULL,
                                    .files = j->files,
                                    .n_files = j->n_files };
    if (run_handle_send(&j->h, &call, &err) < 0) {
        /* Its child ends without a call; the reap below collects it. */
        run_handle_close(&j->h);
        kill(j->h.pid, SIGKILL);
        while (waitpid(j->h.pid, NULL, 0) < 0 && errno == EINTR)
            ;
        j->reaped = true;
        complete(j, &err);
        return;
    }
    js->started++;
    if (j->pooled)
        js->pooled++;
    else
        js->cold++;
    js->lat[js->n_lat++ % LATENCY_RING] = now_us() - j->submit_us;
    if (js->refill_ev && !evtimer_pending(js->refill_ev, NULL)) {
        struct timeval tv = { 0, REFILL_AFTER_MS * 1000 };
        evtimer_add(js->refill_ev, &tv);
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
    /* Runs still tearing down count too: as many as may run, at most. */
    while (!js->stopping && js->n_running < js->cfg.max_running &&
           js->n_teardown < js->cfg.max_running && !js->stdin_pending) {
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
    /* Secret values and placeholders are made per call, never held in advance. */
    js->pool_off = cfg->policy->n_secrets > 0;
    /* The policy's digests once, here: every run's result carries them, and
     * their first computation (OpenSSL's initialisation) would otherwise
     * be each forked handle's own. */
    policy_evidence(cfg->policy);
    /* The pool's runs are clones of one template where the level has them;
     * without one (it could not be built) each is built whole, as before. */
    struct cordon_err terr = { 0 };
    if (!js->pool_off && cfg->pool && run_template_new(cfg->policy, &js->tmpl, &terr) < 0)
        js->tmpl = NULL;
    /* And their cgroups made once, reset after each run (v1; v2 makes each by clone3). */
    if (!js->pool_off && cfg->pool)
        js->cgpool = cgroup_pool_new(cfg->policy, &terr);
    js->pool_ev = evtimer_new(cfg->base, on_pool_timer, js);
    js->orphan_ev = evtimer_new(cfg->base, on_orphan_timer, js);
    js->refill_ev = evtimer_new(cfg->base, on_refill_timer, js);
    if (!js->pool_ev || !js->orphan_ev || !js->refill_ev) {
        jobs_free(js);
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    pool_fill(js);
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

static char **strv_copy(char *const *v, bool *ok)
{
    size_t n = 0;
    while (v[n])
        n++;
    char **copy = calloc(n + 1, sizeof *copy);
    *ok = copy != NULL;
    for (size_t i = 0; *ok && i < n; i++)
        *ok = (copy[i] = strdup(v[i])) != NULL;
    return copy;
}

struct job *jobs_submit(struct jobs *js, char *const *argv, const char *input, size_t input_len,
                        void *ctx, struct cordon_err *err)
{
    struct job_call call = { .argv = argv, .input = input, .input_len = input_len };
    return jobs_submit_call(js, &call, ctx, err);
}

struct job *jobs_submit_call(struct jobs *js, const struct job_call *call, void *ctx,
                             struct cordon_err *err)
{
    const char *input = call->input;
    size_t input_len = call->input_len;
    unsigned queued = jobs_queued(js);
    if (queued >= js->cfg.max_queued) {
        js->refused++;
        err_set(err, CORDON_E_USAGE, "busy: %u calls are already waiting to run; try again later",
                queued);
        return NULL;
    }
    struct job *j = calloc(1, sizeof *j);
    bool ok = j != NULL;
    if (j)
        j->pidfd = j->layer = j->slot = -1;
    if (ok)
        j->argv = strv_copy(call->argv, &ok);
    if (ok && call->envp)
        j->envp = strv_copy(call->envp, &ok);
    if (ok && call->n_files)
        ok = (j->files = calloc(call->n_files, sizeof *j->files)) != NULL;
    for (size_t i = 0; ok && i < call->n_files; i++) {
        char *path = strdup(call->files[i].path), *data = malloc(call->files[i].len + 1);
        j->files[j->n_files++] = (struct start_file){
            .path = path, .data = data, .len = call->files[i].len, .mode = call->files[i].mode
        };
        ok = path && data;
        if (ok)
            memcpy(data, call->files[i].data, call->files[i].len);
    }
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
    j->wall_ms = call->wall_ms;
    j->policy = call->policy;
    if (call->session_id)
        snprintf(j->session_id, sizeof j->session_id, "%s", call->session_id);
    j->stream = call->stream;
    j->submit_us = now_us();
    j->h = (struct run_handle){
        .pid = -1, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .result_fd = -1, .ctl_fd = -1
    };
    j->pidfd = -1;
    audit_new_run_id(j->run_id);
    struct job **tail = &js->jobs;
    while (*tail)
        tail = &(*tail)->next;
    *tail = j;
    pump(js);
    return j;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void jobs_get_stats(const struct jobs *js, struct jobs_stats *out)
{
    *out = (struct jobs_stats){
        .running = js->n_running,
        .queued = jobs_queued(js),
        .pool_target = js->pool_off ? 0 : js->cfg.pool,
        .started = js->started,
        .pooled = js->pooled,
        .cold = js->cold,
        .pool_failures = js->pool_failures,
        .refused = js->refused,
        .tearing_down = js->n_teardown + (unsigned)js->n_orphans,
    };
    for (const struct pooled *ph = js->pool; ph; ph = ph->next) {
        if (ph->ready)
            out->pool_ready++;
        else
            out->pool_preparing++;
    }
    size_t n = js->n_lat < LATENCY_RING ? (size_t)js->n_lat : LATENCY_RING;
    if (!n)
        return;
    uint64_t sorted[LATENCY_RING];
    memcpy(sorted, js->lat, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_u64);
    out->start_p50_us = sorted[(n - 1) / 2];
    out->start_p99_us = sorted[(n - 1) * 99 / 100];
}

bool job_pooled(const struct job *j)
{
    return j->pooled;
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
    while (js->pool)
        pooled_free(js, js->pool);
    for (struct job *j = js->jobs, *next; j; j = next) {
        next = j->next;
        if (!j->running && dropped)
            dropped(j->ctx);
        job_stop(j, now);
    }
}

void jobs_drain(struct jobs *js, void (*dropped)(void *ctx))
{
    js->stopping = true;
    while (js->pool)
        pooled_free(js, js->pool);
    for (struct job *j = js->jobs, *next; j; j = next) {
        next = j->next;
        if (!j->running) {
            if (dropped)
                dropped(j->ctx);
            job_stop(j, false);
        }
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
    while (js->pool)
        pooled_free(js, js->pool);
    /* The answered runs' teardowns are let finish: nothing of them is left. */
    while (js->teardowns) {
        struct teardown *t = js->teardowns;
        while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        teardown_free(t);
    }
    reap_orphans(js, true);
    free(js->orphans);
    cgroup_pool_free(js->cgpool);
    run_template_free(js->tmpl);
    if (js->refill_ev)
        event_free(js->refill_ev);
    if (js->pool_ev)
        event_free(js->pool_ev);
    if (js->orphan_ev)
        event_free(js->orphan_ev);
    free(js);
}
