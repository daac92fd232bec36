/*
 * daemon/process.c: processes over the daemon's API (daemon/live.h): their
 * records, the one consumer each has at a time (a connection, a sandboxd
 * stream, a live session's exec), the replay ring, the credit that holds a
 * process back while its consumer does not read, and the audit of each
 * start, signal and end. A process is its starter's uid's: to every other
 * uid (an --admin-uid aside) it does not exist.
 */
#include "daemon/live.h"

#include "daemon/workspace_files.h"

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/strv.h"
#include "common/text.h"
#include "core/run.h"

#include <event2/event.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Ended processes kept for process.wait and process.list; the oldest go first. */
#define MAX_ENDED 256

struct lproc_waiter {
    struct lproc_waiter *next;
    struct client *c;
    json_t *id;
};

void live_audit(const struct policy *pol, const char *type, const char *run_id, json_t *fields)
{
    struct audit_log *log = NULL;
    struct cordon_err ignored = { 0 };
    if (cordon_audit_open(pol, &log, &ignored) == 0 && log) {
        audit_append(log, type, run_id, fields, &ignored);
        fields = NULL;
        audit_close(log, &ignored);
        audit_free(log);
    }
    json_decref(fields);
}

static const struct policy *policy_of(const struct lproc *p)
{
    return p->ses ? &p->ses->pol : p->d->cfg.policy;
}

/* ---- records ---- */

static void waiters_free(struct lproc *p)
{
    while (p->waiters) {
        struct lproc_waiter *w = p->waiters;
        p->waiters = w->next;
        json_decref(w->id);
        free(w);
    }
}

static void lproc_free(struct lproc *p)
{
    struct daemon *d = p->d;
    for (struct lproc **pp = &d->lprocs; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            d->n_lprocs--;
            break;
        }
    if (p->timeout_ev)
        event_free(p->timeout_ev);
    waiters_free(p);
    free(p->argv0);
    free(p);
}

/* Room for one more: the oldest ended records go past MAX_ENDED. */
static void collect(struct daemon *d)
{
    unsigned ended = 0;
    for (struct lproc *p = d->lprocs; p; p = p->next)
        ended += p->state == LPROC_EXITED;
    while (ended > MAX_ENDED) {
        struct lproc *oldest = NULL;
        for (struct lproc *p = d->lprocs; p; p = p->next)
            if (p->state == LPROC_EXITED && (!oldest || p->ended_us < oldest->ended_us))
                oldest = p;
        if (!oldest)
            break;
        lproc_free(oldest);
        ended--;
    }
}

struct lproc *lproc_find(struct daemon *d, uid_t uid, bool admin, const char *id, int32_t num)
{
    for (struct lproc *p = d->lprocs; p; p = p->next)
        if ((id ? strcmp(p->id, id) == 0 : p->num == num) && (admin || p->owner == uid))
            return p;
    return NULL;
}

/* ---- output ---- */

static void ring_add(struct lproc_ring *r, const char *data, size_t len)
{
    if (len >= LIVE_REPLAY) {
        r->dropped += r->len + len - LIVE_REPLAY;
        memcpy(r->data, data + len - LIVE_REPLAY, LIVE_REPLAY);
        r->start = 0;
        r->len = LIVE_REPLAY;
        return;
    }
    size_t over = r->len + len > LIVE_REPLAY ? r->len + len - LIVE_REPLAY : 0;
    r->start = (r->start + over) % LIVE_REPLAY;
    r->len -= over;
    r->dropped += over;
    size_t at = (r->start + r->len) % LIVE_REPLAY;
    size_t first = len < LIVE_REPLAY - at ? len : LIVE_REPLAY - at;
    memcpy(r->data + at, data, first);
    memcpy(r->data, data + first, len - first);
    r->len += len;
}

/* The ring's bytes in order (malloc'd, *LEN). */
static char *ring_copy(const struct lproc_ring *r, size_t *len)
{
    char *out = malloc(r->len + 1);
    if (!out)
        return NULL;
    size_t first = r->len < LIVE_REPLAY - r->start ? r->len : LIVE_REPLAY - r->start;
    memcpy(out, r->data + r->start, first);
    memcpy(out + first, r->data, r->len - first);
    *len = r->len;
    return out;
}

static bool congested(const struct lproc *p)
{
    return p->sink.backlog && p->sink.backlog(p->sink.ctx) >= LIVE_BACKLOG;
}

void lproc_output(struct lproc *p, int stream, const char *data, size_t len)
{
    size_t pass = len;
    if (p->limit && p->out_bytes + len > p->limit) {
        /* Over the output limit: what fits goes, the process is killed. */
        pass = p->out_bytes >= p->limit ? 0 : (size_t)(p->limit - p->out_bytes);
        if (!p->reason && p->box) {
            p->reason = "output_limit";
            box_signal(p->box, p->wire, SIGKILL);
        }
    }
    p->out_bytes += len;
    if (pass) {
        ring_add(&p->ring[stream == 2], data, pass);
        if (p->sink.output)
            p->sink.output(p->sink.ctx, p, stream, data, pass);
    }
    /* A consumer that does not keep up holds the process back; nobody there, the ring. */
    if (p->box && (!pass || !congested(p)))
        box_credit(p->box, p->wire, (uint32_t)len);
    else
        p->owed += (uint32_t)len;
}

void lproc_drained(struct daemon *d, void *ctx)
{
    for (struct lproc *p = d->lprocs; p; p = p->next)
        if (p->sink.ctx == ctx && p->owed && p->box && !congested(p)) {
            box_credit(p->box, p->wire, p->owed);
            p->owed = 0;
        }
}

void lproc_attach(struct lproc *p, const struct lproc_sink *sink)
{
    p->sink = sink ? *sink : (struct lproc_sink){ 0 };
    if (p->owed && p->box && !congested(p)) {
        box_credit(p->box, p->wire, p->owed);
        p->owed = 0;
    }
}

void lproc_detach_all(struct daemon *d, void *ctx)
{
    for (struct lproc *p = d->lprocs; p; p = p->next) {
        if (p->sink.ctx == ctx)
            lproc_attach(p, NULL);
        for (struct lproc_waiter **pp = &p->waiters; *pp;) {
            struct lproc_waiter *w = *pp;
            if (w->c == ctx) {
                *pp = w->next;
                json_decref(w->id);
                free(w);
            } else {
                pp = &w->next;
            }
        }
    }
}

/* ---- the end ---- */

void lproc_end_json(const struct lproc *p, json_t *obj)
{
    bool exited = p->has_status && WIFEXITED(p->wstatus);
    bool signaled = p->has_status && WIFSIGNALED(p->wstatus);
    json_t *code = exited ? json_integer(WEXITSTATUS(p->wstatus))
        : strcmp(p->reason ? p->reason : "", "start_failed") == 0
        ? json_integer(strstr(p->error, "No such file") ? 127 : 126)
        : json_null();
    json_object_set_new(obj, "exit_code", code);
    json_object_set_new(obj, "signal", signaled ? json_integer(WTERMSIG(p->wstatus)) : json_null());
    json_object_set_new(obj, "reason", json_string(p->reason ? p->reason : "exited"));
    json_object_set_new(obj, "output_bytes", json_integer((json_int_t)p->out_bytes));
    if (p->error[0])
        json_object_set_new(obj, "error", json_string(p->error));
}

static void finish(struct lproc *p)
{
    struct daemon *d = p->d;
    p->state = LPROC_EXITED;
    p->ended_us = daemon_now_us();
    if (p->timeout_ev)
        event_del(p->timeout_ev);
    if (!p->reason)
        p->reason = "exited";
    json_t *end = json_pack("{s:s, s:s?}", "process_id", p->id, "session",
                            p->session_id[0] ? p->session_id : NULL);
    lproc_end_json(p, end);
    live_audit(policy_of(p), "process.end", p->run_id, json_deep_copy(end));
    while (p->waiters) {
        struct lproc_waiter *w = p->waiters;
        p->waiters = w->next;
        daemon_reply(w->c, rpc_result(w->id, json_deep_copy(end)));
        json_decref(w->id);
        free(w);
    }
    json_decref(end);
    struct lproc_sink sink = p->sink;
    p->sink = (struct lproc_sink){ 0 };
    if (p->own_box && p->box)
        box_close(p->box);
    p->box = NULL;
    if (p->ses && p->ses->used_us)
        p->ses->used_us = daemon_now_us();
    /* Last: a consumer may free what it holds of P (sandboxd's stream). */
    if (sink.ended)
        sink.ended(sink.ctx, p);
    collect(d);
}

void lproc_started(struct lproc *p)
{
    p->state = LPROC_RUNNING;
}

void lproc_failed(struct lproc *p, const char *why)
{
    p->reason = "start_failed";
    snprintf(p->error, sizeof p->error, "%s", why);
    finish(p);
}

void lproc_exited(struct lproc *p, int wstatus)
{
    p->wstatus = wstatus;
    p->has_status = true;
    finish(p);
}

void lproc_lost(struct lproc *p, const char *reason, const char *detail)
{
    if (!p->reason)
        p->reason = reason;
    size_t n = strlen(detail);
    while (n && (detail[n - 1] == '\n' || detail[n - 1] == ' '))
        n--;
    if (!p->error[0])
        snprintf(p->error, sizeof p->error, "the sandbox ended %s the process %s%s%.*s",
                 p->state == LPROC_STARTING ? "before" : "while",
                 p->state == LPROC_STARTING ? "started" : "ran", n ? ": " : "",
                 (int)(n > 200 ? 200 : n), detail + (n > 200 ? n - 200 : 0));
    finish(p);
}

void lproc_stdin_ack(struct lproc *p, uint32_t n)
{
    p->stdin_inflight -= n;
}

void lproc_stdin_gone(struct lproc *p)
{
    p->stdin_gone = true;
    p->stdin_inflight = 0;
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct lproc *p = arg;
    if (p->state == LPROC_EXITED || !p->box)
        return;
    if (!p->reason)
        p->reason = "timeout";
    box_signal(p->box, p->wire, SIGKILL);
}

/* ---- operations ---- */

int lproc_write(struct lproc *p, const char *data, size_t len, bool eof, struct cordon_err *err)
{
    if (p->state == LPROC_EXITED || !p->box)
        return err_set(err, CORDON_E_USAGE, "process \"%s\" has exited", p->id);
    if (p->stdin_gone || p->eof_sent)
        return err_set(err, CORDON_E_USAGE, "the stdin of process \"%s\" is closed", p->id);
    if (len > LIVE_STDIN_WINDOW)
        return err_set(err, CORDON_E_USAGE, "at most %u bytes of stdin at a time, got %zu",
                       LIVE_STDIN_WINDOW, len);
    if (p->stdin_inflight + len > LIVE_STDIN_WINDOW)
        return err_set(err, CORDON_E_USAGE,
                       "busy: %u bytes of stdin wait for process \"%s\" to "
                       "read them; try again",
                       p->stdin_inflight, p->id);
    if (len) {
        box_stdin(p->box, p->wire, data, len);
        p->stdin_inflight += (uint32_t)len;
    }
    if (eof) {
        box_eof(p->box, p->wire);
        p->eof_sent = true;
    }
    return 0;
}

/* A control frame for P's agent, unless it has not read what it was sent (bounded). */
static int control_room(const struct lproc *p, struct cordon_err *err)
{
    if (p->state == LPROC_EXITED || !p->box)
        return err_set(err, CORDON_E_USAGE, "process \"%s\" has exited", p->id);
    if (box_backlogged(p->box))
        return err_set(err, CORDON_E_USAGE,
                       "busy: the sandbox of process \"%s\" has not read what was "
                       "sent to it (paused or stopped); try again",
                       p->id);
    return 0;
}

int lproc_signal(struct lproc *p, int sig, uid_t by, struct cordon_err *err)
{
    TRY(control_room(p, err));
    live_audit(policy_of(p), "process.signal", p->run_id,
               json_pack("{s:s, s:s?, s:i, s:I}", "process_id", p->id, "session",
                         p->session_id[0] ? p->session_id : NULL, "signal", sig, "uid",
                         (json_int_t)by));
    box_signal(p->box, p->wire, sig);
    return 0;
}

int lproc_resize(struct lproc *p, uint16_t cols, uint16_t rows, struct cordon_err *err)
{
    TRY(control_room(p, err));
    if (!p->pty)
        return err_set(err, CORDON_E_UNSUPPORTED, "process \"%s\" has no terminal", p->id);
    if (!cols || !rows)
        return err_set(err, CORDON_E_USAGE, "a terminal needs at least one column and one row");
    box_resize(p->box, p->wire, cols, rows);
    return 0;
}

/* ---- starting ---- */

void lproc_req_release(struct lproc_req *r)
{
    strv_free(r->argv);
    strv_free(r->envp);
    r->argv = r->envp = NULL;
}

/* Where a start's box comes from: SES's live one, or one of its own. */
static struct box *box_for(struct daemon *d, uid_t owner, struct session *ses,
                           struct cordon_err *err)
{
    if (ses && ses->live) {
        if (ses->paused)
            return err_set(err, CORDON_E_USAGE,
                           "session \"%s\" is paused; session.resume it "
                           "first",
                           ses->id),
                   NULL;
        if (!ses->box || !box_alive(ses->box))
            return err_set(err, CORDON_E_USAGE, "the sandbox of session \"%s\" is gone", ses->id),
                   NULL;
        return ses->box;
    }
    const struct policy *pol = ses ? &ses->pol : d->cfg.policy;
    if (pol->workspace_mode == POLICY_WS_OVERLAY)
        return err_set(err, CORDON_E_USAGE,
                       "an overlay workspace's runs go through run or "
                       "session.exec, one commit each"),
               NULL;
    struct box_spec spec = { .base = pol, .owner = owner, .session_id = ses ? ses->id : NULL };
    return box_new(d, &spec, err);
}

static void audit_start(const struct lproc *p, const struct lproc_req *r, bool live)
{
    json_t *argv = json_array();
    for (char **a = r->argv; argv && a && *a; a++)
        json_array_append_new(argv, json_string(*a));
    live_audit(policy_of(p), "process.start", p->run_id,
               /* clang-format off */
               json_pack("{s:s, s:s?, s:o, s:b, s:b, s:s, s:b, s:I}", "process_id", p->id,
                         "session", p->session_id[0] ? p->session_id : NULL, "argv", argv,
                         "shell", r->shell, "pty", p->pty, "cwd", r->cwd, "live", live, "uid",
                         (json_int_t)p->owner));
    /* clang-format on */
}

struct lproc *lproc_start(struct daemon *d, uid_t owner, struct session *ses,
                          const struct lproc_req *r, const struct lproc_sink *sink,
                          struct cordon_err *err)
{
    const struct policy *pol = ses ? &ses->pol : d->cfg.policy;
    if (daemon_check_call_options(pol, r->timeout_ms, r->envp, err) < 0)
        return NULL;
    /*
     * The policy's wall clock is each process's (a live box has none of its
     * own); a timeout lowers it, never raises it (as run's does).
     */
    uint64_t timeout_ms = r->timeout_ms;
    if (pol->limits.wall_ms && (!timeout_ms || timeout_ms > pol->limits.wall_ms))
        timeout_ms = pol->limits.wall_ms;
    struct box *b = box_for(d, owner, ses, err);
    if (!b)
        return NULL;
    struct lproc *p = calloc(1, sizeof *p);
    if (!p || !(p->argv0 = strdup(r->argv[0]))) {
        free(p);
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        if (!(ses && ses->live))
            box_close(b);
        return NULL;
    }
    p->d = d;
    audit_new_run_id(p->id);
    p->num = ++d->next_lproc_num > 0 ? d->next_lproc_num : (d->next_lproc_num = 1);
    p->owner = owner;
    p->ses = ses;
    snprintf(p->session_id, sizeof p->session_id, "%s", ses ? ses->id : "");
    snprintf(p->run_id, sizeof p->run_id, "%s", box_run_id(b));
    p->own_box = !(ses && ses->live);
    p->pty = r->cols && r->rows;
    p->limit = pol->limits.output;
    p->started_us = daemon_now_us();
    struct box_cmd cmd = { .argv = r->argv,
                           .envp = r->envp,
                           .cwd = r->cwd,
                           .cols = r->cols,
                           .rows = r->rows,
                           .shell = r->shell };
    if (box_spawn(b, p, &cmd, err) < 0) {
        if (p->own_box)
            box_close(b);
        free(p->argv0);
        free(p);
        return NULL;
    }
    if (sink)
        p->sink = *sink;
    p->next = d->lprocs;
    d->lprocs = p;
    d->n_lprocs++;
    if (timeout_ms && (p->timeout_ev = evtimer_new(d->base, on_timeout, p))) {
        struct timeval tv = { (time_t)(timeout_ms / 1000),
                              (suseconds_t)(timeout_ms % 1000) * 1000 };
        evtimer_add(p->timeout_ev, &tv);
    }
    audit_start(p, r, !p->own_box);
    collect(d);
    return p;
}

void lproc_free_all(struct daemon *d)
{
    while (d->lprocs) {
        struct lproc *p = d->lprocs;
        if (p->own_box && p->box)
            box_close(p->box);
        lproc_free(p);
    }
}

/* ---- process.* over JSON-RPC ---- */

/* The RPC code of an operation's failure: busy, the caller's mistake, or a refusal. */
static int rpc_code(const struct cordon_err *e)
{
    if (strncmp(e->msg, "busy:", 5) == 0)
        return RPC_BUSY;
    return e->kind == CORDON_E_USAGE || e->kind == CORDON_E_NOTFOUND ||
            e->kind == CORDON_E_UNSUPPORTED
        ? RPC_INVALID_PARAMS
        : RPC_REFUSED;
}

static void client_output(void *ctx, struct lproc *p, int stream, const char *data, size_t len)
{
    bool b64 = false;
    json_t *chunk = daemon_bytes_json(data, len, &b64);
    daemon_reply(ctx,
                 rpc_notification("process.output",
                                  json_pack("{s:s, s:s, s:o}", "process_id", p->id, "stream",
                                            stream == 2 ? "stderr" : "stdout",
                                            b64 ? "data_base64" : "data", chunk)));
}

static void client_ended(void *ctx, struct lproc *p)
{
    json_t *params = json_pack("{s:s, s:s}", "process_id", p->id, "run_id", p->run_id);
    lproc_end_json(p, params);
    daemon_reply(ctx, rpc_notification("process.exit", params));
}

static size_t client_backlog(void *ctx)
{
    const struct client *c = ctx;
    return c->gone ? 0 : rpc_stream_pending_output(c->s);
}

static struct lproc_sink client_sink(struct client *c)
{
    return (struct lproc_sink){
        .output = client_output, .ended = client_ended, .backlog = client_backlog, .ctx = c
    };
}

int lproc_parse_cwd(const char *cwd, char *out, size_t size, char *why, size_t len)
{
    const char *rel = cwd;
    if (cwd[0] == '/') {
        if (strncmp(cwd, "/workspace", 10) != 0 || (cwd[10] != '\0' && cwd[10] != '/'))
            return why_printf(why, len, "\"cwd\" must lie in /workspace, got \"%.200s\"", cwd);
        rel = cwd + 10;
    }
    int rc = wsfile_normalize(rel, out, size);
    if (rc == WSFILE_PATH_UP)
        return why_printf(why, len, "\"cwd\" must lie in /workspace, got \"%.200s\"", cwd);
    if (rc < 0)
        return why_printf(why, len, "%s", "\"cwd\" is too long");
    return 0;
}

static int parse_pty(const json_t *pty, struct lproc_req *r, char *why, size_t len)
{
    if (!pty || json_is_false(pty))
        return 0;
    if (json_is_true(pty)) {
        r->cols = 80;
        r->rows = 24;
        return 0;
    }
    json_t *cols = json_object_get(pty, "cols"), *rows = json_object_get(pty, "rows");
    if (!json_is_object(pty) || !json_is_integer(cols) || !json_is_integer(rows) ||
        json_integer_value(cols) < 1 || json_integer_value(cols) > 65535 ||
        json_integer_value(rows) < 1 || json_integer_value(rows) > 65535)
        return why_printf(why, len, "%s",
                          "\"pty\" must be true or {\"cols\": N, \"rows\": N}, "
                          "each 1 to 65535");
    r->cols = (uint16_t)json_integer_value(cols);
    r->rows = (uint16_t)json_integer_value(rows);
    return 0;
}

int lproc_parse(const json_t *params, struct lproc_req *r, char *why, size_t len)
{
    static const char *const known[] = { "argv", "code",    "language",   "env",   "cwd",
                                         "pty",  "timeout", "session_id", "stdin", "stdin_base64" };
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)params, key, v)
    {
        size_t k = 0;
        while (k < sizeof known / sizeof known[0] && strcmp(key, known[k]) != 0)
            k++;
        if (k == sizeof known / sizeof known[0])
            return why_printf(why, len, "unknown parameter \"%.64s\"", key);
    }
    json_t *lang = json_object_get(params, "language");
    if (json_object_get(params, "code") && json_is_string(lang) &&
        strcmp(json_string_value(lang), "sh") == 0) {
        /* Shell text: in a live session its cd and exports are the next command's too. */
        json_t *code = json_object_get(params, "code");
        if (!json_is_string(code) || strlen(json_string_value(code)) != json_string_length(code))
            return why_printf(why, len, "%s", "\"code\" must be a string without NUL bytes");
        r->argv = calloc(2, sizeof *r->argv);
        if (!r->argv || !(r->argv[0] = strdup(json_string_value(code))))
            return why_printf(why, len, "%s", "out of memory");
        r->shell = true;
    } else if (daemon_parse_command(params, &r->argv, why, len) < 0) {
        return -1;
    }
    TRY(daemon_parse_env(json_object_get(params, "env"), &r->envp, why, len));
    json_t *cwd = json_object_get(params, "cwd");
    if (cwd && !json_is_string(cwd))
        return why_printf(why, len, "%s", "\"cwd\" must be a string");
    if (cwd)
        TRY(lproc_parse_cwd(json_string_value(cwd), r->cwd, sizeof r->cwd, why, len));
    TRY(parse_pty(json_object_get(params, "pty"), r, why, len));
    return daemon_parse_timeout(params, &r->timeout_ms, why, len);
}

int lproc_parse_bytes(const json_t *params, const char *text_key, const char *b64_key, char **out,
                      size_t *out_len, char *why, size_t len)
{
    json_t *text = json_object_get(params, text_key), *b64 = json_object_get(params, b64_key);
    *out = NULL;
    *out_len = 0;
    if (text && b64)
        return why_printf(why, len, "give \"%s\" or \"%s\", not both", text_key, b64_key);
    if (text) {
        if (!json_is_string(text))
            return why_printf(why, len, "\"%s\" must be a string", text_key);
        *out_len = json_string_length(text);
        if (!(*out = malloc(*out_len + 1)))
            return why_printf(why, len, "%s", "out of memory");
        memcpy(*out, json_string_value(text), *out_len);
    } else if (b64 &&
               (!json_is_string(b64) ||
                daemon_base64_decode(json_string_value(b64), json_string_length(b64), out,
                                     out_len) < 0)) {
        return why_printf(why, len, "\"%s\" must be a base64 string", b64_key);
    }
    return 0;
}

static struct lproc *target(struct client *c, const json_t *id, const json_t *params,
                            const char *method)
{
    const char *pid = json_string_value(json_object_get(params, "process_id"));
    if (!pid) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS,
                               "process.%s: \"process_id\" must be a "
                               "string",
                               method));
        return NULL;
    }
    struct lproc *p = lproc_find(c->d, c->uid, c->admin, pid, 0);
    /* Another uid's is answered as one that never was. */
    if (!p)
        daemon_reply(
            c, rpc_error(id, RPC_INVALID_PARAMS, "process.%s: no process \"%.40s\"", method, pid));
    return p;
}

static void method_start(struct client *c, const json_t *id, const json_t *params)
{
    struct daemon *d = c->d;
    char why[256];
    struct session *ses = NULL;
    json_t *sid = json_object_get(params, "session_id");
    if (d->draining) {
        daemon_reply(c, rpc_error(id, RPC_SHUTTING_DOWN, "the daemon is shutting down"));
        return;
    }
    if (sid && !(ses = session_lookup(d, c, json_string_value(sid)))) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS, "process.start: no session \"%.40s\"",
                               json_is_string(sid) ? json_string_value(sid) : ""));
        return;
    }
    if (ses && ses->busy) {
        d->busy++;
        daemon_reply(c,
                     rpc_error(id, RPC_BUSY,
                               "busy: process.start: the session is %s; wait "
                               "for that to finish",
                               ses->busy));
        return;
    }
    struct lproc_req r = { 0 };
    _cleanup_free_ char *input = NULL;
    size_t input_len = 0;
    if (lproc_parse(params, &r, why, sizeof why) < 0 ||
        lproc_parse_bytes(params, "stdin", "stdin_base64", &input, &input_len, why, sizeof why) <
            0) {
        d->bad_requests++;
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "process.start: %s", why));
        lproc_req_release(&r);
        return;
    }
    struct cordon_err err = { 0 };
    struct lproc_sink sink = client_sink(c);
    struct lproc *p = lproc_start(d, c->uid, ses, &r, &sink, &err);
    lproc_req_release(&r);
    if (!p) {
        daemon_reply(c, rpc_error(id, rpc_code(&err), "process.start: %s", err.msg));
        return;
    }
    if (input_len)
        lproc_write(p, input, input_len, false, &err);
    /* clang-format off */
    daemon_reply(c, rpc_result(id, json_pack("{s:s, s:i, s:s, s:s?, s:b}", "process_id", p->id,
                                             "num", (int)p->num, "run_id", p->run_id,
                                             "session_id", ses ? ses->id : NULL, "pty", p->pty)));
    /* clang-format on */
}

static void method_write(struct client *c, const json_t *id, const json_t *params, struct lproc *p)
{
    char why[200];
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    json_t *eof = json_object_get(params, "eof");
    if (lproc_parse_bytes(params, "data", "data_base64", &data, &len, why, sizeof why) < 0 ||
        (eof && !json_is_boolean(eof))) {
        daemon_reply(
            c,
            rpc_error(id, RPC_INVALID_PARAMS, "process.write_stdin: %s",
                      eof && !json_is_boolean(eof) ? "\"eof\" must be true or false" : why));
        return;
    }
    struct cordon_err err = { 0 };
    if (lproc_write(p, data, len, json_is_true(eof), &err) < 0)
        daemon_reply(c, rpc_error(id, rpc_code(&err), "process.write_stdin: %s", err.msg));
    else
        daemon_reply(c, rpc_result(id, json_pack("{s:I}", "written", (json_int_t)len)));
}

/* "INT", "SIGINT" or 2; only the four a terminal's user sends. */
static int parse_signal(const json_t *v)
{
    static const struct {
        const char *name;
        int sig;
    } known[] = {
        { "INT", SIGINT },
        { "TERM", SIGTERM },
        { "KILL", SIGKILL },
        { "HUP", SIGHUP },
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        const char *s = json_string_value(v);
        if (s && strncmp(s, "SIG", 3) == 0)
            s += 3;
        if ((s && strcmp(s, known[i].name) == 0) ||
            (json_is_integer(v) && json_integer_value(v) == known[i].sig))
            return known[i].sig;
    }
    return 0;
}

static void method_on(struct client *c, const char *method, const json_t *id, const json_t *params,
                      struct lproc *p)
{
    struct cordon_err err = { 0 };
    int rc = 0;
    if (strcmp(method, "write_stdin") == 0) {
        method_write(c, id, params, p);
        return;
    } else if (strcmp(method, "signal") == 0) {
        int sig = parse_signal(json_object_get(params, "signal"));
        if (!sig) {
            daemon_reply(c,
                         rpc_error(id, RPC_INVALID_PARAMS,
                                   "process.signal: \"signal\" must "
                                   "be \"INT\", \"TERM\", \"KILL\" or \"HUP\""));
            return;
        }
        rc = lproc_signal(p, sig, c->uid, &err);
    } else if (strcmp(method, "resize") == 0) {
        json_t *cols = json_object_get(params, "cols"), *rows = json_object_get(params, "rows");
        if (!json_is_integer(cols) || !json_is_integer(rows) || json_integer_value(cols) < 1 ||
            json_integer_value(cols) > 65535 || json_integer_value(rows) < 1 ||
            json_integer_value(rows) > 65535) {
            daemon_reply(c,
                         rpc_error(id, RPC_INVALID_PARAMS,
                                   "process.resize: \"cols\" and "
                                   "\"rows\" must be 1 to 65535"));
            return;
        }
        rc = lproc_resize(p, (uint16_t)json_integer_value(cols), (uint16_t)json_integer_value(rows),
                          &err);
    }
    if (rc < 0)
        daemon_reply(c, rpc_error(id, rpc_code(&err), "process.%s: %s", method, err.msg));
    else
        daemon_reply(c, rpc_result(id, json_pack("{s:b}", "ok", 1)));
}

static json_t *process_json(const struct lproc *p)
{
    static const char *const states[] = { "starting", "running", "exited" };
    /* clang-format off */
    json_t *j = json_pack("{s:s, s:i, s:s?, s:s, s:s, s:s, s:b, s:f}", "process_id", p->id,
                          "num", (int)p->num, "session_id", p->session_id[0] ? p->session_id : NULL,
                          "run_id", p->run_id, "command", p->argv0, "state", states[p->state],
                          "pty", p->pty, "age_s",
                          (double)(daemon_now_us() - p->started_us) / 1e6);
    /* clang-format on */
    if (j && p->state == LPROC_EXITED)
        lproc_end_json(p, j);
    else if (j)
        json_object_set_new(j, "output_bytes", json_integer((json_int_t)p->out_bytes));
    return j;
}

static void method_attach(struct client *c, const json_t *id, struct lproc *p)
{
    /* A session.exec's process answers its caller with what it said: not taken from it. */
    if (p->sink.ended && p->sink.ended != client_ended) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS,
                               "process.attach: process \"%s\" is "
                               "answered by the call that started it; process.wait waits for "
                               "its end",
                               p->id));
        return;
    }
    json_t *ans = process_json(p);
    for (int s = 0; s < 2; s++) {
        size_t len = 0;
        bool b64 = false;
        _cleanup_free_ char *data = ring_copy(&p->ring[s], &len);
        json_object_set_new(ans, s ? "replay_stderr" : "replay_stdout",
                            daemon_bytes_json(data, len, &b64));
        json_object_set_new(ans, s ? "replay_stderr_encoding" : "replay_stdout_encoding",
                            json_string(b64 ? "base64" : "utf-8"));
    }
    json_object_set_new(ans, "replay_dropped",
                        json_integer((json_int_t)(p->ring[0].dropped + p->ring[1].dropped)));
    /* The answer first, then what comes after it. */
    daemon_reply(c, rpc_result(id, ans));
    if (p->state != LPROC_EXITED) {
        struct lproc_sink sink = client_sink(c);
        lproc_attach(p, &sink);
    }
}

static void method_wait(struct client *c, const json_t *id, struct lproc *p)
{
    if (p->state == LPROC_EXITED) {
        json_t *end = json_pack("{s:s}", "process_id", p->id);
        lproc_end_json(p, end);
        daemon_reply(c, rpc_result(id, end));
        return;
    }
    struct lproc_waiter *w = calloc(1, sizeof *w);
    if (!w) {
        daemon_reply(c, rpc_error(id, RPC_INTERNAL_ERROR, "out of memory"));
        return;
    }
    w->c = c;
    w->id = json_deep_copy(id);
    w->next = p->waiters;
    p->waiters = w;
}

static void method_list(struct client *c, const json_t *id, const json_t *params)
{
    json_t *jsid = json_object_get(params, "session_id");
    const char *sid = json_string_value(jsid);
    if (jsid && !sid) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS,
                               "process.list: \"session_id\" must be "
                               "a string"));
        return;
    }
    json_t *all = json_array();
    for (struct lproc *p = c->d->lprocs; p; p = p->next)
        if ((c->admin || p->owner == c->uid) && (!sid || strcmp(p->session_id, sid) == 0))
            json_array_append_new(all, process_json(p));
    daemon_reply(c, rpc_result(id, json_pack("{s:o}", "processes", all)));
}

void process_method(struct client *c, const char *method, const json_t *id, const json_t *params)
{
    if (strcmp(method, "start") == 0) {
        method_start(c, id, params);
        return;
    }
    if (strcmp(method, "list") == 0) {
        method_list(c, id, params);
        return;
    }
    static const char *const known[] = { "write_stdin", "signal", "resize", "wait", "attach" };
    size_t k = 0;
    while (k < sizeof known / sizeof known[0] && strcmp(method, known[k]) != 0)
        k++;
    if (k == sizeof known / sizeof known[0]) {
        c->d->bad_requests++;
        daemon_reply(
            c, rpc_error(id, RPC_METHOD_NOT_FOUND, "unknown method \"process.%.40s\"", method));
        return;
    }
    struct lproc *p = target(c, id, params, method);
    if (!p)
        return;
    if (strcmp(method, "wait") == 0)
        method_wait(c, id, p);
    else if (strcmp(method, "attach") == 0)
        method_attach(c, id, p);
    else
        method_on(c, method, id, params, p);
}

bool lproc_session_active(const struct daemon *d, const struct session *ses)
{
    for (const struct lproc *p = d->lprocs; p; p = p->next)
        if (p->ses == ses && p->state != LPROC_EXITED)
            return true;
    return false;
}
