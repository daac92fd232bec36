/*
 * sandbox/microvm.c: the `microvm` isolation level. The command gets a
 * kernel of its own: QEMU's microvm machine boots cordon's guest kernel with
 * the guest agent (guest/agent.c) as /init, or restores a snapshot of one
 * that is booted and idle. The boundary's top process is a shim, a fork of
 * the supervisor, which owns QEMU: it brings the guest up at prepare, blocks
 * at the start seam, then hands the call to the agent over virtio-serial and
 * relays stdio and egress connections (to the gateway's door, in the shim's
 * own network namespace) until the command's status comes back.
 *
 * QEMU itself is confined as well, never instead: no network (the shim's
 * empty network namespace), a user namespace, Landlock over the paths it
 * serves, the run's own seccomp filter (the command's at the other levels)
 * and QEMU's own seccomp sandbox (-sandbox on,...) stacked on it. Without a
 * hardware hypervisor QEMU emulates the CPU (TCG): that is an emulator, not
 * a hypervisor boundary, and a policy must say microvm.accel: tcg to run so.
 */
#include "sandbox/microvm.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/syscalls.h"
#include "common/text.h"
#include "policy/policy.h"
#include "policy/rules.h"
#include "sandbox/boundary.h"
#include "sandbox/cgroup.h"
#include "common/landlock.h"
#include "sandbox/plan.h"
#include "sandbox/start.h"
#include "sandbox/supervise.h"
#include "sandbox/vmproto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define QEMU_DEFAULT "/usr/bin/qemu-system-x86_64"
#define KERNEL_DEFAULT "/var/cache/cordon/guest-kernel/current"
#define SNAPSHOT_DIR_DEFAULT "/var/cache/cordon/microvm"
#define INITRAMFS_NAME "cordon-guest.cpio"
/*
 * A snapshot file: this magic, the digest and a newline, then "ram " and the
 * guest memory's offset in 16 hex digits and a newline; QEMU's migration
 * stream of the devices; then, from that page-aligned offset, the guest's
 * memory as a sparse image (pages that were zero are holes).
 */
#define SNAPSHOT_MAGIC "cordon-microvm-snapshot 2\n"
#define SNAPSHOT_RAM_FIELD "ram %016llx\n"
#define SNAPSHOT_HEAD_LEN (sizeof SNAPSHOT_MAGIC - 1 + 65 + 21)
#define PAGE 4096u
/* 9p share slots: the device layout is fixed so one snapshot serves every
 * policy; a run points the slots it uses at its paths, the rest at /usr. */
#define VM_SLOTS 6 /* microvm has 8 virtio-mmio transports; virtio-serial takes one */
#define BOOT_TIMEOUT_MS 30000
#define RESTORE_TIMEOUT_MS 10000
#define SETUP_TIMEOUT_MS 30000 /* mounting the shares: ~50 ms under TCG */
#define VM_MAX_RAM_MIB 2048

/* The guest agent knows these by vm_wire.h's names. */
_Static_assert(VM_GATEWAY_PORT == GATEWAY_PORT, "the guest's proxy port");
_Static_assert(VM_DNS_STUB_ADDR == DNS_STUB_ADDR, "the guest's DNS stub");
_Static_assert(VM_SYNTH_NET == SYNTH_NET && VM_SYNTH_PREFIX == SYNTH_PREFIX,
               "the guest's synthetic range");
_Static_assert(SYNTH_MAX_PORTS <= VM_MAX_PORTS, "the call carries every transparent port");

struct vm_share {
    const char *host;  /* host directory */
    const char *guest; /* where the agent mounts it */
    const char *file;  /* a file bind: the file's name in HOST, bound at GUEST; or NULL */
    bool writable;
};

/* Everything the shim needs, decided in the supervisor before fork(). */
struct vm_plan {
    char qemu[PATH_MAX];
    char kernel[PATH_MAX];
    char initramfs[PATH_MAX];
    char snapshot[PATH_MAX];   /* the snapshot file for this layout, or "" */
    char snapshot_dir[PATH_MAX - 64];
    char digest[65];           /* kernel, initramfs, QEMU and the machine's shape */
    char kernel_digest[65], initramfs_digest[65];
    bool kvm;
    uint64_t mem_mib;
    struct vm_share shares[VM_SLOTS];
    char paths[VM_SLOTS][PATH_MAX]; /* the shares' host paths, owned here */
    size_t n_shares;
    struct vm_buf setup;       /* VM_SETUP's policy part: rlimits, mounts, filter */
    /* Transparent egress: the guest's DNS stub, and a listener per port. */
    bool transparent;
    /* The run's CA and the trust store with it, for the guest's /etc (or NULL). */
    const char *ca_pem;
    char *ca_bundle;
    uint16_t ports[VM_MAX_PORTS];
    uint32_t n_ports;
    /* The run's own syscall filter, for QEMU too: its -sandbox is QEMU's
     * idea of what QEMU needs; this one is cordon's, under it. */
    struct seccomp_program qemu_filter;
    bool quiet;                /* QEMU's complaints are expected (the KVM probe) */
};

/* ---- digests and paths ---- */

static int file_sha256(const char *path, char out[65], struct cordon_err *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED, "microvm: cannot read '%s'", path);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    }
    static __thread char buf[1 << 16];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        EVP_DigestUpdate(ctx, buf, (size_t)n);
    unsigned char md[32];
    EVP_DigestFinal_ex(ctx, md, NULL);
    EVP_MD_CTX_free(ctx);
    if (n < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED, "microvm: cannot read '%s'", path);
    hex_encode(md, sizeof md, out);
    return 0;
}

/*
 * The digest of PATH, remembered in DIR by the file's identity (device,
 * inode, size, change time): hashing a 15 MB kernel on every run would cost
 * more than restoring the guest. A remembered digest is trusted on the same
 * terms as a snapshot (ours or root's, writable by no one else).
 */
static int cached_sha256(const char *path, const char *dir, char out[65], struct cordon_err *err)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED, "microvm: cannot read '%s'", path);
    char memo[PATH_MAX];
    if (snprintf(memo, sizeof memo, "%s/digest-%llx-%llx-%llx-%lld.%09ld", dir,
                 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                 (unsigned long long)st.st_size, (long long)st.st_ctim.tv_sec,
                 st.st_ctim.tv_nsec) >= (int)sizeof memo)
        return file_sha256(path, out, err);
    int fd = open(memo, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat ms;
    if (fd >= 0 && fstat(fd, &ms) == 0 && S_ISREG(ms.st_mode) && !(ms.st_mode & 022) &&
        (ms.st_uid == 0 || ms.st_uid == geteuid()) && read_full(fd, out, 64)) {
        out[64] = '\0';
        bool hex = true;
        for (int i = 0; i < 64; i++)
            hex &= (out[i] >= '0' && out[i] <= '9') || (out[i] >= 'a' && out[i] <= 'f');
        close(fd);
        if (hex)
            return 0;
    } else if (fd >= 0) {
        close(fd);
    }
    TRY(file_sha256(path, out, err));
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.%d", memo, (int)getpid());
    if (mkdir(dir, 0755) == 0 || errno == EEXIST) {
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) {
            bool ok = write(fd, out, 64) == 64;
            close(fd);
            if (!ok || rename(tmp, memo) < 0)
                unlink(tmp);
        }
    }
    return 0;
}

static void text_sha256(const char *text, char out[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(text, strlen(text), md, &len, EVP_sha256(), NULL);
    hex_encode(md, sizeof md, out);
}

static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

/* The initramfs beside the running executable (build/ holds both), unless named. */
static int find_initramfs(char out[PATH_MAX], struct cordon_err *err)
{
    const char *named = getenv("CORDON_GUEST_INITRAMFS");
    if (named && *named) {
        snprintf(out, PATH_MAX, "%s", named);
    } else {
        char exe[PATH_MAX - 32];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n < 0)
            return err_sys(err, CORDON_E_UNSUPPORTED, "microvm: cannot find cordon's executable");
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        snprintf(out, PATH_MAX, "%s/%s", exe, INITRAMFS_NAME);
    }
    if (access(out, R_OK) < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED,
                       "microvm: no guest initramfs at '%s' (set CORDON_GUEST_INITRAMFS)", out);
    return 0;
}

/* Whether KVM boots our guest here (see kvm_verdict, with the QEMU code). */
static bool hardware_kvm(char *why, size_t size);

/* Without hardware KVM, only a policy that allows TCG runs here. */
static int microvm_admits(const struct policy *p, struct cordon_err *err)
{
    char why[160];
    if (p->microvm_accel == POLICY_ACCEL_TCG || hardware_kvm(why, sizeof why))
        return 0;
    return err_set(err, CORDON_E_UNSUPPORTED,
                   "microvm: no hardware KVM here (%s); QEMU's software emulation (TCG) "
                   "is an emulator, not a hypervisor boundary: allow it with microvm.accel: tcg",
                   why);
}

static int microvm_probe(struct cordon_err *err)
{
    const char *qemu = env_or("CORDON_QEMU", QEMU_DEFAULT);
    if (access(qemu, X_OK) < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED, "microvm: no QEMU at '%s'", qemu);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/vmlinux", env_or("CORDON_GUEST_KERNEL", KERNEL_DEFAULT));
    if (access(path, R_OK) < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED,
                       "microvm: no guest kernel at '%s' (scripts/build-guest-kernel.sh builds it)",
                       path);
    return find_initramfs(path, err);
}

const char *microvm_accel_note(bool kvm)
{
    return kvm ? "hardware virtualization (KVM)"
               : "TCG: QEMU emulates the CPU; an emulator, not a hypervisor boundary";
}

bool microvm_has_kvm(char *why, size_t size)
{
    return hardware_kvm(why, size);
}

/* ---- the plan ---- */

/* A file is shared as its directory, which the guest mounts aside and
 * detaches once the one file is bound (guest/agent.c). */
static int add_share(struct vm_plan *v, char *host, const char *guest, bool writable,
                     struct cordon_err *err)
{
    struct stat st;
    if (stat(host, &st) < 0)
        return err_sys(err, CORDON_E_SETUP, "microvm: cannot share '%s'", host);
    const char *file = NULL;
    if (!S_ISDIR(st.st_mode)) {
        char *slash = strrchr(host, '/');
        if (!S_ISREG(st.st_mode) || !slash || !slash[1])
            return err_set(err, CORDON_E_UNSUPPORTED,
                           "microvm: '%s' is neither a directory nor a regular file", host);
        if (writable)
            return err_set(err, CORDON_E_UNSUPPORTED,
                           "microvm: '%s': a file is shared read-only at this level", host);
        /* HOST is the plan's copy: split it into directory and name. */
        *slash = '\0';
        file = slash + 1;
        if (!*host)
            host = "/";
    }
    if (v->n_shares == VM_SLOTS)
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "microvm: at most %d shared directories (/usr, the workspace and binds)",
                       VM_SLOTS);
    v->shares[v->n_shares++] = (struct vm_share){ .host = host, .guest = guest, .file = file,
                                                  .writable = writable };
    return 0;
}

static int plan_vm(const struct sandbox_setup *s, struct vm_plan *v, struct cordon_err *err)
{
    const struct policy *p = s->p;
    char why[160];
    v->kvm = hardware_kvm(why, sizeof why); /* else TCG was allowed: admits() came first */
    snprintf(v->qemu, sizeof v->qemu, "%s", env_or("CORDON_QEMU", QEMU_DEFAULT));
    snprintf(v->kernel, sizeof v->kernel, "%s/vmlinux",
             env_or("CORDON_GUEST_KERNEL", KERNEL_DEFAULT));
    TRY(microvm_probe(err));
    TRY(seccomp_program_build(p, &v->qemu_filter, err));
    snprintf(v->paths[0], sizeof v->paths[0], "/usr");
    TRY(find_initramfs(v->initramfs, err));
    snprintf(v->snapshot_dir, sizeof v->snapshot_dir, "%s",
             env_or("CORDON_MICROVM_SNAPSHOTS", SNAPSHOT_DIR_DEFAULT));
    TRY(cached_sha256(v->kernel, v->snapshot_dir, v->kernel_digest, err));
    TRY(cached_sha256(v->initramfs, v->snapshot_dir, v->initramfs_digest, err));

    /* Guest RAM (touched pages only cost): where the host's cgroup holds the
     * memory limit, inside it, leaving QEMU its own share; where the limit
     * is the command's rlimit (no cgroup), above it, so the rlimit is what
     * stops the command, as at the other levels; without a limit, the most
     * this level gives a guest. */
    bool cg_memory = s->cg && s->cg->version && cgroup_has(s->cg, CGROUP_MEMORY);
    uint64_t mem = p->limits.memory;
    if (!mem)
        v->mem_mib = VM_MAX_RAM_MIB;
    else if (cg_memory)
        v->mem_mib = mem > (256ull << 20) ? (mem - (96ull << 20)) >> 20 : 160;
    else
        v->mem_mib = (mem + (256ull << 20)) >> 20;
    if (v->mem_mib > VM_MAX_RAM_MIB)
        v->mem_mib = VM_MAX_RAM_MIB;

    /* The snapshot is valid for this kernel, initramfs, QEMU build and machine. */
    struct stat q;
    if (stat(v->qemu, &q) < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED, "microvm: cannot stat '%s'", v->qemu);
    /* The format's version too: a file of an older format under the same
     * name would never load, and never be replaced. */
    char shape[PATH_MAX + 512];
    snprintf(shape, sizeof shape, "%.26s kernel %s initramfs %s qemu %s %lld %lld.%09ld mem %llu slots %d accel %s serial %s",
             SNAPSHOT_MAGIC,
             v->kernel_digest, v->initramfs_digest, v->qemu, (long long)q.st_size,
             (long long)q.st_mtim.tv_sec, q.st_mtim.tv_nsec, (unsigned long long)v->mem_mib,
             VM_SLOTS, v->kvm ? "kvm" : "tcg", getenv("CORDON_MICROVM_CONSOLE") ? "on" : "off");
    text_sha256(shape, v->digest);
    snprintf(v->snapshot, sizeof v->snapshot, "%s/%.32s.snap", v->snapshot_dir, v->digest);

    TRY(add_share(v, v->paths[0], "/usr", false, err));
    /* The guest's /etc: the view the shim builds in QEMU's mount namespace
     * (etc_view), one share instead of a bind per entry in the guest. */
    snprintf(v->paths[1], sizeof v->paths[1], "/etc");
    TRY(add_share(v, v->paths[1], "/etc", false, err));
    if (p->workspace) {
        snprintf(v->paths[2], sizeof v->paths[2], "%s", p->workspace);
        TRY(add_share(v, v->paths[2], "/workspace", true, err));
    }
    size_t first_bind = v->n_shares;
    if (first_bind + p->n_binds > VM_SLOTS)
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "microvm: at most %zu binds here (each is a 9p share of the guest)",
                       VM_SLOTS - first_bind);
    for (size_t i = 0; i < p->n_binds; i++) {
        snprintf(v->paths[first_bind + i], sizeof v->paths[0], "%s", p->binds[i].source);
        TRY(add_share(v, v->paths[first_bind + i], p->binds[i].dest, p->binds[i].writable, err));
    }
    /* Transparent egress for names: a listener per port a name rule allows
     * (the proxy's own port excepted: the guest's forwarder holds it). */
    if (s->gateway) {
        uint16_t ports[SYNTH_MAX_PORTS];
        size_t n = egress_rules_name_ports(&p->egress.rules, ports, SYNTH_MAX_PORTS);
        v->transparent = true;
        for (size_t i = 0; i < n; i++)
            if (ports[i] != GATEWAY_PORT)
                v->ports[v->n_ports++] = ports[i];
    }

    /* The call's policy part; argv, environment and entropy follow at start. */
    struct vm_buf *b = &v->setup;
    const struct confine_plan *c = s->confine;
    size_t n_rl = c->n_rlimits + (p->limits.pids ? 1 : 0);
    vm_buf_u32(b, (uint32_t)n_rl);
    for (size_t i = 0; i < c->n_rlimits; i++) {
        vm_buf_u32(b, (uint32_t)c->rlimits[i].resource);
        vm_buf_u64(b, c->rlimits[i].value.rlim_cur);
        vm_buf_u64(b, c->rlimits[i].value.rlim_max);
    }
    if (p->limits.pids) {
        /* Pids inside the guest: the command's user holds at most this many. */
        vm_buf_u32(b, RLIMIT_NPROC);
        vm_buf_u64(b, p->limits.pids);
        vm_buf_u64(b, p->limits.pids);
    }
    char opts[128];
    const struct workspace_guard *ws = p->workspace ? s->workspace : NULL;
    size_t n_covers = ws ? ws->n_entries : 0;
    if (v->n_shares + 3 + n_covers > VM_MAX_MOUNTS)
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "microvm: %zu protected entries in the workspace (at most %u)", n_covers,
                       VM_MAX_MOUNTS - VM_SLOTS - 3);
    size_t ca_len = 0;
    v->ca_pem = s->ca_pem;
    if (s->ca_pem)
        TRY(sandbox_ca_bundle(s->ca_pem, &v->ca_bundle, &ca_len, err));
    /* The audit log and its key, where a bind would show them: masked. */
    static char hidden[SANDBOX_MAX_HIDDEN][PATH_MAX];
    size_t n_hidden = sandbox_hidden_paths(p, hidden, SANDBOX_MAX_HIDDEN);
    vm_buf_u32(b, (uint32_t)(v->n_shares + 2 + (p->workspace ? 0 : 1) + n_covers + n_hidden));
    /* The tmpfs first (a bind beneath /tmp goes on top of it, not under it),
     * sized and capped as the namespace level's. */
    sandbox_tmpfs_opts(opts, sizeof opts, "mode=1777", p->tmp_size, p->tmp_inodes);
    vm_buf_u32(b, VM_MOUNT_TMPFS);
    vm_buf_str(b, opts);
    vm_buf_str(b, "/tmp");
    sandbox_tmpfs_opts(opts, sizeof opts, "mode=1777", p->shm_size, p->shm_inodes);
    vm_buf_u32(b, VM_MOUNT_TMPFS);
    vm_buf_str(b, opts);
    vm_buf_str(b, "/dev/shm");
    if (!p->workspace) {
        char owner[64];
        snprintf(owner, sizeof owner, "mode=0755,uid=%d,gid=%d", SANDBOX_UID, SANDBOX_GID);
        sandbox_tmpfs_opts(opts, sizeof opts, owner, p->workspace_size, p->workspace_inodes);
        vm_buf_u32(b, VM_MOUNT_TMPFS);
        vm_buf_str(b, opts);
        vm_buf_str(b, "/workspace");
    }
    for (size_t i = 0; i < v->n_shares; i++) {
        char tag[8];
        snprintf(tag, sizeof tag, "s%zu", i);
        vm_buf_u32(b, (v->shares[i].writable ? 0 : VM_MOUNT_READONLY) |
                          (v->shares[i].file ? VM_MOUNT_FILE : 0));
        if (v->shares[i].file) {
            char ftag[NAME_MAX + 16];
            snprintf(ftag, sizeof ftag, "%s/%s", tag, v->shares[i].file);
            vm_buf_str(b, ftag);
        } else {
            vm_buf_str(b, tag);
        }
        vm_buf_str(b, v->shares[i].guest);
    }
    /* After the workspace's share: its protected entries, read-only inside. */
    for (size_t i = 0; i < n_covers; i++) {
        char dest[PATH_MAX];
        snprintf(dest, sizeof dest, "/workspace/%s", ws->entries[i].rel);
        vm_buf_u32(b, ws->entries[i].cover == WORKSPACE_MASK ? VM_MOUNT_MASK : VM_MOUNT_COVER);
        vm_buf_str(b, "");
        vm_buf_str(b, dest);
    }
    for (size_t i = 0; i < n_hidden; i++) {
        vm_buf_u32(b, VM_MOUNT_MASK);
        vm_buf_str(b, "");
        vm_buf_str(b, hidden[i]);
    }
    struct seccomp_program prog = { 0 };
    TRY(seccomp_program_build(p, &prog, err));
    vm_buf_u32(b, prog.len);
    vm_buf_bytes(b, prog.filter, prog.len * sizeof prog.filter[0]);
    seccomp_program_release(&prog);
    if (b->failed)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    return 0;
}

/* ---- QEMU ---- */

struct vm {
    pid_t qemu;
    int pidfd;
    int ctl, eg, qmp;   /* our ends of the control port, the egress port and QMP */
    int ram;            /* the guest's memory, a memfd QEMU maps shared */
};

/* The shim's QEMU, reaped before the shim goes: a QEMU that outlives it even
 * as a zombie would hold the run's cgroup. */
static pid_t shim_qemu = -1;

static void vm_kill(struct vm *vm)
{
    if (vm->qemu > 0) {
        kill(vm->qemu, SIGKILL);
        waitpid(vm->qemu, NULL, 0);
        vm->qemu = -1;
        shim_qemu = -1;
    }
    closep(&vm->pidfd);
    closep(&vm->ctl);
    closep(&vm->eg);
    closep(&vm->qmp);
    closep(&vm->ram);
    vm->pidfd = vm->ctl = vm->eg = vm->qmp = vm->ram = -1;
}

struct argv_builder {
    char *v[128];
    size_t n;
};

static void arg(struct argv_builder *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(struct argv_builder *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    if (a->n < sizeof a->v / sizeof a->v[0] - 1)
        a->v[a->n++] = s;
    a->v[a->n] = NULL;
}

/* In QEMU's child, before exec: what it may touch on the host. */
static int confine_qemu(const struct vm_plan *v, bool saving, struct cordon_err *err)
{
    struct landlock_plan ll;
    landlock_plan_init(&ll, landlock_abi());
    static const char *const ro[] = { "/usr", "/lib", "/lib64", "/etc", "/proc", "/sys" };
    for (size_t i = 0; i < sizeof ro / sizeof ro[0]; i++)
        TRY(landlock_plan_add(&ll, ro[i], LANDLOCK_RO, true, err));
    TRY(landlock_plan_add(&ll, "/dev", LANDLOCK_DEV, false, err));
    TRY(landlock_plan_add(&ll, v->kernel, LANDLOCK_RO, false, err));
    TRY(landlock_plan_add(&ll, v->initramfs, LANDLOCK_RO, false, err));
    for (size_t i = 0; i < v->n_shares; i++)
        TRY(landlock_plan_add(&ll, v->shares[i].host,
                              v->shares[i].writable ? LANDLOCK_HOST_RW : LANDLOCK_RO, false, err));
    (void)saving; /* the snapshot travels as an open descriptor either way */
    /* Debugging only: the guest's console, written to a file the caller names. */
    const char *console = getenv("CORDON_MICROVM_CONSOLE");
    char dir[PATH_MAX];
    if (console && snprintf(dir, sizeof dir, "%s", console) < (int)sizeof dir && strrchr(dir, '/')) {
        *strrchr(dir, '/') = '\0';
        TRY(landlock_plan_add(&ll, *dir ? dir : "/", LANDLOCK_RW, false, err));
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot set no_new_privs");
    TRY(landlock_plan_apply(&ll, err));
    return seccomp_program_install(&v->qemu_filter, err);
}

/* Start QEMU; RESTORE_FD >= 0 restores the snapshot read from it. */
/*
 * Start QEMU; with INCOMING it waits, paused, for a migration stream (see
 * vm_restore). The guest's memory is a memfd we hold too: a snapshot saves
 * it as a file of its own, and a restore fills it while QEMU starts.
 */
static int vm_spawn(const struct vm_plan *v, bool incoming, struct vm *vm, struct cordon_err *err)
{
    int ctl[2] = { -1, -1 }, eg[2] = { -1, -1 }, qmp[2] = { -1, -1 };
    *vm = (struct vm){ .qemu = -1, .pidfd = -1, .ctl = -1, .eg = -1, .qmp = -1, .ram = -1 };
    int ram = memfd_create("cordon-vm-ram", MFD_CLOEXEC);
    if (ram < 0 || ftruncate(ram, (off_t)(v->mem_mib << 20)) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, eg) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, qmp) < 0) {
        int all[] = { ram, ctl[0], ctl[1], eg[0], eg[1], qmp[0], qmp[1] };
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i] >= 0)
                close(all[i]);
        return err_sys(err, CORDON_E_SETUP, "microvm: cannot create the guest's memory and sockets");
    }
    struct argv_builder a = { .n = 0 };
    arg(&a, "%s", v->qemu);
    arg(&a, "-M");
    arg(&a, "microvm,x-option-roms=off,acpi=off,isa-serial=%s,memory-backend=ram",
        getenv("CORDON_MICROVM_CONSOLE") ? "on" : "off");
    arg(&a, "-object");
    arg(&a, "memory-backend-file,id=ram,size=%lluM,mem-path=/proc/self/fd/%d,share=on",
        (unsigned long long)v->mem_mib, ram);
    arg(&a, "-accel");
    arg(&a, "%s", v->kvm ? "kvm" : "tcg,tb-size=64");
    arg(&a, "-cpu");
    arg(&a, "%s", v->kvm ? "host" : "max");
    arg(&a, "-m");
    arg(&a, "%lluM", (unsigned long long)v->mem_mib);
    arg(&a, "-smp");
    arg(&a, "1");
    static const char *const fixed[] = { "-nodefaults", "-no-user-config", "-display", "none",
                                         "-no-reboot", "-kernel" };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        arg(&a, "%s", fixed[i]);
    arg(&a, "%s", v->kernel);
    arg(&a, "-initrd");
    arg(&a, "%s", v->initramfs);
    arg(&a, "-append");
    arg(&a, "console=ttyS0 quiet panic=-1 random.trust_cpu=on");
    const char *console = getenv("CORDON_MICROVM_CONSOLE");
    if (console) {
        arg(&a, "-serial");
        arg(&a, "file:%s", console);
    }
    arg(&a, "-device");
    arg(&a, "virtio-serial-device,max_ports=3");
    arg(&a, "-chardev");
    arg(&a, "socket,id=ctl,fd=%d", ctl[1]);
    arg(&a, "-device");
    arg(&a, "virtserialport,chardev=ctl,nr=1");
    arg(&a, "-chardev");
    arg(&a, "socket,id=eg,fd=%d", eg[1]);
    arg(&a, "-device");
    arg(&a, "virtserialport,chardev=eg,nr=2");
    for (size_t i = 0; i < VM_SLOTS; i++) {
        bool used = i < v->n_shares;
        arg(&a, "-fsdev");
        arg(&a, "local,id=fs%zu,path=%s,security_model=none,multidevs=remap%s", i, used ? v->shares[i].host : "/usr",
            used && v->shares[i].writable ? "" : ",readonly=on");
        arg(&a, "-device");
        arg(&a, "virtio-9p-device,fsdev=fs%zu,mount_tag=s%zu", i, i);
    }
    arg(&a, "-chardev");
    arg(&a, "socket,id=qmp,fd=%d", qmp[1]);
    arg(&a, "-mon");
    arg(&a, "chardev=qmp,mode=control");
    /* QEMU's own seccomp sandbox; spawn stays allowed only to save a snapshot? No:
     * the snapshot travels over a descriptor, so nothing is ever spawned. */
    arg(&a, "-sandbox");
    arg(&a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
    if (incoming) {
        /* Paused once loaded, then `cont`: under TCG a guest restored straight
         * into the running state is never kicked and stays idle. */
        arg(&a, "-S");
        arg(&a, "-incoming");
        arg(&a, "defer");
    }
    bool oom = false;
    for (size_t i = 0; i < a.n; i++)
        oom |= !a.v[i];

    pid_t pid = oom ? -1 : fork();
    if (pid == 0) {
        struct cordon_err cerr = { 0 };
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        int keep[] = { ctl[1], eg[1], qmp[1], ram, 2 };
        for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
            if (keep[i] >= 0)
                fcntl(keep[i], F_SETFD, 0);
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 0);
        dup2(devnull, 1);
        /* A snapshot that fails to load is expected now and then (a changed
         * QEMU): the cold boot that follows speaks for itself. */
        if ((incoming || v->quiet) && !getenv("CORDON_MICROVM_CONSOLE"))
            dup2(devnull, 2);
        if (confine_qemu(v, false, &cerr) < 0) {
            dprintf(2, "cordon: microvm: %s\n", cerr.msg);
            _exit(125);
        }
        execv(a.v[0], a.v);
        _exit(127);
    }
    for (size_t i = 0; i < a.n; i++)
        free(a.v[i]);
    close(ctl[1]);
    close(eg[1]);
    close(qmp[1]);
    if (pid < 0) {
        close(ctl[0]);
        close(eg[0]);
        close(qmp[0]);
        close(ram);
        return err_sys(err, CORDON_E_SETUP, "microvm: cannot start QEMU");
    }
    vm->qemu = pid;
    shim_qemu = pid;
    vm->pidfd = sys_pidfd_open(pid, 0);
    vm->ctl = ctl[0];
    vm->eg = eg[0];
    vm->qmp = qmp[0];
    vm->ram = ram;
    return 0;
}

/* ---- QMP: one command, its answer ---- */

static int qmp_line(int fd, char *buf, size_t size, int timeout_ms)
{
    size_t n = 0;
    uint64_t deadline = monotonic_us() + (uint64_t)timeout_ms * 1000;
    while (n < size - 1) {
        uint64_t now = monotonic_us();
        if (now >= deadline)
            return -1;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, (int)((deadline - now) / 1000) + 1) <= 0)
            return -1;
        ssize_t r = read(fd, buf + n, 1);
        if (r <= 0)
            return -1;
        if (buf[n] == '\n') {
            buf[n] = '\0';
            return 0;
        }
        n++;
    }
    return -1;
}

/* Send CMD (with FD passed alongside when >= 0); 0 when it returned, its answer in OUT. */
static int qmp(int sock, const char *cmd, int fd, char *out, size_t size)
{
    int rc = fd >= 0 ? send_fds(sock, cmd, strlen(cmd), &fd, 1)
                     : (write(sock, cmd, strlen(cmd)) == (ssize_t)strlen(cmd) ? 0 : -1);
    if (rc < 0)
        return -1;
    for (;;) {
        if (qmp_line(sock, out, size, 10000) < 0)
            return -1;
        if (strstr(out, "\"return\""))
            return 0;
        if (strstr(out, "\"error\""))
            return -1;
        /* an event: read on */
    }
}

static int qmp_handshake(int sock)
{
    char line[4096];
    if (qmp_line(sock, line, sizeof line, 10000) < 0 || !strstr(line, "QMP"))
        return -1;
    return qmp(sock, "{\"execute\":\"qmp_capabilities\"}\n", -1, line, sizeof line);
}

/* ---- guest frames, read whole with a deadline (boot and restore only) ---- */

static enum cordon_err_kind error_kind(uint32_t vm_kind)
{
    return vm_kind == VM_ERR_NOTFOUND ? CORDON_E_NOTFOUND
           : vm_kind == VM_ERR_NOEXEC ? CORDON_E_NOEXEC
                                      : CORDON_E_SETUP;
}

/* A VM_ERROR frame F as ERR: the guest's words, shown to the user, printable bytes only. */
static void guest_error(const struct vm_frame *f, struct cordon_err *err)
{
    uint32_t kind;
    memcpy(&kind, f->data, 4);
    size_t mlen = f->len - 4 < sizeof err->msg - 1 ? f->len - 4 : sizeof err->msg - 1;
    err->kind = error_kind(kind);
    memcpy(err->msg, f->data + 4, mlen);
    err->msg[mlen] = '\0';
    for (size_t i = 0; i < mlen; i++)
        if ((unsigned char)err->msg[i] < 0x20 || (unsigned char)err->msg[i] > 0x7e)
            err->msg[i] = '?';
}

/*
 * The guest's next frame, which must be WANT (VM_READY once it is up, VM_SET
 * once the setup is in place) and the last it sends until the host speaks:
 * an error frame is its reason, anything else breaks the protocol.
 */
static int wait_frame(struct vm *vm, uint32_t want, int timeout_ms, struct cordon_err *err)
{
    struct vm_reader *r = malloc(sizeof *r);
    if (!r)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    vm_reader_init(r, VM_PORT_CONTROL);
    uint64_t deadline = monotonic_us() + (uint64_t)timeout_ms * 1000;
    const char *what = want == VM_READY ? "come up" : "set the run up";
    int rc = -1;
    char buf[VM_ERROR_MAX + VM_FRAME_HEADER];
    for (;;) {
        uint64_t now = monotonic_us();
        struct pollfd p = { .fd = vm->ctl, .events = POLLIN };
        if (now >= deadline || poll(&p, 1, (int)((deadline - now) / 1000) + 1) <= 0) {
            err_set(err, CORDON_E_SETUP, "microvm: the guest did not %s within %d ms", what,
                    timeout_ms);
            break;
        }
        ssize_t n = read(vm->ctl, buf, sizeof buf);
        if (n <= 0) {
            err_set(err, CORDON_E_SETUP, "microvm: the guest stopped before it could %s", what);
            break;
        }
        size_t used;
        struct vm_frame f;
        int got = vm_reader_feed(r, buf, (size_t)n, &used, &f, err);
        if (got < 0)
            break;
        if (got == 1 && f.type == VM_ERROR) {
            guest_error(&f, err);
            break;
        }
        if (got == 1 && f.type == want && used == (size_t)n) {
            rc = 0;
            break;
        }
        if (got == 1) {
            err_set(err, CORDON_E_SETUP, "microvm: the guest spoke out of turn (frame type %u)",
                    f.type);
            break;
        }
    }
    free(r);
    return rc;
}

/* ---- snapshots ---- */

/* The snapshot for V, opened and checked, positioned at QEMU's stream; -1 if none fits. */
/* The snapshot for V's layout, its header checked; *RAM_AT is where its memory starts. */
static int snapshot_open(const struct vm_plan *v, off_t *ram_at)
{
    int fd = open(v->snapshot, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    struct stat st;
    char head[SNAPSHOT_HEAD_LEN + 1];
    unsigned long long at = 0;
    char nl = 0;
    const size_t magic = sizeof SNAPSHOT_MAGIC - 1;
    /* Guest memory is code the guest runs: only a file no one else could
     * have written is trusted. */
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 022) ||
        (st.st_uid != 0 && st.st_uid != geteuid()) || !read_full(fd, head, SNAPSHOT_HEAD_LEN) ||
        memcmp(head, SNAPSHOT_MAGIC, magic) || memcmp(head + magic, v->digest, 64) ||
        head[magic + 64] != '\n' || (head[SNAPSHOT_HEAD_LEN] = '\0',
                                     sscanf(head + magic + 65, "ram %16llx%c", &at, &nl) != 2) ||
        nl != '\n' || at % PAGE || at < SNAPSHOT_HEAD_LEN || (off_t)at > st.st_size) {
        close(fd);
        return -1;
    }
    *ram_at = (off_t)at;
    return fd;
}

/* The image from FD's offset RAM_AT on into the guest memory RAM of SIZE bytes:
 * only its data, the holes are zero already. */
static int ram_load(int fd, off_t ram_at, int ram, uint64_t size)
{
    for (off_t at = ram_at;;) {
        off_t data = lseek(fd, at, SEEK_DATA);
        if (data < 0)
            return errno == ENXIO ? 0 : -1;
        off_t hole = lseek(fd, data, SEEK_HOLE);
        if (hole < 0 || (uint64_t)(hole - ram_at) > size ||
            lseek(ram, data - ram_at, SEEK_SET) < 0)
            return -1;
        for (off_t from = data; from < hole;) {
            ssize_t n = sendfile(ram, fd, &from, (size_t)(hole - from));
            if (n <= 0)
                return -1;
        }
        at = hole;
    }
}

/* The guest memory RAM of SIZE bytes into FD from RAM_AT on, zero pages left as holes. */
static bool ram_save(int fd, off_t ram_at, int ram, uint64_t size)
{
    const unsigned char *mem = mmap(NULL, size, PROT_READ, MAP_SHARED, ram, 0);
    if (mem == MAP_FAILED)
        return false;
    static const unsigned char zero[PAGE];
    bool ok = true;
    for (off_t at = 0; ok && (uint64_t)at < size;) {
        off_t data = lseek(ram, at, SEEK_DATA);
        if (data < 0) {
            ok = errno == ENXIO;
            break;
        }
        off_t end = lseek(ram, data, SEEK_HOLE);
        if (end < 0 || (uint64_t)end > size) {
            ok = false;
            break;
        }
        /* Runs of pages that are not all zero, written where they belong. */
        for (off_t p = data; ok && p < end;) {
            while (p < end && !memcmp(mem + p, zero, PAGE))
                p += PAGE;
            off_t run = p;
            while (p < end && memcmp(mem + p, zero, PAGE))
                p += PAGE;
            if (p > run)
                ok = pwrite_full(fd, mem + run, (size_t)(p - run), ram_at + run);
        }
        at = end;
    }
    munmap((void *)mem, size);
    return ok;
}

/* Keep the newest few snapshots: each kernel, initramfs or QEMU update leaves
 * one behind (tens of MB each) that no run can use again. */
#define SNAPSHOTS_KEPT 4

static void snapshot_prune(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct { char name[NAME_MAX + 1]; struct timespec mtime; } keep[SNAPSHOTS_KEPT + 1];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        struct stat st;
        if (len < 6 || strcmp(e->d_name + len - 5, ".snap") ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            continue;
        /* Insert by mtime, newest first; what falls off the end goes. */
        size_t at = n;
        while (at > 0 && (keep[at - 1].mtime.tv_sec < st.st_mtim.tv_sec ||
                          (keep[at - 1].mtime.tv_sec == st.st_mtim.tv_sec &&
                           keep[at - 1].mtime.tv_nsec < st.st_mtim.tv_nsec)))
            at--;
        if (at == SNAPSHOTS_KEPT) {
            unlinkat(dirfd(d), e->d_name, 0);
            continue;
        }
        if (n == SNAPSHOTS_KEPT) {
            unlinkat(dirfd(d), keep[n - 1].name, 0);
            n--;
        }
        memmove(&keep[at + 1], &keep[at], (n - at) * sizeof keep[0]);
        snprintf(keep[at].name, sizeof keep[at].name, "%s", e->d_name);
        keep[at].mtime = st.st_mtim;
        n++;
    }
    closedir(d);
}

/* Save the booted, idle guest (stopped meanwhile); failures only cost the snapshot. */
static void snapshot_save(const struct vm_plan *v, struct vm *vm)
{
    if (mkdir(v->snapshot_dir, 0755) < 0 && errno != EEXIST)
        return;
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s/.%d.tmp", v->snapshot_dir, (int)getpid());
    _cleanup_close_ int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char line[4096], field[32];
    /* The memory's offset is known once the stream is written: a placeholder first. */
    snprintf(field, sizeof field, SNAPSHOT_RAM_FIELD, 0ull);
    bool ok = write(fd, SNAPSHOT_MAGIC, sizeof SNAPSHOT_MAGIC - 1) ==
                  (ssize_t)(sizeof SNAPSHOT_MAGIC - 1) &&
              write(fd, v->digest, 64) == 64 && write(fd, "\n", 1) == 1 &&
              write(fd, field, strlen(field)) == (ssize_t)strlen(field);
    /* The stream carries the devices only: the memory is shared (the memfd)
     * and follows it as an image of its own. */
    ok = ok && qmp(vm->qmp, "{\"execute\":\"stop\"}\n", -1, line, sizeof line) == 0 &&
         qmp(vm->qmp,
             "{\"execute\":\"migrate-set-capabilities\",\"arguments\":{\"capabilities\":"
             "[{\"capability\":\"x-ignore-shared\",\"state\":true}]}}\n",
             -1, line, sizeof line) == 0 &&
         qmp(vm->qmp, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"snap\"}}\n", fd, line,
             sizeof line) == 0 &&
         qmp(vm->qmp, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:snap\"}}\n", -1, line,
             sizeof line) == 0;
    for (int i = 0; ok && i < 1000; i++) {
        if (qmp(vm->qmp, "{\"execute\":\"query-migrate\"}\n", -1, line, sizeof line) < 0 ||
            strstr(line, "\"failed\"") || strstr(line, "\"cancelled\"")) {
            ok = false;
            break;
        }
        if (strstr(line, "\"completed\""))
            break;
        usleep(5000);
    }
    off_t end = ok ? lseek(fd, 0, SEEK_END) : -1;
    off_t ram_at = end < 0 ? -1 : (end + PAGE - 1) / PAGE * PAGE;
    if (ram_at >= 0)
        snprintf(field, sizeof field, SNAPSHOT_RAM_FIELD, (unsigned long long)ram_at);
    ok = ram_at >= 0 && ram_save(fd, ram_at, vm->ram, v->mem_mib << 20) &&
         pwrite_full(fd, field, strlen(field), SNAPSHOT_HEAD_LEN - strlen(field)) &&
         fsync(fd) == 0 && rename(tmp, v->snapshot) == 0;
    if (!ok)
        unlink(tmp);
    else
        snapshot_prune(v->snapshot_dir);
    /* Running again either way: this guest still takes the call. */
    qmp(vm->qmp, "{\"execute\":\"cont\"}\n", -1, line, sizeof line);
}

/*
 * Restore: 0 when the guest waits, paused, as the snapshot left it; -1 when
 * there is none that fits, -2 when one fit but did not load (it must boot
 * cold either way). The memory image is copied in while QEMU starts; the
 * device stream follows once it is in, as the devices' state reads it.
 */
static int vm_restore(const struct vm_plan *v, struct vm *vm, struct cordon_err *err)
{
    off_t ram_at;
    _cleanup_close_ int fd = snapshot_open(v, &ram_at);
    if (fd < 0)
        return -1;
    if (vm_spawn(v, true, vm, err) < 0)
        return -2;
    char line[4096];
    /* The stream starts after the header (ram_load moved the offset). The
     * memory is QEMU's alone from here: ours goes. */
    int loaded = ram_load(fd, ram_at, vm->ram, v->mem_mib << 20);
    closep(&vm->ram);
    vm->ram = -1;
    if (loaded < 0 ||
        lseek(fd, (off_t)SNAPSHOT_HEAD_LEN, SEEK_SET) < 0 || qmp_handshake(vm->qmp) < 0 ||
        qmp(vm->qmp,
            "{\"execute\":\"migrate-set-capabilities\",\"arguments\":{\"capabilities\":"
            "[{\"capability\":\"x-ignore-shared\",\"state\":true}]}}\n",
            -1, line, sizeof line) < 0 ||
        qmp(vm->qmp, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"snap\"}}\n", fd, line,
            sizeof line) < 0 ||
        qmp(vm->qmp, "{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":\"fd:snap\"}}\n",
            -1, line, sizeof line) < 0)
        goto bad;
    for (int i = 0; i < RESTORE_TIMEOUT_MS / 2; i++) {
        if (qmp(vm->qmp, "{\"execute\":\"query-status\"}\n", -1, line, sizeof line) < 0)
            goto bad;
        if (!strstr(line, "\"inmigrate\"")) {
            /* Left paused: vm_resume runs it when the call comes. */
            if (strstr(line, "\"paused\"") || strstr(line, "\"prelaunch\"") ||
                strstr(line, "\"postmigrate\""))
                return 0;
            goto bad; /* the stream did not load: boot cold */
        }
        usleep(1000);
    }
bad:
    vm_kill(vm);
    return -2;
}

static int vm_boot(const struct vm_plan *v, bool save, struct vm *vm, struct cordon_err *err)
{
    TRY(vm_spawn(v, false, vm, err));
    if (qmp_handshake(vm->qmp) < 0 || wait_frame(vm, VM_READY, BOOT_TIMEOUT_MS, err) < 0) {
        if (err->kind == CORDON_E_OK)
            err_set(err, CORDON_E_SETUP, "microvm: QEMU did not start");
        vm_kill(vm);
        return -1;
    }
    if (save)
        snapshot_save(v, vm);
    closep(&vm->ram); /* the memory is QEMU's alone from here */
    vm->ram = -1;
    /* Waits paused, as a restored guest does: no vCPU time until the call. */
    char line[4096];
    if (qmp(vm->qmp, "{\"execute\":\"stop\"}\n", -1, line, sizeof line) < 0) {
        err_set(err, CORDON_E_SETUP, "microvm: QEMU did not pause the booted guest");
        vm_kill(vm);
        return -1;
    }
    return 0;
}

/* ---- is there a KVM that boots our guest? ---- */

/* A hardware KVM boots the guest in well under this; PVM's nested one never does. */
#define KVM_PROBE_MS 3000

/* Boot the guest under KVM with nothing to run: does it come up in time? */
static bool kvm_boots_guest(const char *qemu, const char *kernel, const char *initramfs,
                            char *why, size_t size)
{
    struct vm_plan *v = calloc(1, sizeof *v);
    struct policy *defaults = NULL;
    struct cordon_err err = { 0 };
    bool up = false;
    if (!v || !(defaults = policy_new(&err)) ||
        seccomp_program_build(defaults, &v->qemu_filter, &err) < 0) {
        snprintf(why, size, "cannot prepare the probe: %.100s", v ? err.msg : "out of memory");
        goto out;
    }
    snprintf(v->qemu, sizeof v->qemu, "%s", qemu);
    snprintf(v->kernel, sizeof v->kernel, "%s", kernel);
    snprintf(v->initramfs, sizeof v->initramfs, "%s", initramfs);
    v->kvm = true;
    v->quiet = true;
    v->mem_mib = 160;
    struct vm vm;
    uint64_t t0 = monotonic_us();
    if (vm_spawn(v, false, &vm, &err) < 0) {
        snprintf(why, size, "%.150s", err.msg);
        goto out;
    }
    up = qmp_handshake(vm.qmp) == 0 && wait_frame(&vm, VM_READY, KVM_PROBE_MS, &err) == 0;
    vm_kill(&vm);
    if (up)
        snprintf(why, size, "/dev/kvm booted a test guest in %llu ms",
                 (unsigned long long)((monotonic_us() - t0) / 1000));
    else
        snprintf(why, size, "/dev/kvm did not boot a test guest within %d ms", KVM_PROBE_MS);
out:
    if (v)
        seccomp_program_release(&v->qemu_filter);
    free(v);
    if (defaults)
        policy_free(defaults);
    return up;
}

/* The verdict's file in DIR for KEY; false when it does not fit. */
static bool verdict_path(char *out, size_t size, const char *dir, const char *key)
{
    return dir && *dir && snprintf(out, size, "%s/kvm-%.32s.verdict", dir, key) < (int)size;
}

/*
 * A verdict kept for this kernel, initramfs, QEMU and boot of the host: a
 * file only we (or root) could have written, holding "yes" or "no" and why.
 */
static int verdict_read(const char *path, char *why, size_t size)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    char buf[200] = "";
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 022) ||
        (st.st_uid != 0 && st.st_uid != geteuid()))
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n < 4 || (strncmp(buf, "yes ", 4) && strncmp(buf, "no ", 3)))
        return -1;
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    snprintf(why, size, "%s", strchr(buf, ' ') + 1);
    return buf[0] == 'y';
}

static void verdict_write(const char *path, bool yes, const char *why)
{
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (dprintf(fd, "%s %s\n", yes ? "yes" : "no", why) < 0 || rename(tmp, path) < 0)
        unlink(tmp);
}

/*
 * /dev/kvm alone proves nothing (this PVM kind runs no stock kernel, and a
 * nested one may crawl): KVM is used where it boots our guest quickly. The
 * boot is tried once per kernel, initramfs, QEMU and host boot, and the
 * verdict kept beside the snapshots (or in the user's cache).
 */
static bool hardware_kvm(char *why, size_t size)
{
    static int memo = -1;
    static char memo_why[160];
    if (memo >= 0) {
        snprintf(why, size, "%s", memo_why);
        return memo;
    }
    _cleanup_close_ int dev = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (dev < 0) {
        snprintf(why, size, "no usable /dev/kvm: %s", strerror(errno));
        return false;
    }
    const char *qemu = env_or("CORDON_QEMU", QEMU_DEFAULT);
    const char *dir = env_or("CORDON_MICROVM_SNAPSHOTS", SNAPSHOT_DIR_DEFAULT);
    char kernel[PATH_MAX], initramfs[PATH_MAX], kd[65], id[65], boot[64] = "";
    snprintf(kernel, sizeof kernel, "%s/vmlinux", env_or("CORDON_GUEST_KERNEL", KERNEL_DEFAULT));
    struct cordon_err err = { 0 };
    struct stat q;
    if (find_initramfs(initramfs, &err) < 0 || cached_sha256(kernel, dir, kd, &err) < 0 ||
        cached_sha256(initramfs, dir, id, &err) < 0 || stat(qemu, &q) < 0) {
        snprintf(why, size, "cannot probe: %.140s", err.msg[0] ? err.msg : strerror(errno));
        return false;
    }
    _cleanup_close_ int b = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (b < 0 || read(b, boot, sizeof boot - 1) <= 0)
        snprintf(boot, sizeof boot, "unknown");
    char text[PATH_MAX + 512], key[65];
    snprintf(text, sizeof text, "kvm kernel %s initramfs %s qemu %s %lld %lld boot %s", kd, id,
             qemu, (long long)q.st_size, (long long)q.st_mtim.tv_sec, boot);
    text_sha256(text, key);

    char cache[PATH_MAX] = "", home_cache[PATH_MAX] = "", path[PATH_MAX];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg == '/')
        snprintf(home_cache, sizeof home_cache, "%s/cordon", xdg);
    else if (home && *home == '/')
        snprintf(home_cache, sizeof home_cache, "%s/.cache/cordon", home);
    const char *dirs[] = { dir, home_cache };
    for (size_t i = 0; i < 2 && memo < 0; i++)
        if (verdict_path(path, sizeof path, dirs[i], key))
            memo = verdict_read(path, memo_why, sizeof memo_why);
    if (memo < 0) {
        memo = kvm_boots_guest(qemu, kernel, initramfs, memo_why, sizeof memo_why);
        for (size_t i = 0; i < 2 && !cache[0]; i++)
            if (verdict_path(path, sizeof path, dirs[i], key) && access(dirs[i], W_OK) == 0)
                snprintf(cache, sizeof cache, "%s", path);
        if (cache[0])
            verdict_write(cache, memo, memo_why);
    }
    snprintf(why, size, "%s", memo_why);
    return memo;
}

/* Run the guest that waited paused (in a pool, for as long as it waited). */
static int vm_resume(struct vm *vm)
{
    char line[4096];
    return qmp(vm->qmp, "{\"execute\":\"cont\"}\n", -1, line, sizeof line);
}

/* ---- the shim ---- */

struct shim_fds {
    int sync_r, err_w, status_w, start_r, gw_sock, info_w;
    uid_t uid;  /* the caller's, the sandbox user in the shim's user namespace */
    gid_t gid;
};

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
static int enter_namespaces(uid_t uid, gid_t gid, bool gateway, int gw_sock,
                            struct cordon_err *err)
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
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(GATEWAY_PORT),
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
 * The guest's /etc, built here in QEMU's own mount namespace, as the
 * namespace level builds the command's: a tmpfs over /etc holding the
 * listed host entries (bound read-only, links as links) and the generated
 * files. QEMU shares it whole, so the guest mounts one share and binds
 * nothing per entry; QEMU finds its own ld.so.cache there too.
 */
static int etc_view(const struct vm_plan *v, struct cordon_err *err)
{
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return err_sys(err, CORDON_E_SETUP, "microvm: cannot make QEMU's mount namespace");
    _cleanup_close_ int host = open("/etc", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (host < 0 || mount("tmpfs", "/etc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
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
        int made = S_ISDIR(st.st_mode) ? mkdir(path, 0755) : view_file(path, "", err);
        snprintf(from, sizeof from, "/proc/self/fd/%d/%s", host, name);
        if (made < 0 || mount(from, path, NULL, MS_BIND | MS_REC, NULL) < 0 ||
            mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                  NULL) < 0)
            return err_sys(err, CORDON_E_SETUP, "microvm: cannot show '%s' to the guest", path);
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

static int connect_gateway(void)
{
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(GATEWAY_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (c >= 0 && connect(c, (struct sockaddr *)&a, sizeof a) < 0) {
        close(c);
        c = -1;
    }
    return c;
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
    vm_buf_u32(&b, (egress ? VM_CALL_EGRESS : 0) | (egress && v->transparent ? VM_CALL_TRANSPARENT : 0) |
                       (ahead ? VM_SETUP_WARM : 0));
    vm_buf_u32(&b, v->n_ports);
    for (uint32_t i = 0; i < v->n_ports; i++)
        vm_buf_u32(&b, v->ports[i]);
    vm_buf_bytes(&b, v->setup.data, v->setup.len);
    bool ok = !b.failed && send_frame(ctl, VM_SETUP, b.data, b.len, NULL, 0);
    vm_buf_release(&b);
    return ok ? 0 : -1;
}

/* What the run brings (VM_CALL), with fresh entropy and the time. */
static int send_call(int ctl, const struct start_message *m)
{
    struct vm_buf b = { 0 };
    unsigned char entropy[VM_ENTROPY_BYTES];
    if (getrandom(entropy, sizeof entropy, 0) != (ssize_t)sizeof entropy)
        return -1;
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
    bool ok = !b.failed && send_frame(ctl, VM_CALL, b.data, b.len, NULL, 0);
    explicit_bzero(entropy, sizeof entropy);
    vm_buf_release(&b);
    return ok ? 0 : -1;
}

/* Relay between the call's stdio, the guest and the gateway until the command's status. */
static _Noreturn void shim_relay(struct vm *vm, const struct shim_fds *fds,
                                 const struct start_message *m)
{
    struct cordon_err err = { 0 };
    int in = m->stdio[0];
    int conns[VM_EG_MAX_CONNS];
    for (size_t i = 0; i < VM_EG_MAX_CONNS; i++)
        conns[i] = -1;
    struct vm_reader *rc = malloc(sizeof *rc), *re = malloc(sizeof *re);
    static char buf[VM_DATA_MAX];
    if (!rc || !re)
        _exit(125);
    vm_reader_init(rc, VM_PORT_CONTROL);
    vm_reader_init(re, VM_PORT_EGRESS);
    sigset_t set;
    sigemptyset(&set);
    static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaddset(&set, forwarded[i]);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);

    for (;;) {
        struct pollfd p[5 + VM_EG_MAX_CONNS];
        p[0] = (struct pollfd){ .fd = vm->ctl, .events = POLLIN };
        p[1] = (struct pollfd){ .fd = vm->eg, .events = POLLIN };
        p[2] = (struct pollfd){ .fd = in, .events = POLLIN };
        p[3] = (struct pollfd){ .fd = vm->pidfd, .events = POLLIN };
        p[4] = (struct pollfd){ .fd = sfd, .events = POLLIN };
        for (size_t i = 0; i < VM_EG_MAX_CONNS; i++)
            p[5 + i] = (struct pollfd){ .fd = conns[i], .events = POLLIN };
        if (poll(p, 5 + VM_EG_MAX_CONNS, -1) < 0) {
            if (errno == EINTR)
                continue;
            _exit(125);
        }
        if (p[3].revents) {
            err_set(&err, CORDON_E_SETUP, "microvm: QEMU exited before the command's status");
            shim_fail(fds, &err);
        }
        if (p[4].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == sizeof si) {
                uint32_t sig = si.ssi_signo;
                send_frame(vm->ctl, VM_SIGNAL, &sig, sizeof sig, NULL, 0);
            }
        }
        if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(in, buf, sizeof buf);
            if (n > 0) {
                send_frame(vm->ctl, VM_STDIN, buf, (size_t)n, NULL, 0);
            } else {
                send_frame(vm->ctl, VM_STDIN_EOF, NULL, 0, NULL, 0);
                close(in);
                in = -1;
            }
        }
        for (int port = 0; port < 2; port++) {
            if (!(p[port].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int fd = port == 0 ? vm->ctl : vm->eg;
            ssize_t n = read(fd, buf, sizeof buf);
            if (n <= 0) {
                err_set(&err, CORDON_E_SETUP, "microvm: the guest closed its %s port",
                        port == 0 ? "control" : "egress");
                shim_fail(fds, &err);
            }
            size_t off = 0;
            while (off < (size_t)n) {
                size_t used;
                struct vm_frame f;
                int got = vm_reader_feed(port == 0 ? rc : re, buf + off, (size_t)n - off, &used,
                                         &f, &err);
                if (got < 0)
                    shim_fail(fds, &err); /* a hostile or broken guest: the run ends */
                off += used;
                if (got == 0)
                    break;
                uint32_t v32 = 0;
                if (f.len >= 4)
                    memcpy(&v32, f.data, 4);
                switch (f.type) {
                case VM_STDOUT:
                case VM_STDERR:
                    /* The error pipe stays open: a guest that breaks the
                     * protocol mid-run is still reported as such. */
                    write_all(m->stdio[f.type == VM_STDOUT ? 1 : 2], (const char *)f.data, f.len);
                    break;
                case VM_EXIT: {
                    uint32_t flags;
                    memcpy(&flags, f.data + 4, 4);
                    struct boundary_status st = {
                        .ws = (int)v32, .seen = flags & VM_EXIT_OOM ? BOUNDARY_SEEN_OOM : 0
                    };
                    close(fds->err_w);
                    (void)!write(fds->status_w, &st, sizeof st);
                    vm_kill(vm);
                    _exit(0);
                }
                case VM_ERROR:
                    guest_error(&f, &err);
                    vm_kill(vm);
                    shim_fail(fds, &err);
                case VM_READY:
                case VM_SET:
                    err_set(&err, CORDON_E_SETUP, "microvm: the guest spoke out of turn (frame type %u)",
                            f.type);
                    shim_fail(fds, &err);
                case VM_EG_OPEN:
                    if (conns[v32] < 0)
                        conns[v32] = connect_gateway();
                    if (conns[v32] < 0)
                        send_frame(vm->eg, VM_EG_CLOSE, &v32, 4, NULL, 0);
                    break;
                case VM_EG_DATA:
                    if (conns[v32] >= 0)
                        write_all(conns[v32], (const char *)f.data + 4, f.len - 4);
                    break;
                case VM_EG_CLOSE:
                    if (conns[v32] >= 0)
                        shutdown(conns[v32], SHUT_WR);
                    break;
                }
            }
        }
        for (uint32_t i = 0; i < VM_EG_MAX_CONNS; i++) {
            if (conns[i] < 0 || !(p[5 + i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(conns[i], buf, VM_DATA_MAX);
            if (n > 0) {
                send_frame(vm->eg, VM_EG_DATA, &i, 4, buf, (size_t)n);
            } else {
                send_frame(vm->eg, VM_EG_CLOSE, &i, 4, NULL, 0);
                close(conns[i]);
                conns[i] = -1;
            }
        }
    }
}

static _Noreturn void shim_main(const struct sandbox_setup *s, struct vm_plan *v,
                                const struct shim_fds *fds)
{
    struct cordon_err err = { 0 };
    int keep[] = { fds->sync_r, fds->err_w, fds->status_w, fds->start_r, fds->gw_sock,
                   fds->info_w };
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
        etc_view(v, &err) < 0)
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
    if ((s->ahead && vm_resume(&vm) < 0) || send_call(vm.ctl, &m) < 0) {
        err_set(&err, CORDON_E_SETUP, "microvm: cannot hand the call to the guest");
        vm_kill(&vm);
        shim_fail(fds, &err);
    }
    shim_relay(&vm, fds, &m);
}

/* ---- supervisor side ---- */

static void microvm_release(struct sandbox_boundary *b)
{
    boundary_release(b);
}

static int microvm_prepare(const struct sandbox_setup *s, struct sandbox_boundary *b,
                           struct cordon_err *err)
{
    *b = (struct sandbox_boundary){ .pid = -1, .err_r = -1, .status_r = -1, .start_w = -1,
                                    .door = -1, .layer = -1 };
    struct vm_plan *v = calloc(1, sizeof *v);
    if (!v)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    int sync[2] = { -1, -1 }, errp[2] = { -1, -1 }, status[2] = { -1, -1 },
        start[2] = { -1, -1 }, gw[2] = { -1, -1 }, info[2] = { -1, -1 };
    int rc = -1;
    pid_t shim = -1;
    struct cgroup_ticket ticket = CGROUP_TICKET_INIT;
    if (plan_vm(s, v, err) < 0)
        goto out;
    if (pipe2(sync, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
        pipe2(status, O_CLOEXEC) < 0 || pipe2(info, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, start) < 0 ||
        (s->gateway && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, gw) < 0)) {
        err_sys(err, CORDON_E_SETUP, "cannot create pipes");
        goto out;
    }
    uid_t uid = geteuid();
    gid_t gid = getegid();
    /* QEMU is the run's: its memory, CPU and pids count against the limits.
     * The shim joins the run's cgroups itself, first thing (see cgroup.h). */
    if (s->cg->version && cgroup_ticket_open(s->cg, &ticket, err) < 0)
        goto out;
    shim = sys_clone_ns(CLONE_NEWUSER | CLONE_NEWPID);
    if (shim < 0) {
        err_sys(err, CORDON_E_UNSUPPORTED, "microvm: cannot create the shim's namespaces");
        goto out;
    }
    if (shim == 0) {
        if (cgroup_ticket_use(&ticket) < 0)
            _exit(125); /* the supervisor reads no record: its "ready" never comes */
        cgroup_ticket_close(&ticket);
        if (s->in_child)
            s->in_child(s->in_child_arg);
        struct shim_fds fds = { .sync_r = sync[0], .err_w = errp[1], .status_w = status[1],
                                .start_r = start[1], .gw_sock = s->gateway ? gw[1] : -1,
                                .info_w = info[1], .uid = uid, .gid = gid };
        shim_main(s, v, &fds);
    }
    int *theirs[] = { &sync[0], &errp[1], &status[1], &start[1], &gw[1], &info[1] };
    for (size_t i = 0; i < sizeof theirs / sizeof theirs[0]; i++) {
        closep(theirs[i]);
        *theirs[i] = -1;
    }
    cgroup_ticket_close(&ticket);
    if (write(sync[1], "g", 1) != 1) {
        if (err->kind == CORDON_E_OK)
            err_sys(err, CORDON_E_SETUP, "microvm: cannot start the shim");
        goto out;
    }
    char restored = 0;
    if ((s->gateway && (b->door = recv_fd(gw[0])) < 0) || read(info[0], &restored, 1) != 1 ||
        start_ready_wait(start[0]) < 0) {
        boundary_child_error(errp[0], err);
        goto out;
    }
    snprintf(b->evidence, sizeof b->evidence,
             "{\"accel\":\"%s\",\"restored\":%s,\"kernel_digest\":\"%s\","
             "\"initramfs_digest\":\"%s\",\"note\":\"%s\"}",
             v->kvm ? "kvm" : "tcg", restored == 'r' ? "true" : "false", v->kernel_digest,
             v->initramfs_digest, microvm_accel_note(v->kvm));
    /* The guest agent serves the DNS stub and the synthetic addresses and
     * opens each such connection at the door with a relay preface. */
    b->relay_transparent = v->transparent;
    b->pid = shim;
    shim = -1;
    b->err_r = TAKE_FD(errp[0]);
    b->status_r = TAKE_FD(status[0]);
    b->start_w = TAKE_FD(start[0]);
    rc = 0;
out:
    if (shim > 0) {
        kill(shim, SIGKILL);
        waitpid(shim, NULL, 0);
    }
    if (rc < 0)
        closep(&b->door);
    cgroup_ticket_close(&ticket);
    int all[] = { sync[0], sync[1], errp[0], errp[1], status[0], status[1], start[0], start[1],
                  gw[0], gw[1], info[0], info[1] };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] >= 0)
            close(all[i]);
    vm_buf_release(&v->setup);
    seccomp_program_release(&v->qemu_filter);
    free(v->ca_bundle);
    free(v);
    return rc;
}

const struct sandbox_backend microvm_backend = {
    .name = "microvm",
    .level = CORDON_LEVEL_MICROVM,
    .probe = microvm_probe,
    .admits = microvm_admits,
    .prepare = microvm_prepare,
    .release = microvm_release,
};
