/*
 * daemon/live_agent.c: cordon-live-agent, the static helper the daemon
 * runs as the command of a sandbox it keeps (a live session's, or one
 * process.start's), bound read-only at /.cordon/agent. Runs inside the
 * boundary, never on the host, as the sandbox's user, with nothing of the
 * supervisor's.
 *
 * It reads frames (daemon/live_wire.h) on stdin and writes them on stdout:
 * each LIVE_SPAWN starts a process (on pipes, or on a terminal from the
 * sandbox's own devpts), in a process group of its own so that a signal
 * reaches everything it started; its output goes back within the window
 * the daemon credits, its stdin comes in as the daemon sends it. The box's
 * working directory and environment are kept between processes: a shell
 * spawn leaves its `cd` and its exports to the next, as a terminal would.
 * Output a process's children write after it exited is read and dropped
 * (a server started with `&` keeps its pipe), so they never block on it.
 *
 * When its stdin ends (the daemon let the box go, or died) every process
 * group it started is killed and it exits; the run's end takes the rest.
 * Self-contained on purpose (no cordon library), like gvisor/init.c.
 */
#include "daemon/live_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* After its exit, how long a process's last output may take to show up
 * (a terminal passes it on through a kernel worker, not at once). */
#define DRAIN_MS 150
#define MAX_ORPHANS 256
#define MAX_STATE (1024u * 1024)
#define READ_CHUNK (16u * 1024)

/* sh runs the text in $1 and hands its directory and environment to fd 3. */
static const char shell_wrapper[] =
    "__cordon_c=$1; shift; eval \"$__cordon_c\" 3>&-; __cordon_s=$?; "
    "{ pwd; env -0; } >&3 2>/dev/null; exit $__cordon_s";

struct buf {
    char *data;
    size_t len, cap;
};

struct proc {
    bool used;
    uint32_t id;
    pid_t pid;
    bool pty;
    int in_w, out_r, err_r, state_r; /* -1 when closed; a terminal's master is in_w and out_r */
    uint32_t credit;
    struct buf in;  /* stdin not yet taken */
    size_t unacked; /* of it, bytes the daemon sent (not a terminal's EOF) */
    bool eof_asked;
    bool reaped;
    int status;
    uint64_t drain_at_ms; /* reaped: output still coming until then */
    struct buf state;     /* a shell spawn's directory and environment */
};

static int in_fd = -1, out_fd = -1, sig_fd = -1;
static struct buf rx, tx;
static struct proc procs[LIVE_MAX_PROCS];
static int orphans[MAX_ORPHANS];
static size_t n_orphans;
static char **box_env;
static char *box_cwd, *workspace;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static _Noreturn void die(const char *what)
{
    fprintf(stderr, "cordon-live-agent: %s: %s\n", what, strerror(errno));
    exit(125);
}

static void buf_add(struct buf *b, const void *data, size_t len)
{
    if (!len)
        return;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + len)
            cap *= 2;
        char *more = realloc(b->data, cap);
        if (!more)
            die("out of memory");
        b->data = more;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
}

static void buf_drop(struct buf *b, size_t n)
{
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

static void buf_free(struct buf *b)
{
    free(b->data);
    *b = (struct buf){ 0 };
}

static void closep(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void send_frame(uint8_t type, uint8_t flags, uint32_t id, const void *data, size_t len)
{
    struct live_hdr h = { .type = type, .flags = flags, .id = id, .len = (uint32_t)len };
    buf_add(&tx, &h, sizeof h);
    if (len)
        buf_add(&tx, data, len);
}

static void send_u32(uint8_t type, uint32_t id, uint32_t v)
{
    send_frame(type, 0, id, &v, sizeof v);
}

static struct proc *find(uint32_t id)
{
    for (size_t i = 0; i < LIVE_MAX_PROCS; i++)
        if (procs[i].used && procs[i].id == id)
            return &procs[i];
    return NULL;
}

/* ---- the box's environment ---- */

static size_t env_count(char **env)
{
    size_t n = 0;
    while (env && env[n])
        n++;
    return n;
}

static void env_free(char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

/* BASE (copied) with each of ADD's entries in place of the one of its name. */
static char **env_merge(char **base, char **add, size_t n_add)
{
    size_t n = env_count(base);
    char **out = calloc(n + n_add + 1, sizeof *out);
    if (!out)
        die("out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t name = strcspn(base[i], "=");
        bool replaced = false;
        for (size_t j = 0; j < n_add && !replaced; j++)
            replaced = strncmp(add[j], base[i], name + 1) == 0;
        if (!replaced && !(out[k++] = strdup(base[i])))
            die("out of memory");
    }
    for (size_t j = 0; j < n_add; j++)
        if (!(out[k++] = strdup(add[j])))
            die("out of memory");
    return out;
}

/* A shell spawn's report: its directory, a newline, then NUL-ended NAME=VALUEs. */
static void take_state(struct buf *s)
{
    char *nl = s->len ? memchr(s->data, '\n', s->len) : NULL;
    if (!nl || nl == s->data || s->data[0] != '/')
        return;
    size_t n = 0;
    for (char *p = nl + 1; p < s->data + s->len; p += strlen(p) + 1)
        n++;
    buf_add(s, "", 1); /* the last entry is NUL-ended even when cut short */
    char **env = calloc(n + 1, sizeof *env);
    char *cwd = strndup(s->data, (size_t)(nl - s->data));
    if (!env || !cwd)
        die("out of memory");
    size_t k = 0;
    for (char *p = nl + 1; k < n; p += strlen(p) + 1)
        if (strchr(p, '=') && strncmp(p, "__cordon_", 9) != 0 && !(env[k++] = strdup(p)))
            die("out of memory");
    env_free(box_env);
    box_env = env;
    free(box_cwd);
    box_cwd = cwd;
}

/* ---- spawning ---- */

struct spawn_req {
    struct live_spawn fixed;
    const char *cwd;
    char **argv, **env;
};

/* The payload's strings in place (NUL-ended, counted); -1 when malformed. */
static int parse_spawn(char *p, size_t len, struct spawn_req *r)
{
    if (len < sizeof r->fixed)
        return -1;
    memcpy(&r->fixed, p, sizeof r->fixed);
    if (r->fixed.argc == 0 || r->fixed.argc > len || r->fixed.envc > len)
        return -1;
    char *at = p + sizeof r->fixed, *end = p + len;
    size_t n = 1 + (size_t)r->fixed.argc + r->fixed.envc;
    char **strs = calloc(n + 2, sizeof *strs);
    if (!strs)
        die("out of memory");
    for (size_t i = 0; i < n; i++) {
        char *nul = at < end ? memchr(at, '\0', (size_t)(end - at)) : NULL;
        if (!nul) {
            free(strs);
            return -1;
        }
        strs[i] = at;
        at = nul + 1;
    }
    /* cwd, argv..., NULL, env..., NULL */
    r->cwd = strs[0];
    r->argv = strs + 1;
    memmove(strs + 2 + r->fixed.argc, strs + 1 + r->fixed.argc, r->fixed.envc * sizeof *strs);
    strs[1 + r->fixed.argc] = NULL;
    r->env = strs + 2 + r->fixed.argc;
    r->env[r->fixed.envc] = NULL;
    return 0;
}

struct child_fds {
    int stdio[3];
    int state; /* the shell's report, or -1 */
    int error; /* where a failed exec says why (close-on-exec) */
};

static _Noreturn void child(const struct spawn_req *r, const struct child_fds *f, bool pty,
                            char **env, const char *cwd)
{
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    signal(SIGPIPE, SIG_DFL);
    int e = 0;
    if (pty ? setsid() < 0 || ioctl(f->stdio[0], TIOCSCTTY, 0) < 0 : setpgid(0, 0) < 0)
        e = errno;
    for (int i = 0; i < 3 && !e; i++)
        if (dup2(f->stdio[i], i) < 0)
            e = errno;
    if (!e && f->state >= 0 && dup2(f->state, 3) < 0)
        e = errno;
    for (int fd = f->state >= 0 ? 4 : 3; fd < 1024; fd++)
        if (fd != f->error)
            close(fd);
    int in_cwd = !e && chdir(cwd) < 0;
    if (in_cwd)
        e = errno;
    if (!e) {
        environ = env;
        if (r->fixed.flags & LIVE_SPAWN_SHELL) {
            char *sh[] = { "sh", "-c", (char *)shell_wrapper, "sh", r->argv[0], NULL };
            execvp("sh", sh);
        } else {
            execvp(r->argv[0], r->argv);
        }
        e = errno;
    }
    int report[2] = { e, in_cwd }; /* which step failed: the parent names it */
    (void)!write(f->error, report, sizeof report);
    _exit(127);
}

/*
 * The slave of MASTER: by TIOCGPTPEER, or where the kernel has none (gVisor's
 * Sentry answers ENOTTY) by its number in the same devpts, /dev/pts/N.
 */
static int open_slave(int master)
{
    int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    unsigned n;
    if (slave >= 0 || (errno != ENOTTY && errno != EINVAL) || ioctl(master, TIOCGPTN, &n) < 0)
        return slave;
    char path[32];
    snprintf(path, sizeof path, "/dev/pts/%u", n);
    return open(path, O_RDWR | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
}

/* A terminal of the sandbox's own devpts: *MASTER, and its slave. */
static int open_terminal(const struct live_spawn *s, int *master)
{
    *master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    int unlock = 0;
    int slave = *master < 0 || ioctl(*master, TIOCSPTLCK, &unlock) < 0 ? -1 : open_slave(*master);
    struct winsize ws = { .ws_row = s->rows, .ws_col = s->cols };
    if (slave >= 0)
        ioctl(slave, TIOCSWINSZ, &ws);
    return slave;
}

static void spawn_failed(uint32_t id, int e, const char *what)
{
    char msg[512];
    int n = snprintf(msg, sizeof msg, "%s: %s", what, strerror(e));
    int32_t v = e;
    char payload[sizeof v + sizeof msg];
    memcpy(payload, &v, sizeof v);
    memcpy(payload + sizeof v, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    send_frame(LIVE_FAILED, 0, id, payload,
               sizeof v + ((size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1));
}

/* Make the pipes (or the terminal) of P; the child's ends in F. -1 with errno. */
static int make_stdio(struct proc *p, const struct live_spawn *s, struct child_fds *f)
{
    int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 };
    if (p->pty) {
        int slave = open_terminal(s, &p->in_w);
        if (slave < 0)
            return -1;
        p->out_r = fcntl(p->in_w, F_DUPFD_CLOEXEC, 3);
        f->stdio[0] = f->stdio[1] = f->stdio[2] = slave;
        return p->out_r < 0 ? -1 : 0;
    }
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
        return -1;
    p->in_w = in[1];
    p->out_r = out[0];
    p->err_r = err[0];
    f->stdio[0] = in[0];
    f->stdio[1] = out[1];
    f->stdio[2] = err[1];
    fcntl(p->in_w, F_SETFL, O_NONBLOCK);
    fcntl(p->out_r, F_SETFL, O_NONBLOCK);
    fcntl(p->err_r, F_SETFL, O_NONBLOCK);
    return 0;
}

static void close_child_fds(struct child_fds *f)
{
    for (int i = 0; i < 3; i++)
        if (f->stdio[i] >= 0 && (i == 0 || f->stdio[i] != f->stdio[0]))
            close(f->stdio[i]);
    closep(&f->state);
    closep(&f->error);
}

static void release(struct proc *p)
{
    closep(&p->in_w);
    closep(&p->out_r);
    closep(&p->err_r);
    closep(&p->state_r);
    buf_free(&p->in);
    buf_free(&p->state);
    p->used = false;
}

static void spawn(uint32_t id, char *payload, size_t len)
{
    struct spawn_req r;
    struct proc *p = NULL;
    for (size_t i = 0; i < LIVE_MAX_PROCS && !p; i++)
        if (!procs[i].used)
            p = &procs[i];
    if (find(id) || !p || parse_spawn(payload, len, &r) < 0) {
        spawn_failed(id, find(id) || p ? EINVAL : EAGAIN, "cannot start the process");
        return;
    }
    *p = (struct proc){ .used = true,
                        .id = id,
                        .pty = r.fixed.cols && r.fixed.rows,
                        .in_w = -1,
                        .out_r = -1,
                        .err_r = -1,
                        .state_r = -1,
                        .credit = LIVE_WINDOW };
    struct child_fds f = { { -1, -1, -1 }, -1, -1 };
    int ep[2] = { -1, -1 }, sp[2] = { -1, -1 };
    bool shell = r.fixed.flags & LIVE_SPAWN_SHELL;
    char **env = r.fixed.flags & LIVE_SPAWN_CLEAR_ENV ? env_merge(NULL, r.env, r.fixed.envc)
                                                      : env_merge(box_env, r.env, r.fixed.envc);
    char *cwd = NULL;
    int e = 0;
    if (*r.cwd ? asprintf(&cwd, "%s/%s", workspace, r.cwd) < 0 : !(cwd = strdup(box_cwd)))
        die("out of memory");
    if (make_stdio(p, &r.fixed, &f) < 0 || pipe2(ep, O_CLOEXEC) < 0 ||
        (shell && pipe2(sp, O_CLOEXEC) < 0))
        e = errno;
    f.error = ep[1];
    f.state = sp[1];
    p->state_r = sp[0];
    pid_t pid = e ? -1 : fork();
    if (pid == 0)
        child(&r, &f, p->pty, env, cwd);
    if (pid < 0 && !e)
        e = errno;
    f.error = -1;
    close_child_fds(&f);
    closep(&ep[1]);
    int report[2] = { e, 0 };
    if (pid > 0 && read(ep[0], report, sizeof report) == (ssize_t)sizeof report) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    } else if (pid > 0) {
        report[0] = 0;
    }
    e = report[0];
    closep(&ep[0]);
    env_free(env);
    char what[256];
    if (report[1])
        snprintf(what, sizeof what, "cannot enter the working directory '%s'", cwd);
    else
        snprintf(what, sizeof what, "cannot run '%s'", shell ? "sh" : r.argv[0]);
    free(cwd);
    free(r.argv - 1);
    if (e) {
        release(p);
        spawn_failed(id, e, what);
        return;
    }
    if (p->state_r >= 0)
        fcntl(p->state_r, F_SETFL, O_NONBLOCK);
    p->pid = pid;
    send_u32(LIVE_STARTED, id, (uint32_t)pid);
}

/* ---- frames from the daemon ---- */

static void on_eof(struct proc *p)
{
    p->eof_asked = true;
    if (p->pty) {
        /* A terminal has no end of input: its EOF character stands for one. */
        struct termios t;
        char c = tcgetattr(p->in_w, &t) == 0 ? (char)t.c_cc[VEOF] : 4;
        buf_add(&p->in, &c, 1);
    } else if (p->in.len == 0) {
        closep(&p->in_w);
    }
}

static void handle(const struct live_hdr *h, char *payload)
{
    struct proc *p = find(h->id);
    uint32_t v = 0;
    if (h->len == sizeof v)
        memcpy(&v, payload, sizeof v);
    switch (h->type) {
    case LIVE_SPAWN:
        spawn(h->id, payload, h->len);
        break;
    case LIVE_STDIN:
        if (!p || p->in_w < 0 || p->eof_asked || p->in.len + h->len > 2 * LIVE_STDIN_WINDOW)
            send_frame(LIVE_STDIN_GONE, 0, h->id, NULL, 0);
        else
            buf_add(&p->in, payload, h->len), p->unacked += h->len;
        break;
    case LIVE_EOF:
        if (p && p->in_w >= 0 && !p->eof_asked)
            on_eof(p);
        break;
    case LIVE_SIGNAL:
        if (p && p->pid > 0 && h->len == sizeof v && v > 0 && v < 65)
            kill(-p->pid, (int)v);
        break;
    case LIVE_RESIZE:
        if (p && p->pty && p->in_w >= 0 && h->len == sizeof v) {
            struct winsize ws = { .ws_col = (uint16_t)v, .ws_row = (uint16_t)(v >> 16) };
            ioctl(p->in_w, TIOCSWINSZ, &ws);
        }
        break;
    case LIVE_CREDIT:
        if (p && h->len == sizeof v && p->credit + (uint64_t)v <= 2 * LIVE_WINDOW)
            p->credit += v;
        break;
    default:
        break;
    }
}

static _Noreturn void shut_down(void)
{
    for (size_t i = 0; i < LIVE_MAX_PROCS; i++)
        if (procs[i].used && procs[i].pid > 0)
            kill(-procs[i].pid, SIGKILL);
    exit(0);
}

static void read_frames(void)
{
    char chunk[65536];
    ssize_t n = read(in_fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0)
        shut_down();
    buf_add(&rx, chunk, (size_t)n);
    struct live_hdr h;
    while (rx.len >= sizeof h) {
        memcpy(&h, rx.data, sizeof h);
        if (h.len > LIVE_MAX_SPAWN || (h.type != LIVE_SPAWN && h.len > LIVE_MAX_FRAME)) {
            errno = EPROTO;
            die("a frame from the daemon is malformed");
        }
        if (rx.len < sizeof h + h.len)
            break;
        handle(&h, rx.data + sizeof h);
        buf_drop(&rx, sizeof h + h.len);
    }
}

/* ---- the processes' side ---- */

static void read_output(struct proc *p, int *fd, uint8_t stream)
{
    char chunk[READ_CHUNK];
    size_t want = p->credit < sizeof chunk ? p->credit : sizeof chunk;
    ssize_t n = want ? read(*fd, chunk, want) : -1;
    if (n < 0 && (!want || errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) { /* the end, or EIO: a terminal whose every slave is closed */
        closep(fd);
        return;
    }
    p->credit -= (uint32_t)n;
    send_frame(LIVE_OUT, stream, p->id, chunk, (size_t)n);
}

static void read_state(struct proc *p)
{
    char chunk[READ_CHUNK];
    ssize_t n = read(p->state_r, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        closep(&p->state_r);
        return;
    }
    if (p->state.len + (size_t)n <= MAX_STATE)
        buf_add(&p->state, chunk, (size_t)n);
}

static void write_stdin(struct proc *p)
{
    ssize_t n = write(p->in_w, p->in.data, p->in.len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n < 0) {
        /* The process closed its stdin: what it did not take is dropped. */
        buf_free(&p->in);
        closep(&p->in_w);
        send_frame(LIVE_STDIN_GONE, 0, p->id, NULL, 0);
        return;
    }
    buf_drop(&p->in, (size_t)n);
    size_t ack = (size_t)n < p->unacked ? (size_t)n : p->unacked;
    p->unacked -= ack;
    if (ack)
        send_u32(LIVE_STDIN_ACK, p->id, (uint32_t)ack);
    if (p->in.len == 0 && p->eof_asked && !p->pty)
        closep(&p->in_w);
}

static void reap(void)
{
    struct signalfd_siginfo si;
    while (read(sig_fd, &si, sizeof si) == (ssize_t)sizeof si)
        ;
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
        for (size_t i = 0; i < LIVE_MAX_PROCS; i++)
            if (procs[i].used && procs[i].pid == pid && !procs[i].reaped) {
                procs[i].reaped = true;
                procs[i].status = st;
                procs[i].drain_at_ms = now_ms() + DRAIN_MS;
            }
}

/* An exited process's output still open at DRAIN_MS with nothing in it is
 * its children's now: read and dropped from here on. */
static void settle(int *fd, uint64_t now, uint64_t drain_at)
{
    int avail = 0;
    if (*fd < 0 || now < drain_at)
        return;
    if (now < drain_at + 20 * DRAIN_MS && ioctl(*fd, FIONREAD, &avail) == 0 && avail > 0)
        return;
    if (n_orphans < MAX_ORPHANS)
        orphans[n_orphans++] = *fd;
    else
        close(*fd);
    *fd = -1;
}

static void finish_exited(uint64_t now)
{
    for (size_t i = 0; i < LIVE_MAX_PROCS; i++) {
        struct proc *p = &procs[i];
        if (!p->used || !p->reaped)
            continue;
        settle(&p->out_r, now, p->drain_at_ms);
        settle(&p->err_r, now, p->drain_at_ms);
        if (p->state_r >= 0 && now >= p->drain_at_ms) {
            /* Written before the shell exited: all there now. */
            size_t had;
            do {
                had = p->state.len;
                read_state(p);
            } while (p->state_r >= 0 && p->state.len > had);
            closep(&p->state_r);
        }
        if (p->out_r >= 0 || p->err_r >= 0 || p->state_r >= 0)
            continue;
        if (p->state.len)
            take_state(&p->state);
        int32_t st = p->status;
        send_frame(LIVE_EXITED, 0, p->id, &st, sizeof st);
        release(p);
    }
}

static void drop_orphan_output(size_t i)
{
    char chunk[READ_CHUNK];
    ssize_t n = read(orphans[i], chunk, sizeof chunk);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        close(orphans[i]);
        orphans[i] = orphans[--n_orphans];
    }
}

/* ---- the loop ---- */

enum slot_kind { S_DAEMON_IN, S_DAEMON_OUT, S_SIGNALS, S_OUT, S_ERR, S_STATE, S_STDIN, S_ORPHAN };

struct slot {
    enum slot_kind kind;
    size_t index;
};

#define MAX_SLOTS (3 + 4 * LIVE_MAX_PROCS + MAX_ORPHANS)

static size_t add_slot(struct pollfd *pf, struct slot *sl, size_t n, int fd, short events,
                       enum slot_kind kind, size_t index)
{
    pf[n] = (struct pollfd){ .fd = fd, .events = events };
    sl[n] = (struct slot){ kind, index };
    return n + 1;
}

static size_t fill(struct pollfd *pf, struct slot *sl, int *timeout, uint64_t now)
{
    size_t n = 0;
    /* A whole spawn may be buffered; beyond, the daemon waits. */
    if (rx.len < sizeof(struct live_hdr) + LIVE_MAX_SPAWN)
        n = add_slot(pf, sl, n, in_fd, POLLIN, S_DAEMON_IN, 0);
    if (tx.len)
        n = add_slot(pf, sl, n, out_fd, POLLOUT, S_DAEMON_OUT, 0);
    n = add_slot(pf, sl, n, sig_fd, POLLIN, S_SIGNALS, 0);
    *timeout = -1;
    for (size_t i = 0; i < LIVE_MAX_PROCS; i++) {
        struct proc *p = &procs[i];
        if (!p->used)
            continue;
        if (p->credit && p->out_r >= 0)
            n = add_slot(pf, sl, n, p->out_r, POLLIN, S_OUT, i);
        if (p->credit && p->err_r >= 0)
            n = add_slot(pf, sl, n, p->err_r, POLLIN, S_ERR, i);
        if (p->state_r >= 0)
            n = add_slot(pf, sl, n, p->state_r, POLLIN, S_STATE, i);
        if (p->in_w >= 0 && p->in.len)
            n = add_slot(pf, sl, n, p->in_w, POLLOUT, S_STDIN, i);
        if (p->reaped) {
            uint64_t at = p->drain_at_ms > now ? p->drain_at_ms - now : 10;
            if (*timeout < 0 || at < (uint64_t)*timeout)
                *timeout = (int)at;
        }
    }
    for (size_t i = 0; i < n_orphans; i++)
        n = add_slot(pf, sl, n, orphans[i], POLLIN, S_ORPHAN, i);
    return n;
}

static void flush_frames(void)
{
    ssize_t n = write(out_fd, tx.data, tx.len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n < 0)
        shut_down(); /* the daemon is gone */
    buf_drop(&tx, (size_t)n);
}

static void serve(void)
{
    static struct pollfd pf[MAX_SLOTS];
    static struct slot sl[MAX_SLOTS];
    for (;;) {
        int timeout;
        size_t n = fill(pf, sl, &timeout, now_ms());
        if (poll(pf, n, timeout) < 0 && errno != EINTR)
            die("poll");
        /* Orphans last, from the end: dropping one moves the last into its place. */
        for (size_t i = n; i-- > 0;) {
            if (!pf[i].revents)
                continue;
            struct proc *p = &procs[sl[i].index];
            switch (sl[i].kind) {
            case S_DAEMON_IN:
                read_frames();
                break;
            case S_DAEMON_OUT:
                flush_frames();
                break;
            case S_SIGNALS:
                reap();
                break;
            case S_OUT:
                if (p->used && p->out_r >= 0)
                    read_output(p, &p->out_r, 1);
                break;
            case S_ERR:
                if (p->used && p->err_r >= 0)
                    read_output(p, &p->err_r, 2);
                break;
            case S_STATE:
                if (p->used && p->state_r >= 0)
                    read_state(p);
                break;
            case S_STDIN:
                if (p->used && p->in_w >= 0 && p->in.len)
                    write_stdin(p);
                break;
            case S_ORPHAN:
                drop_orphan_output(sl[i].index);
                break;
            }
        }
        finish_exited(now_ms());
    }
}

int main(void)
{
    /* The daemon's channel away from 0 and 1, which every process gets its own of. */
    in_fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
    out_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (in_fd < 0 || out_fd < 0 || null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0)
        die("cannot set up its descriptors");
    fcntl(in_fd, F_SETFL, O_NONBLOCK);
    fcntl(out_fd, F_SETFL, O_NONBLOCK);
    signal(SIGPIPE, SIG_IGN);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    sig_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sig_fd < 0)
        die("signalfd");
    /* A server its shell left behind is reaped here, not by init. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd) || !(workspace = strdup(cwd)) || !(box_cwd = strdup(cwd)))
        die("cannot tell its working directory");
    box_env = env_merge(environ, NULL, 0);
    send_u32(LIVE_HELLO, 0, LIVE_WIRE_VERSION);
    serve();
}
