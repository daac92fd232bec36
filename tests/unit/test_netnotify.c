/*
 * tests/unit/test_netnotify.c: the process level's notification filter, run
 * on a table of calls by a classic BPF interpreter of the few instructions
 * it uses: which calls go to the keeper (connect, the metadata calls,
 * chattr's ioctls), which are refused outright, which pass.
 */
#include "tap.h"
#include "bpf_run.h"

#include "sandbox/process/netnotify.h"

#include "common/compat.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>

#define NOTIFY SECCOMP_RET_USER_NOTIF
#define ALLOW SECCOMP_RET_ALLOW
#define REFUSE (SECCOMP_RET_ERRNO | EACCES)

struct call {
    const char *what;
    bool gateway;
    int nr;
    unsigned long long args[3];
    unsigned want;
};

static const struct call calls[] = {
    { "getpid", false, __NR_getpid, { 0 }, ALLOW },
    { "openat", false, __NR_openat, { 0 }, ALLOW },
    { "stat", true, __NR_newfstatat, { 0 }, ALLOW },
    { "connect", false, __NR_connect, { 0 }, NOTIFY },
    { "shmget", false, __NR_shmget, { 0 }, REFUSE },
    { "chmod", false, __NR_chmod, { 0 }, NOTIFY },
    { "fchmod", true, __NR_fchmod, { 0 }, NOTIFY },
    { "fchmodat", false, __NR_fchmodat, { 0 }, NOTIFY },
    { "fchmodat2", false, __NR_fchmodat2, { 0 }, NOTIFY },
    { "chown", false, __NR_chown, { 0 }, NOTIFY },
    { "lchown", false, __NR_lchown, { 0 }, NOTIFY },
    { "fchown", false, __NR_fchown, { 0 }, NOTIFY },
    { "fchownat", true, __NR_fchownat, { 0 }, NOTIFY },
    { "utime", false, __NR_utime, { 0 }, NOTIFY },
    { "utimes", false, __NR_utimes, { 0 }, NOTIFY },
    { "futimesat", false, __NR_futimesat, { 0 }, NOTIFY },
    { "utimensat", false, __NR_utimensat, { 0 }, NOTIFY },
    { "setxattr", false, __NR_setxattr, { 0 }, NOTIFY },
    { "lsetxattr", false, __NR_lsetxattr, { 0 }, NOTIFY },
    { "fsetxattr", false, __NR_fsetxattr, { 0 }, NOTIFY },
    { "removexattr", false, __NR_removexattr, { 0 }, NOTIFY },
    { "lremovexattr", false, __NR_lremovexattr, { 0 }, NOTIFY },
    { "fremovexattr", true, __NR_fremovexattr, { 0 }, NOTIFY },
    { "setxattrat", false, __NR_setxattrat, { 0 }, NOTIFY },
    { "removexattrat", false, __NR_removexattrat, { 0 }, NOTIFY },
    { "getxattr", false, __NR_getxattr, { 0 }, ALLOW },
    { "ioctl SETFLAGS", false, __NR_ioctl, { 3, FS_IOC_SETFLAGS }, NOTIFY },
    { "ioctl SETFLAGS, upper half set",
      false,
      __NR_ioctl,
      { 3, 0x100000000ull | FS_IOC_SETFLAGS },
      NOTIFY },
    { "ioctl 32-bit SETFLAGS", true, __NR_ioctl, { 3, FS_IOC32_SETFLAGS }, NOTIFY },
    { "ioctl FSSETXATTR", false, __NR_ioctl, { 3, FS_IOC_FSSETXATTR }, NOTIFY },
    { "ioctl SETVERSION", false, __NR_ioctl, { 3, FS_IOC_SETVERSION }, NOTIFY },
    { "ioctl GETFLAGS", false, __NR_ioctl, { 3, FS_IOC_GETFLAGS }, ALLOW },
    { "ioctl TCGETS", true, __NR_ioctl, { 0, TCGETS }, ALLOW },
    /* A host workspace's changes go to its keeper (names.h), with the gateway's filter here. */
    { "openat read-only", true, __NR_openat, { AT_FDCWD, 0, O_RDONLY }, ALLOW },
    { "openat O_PATH", true, __NR_openat, { AT_FDCWD, 0, O_PATH }, ALLOW },
    { "openat for writing", true, __NR_openat, { AT_FDCWD, 0, O_WRONLY }, NOTIFY },
    { "openat O_CREAT", true, __NR_openat, { AT_FDCWD, 0, O_RDONLY | O_CREAT }, NOTIFY },
    { "open O_RDWR", true, __NR_open, { 0, O_RDWR }, NOTIFY },
    { "open O_TRUNC", true, __NR_open, { 0, O_RDONLY | O_TRUNC }, NOTIFY },
    { "open read-only", true, __NR_open, { 0, O_RDONLY | O_CLOEXEC }, ALLOW },
    { "openat2", true, __NR_openat2, { 0 }, NOTIFY },
    { "mkdirat", true, __NR_mkdirat, { 0 }, NOTIFY },
    { "renameat2", true, __NR_renameat2, { 0 }, NOTIFY },
    { "unlinkat", true, __NR_unlinkat, { 0 }, NOTIFY },
    { "truncate", true, __NR_truncate, { 0 }, NOTIFY },
    { "ftruncate", true, __NR_ftruncate, { 0 }, ALLOW },
    { "openat for writing, no workspace", false, __NR_openat, { AT_FDCWD, 0, O_WRONLY }, ALLOW },
    { "mkdirat, no workspace", false, __NR_mkdirat, { 0 }, ALLOW },
};

int main(void)
{
    struct seccomp_program prog[2] = { { 0 } };
    struct cordon_err err = { 0 };
    for (int g = 0; g < 2; g++)
        ok(netnotify_program(g, g ? NAMES_WRITE : NAMES_OFF, &prog[g], &err) == 0,
           "the filter %s the gateway builds: %s", g ? "with" : "without", err.msg);
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        const struct call *c = &calls[i];
        struct seccomp_data d = { .nr = c->nr, .arch = AUDIT_ARCH_X86_64 };
        memcpy(d.args, c->args, sizeof c->args);
        unsigned got = run(&prog[c->gateway], &d);
        ok(got == c->want, "%s: %#x, want %#x", c->what, got, c->want);
    }
    struct seccomp_data i386 = { .nr = __NR_chmod, .arch = AUDIT_ARCH_I386 };
    ok(run(&prog[0], &i386) == ALLOW, "another arch passes (the allowlist kills it)");
    for (int g = 0; g < 2; g++)
        seccomp_program_release(&prog[g]);
    return done_testing();
}
