/*
 * daemon/live.h: processes over the daemon's API. A box is a sandbox the
 * daemon keeps with cordon-live-agent as its command (daemon/live_agent.c,
 * the frames in live_wire.h): one process.start's alone, or a live
 * session's for as long as the session lives. A process (struct lproc) is
 * one the agent started in a box, named to clients by an id of its own and
 * seen only by the uid that started it (and an --admin-uid).
 *
 * box.c: the sandbox and its agent (spawn, frames, the end, the freezer,
 * the agent's namespaces); process.c: the processes, their consumers and
 * the process.* methods; live_session.c: live sessions, pause and resume;
 * expose.c: a session's ports on the host. All on the daemon's loop.
 */
#pragma once
#include "daemon/daemon_int.h"
#include "daemon/live_wire.h"

#include <sys/types.h>

struct box;
struct lproc;

/* A consumer's queue above this holds the process's output back (no credit). */
#define LIVE_BACKLOG (256u * 1024)
/* Output kept per process and stream for a consumer that attaches later. */
#define LIVE_REPLAY (32u * 1024)

/* ---- boxes (box.c) ---- */

struct box_spec {
    const struct policy *base; /* borrowed until the box ends: the session's or the daemon's */
    uid_t owner;
    const char *session_id; /* for the audit record, or NULL */
    bool live;              /* kept until closed: no wall clock of its own (every
                                     box's output limit is counted per process) */
};

/* What to start in a box. */
struct box_cmd {
    char *const *argv;   /* with shell: argv[0] is the text sh runs */
    char *const *envp;   /* NAME=VALUE over the box's environment, or NULL */
    const char *cwd;     /* relative to the workspace; "" or NULL: the box's own */
    uint16_t cols, rows; /* a terminal of this size; 0: pipes */
    bool shell;
};

/* The boxes' agent, written to the state directory at the first box (0555). */
int box_install_agent(struct daemon *d, struct cordon_err *err);
/* Removed (a killed daemon's too, at start). */
void box_remove_agent(struct daemon *d);

/* A box under SPEC, its sandbox starting now. NULL with ERR. */
struct box *box_new(struct daemon *d, const struct box_spec *spec, struct cordon_err *err);

/* Start CMD as LP in B (LP's wire number is set); -1 with ERR when B cannot take it. */
int box_spawn(struct box *b, struct lproc *lp, const struct box_cmd *cmd, struct cordon_err *err);

void box_stdin(struct box *b, uint32_t wire, const char *data, size_t len);
void box_eof(struct box *b, uint32_t wire);
void box_signal(struct box *b, uint32_t wire, int sig);
/* Has B's agent left so much unread that a client's control frame must wait? */
bool box_backlogged(const struct box *b);
void box_resize(struct box *b, uint32_t wire, uint16_t cols, uint16_t rows);
void box_credit(struct box *b, uint32_t wire, uint32_t n);

/* Let B go: its agent kills what it started, the run ends, B is freed after. */
void box_close(struct box *b);

/* Let every box go (LIVE_ONLY: the live sessions'; otherwise killed at once). */
void box_stop_all(struct daemon *d, bool live_only);

/* The daemon is ending: every box's run killed and reaped now, nobody told. */
void box_kill_all(struct daemon *d);

/* The box's run (32 hex digits) and level. */
const char *box_run_id(const struct box *b);
enum cordon_level box_level(const struct box *b);
bool box_alive(const struct box *b);
/* Its agent said hello: the box's namespaces and freezer are known. */
bool box_ready(const struct box *b);

/*
 * Freeze or thaw every process of a live box (its cgroup's freezer). -1
 * with ERR when the box has none (no cgroup this daemon may freeze).
 */
int box_freeze(struct box *b, bool frozen, struct cordon_err *err);

/* The agent's network and user namespaces (borrowed), or -1: a level without them. */
int box_netns(const struct box *b, int *userns);

/* ---- processes (process.c) ---- */

enum lproc_state { LPROC_STARTING, LPROC_RUNNING, LPROC_EXITED };

/* One consumer of a process's output and end at a time. */
struct lproc_sink {
    void (*output)(void *ctx, struct lproc *p, int stream, const char *data, size_t len);
    void (*ended)(void *ctx, struct lproc *p);
    size_t (*backlog)(void *ctx); /* bytes queued for the consumer now */
    void *ctx;
};

struct lproc_ring {
    char data[LIVE_REPLAY];
    size_t start, len;
    uint64_t dropped; /* bytes that fell out of it */
};

struct lproc {
    struct lproc *next; /* in the daemon's list */
    struct daemon *d;
    char id[33];
    int32_t num; /* a small number, unique in the daemon (sandboxd's) */
    uid_t owner;
    struct session *ses; /* a live session's process, or NULL */
    char session_id[33];
    char run_id[33];
    struct box *box; /* NULL once its box is gone */
    bool own_box;    /* the box is this process's alone */
    uint32_t wire;
    enum lproc_state state;
    bool pty;
    char *argv0; /* for listings */
    /* the end */
    int wstatus; /* valid with has_status */
    bool has_status;
    const char *reason; /* "exited", "killed", "timeout", "output_limit",
                                     "start_failed", "lost" */
    char error[256];
    uint64_t started_us, ended_us;
    /* output */
    uint64_t out_bytes, limit; /* limit: 0 = none */
    uint32_t window;           /* bytes the agent may still send */
    uint32_t owed;             /* credit held back from a congested consumer */
    struct lproc_ring ring[2]; /* stdout (or the terminal), stderr */
    /* stdin */
    uint32_t stdin_inflight;
    bool stdin_gone, eof_sent;
    struct lproc_sink sink;
    struct lproc_waiter *waiters;
    struct event *timeout_ev;
};

/* Events from the box's agent. */
void lproc_started(struct lproc *p);
void lproc_failed(struct lproc *p, const char *why);
void lproc_output(struct lproc *p, int stream, const char *data, size_t len);
void lproc_exited(struct lproc *p, int wstatus);
void lproc_stdin_ack(struct lproc *p, uint32_t n);
void lproc_stdin_gone(struct lproc *p);
/* Its box ended before it did: REASON from the run's result (or "lost"); DETAIL what the
 * sandbox said last on stderr (may be ""). */
void lproc_lost(struct lproc *p, const char *reason, const char *detail);

/* The box of a live session ended (B is about to be freed). */
void live_box_ended(struct daemon *d, struct box *b);

/* What a process start asks, parsed (process.c); argv and envp owned. */
struct lproc_req {
    char **argv;
    char **envp;
    char cwd[4096]; /* relative to the workspace; "" for the box's */
    uint16_t cols, rows;
    bool shell;
    uint64_t timeout_ms; /* 0: none of its own */
};

void lproc_req_release(struct lproc_req *r);

/*
 * Start R's process for OWNER: in SES's live box, or in a box of its own
 * on SES's workspace (or the daemon's, SES NULL). The sink (may be NULL)
 * gets its output. NULL with ERR (kind USAGE: the caller's mistake).
 */
struct lproc *lproc_start(struct daemon *d, uid_t owner, struct session *ses,
                          const struct lproc_req *r, const struct lproc_sink *sink,
                          struct cordon_err *err);

/* The process named ID (or NUM when ID is NULL) that C's uid may see, or NULL. */
struct lproc *lproc_find(struct daemon *d, uid_t uid, bool admin, const char *id, int32_t num);

/* Write to its stdin; -1 with ERR (exited, stdin closed, or the window full: kind BUSY). */
int lproc_write(struct lproc *p, const char *data, size_t len, bool eof, struct cordon_err *err);
int lproc_signal(struct lproc *p, int sig, uid_t by, struct cordon_err *err);
int lproc_resize(struct lproc *p, uint16_t cols, uint16_t rows, struct cordon_err *err);

/* Give P's output and end to SINK (NULL: nobody's; the replay ring keeps the last). */
void lproc_attach(struct lproc *p, const struct lproc_sink *sink);
/* Every process whose consumer is CTX loses it (the consumer is gone). */
void lproc_detach_all(struct daemon *d, void *ctx);
/* A consumer CTX drained: the credit held back for it goes to the agents. */
void lproc_drained(struct daemon *d, void *ctx);

/* Exit code, signal and reason of an ended process as JSON fields into OBJ. */
void lproc_end_json(const struct lproc *p, json_t *obj);

/* Free every record; the boxes are let go. */
void lproc_free_all(struct daemon *d);

/* process.METHOD (METHOD past the "process." prefix). */
void process_method(struct client *c, const char *method, const json_t *id, const json_t *params);

/* Parse a start's parameters ("argv" or "code"+"language", "env", "cwd", "pty", "timeout"). */
int lproc_parse(const json_t *params, struct lproc_req *r, char *why, size_t len);

/* "cwd": inside /workspace, as a path relative to it ("." for itself) in OUT; -1 with WHY. */
int lproc_parse_cwd(const char *cwd, char *out, size_t size, char *why, size_t len);

/* TEXT_KEY's string or B64_KEY's base64 ("stdin"/"stdin_base64", ...) into *OUT (malloc'd). */
int lproc_parse_bytes(const json_t *params, const char *text_key, const char *b64_key, char **out,
                      size_t *out_len, char *why, size_t len);

/* Does a process of SES's live sandbox still run (or start)? Then the session is not idle. */
bool lproc_session_active(const struct daemon *d, const struct session *ses);

/* An audit event of the daemon's own (session.pause, process.signal...) in POL's log. */
void live_audit(const struct policy *pol, const char *type, const char *run_id, json_t *fields);

/* ---- live sessions (live_session.c) ---- */

/* SES becomes live: its box starts now. -1 with ERR. */
int live_session_start(struct daemon *d, struct session *ses, struct cordon_err *err);

/* SES is being destroyed: its box, ports and processes let go. */
void live_session_gone(struct daemon *d, struct session *ses);

/* C is gone: its execs in live sessions are stopped. */
void live_client_gone(struct daemon *d, struct client *c);

/* session.exec in a live session: one process there, answered as a run is. */
void live_exec(struct client *c, const json_t *id, const json_t *params, struct session *ses);

/* session.pause, session.resume, session.expose, session.unexpose. */
void live_session_method(struct client *c, const char *method, const json_t *id,
                         const json_t *params, struct session *ses);
