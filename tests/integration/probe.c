/*
 * probe: the escape probe. It runs inside a sandbox (built static, so it
 * needs nothing from the sandbox's /usr) and tries one thing per run.
 *
 *   probe ACTION [ARGS...]
 *
 * Exit status:
 *   0        the action succeeded (for a boundary test: the boundary broke)
 *   1..199   errno of the step that failed (EPERM 1, ENOENT 2, EACCES 13,
 *            EROFS 30, ENOSYS 38, ENETUNREACH 101, ECONNREFUSED 111 ...)
 *   200      usage error (unknown action, wrong arguments)
 *   201      caps: some capability set (Eff, Prm, Inh, Amb) is not empty
 *   202      fds: a descriptor above 2 is open
 *   203      i386/x32: the foreign syscall returned instead of killing us
 *   204      bind-tcp: the loopback round trip carried the wrong bytes
 *   205      a step returned success with impossible semantics (short I/O)
 *
 * Death by a signal shows as the sandbox's 128+N; a test counts that as a
 * crash unless it asked for it (i386, x32: SIGSYS, 159).
 *
 * Output goes to stdout with write(2) only: no stdio buffering to lose when
 * a seccomp kill ends the process.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/bpf.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/if_ether.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <linux/fs.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif

#define E_USAGE 200
#define E_CAPS 201
#define E_FDS 202
#define E_FOREIGN 203
#define E_ROUNDTRIP 204
#define E_SHORT 205

extern char **environ;

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(buf))
        n = sizeof(buf) - 1;
    for (int off = 0; off < n;) {
        ssize_t w = write(1, buf + off, (size_t)(n - off));
        if (w <= 0)
            return;
        off += (int)w;
    }
}

/* Report the failing step on stderr and return its errno as the status. */
static int fail(const char *step)
{
    int e = errno ? errno : E_SHORT;
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "probe: %s: %s (errno %d)\n", step, strerror(e), e);
    if (n > 0)
        (void)!write(2, buf, (size_t)n);
    return e;
}

static int usage(const char *msg)
{
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "probe: usage: %s\n", msg);
    if (n > 0)
        (void)!write(2, buf, (size_t)n);
    return E_USAGE;
}

static int parse_sockaddr_in(const char *ip, const char *port, struct sockaddr_storage *ss,
                             socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    long p = strtol(port, NULL, 10);
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, ip, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)p);
        *len = sizeof(*in4);
        return 0;
    }
    if (inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)p);
        *len = sizeof(*in6);
        return 0;
    }
    return -1;
}

static void set_timeouts(int fd)
{
    struct timeval tv = { .tv_sec = 5 };
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static int act_read(int argc, char **argv)
{
    if (argc != 1)
        return usage("read PATH");
    int fd = open(argv[0], O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail("open");
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(1, buf + off, (size_t)(n - off));
            if (w <= 0)
                return fail("write stdout");
            off += w;
        }
    if (n < 0)
        return fail("read");
    return 0;
}

static int act_write(int argc, char **argv)
{
    if (argc < 1 || argc > 2)
        return usage("write PATH [TEXT]");
    const char *text = argc == 2 ? argv[1] : "probe was here\n";
    int fd = open(argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return fail("open");
    ssize_t w = write(fd, text, strlen(text));
    if (w < 0)
        return fail("write");
    if ((size_t)w != strlen(text))
        return E_SHORT;
    if (close(fd) < 0)
        return fail("close");
    return 0;
}

static int act_stat(int argc, char **argv)
{
    if (argc != 1)
        return usage("stat PATH");
    struct stat st;
    if (lstat(argv[0], &st) < 0)
        return fail("lstat");
    out("mode=%o uid=%u gid=%u size=%lld\n", st.st_mode, st.st_uid, st.st_gid,
        (long long)st.st_size);
    return 0;
}

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Print each name in DIR but . and .., one a line; returns errno or 0. */
static int list_dir(const char *dir, int (*each)(const char *name, void *ctx), void *ctx)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return fail("open");
    char buf[8192];
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
        if (n < 0) {
            int r = fail("getdents64");
            close(fd);
            return r;
        }
        if (n == 0)
            break;
        for (long off = 0; off < n;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            off += d->d_reclen;
            if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
                continue;
            int r = each(d->d_name, ctx);
            if (r) {
                close(fd);
                return r;
            }
        }
    }
    close(fd);
    return 0;
}

static int print_name(const char *name, void *ctx)
{
    (void)ctx;
    out("%s\n", name);
    return 0;
}

static int act_ls(int argc, char **argv)
{
    if (argc != 1)
        return usage("ls DIR");
    return list_dir(argv[0], print_name, NULL);
}

static int act_connect_tcp(int argc, char **argv)
{
    if (argc != 2)
        return usage("connect-tcp IP PORT");
    struct sockaddr_storage ss;
    socklen_t len;
    if (parse_sockaddr_in(argv[0], argv[1], &ss, &len) < 0)
        return usage("connect-tcp: bad IP");
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fail("socket");
    set_timeouts(fd);
    if (connect(fd, (struct sockaddr *)&ss, len) < 0)
        return fail("connect");
    (void)!write(fd, "probe\n", 6);
    return 0;
}

static int act_send_udp(int argc, char **argv)
{
    if (argc != 2)
        return usage("send-udp IP PORT");
    struct sockaddr_storage ss;
    socklen_t len;
    if (parse_sockaddr_in(argv[0], argv[1], &ss, &len) < 0)
        return usage("send-udp: bad IP");
    int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fail("socket");
    if (sendto(fd, "probe\n", 6, 0, (struct sockaddr *)&ss, len) < 0)
        return fail("sendto");
    return 0;
}

static int connect_unix(const char *name, int abstract)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    size_t n = strlen(name);
    if (n + 1 >= sizeof(sun.sun_path))
        return usage("socket name too long");
    memcpy(sun.sun_path + (abstract ? 1 : 0), name, n);
    /* path: name plus its NUL; abstract: the leading NUL plus name. */
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fail("socket");
    set_timeouts(fd);
    if (connect(fd, (struct sockaddr *)&sun, len) < 0)
        return fail("connect");
    (void)!write(fd, "probe\n", 6);
    return 0;
}

static int act_connect_unix(int argc, char **argv)
{
    if (argc != 1)
        return usage("connect-unix PATH");
    return connect_unix(argv[0], 0);
}

static int act_connect_abstract(int argc, char **argv)
{
    if (argc != 1)
        return usage("connect-abstract NAME");
    return connect_unix(argv[0], 1);
}

/*
 * A datagram to the unix socket PATH by every way a send can name an
 * address: a datagram socket, each end of a datagram pair, and sendto()
 * on a stream and on a seqpacket socket (whose kernels refuse or ignore
 * the address). 0 when any was sent; else the first way's errno.
 */
static int act_sendto_unix(int argc, char **argv)
{
    if (argc != 1)
        return usage("sendto-unix PATH");
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    size_t n = strlen(argv[0]);
    if (n + 1 >= sizeof(sun.sun_path))
        return usage("socket name too long");
    memcpy(sun.sun_path, argv[0], n);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    int first = 0, sent = 0;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || sendto(fd, "probe\n", 6, 0, (struct sockaddr *)&sun, len) < 0)
        first = fail(fd < 0 ? "socket(dgram)" : "sendto(dgram)");
    else
        sent = 1;
    int pair[2];
    errno = 0;
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair) < 0)
        fail("socketpair(dgram)");
    else if (sendto(pair[0], "probe\n", 6, 0, (struct sockaddr *)&sun, len) == 6)
        sent = 1;
    else
        fail("sendto(pair)");
    static const int types[] = { SOCK_STREAM, SOCK_SEQPACKET };
    for (size_t i = 0; i < 2; i++) {
        int s = socket(AF_UNIX, types[i] | SOCK_CLOEXEC, 0);
        if (s >= 0 && sendto(s, "probe\n", 6, MSG_DONTWAIT, (struct sockaddr *)&sun, len) == 6)
            sent = 1;
        else
            fail(i ? "sendto(seqpacket)" : "sendto(stream)");
    }
    return sent ? 0 : first;
}

/* Listen on IP:PORT, connect to it, and carry bytes both ways. */
static int act_bind_tcp(int argc, char **argv)
{
    if (argc != 2)
        return usage("bind-tcp IP PORT");
    struct sockaddr_storage ss;
    socklen_t len;
    if (parse_sockaddr_in(argv[0], argv[1], &ss, &len) < 0)
        return usage("bind-tcp: bad IP");
    int ls = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0)
        return fail("socket");
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(ls, (struct sockaddr *)&ss, len) < 0)
        return fail("bind");
    if (listen(ls, 4) < 0)
        return fail("listen");
    if (getsockname(ls, (struct sockaddr *)&ss, &len) < 0)
        return fail("getsockname");
    int c = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c < 0)
        return fail("socket (client)");
    set_timeouts(c);
    if (connect(c, (struct sockaddr *)&ss, len) < 0)
        return fail("connect");
    int a = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    if (a < 0)
        return fail("accept");
    set_timeouts(a);
    char buf[16] = { 0 };
    if (write(c, "ping", 4) != 4)
        return fail("write");
    if (read(a, buf, sizeof(buf)) != 4 || memcmp(buf, "ping", 4))
        return E_ROUNDTRIP;
    if (write(a, "pong", 4) != 4)
        return fail("write");
    memset(buf, 0, sizeof(buf));
    if (read(c, buf, sizeof(buf)) != 4 || memcmp(buf, "pong", 4))
        return E_ROUNDTRIP;
    out("loopback ok port %u\n",
        ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                                : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    return 0;
}

static int act_kill(int argc, char **argv)
{
    if (argc != 2)
        return usage("kill PID SIG");
    if (kill((pid_t)strtol(argv[0], NULL, 10), (int)strtol(argv[1], NULL, 10)) < 0)
        return fail("kill");
    return 0;
}

/* Kill the parent at once, then write PATH: a command racing whoever started it. */
static int act_kill_parent_write(int argc, char **argv)
{
    if (argc != 1)
        return usage("kill-parent-write PATH");
    if (kill(getppid(), SIGKILL) < 0)
        return fail("kill");
    int fd = open(argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, "x", 1) != 1)
        return fail("write");
    close(fd);
    return 0;
}

static int act_unshare(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("unshare");
    if (unshare(CLONE_NEWUSER) < 0)
        return fail("unshare(CLONE_NEWUSER)");
    return 0;
}

static int act_unshare_ns(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("unshare-ns");
    if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID) < 0)
        return fail("unshare(NEWNS|NEWNET|NEWPID)");
    return 0;
}

static int act_setns(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("setns");
    int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail("open /proc/self/ns/net");
    if (setns(fd, CLONE_NEWNET) < 0)
        return fail("setns");
    return 0;
}

static int act_clone_newuser(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("clone-newuser");
    long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (pid < 0)
        return fail("clone(CLONE_NEWUSER)");
    if (pid == 0)
        _exit(0);
    waitpid((pid_t)pid, NULL, 0);
    return 0;
}

static int act_mount(int argc, char **argv)
{
    if (argc > 1)
        return usage("mount [TARGET]");
    const char *target = argc == 1 ? argv[0] : "/tmp";
    if (mount("none", target, "tmpfs", 0, "size=1M") < 0)
        return fail("mount tmpfs");
    return 0;
}

static int act_open_tree(int argc, char **argv)
{
    if (argc > 1)
        return usage("open-tree [PATH]");
    long fd = syscall(SYS_open_tree, AT_FDCWD, argc ? argv[0] : "/", 1 /* OPEN_TREE_CLONE */);
    if (fd < 0)
        return fail("open_tree");
    return 0;
}

static int act_chroot(int argc, char **argv)
{
    if (argc > 1)
        return usage("chroot [DIR]");
    if (chroot(argc ? argv[0] : "/tmp") < 0)
        return fail("chroot");
    return 0;
}

static int act_setuid0(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("setuid0");
    if (syscall(SYS_setuid, 0) < 0)
        return fail("setuid(0)");
    return 0;
}

static int act_ptrace_attach(int argc, char **argv)
{
    if (argc > 1)
        return usage("ptrace-attach [PID]");
    pid_t pid = argc ? (pid_t)strtol(argv[0], NULL, 10) : getppid();
    if (ptrace(PTRACE_ATTACH, pid, 0, 0) < 0)
        return fail("ptrace(PTRACE_ATTACH)");
    return 0;
}

static int act_ptrace_traceme(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("ptrace-traceme");
    if (ptrace(PTRACE_TRACEME, 0, 0, 0) < 0)
        return fail("ptrace(PTRACE_TRACEME)");
    return 0;
}

/* TIOCSTI on FD (default 0) or on PATH (e.g. /dev/tty). */
static int tty_ioctl(int argc, char **argv, unsigned long req, const char *name)
{
    if (argc > 1)
        return usage("ioctl-tiocsti|ioctl-tioclinux [FD|PATH]");
    int fd = 0;
    if (argc == 1) {
        if (argv[0][0] == '/') {
            fd = open(argv[0], O_RDWR | O_NOCTTY | O_CLOEXEC);
            if (fd < 0)
                return fail("open");
        } else {
            fd = (int)strtol(argv[0], NULL, 10);
        }
    }
    char c = '#';
    char sub[2] = { 12 /* TIOCL_GETSHIFTSTATE */, 0 };
    if (ioctl(fd, req, req == TIOCSTI ? (void *)&c : (void *)sub) < 0)
        return fail(name);
    return 0;
}

static int act_tiocsti(int argc, char **argv)
{
    return tty_ioctl(argc, argv, TIOCSTI, "ioctl(TIOCSTI)");
}

static int act_tioclinux(int argc, char **argv)
{
    return tty_ioctl(argc, argv, TIOCLINUX, "ioctl(TIOCLINUX)");
}

static int act_socket_netlink(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("socket-netlink");
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0)
        return fail("socket(AF_NETLINK, NETLINK_ROUTE)");
    return 0;
}

static int act_socket_packet(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("socket-packet");
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (fd < 0)
        return fail("socket(AF_PACKET)");
    return 0;
}

/*
 * socket FAMILY TYPE PROTOCOL: make one socket. FAMILY is unix, inet or
 * inet6; TYPE stream, dgram, raw or seqpacket; PROTOCOL a number.
 */
static int act_socket(int argc, char **argv)
{
    static const struct {
        const char *name;
        int value;
    } families[] = {
        {"unix", AF_UNIX}, {"inet", AF_INET}, {"inet6", AF_INET6},
    }, types[] = {
        {"stream", SOCK_STREAM}, {"dgram", SOCK_DGRAM}, {"raw", SOCK_RAW},
        {"seqpacket", SOCK_SEQPACKET},
    };
    if (argc != 3)
        return usage("socket unix|inet|inet6 stream|dgram|raw|seqpacket PROTOCOL");
    int family = -1, type = -1;
    for (size_t i = 0; i < sizeof(families) / sizeof(*families); i++)
        if (!strcmp(argv[0], families[i].name))
            family = families[i].value;
    for (size_t i = 0; i < sizeof(types) / sizeof(*types); i++)
        if (!strcmp(argv[1], types[i].name))
            type = types[i].value;
    if (family < 0 || type < 0)
        return usage("socket: unknown family or type");
    int fd = socket(family, type | SOCK_CLOEXEC, (int)strtol(argv[2], NULL, 0));
    if (fd < 0)
        return fail("socket");
    out("socket %s %s %s created\n", argv[0], argv[1], argv[2]);
    return 0;
}

/* What a /proc/PID/mem writer tries to overwrite. */
static char canary[] = "canary-intact";

/*
 * Open PID's mem for writing VIA one of the ways in: the path, the thread's
 * copy under task/, or an O_PATH descriptor reopened through /proc/self/fd.
 */
static int open_mem(pid_t pid, const char *via)
{
    char path[64];
    if (!strcmp(via, "task"))
        snprintf(path, sizeof(path), "/proc/%d/task/%d/mem", pid, pid);
    else
        snprintf(path, sizeof(path), "/proc/%d/mem", pid);
    if (!strcmp(via, "fd")) {
        int o = open(path, O_PATH | O_CLOEXEC);
        if (o < 0)
            return -1;
        snprintf(path, sizeof(path), "/proc/self/fd/%d", o);
    }
    return open(path, O_RDWR | O_CLOEXEC);
}

static int write_mem(pid_t pid, const char *via, void *addr)
{
    int fd = open_mem(pid, via);
    if (fd < 0)
        return fail("open mem");
    ssize_t w = pwrite(fd, "PWNED", 5, (off_t)(uintptr_t)addr);
    if (w < 0)
        return fail("pwrite mem");
    return w == 5 ? 0 : E_SHORT;
}

static int mem_via(int argc, char **argv, const char **via)
{
    *via = argc ? argv[0] : "path";
    return argc <= 1 && (!strcmp(*via, "path") || !strcmp(*via, "task") || !strcmp(*via, "fd"));
}

/*
 * proc-mem-sibling [path|task|fd]: write over the canary of a forked
 * sibling through /proc/PID/mem. The sibling prints what it holds once the
 * attempt is over.
 */
static int act_proc_mem_sibling(int argc, char **argv)
{
    const char *via;
    if (!mem_via(argc, argv, &via))
        return usage("proc-mem-sibling [path|task|fd]");
    int go[2];
    if (pipe2(go, O_CLOEXEC) < 0)
        return fail("pipe");
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork");
    if (pid == 0) {
        char c;
        close(go[1]);
        (void)!read(go[0], &c, 1);
        out("sibling canary: %s\n", canary);
        _exit(0);
    }
    close(go[0]);
    int rc = write_mem(pid, via, canary); /* fork kept the address */
    close(go[1]);
    int st;
    waitpid(pid, &st, 0);
    return rc;
}

/*
 * proc-mem-self-ro [path|task|fd]: write through /proc/self/mem into a page
 * mapped read-only (what FOLL_FORCE allows), then print the page.
 */
static int act_proc_mem_self_ro(int argc, char **argv)
{
    const char *via;
    if (!mem_via(argc, argv, &via))
        return usage("proc-mem-self-ro [path|task|fd]");
    char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return fail("mmap");
    memcpy(page, canary, sizeof(canary));
    if (mprotect(page, 4096, PROT_READ) < 0)
        return fail("mprotect");
    int rc = write_mem(getpid(), via, page);
    out("read-only page: %s\n", page);
    return rc;
}

static int act_io_uring(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("io-uring");
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    long fd = syscall(SYS_io_uring_setup, 4, &p);
    if (fd < 0)
        return fail("io_uring_setup");
    return 0;
}

static int act_bpf(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("bpf");
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
    if (fd < 0)
        return fail("bpf(BPF_MAP_CREATE)");
    return 0;
}

static int act_perf(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("perf-event-open");
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.exclude_kernel = 1;
    long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd < 0)
        return fail("perf_event_open");
    return 0;
}

static int act_userfaultfd(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("userfaultfd");
    long fd = syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */);
    if (fd < 0)
        return fail("userfaultfd");
    return 0;
}

static int act_keyctl(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("keyctl");
    long id = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
    if (id < 0)
        return fail("keyctl(KEYCTL_GET_KEYRING_ID)");
    return 0;
}

static int act_add_key(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("add-key");
    long id = syscall(SYS_add_key, "user", "cordon-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING);
    if (id < 0)
        return fail("add_key");
    return 0;
}

static int act_open_by_handle(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("open-by-handle");
    /* A plausible ext4/tmpfs handle: inode 2, generation 0. */
    _Alignas(struct file_handle) unsigned char raw[sizeof(struct file_handle) + 128];
    memset(raw, 0, sizeof(raw));
    struct file_handle *fh = (struct file_handle *)raw;
    fh->handle_bytes = 8;
    fh->handle_type = 1; /* FILEID_INO32_GEN */
    raw[sizeof(struct file_handle)] = 2;
    int mfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* readable at every level */
    if (mfd < 0)
        return fail("open .");
    long fd = syscall(SYS_open_by_handle_at, mfd, fh, O_RDONLY);
    if (fd < 0)
        return fail("open_by_handle_at");
    return 0;
}

static int act_caps(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("caps");
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail("open /proc/self/status");
    char buf[8192];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n < 0)
        return fail("read");
    buf[n] = 0;
    int nonzero = 0;
    /* gVisor's /proc/self/status has no NoNewPrivs line: then the kernel's answer. */
    if (!strstr(buf, "\nNoNewPrivs:"))
        out("NoNewPrivs:\t%d\n", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "Cap", 3) || !strncmp(line, "NoNewPrivs", 10) ||
            !strncmp(line, "Seccomp", 7) || !strncmp(line, "Uid", 3) || !strncmp(line, "Gid", 3) ||
            !strncmp(line, "Groups", 6))
            out("%s\n", line);
        static const char *const must_be_empty[] = { "CapEff:", "CapPrm:", "CapInh:", "CapAmb:" };
        for (size_t i = 0; i < sizeof(must_be_empty) / sizeof(*must_be_empty); i++) {
            size_t k = strlen(must_be_empty[i]);
            if (!strncmp(line, must_be_empty[i], k) && strtoull(line + k, NULL, 16) != 0)
                nonzero = 1;
        }
    }
    return nonzero ? E_CAPS : 0;
}

struct fd_scan {
    int self;
    int extra;
};

static int check_fd(const char *name, void *ctx)
{
    struct fd_scan *s = ctx;
    int fd = (int)strtol(name, NULL, 10);
    if (fd <= 2 || fd == s->self)
        return 0;
    char path[64], target[512];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    target[n > 0 ? n : 0] = 0;
    out("fd %d -> %s\n", fd, target);
    s->extra++;
    return 0;
}

static int act_fds(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("fds");
    /* list_dir's own descriptor is the lowest free one: find it first. */
    int probe_fd = open(".", O_RDONLY | O_CLOEXEC); /* the workdir: readable at every level */
    if (probe_fd < 0)
        return fail("open .");
    close(probe_fd);
    struct fd_scan s = { .self = probe_fd, .extra = 0 };
    int r = list_dir("/proc/self/fd", check_fd, &s);
    if (r)
        return r;
    return s.extra ? E_FDS : 0;
}

static int act_env(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("env");
    for (char **e = environ; *e; e++)
        out("%s\n", *e);
    return 0;
}

static int act_sleep(int argc, char **argv)
{
    if (argc < 1)
        return usage("sleep SECONDS [MARKER...]");
    struct timespec ts = { .tv_sec = strtol(argv[0], NULL, 10) };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    return 0;
}

/*
 * daemon FILE SECONDS [MARKER...]: setsid double fork; the grandchild closes
 * stdio (so no pipe ties it to the supervisor), waits SECONDS, then writes
 * FILE and sleeps on. The parent returns at once.
 */
static int act_daemon(int argc, char **argv)
{
    if (argc < 2)
        return usage("daemon FILE SECONDS [MARKER...]");
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork");
    if (pid > 0) {
        int st;
        waitpid(pid, &st, 0);
        out("daemonized\n");
        return 0;
    }
    setsid();
    signal(SIGHUP, SIG_IGN);
    pid = fork();
    if (pid < 0)
        _exit(1);
    if (pid > 0)
        _exit(0);
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; fd++)
        if (null >= 0)
            dup2(null, fd);
        else
            close(fd);
    struct timespec ts = { .tv_sec = strtol(argv[1], NULL, 10) };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    int fd = open(argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)!write(fd, "daemon survived\n", 16);
        close(fd);
    }
    ts.tv_sec = 1000;
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    _exit(0);
}

/* getpid through the i386 entry point: the sandbox must kill us (SIGSYS). */
static int act_i386(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("i386");
    long ret = 20; /* __NR_getpid on i386 */
    __asm__ volatile("int $0x80" : "+a"(ret) : : "memory", "cc");
    out("int 0x80 returned %ld\n", ret);
    return E_FOREIGN;
}

/* getpid through the x32 ABI: killed too. */
static int act_x32(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("x32");
    long ret = syscall(__X32_SYSCALL_BIT | SYS_getpid);
    out("x32 getpid returned %ld (errno %d)\n", ret, ret < 0 ? errno : 0);
    return E_FOREIGN;
}

/* syscall NR [ARG...]: a raw syscall with integer arguments (0 = NULL). */
static int act_syscall(int argc, char **argv)
{
    if (argc < 1 || argc > 7)
        return usage("syscall NR [ARG...] (up to 6 integer arguments)");
    long a[6] = { 0 };
    for (int i = 1; i < argc; i++)
        a[i - 1] = strtol(argv[i], NULL, 0);
    long ret = syscall(strtol(argv[0], NULL, 0), a[0], a[1], a[2], a[3], a[4], a[5]);
    if (ret < 0)
        return fail("syscall");
    out("returned %ld\n", ret);
    return 0;
}

/*
 * meta OP PATH [ARG...]: one change of a file's metadata, the way OP names:
 * by path, at a directory, or on a descriptor opened first (for reading, or
 * O_PATH). Times are set to 1000000000 (2001), a mode is octal, an owner
 * two numbers, an xattr a name (and a value). The status is the change's
 * errno; an open that fails first says so on stderr ("open: ...").
 */
#define T_2001 1000000000
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif

struct xattr_args_v0 {
    uint64_t value;
    uint32_t size;
    uint32_t flags;
};

static int meta_fd(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0)
        fail("open");
    return fd;
}

static int act_meta(int argc, char **argv)
{
    if (argc < 2)
        return usage("meta OP PATH [ARG...]");
    const char *op = argv[0], *path = argv[1];
    const char *a1 = argc > 2 ? argv[2] : "0", *a2 = argc > 3 ? argv[3] : "";
    mode_t mode = (mode_t)strtol(a1, NULL, 8);
    uid_t uid = (uid_t)strtol(a1, NULL, 10);
    gid_t gid = (gid_t)strtol(a2, NULL, 10);
    struct timespec ts[2] = { { T_2001, 0 }, { T_2001, 0 } };
    struct timeval tv[2] = { { T_2001, 0 }, { T_2001, 0 } };
    struct {
        time_t a, m;
    } ub = { T_2001, T_2001 };
    struct xattr_args_v0 xa = { (uint64_t)(uintptr_t)a2, (uint32_t)strlen(a2), 0 };
    static const char *const by_fd[] = {
        "fchmod",    "fchown",       "futimens", "futimesat-fd",
        "fsetxattr", "fremovexattr", "chattr",   "chattr-immutable"
    };
    long r;
    int fd = -1;
    for (size_t i = 0; i < sizeof(by_fd) / sizeof(*by_fd); i++)
        if (!strcmp(op, by_fd[i]) && (fd = meta_fd(path, O_RDONLY)) < 0)
            return errno;
    if (!strcmp(op, "fchownat-empty") && (fd = meta_fd(path, O_PATH)) < 0)
        return errno;
    if (!strcmp(op, "chmod"))
        r = chmod(path, mode);
    else if (!strcmp(op, "fchmod"))
        r = fchmod(fd, mode);
    else if (!strcmp(op, "fchmodat"))
        r = syscall(SYS_fchmodat, AT_FDCWD, path, mode);
    else if (!strcmp(op, "fchmodat2-nofollow"))
        r = syscall(452, AT_FDCWD, path, mode, AT_SYMLINK_NOFOLLOW);
    else if (!strcmp(op, "chown"))
        r = chown(path, uid, gid);
    else if (!strcmp(op, "lchown"))
        r = lchown(path, uid, gid);
    else if (!strcmp(op, "fchown"))
        r = fchown(fd, uid, gid);
    else if (!strcmp(op, "fchownat-empty"))
        r = fchownat(fd, "", uid, gid, AT_EMPTY_PATH);
    else if (!strcmp(op, "utimensat"))
        r = utimensat(AT_FDCWD, path, ts, 0);
    else if (!strcmp(op, "futimens"))
        r = futimens(fd, ts);
    else if (!strcmp(op, "utime"))
        r = syscall(SYS_utime, path, &ub);
    else if (!strcmp(op, "utimes"))
        r = syscall(SYS_utimes, path, tv);
    else if (!strcmp(op, "futimesat"))
        r = syscall(SYS_futimesat, AT_FDCWD, path, tv);
    else if (!strcmp(op, "futimesat-fd"))
        r = syscall(SYS_futimesat, fd, NULL, tv);
    else if (!strcmp(op, "setxattr"))
        r = setxattr(path, a1, a2, strlen(a2), 0);
    else if (!strcmp(op, "lsetxattr"))
        r = lsetxattr(path, a1, a2, strlen(a2), 0);
    else if (!strcmp(op, "fsetxattr"))
        r = fsetxattr(fd, a1, a2, strlen(a2), 0);
    else if (!strcmp(op, "setxattrat"))
        r = syscall(463, AT_FDCWD, path, 0, a1, &xa, sizeof xa);
    else if (!strcmp(op, "removexattr"))
        r = removexattr(path, a1);
    else if (!strcmp(op, "lremovexattr"))
        r = lremovexattr(path, a1);
    else if (!strcmp(op, "fremovexattr"))
        r = fremovexattr(fd, a1);
    else if (!strcmp(op, "removexattrat"))
        r = syscall(466, AT_FDCWD, path, 0, a1);
    else if (!strcmp(op, "chattr") || !strcmp(op, "chattr-immutable")) {
        int flags = !strcmp(op, "chattr") ? FS_NODUMP_FL : FS_IMMUTABLE_FL;
        r = ioctl(fd, FS_IOC_SETFLAGS, &flags);
    } else
        return usage("meta: unknown OP");
    if (r < 0)
        return fail(op);
    return 0;
}

/*
 * deny-userns CMD [ARG...]: exec CMD where new user namespaces are refused,
 * as a container runtime's default seccomp profile does (clone and unshare
 * with CLONE_NEWUSER get EPERM, clone3 ENOSYS so libc falls back to clone).
 * A host without user namespaces, for testing the process level.
 */
static int act_deny_userns(int argc, char **argv)
{
    if (argc < 1)
        return usage("deny-userns CMD [ARG...]");
#define NR_IS(nr, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), (t), (f))
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        NR_IS(SYS_clone3, 7, 0),
        NR_IS(SYS_clone, 1, 0),
        NR_IS(SYS_unshare, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
    };
#undef NR_IS
    struct sock_fprog prog = { .len = sizeof f / sizeof f[0], .filter = f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
        return fail("seccomp");
    execvp(argv[0], argv);
    return fail("exec");
}

static int act_ids(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return usage("ids");
    out("uid=%u euid=%u gid=%u egid=%u pid=%d ppid=%d\n", getuid(), geteuid(), getgid(), getegid(),
        getpid(), getppid());
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} actions[] = {
    { "read", act_read },
    { "deny-userns", act_deny_userns },
    { "write", act_write },
    { "stat", act_stat },
    { "ls", act_ls },
    { "connect-tcp", act_connect_tcp },
    { "send-udp", act_send_udp },
    { "connect-unix", act_connect_unix },
    { "sendto-unix", act_sendto_unix },
    { "connect-abstract", act_connect_abstract },
    { "bind-tcp", act_bind_tcp },
    { "kill", act_kill },
    { "kill-parent-write", act_kill_parent_write },
    { "unshare", act_unshare },
    { "unshare-ns", act_unshare_ns },
    { "setns", act_setns },
    { "clone-newuser", act_clone_newuser },
    { "mount", act_mount },
    { "open-tree", act_open_tree },
    { "chroot", act_chroot },
    { "setuid0", act_setuid0 },
    { "ptrace-attach", act_ptrace_attach },
    { "ptrace-traceme", act_ptrace_traceme },
    { "ioctl-tiocsti", act_tiocsti },
    { "ioctl-tioclinux", act_tioclinux },
    { "socket-netlink", act_socket_netlink },
    { "socket-packet", act_socket_packet },
    { "io-uring", act_io_uring },
    { "bpf", act_bpf },
    { "perf-event-open", act_perf },
    { "userfaultfd", act_userfaultfd },
    { "keyctl", act_keyctl },
    { "add-key", act_add_key },
    { "open-by-handle", act_open_by_handle },
    { "caps", act_caps },
    { "fds", act_fds },
    { "env", act_env },
    { "sleep", act_sleep },
    { "daemon", act_daemon },
    { "i386", act_i386 },
    { "x32", act_x32 },
    { "ids", act_ids },
    { "syscall", act_syscall },
    { "meta", act_meta },
    { "socket", act_socket },
    { "proc-mem-sibling", act_proc_mem_sibling },
    { "proc-mem-self-ro", act_proc_mem_self_ro },
};

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage("probe ACTION [ARGS...]");
    for (size_t i = 0; i < sizeof(actions) / sizeof(*actions); i++)
        if (!strcmp(argv[1], actions[i].name)) {
            errno = 0;
            return actions[i].fn(argc - 2, argv + 2);
        }
    return usage("unknown action");
}
