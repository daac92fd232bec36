/*
 * common/jsonrpc.c: newline-delimited JSON-RPC over a pair of descriptors,
 * on libevent, with a cap on a message's size and back-pressure between
 * streams. Runs in the broker and the daemon, outside every sandbox: what
 * it reads is hostile (a third-party server, or a client driven by a model).
 */
#include "common/jsonrpc.h"

#include "common/cleanup.h"
#include "common/json.h"
#include "common/text.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/util.h>

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reading from a stream pauses while a stream it feeds has this much queued. */
#define THROTTLE_HIGH (1u << 20)
/* What an oversized line keeps of itself for rpc_guess_id. */
#define KEEP_HEAD 256
#define KEEP_TAIL 96
#define MAX_LINKS 2
/* While reading is paused, how often we look whether the writer has left. */
#define HUP_CHECK_MS 500

struct rpc_stream {
    struct bufferevent *in, *out;
    size_t max;
    const struct rpc_handlers *h;
    void *ctx;
    bool discarding; /* inside an oversized line, dropping it */
    bool refused;    /* ... dropping it because the budget is spent: told already */
    struct rpc_budget *budget;
    size_t charged; /* what the budget (and its parents) hold for us */
    size_t discarded;
    char head[KEEP_HEAD], tail[KEEP_TAIL];
    size_t head_len, tail_len;
    bool paused;      /* reading stopped by back-pressure */
    bool closing;     /* close the output once it drains */
    bool eof_seen;    /* the input ended */
    bool writer_gone; /* the input's writer left: read what is left, unpaused */
    struct event *hup_check;
    bool out_failed;
    struct rpc_stream *targets[MAX_LINKS]; /* streams our input feeds */
    struct rpc_stream *feeders[MAX_LINKS]; /* streams whose input feeds our output */
};

/*
 * A NUL inside a string would end it early for C code and not for the peer:
 * a path checked as "/workspace/a" could reach the server as
 * "/workspace/a\0/../../etc/passwd". Such messages are refused whole.
 */
static bool has_nul(const json_t *j, int depth)
{
    if (depth > 64)
        return false; /* jansson caps nesting well below what could hurt here */
    if (json_is_string(j))
        return strlen(json_string_value(j)) != json_string_length(j);
    const char *key;
    json_t *v;
    size_t i;
    if (json_is_object(j)) {
        json_object_foreach((json_t *)j, key, v) if (has_nul(v, depth + 1)) return true;
    } else if (json_is_array(j)) {
        json_array_foreach(j, i, v) if (has_nul(v, depth + 1)) return true;
    }
    return false;
}

enum rpc_kind rpc_classify(const json_t *msg, const char **method, json_t **id, char *why,
                           size_t len)
{
    *method = NULL;
    *id = NULL;
    if (!json_is_object(msg)) {
        snprintf(why, len, "%s",
                 json_is_array(msg) ? "batches are not supported"
                                    : "a message must be a JSON object");
        return RPC_KIND_INVALID;
    }
    json_t *idv = json_object_get(msg, "id");
    bool has_id = idv != NULL;
    bool id_ok = idv && (json_is_string(idv) || json_is_integer(idv));
    if (id_ok)
        *id = idv;
    if (has_nul(msg, 0)) {
        snprintf(why, len, "a string contains a NUL character");
        return RPC_KIND_INVALID;
    }
    json_t *version = json_object_get(msg, "jsonrpc");
    if (!json_is_string(version) || strcmp(json_string_value(version), "2.0") != 0) {
        snprintf(why, len, "\"jsonrpc\" must be \"2.0\"");
        return RPC_KIND_INVALID;
    }
    json_t *m = json_object_get(msg, "method");
    if (m) {
        if (!json_is_string(m) || json_string_length(m) == 0) {
            snprintf(why, len, "\"method\" must be a non-empty string");
            return RPC_KIND_INVALID;
        }
        json_t *params = json_object_get(msg, "params");
        if (params && !json_is_object(params) && !json_is_array(params)) {
            snprintf(why, len, "\"params\" must be an object");
            return RPC_KIND_INVALID;
        }
        if (json_object_get(msg, "result") || json_object_get(msg, "error")) {
            snprintf(why, len, "a request cannot carry \"result\" or \"error\"");
            return RPC_KIND_INVALID;
        }
        *method = json_string_value(m);
        if (!has_id)
            return RPC_KIND_NOTIFICATION;
        if (!id_ok) {
            snprintf(why, len, "a request id must be a string or an integer");
            return RPC_KIND_INVALID;
        }
        return RPC_KIND_REQUEST;
    }
    bool has_result = json_object_get(msg, "result") != NULL;
    json_t *error = json_object_get(msg, "error");
    if (has_result == (error != NULL)) {
        snprintf(why, len, "a response needs exactly one of \"result\" and \"error\"");
        return RPC_KIND_INVALID;
    }
    if (error &&
        (!json_is_object(error) || !json_is_integer(json_object_get(error, "code")) ||
         !json_is_string(json_object_get(error, "message")))) {
        snprintf(why, len, "an error needs an integer \"code\" and a string \"message\"");
        return RPC_KIND_INVALID;
    }
    if (!id_ok && !(error && json_is_null(idv))) {
        snprintf(why, len, "a response id must be a string or an integer");
        return RPC_KIND_INVALID;
    }
    return RPC_KIND_RESPONSE;
}

json_t *rpc_error(const json_t *id, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* A long name cut mid-character is not UTF-8, and jansson would give no error at all. */
    utf8_trim_partial(msg);
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                     "error", "code", code, "message", msg);
}

json_t *rpc_tool_error(const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    utf8_trim_partial(msg);
    return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", msg, "isError", 1);
}

struct event_base *rpc_event_base_new(void)
{
    struct event_config *cfg = event_config_new();
    if (!cfg)
        return NULL;
    event_config_require_features(cfg, EV_FEATURE_FDS);
    struct event_base *base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    return base;
}

json_t *rpc_result(const json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

json_t *rpc_notification(const char *method, json_t *params)
{
    if (!params)
        return json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);
    return json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params", params);
}

long long rpc_guess_id(const char *text, size_t len)
{
    long long found = -1;
    for (size_t i = 0; i + 4 < len; i++) {
        if (memcmp(text + i, "\"id\"", 4) != 0)
            continue;
        size_t j = i + 4;
        while (j < len && isspace((unsigned char)text[j]))
            j++;
        if (j >= len || text[j] != ':')
            continue;
        j++;
        while (j < len && isspace((unsigned char)text[j]))
            j++;
        long long v = 0;
        size_t digits = 0;
        while (j < len && isdigit((unsigned char)text[j]) && digits < 16) {
            v = v * 10 + (text[j] - '0');
            j++;
            digits++;
        }
        /* A number cut off by the end of the fragment is not an id we can trust. */
        if (digits && j < len && !isdigit((unsigned char)text[j]))
            found = v;
    }
    return found;
}

/* ---- reading ---- */

static bool congested(const struct rpc_stream *s)
{
    for (int i = 0; i < MAX_LINKS; i++)
        if (s->targets[i] && rpc_stream_pending_output(s->targets[i]) > THROTTLE_HIGH)
            return true;
    return false;
}

static void pause_reading(struct rpc_stream *s)
{
    s->paused = true;
    bufferevent_disable(s->in, EV_READ);
    /* Unread, the input's end would go unseen for as long as the peer we
     * wait for does not drain: a client that left would keep us forever. */
    struct timeval tv = { 0, HUP_CHECK_MS * 1000 };
    if (s->hup_check)
        evtimer_add(s->hup_check, &tv);
}

static void resume_reading(struct rpc_stream *s);

static void on_hup_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rpc_stream *s = arg;
    if (!s->paused || s->eof_seen)
        return;
    struct pollfd p = { .fd = bufferevent_getfd(s->in), .events = POLLIN | POLLRDHUP };
    if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR))) {
        /* No more can be written, so what is left is bounded: read it all. */
        s->writer_gone = true;
        resume_reading(s);
        return;
    }
    struct timeval tv = { 0, HUP_CHECK_MS * 1000 };
    evtimer_add(s->hup_check, &tv);
}

/* ---- the budget for unfinished messages ---- */

/* Would holding N bytes (instead of what we hold now) keep every level within its bound? */
static bool budget_fits(const struct rpc_stream *s, size_t n)
{
    for (const struct rpc_budget *b = s->budget; b; b = b->parent)
        if (b->used - s->charged + n > b->max)
            return false;
    return true;
}

/* We hold N bytes now. */
static void budget_set(struct rpc_stream *s, size_t n)
{
    for (struct rpc_budget *b = s->budget; b; b = b->parent)
        b->used = b->used - s->charged + n;
    s->charged = n;
}

void rpc_stream_set_budget(struct rpc_stream *s, struct rpc_budget *b)
{
    budget_set(s, 0);
    s->budget = b;
}

/* Keep the last bytes of an oversized line as they go by: the first UPTO bytes of IN. */
static void keep_tail(struct rpc_stream *s, struct evbuffer *in, size_t upto)
{
    size_t n = upto < KEEP_TAIL ? upto : KEEP_TAIL;
    if (n == 0)
        return;
    size_t keep = KEEP_TAIL - n < s->tail_len ? KEEP_TAIL - n : s->tail_len;
    memmove(s->tail, s->tail + s->tail_len - keep, keep);
    struct evbuffer_ptr at;
    evbuffer_ptr_set(in, &at, upto - n, EVBUFFER_PTR_SET);
    evbuffer_copyout_from(in, &at, s->tail + keep, n);
    s->tail_len = keep + n;
}

static void begin_discard(struct rpc_stream *s, struct evbuffer *in)
{
    budget_set(s, 0); /* drained as it arrives from now on */
    s->discarding = true;
    s->head_len = evbuffer_copyout(in, s->head, KEEP_HEAD);
    s->tail_len = 0;
    s->discarded = 0;
}

/* The oversized line is over: report its head and tail. */
static void end_discard(struct rpc_stream *s)
{
    char frag[KEEP_HEAD + 5 + KEEP_TAIL];
    size_t n = 0;
    memcpy(frag, s->head, s->head_len);
    n = s->head_len;
    memcpy(frag + n, " ... ", 5);
    n += 5;
    memcpy(frag + n, s->tail, s->tail_len);
    n += s->tail_len;
    s->discarding = false;
    if (s->refused) {
        s->refused = false; /* told when it began */
        return;
    }
    char why[96];
    snprintf(why, sizeof why, "a message longer than %zu bytes", s->max);
    s->h->garbage(s->ctx, s, frag, n, true, why);
}

static void handle_line(struct rpc_stream *s, char *line, size_t len)
{
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
        len--;
    size_t start = 0;
    while (start < len && (line[start] == ' ' || line[start] == '\t'))
        start++;
    if (start == len)
        return; /* a blank line is not a message */
    json_error_t jerr;
    /* NULs are let through the parser so rpc_classify can refuse them with the id. */
    /* Any JSON value parses, so a bare "x" is an invalid request, not a parse error. */
    json_t *msg =
        json_parse_strict(line + start, len - start, JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
    if (!msg) {
        char why[200];
        snprintf(why, sizeof why, "not JSON: %s", jerr.text);
        s->h->garbage(s->ctx, s, line + start, len - start, false, why);
        return;
    }
    s->h->message(s->ctx, s, msg);
    json_decref(msg);
}

/* The unfinished line buffered would overrun the budget: it is dropped as it comes. */
static void refuse_unfinished(struct rpc_stream *s, struct evbuffer *in)
{
    begin_discard(s, in);
    s->refused = true;
    if (s->h->over_budget)
        s->h->over_budget(s->ctx, s, s->head, s->head_len);
}

/* Every complete line in IN, until back-pressure says stop. */
static void drain_lines(struct rpc_stream *s, struct evbuffer *in)
{
    while (!s->paused) {
        struct evbuffer_ptr nl = evbuffer_search(in, "\n", 1, NULL);
        size_t avail = evbuffer_get_length(in);
        if (s->discarding) {
            size_t upto = nl.pos < 0 ? avail : (size_t)nl.pos;
            keep_tail(s, in, upto);
            s->discarded += upto;
            evbuffer_drain(in, nl.pos < 0 ? avail : upto + 1);
            if (nl.pos < 0)
                return;
            end_discard(s);
            continue;
        }
        if (nl.pos < 0) {
            if (avail > s->max) {
                begin_discard(s, in);
                continue;
            }
            if (!budget_fits(s, avail)) {
                refuse_unfinished(s, in);
                continue;
            }
            return;
        }
        if ((size_t)nl.pos > s->max) {
            begin_discard(s, in);
            continue;
        }
        size_t n = (size_t)nl.pos;
        char *line = (char *)evbuffer_pullup(in, (ev_ssize_t)n + 1);
        if (!line)
            return;
        handle_line(s, line, n);
        evbuffer_drain(in, n + 1);
        /* After the end, what is buffered is all there will be: no pause. */
        if (!s->eof_seen && !s->writer_gone && congested(s))
            pause_reading(s);
    }
}

/* Every complete line in the input, as far as it may go; what is left is charged. */
static void drain_input(struct rpc_stream *s)
{
    struct evbuffer *in = bufferevent_get_input(s->in);
    drain_lines(s, in);
    budget_set(s, s->discarding ? 0 : evbuffer_get_length(in));
}

static void on_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    drain_input(arg);
}

/* The input ended and everything before the end is handled: say so, once. */
static void finish_input(struct rpc_stream *s)
{
    struct evbuffer *in = bufferevent_get_input(s->in);
    /* A last message without its newline still counts. */
    size_t left = evbuffer_get_length(in);
    if (!s->discarding && left && left <= s->max) {
        char *line = (char *)evbuffer_pullup(in, -1);
        if (line)
            handle_line(s, line, left);
    }
    evbuffer_drain(in, evbuffer_get_length(in));
    budget_set(s, 0);
    s->h->closed(s->ctx, s, false);
}

static void on_in_event(struct bufferevent *bev, short what, void *arg)
{
    struct rpc_stream *s = arg;
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) || s->eof_seen)
        return;
    /*
     * A peer that stopped reading may never drain what it is owed, so the
     * lines already buffered (bounded: reading was paused) are handled now,
     * back-pressure or not, and then the end is told.
     */
    s->eof_seen = true;
    s->paused = false;
    bufferevent_disable(bev, EV_READ);
    drain_input(s);
    finish_input(s);
}

/* ---- writing ---- */

/* Back-pressure lifted (or no longer applies): read on, and handle what is buffered. */
static void resume_reading(struct rpc_stream *s)
{
    s->paused = false;
    if (!s->eof_seen)
        bufferevent_enable(s->in, EV_READ);
    drain_input(s);
}

static void resume_feeders(struct rpc_stream *s)
{
    for (int i = 0; i < MAX_LINKS; i++) {
        struct rpc_stream *f = s->feeders[i];
        if (f && f->paused && !congested(f))
            resume_reading(f);
    }
}

static void on_write(struct bufferevent *bev, void *arg)
{
    struct rpc_stream *s = arg;
    if (s->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        bufferevent_free(s->out);
        s->out = NULL;
        return;
    }
    resume_feeders(s);
    if (s->h->drained)
        s->h->drained(s->ctx, s);
}

static void on_out_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    struct rpc_stream *s = arg;
    if (!(what & (BEV_EVENT_ERROR | BEV_EVENT_EOF)) || s->out_failed)
        return;
    s->out_failed = true;
    bufferevent_disable(s->out, EV_WRITE);
    s->h->closed(s->ctx, s, true);
}

int rpc_send(struct rpc_stream *s, const json_t *msg)
{
    if (!s->out || s->out_failed || s->closing)
        return -1;
    _cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (!text)
        return -1;
    struct evbuffer *out = bufferevent_get_output(s->out);
    if (evbuffer_add(out, text, strlen(text)) < 0 || evbuffer_add(out, "\n", 1) < 0)
        return -1;
    return 0;
}

size_t rpc_stream_pending_output(const struct rpc_stream *s)
{
    return s->out ? evbuffer_get_length(bufferevent_get_output(s->out)) : 0;
}

void rpc_stream_close_output(struct rpc_stream *s)
{
    if (!s->out || s->closing)
        return;
    s->closing = true;
    if (evbuffer_get_length(bufferevent_get_output(s->out)) == 0) {
        bufferevent_free(s->out);
        s->out = NULL;
    }
}

void rpc_stream_throttle(struct rpc_stream *from, struct rpc_stream *to)
{
    for (int i = 0; i < MAX_LINKS; i++)
        if (!from->targets[i]) {
            from->targets[i] = to;
            break;
        }
    for (int i = 0; i < MAX_LINKS; i++)
        if (!to->feeders[i]) {
            to->feeders[i] = from;
            break;
        }
}

void rpc_stream_unthrottle(struct rpc_stream *from)
{
    for (int i = 0; i < MAX_LINKS; i++) {
        struct rpc_stream *to = from->targets[i];
        from->targets[i] = NULL;
        for (int j = 0; to && j < MAX_LINKS; j++)
            if (to->feeders[j] == from)
                to->feeders[j] = NULL;
    }
    if (from->paused)
        resume_reading(from);
}

/* ---- life ---- */

struct rpc_stream *rpc_stream_new(struct event_base *base, int in_fd, int out_fd,
                                  size_t max_message, const struct rpc_handlers *h, void *ctx,
                                  struct cordon_err *err)
{
    struct rpc_stream *s = calloc(1, sizeof *s);
    if (!s) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    s->max = max_message;
    s->h = h;
    s->ctx = ctx;
    if (in_fd >= 0) {
        evutil_make_socket_nonblocking(in_fd);
        s->in = bufferevent_socket_new(base, in_fd, BEV_OPT_CLOSE_ON_FREE);
        if (!s->in)
            goto fail;
        bufferevent_setcb(s->in, on_read, NULL, on_in_event, s);
        bufferevent_enable(s->in, EV_READ);
        s->hup_check = evtimer_new(base, on_hup_check, s);
        if (!s->hup_check)
            goto fail;
    } else {
        s->eof_seen = true;
    }
    if (out_fd >= 0) {
        evutil_make_socket_nonblocking(out_fd);
        s->out = bufferevent_socket_new(base, out_fd, BEV_OPT_CLOSE_ON_FREE);
        if (!s->out)
            goto fail;
        bufferevent_setcb(s->out, NULL, on_write, on_out_event, s);
        bufferevent_setwatermark(s->out, EV_WRITE, THROTTLE_HIGH / 2, 0);
        bufferevent_enable(s->out, EV_WRITE);
    }
    return s;
fail:
    err_set(err, CORDON_E_INTERNAL, "cannot set up a JSON-RPC stream");
    rpc_stream_free(s);
    return NULL;
}

void rpc_stream_free(struct rpc_stream *s)
{
    if (!s)
        return;
    budget_set(s, 0);
    if (s->hup_check)
        event_free(s->hup_check);
    if (s->in)
        bufferevent_free(s->in);
    if (s->out)
        bufferevent_free(s->out);
    free(s);
}
