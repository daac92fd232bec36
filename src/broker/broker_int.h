/*
 * broker/broker_int.h: what the files of `cordon mcp wrap` share: the
 * broker's state and its requests in flight (broker.c: audit, sending,
 * tools/call, the client's side and the end; broker_server.c: what the
 * server says; broker_rules.c: the policy's view of methods and arguments).
 */
#pragma once
#include "audit/audit.h"
#include "common/jsonrpc.h"
#include "broker/pins.h"
#include "common/decider.h"
#include "core/handle.h"
#include "policy/policy.h"

#include <event2/event.h>
#include <jansson.h>

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* The server's working directory, against which it resolves relative paths. */
#define SERVER_CWD "/workspace"
/* After the client leaves: how long the server gets to exit on its stdin's EOF. */
#define SHUTDOWN_GRACE_S 5
/* After the client's end: what may wait for it unread, past which messages are dropped. */
#define CLIENT_BACKLOG_MAX (16u << 20)
/* After the server is gone: how long a client that does not read gets to take what is queued. */
#define FINISH_DRAIN_S 5
/* Protocol violations recorded one by one; past this only counted. */
#define VIOLATIONS_RECORDED 20
/* Refusals of hidden methods recorded one by one; past this only counted. */
#define REFUSALS_RECORDED 100
/*
 * What goes into an audit event from a peer, serialised: the log refuses an
 * event over 1 MiB whole, so a bigger value would make the event vanish.
 */
#define RECORDED_ARGS_MAX (256u << 10)
#define RECORDED_INFO_MAX 4096
/* Requests in flight in each direction: past this a new one is refused. */
#define MAX_IN_FLIGHT 1024
/* How long a gone server's run may take to deliver its result (why it ended). */
#define RESULT_WAIT_MS 3000
/* Pages of tools/list the broker walks itself before giving up. */
#define MAX_LIST_PAGES 100
/* Tools whose schemas are kept, and their size serialised: past either a tool is left out. */
#define MAX_TOOLS 10000
#define SCHEMA_BYTES_MAX (16u << 20)

enum pending_kind {
    PENDING_CLIENT,   /* a client's request, answered back to it */
    PENDING_OWN_LIST, /* the broker's own tools/list walk, for schemas */
};

struct pending {
    struct pending *next;
    struct broker *b;
    enum pending_kind kind;
    long long sid; /* the id the server saw */
    json_t *cid;   /* the client's id */
    char method[64];
    char tool[130]; /* tools/call: the tool */
    char args_digest[65];
    json_t *args; /* tools/call: recorded when the policy says so */
    struct timespec start;
    struct event *timer;
};

struct broker {
    const struct policy *p;
    struct event_base *base;
    struct rpc_stream *client, *server;
    struct run_handle child;
    struct audit_log *log;
    char run_id[33];

    struct pending *pending;
    json_t *schemas;       /* tool name -> inputSchema, from every tools/list seen */
    size_t schema_bytes;   /* their size, serialised */
    bool schemas_complete; /* a full walk since the last list_changed */
    bool listing;          /* the broker's own walk is under way */
    bool warned_unmatched; /* the client was told tools.allow matches none */
    unsigned list_pages;
    json_t *waiting;         /* tools/call requests waiting for the walk */
    json_t *server_requests; /* ids of server-to-client requests in flight (dumped) -> true */
    struct mcp_pins *pins;   /* tools.pins: the pin file, or NULL */
    struct decider *decider; /* decider.socket: asked about tools.ask calls, or NULL */
    bool pins_server_set;
    json_t *hidden; /* tool name -> digest of a listing that does not match its pin */

    uint64_t calls, refused, violations;
    bool client_done;  /* the client closed its side: no more requests */
    bool client_gone;  /* and nothing more can reach it */
    bool client_asked; /* the client sent a request (or something in its place) */
    bool server_gone, child_reaped;
    char end_why[400];  /* why the server ended, told to the client; "" until asked */
    bool stopped_by_us; /* the server outstayed the client and was stopped */
    struct timespec reaped_at;
    int child_status;
    struct event *shutdown_timer, *finish_timer;
    struct event *sigchld, *sigterm, *sigint;
};

/* broker.c */
uint64_t ms_since(const struct timespec *t);
void record(struct broker *b, const char *type, json_t *fields);
size_t recorded_size(const json_t *j);
void record_call(struct broker *b, const char *tool, const char *decision, const char *rule,
                 const char *reason, const char *digest, const json_t *args, uint64_t duration_ms,
                 json_int_t result_bytes, int is_error);
void refused_method(struct broker *b, const char *peer, const char *method);
void violation(struct broker *b, const char *peer, const char *why);
void to_client(struct broker *b, json_t *msg);
void to_server(struct broker *b, json_t *msg);
void pending_free(struct pending *q);
struct pending *pending_take(struct broker *b, long long sid);
void own_list_next(struct broker *b, const json_t *cursor);
void run_waiting(struct broker *b);
void fail_waiting(struct broker *b, const char *why);

/* broker_server.c: the server stream's callbacks */
void on_server_message(void *ctx, struct rpc_stream *s, json_t *msg);
void on_server_garbage(void *ctx, struct rpc_stream *s, const char *line, size_t len,
                       bool oversized, const char *why);

/* broker_rules.c */
bool client_method_allowed(const struct policy *p, const char *method);
bool server_request_allowed(const struct policy *p, const char *method);
bool notification_allowed(const struct policy *p, const char *method, bool from_server);
int check_rules(const struct policy *p, const char *tool, const json_t *args, char *rule,
                size_t rule_len, char *why, size_t len);
