/*
 * sandbox/gvisor/compat.c: cordon-gvisor-compat.so, preloaded into every
 * dynamically linked program inside a gVisor sandbox (embedded in cordon,
 * bound read-only at /.cordon/compat.so and named by the bundle's
 * /etc/ld.so.preload). It runs inside the gVisor kernel, never on the host.
 *
 * Debian 12's runsc (2022) answers EINVAL to stat calls whose flags Linux
 * accepts: AT_NO_AUTOMOUNT in statx() and newfstatat(), and the
 * AT_STATX_SYNC_TYPE hints in newfstatat(). coreutils passes AT_NO_AUTOMOUNT
 * on every statx (ls, stat), and glibc's fallback for a statx answering
 * ENOSYS is newfstatat with the same flags, so refusing statx in the seccomp
 * profile would not help: the flags themselves must go. They change nothing
 * here: gVisor never automounts, and the sync hints only matter to network
 * filesystems. Newer runsc ignores AT_NO_AUTOMOUNT itself.
 *
 * Only what a program calls through glibc's exported symbols passes here;
 * a static program's own statx keeps the EINVAL (no such program is in the
 * sandbox's /usr here).
 */
/* Each of fstatat and fstatat64 is defined here: neither may alias the other. */
#undef _FILE_OFFSET_BITS
#include "common/syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#define STAT_FLAGS_GVISOR_REFUSES (AT_NO_AUTOMOUNT | AT_STATX_SYNC_TYPE)

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf)
{
    return sys_statx(dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}

int fstatat(int dirfd, const char *path, struct stat *buf, int flags)
{
    return sys_newfstatat(dirfd, path, buf, flags & ~STAT_FLAGS_GVISOR_REFUSES);
}

/* Both structs are the kernel's struct stat on 64-bit Linux. */
int fstatat64(int dirfd, const char *path, struct stat64 *buf, int flags)
{
    return sys_newfstatat(dirfd, path, buf, flags & ~STAT_FLAGS_GVISOR_REFUSES);
}

/* What programs built against glibc < 2.33 call for fstatat(). */
int __fxstatat(int ver, int dirfd, const char *path, struct stat *buf, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *buf, int flags);

int __fxstatat(int ver, int dirfd, const char *path, struct stat *buf, int flags)
{
    if (ver != 0 && ver != 1) { /* _STAT_VER_KERNEL, _STAT_VER_LINUX */
        errno = EINVAL;
        return -1;
    }
    return fstatat(dirfd, path, buf, flags);
}

int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *buf, int flags)
{
    if (ver != 0 && ver != 1) {
        errno = EINVAL;
        return -1;
    }
    return fstatat64(dirfd, path, buf, flags);
}
