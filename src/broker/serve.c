/*
 * broker/serve.c: `cordon mcp serve`: cordon as an MCP server on
 * stdin/stdout with two tools, run_command and run_code. Each call runs in
 * a fresh sandbox in a child process (broker/spawn.h), so the loop goes on
 * serving while it runs: at most MAX_RUNNING at once, the rest queued in
 * arrival order. Runs outside every sandbox; what it reads was written by
 * a model and is treated as hostile.
 */
#include "broker/serve.h"
#include "broker/serve_int.h"

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/decider.h"
#include "common/digest.h"
#include "common/text.h"
#include "core/run.h"
#include "sandbox/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- small helpers ---- */

uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "something else";
}

static void reply(struct server *srv, json_t *msg)
{
    if (msg && !srv->output_failed)
        rpc_send(srv->rpc, msg);
    json_decref(msg);
}

/* ---- a call's life: queued, running (spawned, read), reaped, answered ---- */

static void maybe_finish(struct server *srv);

static struct call *call_new(struct server *srv, const json_t *id, const struct tool *tool)
{
    struct call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->srv = srv;
    c->id = json_deep_copy(id);
    c->tool = tool;
    c->received_ms = now_ms();
    if (!c->id) {
        free(c);
        return NULL;
    }
    return c;
}

static void unlink_call(struct server *srv, struct call *c)
{
    for (struct call **pp = &srv->calls; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    c->next = NULL;
}

static void call_free(struct call *c)
{
    if (!c)
        return;
    if (c->argv)
        for (char **a = c->argv; *a; a++)
            free(*a);
    free(c->argv);
    free(c->input);
    json_decref(c->arguments);
    json_decref(c->id);
    json_decref(c->elicit_id);
    if (c->elicit_timer)
        event_free(c->elicit_timer);
    free(c);
}

/*
 * The audit's mcp.call event for C, in the fields `mcp wrap` uses: a refusal
 * names its RULE and REASON; a call that ran brings its RESULT's exit_code,
 * signal and reason (how the run ended), and is_error.
 */
static void record_call(struct server *srv, const struct call *c, const char *decision,
                        const char *rule, const char *reason, const json_t *result)
{
    if (!srv->audit)
        return;
    /* clang-format off */
    json_t *f = json_pack("{s:s, s:s, s:s, s:I}", "tool", c->tool->name, "decision", decision,
                          "arguments_digest", c->digest,
                          "duration_ms", (json_int_t)(now_ms() - c->received_ms));
    /* clang-format on */
    if (!f)
        return;
    if (rule)
        json_object_set_new(f, "rule", json_string(rule));
    if (reason)
        json_object_set_new(f, "reason", json_string(reason));
    if (c->cancelled)
        json_object_set_new(f, "cancelled", json_true());
    json_t *sc = json_object_get(result, "structuredContent");
    if (sc) {
        static const char *const keys[] = { "exit_code", "signal", "reason", "error" };
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            json_t *v = json_object_get(sc, keys[i]);
            if (v)
                json_object_set(f, keys[i], v);
        }
        json_object_set(f, "is_error", json_object_get(result, "isError"));
    }
    /* Kept only when the policy's tools.record_arguments asks for them. */
    if (c->arguments)
        json_object_set(f, "arguments", c->arguments);
    struct cordon_err ignored;
    /* The run already happened; its own run.start/run.end are in the log either way. */
    audit_append(srv->audit, "mcp.call", c->run_id[0] ? c->run_id : NULL, f, &ignored);
}

/* A run ended: answer its call (unless the client cancelled it), record it, forget it. */
static void on_job_done(void *ctx, const struct job_end *end)
{
    struct call *c = ctx;
    struct server *srv = c->srv;
    c->job = NULL;
    json_t *result = run_result(c, end);
    record_call(srv, c, "allowed", NULL, NULL, result);
    if (!c->cancelled)
        reply(srv, rpc_result(c->id, json_incref(result)));
    json_decref(result);
    unlink_call(srv, c);
    call_free(c);
    maybe_finish(srv);
}

/* ---- the end of the session ---- */

static void on_drain(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    if (srv->output_failed || rpc_stream_pending_output(srv->rpc) == 0 ||
        now_ms() >= srv->drain_deadline) {
        event_base_loopbreak(srv->base);
        return;
    }
    struct timeval tv = { 0, 10000 };
    evtimer_add(srv->drain_ev, &tv);
}

/* Once nothing is left to answer, write what is queued and end the loop. */
static void maybe_finish(struct server *srv)
{
    if (srv->finishing || srv->calls || !(srv->input_done || srv->stopping))
        return;
    srv->finishing = true;
    rpc_stream_close_output(srv->rpc);
    srv->drain_deadline = now_ms() + DRAIN_MS;
    on_drain(-1, 0, srv);
}

/* A queued call's run was dropped at shutdown: it is refused. */
static void on_job_dropped(void *ctx)
{
    struct call *c = ctx;
    struct server *srv = c->srv;
    c->job = NULL;
    if (!c->cancelled)
        reply(srv,
              rpc_error(c->id, RPC_REFUSED,
                        "cordon is shutting down; the call did "
                        "not run"));
    record_call(srv, c, "allowed", NULL, "not run: cordon shut down", NULL);
    unlink_call(srv, c);
    call_free(c);
}

/* Stop serving: queued calls are refused, running ones stopped (NOW: killed). */
static void stop(struct server *srv, bool now)
{
    srv->stopping = true;
    jobs_stop_all(srv->jobs, now, on_job_dropped);
    maybe_finish(srv);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    struct server *srv = arg;
    /* A second one does not wait for the runs' grace. */
    stop(srv, ++srv->signals > 1);
}

/* ---- the protocol ---- */

static struct call *find_call(struct server *srv, const json_t *id)
{
    /* A cancelled call gets no answer, so its id is free again. */
    for (struct call *c = srv->calls; c; c = c->next)
        if (!c->cancelled && json_equal(c->id, id))
            return c;
    return NULL;
}

static json_t *initialize_result(struct server *srv, const json_t *params)
{
    json_t *caps = json_is_object(params) ? json_object_get(params, "capabilities") : NULL;
    srv->client_elicits = json_is_object(json_object_get(caps, "elicitation"));
    const char *version = protocol_versions[0];
    json_t *asked = json_is_object(params) ? json_object_get(params, "protocolVersion") : NULL;
    for (size_t i = 0;
         json_is_string(asked) && i < sizeof protocol_versions / sizeof protocol_versions[0]; i++)
        if (strcmp(json_string_value(asked), protocol_versions[i]) == 0)
            version = protocol_versions[i];
    /* clang-format off */
    return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version,
                     "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "cordon",
                     "title", "cordon sandbox", "version", CORDON_VERSION, "instructions",
                     srv->instructions);
    /* clang-format on */
}

static void link_call(struct server *srv, struct call *c)
{
    struct call **tail = &srv->calls;
    while (*tail)
        tail = &(*tail)->next;
    *tail = c;
}

/* C (not in srv->calls) goes to the run queue. */
static void queue_call(struct server *srv, struct call *c)
{
    link_call(srv, c);
    struct cordon_err err = { 0 };
    c->job = jobs_submit(srv->jobs, c->argv, c->input, c->input_len, c, &err);
    if (!c->job) {
        record_call(srv, c, "refused", "queue", err.msg, NULL);
        reply(srv, rpc_error(c->id, RPC_REFUSED, "%s", err.msg));
        unlink_call(srv, c);
        call_free(c);
        return;
    }
    memcpy(c->run_id, job_run_id(c->job), sizeof c->run_id);
}

/* The decider.ask event; EV is decider_answer_json()'s or the elicitation's. */
static void record_ask(struct server *srv, const struct call *c, json_t *ev)
{
    json_object_set_new(ev, "kind", json_string("tool_call"));
    json_object_set_new(ev, "tool", json_string(c->tool->name));
    json_object_set_new(ev, "arguments_digest", json_string(c->digest));
    struct cordon_err ignored;
    if (srv->audit)
        audit_append(srv->audit, "decider.ask", NULL, ev, &ignored);
    else
        json_decref(ev);
}

/* The end of an elicitation about C: ALLOWED runs it, otherwise WHY refuses it. */
static void elicit_done(struct server *srv, struct call *c, const char *decision, const char *why,
                        json_t *answer)
{
    bool allowed = strncmp(decision, "allow_", 6) == 0;
    if (!strcmp(decision, "allow_session"))
        json_object_set_new(srv->elicit_allowed, c->tool->name, json_true());
    /* clang-format off */
    record_ask(srv, c, json_pack("{s:s, s:s, s:b, s:I, s:{s:s, s:O?}}", "decision", decision,
                                 "reason", why, "cached", 0, "elapsed_ms",
                                 (json_int_t)(now_ms() - c->received_ms), "decider",
                                 "elicitation", "client", "answer", answer));
    /* clang-format on */
    if (c->elicit_timer)
        evtimer_del(c->elicit_timer);
    json_decref(c->elicit_id);
    c->elicit_id = NULL;
    unlink_call(srv, c);
    if (c->cancelled) {
        record_call(srv, c, "refused", "decider", "not run: cancelled by the client", NULL);
        call_free(c);
    } else if (allowed) {
        queue_call(srv, c);
        return;
    } else {
        char msg[300];
        snprintf(msg, sizeof msg, "the decider did not allow it: %s", why);
        record_call(srv, c, "refused", "decider", msg, NULL);
        reply(srv, rpc_result(c->id, rpc_tool_error("cordon refused this call: %s", msg)));
        call_free(c);
    }
    maybe_finish(srv);
}

static void on_elicit_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct call *c = arg;
    struct server *srv = c->srv;
    /* clang-format off */
    reply(srv, json_pack("{s:s, s:s, s:{s:O, s:s}}", "jsonrpc", "2.0", "method",
                         "notifications/cancelled", "params", "requestId", c->elicit_id,
                         "reason", "cordon's deadline for the answer passed"));
    /* clang-format on */
    elicit_done(srv, c, "deny", "timeout: the client did not answer before the deadline", NULL);
}

/* A response from the client: the answer to one of our elicitations, or nothing. */
static void elicit_answer(struct server *srv, const json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    struct call *c = srv->calls;
    while (c && !(c->elicit_id && json_equal(c->elicit_id, id)))
        c = c->next;
    if (!c)
        return;
    json_t *result = json_object_get(msg, "result");
    const char *action = json_string_value(json_object_get(result, "action"));
    const char *decision =
        json_string_value(json_object_get(json_object_get(result, "content"), "decision"));
    if (!result)
        elicit_done(srv, c, "deny", "the client answered with an error", NULL);
    else if (!action || strcmp(action, "accept") != 0)
        elicit_done(srv, c, "deny", "the person declined", result);
    else if (decision && (!strcmp(decision, "allow_once") || !strcmp(decision, "allow_session")))
        elicit_done(srv, c, decision, "the person allowed it", result);
    else
        elicit_done(srv, c, "deny", "the person chose deny", result);
}

/* Ask the client's person about C; the call waits in srv->calls for the answer. */
static void elicit(struct server *srv, struct call *c, const json_t *params)
{
    _cleanup_free_ char *args =
        json_dumps(json_object_get(params, "arguments"), JSON_COMPACT | JSON_SORT_KEYS);
    char msg[1200];
    snprintf(msg, sizeof msg, "The agent asks to run %s with %.900s. Allow it?", c->tool->name,
             args ? args : "{}");
    char rid[48];
    snprintf(rid, sizeof rid, "cordon-ask-%llu", (unsigned long long)++srv->n_elicits);
    c->elicit_id = json_string(rid);
    c->elicit_timer = evtimer_new(srv->base, on_elicit_timeout, c);
    uint64_t ms = srv->pol.gov.decider_timeout_ms;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    if (!c->elicit_id || !c->elicit_timer || evtimer_add(c->elicit_timer, &tv) < 0) {
        reply(srv, rpc_error(c->id, RPC_INTERNAL_ERROR, "out of memory"));
        call_free(c);
        return;
    }
    link_call(srv, c);
    /* clang-format off */
    reply(srv, json_pack("{s:s, s:O, s:s, s:{s:s, s:{s:s, s:{s:{s:s, s:s, s:[s, s, s]}}, s:[s]}}}",
                         "jsonrpc", "2.0", "id", c->elicit_id, "method", "elicitation/create",
                         "params", "message", msg, "requestedSchema", "type", "object",
                         "properties", "decision", "type", "string", "title", "Decision", "enum",
                         "allow_once", "allow_session", "deny", "required", "decision"));
    /* clang-format on */
}

static void tools_call(struct server *srv, const json_t *id, const json_t *params)
{
    json_t *name = json_is_object(params) ? json_object_get(params, "name") : NULL;
    if (!json_is_string(name)) {
        reply(srv, rpc_error(id, RPC_INVALID_PARAMS, "tools/call needs params.name, a string"));
        return;
    }
    const struct tool *tool = find_tool(&srv->pol, json_string_value(name));
    if (!tool) {
        char quoted[80];
        reply(srv,
              rpc_error(id, RPC_INVALID_PARAMS, "unknown tool %s",
                        text_quote(quoted, sizeof quoted, json_string_value(name),
                                   json_string_length(name), true)));
        return;
    }
    struct call *c = call_new(srv, id, tool);
    if (!c) {
        reply(srv, rpc_error(id, RPC_INTERNAL_ERROR, "out of memory"));
        return;
    }
    json_t *args = json_object_get(params, "arguments");
    json_t *empty = args ? NULL : json_object();
    if (!args)
        args = empty;
    json_sha256_hex(args, c->digest);
    if (srv->pol.tools.record_arguments)
        c->arguments = json_incref(args);

    char why[300];
    if (srv->pol.tools.max_calls && srv->n_calls >= srv->pol.tools.max_calls) {
        snprintf(why, sizeof why, "the session's limit of %llu tool calls is reached",
                 (unsigned long long)srv->pol.tools.max_calls);
        record_call(srv, c, "refused", "max_calls", why, NULL);
        reply(srv, rpc_error(id, RPC_REFUSED, "%s", why));
        call_free(c);
        json_decref(empty);
        return;
    }
    unsigned queued = jobs_queued(srv->jobs);
    if (queued >= MAX_QUEUED) {
        snprintf(why, sizeof why, "%u calls are already waiting to run; try again later", queued);
        record_call(srv, c, "refused", "queue", why, NULL);
        reply(srv, rpc_error(id, RPC_REFUSED, "%s", why));
        call_free(c);
        json_decref(empty);
        return;
    }
    srv->n_calls++;
    int rc = json_is_object(args)
        ? tool->build(args, c, why, sizeof why)
        : why_printf(why, sizeof why, "arguments must be an object, got %s", json_type_name(args));
    json_decref(empty);
    if (rc < 0) {
        record_call(srv, c, "refused", "arguments", why, NULL);
        reply(srv, rpc_result(id, rpc_tool_error("invalid arguments for %s: %s", tool->name, why)));
        call_free(c);
        return;
    }
    /* An `ask` tool runs only if the decider allows this call now (waited for, bounded). */
    bool ask = policy_tool_ask(&srv->pol, tool->name);
    if (ask && json_object_get(srv->elicit_allowed, tool->name)) {
        ask = false; /* the person allowed it for the session */
    } else if (ask && srv->pol.gov.decider_elicit && srv->client_elicits) {
        elicit(srv, c, params);
        return;
    } else if (ask && !srv->decider) {
        snprintf(why, sizeof why,
                 "the decider did not allow it: the client cannot be asked "
                 "(no elicitation capability) and no decider socket or command is set");
        record_call(srv, c, "refused", "decider", why, NULL);
        reply(srv, rpc_result(id, rpc_tool_error("cordon refused this call: %s", why)));
        call_free(c);
        return;
    }
    if (ask) {
        struct decider_answer a;
        decider_ask(srv->decider, "tool_call", tool->name, NULL, params, &a);
        record_ask(srv, c, decider_answer_json(srv->decider, &a));
        if (a.decision == DECIDER_DENY) {
            snprintf(why, sizeof why, "the decider did not allow it: %s", a.reason);
            record_call(srv, c, "refused", "decider", why, NULL);
            reply(srv, rpc_result(id, rpc_tool_error("cordon refused this call: %s", why)));
            call_free(c);
            return;
        }
    }
    queue_call(srv, c);
}

static void cancel(struct server *srv, const json_t *params)
{
    json_t *id = json_is_object(params) ? json_object_get(params, "requestId") : NULL;
    struct call *c = id ? find_call(srv, id) : NULL;
    if (!c || c->cancelled)
        return;
    c->cancelled = true; /* no answer goes out for it */
    if (c->elicit_id) {
        elicit_done(srv, c, "deny", "cancelled by the client", NULL);
        return;
    }
    if (job_stop(c->job, false))
        return; /* running: its end is recorded as it comes */
    c->job = NULL;
    record_call(srv, c, "allowed", NULL, "not run: cancelled by the client", NULL);
    unlink_call(srv, c);
    call_free(c);
    maybe_finish(srv);
}

static void request(struct server *srv, const char *method, const json_t *id, const json_t *params)
{
    if (find_call(srv, id)) {
        reply(srv,
              rpc_error(id, RPC_INVALID_REQUEST, "a request with this id is still in progress"));
        return;
    }
    if (params && !json_is_object(params)) {
        reply(srv, rpc_error(id, RPC_INVALID_PARAMS, "params must be an object"));
        return;
    }
    if (strcmp(method, "initialize") == 0)
        reply(srv, rpc_result(id, initialize_result(srv, params)));
    else if (strcmp(method, "ping") == 0)
        reply(srv, rpc_result(id, json_object()));
    else if (strcmp(method, "tools/list") == 0)
        reply(srv, rpc_result(id, json_pack("{s:O}", "tools", srv->tools)));
    else if (strcmp(method, "tools/call") == 0)
        tools_call(srv, id, params);
    else {
        char quoted[80];
        reply(srv,
              rpc_error(id, RPC_METHOD_NOT_FOUND, "method not found: %s",
                        text_quote(quoted, sizeof quoted, method, strlen(method), true)));
    }
}

static void on_message(void *ctx, struct rpc_stream *s, json_t *msg)
{
    (void)s;
    struct server *srv = ctx;
    if (srv->stopping)
        return;
    const char *method = NULL;
    json_t *id = NULL;
    char why[160];
    switch (rpc_classify(msg, &method, &id, why, sizeof why)) {
    case RPC_KIND_INVALID:
        reply(srv, rpc_error(id, RPC_INVALID_REQUEST, "invalid request: %s", why));
        return;
    case RPC_KIND_RESPONSE:
        elicit_answer(srv, msg); /* all we ask the client about is a tools.ask call */
        return;
    case RPC_KIND_NOTIFICATION:
        if (strcmp(method, "notifications/cancelled") == 0)
            cancel(srv, json_object_get(msg, "params"));
        return; /* initialized and the rest need nothing from us */
    case RPC_KIND_REQUEST:
        request(srv, method, id, json_object_get(msg, "params"));
        return;
    }
}

static void on_garbage(void *ctx, struct rpc_stream *s, const char *line, size_t len,
                       bool oversized, const char *why)
{
    (void)s;
    struct server *srv = ctx;
    if (srv->stopping)
        return;
    if (!oversized) {
        reply(srv, rpc_error(NULL, RPC_PARSE_ERROR, "parse error: %s", why));
        return;
    }
    /*
     * The request is gone, but its id may be read from what is left of it,
     * unless that could be the id of a call still running, which would then
     * seem answered.
     */
    json_t *id = NULL;
    long long guess = rpc_guess_id(line, len);
    if (guess >= 0) {
        id = json_integer(guess);
        if (find_call(srv, id)) {
            json_decref(id);
            id = NULL;
        }
    }
    reply(srv,
          rpc_error(id, RPC_INVALID_REQUEST, "message refused: %s (tools.max_message_bytes)", why));
    json_decref(id);
}

static void on_closed(void *ctx, struct rpc_stream *s, bool output_failed)
{
    (void)s;
    struct server *srv = ctx;
    if (output_failed) {
        /* Nobody is left to answer: stop the runs. */
        srv->output_failed = true;
        stop(srv, false);
        return;
    }
    /* The client is done asking; what it asked is still answered. */
    srv->input_done = true;
    maybe_finish(srv);
}

static const struct rpc_handlers handlers = {
    .message = on_message,
    .garbage = on_garbage,
    .closed = on_closed,
};

/* ---- setup ---- */

static void server_release(struct server *srv)
{
    /* Any run still here (the loop failed) is killed and reaped. */
    jobs_free(srv->jobs);
    while (srv->calls) {
        struct call *c = srv->calls;
        srv->calls = c->next;
        call_free(c);
    }
    if (srv->rpc)
        rpc_stream_free(srv->rpc);
    if (srv->sig_term)
        event_free(srv->sig_term);
    if (srv->sig_int)
        event_free(srv->sig_int);
    if (srv->drain_ev)
        event_free(srv->drain_ev);
    if (srv->audit) {
        struct cordon_err ignored;
        audit_close(srv->audit, &ignored);
        audit_free(srv->audit);
    }
    json_decref(srv->tools);
    free(srv->instructions);
    decider_free(srv->decider);
    json_decref(srv->elicit_allowed);
    if (srv->base)
        event_base_free(srv->base);
}

static int server_init(struct server *srv, const struct policy *p, unsigned pool,
                       struct cordon_err *err)
{
    /*
     * A shallow copy: its pointers stay the caller's, borrowed for the
     * session and never freed through it. Only a scalar differs: a model's
     * code must not be able to run forever when the policy sets no limit.
     */
    srv->pol = *p;
    if (srv->pol.limits.wall_ms == 0 || (srv->pol.limits.defaulted & (1u << POLICY_LIMIT_WALL)))
        srv->pol.limits.wall_ms = DEFAULT_WALL_MS;

    /* What every call would meet, met once now: a policy this host cannot
     * enforce (a limit without a cgroup, a level it lacks) fails the session
     * at its start, with the reason, not each call after it. Prepared and
     * released, a run leaves nothing: no process, cgroup or audit record. */
    struct run *trial = NULL;
    if (run_prepare(&srv->pol, NULL, &trial, err) < 0)
        return err_prefix(err, "this host cannot enforce the policy");
    run_release(trial);

    if (cordon_audit_open(p, &srv->audit, err) < 0)
        return -1;
    if ((p->gov.decider || p->gov.decider_command) &&
        !(srv->decider =
              decider_new(p->gov.decider, p->gov.decider_command, p->gov.decider_timeout_ms, err)))
        return -1;
    srv->elicit_allowed = json_object();
    srv->tools = tool_list(&srv->pol);
    srv->instructions = instructions(&srv->pol);
    if (!srv->tools || !srv->instructions)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");

    srv->base = rpc_event_base_new();
    if (!srv->base)
        return err_set(err, CORDON_E_INTERNAL, "cannot create the event loop");
    struct jobs_config jc = {
        .base = srv->base,
        .policy = &srv->pol,
        .max_running = MAX_RUNNING,
        .max_queued = MAX_QUEUED,
        .output_cap = (size_t)(srv->pol.tools.max_result_bytes / 2),
        .done = on_job_done,
        .pool = pool,
    };
    if (!(srv->jobs = jobs_new(&jc, err)))
        return -1;

    /* Our own descriptors, so that ending the stream does not close fds 0 and 1. */
    int in = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
    if (in < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot use stdin");
    int out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (out < 0) {
        close(in);
        return err_sys(err, CORDON_E_SETUP, "cannot use stdout");
    }
    srv->rpc =
        rpc_stream_new(srv->base, in, out, (size_t)p->tools.max_message_bytes, &handlers, srv, err);
    if (!srv->rpc) {
        close(in);
        close(out);
        return -1;
    }
    /* A client that stops reading stops being read: answers do not pile up. */
    rpc_stream_throttle(srv->rpc, srv->rpc);
    srv->sig_term = evsignal_new(srv->base, SIGTERM, on_signal, srv);
    srv->sig_int = evsignal_new(srv->base, SIGINT, on_signal, srv);
    srv->drain_ev = evtimer_new(srv->base, on_drain, srv);
    if (!srv->sig_term || !srv->sig_int || !srv->drain_ev ||
        evsignal_add(srv->sig_term, NULL) < 0 || evsignal_add(srv->sig_int, NULL) < 0)
        return err_set(err, CORDON_E_INTERNAL, "cannot watch for signals");
    return 0;
}

int mcp_serve(const struct policy *p, unsigned pool, struct cordon_err *err)
{
    /* A client that goes away must not kill us in the middle of a write. */
    signal(SIGPIPE, SIG_IGN);
    struct server srv = { 0 };
    if (server_init(&srv, p, pool, err) < 0) {
        server_release(&srv);
        return -1;
    }
    int rc = event_base_dispatch(srv.base);
    server_release(&srv);
    if (rc < 0)
        return err_set(err, CORDON_E_INTERNAL, "the event loop failed");
    return 0;
}
