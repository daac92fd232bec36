/*
 * broker/serve_int.h: what the files of `cordon mcp serve` share: the
 * session, its calls and tools (serve.c: the protocol and the calls' life;
 * serve_tools.c: the two tools; serve_text.c: what the model reads).
 */
#pragma once
#include "common/jsonrpc.h"
#include "common/strbuf.h"
#include "core/jobs.h"
#include "policy/policy.h"

#include <event2/event.h>
#include <jansson.h>

#include <stdbool.h>
#include <stdint.h>

#define MAX_RUNNING 4
/* Calls waiting for a slot; a client that floods is refused, not buffered. */
#define MAX_QUEUED 64
#define DEFAULT_WALL_MS 60000
/* A source or a stdin: larger ones are refused, never cut. */
#define MAX_TEXT (1u << 20)
/* One argv string, NUL included, is at most MAX_ARG_STRLEN (32 pages) to execve. */
#define MAX_ARG_BYTES ((128u << 10) - 1)
#define MAX_ARGV_ITEMS 4096
#define MAX_ARGV_TOTAL (1u << 20)
/* How long queued answers may take to reach a slow client at the end. */
#define DRAIN_MS 5000

static const char *const protocol_versions[] = {
    "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", /* newest first */
};

struct server;
struct call;

/* What a tool call's arguments become: the command and its stdin. */
struct tool {
    const char *name;
    const char *title;
    const char *summary;
    int (*build)(const json_t *args, struct call *c, char *why, size_t len);
    json_t *(*input_schema)(void);
};

struct call {
    struct server *srv;
    struct call *next; /* in srv->calls, oldest first */
    json_t *id;        /* the request's id */
    const struct tool *tool;
    json_t *arguments; /* kept only when the audit records them */
    char digest[65];   /* of the arguments */
    char **argv;       /* NULL-terminated, owned */
    char *input;       /* the command's stdin, or NULL */
    size_t input_len;
    bool cancelled;
    uint64_t received_ms;
    char run_id[33];            /* once it is queued to run */
    struct job *job;            /* queued or running; NULL once it ended */
    json_t *elicit_id;          /* our elicitation/create about it, while it waits */
    struct event *elicit_timer; /* its deadline */
};

struct server {
    struct policy pol; /* the caller's, with the per-call wall default */
    struct event_base *base;
    struct rpc_stream *rpc;
    struct audit_log *audit;
    json_t *tools; /* the tools/list answer's array */
    char *instructions;
    struct call *calls;      /* queued and running, oldest first */
    struct jobs *jobs;       /* their runs */
    struct decider *decider; /* asked about tools.ask calls, or NULL */
    bool client_elicits;     /* the client declared the elicitation capability */
    json_t *elicit_allowed;  /* tools the client allowed for the session -> true */
    uint64_t n_elicits;
    uint64_t n_calls; /* tools/call accepted, against tools.max_calls */
    bool input_done, output_failed, stopping, finishing;
    unsigned signals;
    struct event *sig_term, *sig_int, *drain_ev;
    uint64_t drain_deadline;
};

uint64_t now_ms(void);
const char *json_type_name(const json_t *v);

/* serve_text.c */
void describe_sandbox(const struct policy *p, struct strbuf *b);
/* The tools/call result of a finished run, from its result JSON and captures. */
json_t *run_result(struct call *c, const struct job_end *end);

/* serve_tools.c */
const struct tool *find_tool(const struct policy *p, const char *name);
json_t *tool_list(const struct policy *p);
char *instructions(const struct policy *p);
