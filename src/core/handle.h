/*
 * core/handle.h: a run handle, a sandboxed run in a child process, so an
 * event loop (the MCP broker and server, the daemon's jobs) goes on while it
 * runs. The child is a plain fork of the caller with pipes for the command's
 * stdio. It either prepares the run at once and waits for its call (a pooled
 * handle: the boundary is built before anyone asks), or waits for the call
 * and then prepares; either way it runs the call with run_call() (which
 * supervises the sandbox, records the audit run and cleans up).
 */
#pragma once
#include "common/err.h"
#include "policy/policy.h"
#include "sandbox/start.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct run_lent;

struct run_handle {
    pid_t pid;     /* the supervisor: signal it to stop the run (SIGTERM, then SIGKILL) */
    int stdin_fd;  /* write end of the command's stdin; close it for EOF */
    int stdout_fd; /* read end of the command's stdout */
    int stderr_fd; /* read end of its stderr, or -1 when it goes to ours */
    int result_fd; /* read end: the run's result JSON (the --result form), then EOF */
    int ctl_fd;    /* the call goes here; a pooled handle first answers one byte:
                         'R' prepared, 'F' its preparation failed. Close it to
                         release a handle that never got a call */
};

/* What a call brings to a handle; everything is copied. */
struct run_handle_call {
    char *const *argv;
    char *const *envp;              /* NAME=VALUE added to the run's environment, or NULL */
    const char *run_id;             /* 32 hex digits, or NULL */
    uint64_t wall_ms;               /* 0: the policy's */
    const char *session_id;         /* for the audit record, or NULL */
    const struct start_file *files; /* placed in /workspace first */
    size_t n_files;
};

/* A pooled handle's answers on ctl_fd. */
#define RUN_HANDLE_READY 'R'
#define RUN_HANDLE_FAILED 'F'

/*
 * Fork a handle under P. With PREPARE the child builds the boundary now
 * (run_prepare) and reports on ctl_fd; otherwise it waits for the call
 * first. With CAPTURE_STDERR the command's stderr comes back through
 * stderr_fd, otherwise it goes to the caller's own stderr. Every descriptor
 * is close-on-exec and blocking; the caller owns them and must reap PID.
 * The child dies (ending its run) with the caller.
 */
int run_handle_spawn(const struct policy *p, bool prepare, bool capture_stderr,
                     struct run_handle *c, struct cordon_err *err);

/* run_handle_spawn() with PREPARE, using what LENT lends (core/run.h; may be NULL). */
int run_handle_spawn_ahead(const struct policy *p, const struct run_lent *lent, bool capture_stderr,
                           struct run_handle *c, struct cordon_err *err);

/* Hand CALL to a spawned handle. -1 with ERR when the handle is gone. */
int run_handle_send(struct run_handle *c, const struct run_handle_call *call,
                    struct cordon_err *err);

/* run_handle_spawn() without PREPARE and run_handle_send() of ARGV and RUN_ID. */
int run_handle_start(const struct policy *p, char *const *argv, const char *run_id,
                     bool capture_stderr, struct run_handle *c, struct cordon_err *err);

/* Close what is still open of C's descriptors. */
void run_handle_close(struct run_handle *c);
