/*
 * common/jsonrpc.h: MCP's stdio transport: one JSON-RPC 2.0 message per
 * line, read and written without blocking on a libevent loop. Every message
 * is parsed (duplicate keys refused, so no two parsers can disagree about
 * it) and re-serialised on the way out, so a peer receives exactly what the
 * broker judged. Shared by `cordon mcp wrap`, `cordon mcp serve` and the
 * daemon (`cordon serve`).
 */
#pragma once
#include "common/err.h"

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* JSON-RPC and MCP error codes. */
#define RPC_PARSE_ERROR (-32700)
#define RPC_INVALID_REQUEST (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS (-32602)
#define RPC_INTERNAL_ERROR (-32603)
#define RPC_REQUEST_TIMEOUT (-32001) /* as the MCP SDKs use it */
#define RPC_REFUSED (-32000)         /* cordon refused it (policy, limit) */

enum rpc_kind {
    RPC_KIND_REQUEST,      /* method and id */
    RPC_KIND_NOTIFICATION, /* method, no id */
    RPC_KIND_RESPONSE,     /* id with exactly one of result, error */
    RPC_KIND_INVALID,
};

/*
 * What MSG is. For a request or notification *METHOD is set; for a request
 * or response *ID (borrowed) is the id when it is a string or an integer.
 * INVALID comes with a reason in WHY, and *ID set when one could be read.
 */
enum rpc_kind rpc_classify(const json_t *msg, const char **method, json_t **id, char *why,
                           size_t len);

/* {"jsonrpc":"2.0","id":ID,"error":{"code":CODE,"message":...}}; ID NULL = null. */
json_t *rpc_error(const json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* {"jsonrpc":"2.0","id":ID,"result":RESULT}; steals RESULT. */
json_t *rpc_result(const json_t *id, json_t *result);

/*
 * A tools/call result reporting a failure the model can read, as MCP
 * prefers to a protocol error: {"content":[{"type":"text","text":...}],
 * "isError":true}.
 */
json_t *rpc_tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * The event loop for stdio streams: poll, not epoll, since stdin may be a
 * regular file, which epoll refuses. NULL when out of memory.
 */
struct event_base *rpc_event_base_new(void);

/* {"jsonrpc":"2.0","method":METHOD,"params":PARAMS}; steals PARAMS (may be NULL). */
json_t *rpc_notification(const char *method, json_t *params);

struct rpc_stream;

struct rpc_handlers {
    /* One parsed message (borrowed: incref to keep it). */
    void (*message)(void *ctx, struct rpc_stream *s, json_t *msg);
    /*
     * A line that is not a message: not JSON, or longer than the cap (then
     * LINE holds only its first and last bytes, for an id to be fished out
     * by rpc_guess_id). WHY says which.
     */
    void (*garbage)(void *ctx, struct rpc_stream *s, const char *line, size_t len, bool oversized,
                    const char *why);
    /* The input ended, or the output failed (the peer is gone). */
    void (*closed)(void *ctx, struct rpc_stream *s, bool output_failed);
    /* The output queue fell below half the throttle's mark (may be NULL). */
    void (*drained)(void *ctx, struct rpc_stream *s);
    /*
     * The unfinished message buffered would take the stream's budget (or a
     * parent's) over its bound: it is discarded as it arrives, as an
     * oversized one is, and HEAD is its first bytes (for rpc_guess_id).
     * NULL: no budget is set.
     */
    void (*over_budget)(void *ctx, struct rpc_stream *s, const char *head, size_t len);
};

/*
 * Bytes of unfinished messages (read, their newline not yet) that streams
 * sharing it may buffer together; charged to its parent too (a uid's share
 * of a daemon's whole), so the tightest level decides.
 */
struct rpc_budget {
    size_t used, max;
    struct rpc_budget *parent; /* or NULL */
};

/*
 * A stream reading messages from IN_FD and writing them to OUT_FD (either
 * may be -1); both are made non-blocking. Lines longer than MAX_MESSAGE
 * bytes are discarded as they arrive, never buffered whole.
 */
struct rpc_stream *rpc_stream_new(struct event_base *base, int in_fd, int out_fd,
                                  size_t max_message, const struct rpc_handlers *h, void *ctx,
                                  struct cordon_err *err);

/* S's unfinished message is charged to B (and its parents) from now on; B outlives S. */
void rpc_stream_set_budget(struct rpc_stream *s, struct rpc_budget *b);

/* Queue MSG as one line. -1 when it cannot be serialised or the output is gone. */
int rpc_send(struct rpc_stream *s, const json_t *msg);

/*
 * Reading from FROM stops while TO has more than a high-water mark queued
 * for its peer, and resumes when TO drains: a peer that floods cannot make
 * the broker buffer without bound for a peer that does not read.
 */
void rpc_stream_throttle(struct rpc_stream *from, struct rpc_stream *to);

/* Undo rpc_stream_throttle() for FROM: read on whatever the others queue. */
void rpc_stream_unthrottle(struct rpc_stream *from);

/* Stop writing: close the output once what is queued is written. */
void rpc_stream_close_output(struct rpc_stream *s);

/* Bytes queued for output and not yet written. */
size_t rpc_stream_pending_output(const struct rpc_stream *s);

void rpc_stream_free(struct rpc_stream *s);

/*
 * An integer "id" member found in a fragment of a message (an oversized
 * line's first and last bytes), or -1: enough to answer the request a
 * discarded response was for, since the broker's own ids are integers.
 */
long long rpc_guess_id(const char *text, size_t len);
