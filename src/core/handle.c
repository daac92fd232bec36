/*
 * core/handle.c: a run handle (see handle.h): fork, wire pipes, run_once()
 * in the child, result back through a pipe.
 */
#include "core/handle.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "core/run.h"
#include "sandbox/backend.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void close_pair(int fds[2])
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

__attribute__((noreturn))
static void child_main(const struct policy *p, char *const *argv, const char *run_id,
                       int in_fd, int out_fd, int err_fd, int result_fd)
{
    /* The broker's other runs' pipes, its loop's and its client's descriptors
     * are not this run's: an inherited write end of another run's stdin would
     * keep that run from ever seeing its end. */
    int keep[] = { in_fd, out_fd, err_fd, result_fd };
    close_fds_except(keep, sizeof keep / sizeof keep[0]);
    /* The broker's handlers and loop are not ours: a default SIGPIPE would
     * kill the supervisor on a vanished reader, SIGTERM must reach run_once. */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    /* This process is the run's alone: its stop signals go to the command. */
    int sig_fd = signals_to_fd();
    struct sandbox_call call = {
        .argv = argv,
        .run_id = run_id,
        .in_fd = in_fd,
        .out_fd = out_fd,
        .err_fd = err_fd,
        .sig_fd = sig_fd,
    };
    struct cordon_err err = { 0 };
    struct sandbox_result res;
    run_once(p, &call, &res, &err);
    json_t *j = sandbox_result_to_json(&res, p);
    if (j) {
        json_object_set_new(j, "status", json_integer(res.status));
        char *text = json_dumps(j, JSON_COMPACT);
        if (text)
            write_all(result_fd, text, strlen(text));
        free(text);
        json_decref(j);
    }
    _exit(res.status);
}

int run_handle_start(const struct policy *p, char *const *argv, const char *run_id,
                     bool capture_stderr, struct run_handle *c, struct cordon_err *err)
{
    int in[2] = { -1, -1 }, out[2] = { -1, -1 }, errp[2] = { -1, -1 }, res[2] = { -1, -1 };
    *c = (struct run_handle){ .pid = -1, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1,
                                 .result_fd = -1 };
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(res, O_CLOEXEC) < 0 ||
        (capture_stderr && pipe2(errp, O_CLOEXEC) < 0)) {
        err_sys(err, CORDON_E_SETUP, "cannot create pipes for the sandbox");
        goto fail;
    }
    /*
     * Until the child has put SIGTERM and SIGINT back to their defaults, the
     * broker's handlers would catch a stop meant for the run (and stop the
     * broker), so the child is born with them blocked; run_once's
     * supervisor reads them from a signalfd.
     */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &old);
    pid_t pid = fork();
    if (pid != 0)
        sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot fork the sandbox supervisor");
        goto fail;
    }
    if (pid == 0) {
        close(in[1]);
        close(out[0]);
        close(res[0]);
        if (capture_stderr)
            close(errp[0]);
        child_main(p, argv, run_id, in[0], out[1], capture_stderr ? errp[1] : STDERR_FILENO,
                   res[1]);
    }
    close(in[0]);
    close(out[1]);
    close(res[1]);
    if (capture_stderr)
        close(errp[1]);
    *c = (struct run_handle){ .pid = pid, .stdin_fd = in[1], .stdout_fd = out[0],
                                 .stderr_fd = capture_stderr ? errp[0] : -1,
                                 .result_fd = res[0] };
    return 0;
fail:
    close_pair(in);
    close_pair(out);
    close_pair(errp);
    close_pair(res);
    return -1;
}

void run_handle_close(struct run_handle *c)
{
    int *fds[] = { &c->stdin_fd, &c->stdout_fd, &c->stderr_fd, &c->result_fd };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (*fds[i] >= 0) {
            close(*fds[i]);
            *fds[i] = -1;
        }
}
