/*
 * daemon/sandboxd_process.c: process.v1.ProcessService (proto/process/v1/
 * process.proto) over the daemon's processes (daemon/live.h): Start and
 * Execute each start one process in a fresh sandbox of its own on the
 * daemon's workspace, under the daemon's policy and audit; WriteStdin,
 * SendSignal and ResizeTTY act on one by its number, which only the uid
 * that started it (or an --admin-uid) can name. A call whose peer goes away
 * before its process ended has that process killed: nobody could read it.
 */
#include "daemon/sandboxd_int.h"

#include "common/protowire.h"
#include "common/text.h"
#include "common/strv.h"
#include "daemon/live.h"

#include <event2/buffer.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Execute answers in one message, which a gRPC client takes up to 4 MiB of. */
#define EXECUTE_OUTPUT_MAX ((4u << 20) - (64u << 10))

struct sbx_proc {
    struct grpc_call *call; /* NULL once the call is over */
    struct lproc *p;        /* NULL once it ended */
    bool execute;
    struct evbuffer *out, *err; /* Execute's output, answered at the end */
};

bool process_service_knows(const char *method)
{
    static const char *const methods[] = { "Start", "Execute", "WriteStdin", "SendSignal",
                                           "ResizeTTY" };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(method, methods[i]) == 0)
            return true;
    return false;
}

/* ---- requests ---- */

static bool is_text(const struct pb_field *f)
{
    /* proto3's string is UTF-8; a C string holds no NUL. */
    if (f->wire != PB_LEN || memchr(f->data, '\0', f->len))
        return false;
    for (size_t i = 0, k; i < f->len; i += k)
        if (!(k = utf8_decode((const char *)f->data + i, f->len - i, NULL)))
            return false;
    return true;
}

/* A map<string, string> entry as NAME=VALUE. */
static char *env_entry(const struct pb_field *entry, char *why, size_t len)
{
    struct pb_reader r = pb_reader(entry->data, entry->len);
    struct pb_field f, key = { 0 }, val = { 0 };
    int rc;
    while ((rc = pb_next(&r, &f)) > 0) {
        if (f.num > 2)
            continue; /* unknown: skipped, as proto3 says */
        if (!is_text(&f))
            break; /* refused below: rc is still 1 */
        *(f.num == 1 ? &key : &val) = f;
    }
    if (rc != 0 || !key.len || memchr(key.data, '=', key.len)) {
        why_printf(why, len, "%s",
                   "env_vars: each name must be a non-empty UTF-8 string without "
                   "'=' or NUL, each value a UTF-8 string without NUL");
        return NULL;
    }
    char *out = NULL;
    if (asprintf(&out, "%.*s=%.*s", (int)key.len, (const char *)key.data, (int)val.len,
                 val.len ? (const char *)val.data : "") < 0)
        return NULL;
    return out;
}

static int add_str(char ***v, size_t *n, char *s)
{
    char **grown = s ? realloc(*v, (*n + 2) * sizeof **v) : NULL;
    if (!grown) {
        free(s);
        return -1;
    }
    grown[(*n)++] = s;
    grown[*n] = NULL;
    *v = grown;
    return 0;
}

/* ProcessConfig into R; a cwd outside /workspace sets *DENIED. */
static int parse_config(const uint8_t *data, size_t size, struct lproc_req *r, bool *denied,
                        char *why, size_t len)
{
    struct pb_reader rd = pb_reader(data, size);
    struct pb_field f;
    size_t argc = 0, envc = 0;
    int rc;
    while ((rc = pb_next(&rd, &f)) > 0) {
        if (f.num == 1) {
            if (!is_text(&f))
                return why_printf(why, len, "%s",
                                  "command: each word must be a UTF-8 string "
                                  "without NUL");
            if (!argc && !f.len)
                return why_printf(why, len, "%s", "command: the program to run is empty");
            if (add_str(&r->argv, &argc, strndup((const char *)f.data, f.len)) < 0)
                return why_printf(why, len, "%s", "out of memory");
        } else if (f.num == 2) {
            if (f.wire != PB_LEN)
                return why_printf(why, len, "%s", "env_vars: malformed entry");
            char *e = env_entry(&f, why, len);
            if (!e || add_str(&r->envp, &envc, e) < 0)
                return -1;
        } else if (f.num == 3) {
            if (!is_text(&f) || f.len >= 4096)
                return why_printf(why, len, "%s", "cwd: must be a UTF-8 string without NUL");
            char cwd[4096];
            memcpy(cwd, f.data, f.len);
            cwd[f.len] = '\0';
            if (lproc_parse_cwd(cwd, r->cwd, sizeof r->cwd, why, len) < 0) {
                *denied = true;
                return -1;
            }
        }
    }
    if (rc < 0)
        return why_printf(why, len, "%s", "malformed ProcessConfig");
    if (!argc)
        return why_printf(why, len, "%s", "command: at least the program to run is needed");
    return 0;
}

/* StartRequest (PTY_OK) or ExecuteRequest into R. */
static int parse_start(const uint8_t *msg, size_t size, bool pty_ok, struct lproc_req *r,
                       bool *denied, char *why, size_t len)
{
    struct pb_reader rd = pb_reader(msg, size);
    struct pb_field f;
    bool config = false;
    int rc;
    while ((rc = pb_next(&rd, &f)) > 0) {
        if (f.num == 1 && f.wire == PB_LEN) {
            TRY(parse_config(f.data, f.len, r, denied, why, len));
            config = true;
        } else if (f.num == 2 && pty_ok && f.wire == PB_LEN) {
            struct pb_reader pr = pb_reader(f.data, f.len);
            struct pb_field g;
            uint64_t cols = 0, rows = 0;
            while ((rc = pb_next(&pr, &g)) > 0)
                if (g.wire == PB_VARINT && (g.num == 1 || g.num == 2))
                    *(g.num == 1 ? &cols : &rows) = g.varint;
            if (rc < 0 || !cols || !rows || cols > 65535 || rows > 65535)
                return why_printf(why, len, "%s", "pty: cols and rows must each be 1 to 65535");
            r->cols = (uint16_t)cols;
            r->rows = (uint16_t)rows;
        } else if (f.num <= 2) {
            rc = -1;
            break;
        }
    }
    if (rc < 0)
        return why_printf(why, len, "%s", "malformed request message");
    if (!config)
        return why_printf(why, len, "%s", "config: the process to run is missing");
    return 0;
}

/* ---- a call's process ---- */

static void sp_free(struct sbx_proc *sp)
{
    if (sp->out)
        evbuffer_free(sp->out);
    if (sp->err)
        evbuffer_free(sp->err);
    free(sp);
}

static void send_event(struct sbx_proc *sp, uint32_t field, const void *data, size_t len)
{
    struct pb_writer w = { 0 };
    pb_put_bytes(&w, field, data, len);
    if (!w.failed)
        grpc_send(sp->call, w.buf, w.len);
    pb_writer_release(&w);
}

static void on_output(void *ctx, struct lproc *p, int stream, const char *data, size_t len)
{
    (void)p;
    struct sbx_proc *sp = ctx;
    if (sp->execute)
        evbuffer_add(stream == 2 ? sp->err : sp->out, data, len);
    else
        send_event(sp, stream == 2 ? 3 : 2, data, len);
}

/* The exit code a shell would show: a signal's as 128+N, a start that failed as 126/127. */
static int32_t exit_code(const struct lproc *p)
{
    if (p->has_status)
        return WIFEXITED(p->wstatus) ? WEXITSTATUS(p->wstatus) : 128 + WTERMSIG(p->wstatus);
    if (p->reason && strcmp(p->reason, "start_failed") == 0)
        return strstr(p->error, "No such file") ? 127 : 126;
    return -1;
}

static void on_ended(void *ctx, struct lproc *p)
{
    struct sbx_proc *sp = ctx;
    sp->p = NULL;
    if (!sp->call) {
        sp_free(sp);
        return;
    }
    /* Why it ended, where nothing else says it: on stderr, as a shell would. */
    char note[320] = "";
    if (p->error[0])
        snprintf(note, sizeof note, "cordon: %s\n", p->error);
    else if (p->reason && strcmp(p->reason, "exited") != 0)
        snprintf(note, sizeof note, "cordon: the process ended: %s\n", p->reason);
    struct pb_writer w = { 0 };
    if (sp->execute) {
        evbuffer_add(sp->err, note, strlen(note));
        pb_put_int32(&w, 1, exit_code(p));
        pb_put_bytes(&w, 2, evbuffer_pullup(sp->out, -1), evbuffer_get_length(sp->out));
        pb_put_bytes(&w, 3, evbuffer_pullup(sp->err, -1), evbuffer_get_length(sp->err));
    } else {
        if (note[0])
            send_event(sp, 3, note, strlen(note));
        struct pb_writer e = { 0 };
        pb_put_int32(&e, 1, exit_code(p));
        pb_put_bytes(&w, 4, e.buf, e.len);
        w.failed |= e.failed;
        pb_writer_release(&e);
    }
    if (w.failed) {
        grpc_finish(sp->call, GRPC_INTERNAL, "out of memory");
    } else {
        grpc_send(sp->call, w.buf, w.len);
        grpc_finish(sp->call, GRPC_OK, NULL);
    }
    pb_writer_release(&w);
    sp_free(sp);
}

static size_t on_backlog(void *ctx)
{
    const struct sbx_proc *sp = ctx;
    return sp->call && !sp->execute ? grpc_backlog(sp->call) : 0;
}

/* The peer went away first: its process is killed, the record ends as killed. */
static void on_cancelled(struct grpc_call *call)
{
    struct sbx_proc *sp = call->ctx;
    struct lproc *p = sp->p;
    sp_free(sp);
    if (!p)
        return;
    lproc_attach(p, NULL);
    struct cordon_err ignored = { 0 };
    if (!p->reason)
        p->reason = "killed";
    lproc_signal(p, SIGKILL, call->uid, &ignored);
}

static enum grpc_status status_of(const struct cordon_err *e)
{
    if (strncmp(e->msg, "busy:", 5) == 0)
        return GRPC_RESOURCE_EXHAUSTED;
    if (e->kind == CORDON_E_POLICY)
        return GRPC_PERMISSION_DENIED;
    if (e->kind == CORDON_E_USAGE || e->kind == CORDON_E_NOTFOUND ||
        e->kind == CORDON_E_UNSUPPORTED)
        return GRPC_FAILED_PRECONDITION;
    return GRPC_INTERNAL;
}

static void start(struct grpc_call *call, const uint8_t *msg, size_t len, bool execute)
{
    struct daemon *d = call->sd->d;
    struct lproc_req r = { 0 };
    char why[256];
    bool denied = false;
    if (d->draining) {
        grpc_finish(call, GRPC_UNAVAILABLE, "the daemon is shutting down");
        return;
    }
    if (parse_start(msg, len, !execute, &r, &denied, why, sizeof why) < 0) {
        lproc_req_release(&r);
        grpc_finish(call, denied ? GRPC_PERMISSION_DENIED : GRPC_INVALID_ARGUMENT, "%s", why);
        return;
    }
    struct sbx_proc *sp = calloc(1, sizeof *sp);
    if (!sp || (execute && (!(sp->out = evbuffer_new()) || !(sp->err = evbuffer_new())))) {
        if (sp)
            sp_free(sp);
        lproc_req_release(&r);
        grpc_finish(call, GRPC_INTERNAL, "out of memory");
        return;
    }
    sp->call = call;
    sp->execute = execute;
    struct lproc_sink sink = {
        .output = on_output, .ended = on_ended, .backlog = on_backlog, .ctx = sp
    };
    struct cordon_err err = { 0 };
    struct lproc *p = lproc_start(d, call->uid, NULL, &r, &sink, &err);
    lproc_req_release(&r);
    if (!p) {
        sp_free(sp);
        grpc_finish(call, status_of(&err), "%s", err.msg);
        return;
    }
    sp->p = p;
    if (execute && (!p->limit || p->limit > EXECUTE_OUTPUT_MAX))
        p->limit = EXECUTE_OUTPUT_MAX;
    call->ctx = sp;
    call->cancelled = on_cancelled;
    if (!execute) {
        struct pb_writer init = { 0 }, w = { 0 };
        pb_put_int32(&init, 1, p->num);
        pb_put_bytes(&w, 1, init.buf, init.len);
        if (!init.failed && !w.failed)
            grpc_send(call, w.buf, w.len);
        pb_writer_release(&init);
        pb_writer_release(&w);
    }
}

/* ---- acting on a process ---- */

/* The varint fields 1..3 of a small request; -1 when malformed. */
static int parse_small(const uint8_t *msg, size_t len, uint64_t v[4], struct pb_field *bytes,
                       bool *eof)
{
    struct pb_reader r = pb_reader(msg, len);
    struct pb_field f;
    int rc;
    while ((rc = pb_next(&r, &f)) > 0) {
        if (f.num <= 3 && f.wire == PB_VARINT)
            v[f.num] = f.varint;
        else if (bytes && f.num == 2 && f.wire == PB_LEN)
            *bytes = f;
        else if (eof && f.num == 3 && f.wire == PB_LEN)
            *eof = true;
        else if (f.num <= 3)
            return -1;
    }
    return rc;
}

static struct lproc *find(struct grpc_call *call, uint64_t num)
{
    if (num == 0 || num > INT32_MAX)
        return NULL;
    return lproc_find(call->sd->d, call->uid, call->admin, NULL, (int32_t)num);
}

static void act(struct grpc_call *call, const char *method, const uint8_t *msg, size_t len)
{
    uint64_t v[4] = { 0 };
    struct pb_field input = { 0 };
    bool eof = false;
    bool stdin_call = strcmp(method, "WriteStdin") == 0;
    if (parse_small(msg, len, v, stdin_call ? &input : NULL, stdin_call ? &eof : NULL) < 0) {
        grpc_finish(call, GRPC_INVALID_ARGUMENT, "malformed %sRequest", method);
        return;
    }
    struct lproc *p = find(call, v[1]);
    /* Another uid's process is answered as one that never was. */
    if (!p) {
        grpc_finish(call, GRPC_NOT_FOUND, "no process %llu", (unsigned long long)v[1]);
        return;
    }
    struct cordon_err err = { 0 };
    int rc = 0;
    if (stdin_call) {
        if (!input.data && !eof) {
            grpc_finish(call, GRPC_INVALID_ARGUMENT, "WriteStdin needs input or eof");
            return;
        }
        rc = lproc_write(p, (const char *)input.data, input.len, eof, &err);
    } else if (strcmp(method, "SendSignal") == 0) {
        int sig = (int)v[2];
        if (sig != SIGINT && sig != SIGKILL && sig != SIGTERM && sig != SIGHUP) {
            grpc_finish(call, GRPC_INVALID_ARGUMENT,
                        "signal: SIGINT (2), SIGKILL (9), SIGTERM (15) or SIGHUP (1), got %llu",
                        (unsigned long long)v[2]);
            return;
        }
        rc = lproc_signal(p, sig, call->uid, &err);
    } else {
        if (!v[2] || !v[3] || v[2] > 65535 || v[3] > 65535) {
            grpc_finish(call, GRPC_INVALID_ARGUMENT, "cols and rows must each be 1 to 65535");
            return;
        }
        rc = lproc_resize(p, (uint16_t)v[2], (uint16_t)v[3], &err);
    }
    if (rc < 0) {
        grpc_finish(call, status_of(&err), "%s", err.msg);
        return;
    }
    grpc_send(call, "", 0); /* the empty answer message */
    grpc_finish(call, GRPC_OK, NULL);
}

void process_service(struct grpc_call *call, const char *method, const uint8_t *msg, size_t len)
{
    if (strcmp(method, "Start") == 0 || strcmp(method, "Execute") == 0) {
        start(call, msg, len, method[0] == 'E');
        return;
    }
    /* The answer is empty: the call is answered with its status alone. */
    act(call, method, msg, len);
}
