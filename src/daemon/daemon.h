/*
 * daemon/daemon.h: `cordon serve`, a JSON-RPC 2.0 daemon on a unix socket
 * (one JSON object per line each way) that runs each call in a fresh
 * sandbox, handed out of a warm pool (core/jobs.h), and sessions: a
 * workspace kept between runs, each its creator's uid's. Methods: run,
 * cancel, policy.check, health, stats, kill_all, session.create/exec/
 * write_file/read_file/list/fork/commit/discard/destroy. Runs in its own
 * process (and a worker process per slow session operation); prints nothing.
 */
#pragma once
#include "common/err.h"
#include "policy/policy.h"

#include <stddef.h>
#include <sys/types.h>

#define DAEMON_MAX_ALLOW 16

/* One uid's share of a daemon-wide LIMIT: half, rounded up. */
static inline size_t daemon_uid_share(size_t limit)
{
    return (limit + 1) / 2;
}

struct daemon_config {
    const struct policy *policy; /* borrowed; every run is under it */
    const char *socket_path;
    unsigned pool; /* sandboxes kept prepared */
    unsigned max_running;
    unsigned max_queued;               /* beyond: "busy" */
    unsigned max_clients;              /* connections at once; beyond: refused */
    size_t max_buffered;               /* bytes of unfinished messages, all connections */
    unsigned max_calls_per_client;     /* in flight per connection; beyond: "busy" */
    size_t max_message;                /* one request line, bytes */
    size_t output_cap;                 /* per stream of a run */
    unsigned grace_ms;                 /* SIGTERM: how long running calls may finish */
    uid_t allow_uid[DAEMON_MAX_ALLOW]; /* besides our own */
    size_t n_allow_uid;
    uid_t admin_uid[DAEMON_MAX_ALLOW]; /* may connect, and see and act on every uid's
                                          sessions; every other peer, our own uid and root
                                          included, sees only the sessions it created */
    size_t n_admin_uid;
    const char *state_dir;    /* sessions' workspaces live here (made 0700, emptied at start) */
    unsigned session_idle_ms; /* a session unused this long is destroyed */
    unsigned max_sessions;
    /* A uid holds at most daemon_uid_share() of max_clients, max_sessions and
     * max_buffered: another uid always finds the rest. */
    const char *sandboxd_grpc; /* HOST:PORT on loopback for sandboxd's gRPC, or NULL */
    const char *sandboxd_rest; /* and for its REST files (daemon/sandboxd.h) */
};

/*
 * Listen on cfg->socket_path (mode 0600; a stale socket nobody answers on is
 * replaced, a live one is an error) and serve until SIGTERM or SIGINT, then
 * drain. 0 after a clean drain; -1 with ERR when it could not start.
 */
int daemon_serve(const struct daemon_config *cfg, struct cordon_err *err);
