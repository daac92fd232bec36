/*
 * sandbox/microvm/shim.c: the microvm level's shim, the boundary's top process: it owns
 * QEMU in namespaces of its own, brings the guest up, waits at the start
 * seam, then hands the guest the call and relays stdio and egress until the
 * command's status comes back.
 */
#include "sandbox/microvm/microvm_int.h"

#include "common/fds.h"
#include "sandbox/boundary.h"
#include "sandbox/plan.h"

#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>

/* ---- the shim ---- */

static _Noreturn void shim_fail(const struct shim_fds *fds, struct cordon_err *err)
{
    if (shim_qemu > 0) {
        kill(shim_qemu, SIGKILL);
        waitpid(shim_qemu, NULL, 0);
    }
    (void)!write(fds->err_w, err, sizeof *err);
    _exit(err_exit_code(err));
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/*
 * The shim is cloned into a user and PID namespace of its own (it is PID 1
 * there: when it dies, the kernel kills and reaps QEMU, which can then hold
 * no cgroup); here it adds a network namespace, so QEMU has no network and
 * the gateway's door listens on a loopback nothing else on the host shares.
 */
static int enter_namespaces(uid_t uid, gid_t gid, bool gateway, int gw_sock, struct cordon_err *err)
{
    if (unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED, "microvm: cannot create namespaces for QEMU");
    /* The caller is the sandbox user here, as the namespace level maps it:
     * QEMU's 9p server then shows the guest the caller's files (a --rw
     * bind, the workspace) as the command's own, and makes the command's
     * files the caller's on the host. Only the caller's own files are at
     * stake: QEMU held no capability over anyone else's before either. */
    char map[64];
    snprintf(map, sizeof map, "%d %u 1\n", SANDBOX_UID, uid);
    if (write_file("/proc/self/uid_map", map) < 0 || write_file("/proc/self/setgroups", "deny") < 0)
        return err_sys(err, CORDON_E_SETUP, "microvm: cannot map the user namespace");
    snprintf(map, sizeof map, "%d %u 1\n", SANDBOX_GID, gid);
    if (write_file("/proc/self/gid_map", map) < 0)
        return err_sys(err, CORDON_E_SETUP, "microvm: cannot map the user namespace");
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr = { 0 };
    strcpy(ifr.ifr_name, "lo");
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot read loopback flags");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot bring loopback up");
    if (!gateway)
        return 0;
    _cleanup_close_ int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(GATEWAY_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 128) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot listen on 127.0.0.1:%d", GATEWAY_PORT);
    if (send_fd(gw_sock, l) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot hand the gateway its socket");
    return 0;
}

/* A file of TEXT at PATH in the view, read-only to all. */
static int view_file(const char *path, const char *text, struct cordon_err *err)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (fd < 0 || !write_all(fd, text, strlen(text)))
        return err_sys(err, CORDON_E_SETUP, "microvm: cannot write '%s'", path);
    return 0;
}

/*
 * The view's PATH, bound from the host's FROM, for a root caller: QEMU,
 * the caller on the host, would show the guest what only root may read
 * there as the command's own. Masked instead: an empty mode-0 tmpfs over a
 * directory, an empty mode-0 file over a file (made on the view's tmpfs
 * where one is needed: an unlinked one would keep it from turning read-only).
 * 0, or -1 with ERR.
 */
#define VIEW_MASK "/etc/.cordon-mask"
static int mask_unreadable(const char *from, const char *path, const struct sandbox_unreadable *u,
                           struct cordon_err *err)
{
    size_t skip = strlen(from);
    int rc = 0;
    struct stat st;
    for (size_t i = 0; rc == 0 && i < u->n; i++) {
        char at[PATH_MAX];
        if (snprintf(at, sizeof at, "%s%s", path, u->path[i] + skip) >= (int)sizeof at) {
            rc = err_set(err, CORDON_E_SETUP, "microvm: '%s' is too long", u->path[i]);
        } else if (u->dir[i]) {
            if (mount("tmpfs", at, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      "mode=0,size=4k") < 0)
                rc = err_sys(err, CORDON_E_SETUP, "microvm: cannot hide '%s' from the guest", at);
        } else if ((lstat(VIEW_MASK, &st) < 0 && view_file(VIEW_MASK, "", err) < 0) ||
                   chmod(VIEW_MASK, 0) < 0 || mount(VIEW_MASK, at, NULL, MS_BIND, NULL) < 0 ||
                   mount(NULL, at, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0) {
            rc = err_sys(err, CORDON_E_SETUP, "microvm: cannot hide '%s' from the guest", at);
        }
    }
    return rc;
}

/*
 * The guest's /etc, built here in QEMU's own mount namespace, as the
 * namespace level builds the command's: a tmpfs over /etc holding the
 * listed host entries (bound read-only, links as links) and the generated
 * files. QEMU shares it whole, so the guest mounts one share and binds
 * nothing per entry; QEMU finds its own ld.so.cache there too.
 */
static int etc_view(const struct vm_plan *v, uid_t caller, struct cordon_err *err)
{
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return err_sys(err, CORDON_E_SETUP, "microvm: cannot make QEMU's mount namespace");
    _cleanup_close_ int host = open("/etc", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (host < 0 ||
        mount("tmpfs", "/etc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0755,size=4m,nr_inodes=256") < 0)
        return err_sys(err, CORDON_E_SETUP, "microvm: cannot make the guest's /etc");
    for (size_t i = 0; i < SANDBOX_N_ETC_FILES; i++) {
        const char *path = sandbox_etc_files[i], *name = path + strlen("/etc/");
        char from[64], link[PATH_MAX];
        struct stat st;
        if (fstatat(host, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* not on this host: not in the view either */
        if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlinkat(host, name, link, sizeof link - 1);
            if (n < 0)
                return err_sys(err, CORDON_E_SETUP, "microvm: cannot read link '%s'", path);
            link[n] = '\0';
            if (symlink(link, path) < 0)
                return err_sys(err, CORDON_E_SETUP, "microvm: cannot link '%s'", path);
            continue;
        }
        snprintf(from, sizeof from, "/proc/self/fd/%d/%s", host, name);
        struct sandbox_unreadable u = { 0 };
        if (caller == 0)
            sandbox_find_unreadable(from, &u);
        if (u.all) {
            sandbox_unreadable_free(&u);
            continue; /* none of it can be shown: not in the view */
        }
        int made = S_ISDIR(st.st_mode) ? mkdir(path, 0755) : view_file(path, "", err);
        int rc = made < 0 || mount(from, path, NULL, MS_BIND | MS_REC, NULL) < 0 ||
                mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                      NULL) < 0
            ? err_sys(err, CORDON_E_SETUP, "microvm: cannot show '%s' to the guest", path)
            : mask_unreadable(from, path, &u, err);
        sandbox_unreadable_free(&u);
        if (rc < 0)
            return -1;
    }
    TRY(view_file("/etc/passwd", sandbox_passwd, err));
    TRY(view_file("/etc/group", sandbox_group, err));
    TRY(view_file("/etc/hosts", sandbox_hosts, err));
    TRY(view_file("/etc/hostname", sandbox_hostname, err));
    TRY(view_file("/etc/nsswitch.conf", sandbox_nsswitch_conf(v->transparent), err));
    TRY(view_file("/etc/resolv.conf", sandbox_resolv_conf(v->transparent), err));
    /* The gateway intercepts TLS to hosts secrets are bound to: its CA, as
     * the other levels show it (run.c points the clients' variables here). */
    if (v->ca_pem) {
        if (mkdir("/etc/cordon", 0755) < 0)
            return err_sys(err, CORDON_E_SETUP, "microvm: cannot make /etc/cordon");
        TRY(view_file(SANDBOX_CA_CERT, v->ca_pem, err));
        TRY(view_file(SANDBOX_CA_BUNDLE, v->ca_bundle, err));
    }
    if (mount(NULL, "/etc", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0755,size=4m,nr_inodes=256") < 0)
        return err_sys(err, CORDON_E_SETUP, "microvm: cannot seal the guest's /etc");
    return 0;
}

static bool send_frame(int fd, uint32_t type, const void *a, size_t alen, const void *b,
                       size_t blen)
{
    unsigned char h[VM_FRAME_HEADER];
    uint32_t len = (uint32_t)(alen + blen);
    memcpy(h, &type, 4);
    memcpy(h + 4, &len, 4);
    struct iovec iov[3] = { { h, sizeof h }, { (void *)a, alen }, { (void *)b, blen } };
    size_t total = sizeof h + alen + blen, done = 0;
    while (done < total) {
        struct msghdr m = { .msg_iov = iov, .msg_iovlen = 3 };
        ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        done += (size_t)n;
        for (int i = 0; i < 3; i++) {
            size_t t = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
            iov[i].iov_base = (char *)iov[i].iov_base + t;
            iov[i].iov_len -= t;
            n -= (ssize_t)t;
        }
    }
    return true;
}

/* What the policy decides (vm_wire.h's VM_SETUP), sent once the guest is up. */
static int send_setup(const struct vm_plan *v, int ctl, bool egress, bool ahead)
{
    struct vm_buf b = { 0 };
    vm_buf_u32(&b, SANDBOX_UID);
    vm_buf_u32(&b, SANDBOX_GID);
    vm_buf_u32(&b,
               (egress ? VM_CALL_EGRESS : 0) |
                   (egress && v->transparent ? VM_CALL_TRANSPARENT : 0) |
                   (ahead ? VM_SETUP_WARM : 0));
    vm_buf_u32(&b, v->n_ports);
    for (uint32_t i = 0; i < v->n_ports; i++)
        vm_buf_u32(&b, v->ports[i]);
    vm_buf_u32(&b, v->n_nets);
    for (uint32_t i = 0; i < v->n_nets; i++) {
        vm_buf_u32(&b, v->nets[i]);
        vm_buf_u32(&b, v->prefixes[i]);
    }
    vm_buf_bytes(&b, v->setup.data, v->setup.len);
    bool ok = !b.failed && send_frame(ctl, VM_SETUP, b.data, b.len, NULL, 0);
    vm_buf_release(&b);
    return ok ? 0 : -1;
}

/* What the run brings (VM_CALL), with fresh entropy and the time. */
/* M's files (a sealed memfd, closed here) onto B: u64 length, then the bytes. */
static int put_files(struct vm_buf *b, struct start_message *m)
{
    struct stat st = { 0 };
    int fd = m->files;
    m->files = -1;
    if (fd >= 0 && fstat(fd, &st) < 0) {
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    void *map = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    if (fd >= 0)
        close(fd);
    if (map == MAP_FAILED)
        return -1;
    vm_buf_u64(b, size);
    if (size) {
        vm_buf_bytes(b, map, size);
        munmap(map, size);
    }
    return 0;
}

/* The call to the guest; over VM_CALL_MAX is refused with why. */
static int send_call(int ctl, struct start_message *m, struct cordon_err *err)
{
    struct vm_buf b = { 0 };
    unsigned char entropy[VM_ENTROPY_BYTES];
    if (getrandom(entropy, sizeof entropy, 0) != (ssize_t)sizeof entropy)
        return err_sys(err, CORDON_E_SETUP, "microvm: cannot draw the guest's entropy");
    vm_buf_bytes(&b, entropy, sizeof entropy);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    vm_buf_u64(&b, (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
    vm_buf_str(&b, "/workspace");
    size_t n = 0;
    while (m->argv[n])
        n++;
    vm_buf_u32(&b, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        vm_buf_str(&b, m->argv[i]);
    n = 0;
    while (m->envp[n])
        n++;
    vm_buf_u32(&b, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        vm_buf_str(&b, m->envp[i]);
    int rc = put_files(&b, m);
    if (rc < 0)
        err_sys(err, CORDON_E_SETUP, "microvm: cannot read the call's files");
    else if (b.failed && !b.over)
        rc = err_set(err, CORDON_E_INTERNAL, "out of memory");
    else if (b.failed)
        rc = err_set(err, CORDON_E_USAGE,
                     "microvm: the call (arguments, environment and files) is over the guest's "
                     "%u MiB",
                     VM_CALL_MAX >> 20);
    else if (!send_frame(ctl, VM_CALL, b.data, b.len, NULL, 0))
        rc = err_set(err, CORDON_E_SETUP, "microvm: cannot hand the call to the guest");
    explicit_bzero(entropy, sizeof entropy);
    vm_buf_release(&b);
    return rc;
}

/* One frame of the guest's on the control port; the run's end where it says so. */
static void on_guest_frame(struct vm *vm, const struct shim_fds *fds, const struct start_message *m,
                           uint32_t *stdin_sent, const struct vm_frame *f)
{
    struct cordon_err err = { 0 };
    uint32_t v32 = 0;
    if (f->len >= 4)
        memcpy(&v32, f->data, 4);
    switch (f->type) {
    case VM_STDOUT:
    case VM_STDERR:
        /* The error pipe stays open: a guest that breaks the
         * protocol mid-run is still reported as such. */
        write_all(m->stdio[f->type == VM_STDOUT ? 1 : 2], (const char *)f->data, f->len);
        break;
    case VM_EXIT: {
        uint32_t flags;
        memcpy(&flags, f->data + 4, 4);
        struct boundary_status st = { .ws = (int)v32,
                                      .seen = flags & VM_EXIT_OOM ? BOUNDARY_SEEN_OOM : 0 };
        close(fds->err_w);
        (void)!write(fds->status_w, &st, sizeof st);
        vm_kill(vm);
        _exit(0);
    }
    case VM_ERROR:
        guest_error(f, &err);
        vm_kill(vm);
        shim_fail(fds, &err);
    case VM_STDIN_TAKEN:
        /* Never below nothing: a guest cannot take more room than the window. */
        *stdin_sent = v32 < *stdin_sent ? *stdin_sent - v32 : 0;
        break;
    case VM_READY:
    case VM_SET:
        err_set(&err, CORDON_E_SETUP, "microvm: the guest spoke out of turn (frame type %u)",
                f->type);
        shim_fail(fds, &err);
    }
}

/* Relay between the call's stdio, the guest and the gateway until the command's status. */
static _Noreturn void shim_relay(struct vm *vm, const struct shim_fds *fds,
                                 const struct start_message *m)
{
    struct cordon_err err = { 0 };
    int in = m->stdio[0];
    /* A connection to the gateway per guest connection: room for them all. */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < VM_EG_MAX_CONNS + 64) {
        nofile.rlim_cur =
            nofile.rlim_max < VM_EG_MAX_CONNS + 64 ? nofile.rlim_max : VM_EG_MAX_CONNS + 64;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    struct vm_reader *rc = malloc(sizeof *rc);
    struct eg_relay *eg = eg_relay_new(vm->eg);
    static char buf[VM_DATA_MAX];
    if (!rc || !eg)
        _exit(125);
    vm_reader_init(rc, VM_PORT_CONTROL);
    sigset_t set;
    sigemptyset(&set);
    static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaddset(&set, forwarded[i]);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    /* Stdin sent that the guest has not said it took: read no more past the window. */
    uint32_t stdin_sent = 0;

    for (;;) {
        static struct pollfd p[4 + EG_RELAY_FDS];
        p[0] = (struct pollfd){ .fd = vm->ctl, .events = POLLIN };
        p[1] = (struct pollfd){ .fd = stdin_sent < VM_STDIN_WINDOW ? in : -1, .events = POLLIN };
        p[2] = (struct pollfd){ .fd = vm->pidfd, .events = POLLIN };
        p[3] = (struct pollfd){ .fd = sfd, .events = POLLIN };
        size_t n_eg = eg_relay_poll(eg, p + 4);
        if (poll(p, 4 + n_eg, -1) < 0) {
            if (errno == EINTR)
                continue;
            _exit(125);
        }
        if (p[2].revents) {
            err_set(&err, CORDON_E_SETUP, "microvm: QEMU exited before the command's status");
            shim_fail(fds, &err);
        }
        if (p[3].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == sizeof si) {
                uint32_t sig = si.ssi_signo;
                send_frame(vm->ctl, VM_SIGNAL, &sig, sizeof sig, NULL, 0);
            }
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(in, buf, VM_STDIN_WINDOW - stdin_sent);
            if (n > 0) {
                send_frame(vm->ctl, VM_STDIN, buf, (size_t)n, NULL, 0);
                stdin_sent += (uint32_t)n;
            } else {
                send_frame(vm->ctl, VM_STDIN_EOF, NULL, 0, NULL, 0);
                close(in);
                in = -1;
            }
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(vm->ctl, buf, sizeof buf);
            if (n <= 0) {
                err_set(&err, CORDON_E_SETUP, "microvm: the guest closed its control port");
                shim_fail(fds, &err);
            }
            size_t off = 0;
            while (off < (size_t)n) {
                size_t used;
                struct vm_frame f;
                int got = vm_reader_feed(rc, buf + off, (size_t)n - off, &used, &f, &err);
                if (got < 0)
                    shim_fail(fds, &err); /* a hostile or broken guest: the run ends */
                off += used;
                if (got == 0)
                    break;
                on_guest_frame(vm, fds, m, &stdin_sent, &f);
            }
        }
        if (eg_relay_events(eg, p + 4, &err) < 0)
            shim_fail(fds, &err);
    }
}

_Noreturn void shim_main(const struct sandbox_setup *s, struct vm_plan *v,
                         const struct shim_fds *fds)
{
    struct cordon_err err = { 0 };
    int keep[] = {
        fds->sync_r, fds->err_w, fds->status_w, fds->start_r, fds->gw_sock, fds->info_w
    };
    close_fds_except(keep, sizeof keep / sizeof keep[0]);
    prctl(PR_SET_NAME, "cordon-vm", 0, 0, 0);
    char go;
    if (read(fds->sync_r, &go, 1) != 1)
        _exit(125); /* the supervisor is gone */
    /* QEMU dies with us (we are its PID namespace's init), we with the supervisor. */
    struct pollfd alive = { .fd = fds->sync_r, .events = POLLIN };
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 ||
        (poll(&alive, 1, 0) > 0 && (alive.revents & (POLLHUP | POLLERR))))
        _exit(125);
    if (enter_namespaces(fds->uid, fds->gid, s->gateway, fds->gw_sock, &err) < 0 ||
        etc_view(v, fds->uid, &err) < 0)
        shim_fail(fds, &err);
    if (fds->gw_sock >= 0)
        close(fds->gw_sock);

    struct vm vm;
    int restore = vm_restore(v, &vm, &err);
    bool restored = restore == 0;
    if (!restored) {
        /* One that fit but did not load is replaced by this boot's. */
        if (restore == -2)
            unlink(v->snapshot);
        err = (struct cordon_err){ 0 };
        if (vm_boot(v, access(v->snapshot, F_OK) != 0, &vm, &err) < 0)
            shim_fail(fds, &err);
    }
    /* The setup goes in now: a run prepared ahead waits, paused (no CPU
     * while it waits), with its shares mounted, and its start is the
     * command's alone; one started at once stays running for its call. */
    char line[4096];
    if (vm_resume(&vm) < 0 || send_setup(v, vm.ctl, s->gateway, s->ahead) < 0) {
        err_set(&err, CORDON_E_SETUP, "microvm: cannot hand the setup to the guest");
        vm_kill(&vm);
        shim_fail(fds, &err);
    }
    if (wait_frame(&vm, VM_SET, SETUP_TIMEOUT_MS, &err) < 0 ||
        (s->ahead && qmp(vm.qmp, "{\"execute\":\"stop\"}\n", -1, line, sizeof line) < 0)) {
        if (err.kind == CORDON_E_OK)
            err_set(&err, CORDON_E_SETUP, "microvm: QEMU did not pause the prepared guest");
        vm_kill(&vm);
        shim_fail(fds, &err);
    }
    char info = restored ? 'r' : 'c';
    (void)!write(fds->info_w, &info, 1);
    close(fds->info_w);

    struct start_message m;
    if (start_ready_send(fds->start_r) < 0 || start_message_recv(fds->start_r, &m) < 0) {
        vm_kill(&vm);
        _exit(125); /* released without a start */
    }
    close(fds->start_r);
    if (s->ahead && vm_resume(&vm) < 0)
        err_set(&err, CORDON_E_SETUP, "microvm: cannot resume the prepared guest");
    else
        send_call(vm.ctl, &m, &err);
    if (err.kind != CORDON_E_OK) {
        vm_kill(&vm);
        shim_fail(fds, &err);
    }
    shim_relay(&vm, fds, &m);
}
