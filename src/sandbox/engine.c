/*
 * sandbox/engine.c: the keeper of an engine's calls (see engine.h). The
 * keeper runs as a child of the level's top process (gVisor's shim,
 * microvm's shim); the engine installs the filter in its child before exec.
 */
#include "sandbox/engine.h"

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

static _Noreturn void keeper_main(const struct usock_keeper *k, const struct names_keeper *names,
                                  int sock)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    prctl(PR_SET_NAME, "cordon-engine-k", 0, 0, 0);
    int listener = recv_fd(sock); /* -1: the engine never started */
    close(sock);
    notify_sync_wakeup(listener);
    while (listener >= 0) {
        struct pollfd p = { .fd = listener, .events = POLLIN };
        if (poll(&p, 1, -1) < 0)
            continue;
        if ((p.revents & (POLLHUP | POLLERR | POLLNVAL)) ||
            usock_serve(listener, k, NULL, names) < 0)
            break; /* the engine's processes are gone */
    }
    _exit(0);
}

int engine_keeper_start(const struct usock_keeper *k, const struct names_keeper *names,
                        struct engine_keeper *u, struct cordon_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create the engine filter's socket");
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return err_sys(err, CORDON_E_SETUP, "cannot fork the engine's keeper");
    }
    if (pid == 0) {
        close(sv[1]);
        keeper_main(k, names, sv[0]);
    }
    close(sv[0]);
    u->keeper = pid;
    u->give = sv[1];
    return 0;
}

int engine_keeper_confine(const struct seccomp_program *prog, int give)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    int listener = seccomp_program_install_notifier(prog);
    if (listener < 0)
        return -1;
    int rc = send_fd(give, listener);
    close(listener);
    close(give);
    return rc;
}
