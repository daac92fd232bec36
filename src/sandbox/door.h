/*
 * sandbox/door.h: a keeper hands a connection to the gateway's door. Where a
 * keeper makes the command's connect() calls (seccomp user notifications:
 * the namespace level's init, the process level's supervisor), a TCP
 * connect to an address the client named itself, not a name the DNS stub
 * gave out, goes to the gateway when a rule could allow it: the keeper dials
 * the door, opens with a relay preface naming the address (common/
 * relay_wire.h), and installs that connection over the caller's socket. So
 * node's fetch, Go or a JVM reach an allowed literal (203.0.113.5, a host
 * port on 127.0.0.1) as they reach an allowed name, through the same checks
 * (address classes, budgets, the record). A literal no rule allows is
 * refused (ECONNREFUSED) and told to the gateway the same way, which records
 * it and says so; the run's own loopback (namespace level) stays its own.
 * Runs in the keeper.
 */
#pragma once
#include "common/relay_wire.h"
#include "policy/rules.h"

#include <linux/seccomp.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

struct egress_door {
    bool on;                 /* a gateway serves the run */
    struct sockaddr_in addr; /* its door: 127.0.0.1:3128 inside, or the host's port */
    bool token_set;          /* each connection opens with TOKEN (the host's loopback) */
    unsigned char token[32];
    const struct egress_rules *rules; /* the policy's (the keeper is a fork: the same address) */
    bool own_loopback;                /* loopback is the run's own (not the host's) */
};

/* The relay preface naming A's address and port (IPv4 for an IPv4-mapped one) into OUT; its
 * length, 0 for no inet address. */
size_t door_preface(const struct sockaddr_storage *a, socklen_t len,
                    unsigned char out[RELAY_PREFACE_MAX]);

/*
 * A fresh connection to the door with the token and PREFACE (PLEN bytes)
 * written, blocking; the wait for it bounded (the keeper serves one call at
 * a time). -1 when the door does not answer.
 */
int door_dial(const struct egress_door *d, const void *preface, size_t plen);

/*
 * Put S (a connection to the door) in place of the caller's socket THEIRS
 * (its blocking mode, Nagle and keepalive as the caller set them) and answer
 * notification N: its connect() succeeded.
 */
int door_install(int listener, const struct seccomp_notif *n, int theirs, int s);

/*
 * The caller's TCP connect of THEIRS to A, a literal address: handed to the
 * gateway (installed, answered), refused (told to the gateway, answered
 * ECONNREFUSED), or left to the kernel: 1 when N was answered, 0 when the
 * keeper makes the connect itself (the run's own loopback, the synthetic
 * range, no gateway), -1 when LISTENER is broken.
 */
int door_connect(const struct egress_door *d, int listener, const struct seccomp_notif *n,
                 int theirs, const struct sockaddr_storage *a, socklen_t len);
