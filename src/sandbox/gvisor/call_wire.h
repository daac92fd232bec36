/*
 * sandbox/gvisor/call_wire.h: the call channel between the shim (on the
 * host, gvisor.c) and the helper's caller (inside gVisor, init.c). The
 * caller dials the shim's socket before the helper says it is ready, and
 * is the only one ever to: the shim takes the connection that says hello
 * and removes the socket. A call then costs a fork and exec inside the booted sandbox,
 * not a `runsc exec`.
 *
 * Every record is a struct call_record; CALL_RUN and CALL_ERROR are
 * followed by LEN bytes.
 *
 *   shim -> caller  CALL_RUN     value: argc, len: the payload's size; the
 *                                payload is argc NUL-ended arguments, then
 *                                the environment's NUL-ended entries. Sent
 *                                with SCM_RIGHTS: stdin, stdout, stderr and,
 *                                when value2 is 1, the call's files (a memfd,
 *                                start_files.h)
 *                   CALL_SIGNAL  value: a signal for the command
 *   caller -> shim  CALL_HELLO   the channel's first record, written by init
 *                                right after its dial succeeded, before it
 *                                says ready: of the connections the shim
 *                                finds waiting then, the one that carries
 *                                it is the caller's (a dial the gofer's
 *                                connect() lost to a signal and retried
 *                                leaves a dead one behind)
 *                   CALL_STARTED value: the command's pid (inside), sent
 *                                before it may exec: from here on the
 *                                channel's end is the command's
 *                   CALL_RUNNING it exec'd (its setup errors are over)
 *                   CALL_ERROR   len bytes: why the call could not start
 *                                (before CALL_STARTED, or between it and
 *                                CALL_RUNNING: the exec failed); value: a
 *                                CALL_FAILED_* kind
 *                   CALL_EXIT    value: the command's wait status
 */
#pragma once

#include <stdint.h>

/* The policy's seccomp program, which the caller installs in the command. */
#define BPF_PATH "/.cordon/seccomp.bpf"
#define CALL_DIR "/.cordon/ctl"
#define CALL_SOCK CALL_DIR "/call.sock"
/* The largest CALL_RUN payload: the start message's own (START_MAX_BYTES). */
#define CALL_PAYLOAD_MAX (16u << 20)
#define CALL_ERROR_MAX 512u

enum call_kind {
    CALL_RUN = 'C',
    CALL_SIGNAL = 'K',
    CALL_HELLO = 'H',
    CALL_STARTED = 'S',
    CALL_RUNNING = 'R',
    CALL_ERROR = 'E',
    CALL_EXIT = 'X',
};

/* CALL_ERROR's kinds: what failed, told as the other levels tell it. */
enum call_failure {
    CALL_FAILED_SETUP = 0,    /* the helper's own ("gvisor: ..."), status 125 */
    CALL_FAILED_NOTFOUND = 1, /* the command not found, status 127 */
    CALL_FAILED_NOEXEC = 2,   /* not executable, status 126 */
    CALL_FAILED_CALL = 3,     /* the call's own (its files, its exec): status 125 */
};

struct call_record {
    uint32_t kind;
    int32_t value;
    int32_t value2;
    uint32_t len;
};
