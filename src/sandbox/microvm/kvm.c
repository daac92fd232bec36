/*
 * sandbox/microvm/kvm.c: whether a hardware KVM boots cordon's guest on this host, probed by
 * booting it once and kept as a verdict per kernel, initramfs, QEMU and boot.
 */
#include "sandbox/microvm/microvm_int.h"

#include "common/hostpath.h"
#include "sandbox/supervise.h"

/* ---- is there a KVM that boots our guest? ---- */

/* A hardware KVM boots the guest in well under this; PVM's nested one never does. */
#define KVM_PROBE_MS 3000

/* Boot the guest under KVM with nothing to run: does it come up in time? */
static bool kvm_boots_guest(const char *qemu, const char *kernel, const char *initramfs, char *why,
                            size_t size)
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
    if (read_small_fd(fd, buf, sizeof buf) < 4 ||
        (strncmp(buf, "yes ", 4) && strncmp(buf, "no ", 3)))
        return -1;
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
bool hardware_kvm(char *why, size_t size)
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
    if (read_small_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", boot, sizeof boot) <= 0)
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
