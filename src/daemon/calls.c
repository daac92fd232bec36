/*
 * daemon/calls.c: a run and a session.exec, from the socket to the sandbox
 * and back: the request decoded and checked against the policy, queued on
 * the jobs module, its output streamed, and its answer built from the run's
 * result when it ends. Runs on the daemon's loop.
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

/* argv, the environment and stdin of one call, decoded; beyond: refused. */
#define MAX_ARGS 4096
#define MAX_ENV 1024
#define MAX_TIMEOUT_S 86400.0

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
    struct start_file *files; /* paths borrowed from the request; data owned when decoded */
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
    json_object_foreach((json_t *)files, path, v)
    {
        char pwhy[200];
        if (wsfile_check_path(path, pwhy, sizeof pwhy) < 0)
            return why_printf(why, len, "\"files\": %s", pwhy);
        struct start_file *f = &r->files[r->n_files++];
        f->path = path;
        json_t *text = json_is_string(v) ? v : json_object_get(v, "content");
        json_t *b64 = json_is_object(v) ? json_object_get(v, "content_base64") : NULL;
        json_t *mode = json_is_object(v) ? json_object_get(v, "mode") : NULL;
        if (!text == !b64 || (text && !json_is_string(text)) || (b64 && !json_is_string(b64)) ||
            (mode &&
             (!json_is_integer(mode) || json_integer_value(mode) < 0 ||
              json_integer_value(mode) > 0777)))
            return why_printf(why, len,
                              "\"files\".%.64s: give a string, or \"content\" or "
                              "\"content_base64\" and a \"mode\" up to 0777",
                              path);
        f->mode = mode ? (unsigned)json_integer_value(mode) : 0; /* 0: the command's umask */
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
        while (
            l < sizeof languages / sizeof languages[0] &&
            !(json_is_string(lang) && strcmp(json_string_value(lang), languages[l].language) == 0))
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
            return why_printf(why, len, "%s",
                              i == 0 ? "\"argv\"[0] must be a non-empty string"
                                     : "\"argv\" must hold strings without NUL bytes");
        if (!(v[i] = strdup(s)))
            return why_printf(why, len, "%s", "out of memory");
    }
    return 0;
}

/* "env": {NAME: VALUE} as NAME=VALUE entries (*OUT, malloc'd; untouched when ENV is NULL). */
int daemon_parse_timeout(const json_t *params, uint64_t *ms, char *why, size_t len)
{
    json_t *timeout = json_object_get(params, "timeout");
    if (!timeout)
        return 0;
    double t = json_number_value(timeout);
    if (!json_is_number(timeout) || !(t > 0) || t > MAX_TIMEOUT_S)
        return why_printf(why, len, "%s",
                          "\"timeout\" must be a number of seconds, above 0 and at most 86400");
    *ms = (uint64_t)(t * 1000.0 + 0.5) ? (uint64_t)(t * 1000.0 + 0.5) : 1;
    return 0;
}

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
    json_object_foreach((json_t *)env, key, val)
    {
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
    static const char *const known[] = { "argv", "code",    "language", "stdin", "stdin_base64",
                                         "env",  "timeout", "stream",   "files", "session_id" };
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)params, key, v)
    {
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

    if (daemon_parse_timeout(params, &r->call.wall_ms, why, len) < 0)
        return -1;
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
        daemon_reply(c,
                     rpc_error(id, RPC_BUSY,
                               "busy: this connection has %u calls in flight; "
                               "wait for an answer",
                               c->n_calls));
        return;
    }
    /* One layer at a time: each commit is checked against the workspace
     * the exec started on, which a concurrent commit would change under it. */
    if (ses && ses->pol.workspace_mode == POLICY_WS_OVERLAY && ses->running) {
        d->busy++;
        daemon_reply(c,
                     rpc_error(id, RPC_BUSY,
                               "busy: session.exec: an overlay session runs one "
                               "exec at a time; wait for its answer"));
        return;
    }
    if (ses && ses->pending >= 0) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS,
                               "session.exec: the session's last change "
                               "is not committed yet; session.commit or session.discard it "
                               "first"));
        return;
    }
    struct run_request r = { 0 };
    if (parse_run(params, &r, why, sizeof why, ses != NULL) < 0) {
        d->bad_requests++;
        daemon_reply(
            c, rpc_error(id, RPC_INVALID_PARAMS, "%s: %s", ses ? "session.exec" : "run", why));
        run_request_release(&r);
        return;
    }
    struct cordon_err refusal = { 0 };
    if (daemon_check_call_options(ses ? &ses->pol : d->cfg.policy, r.call.wall_ms, r.call.envp,
                                  &refusal) < 0) {
        d->bad_requests++;
        run_record_refused(d->cfg.policy, true, NULL, NULL, r.argv, ses ? "session.exec" : "run",
                           &refusal);
        daemon_reply(
            c,
            rpc_error(id, RPC_INVALID_PARAMS, "%s: %s", ses ? "session.exec" : "run", refusal.msg));
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
        daemon_call_free(call);
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

void daemon_on_job_done(void *ctx, const struct job_end *end)
{
    struct call *call = ctx;
    struct client *c = call->client;
    daemon_unlink_call(call);
    if (c && !c->gone) {
        json_t *ans;
        if (end->start_error) {
            ans = rpc_error(call->id, RPC_RUN_REFUSED, "run: %s", end->start_error->msg);
        } else {
            json_t *res = end->result;
            /* Without a result (its supervisor died): killed, status 125. */
            json_t *a = json_pack(
                "{s:s, s:o, s:o, s:o, s:o, s:b}", "run_id", end->run_id, "exit_code",
                res ? json_incref(json_object_get(res, "exit_code")) : json_null(), "signal",
                res ? json_incref(json_object_get(res, "signal")) : json_null(), "reason",
                res ? json_incref(json_object_get(res, "reason")) : json_string("killed"), "status",
                res ? json_incref(json_object_get(res, "status")) : json_integer(125), "pooled",
                job_pooled(call->job));
            if (a) {
                output_json(a, "stdout", &end->out);
                output_json(a, "stderr", &end->err);
                json_t *error = res ? json_object_get(res, "error") : NULL;
                if (error)
                    json_object_set(a, "error", error);
                double total_ms = (double)(daemon_now_us() - call->recv_us) / 1000.0;
                json_object_set_new(a, "times",
                                    json_pack("{s:o, s:o, s:f}", "wall_ms",
                                              us_as_ms(res, "wall_us"), "cpu_ms",
                                              us_as_ms(res, "cpu_us"), "total_ms", total_ms));
                if (res)
                    json_object_set(a, "result", res);
                /* A session on a layer: what the call changed, and what became of it. */
                json_t *txn = res ? json_object_get(res, "transaction") : NULL;
                if (txn)
                    json_object_set(a, "transaction", txn);
            }
            ans = a ? rpc_result(call->id, a)
                    : rpc_error(call->id, RPC_INTERNAL_ERROR, "out of memory");
        }
        daemon_reply(c, ans);
    }
    /* Kept for the session's session.commit or session.discard; with no
     * session (or none left) the jobs module closes it: discarded. */
    if (call->session && *end->layer >= 0 && call->session->pending < 0) {
        call->session->pending = *end->layer;
        *end->layer = -1;
        snprintf(call->session->pending_run, sizeof call->session->pending_run, "%s", end->run_id);
    }
    struct daemon *d = call->d;
    daemon_call_free(call);
    /* Draining: this may have been the last run, whoever's it was. */
    daemon_maybe_finish(d);
}

void daemon_on_job_output(void *ctx, int stream, const char *data, size_t len)
{
    struct call *call = ctx;
    struct client *c = call->client;
    if (!c || c->gone || !call->stream)
        return;
    bool b64 = false;
    json_t *chunk = daemon_bytes_json(data, len, &b64);
    daemon_reply(c,
                 rpc_notification("run.output",
                                  json_pack("{s:O, s:s, s:s, s:o}", "id", call->id, "run_id",
                                            job_run_id(call->job), "stream",
                                            stream == 1 ? "stdout" : "stderr",
                                            b64 ? "data_base64" : "data", chunk)));
}
