/*
 * tests/unit/test_seccomp.c: the syscall profile. Checks the rule table, the
 * policy name checks, and then runs the compiled filter: each probe forks a
 * child that installs the program, tries one thing and exits with the errno
 * it got (0 for success), so a refusal is told apart from a crash.
 */
#include "tap.h"

#include "policy/policy.h"
#include "sandbox/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/kcmp.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __NR_clone3
#define __NR_clone3 435
#endif

/* A probe that reports a refusal by its errno must not mistake success. */
#define CREATED 250

static char scratch[] = "/tmp/cordon-seccomp-XXXXXX";

static int result(long rc)
{
    return rc < 0 ? errno : 0;
}

static int probe_getpid(void)
{
    return result(syscall(SYS_getpid));
}
static int probe_unshare_user(void)
{
    return result(unshare(CLONE_NEWUSER));
}

static int raw_clone(unsigned long flags)
{
    long pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
    if (pid < 0)
        return errno;
    if (pid == 0)
        _exit(0);
    int st;
    waitpid((pid_t)pid, &st, 0);
    return flags ? CREATED : (WIFEXITED(st) ? WEXITSTATUS(st) : 255);
}

static int probe_clone_plain(void)
{
    return raw_clone(0);
}
static int probe_clone_newuser(void)
{
    return raw_clone(CLONE_NEWUSER);
}
static int probe_clone_newnet(void)
{
    return raw_clone(CLONE_NEWNET);
}

static int probe_clone3(void)
{
    uint64_t args[11] = { 0 }; /* struct clone_args, zeroed: a plain fork */
    args[4] = SIGCHLD;         /* exit_signal */
    long pid = syscall(__NR_clone3, args, sizeof args);
    if (pid == 0)
        _exit(0);
    return pid < 0 ? errno : CREATED;
}

static int probe_io_uring(void)
{
    struct io_uring_params params = { 0 };
    return result(syscall(SYS_io_uring_setup, 1, &params));
}

static int probe_bpf(void)
{
    return result(syscall(SYS_bpf, 0, NULL, 0));
}

static int probe_socket3(unsigned long family, long type, unsigned long protocol)
{
    long fd = syscall(SYS_socket, family, type, protocol);
    if (fd >= 0)
        close((int)fd);
    return result(fd);
}

static int probe_socket(unsigned long family, int type)
{
    return probe_socket3(family, type, 0);
}

static int probe_netlink(void)
{
    return probe_socket(AF_NETLINK, SOCK_RAW);
}
static int probe_packet(void)
{
    return probe_socket(AF_PACKET, SOCK_RAW);
}
static int probe_netlink_high(void)
{
    return probe_socket(0x100000000ul | AF_NETLINK, SOCK_RAW);
}
static int probe_family_100(void)
{
    return probe_socket(100, SOCK_STREAM);
}
static int probe_inet(void)
{
    return probe_socket(AF_INET, SOCK_STREAM);
}
static int probe_inet_high(void)
{
    return probe_socket(0x100000000ul | AF_INET, SOCK_STREAM);
}
static int probe_unix(void)
{
    return probe_socket(AF_UNIX, SOCK_STREAM);
}
static int probe_unix_seqpacket(void)
{
    return probe_socket(AF_UNIX, SOCK_SEQPACKET);
}
static int probe_tcp_flags(void)
{
    return probe_socket3(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
}
static int probe_udp(void)
{
    return probe_socket3(AF_INET, SOCK_DGRAM, IPPROTO_UDP);
}
static int probe_udp6(void)
{
    return probe_socket3(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}
static int probe_tcp_proto_high(void)
{
    return probe_socket3(AF_INET, SOCK_STREAM, 0x100000000ul | IPPROTO_TCP);
}
static int probe_udplite(void)
{
    return probe_socket3(AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE);
}
static int probe_udplite6(void)
{
    return probe_socket3(AF_INET6, SOCK_DGRAM, IPPROTO_UDPLITE);
}
static int probe_sctp(void)
{
    return probe_socket3(AF_INET, SOCK_STREAM, IPPROTO_SCTP);
}
static int probe_sctp_seqpacket(void)
{
    return probe_socket3(AF_INET6, SOCK_SEQPACKET, IPPROTO_SCTP);
}
static int probe_mptcp(void)
{
    return probe_socket3(AF_INET, SOCK_STREAM, IPPROTO_MPTCP);
}
static int probe_udp_as_stream(void)
{
    return probe_socket3(AF_INET, SOCK_STREAM, IPPROTO_UDP);
}
static int probe_icmp6_on_inet(void)
{
    return probe_socket3(AF_INET, SOCK_DGRAM, IPPROTO_ICMPV6);
}
static int probe_raw(void)
{
    return probe_socket3(AF_INET, SOCK_RAW, IPPROTO_ICMP);
}
static int probe_raw6(void)
{
    return probe_socket3(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
}
static int probe_proto_large(void)
{
    return probe_socket3(AF_INET, SOCK_DGRAM, 1000);
}

/* Ping sockets reach the kernel, which answers by net.ipv4.ping_group_range. */
static int probe_ping(void)
{
    int rc = probe_socket3(AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
    return rc == EACCES ? 0 : rc;
}

static int probe_ping6(void)
{
    int rc = probe_socket3(AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6);
    return rc == EACCES ? 0 : rc;
}

static int probe_socketpair_unix(void)
{
    int sv[2];
    return result(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
}

static int probe_socketpair_inet(void)
{
    int sv[2];
    return result(socketpair(AF_INET, SOCK_STREAM, 0, sv));
}

static int ioctl_on_pipe(unsigned long cmd)
{
    int p[2];
    if (pipe(p) < 0)
        return 254;
    int arg = 0;
    return result(syscall(SYS_ioctl, p[0], cmd, &arg));
}

static int probe_tiocsti(void)
{
    return ioctl_on_pipe(TIOCSTI);
}
static int probe_tiocsti_high(void)
{
    return ioctl_on_pipe(0x100000000ul | TIOCSTI);
}
static int probe_tioclinux(void)
{
    return ioctl_on_pipe(TIOCLINUX);
}
static int probe_fionread(void)
{
    return ioctl_on_pipe(FIONREAD);
}
/* musl sign-extends the int request: the filter must not refuse that. */
static int probe_sign_extended(void)
{
    return ioctl_on_pipe(0xffffffff00000000ul | TIOCGPTN);
}

static int probe_personality_query(void)
{
    return result(personality(0xffffffff));
}
static int probe_personality_aslr(void)
{
    return result(personality(ADDR_NO_RANDOMIZE));
}

static int probe_mkdirat(void)
{
    char path[64];
    snprintf(path, sizeof path, "%s/d%d", scratch, getpid());
    return result(mkdirat(AT_FDCWD, path, 0700));
}

/* kcmp reaches the kernel when allowed; a kernel built without it says ENOSYS. */
static int probe_kcmp(void)
{
    long rc = syscall(SYS_kcmp, getpid(), getpid(), KCMP_VM, 0, 0);
    return rc >= 0 || errno == ENOSYS ? 0 : errno;
}

static int probe_x32(void)
{
    return result(syscall(0x40000000 | SYS_getpid));
}

static int probe_int80(void)
{
#ifdef __x86_64__
    long rc;
    __asm__ volatile("int $0x80" : "=a"(rc) : "a"(20L /* i386 getpid */) : "memory");
    return rc < 0 ? (int)-rc : 0;
#else
    return 0;
#endif
}

static int run_argv(char *const argv[])
{
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0)
        dup2(null, 1);
    execv(argv[0], argv);
    return errno;
}

static int probe_sh(void)
{
    char *const argv[] = { "/bin/sh", "-c", "echo hi | cat", NULL };
    return run_argv(argv);
}

static int probe_python(void)
{
    char *const argv[] = {
        "/usr/bin/python3", "-c",
        "import subprocess,multiprocessing,asyncio,json\n"
        "print(subprocess.run(['true']).returncode)\n"
        "with multiprocessing.Pool(2) as p: assert p.map(abs, [-1, -2]) == [1, 2]\n"
        "async def main():\n"
        "    p = await asyncio.create_subprocess_exec('true')\n"
        "    return await p.wait()\n"
        "assert asyncio.run(main()) == 0\n",
        NULL
    };
    return run_argv(argv);
}

static int probe_node(void)
{
    char *const argv[] = { "/usr/bin/node", "-e",
                           "require('child_process').execSync('true');"
                           "require('fs').readFileSync('/etc/hostname');"
                           "console.log(1)",
                           NULL };
    return run_argv(argv);
}

enum variant { V_DEFAULT, V_DENY_MKDIRAT, V_ALLOW_KCMP, V_COUNT };

struct probe_case {
    const char *name;
    enum variant variant;
    int (*fn)(void);
    int exit_code;     /* expected errno (0: success); ignored when signal is set */
    int signal;        /* expected fatal signal, or 0 */
    const char *needs; /* a file that must exist, or NULL */
};

static const struct probe_case probes[] = {
    { "getpid works", V_DEFAULT, probe_getpid, 0, 0, NULL },
    { "unshare(CLONE_NEWUSER) is EPERM", V_DEFAULT, probe_unshare_user, EPERM, 0, NULL },
    { "clone without namespace flags works", V_DEFAULT, probe_clone_plain, 0, 0, NULL },
    { "clone(CLONE_NEWUSER) is EPERM", V_DEFAULT, probe_clone_newuser, EPERM, 0, NULL },
    { "clone(CLONE_NEWNET) is EPERM", V_DEFAULT, probe_clone_newnet, EPERM, 0, NULL },
    { "clone3 is ENOSYS", V_DEFAULT, probe_clone3, ENOSYS, 0, NULL },
    { "io_uring_setup is EPERM", V_DEFAULT, probe_io_uring, EPERM, 0, NULL },
    { "bpf is EPERM", V_DEFAULT, probe_bpf, EPERM, 0, NULL },
    { "socket(AF_NETLINK) is EAFNOSUPPORT", V_DEFAULT, probe_netlink, EAFNOSUPPORT, 0, NULL },
    { "socket(AF_PACKET) is EAFNOSUPPORT", V_DEFAULT, probe_packet, EAFNOSUPPORT, 0, NULL },
    { "socket(AF_NETLINK with high bits) is EAFNOSUPPORT", V_DEFAULT, probe_netlink_high,
      EAFNOSUPPORT, 0, NULL },
    { "socket(family 100) is EPERM", V_DEFAULT, probe_family_100, EPERM, 0, NULL },
    { "socket(AF_INET, SOCK_STREAM) works", V_DEFAULT, probe_inet, 0, 0, NULL },
    { "socket(AF_INET with high bits) works", V_DEFAULT, probe_inet_high, 0, 0, NULL },
    { "socket(AF_UNIX) works", V_DEFAULT, probe_unix, 0, 0, NULL },
    { "socket(AF_UNIX, SOCK_SEQPACKET) works", V_DEFAULT, probe_unix_seqpacket, 0, 0, NULL },
    { "socket(AF_INET6, SOCK_STREAM with flags, IPPROTO_TCP) works", V_DEFAULT, probe_tcp_flags, 0,
      0, NULL },
    { "socket(AF_INET, SOCK_DGRAM, IPPROTO_UDP) works", V_DEFAULT, probe_udp, 0, 0, NULL },
    { "socket(AF_INET6, SOCK_DGRAM, 0) works", V_DEFAULT, probe_udp6, 0, 0, NULL },
    { "socket(AF_INET, SOCK_STREAM, IPPROTO_TCP with high bits) works", V_DEFAULT,
      probe_tcp_proto_high, 0, 0, NULL },
    { "socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP) reaches the kernel", V_DEFAULT, probe_ping, 0, 0,
      NULL },
    { "socket(AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6) reaches the kernel", V_DEFAULT, probe_ping6, 0,
      0, NULL },
    { "socket(AF_INET, IPPROTO_UDPLITE) is EPROTONOSUPPORT", V_DEFAULT, probe_udplite,
      EPROTONOSUPPORT, 0, NULL },
    { "socket(AF_INET6, IPPROTO_UDPLITE) is EPROTONOSUPPORT", V_DEFAULT, probe_udplite6,
      EPROTONOSUPPORT, 0, NULL },
    { "socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) is EPROTONOSUPPORT", V_DEFAULT, probe_sctp,
      EPROTONOSUPPORT, 0, NULL },
    { "socket(AF_INET6, SOCK_SEQPACKET, IPPROTO_SCTP) is EPERM", V_DEFAULT, probe_sctp_seqpacket,
      EPERM, 0, NULL },
    { "socket(AF_INET, IPPROTO_MPTCP) is EPROTONOSUPPORT", V_DEFAULT, probe_mptcp, EPROTONOSUPPORT,
      0, NULL },
    { "socket(AF_INET, SOCK_STREAM, IPPROTO_UDP) is EPROTONOSUPPORT", V_DEFAULT,
      probe_udp_as_stream, EPROTONOSUPPORT, 0, NULL },
    { "socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMPV6) is EPROTONOSUPPORT", V_DEFAULT,
      probe_icmp6_on_inet, EPROTONOSUPPORT, 0, NULL },
    { "socket(AF_INET, protocol 1000) is EPERM", V_DEFAULT, probe_proto_large, EPERM, 0, NULL },
    { "socket(AF_INET, SOCK_RAW) is EPERM", V_DEFAULT, probe_raw, EPERM, 0, NULL },
    { "socket(AF_INET6, SOCK_RAW) is EPERM", V_DEFAULT, probe_raw6, EPERM, 0, NULL },
    { "socketpair(AF_UNIX) works", V_DEFAULT, probe_socketpair_unix, 0, 0, NULL },
    { "socketpair(AF_INET) is EAFNOSUPPORT", V_DEFAULT, probe_socketpair_inet, EAFNOSUPPORT, 0,
      NULL },
    { "ioctl(TIOCSTI) is EPERM", V_DEFAULT, probe_tiocsti, EPERM, 0, NULL },
    { "ioctl(0x1_0000_5412) is EPERM", V_DEFAULT, probe_tiocsti_high, EPERM, 0, NULL },
    { "ioctl(TIOCLINUX) is EPERM", V_DEFAULT, probe_tioclinux, EPERM, 0, NULL },
    { "ioctl(FIONREAD) works", V_DEFAULT, probe_fionread, 0, 0, NULL },
    { "sign-extended ioctl reaches the kernel (ENOTTY)", V_DEFAULT, probe_sign_extended, ENOTTY, 0,
      NULL },
    { "personality query works", V_DEFAULT, probe_personality_query, 0, 0, NULL },
    { "personality(ADDR_NO_RANDOMIZE) is EPERM", V_DEFAULT, probe_personality_aslr, EPERM, 0,
      NULL },
    { "mkdirat works by default", V_DEFAULT, probe_mkdirat, 0, 0, NULL },
    { "syscalls.deny mkdirat makes mkdirat EPERM", V_DENY_MKDIRAT, probe_mkdirat, EPERM, 0, NULL },
    { "kcmp is EPERM by default", V_DEFAULT, probe_kcmp, EPERM, 0, NULL },
    { "syscalls.allow kcmp lets kcmp reach the kernel", V_ALLOW_KCMP, probe_kcmp, 0, 0, NULL },
    { "x32 getpid kills with SIGSYS", V_DEFAULT, probe_x32, 0, SIGSYS, NULL },
    { "i386 int 0x80 kills with SIGSYS", V_DEFAULT, probe_int80, 0, SIGSYS, NULL },
    { "sh runs a pipeline", V_DEFAULT, probe_sh, 0, 0, "/bin/sh" },
    { "python3 runs subprocess, multiprocessing, asyncio", V_DEFAULT, probe_python, 0, 0,
      "/usr/bin/python3" },
    { "node runs execSync", V_DEFAULT, probe_node, 0, 0, "/usr/bin/node" },
};

static void test_table(void)
{
    size_t n;
    const struct seccomp_rule *rules = seccomp_rule_table(&n);
    ok(n > 250, "the table has %zu rows", n);
    int unknown = 0, dups = 0, no_why = 0, soft_hard = 0;
    for (size_t i = 0; i < n; i++) {
        if (seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, rules[i].name) < 0) {
            printf("# unknown on x86-64: %s\n", rules[i].name);
            unknown++;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(rules[i].name, rules[j].name) == 0) {
                printf("# duplicate: %s\n", rules[i].name);
                dups++;
            }
        if (rules[i].verdict != SECCOMP_ALLOW && (!rules[i].why || !*rules[i].why)) {
            printf("# refusal without a why: %s\n", rules[i].name);
            no_why++;
        }
        if (rules[i].hard && rules[i].verdict == SECCOMP_ALLOW)
            soft_hard++;
    }
    ok(unknown == 0, "every name is a system call on x86-64");
    ok(dups == 0, "no name appears twice");
    ok(no_why == 0, "every refusal says why");
    ok(soft_hard == 0, "only refusals are hard");
}

struct name_case {
    const char *name;
    bool allow;
    const char *why; /* NULL: accepted */
};

static const struct name_case name_cases[] = {
    { "read", true, NULL },
    { "chroot", true, NULL },
    { "kcmp", true, NULL },
    { "bpf", false, NULL },
    { "foo", true, "unknown system call \"foo\"" },
    { "foo", false, "unknown system call \"foo\"" },
    { "", false, "unknown system call \"\"" },
    { "socketcall", true, "unknown system call \"socketcall\"" },
    { "bpf", true, "\"bpf\" cannot be allowed: loads programs into the kernel" },
    { "io_uring_setup", true,
      "\"io_uring_setup\" cannot be allowed: io_uring operations never pass through this filter" },
    { "clone3", true,
      "\"clone3\" cannot be allowed: its flags sit in memory seccomp cannot read; ENOSYS makes "
      "libc fall back to clone" },
    { "unshare", true, "\"unshare\" cannot be allowed: namespaces are fixed by the supervisor" },
};

static void test_names(void)
{
    for (size_t i = 0; i < sizeof name_cases / sizeof name_cases[0]; i++) {
        const struct name_case *c = &name_cases[i];
        char why[256] = "";
        int rc = seccomp_check_name(c->name, c->allow, why, sizeof why);
        char label[128];
        snprintf(label, sizeof label, "check_name(\"%s\", %s)", c->name,
                 c->allow ? "allow" : "deny");
        is_str(rc < 0 ? why : NULL, c->why, label);
    }
}

static void test_build_errors(void)
{
    char *allow[] = { "bpf" };
    struct policy p = { 0 };
    p.syscalls_allow = allow;
    p.n_syscalls_allow = 1;
    struct seccomp_program prog;
    struct cordon_err err = { 0 };
    int rc = seccomp_program_build(&p, &prog, &err);
    ok(rc < 0 && err.kind == CORDON_E_POLICY, "allowing bpf is refused as a policy error");
    is_str(err.msg, "syscalls.allow: \"bpf\" cannot be allowed: loads programs into the kernel",
           "allowing bpf: message");

    char *deny[] = { "nosuchcall" };
    p = (struct policy){ 0 };
    p.syscalls_deny = deny;
    p.n_syscalls_deny = 1;
    rc = seccomp_program_build(&p, &prog, &err);
    is_str(rc < 0 ? err.msg : NULL, "syscalls.deny: unknown system call \"nosuchcall\"",
           "denying an unknown name: message");
}

static void test_pfc(void)
{
    struct policy p = { 0 };
    struct cordon_err err = { 0 };
    int fd = memfd_create("pfc", 0);
    int rc = seccomp_program_dump(&p, fd, &err);
    ok(rc == 0, "the profile exports as pseudo-code");
    char buf[1 << 16] = "";
    ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    buf[got > 0 ? got : 0] = '\0';
    ok(strstr(buf, "# invalid architecture action\naction KILL_PROCESS;") != NULL,
       "a foreign architecture kills the process");
    ok(strstr(buf, "# default action\n  action ERRNO(1);") != NULL, "anything unlisted is EPERM");
    ok(strstr(buf, "action ERRNO(38)") != NULL, "clone3 is ENOSYS in the filter");
    ok(strstr(buf, "syscall \"bpf\"") == NULL, "bpf has no rule of its own");
}

/* Without IA32 emulation int 0x80 faults whatever the filter says. */
static bool have_int80(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(probe_int80() == 0 ? 0 : 1);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int run_probe(const struct seccomp_program *prog, const struct probe_case *c)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        struct cordon_err err = { 0 };
        if (seccomp_program_install(prog, &err) < 0) {
            fprintf(stderr, "%s\n", err.msg);
            _exit(253);
        }
        _exit(c->fn());
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return st;
}

static void test_probes(void)
{
    char *deny_mkdirat[] = { "mkdirat" };
    char *allow_kcmp[] = { "kcmp" };
    struct policy pol[V_COUNT] = { 0 };
    pol[V_DENY_MKDIRAT].syscalls_deny = deny_mkdirat;
    pol[V_DENY_MKDIRAT].n_syscalls_deny = 1;
    pol[V_ALLOW_KCMP].syscalls_allow = allow_kcmp;
    pol[V_ALLOW_KCMP].n_syscalls_allow = 1;

    struct seccomp_program prog[V_COUNT] = { 0 };
    for (int v = 0; v < V_COUNT; v++) {
        struct cordon_err err = { 0 };
        int rc = seccomp_program_build(&pol[v], &prog[v], &err);
        if (!ok(rc == 0 && prog[v].len > 0, "variant %d compiles (%u instructions)", v,
                prog[v].len))
            printf("# %s\n", err.msg);
    }
    ok(prog[V_DEFAULT].len < BPF_MAXINSNS / 2, "the default filter leaves room (%u)",
       prog[V_DEFAULT].len);

    if (!mkdtemp(scratch)) {
        ok(0, "mkdtemp: %s", strerror(errno));
        return;
    }
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        const struct probe_case *c = &probes[i];
        if (c->needs && access(c->needs, X_OK) < 0) {
            printf("ok %d - %s # SKIP %s is missing\n", ++tap_n, c->name, c->needs);
            continue;
        }
        if (c->fn == probe_int80 && !have_int80()) {
            printf("ok %d - %s # SKIP the kernel has no i386 entry point\n", ++tap_n, c->name);
            continue;
        }
        int st = run_probe(&prog[c->variant], c);
        bool pass;
        if (c->signal)
            pass = st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == c->signal;
        else
            pass = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == c->exit_code;
        if (!ok(pass, "%s", c->name)) {
            if (WIFSIGNALED(st))
                printf("#   killed by signal %d\n", WTERMSIG(st));
            else
                printf("#   exit %d (%s)\n", WEXITSTATUS(st), strerror(WEXITSTATUS(st)));
        }
    }
    for (int v = 0; v < V_COUNT; v++)
        seccomp_program_release(&prog[v]);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", scratch);
}

/* The build-time copy must be exactly what libseccomp compiles now. */
static void test_precompiled(void)
{
    struct cordon_err err = { 0 };
    struct seccomp_program built, fresh;
    ok(seccomp_program_build(NULL, &built, &err) == 0, "default profile builds");
    ok(seccomp_program_compile(NULL, &fresh, &err) == 0, "default profile compiles");
    ok(built.len == fresh.len && built.len > 0 &&
           memcmp(built.filter, fresh.filter, built.len * sizeof built.filter[0]) == 0,
       "build-time filter equals a fresh compilation (%u instructions)", fresh.len);
    seccomp_program_release(&built);
    seccomp_program_release(&fresh);
}

int main(void)
{
    test_table();
    test_names();
    test_build_errors();
    test_pfc();
    test_probes();
    test_precompiled();
    return done_testing();
}
