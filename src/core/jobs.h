/*
 * core/jobs.h: runs on an event loop, for front ends that serve many calls
 * (cordon mcp serve, the daemon): a queue, at most N running at once, each a
 * run handle whose stdin is fed and whose output is captured (capped) on the
 * loop, stopped with a grace and reaped without blocking. The front end
 * decides what a call is and answers it from the callback.
 *
 * The warm pool: with cfg.pool = N, N handles are kept prepared up to the
 * start seam (boundary built, waiting for argv); a job takes one, uses it
 * once, and a new one is prepared in the background. A policy with secrets
 * is never pooled: its values and placeholders are made per call.
 */
#pragma once
#include "common/err.h"
#include "policy/policy.h"
#include "sandbox/start.h"

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jobs;
struct job;

/* One of a run's output streams as captured: at most the cap, the rest counted. */
struct job_output {
    const char *data;
    size_t len;
    uint64_t total; /* bytes the command wrote */
    bool truncated;
};

/* How a job ended, for its callback; everything is borrowed for the call. */
struct job_end {
    const char *run_id;
    struct job_output out, err;
    json_t *result;                       /* the run's result (the --result form), or NULL when
                                     its supervisor ended without one */
    int wstatus;                          /* the supervisor's wait status */
    const struct cordon_err *start_error; /* not NULL: nothing ran, and this is why */
    int *layer;                           /* an overlay workspace's layer kept for a manual commit
                                     (sandbox/txn.h), or -1 there: the callback takes it by
                                     setting -1, else it is closed */
};

typedef void jobs_done_fn(void *ctx, const struct job_end *end);

/* Output of a job that asked to stream: STREAM 1 or 2, what was captured just now. */
typedef void jobs_output_fn(void *ctx, int stream, const char *data, size_t len);

struct jobs_config {
    struct event_base *base;
    const struct policy *policy; /* borrowed; every job runs under it */
    unsigned max_running;
    unsigned max_queued;    /* jobs waiting beyond this are refused ("busy") */
    size_t output_cap;      /* per stream */
    jobs_done_fn *done;     /* called once for every job that was started */
    jobs_output_fn *output; /* for jobs that stream, or NULL */
    unsigned pool;          /* handles kept prepared (0: every run starts cold) */
};

/* One call; everything is copied at submit. */
struct job_call {
    char *const *argv;
    char *const *envp; /* NAME=VALUE added to the run's environment, or NULL */
    const char *input; /* stdin, INPUT_LEN bytes (may be empty) */
    size_t input_len;
    uint64_t wall_ms;               /* lowers the policy's wall clock; 0: the policy's */
    bool stream;                    /* hand output to cfg.output as it comes */
    const struct policy *policy;    /* borrowed until the job ends; NULL: cfg.policy. Only
                                     cfg.policy's runs come from the pool */
    const char *session_id;         /* for the audit record, or NULL */
    const struct start_file *files; /* placed in /workspace before the command */
    size_t n_files;
};

struct jobs_stats {
    unsigned running, queued;
    unsigned tearing_down; /* answered runs whose supervisors still clean up */
    unsigned pool_target, pool_ready, pool_preparing;
    uint64_t started, pooled, cold, pool_failures, refused;
    uint64_t start_p50_us, start_p99_us; /* submit to the call handed to its sandbox, recent runs */
};

struct jobs *jobs_new(const struct jobs_config *cfg, struct cordon_err *err);

/*
 * Queue ARGV (copied) with INPUT (copied, may be empty) as its stdin; CTX
 * comes back to the callback. NULL with ERR when the queue is full.
 */
struct job *jobs_submit(struct jobs *js, char *const *argv, const char *input, size_t input_len,
                        void *ctx, struct cordon_err *err);

/* jobs_submit() with the whole call. */
struct job *jobs_submit_call(struct jobs *js, const struct job_call *call, void *ctx,
                             struct cordon_err *err);

void jobs_get_stats(const struct jobs *js, struct jobs_stats *out);

/* Did J's run come from the pool (valid once it started)? */
bool job_pooled(const struct job *j);

/*
 * Stop J. A queued job is dropped (and freed; no callback): returns false.
 * A running one gets SIGTERM (its supervisor passes it on and ends the run
 * after a grace), then SIGKILL if it lingers; with NOW, SIGKILL at once. Its
 * callback still comes. Returns true.
 */
bool job_stop(struct job *j, bool now);

/* The run id the job runs (or will run) under. */
const char *job_run_id(const struct job *j);

/* Jobs waiting for a slot. */
unsigned jobs_queued(const struct jobs *js);

/* No job queued or running. */
bool jobs_idle(const struct jobs *js);

/* Stop everything: each queued job is handed to DROPPED (with its ctx) and
 * freed, each running one stopped as job_stop() does. */
void jobs_stop_all(struct jobs *js, bool now, void (*dropped)(void *ctx));

/* Take no more: the pool is let go, each queued job handed to DROPPED (with
 * its ctx) and freed; running ones go on to their end. */
void jobs_drain(struct jobs *js, void (*dropped)(void *ctx));

/* Kill and reap what is left, and free JS. NULL is fine. */
void jobs_free(struct jobs *js);
