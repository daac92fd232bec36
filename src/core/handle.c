/*
 * core/handle.c: a run handle (see handle.h): fork, wire pipes, prepare
 * (now, for a pool, or once the call is in), run_call() in the child, the
 * result back through a pipe. The call crosses a socket as one JSON
 * document behind its length.
 */
#include "core/handle.h"
#include "common/json.h"

#include "common/cleanup.h"
#include "common/syscalls.h"
#include "common/fds.h"
#include "core/run.h"
#include "sandbox/backend.h"
#include "sandbox/start.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

/* The call's document: argv and environment (START_MAX_BYTES) and their JSON. */
#define MAX_CALL_JSON (START_MAX_BYTES + (4u << 20))

/* Files travel base64: the call's document must stay UTF-8. */
static json_t *files_json(const struct start_file *files, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        size_t b64_len = 4 * ((files[i].len + 2) / 3);
        char *b64 = malloc(b64_len + 1);
        if (!b64) {
            json_decref(a);
            return NULL;
        }
        EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)files[i].data,
                        (int)files[i].len);
        json_array_append_new(a,
                              json_pack("{s:s, s:i, s:s%}", "path", files[i].path, "mode",
                                        (int)files[i].mode, "b64", b64, b64_len));
        free(b64);
    }
    return a;
}

/* The files of MSG decoded into *OUT (each data malloc'd); -1 when malformed. */
static int files_of(const json_t *list, struct start_file **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!list)
        return 0;
    if (!json_is_array(list) || json_array_size(list) > START_MAX_FILES)
        return -1;
    struct start_file *f = calloc(json_array_size(list) + 1, sizeof *f);
    if (!f)
        return -1;
    *out = f;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *path = json_string_value(json_object_get(v, "path"));
        json_t *b64 = json_object_get(v, "b64");
        size_t len = json_string_length(b64);
        unsigned char *data = malloc(len / 4 * 3 + 1);
        int got = data && path && json_is_string(b64) && len % 4 == 0
            ? EVP_DecodeBlock(data, (const unsigned char *)json_string_value(b64), (int)len)
            : -1;
        if (got < 0) {
            free(data);
            return -1;
        }
        for (size_t k = len; k > 0 && json_string_value(b64)[k - 1] == '=' && got > 0; k--)
            got--;
        f[i] =
            (struct start_file){ .path = path,
                                 .data = (char *)data,
                                 .len = (size_t)got,
                                 .mode = (unsigned)json_integer_value(json_object_get(v, "mode")) };
        (*n)++;
    }
    return 0;
}

static void close_pair(int fds[2])
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

/* A JSON array of strings as a NULL-terminated vector borrowing its strings; NULL if not one. */
static const char **strings_of(const json_t *a, bool *ok)
{
    *ok = a == NULL;
    if (!a)
        return NULL;
    if (!json_is_array(a))
        return NULL;
    const char **v = calloc(json_array_size(a) + 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!(v[i] = json_string_value(json_array_get(a, i)))) {
            free(v);
            return NULL;
        }
    *ok = true;
    return v;
}

/* The call, or NULL when the caller closed the socket without one (or sent nonsense). */
static json_t *read_call(int fd)
{
    uint32_t len = 0;
    if (!read_full(fd, &len, sizeof len) || len == 0 || len > MAX_CALL_JSON)
        return NULL;
    _cleanup_free_ char *buf = malloc(len);
    if (!buf || !read_full(fd, buf, len))
        return NULL;
    return json_parse_strict(buf, len, 0, NULL);
}

/* Where the result goes, and what closes after it: the caller's answer. */
struct answer {
    const struct policy *p;
    int result_fd;
    int stdio[3]; /* the command's, on the caller's side of the pipes */
    int *layer;   /* a manual commit's layer, passed with the result's first byte */
};

/*
 * The result, as soon as run_call() has it: then every descriptor the
 * caller reads closes, so its wait ends here; the teardown that follows
 * (namespaces, cgroup, watchdog) is this process's alone.
 */
static void answer(void *arg, const struct sandbox_result *res)
{
    struct answer *a = arg;
    json_t *j = sandbox_result_to_json(res, a->p);
    if (j) {
        json_object_set_new(j, "status", json_integer(res->status));
        char *text = json_dumps(j, JSON_COMPACT);
        size_t off = 0;
        if (text && *a->layer >= 0 && send_fds(a->result_fd, text, 1, a->layer, 1) == 0)
            off = 1;
        if (text)
            write_all(a->result_fd, text + off, strlen(text) - off);
        free(text);
        json_decref(j);
    }
    for (int i = 0; i < 3; i++)
        if (a->stdio[i] != STDERR_FILENO)
            close(a->stdio[i]);
    close(a->result_fd);
}

__attribute__((noreturn)) static void child_main(const struct policy *p, bool prepare,
                                                 const struct run_lent *lent, pid_t parent,
                                                 int in_fd, int out_fd, int err_fd, int result_fd,
                                                 int ctl_fd)
{
    /* The broker's other runs' pipes, its loop's and its client's descriptors
     * are not this run's: an inherited write end of another run's stdin would
     * keep that run from ever seeing its end. */
    int keep[8] = { in_fd, out_fd, err_fd, result_fd, ctl_fd };
    size_t n_keep =
        5 + run_template_fds(lent ? lent->tmpl : NULL, keep + 5, sizeof keep / sizeof keep[0] - 5);
    close_fds_except(keep, n_keep);
    /* The broker's handlers and loop are not ours: a default SIGPIPE would
     * kill the supervisor on a vanished reader, SIGTERM must reach run_call. */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    /* This process is the run's alone: its stop signals go to the command. */
    int sig_fd = signals_to_fd();
    /* A front end killed outright stops its runs as a SIGTERM would (the
     * signalfd reads it); a waiting handle sees its socket close instead. */
    prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    if (getppid() != parent)
        _exit(125);

    struct run *run = NULL;
    struct cordon_err err = { 0 };
    if (prepare) {
        /* A failed preparation is tried again, cold, should a call come anyway. */
        char answer =
            run_prepare_ahead(p, lent, &run, &err) == 0 ? RUN_HANDLE_READY : RUN_HANDLE_FAILED;
        /* A call taken before we were ready is already in the socket, its
         * writer gone: the answer may find no reader, the call is still read. */
        (void)!send(ctl_fd, &answer, 1, MSG_NOSIGNAL);
    }
    json_t *msg = read_call(ctl_fd);
    close(ctl_fd);
    bool argv_ok = false, env_ok = false;
    const char **argv = strings_of(json_object_get(msg, "argv"), &argv_ok);
    const char **envp = strings_of(json_object_get(msg, "env"), &env_ok);
    struct start_file *files = NULL;
    size_t n_files = 0;
    if (!msg || !argv || !env_ok || files_of(json_object_get(msg, "files"), &files, &n_files) < 0) {
        /* Released without a call: nothing ran, nothing is recorded. */
        run_release(run);
        _exit(125);
    }
    struct sandbox_call call = {
        .argv = (char *const *)argv,
        .envp = (char *const *)envp,
        .run_id = json_string_value(json_object_get(msg, "run_id")),
        .wall_ms = (uint64_t)json_integer_value(json_object_get(msg, "wall_ms")),
        .session_id = json_string_value(json_object_get(msg, "session")),
        .files = files,
        .n_files = n_files,
        .in_fd = in_fd,
        .out_fd = out_fd,
        .err_fd = err_fd,
        .sig_fd = sig_fd,
        .parent = parent,
    };
    int layer = -1;
    call.keep_layer = &layer;
    struct answer a = { p, result_fd, { in_fd, out_fd, err_fd }, &layer };
    call.answer = answer;
    call.answer_arg = &a;
    struct sandbox_result res;
    err = (struct cordon_err){ 0 };
    run_call(run, p, &call, &res, &err);
    _exit(res.status);
}

static int spawn(const struct policy *p, bool prepare, const struct run_lent *lent,
                 bool capture_stderr, struct run_handle *c, struct cordon_err *err)
{
    int in[2] = { -1, -1 }, out[2] = { -1, -1 }, errp[2] = { -1, -1 }, res[2] = { -1, -1 };
    int ctl[2] = { -1, -1 };
    *c = (struct run_handle){
        .pid = -1, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .result_fd = -1, .ctl_fd = -1
    };
    /* The result's a socket: a manual commit's layer rides on its first byte. */
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, res) < 0 ||
        (capture_stderr && pipe2(errp, O_CLOEXEC) < 0) ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot create pipes for the sandbox");
        goto fail;
    }
    /* The broker's handlers must not catch a stop meant for the run (and stop
     * the broker): run_call's supervisor reads them from a signalfd. */
    pid_t parent = getpid();
    pid_t pid = fork_stops_blocked();
    if (pid < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot fork the sandbox supervisor");
        goto fail;
    }
    if (pid == 0) {
        close(in[1]);
        close(out[0]);
        close(res[0]);
        close(ctl[0]);
        if (capture_stderr)
            close(errp[0]);
        child_main(p, prepare, lent, parent, in[0], out[1],
                   capture_stderr ? errp[1] : STDERR_FILENO, res[1], ctl[1]);
    }
    close(in[0]);
    close(out[1]);
    close(res[1]);
    close(ctl[1]);
    if (capture_stderr)
        close(errp[1]);
    *c = (struct run_handle){ .pid = pid,
                              .stdin_fd = in[1],
                              .stdout_fd = out[0],
                              .stderr_fd = capture_stderr ? errp[0] : -1,
                              .result_fd = res[0],
                              .ctl_fd = ctl[0] };
    return 0;
fail:
    close_pair(in);
    close_pair(out);
    close_pair(errp);
    close_pair(res);
    close_pair(ctl);
    return -1;
}

int run_handle_spawn(const struct policy *p, bool prepare, bool capture_stderr,
                     struct run_handle *c, struct cordon_err *err)
{
    return spawn(p, prepare, NULL, capture_stderr, c, err);
}

int run_handle_spawn_ahead(const struct policy *p, const struct run_lent *lent, bool capture_stderr,
                           struct run_handle *c, struct cordon_err *err)
{
    return spawn(p, true, lent, capture_stderr, c, err);
}

static json_t *strings_json(char *const *v)
{
    json_t *a = json_array();
    for (char *const *s = v; a && s && *s; s++)
        if (json_array_append_new(a, json_string(*s)) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

int run_handle_send(struct run_handle *c, const struct run_handle_call *call,
                    struct cordon_err *err)
{
    json_t *argv = strings_json(call->argv), *env = strings_json(call->envp);
    _cleanup_(json_decrefp) json_t *msg =
        json_pack("{s:o*, s:o*, s:s?, s:I, s:s?, s:o*}", "argv", argv, "env", env, "run_id",
                  call->run_id, "wall_ms", (json_int_t)call->wall_ms, "session", call->session_id,
                  "files", call->n_files ? files_json(call->files, call->n_files) : NULL);
    _cleanup_free_ char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    if (!text)
        return err_set(err, CORDON_E_INTERNAL,
                       "cannot encode the call (not UTF-8, or out of memory)");
    size_t len = strlen(text);
    if (len > MAX_CALL_JSON)
        return err_set(err, CORDON_E_USAGE, "the call's argv and environment are too large");
    uint32_t len32 = (uint32_t)len;
    struct iovec iov[2] = { { &len32, sizeof len32 }, { text, len } };
    size_t total = sizeof len32 + len, done = 0;
    while (done < total) {
        ssize_t n = writev(c->ctl_fd, iov, 2);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot hand the call to its sandbox");
        done += (size_t)n;
        for (int i = 0; i < 2; i++) {
            size_t take = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
            iov[i].iov_base = (char *)iov[i].iov_base + take;
            iov[i].iov_len -= take;
            n -= (ssize_t)take;
        }
    }
    close(c->ctl_fd);
    c->ctl_fd = -1;
    return 0;
}

int run_handle_start(const struct policy *p, char *const *argv, const char *run_id,
                     bool capture_stderr, struct run_handle *c, struct cordon_err *err)
{
    if (run_handle_spawn(p, false, capture_stderr, c, err) < 0)
        return -1;
    struct run_handle_call call = { .argv = argv, .run_id = run_id };
    if (run_handle_send(c, &call, err) == 0)
        return 0;
    /* The child ends when its socket closes without a call. */
    run_handle_close(c);
    while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    c->pid = -1;
    return -1;
}

void run_handle_close(struct run_handle *c)
{
    int *fds[] = { &c->stdin_fd, &c->stdout_fd, &c->stderr_fd, &c->result_fd, &c->ctl_fd };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (*fds[i] >= 0) {
            close(*fds[i]);
            *fds[i] = -1;
        }
}
