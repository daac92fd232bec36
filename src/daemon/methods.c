/*
 * daemon/methods.c: `cordon serve`'s JSON-RPC methods but a run's own
 * (calls.c) and the sessions' (sessions.c): cancel, policy.check, stats,
 * kill_all, and the dispatch of every request a connection sends.
 */
#include "daemon/sandboxd.h"
#include "daemon/daemon_int.h"

#include "common/jsonrpc.h"
#include "common/cleanup.h"
#include "common/hostpath.h"
#include "common/strv.h"
#include "common/text.h"
#include "audit/audit.h"
#include "core/killall.h"
#include "core/run.h"
#include "core/jobs.h"
#include "daemon/live.h"
#include "daemon/workspace_files.h"
#include "sandbox/backend.h"
#include "sandbox/txn.h"

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---- the other methods ---- */

static void method_cancel(struct client *c, const json_t *id, const json_t *params)
{
    json_t *target = json_object_get(params, "id"), *run_id = json_object_get(params, "run_id");
    if ((!target && !json_is_string(run_id)) || (target && run_id)) {
        if (id)
            daemon_reply(c,
                         rpc_error(id, RPC_INVALID_PARAMS,
                                   "cancel: give the \"id\" of a run request, or its \"run_id\""));
        return;
    }
    for (struct call *call = c->calls; call; call = call->next) {
        bool match = target ? json_equal(call->id, target)
                            : strcmp(job_run_id(call->job), json_string_value(run_id)) == 0;
        if (!match)
            continue;
        if (!job_stop(call->job, false)) {
            /* It never started: answered here, as cancelled. */
            daemon_unlink_call(call);
            daemon_reply(
                c, rpc_error(call->id, RPC_REQUEST_TIMEOUT, "run: cancelled before it started"));
            daemon_call_free(call);
        }
        if (id)
            daemon_reply(c, rpc_result(id, json_pack("{s:b}", "cancelled", 1)));
        return;
    }
    if (id)
        daemon_reply(c, rpc_result(id, json_pack("{s:b}", "cancelled", 0)));
}

static void method_policy_check(struct client *c, const json_t *id, const json_t *params)
{
    json_t *text = json_object_get(params, "policy");
    if (text && !json_is_string(text)) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS,
                               "policy.check: \"policy\" must be a "
                               "string (YAML or JSON)"));
        return;
    }
    char digest[65];
    if (!text) {
        policy_digest_hex(c->d->cfg.policy, digest);
        daemon_reply(c,
                     rpc_result(id,
                                json_pack("{s:b, s:s, s:o}", "ok", 1, "digest", digest, "policy",
                                          policy_to_json(c->d->cfg.policy))));
        return;
    }
    struct cordon_err err = { 0 };
    _cleanup_(policy_freep) struct policy *p =
        policy_load_string(json_string_value(text), json_string_length(text), "policy", &err);
    if (!p || policy_finalize(p, &err) < 0) {
        daemon_reply(c, rpc_result(id, json_pack("{s:b, s:s}", "ok", 0, "error", err.msg)));
        return;
    }
    policy_digest_hex(p, digest);
    char ours[65];
    policy_digest_hex(c->d->cfg.policy, ours);
    daemon_reply(
        c,
        rpc_result(id,
                   json_pack("{s:b, s:s, s:b, s:o}", "ok", 1, "digest", digest, "same_as_daemon",
                             strcmp(digest, ours) == 0, "policy", policy_to_json(p))));
}

static json_t *stats_json(struct daemon *d)
{
    struct jobs_stats st;
    jobs_get_stats(d->jobs, &st);
    /* clang-format off */
    json_t *o = json_pack("{s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I}, "
                     "s:{s:I, s:I, s:I, s:I, s:I, s:I}}",
                     "pool", "target", (json_int_t)st.pool_target, "ready",
                     (json_int_t)st.pool_ready, "preparing", (json_int_t)st.pool_preparing,
                     "failures", (json_int_t)st.pool_failures,
                     "runs", "running", (json_int_t)st.running, "queued", (json_int_t)st.queued,
                     "tearing_down", (json_int_t)st.tearing_down,
                     "started", (json_int_t)st.started, "pooled", (json_int_t)st.pooled, "cold",
                     (json_int_t)st.cold,
                     "start_latency_us", "p50", (json_int_t)st.start_p50_us, "p99",
                     (json_int_t)st.start_p99_us,
                     "refusals", "busy", (json_int_t)d->busy, "bad_requests",
                     (json_int_t)d->bad_requests, "peers", (json_int_t)d->refused_peers,
                     "connections", (json_int_t)d->refused_connections, "open_connections",
                     (json_int_t)d->n_clients, "requests", (json_int_t)d->requests);
    /* clang-format on */
    /* Boxes (process.start's own and live sessions') and unfinished messages, as bounded. */
    json_object_set_new(o, "sandboxes",
                        json_pack("{s:I, s:I}", "running", (json_int_t)d->n_boxes, "max",
                                  (json_int_t)d->cfg.max_running));
    json_object_set_new(o, "buffered",
                        json_pack("{s:I, s:I}", "bytes", (json_int_t)d->buffered.used, "max",
                                  (json_int_t)d->buffered.max));
    return o;
}

/* kill_all: every running sandbox this daemon's user may signal ends, recorded
 * in the policy's audit log (cordon kill --all over the socket). */
static void method_kill_all(struct client *c, const json_t *id, const json_t *params)
{
    /* It ends every uid's calls: what the daemon's own user could do outside
     * the socket anyway, and an admin may; any other peer cancels its own calls. */
    if (!c->admin && c->uid != geteuid()) {
        daemon_reply(c,
                     rpc_error(id, RPC_FORBIDDEN,
                               "kill_all: only the daemon's user or an "
                               "--admin-uid may stop every run"));
        return;
    }
    json_t *why = json_object_get(params, "reason");
    if (why && !json_is_string(why)) {
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "kill_all: \"reason\" must be a string"));
        return;
    }
    struct cordon_err err = { 0 };
    struct audit_log *log = NULL;
    struct killall_report *r = calloc(1, sizeof *r);
    if (!r || cordon_audit_open(c->d->cfg.policy, &log, &err) < 0 ||
        run_kill_all(log, why ? json_string_value(why) : "daemon kill_all", r, &err) < 0)
        daemon_reply(
            c, rpc_error(id, RPC_INTERNAL_ERROR, "kill_all: %s", r ? err.msg : "out of memory"));
    else
        daemon_reply(c, rpc_result(id, killall_report_json(r)));
    if (log) {
        struct cordon_err ignored;
        audit_close(log, &ignored);
        audit_free(log);
    }
    free(r);
}

static void daemon_request(struct client *c, const char *method, const json_t *id,
                           const json_t *params)
{
    if (params && !json_is_object(params)) {
        c->d->bad_requests++;
        if (id)
            daemon_reply(c,
                         rpc_error(id, RPC_INVALID_PARAMS, "%s: params must be an object", method));
        return;
    }
    json_t *empty = params ? NULL : json_object();
    if (!params)
        params = empty;
    if (strcmp(method, "cancel") == 0)
        method_cancel(c, id, params);
    else if (!id)
        ; /* other notifications ask for nothing we do */
    else if (strcmp(method, "run") == 0)
        daemon_method_run(c, id, params, NULL);
    else if (strncmp(method, "session.", 8) == 0)
        sessions_method(c, method + 8, id, params);
    else if (strncmp(method, "process.", 8) == 0)
        process_method(c, method + 8, id, params);
    else if (strcmp(method, "policy.check") == 0)
        method_policy_check(c, id, params);
    else if (strcmp(method, "health") == 0)
        daemon_reply(
            c,
            rpc_result(id,
                       json_pack("{s:b, s:s, s:b, s:f, s:o?}", "ok", !c->d->draining, "version",
                                 CORDON_VERSION, "draining", c->d->draining, "uptime_s",
                                 (double)(daemon_now_us() - c->d->started_us) / 1e6, "sandboxd",
                                 sandboxd_addresses(c->d))));
    else if (strcmp(method, "stats") == 0)
        daemon_reply(c, rpc_result(id, stats_json(c->d)));
    else if (strcmp(method, "kill_all") == 0)
        method_kill_all(c, id, params);
    else {
        c->d->bad_requests++;
        char quoted[96];
        snprintf(quoted, sizeof quoted, "%.64s", method);
        daemon_reply(c, rpc_error(id, RPC_METHOD_NOT_FOUND, "unknown method \"%s\"", quoted));
    }
    json_decref(empty);
}

static void on_message(void *ctx, struct rpc_stream *s, json_t *msg)
{
    (void)s;
    struct client *c = ctx;
    const char *method = NULL;
    json_t *id = NULL;
    char why[200];
    c->d->requests++;
    switch (rpc_classify(msg, &method, &id, why, sizeof why)) {
    case RPC_KIND_REQUEST:
        daemon_request(c, method, id, json_object_get(msg, "params"));
        break;
    case RPC_KIND_NOTIFICATION:
        daemon_request(c, method, NULL, json_object_get(msg, "params"));
        break;
    case RPC_KIND_RESPONSE:
        break; /* we ask nothing */
    case RPC_KIND_INVALID:
        c->d->bad_requests++;
        daemon_reply(c, rpc_error(id, RPC_INVALID_REQUEST, "invalid request: %s", why));
        break;
    }
}

static void on_garbage(void *ctx, struct rpc_stream *s, const char *line, size_t len,
                       bool oversized, const char *why)
{
    (void)s;
    (void)line;
    (void)len;
    struct client *c = ctx;
    c->d->bad_requests++;
    if (oversized) /* WHY names the size */
        daemon_reply(c, rpc_error(NULL, RPC_INVALID_REQUEST, "%s", why));
    else
        daemon_reply(c, rpc_error(NULL, RPC_PARSE_ERROR, "parse error: %s", why));
}

/* Its unfinished message would take its user's or the daemon's buffer past the budget. */
static void on_over_budget(void *ctx, struct rpc_stream *s, const char *head, size_t len)
{
    (void)s;
    struct client *c = ctx;
    long long guess = rpc_guess_id(head, len);
    json_t *id = guess >= 0 ? json_integer(guess) : NULL;
    c->d->busy++;
    daemon_reply(c,
                 rpc_error(id, RPC_BUSY,
                           "busy: unfinished messages fill the daemon's buffer (at most %zu "
                           "bytes, %zu for one user); this one is discarded as it arrives: "
                           "send it again",
                           c->d->cfg.max_buffered, daemon_uid_share(c->d->cfg.max_buffered)));
    json_decref(id);
}

static void on_closed(void *ctx, struct rpc_stream *s, bool output_failed)
{
    (void)s;
    (void)output_failed;
    daemon_client_drop(ctx);
}

/* The client reads again: the processes it holds back may go on. */
static void on_drained(void *ctx, struct rpc_stream *s)
{
    (void)s;
    struct client *c = ctx;
    lproc_drained(c->d, c);
}

const struct rpc_handlers daemon_rpc_handlers = {
    .message = on_message,
    .garbage = on_garbage,
    .closed = on_closed,
    .drained = on_drained,
    .over_budget = on_over_budget,
};
