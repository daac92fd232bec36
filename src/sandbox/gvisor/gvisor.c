/*
 * sandbox/gvisor/gvisor.c: the `gvisor` isolation level. The command runs on
 * gVisor's user-space kernel (runsc, ptrace platform), so it never makes a
 * system call to the host kernel.
 *
 * prepare (supervisor): a private 0700 directory gets an OCI bundle built
 * from the same mount plan as the namespace level (a read-only root of
 * empty directories and the merged-/usr links, /usr and the policy's binds,
 * sized tmpfs /tmp, the workspace, generated /etc files), the static helper
 * cordon-gvisor-init, the seccomp profile and, for egress, the gateway's
 * unix socket, to which the helper relays the proxy port, its DNS stub and
 * the synthetic addresses (transparent egress, gvisor/init.c). A shim, our
 * child, joins the run's cgroup and starts the container (`runsc run`,
 * attached) whose first process is the helper: the sandbox is warm. The
 * shim then blocks at the start seam.
 *
 * start: the shim receives argv, environment and stdio, writes the process
 * spec and runs it with `runsc exec`, whose stdio are the received
 * descriptors (runsc donates them to the sandbox). Its status goes to
 * status_r; then the shim kills the container and exits.
 *
 * Every runsc process dies with the shim (parent-death signals along the
 * chain shim -> runsc run -> sandbox and gofer), and the shim with the
 * supervisor, so killing the shim ends the run, and the watchdog only has
 * the directory left to remove.
 */
#include "sandbox/gvisor/gvisor.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/hostpath.h"
#include "common/syscalls.h"
#include "sandbox/backend.h"
#include "sandbox/boundary.h"
#include "sandbox/cgroup.h"
#include "sandbox/engine.h"
#include "sandbox/meter.h"
#include "sandbox/plan.h"
#include "sandbox/start.h"
#include "sandbox/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* The helper and the compat library, embedded at build time (meson.build's blobs). */
extern const unsigned char cordon_gvisor_init_start[];
extern const uint64_t cordon_gvisor_init_size;
extern const unsigned char cordon_gvisor_compat_start[];
extern const uint64_t cordon_gvisor_compat_size;

#define INIT_PATH "/.cordon/init"
#define COMPAT_PATH "/.cordon/compat.so"
#define BPF_PATH "/.cordon/seccomp.bpf"
#define GW_DIR "/.cordon/gw"
#define GW_SOCK GW_DIR "/gateway.sock"
#define MAX_ARGS 16
#define START_TIMEOUT_MS 30000
/*
 * The run's cgroup holds gVisor itself besides the command: the sentry and
 * gofer are Go programs (~170 threads idle, ~4 more per mount, measured
 * here) and the sentry's own memory. Their share is added to the policy's
 * limits rather than taken from the command's. The command's processes are
 * counted inside, by gVisor's RLIMIT_NPROC (counts_pids): each costs ~5
 * host tasks (its stub process and the sentry's thread tracing it, measured
 * here), so the cgroup's pids limit only bounds what gVisor makes on the host.
 */
#define GVISOR_PIDS_OVERHEAD 1024
#define GVISOR_TASKS_PER_PROCESS 8
#define GVISOR_MEMORY_OVERHEAD (256ull << 20)
/* gVisor's memory file (a memfd of the sentry's): the meter's (sandbox/meter.h). */
#define GVISOR_MEMORY_FILE "runsc-memory"

struct gv_state {
    char dir[64];        /* the run's private directory */
    char runsc[PATH_MAX];
    char cid[40];
    bool rootless;
    bool gateway;
    bool host_uds;       /* --host-uds=open: the door, or listed host sockets */
    struct usock_keeper uds;          /* what runsc's gofer may connect to (sandbox/engine.h) */
    struct names_keeper names;        /* the names it may make in a host workspace */
    struct seccomp_program uds_filter;
    bool transparent;    /* egress through the helper's DNS stub and synthetic addresses */
    uint16_t ports[SYNTH_MAX_PORTS]; /* its listeners' ports */
    /* The allowed literals' IPv4 ranges the helper makes its own (door.h's
     * job, which a keeper does elsewhere: gVisor's connect()s are its own). */
    uint32_t nets[SYNTH_MAX_PORTS];
    unsigned prefixes[SYNTH_MAX_PORTS];
    size_t n_nets;
    size_t n_ports;
    struct confine_plan confine;
    char *argv_run[MAX_ARGS];   /* runsc ... run --bundle B CID */
    char *argv_exec[MAX_ARGS];  /* runsc ... exec --process P CID */
    char *argv_place[MAX_ARGS]; /* the same for the helper placing the call's files */
    char *root_arg;             /* --root=DIR/state */
    char store[8][PATH_MAX + 32];
    size_t n_store;
};

/* ---- paths and files ---- */

int gvisor_find_runsc(char *buf, size_t len, struct cordon_err *err)
{
    return hostpath_find_program("runsc", buf, len)
               ? 0 : err_set(err, CORDON_E_UNSUPPORTED,
                             "runsc is not installed (Debian: apt-get install runsc)");
}

/* mkdir DIR, or find a real directory there: never a link (the bundle's
 * root holds links such as /etc/localtime whose targets are host paths). */
static int make_dir(const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0755) == 0)
        return 0;
    if (errno != EEXIST || lstat(dir, &st) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* Make every missing directory of PATH (relative to the bundle's root ROOT). */
static int make_parents(const char *root, const char *path, bool last_too)
{
    char buf[PATH_MAX];
    if ((size_t)snprintf(buf, sizeof buf, "%s%s", root, path) >= sizeof buf)
        return -1;
    size_t skip = strlen(root);
    for (char *p = buf + skip + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (make_dir(buf) < 0)
                return -1;
            *p = '/';
        }
    if (last_too && make_dir(buf) < 0)
        return -1;
    return 0;
}

static int write_file(const char *path, const void *data, size_t len, mode_t mode,
                      struct cordon_err *err)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot create '%s'", path);
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return err_sys(err, CORDON_E_SETUP, "gvisor: cannot write '%s'", path);
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---- the bundle ---- */

/* Is DEST inside the mount of an earlier step (so its mountpoint is not ours to make)? */
static bool under_mount(const struct ns_plan *plan, size_t upto, const char *dest)
{
    for (size_t i = 0; i < upto; i++) {
        const struct mount_step *s = &plan->steps[i];
        if (s->kind != MOUNT_BIND && s->kind != MOUNT_TMPFS && s->kind != MOUNT_PROC)
            continue;
        size_t n = strlen(s->dest);
        if (strncmp(dest, s->dest, n) == 0 && dest[n] == '/')
            return true;
    }
    return false;
}

/*
 * DEST lies beneath an earlier bind, whose host tree may hold links an
 * earlier run planted: runsc would make the mountpoint through them (making
 * directories on the host, or mounting somewhere else). Refused where any
 * existing component is a link, as the namespace level refuses it
 * (mounts.c's open_parent); a missing one runsc makes, as that level does.
 */
static int check_beneath_bind(const struct ns_plan *plan, size_t upto, const char *dest,
                              struct cordon_err *err)
{
    const struct mount_step *cover = NULL;
    size_t best = 0;
    for (size_t i = 0; i < upto; i++) {
        const struct mount_step *s = &plan->steps[i];
        size_t n = strlen(s->dest);
        if ((s->kind == MOUNT_BIND || s->kind == MOUNT_TMPFS || s->kind == MOUNT_PROC) &&
            n > best && strncmp(dest, s->dest, n) == 0 && dest[n] == '/') {
            cover = s;
            best = n;
        }
    }
    if (!cover || cover->kind != MOUNT_BIND || cover->source_in_root)
        return 0; /* beneath gVisor's own tmpfs or proc: nothing planted there */
    _cleanup_close_ int top = open(cover->source, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (top < 0)
        return 0; /* not a directory: runsc refuses the mount itself */
    struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                       RESOLVE_NO_MAGICLINKS };
    int fd = sys_openat2(top, dest + best + 1, &how, sizeof how);
    if (fd >= 0)
        close(fd);
    else if (errno == ELOOP || errno == ENOTDIR || errno == EXDEV)
        return err_set(err, CORDON_E_SETUP, "cannot make '%s': a component is not a directory "
                       "(a symbolic link is never followed there)", dest);
    return 0;
}

/*
 * Is the host workspace's entry REL one runsc cannot mount over? A link (it
 * mounts at the target), a socket (it fails) or a FIFO (it hangs).
 */
static bool unmaskable(const char *workspace, const char *rel)
{
    char path[PATH_MAX];
    struct stat st;
    if ((size_t)snprintf(path, sizeof path, "%s%s", workspace, rel) >= sizeof path)
        return true;
    return lstat(path, &st) < 0 || S_ISLNK(st.st_mode) || S_ISSOCK(st.st_mode) ||
           S_ISFIFO(st.st_mode);
}

/* gVisor brings its own /dev (null, zero, full, random, urandom, tty, pts, fd). */
static bool gvisor_provides(const struct mount_step *s)
{
    if (strcmp(s->dest, "/dev/shm") == 0)
        return false; /* sized by the policy */
    return strcmp(s->dest, "/dev") == 0 || strncmp(s->dest, "/dev/", 5) == 0;
}

static json_t *bind_mount(const char *dest, const char *source, bool writable)
{
    return json_pack("{s:s, s:s, s:s, s:[s, s, s]}", "destination", dest, "type", "bind",
                     "source", source, "options", "rbind", writable ? "rw" : "ro", "nosuid");
}

static json_t *tmpfs_mount(const char *dest, const char *data)
{
    json_t *opts = json_pack("[s, s]", "nosuid", "nodev");
    /*
     * gVisor's tmpfs takes mode and size; nr_inodes it does not know. The
     * owner stays gVisor's uid 0, the command's here (process_json), not
     * the namespace level's sandbox user, or the scratch workspace would
     * not be the command's to write.
     */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", data ? data : "");
    for (char *save = NULL, *o = strtok_r(buf, ",", &save); o; o = strtok_r(NULL, ",", &save))
        if (strncmp(o, "nr_inodes=", 10) != 0 && strncmp(o, "uid=", 4) != 0 &&
            strncmp(o, "gid=", 4) != 0)
            json_array_append_new(opts, json_string(o));
    return json_pack("{s:s, s:s, s:s, s:o}", "destination", dest, "type", "tmpfs", "source",
                     "tmpfs", "options", opts);
}

/*
 * The namespace level's mount plan as OCI mounts: the one place that
 * decides what a sandbox sees stays mounts.c, at both levels.
 */
static int plan_to_mounts(const struct policy *p, const struct ns_plan *plan, const char *dir,
                          json_t *mounts, struct cordon_err *err)
{
    char rootfs[PATH_MAX], path[PATH_MAX];
    snprintf(rootfs, sizeof rootfs, "%s/bundle/rootfs", dir);
    char empty[PATH_MAX];
    snprintf(empty, sizeof empty, "%s/files/empty", dir);
    /* Mode 0: a mask is unreadable, as the namespace level's /dev/null bind is. */
    TRY(write_file(empty, "", 0, 0, err));

    for (size_t i = 0; i < plan->n_steps; i++) {
        const struct mount_step *s = &plan->steps[i];
        if (gvisor_provides(s))
            continue;
        bool ours = !under_mount(plan, i, s->dest);
        switch (s->kind) {
        case MOUNT_DIR:
            if (ours && make_parents(rootfs, s->dest, true) < 0)
                return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", s->dest);
            continue;
        case MOUNT_SYMLINK:
            snprintf(path, sizeof path, "%s%s", rootfs, s->dest);
            if (ours && (make_parents(rootfs, s->dest, false) < 0 ||
                         (symlink(s->source, path) < 0 && errno != EEXIST)))
                return err_sys(err, CORDON_E_SETUP, "gvisor: cannot link '%s'", s->dest);
            continue;
        case MOUNT_PROC:
            /* Read-only, as the namespace level mounts it: nothing of it is the command's to set. */
            json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:[s, s, s, s]}",
                                                    "destination", s->dest, "type", "proc",
                                                    "source", "proc", "options", "ro", "nosuid",
                                                    "nodev", "noexec"));
            break;
        case MOUNT_DEVPTS:
            continue;
        case MOUNT_SYSFS:
        case MOUNT_MQUEUE:
        case MOUNT_CGROUP2:
        case MOUNT_MASK:
            /* Only an OCI container's plan has these, and gvisor builds none. */
            return err_set(err, CORDON_E_INTERNAL, "gvisor: no mount of kind %d", (int)s->kind);
        case MOUNT_TMPFS:
            json_array_append_new(mounts, tmpfs_mount(s->dest, s->data));
            break;
        case MOUNT_FILE: {
            char file[PATH_MAX];
            snprintf(file, sizeof file, "%s/files/%zu", dir, i);
            TRY(write_file(file, s->source, strlen(s->source), 0444, err));
            json_array_append_new(mounts, bind_mount(s->dest, file, false));
            break;
        }
        case MOUNT_BIND: {
            const char *source = s->source;
            char in_ws[PATH_MAX];
            if (s->source_in_root && p->workspace) {
                /* A protected entry bound read-only over itself. */
                snprintf(in_ws, sizeof in_ws, "%s%s", p->workspace,
                         s->dest + strlen("/workspace"));
                source = in_ws;
            } else if (strcmp(source, "/dev/null") == 0 && s->in_workspace && p->workspace &&
                       unmaskable(p->workspace, s->dest + strlen("/workspace"))) {
                /*
                 * The workspace's sockets, FIFOs and protected links are
                 * masked in place at the namespace level. runsc resolves
                 * a mount's destination through links (it would mount at
                 * the target, making its directories in the host
                 * workspace) and cannot mount over a socket or FIFO.
                 */
                return err_set(err, CORDON_E_UNSUPPORTED,
                               "gvisor: cannot hide '%s' in the workspace: runsc mounts "
                               "nothing over a link, socket or FIFO (move it out, or use "
                               "another level)",
                               s->dest + strlen("/workspace/"));
            } else if (strcmp(source, "/dev/null") == 0) {
                /* A mask: an empty read-only file, not a host device. */
                source = empty;
            }
            struct stat st;
            if (stat(source, &st) < 0) {
                if (s->optional || s->in_workspace)
                    continue;
                return err_sys(err, CORDON_E_SETUP, "gvisor: cannot bind '%s'", source);
            }
            json_array_append_new(mounts, bind_mount(s->dest, source, s->writable));
            break;
        }
        }
        /* The mountpoint, where it lies in the bundle's own root. */
        if (!ours) {
            TRY(check_beneath_bind(plan, i, s->dest, err));
            continue;
        }
        struct stat st;
        bool is_dir = s->kind != MOUNT_FILE &&
                      (s->kind != MOUNT_BIND || (stat(s->source, &st) == 0 && S_ISDIR(st.st_mode)));
        snprintf(path, sizeof path, "%s%s", rootfs, s->dest);
        if (make_parents(rootfs, s->dest, is_dir) < 0)
            return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", s->dest);
        if (!is_dir) {
            int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
            if (fd < 0 && errno != EEXIST)
                return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", s->dest);
            if (fd >= 0)
                close(fd);
        }
    }
    return 0;
}

/*
 * The plan's rlimits, which gVisor enforces inside (but RLIMIT_DATA, the
 * namespace level's fallback for memory: without a cgroup the supervisor
 * holds memory by its meter instead, so the plan has none).
 */
static json_t *rlimits_json(const struct confine_plan *c)
{
    static const char *const names[] = {
        [RLIMIT_CPU] = "RLIMIT_CPU",       [RLIMIT_FSIZE] = "RLIMIT_FSIZE",
        [RLIMIT_DATA] = "RLIMIT_DATA",     [RLIMIT_STACK] = "RLIMIT_STACK",
        [RLIMIT_CORE] = "RLIMIT_CORE",     [RLIMIT_RSS] = "RLIMIT_RSS",
        [RLIMIT_NPROC] = "RLIMIT_NPROC",   [RLIMIT_NOFILE] = "RLIMIT_NOFILE",
        [RLIMIT_MEMLOCK] = "RLIMIT_MEMLOCK", [RLIMIT_AS] = "RLIMIT_AS",
    };
    json_t *a = json_array();
    for (size_t i = 0; i < c->n_rlimits; i++) {
        int r = c->rlimits[i].resource;
        if (r < 0 || (size_t)r >= sizeof names / sizeof names[0] || !names[r])
            continue;
        json_array_append_new(a, json_pack("{s:s, s:I, s:I}", "type", names[r], "hard",
                                           (json_int_t)c->rlimits[i].value.rlim_max, "soft",
                                           (json_int_t)c->rlimits[i].value.rlim_cur));
    }
    return a;
}

/*
 * The OCI process for ARGS: no capability, no new privileges, as gVisor's
 * uid 0. The gofer shows the caller's files as owned by 0 (root-started: the
 * host's owners; rootless: its user namespace maps the caller to 0) and
 * creates files on the host as the caller, so uid 0 is what the namespace
 * level's idmapped sandbox user is there: the caller, for the files the
 * policy binds, and nobody to the host kernel, which it never calls.
 */
static json_t *process_json(json_t *args, json_t *env, const char *cwd,
                            const struct gv_state *st)
{
    return json_pack("{s:o, s:o, s:s, s:{s:i, s:i}, s:b, s:{s:[], s:[], s:[], s:[], s:[]}, s:o}",
                     "args", args, "env", env, "cwd", cwd, "user", "uid", 0, "gid", 0, "noNewPrivileges", 1, "capabilities", "bounding", "effective",
                     "inheritable", "permitted", "ambient", "rlimits",
                     rlimits_json(&st->confine));
}

static int write_json(const char *path, json_t *o, struct cordon_err *err)
{
    if (!o)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    _cleanup_free_ char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    return write_file(path, text, strlen(text), 0600, err);
}

/* FILE in the run's files, bound read-only at DEST (whose mountpoint is made later). */
static int add_file(const struct gv_state *st, json_t *mounts, const char *name,
                    const char *dest, const void *data, size_t len, mode_t mode,
                    struct cordon_err *err)
{
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s/files/%s", st->dir, name);
    TRY(write_file(file, data, len, mode, err));
    json_array_append_new(mounts, bind_mount(dest, file, false));
    return 0;
}

/*
 * The helper, the compat library (gvisor/compat.c: this runsc refuses stat
 * flags Linux accepts) preloaded through /etc/ld.so.preload, the seccomp
 * profile and the gateway's door, bound read-only at /.cordon.
 */
static int add_cordon_files(const struct policy *p, const struct gv_state *st, json_t *mounts,
                            struct cordon_err *err)
{
    char file[PATH_MAX], point[PATH_MAX];
    static const char preload[] = COMPAT_PATH "\n";
    TRY(add_file(st, mounts, "init", INIT_PATH, cordon_gvisor_init_start,
                 (size_t)cordon_gvisor_init_size, 0555, err));
    TRY(add_file(st, mounts, "compat.so", COMPAT_PATH, cordon_gvisor_compat_start,
                 (size_t)cordon_gvisor_compat_size, 0555, err));
    TRY(add_file(st, mounts, "ld.so.preload", "/etc/ld.so.preload", preload,
                 sizeof preload - 1, 0444, err));

    struct seccomp_program prog = { 0 };
    TRY(seccomp_program_build(p, &prog, err));
    snprintf(file, sizeof file, "%s/files/seccomp.bpf", st->dir);
    int rc = write_file(file, prog.filter, prog.len * sizeof prog.filter[0], 0444, err);
    seccomp_program_release(&prog);
    TRY(rc);
    json_array_append_new(mounts, bind_mount(BPF_PATH, file, false));

    static const char *const points[] = { INIT_PATH, COMPAT_PATH, "/etc/ld.so.preload",
                                          BPF_PATH };
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        struct stat sb;
        snprintf(point, sizeof point, "%s/bundle/rootfs%s", st->dir, points[i]);
        if (lstat(point, &sb) < 0) /* a policy's bind at /etc/ld.so.preload made it */
            TRY(write_file(point, "", 0, 0444, err));
    }
    if (!st->gateway)
        return 0;
    snprintf(file, sizeof file, "%s/gw", st->dir);
    json_array_append_new(mounts, bind_mount(GW_DIR, file, false));
    snprintf(point, sizeof point, "%s/bundle/rootfs" GW_DIR, st->dir);
    if (mkdir(point, 0755) < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", point);
    return 0;
}

/*
 * The helper's command line: `init HOME`, with the gateway's socket when
 * the run has egress, and for transparent egress the synthetic range, the
 * DNS stub's address, the ports to listen on and "+NET/PREFIX" for each
 * allowed literal's range.
 */
static json_t *init_args(const struct gv_state *st)
{
    json_t *a = json_pack("[s, s, s]", INIT_PATH, "init", SANDBOX_HOME);
    if (st->gateway)
        json_array_append_new(a, json_string(GW_SOCK));
    if (!st->transparent)
        return a;
    char text[32];
    snprintf(text, sizeof text, "%u.%u.%u.%u/%d", SYNTH_NET >> 24, (SYNTH_NET >> 16) & 0xff,
             (SYNTH_NET >> 8) & 0xff, SYNTH_NET & 0xff, SYNTH_PREFIX);
    json_array_append_new(a, json_string(text));
    snprintf(text, sizeof text, "%u.%u.%u.%u", DNS_STUB_ADDR >> 24, (DNS_STUB_ADDR >> 16) & 0xff,
             (DNS_STUB_ADDR >> 8) & 0xff, DNS_STUB_ADDR & 0xff);
    json_array_append_new(a, json_string(text));
    for (size_t i = 0; i < st->n_ports; i++) {
        snprintf(text, sizeof text, "%u", st->ports[i]);
        json_array_append_new(a, json_string(text));
    }
    for (size_t i = 0; i < st->n_nets; i++) {
        uint32_t n = st->nets[i];
        snprintf(text, sizeof text, "+%u.%u.%u.%u/%u", n >> 24, (n >> 16) & 0xff,
                 (n >> 8) & 0xff, n & 0xff, st->prefixes[i]);
        json_array_append_new(a, json_string(text));
    }
    return a;
}

/*
 * gVisor's capabilities for the helper: none without egress. With it,
 * CAP_SYS_RESOURCE, for its relay to raise its own RLIMIT_NOFILE past the
 * command's (the command's processes take their limits from the helper's
 * spec, so that stays the policy's); for transparent egress also the two
 * it needs to make the synthetic range loopback's and to listen on port 53
 * and the policy's ports. Every process of the helper drops them before it
 * says it is ready, before anything of the call runs (gvisor/init.c), and
 * the command's own process gets none (process_json).
 */
static json_t *init_capabilities(const struct gv_state *st)
{
    static const char *const sets[] = { "bounding", "effective", "permitted" };
    json_t *caps = json_pack("{s:[], s:[], s:[], s:[], s:[]}", "bounding", "effective",
                             "inheritable", "permitted", "ambient");
    for (size_t i = 0; st->gateway && i < sizeof sets / sizeof sets[0]; i++) {
        json_t *set = json_object_get(caps, sets[i]);
        json_array_append_new(set, json_string("CAP_SYS_RESOURCE"));
        if (st->transparent) {
            json_array_append_new(set, json_string("CAP_NET_ADMIN"));
            json_array_append_new(set, json_string("CAP_NET_BIND_SERVICE"));
        }
    }
    return caps;
}

static int build_bundle(const struct sandbox_setup *s, struct gv_state *st,
                        struct cordon_err *err)
{
    const struct policy *p = s->p;
    char path[PATH_MAX];
    static const char *const subdirs[] = { "bundle", "bundle/rootfs", "bundle/rootfs/.cordon",
                                           "files", "state", "gw" };
    for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", st->dir, subdirs[i]);
        if (mkdir(path, 0755) < 0)
            return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", path);
    }

    struct ns_plan plan = { .caller_is_root = geteuid() == 0, .confine = *s->confine,
                            .transparent = st->transparent };
    _cleanup_(json_decrefp) json_t *mounts = json_array();
    int rc = mounts_plan(p, &plan, s->host_base + 1, s->workspace, err);
    if (rc == 0 && s->ca_pem)
        rc = mounts_add_ca(&plan, s->ca_pem, err);
    if (rc == 0)
        rc = plan_to_mounts(p, &plan, st->dir, mounts, err);
    st->confine = *s->confine;
    mounts_plan_release(&plan);
    if (rc < 0 || add_cordon_files(p, st, mounts, err) < 0)
        return -1;
    /*
     * runsc mounts gVisor's own sysfs at /sys unless the spec mounts
     * something there; the namespace level has no /sys: an empty read-only
     * tmpfs stands in for it.
     */
    json_t *sys = tmpfs_mount("/sys", "mode=0555,size=4k");
    json_array_append_new(json_object_get(sys, "options"), json_string("ro"));
    json_array_append_new(mounts, sys);
    snprintf(path, sizeof path, "%s/bundle/rootfs/sys", st->dir);
    if (make_dir(path) < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", path);

    json_t *init = process_json(init_args(st), json_pack("[s]", "PATH=/usr/bin:/bin"), "/", st);
    json_object_set_new(init, "capabilities", init_capabilities(st));
    json_t *config = json_pack(
        "{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:{s:[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}]}}",
        "ociVersion", "1.0.2",
        "process", init,
        "root", "path", "rootfs", "readonly", 1,
        "hostname", SANDBOX_HOSTNAME,
        "mounts", json_incref(mounts),
        "linux", "namespaces", "type", "pid", "type", "network", "type", "ipc", "type", "uts",
        "type", "mount");
    snprintf(path, sizeof path, "%s/bundle/config.json", st->dir);
    return write_json(path, config, err);
}

/* ---- runsc's command lines ---- */

/* A + B + C in the state's own storage (the shim reads it after fork). */
static char *keep(struct gv_state *st, const char *a, const char *b, const char *c)
{
    char *slot = st->store[st->n_store++];
    const char *parts[] = { a, b, c };
    size_t n = 0;
    for (size_t i = 0; i < 3; i++)
        for (const char *x = parts[i]; *x && n + 1 < sizeof st->store[0]; x++)
            slot[n++] = *x;
    slot[n] = '\0';
    return slot;
}

/* runsc and its global flags into ARGV; returns how many. */
static size_t global_args(struct gv_state *st, char **argv)
{
    size_t n = 0;
    argv[n++] = st->runsc;
    argv[n++] = st->root_arg;
    argv[n++] = "--platform=ptrace";
    argv[n++] = "--network=none";
    /* The run's cgroup already holds runsc's processes: runsc makes none. */
    argv[n++] = "--ignore-cgroups";
    if (st->host_uds)
        argv[n++] = "--host-uds=open"; /* each connect checked by our keeper (sandbox/engine.h) */
    if (st->rootless)
        argv[n++] = "--rootless";
    return n;
}

static void plan_commands(struct gv_state *st)
{
    st->root_arg = keep(st, "--root=", st->dir, "/state");
    size_t n = global_args(st, st->argv_run);
    st->argv_run[n++] = "run";
    st->argv_run[n++] = keep(st, "--bundle=", st->dir, "/bundle");
    st->argv_run[n++] = st->cid;
    st->argv_run[n] = NULL;
    n = global_args(st, st->argv_exec);
    st->argv_exec[n++] = "exec";
    st->argv_exec[n++] = keep(st, "--process=", st->dir, "/process.json");
    st->argv_exec[n++] = keep(st, "--internal-pid-file=", st->dir, "/exec.pid");
    st->argv_exec[n++] = st->cid;
    st->argv_exec[n] = NULL;
    n = global_args(st, st->argv_place);
    st->argv_place[n++] = "exec";
    st->argv_place[n++] = keep(st, "--process=", st->dir, "/place.json");
    st->argv_place[n++] = st->cid;
    st->argv_place[n] = NULL;
}

/* ---- the shim: our child, the boundary's top process ---- */

struct shim_fds {
    int err_w, status_w, start_r;
    struct cgroup_ticket cg;
};

static _Noreturn void shim_fail(const struct shim_fds *fds, struct cordon_err *err)
{
    (void)!write(fds->err_w, err, sizeof *err);
    _exit(err_exit_code(err));
}

/*
 * Fork and exec ARGV with STDIO, dying with the shim; under UDS's filter
 * when it is given (runsc run: its gofer's connect()s go to our keeper).
 */
static pid_t spawn_filtered(char *const *argv, const int stdio[3], const struct gv_state *st,
                            const struct engine_keeper *uds)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (uds && engine_keeper_confine(&st->uds_filter, uds->give) < 0)
        _exit(125);
    for (int i = 0; i < 3; i++)
        if (dup2(stdio[i], i) < 0)
            _exit(125);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    sys_close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    execv(argv[0], argv);
    _exit(127);
}

static pid_t spawn(char *const *argv, const int stdio[3])
{
    return spawn_filtered(argv, stdio, NULL, NULL);
}

/* The tail of runsc's log: why it failed, in its own words. */
static void runsc_error(const char *log, struct cordon_err *err)
{
    char buf[4096];
    ssize_t n = -1;
    int fd = open(log, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        off_t size = lseek(fd, 0, SEEK_END);
        n = pread(fd, buf, sizeof buf - 1, size > (off_t)sizeof buf - 1 ? size - (off_t)sizeof buf + 1 : 0);
        close(fd);
    }
    if (n <= 0) {
        err_set(err, CORDON_E_SETUP, "gvisor: runsc failed to start the sandbox");
        return;
    }
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    char *line = strrchr(buf, '\n');
    err_set(err, CORDON_E_SETUP, "gvisor: runsc failed to start the sandbox: %s",
            line ? line + 1 : buf);
}

static int write_process(const struct gv_state *st, const struct start_message *m,
                         struct cordon_err *err)
{
    json_t *args = json_pack("[s, s, s]", INIT_PATH, "exec", BPF_PATH);
    json_t *env = json_array();
    for (char **a = m->argv; *a; a++)
        json_array_append_new(args, json_string(*a));
    for (char **e = m->envp; *e; e++)
        json_array_append_new(env, json_string(*e));
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/process.json", st->dir);
    unlink(path);
    return write_json(path, process_json(args, env, "/workspace", st), err);
}

/*
 * The call's files, written inside by the helper (`init place`, their memfd
 * on its stdin) before the command starts: the scratch workspace is
 * gVisor's own tmpfs, which no host process can reach, and a host
 * workspace is written through the gofer as the caller, as the command's
 * own files are.
 */
static int place_files(const struct gv_state *st, struct start_message *m, int null,
                       struct cordon_err *err)
{
    char path[PATH_MAX], why[256] = "";
    snprintf(path, sizeof path, "%s/place.json", st->dir);
    TRY(write_json(path, process_json(json_pack("[s, s]", INIT_PATH, "place"), json_array(),
                                      "/workspace", st),
                   err));
    int out[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot place the call's files");
    int stdio[3] = { m->files, null, out[1] };
    pid_t pid = spawn(st->argv_place, stdio);
    close(out[1]);
    closep(&m->files);
    ssize_t n = pid > 0 ? read(out[0], why, sizeof why - 1) : 0;
    close(out[0]);
    int ws = -1;
    if (pid > 0)
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
            ;
    if (pid > 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
        return 0;
    why[n > 0 ? n : 0] = '\0';
    why[strcspn(why, "\n")] = '\0';
    return err_set(err, CORDON_E_SETUP, "gvisor: %s",
                   why[0] ? why : "cannot place the call's files");
}

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

/*
 * runsc exec does not pass signals on: the command, by its pid inside
 * (runsc exec wrote it), gets SIG through runsc kill.
 */
static void forward_signal(struct gv_state *st, pid_t exec_pid, int sig, int null)
{
    char path[PATH_MAX], buf[32] = "";
    snprintf(path, sizeof path, "%s/exec.pid", st->dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    int inner = n > 0 ? atoi(buf) : 0;
    if (inner <= 0) {
        kill(exec_pid, sig); /* not started inside yet: end the attempt */
        return;
    }
    char *argv[MAX_ARGS + 4];
    size_t k = global_args(st, argv);
    char pidarg[32], signum[16];
    snprintf(pidarg, sizeof pidarg, "--pid=%d", inner);
    snprintf(signum, sizeof signum, "%d", sig);
    argv[k++] = "kill";
    argv[k++] = pidarg;
    argv[k++] = st->cid;
    argv[k++] = signum;
    argv[k] = NULL;
    int stdio[3] = { null, null, null };
    pid_t pid = spawn(argv, stdio);
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

/* Wait for runsc exec, passing the supervisor's signals on meanwhile. */
static int wait_exec(struct gv_state *st, pid_t exec_pid, int sfd, int null)
{
    int pidfd = sys_pidfd_open(exec_pid, 0);
    int ws = 0;
    for (;;) {
        struct pollfd p[2] = { { .fd = pidfd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
        if (pidfd < 0 || poll(p, 2, -1) < 0) {
            if (pidfd >= 0 && errno == EINTR)
                continue;
            break; /* no pidfd: wait without forwarding */
        }
        if (p[1].revents) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
                forward_signal(st, exec_pid, (int)si.ssi_signo, null);
        }
        if (p[0].revents)
            break;
    }
    while (waitpid(exec_pid, &ws, 0) < 0 && errno == EINTR)
        ;
    if (pidfd >= 0)
        close(pidfd);
    return ws;
}

/*
 * runsc exec exits with the command's status, or 128+N when signal N killed
 * it: the two cannot be told apart, so 129..192 count as signals.
 */
static int wait_status(int code)
{
    if (code > 128 && code <= 128 + 64)
        return code - 128; /* a wait status with only the signal set */
    return (code & 0xff) << 8;
}

/*
 * runsc exec exits 128 when it loses the sandbox. The sandbox's runsc run
 * ends soon after the sentry dies; a command's own exit(128) leaves it up.
 */
static bool sandbox_died(pid_t sandbox)
{
    int pidfd = sys_pidfd_open(sandbox, 0);
    if (pidfd < 0)
        return false;
    struct pollfd p = { .fd = pidfd, .events = POLLIN };
    bool died = poll(&p, 1, 1000) == 1;
    close(pidfd);
    return died;
}

static _Noreturn void shim_main(struct gv_state *st, const struct shim_fds *fds, pid_t parent)
{
    struct cordon_err err = { 0 };
    if (cgroup_ticket_use(&fds->cg) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot join the run's cgroup");
        shim_fail(fds, &err);
    }
    for (int c = 0; c < CGROUP_COUNT; c++)
        if (fds->cg.fd[c] >= 0)
            close(fds->cg.fd[c]);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != parent)
        _exit(125);
    prctl(PR_SET_NAME, "cordon-gvisor", 0, 0, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

    int ready[2];
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/runsc.log", st->dir);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (null < 0 || logfd < 0 || pipe2(ready, O_CLOEXEC) < 0) {
        err_sys(&err, CORDON_E_SETUP, "gvisor: cannot set up the sandbox's stdio");
        shim_fail(fds, &err);
    }
    int run_stdio[3] = { null, ready[1], logfd };
    struct engine_keeper uds = { -1, -1 };
    bool kept = st->host_uds || st->names.mode != NAMES_OFF;
    if (kept && engine_keeper_start(&st->uds, &st->names, &uds, &err) < 0)
        shim_fail(fds, &err);
    pid_t sandbox = spawn_filtered(st->argv_run, run_stdio, st, kept ? &uds : NULL);
    if (uds.give >= 0)
        close(uds.give);
    if (sandbox < 0) {
        err_sys(&err, CORDON_E_SETUP, "gvisor: cannot start runsc");
        shim_fail(fds, &err);
    }
    close(ready[1]);
    close(logfd);
    /* The helper says "R" once it runs (and listens, for egress). */
    char c = 0;
    ssize_t n = -1;
    struct pollfd pf = { .fd = ready[0], .events = POLLIN };
    int r;
    /* A runsc that fails to mount may hang instead of exiting. */
    do
        r = poll(&pf, 1, START_TIMEOUT_MS);
    while (r < 0 && errno == EINTR);
    if (r == 1)
        n = read(ready[0], &c, 1);
    close(ready[0]);
    if (n != 1 || c != 'R') {
        kill(sandbox, SIGKILL);
        waitpid(sandbox, NULL, 0);
        runsc_error(log, &err);
        shim_fail(fds, &err);
    }

    struct start_message m;
    if (start_ready_send(fds->start_r) < 0 || start_message_recv(fds->start_r, &m) < 0)
        _exit(125); /* released without a start; the sandbox dies with us */
    close(fds->start_r);
    /* A terminal would have to come from gVisor's devpts: not yet. */
    if (m.tty) {
        err_set(&err, CORDON_E_UNSUPPORTED, "gvisor: --tty is not supported at this level yet");
        shim_fail(fds, &err);
    }
    if (m.files >= 0 && place_files(st, &m, null, &err) < 0)
        shim_fail(fds, &err);
    if (write_process(st, &m, &err) < 0)
        shim_fail(fds, &err);

    sigset_t block;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaddset(&block, forwarded[i]);
    sigprocmask(SIG_BLOCK, &block, NULL);
    int sfd = signalfd(-1, &block, SFD_CLOEXEC);
    pid_t exec_pid = spawn(st->argv_exec, m.stdio);
    for (int i = 0; i < 3; i++)
        close(m.stdio[i]);
    if (exec_pid < 0) {
        err_sys(&err, CORDON_E_SETUP, "gvisor: cannot start runsc exec");
        shim_fail(fds, &err);
    }
    /* Exec'd: what follows is the command's status, not a setup error. */
    close(fds->err_w);
    int ws = wait_exec(st, exec_pid, sfd, null);
    int status = WIFEXITED(ws) ? wait_status(WEXITSTATUS(ws)) : ws;
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 128 && sandbox_died(sandbox))
        status = SIGKILL; /* the sandbox was killed under the command (the OOM killer) */
    /* Whatever the command left running dies with the sandbox, now. */
    kill(sandbox, SIGKILL);
    (void)!write(fds->status_w, &status, sizeof status);
    /* A subreaper, we inherit the sandbox and gofer when runsc run dies:
     * once they are reaped, no process of the run is left on the host. */
    for (;;) {
        pid_t w = waitpid(-1, NULL, 0);
        if (w < 0 && errno != EINTR)
            break;
    }
    _exit(0);
}

/* ---- supervisor side ---- */

static int gv_probe(struct cordon_err *err)
{
    char runsc[PATH_MAX];
    return gvisor_find_runsc(runsc, sizeof runsc, err);
}

int gvisor_platform_probe(const char *name, struct cordon_err *err)
{
    char runsc[PATH_MAX];
    TRY(gvisor_find_runsc(runsc, sizeof runsc, err));
    char dir[48];
    snprintf(dir, sizeof dir, "/tmp/cordon-gvisor-probe-%d-XXXXXX", (int)getpid());
    if (!mkdtemp(dir))
        return err_sys(err, CORDON_E_SETUP, "cannot make a directory in /tmp");
    char root[64], platform[64];
    snprintf(root, sizeof root, "--root=%s", dir); /* 7 + 47 bytes at most */
    snprintf(platform, sizeof platform, "--platform=%s", name);
    char *argv[] = { runsc, root, platform, "--network=none", "--ignore-cgroups",
                     geteuid() ? "--rootless" : "--network=none", "do", "true", NULL };
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    int stdio[3] = { null, null, null };
    pid_t pid = spawn(argv, stdio);
    close(null);
    int ws = -1, rc = -1;
    _cleanup_close_ int pidfd = pid > 0 ? sys_pidfd_open(pid, 0) : -1;
    struct pollfd pf = { .fd = pidfd, .events = POLLIN };
    if (pid > 0 && pidfd >= 0 && poll(&pf, 1, 3000) == 1) {
        waitpid(pid, &ws, 0);
        rc = WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : -1;
        if (rc < 0)
            err_set(err, CORDON_E_UNSUPPORTED, "runsc --platform=%s do true failed (status %d)",
                    name, WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
    } else if (pid > 0) {
        /* Its sandbox dies with it (runsc do runs attached). */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        err_set(err, CORDON_E_UNSUPPORTED, "runsc --platform=%s do true did not finish in 3 s",
                name);
    } else {
        err_sys(err, CORDON_E_SETUP, "cannot start runsc");
    }
    hostpath_remove_tree(dir);
    return rc;
}

static void gv_release(struct sandbox_boundary *b)
{
    struct gv_state *st = b->state;
    boundary_release(b);
    if (st) {
        seccomp_program_release(&st->uds_filter);
        if (st->names.root >= 0)
            close(st->names.root);
        hostpath_remove_tree(st->dir);
        free(st);
        b->state = NULL;
    }
}

/* The gateway's door: a unix socket the sandbox reaches through --host-uds=open. */
static int open_door(const struct gv_state *st, struct cordon_err *err)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if ((size_t)snprintf(a.sun_path, sizeof a.sun_path, "%s/gw/gateway.sock", st->dir) >=
        sizeof a.sun_path)
        return err_set(err, CORDON_E_SETUP, "gvisor: socket path too long");
    _cleanup_close_ int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 128) < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot listen on '%s'", a.sun_path);
    return TAKE_FD(l);
}

/* The door's socket file, the one host socket the gofer reaches besides the listed ones. */
static int list_door(struct gv_state *st, struct cordon_err *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/gw/gateway.sock", st->dir);
    _cleanup_close_ int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot open '%s'", path);
    return usock_keeper_list(&st->uds, fd, err);
}

/*
 * runsc's gofer reaches host sockets for the door and the listed ones alone,
 * and makes names in a host workspace as the policy says: its connect()s
 * and those calls go to a keeper of ours (sandbox/engine.h).
 */
static int plan_keeper(const struct sandbox_setup *s, struct gv_state *st,
                       struct cordon_err *err)
{
    st->host_uds = s->gateway || s->p->n_unix_sockets;
    names_keeper_init(&st->names, s->workspace ? names_mode_for(s->p, NAMES_CHECK) : NAMES_OFF,
                      s->p);
    st->names.g = s->workspace; /* the keeper's copy (a fork): the entries not to be moved */
    if (st->names.mode != NAMES_OFF &&
        names_keeper_root(&st->names, fcntl(s->workspace->fd, F_DUPFD_CLOEXEC, 0)) < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot open the workspace's root");
    if ((st->host_uds || st->names.mode != NAMES_OFF) &&
        (usock_keeper_init(&st->uds, s->p, false, err) < 0 ||
         (s->gateway && list_door(st, err) < 0) ||
         names_program(st->names.mode, st->host_uds, &st->uds_filter, err) < 0))
        return -1;
    st->uds.gofer = true;
    return 0;
}

static int gv_prepare(const struct sandbox_setup *s, struct sandbox_boundary *b,
                      struct cordon_err *err)
{
    *b = (struct sandbox_boundary){ .pid = -1, .err_r = -1, .status_r = -1, .start_w = -1,
                                    .door = -1, .layer = -1 };
    struct gv_state *st = calloc(1, sizeof *st);
    if (!st)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    b->state = st;
    st->names.root = -1;
    st->rootless = geteuid() != 0;
    st->gateway = s->gateway;
    if (s->gateway) {
        st->transparent = true;
        st->n_ports = boundary_transparent_ports(s->p, st->ports, st->nets, st->prefixes,
                                                 SYNTH_MAX_PORTS, &st->n_nets);
    }
    int rc = -1;
    pid_t shim = -1;
    int errp[2] = { -1, -1 }, statp[2] = { -1, -1 }, startp[2] = { -1, -1 };
    struct cgroup_ticket ticket = CGROUP_TICKET_INIT;

    if (gvisor_find_runsc(st->runsc, sizeof st->runsc, err) < 0)
        goto out;
    /* Should the supervisor die, the watchdog removes it. */
    if (boundary_private_dir(s, "gvisor", st->dir, sizeof st->dir, err) < 0) {
        err_prefix(err, "gvisor");
        goto out;
    }
    snprintf(st->cid, sizeof st->cid, "cordon-%s", strrchr(st->dir, '-') + 1);
    if (build_bundle(s, st, err) < 0)
        goto out;
    if (s->gateway && (b->door = open_door(st, err)) < 0)
        goto out;
    if (plan_keeper(s, st, err) < 0)
        goto out;
    /* The helper serves the stub and the synthetic addresses: the gateway
     * takes its relay's prefaces on the door (gvisor/init.c). */
    b->relay_transparent = st->transparent;
    plan_commands(st);

    if (pipe2(errp, O_CLOEXEC) < 0 || pipe2(statp, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, startp) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot create pipes");
        goto out;
    }
    const struct policy_limits *lim = &s->p->limits;
    if ((cgroup_has(s->cg, CGROUP_PIDS) && lim->pids &&
         cgroup_set_pids(s->cg, lim->pids * GVISOR_TASKS_PER_PROCESS + GVISOR_PIDS_OVERHEAD,
                         err) < 0) ||
        (cgroup_has(s->cg, CGROUP_MEMORY) && lim->memory &&
         cgroup_set_memory(s->cg, lim->memory + GVISOR_MEMORY_OVERHEAD, err) < 0))
        goto out;
    if (s->cg->version && cgroup_ticket_open(s->cg, &ticket, err) < 0)
        goto out;
    pid_t parent = getpid();
    shim = fork();
    if (shim < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot start the gvisor shim");
        goto out;
    }
    if (shim == 0) {
        if (s->in_child)
            s->in_child(s->in_child_arg);
        struct shim_fds fds = { .err_w = errp[1], .status_w = statp[1], .start_r = startp[1],
                                .cg = ticket };
        int keepfds[3 + CGROUP_COUNT] = { errp[1], statp[1], startp[1] };
        size_t n = 3;
        for (int c = 0; c < CGROUP_COUNT; c++)
            if (ticket.fd[c] >= 0)
                keepfds[n++] = ticket.fd[c];
        close_fds_except(keepfds, n);
        shim_main(st, &fds, parent);
    }
    closep(&errp[1]);
    closep(&statp[1]);
    closep(&startp[1]);
    errp[1] = statp[1] = startp[1] = -1;
    cgroup_ticket_close(&ticket);
    if (start_ready_wait(startp[0]) < 0) {
        boundary_child_error(errp[0], err);
        goto out;
    }
    /* The sandbox runs: where no cgroup holds its memory, the supervisor's
     * meter does, or the run does not start. */
    if (s->meter && mem_meter_open(shim, GVISOR_MEMORY_FILE, s->meter, err) < 0) {
        err_prefix(err, "gvisor");
        goto out;
    }
    b->pid = shim;
    shim = -1;
    b->err_r = TAKE_FD(errp[0]);
    b->status_r = TAKE_FD(statp[0]);
    b->start_w = TAKE_FD(startp[0]);
    rc = 0;
out:
    if (shim > 0) {
        kill(shim, SIGKILL);
        waitpid(shim, NULL, 0);
    }
    int *fds[] = { &errp[0], &errp[1], &statp[0], &statp[1], &startp[0], &startp[1] };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        closep(fds[i]);
    cgroup_ticket_close(&ticket);
    if (rc < 0)
        gv_release(b);
    return rc;
}

const struct sandbox_backend gvisor_backend = {
    .name = "gvisor",
    .level = CORDON_LEVEL_GVISOR,
    .meters_memory = true,
    .meters_cpu = true,
    .counts_pids = true,
    .tmpfs_sizes = true,  /* gVisor's tmpfs takes a size, not nr_inodes (tmpfs_mount) */
    .probe = gv_probe,
    .prepare = gv_prepare,
    .release = gv_release,
};
