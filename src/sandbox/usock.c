/*
 * sandbox/usock.c: unix sockets reached by path only through a keeper (see
 * usock.h). usock_keeper_init() runs in the supervisor (names_program()
 * builds the filter); the rest in a keeper: the sandbox's init at the
 * namespace level, the process level's keeper process, runsc's keeper.
 * Nothing here allocates after the plan.
 */
#include "sandbox/usock.h"

#include "sandbox/door.h"

#include "common/cleanup.h"
#include "common/hostpath.h"
#include "common/syscalls.h"
#include "policy/policy.h"
#include "sandbox/names.h"
#include "sandbox/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <unistd.h>

/*
 * The keeper answers one notification at a time and must stay free to end
 * the run: a blocking connect it makes waits at most this long (a listener
 * that never accepts), unless the caller set a send timeout of its own.
 */
#define CONNECT_WAIT_MS 5000

int usock_keeper_init(struct usock_keeper *k, const struct policy *p, bool own_netns,
                      struct cordon_err *err)
{
    memset(k, 0, sizeof *k);
    k->own_netns = own_netns;
    for (size_t i = 0; i < p->n_unix_sockets; i++) {
        const char *path = p->unix_sockets[i];
        if (k->n_listed == USOCK_MAX_LISTED)
            return err_set(err, CORDON_E_POLICY, "filesystem.unix_sockets: more than %d sockets",
                           USOCK_MAX_LISTED);
        _cleanup_close_ int fd = hostpath_open(AT_FDCWD, path, O_PATH, 0, false, err);
        if (fd < 0)
            return err_prefix(err, "filesystem.unix_sockets");
        struct stat st;
        if (fstat(fd, &st) < 0)
            return err_sys(err, CORDON_E_SETUP, "filesystem.unix_sockets: cannot stat '%s'", path);
        if (!S_ISSOCK(st.st_mode))
            return err_set(err, CORDON_E_POLICY,
                           "filesystem.unix_sockets: '%s' is not a unix socket", path);
        k->listed[k->n_listed].dev = st.st_dev;
        k->listed[k->n_listed++].ino = st.st_ino;
    }
    return 0;
}

int usock_keeper_list(struct usock_keeper *k, int fd, struct cordon_err *err)
{
    struct stat st;
    if (k->n_listed == USOCK_MAX_LISTED)
        return err_set(err, CORDON_E_POLICY, "filesystem.unix_sockets: more than %d sockets",
                       USOCK_MAX_LISTED - 1);
    if (fstat(fd, &st) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot stat a socket of the run's");
    k->listed[k->n_listed].dev = st.st_dev;
    k->listed[k->n_listed++].ino = st.st_ino;
    return 0;
}

/* ---- the kernel's table of unix sockets (sock_diag) ---- */

/* The userspace form of a superblock's dev_t as sock_diag gives it (MKDEV: 12:20 bits). */
static dev_t kernel_dev(uint32_t kdev)
{
    return makedev(kdev >> 20, kdev & 0xfffff);
}

/* The UNIX_DIAG_VFS attribute of M, or NULL. */
static const struct unix_diag_vfs *vfs_of(const struct nlmsghdr *h)
{
    const struct unix_diag_msg *m = NLMSG_DATA(h);
    size_t left = h->nlmsg_len - NLMSG_LENGTH(sizeof *m);
    const struct nlattr *a = (const void *)(m + 1);
    while (left >= sizeof *a && a->nla_len >= sizeof *a && a->nla_len <= left) {
        if (a->nla_type == UNIX_DIAG_VFS && a->nla_len >= NLA_HDRLEN + sizeof(struct unix_diag_vfs))
            return (const void *)((const char *)a + NLA_HDRLEN);
        size_t step = NLA_ALIGN(a->nla_len);
        if (step >= left)
            break;
        left -= step;
        a = (const void *)((const char *)a + step);
    }
    return NULL;
}

/*
 * Each unix socket of the keeper's network namespace, to EACH(CTX, its
 * sockfs inode, its file's UNIX_DIAG_VFS or NULL): 0 once all were seen,
 * -1 when the table cannot be read (the callers fail closed then).
 */
static int each_socket(void (*each)(void *ctx, ino_t sock, const struct unix_diag_vfs *vfs),
                       void *ctx)
{
    _cleanup_close_ int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0)
        return -1;
    struct {
        struct nlmsghdr h;
        struct unix_diag_req r;
    } q = {
        .h = { .nlmsg_len = sizeof q,
               .nlmsg_type = SOCK_DIAG_BY_FAMILY,
               .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
        .r = { .sdiag_family = AF_UNIX, .udiag_states = ~0u, .udiag_show = UDIAG_SHOW_VFS },
    };
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    if (sendto(nl, &q, sizeof q, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0)
        return -1;
    for (;;) {
        long buf[8192 / sizeof(long)];
        ssize_t n = recv(nl, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type == NLMSG_DONE)
                return 0;
            if (h->nlmsg_type == NLMSG_ERROR)
                return -1;
            if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
                h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct unix_diag_msg)))
                each(ctx, ((const struct unix_diag_msg *)NLMSG_DATA(h))->udiag_ino, vfs_of(h));
        }
    }
}

struct find_bound {
    const struct usock_keeper *k;
    dev_t dev;
    ino_t ino;
    bool ours; /* a socket of the run's is bound there */
};

/*
 * Every socket with the file's name: the listener, and each connection it
 * accepted (they share its name). sock_diag gives the file's inode in 32
 * bits: compared in 32 bits.
 */
static void match_file(void *ctx, ino_t sock, const struct unix_diag_vfs *vfs)
{
    struct find_bound *f = ctx;
    if (!vfs || vfs->udiag_vfs_ino != (uint32_t)f->ino || kernel_dev(vfs->udiag_vfs_dev) != f->dev)
        return;
    if (f->k->own_netns)
        f->ours = true; /* the namespace holds none but the run's */
    for (size_t i = 0; i < f->k->n_bound && !f->ours; i++)
        f->ours = f->k->bound[i] == sock;
}

/* Is the socket file ST one the run may reach? */
static bool allowed(const struct usock_keeper *k, const struct stat *st)
{
    for (size_t i = 0; i < k->n_listed; i++)
        if (k->listed[i].dev == st->st_dev && k->listed[i].ino == st->st_ino)
            return true;
    if (k->gofer)
        return false;
    /* None of ours bound there: a host socket, or a stale file. */
    struct find_bound f = { k, st->st_dev, st->st_ino, false };
    return each_socket(match_file, &f) == 0 && f.ours;
}

/* The top bit of a recorded inode marks it open while the bound set is pruned. */
#define MARK ((ino_t)1 << (sizeof(ino_t) * 8 - 1))

static void mark_open(void *ctx, ino_t sock, const struct unix_diag_vfs *vfs)
{
    struct usock_keeper *k = ctx;
    (void)vfs;
    for (size_t i = 0; i < k->n_bound; i++)
        if ((k->bound[i] & ~MARK) == sock)
            k->bound[i] |= MARK;
}

void usock_note_bind(struct usock_keeper *k, int sock)
{
    struct stat st;
    int domain = 0;
    socklen_t len = sizeof domain;
    if (k->own_netns || fstat(sock, &st) < 0 ||
        getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0 || domain != AF_UNIX)
        return;
    for (size_t i = 0; i < k->n_bound; i++)
        if (k->bound[i] == st.st_ino)
            return;
    if (k->n_bound == USOCK_MAX_BOUND) {
        /* Full: keep those still open, once per so many binds. */
        if (each_socket(mark_open, k) == 0) {
            size_t keep = 0;
            for (size_t i = 0; i < k->n_bound; i++)
                if (k->bound[i] & MARK)
                    k->bound[keep++] = k->bound[i] & ~MARK;
            k->n_bound = keep;
        }
        for (size_t i = 0; i < k->n_bound; i++)
            k->bound[i] &= ~MARK;
        if (k->n_bound == USOCK_MAX_BOUND) {
            /* The oldest goes: its name can no longer be reached (closed). */
            memmove(k->bound, k->bound + 1, (USOCK_MAX_BOUND - 1) * sizeof k->bound[0]);
            k->n_bound--;
        }
    }
    k->bound[k->n_bound++] = st.st_ino;
}

/* ---- connecting ---- */

/*
 * connect() of SOCK to A as the keeper, with every signal held off (a
 * child's end must not cut it short) and a blocking wait bounded.
 */
static int connect_bounded(int sock, const struct sockaddr *a, socklen_t len)
{
    struct timeval saved = { 0 }, wait = { CONNECT_WAIT_MS / 1000, 0 };
    socklen_t tl = sizeof saved;
    int fl = fcntl(sock, F_GETFL);
    bool timed = fl >= 0 && !(fl & O_NONBLOCK) &&
        getsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &saved, &tl) == 0 && !saved.tv_sec &&
        !saved.tv_usec && setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof wait) == 0;
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    int rc = connect(sock, a, len) < 0 ? errno : 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (timed)
        setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &saved, sizeof saved);
    /* Our own timeout ran out (a stream's EAGAIN, a TCP connect's EINPROGRESS). */
    return timed && (rc == EAGAIN || rc == EINPROGRESS) ? ETIMEDOUT : rc;
}

/*
 * The file a connect to PATH (of thread TID) would reach, as an O_PATH
 * descriptor; -errno. IN_ROOT: in TID's own root (gVisor's gofer has one
 * of its own), else in the keeper's, which is the caller's.
 */
static int resolve(pid_t tid, const char *path, bool in_root)
{
    _cleanup_close_ int at = -1;
    if (path[0] != '/' || in_root) {
        char link[64];
        snprintf(link, sizeof link, "/proc/%d/%s", (int)tid, path[0] == '/' ? "root" : "cwd");
        at = open(link, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (at < 0)
            return -EACCES;
    }
    /* As the kernel would, links followed, but no magic link of /proc
     * (/proc/self/root, /proc/PID/cwd): those name the keeper's view. */
    struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                            .resolve = RESOLVE_NO_MAGICLINKS | (in_root ? RESOLVE_IN_ROOT : 0) };
    int fd = sys_openat2(at >= 0 ? at : AT_FDCWD, path, &how, sizeof how);
    if (fd >= 0)
        return fd;
    if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == ENAMETOOLONG)
        return -errno;
    return -EACCES;
}

int usock_connect(const struct usock_keeper *k, int sock, pid_t tid, const struct sockaddr_un *un,
                  socklen_t len)
{
    if (len <= offsetof(struct sockaddr_un, sun_path))
        return EINVAL;
    size_t plen = len - offsetof(struct sockaddr_un, sun_path);
    if (plen > sizeof un->sun_path)
        plen = sizeof un->sun_path;
    if (un->sun_path[0] == '\0') {
        /* Abstract: scoped by the network namespace, where the run has its own
         * (runsc's own control socket, for its processes). */
        if (!k->own_netns && !k->gofer)
            return EPERM;
        return connect_bounded(sock, (const struct sockaddr *)un, len);
    }
    char path[sizeof un->sun_path + 1];
    memcpy(path, un->sun_path, plen);
    path[plen] = '\0';
    _cleanup_close_ int fd = resolve(tid, path, k->gofer);
    if (fd < 0)
        return -fd;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return EACCES;
    if (!S_ISSOCK(st.st_mode))
        return ECONNREFUSED;
    if (!allowed(k, &st))
        return EACCES; /* a host socket: docker, D-Bus or the agent stay out of reach */
    struct sockaddr_un via = { .sun_family = AF_UNIX };
    snprintf(via.sun_path, sizeof via.sun_path, "/proc/self/fd/%d", fd);
    return connect_bounded(sock, (const struct sockaddr *)&via, sizeof via);
}

int usock_serve(int listener, const struct usock_keeper *k, const struct egress_door *door,
                const struct names_keeper *names)
{
    struct seccomp_notif n;
    memset(&n, 0, sizeof n);
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &n) < 0)
        return errno == EINTR || errno == ENOENT ? 0 : -1;
    if (names && names_handles(names, &n))
        return names_serve(listener, &n, names);
    if (n.data.nr != __NR_connect)
        return notify_respond(listener, n.id, ENOSYS, 0);
    struct sockaddr_storage a = { 0 };
    socklen_t len = (socklen_t)n.data.args[2];
    if ((int)len < (int)sizeof a.ss_family || len > sizeof a)
        return notify_respond(listener, n.id, EINVAL, 0);
    if (notify_read(n.pid, &a, n.data.args[1], len) < 0)
        return notify_respond(listener, n.id, EFAULT, 0);
    int rc;
    _cleanup_close_ int theirs = notify_claim_socket(listener, &n, &rc);
    if (theirs < 0)
        return rc;
    int domain = 0;
    socklen_t dl = sizeof domain;
    if (getsockopt(theirs, SOL_SOCKET, SO_DOMAIN, &domain, &dl) < 0)
        return notify_respond(listener, n.id, ENOTSOCK, 0);
    /* The caller's own socket object, in its own network namespace: an inet
     * connect made here is the one the kernel would have made for it, but
     * for one to a literal address, which the gateway takes or refuses. */
    if (domain == AF_UNIX && a.ss_family == AF_UNIX) {
        rc = usock_connect(k, theirs, n.pid, (const struct sockaddr_un *)&a, len);
    } else {
        int handed = door && (domain == AF_INET || domain == AF_INET6)
            ? door_connect(door, listener, &n, theirs, &a, len)
            : 0;
        if (handed)
            return handed < 0 ? -1 : 0;
        rc = connect_bounded(theirs, (const struct sockaddr *)&a, len);
    }
    return notify_respond(listener, n.id, rc, 0);
}
