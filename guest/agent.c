/*
 * guest/agent.c: /init of the microvm level's guest. It takes a setup and
 * then one call from the host over the control port (sandbox/microvm/vm_wire.h):
 * the setup's 9p shares, limits and filter are put in place as soon as it
 * comes (a guest prepared ahead waits with them mounted); the call reseeds
 * the RNG with the host's entropy before anything runs (restored clones
 * start from one RNG state), then the command runs confined while the agent
 * relays its stdio and returns its status; then it powers the guest off. With
 * egress, a forwarder listens on 127.0.0.1:3128 and carries each connection
 * over the egress port to the host, which hands it to cordon's gateway; with
 * transparent egress it also serves the DNS stub on 127.0.0.53 and a
 * listener per port for the synthetic addresses, whose connections it opens
 * at the gateway with a relay preface (common/relay_wire.h).
 * The host is trusted here; the command is not.
 */
#include "agent.h"

#include "../src/sandbox/microvm/vm_wire.h"
#include "common/fds.h"
#include "common/home.h"
#include "common/relay_wire.h"
#include "common/route.h"
#include "sandbox/start_files.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/random.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CONTROL_PORT "/dev/vport0p1"
#define EGRESS_PORT "/dev/vport0p2"

_Noreturn void power_off(void)
{
    sync();
    reboot(RB_POWER_OFF);
    for (;;)
        pause();
}

void die(const char *what)
{
    fprintf(stderr, "cordon-agent: %s: %s\n", what, strerror(errno));
    power_off();
}

/* One frame, header and payload in one write: the port is shared by nobody else. */
bool send_frame(int fd, uint32_t type, const void *a, size_t alen, const void *b, size_t blen)
{
    static char buf[VM_FRAME_HEADER + VM_DATA_MAX + 8];
    if (alen + blen > VM_DATA_MAX + 4)
        return false;
    uint32_t h[2] = { type, (uint32_t)(alen + blen) };
    memcpy(buf, h, sizeof h);
    if (alen)
        memcpy(buf + VM_FRAME_HEADER, a, alen);
    if (blen)
        memcpy(buf + VM_FRAME_HEADER + alen, b, blen);
    return write_all(fd, buf, VM_FRAME_HEADER + alen + blen);
}

/* A frame from the host: its type, and its payload in *BUF (malloc'd). */
static bool recv_frame(int fd, uint32_t *type, char **buf, uint32_t *len)
{
    uint32_t h[2];
    if (!read_full(fd, h, sizeof h) || h[1] > VM_CALL_MAX)
        return false;
    *type = h[0];
    *len = h[1];
    *buf = malloc(h[1] + 1);
    if (!*buf || !read_full(fd, *buf, h[1]))
        return false;
    (*buf)[h[1]] = '\0';
    return true;
}

/* ---- the call, parsed; the host built it, so a short one is just dropped ---- */

struct cursor {
    const char *p, *end;
    bool bad;
};

static const void *take(struct cursor *c, size_t n)
{
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = true;
        return NULL;
    }
    const void *at = c->p;
    c->p += n;
    return at;
}

static uint32_t take_u32(struct cursor *c)
{
    uint32_t v = 0;
    const void *at = take(c, sizeof v);
    if (at)
        memcpy(&v, at, sizeof v);
    return v;
}

static uint64_t take_u64(struct cursor *c)
{
    uint64_t v = 0;
    const void *at = take(c, sizeof v);
    if (at)
        memcpy(&v, at, sizeof v);
    return v;
}

static char *take_str(struct cursor *c)
{
    uint32_t n = take_u32(c);
    const char *at = take(c, n);
    return at ? strndup(at, n) : NULL;
}

static char **take_strv(struct cursor *c)
{
    uint32_t n = take_u32(c);
    if (n > VM_CALL_MAX / 4) {
        c->bad = true;
        return NULL;
    }
    char **v = calloc(n + 1, sizeof *v);
    for (uint32_t i = 0; v && i < n; i++)
        if (!(v[i] = take_str(c)))
            return NULL;
    return v;
}

/* The setup's fields into CALL (vm_wire.h's VM_SETUP layout). */
static bool parse_setup(const char *buf, uint32_t len, struct call *call)
{
    struct cursor c = { buf, buf + len, false };
    call->uid = take_u32(&c);
    call->gid = take_u32(&c);
    call->flags = take_u32(&c);
    size_t used =
        c.bad ? 0 : vm_ports_take(c.p, (size_t)(c.end - c.p), call->ports, &call->n_ports);
    if (!used)
        return false;
    c.p += used;
    call->n_nets = take_u32(&c);
    if (call->n_nets > VM_MAX_NETS)
        return false;
    for (uint32_t i = 0; i < call->n_nets; i++) {
        call->nets[i] = take_u32(&c);
        call->prefixes[i] = take_u32(&c);
        if (call->prefixes[i] < 8 || call->prefixes[i] > 32)
            return false;
    }
    call->n_rlimits = take_u32(&c);
    if (call->n_rlimits > VM_MAX_RLIMITS)
        return false;
    for (uint32_t i = 0; i < call->n_rlimits; i++) {
        call->rlimits[i].resource = (int)take_u32(&c);
        call->rlimits[i].value.rlim_cur = take_u64(&c);
        call->rlimits[i].value.rlim_max = take_u64(&c);
    }
    call->n_mounts = take_u32(&c);
    if (call->n_mounts > VM_MAX_MOUNTS)
        return false;
    for (uint32_t i = 0; i < call->n_mounts; i++) {
        call->mounts[i].flags = take_u32(&c);
        call->mounts[i].tag = take_str(&c);
        call->mounts[i].path = take_str(&c);
    }
    uint32_t n_insns = take_u32(&c);
    if (n_insns > BPF_MAXINSNS)
        return false;
    const void *insns = take(&c, n_insns * sizeof(struct sock_filter));
    call->filter.len = (unsigned short)n_insns;
    call->filter.filter = insns ? malloc(n_insns * sizeof(struct sock_filter) + 1) : NULL;
    if (call->filter.filter)
        memcpy(call->filter.filter, insns, n_insns * sizeof(struct sock_filter));
    return !c.bad && c.p == c.end;
}

/* The call's fields into CALL (VM_CALL's layout). */
static bool parse_call(const char *buf, uint32_t len, struct call *call)
{
    struct cursor c = { buf, buf + len, false };
    const void *e = take(&c, VM_ENTROPY_BYTES);
    if (e)
        memcpy(call->entropy, e, VM_ENTROPY_BYTES);
    call->realtime_ns = take_u64(&c);
    call->cwd = take_str(&c);
    call->argv = take_strv(&c);
    call->envp = take_strv(&c);
    call->files_len = take_u64(&c);
    call->files = call->files_len <= VM_CALL_MAX ? take(&c, (size_t)call->files_len) : NULL;
    if (call->files_len && !call->files)
        return false;
    return !c.bad && c.p == c.end && call->argv && call->argv[0] && call->envp && call->cwd;
}

/* ---- guest setup ---- */

static void reseed(const unsigned char *entropy)
{
    /* struct rand_pool_info ends in a flexible array: the entropy follows it. */
    _Alignas(
        struct rand_pool_info) unsigned char raw[sizeof(struct rand_pool_info) + VM_ENTROPY_BYTES];
    struct rand_pool_info *seed = (struct rand_pool_info *)raw;
    seed->entropy_count = VM_ENTROPY_BYTES * 8;
    seed->buf_size = VM_ENTROPY_BYTES;
    memcpy(raw + sizeof *seed, entropy, VM_ENTROPY_BYTES);
    int fd = open("/dev/urandom", O_RDWR | O_CLOEXEC);
    /* Added and credited, then the CRNG reseeded now rather than at its next
     * interval: the first getrandom() after this differs between clones. */
    if (fd < 0 || ioctl(fd, RNDADDENTROPY, seed) < 0 || ioctl(fd, RNDRESEEDCRNG) < 0)
        die("cannot reseed the RNG");
    close(fd);
    explicit_bzero(raw, sizeof raw);
}

static void mkdir_p(const char *path)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(buf, 0755);
            *s = '/';
        }
    mkdir(buf, 0755);
}

static bool mount_shares(const struct call *call, char *why, size_t why_len)
{
    for (uint32_t i = 0; i < call->n_mounts; i++) {
        const char *tag = call->mounts[i].tag, *path = call->mounts[i].path;
        unsigned long flags = MS_NOSUID | MS_NODEV;
        if (call->mounts[i].flags & VM_MOUNT_READONLY)
            flags |= MS_RDONLY;
        int rc;
        struct stat st;
        if (call->mounts[i].flags & VM_MOUNT_MASK) {
            /* A socket, FIFO or protected link of the host workspace, or the
             * audit log seen through a bind: masked as the namespace level
             * masks, by a read-only, nodev /dev/null that can be neither
             * opened nor removed. The entry itself is opened (a link too), so
             * the mount lands on it, not where it points. */
            int at = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
            if (at < 0 && errno == ENOENT)
                continue; /* gone since the host's scan */
            int tree = open_tree(AT_FDCWD, "/dev/null", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
            struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                           MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC };
            rc = at < 0 || tree < 0 ||
                    mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0 ||
                    move_mount(tree, "", at, "",
                               MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0
                ? -1
                : 0;
            int saved = errno;
            if (at >= 0)
                close(at);
            if (tree >= 0)
                close(tree);
            errno = saved;
        } else if (call->mounts[i].flags & VM_MOUNT_COVER) {
            /* The host workspace's protected entries, bound read-only over
             * themselves as at the namespace level (links come as masks). */
            if (lstat(path, &st) < 0 || S_ISLNK(st.st_mode))
                continue;
            rc = mount(path, path, NULL, MS_BIND, NULL);
            if (rc == 0)
                rc = mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | flags, NULL);
        } else if (call->mounts[i].flags & VM_MOUNT_FILE) {
            /* An entry's directory is shared: mounted aside once, the entry
             * bound, and the share detached after the last mount below, so
             * its siblings stay out of reach. */
            char share[64], source[600], parent[512];
            const char *slash = strchr(tag, '/');
            if (!slash || slash - tag >= 16 || strchr(slash + 1, '/') || !slash[1]) {
                snprintf(why, why_len, "bad entry share '%s'", tag);
                return false;
            }
            snprintf(share, sizeof share, "/.cordon-share-%.*s", (int)(slash - tag), tag);
            snprintf(source, sizeof source, "%s/%s", share, slash + 1);
            rc = 0;
            if (stat(share, &st) < 0) {
                char shared_tag[16];
                snprintf(shared_tag, sizeof shared_tag, "%.*s", (int)(slash - tag), tag);
                mkdir_p(share);
                rc = mount(shared_tag, share, "9p", flags | MS_RDONLY,
                           "trans=virtio,version=9p2000.L,msize=262144,cache=loose,access=client");
            }
            if (rc == 0 && lstat(source, &st) < 0)
                continue; /* gone on the host: like an optional bind, skipped */
            snprintf(parent, sizeof parent, "%s", path);
            if (strrchr(parent, '/'))
                *strrchr(parent, '/') = '\0';
            if (*parent)
                mkdir_p(parent);
            if (rc == 0 && S_ISDIR(st.st_mode)) {
                mkdir_p(path);
            } else if (rc == 0) {
                int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                if (fd >= 0)
                    close(fd);
            }
            if (rc == 0)
                rc = mount(source, path, NULL, MS_BIND | MS_REC, NULL);
            if (rc == 0)
                rc = mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | flags | MS_RDONLY, NULL);
        } else if (call->mounts[i].flags & VM_MOUNT_TMPFS) {
            mkdir_p(path);
            rc = mount("tmpfs", path, "tmpfs", flags, tag);
        } else {
            mkdir_p(path);
            /* cache=none where the guest writes: the host sees each write as it
             * happens. A read-only share is cached: it does not change under a
             * call, and each page fetched over 9p costs dearly under TCG. */
            rc = mount(tag, path, "9p", flags,
                       flags & MS_RDONLY
                           ? "trans=virtio,version=9p2000.L,msize=262144,cache=loose,access=client"
                           : "trans=virtio,version=9p2000.L,msize=262144,cache=none,access=client");
        }
        if (rc < 0) {
            snprintf(why, why_len, "cannot mount %s at %s: %s", tag, path, strerror(errno));
            return false;
        }
    }
    /* The shares entries were bound from go: only the bound entries stay. */
    for (uint32_t i = 0; i < call->n_mounts; i++) {
        const char *tag = call->mounts[i].tag, *slash = strchr(tag, '/');
        char share[64];
        if (!(call->mounts[i].flags & VM_MOUNT_FILE) || !slash)
            continue;
        snprintf(share, sizeof share, "/.cordon-share-%.*s", (int)(slash - tag), tag);
        if (umount2(share, MNT_DETACH) == 0)
            rmdir(share);
    }
    return true;
}

/* ---- the command's root ---- */

/*
 * The initramfs root holds /init, /root and a devtmpfs with every device of
 * the guest (kmsg, ttys, and the agent's own control and egress ports). The
 * command gets a root of its own instead, as the namespace level builds one:
 * a fresh tmpfs (nosuid, nodev; read-only once built) with the shares, a
 * private /tmp and /dev/shm, a /proc that shows only what the command may trace, and a
 * /dev of the few nodes programs need. The agent enters it too (chroot, as
 * the kernel has no mount namespaces); the ports stay reachable only by the
 * descriptors it opened before. The command keeps no capability, so it
 * cannot chroot back out.
 */
#define NEW_ROOT "/.cordon-root"

static bool mount_at(const char *src, const char *dst, const char *type, unsigned long flags,
                     const char *data, char *why, size_t why_len)
{
    if (mount(src, dst, type, flags, data) == 0)
        return true;
    snprintf(why, why_len, "cannot mount %s at %s: %s", type ? type : src, dst, strerror(errno));
    return false;
}

static bool make_node(const char *path, const char *contents, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
    bool ok = fd >= 0 && write_all(fd, contents, strlen(contents));
    if (fd >= 0)
        close(fd);
    return ok;
}

static bool enter_root(char *why, size_t why_len)
{
    static const char *const dirs[] = { "dev", "proc", "tmp", "usr", "workspace", "etc" };
    static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
    static const char *const links[][2] = {
        { "dev/ptmx", "pts/ptmx" },
        { "dev/fd", "/proc/self/fd" },
        { "dev/stdin", "/proc/self/fd/0" },
        { "dev/stdout", "/proc/self/fd/1" },
        { "dev/stderr", "/proc/self/fd/2" },
        { "bin", "usr/bin" },
        { "sbin", "usr/sbin" },
        { "lib", "usr/lib" },
        { "lib64", "usr/lib64" },
        { "lib32", "usr/lib32" },
    };
    char path[128];
    mkdir(NEW_ROOT, 0755);
    if (!mount_at("tmpfs", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", why, why_len))
        return false;
    if (chdir(NEW_ROOT) < 0) {
        snprintf(why, why_len, "cannot enter %s: %s", NEW_ROOT, strerror(errno));
        return false;
    }
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        mkdir(dirs[i], 0755);
    if (!mount_at("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
                  "hidepid=invisible", why, why_len) ||
        !mount_at("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=0755,size=64k,nr_inodes=64", why, why_len))
        return false;
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        char src[32];
        snprintf(src, sizeof src, "/dev/%s", nodes[i]);
        snprintf(path, sizeof path, "dev/%s", nodes[i]);
        /* A bind of the devtmpfs node: the one mount here that keeps dev. */
        if (!make_node(path, "", 0666) || !mount_at(src, path, NULL, MS_BIND, NULL, why, why_len) ||
            !mount_at(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NOEXEC, NULL, why,
                      why_len))
            return false;
    }
    mkdir("dev/pts", 0755);
    mkdir("dev/shm", 01777);
    /* /dev/shm (sized by the policy) comes with the call's mounts. */
    if (!mount_at("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                  "newinstance,ptmxmode=0666,mode=0620", why, why_len))
        return false;
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
        (void)!symlink(links[i][1], links[i][0]);
    if (chroot(".") < 0 || chdir("/") < 0) {
        snprintf(why, why_len, "cannot enter the command's root: %s", strerror(errno));
        return false;
    }
    return true;
}

/* Once the shares are in place: nothing more is made at the top. */
static bool seal_root(char *why, size_t why_len)
{
    return mount_at(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL, why,
                    why_len);
}

/*
 * A command that fills the guest's memory ends as an OOM kill, not in a
 * thrash: without swap the kernel would evict and re-read the command's own
 * program from its 9p share for as long as the wall limit lets it, reclaim
 * "succeeding" each time. The multi-gen LRU (kernel.config) calls the OOM
 * killer instead when the pages used in the last second cannot be kept. A
 * kernel built without it (an older cache) runs as before.
 */
static void keep_working_set(void)
{
    mkdir("/sys", 0555);
    if (mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        return;
    int fd = open("/sys/kernel/mm/lru_gen/min_ttl_ms", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (write(fd, "1000", 4) != 4)
            die("cannot set the guest's min_ttl_ms");
        close(fd);
    }
    umount("/sys");
}

static void loopback_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr = { 0 };
    strcpy(ifr.ifr_name, "lo");
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        die("cannot read loopback flags");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        die("cannot bring loopback up");
    close(s);
}

/* ---- the command ---- */

struct exec_failure {
    uint32_t kind;
    int err;
};

/*
 * Did the kernel's OOM killer fire since KMSG (the kernel log, read from
 * where it was at the start) was last read? It logs "Out of memory:
 * Killed process ..." whenever it kills, whichever process it picked.
 */
static bool oom_logged(int kmsg)
{
    char rec[1024];
    for (;;) {
        ssize_t n = read(kmsg, rec, sizeof rec - 1);
        if (n < 0 && errno == EPIPE)
            continue; /* records were overwritten: read on from the oldest left */
        if (n <= 0)
            return false;
        rec[n] = '\0';
        if (strstr(rec, "Out of memory"))
            return true;
    }
}

/* The initramfs's /proc, writable (the command's is read-only), opened before the chroot. */
static int host_proc = -1;

/* What the command's process starts from: the call and its ends of the pipes. */
struct spawn {
    const struct call *call;
    int in, out, errout, fail_w;
    char why[VM_ERROR_MAX - 4]; /* what failed, where the errno alone would not say */
};

static int run_command(void *arg)
{
    struct spawn *sp = arg;
    const struct call *call = sp->call;
    struct exec_failure f = { VM_ERR_SETUP, 0 };
    setsid();
    /* The agent is the OOM killer's last choice (see main); the command is
     * an ordinary candidate again. */
    int adj = openat(host_proc, "self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (adj < 0 || write(adj, "0", 1) != 1)
        goto fail;
    close(adj);
    if (dup2(sp->in, 0) < 0 || dup2(sp->out, 1) < 0 || dup2(sp->errout, 2) < 0)
        goto fail;
    /* Everything else the agent holds (the ports above all) stays out. */
    if ((sp->fail_w > 3 && syscall(SYS_close_range, 3u, (unsigned)sp->fail_w - 1, 0u) < 0) ||
        syscall(SYS_close_range, (unsigned)sp->fail_w + 1, ~0u, 0u) < 0)
        goto fail;
    if (chdir(call->cwd) < 0)
        goto fail;
    for (uint32_t i = 0; i < call->n_rlimits; i++)
        if (setrlimit(call->rlimits[i].resource, &call->rlimits[i].value) < 0)
            goto fail;
    for (int cap = 0; cap <= 63; cap++)
        prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
    /* Keeps no capability whatever the uid the host named. */
    if (prctl(PR_SET_SECUREBITS, 0x2f /* NOROOT, NO_SETUID_FIXUP and their locks */, 0, 0, 0) < 0 ||
        setgroups(0, NULL) < 0 || setresgid(call->gid, call->gid, call->gid) < 0 ||
        setresuid(call->uid, call->uid, call->uid) < 0)
        goto fail;
    /* HOME (plan.h's SANDBOX_HOME), the command's own, as at the namespace level. */
    if (home_make("/tmp/home") < 0)
        goto fail;
    /*
     * The call's files beneath its working directory, the command's own.
     * Shared memory until the exec (spawn_command): WHY reaches the agent.
     */
    int here = call->files_len ? open(".", O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
    if (call->files_len &&
        (here < 0 ||
         start_files_place(call->files, (size_t)call->files_len, here, sp->why, sizeof sp->why) <
             0)) {
        if (here < 0)
            snprintf(sp->why, sizeof sp->why, "cannot open the workspace: %s", strerror(errno));
        goto fail;
    }
    if (here >= 0)
        close(here);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        goto fail;
    if (call->filter.len && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &call->filter, 0, 0) < 0)
        goto fail;
    /*
     * execvpe() searches the PATH of environ, not of its envp: the call's own
     * (the agent, /init, has none; spawn_command() gives it back its own).
     */
    environ = call->envp;
    execvpe(call->argv[0], call->argv, call->envp);
    f.kind = errno == ENOENT || errno == ENOTDIR                                   ? VM_ERR_NOTFOUND
        : errno == EACCES || errno == ENOEXEC || errno == EISDIR || errno == EPERM ? VM_ERR_NOEXEC
                                                                                   : VM_ERR_SETUP;
fail:
    f.err = errno;
    write_all(sp->fail_w, &f, sizeof f);
    _exit(127);
}

/*
 * The command's process, as posix_spawn makes one: it shares the agent's
 * memory until it execs (the agent waits meanwhile), so nothing is copied.
 * Under TCG a fork's page-table copy and copy-on-write faults cost ~15 ms.
 */
static pid_t spawn_command(struct spawn *sp)
{
    static _Alignas(16) char stack[256 * 1024];
    char **agents = environ; /* the child sets the command's in our memory */
    pid_t pid =
        clone(run_command, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)sp);
    environ = agents;
    return pid;
}

/*
 * VM_SETUP_WARM: a throwaway /usr/bin/true, started and confined as the
 * command will be. It leaves the loader and libc in the page cache and,
 * under TCG, the guest code it ran translated; its outcome is ignored.
 */
static void warm_up(struct call *setup)
{
    char *argv[] = { "/usr/bin/true", NULL }, *envp[] = { NULL };
    int null = open("/dev/null", O_RDWR | O_CLOEXEC), fail[2] = { -1, -1 };
    if (null >= 0 && pipe2(fail, O_CLOEXEC) == 0) {
        setup->argv = argv;
        setup->envp = envp;
        setup->cwd = "/";
        struct spawn sp = { setup, null, null, null, fail[1] };
        pid_t pid = spawn_command(&sp);
        while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        setup->argv = setup->envp = NULL;
        setup->cwd = NULL;
    }
    int all[] = { null, fail[0], fail[1] };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] >= 0)
            close(all[i]);
}

static void send_error(int ctl, uint32_t kind, const char *msg)
{
    size_t n = strlen(msg);
    if (n > VM_ERROR_MAX - 4)
        n = VM_ERROR_MAX - 4;
    send_frame(ctl, VM_ERROR, &kind, sizeof kind, msg, n);
}

/*
 * The host's stdin for the command, queued (at most VM_STDIN_WINDOW: the
 * host sends no more until some is taken) and written as the command's pipe
 * takes it, never blocking: the agent goes on relaying output and signals
 * while a command leaves its stdin unread.
 */
struct stdin_queue {
    int fd; /* the command's stdin pipe (non-blocking), -1 once closed */
    char buf[VM_STDIN_WINDOW];
    size_t off, len;
    bool eof; /* the host's stdin ended: close the pipe once the queue is empty */
};

/* N more bytes taken by the command: the host may send as many again. */
static void stdin_taken(int ctl, size_t n)
{
    uint32_t taken = (uint32_t)n;
    if (n)
        send_frame(ctl, VM_STDIN_TAKEN, &taken, sizeof taken, NULL, 0);
}

/*
 * The pipe closed (the host's EOF, or the command closed its stdin): what is
 * queued is dropped, and no room is given back. The host stops reading its
 * stdin once the window is full, as the other levels stop at the command's
 * close, rather than relaying what nobody reads until the command exits.
 */
static void stdin_close(struct stdin_queue *q)
{
    if (q->fd >= 0)
        close(q->fd);
    q->fd = -1;
    q->off = q->len = 0;
}

/* What the pipe takes now of the queue; the rest waits for POLLOUT. */
static void stdin_flush(int ctl, struct stdin_queue *q)
{
    size_t done = 0;
    while (q->fd >= 0 && q->len > 0) {
        ssize_t n = write(q->fd, q->buf + q->off, q->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) { /* the command closed its stdin */
            stdin_taken(ctl, done);
            stdin_close(q);
            return;
        }
        q->off += (size_t)n;
        q->len -= (size_t)n;
        done += (size_t)n;
    }
    stdin_taken(ctl, done);
    if (q->len == 0)
        q->off = 0;
    if (q->eof && q->len == 0 && q->fd >= 0)
        stdin_close(q);
}

/* A control frame from the host while the command runs. */
static void on_host_frame(int ctl, pid_t cmd, struct stdin_queue *q, uint32_t type, const char *fb,
                          uint32_t len)
{
    if (type == VM_STDIN && q->fd >= 0) {
        /*
         * The host keeps within the window, so all of it fits once the queue
         * starts at the front; what would not (a host past it) is dropped,
         * and said taken.
         */
        if (q->off) {
            memmove(q->buf, q->buf + q->off, q->len);
            q->off = 0;
        }
        size_t room = sizeof q->buf - q->len;
        size_t keep = len < room ? len : room;
        memcpy(q->buf + q->len, fb, keep);
        q->len += keep;
        stdin_taken(ctl, len - keep);
        stdin_flush(ctl, q);
    } else if (type == VM_STDIN_EOF) {
        q->eof = true;
        stdin_flush(ctl, q);
    } else if (type == VM_SIGNAL && len == 4) {
        uint32_t sig;
        memcpy(&sig, fb, 4);
        kill(-cmd, (int)sig);
    }
}

/*
 * Relay until the command CMD exits (what it left behind dies with the
 * guest): its output to the host, the host's stdin and signals to it; then
 * drain what its pipes still hold.
 */
static void relay(int ctl, pid_t cmd, int in_w, int out_r, int err_r)
{
    static char data[VM_DATA_MAX];
    static struct stdin_queue q;
    q.fd = in_w;
    if (fcntl(in_w, F_SETFL, O_NONBLOCK) < 0)
        die("cannot make the command's stdin non-blocking");
    int pidfd = (int)syscall(SYS_pidfd_open, cmd, 0);
    if (pidfd < 0)
        die("cannot watch the command");
    int outs[2] = { out_r, err_r };
    uint32_t type, len;
    bool exited = false;
    while (!exited || outs[0] >= 0 || outs[1] >= 0) {
        struct pollfd p[5] = {
            { .fd = outs[0], .events = POLLIN },
            { .fd = outs[1], .events = POLLIN },
            { .fd = ctl, .events = POLLIN },
            { .fd = exited ? -1 : pidfd, .events = POLLIN },
            { .fd = q.len ? q.fd : -1, .events = POLLOUT },
        };
        if (poll(p, 5, exited ? 0 : -1) < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        bool progress = false;
        for (int i = 0; i < 2; i++) {
            if (outs[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(outs[i], data, sizeof data);
            if (n > 0) {
                send_frame(ctl, i == 0 ? VM_STDOUT : VM_STDERR, data, (size_t)n, NULL, 0);
                progress = true;
            } else {
                close(outs[i]);
                outs[i] = -1;
            }
        }
        if (p[2].revents & POLLIN) {
            char *fb;
            if (!recv_frame(ctl, &type, &fb, &len))
                die("lost the host");
            on_host_frame(ctl, cmd, &q, type, fb, len);
            free(fb);
        }
        if (p[4].revents & (POLLOUT | POLLERR | POLLHUP))
            stdin_flush(ctl, &q);
        if (p[3].revents & POLLIN)
            exited = true;
        /* Exited and nothing more to read right now: a background process
         * holding the pipes open does not keep the run alive. */
        if (exited && !progress)
            break;
    }
}

/*
 * The command's stdio and its exec-failure pipe. Ours, mode 0600, the
 * command (the sandbox user) could not open /dev/stdout again: 0666.
 */
static void stdio_pipes(int in[2], int out[2], int errout[2], int fail[2])
{
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(errout, O_CLOEXEC) < 0 ||
        pipe2(fail, O_CLOEXEC) < 0)
        die("cannot create pipes");
    (void)fchmod(in[0], 0666);
    (void)fchmod(out[1], 0666);
    (void)fchmod(errout[1], 0666);
}

int main(void)
{
    mkdir("/proc", 0555);
    mkdir("/dev", 0755);
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, NULL);
    keep_working_set();
    int con = open("/dev/console", O_RDWR);
    if (con >= 0) {
        dup2(con, 1);
        dup2(con, 2);
    }
    int ctl = open(CONTROL_PORT, O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        die("cannot open the control port");
    signal(SIGPIPE, SIG_IGN);
    /* What does not depend on the call is done before the snapshot, so a
     * restored clone starts with it: the egress port open (it is out of
     * reach once in the command's root), loopback up, that root built. */
    int eg = open(EGRESS_PORT, O_RDWR | O_CLOEXEC), eg_errno = errno;
    /* The kernel log, to tell an OOM kill from another SIGKILL; and the
     * agent (with its forwarder) is never the OOM killer's pick: a guest
     * short of memory loses the command, not the one who reports it. */
    int kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    host_proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
    int adj = openat(host_proc, "self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (adj < 0 || write(adj, "-1000", 5) != 5)
        die("cannot protect the agent from the OOM killer");
    close(adj);
    char why[VM_ERROR_MAX];
    bool root_ok = enter_root(why, sizeof why);
    loopback_up();

    /* A snapshot is taken here: everything above is the same in every clone. */
    if (!send_frame(ctl, VM_READY, NULL, 0, NULL, 0))
        die("cannot reach the host");
    /* The setup: shares, limits, filter, egress. Done before the call, so a
     * guest prepared ahead (the daemon's pool) has only the command to start. */
    uint32_t type, len;
    char *buf;
    if (!recv_frame(ctl, &type, &buf, &len) || type != VM_SETUP)
        die("no setup from the host");
    struct call call = { 0 };
    if (!parse_setup(buf, len, &call)) {
        send_error(ctl, VM_ERR_SETUP, "malformed setup");
        power_off();
    }
    if ((call.flags & VM_CALL_EGRESS) && eg < 0) {
        snprintf(why, sizeof why, "cannot open the egress port: %s", strerror(eg_errno));
        send_error(ctl, VM_ERR_SETUP, why);
        power_off();
    }
    if (!(call.flags & VM_CALL_EGRESS) && eg >= 0) {
        close(eg);
        eg = -1;
    }
    if (!root_ok || !mount_shares(&call, why, sizeof why) || !seal_root(why, sizeof why) ||
        (eg >= 0 && !start_forwarder(&call, eg, why, sizeof why))) {
        send_error(ctl, VM_ERR_SETUP, why);
        power_off();
    }
    if (call.flags & VM_SETUP_WARM)
        warm_up(&call);
    if (!send_frame(ctl, VM_SET, NULL, 0, NULL, 0))
        die("cannot reach the host");

    /* The call. Restored clones share one RNG state: reseeded before
     * anything of the command runs. */
    if (!recv_frame(ctl, &type, &buf, &len) || type != VM_CALL)
        die("no call from the host");
    if (!parse_call(buf, len, &call)) {
        send_error(ctl, VM_ERR_SETUP, "malformed call");
        power_off();
    }
    reseed(call.entropy);
    struct timespec now = { .tv_sec = (time_t)(call.realtime_ns / 1000000000u),
                            .tv_nsec = (long)(call.realtime_ns % 1000000000u) };
    clock_settime(CLOCK_REALTIME, &now);

    int in[2], out[2], errout[2], fail[2];
    stdio_pipes(in, out, errout, fail);
    if (kmsg >= 0)
        lseek(kmsg, 0, SEEK_END); /* what the kernel logged from here on */
    struct spawn sp = { &call, in[0], out[1], errout[1], fail[1] };
    pid_t cmd = spawn_command(&sp);
    if (cmd < 0)
        die("cannot start the command");
    close(in[0]);
    close(out[1]);
    close(errout[1]);
    close(fail[1]);
    struct exec_failure f;
    if (read_full(fail[0], &f, sizeof f)) {
        if (sp.why[0]) {
            send_error(ctl, f.kind, sp.why);
            power_off();
        }
        snprintf(why, sizeof why, "%s '%s': %s",
                 f.kind == VM_ERR_NOTFOUND ? "command not found:" : "cannot execute", call.argv[0],
                 strerror(f.err));
        if (f.kind == VM_ERR_NOTFOUND)
            snprintf(why, sizeof why, "command not found: '%s'", call.argv[0]);
        send_error(ctl, f.kind, why);
        power_off();
    }
    close(fail[0]);

    relay(ctl, cmd, in[1], out[0], errout[0]);
    int ws = 0;
    while (waitpid(cmd, &ws, 0) < 0 && errno == EINTR)
        ;
    uint32_t exit[2] = { (uint32_t)ws, 0 };
    if (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL && kmsg >= 0 && oom_logged(kmsg))
        exit[1] |= VM_EXIT_OOM;
    send_frame(ctl, VM_EXIT, exit, sizeof exit, NULL, 0);
    power_off();
}
