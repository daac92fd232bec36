/*
 * daemon/daemon_int.h: what the daemon's rooms share: daemon.c (the socket,
 * connections, runs and the other methods) and sessions.c (sessions).
 */
#pragma once
#include "daemon/daemon.h"

#include "common/jsonrpc.h"
#include "core/jobs.h"

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Application error codes, beside JSON-RPC's. */
#define RPC_BUSY (-32002) /* the queue or the connection's share is full: retry */
#define RPC_SHUTTING_DOWN (-32003)
#define RPC_FORBIDDEN (-32004)     /* the peer's uid is not allowed */
#define RPC_NOT_COMMITTED (-32005) /* session.commit could not apply the change */
#define RPC_RUN_REFUSED RPC_REFUSED

struct daemon;

struct session {
    struct session *next;
    char id[33];
    int dir_fd; /* the workspace, O_PATH */
    char *dir;
    uid_t owner;          /* who created it (SO_PEERCRED): only it, and an
                                     --admin-uid, may see or use it */
    struct policy pol;    /* the daemon's with this workspace and the session's options
                                     (policy_derive: shallow, never freed; its own digests) */
    int pending;          /* workspace.commit manual: the last exec's layer, kept
                                     until session.commit / session.discard; or -1 */
    char pending_run[33]; /* the run that made it */
    unsigned running;
    const char *busy; /* what a worker does with it now ("committing", "forking",
                                     ...; daemon/worker.h), or NULL: until it is done, any
                                     other call on the session is answered busy */
    uint64_t created_us, used_us;
    bool live;              /* session.create {live: true}: its processes share one box */
    struct box *box;        /* a live session's sandbox, or NULL (not yet, or gone) */
    bool paused;            /* frozen by session.pause */
    struct expose *exposed; /* ports of it the daemon forwards (daemon/expose.c) */
};

struct session_op;
struct box;
struct expose;
struct sandboxd;

struct call {
    struct call *next; /* in its client's list */
    struct daemon *d;
    struct session *session; /* a session.exec's, or NULL */
    struct client *client;   /* NULL once the client is gone */
    json_t *id;
    struct job *job;
    bool stream;
    uint64_t recv_us;
};

/* What one uid holds of the daemon's tables (each uid that may connect has one). */
struct uid_share {
    uid_t uid;
    unsigned clients;
    struct rpc_budget buffered; /* its unfinished messages; parent: the daemon's */
};

/* Our own uid, root, the --allow-uids and the --admin-uids. */
#define DAEMON_MAX_UIDS (2 * DAEMON_MAX_ALLOW + 2)

struct client {
    struct client *next;
    struct daemon *d;
    struct rpc_stream *s;
    struct uid_share *share; /* its uid's */
    uid_t uid;               /* the peer's (SO_PEERCRED, at accept) */
    bool admin;              /* an --admin-uid: sees and acts on every session */
    struct call *calls;
    unsigned n_calls;
    bool gone;
};

struct daemon {
    struct daemon_config cfg;
    struct event_base *base;
    struct jobs *jobs;
    int listen_fd;
    struct event *listen_ev, *sig_term, *sig_int, *drain_ev, *reap_ev;
    struct client *clients, *dead;
    unsigned n_clients;
    struct uid_share shares[DAEMON_MAX_UIDS];
    size_t n_shares;
    struct rpc_budget buffered; /* every connection's unfinished messages */
    int state_fd;
    struct session *sessions;
    unsigned n_sessions;
    struct session_op *ops; /* sessions' operations in workers now */
    unsigned n_ops;
    struct event *idle_ev;
    bool draining;
    int signals;
    uint64_t flush_deadline_us;
    struct event *flush_ev;
    uint64_t started_us;
    uint64_t connections, refused_peers, refused_connections, requests, bad_requests, busy;
    /* processes over the API (daemon/live.h) */
    char *agent_path; /* cordon-live-agent in the state directory */
    dev_t agent_dev;
    ino_t agent_ino;
    struct box *boxes;
    unsigned n_boxes; /* processes' own and live sessions': at most --max-running */
    struct lproc *lprocs;
    unsigned n_lprocs;
    int32_t next_lproc_num;
    struct sandboxd *sandboxd; /* --sandboxd-grpc / --sandboxd-rest, or NULL */
};

uint64_t daemon_now_us(void);

/* DATA as a JSON string: itself when it is UTF-8, base64 otherwise (*B64 says which). */
json_t *daemon_bytes_json(const char *data, size_t len, bool *b64);

/* Decode base64 TEXT into *OUT (malloc'd); -1 when it is not base64. */
int daemon_base64_decode(const char *text, size_t len, char **out, size_t *out_len);

/* "argv", or "code" and "language", as an argv (*OUT, malloc'd): 0, or -1 with WHY. */
int daemon_parse_command(const json_t *params, char ***out, char *why, size_t len);

/* "env": {NAME: VALUE} as NAME=VALUE entries (*OUT, malloc'd; untouched when ENV is NULL). */
int daemon_parse_env(const json_t *env, char ***out, char *why, size_t len);

/* PARAMS' "timeout" (seconds, above 0, at most a day) into *MS; 0 untouched when absent. */
int daemon_parse_timeout(const json_t *params, uint64_t *ms, char *why, size_t len);

/*
 * A call's options that are no policy key of their own, asked as the keys
 * they stand for: under a signed policy a longer timeout relaxes limits.wall,
 * an env entry the policy does not set relaxes env.set (policy_narrow.c).
 */
int daemon_check_call_options(const struct policy *p, uint64_t wall_ms, char *const *envp,
                              struct cordon_err *err);

/* May UID use the daemon (our own, root, an --allow-uid or an --admin-uid)? */
bool daemon_uid_allowed(const struct daemon *d, uid_t uid);

/* Is UID an --admin-uid? */
bool daemon_is_admin(const struct daemon *d, uid_t uid);

/* Send MSG (taken) to C, unless it is gone. */
void daemon_reply(struct client *c, json_t *msg);

/* run, or with SES session.exec: parse the call and queue it. */
void daemon_method_run(struct client *c, const json_t *id, const json_t *params,
                       struct session *ses);

/* session.METHOD (METHOD past the "session." prefix). */
void sessions_method(struct client *c, const char *method, const json_t *id, const json_t *params);

/* The session SID names that C may see (quietly; NULL if none), its idle clock reset. */
struct session *session_lookup(struct daemon *d, const struct client *c, const char *sid);

/* Destroy SES now, workspace and all. */
void session_free(struct daemon *d, struct session *ses);

/* C is gone: its session operations in flight finish with no one to answer. */
void sessions_client_gone(struct daemon *d, struct client *c);

/* Kill every session operation in flight; their callers hear why. */
void sessions_stop_ops(struct daemon *d);

/* Draining and nothing is left to wait for: the loop ends once the answers are out. */
void daemon_maybe_finish(struct daemon *d);

/* Every second: sessions unused past the idle limit are destroyed. */
void sessions_on_idle_timer(evutil_socket_t fd, short what, void *arg);

/*
 * The state directory, made ours, locked against a second daemon, and
 * emptied of a killed daemon's sessions (each once no supervisor or worker
 * of that daemon holds it any more).
 */
int sessions_open_state_dir(const char *dir, struct cordon_err *err);

/* server.c */
void daemon_call_free(struct call *call);
void daemon_unlink_call(struct call *call);
void daemon_client_drop(struct client *c);

/* calls.c: the jobs module's callbacks */
void daemon_on_job_done(void *ctx, const struct job_end *end);
void daemon_on_job_output(void *ctx, int stream, const char *data, size_t len);

/* methods.c: a connection's stream callbacks (the dispatch of its requests) */
extern const struct rpc_handlers daemon_rpc_handlers;
