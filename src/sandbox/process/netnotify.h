/*
 * sandbox/process/netnotify.h: the process level's network boundary. With no
 * network namespace, a seccomp filter stops what a socket could reach:
 * inet sockets are TCP streams and the DNS stand-ins below (none at all
 * without the gateway), TCP Fast Open is refused, and every connect() and
 * listen() goes to the boundary's supervisor as a user notification. The supervisor decides on
 * the socket it takes from the caller (pidfd_getfd) and on its own copy of
 * the address, and acts itself: it dials the gateway and installs that
 * socket over the caller's (SECCOMP_ADDFD_FLAG_SETFD), connects a unix
 * socket only to one the run bound or the policy lists (sandbox/usock.h:
 * it sees every bind() the run makes), and refuses everything else. Where it decides, it never lets the kernel act
 * on the caller's memory after the decision, so a racing thread can change
 * nothing. SECCOMP_USER_NOTIF_FLAG_CONTINUE only passes on what the stand-ins
 * below made it see and that is not one (bind, an IP option, a receive,
 * sendto with an address on a TCP or unix socket): the kernel's own checks
 * and Landlock hold there as before, and a stand-in swapped in by another
 * thread has no inet address a datagram could go to.
 */
#pragma once
#include "sandbox/names.h"
#include "common/err.h"
#include "policy/policy.h"
#include "sandbox/door.h"
#include "sandbox/seccomp.h"
#include "sandbox/usock.h"

#include "common/relay_wire.h"

#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

/* The address the sandbox is told its proxy is at (HTTP_PROXY). */
#define NETNOTIFY_PROXY_PORT 3128

struct metanotify;

struct netnotify {
    /* The gateway, the one way out: its listener on the host's loopback, and
     * the token each connection to it opens with (the gateway refuses any
     * without: another host process's); literals go there too (door.h). */
    struct egress_door door;
    /* Transparent egress: a connect to a synthetic address (SYNTH_NET) on one
     * of these ports reaches the gateway with a relay preface naming it. */
    uint16_t ports[SYNTH_MAX_PORTS];
    size_t n_ports;
    struct usock_keeper *usock; /* the unix sockets the run may reach (the keeper's copy) */
    /* Metadata calls (chmod, chown, times, xattrs) share the listener: metanotify.h. */
    const struct metanotify *meta;
    /* So do the changes to a host workspace: names.h (NULL without one). */
    const struct names_keeper *names;
};

/*
 * DNS at the process level. The command's resolver reads the host's
 * /etc/resolv.conf and sends UDP to the host's nameserver; no datagram may
 * leave. So a UDP socket the command asks for is a stand-in the boundary's
 * supervisor makes: one end of a unix SOCK_SEQPACKET pair (boundaries kept,
 * and no inet address it could be sent to: sendto/sendmsg to one goes only
 * to the other end, the supervisor's). Connecting it (or sending with an
 * address) to port 53 makes what it sends DNS queries, which the supervisor
 * carries over a RELAY_DNS stream to the gateway's door and whose answers
 * it writes back; any other destination is refused. A receive asking for
 * the sender (glibc, musl and c-ares drop an answer not from their
 * nameserver) is answered by the supervisor with the nameserver's address;
 * so are bind, the IP-level options a resolver sets, getsockname() and
 * getpeername() (as a UDP socket's: c-ares reads them).
 */
#define NETRELAY_MAX 64   /* stand-ins alive at once */
#define NETRELAY_WAITS 16 /* blocking receives waiting for an answer */

struct netrelay_sock {
    ino_t ino;                    /* the command's end; 0: a free slot */
    int mine;                     /* the supervisor's end */
    int door;                     /* the RELAY_DNS stream, -1 until a query */
    int family;                   /* AF_INET or AF_INET6, as the command asked */
    bool dns;                     /* connected (or last sent) to a nameserver */
    struct sockaddr_storage peer; /* that nameserver: the answers' sender */
    socklen_t peer_len;
    size_t got; /* bytes of the next answer read from the door */
    unsigned char buf[2 + RELAY_DNS_MAX];
};

struct netrelay_wait {
    int fd; /* the command's end (our copy); -1: a free slot */
    struct seccomp_notif n;
    struct timespec deadline; /* SO_RCVTIMEO's; 0: none */
};

struct netrelay {
    struct netrelay_sock socks[NETRELAY_MAX];
    struct netrelay_wait waits[NETRELAY_WAITS];
};

/*
 * In the supervisor: the filter for a run with (GATEWAY) or without the
 * gateway, and the calls of a names keeper of NAMES (NAMES_OFF: none).
 */
int netnotify_program(bool gateway, enum names_mode names, struct seccomp_program *out,
                      struct cordon_err *err);

/* In the boundary's supervisor, before its loop: no stand-in yet. */
void netrelay_init(struct netrelay *r);
/* The descriptors the loop polls for R (at most NETRELAY_MAX_FDS), into P; how many. */
#define NETRELAY_MAX_FDS (2 * NETRELAY_MAX + NETRELAY_WAITS)
size_t netrelay_fds(const struct netrelay *r, struct pollfd *p);
/* After poll(): serve what P (as netrelay_fds() filled it, N entries) says is ready. */
void netrelay_serve(int listener, const struct netnotify *nn, struct netrelay *r,
                    const struct pollfd *p, size_t n);

/* In the boundary's supervisor: answer one notification on LISTENER. -1 when it is gone. */
int netnotify_serve(int listener, const struct netnotify *nn, struct netrelay *r);
