/*
 * common/decider.c: one question to the decider, under a deadline. Runs in
 * the broker or the gateway (a supervisor-side process), never in the
 * sandbox.
 */
#include "common/decider.h"

#include "common/fds.h"
#include "common/json.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#define ANSWER_MAX 4096

struct decider {
    char *socket;
    char *command;
    uint64_t timeout_ms;
    json_t *run_allowed; /* "KIND KEY" -> true */
    json_t *session_allowed;
};

const char *decider_decision_name(enum decider_decision d)
{
    switch (d) {
    case DECIDER_DENY:
        return "deny";
    case DECIDER_ALLOW_ONCE:
        return "allow_once";
    case DECIDER_ALLOW_RUN:
        return "allow_run";
    case DECIDER_ALLOW_SESSION:
        return "allow_session";
    }
    return "deny";
}

struct decider *decider_new(const char *socket, const char *command, uint64_t timeout_ms,
                            struct cordon_err *err)
{
    struct sockaddr_un sa;
    if (!socket == !command) {
        err_set(err, CORDON_E_POLICY, "decider: give socket or command, one of the two");
        return NULL;
    }
    if (socket && strlen(socket) >= sizeof sa.sun_path) {
        err_set(err, CORDON_E_POLICY, "decider socket '%s': path too long", socket);
        return NULL;
    }
    struct decider *d = calloc(1, sizeof *d);
    if (!d || !(d->socket = strdup(socket ? socket : "")) ||
        (command && !(d->command = strdup(command))) || !(d->run_allowed = json_object()) ||
        !(d->session_allowed = json_object())) {
        decider_free(d);
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    d->timeout_ms = timeout_ms ? timeout_ms : 5000;
    return d;
}

void decider_new_run(struct decider *d)
{
    json_object_clear(d->run_allowed);
}

void decider_free(struct decider *d)
{
    if (!d)
        return;
    free(d->socket);
    free(d->command);
    json_decref(d->run_allowed);
    json_decref(d->session_allowed);
    free(d);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait for EVENTS on FD until END (monotonic ms); false at the deadline or on an error. */
static bool wait_fd(int fd, short events, uint64_t end)
{
    for (;;) {
        uint64_t now = now_ms();
        if (now >= end)
            return false;
        struct pollfd p = { .fd = fd, .events = events };
        int r = poll(&p, 1, (int)(end - now));
        if (r > 0)
            return true;
        if (r == 0 || errno != EINTR)
            return false;
    }
}

__attribute__((format(printf, 2, 3))) static int deny(struct decider_answer *a, const char *fmt,
                                                      ...)
{
    va_list ap;
    va_start(ap, fmt);
    a->decision = DECIDER_DENY;
    a->failed = true;
    vsnprintf(a->reason, sizeof a->reason, fmt, ap);
    va_end(ap);
    return -1;
}

/* One exchange; fills A (a deny with a reason on any failure). */
static int converse(int fd, bool half_close, const char *text, const char *id, uint64_t end,
                    struct decider_answer *a);

static int exchange(struct decider *d, const char *text, const char *id, uint64_t end,
                    struct decider_answer *a)
{
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    memcpy(sa.sun_path, d->socket, strlen(d->socket) + 1);
    if (fd < 0)
        return deny(a, "no socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 &&
        (errno != EAGAIN || !wait_fd(fd, POLLOUT, end)))
        return deny(a, "decider unreachable: %s", strerror(errno));
    struct ucred cred;
    socklen_t clen = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
        a->pid = cred.pid;
        a->uid = cred.uid;
    }
    return converse(fd, false, text, id, end, a);
}

/* Send TEXT on FD, read one answer line to ID from it, before END. */
static int converse(int fd, bool half_close, const char *text, const char *id, uint64_t end,
                    struct decider_answer *a)
{
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t n = send(fd, text + off, len - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
        } else if (n < 0 && errno == EAGAIN) {
            if (!wait_fd(fd, POLLOUT, end))
                return deny(a, "%s", "timeout: the decider did not take the question");
        } else if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
            /* It may have answered before it read (a command that answers
             * and exits): its answer, if any, is still there to read. */
            break;
        } else if (n < 0 && errno != EINTR) {
            return deny(a, "decider went away: %s", strerror(errno));
        }
    }
    if (half_close)
        shutdown(fd, SHUT_WR); /* the question is whole: a command sees EOF */
    char buf[ANSWER_MAX + 1] = "";
    size_t got = 0;
    char *nl = NULL;
    while (!(nl = memchr(buf, '\n', got))) {
        if (got == ANSWER_MAX)
            return deny(a, "%s", "the decider's answer is too long");
        if (!wait_fd(fd, POLLIN, end))
            return deny(a, "%s", "timeout: no answer before the deadline");
        ssize_t n = recv(fd, buf + got, ANSWER_MAX - got, 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return deny(a, "%s", "the decider closed the connection without an answer");
        if (n < 0 && errno != EINTR && errno != EAGAIN)
            return deny(a, "decider went away: %s", strerror(errno));
        if (n > 0)
            got += (size_t)n;
    }
    /* {"decision":"deny","decision":"allow_once"} is no decision: refused, so denied. */
    json_error_t je;
    json_auto_t *ans = json_parse_strict(buf, (size_t)(nl - buf), 0, &je);
    if (!ans)
        return deny(a, "the decider's answer is not a decision: %.120s", je.text);
    const char *aid = json_string_value(json_object_get(ans, "id"));
    const char *dec = json_string_value(json_object_get(ans, "decision"));
    const char *who = json_string_value(json_object_get(ans, "decider"));
    const char *why = json_string_value(json_object_get(ans, "reason"));
    snprintf(a->decider, sizeof a->decider, "%s", who ? who : "");
    if (!ans || !dec)
        return deny(a, "%s", "the decider's answer is not a decision");
    if (!aid || strcmp(aid, id) != 0)
        return deny(a, "%s", "the decider answered another question");
    for (int i = DECIDER_DENY; i <= DECIDER_ALLOW_SESSION; i++)
        if (!strcmp(dec, decider_decision_name(i))) {
            a->decision = i;
            snprintf(a->reason, sizeof a->reason, "%s", why ? why : "");
            return 0;
        }
    return deny(a, "unknown decision \"%.100s\"", dec);
}

/* The command's turn: its own process group, the question on stdin, killed at the end. */
static int exchange_command(struct decider *d, const char *text, const char *id, uint64_t end,
                            struct decider_answer *a)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return deny(a, "cannot start the decider: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return deny(a, "cannot start the decider: %s", strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(sv[1], 0);
        dup2(sv[1], 1);
        int keep[] = { 0, 1, 2 };
        close_fds_except(keep, 3);
        execl("/bin/sh", "sh", "-c", d->command, (char *)NULL);
        _exit(127);
    }
    close(sv[1]);
    a->pid = pid;
    a->uid = getuid();
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    int rc = converse(sv[0], true, text, id, end, a);
    close(sv[0]);
    /* Whatever it started goes with it: a decider does not outlive its answer. */
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    return rc;
}

void decider_ask(struct decider *d, const char *kind, const char *key, const char *run,
                 const json_t *question, struct decider_answer *a)
{
    *a = (struct decider_answer){ .decision = DECIDER_DENY };
    uint64_t start = now_ms();
    char cache_key[600];
    snprintf(cache_key, sizeof cache_key, "%s %s", kind, key);
    json_t *cached = json_object_get(d->session_allowed, cache_key);
    enum decider_decision scope = DECIDER_ALLOW_SESSION;
    if (!cached) {
        cached = json_object_get(d->run_allowed, cache_key);
        scope = DECIDER_ALLOW_RUN;
    }
    if (cached) {
        a->decision = scope;
        a->cached = true;
        snprintf(a->reason, sizeof a->reason, "%s", json_string_value(cached) ?: "");
        return;
    }
    unsigned char raw[16];
    char id[33];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        memset(raw, 0, sizeof raw);
    for (int i = 0; i < 16; i++)
        snprintf(id + 2 * i, 3, "%02x", raw[i]);
    json_auto_t *q = json_pack("{s:i, s:s, s:s, s:s, s:s?, s:I, s:O}", "cordon_decider", 1, "id",
                               id, "kind", kind, "key", key, "run", run, "deadline_ms",
                               (json_int_t)d->timeout_ms, "question", question);
    _cleanup_free_ char *text = q ? json_dumps(q, JSON_COMPACT) : NULL;
    _cleanup_free_ char *line = NULL;
    if (!text || asprintf(&line, "%s\n", text) < 0) {
        deny(a, "%s", "out of memory");
    } else {
        if (d->command)
            exchange_command(d, line, id, start + d->timeout_ms, a);
        else
            exchange(d, line, id, start + d->timeout_ms, a);
    }
    a->elapsed_ms = now_ms() - start;
    if (a->decision == DECIDER_ALLOW_RUN)
        json_object_set_new(d->run_allowed, cache_key, json_string(a->reason));
    if (a->decision == DECIDER_ALLOW_SESSION)
        json_object_set_new(d->session_allowed, cache_key, json_string(a->reason));
}

json_t *decider_answer_json(const struct decider *d, const struct decider_answer *a)
{
    return json_pack("{s:s, s:s, s:b, s:b, s:I, s:{s:s, s:s, s:I, s:I}}", "decision",
                     decider_decision_name(a->decision), "reason", a->reason, "cached", a->cached,
                     "failed", a->failed, "elapsed_ms", (json_int_t)a->elapsed_ms, "decider",
                     d->command ? "command" : "socket", d->command ? d->command : d->socket, "name",
                     a->decider, "pid", (json_int_t)a->pid, "uid", (json_int_t)a->uid);
}
