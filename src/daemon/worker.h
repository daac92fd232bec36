/*
 * daemon/worker.h: one slow operation on a session's workspace (a commit,
 * a discard, a fork's copies, a removal) in a process of its own, so that
 * the daemon's event loop answers every other client meanwhile. A worker
 * is a fork of the daemon: it works on the daemon's memory as it was at
 * the fork, hands back one JSON document, and dies with the daemon.
 */
#pragma once
#include "common/err.h"

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct worker;

/* Descriptors a worker may keep (a fork's 64 copies and its origin fit). */
#define WORKER_MAX_KEEP 72

/* In the worker: the answer (a new reference), or NULL for none. */
typedef json_t *worker_fn(void *arg);

/* On the loop once the worker is gone: its ANSWER (borrowed), or NULL when it
 * ended without one (killed, or its daemon was gone before it began). */
typedef void worker_done_fn(void *ctx, const json_t *answer);

struct worker_spec {
    const char *name; /* the process's name, as ps shows it ("cordon-commit") */
    /*
     * A directory the worker holds read-locked while it works (an OFD record
     * lock, as a run's supervisor does, sandbox/workspace.h; flock() is the
     * commit's own), or -1; with EXCLUSIVE it first waits until no other
     * process holds one. A restarted daemon waits out every such lock before
     * it removes a session, so it never removes one under a worker or run of
     * the daemon it replaces; and a worker that gets the lock after its
     * daemon is gone does nothing.
     */
    int lock_dir;
    bool exclusive;
    const int *keep; /* the descriptors FN uses (at most WORKER_MAX_KEEP); every
                              other one is closed */
    size_t n_keep;
    worker_fn *fn;
    void *arg;
    worker_done_fn *done;
    void *ctx;
};

/* Fork a worker running SPEC; DONE comes once, from BASE's loop. NULL with ERR. */
struct worker *worker_start(struct event_base *base, const struct worker_spec *spec,
                            struct cordon_err *err);

/* Kill W and reap it, with no callback (a daemon that cannot wait). NULL is fine. */
void worker_kill(struct worker *w);

/*
 * Wait until no other open file description holds a record lock on DIR_FD
 * (no run or worker is live on it): 0, or -1 after MAX_MS (0: no limit) or
 * when it cannot be asked.
 */
int worker_wait_sole(int dir_fd, unsigned max_ms);
