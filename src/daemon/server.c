/*
 * daemon/server.c: `cordon serve`'s server (see daemon.h): one event loop in
 * the daemon's process, a listening unix socket whose peers are checked by
 * SO_PEERCRED, one JSON-RPC stream per connection (common/jsonrpc.h: lines
 * capped, a peer that does not read is not read), and the stop: a drain,
 * then the end. A connection is only ever answered; nothing one does
 * reaches another beyond the shared queue, whose limit is answered "busy".
 * The methods are in methods.c, a run's call from the socket to the
 * sandbox and back in calls.c, the sessions in sessions.c.
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
#include "daemon/peer.h"
#include "daemon/sandboxd.h"
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
    base64_encode(data, len, out);
    s = json_string(out);
    free(out);
    return s;
}

/* Decode base64 TEXT into *OUT (malloc'd); -1 when it is not base64. */
int daemon_base64_decode(const char *text, size_t len, char **out, size_t *out_len)
{
    char *buf = malloc(len / 4 * 3 + 1);
    if (!buf || base64_decode(text, len, buf, out_len) < 0) {
        free(buf);
        return -1;
    }
    *out = buf;
    return 0;
}

/* ---- connections ---- */

void daemon_reply(struct client *c, json_t *msg)
{
    if (c && !c->gone && msg)
        rpc_send(c->s, msg);
    json_decref(msg);
}

void daemon_call_free(struct call *call)
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

void daemon_unlink_call(struct call *call)
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
void daemon_client_drop(struct client *c)
{
    struct daemon *d = c->d;
    if (c->gone)
        return;
    c->gone = true;
    while (c->calls) {
        struct call *call = c->calls;
        daemon_unlink_call(call);
        /* A queued job is dropped here; a running one still calls back, to no one. */
        if (!call->job || !job_stop(call->job, false))
            daemon_call_free(call);
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
    c->share->clients--;
    c->next = d->dead;
    d->dead = c;
    struct timeval zero = { 0, 0 };
    evtimer_add(d->reap_ev, &zero);
}

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

bool daemon_uid_allowed(const struct daemon *d, uid_t uid)
{
    /* Root could take over the daemon's uid anyway: refusing it protects nothing. */
    return uid == geteuid() || uid == 0 || uid_listed(d->cfg.allow_uid, d->cfg.n_allow_uid, uid) ||
        uid_listed(d->cfg.admin_uid, d->cfg.n_admin_uid, uid);
}

/* May the peer on FD use the daemon? Its uid in *UID. */
static bool peer_allowed(const struct daemon *d, int fd, uid_t *uid)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return false;
    *uid = cred.uid;
    return daemon_uid_allowed(d, cred.uid);
}

/* UID's share of the tables: every uid that may connect has one (daemon_serve made them). */
static struct uid_share *share_of(struct daemon *d, uid_t uid)
{
    for (size_t i = 0; i < d->n_shares; i++)
        if (d->shares[i].uid == uid)
            return &d->shares[i];
    return NULL;
}

static void add_share(struct daemon *d, uid_t uid)
{
    if (share_of(d, uid) || d->n_shares == DAEMON_MAX_UIDS)
        return;
    d->shares[d->n_shares++] = (struct uid_share){
        .uid = uid,
        .buffered = { .max = daemon_uid_share(d->cfg.max_buffered), .parent = &d->buffered },
    };
}

static void make_shares(struct daemon *d)
{
    d->buffered.max = d->cfg.max_buffered;
    add_share(d, geteuid());
    add_share(d, 0);
    for (size_t i = 0; i < d->cfg.n_allow_uid; i++)
        add_share(d, d->cfg.allow_uid[i]);
    for (size_t i = 0; i < d->cfg.n_admin_uid; i++)
        add_share(d, d->cfg.admin_uid[i]);
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
        struct uid_share *share = NULL;
        if (!peer_allowed(d, fd, &uid) || !(share = share_of(d, uid))) {
            d->refused_peers++;
            turn_away(fd, RPC_FORBIDDEN, "this user may not use the daemon");
            continue;
        }
        /* Its share first: one uid's connections never keep another's out. */
        if (share->clients >= daemon_uid_share(d->cfg.max_clients)) {
            d->refused_connections++;
            turn_away(fd, RPC_BUSY,
                      "busy: this user holds its share of connections (half of "
                      "--max-connections); close one first");
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
            c->s =
                rpc_stream_new(d->base, fd, out, d->cfg.max_message, &daemon_rpc_handlers, c, &err);
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
        rpc_stream_set_budget(c->s, &share->buffered);
        c->share = share;
        share->clients++;
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

/*
 * The --allow-uid and --admin-uid peers may connect to the socket at PATH
 * (0600, ours): user entries of its ACL; no one else. A filesystem without
 * ACLs leaves it 0600 and it is said: the operator opens it knowingly.
 */
static int grant_peers(const struct daemon_config *cfg, const char *path, struct cordon_err *err)
{
    uid_t uids[2 * DAEMON_MAX_ALLOW];
    size_t n = 0;
    for (size_t i = 0; i < cfg->n_allow_uid; i++)
        uids[n++] = cfg->allow_uid[i];
    for (size_t i = 0; i < cfg->n_admin_uid; i++)
        uids[n++] = cfg->admin_uid[i];
    if (!n)
        return 0;
    _cleanup_free_ char *dir = strdup(path);
    if (!dir)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    char *slash = strrchr(dir, '/');
    const char *name = slash ? path + (slash - dir) + 1 : path;
    if (slash)
        slash[slash == dir] = '\0'; /* "/x": the root */
    _cleanup_close_ int dfd = open(slash ? dir : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (dfd < 0 || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot find the socket '%s'", path);
    if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid())
        return err_set(err, CORDON_E_SETUP, "'%s' is no longer the daemon's socket", path);
    if (peer_grant_connect(dfd, name, uids, n) == 0)
        return 0;
    if (errno != EOPNOTSUPP)
        return err_sys(err, CORDON_E_SETUP, "cannot let the allowed uids connect to '%s'", path);
    fprintf(stderr,
            "cordon: serve: '%s': its filesystem keeps no ACLs, so the socket stays 0600: "
            "the --allow-uid and --admin-uid peers cannot connect until its mode or group "
            "lets them\n",
            path);
    return 0;
}

static int listen_on(const struct daemon_config *cfg, struct cordon_err *err)
{
    const char *path = cfg->socket_path;
    struct sockaddr_un sa;
    TRY(check_socket(path, &sa, err));
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create a socket");
    /*
     * Created 0600 (no window in which others could connect), then the
     * allowed uids are let in by its ACL; SO_PEERCRED checks anyway.
     */
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return err_sys(err, CORDON_E_SETUP, "cannot bind '%s'", path);
    }
    if (grant_peers(cfg, path, err) < 0) {
        close(fd);
        unlink(path);
        return -1;
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
    daemon_unlink_call(call);
    daemon_reply(c, rpc_error(call->id, RPC_SHUTTING_DOWN, "run: the daemon is shutting down"));
    daemon_call_free(call);
}

static void on_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct daemon *d = arg;
    jobs_stop_all(d->jobs, true, dropped);
    box_stop_all(d, false);
    sessions_stop_ops(d);
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
        sandboxd_drain(d);
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
        fprintf(stderr,
                "cordon: serve: workspace '%s': an interrupted commit could not be "
                "finished or undone: %s\n",
                p->workspace, rec.reason);
    else if (fd >= 0 && rec.rolled_back + rec.rolled_forward)
        fprintf(stderr,
                "cordon: serve: workspace '%s': finished %u interrupted commit(s), "
                "undid %u\n",
                p->workspace, rec.rolled_forward, rec.rolled_back);
}

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
    struct daemon d = {
        .cfg = *cfg, .listen_fd = -1, .state_fd = -1, .started_us = daemon_now_us()
    };
    int rc = -1;
    make_shares(&d);
    d.base = event_base_new();
    if (!d.base)
        return err_set(err, CORDON_E_INTERNAL, "cannot create the event loop");
    struct jobs_config jc = {
        .base = d.base,
        .policy = cfg->policy,
        .max_running = cfg->max_running,
        .max_queued = cfg->max_queued,
        .output_cap = cfg->output_cap,
        .done = daemon_on_job_done,
        .output = daemon_on_job_output,
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
    d.listen_fd = listen_on(cfg, err);
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
    if (!(d.jobs = jobs_new(&jc, err)) || sandboxd_open(&d, err) < 0)
        goto out;
    rc = event_base_dispatch(d.base) < 0 ? err_set(err, CORDON_E_INTERNAL, "the event loop failed")
                                         : 0;
out:
    stop_listening(&d);
    while (d.clients)
        daemon_client_drop(d.clients);
    on_reap_clients(-1, 0, &d);
    sandboxd_free(&d); /* before the processes: its calls let theirs go */
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
