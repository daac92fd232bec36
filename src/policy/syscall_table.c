/*
 * policy/syscall_table.c: the default syscall profile as one readable table.
 * Pure data, read by the supervisor when it compiles the filter (sandbox/seccomp.c)
 * and by `cordon check` and the unit tests; nothing here runs in the child.
 *
 * Anything not named here is refused with EPERM. Rows with SECCOMP_ALLOW may
 * carry argument conditions, which live next to the compiler in seccomp.c
 * (clone, socket, socketpair, ioctl, personality, and the mode of open,
 * creat, mknod and chmod); their why says so.
 * A hard refusal cannot be lifted by the policy's syscalls.allow.
 * setxattrat and removexattrat (6.13) are newer than libseccomp here: not
 * named, so refused.
 */
#include "policy/syscall_table.h"

#include "policy/policy.h"

#include <openssl/evp.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>

#define ALLOW(n, w)                \
    {                              \
        n, SECCOMP_ALLOW, false, w \
    }
#define DENY(n, w)                      \
    {                                   \
        n, SECCOMP_DENY_EPERM, false, w \
    }
#define HARD(n, w)                     \
    {                                  \
        n, SECCOMP_DENY_EPERM, true, w \
    }
#define NOSYS(n, w)                     \
    {                                   \
        n, SECCOMP_DENY_ENOSYS, true, w \
    }

static const struct seccomp_rule rules[] = {
    /* files: open, read, write, seek */
    ALLOW("read", NULL),
    ALLOW("write", NULL),
    ALLOW("readv", NULL),
    ALLOW("writev", NULL),
    ALLOW("pread64", NULL),
    ALLOW("pwrite64", NULL),
    ALLOW("preadv", NULL),
    ALLOW("pwritev", NULL),
    ALLOW("preadv2", NULL),
    ALLOW("pwritev2", NULL),
    ALLOW("open", "a mode with setuid/setgid bits is refused (see chmod)"),
    ALLOW("openat", "as open"),
    NOSYS("openat2",
          "its mode hides in a struct the filter cannot read; libc falls back to openat"),
    ALLOW("creat", "as open"),
    ALLOW("close", NULL),
    ALLOW("close_range", NULL),
    ALLOW("lseek", NULL),
    ALLOW("dup", NULL),
    ALLOW("dup2", NULL),
    ALLOW("dup3", NULL),
    ALLOW("fcntl", NULL),
    ALLOW("flock", NULL),
    ALLOW("fsync", NULL),
    ALLOW("fdatasync", NULL),
    ALLOW("sync", NULL),
    ALLOW("syncfs", NULL),
    ALLOW("sync_file_range", NULL),
    ALLOW("fallocate", NULL),
    ALLOW("readahead", NULL),
    ALLOW("fadvise64", NULL),
    ALLOW("truncate", NULL),
    ALLOW("ftruncate", NULL),
    ALLOW("sendfile", NULL),
    ALLOW("splice", NULL),
    ALLOW("tee", NULL),
    ALLOW("vmsplice", NULL),
    ALLOW("copy_file_range", NULL),
    ALLOW("cachestat", NULL),

    /* files: metadata and directories */
    ALLOW("stat", NULL),
    ALLOW("fstat", NULL),
    ALLOW("lstat", NULL),
    ALLOW("newfstatat", NULL),
    ALLOW("statx", NULL),
    ALLOW("statfs", NULL),
    ALLOW("fstatfs", NULL),
    ALLOW("access", NULL),
    ALLOW("faccessat", NULL),
    ALLOW("faccessat2", NULL),
    ALLOW("readlink", NULL),
    ALLOW("readlinkat", NULL),
    ALLOW("getdents", NULL),
    ALLOW("getdents64", NULL),
    ALLOW("getcwd", NULL),
    ALLOW("chdir", NULL),
    ALLOW("fchdir", NULL),
    ALLOW("mkdir", NULL),
    ALLOW("mkdirat", NULL),
    ALLOW("rmdir", NULL),
    ALLOW("unlink", NULL),
    ALLOW("unlinkat", NULL),
    ALLOW("rename", NULL),
    ALLOW("renameat", NULL),
    ALLOW("renameat2", NULL),
    ALLOW("link", NULL),
    ALLOW("linkat", NULL),
    ALLOW("symlink", NULL),
    ALLOW("symlinkat", NULL),
    ALLOW("mknod", "fifos and sockets (device nodes need CAP_MKNOD); setuid/setgid bits refused"),
    ALLOW("mknodat", "as mknod"),
    ALLOW("chmod",
          "setuid/setgid bits refused: workspace files belong to the caller on the host; "
          "at the process level its keeper decides where (outside the writable trees: "
          "EPERM)"),
    ALLOW("fchmod", "as chmod"),
    ALLOW("fchmodat", "as chmod"),
    ALLOW("fchmodat2", "as chmod"),
    ALLOW("chown", "at the process level its keeper decides where, as for chmod"),
    ALLOW("fchown", "as chown"),
    ALLOW("lchown", "as chown"),
    ALLOW("fchownat", "as chown"),
    ALLOW("umask", NULL),
    ALLOW("utime", "as chown"),
    ALLOW("utimes", "as chown"),
    ALLOW("futimesat", "as chown"),
    ALLOW("utimensat", "as chown"),
    ALLOW("setxattr", "as chown"),
    ALLOW("lsetxattr", "as chown"),
    ALLOW("fsetxattr", "as chown"),
    ALLOW("getxattr", NULL),
    ALLOW("lgetxattr", NULL),
    ALLOW("fgetxattr", NULL),
    ALLOW("listxattr", NULL),
    ALLOW("llistxattr", NULL),
    ALLOW("flistxattr", NULL),
    ALLOW("removexattr", "as chown"),
    ALLOW("lremovexattr", "as chown"),
    ALLOW("fremovexattr", "as chown"),
    ALLOW("inotify_init", NULL),
    ALLOW("inotify_init1", NULL),
    ALLOW("inotify_add_watch", NULL),
    ALLOW("inotify_rm_watch", NULL),
    ALLOW("ioctl", "all but TIOCSTI and TIOCLINUX, which push input into the terminal"),

    /* memory */
    ALLOW("brk", NULL),
    ALLOW("mmap", NULL),
    ALLOW("munmap", NULL),
    ALLOW("mremap", NULL),
    ALLOW("mprotect", NULL),
    ALLOW("madvise", NULL),
    ALLOW("msync", NULL),
    ALLOW("mincore", NULL),
    ALLOW("remap_file_pages", NULL),
    ALLOW("mlock", "bounded by RLIMIT_MEMLOCK"),
    ALLOW("mlock2", NULL),
    ALLOW("munlock", NULL),
    ALLOW("mlockall", NULL),
    ALLOW("munlockall", NULL),
    ALLOW("memfd_create", NULL),
    ALLOW("membarrier", NULL),
    ALLOW("pkey_mprotect", NULL),
    ALLOW("pkey_alloc", NULL),
    ALLOW("pkey_free", NULL),
    ALLOW("mbind", "NUMA policy of the caller's own memory"),
    ALLOW("get_mempolicy", NULL),
    ALLOW("set_mempolicy", NULL),
    ALLOW("set_mempolicy_home_node", NULL),
    ALLOW("map_shadow_stack", "user shadow stacks (CET)"),

    /* processes and threads */
    ALLOW("clone", "only without namespace flags"),
    NOSYS("clone3",
          "its flags sit in memory seccomp cannot read; ENOSYS makes libc fall back to clone"),
    ALLOW("fork", NULL),
    ALLOW("vfork", NULL),
    ALLOW("execve", NULL),
    ALLOW("execveat", NULL),
    ALLOW("exit", NULL),
    ALLOW("exit_group", NULL),
    ALLOW("wait4", NULL),
    ALLOW("waitid", NULL),
    ALLOW("set_tid_address", NULL),
    ALLOW("set_robust_list", NULL),
    ALLOW("get_robust_list", NULL),
    ALLOW("rseq", NULL),
    ALLOW("arch_prctl", NULL),
    ALLOW("prctl", "options that touch other processes need capabilities the run lacks"),
    ALLOW("futex", NULL),
    ALLOW("futex_waitv", NULL),
    ALLOW("futex_wake", NULL),
    ALLOW("futex_wait", NULL),
    ALLOW("futex_requeue", NULL),
    ALLOW("getpid", NULL),
    ALLOW("gettid", NULL),
    ALLOW("getppid", NULL),
    ALLOW("getpgid", NULL),
    ALLOW("getpgrp", NULL),
    ALLOW("setpgid", NULL),
    ALLOW("getsid", NULL),
    ALLOW("setsid", NULL),
    ALLOW("getrlimit", NULL),
    ALLOW("setrlimit", NULL),
    ALLOW("prlimit64", NULL),
    ALLOW("getrusage", NULL),
    ALLOW("times", NULL),
    ALLOW("getpriority", NULL),
    ALLOW("setpriority", NULL),
    ALLOW("ioprio_get", NULL),
    ALLOW("ioprio_set", NULL),
    ALLOW("sched_yield", NULL),
    ALLOW("sched_setparam", NULL),
    ALLOW("sched_getparam", NULL),
    ALLOW("sched_setscheduler", NULL),
    ALLOW("sched_getscheduler", NULL),
    ALLOW("sched_get_priority_max", NULL),
    ALLOW("sched_get_priority_min", NULL),
    ALLOW("sched_rr_get_interval", NULL),
    ALLOW("sched_setaffinity", NULL),
    ALLOW("sched_getaffinity", NULL),
    ALLOW("sched_setattr", NULL),
    ALLOW("sched_getattr", NULL),
    ALLOW("getcpu", NULL),
    ALLOW("personality", "only the harmless values (query, PER_LINUX, PER_LINUX32, UNAME26)"),
    ALLOW("pidfd_open", NULL),
    ALLOW("pidfd_send_signal", NULL),
    ALLOW("seccomp", "a program may restrict itself further"),
    ALLOW("landlock_create_ruleset", "a program may restrict itself further"),
    ALLOW("landlock_add_rule", NULL),
    ALLOW("landlock_restrict_self", NULL),

    /* credentials: harmless without capabilities */
    ALLOW("getuid", NULL),
    ALLOW("geteuid", NULL),
    ALLOW("getgid", NULL),
    ALLOW("getegid", NULL),
    ALLOW("getresuid", NULL),
    ALLOW("getresgid", NULL),
    ALLOW("getgroups", NULL),
    ALLOW("setuid", NULL),
    ALLOW("setgid", NULL),
    ALLOW("setreuid", NULL),
    ALLOW("setregid", NULL),
    ALLOW("setresuid", NULL),
    ALLOW("setresgid", NULL),
    ALLOW("setfsuid", NULL),
    ALLOW("setfsgid", NULL),
    ALLOW("setgroups", NULL),
    ALLOW("capget", NULL),
    ALLOW("capset", "can only drop what the run holds"),

    /* signals */
    ALLOW("rt_sigaction", NULL),
    ALLOW("rt_sigprocmask", NULL),
    ALLOW("rt_sigreturn", NULL),
    ALLOW("rt_sigpending", NULL),
    ALLOW("rt_sigtimedwait", NULL),
    ALLOW("rt_sigqueueinfo", NULL),
    ALLOW("rt_tgsigqueueinfo", NULL),
    ALLOW("rt_sigsuspend", NULL),
    ALLOW("sigaltstack", NULL),
    ALLOW("kill", NULL),
    ALLOW("tkill", NULL),
    ALLOW("tgkill", NULL),
    ALLOW("pause", NULL),
    ALLOW("restart_syscall", NULL),
    ALLOW("signalfd", NULL),
    ALLOW("signalfd4", NULL),

    /* time */
    ALLOW("clock_gettime", NULL),
    ALLOW("clock_getres", NULL),
    ALLOW("clock_nanosleep", NULL),
    ALLOW("nanosleep", NULL),
    ALLOW("gettimeofday", NULL),
    ALLOW("time", NULL),
    ALLOW("alarm", NULL),
    ALLOW("getitimer", NULL),
    ALLOW("setitimer", NULL),
    ALLOW("timer_create", NULL),
    ALLOW("timer_settime", NULL),
    ALLOW("timer_gettime", NULL),
    ALLOW("timer_getoverrun", NULL),
    ALLOW("timer_delete", NULL),
    ALLOW("timerfd_create", NULL),
    ALLOW("timerfd_settime", NULL),
    ALLOW("timerfd_gettime", NULL),

    /* polling and events */
    ALLOW("poll", NULL),
    ALLOW("ppoll", NULL),
    ALLOW("select", NULL),
    ALLOW("pselect6", NULL),
    ALLOW("epoll_create", NULL),
    ALLOW("epoll_create1", NULL),
    ALLOW("epoll_ctl", NULL),
    ALLOW("epoll_wait", NULL),
    ALLOW("epoll_pwait", NULL),
    ALLOW("epoll_pwait2", NULL),
    ALLOW("eventfd", NULL),
    ALLOW("eventfd2", NULL),
    ALLOW("pipe", NULL),
    ALLOW("pipe2", NULL),
    ALLOW("io_setup", "classic AIO goes through ordinary file checks, unlike io_uring"),
    ALLOW("io_destroy", NULL),
    ALLOW("io_submit", NULL),
    ALLOW("io_cancel", NULL),
    ALLOW("io_getevents", NULL),
    ALLOW("io_pgetevents", NULL),

    /* sockets */
    ALLOW("socket",
          "AF_UNIX streams and seqpacket (a unix datagram socket gets EACCES: each "
          "send names its address past connect()), and TCP, UDP and ICMP over "
          "AF_INET and AF_INET6; other known families get EAFNOSUPPORT, other inet "
          "protocols EPROTONOSUPPORT"),
    ALLOW("socketpair",
          "AF_UNIX streams and seqpacket only; other known families get "
          "EAFNOSUPPORT"),
    ALLOW("connect", "a keeper makes it where the host's kernel would (sandbox/usock.h)"),
    ALLOW("bind", NULL),
    ALLOW("listen", NULL),
    ALLOW("accept", NULL),
    ALLOW("accept4", NULL),
    ALLOW("sendto", NULL),
    ALLOW("recvfrom", NULL),
    ALLOW("sendmsg", NULL),
    ALLOW("recvmsg", NULL),
    ALLOW("sendmmsg", NULL),
    ALLOW("recvmmsg", NULL),
    ALLOW("shutdown", NULL),
    ALLOW("getsockname", NULL),
    ALLOW("getpeername", NULL),
    ALLOW("getsockopt", NULL),
    ALLOW("setsockopt", NULL),

    /* SysV and POSIX IPC: the IPC namespace is the run's own */
    ALLOW("shmget", NULL),
    ALLOW("shmat", NULL),
    ALLOW("shmdt", NULL),
    ALLOW("shmctl", NULL),
    ALLOW("semget", NULL),
    ALLOW("semop", NULL),
    ALLOW("semtimedop", NULL),
    ALLOW("semctl", NULL),
    ALLOW("msgget", NULL),
    ALLOW("msgsnd", NULL),
    ALLOW("msgrcv", NULL),
    ALLOW("msgctl", NULL),
    ALLOW("mq_open", NULL),
    ALLOW("mq_unlink", NULL),
    ALLOW("mq_timedsend", NULL),
    ALLOW("mq_timedreceive", NULL),
    ALLOW("mq_notify", NULL),
    ALLOW("mq_getsetattr", NULL),

    /* system information */
    ALLOW("uname", NULL),
    ALLOW("sysinfo", NULL),
    ALLOW("getrandom", NULL),

    /* refused: the policy may lift these */
    DENY("chroot", "the root is fixed before exec"),
    DENY("kcmp", "compares kernel objects of other processes"),
    DENY("move_pages", "moves memory of other processes"),
    DENY("migrate_pages", "moves memory of other processes"),
    DENY("fanotify_init", "whole-filesystem monitoring"),
    DENY("fanotify_mark", "whole-filesystem monitoring"),
    DENY("sethostname", "the host name is set by the supervisor"),
    DENY("setdomainname", "the domain name is set by the supervisor"),
    DENY("memfd_secret", "unmapped from the kernel, so nothing can inspect it"),
    DENY("process_mrelease", "reaps memory of other processes"),
    DENY("sysfs", "obsolete"),
    DENY("ustat", "obsolete"),

    /* refused for good: kernel attack surface or a way out of the boundary */
    HARD("io_uring_setup", "io_uring operations never pass through this filter"),
    HARD("io_uring_enter", "io_uring operations never pass through this filter"),
    HARD("io_uring_register", "io_uring operations never pass through this filter"),
    HARD("bpf", "loads programs into the kernel"),
    HARD("perf_event_open", "kernel attack surface and side channels"),
    HARD("userfaultfd", "stalls kernel page faults, a staple of exploit races"),
    HARD("add_key", "kernel keyrings are not namespaced"),
    HARD("request_key", "kernel keyrings are not namespaced"),
    HARD("keyctl", "kernel keyrings are not namespaced"),
    HARD("ptrace", "would let one process of the run take over another"),
    HARD("process_vm_readv", "reads the memory of other processes"),
    HARD("process_vm_writev", "writes the memory of other processes"),
    HARD("process_madvise", "acts on the memory of other processes"),
    HARD("pidfd_getfd", "takes file descriptors from other processes"),
    HARD("mount", "the mount table is fixed before exec"),
    HARD("umount2", "the mount table is fixed before exec"),
    HARD("pivot_root", "the mount table is fixed before exec"),
    HARD("move_mount", "the mount table is fixed before exec"),
    HARD("open_tree", "the mount table is fixed before exec"),
    HARD("fsopen", "the mount table is fixed before exec"),
    HARD("fsconfig", "the mount table is fixed before exec"),
    HARD("fsmount", "the mount table is fixed before exec"),
    HARD("fspick", "the mount table is fixed before exec"),
    HARD("mount_setattr", "the mount table is fixed before exec"),
    HARD("unshare", "namespaces are fixed by the supervisor"),
    HARD("setns", "namespaces are fixed by the supervisor"),
    HARD("open_by_handle_at", "opens files by handle, around every path check"),
    HARD("name_to_handle_at", "only useful with open_by_handle_at"),
    HARD("kexec_load", "replaces the running kernel"),
    HARD("kexec_file_load", "replaces the running kernel"),
    HARD("init_module", "loads kernel code"),
    HARD("finit_module", "loads kernel code"),
    HARD("delete_module", "unloads kernel code"),
    HARD("create_module", "loads kernel code"),
    HARD("query_module", "kernel module interface"),
    HARD("get_kernel_syms", "kernel module interface"),
    HARD("reboot", "acts on the whole machine"),
    HARD("settimeofday", "the clock is shared with the host"),
    HARD("clock_settime", "the clock is shared with the host"),
    HARD("clock_adjtime", "the clock is shared with the host"),
    HARD("adjtimex", "the clock is shared with the host"),
    HARD("swapon", "acts on the whole machine"),
    HARD("swapoff", "acts on the whole machine"),
    HARD("acct", "process accounting is host-wide"),
    HARD("quotactl", "filesystem quotas are host-wide"),
    HARD("quotactl_fd", "filesystem quotas are host-wide"),
    HARD("lookup_dcookie", "exposes kernel object cookies"),
    HARD("vhangup", "hangs up the terminal for every holder"),
    HARD("iopl", "raw I/O port access"),
    HARD("ioperm", "raw I/O port access"),
    HARD("modify_ldt", "16-bit segments, an old exploit vector"),
    HARD("syslog", "the kernel log is host-wide"),
    HARD("uselib", "obsolete a.out loader"),
    HARD("nfsservctl", "removed from the kernel"),
    HARD("_sysctl", "removed from the kernel"),
};

const struct seccomp_rule *seccomp_rule_table(size_t *n)
{
    *n = sizeof rules / sizeof rules[0];
    return rules;
}

const struct seccomp_rule *seccomp_rule_find(const char *name)
{
    size_t n = sizeof rules / sizeof rules[0];
    for (size_t i = 0; i < n; i++)
        if (strcmp(rules[i].name, name) == 0)
            return &rules[i];
    return NULL;
}

int seccomp_syscall_nr(const char *name)
{
    /* Negative numbers are libseccomp's pseudo syscalls for other arches. */
    int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name);
    return nr == __NR_SCMP_ERROR || nr < 0 ? -1 : nr;
}

int seccomp_check_name(const char *name, bool allow, char *why, size_t why_len)
{
    if (seccomp_syscall_nr(name) < 0) {
        snprintf(why, why_len, "unknown system call \"%s\"", name);
        return -1;
    }
    const struct seccomp_rule *r = seccomp_rule_find(name);
    if (allow && r && r->hard) {
        snprintf(why, why_len, "\"%s\" cannot be allowed: %s", name, r->why);
        return -1;
    }
    return 0;
}

void seccomp_profile_digest(const struct policy *p, unsigned char out[32])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int len = 0;
    memset(out, 0, 32);
    if (!md)
        return;
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    size_t n = sizeof rules / sizeof rules[0];
    /*
     * Names, verdicts and hardness: what the filter is built from; the why,
     * because it states the argument conditions (socket's protocols), which
     * live in code. The NUL bytes keep "ab"+"c" apart from "a"+"bc".
     */
    for (size_t i = 0; i < n; i++) {
        char verdict[8];
        const char *why = rules[i].why ? rules[i].why : "";
        snprintf(verdict, sizeof verdict, "%d%d", (int)rules[i].verdict, (int)rules[i].hard);
        EVP_DigestUpdate(md, rules[i].name, strlen(rules[i].name) + 1);
        EVP_DigestUpdate(md, verdict, strlen(verdict) + 1);
        EVP_DigestUpdate(md, why, strlen(why) + 1);
    }
    for (size_t i = 0; p && i < p->n_syscalls_allow; i++) {
        EVP_DigestUpdate(md, "+", 1);
        EVP_DigestUpdate(md, p->syscalls_allow[i], strlen(p->syscalls_allow[i]) + 1);
    }
    for (size_t i = 0; p && i < p->n_syscalls_deny; i++) {
        EVP_DigestUpdate(md, "-", 1);
        EVP_DigestUpdate(md, p->syscalls_deny[i], strlen(p->syscalls_deny[i]) + 1);
    }
    EVP_DigestFinal_ex(md, out, &len);
    EVP_MD_CTX_free(md);
}
