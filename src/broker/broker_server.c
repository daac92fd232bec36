/*
 * broker/broker_server.c: `cordon mcp wrap`, what the sandboxed server says:
 * its answers (tools filtered by the allowlist and the pins), its requests
 * and notifications, and its garbage. Everything here is hostile input.
 */
#include "broker/broker_int.h"

#include "broker/schema.h"
#include "common/digest.h"
#include "common/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- server to client ---- */

/*
 * The server's identity for its pins: the name it gives in initialize. Its
 * command line is left out on purpose: a server restarted with other
 * arguments would otherwise be new, and trusted on first use again, while
 * a server claiming another's name gains nothing: its tools must match
 * that server's pins.
 */
static void pins_identify(struct broker *b, const json_t *info)
{
    if (!b->pins || b->pins_server_set)
        return;
    const char *name = json_string_value(json_object_get(info, "name"));
    char id[200];
    snprintf(id, sizeof id, "%.190s", name && *name ? name : "(unnamed)");
    mcp_pins_set_server(b->pins, id);
    b->pins_server_set = true;
}

/* Is TOOL as listed what was pinned? If not it is hidden, and the change recorded once. */
static bool pin_allows(struct broker *b, const json_t *tool)
{
    if (!b->pins)
        return true;
    pins_identify(b, NULL);
    const char *name = json_string_value(json_object_get(tool, "name"));
    char digest[65], old[65];
    enum pin_verdict v = mcp_pins_check(b->pins, tool, digest, old);
    if (v == PIN_OK || v == PIN_FIRST) {
        json_object_del(b->hidden, name);
        return true;
    }
    const char *seen = json_string_value(json_object_get(b->hidden, name));
    if (!seen || strcmp(seen, digest) != 0)
        record(b, "mcp.tool_changed",
               json_pack("{s:s, s:s, s:s, s:s?}", "tool", name, "change", pin_verdict_name(v),
                         "digest", digest, "pinned", old[0] ? old : NULL));
    json_object_set_new(b->hidden, name, json_string(digest));
    /* A schema learnt from an earlier listing must not let a call through now. */
    json_object_del(b->schemas, name);
    return false;
}

/* Keep only allowed tools in a tools/list result, and learn their schemas. */
static void filter_tools(struct broker *b, json_t *result)
{
    bool last_page = !json_is_string(json_object_get(result, "nextCursor"));
    json_t *tools = json_object_get(result, "tools");
    if (!json_is_array(tools)) {
        json_object_set_new(result, "tools", json_array());
        return;
    }
    _cleanup_(json_decrefp) json_t *kept = json_array();
    size_t i;
    json_t *t;
    bool over = false;
    json_array_foreach(tools, i, t)
    {
        json_t *name = json_object_get(t, "name");
        json_t *schema = json_object_get(t, "inputSchema");
        if (!json_is_string(name) || !json_is_object(schema))
            continue;
        if (!policy_tool_allowed(b->p, json_string_value(name)) || !pin_allows(b, t))
            continue;
        /* Pages of new names would otherwise be kept without end (with allow: ["*"]). */
        json_t *old = json_object_get(b->schemas, json_string_value(name));
        size_t size = json_dumpb(schema, NULL, 0, JSON_COMPACT);
        size_t old_size = old ? json_dumpb(old, NULL, 0, JSON_COMPACT) : 0;
        if ((!old && json_object_size(b->schemas) >= MAX_TOOLS) ||
            b->schema_bytes - old_size + size > SCHEMA_BYTES_MAX) {
            over = true;
            continue;
        }
        b->schema_bytes = b->schema_bytes - old_size + size;
        json_object_set(b->schemas, json_string_value(name), schema);
        json_array_append(kept, t);
    }
    if (over)
        violation(b, "server", "tool schemas past the broker's budget, left out");
    json_object_set(result, "tools", kept);
    if (b->pins) {
        struct cordon_err e;
        if (last_page)
            mcp_pins_first_done(b->pins);
        if (mcp_pins_save(b->pins, &e) < 0)
            violation(b, "broker", e.msg);
    }
}

/* What the client may learn the server can do. */
static void filter_capabilities(const struct policy *p, json_t *result)
{
    json_t *caps = json_object_get(result, "capabilities");
    if (!json_is_object(caps))
        return;
    if (!p->tools.resources)
        json_object_del(caps, "resources");
    if (!p->tools.prompts)
        json_object_del(caps, "prompts");
    if (!p->tools.resources && !p->tools.prompts)
        json_object_del(caps, "completions");
    if (!p->tools.logging)
        json_object_del(caps, "logging");
    json_object_del(caps, "experimental");
    json_object_del(caps, "tasks");
}

static void own_list_answer(struct broker *b, json_t *msg)
{
    json_t *result = json_object_get(msg, "result");
    if (!json_is_object(result)) {
        b->listing = false;
        fail_waiting(b, "the server refused to list its tools");
        return;
    }
    _cleanup_(json_decrefp) json_t *copy = json_deep_copy(result);
    filter_tools(b, copy);
    json_t *cursor = json_object_get(result, "nextCursor");
    if (json_is_string(cursor) && ++b->list_pages < MAX_LIST_PAGES) {
        own_list_next(b, cursor);
        return;
    }
    b->listing = false;
    b->schemas_complete = true;
    run_waiting(b);
}

/*
 * A session that forwards no tool at all is a mistake the person who set it
 * up needs to see, and the client's log is where they look: the warning
 * goes first into the initialize result's instructions.
 */
static void warn_no_tools(json_t *result)
{
    static const char note[] =
        "cordon: this session forwards no tools: tools.allow is empty, so every tool of the "
        "wrapped server is hidden; allow some with --allow-tool NAME or the policy's tools.allow.";
    const char *theirs = json_string_value(json_object_get(result, "instructions"));
    _cleanup_free_ char *text = NULL;
    if (theirs && *theirs && asprintf(&text, "%s\n\n%s", note, theirs) < 0)
        text = NULL;
    json_object_set_new(result, "instructions", json_string(text ? text : note));
}

/*
 * tools.allow names tools, but none the server lists: the client is told
 * once, as a log message (MCP's notifications/message), and so is stderr.
 * The initialize result's instructions cannot say it: the server's tools
 * are not known then.
 */
static void warn_unmatched(struct broker *b, size_t listed)
{
    if (b->warned_unmatched)
        return;
    b->warned_unmatched = true;
    char text[300];
    snprintf(text, sizeof text,
             "cordon: this session forwards no tools: tools.allow matches none of the %zu "
             "tool%s the server lists; allow some with --allow-tool NAME or the policy's "
             "tools.allow.",
             listed, listed == 1 ? "" : "s");
    fprintf(stderr, "%s\n", text);
    /* clang-format off */
    to_client(b, json_pack("{s:s, s:s, s:{s:s, s:s, s:s}}", "jsonrpc", "2.0", "method",
                           "notifications/message", "params", "level", "warning", "logger",
                           "cordon", "data", text));
    /* clang-format on */
}

static void client_answer(struct broker *b, struct pending *q, json_t *msg)
{
    size_t listed = 0;      /* tools/list: what the server listed */
    bool unmatched = false; /* ... and none of it is allowed */
    _cleanup_(json_decrefp) json_t *copy = json_deep_copy(msg);
    json_object_set(copy, "id", q->cid);
    json_t *result = json_object_get(copy, "result");
    if (json_is_object(result)) {
        if (!strcmp(q->method, "initialize")) {
            filter_capabilities(b->p, result);
            if (b->p->tools.n_allow == 0)
                warn_no_tools(result);
            json_t *info = json_object_get(result, "serverInfo");
            json_t *version = json_object_get(result, "protocolVersion");
            if (recorded_size(info) > RECORDED_INFO_MAX)
                info = json_string("(too large to record)");
            else
                json_incref(info);
            if (recorded_size(version) > RECORDED_INFO_MAX)
                version = NULL;
            pins_identify(b, json_is_object(info) ? info : NULL);
            record(b, "mcp.session",
                   json_pack("{s:o?, s:O?}", "server", info, "protocol_version", version));
        } else if (!strcmp(q->method, "tools/list")) {
            json_t *tools = json_object_get(result, "tools"), *t;
            size_t i, matched = 0;
            listed = json_is_array(tools) ? json_array_size(tools) : 0;
            json_array_foreach(tools, i, t)
            {
                const char *name = json_string_value(json_object_get(t, "name"));
                matched += name && policy_tool_allowed(b->p, name);
            }
            filter_tools(b, result);
            unmatched = listed && !matched && b->p->tools.n_allow &&
                json_object_size(b->schemas) == 0 &&
                !json_is_string(json_object_get(result, "nextCursor"));
        }
    } else if (result && !strcmp(q->method, "tools/list")) {
        json_object_set_new(copy, "result", json_pack("{s:[]}", "tools"));
    }
    if (q->tool[0]) {
        _cleanup_free_ char *text = result ? json_dumps(result, JSON_COMPACT) : NULL;
        json_int_t size = text ? (json_int_t)strlen(text) : 0;
        int is_error = json_is_true(json_object_get(result, "isError")) || !result;
        if ((uint64_t)size > b->p->tools.max_result_bytes) {
            char why[200];
            snprintf(why, sizeof why,
                     "cordon: the tool's result (%lld bytes) exceeds max_result_bytes (%llu)",
                     (long long)size, (unsigned long long)b->p->tools.max_result_bytes);
            record_call(b, q->tool, "allowed", "max_result_bytes", why, q->args_digest, q->args,
                        ms_since(&q->start), size, 1);
            to_client(b, rpc_result(q->cid, rpc_tool_error("%s", why)));
            return;
        }
        record_call(b, q->tool, "allowed", NULL, NULL, q->args_digest, q->args, ms_since(&q->start),
                    size, is_error);
    }
    to_client(b, json_incref(copy));
    if (unmatched)
        warn_unmatched(b, listed);
}

static void server_response(struct broker *b, json_t *msg, json_t *id)
{
    struct pending *q = json_is_integer(id) ? pending_take(b, json_integer_value(id)) : NULL;
    if (!q) {
        violation(b, "server", "a response to a request never made (or already answered)");
        return;
    }
    if (q->kind == PENDING_OWN_LIST)
        own_list_answer(b, msg);
    else
        client_answer(b, q, msg);
    pending_free(q);
}

static void server_request(struct broker *b, json_t *msg, const char *method, json_t *id)
{
    if (!strcmp(method, "ping")) {
        to_server(b, rpc_result(id, json_object()));
        return;
    }
    if (!server_request_allowed(b->p, method)) {
        refused_method(b, "server", method);
        to_server(
            b, rpc_error(id, RPC_METHOD_NOT_FOUND, "cordon: %s is not allowed by policy", method));
        return;
    }
    _cleanup_free_ char *key = json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
    if (json_object_size(b->server_requests) >= MAX_IN_FLIGHT) {
        violation(b, "server", "too many requests in flight");
        to_server(b, rpc_error(id, RPC_INVALID_REQUEST, "cordon: too many requests in flight"));
        return;
    }
    if (!key || json_object_get(b->server_requests, key)) {
        violation(b, "server", "a request id already in flight");
        to_server(b, rpc_error(id, RPC_INVALID_REQUEST, "request id already in use"));
        return;
    }
    json_object_set_new(b->server_requests, key, json_true());
    to_client(b, json_incref(msg));
}

static void server_notification(struct broker *b, json_t *msg, const char *method)
{
    if (!notification_allowed(b->p, method, true))
        return;
    if (!strcmp(method, "notifications/tools/list_changed")) {
        json_object_clear(b->schemas);
        b->schema_bytes = 0;
        b->schemas_complete = false;
    }
    if (!strcmp(method, "notifications/cancelled")) {
        /* Only for a request the server itself made. */
        json_t *rid = json_object_get(json_object_get(msg, "params"), "requestId");
        _cleanup_free_ char *key = rid ? json_dumps(rid, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        if (!key || !json_object_get(b->server_requests, key))
            return;
        json_object_del(b->server_requests, key);
    }
    to_client(b, json_incref(msg));
}

void on_server_message(void *ctx, struct rpc_stream *s, json_t *msg)
{
    (void)s;
    struct broker *b = ctx;
    const char *method;
    json_t *id;
    char why[160];
    switch (rpc_classify(msg, &method, &id, why, sizeof why)) {
    case RPC_KIND_REQUEST:
        server_request(b, msg, method, id);
        break;
    case RPC_KIND_NOTIFICATION:
        server_notification(b, msg, method);
        break;
    case RPC_KIND_RESPONSE:
        server_response(b, msg, id);
        break;
    case RPC_KIND_INVALID: {
        violation(b, "server", why);
        /* A malformed answer to one of ours still ends that request. */
        struct pending *q = json_is_integer(id) ? pending_take(b, json_integer_value(id)) : NULL;
        if (q && q->kind == PENDING_CLIENT)
            to_client(b,
                      rpc_error(q->cid, RPC_INTERNAL_ERROR,
                                "cordon: the server sent an invalid response: %s", why));
        if (q && q->kind == PENDING_OWN_LIST) {
            b->listing = false;
            fail_waiting(b, "the server sent an invalid tool list");
        }
        if (q)
            pending_free(q);
        break;
    }
    }
}

void on_server_garbage(void *ctx, struct rpc_stream *s, const char *line, size_t len,
                       bool oversized, const char *why)
{
    (void)s;
    struct broker *b = ctx;
    violation(b, "server", why);
    if (!oversized)
        return;
    /* Most likely an answer too large to carry: end the request it answered. */
    long long sid = rpc_guess_id(line, len);
    struct pending *q = sid > 0 ? pending_take(b, sid) : NULL;
    if (!q)
        return;
    if (q->kind == PENDING_CLIENT) {
        char text[200];
        snprintf(text, sizeof text, "cordon: the server's answer exceeds max_message_bytes (%llu)",
                 (unsigned long long)b->p->tools.max_message_bytes);
        if (q->tool[0]) {
            record_call(b, q->tool, "allowed", "max_message_bytes", text, q->args_digest, q->args,
                        ms_since(&q->start), -1, 1);
            to_client(b, rpc_result(q->cid, rpc_tool_error("%s", text)));
        } else {
            to_client(b, rpc_error(q->cid, RPC_INTERNAL_ERROR, "%s", text));
        }
    } else {
        b->listing = false;
        fail_waiting(b, "the server's tool list exceeds max_message_bytes");
    }
    pending_free(q);
}
