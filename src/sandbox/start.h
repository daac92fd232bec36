/*
 * sandbox/start.h: the start seam. A prepared boundary is built from the
 * policy alone and blocks on a start socket (bubblewrap's --block-fd, crun's
 * exec.fifo); only then does it receive what the call brings: argv, the
 * environment and the three stdio descriptors. The supervisor sends; the
 * boundary receives into memory of its own, allocating nothing on the heap.
 */
#pragma once
#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>

/* argv and environment, their strings together, at most this large. */
#define START_MAX_BYTES (16u << 20)

/* The call's files, placed in the workspace before the command starts. */
#define START_MAX_FILES 1024

struct start_file {
    const char *path; /* relative to the workspace, checked by the front end */
    const char *data;
    size_t len;
    unsigned mode; /* permission bits; 0: as the command makes its own (0666 less its umask) */
};

struct start_message {
    char **argv; /* NULL-terminated, in a private mapping */
    char **envp;
    int stdio[3]; /* stdin, stdout, stderr: received descriptors */
    int files;    /* a sealed memfd of the call's files, or -1 */
    bool tty;     /* the command gets a terminal of the sandbox's own instead
                      (start_terminal_send), stdio[] is then unused */
};

/* In the boundary, before it blocks: one byte saying the boundary is built. */
int start_ready_send(int sock);

/* In the supervisor: wait for that byte; -1 when the boundary died first. */
int start_ready_wait(int sock);

/* In the supervisor: send ARGV, ENVP, STDIO and the N FILES over SOCK; TTY asks for a terminal. */
int start_message_send(int sock, char *const *argv, char *const *envp, const int stdio[3],
                       const struct start_file *files, size_t n, bool tty, struct cordon_err *err);

/*
 * In the boundary, as the sandbox user, before the command starts: write
 * M's files under the directory DIR, the workspace (parents made 0755),
 * never through a link; closes M->files. 0, or -1 with ERR. Every backend
 * calls it after start_message_recv().
 */
int start_place_files(struct start_message *m, const char *dir, struct cordon_err *err);

/*
 * In the boundary: block until the message arrives. -1 when the socket
 * closes first (the run was released without starting) or the message is
 * malformed; nothing is left open then.
 */
int start_message_recv(int sock, struct start_message *m);

/*
 * A terminal for the command, from the sandbox's own devpts: in the
 * boundary, open a pty, send its master back over SOCK and return the
 * slave (-1 with ERR). The host's terminal never enters the sandbox.
 */
int start_terminal_send(int sock, struct cordon_err *err);

/* In the supervisor: the master start_terminal_send() sent, or -1. */
int start_terminal_recv(int sock);
