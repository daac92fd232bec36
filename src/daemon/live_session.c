/*
 * daemon/live_session.c: live sessions (session.create {"live": true}): one
 * box kept for the session's life, so that its processes share the working
 * directory, the environment, /tmp and whatever runs in the background,
 * under limits that hold for the whole session; session.exec runs there
 * (shell text keeps its cd and exports for the next), session.pause and
 * session.resume freeze and thaw it whole. Destroying the session ends the
 * box, every process in it and its workspace.
 */
#include "daemon/live.h"

#include "common/cleanup.h"
#include "common/text.h"
#include "daemon/expose.h"
#include "sandbox/backend.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

int live_session_start(struct daemon *d, struct session *ses, struct cordon_err *err)
{
    if (ses->pol.workspace_mode == POLICY_WS_OVERLAY)
        return err_set(err, CORDON_E_USAGE,
                       "a live session's workspace is direct: its "
                       "processes run together, not as one change each");
    struct box_spec spec = {
        .base = &ses->pol, .owner = ses->owner, .session_id = ses->id, .live = true
    };
    ses->box = box_new(d, &spec, err);
    if (!ses->box)
        return -1;
    ses->live = true;
    return 0;
}

void live_box_ended(struct daemon *d, struct box *b)
{
    for (struct session *ses = d->sessions; ses; ses = ses->next)
        if (ses->box == b) {
            ses->box = NULL;
            ses->paused = false;
            expose_close_all(d, ses);
        }
}

void live_session_gone(struct daemon *d, struct session *ses)
{
    expose_close_all(d, ses);
    if (ses->box) {
        box_close(ses->box);
        ses->box = NULL;
    }
    /* Its processes' records outlive it (process.wait may still ask). */
    for (struct lproc *p = d->lprocs; p; p = p->next)
        if (p->ses == ses)
            p->ses = NULL;
}

/* ---- session.exec in a live session ---- */

struct capture {
    char *data;
    size_t len;
    uint64_t total;
};

struct live_exec {
    struct client *c;
    json_t *id;
    struct capture out[2];
    uint64_t start_us;
};

static void exec_output(void *ctx, struct lproc *p, int stream, const char *data, size_t len)
{
    (void)p;
    struct live_exec *x = ctx;
    struct capture *cap = &x->out[stream == 2];
    size_t cap_max = x->c ? x->c->d->cfg.output_cap : 0;
    size_t take = cap->len < cap_max ? (cap_max - cap->len < len ? cap_max - cap->len : len) : 0;
    char *grown = take ? realloc(cap->data, cap->len + take) : NULL;
    if (grown) {
        cap->data = grown;
        memcpy(cap->data + cap->len, data, take);
        cap->len += take;
    }
    cap->total += len;
}

static void capture_json(json_t *ans, const char *name, const struct capture *cap)
{
    bool b64 = false;
    char key[32];
    json_object_set_new(ans, name, daemon_bytes_json(cap->data, cap->len, &b64));
    snprintf(key, sizeof key, "%s_encoding", name);
    json_object_set_new(ans, key, json_string(b64 ? "base64" : "utf-8"));
    snprintf(key, sizeof key, "%s_truncated", name);
    json_object_set_new(ans, key, json_boolean(cap->total > cap->len));
    snprintf(key, sizeof key, "%s_total", name);
    json_object_set_new(ans, key, json_integer((json_int_t)cap->total));
}

/* cordon run's exit status for the end: the command's, 128+N, 124 on timeout, else 125. */
static int status_of(const struct lproc *p)
{
    if (p->has_status && WIFEXITED(p->wstatus))
        return WEXITSTATUS(p->wstatus);
    if (p->reason && strcmp(p->reason, "timeout") == 0)
        return 124;
    if (p->has_status && WIFSIGNALED(p->wstatus))
        return 128 + WTERMSIG(p->wstatus);
    if (p->reason && strcmp(p->reason, "start_failed") == 0)
        return strstr(p->error, "No such file") ? 127 : 126;
    return 125;
}

static void exec_ended(void *ctx, struct lproc *p)
{
    struct live_exec *x = ctx;
    if (x->c) {
        json_t *ans = json_pack("{s:s, s:s, s:i, s:b}", "run_id", p->run_id, "process_id", p->id,
                                "status", status_of(p), "live", 1);
        lproc_end_json(p, ans);
        capture_json(ans, "stdout", &x->out[0]);
        capture_json(ans, "stderr", &x->out[1]);
        json_object_set_new(
            ans, "times",
            json_pack("{s:f}", "total_ms", (double)(daemon_now_us() - x->start_us) / 1000.0));
        daemon_reply(x->c, rpc_result(x->id, ans));
    }
    json_decref(x->id);
    free(x->out[0].data);
    free(x->out[1].data);
    free(x);
}

static size_t exec_backlog(void *ctx)
{
    (void)ctx;
    return 0; /* captured up to the cap, the rest counted: never held back */
}

void live_client_gone(struct daemon *d, struct client *c)
{
    /* As a run's: an exec whose caller left is stopped. */
    for (struct lproc *p = d->lprocs; p; p = p->next)
        if (p->sink.ended == exec_ended && ((struct live_exec *)p->sink.ctx)->c == c) {
            ((struct live_exec *)p->sink.ctx)->c = NULL;
            if (p->box && p->state != LPROC_EXITED)
                box_signal(p->box, p->wire, SIGKILL);
        }
}

void live_exec(struct client *c, const json_t *id, const json_t *params, struct session *ses)
{
    struct daemon *d = c->d;
    char why[256];
    struct lproc_req r = { 0 };
    _cleanup_free_ char *in = NULL;
    size_t in_len = 0;
    if (lproc_parse(params, &r, why, sizeof why) < 0 ||
        lproc_parse_bytes(params, "stdin", "stdin_base64", &in, &in_len, why, sizeof why) < 0) {
        d->bad_requests++;
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.exec: %s", why));
        lproc_req_release(&r);
        return;
    }
    struct live_exec *x = calloc(1, sizeof *x);
    struct cordon_err err = { 0 };
    struct lproc *p = NULL;
    if (x) {
        *x = (struct live_exec){ .c = c, .id = json_deep_copy(id), .start_us = daemon_now_us() };
        struct lproc_sink sink = {
            .output = exec_output, .ended = exec_ended, .backlog = exec_backlog, .ctx = x
        };
        p = lproc_start(d, c->uid, ses, &r, &sink, &err);
    } else {
        err_set(&err, CORDON_E_INTERNAL, "out of memory");
    }
    lproc_req_release(&r);
    if (!p) {
        if (x)
            json_decref(x->id);
        free(x);
        daemon_reply(c,
                     rpc_error(id,
                               strncmp(err.msg, "busy:", 5) == 0 ? RPC_BUSY : RPC_INVALID_PARAMS,
                               "session.exec: %s", err.msg));
        return;
    }
    /* An exec's stdin is what it was given, then its end, as a run's is. */
    lproc_write(p, in ? in : "", in_len, true, &err);
}

/* ---- pause and resume ---- */

static void pause_resume(struct client *c, const json_t *id, struct session *ses, bool pause)
{
    const char *method = pause ? "pause" : "resume";
    struct cordon_err err = { 0 };
    if (!ses->live || !ses->box) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS,
                               "session.%s: session \"%s\" has no "
                               "live sandbox",
                               method, ses->id));
        return;
    }
    if (!box_ready(ses->box)) {
        daemon_reply(c,
                     rpc_error(id, RPC_BUSY,
                               "busy: session.%s: the sandbox of session \"%s\" "
                               "is starting; try again",
                               method, ses->id));
        return;
    }
    if (ses->paused == pause) {
        daemon_reply(
            c, rpc_result(id, json_pack("{s:s, s:b}", "session_id", ses->id, "paused", pause)));
        return;
    }
    if (box_freeze(ses->box, pause, &err) < 0) {
        live_audit(&ses->pol, pause ? "session.pause" : "session.resume", box_run_id(ses->box),
                   json_pack("{s:s, s:I, s:b, s:s}", "session", ses->id, "uid", (json_int_t)c->uid,
                             "done", 0, "error", err.msg));
        daemon_reply(c, rpc_error(id, RPC_REFUSED, "session.%s: %s", method, err.msg));
        return;
    }
    ses->paused = pause;
    live_audit(
        &ses->pol, pause ? "session.pause" : "session.resume", box_run_id(ses->box),
        json_pack("{s:s, s:I, s:b}", "session", ses->id, "uid", (json_int_t)c->uid, "done", 1));
    daemon_reply(c,
                 rpc_result(id, json_pack("{s:s, s:b}", "session_id", ses->id, "paused", pause)));
}

void live_session_method(struct client *c, const char *method, const json_t *id,
                         const json_t *params, struct session *ses)
{
    if (strcmp(method, "pause") == 0 || strcmp(method, "resume") == 0) {
        pause_resume(c, id, ses, method[0] == 'p');
        return;
    }
    expose_method(c, id, params, ses, strcmp(method, "unexpose") == 0);
}
