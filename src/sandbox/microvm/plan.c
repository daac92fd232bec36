/*
 * sandbox/microvm/plan.c: the microvm level's plan, made in the supervisor before the shim
 * forks: the digests that key a snapshot, where the kernel, initramfs and
 * QEMU are, and the shares, setup and ports a run hands the guest.
 */
#include "sandbox/microvm/microvm_int.h"

#include "common/fds.h"
#include "common/text.h"
#include "sandbox/boundary.h"
#include "sandbox/plan.h"
#include "sandbox/supervise.h"
#include "sandbox/workspace.h"

#include <openssl/evp.h>

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
int cached_sha256(const char *path, const char *dir, char out[65], struct cordon_err *err)
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

void text_sha256(const char *text, char out[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(text, strlen(text), md, &len, EVP_sha256(), NULL);
    hex_encode(md, sizeof md, out);
}

const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

/*
 * The initramfs: where CORDON_GUEST_INITRAMFS names it; else beside the
 * running executable (a build tree holds both, and a copied cordon may
 * carry its own); else where `meson install` put it.
 */
int find_initramfs(char out[PATH_MAX], struct cordon_err *err)
{
    const char *named = getenv("CORDON_GUEST_INITRAMFS");
    if (named && *named) {
        snprintf(out, PATH_MAX, "%s", named);
        if (access(out, R_OK) < 0)
            return err_sys(err, CORDON_E_UNSUPPORTED,
                           "microvm: no guest initramfs at '%s' (CORDON_GUEST_INITRAMFS)", out);
        return 0;
    }
    char dir[PATH_MAX - 32];
    if (installed_exe_dir(dir, sizeof dir) < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED, "microvm: cannot find cordon's executable");
    snprintf(out, PATH_MAX, "%s/%s", dir, INITRAMFS_NAME);
    if (access(out, R_OK) == 0 ||
        (installed_path(INITRAMFS_NAME, out) == 0 && access(out, R_OK) == 0))
        return 0;
    return err_sys(err, CORDON_E_UNSUPPORTED,
                   "microvm: no guest initramfs beside '%s/cordon' nor at '%s' (reinstall "
                   "cordon, or set CORDON_GUEST_INITRAMFS)",
                   dir, out);
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
    v->shares[v->n_shares++] =
        (struct vm_share){ .host = host, .guest = guest, .file = file, .writable = writable };
    return 0;
}

/* The guest's RAM, and the snapshot's name: valid for this kernel, initramfs, QEMU and machine. */
static int plan_memory_and_snapshot(const struct sandbox_setup *s, struct vm_plan *v,
                                    struct cordon_err *err)
{
    const struct policy *p = s->p;
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
    snprintf(
        shape, sizeof shape,
        "%.26s kernel %s initramfs %s qemu %s %lld %lld.%09ld mem %llu slots %d accel %s serial %s",
        SNAPSHOT_MAGIC, v->kernel_digest, v->initramfs_digest, v->qemu, (long long)q.st_size,
        (long long)q.st_mtim.tv_sec, q.st_mtim.tv_nsec, (unsigned long long)v->mem_mib, VM_SLOTS,
        v->kvm ? "kvm" : "tcg", getenv("CORDON_MICROVM_CONSOLE") ? "on" : "off");
    text_sha256(shape, v->digest);
    snprintf(v->snapshot, sizeof v->snapshot, "%s/%.32s.snap", v->snapshot_dir, v->digest);

    return 0;
}

/* The 9p shares (/usr, /etc, the workspace, the binds), the names keeper and the egress ports. */
static int plan_shares(const struct sandbox_setup *s, struct vm_plan *v, struct cordon_err *err)
{
    const struct policy *p = s->p;
    TRY(add_share(v, v->paths[0], "/usr", false, err));
    /* The guest's /etc: the view the shim builds in QEMU's mount namespace
     * (etc_view), one share instead of a bind per entry in the guest. */
    snprintf(v->paths[1], sizeof v->paths[1], "/etc");
    TRY(add_share(v, v->paths[1], "/etc", false, err));
    if (p->workspace && names_mode_for(p, NAMES_CHECK) == NAMES_CHECK) {
        names_keeper_init(&v->names, NAMES_CHECK, p);
        v->names.g = s->workspace; /* the keeper's copy (a fork): the entries not to be moved */
        if (names_keeper_root(&v->names, fcntl(s->workspace->fd, F_DUPFD_CLOEXEC, 0)) < 0)
            return err_sys(err, CORDON_E_SETUP, "microvm: cannot open the workspace '%s'",
                           p->workspace);
        TRY(names_program(NAMES_CHECK, false, &v->names_filter, err));
    }
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
     * (the proxy's own port excepted: the guest's forwarder holds it); for
     * the allowed literals, their ranges routed to the guest's loopback and
     * a listener on their ports (the guest's connect()s are its kernel's). */
    if (s->gateway) {
        _Static_assert(VM_MAX_PORTS >= SYNTH_MAX_PORTS, "a port list fits the wire's");
        unsigned prefixes[VM_MAX_NETS];
        size_t n_nets = 0;
        v->transparent = true;
        v->n_ports = (uint32_t)boundary_transparent_ports(p, v->ports, v->nets, prefixes,
                                                          VM_MAX_NETS, &n_nets);
        v->n_nets = (uint32_t)n_nets;
        for (uint32_t i = 0; i < v->n_nets; i++)
            v->prefixes[i] = prefixes[i];
    }

    return 0;
}

/* The guest's mounts on the wire: tmpfs, shares, the workspace's covers, the hidden paths. */
static int plan_mounts(const struct sandbox_setup *s, struct vm_plan *v, struct vm_buf *b,
                       struct cordon_err *err)
{
    const struct policy *p = s->p;
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
        vm_buf_u32(b,
                   (v->shares[i].writable ? 0 : VM_MOUNT_READONLY) |
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
    return 0;
}

int plan_vm(const struct sandbox_setup *s, struct vm_plan *v, struct cordon_err *err)
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

    TRY(plan_memory_and_snapshot(s, v, err));
    TRY(plan_shares(s, v, err));

    /* The call's policy part; argv, environment and entropy follow at start. */
    struct vm_buf *b = &v->setup;
    const struct confine_plan *c = s->confine;
    /* Pids among them (counts_pids): the command's user holds at most this
     * many in the guest. */
    vm_buf_u32(b, (uint32_t)c->n_rlimits);
    for (size_t i = 0; i < c->n_rlimits; i++) {
        vm_buf_u32(b, (uint32_t)c->rlimits[i].resource);
        vm_buf_u64(b, c->rlimits[i].value.rlim_cur);
        vm_buf_u64(b, c->rlimits[i].value.rlim_max);
    }
    TRY(plan_mounts(s, v, b, err));
    struct seccomp_program prog = { 0 };
    TRY(seccomp_program_build(p, &prog, err));
    vm_buf_u32(b, prog.len);
    vm_buf_bytes(b, prog.filter, prog.len * sizeof prog.filter[0]);
    seccomp_program_release(&prog);
    if (b->failed)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    return 0;
}
