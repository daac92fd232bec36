/*
 * common/syscalls.h: thin wrappers for system calls glibc 2.36 does not wrap.
 * The one place raw syscall() appears.
 */
#pragma once
#include "common/compat.h"

#include <fcntl.h>
#include <signal.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* gvisor/compat.c's: the stat calls themselves, under the glibc names it replaces. */
static inline int sys_statx(int dirfd, const char *path, int flags, unsigned int mask,
                            struct statx *buf)
{
    return (int)syscall(SYS_statx, dirfd, path, flags, mask, buf);
}

/* BUF: the kernel's struct stat, which are glibc's stat and stat64 on 64-bit Linux. */
static inline int sys_newfstatat(int dirfd, const char *path, void *buf, int flags)
{
    return (int)syscall(SYS_newfstatat, dirfd, path, buf, flags);
}

static inline int sys_pivot_root(const char *new_root, const char *put_old)
{
    return (int)syscall(SYS_pivot_root, new_root, put_old);
}

static inline int sys_landlock_create_ruleset(const struct cordon_landlock_ruleset_attr *attr,
                                              size_t size, uint32_t flags)
{
    return (int)syscall(SYS_landlock_create_ruleset, attr, size, flags);
}

static inline int sys_landlock_add_rule(int ruleset_fd, int rule_type, const void *rule_attr,
                                        uint32_t flags)
{
    return (int)syscall(SYS_landlock_add_rule, ruleset_fd, rule_type, rule_attr, flags);
}

static inline int sys_landlock_restrict_self(int ruleset_fd, uint32_t flags)
{
    return (int)syscall(SYS_landlock_restrict_self, ruleset_fd, flags);
}

/* bpf(2): glibc has no wrapper. ATTR is a union bpf_attr of SIZE bytes. */
static inline int sys_bpf(int cmd, void *attr, unsigned size)
{
    return (int)syscall(SYS_bpf, cmd, attr, size);
}

static inline int sys_pidfd_open(pid_t pid, unsigned flags)
{
    return (int)syscall(SYS_pidfd_open, pid, flags);
}

static inline int sys_openat2(int dirfd, const char *path, struct open_how *how, size_t size)
{
    return (int)syscall(SYS_openat2, dirfd, path, how, size);
}

/* fork()-like: a child in new namespaces FLAGS (CLONE_NEW*), SIGCHLD at its end. */
static inline pid_t sys_clone_ns(unsigned long flags)
{
    return (pid_t)syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
}

/*
 * The same, created directly in the cgroup CGROUP_DIR (v2) so it never has
 * to be moved there. -1 with errno (ENOSYS, E2BIG before 5.7) when the
 * kernel cannot.
 */
static inline pid_t sys_clone_ns_into_cgroup(unsigned long flags, int cgroup_dir)
{
    struct clone_args args = { .flags = flags | CLONE_INTO_CGROUP,
                               .exit_signal = SIGCHLD,
                               .cgroup = (uint64_t)cgroup_dir };
    return (pid_t)syscall(SYS_clone3, &args, sizeof args);
}

/* Directory entries of FD into BUF (struct linux_dirent64 records), without allocating. */
static inline long sys_getdents64(int fd, void *buf, size_t size)
{
    return syscall(SYS_getdents64, fd, buf, size);
}

static inline int sys_close_range(unsigned first, unsigned last, unsigned flags)
{
    return (int)syscall(SYS_close_range, first, last, flags);
}

static inline int sys_capget(void *hdr, void *data)
{
    return (int)syscall(SYS_capget, hdr, data);
}

static inline int sys_capset(void *hdr, void *data)
{
    return (int)syscall(SYS_capset, hdr, data);
}

static inline int sys_pidfd_getfd(int pidfd, int fd, unsigned flags)
{
    return (int)syscall(SYS_pidfd_getfd, pidfd, fd, flags);
}

static inline int sys_pidfd_send_signal(int pidfd, int sig, unsigned flags)
{
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, flags);
}

/* seccomp(2): the only way to get a user-notification listener. */
static inline int sys_seccomp(unsigned op, unsigned flags, void *args)
{
    return (int)syscall(SYS_seccomp, op, flags, args);
}

/*
 * Open-file-description record locks over the whole of FD (a directory
 * will do for F_RDLCK): fcntl(2) itself, as glibc 2.36's fcntl() left a
 * directory's F_OFD_GETLK answer unfilled here. They do not interact with
 * flock(2), which a workspace's commit takes on the same directory.
 */
static inline int sys_ofd_lock(int fd, short type)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET };
    return (int)syscall(SYS_fcntl, fd, F_OFD_SETLK, &fl);
}

/* Whether another open file description holds a lock FD's TYPE would conflict with: 1, 0, -1. */
static inline int sys_ofd_conflict(int fd, short type)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET };
    if (syscall(SYS_fcntl, fd, F_OFD_GETLK, &fl) < 0)
        return -1;
    return fl.l_type != F_UNLCK;
}

/*
 * fork() with SIGTERM and SIGINT blocked in the child (the caller's mask is
 * back at once): the child puts them back to their defaults, or reads them
 * from a signalfd, before it unblocks them, so the caller's handlers never
 * take a stop meant for the child.
 */
static inline pid_t fork_stops_blocked(void)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &old);
    pid_t pid = fork();
    if (pid != 0)
        sigprocmask(SIG_SETMASK, &old, NULL);
    return pid;
}
