/*
 * daemon/sessions.c: the daemon's sessions (see daemon.h): a workspace kept
 * between runs in the state directory, its file operations, fork, and the
 * decision a manual overlay session's last exec waits for.
 */
#include "daemon/daemon_int.h"

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/text.h"
#include "core/run.h"
#include "daemon/workspace_files.h"
#include "sandbox/backend.h"
#include "sandbox/txn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void session_free(struct daemon *d, struct session *ses)
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

static struct session *session_new(struct daemon *d, uid_t owner, struct cordon_err *err)
{
    if (d->n_sessions >= d->cfg.max_sessions) {
        /* The limit, not the count: how many others hold is none of the caller's business. */
        err_set(err, CORDON_E_USAGE, "busy: the daemon holds its limit of %u sessions; destroy "
                "one first", d->cfg.max_sessions);
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
    if (mkdirat(d->state_fd, ses->id, 0755) < 0 ||
        (ses->dir_fd = openat(d->state_fd, ses->id, O_PATH | O_DIRECTORY | O_NOFOLLOW |
                                                        O_CLOEXEC)) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot make the session's workspace");
        session_free(d, ses);
        return NULL;
    }
    ses->pol = *d->cfg.policy;
    ses->pol.workspace = ses->dir;
    ses->created_us = ses->used_us = daemon_now_us();
    return ses;
}

static json_t *session_json(const struct session *ses)
{
    uint64_t now = daemon_now_us();
    static const char *const commits[] = { "on_success", "always", "manual" };
    return json_pack("{s:s, s:I, s:i, s:f, s:f, s:s, s:s, s:b}", "session_id", ses->id, "owner",
                     (json_int_t)ses->owner, "running", ses->running, "age_s", (double)(now - ses->created_us) / 1e6, "idle_s",
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
    if (ses->pol.workspace_mode == POLICY_WS_OVERLAY && !sandbox_backend_choose(&ses->pol, err))
        return -1;
    return 0;
}

/* session.commit / session.discard: the decision a manual session's last exec waits for. */
static void session_decide(struct client *c, const json_t *id, struct session *ses, bool commit)
{
    const char *method = commit ? "commit" : "discard";
    if (ses->pending < 0) {
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.%s: the session has no change "
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
    daemon_reply(c, rpc_result(id, json_pack("{s:s, s:o}", "run_id", ses->pending_run, "transaction", t)));
}

/* Does C see SES? Its creator and an admin do; to anyone else it does not exist. */
static bool visible(const struct client *c, const struct session *ses)
{
    return c->admin || ses->owner == c->uid;
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
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.%s: \"session_id\" must be a string",
                           method));
        return NULL;
    }
    for (struct session *ses = d->sessions; ses; ses = ses->next)
        if (strcmp(ses->id, sid) == 0 && visible(c, ses)) {
            ses->used_us = daemon_now_us();
            return ses;
        }
    daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.%s: no session \"%.40s\"", method, sid));
    return NULL;
}

static const char *file_path(struct client *c, const json_t *id, const json_t *params,
                             const char *method)
{
    const char *path = json_string_value(json_object_get(params, "path"));
    char why[256];
    if (!path) {
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.%s: \"path\" must be a string",
                           method));
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
    int code = err->kind == CORDON_E_USAGE || err->kind == CORDON_E_NOTFOUND ? RPC_INVALID_PARAMS
                                                                             : RPC_REFUSED;
    daemon_reply(c, rpc_error(id, code, "session.%s: %s", method, err->msg));
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
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS,
                           "session.write_file: give \"content\" or \"content_base64\" (a "
                           "string), and \"mode\" from 0 to 0777"));
        return;
    }
    _cleanup_free_ char *decoded = NULL;
    size_t len = 0;
    if (b64 && daemon_base64_decode(json_string_value(b64), json_string_length(b64), &decoded, &len) < 0) {
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.write_file: \"content_base64\" is "
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
    daemon_reply(c, rpc_result(id, json_pack("{s:s, s:I}", "path", path,
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
            daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.read_file: \"max_bytes\" must be "
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
    json_t *content = daemon_bytes_json(data, len, &b64);
    daemon_reply(c, rpc_result(id, json_pack("{s:s, s:o, s:s, s:I, s:b}", "path", path, "content",
                                      content, "encoding", b64 ? "base64" : "utf-8", "size",
                                      (json_int_t)size, "truncated", size > len)));
}

static void session_fork(struct client *c, const json_t *id, const json_t *params,
                         struct session *ses)
{
    json_t *jn = json_object_get(params, "count");
    if (jn && (!json_is_integer(jn) || json_integer_value(jn) < 1 || json_integer_value(jn) > 64)) {
        daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.fork: \"count\" must be 1 to 64"));
        return;
    }
    json_int_t n = jn ? json_integer_value(jn) : 1;
    json_t *ids = json_array();
    struct cordon_err err = { 0 };
    unsigned cloned = 0, copied = 0;
    for (json_int_t i = 0; i < n; i++) {
        /* A fork is its origin's owner's, whoever asked, and works as it does. */
        struct session *copy = session_new(c->d, ses->owner, &err);
        if (copy) {
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
    daemon_reply(c, rpc_result(id, json_pack("{s:o, s:s, s:i, s:i}", "session_ids", ids, "method", how,
                                      "files_reflinked", cloned, "files_copied", copied)));
}

void sessions_method(struct client *c, const char *method, const json_t *id,
                           const json_t *params)
{
    struct daemon *d = c->d;
    if (strcmp(method, "create") == 0) {
        struct cordon_err err = { 0 };
        struct session *ses = d->draining ? NULL : session_new(d, c->uid, &err);
        if (!ses) {
            daemon_reply(c, rpc_error(id, d->draining ? RPC_SHUTTING_DOWN : RPC_BUSY, "session.create: %s",
                               d->draining ? "the daemon is shutting down" : err.msg));
        } else if (json_is_object(params) && session_options(ses, params, &err) < 0) {
            session_free(d, ses);
            d->bad_requests++;
            daemon_reply(c, rpc_error(id, RPC_INVALID_PARAMS, "session.create: %s", err.msg));
        } else {
            daemon_reply(c, rpc_result(id, session_json(ses)));
        }
        return;
    }
    if (strcmp(method, "list") == 0) {
        json_t *all = json_array();
        for (struct session *ses = d->sessions; ses; ses = ses->next)
            if (visible(c, ses))
                json_array_append_new(all, session_json(ses));
        daemon_reply(c, rpc_result(id, json_pack("{s:o}", "sessions", all)));
        return;
    }
    static const char *const known[] = { "exec", "write_file", "read_file", "fork", "destroy",
                                         "commit", "discard" };
    size_t k = 0;
    while (k < sizeof known / sizeof known[0] && strcmp(method, known[k]) != 0)
        k++;
    if (k == sizeof known / sizeof known[0]) {
        d->bad_requests++;
        daemon_reply(c, rpc_error(id, RPC_METHOD_NOT_FOUND, "unknown method \"session.%.40s\"", method));
        return;
    }
    struct session *ses = find_session(d, params, id, c, method);
    if (!ses)
        return;
    if (strcmp(method, "exec") == 0) {
        daemon_method_run(c, id, params, ses);
    } else if (strcmp(method, "write_file") == 0) {
        session_write(c, id, params, ses);
    } else if (strcmp(method, "read_file") == 0) {
        session_read(c, id, params, ses);
    } else if (strcmp(method, "fork") == 0) {
        session_fork(c, id, params, ses);
    } else if (strcmp(method, "commit") == 0 || strcmp(method, "discard") == 0) {
        session_decide(c, id, ses, method[0] == 'c');
    } else if (ses->running) {
        daemon_reply(c, rpc_error(id, RPC_BUSY, "session.destroy: %u execs are still running; cancel "
                                         "them first",
                           ses->running));
    } else {
        session_free(d, ses);
        daemon_reply(c, rpc_result(id, json_pack("{s:b}", "destroyed", 1)));
    }
}

void sessions_on_idle_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct daemon *d = arg;
    uint64_t now = daemon_now_us();
    for (struct session *ses = d->sessions, *next; ses; ses = next) {
        next = ses->next;
        if (!ses->running && now - ses->used_us > (uint64_t)d->cfg.session_idle_ms * 1000u)
            session_free(d, ses);
    }
}

/* The state directory, made ours and emptied of a killed daemon's sessions. */
int sessions_open_state_dir(const char *dir, struct cordon_err *err)
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
