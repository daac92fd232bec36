/*
 * daemon/sandboxd_grpc.c: gRPC over HTTP/2 (nghttp2) on the daemon's loop,
 * as much of it as sandboxd's ProcessService needs: unary and
 * server-streaming calls, one request message each, no compression, status
 * in trailers (or a trailers-only answer). A call's answer is held back by
 * the peer's own flow control: what it does not read stays queued here and
 * counts as the call's backlog, which holds its process back
 * (sandboxd_process.c).
 */
#include "daemon/sandboxd_int.h"

#include "daemon/live.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SERVICE_PREFIX "/process.v1.ProcessService/"

/*
 * Bytes queued to a peer beyond which its connection is not read until it
 * takes them: every frame nghttp2 answers (PING, SETTINGS) is queued here,
 * and a peer that sends them without reading would grow the queue without
 * end. Its calls' output is held back long before (LIVE_BACKLOG).
 */
#define CONN_OUT_MAX (1u << 20)

struct h2stream {
    struct h2stream *next;
    struct h2conn *conn;
    int32_t id;
    struct grpc_call call;
    char method[40]; /* past SERVICE_PREFIX; "" when the path is another */
    bool post, grpc_type, other_path;
    struct evbuffer *in;
    bool answered;  /* dispatched, or refused before it */
    bool finished;  /* the service said its status */
    bool head_sent; /* response HEADERS submitted (with a body to follow) */
    struct evbuffer *out;
    int status;
    char message[256];
};

struct h2conn {
    struct h2conn *next;
    struct sandboxd *sd;
    struct bufferevent *bev;
    nghttp2_session *ng;
    uid_t uid;
    bool admin;
    struct h2stream *streams;
    unsigned depth; /* inside nghttp2's own callbacks: no session_send now */
    struct event *reap;
};

/* ---- streams ---- */

static struct h2stream *stream_new(struct h2conn *c, int32_t id)
{
    struct h2stream *s = calloc(1, sizeof *s);
    if (!s || !(s->in = evbuffer_new()) || !(s->out = evbuffer_new())) {
        if (s && s->in)
            evbuffer_free(s->in);
        free(s);
        return NULL;
    }
    s->conn = c;
    s->id = id;
    s->call = (struct grpc_call){ .conn = c, .sd = c->sd, .uid = c->uid, .admin = c->admin };
    s->next = c->streams;
    c->streams = s;
    return s;
}

/* The stream is gone; a call its service has not finished hears it was cancelled. */
static void stream_free(struct h2stream *s)
{
    if (s->answered && !s->finished && s->call.cancelled) {
        s->finished = true;
        s->call.cancelled(&s->call);
    }
    for (struct h2stream **pp = &s->conn->streams; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    evbuffer_free(s->in);
    evbuffer_free(s->out);
    free(s);
}

/* ---- the connection ---- */

static void conn_free(struct h2conn *c)
{
    struct sandboxd *sd = c->sd;
    while (c->streams) {
        nghttp2_session_set_stream_user_data(c->ng, c->streams->id, NULL);
        stream_free(c->streams);
    }
    nghttp2_session_del(c->ng);
    bufferevent_free(c->bev);
    event_free(c->reap);
    for (struct h2conn **pp = &sd->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            sd->n_conns--;
            break;
        }
    free(c);
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_free(arg);
}

/* Send what nghttp2 has; a session with nothing left to do is closed (from the loop). */
static void conn_flush(struct h2conn *c)
{
    if (c->depth)
        return; /* the caller's nghttp2 call sends when it returns */
    if (nghttp2_session_send(c->ng) != 0 ||
        (!nghttp2_session_want_read(c->ng) && !nghttp2_session_want_write(c->ng) &&
         evbuffer_get_length(bufferevent_get_output(c->bev)) == 0))
        event_active(c->reap, EV_TIMEOUT, 0);
}

static ssize_t on_send(nghttp2_session *ng, const uint8_t *data, size_t len, int flags, void *arg)
{
    (void)ng;
    (void)flags;
    struct h2conn *c = arg;
    if (bufferevent_write(c->bev, data, len) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return (ssize_t)len;
}

/* ---- answers ---- */

/* grpc-message: percent-encoded outside printable ASCII (and '%' itself). */
static void encode_message(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && n + 4 < size; p++) {
        if (*p >= 0x20 && *p < 0x7f && *p != '%')
            out[n++] = (char)*p;
        else
            n += (size_t)snprintf(out + n, size - n, "%%%02X", *p);
    }
    out[n] = '\0';
}

#define NV(name, value)                                                         \
    {                                                                           \
        (uint8_t *)(name), (uint8_t *)(value), sizeof(name) - 1, strlen(value), \
            NGHTTP2_NV_FLAG_NO_COPY_NAME                                        \
    }

static void submit_status(struct h2stream *s, bool trailers_only)
{
    char code[16], msg[3 * sizeof s->message + 1];
    snprintf(code, sizeof code, "%d", s->status);
    encode_message(s->message, msg, sizeof msg);
    nghttp2_nv nva[] = { NV(":status", "200"), NV("content-type", "application/grpc"),
                         NV("grpc-status", code), NV("grpc-message", msg) };
    size_t n = sizeof nva / sizeof nva[0] - (msg[0] ? 0 : 1);
    if (trailers_only)
        nghttp2_submit_response(s->conn->ng, s->id, nva, n, NULL);
    else
        nghttp2_submit_trailer(s->conn->ng, s->id, nva + 2, n - 2);
}

static ssize_t read_out(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *src, void *arg)
{
    (void)ng;
    (void)id;
    (void)arg;
    struct h2stream *s = src->ptr;
    int n = evbuffer_remove(s->out, buf, length);
    if (n < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (evbuffer_get_length(s->out) == 0 && s->finished) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        submit_status(s, false);
        return n;
    }
    return n ? n : NGHTTP2_ERR_DEFERRED;
}

static struct h2stream *stream_of(struct grpc_call *call)
{
    return (struct h2stream *)((char *)call - offsetof(struct h2stream, call));
}

static void start_body(struct h2stream *s)
{
    if (s->head_sent)
        return;
    nghttp2_nv nva[] = { NV(":status", "200"), NV("content-type", "application/grpc") };
    nghttp2_data_provider prd = { .source.ptr = s, .read_callback = read_out };
    nghttp2_submit_response(s->conn->ng, s->id, nva, 2, &prd);
    s->head_sent = true;
}

void grpc_send(struct grpc_call *call, const void *msg, size_t len)
{
    struct h2stream *s = stream_of(call);
    uint8_t prefix[5] = { 0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                          (uint8_t)len };
    start_body(s);
    evbuffer_add(s->out, prefix, sizeof prefix);
    evbuffer_add(s->out, msg, len);
    nghttp2_session_resume_data(s->conn->ng, s->id);
    conn_flush(s->conn);
}

__attribute__((format(printf, 3, 0))) static void vfinish(struct h2stream *s,
                                                          enum grpc_status status, const char *fmt,
                                                          va_list ap)
{
    s->finished = true;
    s->status = (int)status;
    s->message[0] = '\0';
    if (fmt)
        vsnprintf(s->message, sizeof s->message, fmt, ap);
    if (s->head_sent)
        nghttp2_session_resume_data(s->conn->ng, s->id);
    else
        submit_status(s, true);
    conn_flush(s->conn);
}

void grpc_finish(struct grpc_call *call, enum grpc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfinish(stream_of(call), status, status == GRPC_OK ? NULL : fmt, ap);
    va_end(ap);
}

static void refuse(struct h2stream *s, enum grpc_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(struct h2stream *s, enum grpc_status status, const char *fmt, ...)
{
    s->answered = true;
    va_list ap;
    va_start(ap, fmt);
    vfinish(s, status, fmt, ap);
    va_end(ap);
}

/* Not gRPC at the HTTP level: a plain HTTP status, no grpc-status. */
static void refuse_http(struct h2stream *s, const char *status)
{
    nghttp2_nv nva[] = { NV(":status", status) };
    s->answered = s->finished = true;
    nghttp2_submit_response(s->conn->ng, s->id, nva, 1, NULL);
}

size_t grpc_backlog(const struct grpc_call *call)
{
    const struct h2stream *s = stream_of((struct grpc_call *)call);
    return evbuffer_get_length(s->out) + evbuffer_get_length(bufferevent_get_output(s->conn->bev));
}

/* ---- requests ---- */

static void dispatch(struct h2stream *s)
{
    if (!s->post) {
        refuse_http(s, "405");
        return;
    }
    if (!s->grpc_type) {
        refuse_http(s, "415");
        return;
    }
    if (s->other_path || !process_service_knows(s->method)) {
        refuse(s, GRPC_UNIMPLEMENTED,
               "unknown method; this server has %sStart, Execute, "
               "WriteStdin, SendSignal and ResizeTTY",
               SERVICE_PREFIX);
        return;
    }
    size_t n = evbuffer_get_length(s->in);
    const uint8_t *b = evbuffer_pullup(s->in, -1);
    if (n < 5) {
        refuse(s, GRPC_INVALID_ARGUMENT, "the request has no message");
        return;
    }
    uint32_t len = (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4];
    if (b[0] & 1) {
        refuse(s, GRPC_UNIMPLEMENTED, "compressed messages are not accepted");
        return;
    }
    if (b[0] || (size_t)len + 5 != n) {
        refuse(s, GRPC_INVALID_ARGUMENT, "the request must be exactly one message");
        return;
    }
    s->answered = true;
    process_service(&s->call, s->method, b + 5, len);
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *arg)
{
    struct h2conn *c = arg;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct h2stream *s = stream_new(c, frame->hd.stream_id);
    if (!s)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    nghttp2_session_set_stream_user_data(ng, frame->hd.stream_id, s);
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *arg)
{
    (void)flags;
    (void)arg;
    struct h2stream *s = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
    if (!s || frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
        s->post = valuelen == 4 && memcmp(value, "POST", 4) == 0;
    } else if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
        size_t pl = sizeof SERVICE_PREFIX - 1;
        s->other_path = valuelen <= pl || valuelen - pl >= sizeof s->method ||
            memcmp(value, SERVICE_PREFIX, pl) != 0;
        if (!s->other_path) {
            memcpy(s->method, value + pl, valuelen - pl);
            s->method[valuelen - pl] = '\0';
        }
    } else if (namelen == 12 && memcmp(name, "content-type", 12) == 0) {
        /* application/grpc, or application/grpc+proto (or ;params) */
        s->grpc_type = valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
            (valuelen == 16 || value[16] == '+' || value[16] == ';');
    }
    return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *arg)
{
    (void)flags;
    (void)arg;
    struct h2stream *s = nghttp2_session_get_stream_user_data(ng, id);
    if (!s || s->answered)
        return 0;
    if (evbuffer_get_length(s->in) + len > SBX_MAX_MESSAGE + 5) {
        evbuffer_drain(s->in, evbuffer_get_length(s->in));
        refuse(s, GRPC_RESOURCE_EXHAUSTED, "a request message is at most %u bytes",
               SBX_MAX_MESSAGE);
        return 0;
    }
    evbuffer_add(s->in, data, len);
    return 0;
}

static int on_frame(nghttp2_session *ng, const nghttp2_frame *frame, void *arg)
{
    (void)arg;
    if ((frame->hd.type != NGHTTP2_DATA && frame->hd.type != NGHTTP2_HEADERS) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    struct h2stream *s = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
    if (s && !s->answered)
        dispatch(s);
    return 0;
}

static int on_close(nghttp2_session *ng, int32_t id, uint32_t code, void *arg)
{
    (void)code;
    (void)arg;
    struct h2stream *s = nghttp2_session_get_stream_user_data(ng, id);
    if (s) {
        nghttp2_session_set_stream_user_data(ng, id, NULL);
        stream_free(s);
    }
    return 0;
}

/* ---- the socket ---- */

static void on_read(struct bufferevent *bev, void *arg)
{
    struct h2conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t n = evbuffer_get_length(in);
    c->depth++;
    ssize_t used = nghttp2_session_mem_recv(c->ng, evbuffer_pullup(in, -1), n);
    c->depth--;
    /* Not HTTP/2 at all, or a protocol error: GOAWAY, and what follows is dropped. */
    if (used < 0)
        nghttp2_session_terminate_session(c->ng, NGHTTP2_PROTOCOL_ERROR);
    evbuffer_drain(in, used < 0 ? n : (size_t)used);
    conn_flush(c);
    if (evbuffer_get_length(bufferevent_get_output(bev)) > CONN_OUT_MAX)
        bufferevent_disable(bev, EV_READ);
}

/* All queued bytes went out: calls held back for this peer may go on. */
static void on_write(struct bufferevent *bev, void *arg)
{
    struct h2conn *c = arg;
    bufferevent_enable(bev, EV_READ);
    for (struct h2stream *s = c->streams; s; s = s->next)
        if (s->answered && !s->finished && s->call.ctx)
            lproc_drained(c->sd->d, s->call.ctx);
    conn_flush(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        conn_free(arg);
}

void grpc_accept(struct sandboxd *sd, int fd, uid_t uid, bool admin)
{
    struct h2conn *c = calloc(1, sizeof *c);
    nghttp2_session_callbacks *cbs = NULL;
    if (!c || nghttp2_session_callbacks_new(&cbs) != 0) {
        free(c);
        close(fd);
        return;
    }
    nghttp2_session_callbacks_set_send_callback(cbs, on_send);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
    *c = (struct h2conn){ .sd = sd, .uid = uid, .admin = admin };
    c->bev = bufferevent_socket_new(sd->d->base, fd, BEV_OPT_CLOSE_ON_FREE);
    c->reap = evtimer_new(sd->d->base, on_reap, c);
    int rc = c->bev && c->reap ? nghttp2_session_server_new(&c->ng, cbs, c) : -1;
    nghttp2_session_callbacks_del(cbs);
    /* Few streams and small headers: a pod's agent, not a browser. */
    nghttp2_settings_entry settings[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 64 },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384 },
    };
    if (rc != 0 || nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, settings, 2) != 0) {
        if (c->ng)
            nghttp2_session_del(c->ng);
        if (c->reap)
            event_free(c->reap);
        if (c->bev)
            bufferevent_free(c->bev);
        else
            close(fd);
        free(c);
        return;
    }
    c->next = sd->conns;
    sd->conns = c;
    sd->n_conns++;
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    conn_flush(c);
}

void grpc_close_all(struct sandboxd *sd)
{
    while (sd->conns)
        conn_free(sd->conns);
}
