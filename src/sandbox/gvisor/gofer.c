/*
 * sandbox/gvisor/gofer.c: the host sockets runsc's gofer may reach. With
 * --host-uds=open (the gateway's door is a unix socket, and the policy may
 * list host sockets), the gofer connects the sandbox to any host socket in
 * any of its mounts: a --ro $HOME would hand in ssh-agent, and a socket
 * made there later too. runsc has no per-mount setting for it, so runsc
 * run's tree (gofer and Sentry) is started under a filter that sends every
 * connect() to a keeper of ours, a child of the shim (sandbox/usock.h):
 * a path resolves in the caller's root and reaches only the door and the
 * listed sockets, by inode; runsc's own abstract names pass. The command's
 * own calls never reach it: the Sentry serves them (ptrace platform).
 */
#include "sandbox/gvisor/gvisor.h"

#include "common/fds.h"
#include "common/syscalls.h"
#include "sandbox/notify.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static _Noreturn void keeper_main(const struct usock_keeper *k, int sock)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    prctl(PR_SET_NAME, "cordon-gofer-uds", 0, 0, 0);
    int listener = recv_fd(sock); /* -1: runsc never started */
    close(sock);
    notify_sync_wakeup(listener);
    while (listener >= 0) {
        struct pollfd p = { .fd = listener, .events = POLLIN };
        if (poll(&p, 1, -1) < 0)
            continue;
        if ((p.revents & (POLLHUP | POLLERR | POLLNVAL)) || usock_serve(listener, k, NULL) < 0)
            break; /* runsc's processes are gone */
    }
    _exit(0);
}

int gvisor_uds_start(const struct usock_keeper *k, struct gvisor_uds *u, struct cordon_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot create the gofer filter's socket");
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot fork the gofer's keeper");
    }
    if (pid == 0) {
        close(sv[1]);
        keeper_main(k, sv[0]);
    }
    close(sv[0]);
    u->keeper = pid;
    u->give = sv[1];
    return 0;
}

int gvisor_uds_confine(const struct seccomp_program *prog, int give)
{
    struct sock_fprog fprog = { .len = prog->len, .filter = prog->filter };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    int listener = sys_seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fprog);
    if (listener < 0)
        return -1;
    int rc = send_fd(give, listener);
    close(listener);
    close(give);
    return rc;
}
