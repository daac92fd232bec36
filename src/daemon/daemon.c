/*
 * daemon/daemon.c: `cordon serve` (see daemon.h). One event loop in the
 * daemon's process: a listening unix socket, one JSON-RPC stream per
 * connection (common/jsonrpc.h: lines capped, a peer that does not read is
 * not read), and the jobs module's queue and warm pool underneath. A
 * connection is only ever answered; nothing one does reaches another
 * beyond the shared queue, whose limit is answered "busy".
 */
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
#include <openssl/evp.h>

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

/* argv, the environment and stdin of one call, decoded; beyond: refused. */
#define MAX_ARGS 4096
#define MAX_ENV 1024
#define MAX_TIMEOUT_S 86400.0

uint64_t daemon_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- bytes as JSON ---- */

/* DATA as a JSON string: itself when it is UTF-8, base64 otherwise (*B64 says which). */
json_t *daemon_bytes_json(const char *data, size_t len, bool *b64)
{
    json_t *s = json_stringn(data ? data : "", len);
    *b64 = s == NULL;
    if (s)
        return s;
    size_t out_len = 4 * ((len + 2) / 3) + 1;
    char *out = malloc(out_len);
    if (!out)
        return NULL;
    EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)data, (int)len);
    s = json_string(out);
    free(out);
    return s;
}

/* Decode base64 TEXT into *OUT (malloc'd); -1 when it is not base64. */
int daemon_base64_decode(const char *text, size_t len, char **out, size_t *out_len)
{
    if (len % 4)
        return -1;
    unsigned char *buf = malloc(len / 4 * 3 + 1);
    if (!buf)
        return -1;
    int n = EVP_DecodeBlock(buf, (const unsigned char *)text, (int)len);
    if (n < 0) {
        free(buf);
        return -1;
    }
    /* EVP_DecodeBlock counts the padding as data. */
    for (size_t i = len; i > 0 && text[i - 1] == '=' && n > 0; i--)
        n--;
    *out = (char *)buf;
    *out_len = (size_t)n;
    return 0;
}

/* ---- connections ---- */

void daemon_reply(struct client *c, json_t *msg)
{
    if (c && !c->gone && msg)
        rpc_send(c->s, msg);
    json_decref(msg);
}

static void call_free(struct call *call)
{
    if (!call)
        return;
    if (call->session) {
        call->session->running--;
        call->session->used_us = daemon_now_us();
    }
    json_decref(call->id);
    free(call);
}

static void unlink_call(struct call *call)
{
    struct client *c = call->client;
    if (!c)
        return;
    for (struct call **pp = &c->calls; *pp; pp = &(*pp)->next)
        if (*pp == call) {
            *pp = call->next;
            c->n_calls--;
            break;
        }
    call->client = NULL;
}

static void on_reap_clients(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct daemon *d = arg;
    while (d->dead) {
        struct client *c = d->dead;
        d->dead = c->next;
        rpc_stream_free(c->s);
        free(c);
    }
    daemon_maybe_finish(d);
}

/* The client is gone (or we are done with it): its calls stop, it is freed off the stack. */
static void client_drop(struct client *c)
{
    struct daemon *d = c->d;
    if (c->gone)
        return;
    c->gone = true;
    while (c->calls) {
        struct call *call = c->calls;
        unlink_call(call);
        /* A queued job is dropped here; a running one still calls back, to no one. */
        if (!call->job || !job_stop(call->job, false))
            call_free(call);
    }
    sessions_client_gone(d, c);
    lproc_detach_all(d, c);
    live_client_gone(d, c);
    for (struct client **pp = &d->clients; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    d->n_clients--;
    c->next = d->dead;
    d->dead = c;
    struct timeval zero = { 0, 0 };
    evtimer_add(d->reap_ev, &zero);
}

/* ---- run ---- */

static const struct {
    const char *language;
    const char *argv[2];
} languages[] = {
    { "python", { "python3", "-c" } },
    { "node", { "node", "-e" } },
    { "sh", { "sh", "-c" } },
};

struct run_request {
    char **argv;
    char **envp;
    char *input;
    size_t input_len;
    struct start_file *files;     /* paths borrowed from the request; data owned when decoded */
    char **decoded;
    size_t n_files;
    struct job_call call;
};

static void run_request_release(struct run_request *r)
{
    strv_free(r->argv);
    strv_free(r->envp);
    free(r->input);
    for (size_t i = 0; r->decoded && i < r->n_files; i++)
        free(r->decoded[i]);
    free(r->decoded);
    free(r->files);
}


/* "files": {"path": "text"} or {"path": {"content" | "content_base64": ..., "mode": 0755}}. */
static int parse_files(const json_t *files, struct run_request *r, char *why, size_t len)
{
    if (!json_is_object(files))
        return why_printf(why, len, "%s", "\"files\" must be an object of path: content");
    size_t n = json_object_size(files);
    if (n > START_MAX_FILES)
        return why_printf(why, len, "\"files\" has more than %u entries", START_MAX_FILES);
    r->files = calloc(n + 1, sizeof *r->files);
    r->decoded = calloc(n + 1, sizeof *r->decoded);
    if (!r->files || !r->decoded)
        return why_printf(why, len, "%s", "out of memory");
    const char *path;
    json_t *v;
    json_object_foreach((json_t *)files, path, v) {
        char pwhy[200];
        if (wsfile_check_path(path, pwhy, sizeof pwhy) < 0)
            return why_printf(why, len, "\"files\": %s", pwhy);
        struct start_file *f = &r->files[r->n_files++];
        f->path = path;
        json_t *text = json_is_string(v) ? v : json_object_get(v, "content");
        json_t *b64 = json_is_object(v) ? json_object_get(v, "content_base64") : NULL;
        json_t *mode = json_is_object(v) ? json_object_get(v, "mode") : NULL;
        if (!text == !b64 || (text && !json_is_string(text)) || (b64 && !json_is_string(b64)) ||
            (mode && (!json_is_integer(mode) || json_integer_value(mode) < 0 ||
                      json_integer_value(mode) > 0777)))
            return why_printf(why, len, "\"files\".%.64s: give a string, or \"content\" or "
                                 "\"content_base64\" and a \"mode\" up to 0777", path);
        f->mode = mode ? (unsigned)json_integer_value(mode) : 0644;
        if (text) {
            f->data = json_string_value(text);
            f->len = json_string_length(text);
        } else if (daemon_base64_decode(json_string_value(b64), json_string_length(b64),
                                 &r->decoded[r->n_files - 1], &f->len) < 0) {
            return why_printf(why, len, "\"files\".%.64s: \"content_base64\" is not base64", path);
        } else {
            f->data = r->decoded[r->n_files - 1];
        }
    }
    r->call.files = r->files;
    r->call.n_files = r->n_files;
    return 0;
}


/* "argv", or "code" and "language", as an argv of our own (*OUT, malloc'd). */
int daemon_parse_command(const json_t *params, char ***out, char *why, size_t len)
{
    json_t *argv = json_object_get(params, "argv"), *code = json_object_get(params, "code"),
           *lang = json_object_get(params, "language");
    if (!argv == !code)
        return why_printf(why, len, "%s", "give either \"argv\" or \"code\" and \"language\"");
    size_t n = 0;
    const char *fixed[2] = { NULL, NULL };
    if (argv) {
        if (!json_is_array(argv) || json_array_size(argv) == 0)
            return why_printf(why, len, "%s", "\"argv\" must be a non-empty array of strings");
        if (json_array_size(argv) > MAX_ARGS)
            return why_printf(why, len, "%s", "\"argv\" has too many arguments");
        n = json_array_size(argv);
    } else {
        if (!json_is_string(code))
            return why_printf(why, len, "%s", "\"code\" must be a string");
        size_t l = 0;
        while (l < sizeof languages / sizeof languages[0] &&
               !(json_is_string(lang) &&
                 strcmp(json_string_value(lang), languages[l].language) == 0))
            l++;
        if (l == sizeof languages / sizeof languages[0])
            return why_printf(why, len, "%s",
                              "\"language\" must be \"python\", \"node\" or \"sh\"");
        fixed[0] = languages[l].argv[0];
        fixed[1] = languages[l].argv[1];
        n = 3;
    }
    char **v = *out = calloc(n + 1, sizeof *v);
    if (!v)
        return why_printf(why, len, "%s", "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *s = argv ? json_string_value(json_array_get(argv, i))
                             : (i < 2 ? fixed[i] : json_string_value(code));
        size_t s_len = argv ? json_string_length(json_array_get(argv, i)) : s ? strlen(s) : 0;
        if (!s || (i == 0 && !*s) || strlen(s) != s_len)
            return why_printf(why, len, "%s", i == 0 ? "\"argv\"[0] must be a non-empty string"
                                              : "\"argv\" must hold strings without NUL bytes");
        if (!(v[i] = strdup(s)))
            return why_printf(why, len, "%s", "out of memory");
    }
    return 0;
}

/* "env": {NAME: VALUE} as NAME=VALUE entries (*OUT, malloc'd; NULL when ENV is). */
int daemon_parse_env(const json_t *env, char ***out, char *why, size_t len)
{
    if (!env)
        return 0;
    if (!json_is_object(env))
        return why_printf(why, len, "%s", "\"env\" must be an object of strings");
    if (json_object_size(env) > MAX_ENV)
        return why_printf(why, len, "%s", "\"env\" has too many entries");
    char **v = *out = calloc(json_object_size(env) + 1, sizeof *v);
    if (!v)
        return why_printf(why, len, "%s", "out of memory");
    size_t i = 0;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)env, key, val) {
        if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val))
            return why_printf(why, len, "\"env\".%.64s must be a string without NUL bytes", key);
        if (!*key || strchr(key, '=') || strlen(key) > 255)
            return why_printf(why, len, "\"env\" name \"%.64s\" is not a variable name", key);
        if (asprintf(&v[i++], "%s=%s", key, json_string_value(val)) < 0) {
            v[--i] = NULL;
            return why_printf(why, len, "%s", "out of memory");
        }
    }
    return 0;
}

static int parse_run(const json_t *params, struct run_request *r, char *why, size_t len,
                     bool session)
{
    static const char *const known[] = { "argv", "code", "language", "stdin", "stdin_base64",
                                         "env", "timeout", "stream", "files", "session_id" };
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)params, key, v) {
        size_t k = 0;
        while (k < sizeof known / sizeof known[0] - !session && strcmp(key, known[k]) != 0)
            k++;
        if (k == sizeof known / sizeof known[0] - !session)
            return why_printf(why, len, "unknown parameter \"%.64s\"", key);
    }
    json_t *files = json_object_get(params, "files");
    if (files && parse_files(files, r, why, len) < 0)
        return -1;
    if (daemon_parse_command(params, &r->argv, why, len) < 0)
        return -1;

    json_t *in = json_object_get(params, "stdin"), *in64 = json_object_get(params, "stdin_base64");
    if (in && in64)
        return why_printf(why, len, "%s", "give \"stdin\" or \"stdin_base64\", not both");
    if (in) {
        if (!json_is_string(in))
            return why_printf(why, len, "%s", "\"stdin\" must be a string");
        r->input_len = json_string_length(in);
        if (r->input_len && !(r->input = malloc(r->input_len)))
            return why_printf(why, len, "%s", "out of memory");
        if (r->input_len)
            memcpy(r->input, json_string_value(in), r->input_len);
    } else if (in64) {
        if (!json_is_string(in64) ||
            daemon_base64_decode(json_string_value(in64), json_string_length(in64), &r->input,
                          &r->input_len) < 0)
            return why_printf(why, len, "%s", "\"stdin_base64\" must be a base64 string");
    }
    if (daemon_parse_env(json_object_get(params, "env"), &r->envp, why, len) < 0)
        return -1;

    json_t *timeout = json_object_get(params, "timeout");
    if (timeout) {
        double t = json_number_value(timeout);
        if (!json_is_number(timeout) || !(t > 0) || t > MAX_TIMEOUT_S)
            return why_printf(why, len, "%s", "\"timeout\" must be a number of seconds, above 0 "
                                              "and at most 86400");
        r->call.wall_ms = (uint64_t)(t * 1000.0 + 0.5);
        if (!r->call.wall_ms)
            r->call.wall_ms = 1;
    }
    json_t *stream = json_object_get(params, "stream");
    if (stream && !json_is_boolean(stream))
        return why_printf(why, len, "%s", "\"stream\" must be true or false");
    r->call.stream = json_is_true(stream);
    r->call.argv = r->argv;
    r->call.envp = r->envp;
    r->call.input = r->input;
    r->call.input_len = r->input_len;
    return 0;
}

int daemon_check_call_options(const struct policy *p, uint64_t wall_ms, char *const *envp,
                              struct cordon_err *err)
{
    char ms[32];
    snprintf(ms, sizeof ms, "%llums", (unsigned long long)wall_ms);
    if (wall_ms && policy_check_tighten(p, "limits.wall", ms, "\"timeout\"", err) < 0)
        return -1;
    for (char *const *e = envp; e && *e; e++)
        TRY(policy_check_tighten(p, "env.set", *e, "\"env\"", err));
    return 0;
}

void daemon_method_run(struct client *c, const json_t *id, const json_t *params,
                       struct session *ses)
{
    struct daemon *d = c->d;
    char why[256];
    if (d->draining) {
        daemon_reply(c, rpc_error(id, RPC_SHUTTING_DOWN, "the daemon is shutting down"));
        return;
    }
    if (c->n_calls >= d->cfg.max_calls_per_client) {
        d->busy++;
        daemon_reply(c, rpc_error(id, RPC_BUSY, "busy: this connection has %u calls in flight; "
                                                "wait for an answer",
                                  c->n_calls));
        return;
    }
    /* One layer at a time: each commit is checked against the workspace
     * the exec started on, which a concurrent commit would change under it. */
    if (ses && ses->pol.workspace_mode == POLICY_WS_OVERLAY && ses->running) {
        d->busy++;
        daemon_reply(c, rpc_error(id, RPC_BUSY, "busy: session.exec: an overlay session runs one "
                                                "exec at a time; wait for its answer"));
        return;
    }
    if (ses && ses->pending >= 0) {
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.exec: the session's last change "
                                  "is not committed yet; session.commit or session.discard it "
                                  "first"));
        return;
    }
    struct run_request r = { 0 };
    if (parse_run(params, &r, why, sizeof why, ses != NULL) < 0) {
        d->bad_requests++;
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "%s: %s", ses ? "session.exec" : "run",
                                  why));
        run_request_release(&r);
        return;
    }
    struct cordon_err refusal = { 0 };
    if (daemon_check_call_options(ses ? &ses->pol : d->cfg.policy, r.call.wall_ms, r.call.envp,
                                  &refusal) < 0) {
        d->bad_requests++;
        run_record_refused(d->cfg.policy, true, NULL, NULL, r.argv, ses ? "session.exec" : "run",
                           &refusal);
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "%s: %s", ses ? "session.exec" : "run",
                                  refusal.msg));
        run_request_release(&r);
        return;
    }
    struct call *call = calloc(1, sizeof *call);
    if (!call) {
        run_request_release(&r);
        daemon_reply(c, rpc_error(id, RPC_INTERNAL_ERROR, "out of memory"));
        return;
    }
    call->id = json_deep_copy(id);
    call->d = d;
    call->stream = r.call.stream;
    call->recv_us = daemon_now_us();
    call->client = c;
    if (ses) {
        r.call.policy = &ses->pol;
        r.call.session_id = ses->id;
    }
    struct cordon_err err = { 0 };
    call->job = jobs_submit_call(d->jobs, &r.call, call, &err);
    run_request_release(&r);
    if (!call->job) {
        d->busy++;
        daemon_reply(c, rpc_error(id, RPC_BUSY, "%s", err.msg));
        call_free(call);
        return;
    }
    if (ses) {
        call->session = ses;
        ses->running++;
    }
    call->next = c->calls;
    c->calls = call;
    c->n_calls++;
}

static json_t *output_json(json_t *ans, const char *name, const struct job_output *o)
{
    bool b64 = false;
    char key[32];
    json_object_set_new(ans, name, daemon_bytes_json(o->data, o->len, &b64));
    snprintf(key, sizeof key, "%s_encoding", name);
    json_object_set_new(ans, key, json_string(b64 ? "base64" : "utf-8"));
    snprintf(key, sizeof key, "%s_truncated", name);
    json_object_set_new(ans, key, json_boolean(o->truncated));
    snprintf(key, sizeof key, "%s_total", name);
    json_object_set_new(ans, key, json_integer((json_int_t)o->total));
    return ans;
}

/* RES's KEY (microseconds) as fractional milliseconds: a short run's are below one. */
static json_t *us_as_ms(const json_t *res, const char *key)
{
    json_t *v = res ? json_object_get(res, key) : NULL;
    return json_is_integer(v) ? json_real((double)json_integer_value(v) / 1000.0) : json_null();
}

static void on_job_done(void *ctx, const struct job_end *end)
{
    struct call *call = ctx;
    struct client *c = call->client;
    unlink_call(call);
    if (c && !c->gone) {
        json_t *ans;
        if (end->start_error) {
            ans = rpc_error(call->id, RPC_RUN_REFUSED, "run: %s", end->start_error->msg);
        } else {
            json_t *res = end->result;
            /* Without a result (its supervisor died): killed, status 125. */
            json_t *a = json_pack("{s:s, s:o, s:o, s:o, s:o, s:b}", "run_id", end->run_id,
                                  "exit_code", res ? json_incref(json_object_get(res, "exit_code"))
                                                   : json_null(),
                                  "signal", res ? json_incref(json_object_get(res, "signal"))
                                                : json_null(),
                                  "reason", res ? json_incref(json_object_get(res, "reason"))
                                                : json_string("killed"),
                                  "status", res ? json_incref(json_object_get(res, "status"))
                                                : json_integer(125),
                                  "pooled", job_pooled(call->job));
            if (a) {
                output_json(a, "stdout", &end->out);
                output_json(a, "stderr", &end->err);
                json_t *error = res ? json_object_get(res, "error") : NULL;
                if (error)
                    json_object_set(a, "error", error);
                double total_ms = (double)(daemon_now_us() - call->recv_us) / 1000.0;
                json_object_set_new(a, "times", json_pack("{s:o, s:o, s:f}", "wall_ms",
                                                          us_as_ms(res, "wall_us"), "cpu_ms",
                                                          us_as_ms(res, "cpu_us"), "total_ms",
                                                          total_ms));
                if (res)
                    json_object_set(a, "result", res);
                /* A session on a layer: what the call changed, and what became of it. */
                json_t *txn = res ? json_object_get(res, "transaction") : NULL;
                if (txn)
                    json_object_set(a, "transaction", txn);
            }
            ans = a ? rpc_result(call->id, a) : rpc_error(call->id, RPC_INTERNAL_ERROR,
                                                          "out of memory");
        }
        daemon_reply(c, ans);
    }
    /* Kept for the session's session.commit or session.discard; with no
     * session (or none left) the jobs module closes it: discarded. */
    if (call->session && *end->layer >= 0 && call->session->pending < 0) {
        call->session->pending = *end->layer;
        *end->layer = -1;
        snprintf(call->session->pending_run, sizeof call->session->pending_run, "%s",
                 end->run_id);
    }
    struct daemon *d = call->d;
    call_free(call);
    /* Draining: this may have been the last run, whoever's it was. */
    daemon_maybe_finish(d);
}

static void on_job_output(void *ctx, int stream, const char *data, size_t len)
{
    struct call *call = ctx;
    struct client *c = call->client;
    if (!c || c->gone || !call->stream)
        return;
    bool b64 = false;
    json_t *chunk = daemon_bytes_json(data, len, &b64);
    daemon_reply(c, rpc_notification("run.output",
                              json_pack("{s:O, s:s, s:s, s:o}", "id", call->id, "run_id",
                                        job_run_id(call->job), "stream",
                                        stream == 1 ? "stdout" : "stderr", b64 ? "data_base64"
                                                                               : "data",
                                        chunk)));
}

/* ---- the other methods ---- */

static void method_cancel(struct client *c, const json_t *id, const json_t *params)
{
    json_t *target = json_object_get(params, "id"), *run_id = json_object_get(params, "run_id");
    if ((!target && !json_is_string(run_id)) || (target && run_id)) {
        if (id)
            daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS,
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
            unlink_call(call);
            daemon_reply(c, rpc_error(call->id, RPC_REQUEST_TIMEOUT,
                                      "run: cancelled before it started"));
            call_free(call);
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
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "policy.check: \"policy\" must be a "
                                                          "string (YAML or JSON)"));
        return;
    }
    char digest[65];
    if (!text) {
        policy_digest_hex(c->d->cfg.policy, digest);
        daemon_reply(c, rpc_result(id, json_pack("{s:b, s:s, s:o}", "ok", 1, "digest", digest,
                                                 "policy", policy_to_json(c->d->cfg.policy))));
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
    daemon_reply(c, rpc_result(id, json_pack("{s:b, s:s, s:b, s:o}", "ok", 1, "digest", digest,
                                      "same_as_daemon", strcmp(digest, ours) == 0, "policy",
                                      policy_to_json(p))));
}

/*
 * The policy's host workspace, should a commit into it have died with an
 * earlier daemon's run: finished or undone now (each run's prepare would
 * also; this says so at start). Sessions' own workspaces went above.
 */
static void recover_workspace(const struct policy *p)
{
    if (!p->workspace)
        return;
    struct cordon_err err = { 0 };
    _cleanup_close_ int fd = hostpath_open(AT_FDCWD, p->workspace, O_PATH | O_DIRECTORY, 0,
                                           p->workspace_follow_symlinks, &err);
    struct txn_recovery rec;
    if (fd >= 0 && txn_recover(fd, p, 10000, &rec) < 0)
        fprintf(stderr, "cordon: serve: workspace '%s': an interrupted commit could not be "
                "finished or undone: %s\n", p->workspace, rec.reason);
    else if (fd >= 0 && rec.rolled_back + rec.rolled_forward)
        fprintf(stderr, "cordon: serve: workspace '%s': finished %u interrupted commit(s), "
                "undid %u\n", p->workspace, rec.rolled_forward, rec.rolled_back);
}

static json_t *stats_json(struct daemon *d)
{
    struct jobs_stats st;
    jobs_get_stats(d->jobs, &st);
    return json_pack("{s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I}, "
                     "s:{s:I, s:I, s:I, s:I, s:I, s:I}}",
                     "pool", "target", (json_int_t)st.pool_target, "ready",
                     (json_int_t)st.pool_ready, "preparing", (json_int_t)st.pool_preparing,
                     "failures", (json_int_t)st.pool_failures,
                     "runs", "running", (json_int_t)st.running, "queued", (json_int_t)st.queued,
                     "started", (json_int_t)st.started, "pooled", (json_int_t)st.pooled, "cold",
                     (json_int_t)st.cold,
                     "start_latency_us", "p50", (json_int_t)st.start_p50_us, "p99",
                     (json_int_t)st.start_p99_us,
                     "refusals", "busy", (json_int_t)d->busy, "bad_requests",
                     (json_int_t)d->bad_requests, "peers", (json_int_t)d->refused_peers,
                     "connections", (json_int_t)d->refused_connections, "open_connections",
                     (json_int_t)d->n_clients, "requests", (json_int_t)d->requests);
}


/* kill_all: every running sandbox this daemon's user may signal ends, recorded
 * in the policy's audit log (cordon kill --all over the socket). */
static void method_kill_all(struct client *c, const json_t *id, const json_t *params)
{
    /* It ends every uid's calls: what the daemon's own user could do outside
     * the socket anyway, and an admin may; any other peer cancels its own calls. */
    if (!c->admin && c->uid != geteuid()) {
        daemon_reply(c, rpc_error(id, RPC_FORBIDDEN, "kill_all: only the daemon's user or an "
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
        daemon_reply(c, rpc_error(id, RPC_INTERNAL_ERROR, "kill_all: %s",
                                  r ? err.msg : "out of memory"));
    else
        daemon_reply(c, rpc_result(id, killall_report_json(r)));
    if (log) {
        struct cordon_err ignored;
        audit_close(log, &ignored);
        audit_free(log);
    }
    free(r);
}

static void request(struct client *c, const char *method, const json_t *id, const json_t *params)
{
    if (params && !json_is_object(params)) {
        c->d->bad_requests++;
        if (id)
            daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "%s: params must be an object",
                                      method));
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
        daemon_reply(c, rpc_result(id, json_pack("{s:b, s:s, s:b, s:f}", "ok", !c->d->draining,
                                                 "version", CORDON_VERSION, "draining",
                                                 c->d->draining, "uptime_s",
                                                 (double)(daemon_now_us() - c->d->started_us) /
                                                     1e6)));
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
        request(c, method, id, json_object_get(msg, "params"));
        break;
    case RPC_KIND_NOTIFICATION:
        request(c, method, NULL, json_object_get(msg, "params"));
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
    if (oversized)
        daemon_reply(c, rpc_error(NULL, RPC_INVALID_REQUEST, "message longer than %zu bytes: %s",
                           c->d->cfg.max_message, why));
    else
        daemon_reply(c, rpc_error(NULL, RPC_PARSE_ERROR, "parse error: %s", why));
}

static void on_closed(void *ctx, struct rpc_stream *s, bool output_failed)
{
    (void)s;
    (void)output_failed;
    client_drop(ctx);
}

/* The client reads again: the processes it holds back may go on. */
static void on_drained(void *ctx, struct rpc_stream *s)
{
    (void)s;
    struct client *c = ctx;
    lproc_drained(c->d, c);
}

static const struct rpc_handlers handlers = {
    .message = on_message,
    .garbage = on_garbage,
    .closed = on_closed,
    .drained = on_drained,
};

/* ---- accepting ---- */

static bool uid_listed(const uid_t *list, size_t n, uid_t uid)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == uid)
            return true;
    return false;
}

bool daemon_is_admin(const struct daemon *d, uid_t uid)
{
    return uid_listed(d->cfg.admin_uid, d->cfg.n_admin_uid, uid);
}

/* May the peer on FD use the daemon? Its uid in *UID. */
static bool peer_allowed(const struct daemon *d, int fd, uid_t *uid)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return false;
    *uid = cred.uid;
    /* Root could take over the daemon's uid anyway: refusing it protects nothing. */
    return cred.uid == geteuid() || cred.uid == 0 ||
           uid_listed(d->cfg.allow_uid, d->cfg.n_allow_uid, cred.uid) ||
           uid_listed(d->cfg.admin_uid, d->cfg.n_admin_uid, cred.uid);
}

/* A connection we will not serve hears why, if it listens, and is closed. */
static void turn_away(int fd, int code, const char *msg)
{
    json_t *e = rpc_error(NULL, code, "%s", msg);
    char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;
    if (text) {
        size_t n = strlen(text);
        text[n] = '\n';
        (void)!send(fd, text, n + 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        text[n] = '\0';
    }
    free(text);
    json_decref(e);
    /* What it sent already is read and dropped: closing on unread input would
     * reset the connection and lose the answer. */
    char sink[4096];
    while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0)
        ;
    shutdown(fd, SHUT_WR);
    close(fd);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
    (void)what;
    struct daemon *d = arg;
    for (int i = 0; i < 64; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return; /* EAGAIN, or out of descriptors: the next readiness tries again */
        uid_t uid = (uid_t)-1;
        if (!peer_allowed(d, fd, &uid)) {
            d->refused_peers++;
            turn_away(fd, RPC_FORBIDDEN, "this user may not use the daemon");
            continue;
        }
        if (d->n_clients >= d->cfg.max_clients) {
            d->refused_connections++;
            turn_away(fd, RPC_BUSY, "busy: too many connections");
            continue;
        }
        int out = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        struct client *c = out >= 0 ? calloc(1, sizeof *c) : NULL;
        struct cordon_err err = { 0 };
        if (c) {
            c->d = d;
            c->uid = uid;
            c->admin = uid_listed(d->cfg.admin_uid, d->cfg.n_admin_uid, uid);
            c->s = rpc_stream_new(d->base, fd, out, d->cfg.max_message, &handlers, c, &err);
        }
        if (!c || !c->s) {
            free(c);
            if (out >= 0 && !c)
                close(out);
            if (!c)
                close(fd);
            continue;
        }
        /* A client that does not read its answers stops being read. */
        rpc_stream_throttle(c->s, c->s);
        c->next = d->clients;
        d->clients = c;
        d->n_clients++;
        d->connections++;
    }
}

/* May we serve on PATH (SA filled)? A daemon killed outright leaves its socket:
 * it is replaced unless one answers there. */
static int check_socket(const char *path, struct sockaddr_un *sa, struct cordon_err *err)
{
    *sa = (struct sockaddr_un){ .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa->sun_path)
        return err_set(err, CORDON_E_USAGE, "socket path too long: '%s'", path);
    strcpy(sa->sun_path, path);
    struct stat st;
    if (lstat(path, &st) < 0)
        return 0;
    if (!S_ISSOCK(st.st_mode))
        return err_set(err, CORDON_E_USAGE, "'%s' exists and is not a socket", path);
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && connect(probe, (struct sockaddr *)sa, sizeof *sa) == 0;
    if (probe >= 0)
        close(probe);
    if (live)
        return err_set(err, CORDON_E_USAGE, "a daemon is already serving on '%s'", path);
    return 0;
}

static int listen_on(const char *path, struct cordon_err *err)
{
    struct sockaddr_un sa;
    TRY(check_socket(path, &sa, err));
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create a socket");
    /* Created 0600 (no window in which others could connect); SO_PEERCRED checks anyway. */
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return err_sys(err, CORDON_E_SETUP, "cannot bind '%s'", path);
    }
    if (listen(fd, 4096) < 0) {
        close(fd);
        unlink(path);
        return err_sys(err, CORDON_E_SETUP, "cannot listen on '%s'", path);
    }
    return fd;
}

/* ---- stopping ---- */

static void stop_listening(struct daemon *d)
{
    if (d->listen_ev) {
        event_free(d->listen_ev);
        d->listen_ev = NULL;
    }
    if (d->listen_fd >= 0) {
        close(d->listen_fd);
        d->listen_fd = -1;
        unlink(d->cfg.socket_path);
    }
}

static void on_flush_timer(evutil_socket_t fd, short what, void *arg);

/* Draining and nothing runs: go once the answers are written (or 2s on). */
void daemon_maybe_finish(struct daemon *d)
{
    if (!d || !d->draining || !jobs_idle(d->jobs) || d->ops || d->boxes)
        return;
    size_t pending = 0;
    for (struct client *c = d->clients; c; c = c->next)
        pending += rpc_stream_pending_output(c->s);
    if (!d->flush_deadline_us)
        d->flush_deadline_us = daemon_now_us() + 2000000u;
    if (!pending || daemon_now_us() > d->flush_deadline_us) {
        event_base_loopexit(d->base, NULL);
        return;
    }
    struct timeval tv = { 0, 10000 };
    evtimer_add(d->flush_ev, &tv);
}

static void on_flush_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    daemon_maybe_finish(arg);
}

static void dropped(void *ctx)
{
    struct call *call = ctx;
    struct client *c = call->client;
    unlink_call(call);
    daemon_reply(c, rpc_error(call->id, RPC_SHUTTING_DOWN, "run: the daemon is shutting down"));
    call_free(call);
}

static void on_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct daemon *d = arg;
    jobs_stop_all(d->jobs, true, dropped);
    sessions_stop_ops(d);
    box_stop_all(d, false);
    daemon_maybe_finish(d);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    struct daemon *d = arg;
    /* The first stops taking calls and lets running ones finish (up to the
     * grace); a second does not wait. */
    if (d->signals++ == 0) {
        d->draining = true;
        stop_listening(d);
        jobs_drain(d->jobs, dropped);
        /* A live session ends with the daemon; a process of its own may finish. */
        box_stop_all(d, true);
        struct timeval tv = { d->cfg.grace_ms / 1000, (d->cfg.grace_ms % 1000) * 1000 };
        evtimer_add(d->drain_ev, &tv);
        daemon_maybe_finish(d);
    } else {
        on_drain_timeout(-1, 0, d);
    }
}

/* Room for 1,000 idle connections and every run's pipes. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int daemon_serve(const struct daemon_config *cfg, struct cordon_err *err)
{
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    struct daemon d = { .cfg = *cfg, .listen_fd = -1, .state_fd = -1,
                        .started_us = daemon_now_us() };
    int rc = -1;
    d.base = event_base_new();
    if (!d.base)
        return err_set(err, CORDON_E_INTERNAL, "cannot create the event loop");
    struct jobs_config jc = {
        .base = d.base,
        .policy = cfg->policy,
        .max_running = cfg->max_running,
        .max_queued = cfg->max_queued,
        .output_cap = cfg->output_cap,
        .done = on_job_done,
        .output = on_job_output,
        .pool = cfg->pool,
    };
    /* A daemon already serving there is the likelier mistake: said first. Then
     * the state directory, emptied before the socket answers anyone. */
    struct sockaddr_un sa;
    if (check_socket(cfg->socket_path, &sa, err) < 0)
        goto out;
    d.state_fd = sessions_open_state_dir(cfg->state_dir, err);
    if (d.state_fd < 0)
        goto out;
    recover_workspace(cfg->policy);
    box_remove_agent(&d);
    d.listen_fd = listen_on(cfg->socket_path, err);
    if (d.listen_fd < 0)
        goto out;
    d.listen_ev = event_new(d.base, d.listen_fd, EV_READ | EV_PERSIST, on_accept, &d);
    d.sig_term = evsignal_new(d.base, SIGTERM, on_signal, &d);
    d.sig_int = evsignal_new(d.base, SIGINT, on_signal, &d);
    d.drain_ev = evtimer_new(d.base, on_drain_timeout, &d);
    d.reap_ev = evtimer_new(d.base, on_reap_clients, &d);
    d.flush_ev = evtimer_new(d.base, on_flush_timer, &d);
    d.idle_ev = event_new(d.base, -1, EV_PERSIST, sessions_on_idle_timer, &d);
    struct timeval idle_tick = { 1, 0 };
    if (!d.idle_ev || event_add(d.idle_ev, &idle_tick) < 0 || !d.flush_ev || !d.listen_ev ||
        !d.sig_term || !d.sig_int || !d.drain_ev || !d.reap_ev ||
        event_add(d.listen_ev, NULL) < 0 || evsignal_add(d.sig_term, NULL) < 0 ||
        evsignal_add(d.sig_int, NULL) < 0) {
        err_set(err, CORDON_E_INTERNAL, "cannot set up the event loop");
        goto out;
    }
    /* After the signal handlers: the pool's handles are born with them blocked. */
    if (!(d.jobs = jobs_new(&jc, err)))
        goto out;
    rc = event_base_dispatch(d.base) < 0 ? err_set(err, CORDON_E_INTERNAL, "the event loop failed")
                                         : 0;
out:
    stop_listening(&d);
    while (d.clients)
        client_drop(d.clients);
    on_reap_clients(-1, 0, &d);
    jobs_free(d.jobs);
    box_kill_all(&d);
    lproc_free_all(&d);
    sessions_stop_ops(&d);
    while (d.sessions)
        session_free(&d, d.sessions);
    box_remove_agent(&d);
    if (d.state_fd >= 0) {
        /* Ours, and empty now (a non-empty one stays for a look); removed while
         * still locked, so never from under a daemon that comes next. */
        rmdir(cfg->state_dir);
        close(d.state_fd);
    }
    struct event *evs[] = { d.sig_term, d.sig_int, d.drain_ev, d.reap_ev, d.flush_ev, d.idle_ev };
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        if (evs[i])
            event_free(evs[i]);
    event_base_free(d.base);
    return rc;
}
