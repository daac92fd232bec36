/*
 * daemon/expose.c: see expose.h. Each exposed port has a listener on
 * 127.0.0.1 (a port the kernel picks), or on a unix socket in the state
 * directory (STATE/expose-SID/PORT.sock), and a dialer: a process forked from
 * the daemon that joins the session's network namespace (through its user
 * namespace when the daemon is not root) and, for each connection the
 * daemon accepts, connects to 127.0.0.1:PORT there and hands the socket
 * back. The sandbox gains no route, interface or listener of ours: a
 * connection only ever goes from the host in. Who connects is checked (the
 * session's owner, root or an --admin-uid; daemon/peer.h) and recorded.
 */
#include "daemon/expose.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "daemon/live.h"
#include "daemon/peer.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MAX_EXPOSED 16           /* ports of one session */
#define MAX_CONNS 64             /* connections at once through one port */
#define RELAY_HIGH (256u * 1024) /* a side's queue beyond which the other is not read */
#define DIAL_TIMEOUT_MS 5000

struct conn {
    struct conn *next;
    struct expose *x;
    struct bufferevent *host, *inside;
    uid_t uid;
    char peer[64];
    bool dialing, closing;
};

struct expose {
    struct expose *next; /* in its session's list */
    struct daemon *d;
    struct session *ses;
    unsigned port, host_port; /* host_port: 0 on a unix socket */
    char *path;               /* the unix socket's, or NULL: a loopback port */
    ino_t ino;                /* the socket's inode: only that one is removed */
    int listen_fd;
    struct event *listen_ev;
    pid_t dialer;
    int dial_fd; /* to the dialer: one byte asks, a socket (or errno) answers */
    struct event *dial_ev;
    struct conn *conns; /* dialing ones answered in order: oldest last */
    unsigned n_conns;
};

/* ---- the dialer, inside the session's network namespace ---- */

static int dial(unsigned port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (s < 0)
        return -errno;
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS) {
        int e = errno;
        close(s);
        return -e;
    }
    struct pollfd p = { .fd = s, .events = POLLOUT };
    int e = 0;
    socklen_t el = sizeof e;
    if (poll(&p, 1, DIAL_TIMEOUT_MS) != 1 || getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el) < 0 ||
        e) {
        close(s);
        return -(e ? e : ETIMEDOUT);
    }
    return s;
}

static _Noreturn void dialer_main(int sock, int userns, int netns, unsigned port)
{
    int keep[] = { sock, userns, netns };
    close_fds_except(keep, 3);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    /* Root joins the network namespace as it is; another user through its owner first. */
    if (setns(netns, CLONE_NEWNET) < 0 &&
        (setns(userns, CLONE_NEWUSER) < 0 || setns(netns, CLONE_NEWNET) < 0))
        _exit(125);
    close(userns);
    close(netns);
    char c;
    while (read(sock, &c, 1) == 1) {
        int s = dial(port);
        int e = s < 0 ? -s : 0;
        if (s >= 0 ? send_fds(sock, &e, sizeof e, &s, 1) < 0 : !write_all(sock, &e, sizeof e))
            _exit(0);
        if (s >= 0)
            close(s);
    }
    _exit(0);
}

/* ---- connections ---- */

static void conn_free(struct conn *c)
{
    struct expose *x = c->x;
    for (struct conn **pp = &x->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            x->n_conns--;
            break;
        }
    if (c->host)
        bufferevent_free(c->host);
    if (c->inside)
        bufferevent_free(c->inside);
    free(c);
}

static void audit_conn(const struct conn *c, const char *outcome)
{
    struct expose *x = c->x;
    json_t *fields = json_pack("{s:s, s:i, s:i, s:I, s:s, s:s}", "session", x->ses->id, "port",
                               (int)x->port, "host_port", (int)x->host_port, "uid",
                               (json_int_t)c->uid, "peer", c->peer, "outcome", outcome);
    if (fields && x->path)
        json_object_set_new(fields, "path", json_string(x->path));
    live_audit(&x->ses->pol, "expose.connection", x->ses->box ? box_run_id(x->ses->box) : NULL,
               fields);
}

static struct bufferevent *other(struct conn *c, struct bufferevent *bev)
{
    return bev == c->host ? c->inside : c->host;
}

/* One side's bytes to the other, while the other's queue is short. */
static void relay(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct bufferevent *to = other(c, bev);
    if (!to)
        return;
    evbuffer_add_buffer(bufferevent_get_output(to), bufferevent_get_input(bev));
    if (evbuffer_get_length(bufferevent_get_output(to)) >= RELAY_HIGH)
        bufferevent_disable(bev, EV_READ);
}

static void drained(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct bufferevent *from = other(c, bev);
    if (c->closing) {
        if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
            conn_free(c);
        return;
    }
    if (from)
        bufferevent_enable(from, EV_READ);
}

static void relay_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    /* What this side said last still goes to the other, then both close. */
    struct bufferevent *to = other(c, bev);
    relay(bev, c);
    if (to && evbuffer_get_length(bufferevent_get_output(to)) > 0 && !(what & BEV_EVENT_ERROR)) {
        c->closing = true;
        bufferevent_disable(bev, EV_READ);
        return;
    }
    conn_free(c);
}

static void connected(struct conn *c, int fd)
{
    struct expose *x = c->x;
    c->dialing = false;
    c->inside = bufferevent_socket_new(x->d->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!c->inside) {
        close(fd);
        conn_free(c);
        return;
    }
    bufferevent_setwatermark(c->host, EV_WRITE, RELAY_HIGH / 2, 0);
    bufferevent_setwatermark(c->inside, EV_WRITE, RELAY_HIGH / 2, 0);
    bufferevent_setcb(c->host, relay, drained, relay_event, c);
    bufferevent_setcb(c->inside, relay, drained, relay_event, c);
    bufferevent_enable(c->host, EV_READ | EV_WRITE);
    bufferevent_enable(c->inside, EV_READ | EV_WRITE);
    relay(c->host, c); /* what came before the dial */
}

/* The dialer's answer for the oldest connection still dialing. */
static void on_dialed(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct expose *x = arg;
    int e = 0, s = -1;
    ssize_t n = read_maybe_fd(fd, &e, sizeof e, &s);
    struct conn *c = NULL;
    for (struct conn *k = x->conns; k; k = k->next)
        if (k->dialing)
            c = k; /* the list is newest first */
    if (n != (ssize_t)sizeof e) {
        /* The dialer is gone (its namespace with the sandbox): nothing more goes through. */
        if (s >= 0)
            close(s);
        event_del(x->dial_ev);
        while (x->conns) {
            if (x->conns->dialing)
                audit_conn(x->conns, "refused: the sandbox is gone");
            conn_free(x->conns);
        }
        return;
    }
    if (!c) {
        if (s >= 0)
            close(s);
        return;
    }
    char outcome[96];
    snprintf(outcome, sizeof outcome, s >= 0 ? "forwarded" : "refused inside: %s", strerror(e));
    audit_conn(c, outcome);
    if (s < 0) {
        conn_free(c);
        return;
    }
    evutil_make_socket_nonblocking(s);
    connected(c, s);
}

/* ADDR:PORT of a TCP peer; "pid N" of a unix one (its SO_PEERCRED). */
static void describe_peer(int fd, const struct sockaddr_storage *sa, char *out, size_t size)
{
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        char a[INET_ADDRSTRLEN] = "";
        inet_ntop(AF_INET, &in->sin_addr, a, sizeof a);
        snprintf(out, size, "%s:%u", a, ntohs(in->sin_port));
        return;
    }
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
        snprintf(out, size, "pid %d", (int)cred.pid);
    else
        snprintf(out, size, "unknown");
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
    (void)what;
    struct expose *x = arg;
    for (int i = 0; i < 16; i++) {
        struct sockaddr_storage sa;
        socklen_t sl = sizeof sa;
        int fd = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        struct conn *c = calloc(1, sizeof *c);
        uid_t uid = (uid_t)-1;
        bool known = peer_uid(fd, &uid) == 0;
        bool allowed = known && (uid == x->ses->owner || uid == 0 || daemon_is_admin(x->d, uid));
        if (c) {
            c->x = x;
            c->uid = uid;
            describe_peer(fd, &sa, c->peer, sizeof c->peer);
        }
        if (!c || !allowed || x->n_conns >= MAX_CONNS || x->dial_fd < 0 ||
            !(c->host = bufferevent_socket_new(x->d->base, fd, BEV_OPT_CLOSE_ON_FREE))) {
            if (c && !c->host)
                close(fd);
            if (c) {
                audit_conn(c,
                           !allowed ? "refused: not the session's owner"
                                    : "refused: too many connections");
                c->next = x->conns; /* conn_free unlinks it */
                x->conns = c;
                x->n_conns++;
                conn_free(c);
            } else {
                close(fd);
            }
            continue;
        }
        /* Nothing is read from it until it has somewhere to go. */
        bufferevent_disable(c->host, EV_READ);
        c->dialing = true;
        c->next = x->conns;
        x->conns = c;
        x->n_conns++;
        char ask = 'D';
        if (write(x->dial_fd, &ask, 1) != 1) {
            audit_conn(c, "refused: the dialer is gone");
            conn_free(c);
        }
    }
}

/* ---- unix sockets in the state directory ---- */

/*
 * The session's owner and the --admin-uids may connect to the socket NAME
 * in DFD. -1 with errno.
 */
static int grant_connect(const struct daemon *d, int dfd, const char *name, uid_t owner)
{
    uid_t uids[DAEMON_MAX_ALLOW + 1];
    size_t n = 0;
    uids[n++] = owner;
    for (size_t i = 0; i < d->cfg.n_admin_uid; i++)
        uids[n++] = d->cfg.admin_uid[i];
    if (peer_grant_connect(dfd, name, uids, n) == 0)
        return 0;
    /*
     * A filesystem without ACLs: open to every uid, as the loopback port
     * is; who passes is decided at accept (SO_PEERCRED) either way.
     */
    return errno == EOPNOTSUPP ? fchmodat(dfd, name, 0666, 0) : -1;
}

static void socket_dir(const struct expose *x, char *out, size_t size)
{
    snprintf(out, size, EXPOSE_DIR_PREFIX "%s", x->ses->id);
}

/* X's socket, if it is still the one we bound, and its directory with its last socket. */
static void remove_socket(struct expose *x)
{
    char dir[64];
    socket_dir(x, dir, sizeof dir);
    const char *name = strrchr(x->path, '/') + 1;
    _cleanup_close_ int dfd =
        openat(x->d->state_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (dfd >= 0 && x->ino && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISSOCK(st.st_mode) && st.st_ino == x->ino)
        unlinkat(dfd, name, 0);
    unlinkat(x->d->state_fd, dir, AT_REMOVEDIR); /* ENOTEMPTY: another port's is there */
}

/*
 * A unix socket at STATE/expose-SID/PORT.sock (X's path; its fd). The
 * directory is ours, 0711 (others may pass, not list or create); the
 * socket 0600 with the owner and --admin-uids let in by its ACL, and it
 * listens only once that is so. Whatever is at the path already (a file,
 * a planted link) is refused, never followed or replaced.
 */
static int unix_listener(struct expose *x, struct cordon_err *err)
{
    struct daemon *d = x->d;
    char dir[64], name[16], at[64];
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    socket_dir(x, dir, sizeof dir);
    snprintf(name, sizeof name, "%u.sock", x->port);
    if (asprintf(&x->path, "%s/%s/%s", d->cfg.state_dir, dir, name) < 0) {
        x->path = NULL;
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    }
    if (strlen(x->path) >= sizeof sa.sun_path)
        return err_set(err, CORDON_E_SETUP,
                       "the socket path '%s' is longer than a unix socket's %zu bytes: "
                       "serve with a shorter --state-dir",
                       x->path, sizeof sa.sun_path - 1);
    if (mkdirat(d->state_fd, dir, 0700) < 0 && errno != EEXIST)
        return err_sys(err, CORDON_E_SETUP, "cannot make '%s/%s'", d->cfg.state_dir, dir);
    _cleanup_close_ int dfd =
        openat(d->state_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (dfd < 0 || fstat(dfd, &st) < 0 || fchmod(dfd, 0711) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open '%s/%s'", d->cfg.state_dir, dir);
    if (st.st_uid != geteuid())
        return err_set(err, CORDON_E_SETUP, "'%s/%s' is not the daemon's", d->cfg.state_dir, dir);
    /* Bound through the directory we checked, not by a path that could lead elsewhere. */
    snprintf(at, sizeof at, "/proc/self/fd/%d/%s", dfd, name);
    memcpy(sa.sun_path, at, strlen(at) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot make a unix socket");
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot listen on '%s'", x->path);
        if (errno == EADDRINUSE)
            err_set(err, CORDON_E_SETUP, "cannot listen on '%s': something is already there",
                    x->path);
        close(fd);
        return -1;
    }
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        x->ino = st.st_ino;
    if (!x->ino || fchmodat(dfd, name, 0600, 0) < 0 ||
        grant_connect(d, dfd, name, x->ses->owner) < 0 || listen(fd, 128) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot listen on '%s'", x->path);
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- ports ---- */

static void expose_free(struct expose *x)
{
    while (x->conns)
        conn_free(x->conns);
    if (x->listen_ev)
        event_free(x->listen_ev);
    if (x->dial_ev)
        event_free(x->dial_ev);
    if (x->listen_fd >= 0)
        close(x->listen_fd);
    if (x->dial_fd >= 0)
        close(x->dial_fd);
    if (x->dialer > 0) {
        kill(x->dialer, SIGKILL);
        while (waitpid(x->dialer, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (x->path)
        remove_socket(x);
    free(x->path);
    free(x);
}

/* A listener on 127.0.0.1 at a port the kernel picks: its fd, with *PORT. */
static int host_listener(unsigned *port, struct cordon_err *err)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 128) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot listen on the host's loopback");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static int start_dialer(struct expose *x, int userns, int netns, struct cordon_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot make the dialer's socket");
    pid_t pid = fork();
    if (pid == 0)
        dialer_main(sv[1], userns, netns, x->port);
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        return err_sys(err, CORDON_E_SETUP, "cannot fork the dialer");
    }
    x->dialer = pid;
    x->dial_fd = sv[0];
    return 0;
}

/*
 * Expose SES's PORT on the loopback or (ON_PATH) a unix socket: a new
 * listener and dialer, or the one there is. NULL with ERR.
 */
static struct expose *expose_port(struct daemon *d, struct session *ses, unsigned port,
                                  bool on_path, struct cordon_err *err)
{
    unsigned n = 0;
    for (struct expose *x = ses->exposed; x; x = x->next, n++)
        if (x->port == port && (x->path != NULL) == on_path)
            return x;
    if (n >= MAX_EXPOSED)
        return err_set(err, CORDON_E_USAGE, "a session has at most %d exposed ports", MAX_EXPOSED),
               NULL;
    if (ses->box && !box_ready(ses->box))
        return err_set(err, CORDON_E_USAGE,
                       "busy: the sandbox of session \"%s\" is starting; "
                       "try again",
                       ses->id),
               NULL;
    int userns = -1, netns = ses->box ? box_netns(ses->box, &userns) : -1;
    if (netns < 0)
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "the %s level gives this session no network "
                       "namespace of its own to forward into",
                       ses->box ? cordon_level_name(box_level(ses->box)) : "session's"),
               NULL;
    struct expose *x = calloc(1, sizeof *x);
    if (!x)
        return err_set(err, CORDON_E_INTERNAL, "out of memory"), NULL;
    *x = (struct expose){ .d = d, .ses = ses, .port = port, .listen_fd = -1, .dial_fd = -1 };
    x->listen_fd = on_path ? unix_listener(x, err) : host_listener(&x->host_port, err);
    if (x->listen_fd < 0 || start_dialer(x, userns, netns, err) < 0 ||
        !(x->listen_ev = event_new(d->base, x->listen_fd, EV_READ | EV_PERSIST, on_accept, x)) ||
        !(x->dial_ev = event_new(d->base, x->dial_fd, EV_READ | EV_PERSIST, on_dialed, x)) ||
        event_add(x->listen_ev, NULL) < 0 || event_add(x->dial_ev, NULL) < 0) {
        if (!err->msg[0])
            err_set(err, CORDON_E_INTERNAL, "cannot watch the exposed port");
        expose_free(x);
        return NULL;
    }
    x->next = ses->exposed;
    ses->exposed = x;
    return x;
}

void expose_close_all(struct daemon *d, struct session *ses)
{
    (void)d;
    while (ses->exposed) {
        struct expose *x = ses->exposed;
        ses->exposed = x->next;
        expose_free(x);
    }
}

/* Every listener of PORT goes: the loopback one and the unix socket both. */
static void unexpose(struct client *c, const json_t *id, struct session *ses, unsigned port)
{
    bool found = false;
    for (struct expose **pp = &ses->exposed; *pp;) {
        struct expose *x = *pp;
        if (x->port != port) {
            pp = &x->next;
            continue;
        }
        *pp = x->next;
        expose_free(x);
        found = true;
    }
    if (!found) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS,
                               "session.unexpose: port %u of session \"%s\" is not exposed", port,
                               ses->id));
        return;
    }
    live_audit(&ses->pol, "session.unexpose", ses->box ? box_run_id(ses->box) : NULL,
               json_pack("{s:s, s:i, s:I}", "session", ses->id, "port", (int)port, "uid",
                         (json_int_t)c->uid));
    daemon_reply(c,
                 rpc_result(id,
                            json_pack("{s:s, s:i, s:b}", "session_id", ses->id, "port", (int)port,
                                      "exposed", 0)));
}

/* Where X answers: "address" (127.0.0.1:PORT), "host", "host_port"; or "path". */
static json_t *exposed_json(const struct session *ses, const struct expose *x)
{
    if (x->path)
        return json_pack("{s:s, s:i, s:s}", "session_id", ses->id, "port", (int)x->port, "path",
                         x->path);
    char address[64];
    snprintf(address, sizeof address, "127.0.0.1:%u", x->host_port);
    return json_pack("{s:s, s:i, s:s, s:s, s:i}", "session_id", ses->id, "port", (int)x->port,
                     "address", address, "host", "127.0.0.1", "host_port", (int)x->host_port);
}

void expose_method(struct client *c, const json_t *id, const json_t *params, struct session *ses,
                   bool un)
{
    json_t *jport = json_object_get(params, "port"), *junix = json_object_get(params, "unix");
    const char *method = un ? "unexpose" : "expose";
    if (!json_is_integer(jport) || json_integer_value(jport) < 1 ||
        json_integer_value(jport) > 65535) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS,
                               "session.%s: \"port\" must be 1 to "
                               "65535",
                               method));
        return;
    }
    if (junix && (un || !json_is_boolean(junix))) {
        daemon_reply(c,
                     rpc_error(id, RPC_INVALID_PARAMS,
                               un ? "session.unexpose: \"unix\" is not taken: every listener "
                                    "of the port goes"
                                  : "session.expose: \"unix\" must be true or false"));
        return;
    }
    unsigned port = (unsigned)json_integer_value(jport);
    if (un) {
        unexpose(c, id, ses, port);
        return;
    }
    bool on_path = json_is_true(junix);
    struct cordon_err err = { 0 };
    struct expose *x = NULL;
    if (!ses->live || !ses->box)
        err_set(&err, CORDON_E_USAGE, "session \"%s\" has no live sandbox", ses->id);
    else if (!policy_exposes(&ses->pol, port))
        err_set(&err, CORDON_E_POLICY, "port %u is not in the policy's network.expose", port);
    else
        x = expose_port(c->d, ses, port, on_path, &err);
    json_t *fields = json_pack("{s:s, s:i, s:I, s:b, s:s?, s:i}", "session", ses->id, "port",
                               (int)port, "uid", (json_int_t)c->uid, "exposed", x != NULL, "error",
                               x ? NULL : err.msg, "host_port", x ? (int)x->host_port : 0);
    if (fields && on_path)
        json_object_set_new(fields, "path", x ? json_string(x->path) : json_null());
    live_audit(&ses->pol, "session.expose", ses->box ? box_run_id(ses->box) : NULL, fields);
    if (!x) {
        daemon_reply(c,
                     rpc_error(id,
                               strncmp(err.msg, "busy:", 5) == 0 ? RPC_BUSY
                                   : err.kind == CORDON_E_USAGE  ? RPC_INVALID_PARAMS
                                                                 : RPC_REFUSED,
                               "session.expose: %s", err.msg));
        return;
    }
    daemon_reply(c, rpc_result(id, exposed_json(ses, x)));
}
