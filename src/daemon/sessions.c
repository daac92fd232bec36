/*
 * daemon/sessions.c: the daemon's sessions (see daemon.h): a workspace kept
 * between runs in the state directory, its file operations, fork, and the
 * decision a manual overlay session's last exec waits for. A session is its
 * creator's uid's; what takes as long as the workspace is big (a commit, a
 * discard, a fork, a removal) runs in a worker (daemon/worker.h).
 */
#include "daemon/daemon_int.h"

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/text.h"
#include "core/run.h"
#include "daemon/expose.h"
#include "daemon/live.h"
#include "daemon/worker.h"
#include "daemon/workspace_files.h"
#include "sandbox/backend.h"
#include "sandbox/txn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void session_unlink(struct daemon *d, struct session *ses)
{
    for (struct session **pp = &d->sessions; *pp; pp = &(*pp)->next)
        if (*pp == ses) {
            *pp = ses->next;
            d->n_sessions--;
            break;
        }
}

/* Its descriptors and memory; the workspace is left as it is. */
static void session_release(struct session *ses)
{
    if (ses->dir_fd >= 0)
        close(ses->dir_fd);
    if (ses->pending >= 0)
        close(ses->pending);
    free(ses->dir);
    free(ses);
}

void session_free(struct daemon *d, struct session *ses)
{
    live_session_gone(d, ses);
    session_unlink(d, ses);
    struct cordon_err ignored;
    wsfile_remove_tree(d->state_fd, ses->id, &ignored);
    session_release(ses);
}

static struct session *session_new(struct daemon *d, uid_t owner, struct cordon_err *err)
{
    unsigned held = 0;
    for (const struct session *ses = d->sessions; ses; ses = ses->next)
        held += ses->owner == owner;
    /* Its share first: one uid's sessions never keep another's out. */
    if (held >= daemon_uid_share(d->cfg.max_sessions)) {
        err_set(err, CORDON_E_USAGE,
                "busy: uid %u holds its share of %zu sessions (half of the daemon's %u); "
                "destroy one first",
                (unsigned)owner, daemon_uid_share(d->cfg.max_sessions), d->cfg.max_sessions);
        return NULL;
    }
    if (d->n_sessions >= d->cfg.max_sessions) {
        /* The limit, not the count: how many others hold is none of the caller's business. */
        err_set(err, CORDON_E_USAGE,
                "busy: the daemon holds its limit of %u sessions; destroy "
                "one first",
                d->cfg.max_sessions);
        return NULL;
    }
    struct session *ses = calloc(1, sizeof *ses);
    if (!ses) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    ses->dir_fd = ses->pending = -1;
    ses->owner = owner;
    audit_new_run_id(ses->id);
    if (asprintf(&ses->dir, "%s/%s", d->cfg.state_dir, ses->id) < 0) {
        free(ses);
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    ses->next = d->sessions;
    d->sessions = ses;
    d->n_sessions++;
    /* 0700: the state directory lets others pass to the exposed sockets, not in here. */
    if (mkdirat(d->state_fd, ses->id, 0700) < 0 ||
        (ses->dir_fd =
             openat(d->state_fd, ses->id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot make the session's workspace");
        session_free(d, ses);
        return NULL;
    }
    policy_derive(d->cfg.policy, &ses->pol);
    ses->pol.workspace = ses->dir;
    ses->created_us = ses->used_us = daemon_now_us();
    return ses;
}

static json_t *session_json(const struct daemon *d, const struct session *ses)
{
    uint64_t now = daemon_now_us();
    static const char *const commits[] = { "on_success", "always", "manual" };
    bool active = ses->running || lproc_session_active(d, ses), idle = !ses->busy && !active;
    const char *state = ses->paused ? "paused"
        : ses->busy                 ? ses->busy
        : active                    ? "running"
                                    : "idle";
    return json_pack("{s:s, s:I, s:s, s:i, s:f, s:f, s:s, s:s, s:b, s:b, s:b}", "session_id",
                     ses->id, "owner", (json_int_t)ses->owner, "state", state, "running",
                     ses->running, "age_s", (double)(now - ses->created_us) / 1e6, "idle_s",
                     idle ? (double)(now - ses->used_us) / 1e6 : 0.0, "workspace_mode",
                     ses->pol.workspace_mode == POLICY_WS_OVERLAY ? "overlay" : "direct",
                     "workspace_commit", commits[ses->pol.workspace_commit], "pending",
                     ses->pending >= 0, "live", ses->live, "paused", ses->paused);
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
    json_object_foreach((json_t *)params, key, v)
    {
        if (strcmp(key, "live") == 0) {
            if (!json_is_boolean(v))
                return err_set(err, CORDON_E_USAGE, "\"live\" must be true or false");
            ses->live = json_is_true(v);
            continue;
        }
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

/* ---- operations in workers ---- */

/*
 * A commit, a discard, a fork's copies and a removal take as long as the
 * workspace is big: each runs in a worker (daemon/worker.h) while the loop
 * serves everyone else, and the session is busy until it is done.
 */
#define MAX_OPS 64

struct session_op {
    struct session_op *next; /* in d->ops */
    struct daemon *d;
    struct client *c; /* who asked; NULL once gone (or nobody: an idle expiry) */
    json_t *id;
    const char *method;      /* "commit", "discard", "fork", "destroy" */
    struct session *ses;     /* the one worked on; a removal's is out of the list */
    struct session **copies; /* a fork's, made empty before its worker fills them */
    size_t n_copies;
    worker_done_fn *done;
    struct worker *w;
};

/* An operation METHOD on SES for C's request ID (C may be NULL); NULL with ERR. */
static struct session_op *op_new(struct daemon *d, struct client *c, const json_t *id,
                                 const char *method, struct session *ses, struct cordon_err *err)
{
    if (d->n_ops >= MAX_OPS) {
        err_set(err, CORDON_E_USAGE,
                "busy: too many session operations are under way; try "
                "again later");
        return NULL;
    }
    struct session_op *op = calloc(1, sizeof *op);
    if (!op) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    *op = (struct session_op){
        .d = d, .c = c, .id = json_deep_copy(id), .method = method, .ses = ses
    };
    return op;
}

static void op_free(struct session_op *op)
{
    struct daemon *d = op->d;
    for (struct session_op **pp = &d->ops; *pp; pp = &(*pp)->next)
        if (*pp == op) {
            *pp = op->next;
            d->n_ops--;
            break;
        }
    json_decref(op->id);
    free(op->copies);
    free(op);
    /* Draining: this may have been the last thing to wait for. */
    daemon_maybe_finish(d);
}

/*
 * Start OP in a worker named NAME running FN on the descriptors KEEP, the
 * session's directory held locked (EXCLUSIVE for a removal); DONE answers.
 * -1 with ERR when no worker could start.
 */
static int op_start(struct session_op *op, const char *name, worker_fn *fn, worker_done_fn *done,
                    const int *keep, size_t n_keep, bool exclusive, struct cordon_err *err)
{
    struct worker_spec spec = { .name = name,
                                .lock_dir = op->ses->dir_fd,
                                .exclusive = exclusive,
                                .keep = keep,
                                .n_keep = n_keep,
                                .fn = fn,
                                .arg = op,
                                .done = done,
                                .ctx = op };
    op->done = done;
    op->w = worker_start(op->d->base, &spec, err);
    if (!op->w)
        return -1;
    op->next = op->d->ops;
    op->d->ops = op;
    op->d->n_ops++;
    return 0;
}

/* Why an operation has no answer from its worker. */
static const char *op_lost(const struct session_op *op, int *code)
{
    *code = op->d->draining ? RPC_SHUTTING_DOWN : RPC_INTERNAL_ERROR;
    return op->d->draining ? "the daemon is shutting down" : "its worker ended without an answer";
}

void sessions_client_gone(struct daemon *d, struct client *c)
{
    for (struct session_op *op = d->ops; op; op = op->next)
        if (op->c == c)
            op->c = NULL;
}

void sessions_stop_ops(struct daemon *d)
{
    while (d->ops) {
        struct session_op *op = d->ops;
        worker_kill(op->w);
        op->w = NULL;
        op->done(op, NULL); /* answers and frees it */
    }
}

/* In the worker: scan and apply, or only scan (a discard's summary is what goes). */
static json_t *decide_work(void *arg)
{
    const struct session_op *op = arg;
    const struct session *ses = op->ses;
    bool commit = strcmp(op->method, "commit") == 0;
    struct txn_summary sum = { 0 };
    txn_finish(ses->pending, ses->dir_fd, &ses->pol,
               commit ? POLICY_WS_COMMIT_ALWAYS : POLICY_WS_COMMIT_MANUAL, true, &sum);
    if (!commit && sum.outcome == TXN_PENDING)
        sum.outcome = TXN_DISCARDED;
    json_t *t = txn_summary_json(&sum);
    /* The decision is the run's last word: recorded under its id, as run.end was. */
    struct audit_log *log = NULL;
    struct cordon_err ignored = { 0 };
    if (t && cordon_audit_open(&ses->pol, &log, &ignored) == 0 && log) {
        audit_append(log, "workspace.decision", ses->pending_run,
                     json_pack("{s:s, s:s, s:O}", "session", ses->id, "decision", op->method,
                               "transaction", t),
                     &ignored);
        audit_close(log, &ignored);
        audit_free(log);
    }
    return t;
}

static void decide_done(void *ctx, const json_t *answer)
{
    struct session_op *op = ctx;
    struct session *ses = op->ses;
    ses->busy = NULL;
    ses->used_us = daemon_now_us();
    if (answer) {
        close(ses->pending);
        ses->pending = -1;
        json_t *ans = json_pack("{s:s, s:O}", "run_id", ses->pending_run, "transaction", answer);
        const char *outcome = json_string_value(json_object_get(answer, "outcome"));
        const char *reason = json_string_value(json_object_get(answer, "reason"));
        if (strcmp(op->method, "commit") != 0 ||
            json_is_true(json_object_get(answer, "committed"))) {
            daemon_reply(op->c, rpc_result(op->id, ans));
        } else {
            /* Not applied: an error, so a client that only checks for one learns it. */
            bool refused = outcome && strcmp(outcome, txn_outcome_name(TXN_REFUSED)) == 0;
            json_t *e = refused ? rpc_error(op->id, RPC_REFUSED,
                                            "session.commit: the change "
                                            "was refused: %s",
                                            reason ? reason : "")
                                : rpc_error(op->id, RPC_NOT_COMMITTED,
                                            "session.commit: the "
                                            "change could not be applied, the workspace is as "
                                            "it was: %s",
                                            reason ? reason : "");
            json_object_set_new(json_object_get(e, "error"), "data", ans);
            daemon_reply(op->c, e);
        }
    } else {
        /* The layer stays: a commit killed part way is applied whole by the next one. */
        int code;
        const char *why = op_lost(op, &code);
        daemon_reply(op->c,
                     rpc_error(op->id, code,
                               "session.%s: %s; the change is still "
                               "pending",
                               op->method, why));
    }
    op_free(op);
}

/* session.commit / session.discard: the decision a manual session's last exec waits for. */
static void session_decide(struct client *c, const json_t *id, struct session *ses, bool commit)
{
    const char *method = commit ? "commit" : "discard";
    if (ses->pending < 0) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS,
                               "session.%s: the session has no change "
                               "waiting (workspace_commit: manual keeps one per exec)",
                               method));
        return;
    }
    struct cordon_err err = { 0 };
    struct session_op *op = op_new(c->d, c, id, method, ses, &err);
    int keep[] = { ses->dir_fd, ses->pending };
    if (!op ||
        op_start(op, commit ? "cordon-commit" : "cordon-discard", decide_work, decide_done, keep, 2,
                 false, &err) < 0) {
        c->d->busy++;
        daemon_reply(c, rpc_error(id, RPC_BUSY, "session.%s: %s", method, err.msg));
        if (op)
            op_free(op);
        return;
    }
    ses->busy = commit ? "committing" : "discarding";
}

/* In the worker: the workspace goes. */
static json_t *remove_work(void *arg)
{
    const struct session_op *op = arg;
    struct cordon_err err = { 0 };
    bool removed = wsfile_remove_tree(op->d->state_fd, op->ses->id, &err) == 0;
    return json_pack("{s:b}", "removed", removed);
}

static void remove_done(void *ctx, const json_t *answer)
{
    struct session_op *op = ctx;
    /* What the worker left (it died, or a run made a part it could not remove) goes now. */
    if (!json_is_true(json_object_get(answer, "removed"))) {
        struct cordon_err ignored;
        wsfile_remove_tree(op->d->state_fd, op->ses->id, &ignored);
    }
    daemon_reply(op->c, rpc_result(op->id, json_pack("{s:b}", "destroyed", 1)));
    session_release(op->ses);
    op_free(op);
}

/*
 * Take SES out of the list (gone for everyone from now on) and remove its
 * workspace in a worker; C (if any) is answered once it is gone. -1 with
 * ERR when no worker could start: then nothing changed.
 */
static int session_remove(struct daemon *d, struct session *ses, struct client *c, const json_t *id,
                          struct cordon_err *err)
{
    struct session_op *op = op_new(d, c, id, "destroy", ses, err);
    int keep[] = { d->state_fd };
    if (!op || op_start(op, "cordon-remove", remove_work, remove_done, keep, 1, true, err) < 0) {
        if (op)
            op_free(op);
        return -1;
    }
    live_session_gone(d, ses);
    session_unlink(d, ses);
    ses->busy = "destroying";
    return 0;
}

/* Does C see SES? Its creator and an admin do; to anyone else it does not exist. */
static bool visible(const struct client *c, const struct session *ses)
{
    return c->admin || ses->owner == c->uid;
}

struct session *session_lookup(struct daemon *d, const struct client *c, const char *sid)
{
    for (struct session *ses = d->sessions; sid && ses; ses = ses->next)
        if (strcmp(ses->id, sid) == 0 && visible(c, ses)) {
            ses->used_us = daemon_now_us();
            return ses;
        }
    return NULL;
}

/*
 * The session PARAMS names, or NULL when answered. One not C's is answered
 * exactly as one that never existed, and left untouched (not even its idle
 * clock), so nothing tells the two apart.
 */
static struct session *find_session(struct daemon *d, const json_t *params, const json_t *id,
                                    struct client *c, const char *method)
{
    const char *sid = json_string_value(json_object_get(params, "session_id"));
    if (!sid) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS,
                               "session.%s: \"session_id\" must be a string", method));
        return NULL;
    }
    struct session *ses = session_lookup(d, c, sid);
    if (ses)
        return ses;
    daemon_reply(
        c, rpc_error(id, RPC_INVALID_PARAMS, "session.%s: no session \"%.40s\"", method, sid));
    return NULL;
}

static const char *file_path(struct client *c, const json_t *id, const json_t *params,
                             const char *method)
{
    const char *path = json_string_value(json_object_get(params, "path"));
    char why[256];
    if (!path) {
        daemon_reply(
            c, rpc_error(id, RPC_INVALID_PARAMS, "session.%s: \"path\" must be a string", method));
        return NULL;
    }
    if (wsfile_check_path(path, why, sizeof why) < 0) {
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.%s: %s", method, why));
        return NULL;
    }
    return path;
}

/* Answer an operation's failure: the caller's mistake, or ours. */
static void reply_err(struct client *c, const json_t *id, const char *method,
                      const struct cordon_err *err)
{
    int code = strncmp(err->msg, "busy:", 5) == 0                       ? RPC_BUSY
        : err->kind == CORDON_E_USAGE || err->kind == CORDON_E_NOTFOUND ? RPC_INVALID_PARAMS
                                                                        : RPC_REFUSED;
    c->d->busy += code == RPC_BUSY;
    daemon_reply(c, rpc_error(id, code, "session.%s: %s", method, err->msg));
}

static void session_write(struct client *c, const json_t *id, const json_t *params,
                          struct session *ses)
{
    const char *path = file_path(c, id, params, "write_file");
    if (!path)
        return;
    json_t *text = json_object_get(params, "content");
    json_t *b64 = json_object_get(params, "content_base64");
    json_t *mode = json_object_get(params, "mode");
    if (!text == !b64 || (text && !json_is_string(text)) || (b64 && !json_is_string(b64)) ||
        (mode &&
         (!json_is_integer(mode) || json_integer_value(mode) < 0 ||
          json_integer_value(mode) > 0777))) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS,
                               "session.write_file: give \"content\" or \"content_base64\" (a "
                               "string), and \"mode\" from 0 to 0777"));
        return;
    }
    _cleanup_free_ char *decoded = NULL;
    size_t len = 0;
    if (b64 &&
        daemon_base64_decode(json_string_value(b64), json_string_length(b64), &decoded, &len) < 0) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS,
                               "session.write_file: "
                               "\"content_base64\" is not base64"));
        return;
    }
    struct cordon_err err = { 0 };
    if (wsfile_write(ses->dir_fd, path, text ? json_string_value(text) : decoded,
                     text ? json_string_length(text) : len,
                     mode ? (mode_t)json_integer_value(mode) : 0644, &err) < 0) {
        reply_err(c, id, "write_file", &err);
        return;
    }
    json_int_t bytes = (json_int_t)(text ? json_string_length(text) : len);
    daemon_reply(c, rpc_result(id, json_pack("{s:s, s:I}", "path", path, "bytes", bytes)));
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
            daemon_reply(c,
                         rpc_error(id, RPC_INVALID_PARAMS,
                                   "session.read_file: "
                                   "\"max_bytes\" must be a count"));
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
    json_t *content = daemon_bytes_json(data, len, &b64);
    daemon_reply(c,
                 rpc_result(id,
                            json_pack("{s:s, s:o, s:s, s:I, s:b}", "path", path, "content", content,
                                      "encoding", b64 ? "base64" : "utf-8", "size",
                                      (json_int_t)size, "truncated", size > len)));
}

/* In the worker: the origin's tree into each copy. */
static json_t *fork_work(void *arg)
{
    const struct session_op *op = arg;
    unsigned cloned = 0, copied = 0;
    struct cordon_err err = { 0 };
    for (size_t i = 0; i < op->n_copies; i++)
        if (wsfile_copy_tree(op->ses->dir_fd, op->copies[i]->dir_fd, &cloned, &copied, &err) < 0)
            return json_pack("{s:s, s:b}", "error", err.msg, "usage",
                             err.kind == CORDON_E_USAGE || err.kind == CORDON_E_NOTFOUND);
    return json_pack("{s:i, s:i}", "cloned", cloned, "copied", copied);
}

static void fork_done(void *ctx, const json_t *answer)
{
    struct session_op *op = ctx;
    struct daemon *d = op->d;
    uint64_t now = daemon_now_us();
    op->ses->busy = NULL;
    op->ses->used_us = now;
    int code = json_is_true(json_object_get(answer, "usage")) ? RPC_INVALID_PARAMS : RPC_REFUSED;
    const char *error =
        answer ? json_string_value(json_object_get(answer, "error")) : op_lost(op, &code);
    if (error) {
        /* All or none: the copies go too (off the loop, unless their worker was lost). */
        for (size_t i = 0; i < op->n_copies; i++) {
            struct cordon_err ignored;
            op->copies[i]->busy = NULL;
            if (!answer || session_remove(d, op->copies[i], NULL, NULL, &ignored) < 0)
                session_free(d, op->copies[i]);
        }
        daemon_reply(op->c, rpc_error(op->id, code, "session.fork: %s", error));
        op_free(op);
        return;
    }
    json_t *ids = json_array();
    for (size_t i = 0; i < op->n_copies; i++) {
        op->copies[i]->busy = NULL;
        op->copies[i]->used_us = now;
        json_array_append_new(ids, json_string(op->copies[i]->id));
    }
    json_int_t cloned = json_integer_value(json_object_get(answer, "cloned"));
    json_int_t copied = json_integer_value(json_object_get(answer, "copied"));
    /* How the copies were made: reflinks share blocks until written, a copy does not. */
    const char *how = !copied ? (cloned ? "reflink" : "empty") : cloned ? "reflink+copy" : "copy";
    /* clang-format off */
    daemon_reply(op->c, rpc_result(op->id, json_pack("{s:o, s:s, s:I, s:I}", "session_ids", ids,
                                                     "method", how, "files_reflinked", cloned,
                                                     "files_copied", copied)));
    /* clang-format on */
    op_free(op);
}

static void session_fork(struct client *c, const json_t *id, const json_t *params,
                         struct session *ses)
{
    struct daemon *d = c->d;
    json_t *jn = json_object_get(params, "count");
    if (jn && (!json_is_integer(jn) || json_integer_value(jn) < 1 || json_integer_value(jn) > 64)) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS, "session.fork: \"count\" must be 1 to 64"));
        return;
    }
    /* A copy of a tree being written is no snapshot. */
    if (ses->running) {
        d->busy++;
        daemon_reply(c,
                     rpc_error(id, RPC_BUSY,
                               "busy: session.fork: an exec is running on the "
                               "session; wait for its answer"));
        return;
    }
    size_t n = jn ? (size_t)json_integer_value(jn) : 1;
    struct cordon_err err = { 0 };
    struct session_op *op = op_new(d, c, id, "fork", ses, &err);
    if (!op) {
        d->busy++;
        daemon_reply(c, rpc_error(id, RPC_BUSY, "session.fork: %s", err.msg));
        return;
    }
    int keep[WORKER_MAX_KEEP] = { ses->dir_fd };
    size_t n_keep = 1;
    bool ok = (op->copies = calloc(n, sizeof *op->copies)) != NULL;
    if (!ok)
        err_set(&err, CORDON_E_INTERNAL, "out of memory");
    while (ok && op->n_copies < n) {
        /* A fork is its origin's owner's, whoever asked, and works as it does. */
        struct session *copy = session_new(d, ses->owner, &err);
        if (!(ok = copy != NULL))
            break;
        copy->pol.workspace_mode = ses->pol.workspace_mode;
        copy->pol.workspace_commit = ses->pol.workspace_commit;
        copy->busy = "forking";
        op->copies[op->n_copies++] = copy;
        keep[n_keep++] = copy->dir_fd;
    }
    if (!ok || op_start(op, "cordon-fork", fork_work, fork_done, keep, n_keep, false, &err) < 0) {
        /* Still empty: gone at once. */
        for (size_t i = 0; i < op->n_copies; i++)
            session_free(d, op->copies[i]);
        reply_err(c, id, "fork", &err);
        op_free(op);
        return;
    }
    ses->busy = "forking";
}

void sessions_method(struct client *c, const char *method, const json_t *id, const json_t *params)
{
    struct daemon *d = c->d;
    if (strcmp(method, "create") == 0) {
        struct cordon_err err = { 0 };
        struct session *ses = d->draining ? NULL : session_new(d, c->uid, &err);
        if (!ses) {
            daemon_reply(c,
                         rpc_error(id, d->draining ? RPC_SHUTTING_DOWN : RPC_BUSY,
                                   "session.create: %s",
                                   d->draining ? "the daemon is shutting down" : err.msg));
        } else if (json_is_object(params) && session_options(ses, params, &err) < 0) {
            session_free(d, ses);
            d->bad_requests++;
            daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.create: %s", err.msg));
        } else if (ses->live && live_session_start(d, ses, &err) < 0) {
            session_free(d, ses);
            reply_err(c, id, "create", &err);
        } else {
            daemon_reply(c, rpc_result(id, session_json(d, ses)));
        }
        return;
    }
    if (strcmp(method, "list") == 0) {
        json_t *all = json_array();
        for (struct session *ses = d->sessions; ses; ses = ses->next)
            if (visible(c, ses))
                json_array_append_new(all, session_json(d, ses));
        daemon_reply(c, rpc_result(id, json_pack("{s:o}", "sessions", all)));
        return;
    }
    static const char *const known[] = { "exec",    "write_file", "read_file", "fork",
                                         "destroy", "commit",     "discard",   "pause",
                                         "resume",  "expose",     "unexpose" };
    size_t k = 0;
    while (k < sizeof known / sizeof known[0] && strcmp(method, known[k]) != 0)
        k++;
    if (k == sizeof known / sizeof known[0]) {
        d->bad_requests++;
        daemon_reply(
            c, rpc_error(id, RPC_METHOD_NOT_FOUND, "unknown method \"session.%.40s\"", method));
        return;
    }
    struct session *ses = find_session(d, params, id, c, method);
    if (!ses)
        return;
    if (ses->busy) {
        d->busy++;
        daemon_reply(c,
                     rpc_error(id, RPC_BUSY,
                               "busy: session.%s: the session is %s; wait for "
                               "that to finish",
                               method, ses->busy));
        return;
    }
    if (strcmp(method, "exec") == 0 && ses->live) {
        live_exec(c, id, params, ses);
    } else if (strcmp(method, "exec") == 0) {
        daemon_method_run(c, id, params, ses);
    } else if (strcmp(method, "pause") == 0 || strcmp(method, "resume") == 0 ||
               strcmp(method, "expose") == 0 || strcmp(method, "unexpose") == 0) {
        live_session_method(c, method, id, params, ses);
    } else if (strcmp(method, "write_file") == 0) {
        session_write(c, id, params, ses);
    } else if (strcmp(method, "read_file") == 0) {
        session_read(c, id, params, ses);
    } else if (strcmp(method, "fork") == 0) {
        session_fork(c, id, params, ses);
    } else if (strcmp(method, "commit") == 0 || strcmp(method, "discard") == 0) {
        session_decide(c, id, ses, method[0] == 'c');
    } else if (ses->running) {
        daemon_reply(c,
                     rpc_error(id, RPC_BUSY,
                               "session.destroy: %u execs are still running; "
                               "cancel them first",
                               ses->running));
    } else {
        struct cordon_err err = { 0 };
        if (session_remove(d, ses, c, id, &err) < 0) {
            d->busy++;
            daemon_reply(c, rpc_error(id, RPC_BUSY, "session.destroy: %s", err.msg));
        }
    }
}

void sessions_on_idle_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct daemon *d = arg;
    uint64_t now = daemon_now_us();
    for (struct session *ses = d->sessions, *next; ses && !d->draining; ses = next) {
        next = ses->next;
        struct cordon_err ignored;
        /* No worker now (too many at once): the next tick tries again. */
        /* A live session's running process keeps it, as a running exec does. */
        if (!ses->running && !ses->busy && !lproc_session_active(d, ses) &&
            now - ses->used_us > (uint64_t)d->cfg.session_idle_ms * 1000u)
            session_remove(d, ses, NULL, NULL, &ignored);
    }
}

/* How long a restart waits for a killed daemon's runs to let go of a session. */
#define STALE_WAIT_MS 120000

/*
 * A killed daemon's session goes once no supervisor or worker of that
 * daemon holds it any more (they hold it read-locked, sandbox/workspace.h and
 * worker.h, and end soon with their daemon gone), so that nothing of theirs
 * writes there while it is removed, and none of it is left behind.
 */
static void remove_stale(int state_fd, const char *name)
{
    _cleanup_close_ int lock =
        openat(state_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (lock >= 0)
        worker_wait_sole(lock, STALE_WAIT_MS);
    struct cordon_err ignored;
    wsfile_remove_tree(state_fd, name, &ignored);
}

int sessions_open_state_dir(const char *dir, struct cordon_err *err)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return err_sys(err, CORDON_E_SETUP, "cannot make the state directory '%s'", dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 0066)) {
        if (fd >= 0)
            close(fd);
        return err_set(err, CORDON_E_USAGE,
                       "state directory '%s' must be a directory of ours, "
                       "mode 0700 or 0711",
                       dir);
    }
    /* One daemon to a state directory: a second would empty the first's sessions. */
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        close(fd);
        return err_set(err, CORDON_E_USAGE, "state directory '%s' is in use by another daemon",
                       dir);
    }
    DIR *ls = fdopendir(fcntl(fd, F_DUPFD_CLOEXEC, 3));
    struct dirent *e;
    struct cordon_err ignored;
    while (ls && (e = readdir(ls)))
        if (strlen(e->d_name) == 32)
            remove_stale(fd, e->d_name);
        else if (strncmp(e->d_name, EXPOSE_DIR_PREFIX, strlen(EXPOSE_DIR_PREFIX)) == 0)
            wsfile_remove_tree(fd, e->d_name, &ignored); /* a killed daemon's sockets */
    if (ls)
        closedir(ls);
    /*
     * 0711: a session's owner of another uid passes through to its exposed
     * sockets (expose-SID/, daemon/expose.h); nobody lists it, and each
     * session's workspace is 0700.
     */
    if (fchmod(fd, 0711) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot make the state directory '%s' mode 0711", dir);
        close(fd);
        return -1;
    }
    return fd;
}
