/*
 * daemon/box.c: a box (daemon/live.h): a sandbox the daemon keeps, whose
 * command is cordon-live-agent, driven over the run's stdin and stdout on
 * the daemon's loop. The run is an ordinary run handle (core/handle.h):
 * the policy, limits, gateway and audit record are every run's; the box
 * adds the agent, bound read-only at /.cordon/agent. What the agent says
 * is checked (frame sizes, the output window, process numbers): a frame
 * out of line ends the box.
 */
#include "daemon/live.h"

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/fds.h"
#include "common/hostpath.h"
#include "common/json.h"
#include "common/procfs.h"
#include "common/syscalls.h"
#include "core/handle.h"
#include "sandbox/backend.h"
#include "sandbox/freezer.h"
#include "sandbox/microvm/microvm.h"

#include <event2/buffer.h>
#include <event2/event.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define AGENT_NAME "cordon-live-agent"
#define AGENT_DEST "/.cordon/agent"
#define MAX_RESULT (256u * 1024)
/* Queued for an agent that does not read (paused, or stopped from inside) beyond which a
 * process.signal or process.resize is busy: everything else sent to it has a bound of its
 * own (stdin and output windows, spawns per slot), these had none. */
#define MAX_QUEUED LIVE_MAX_SPAWN
/* A box let go whose run has not ended by then is killed. */
#define CLOSE_GRACE_MS 3000

extern const char cordon_live_agent_start[];
extern const unsigned long cordon_live_agent_size;

struct box {
    struct box *next; /* in d->boxes */
    struct daemon *d;
    struct policy pol;         /* the base's, with the agent's bind */
    struct policy_bind *binds; /* pol.binds: the base's and the agent's (ours) */
    uid_t owner;
    bool live;
    char run_id[33];
    char session_id[33];
    enum cordon_level level;
    struct run_handle h;
    struct event *out_ev, *in_ev, *err_ev, *res_ev, *exit_ev, *kill_ev;
    int pidfd;
    struct evbuffer *rx, *tx, *held, *result;
    char errtail[512];
    size_t errlen;
    bool hello, closing, out_done, err_done, res_done, ended;
    uint32_t next_wire;
    struct lproc *procs[LIVE_MAX_PROCS]; /* those the agent runs now, by slot */
    /* the agent as the host sees it (a live box's, found at its hello) */
    pid_t agent;
    int netns, userns;
    char freezer[4096]; /* its freezer's directory, or "" */
    bool freezer_ours;  /* made by us (cgroup v1): removed when the box goes */
};

/* ---- the agent on the host ---- */

int box_install_agent(struct daemon *d, struct cordon_err *err)
{
    if (d->agent_path)
        return 0;
    if (asprintf(&d->agent_path, "%s/" AGENT_NAME, d->cfg.state_dir) < 0)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    /* A killed daemon's copy may still run in a sandbox: a new file, not a rewrite. */
    unlinkat(d->state_fd, AGENT_NAME, 0);
    _cleanup_close_ int fd =
        openat(d->state_fd, AGENT_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0555);
    struct stat st;
    if (fd < 0 || !write_all(fd, cordon_live_agent_start, cordon_live_agent_size) ||
        fchmod(fd, 0555) < 0 || fstat(fd, &st) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot write the live agent to '%s'", d->agent_path);
        free(d->agent_path);
        d->agent_path = NULL;
        return -1;
    }
    d->agent_dev = st.st_dev;
    d->agent_ino = st.st_ino;
    return 0;
}

void box_remove_agent(struct daemon *d)
{
    if (d->state_fd >= 0)
        unlinkat(d->state_fd, AGENT_NAME, 0);
    free(d->agent_path);
    d->agent_path = NULL;
}

/*
 * The agent's pid on the host: the descendant of the supervisor that runs
 * the file DEV:INO (the agent's; at the microvm level, where the agent
 * runs in the guest, QEMU's). Asked at its hello, before it started
 * anything, so no process of the sandbox's own can stand in for it.
 */
static pid_t find_agent(const struct box *b, dev_t dev, ino_t ino)
{
    DIR *proc = opendir("/proc");
    size_t n = 0, cap = 0;
    _cleanup_free_ pid_t *pids = NULL, *parents = NULL;
    struct dirent *e;
    bool short_of_memory = false;
    while (proc && !short_of_memory && (e = readdir(proc))) {
        char stat_line[512];
        pid_t pid = (pid_t)strtol(e->d_name, NULL, 10);
        const char *stat = proc_stat(pid, stat_line, sizeof stat_line);
        unsigned long long ppid;
        if (!stat || !proc_stat_field(stat, 4, &ppid))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 512;
            pid_t *a = realloc(pids, cap * sizeof *a);
            pid_t *p2 = a ? realloc(parents, cap * sizeof *p2) : NULL;
            if (a)
                pids = a;
            if (p2)
                parents = p2;
            if ((short_of_memory = !a || !p2))
                break;
        }
        pids[n] = pid;
        parents[n++] = (pid_t)ppid;
    }
    if (proc)
        closedir(proc);
    if (short_of_memory)
        return -1;
    /* Breadth first from the supervisor: its own children, theirs, ... */
    pid_t frontier[64] = { b->h.pid };
    size_t nf = 1;
    for (int depth = 0; depth < 8 && nf; depth++) {
        pid_t next[64] = { 0 };
        size_t nn = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < nf; j++)
                if (parents[i] == frontier[j] && nn < 64)
                    next[nn++] = pids[i];
        for (size_t i = 0; i < nn; i++) {
            char exe[64];
            struct stat st;
            snprintf(exe, sizeof exe, "/proc/%d/exe", (int)next[i]);
            if (stat(exe, &st) == 0 && st.st_dev == dev && st.st_ino == ino)
                return next[i];
        }
        memcpy(frontier, next, nn * sizeof *next);
        nf = nn;
    }
    return -1;
}

/*
 * The gvisor level's shim: the supervisor's child whose tree is the whole
 * sandbox (runsc, the Sentry and its stub processes, the gofer). The agent
 * is gVisor's, no host process: what the host can pause is that tree.
 */
static pid_t find_gvisor_shim(const struct box *b)
{
    _cleanup_free_ pid_t *kids = NULL;
    size_t n = 0, cap = 0;
    proc_add_children(b->h.pid, &kids, &n, &cap);
    for (size_t i = 0; i < n; i++) {
        char path[64], comm[32];
        snprintf(path, sizeof path, "/proc/%d/comm", (int)kids[i]);
        if (read_small_at(AT_FDCWD, path, comm, sizeof comm) > 0 &&
            strcmp(comm, "cordon-gvisor\n") == 0)
            return kids[i];
    }
    return -1;
}

/* The agent's namespaces, kept while the box lives (none of its own: none). */
static void keep_namespaces(struct box *b)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)b->agent);
    int net = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)b->agent);
    int user = open(path, O_RDONLY | O_CLOEXEC);
    /* Namespaces of its own only: the process level shares the host's. */
    struct stat mine, theirs;
    if (net >= 0 && fstat(net, &theirs) == 0 && stat("/proc/self/ns/net", &mine) == 0 &&
        theirs.st_ino != mine.st_ino && user >= 0) {
        b->netns = net;
        b->userns = user;
    } else {
        if (net >= 0)
            close(net);
        if (user >= 0)
            close(user);
    }
}

/* The agent's namespaces and freezer, kept while the box lives. */
static void locate_agent(struct box *b)
{
    b->agent = find_agent(b, b->d->agent_dev, b->d->agent_ino);
    struct stat qemu;
    if (b->agent > 0) {
        keep_namespaces(b);
    } else if (b->level == CORDON_LEVEL_MICROVM && stat(microvm_qemu_path(), &qemu) == 0) {
        /*
         * The microvm level's agent is the guest's: what the host can pause
         * is its VM, QEMU and the namespace around it, whose freezer stops
         * every vCPU (so every process of the guest) until thawed. QEMU's
         * network namespace is not the guest's: nothing is exposed from it.
         */
        b->agent = find_agent(b, qemu.st_dev, qemu.st_ino);
    } else if (b->level == CORDON_LEVEL_GVISOR) {
        b->agent = find_gvisor_shim(b);
    }
    if (b->agent <= 0)
        return;
    struct cordon_err ignored;
    char name[64];
    snprintf(name, sizeof name, "cordon-live-%d-%.12s", (int)getpid(), b->run_id);
    if (freezer_attach(b->agent, b->h.pid, name, b->freezer, sizeof b->freezer, &b->freezer_ours,
                       &ignored) < 0)
        b->freezer[0] = '\0';
}

/* ---- frames ---- */

/* WHY: a broken agent, killed at once; NULL: the run ended by itself. */
static void box_fail(struct box *b, const char *why);

static void send_frame(struct box *b, uint8_t type, uint32_t wire, const void *data, size_t len)
{
    if (b->closing || b->h.stdin_fd < 0)
        return;
    struct live_hdr h = { .type = type, .id = wire, .len = (uint32_t)len };
    struct evbuffer *to = b->hello ? b->tx : b->held;
    evbuffer_add(to, &h, sizeof h);
    if (len)
        evbuffer_add(to, data, len);
    if (b->hello)
        event_add(b->in_ev, NULL);
}

static struct lproc *by_wire(struct box *b, uint32_t wire)
{
    for (size_t i = 0; i < LIVE_MAX_PROCS; i++)
        if (b->procs[i] && b->procs[i]->wire == wire)
            return b->procs[i];
    return NULL;
}

static void forget(struct box *b, struct lproc *p)
{
    for (size_t i = 0; i < LIVE_MAX_PROCS; i++)
        if (b->procs[i] == p)
            b->procs[i] = NULL;
}

static void on_hello(struct box *b, const char *data, size_t len)
{
    uint32_t v = 0;
    if (b->hello || len != sizeof v || (memcpy(&v, data, sizeof v), v != LIVE_WIRE_VERSION)) {
        box_fail(b, "the agent speaks another version");
        return;
    }
    if (b->live)
        locate_agent(b);
    b->hello = true;
    evbuffer_add_buffer(b->tx, b->held);
    event_add(b->in_ev, NULL);
}

/* One frame from the agent; false when it breaks the format (the box ends). */
static bool frame(struct box *b, const struct live_hdr *h, const char *data)
{
    if (h->type == LIVE_HELLO) {
        on_hello(b, data, h->len);
        return true;
    }
    struct lproc *p = b->hello ? by_wire(b, h->id) : NULL;
    int32_t v = 0;
    if (h->len >= sizeof v)
        memcpy(&v, data, sizeof v);
    if (!p) /* stdin sent as the process ended, answered after its end: no matter */
        return b->hello && h->type == LIVE_STDIN_GONE;
    switch (h->type) {
    case LIVE_STARTED:
        if (p->state != LPROC_STARTING)
            return false;
        lproc_started(p);
        return true;
    case LIVE_FAILED: {
        char why[256];
        size_t n = h->len > sizeof v ? h->len - sizeof v : 0;
        snprintf(why, sizeof why, "%.*s", (int)(n < 200 ? n : 200), data + sizeof v);
        forget(b, p);
        lproc_failed(p, why);
        return true;
    }
    case LIVE_OUT:
        if (h->len > p->window || (h->flags != 1 && h->flags != 2))
            return false;
        p->window -= h->len;
        lproc_output(p, h->flags, data, h->len);
        return true;
    case LIVE_EXITED:
        if (h->len != sizeof v)
            return false;
        forget(b, p);
        lproc_exited(p, v);
        return true;
    case LIVE_STDIN_ACK:
        if (h->len != sizeof v || (uint32_t)v > p->stdin_inflight)
            return false;
        lproc_stdin_ack(p, (uint32_t)v);
        return true;
    case LIVE_STDIN_GONE:
        lproc_stdin_gone(p);
        return true;
    default:
        return false;
    }
}

static void on_out(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct box *b = arg;
    int n = evbuffer_read(b->rx, fd, 65536);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        event_del(b->out_ev);
        b->out_done = true;
        box_fail(b, NULL);
        return;
    }
    struct live_hdr h;
    while (!b->ended && evbuffer_get_length(b->rx) >= sizeof h) {
        evbuffer_copyout(b->rx, &h, sizeof h);
        if (h.len > LIVE_MAX_FRAME) {
            box_fail(b, "the agent sent a frame too large");
            return;
        }
        if (evbuffer_get_length(b->rx) < sizeof h + h.len)
            break;
        const char *data = (const char *)evbuffer_pullup(b->rx, (ssize_t)(sizeof h + h.len));
        if (!frame(b, &h, data + sizeof h)) {
            box_fail(b, "the agent broke the protocol");
            return;
        }
        evbuffer_drain(b->rx, sizeof h + h.len);
    }
}

static void on_in(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct box *b = arg;
    /* Nothing to send (a hello with nothing held): evbuffer_write would say -1, errno stale. */
    if (evbuffer_get_length(b->tx) == 0) {
        event_del(b->in_ev);
        return;
    }
    if (evbuffer_write(b->tx, fd) < 0 && errno != EAGAIN && errno != EINTR) {
        evbuffer_drain(b->tx, evbuffer_get_length(b->tx));
        box_fail(b, NULL);
        return;
    }
    if (evbuffer_get_length(b->tx) == 0)
        event_del(b->in_ev);
}

/* ---- the run's end ---- */

static void box_free(struct box *b)
{
    struct daemon *d = b->d;
    for (struct box **pp = &d->boxes; *pp; pp = &(*pp)->next)
        if (*pp == b) {
            *pp = b->next;
            break;
        }
    d->n_boxes--;
    struct event *evs[] = { b->out_ev, b->in_ev, b->err_ev, b->res_ev, b->exit_ev, b->kill_ev };
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        if (evs[i])
            event_free(evs[i]);
    struct evbuffer *bufs[] = { b->rx, b->tx, b->held, b->result };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            evbuffer_free(bufs[i]);
    run_handle_close(&b->h);
    if (b->pidfd >= 0)
        close(b->pidfd);
    if (b->netns >= 0)
        close(b->netns);
    if (b->userns >= 0)
        close(b->userns);
    freezer_detach(b->freezer, b->freezer_ours);
    free(b->binds);
    free(b);
    daemon_maybe_finish(d);
}

/* Why the run ended, from its result, for the processes it took along (and its error, if
 * it had one, as their detail when the sandbox said nothing on stderr). */
static const char *end_reason(struct box *b)
{
    size_t len = evbuffer_get_length(b->result);
    json_auto_t *res =
        len ? json_parse_strict((const char *)evbuffer_pullup(b->result, -1), len, 0, NULL) : NULL;
    const char *reason = json_string_value(json_object_get(res, "reason"));
    const char *error = json_string_value(json_object_get(res, "error"));
    if (error && !b->errlen)
        b->errlen =
            (size_t)snprintf(b->errtail, sizeof b->errtail, "%s", error) % sizeof b->errtail;
    static const char *const known[] = { "timeout",      "oom",       "pids_limit",
                                         "output_limit", "cpu_limit", "file_size_limit",
                                         "killed" };
    for (size_t i = 0; reason && i < sizeof known / sizeof known[0]; i++)
        if (strcmp(reason, known[i]) == 0)
            return known[i];
    return "lost";
}

/* Everything is in and the supervisor is reaped: the processes learn, the box goes. */
static void box_end(struct box *b)
{
    b->ended = true;
    const char *reason = end_reason(b);
    for (size_t i = 0; i < LIVE_MAX_PROCS; i++) {
        struct lproc *p = b->procs[i];
        b->procs[i] = NULL;
        if (p)
            lproc_lost(p, reason, b->errtail);
    }
    if (b->live)
        live_box_ended(b->d, b);
    box_free(b);
}

static void on_exit_ready(evutil_socket_t fd, short what, void *arg);

static void try_reap(struct box *b)
{
    if (!b->out_done || !b->res_done || !b->err_done || b->ended)
        return;
    int st;
    pid_t r;
    while ((r = waitpid(b->h.pid, &st, WNOHANG)) < 0 && errno == EINTR)
        ;
    if (r == 0) {
        /* Its pipes are closed: it is ending now, and its pidfd says when. */
        if (b->pidfd < 0 && (b->pidfd = sys_pidfd_open(b->h.pid, 0)) >= 0)
            b->exit_ev = event_new(b->d->base, b->pidfd, EV_READ, on_exit_ready, b);
        struct timeval tv = { 0, 50000 };
        if (b->exit_ev)
            event_add(b->exit_ev, NULL);
        else
            event_add(b->kill_ev, &tv);
        return;
    }
    b->h.pid = -1;
    box_end(b);
}

static void on_exit_ready(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    try_reap(arg);
}

static void on_kill(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct box *b = arg;
    if (b->out_done && b->res_done && b->err_done) {
        try_reap(b);
        return;
    }
    if (b->h.pid > 0)
        kill(b->h.pid, SIGKILL);
}

static void on_result(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct box *b = arg;
    int n = evbuffer_read(b->result, fd, 65536);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0 && evbuffer_get_length(b->result) <= MAX_RESULT)
        return;
    if (n > 0) /* a result this large is no result of ours */
        evbuffer_drain(b->result, evbuffer_get_length(b->result));
    event_del(b->res_ev);
    b->res_done = true;
    try_reap(b);
}

static void on_err(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct box *b = arg;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        event_del(b->err_ev);
        b->err_done = true;
        try_reap(b);
        return;
    }
    /* The agent's (and a failed start's) last words, for a process that never ran. */
    size_t take = (size_t)n > sizeof b->errtail - 1 ? sizeof b->errtail - 1 : (size_t)n;
    if (b->errlen + take > sizeof b->errtail - 1)
        b->errlen = 0;
    memcpy(b->errtail + b->errlen, buf + n - take, take);
    b->errlen += take;
    b->errtail[b->errlen] = '\0';
}

/*
 * The box cannot go on (WHY, or NULL: its run ended): nothing more is sent,
 * its run is let go (killed after a grace), and it ends once reaped.
 */
static void box_fail(struct box *b, const char *why)
{
    if (why && b->h.pid > 0)
        kill(b->h.pid, SIGKILL);
    box_close(b);
    try_reap(b);
}

/* ---- life ---- */

/*
 * The base policy with the agent bound in. The output limit is each
 * process's (counted by the daemon on what the agent relays), never the
 * box's: the agent's frames would count against it and cut the process
 * before its first byte. Live: the wall clock is the processes' too.
 */
static int derive(struct box *b, const struct box_spec *spec, struct cordon_err *err)
{
    const struct policy *base = spec->base;
    const struct sandbox_backend *be = sandbox_backend_choose(base, NULL, err);
    if (!be)
        return -1;
    b->level = be->level;
    policy_derive(base, &b->pol);
    b->binds = calloc(base->n_binds + 1, sizeof *b->binds);
    if (!b->binds)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    if (base->n_binds)
        memcpy(b->binds, base->binds, base->n_binds * sizeof *b->binds);
    /* A level without mounts sees it where it is. */
    b->binds[base->n_binds] =
        (struct policy_bind){ .source = b->d->agent_path,
                              .dest = b->level == CORDON_LEVEL_PROCESS ? b->d->agent_path
                                                                       : (char *)AGENT_DEST };
    b->pol.binds = b->binds;
    b->pol.n_binds = base->n_binds + 1;
    b->pol.limits.output = 0;
    if (spec->live)
        b->pol.limits.wall_ms = 0;
    return 0;
}

static int watch(struct box *b, struct event **ev, int fd, short what, event_callback_fn fn)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    *ev = event_new(b->d->base, fd, what, fn, b);
    return *ev && (what & EV_WRITE || event_add(*ev, NULL) == 0) ? 0 : -1;
}

static int box_start(struct box *b, struct cordon_err *err)
{
    if (run_handle_spawn(&b->pol, false, true, &b->h, err) < 0)
        return -1;
    const char *agent = b->level == CORDON_LEVEL_PROCESS ? b->d->agent_path : AGENT_DEST;
    char *argv[] = { (char *)agent, NULL };
    struct run_handle_call call = { .argv = argv,
                                    .run_id = b->run_id,
                                    .session_id = b->session_id[0] ? b->session_id : NULL };
    if (run_handle_send(&b->h, &call, err) < 0)
        return -1;
    if (watch(b, &b->out_ev, b->h.stdout_fd, EV_READ | EV_PERSIST, on_out) < 0 ||
        watch(b, &b->in_ev, b->h.stdin_fd, EV_WRITE | EV_PERSIST, on_in) < 0 ||
        watch(b, &b->err_ev, b->h.stderr_fd, EV_READ | EV_PERSIST, on_err) < 0 ||
        watch(b, &b->res_ev, b->h.result_fd, EV_READ | EV_PERSIST, on_result) < 0 ||
        !(b->kill_ev = evtimer_new(b->d->base, on_kill, b)))
        return err_set(err, CORDON_E_INTERNAL, "cannot watch the box's run");
    return 0;
}

struct box *box_new(struct daemon *d, const struct box_spec *spec, struct cordon_err *err)
{
    /* A live session's box holds a sandbox as long as a process's own does: both count. */
    if (d->n_boxes >= d->cfg.max_running) {
        err_set(err, CORDON_E_USAGE,
                "busy: the daemon runs its limit of %u sandboxes for processes and live "
                "sessions (--max-running); wait for a process to end or destroy a live session",
                d->cfg.max_running);
        return NULL;
    }
    struct box *b = calloc(1, sizeof *b);
    if (!b) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    b->d = d;
    b->owner = spec->owner;
    b->live = spec->live;
    b->pidfd = b->netns = b->userns = -1;
    b->agent = -1;
    b->h = (struct run_handle){
        .pid = -1, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .result_fd = -1, .ctl_fd = -1
    };
    audit_new_run_id(b->run_id);
    snprintf(b->session_id, sizeof b->session_id, "%s", spec->session_id ? spec->session_id : "");
    b->rx = evbuffer_new();
    b->tx = evbuffer_new();
    b->held = evbuffer_new();
    b->result = evbuffer_new();
    b->next = d->boxes;
    d->boxes = b;
    d->n_boxes++;
    if (!b->rx || !b->tx || !b->held || !b->result) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
    } else if (box_install_agent(d, err) == 0 && derive(b, spec, err) == 0 &&
               box_start(b, err) == 0) {
        return b;
    }
    if (b->h.pid > 0) {
        kill(b->h.pid, SIGKILL);
        while (waitpid(b->h.pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    box_free(b);
    return NULL;
}

int box_spawn(struct box *b, struct lproc *lp, const struct box_cmd *cmd, struct cordon_err *err)
{
    size_t slot = 0;
    while (slot < LIVE_MAX_PROCS && b->procs[slot])
        slot++;
    if (b->closing || slot == LIVE_MAX_PROCS)
        return err_set(err, CORDON_E_USAGE, "busy: the sandbox runs %d processes already",
                       LIVE_MAX_PROCS);
    size_t argc = 0, envc = 0;
    size_t len = sizeof(struct live_spawn) + strlen(cmd->cwd ? cmd->cwd : "") + 1;
    for (; cmd->argv[argc]; argc++)
        len += strlen(cmd->argv[argc]) + 1;
    for (; cmd->envp && cmd->envp[envc]; envc++)
        len += strlen(cmd->envp[envc]) + 1;
    if (len > LIVE_MAX_SPAWN)
        return err_set(err, CORDON_E_USAGE, "the command and its environment are over %u bytes",
                       LIVE_MAX_SPAWN);
    struct evbuffer *payload = evbuffer_new();
    if (!payload)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    struct live_spawn s = { .cols = cmd->cols,
                            .rows = cmd->rows,
                            .argc = (uint32_t)argc,
                            .envc = (uint32_t)envc,
                            .flags = cmd->shell ? LIVE_SPAWN_SHELL : 0 };
    evbuffer_add(payload, &s, sizeof s);
    evbuffer_add(payload, cmd->cwd ? cmd->cwd : "", strlen(cmd->cwd ? cmd->cwd : "") + 1);
    for (size_t i = 0; i < argc; i++)
        evbuffer_add(payload, cmd->argv[i], strlen(cmd->argv[i]) + 1);
    for (size_t i = 0; i < envc; i++)
        evbuffer_add(payload, cmd->envp[i], strlen(cmd->envp[i]) + 1);
    lp->wire = ++b->next_wire;
    lp->window = LIVE_WINDOW;
    lp->box = b;
    b->procs[slot] = lp;
    send_frame(b, LIVE_SPAWN, lp->wire, evbuffer_pullup(payload, -1), evbuffer_get_length(payload));
    evbuffer_free(payload);
    return 0;
}

bool box_backlogged(const struct box *b)
{
    return evbuffer_get_length(b->tx) + evbuffer_get_length(b->held) >= MAX_QUEUED;
}

void box_stdin(struct box *b, uint32_t wire, const char *data, size_t len)
{
    while (len) {
        size_t n = len > LIVE_MAX_FRAME ? LIVE_MAX_FRAME : len;
        send_frame(b, LIVE_STDIN, wire, data, n);
        data += n;
        len -= n;
    }
}

void box_eof(struct box *b, uint32_t wire)
{
    send_frame(b, LIVE_EOF, wire, NULL, 0);
}

void box_signal(struct box *b, uint32_t wire, int sig)
{
    uint32_t v = (uint32_t)sig;
    send_frame(b, LIVE_SIGNAL, wire, &v, sizeof v);
}

void box_resize(struct box *b, uint32_t wire, uint16_t cols, uint16_t rows)
{
    uint32_t v = (uint32_t)cols | (uint32_t)rows << 16;
    send_frame(b, LIVE_RESIZE, wire, &v, sizeof v);
}

void box_credit(struct box *b, uint32_t wire, uint32_t n)
{
    struct lproc *p = by_wire(b, wire);
    if (!p || !n)
        return;
    p->window += n;
    send_frame(b, LIVE_CREDIT, wire, &n, sizeof n);
}

void box_close(struct box *b)
{
    if (b->closing)
        return;
    /* Frozen processes cannot die: thawed first. */
    if (b->freezer[0]) {
        struct cordon_err ignored;
        freezer_set(b->freezer, false, &ignored);
    }
    b->closing = true;
    /* The agent's stdin ends: it kills what it started and exits, and the run with it. */
    if (b->in_ev)
        event_del(b->in_ev);
    if (b->h.stdin_fd >= 0) {
        close(b->h.stdin_fd);
        b->h.stdin_fd = -1;
    }
    struct timeval tv = { CLOSE_GRACE_MS / 1000, (CLOSE_GRACE_MS % 1000) * 1000 };
    if (b->kill_ev && !b->ended)
        event_add(b->kill_ev, &tv);
}

const char *box_run_id(const struct box *b)
{
    return b->run_id;
}

enum cordon_level box_level(const struct box *b)
{
    return b->level;
}

bool box_alive(const struct box *b)
{
    return !b->closing && !b->ended;
}

bool box_ready(const struct box *b)
{
    return b->hello && box_alive(b);
}

int box_freeze(struct box *b, bool frozen, struct cordon_err *err)
{
    if (!b->freezer[0])
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "no freezer cgroup for this session here "
                       "(cordon check says whether this host gives cordon cgroups)");
    return freezer_set(b->freezer, frozen, err);
}

int box_netns(const struct box *b, int *userns)
{
    *userns = b->userns;
    return b->netns;
}

void box_stop_all(struct daemon *d, bool live_only)
{
    for (struct box *b = d->boxes; b; b = b->next)
        if (!live_only || b->live) {
            if (!live_only && b->h.pid > 0)
                kill(b->h.pid, SIGKILL);
            box_close(b);
        }
}

void box_kill_all(struct daemon *d)
{
    while (d->boxes) {
        struct box *b = d->boxes;
        /* No one is told: the daemon is going, its records with it. */
        memset(b->procs, 0, sizeof b->procs);
        if (b->h.pid > 0) {
            kill(b->h.pid, SIGKILL);
            while (waitpid(b->h.pid, NULL, 0) < 0 && errno == EINTR)
                ;
        }
        if (b->live)
            live_box_ended(d, b);
        box_free(b);
    }
}
