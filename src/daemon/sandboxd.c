/*
 * daemon/sandboxd.c: the sandboxd listeners (see sandboxd.h): loopback
 * addresses parsed and bound, connections accepted and their peers checked,
 * the front end's start and end with the daemon's.
 */
#include "daemon/sandboxd_int.h"

#include "common/cleanup.h"
#include "common/hostpath.h"
#include "daemon/peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/http.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

bool sandboxd_peer_allowed(struct sandboxd *sd, int fd, uid_t *uid, bool *admin)
{
    if (peer_uid(fd, uid) < 0 || !daemon_uid_allowed(sd->d, *uid))
        return false;
    *admin = daemon_is_admin(sd->d, *uid);
    return true;
}

/*
 * "HOST:PORT" ("[::1]:PORT" for IPv6) into SA. Loopback only: a peer's uid
 * is known only over loopback, and sandboxd is a pod's own API.
 */
static int parse_listen(const char *what, const char *spec, struct sockaddr_storage *sa,
                        socklen_t *len, struct cordon_err *err)
{
    char host[64];
    const char *colon = strrchr(spec, ':');
    const char *h = spec;
    size_t hl = colon ? (size_t)(colon - spec) : 0;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    char *end = NULL;
    unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
    if (!colon || !hl || hl >= sizeof host || !colon[1] || *end || port > 65535)
        return err_set(err, CORDON_E_USAGE, "%s: expected HOST:PORT, got '%s'", what, spec);
    memcpy(host, h, hl);
    host[hl] = '\0';
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    memset(sa, 0, sizeof *sa);
    struct sockaddr_in *in = (struct sockaddr_in *)sa;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        *len = sizeof *in;
        if ((ntohl(in->sin_addr.s_addr) >> 24) == 127)
            return 0;
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *len = sizeof *in6;
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
            return 0;
    } else {
        return err_set(err, CORDON_E_USAGE, "%s: '%s' is not an IP address", what, host);
    }
    return err_set(err, CORDON_E_USAGE,
                   "%s: '%s' is not a loopback address; sandboxd listens on the pod's "
                   "loopback only",
                   what, host);
}

/* A listening socket on SPEC; its bound address (a port 0 made real) into OUT. */
static int listen_on_addr(const char *what, const char *spec, char *out, size_t size,
                          struct cordon_err *err)
{
    struct sockaddr_storage sa;
    socklen_t len = 0;
    TRY(parse_listen(what, spec, &sa, &len, err));
    _cleanup_close_ int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
        return err_sys(err, CORDON_E_SETUP, "%s: cannot make a socket", what);
    if (bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, 128) < 0)
        return err_sys(err, CORDON_E_SETUP, "%s: cannot listen on '%s'", what, spec);
    len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    char ip[INET6_ADDRSTRLEN] = "";
    const void *a = sa.ss_family == AF_INET
        ? (const void *)&((struct sockaddr_in *)&sa)->sin_addr
        : (const void *)&((struct sockaddr_in6 *)&sa)->sin6_addr;
    inet_ntop(sa.ss_family, a, ip, sizeof ip);
    uint16_t port = ntohs(sa.ss_family == AF_INET ? ((struct sockaddr_in *)&sa)->sin_port
                                                  : ((struct sockaddr_in6 *)&sa)->sin6_port);
    snprintf(out, size, sa.ss_family == AF_INET ? "%s:%u" : "[%s]:%u", ip, port);
    return TAKE_FD(fd);
}

static void on_grpc_accept(evutil_socket_t lfd, short what, void *arg)
{
    (void)what;
    struct sandboxd *sd = arg;
    for (int i = 0; i < 64; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        uid_t uid = 0;
        bool admin = false;
        /* Refused before a byte is read: the peer learns only that it was closed. */
        if (sd->draining || sd->n_conns >= sd->d->cfg.max_clients ||
            !sandboxd_peer_allowed(sd, fd, &uid, &admin)) {
            sd->d->refused_peers++;
            close(fd);
            continue;
        }
        grpc_accept(sd, fd, uid, admin);
    }
}

/* The daemon's host workspace, for the files endpoints and the calls' cwd. */
static int open_workspace(const struct policy *p, struct cordon_err *err)
{
    if (!p->workspace)
        return err_set(err, CORDON_E_USAGE,
                       "serve: --sandboxd-rest serves a workspace's files: give --workspace DIR");
    return hostpath_open(AT_FDCWD, p->workspace, O_PATH | O_DIRECTORY, 0,
                         p->workspace_follow_symlinks, err);
}

int sandboxd_open(struct daemon *d, struct cordon_err *err)
{
    const struct daemon_config *cfg = &d->cfg;
    if (!cfg->sandboxd_grpc && !cfg->sandboxd_rest)
        return 0;
    if (cfg->policy->workspace_mode == POLICY_WS_OVERLAY)
        return err_set(err, CORDON_E_USAGE,
                       "serve: sandboxd writes the workspace itself: workspace.mode overlay "
                       "does not go with --sandboxd-grpc or --sandboxd-rest");
    struct sandboxd *sd = calloc(1, sizeof *sd);
    if (!sd)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    *sd = (struct sandboxd){ .d = d, .grpc_fd = -1, .root_fd = -1 };
    d->sandboxd = sd;
    if (cfg->sandboxd_rest && (sd->root_fd = open_workspace(cfg->policy, err)) < 0)
        return -1;
    if (cfg->sandboxd_grpc) {
        sd->grpc_fd = listen_on_addr("--sandboxd-grpc", cfg->sandboxd_grpc, sd->grpc_addr,
                                     sizeof sd->grpc_addr, err);
        if (sd->grpc_fd < 0)
            return -1;
        sd->grpc_ev = event_new(d->base, sd->grpc_fd, EV_READ | EV_PERSIST, on_grpc_accept, sd);
        if (!sd->grpc_ev || event_add(sd->grpc_ev, NULL) < 0)
            return err_set(err, CORDON_E_INTERNAL, "cannot set up the event loop");
    }
    if (cfg->sandboxd_rest) {
        int fd = listen_on_addr("--sandboxd-rest", cfg->sandboxd_rest, sd->rest_addr,
                                sizeof sd->rest_addr, err);
        if (fd < 0 || rest_open(sd, fd, err) < 0)
            return -1;
    }
    return 0;
}

void sandboxd_drain(struct daemon *d)
{
    struct sandboxd *sd = d->sandboxd;
    if (!sd)
        return;
    sd->draining = true;
    if (sd->grpc_ev)
        event_del(sd->grpc_ev);
}

void sandboxd_free(struct daemon *d)
{
    struct sandboxd *sd = d->sandboxd;
    if (!sd)
        return;
    grpc_close_all(sd);
    if (sd->grpc_ev)
        event_free(sd->grpc_ev);
    if (sd->grpc_fd >= 0)
        close(sd->grpc_fd);
    if (sd->http)
        evhttp_free(sd->http);
    if (sd->root_fd >= 0)
        close(sd->root_fd);
    free(sd);
    d->sandboxd = NULL;
}

json_t *sandboxd_addresses(const struct daemon *d)
{
    const struct sandboxd *sd = d->sandboxd;
    if (!sd)
        return NULL;
    return json_pack("{s:s?, s:s?}", "grpc", sd->grpc_addr[0] ? sd->grpc_addr : NULL, "rest",
                     sd->rest_addr[0] ? sd->rest_addr : NULL);
}
