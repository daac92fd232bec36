/*
 * sandbox/supervise.c: the supervisor's event loop for one run. It owns the
 * clock and the output; the sandbox owns nothing. Runs in the supervisor.
 */
#include "sandbox/supervise.h"
#include "common/json.h"

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/fds.h"
#include "common/syscalls.h"
#include "sandbox/boundary.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 100
/* A metered memory limit past half used: looked at this often. */
#define CLOSE_TICK_MS 20
/* How long a command may take to exit after the signal cordon got was
 * passed on to it, before everything is killed. */
#define INTERRUPT_GRACE_US (2 * 1000 * 1000)
/* The command's stdin, relayed a chunk at a time (in its own array: the loop's state is
 * cleared whole, and 64 KB of it would be page faults every run). */
#define IN_BUF_SIZE 65536

uint64_t monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

struct loop {
    struct supervision *s;
    struct sandbox_result *res;
    int pidfd;
    bool init_done;
    bool tree_gone; /* init said every other process of the run is reaped */
    uint64_t tree_cpu_us, tree_maxrss_kib;
    bool killed;             /* we ended the run */
    bool interrupted;        /* cordon got a signal and passed it on */
    uint64_t grace_deadline; /* when an interrupted run is killed */
    enum run_reason kill_reason;
    int kill_signal; /* the signal cordon itself received, or 0 */
    bool setup_failed;
    bool have_status;
    int cmd_status; /* wait status of the command, from init */
    uint32_t seen;  /* BOUNDARY_SEEN_*: what the boundary's own kernel saw */
    char *in_buf;   /* IN_BUF_SIZE bytes */
    size_t in_len, in_off;
    bool in_eof;
    bool output_capped;
    uint64_t next_check_us; /* when the cgroup's counters are read next */
    unsigned tick_ms;       /* and how long after that */
};

/* The command and everything it started are gone: what is left is teardown. */
static bool ended(const struct loop *l)
{
    return l->init_done || l->tree_gone;
}

static void end_run(struct loop *l, enum run_reason reason)
{
    if (l->killed || l->init_done)
        return;
    l->killed = true;
    l->kill_reason = reason;
    /* Init is PID 1 of the sandbox: its death takes every process with it.
     * Once the tree is gone there is nothing left to end: the reason stands. */
    if (!l->tree_gone)
        kill(l->s->init_pid, SIGKILL);
}

/*
 * SIGINT/SIGTERM/SIGHUP to cordon: the first is passed on (init forwards it
 * to the command), so the command can clean up; a second one, or the grace
 * period running out, kills the run.
 */
static void interrupt(struct loop *l, int sig)
{
    if (ended(l))
        return;
    if (l->interrupted) {
        end_run(l, RUN_KILLED);
        return;
    }
    l->interrupted = true;
    l->kill_signal = sig;
    l->grace_deadline = monotonic_us() + INTERRUPT_GRACE_US;
    kill(l->s->init_pid, sig);
}

/* The caller's terminal size onto the run's own terminal (which signals the command). */
static void pass_window_size(const struct supervision *s)
{
    struct winsize ws;
    if (s->tty_w >= 0 &&
        (ioctl(s->call->in_fd, TIOCGWINSZ, &ws) == 0 ||
         ioctl(s->call->out_fd, TIOCGWINSZ, &ws) == 0))
        ioctl(s->tty_w, TIOCSWINSZ, &ws);
}

static void relay_output(struct loop *l, int *fd, int to, uint64_t *count)
{
    char buf[65536];
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        closep(fd);
        *fd = -1;
        return;
    }
    uint64_t limit = l->s->limits->output;
    uint64_t total = l->res->stdout_bytes + l->res->stderr_bytes;
    size_t pass = (size_t)n;
    if (limit && total + (uint64_t)n > limit) {
        pass = total >= limit ? 0 : (size_t)(limit - total);
        l->output_capped = true;
        end_run(l, RUN_OUTPUT_LIMIT);
    }
    if (pass) {
        write_all(to, buf, pass);
        *count += pass;
    }
}

static void relay_input(struct loop *l, short revents_in, short revents_out)
{
    struct supervision *s = l->s;
    if (l->in_len == l->in_off && (revents_in & (POLLIN | POLLHUP | POLLERR | POLLNVAL))) {
        ssize_t n = read(s->call->in_fd, l->in_buf, IN_BUF_SIZE);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            return;
        if (n <= 0) {
            l->in_eof = true;
        } else {
            l->in_len = (size_t)n;
            l->in_off = 0;
        }
    }
    if (l->in_len > l->in_off && (revents_out & (POLLOUT | POLLERR | POLLHUP))) {
        ssize_t n = write(s->in_w, l->in_buf + l->in_off, l->in_len - l->in_off);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            return;
        if (n < 0) {
            l->in_eof = true; /* the command closed its stdin */
            l->in_len = l->in_off = 0;
        } else {
            l->in_off += (size_t)n;
            if (l->in_off == l->in_len)
                l->in_len = l->in_off = 0;
        }
    }
    if (l->in_eof && l->in_len == l->in_off) {
        closep(&s->in_w);
        s->in_w = -1;
    }
}

static void read_setup_error(struct loop *l)
{
    struct cordon_err rec;
    ssize_t n = read(l->s->err_r, &rec, sizeof rec);
    if (n < 0 && errno == EINTR)
        return;
    if (n == (ssize_t)sizeof rec) {
        rec.msg[sizeof rec.msg - 1] = '\0';
        l->res->error = rec;
        l->setup_failed = true;
    } else if (n == 0 && l->s->started) {
        l->s->started(l->s->started_arg);
    }
    closep(&l->s->err_r);
    l->s->err_r = -1;
}

/* Init writes the command's wait status once, just before it exits (a
 * boundary with a kernel of its own adds what it saw: struct boundary_status). */
static void read_command_status(struct loop *l)
{
    struct boundary_status st = { 0 };
    ssize_t n = read(l->s->status_r, &st, sizeof st);
    if (n == (ssize_t)sizeof st.ws || n == (ssize_t)sizeof st) {
        l->cmd_status = st.ws;
        l->seen = n == (ssize_t)sizeof st ? st.seen : 0;
        l->have_status = true;
        if (l->seen & BOUNDARY_TREE_GONE) {
            l->tree_gone = true;
            l->tree_cpu_us = st.cpu_us;
            l->tree_maxrss_kib = st.maxrss_kib;
        }
    }
    closep(&l->s->status_r);
    l->s->status_r = -1;
}

/* One gateway decision line into the run's egress summary and the audit log. */
static void note_decision(struct supervision *s, struct sandbox_result *res, const char *line,
                          size_t len)
{
    struct egress_summary *e = &res->egress;
    json_error_t jerr;
    json_t *d = json_parse_strict(line, len, 0, &jerr);
    if (!d)
        return;
    /* The gateway asked the decider (network.ask): a question and its
     * answer, recorded as such; the connection's decision follows. */
    const char *event = json_string_value(json_object_get(d, "event"));
    if (event && strcmp(event, "decider.ask") == 0) {
        json_object_del(d, "event");
        struct cordon_err ignored;
        if (s->audit)
            audit_append(s->audit, "decider.ask", s->run_id, d, &ignored);
        else
            json_decref(d);
        return;
    }
    /* Times are integers wherever cordon writes them (see the result). */
    json_t *ms = json_object_get(d, "duration_ms");
    _cleanup_free_ char *fixed = NULL;
    if (json_is_real(ms)) {
        double v = json_real_value(ms);
        json_object_set_new(d, "duration_us", json_integer((json_int_t)(v * 1000.0 + 0.5)));
        json_object_set_new(d, "duration_ms", json_integer((json_int_t)(v + 0.5)));
        fixed = json_dumps(d, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (fixed) {
            line = fixed;
            len = strlen(fixed);
        }
    }
    if (json_is_true(json_object_get(d, "allowed"))) {
        e->allowed++;
        e->bytes_up += (uint64_t)json_integer_value(json_object_get(d, "bytes_up"));
        e->bytes_down += (uint64_t)json_integer_value(json_object_get(d, "bytes_down"));
    } else {
        e->refused++;
    }
    if (s->audit) {
        struct cordon_err ignored;
        audit_append(s->audit, "egress.decision", s->run_id, json_incref(d), &ignored);
    }
    if (s->decided)
        s->decided(s->decided_arg, d);
    json_decref(d);
    if (len < sizeof e->recent[0]) {
        memcpy(e->recent[e->next], line, len);
        e->recent[e->next][len] = '\0';
        e->next = (e->next + 1) % (sizeof e->recent / sizeof e->recent[0]);
        if (e->n_recent < sizeof e->recent / sizeof e->recent[0])
            e->n_recent++;
    }
}

/* Read what the gateway sent; false at EOF (report_r closed). */
static bool read_reports(struct supervision *s, struct sandbox_result *res)
{
    ssize_t n =
        read(s->report_r, s->report_buf + s->report_len, sizeof s->report_buf - s->report_len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0) {
        closep(&s->report_r);
        s->report_r = -1;
        return false;
    }
    s->report_len += (size_t)n;
    char *start = s->report_buf, *nl;
    while ((nl = memchr(start, '\n', s->report_len - (size_t)(start - s->report_buf)))) {
        note_decision(s, res, start, (size_t)(nl - start));
        start = nl + 1;
    }
    s->report_len -= (size_t)(start - s->report_buf);
    memmove(s->report_buf, start, s->report_len);
    if (s->report_len == sizeof s->report_buf)
        s->report_len = 0; /* a line longer than any decision: drop it */
    return true;
}

void supervise_drain_reports(struct supervision *s, struct sandbox_result *res, int timeout_ms)
{
    uint64_t end = monotonic_us() + (uint64_t)timeout_ms * 1000;
    while (s->report_r >= 0) {
        uint64_t now = monotonic_us();
        if (now >= end)
            break;
        struct pollfd p = { .fd = s->report_r, .events = POLLIN };
        if (poll(&p, 1, (int)((end - now) / 1000) + 1) <= 0)
            break;
        read_reports(s, res);
    }
    closep(&s->report_r);
    s->report_r = -1;
}

static void check_polled_limits(struct loop *l)
{
    /* Only the counters polled here: the memory limit is the kernel's to hold. */
    unsigned want =
        (l->s->poll_cpu ? CGROUP_STAT_CPU : 0) | (l->s->poll_pids ? CGROUP_STAT_PIDS : 0);
    struct cgroup_stats st;
    cgroup_read_stats(l->s->cg, want, &st);
    const struct policy_limits *lim = l->s->limits;
    /* The level's memory, metered: ended as the cgroup's OOM killer would
     * (it may pass the limit by what it allocates in a tick; the tick is
     * short once half is used). */
    l->tick_ms = TICK_MS;
    if (l->s->meter && lim->memory) {
        uint64_t used = mem_meter_read(l->s->meter);
        if (used > lim->memory)
            end_run(l, RUN_OOM);
        else if (used > lim->memory / 2)
            l->tick_ms = CLOSE_TICK_MS;
    }
    if (l->s->poll_cpu && lim->cpu_ms && st.cpu_usage_us >= lim->cpu_ms * 1000)
        end_run(l, RUN_CPU_LIMIT);
    if (l->s->poll_tree_cpu && lim->cpu_ms && tree_cpu_us(l->s->init_pid) >= lim->cpu_ms * 1000)
        end_run(l, RUN_CPU_LIMIT);
    /* A refused fork is the pids limit firing: end the run, don't let it
     * spin against the wall (a fork bomb otherwise lives until the timeout). */
    if (l->s->poll_pids && lim->pids && st.pids_max_hits > 0)
        end_run(l, RUN_PIDS_LIMIT);
}

static void finish(struct loop *l, struct rusage *ru)
{
    struct sandbox_result *res = l->res;
    const struct supervision *s = l->s;
    res->wall_us = monotonic_us() - s->start_us;
    res->cpu_us = (uint64_t)ru->ru_utime.tv_sec * 1000000u + (uint64_t)ru->ru_utime.tv_usec +
        (uint64_t)ru->ru_stime.tv_sec * 1000000u + (uint64_t)ru->ru_stime.tv_usec;
    res->peak_memory = (uint64_t)ru->ru_maxrss * 1024u;
    if (s->meter && s->meter->peak > res->peak_memory)
        res->peak_memory = s->meter->peak;

    struct cgroup_stats st = { 0 };
    if (s->cg && s->cg->version) {
        cgroup_read_stats(s->cg, CGROUP_STAT_MEMORY | CGROUP_STAT_CPU, &st);
        if (st.memory_peak)
            res->peak_memory = st.memory_peak;
        if (st.cpu_usage_us > res->cpu_us)
            res->cpu_us = st.cpu_usage_us;
    }

    /* The boundary's own processes count against the memory limit too (at
     * microvm, QEMU and the guest's memory): a limit that killed one of them
     * ended the run, whatever the boundary then said about it. */
    if (l->setup_failed && st.oom_kills > 0) {
        res->reason = RUN_OOM;
        res->signaled = true;
        res->signal = SIGKILL;
        res->status = 128 + SIGKILL;
        return;
    }
    if (l->setup_failed) {
        res->reason = RUN_SETUP_ERROR;
        res->status = err_exit_code(&res->error);
        res->exit_code = res->status;
        return;
    }
    if (l->killed && l->kill_reason == RUN_TIMEOUT) {
        res->reason = RUN_TIMEOUT;
        res->signaled = true;
        res->signal = SIGKILL;
        res->status = 124;
        return;
    }
    /* A command that handled the signal passed on to it and exited is
     * reported as exiting: the status is its own, not the signal's. */
    if (l->killed || (l->interrupted && !(l->have_status && WIFEXITED(l->cmd_status)))) {
        res->reason = l->killed ? l->kill_reason : RUN_KILLED;
        res->signaled = true;
        res->signal = l->kill_signal ? l->kill_signal : SIGKILL;
        res->status = 128 + res->signal;
        return;
    }
    if (!l->have_status) {
        /* Init died without reporting: the memory limit's OOM killer may
         * pick init itself; otherwise only a kill from outside does that. */
        res->reason = st.oom_kills > 0 ? RUN_OOM : RUN_KILLED;
        res->signaled = true;
        res->signal = SIGKILL;
        res->status = 128 + SIGKILL;
        return;
    }
    int ws = l->cmd_status;
    if (WIFEXITED(ws)) {
        res->exit_code = WEXITSTATUS(ws);
        res->status = res->exit_code;
        res->reason = RUN_EXITED;
        return;
    }
    res->signaled = true;
    res->signal = WTERMSIG(ws);
    res->status = 128 + res->signal;
    res->reason = RUN_EXITED;
    if (res->signal == SIGKILL && (st.oom_kills > 0 || (l->seen & BOUNDARY_SEEN_OOM)))
        res->reason = RUN_OOM;
    else if (res->signal == SIGXFSZ && s->limits->file_size)
        res->reason = RUN_FILE_SIZE_LIMIT;
    else if (res->signal == SIGXCPU ||
             (res->signal == SIGKILL && s->limits->cpu_ms &&
              res->cpu_us >= s->limits->cpu_ms * 1000))
        res->reason = RUN_CPU_LIMIT;
}

/* The run is over: its setup error's pipe drained, its stdin closed, its result made. */
static void conclude(struct loop *l, struct rusage *ru)
{
    struct supervision *s = l->s;
    if (s->err_r >= 0) {
        fcntl(s->err_r, F_SETFL, O_NONBLOCK);
        read_setup_error(l);
    }
    if (s->in_w >= 0)
        closep(&s->in_w), s->in_w = -1;
    finish(l, ru);
}

/*
 * Init reported the run's tree gone: finish now, without waiting for init's
 * own exit (the namespaces' teardown). The output pipes have no writer left
 * and drain to EOF; a setup error, if any, is in its pipe already.
 */
static void tree_gone(struct loop *l, bool tick)
{
    /* The counters once more as the tree ends, as on init's exit: a limit
     * that fired meanwhile (a refused fork) is how the run ended. */
    if (tick && !l->killed)
        check_polled_limits(l);
    struct rusage ru = {
        .ru_utime = { .tv_sec = (time_t)(l->tree_cpu_us / 1000000u),
                      .tv_usec = (suseconds_t)(l->tree_cpu_us % 1000000u) },
        .ru_maxrss = (long)l->tree_maxrss_kib,
    };
    conclude(l, &ru);
}

/* Init is gone (POLLED: its pidfd said so) or may be: reap it and end the run. */
static void reap_init(struct loop *l, bool polled)
{
    struct supervision *s = l->s;
    struct rusage ru;
    int ws;
    pid_t w = wait4(s->init_pid, &ws, polled ? 0 : WNOHANG, &ru);
    /* A container's init is not ours to reap (its creator's caller does): its
     * pidfd said it is gone, the status pipe says how. */
    if (w < 0 && errno == ECHILD && polled) {
        w = s->init_pid;
        memset(&ru, 0, sizeof ru);
    }
    if (w != s->init_pid)
        return;
    l->init_done = true;
    /* The status arrives before init exits; drain it now. */
    if (s->status_r >= 0)
        read_command_status(l);
    conclude(l, &ru);
}

/*
 * The gateway started for what reached its doors; they are closed either
 * way. One that could not start decides nothing, so its failure is what the
 * result and the log record: what waited at the doors was refused.
 */
static void wake_gateway(struct supervision *s, struct sandbox_result *res)
{
    struct cordon_err err = { 0 };
    s->n_doors = 0;
    int fd = s->wake(s->wake_arg, &err);
    if (fd >= 0) {
        s->report_r = fd;
        return;
    }
    snprintf(res->egress.error, sizeof res->egress.error, "%s", err.msg);
    struct cordon_err ignored;
    if (s->audit)
        audit_append(s->audit, "egress.error", s->run_id, json_pack("{s:s}", "error", err.msg),
                     &ignored);
}

/* Has something reached a door? (TIMEOUT_MS as poll's.) */
static bool door_reached(const struct supervision *s, int timeout_ms)
{
    struct pollfd p[SUPERVISE_MAX_DOORS];
    for (size_t i = 0; i < s->n_doors; i++)
        p[i] = (struct pollfd){ .fd = s->doors[i], .events = POLLIN };
    return s->n_doors && poll(p, (nfds_t)s->n_doors, timeout_ms) > 0;
}

void supervise(struct supervision *s, struct sandbox_result *res)
{
    char in_buf[IN_BUF_SIZE];
    struct loop l = { .s = s, .res = res, .in_buf = in_buf };
    l.pidfd = sys_pidfd_open(s->init_pid, 0);
    bool relay_in = s->in_w >= 0 && s->call->in_fd >= 0;
    if (s->in_w >= 0 && !relay_in)
        closep(&s->in_w), s->in_w = -1;
    if (s->in_w >= 0)
        fcntl(s->in_w, F_SETFL, O_NONBLOCK);

    pass_window_size(s);
    uint64_t deadline = s->limits->wall_ms ? s->start_us + s->limits->wall_ms * 1000 : 0;
    bool tick = s->poll_cpu || s->poll_pids || s->meter || s->poll_tree_cpu;
    l.tick_ms = TICK_MS;
    /* The first read a tick from now, not at the loop's first wakeup (the exec's). */
    l.next_check_us = monotonic_us() + l.tick_ms * 1000;

    while (!ended(&l) || s->out_r >= 0 || s->errout_r >= 0) {
        struct pollfd p[9 + SUPERVISE_MAX_DOORS];
        int n = 0, i_out = -1, i_err = -1, i_in = -1, i_inw = -1, i_pid = -1, i_sig = -1,
            i_errp = -1, i_stat = -1, i_rep = -1, i_door = -1;
        if (s->out_r >= 0)
            p[i_out = n++] = (struct pollfd){ .fd = s->out_r, .events = POLLIN };
        if (s->errout_r >= 0)
            p[i_err = n++] = (struct pollfd){ .fd = s->errout_r, .events = POLLIN };
        if (s->in_w >= 0 && !l.in_eof && l.in_len == l.in_off)
            p[i_in = n++] = (struct pollfd){ .fd = s->call->in_fd, .events = POLLIN };
        if (s->in_w >= 0 && l.in_len > l.in_off)
            p[i_inw = n++] = (struct pollfd){ .fd = s->in_w, .events = POLLOUT };
        if (!ended(&l) && l.pidfd >= 0)
            p[i_pid = n++] = (struct pollfd){ .fd = l.pidfd, .events = POLLIN };
        if (s->sig_fd >= 0)
            p[i_sig = n++] = (struct pollfd){ .fd = s->sig_fd, .events = POLLIN };
        if (s->err_r >= 0)
            p[i_errp = n++] = (struct pollfd){ .fd = s->err_r, .events = POLLIN };
        if (s->status_r >= 0)
            p[i_stat = n++] = (struct pollfd){ .fd = s->status_r, .events = POLLIN };
        if (s->report_r >= 0)
            p[i_rep = n++] = (struct pollfd){ .fd = s->report_r, .events = POLLIN };
        i_door = n;
        for (size_t i = 0; i < s->n_doors; i++)
            p[n++] = (struct pollfd){ .fd = s->doors[i], .events = POLLIN };

        int timeout = -1;
        uint64_t now = monotonic_us();
        if (deadline && !l.killed && !ended(&l)) {
            if (now >= deadline) {
                end_run(&l, RUN_TIMEOUT);
                continue;
            }
            timeout = (int)((deadline - now + 999) / 1000);
        }
        if (l.interrupted && !l.killed && !ended(&l)) {
            if (now >= l.grace_deadline) {
                end_run(&l, RUN_KILLED);
                continue;
            }
            int left = (int)((l.grace_deadline - now + 999) / 1000);
            if (timeout < 0 || timeout > left)
                timeout = left;
        }
        if (tick && !ended(&l) && (timeout < 0 || timeout > (int)l.tick_ms))
            timeout = (int)l.tick_ms;
        if (l.pidfd < 0 && !ended(&l) && (timeout < 0 || timeout > TICK_MS))
            timeout = TICK_MS; /* no pidfd: poll for init's exit */

        int r = poll(p, (nfds_t)n, timeout);
        if (r < 0 && errno != EINTR)
            break;

        if (i_errp >= 0 && p[i_errp].revents)
            read_setup_error(&l);
        if (i_stat >= 0 && p[i_stat].revents) {
            read_command_status(&l);
            if (l.tree_gone && !l.init_done)
                tree_gone(&l, tick);
        }
        for (int i = i_door; i < n && s->n_doors; i++)
            if (p[i].revents)
                wake_gateway(s, res);
        if (i_rep >= 0 && p[i_rep].revents)
            read_reports(s, res);
        if (i_out >= 0 && p[i_out].revents)
            relay_output(&l, &s->out_r, s->call->out_fd, &res->stdout_bytes);
        if (i_err >= 0 && p[i_err].revents)
            relay_output(&l, &s->errout_r, s->call->err_fd, &res->stderr_bytes);
        if ((i_in >= 0 && p[i_in].revents) || (i_inw >= 0 && p[i_inw].revents))
            relay_input(&l, i_in >= 0 ? p[i_in].revents : 0, i_inw >= 0 ? p[i_inw].revents : 0);
        if (i_sig >= 0 && p[i_sig].revents) {
            struct signalfd_siginfo si;
            if (read(s->sig_fd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGWINCH)
                    pass_window_size(s);
                else
                    interrupt(&l, (int)si.ssi_signo);
            }
        }
        /* The cgroup's counters on each tick and once more as init ends,
         * not on every relayed chunk of output. */
        bool init_event = i_pid >= 0 && p[i_pid].revents;
        if (tick && !ended(&l) && !l.killed && (init_event || monotonic_us() >= l.next_check_us)) {
            check_polled_limits(&l);
            l.next_check_us = monotonic_us() + l.tick_ms * 1000;
        }

        if (!ended(&l) && (i_pid < 0 || p[i_pid].revents))
            reap_init(&l, i_pid >= 0);
    }
    /* What the run sent the gateway's way as it ended is answered, and reported, as ever. */
    if (door_reached(s, 0))
        wake_gateway(s, res);
    /* Output past the cap that was already written when the command ended
     * still counts: the relayed output is not all the command said. */
    if (l.output_capped && res->reason == RUN_EXITED)
        res->reason = RUN_OUTPUT_LIMIT;
    closep(&l.pidfd);
    closep(&s->tty_w);
    s->tty_w = -1;
    s->init_reaped = l.init_done;
}
