/*
 * sandbox/usock.h: unix sockets, reached by path only through a keeper.
 *
 * A read-only bind does not stop connect(), and Landlock has no right for
 * it, so a host directory bound into a run (a workspace, --ro $HOME, --ro
 * /run) would hand in every live host socket in it: ssh-agent, docker,
 * D-Bus, and any that appears later. So a pathname connect() is never the
 * kernel's to make for the command. It goes to a keeper as a seccomp user
 * notification; the keeper reads the address once, resolves the path
 * itself (as the caller would, from the caller's working directory, but no
 * magic link of /proc), and connects the caller's own socket object (taken
 * with pidfd_getfd, so its options, flags and name stay) through a
 * descriptor of the file it found (/proc/self/fd/N): no link, rename or
 * racing thread can move the connect after the check. It connects only
 *   - a socket the run made: bound in the run's own network namespace
 *     (namespace level), or bound by the run, as the keeper saw its bind()
 *     (process level, which shares the host's network namespace), found
 *     by the file's device and inode in the kernel's sock_diag table;
 *   - a socket the policy lists (filesystem.unix_sockets), by its inode.
 * Everything else is EACCES, and the host's listener sees nothing.
 *
 * The keeper makes every connect() it is sent, unix or inet, and never lets
 * the kernel run one (SECCOMP_USER_NOTIF_FLAG_CONTINUE): another thread
 * could swap a unix socket into the descriptor, or a path into the
 * address, between the check and the kernel's own reading.
 *
 * Unix datagram sockets are refused at socket() and socketpair() by the
 * shared allowlist: every send on one may name an address, and a send
 * cannot be mediated without the keeper making every send of the run
 * (the same swap would turn a send it let pass into one to a host socket).
 * Streams refuse an address on send, and a seqpacket socket ignores it, so
 * connect() is the one place a unix socket picks its peer by path.
 */
#pragma once
#include "common/err.h"
#include "sandbox/seccomp.h"

#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

struct names_keeper;

struct policy;
struct egress_door;

#define USOCK_MAX_LISTED 16
#define USOCK_MAX_BOUND 1024

struct usock_keeper {
    /* The run has a network namespace of its own, the keeper's: every unix
     * socket in it is the run's (its abstract ones too). */
    bool own_netns;
    /* The keeper serves gVisor's own processes (its gofer), never the
     * command, whose calls its Sentry serves: a path resolves in the
     * caller's root, only a listed socket (the gateway's door among them)
     * is reached, and an abstract name is runsc's own. */
    bool gofer;
    struct {
        dev_t dev;
        ino_t ino;
    } listed[USOCK_MAX_LISTED]; /* filesystem.unix_sockets, opened at prepare */
    size_t n_listed;
    /* Without one (process level): the sockfs inodes of the sockets the run bound. */
    ino_t bound[USOCK_MAX_BOUND];
    size_t n_bound;
};

/*
 * In the supervisor: K for P's run, OWN_NETNS as above. Each socket
 * P lists must be one now (125 otherwise, naming it).
 */
int usock_keeper_init(struct usock_keeper *k, const struct policy *p, bool own_netns,
                      struct cordon_err *err);

/* Add the socket file FD to K's listed ones (a door of cordon's own). */
int usock_keeper_list(struct usock_keeper *k, int fd, struct cordon_err *err);

/* In the keeper: the run bound SOCK (our copy), so its name is the run's. */
void usock_note_bind(struct usock_keeper *k, int sock);

/*
 * In the keeper: connect SOCK (our copy of thread TID's unix socket) to UN
 * (LEN bytes, read once from the caller) if K allows it. 0, or the errno
 * the caller gets.
 */
int usock_connect(const struct usock_keeper *k, int sock, pid_t tid, const struct sockaddr_un *un,
                  socklen_t len);

/*
 * In the keeper of names_program()'s filter (the namespace level's init,
 * runsc's keeper): answer one notification on LISTENER, a connect() as K
 * allows (with DOOR, a TCP connect to a literal address goes by it: door.h),
 * a name made as NAMES (may be NULL) says (names.h). -1 when it is gone.
 */
int usock_serve(int listener, const struct usock_keeper *k, const struct egress_door *door,
                const struct names_keeper *names);
