/*
 * broker/broker.c: `cordon mcp wrap`. The client talks to us on stdin and
 * stdout, the sandboxed server on a pair of pipes; we sit between with the
 * policy's tools section. Everything the server says is hostile input.
 *
 * Ids: every request we pass to the server gets a random integer id of ours,
 * and the client's id is put back on the answer. So the server can only answer
 * what was asked (a response to any other id is dropped), two clients' ids
 * never collide with the broker's own requests, and a timed-out request can
 * be answered and cancelled without the server's help.
 *
 * This file holds the audit, sending, tools/call, the client's side and the
 * end; broker_server.c what the server says; broker_rules.c the checks that
 * need only the policy.
 */
#include "broker/broker.h"
#include "broker/broker_int.h"
#include "common/json.h"

#include "broker/schema.h"
#include "common/cleanup.h"
#include "common/digest.h"
#include "common/text.h"
#include "core/run.h"

#include <event2/event.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- audit ---- */

void record(struct broker *b, const char *type, json_t *fields)
{
    if (!b->log) {
        json_decref(fields);
        return;
    }
    struct cordon_err ignored;
    audit_append(b->log, type, b->run_id, fields, &ignored);
}

uint64_t ms_since(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t ms = (int64_t)(now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
    return ms < 0 ? 0 : (uint64_t)ms;
}

/* J's size in an audit line (0 for NULL). */
size_t recorded_size(const json_t *j)
{
    return j ? json_dumpb(j, NULL, 0, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY) : 0;
}

/* One mcp.call event: a tools/call and what became of it. */
void record_call(struct broker *b, const char *tool, const char *decision, const char *rule,
                 const char *reason, const char *digest, const json_t *args, uint64_t duration_ms,
                 json_int_t result_bytes, int is_error)
{
    json_t *f = json_pack("{s:s, s:s, s:s, s:I}", "tool", tool, "decision", decision,
                          "arguments_digest", digest, "duration_ms", (json_int_t)duration_ms);
    if (!f)
        return;
    if (rule)
        json_object_set_new(f, "rule", json_string(rule));
    if (reason) {
        /* Reasons quote names and are cut to fit: never mid-character. */
        char text[512];
        snprintf(text, sizeof text, "%s", reason);
        utf8_trim_partial(text);
        json_object_set_new(f, "reason", json_string(text));
    }
    if (result_bytes >= 0)
        json_object_set_new(f, "result_bytes", json_integer(result_bytes));
    if (is_error >= 0)
        json_object_set_new(f, "is_error", json_boolean(is_error));
    if (args && b->p->tools.record_arguments) {
        size_t size = recorded_size(args);
        if (size <= RECORDED_ARGS_MAX)
            json_object_set(f, "arguments", (json_t *)args);
        else
            json_object_set_new(f, "arguments_bytes", json_integer((json_int_t)size));
    }
    record(b, "mcp.call", f);
}

/* A method the policy hides, asked for by PEER: counted, the first ones recorded. */
void refused_method(struct broker *b, const char *peer, const char *method)
{
    if (++b->refused <= REFUSALS_RECORDED)
        record(b, "mcp.refused", json_pack("{s:s, s:s}", "from", peer, "method", method));
}

/* A message from PEER that breaks the protocol: counted, the first few recorded. */
void violation(struct broker *b, const char *peer, const char *why)
{
    if (++b->violations <= VIOLATIONS_RECORDED)
        record(b, "mcp.protocol", json_pack("{s:s, s:s}", "from", peer, "problem", why));
}

/* ---- sending ---- */

void to_client(struct broker *b, json_t *msg)
{
    /* After the client's end the server is read unthrottled (below), so what
     * a client that stopped reading would be sent is capped. */
    if (msg && !b->client_gone &&
        !(b->client_done && rpc_stream_pending_output(b->client) > CLIENT_BACKLOG_MAX))
        rpc_send(b->client, msg);
    json_decref(msg);
}

/*
 * Why the server's run ended, from its result (the supervisor writes it
 * just after the command is gone): a server that could not start at all
 * (command not found, not executable, a bind that failed) says so.
 */
static const char *server_end_why(struct broker *b)
{
    if (b->end_why[0])
        return b->end_why;
    char *why = b->end_why;
    size_t len = sizeof b->end_why;
    snprintf(why, len, "cordon: the server exited before answering");
    struct pollfd pfd = { .fd = b->child.result_fd, .events = POLLIN };
    char buf[16384];
    size_t have = 0;
    while (pfd.fd >= 0 && have < sizeof buf - 1 && poll(&pfd, 1, RESULT_WAIT_MS) > 0) {
        ssize_t n = read(pfd.fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    _cleanup_(json_decrefp) json_t *res = have ? json_parse_strict(buf, have, 0, NULL) : NULL;
    const char *reason = json_string_value(json_object_get(res, "reason"));
    const char *error = json_string_value(json_object_get(res, "error"));
    json_t *code = json_object_get(res, "exit_code");
    if (reason && !strcmp(reason, "setup_error") && error)
        snprintf(why, len, "cordon: the server could not start: %s", error);
    else if (reason && strcmp(reason, "exited") != 0)
        snprintf(why, len, "cordon: the server's run ended (%s) before answering", reason);
    else if (json_is_integer(code))
        snprintf(why, len, "cordon: the server exited with status %lld before answering",
                 (long long)json_integer_value(code));
    return why;
}

void to_server(struct broker *b, json_t *msg)
{
    if (msg && !b->server_gone)
        rpc_send(b->server, msg);
    json_decref(msg);
}

/* ---- pending requests ---- */

void pending_free(struct pending *q)
{
    if (q->timer)
        event_free(q->timer);
    json_decref(q->cid);
    json_decref(q->args);
    free(q);
}

struct pending *pending_take(struct broker *b, long long sid)
{
    for (struct pending **at = &b->pending; *at; at = &(*at)->next)
        if ((*at)->sid == sid) {
            struct pending *q = *at;
            *at = q->next;
            return q;
        }
    return NULL;
}

static bool client_id_in_use(const struct broker *b, const json_t *cid)
{
    for (const struct pending *q = b->pending; q; q = q->next)
        if (q->cid && json_equal(q->cid, cid))
            return true;
    size_t i;
    json_t *msg;
    json_array_foreach(b->waiting, i,
                       msg) if (json_equal(json_object_get(msg, "id"), cid)) return true;
    return false;
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct pending *q = arg;
    struct broker *b = q->b;
    q = pending_take(b, q->sid);
    if (!q)
        return;
    double secs = (double)b->p->tools.call_timeout_ms / 1000.0;
    /* Ask the server to stop working on it; its late answer will be dropped. */
    to_server(b,
              rpc_notification("notifications/cancelled",
                               json_pack("{s:I, s:s}", "requestId", (json_int_t)q->sid, "reason",
                                         "timed out in cordon's broker")));
    if (q->kind == PENDING_OWN_LIST) {
        b->listing = false;
        fail_waiting(b, "the server did not list its tools in time");
    } else {
        to_client(b,
                  rpc_error(q->cid, RPC_REQUEST_TIMEOUT,
                            "cordon: the server did not answer %s within %gs", q->method, secs));
        if (q->tool[0])
            record_call(b, q->tool, "timeout", "call_timeout", NULL, q->args_digest, q->args,
                        ms_since(&q->start), -1, -1);
    }
    pending_free(q);
}

/*
 * An id for the server that no open request has and that it cannot guess:
 * with counting ids a server could answer the next request before it is
 * asked. Below 2^52, so a JavaScript server keeps it exact.
 */
static long long new_sid(const struct broker *b)
{
    for (;;) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, 0) != sizeof r)
            abort(); /* the kernel's CSPRNG does not fail once initialised */
        long long sid = (long long)(r & ((1ull << 52) - 1));
        bool used = sid == 0;
        for (const struct pending *q = b->pending; q && !used; q = q->next)
            used = q->sid == sid;
        if (!used)
            return sid;
    }
}

/*
 * Send MSG (a request; copied) to the server under an id of ours, and
 * remember what to do with the answer. Returns the entry, or NULL when the
 * server is gone (the caller answers the client).
 */
static struct pending *forward_request(struct broker *b, const json_t *msg, json_t *cid,
                                       enum pending_kind kind, const char *method)
{
    if (b->server_gone)
        return NULL;
    struct pending *q = calloc(1, sizeof *q);
    _cleanup_(json_decrefp) json_t *copy = json_deep_copy(msg);
    if (!q || !copy) {
        free(q);
        return NULL;
    }
    q->b = b;
    q->kind = kind;
    q->sid = new_sid(b);
    q->cid = json_incref(cid);
    snprintf(q->method, sizeof q->method, "%s", method);
    clock_gettime(CLOCK_MONOTONIC, &q->start);
    json_object_set_new(copy, "id", json_integer(q->sid));
    if (b->p->tools.call_timeout_ms) {
        q->timer = evtimer_new(b->base, on_timeout, q);
        struct timeval tv = { .tv_sec = (time_t)(b->p->tools.call_timeout_ms / 1000),
                              .tv_usec = (suseconds_t)(b->p->tools.call_timeout_ms % 1000) * 1000 };
        if (q->timer)
            evtimer_add(q->timer, &tv);
    }
    q->next = b->pending;
    b->pending = q;
    rpc_send(b->server, copy);
    return q;
}

/* ---- tools/call ---- */

static void refuse_call(struct broker *b, const json_t *id, const char *tool, const char *rule,
                        const char *why, const char *digest, const json_t *args,
                        bool protocol_error)
{
    b->refused++;
    if (protocol_error)
        to_client(b, rpc_error(id, RPC_INVALID_PARAMS, "%s", why));
    else
        to_client(b, rpc_result(id, rpc_tool_error("cordon refused this call: %s", why)));
    record_call(b, tool, "refused", rule, why, digest, args, 0, -1, -1);
}

static void handle_call(struct broker *b, json_t *msg, json_t *id, bool counted);

static void start_own_list(struct broker *b)
{
    if (b->listing)
        return;
    b->listing = true;
    b->list_pages = 0;
    own_list_next(b, NULL);
}

void own_list_next(struct broker *b, const json_t *cursor)
{
    json_t *params = cursor ? json_pack("{s:O}", "cursor", cursor) : json_object();
    _cleanup_(json_decrefp) json_t *req = json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0", "id",
                                                    0, "method", "tools/list", "params", params);
    if (!req || !forward_request(b, req, NULL, PENDING_OWN_LIST, "tools/list")) {
        b->listing = false;
        fail_waiting(b, "the server is gone");
    }
}

/* Calls that waited for schemas: judged now, or refused. */
void run_waiting(struct broker *b)
{
    _cleanup_(json_decrefp) json_t *w = b->waiting;
    b->waiting = json_array();
    size_t i;
    json_t *msg;
    json_array_foreach(w, i, msg) handle_call(b, msg, json_object_get(msg, "id"), true);
}

/* Calls that waited for the tool list it could not get: failed, and each recorded. */
void fail_waiting(struct broker *b, const char *why)
{
    size_t i;
    json_t *msg;
    json_array_foreach(b->waiting, i, msg)
    {
        json_t *params = json_object_get(msg, "params");
        json_t *args = json_object_get(params, "arguments");
        _cleanup_(json_decrefp) json_t *empty = json_object();
        char digest[65];
        json_sha256_hex(args ? args : empty, digest);
        record_call(b, json_string_value(json_object_get(params, "name")), "refused",
                    "no_tool_list", why, digest, args, 0, -1, -1);
        to_client(b, rpc_error(json_object_get(msg, "id"), RPC_INTERNAL_ERROR, "cordon: %s", why));
    }
    json_array_clear(b->waiting);
}

/*
 * A call the policy marks `ask` goes ahead only if the decider allows it
 * now; every question and answer is recorded, the decider's identity with
 * it. The broker waits for the answer (at most decider.timeout).
 */
static bool decider_allows(struct broker *b, const json_t *id, const char *tool, const json_t *args,
                           const char *digest)
{
    _cleanup_(json_decrefp) json_t *empty = json_object();
    _cleanup_(json_decrefp) json_t *q = json_pack("{s:s, s:O, s:s}", "tool", tool, "arguments",
                                                  args ? args : empty, "arguments_digest", digest);
    struct decider_answer a;
    decider_ask(b->decider, "tool_call", tool, b->run_id, q, &a);
    json_t *ev = decider_answer_json(b->decider, &a);
    json_object_set_new(ev, "kind", json_string("tool_call"));
    json_object_set_new(ev, "tool", json_string(tool));
    json_object_set_new(ev, "arguments_digest", json_string(digest));
    record(b, "decider.ask", ev);
    if (a.decision != DECIDER_DENY)
        return true;
    char why[300];
    snprintf(why, sizeof why, "the decider did not allow it: %s", a.reason);
    refuse_call(b, id, tool, "decider", why, digest, args, false);
    return false;
}

static void handle_call(struct broker *b, json_t *msg, json_t *id, bool counted)
{
    const struct policy *p = b->p;
    json_t *params = json_object_get(msg, "params");
    json_t *name = json_object_get(params, "name");
    if (!json_is_object(params) || !json_is_string(name)) {
        to_client(b, rpc_error(id, RPC_INVALID_PARAMS, "tools/call needs params.name"));
        return;
    }
    const char *tool = json_string_value(name);
    json_t *args = json_object_get(params, "arguments");
    _cleanup_(json_decrefp) json_t *empty = json_object();
    char digest[65];
    json_sha256_hex(args ? args : empty, digest);
    /* Every attempt counts, refused ones too; a call that waited was counted already. */
    if (!counted && ++b->calls > p->tools.max_calls && p->tools.max_calls) {
        char why[120];
        snprintf(why, sizeof why, "the session's limit of %llu tool calls is spent",
                 (unsigned long long)p->tools.max_calls);
        refuse_call(b, id, tool, "max_calls", why, digest, args, false);
        return;
    }
    if (!policy_tool_allowed(p, tool)) {
        /* Unknown, as the spec words it: a hidden tool is not admitted to exist. */
        char why[200];
        snprintf(why, sizeof why, "Unknown tool: %s", tool);
        refuse_call(b, id, tool, "not_allowed", why, digest, args, true);
        return;
    }
    if (json_object_get(b->hidden, tool)) {
        /* Changed since it was pinned: unknown until approved, as a hidden tool is. */
        char why[200];
        snprintf(why, sizeof why,
                 "Unknown tool: %s (changed since pinned; cordon mcp pins "
                 "approve)",
                 tool);
        refuse_call(b, id, tool, "pin", why, digest, args, true);
        return;
    }
    if (args && !json_is_object(args)) {
        refuse_call(b, id, tool, "schema", "arguments must be an object", digest, args, true);
        return;
    }
    json_t *schema = json_object_get(b->schemas, tool);
    if (!schema && !b->schemas_complete) {
        json_array_append(b->waiting, msg);
        start_own_list(b);
        return;
    }
    if (!schema) {
        char why[200];
        snprintf(why, sizeof why, "Unknown tool: %s", tool);
        refuse_call(b, id, tool, "not_offered", why, digest, args, true);
        return;
    }
    char why[400], rule[160] = "schema";
    if (schema_check(schema, args ? args : empty, "arguments", why, sizeof why) < 0 ||
        check_rules(p, tool, args ? args : empty, rule, sizeof rule, why, sizeof why) < 0) {
        refuse_call(b, id, tool, rule, why, digest, args, false);
        return;
    }
    if (policy_tool_ask(p, tool) && !decider_allows(b, id, tool, args, digest))
        return;
    struct pending *q = forward_request(b, msg, id, PENDING_CLIENT, "tools/call");
    if (!q) {
        to_client(b, rpc_error(id, RPC_INTERNAL_ERROR, "%s", server_end_why(b)));
        return;
    }
    snprintf(q->tool, sizeof q->tool, "%s", tool);
    memcpy(q->args_digest, digest, sizeof digest);
    q->args = json_incref(args);
}

/* ---- client to server ---- */

/* The client's capabilities, less what the policy keeps from the server. */
static void strip_client_capabilities(const struct policy *p, json_t *msg)
{
    json_t *caps = json_object_get(json_object_get(msg, "params"), "capabilities");
    if (!json_is_object(caps))
        return;
    if (!p->tools.sampling)
        json_object_del(caps, "sampling");
    if (!p->tools.elicitation)
        json_object_del(caps, "elicitation");
    if (!p->tools.roots)
        json_object_del(caps, "roots");
}

static void client_request(struct broker *b, json_t *msg, const char *method, json_t *id)
{
    size_t in_flight = json_array_size(b->waiting);
    for (const struct pending *q = b->pending; q; q = q->next)
        in_flight++;
    if (in_flight >= MAX_IN_FLIGHT) {
        to_client(b, rpc_error(id, RPC_INVALID_REQUEST, "cordon: too many requests in flight"));
        return;
    }
    if (client_id_in_use(b, id)) {
        violation(b, "client", "a request id already in flight");
        to_client(b, rpc_error(id, RPC_INVALID_REQUEST, "request id already in use"));
        return;
    }
    if (!client_method_allowed(b->p, method)) {
        refused_method(b, "client", method);
        to_client(b, rpc_error(id, RPC_METHOD_NOT_FOUND, "Method not found: %s", method));
        return;
    }
    if (!strcmp(method, "tools/call")) {
        handle_call(b, msg, id, false);
        return;
    }
    _cleanup_(json_decrefp) json_t *copy = json_deep_copy(msg);
    if (!strcmp(method, "initialize"))
        strip_client_capabilities(b->p, copy);
    if (!forward_request(b, copy, id, PENDING_CLIENT, method))
        to_client(b, rpc_error(id, RPC_INTERNAL_ERROR, "%s", server_end_why(b)));
}

static void client_notification(struct broker *b, json_t *msg, const char *method)
{
    if (!notification_allowed(b->p, method, false))
        return;
    if (!strcmp(method, "notifications/cancelled")) {
        /* The client names its own id; the server knows ours. */
        json_t *params = json_object_get(msg, "params");
        json_t *rid = json_object_get(params, "requestId");
        for (struct pending *q = b->pending; rid && q; q = q->next)
            if (q->cid && json_equal(q->cid, rid)) {
                _cleanup_(json_decrefp) json_t *copy = json_deep_copy(msg);
                json_object_set_new(json_object_get(copy, "params"), "requestId",
                                    json_integer(q->sid));
                to_server(b, json_incref(copy));
                return;
            }
        return;
    }
    to_server(b, json_incref(msg));
}

/* The client answers a request the server made: only one still open. */
static void client_response(struct broker *b, json_t *msg, json_t *id)
{
    _cleanup_free_ char *key = id ? json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    if (!key || !json_object_get(b->server_requests, key)) {
        violation(b, "client", "a response to no open request");
        return;
    }
    json_object_del(b->server_requests, key);
    to_server(b, json_incref(msg));
}

static void on_client_message(void *ctx, struct rpc_stream *s, json_t *msg)
{
    (void)s;
    struct broker *b = ctx;
    const char *method;
    json_t *id;
    char why[160];
    enum rpc_kind kind = rpc_classify(msg, &method, &id, why, sizeof why);
    b->client_asked |= kind == RPC_KIND_REQUEST || kind == RPC_KIND_INVALID;
    switch (kind) {
    case RPC_KIND_REQUEST:
        client_request(b, msg, method, id);
        break;
    case RPC_KIND_NOTIFICATION:
        client_notification(b, msg, method);
        break;
    case RPC_KIND_RESPONSE:
        client_response(b, msg, id);
        break;
    case RPC_KIND_INVALID:
        violation(b, "client", why);
        to_client(b, rpc_error(id, RPC_INVALID_REQUEST, "Invalid Request: %s", why));
        break;
    }
}

static void on_client_garbage(void *ctx, struct rpc_stream *s, const char *line, size_t len,
                              bool oversized, const char *why)
{
    (void)s;
    (void)line;
    (void)len;
    struct broker *b = ctx;
    violation(b, "client", why);
    to_client(b,
              rpc_error(NULL, oversized ? RPC_INVALID_REQUEST : RPC_PARSE_ERROR, "%s%s",
                        oversized ? "" : "Parse error: ", why));
}

/* ---- ending ---- */

static void maybe_finish(struct broker *b);

static void on_finish_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    maybe_finish(arg);
}

/*
 * Done when the server is reaped, its output read to the end, and the client
 * has what we owed it, its first request answered with why the server is
 * gone where that came first; or FINISH_DRAIN_S later if the client stopped
 * reading (or asks nothing).
 */
static void maybe_finish(struct broker *b)
{
    if (!b->child_reaped)
        return;
    if (!b->reaped_at.tv_sec)
        clock_gettime(CLOCK_MONOTONIC, &b->reaped_at);
    bool owed = !b->server_gone || rpc_stream_pending_output(b->client) > 0 ||
        (!b->client_asked && !b->client_done);
    if (!b->client_gone && owed && ms_since(&b->reaped_at) < FINISH_DRAIN_S * 1000) {
        struct timeval tv = { 0, 20000 };
        evtimer_add(b->finish_timer, &tv);
        return;
    }
    event_base_loopbreak(b->base);
}

static void server_ended(struct broker *b)
{
    if (b->server_gone)
        return;
    b->server_gone = true;
    /* Nothing more will be answered: say so for every open request. */
    while (b->pending) {
        struct pending *q = b->pending;
        b->pending = q->next;
        if (q->kind == PENDING_CLIENT)
            to_client(b, rpc_error(q->cid, RPC_INTERNAL_ERROR, "%s", server_end_why(b)));
        pending_free(q);
    }
    b->listing = false;
    fail_waiting(b, "the server exited");
    maybe_finish(b);
}

static void on_shutdown_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct broker *b = arg;
    if (b->child_reaped)
        return;
    /* run_once's supervisor turns SIGTERM into a stop with a grace period. */
    b->stopped_by_us = true;
    kill(b->child.pid, SIGTERM);
}

static void client_ended(struct broker *b)
{
    if (b->client_done)
        return;
    b->client_done = true;
    /* EOF on the server's stdin is how stdio MCP says goodbye. */
    rpc_stream_close_output(b->server);
    /* The server (and the supervisor relaying its output) must be able to
     * write until it exits, whether or not the client still reads. */
    rpc_stream_unthrottle(b->server);
    struct timeval tv = { SHUTDOWN_GRACE_S, 0 };
    evtimer_add(b->shutdown_timer, &tv);
    maybe_finish(b);
}

static void on_client_closed(void *ctx, struct rpc_stream *s, bool output_failed)
{
    (void)s;
    struct broker *b = ctx;
    /* A client that closed only its stdin still reads the answers it is owed. */
    if (output_failed)
        b->client_gone = true;
    client_ended(b);
}

static void on_server_closed(void *ctx, struct rpc_stream *s, bool output_failed)
{
    (void)s;
    struct broker *b = ctx;
    if (output_failed)
        return; /* its stdin closed; its stdout ending is what counts */
    server_ended(b);
}

static void on_sigchld(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct broker *b = arg;
    int st;
    if (b->child_reaped || waitpid(b->child.pid, &st, WNOHANG) != b->child.pid)
        return;
    b->child_reaped = true;
    b->child_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    /* Its last answers may still be in the pipe (or held back by a slow
     * client): the end of its output, not its exit, ends the requests. */
    maybe_finish(b);
}

static void on_stop_signal(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct broker *b = arg;
    if (!b->child_reaped)
        kill(b->child.pid, (int)fd == SIGINT ? SIGINT : SIGTERM);
    client_ended(b);
}

static const struct rpc_handlers client_handlers = {
    .message = on_client_message,
    .garbage = on_client_garbage,
    .closed = on_client_closed,
};

static const struct rpc_handlers server_handlers = {
    .message = on_server_message,
    .garbage = on_server_garbage,
    .closed = on_server_closed,
};

static void broker_release(struct broker *b)
{
    while (b->pending) {
        struct pending *q = b->pending;
        b->pending = q->next;
        pending_free(q);
    }
    struct event *evs[] = { b->shutdown_timer, b->finish_timer, b->sigchld, b->sigterm, b->sigint };
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        if (evs[i])
            event_free(evs[i]);
    rpc_stream_free(b->client);
    rpc_stream_free(b->server);
    json_decref(b->schemas);
    json_decref(b->waiting);
    json_decref(b->server_requests);
    json_decref(b->hidden);
    mcp_pins_free(b->pins);
    decider_free(b->decider);
    if (b->log) {
        struct cordon_err ignored;
        audit_close(b->log, &ignored);
        audit_free(b->log);
    }
    if (b->base)
        event_base_free(b->base);
}

int mcp_wrap(const struct policy *p, char *const *server_argv, int *status, struct cordon_err *err)
{
    struct broker b = { .p = p, .child = { .pid = -1 } };
    *status = 0;
    audit_new_run_id(b.run_id);
    b.schemas = json_object();
    b.waiting = json_array();
    b.server_requests = json_object();
    b.hidden = json_object();
    if (!b.schemas || !b.waiting || !b.server_requests || !b.hidden)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    if ((p->tools.pins && !(b.pins = mcp_pins_open(p->tools.pins, err))) ||
        (p->tools.n_pinned &&
         !(b.pins = mcp_pins_fixed(p->tools.pinned, p->tools.n_pinned, err))) ||
        ((p->gov.decider || p->gov.decider_command) &&
         !(b.decider = decider_new(p->gov.decider, p->gov.decider_command,
                                   p->gov.decider_timeout_ms, err)))) {
        broker_release(&b);
        return -1;
    }
    if (cordon_audit_open(p, &b.log, err) < 0) {
        broker_release(&b);
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    b.base = rpc_event_base_new();
    if (!b.base) {
        broker_release(&b);
        return err_set(err, CORDON_E_INTERNAL, "cannot start the event loop");
    }
    /* Signal events before the fork, so no SIGCHLD can slip past them. */
    b.sigchld = evsignal_new(b.base, SIGCHLD, on_sigchld, &b);
    b.sigterm = evsignal_new(b.base, SIGTERM, on_stop_signal, &b);
    b.sigint = evsignal_new(b.base, SIGINT, on_stop_signal, &b);
    b.shutdown_timer = evtimer_new(b.base, on_shutdown_timer, &b);
    b.finish_timer = evtimer_new(b.base, on_finish_tick, &b);
    if (!b.sigchld || !b.sigterm || !b.sigint || !b.shutdown_timer || !b.finish_timer ||
        evsignal_add(b.sigchld, NULL) < 0 || evsignal_add(b.sigterm, NULL) < 0 ||
        evsignal_add(b.sigint, NULL) < 0) {
        broker_release(&b);
        return err_set(err, CORDON_E_INTERNAL, "cannot set up the broker's events");
    }
    if (run_handle_start(p, server_argv, b.run_id, false, &b.child, err) < 0) {
        broker_release(&b);
        return -1;
    }
    size_t max = (size_t)p->tools.max_message_bytes;
    b.client = rpc_stream_new(b.base, STDIN_FILENO, STDOUT_FILENO, max, &client_handlers, &b, err);
    b.server = b.client ? rpc_stream_new(b.base, b.child.stdout_fd, b.child.stdin_fd, max,
                                         &server_handlers, &b, err)
                        : NULL;
    if (!b.server) {
        kill(b.child.pid, SIGKILL);
        waitpid(b.child.pid, NULL, 0);
        run_handle_close(&b.child);
        broker_release(&b);
        return -1;
    }
    /* The streams own these descriptors now. */
    b.child.stdin_fd = b.child.stdout_fd = -1;
    rpc_stream_throttle(b.client, b.server);
    rpc_stream_throttle(b.client, b.client);
    rpc_stream_throttle(b.server, b.client);
    rpc_stream_throttle(b.server, b.server);

    event_base_dispatch(b.base);

    if (!b.child_reaped) {
        kill(b.child.pid, SIGTERM);
        int st;
        if (waitpid(b.child.pid, &st, 0) == b.child.pid)
            b.child_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    record(&b, "mcp.session.end",
           json_pack("{s:I, s:I, s:I, s:i}", "calls", (json_int_t)b.calls, "refused",
                     (json_int_t)b.refused, "violations", (json_int_t)b.violations, "server_status",
                     b.child_status));
    run_handle_close(&b.child);
    broker_release(&b);
    /* The server's own status, unless it was stopped because the client left. */
    *status = b.stopped_by_us ? 0 : b.child_status;
    return 0;
}

void mcp_refuse_session(const char *why)
{
    _cleanup_free_ char *line = NULL;
    size_t cap = 0;
    if (isatty(STDIN_FILENO))
        return; /* a person at a terminal has read our stderr */
    /* Notifications and garbage are passed over: only a request has an id to answer. */
    while (getline(&line, &cap, stdin) > 0) {
        _cleanup_(json_decrefp) json_t *msg = json_parse_strict_str(line, 0, NULL);
        json_t *id = json_object_get(msg, "id");
        if (!json_is_string(json_object_get(msg, "method")) ||
            (!json_is_integer(id) && !json_is_string(id)))
            continue;
        _cleanup_(json_decrefp) json_t *answer =
            rpc_error(id, RPC_INTERNAL_ERROR, "cordon: the server cannot start: %s", why);
        _cleanup_free_ char *text = answer ? json_dumps(answer, JSON_COMPACT) : NULL;
        if (text)
            printf("%s\n", text);
        fflush(stdout);
        return;
    }
}
