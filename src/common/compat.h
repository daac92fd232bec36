/*
 * common/compat.h: kernel constants and structures newer than the headers
 * on Debian 12 (linux-libc-dev 6.1). Values are the kernel's stable ABI.
 */
#pragma once
#include <linux/landlock.h>
#include <sys/mount.h> /* glibc 2.36 declares the new mount API; never mix with linux/mount.h */
#include <stdint.h>

/* Landlock ABI 3 (6.2) */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
/* Landlock ABI 4 (6.7): TCP port rules */
#ifndef LANDLOCK_RULE_NET_PORT
#define LANDLOCK_RULE_NET_PORT 2
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
struct landlock_net_port_attr {
    uint64_t allowed_access;
    uint64_t port;
};
#endif
/* Landlock ABI 5 (6.10) */
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
/* Landlock ABI 6 (6.12): IPC scoping */
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif

/* The full ruleset attribute as of ABI 6; older kernels take a prefix. */
struct cordon_landlock_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

/* Metadata calls newer than the headers: fchmodat2 (6.6), setxattrat and removexattrat (6.13). */
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#endif
#ifndef __NR_removexattrat
#define __NR_removexattrat 466
#endif
/* setxattrat()'s value, size and flags, in the caller's memory. */
struct cordon_xattr_args {
    uint64_t value;
    uint32_t size;
    uint32_t flags;
};
/* ext4's own spelling of FS_IOC_SETVERSION, _IOW('f', 4, long). */
#ifndef EXT4_IOC_SETVERSION
#define EXT4_IOC_SETVERSION 0x40086604u
#endif

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* seccomp user notification flags (6.6): the keeper runs on the waiting caller's CPU. */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif
