/*
 * core/handle.h: a run handle, a sandboxed run in a child process, so an
 * event loop (the MCP broker and server, the daemon's jobs) goes on while it
 * runs. The child is a plain fork of the caller that calls run_once() (which
 * supervises the sandbox, records the audit run and cleans up) with pipes
 * for the command's stdio.
 */
#pragma once
#include "common/err.h"
#include "policy/policy.h"

#include <stdbool.h>
#include <sys/types.h>

struct run_handle {
    pid_t pid;        /* the supervisor: signal it to stop the run (SIGTERM, then SIGKILL) */
    int stdin_fd;     /* write end of the command's stdin; close it for EOF */
    int stdout_fd;    /* read end of the command's stdout */
    int stderr_fd;    /* read end of its stderr, or -1 when it goes to ours */
    int result_fd;    /* read end: the run's result JSON (the --result form), then EOF */
};

/*
 * Start ARGV under P. RUN_ID (32 hex digits, or NULL) names the run in the
 * audit log. With CAPTURE_STDERR the command's stderr comes back through
 * stderr_fd, otherwise it goes to the broker's own stderr. All four
 * descriptors are close-on-exec and blocking; the caller owns them and must
 * reap PID.
 */
int run_handle_start(const struct policy *p, char *const *argv, const char *run_id,
                     bool capture_stderr, struct run_handle *c, struct cordon_err *err);

/* Close what is still open of C's descriptors. */
void run_handle_close(struct run_handle *c);
