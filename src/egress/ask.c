/*
 * egress/ask.c: asking the decider about a network.ask destination without
 * stopping the gateway's loop.
 *
 * Each question is a short-lived child: it asks with common/decider.c (a
 * blocking client with a hard deadline, the same one the broker uses) and
 * writes the answer as one JSON line on a pipe the loop watches. A child,
 * not a non-blocking client in the loop, so there is one decider client
 * and one set of fail-closed rules; questions are rare (an allow_run is
 * remembered here), so a fork each is cheap. The loop keeps a backstop
 * timer past the deadline: a child that hangs or dies is a deny.
 */
#include "common/cleanup.h"
#include "common/decider.h"
#include "common/fds.h"
#include "egress/gateway_int.h"
#include "common/json.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* The child answers by the deadline itself; this is for one that cannot. */
#define ASK_GRACE_MS 1000
#define ANSWER_LINE_MAX 4096

struct asking {
    pid_t pid;
    int fd;
    struct event *ev;
    size_t len;
    char buf[ANSWER_LINE_MAX];
};

/* "HOST:PORT", what the decider's rules and the run's memory are keyed by. */
static void dest_key(const struct conn *c, char *out, size_t size)
{
    if (c->target.host.is_ip && c->target.host.ip.family == AF_INET6)
        snprintf(out, size, "[%s]:%u", c->target.host_text, c->target.port);
    else
        snprintf(out, size, "%s:%u", c->target.host_text, c->target.port);
}

static json_t *question(const struct conn *c)
{
    json_t *addrs = json_array();
    for (size_t i = 0; addrs && i < c->n_addrs; i++) {
        char text[64];
        ip_addr_format(&c->addrs[i], text, sizeof text);
        json_array_append_new(addrs, json_string(text));
    }
    return json_pack("{s:s, s:s, s:i, s:o, s:s, s:s}", "method", c->method, "host",
                     c->target.host_text, "port", (int)c->target.port, "addresses",
                     addrs ? addrs : json_null(), "scheme",
                     c->target.is_connect ? "connect" : "http", "rule", c->rule);
}

/* The child: ask, write the answer, leave (no libevent, no handlers: _exit). */
static void __attribute__((noreturn)) ask_child(const struct conn *c, int out)
{
    int keep[] = { out };
    close_fds_except(keep, 1);
    signal(SIGTERM, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    const struct gateway_config *cfg = c->gw->cfg;
    struct cordon_err err;
    struct decider *d = decider_new(cfg->decider, NULL, cfg->decider_timeout_ms, &err);
    if (!d)
        _exit(1);
    char key[320];
    dest_key(c, key, sizeof key);
    json_t *q = question(c);
    struct decider_answer a;
    decider_ask(d, "egress", key, cfg->run_id[0] ? cfg->run_id : NULL, q, &a);
    json_t *ans = decider_answer_json(d, &a);
    char *line = ans ? json_dumps(ans, JSON_COMPACT) : NULL;
    if (!line)
        _exit(1);
    size_t len = strlen(line);
    line[len] = '\n';
    (void)!write(out, line, len + 1);
    _exit(0);
}

void ask_stop(struct conn *c)
{
    struct asking *k = c->asking;
    if (!k)
        return;
    c->asking = NULL;
    if (k->ev)
        event_free(k->ev);
    if (k->fd >= 0)
        close(k->fd);
    if (k->pid > 0) {
        /* Done or not, it goes now; reaping a SIGKILLed child is immediate. */
        kill(k->pid, SIGKILL);
        while (waitpid(k->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    free(k);
}

/* The answer (or the lack of one): record it, then connect or refuse. */
static void answered(struct conn *c, json_t *ans)
{
    if (!ans)
        /* clang-format off */
        ans = json_pack("{s:s, s:s, s:b, s:b, s:{s:s}}", "decision", "deny", "reason",
                        "the decider's question ended without an answer", "cached", false,
                        "failed", true, "decider", "socket", c->gw->cfg->decider);
    /* clang-format on */
    ask_stop(c);
    const char *name = json_string_value(json_object_get(ans, "decision"));
    char why[200];
    snprintf(why, sizeof why, "%s", json_string_value(json_object_get(ans, "reason")) ?: "");
    bool failed = !json_is_false(json_object_get(ans, "failed"));
    enum decider_decision dec = DECIDER_DENY;
    for (int i = DECIDER_DENY; name && i <= DECIDER_ALLOW_SESSION; i++)
        if (strcmp(name, decider_decision_name(i)) == 0)
            dec = i;
    char key[320];
    dest_key(c, key, sizeof key);
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:o}", "event", "decider.ask", "kind",
                           "egress", "key", key, "host", c->target.host_text, "port",
                           (int)c->target.port, "rule", c->rule, "question", question(c));
    if (ev)
        json_object_update(ev, ans);
    gateway_report(c->gw, ev);
    json_decref(ans);

    struct decision d;
    if (decide_answer(&c->target, dec, failed, why, &d) < 0) {
        conn_refuse(c, d.status, d.rule, "%s", d.reason);
        return;
    }
    /* The gateway lives as long as its run: a session's allow is the run's. */
    if (dec == DECIDER_ALLOW_RUN || dec == DECIDER_ALLOW_SESSION)
        json_object_set_new(c->gw->run_allowed, key, json_true());
    snprintf(c->reason, sizeof c->reason, "%s", d.reason);
    conn_connect(c);
}

static void ask_readable(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    struct asking *k = c->asking;
    (void)what;
    ssize_t n = read(fd, k->buf + k->len, sizeof k->buf - k->len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n > 0)
        k->len += (size_t)n;
    char *nl = memchr(k->buf, '\n', k->len);
    if (nl) {
        answered(c, json_parse_strict(k->buf, (size_t)(nl - k->buf), 0, NULL));
        return;
    }
    if (n <= 0 || k->len == sizeof k->buf)
        answered(c, NULL); /* it died, or wrote more than any answer */
}

void ask_timeout(struct conn *c)
{
    answered(c,
             json_pack("{s:s, s:s, s:b, s:b, s:{s:s}}", "decision", "deny", "reason",
                       "timeout: no answer before the deadline", "cached", false, "failed", true,
                       "decider", "socket", c->gw->cfg->decider));
}

void ask_start(struct conn *c)
{
    char key[320];
    dest_key(c, key, sizeof key);
    if (json_object_get(c->gw->run_allowed, key)) {
        /* Allowed for the run already: the decider is not asked again. */
        snprintf(c->reason, sizeof c->reason, "allowed by the decider for the run (remembered)");
        conn_connect(c);
        return;
    }
    struct asking *k = calloc(1, sizeof *k);
    int p[2] = { -1, -1 };
    if (!k || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
        free(k);
        answered(c, NULL);
        return;
    }
    k->fd = p[0];
    c->asking = k;
    c->state = S_ASKING;
    k->pid = fork();
    if (k->pid == 0)
        ask_child(c, p[1]);
    close(p[1]);
    k->ev =
        k->pid > 0 ? event_new(c->gw->base, k->fd, EV_READ | EV_PERSIST, ask_readable, c) : NULL;
    if (!k->ev || event_add(k->ev, NULL) < 0) {
        answered(c, NULL);
        return;
    }
    conn_arm_timer(c, (unsigned)c->gw->cfg->decider_timeout_ms + ASK_GRACE_MS);
}
