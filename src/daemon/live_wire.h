/*
 * daemon/live_wire.h: the frames between the daemon and cordon-live-agent,
 * the helper that runs as a sandbox's command and starts processes in it
 * on request (daemon/live_agent.c). They travel over the run's own stdin
 * and stdout (relayed by its supervisor), so the agent needs no socket and
 * the sandbox gains no channel it did not have.
 *
 * A frame is a header and LEN bytes of payload. Each output stream has a
 * window: the agent sends at most LIVE_WINDOW bytes of a process's output
 * beyond what the daemon has credited back, so a reader that stops makes
 * the process block on its own pipe instead of making anyone buffer. The
 * agent is inside the boundary: the daemon trusts nothing it says beyond
 * the window, and drops a frame that breaks the format along with the box.
 */
#pragma once
#include <stdint.h>

#define LIVE_WIRE_VERSION 1

/* Payload bytes of one frame; a spawn may be larger (argv and environment). */
#define LIVE_MAX_FRAME (64u * 1024)
#define LIVE_MAX_SPAWN (1024u * 1024)
/* Output a process may have in flight before the daemon credits it back. */
#define LIVE_WINDOW (256u * 1024)
/* Stdin bytes the daemon may have handed the agent and not yet seen written. */
#define LIVE_STDIN_WINDOW (256u * 1024)
/* Processes at once in one box. */
#define LIVE_MAX_PROCS 64

struct live_hdr {
    uint8_t type;
    uint8_t flags;
    uint16_t pad;
    uint32_t id;  /* the process the frame is about (the daemon numbers them) */
    uint32_t len; /* payload bytes that follow */
};

enum live_type {
    /* daemon -> agent */
    LIVE_SPAWN = 1,  /* struct live_spawn, then cwd, argv and env, each NUL-ended */
    LIVE_STDIN = 2,  /* bytes for the process's stdin (its terminal's input) */
    LIVE_EOF = 3,    /* no more stdin: closed (a terminal gets its EOF character) */
    LIVE_SIGNAL = 4, /* uint32 signal, to the process group */
    LIVE_RESIZE = 5, /* uint16 cols, uint16 rows */
    LIVE_CREDIT = 6, /* uint32: that many more output bytes may be sent */
    /* agent -> daemon */
    LIVE_HELLO = 64,      /* uint32 LIVE_WIRE_VERSION: ready for spawns */
    LIVE_STARTED = 65,    /* int32 the process's pid inside */
    LIVE_FAILED = 66,     /* int32 errno, then a message: nothing started */
    LIVE_OUT = 67,        /* flags: stream (1 stdout or terminal, 2 stderr); bytes */
    LIVE_EXITED = 68,     /* int32 wait status; every output byte was sent before */
    LIVE_STDIN_ACK = 69,  /* uint32 bytes the process took */
    LIVE_STDIN_GONE = 70, /* its stdin is closed: what was not taken is dropped */
};

/* LIVE_SPAWN's fixed part. */
struct live_spawn {
    uint16_t cols, rows; /* a terminal of this size; 0, 0: pipes */
    uint32_t flags;      /* enum live_spawn_flags */
    uint32_t argc, envc; /* strings after cwd */
};

enum live_spawn_flags {
    /* argv[0] is shell text, run by sh; what it leaves of its working
     * directory and exported environment is the box's from then on */
    LIVE_SPAWN_SHELL = 1u << 0,
    /* env replaces the box's environment instead of adding to it */
    LIVE_SPAWN_CLEAR_ENV = 1u << 1,
};
