/*
 * daemon/daemon.c: `cordon serve` (see daemon.h). One event loop in the
 * daemon's process: a listening unix socket, one JSON-RPC stream per
 * connection (broker/jsonrpc.h: lines capped, a peer that does not read is
 * not read), and the jobs module's queue and warm pool underneath. A
 * connection is only ever answered; nothing one does reaches another
 * beyond the shared queue, whose limit is answered "busy".
 */
#include "daemon/daemon.h"

#include "broker/jsonrpc.h"
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
#include <openssl/evp.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Application error codes, beside JSON-RPC's. */
#define RPC_BUSY (-32002)          /* the queue or the connection's share is full: retry */
#define RPC_SHUTTING_DOWN (-32003)
#define RPC_FORBIDDEN (-32004)     /* the peer's uid is not allowed */
#define RPC_NOT_COMMITTED (-32005) /* session.commit could not apply the change */
#define RPC_RUN_REFUSED RPC_REFUSED

/* argv, the environment and stdin of one call, decoded; beyond: refused. */
#define MAX_ARGS 4096
#define MAX_ENV 1024
#define MAX_TIMEOUT_S 86400.0

struct daemon;

struct session {
    struct session *next;
    char id[33];
    int dir_fd;                   /* the workspace, O_PATH */
    char *dir;
    struct policy pol;            /* the daemon's, with this workspace (shallow: never freed) */
    int pending;                  /* workspace.commit manual: the last exec's layer, kept
                                     until session.commit / session.discard; or -1 */
    char pending_run[33];         /* the run that made it */
    unsigned running;
    uint64_t created_us, used_us;
};

struct call {
    struct call *next;            /* in its client's list */
    struct daemon *d;
    struct session *session;      /* a session.exec's, or NULL */
    struct client *client;        /* NULL once the client is gone */
    json_t *id;
    struct job *job;
    bool stream;
    uint64_t recv_us;
};

struct client {
    struct client *next;
    struct daemon *d;
    struct rpc_stream *s;
    struct call *calls;
    unsigned n_calls;
    bool gone;
};

struct daemon {
    struct daemon_config cfg;
    struct event_base *base;
    struct jobs *jobs;
    int listen_fd;
    struct event *listen_ev, *sig_term, *sig_int, *drain_ev, *reap_ev;
    struct client *clients, *dead;
    unsigned n_clients;
    int state_fd;
    struct session *sessions;
    unsigned n_sessions;
    struct event *idle_ev;
    bool draining;
    int signals;
    uint64_t flush_deadline_us;
    struct event *flush_ev;
    uint64_t started_us;
    uint64_t connections, refused_peers, refused_connections, requests, bad_requests, busy;
};

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- bytes as JSON ---- */

/* DATA as a JSON string: itself when it is UTF-8, base64 otherwise (*B64 says which). */
static json_t *bytes_json(const char *data, size_t len, bool *b64)
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
static int base64_decode(const char *text, size_t len, char **out, size_t *out_len)
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

static void reply(struct client *c, json_t *msg)
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
        call->session->used_us = now_us();
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

static void maybe_finish(struct daemon *d);

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
    maybe_finish(d);
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
        } else if (base64_decode(json_string_value(b64), json_string_length(b64),
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
    json_t *argv = json_object_get(params, "argv"), *code = json_object_get(params, "code"),
           *lang = json_object_get(params, "language");
    json_t *files = json_object_get(params, "files");
    if (files && parse_files(files, r, why, len) < 0)
        return -1;
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
               !(json_is_string(lang) && strcmp(json_string_value(lang), languages[l].language) == 0))
            l++;
        if (l == sizeof languages / sizeof languages[0])
            return why_printf(why, len, "%s", "\"language\" must be \"python\", \"node\" or \"sh\"");
        fixed[0] = languages[l].argv[0];
        fixed[1] = languages[l].argv[1];
        n = 3;
    }
    r->argv = calloc(n + 1, sizeof *r->argv);
    if (!r->argv)
        return why_printf(why, len, "%s", "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *s = argv ? json_string_value(json_array_get(argv, i))
                             : (i < 2 ? fixed[i] : json_string_value(code));
        if (!s || (i == 0 && !*s) || strlen(s) != (argv ? json_string_length(json_array_get(argv, i))
                                                        : strlen(s)))
            return why_printf(why, len, "%s", i == 0 ? "\"argv\"[0] must be a non-empty string"
                                              : "\"argv\" must hold strings without NUL bytes");
        if (!(r->argv[i] = strdup(s)))
            return why_printf(why, len, "%s", "out of memory");
    }

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
            base64_decode(json_string_value(in64), json_string_length(in64), &r->input,
                          &r->input_len) < 0)
            return why_printf(why, len, "%s", "\"stdin_base64\" must be a base64 string");
    }

    json_t *env = json_object_get(params, "env");
    if (env) {
        if (!json_is_object(env))
            return why_printf(why, len, "%s", "\"env\" must be an object of strings");
        if (json_object_size(env) > MAX_ENV)
            return why_printf(why, len, "%s", "\"env\" has too many entries");
        r->envp = calloc(json_object_size(env) + 1, sizeof *r->envp);
        if (!r->envp)
            return why_printf(why, len, "%s", "out of memory");
        size_t i = 0;
        json_object_foreach(env, key, v) {
            if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
                return why_printf(why, len, "\"env\".%.64s must be a string without NUL bytes", key);
            if (!*key || strchr(key, '=') || strlen(key) > 255)
                return why_printf(why, len, "\"env\" name \"%.64s\" is not a variable name", key);
            if (asprintf(&r->envp[i++], "%s=%s", key, json_string_value(v)) < 0) {
                r->envp[--i] = NULL;
                return why_printf(why, len, "%s", "out of memory");
            }
        }
    }

    json_t *timeout = json_object_get(params, "timeout");
    if (timeout) {
        double t = json_number_value(timeout);
        if (!json_is_number(timeout) || !(t > 0) || t > MAX_TIMEOUT_S)
            return why_printf(why, len, "%s", "\"timeout\" must be a number of seconds, above 0 and at "
                                       "most 86400");
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

static struct session *find_session(struct daemon *d, const json_t *params, const json_t *id,
                                   struct client *c, const char *method);

/*
 * A call's options that are no policy key of their own, asked as the keys
 * they stand for: under a signed policy a longer timeout relaxes limits.wall,
 * an env entry the policy does not set relaxes env.set (policy_narrow.c).
 */
static int check_call_options(const struct policy *p, const struct job_call *call,
                              struct cordon_err *err)
{
    char ms[32];
    snprintf(ms, sizeof ms, "%llums", (unsigned long long)call->wall_ms);
    if (call->wall_ms && policy_check_tighten(p, "limits.wall", ms, "\"timeout\"", err) < 0)
        return -1;
    for (char *const *e = call->envp; e && *e; e++)
        TRY(policy_check_tighten(p, "env.set", *e, "\"env\"", err));
    return 0;
}

static void method_run(struct client *c, const json_t *id, const json_t *params,
                       struct session *ses)
{
    struct daemon *d = c->d;
    char why[256];
    if (d->draining) {
        reply(c, rpc_error(id, RPC_SHUTTING_DOWN, "the daemon is shutting down"));
        return;
    }
    if (c->n_calls >= d->cfg.max_calls_per_client) {
        d->busy++;
        reply(c, rpc_error(id, RPC_BUSY, "busy: this connection has %u calls in flight; wait "
                                         "for an answer",
                           c->n_calls));
        return;
    }
    /* One layer at a time: each commit is checked against the workspace
     * the exec started on, which a concurrent commit would change under it. */
    if (ses && ses->pol.workspace_mode == POLICY_WS_OVERLAY && ses->running) {
        d->busy++;
        reply(c, rpc_error(id, RPC_BUSY, "busy: session.exec: an overlay session runs one exec at "
                                         "a time; wait for its answer"));
        return;
    }
    if (ses && ses->pending >= 0) {
        reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.exec: the session's last change is "
                           "not committed yet; session.commit or session.discard it first"));
        return;
    }
    struct run_request r = { 0 };
    if (parse_run(params, &r, why, sizeof why, ses != NULL) < 0) {
        d->bad_requests++;
        reply(c, rpc_error(id, RPC_INVALID_PARAMS, "%s: %s", ses ? "session.exec" : "run", why));
        run_request_release(&r);
        return;
    }
    struct cordon_err refusal = { 0 };
    if (check_call_options(ses ? &ses->pol : d->cfg.policy, &r.call, &refusal) < 0) {
        d->bad_requests++;
        run_record_refused(d->cfg.policy, true, NULL, NULL, r.argv, ses ? "session.exec" : "run",
                           &refusal);
        reply(c, rpc_error(id, RPC_INVALID_PARAMS, "%s: %s", ses ? "session.exec" : "run",
                           refusal.msg));
        run_request_release(&r);
        return;
    }
    struct call *call = calloc(1, sizeof *call);
    if (!call) {
        run_request_release(&r);
        reply(c, rpc_error(id, RPC_INTERNAL_ERROR, "out of memory"));
        return;
    }
    call->id = json_deep_copy(id);
    call->d = d;
    call->stream = r.call.stream;
    call->recv_us = now_us();
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
        reply(c, rpc_error(id, RPC_BUSY, "%s", err.msg));
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
    json_object_set_new(ans, name, bytes_json(o->data, o->len, &b64));
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
            json_t *a = json_pack("{s:s, s:O, s:O, s:O, s:O, s:b}", "run_id", end->run_id,
                                  "exit_code", res ? json_object_get(res, "exit_code") : json_null(),
                                  "signal", res ? json_object_get(res, "signal") : json_null(),
                                  "reason", res ? json_object_get(res, "reason")
                                                : json_string("killed"),
                                  "status", res ? json_object_get(res, "status")
                                                : json_integer(125),
                                  "pooled", job_pooled(call->job));
            if (a) {
                output_json(a, "stdout", &end->out);
                output_json(a, "stderr", &end->err);
                json_t *error = res ? json_object_get(res, "error") : NULL;
                if (error)
                    json_object_set(a, "error", error);
                json_object_set_new(a, "times",
                                    json_pack("{s:o, s:o, s:f}", "wall_ms", us_as_ms(res, "wall_us"),
                                              "cpu_ms", us_as_ms(res, "cpu_us"), "total_ms",
                                              (double)(now_us() - call->recv_us) / 1000.0));
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
        reply(c, ans);
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
    maybe_finish(d);
}

static void on_job_output(void *ctx, int stream, const char *data, size_t len)
{
    struct call *call = ctx;
    struct client *c = call->client;
    if (!c || c->gone || !call->stream)
        return;
    bool b64 = false;
    json_t *chunk = bytes_json(data, len, &b64);
    reply(c, rpc_notification("run.output",
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
            reply(c, rpc_error(id, RPC_INVALID_PARAMS,
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
            reply(c, rpc_error(call->id, RPC_REQUEST_TIMEOUT, "run: cancelled before it started"));
            call_free(call);
        }
        if (id)
            reply(c, rpc_result(id, json_pack("{s:b}", "cancelled", 1)));
        return;
    }
    if (id)
        reply(c, rpc_result(id, json_pack("{s:b}", "cancelled", 0)));
}

static void method_policy_check(struct client *c, const json_t *id, const json_t *params)
{
    json_t *text = json_object_get(params, "policy");
    if (text && !json_is_string(text)) {
        reply(c, rpc_error(id, RPC_INVALID_PARAMS, "policy.check: \"policy\" must be a string "
                                                   "(YAML or JSON)"));
        return;
    }
    char digest[65];
    if (!text) {
        policy_digest_hex(c->d->cfg.policy, digest);
        reply(c, rpc_result(id, json_pack("{s:b, s:s, s:o}", "ok", 1, "digest", digest, "policy",
                                          policy_to_json(c->d->cfg.policy))));
        return;
    }
    struct cordon_err err = { 0 };
    _cleanup_(policy_freep) struct policy *p =
        policy_load_string(json_string_value(text), json_string_length(text), "policy", &err);
    if (!p || policy_finalize(p, &err) < 0) {
        reply(c, rpc_result(id, json_pack("{s:b, s:s}", "ok", 0, "error", err.msg)));
        return;
    }
    policy_digest_hex(p, digest);
    char ours[65];
    policy_digest_hex(c->d->cfg.policy, ours);
    reply(c, rpc_result(id, json_pack("{s:b, s:s, s:b, s:o}", "ok", 1, "digest", digest,
                                      "same_as_daemon", strcmp(digest, ours) == 0, "policy",
                                      policy_to_json(p))));
}

/* ---- sessions ---- */

static void session_free(struct daemon *d, struct session *ses)
{
    for (struct session **pp = &d->sessions; *pp; pp = &(*pp)->next)
        if (*pp == ses) {
            *pp = ses->next;
            d->n_sessions--;
            break;
        }
    if (ses->dir_fd >= 0)
        close(ses->dir_fd);
    if (ses->pending >= 0)
        close(ses->pending);
    struct cordon_err ignored;
    wsfile_remove_tree(d->state_fd, ses->id, &ignored);
    free(ses->dir);
    free(ses);
}

static struct session *session_new(struct daemon *d, struct cordon_err *err)
{
    if (d->n_sessions >= d->cfg.max_sessions) {
        err_set(err, CORDON_E_USAGE, "busy: %u sessions are open; destroy one first",
                d->n_sessions);
        return NULL;
    }
    struct session *ses = calloc(1, sizeof *ses);
    if (!ses) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    ses->dir_fd = ses->pending = -1;
    audit_new_run_id(ses->id);
    if (asprintf(&ses->dir, "%s/%s", d->cfg.state_dir, ses->id) < 0) {
        free(ses);
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    ses->next = d->sessions;
    d->sessions = ses;
    d->n_sessions++;
    if (mkdirat(d->state_fd, ses->id, 0755) < 0 ||
        (ses->dir_fd = openat(d->state_fd, ses->id, O_PATH | O_DIRECTORY | O_NOFOLLOW |
                                                        O_CLOEXEC)) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot make the session's workspace");
        session_free(d, ses);
        return NULL;
    }
    ses->pol = *d->cfg.policy;
    ses->pol.workspace = ses->dir;
    ses->created_us = ses->used_us = now_us();
    return ses;
}

static json_t *session_json(const struct session *ses)
{
    uint64_t now = now_us();
    static const char *const commits[] = { "on_success", "always", "manual" };
    return json_pack("{s:s, s:i, s:f, s:f, s:s, s:s, s:b}", "session_id", ses->id, "running",
                     ses->running, "age_s", (double)(now - ses->created_us) / 1e6, "idle_s",
                     ses->running ? 0.0 : (double)(now - ses->used_us) / 1e6, "workspace_mode",
                     ses->pol.workspace_mode == POLICY_WS_OVERLAY ? "overlay" : "direct",
                     "workspace_commit", commits[ses->pol.workspace_commit], "pending",
                     ses->pending >= 0);
}

/*
 * session.create's options: the workspace's mode and commit (the policy's
 * workspace.mode and workspace.commit, for this session). An overlay needs
 * a level that has it, asked now rather than at the first exec.
 */
static int session_options(struct session *ses, const json_t *params, struct cordon_err *err)
{
    static const char *const keys[][2] = { { "workspace_mode", "workspace.mode" },
                                           { "workspace_commit", "workspace.commit" } };
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)params, key, v) {
        size_t k = 0;
        while (k < 2 && strcmp(key, keys[k][0]) != 0)
            k++;
        if (k == 2)
            return err_set(err, CORDON_E_USAGE, "unknown option \"%.40s\"", key);
        if (!json_is_string(v))
            return err_set(err, CORDON_E_USAGE, "\"%s\" must be a string", key);
        TRY(policy_set(&ses->pol, keys[k][1], json_string_value(v), keys[k][0], err));
    }
    if (ses->pol.workspace_mode == POLICY_WS_OVERLAY &&
        !sandbox_backend_choose(&ses->pol, NULL, err))
        return -1;
    return 0;
}

/* session.commit / session.discard: the decision a manual session's last exec waits for. */
static void session_decide(struct client *c, const json_t *id, struct session *ses, bool commit)
{
    const char *method = commit ? "commit" : "discard";
    if (ses->pending < 0) {
        reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.%s: the session has no change "
                           "waiting (workspace_commit: manual keeps one per exec)", method));
        return;
    }
    struct txn_summary sum = { 0 };
    if (commit) {
        txn_finish(ses->pending, ses->dir_fd, &ses->pol, POLICY_WS_COMMIT_ALWAYS, true, &sum);
    } else {
        /* Scanned for the summary (what is thrown away), never applied. */
        txn_finish(ses->pending, ses->dir_fd, &ses->pol, POLICY_WS_COMMIT_MANUAL, true, &sum);
        if (sum.outcome == TXN_PENDING)
            sum.outcome = TXN_DISCARDED;
    }
    close(ses->pending);
    ses->pending = -1;
    json_t *t = txn_summary_json(&sum);
    /* The decision is the run's last word: recorded under its id, as run.end was. */
    struct audit_log *log = NULL;
    struct cordon_err ignored = { 0 };
    if (cordon_audit_open(&ses->pol, &log, &ignored) == 0 && log) {
        audit_append(log, "workspace.decision", ses->pending_run,
                     json_pack("{s:s, s:s, s:O}", "session", ses->id, "decision", method,
                               "transaction", t), &ignored);
        audit_close(log, &ignored);
        audit_free(log);
    }
    json_t *ans = json_pack("{s:s, s:o}", "run_id", ses->pending_run, "transaction", t);
    if (!commit || sum.outcome == TXN_COMMITTED) {
        reply(c, rpc_result(id, ans));
        return;
    }
    /* Not applied: an error, so a client that only checks for one learns it. */
    json_t *e = sum.outcome == TXN_REFUSED
                    ? rpc_error(id, RPC_REFUSED, "session.commit: the change was refused: %s",
                                sum.reason)
                    : rpc_error(id, RPC_NOT_COMMITTED, "session.commit: the change could not be "
                                "applied, the workspace is as it was: %s", sum.reason);
    json_object_set_new(json_object_get(e, "error"), "data", ans);
    reply(c, e);
}

static struct session *find_session(struct daemon *d, const json_t *params, const json_t *id,
                                   struct client *c, const char *method)
{
    const char *sid = json_string_value(json_object_get(params, "session_id"));
    if (!sid) {
        reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.%s: \"session_id\" must be a string",
                           method));
        return NULL;
    }
    for (struct session *ses = d->sessions; ses; ses = ses->next)
        if (strcmp(ses->id, sid) == 0) {
            ses->used_us = now_us();
            return ses;
        }
    reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.%s: no session \"%.40s\"", method, sid));
    return NULL;
}

static const char *file_path(struct client *c, const json_t *id, const json_t *params,
                             const char *method)
{
    const char *path = json_string_value(json_object_get(params, "path"));
    char why[256];
    if (!path) {
        reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.%s: \"path\" must be a string",
                           method));
        return NULL;
    }
    if (wsfile_check_path(path, why, sizeof why) < 0) {
        reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.%s: %s", method, why));
        return NULL;
    }
    return path;
}

/* Answer an operation's failure: the caller's mistake, or ours. */
static void reply_err(struct client *c, const json_t *id, const char *method,
                      const struct cordon_err *err)
{
    int code = err->kind == CORDON_E_USAGE || err->kind == CORDON_E_NOTFOUND ? RPC_INVALID_PARAMS
                                                                             : RPC_REFUSED;
    reply(c, rpc_error(id, code, "session.%s: %s", method, err->msg));
}

static void session_write(struct client *c, const json_t *id, const json_t *params,
                          struct session *ses)
{
    const char *path = file_path(c, id, params, "write_file");
    if (!path)
        return;
    json_t *text = json_object_get(params, "content"), *b64 = json_object_get(params, "content_base64");
    json_t *mode = json_object_get(params, "mode");
    if (!text == !b64 || (text && !json_is_string(text)) || (b64 && !json_is_string(b64)) ||
        (mode && (!json_is_integer(mode) || json_integer_value(mode) < 0 ||
                  json_integer_value(mode) > 0777))) {
        reply(c, rpc_error(id, RPC_INVALID_PARAMS,
                           "session.write_file: give \"content\" or \"content_base64\" (a "
                           "string), and \"mode\" from 0 to 0777"));
        return;
    }
    _cleanup_free_ char *decoded = NULL;
    size_t len = 0;
    if (b64 && base64_decode(json_string_value(b64), json_string_length(b64), &decoded, &len) < 0) {
        reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.write_file: \"content_base64\" is "
                                                   "not base64"));
        return;
    }
    struct cordon_err err = { 0 };
    if (wsfile_write(ses->dir_fd, path, text ? json_string_value(text) : decoded,
                     text ? json_string_length(text) : len,
                     mode ? (mode_t)json_integer_value(mode) : 0644, &err) < 0) {
        reply_err(c, id, "write_file", &err);
        return;
    }
    reply(c, rpc_result(id, json_pack("{s:s, s:I}", "path", path,
                                      "bytes", (json_int_t)(text ? json_string_length(text) : len))));
}

static void session_read(struct client *c, const json_t *id, const json_t *params,
                         struct session *ses)
{
    const char *path = file_path(c, id, params, "read_file");
    if (!path)
        return;
    size_t max = c->d->cfg.output_cap;
    json_t *jmax = json_object_get(params, "max_bytes");
    if (jmax) {
        if (!json_is_integer(jmax) || json_integer_value(jmax) < 0) {
            reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.read_file: \"max_bytes\" must be "
                                                       "a count"));
            return;
        }
        if ((size_t)json_integer_value(jmax) < max)
            max = (size_t)json_integer_value(jmax);
    }
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    uint64_t size = 0;
    struct cordon_err err = { 0 };
    if (wsfile_read(ses->dir_fd, path, max, &data, &len, &size, &err) < 0) {
        reply_err(c, id, "read_file", &err);
        return;
    }
    bool b64 = false;
    json_t *content = bytes_json(data, len, &b64);
    reply(c, rpc_result(id, json_pack("{s:s, s:o, s:s, s:I, s:b}", "path", path, "content",
                                      content, "encoding", b64 ? "base64" : "utf-8", "size",
                                      (json_int_t)size, "truncated", size > len)));
}

static void session_fork(struct client *c, const json_t *id, const json_t *params,
                         struct session *ses)
{
    json_t *jn = json_object_get(params, "count");
    if (jn && (!json_is_integer(jn) || json_integer_value(jn) < 1 || json_integer_value(jn) > 64)) {
        reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.fork: \"count\" must be 1 to 64"));
        return;
    }
    json_int_t n = jn ? json_integer_value(jn) : 1;
    json_t *ids = json_array();
    struct cordon_err err = { 0 };
    unsigned cloned = 0, copied = 0;
    for (json_int_t i = 0; i < n; i++) {
        struct session *copy = session_new(c->d, &err);
        if (copy) {
            /* A fork works as its origin does: the same mode and commit. */
            copy->pol.workspace_mode = ses->pol.workspace_mode;
            copy->pol.workspace_commit = ses->pol.workspace_commit;
        }
        if (!copy || wsfile_copy_tree(ses->dir_fd, copy->dir_fd, &cloned, &copied, &err) < 0) {
            if (copy)
                session_free(c->d, copy);
            /* All or none: the copies made so far go too. */
            size_t k;
            json_t *v;
            json_array_foreach(ids, k, v) {
                for (struct session *s2 = c->d->sessions; s2; s2 = s2->next)
                    if (strcmp(s2->id, json_string_value(v)) == 0) {
                        session_free(c->d, s2);
                        break;
                    }
            }
            json_decref(ids);
            reply_err(c, id, "fork", &err);
            return;
        }
        json_array_append_new(ids, json_string(copy->id));
    }
    /* How the copies were made: reflinks share blocks until written, a copy does not. */
    const char *how = !copied ? (cloned ? "reflink" : "empty") : cloned ? "reflink+copy" : "copy";
    reply(c, rpc_result(id, json_pack("{s:o, s:s, s:i, s:i}", "session_ids", ids, "method", how,
                                      "files_reflinked", cloned, "files_copied", copied)));
}

static void method_session(struct client *c, const char *method, const json_t *id,
                           const json_t *params)
{
    struct daemon *d = c->d;
    if (strcmp(method, "create") == 0) {
        struct cordon_err err = { 0 };
        struct session *ses = d->draining ? NULL : session_new(d, &err);
        if (!ses) {
            reply(c, rpc_error(id, d->draining ? RPC_SHUTTING_DOWN : RPC_BUSY, "session.create: %s",
                               d->draining ? "the daemon is shutting down" : err.msg));
        } else if (json_is_object(params) && session_options(ses, params, &err) < 0) {
            session_free(d, ses);
            d->bad_requests++;
            reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.create: %s", err.msg));
        } else {
            reply(c, rpc_result(id, session_json(ses)));
        }
        return;
    }
    if (strcmp(method, "list") == 0) {
        json_t *all = json_array();
        for (struct session *ses = d->sessions; ses; ses = ses->next)
            json_array_append_new(all, session_json(ses));
        reply(c, rpc_result(id, json_pack("{s:o}", "sessions", all)));
        return;
    }
    static const char *const known[] = { "exec", "write_file", "read_file", "fork", "destroy",
                                         "commit", "discard" };
    size_t k = 0;
    while (k < sizeof known / sizeof known[0] && strcmp(method, known[k]) != 0)
        k++;
    if (k == sizeof known / sizeof known[0]) {
        d->bad_requests++;
        reply(c, rpc_error(id, RPC_METHOD_NOT_FOUND, "unknown method \"session.%.40s\"", method));
        return;
    }
    struct session *ses = find_session(d, params, id, c, method);
    if (!ses)
        return;
    if (strcmp(method, "exec") == 0) {
        method_run(c, id, params, ses);
    } else if (strcmp(method, "write_file") == 0) {
        session_write(c, id, params, ses);
    } else if (strcmp(method, "read_file") == 0) {
        session_read(c, id, params, ses);
    } else if (strcmp(method, "fork") == 0) {
        session_fork(c, id, params, ses);
    } else if (strcmp(method, "commit") == 0 || strcmp(method, "discard") == 0) {
        session_decide(c, id, ses, method[0] == 'c');
    } else if (ses->running) {
        reply(c, rpc_error(id, RPC_BUSY, "session.destroy: %u execs are still running; cancel "
                                         "them first",
                           ses->running));
    } else {
        session_free(d, ses);
        reply(c, rpc_result(id, json_pack("{s:b}", "destroyed", 1)));
    }
}

static void on_idle_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct daemon *d = arg;
    uint64_t now = now_us();
    for (struct session *ses = d->sessions, *next; ses; ses = next) {
        next = ses->next;
        if (!ses->running && now - ses->used_us > (uint64_t)d->cfg.session_idle_ms * 1000u)
            session_free(d, ses);
    }
}

/* The state directory, made ours and emptied of a killed daemon's sessions. */
static int open_state_dir(const char *dir, struct cordon_err *err)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return err_sys(err, CORDON_E_SETUP, "cannot make the state directory '%s'", dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 0077)) {
        if (fd >= 0)
            close(fd);
        return err_set(err, CORDON_E_USAGE, "state directory '%s' must be a directory of ours, "
                                            "mode 0700", dir);
    }
    DIR *ls = fdopendir(fcntl(fd, F_DUPFD_CLOEXEC, 3));
    struct dirent *e;
    while (ls && (e = readdir(ls)))
        if (strlen(e->d_name) == 32)
            wsfile_remove_tree(fd, e->d_name, err);
    if (ls)
        closedir(ls);
    return fd;
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
    return json_pack("{s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I}, "
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
}

static void method_session(struct client *c, const char *method, const json_t *id,
                           const json_t *params);

/* kill_all: every running sandbox this daemon's user may signal ends, recorded
 * in the policy's audit log (cordon kill --all over the socket). */
static void method_kill_all(struct client *c, const json_t *id, const json_t *params)
{
    json_t *why = json_object_get(params, "reason");
    if (why && !json_is_string(why)) {
        reply(c, rpc_error(id, RPC_INVALID_PARAMS, "kill_all: \"reason\" must be a string"));
        return;
    }
    struct cordon_err err = { 0 };
    struct audit_log *log = NULL;
    struct killall_report *r = calloc(1, sizeof *r);
    if (!r || cordon_audit_open(c->d->cfg.policy, &log, &err) < 0 ||
        run_kill_all(log, why ? json_string_value(why) : "daemon kill_all", r, &err) < 0)
        reply(c, rpc_error(id, RPC_INTERNAL_ERROR, "kill_all: %s", r ? err.msg : "out of memory"));
    else
        reply(c, rpc_result(id, killall_report_json(r)));
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
            reply(c, rpc_error(id, RPC_INVALID_PARAMS, "%s: params must be an object", method));
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
        method_run(c, id, params, NULL);
    else if (strncmp(method, "session.", 8) == 0)
        method_session(c, method + 8, id, params);
    else if (strcmp(method, "policy.check") == 0)
        method_policy_check(c, id, params);
    else if (strcmp(method, "health") == 0)
        reply(c, rpc_result(id, json_pack("{s:b, s:s, s:b, s:f}", "ok", !c->d->draining, "version",
                                          CORDON_VERSION, "draining", c->d->draining, "uptime_s",
                                          (double)(now_us() - c->d->started_us) / 1e6)));
    else if (strcmp(method, "stats") == 0)
        reply(c, rpc_result(id, stats_json(c->d)));
    else if (strcmp(method, "kill_all") == 0)
        method_kill_all(c, id, params);
    else {
        c->d->bad_requests++;
        char quoted[96];
        snprintf(quoted, sizeof quoted, "%.64s", method);
        reply(c, rpc_error(id, RPC_METHOD_NOT_FOUND, "unknown method \"%s\"", quoted));
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
        reply(c, rpc_error(id, RPC_INVALID_REQUEST, "invalid request: %s", why));
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
        reply(c, rpc_error(NULL, RPC_INVALID_REQUEST, "message longer than %zu bytes: %s",
                           c->d->cfg.max_message, why));
    else
        reply(c, rpc_error(NULL, RPC_PARSE_ERROR, "parse error: %s", why));
}

static void on_closed(void *ctx, struct rpc_stream *s, bool output_failed)
{
    (void)s;
    (void)output_failed;
    client_drop(ctx);
}

static const struct rpc_handlers handlers = {
    .message = on_message,
    .garbage = on_garbage,
    .closed = on_closed,
};

/* ---- accepting ---- */

static bool peer_allowed(const struct daemon *d, int fd)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return false;
    /* Root could take over the daemon's uid anyway: refusing it protects nothing. */
    if (cred.uid == geteuid() || cred.uid == 0)
        return true;
    for (size_t i = 0; i < d->cfg.n_allow_uid; i++)
        if (d->cfg.allow_uid[i] == cred.uid)
            return true;
    return false;
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
        if (!peer_allowed(d, fd)) {
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

static int listen_on(const char *path, struct cordon_err *err)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path)
        return err_set(err, CORDON_E_USAGE, "socket path too long: '%s'", path);
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create a socket");
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            close(fd);
            return err_set(err, CORDON_E_USAGE, "'%s' exists and is not a socket", path);
        }
        /* A daemon killed outright leaves its socket: replace it unless one answers. */
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool live = probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0;
        if (probe >= 0)
            close(probe);
        if (live) {
            close(fd);
            return err_set(err, CORDON_E_USAGE, "a daemon is already serving on '%s'", path);
        }
        unlink(path);
    }
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
static void maybe_finish(struct daemon *d)
{
    if (!d || !d->draining || !jobs_idle(d->jobs))
        return;
    size_t pending = 0;
    for (struct client *c = d->clients; c; c = c->next)
        pending += rpc_stream_pending_output(c->s);
    if (!d->flush_deadline_us)
        d->flush_deadline_us = now_us() + 2000000u;
    if (!pending || now_us() > d->flush_deadline_us) {
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
    maybe_finish(arg);
}

static void dropped(void *ctx)
{
    struct call *call = ctx;
    struct client *c = call->client;
    unlink_call(call);
    reply(c, rpc_error(call->id, RPC_SHUTTING_DOWN, "run: the daemon is shutting down"));
    call_free(call);
}

static void on_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct daemon *d = arg;
    jobs_stop_all(d->jobs, true, dropped);
    maybe_finish(d);
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
        struct timeval tv = { d->cfg.grace_ms / 1000, (d->cfg.grace_ms % 1000) * 1000 };
        evtimer_add(d->drain_ev, &tv);
        maybe_finish(d);
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
    struct daemon d = { .cfg = *cfg, .listen_fd = -1, .state_fd = -1, .started_us = now_us() };
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
    d.state_fd = open_state_dir(cfg->state_dir, err);
    if (d.state_fd < 0)
        goto out;
    recover_workspace(cfg->policy);
    d.listen_fd = listen_on(cfg->socket_path, err);
    if (d.listen_fd < 0)
        goto out;
    d.listen_ev = event_new(d.base, d.listen_fd, EV_READ | EV_PERSIST, on_accept, &d);
    d.sig_term = evsignal_new(d.base, SIGTERM, on_signal, &d);
    d.sig_int = evsignal_new(d.base, SIGINT, on_signal, &d);
    d.drain_ev = evtimer_new(d.base, on_drain_timeout, &d);
    d.reap_ev = evtimer_new(d.base, on_reap_clients, &d);
    d.flush_ev = evtimer_new(d.base, on_flush_timer, &d);
    d.idle_ev = event_new(d.base, -1, EV_PERSIST, on_idle_timer, &d);
    struct timeval idle_tick = { 1, 0 };
    if (!d.idle_ev || event_add(d.idle_ev, &idle_tick) < 0 || !d.flush_ev || !d.listen_ev || !d.sig_term || !d.sig_int || !d.drain_ev || !d.reap_ev ||
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
    while (d.sessions)
        session_free(&d, d.sessions);
    if (d.state_fd >= 0) {
        close(d.state_fd);
        rmdir(cfg->state_dir); /* ours, and empty now; a non-empty one stays for a look */
    }
    struct event *evs[] = { d.sig_term, d.sig_int, d.drain_ev, d.reap_ev, d.flush_ev, d.idle_ev };
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        if (evs[i])
            event_free(evs[i]);
    event_base_free(d.base);
    return rc;
}
