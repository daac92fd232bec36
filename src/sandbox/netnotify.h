/*
 * sandbox/netnotify.h: the process level's network boundary. With no
 * network namespace, a seccomp filter stops what a socket could reach:
 * inet sockets are TCP streams only (none at all without the gateway),
 * TCP Fast Open is refused, and every connect() and listen() goes to the
 * boundary's supervisor as a user notification. The supervisor decides on
 * the socket it takes from the caller (pidfd_getfd) and on its own copy of
 * the address, and acts itself: it dials the gateway and installs that
 * socket over the caller's (SECCOMP_ADDFD_FLAG_SETFD), connects a unix
 * socket only to a socket file beneath the run's writable trees, and
 * refuses everything else. It never lets the kernel act on the caller's
 * memory after the decision (no SECCOMP_USER_NOTIF_FLAG_CONTINUE), so a
 * racing thread can change nothing.
 */
#pragma once
#include "common/err.h"
#include "policy/policy.h"
#include "sandbox/seccomp.h"

#include <netinet/in.h>
#include <sys/types.h>
#include <stdbool.h>

/* The address the sandbox is told its proxy is at (HTTP_PROXY). */
#define NETNOTIFY_PROXY_PORT 3128

#define NETNOTIFY_MAX_ROOTS 16
/* Host sockets found in a host workspace before the run (workspace.h's cap). */
#define NETNOTIFY_MAX_HIDDEN 256

struct netnotify {
    bool gateway;               /* the gateway is the one way out */
    struct sockaddr_in gw;      /* its listener on the host's loopback */
    unsigned char token[32];    /* written first on each connection to it: the gateway
                                   refuses any without (another host process's) */
    /* Transparent egress: a connect to a synthetic address (SYNTH_NET) on one
     * of these ports reaches the gateway with a relay preface naming it. */
    uint16_t ports[SYNTH_MAX_PORTS];
    size_t n_ports;
    int roots[NETNOTIFY_MAX_ROOTS]; /* O_PATH trees whose unix sockets may be reached */
    size_t n_roots;
    char root_paths[NETNOTIFY_MAX_ROOTS][512];
    /* Sockets beneath the roots that are the host's, not the run's: the
     * namespace level masks them, so here they stay out of reach. */
    struct {
        dev_t dev;
        ino_t ino;
    } hidden[NETNOTIFY_MAX_HIDDEN];
    size_t n_hidden;
};

/* In the supervisor: the filter for a run with (GATEWAY) or without the gateway. */
int netnotify_program(bool gateway, struct seccomp_program *out, struct cordon_err *err);

/* In the boundary's supervisor: answer one notification on LISTENER. -1 when it is gone. */
int netnotify_serve(int listener, const struct netnotify *nn);
