/*
 * sandbox/gvisor/init.c: cordon-gvisor-init, the static helper cordon ships
 * into every gVisor sandbox (embedded in cordon, bound read-only at
 * /.cordon/init). It runs inside the gVisor kernel, never on the host:
 *
 *   init HOME CALL ahead|now [SOCKET [NET/PREFIX STUB PORT...]]
 *                   the container's first process. Makes HOME (the
 *                   command's, in the fresh /tmp), warms the sandbox up when
 *                   it is prepared ahead of its call (the daemon's pool),
 *                   dials CALL (the shim's call channel, call_wire.h) for
 *                   its caller, and says "R"
 *                   on stdout once ready, then holds the sandbox open; with
 *                   SOCKET (the gateway's unix socket, reached through
 *                   --host-uds=open) it first listens on 127.0.0.1:3128 and
 *                   relays each connection to SOCKET (all of them from one
 *                   process, gvisor/relay.c), so HTTP(S)_PROXY works as at
 *                   the namespace level while the sandbox has no network at
 *                   all. With NET/PREFIX (the synthetic range), STUB (the DNS
 *                   stub's address) and the ports, egress is transparent too
 *                   (relay_wire.h): the range is made loopback's, the stub
 *                   relays each query over one DNS stream to SOCKET, and a
 *                   listener on 0.0.0.0:PORT relays each connection with a
 *                   preface naming the address and port it came to. Each
 *                   "+NET/PREFIX" after the ports (an allowed literal's
 *                   range) is made the sandbox's own as well, so a client
 *                   that names the address reaches a listener too.
 *
 * The caller, a process of init's, takes the one call of the sandbox: it
 * writes the call's files (their memfd, start_files.h) under the
 * workspace, with nothing else of the call running (gVisor has no openat2,
 * so each component is opened O_NOFOLLOW: a link on the way fails the
 * call), then forks the command, which installs the seccomp profile and
 * execs, and reports its pid and wait status; it passes signals on.
 *
 * Self-contained on purpose (no cordon library, only a few of common's
 * files that need nothing else): it must stay small and static, and it
 * holds nothing of the supervisor's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fds.h"
#include "common/home.h"
#include "common/relay_wire.h"
#include "common/route.h"
#include "common/syscalls.h"
#include "sandbox/gvisor/call_wire.h"
#include "sandbox/gvisor/relay.h"
#include "sandbox/start_files.h"

#define PROXY_PORT 3128
#define MAX_INSNS 4096
#define MAX_PORTS 32

/*
 * Point the descriptors in FDS at gVisor's /dev/null. The helper's stdio
 * are host descriptors (its stderr is runsc's log, a host file), and its
 * processes are the command's uid: one still holding them would let the
 * command write through /proc/PID/fd/N, past every limit of the run, onto
 * the host. Each process of the helper does this before the command can run.
 */
static void quiet_stdio(const int *fds, size_t n)
{
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (size_t i = 0; null >= 0 && i < n; i++)
        dup2(null, fds[i]);
    if (null > 2)
        close(null);
}

static const int all_stdio[] = { 0, 1, 2 };

/* A socket of TYPE bound to ADDR:PORT (network order), listening if a stream. */
static int bound_socket(int type, uint32_t addr, uint16_t port)
{
    int l = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = addr };
    int one = 1;
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(l, (struct sockaddr *)&a, sizeof a) < 0 ||
        (type == SOCK_STREAM && listen(l, 128) < 0)) {
        char text[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
        fprintf(stderr, "cordon-gvisor-init: cannot listen on %s:%u: %s\n", text, ntohs(port),
                strerror(errno));
        return -1;
    }
    return l;
}

/*
 * The DNS stub: each query on the UDP socket U goes on one RELAY_DNS
 * stream to the gateway, which answers in order; each answer goes back to
 * its asker. The stream is dialled again when it ends (queries still
 * waiting then are lost, as UDP loses them: the resolver asks again).
 * Shorter than a header, or a response: dropped here, since it would end
 * the stream for everyone. The gateway ends a stream idle for 30 s
 * (DNS_STREAM_IDLE_MS); the stub ends it first, after DNS_IDLE_MS with no
 * answer owed, so no query is ever sent into a stream being closed.
 */
#define DNS_PENDING 256
#define DNS_IDLE_MS 10000
static _Noreturn void dns_main(int u, const char *gateway)
{
    static struct sockaddr_in askers[DNS_PENDING];
    static unsigned char in[2 * (2 + RELAY_DNS_MAX)], q[2 + RELAY_DNS_MAX];
    size_t head = 0, waiting = 0, have = 0, len = 0;
    int g = -1;
    for (;;) {
        struct pollfd p[2] = { { .fd = u, .events = POLLIN }, { .fd = g, .events = POLLIN } };
        int ready = poll(p, g >= 0 ? 2 : 1, g >= 0 && waiting == 0 ? DNS_IDLE_MS : -1);
        if (ready == 0) {
            close(g);
            g = -1;
            have = 0;
        }
        if (ready <= 0)
            continue;
        if (g >= 0 && p[1].revents) {
            ssize_t r = read(g, in + have, sizeof in - have);
            if (r < 0 && errno == EINTR)
                continue;
            have += r > 0 ? (size_t)r : 0;
            while (have >= 2 && (len = (size_t)in[0] << 8 | in[1]) <= RELAY_DNS_MAX &&
                   have >= 2 + len) {
                if (waiting > 0) {
                    sendto(u, in + 2, len, MSG_DONTWAIT, (struct sockaddr *)&askers[head],
                           sizeof askers[head]);
                    head = (head + 1) % DNS_PENDING;
                    waiting--;
                }
                memmove(in, in + 2 + len, have - 2 - len);
                have -= 2 + len;
            }
            if (r <= 0 || (have >= 2 && len > RELAY_DNS_MAX)) {
                close(g);
                g = -1;
                have = waiting = 0;
            }
        }
        if (!(p[0].revents & POLLIN))
            continue;
        struct sockaddr_in from;
        socklen_t from_len = sizeof from;
        ssize_t n =
            recvfrom(u, q + 2, RELAY_DNS_MAX, MSG_TRUNC, (struct sockaddr *)&from, &from_len);
        if (n < 12 || n > (ssize_t)RELAY_DNS_MAX || (q[4] & 0x80) || waiting == DNS_PENDING)
            continue;
        if (g < 0 && (g = relay_dial(gateway, RELAY_DNS, NULL)) < 0)
            continue;
        q[0] = (unsigned char)(n >> 8);
        q[1] = (unsigned char)n;
        if (!write_all(g, q, 2 + (size_t)n)) {
            close(g);
            g = -1;
            have = waiting = 0;
            continue;
        }
        askers[(head + waiting++) % DNS_PENDING] = from;
    }
}

/*
 * No capability left, the bounding set emptied too (CAP_SETPCAP, held until
 * now): the init is then no more than the command it serves, and no exec
 * of the command's can grant what the set no longer holds.
 */
static int drop_capabilities(void)
{
    for (int c = 0; c <= CAP_LAST_CAP; c++)
        if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1 && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
            return -1;
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof data);
    return sys_capset(&hdr, data);
}

/* The listeners: [0] the proxy's on 127.0.0.1:3128, then one per PORTS. */
struct relay_plan {
    const char *gateway;
    bool transparent;
    uint32_t net; /* network order */
    int prefix;
    uint32_t stub; /* network order */
    int fds[1 + MAX_PORTS];
    size_t n_fds;
    uint32_t literal[MAX_PORTS]; /* "+NET/PREFIX": host order */
    unsigned literal_prefix[MAX_PORTS];
    size_t n_literal;
};

/* "+A.B.C.D/P" into R's literals. */
static int parse_literal(const char *arg, struct relay_plan *r)
{
    char net[INET_ADDRSTRLEN];
    const char *slash = strchr(arg, '/');
    struct in_addr a;
    if (arg[0] != '+' || !slash || (size_t)(slash - arg - 1) >= sizeof net ||
        r->n_literal == MAX_PORTS)
        return -1;
    memcpy(net, arg + 1, (size_t)(slash - arg - 1));
    net[slash - arg - 1] = '\0';
    int prefix = atoi(slash + 1);
    if (inet_pton(AF_INET, net, &a) != 1 || prefix < 8 || prefix > 32)
        return -1;
    r->literal[r->n_literal] = ntohl(a.s_addr);
    r->literal_prefix[r->n_literal++] = (unsigned)prefix;
    return 0;
}

/* ARGS: NET/PREFIX STUB PORT... +NET/PREFIX... */
static int parse_transparent(char **args, int n, struct relay_plan *r)
{
    char net[INET_ADDRSTRLEN];
    const char *slash = n >= 2 ? strchr(args[0], '/') : NULL;
    if (!slash || (size_t)(slash - args[0]) >= sizeof net)
        return -1;
    memcpy(net, args[0], (size_t)(slash - args[0]));
    net[slash - args[0]] = '\0';
    r->prefix = atoi(slash + 1);
    if (inet_pton(AF_INET, net, &r->net) != 1 || inet_pton(AF_INET, args[1], &r->stub) != 1 ||
        r->prefix < 8 || r->prefix > 30)
        return -1;
    r->n_fds = 1;
    for (int i = 2; i < n; i++) {
        if (args[i][0] == '+') {
            if (parse_literal(args[i], r) < 0)
                return -1;
            continue;
        }
        long port = strtol(args[i], NULL, 10);
        if (port < 1 || port > 65535 || r->n_fds == 1 + MAX_PORTS)
            return -1;
        r->fds[r->n_fds++] = (int)port; /* a port until open_relays makes it a socket */
    }
    r->transparent = true;
    return 0;
}

/*
 * A process of the helper's (0 in it), returned to once it holds no
 * capability and no host stdio: with NOFILE, its RLIMIT_NOFILE raised
 * first. -1 when it could not get there.
 */
static pid_t fork_helper(const struct rlimit *nofile)
{
    int done[2];
    if (pipe2(done, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(done[0]);
        if ((nofile && setrlimit(RLIMIT_NOFILE, nofile) < 0) || drop_capabilities() < 0)
            _exit(1);
        quiet_stdio(all_stdio, 3);
        if (write(done[1], "d", 1) != 1)
            _exit(1);
        close(done[1]);
        return 0;
    }
    close(done[1]);
    char c;
    ssize_t n = pid > 0 ? read(done[0], &c, 1) : -1;
    int e = errno;
    close(done[0]);
    if (n != 1 && pid > 0)
        waitpid(pid, NULL, 0);
    errno = n == 0 ? ECHILD : e;
    return n == 1 ? pid : -1;
}

static int open_relays(struct relay_plan *r)
{
    if ((r->fds[0] = bound_socket(SOCK_STREAM, htonl(INADDR_LOOPBACK), htons(PROXY_PORT))) < 0)
        return -1;
    if (!r->transparent) {
        r->n_fds = 1;
        return 0;
    }
    /* This runsc refuses `ip route add local`; an address on lo makes the
     * whole range the sandbox's own. It needs CAP_NET_ADMIN, dropped next. */
    if (route_own_range(ntohl(r->net), (unsigned)r->prefix) < 0) {
        fprintf(stderr, "cordon-gvisor-init: cannot make the synthetic range loopback's: %s\n",
                strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < r->n_literal; i++) {
        unsigned p = r->literal_prefix[i];
        if ((p == 32 ? route_own_address(r->literal[i], p) : route_own_range(r->literal[i], p)) <
            0) {
            fprintf(stderr, "cordon-gvisor-init: cannot make an allowed address loopback's: %s\n",
                    strerror(errno));
            return -1;
        }
    }
    for (size_t i = 1; i < r->n_fds; i++)
        if ((r->fds[i] = bound_socket(SOCK_STREAM, htonl(INADDR_ANY), htons((uint16_t)r->fds[i]))) <
            0)
            return -1;
    int u = bound_socket(SOCK_DGRAM, r->stub, htons(53));
    if (u < 0)
        return -1;
    pid_t pid = fork_helper(NULL);
    if (pid == 0) {
        for (size_t i = 0; i < r->n_fds; i++)
            close(r->fds[i]);
        dns_main(u, r->gateway);
    }
    close(u);
    return pid < 0 ? -1 : 0;
}

/*
 * The relay, a process of its own: its RLIMIT_NOFILE, raised to carry two
 * descriptors per connection the gateway lets the run hold (gVisor's, which
 * the memory limit holds), is not the command's, which gVisor takes from
 * this init's. It drops its capabilities before init says it is ready.
 */
#define RELAY_NOFILE 16384
static int start_relay(struct relay_plan *r)
{
    struct rlimit nofile = { RELAY_NOFILE, RELAY_NOFILE };
    pid_t pid = fork_helper(&nofile);
    if (pid == 0)
        relay_serve(r->fds, r->n_fds, r->gateway);
    for (size_t i = 0; i < r->n_fds; i++)
        close(r->fds[i]);
    if (pid < 0) {
        fprintf(stderr, "cordon-gvisor-init: cannot start the relay: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

/* All of FD, at most MAX bytes, in a buffer of ours; NULL on failure. */
static char *read_all(int fd, size_t max, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *more = cap < max ? realloc(buf, cap * 2) : NULL;
            if (!more)
                break;
            buf = more;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        if (r == 0) {
            *len = n;
            return buf;
        }
        n += (size_t)r;
    }
    free(buf);
    return NULL;
}

/* The call's files (start_files.h) from FD under the working directory; WHY says what failed. */
static int place_files(int fd, char *why, size_t why_len)
{
    size_t size = 0;
    char *buf = read_all(fd, (size_t)1 << 32, &size);
    int here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    int rc = -1;
    if (!buf || here < 0)
        snprintf(why, why_len, "cannot read the call's files: %s", strerror(errno));
    else
        rc = start_files_place(buf, size, here, why, why_len);
    if (here >= 0)
        close(here);
    free(buf);
    return rc;
}

/* ---- the caller: the sandbox's one call (call_wire.h) ---- */

static struct sock_filter profile_insns[MAX_INSNS];
static struct sock_fprog profile; /* the policy's seccomp program; len 0: none */

static int load_profile(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, profile_insns, sizeof profile_insns);
    close(fd);
    if (n <= 0 || n % (ssize_t)sizeof profile_insns[0]) {
        errno = EINVAL;
        return -1;
    }
    profile = (struct sock_fprog){ .len = (unsigned short)(n / (ssize_t)sizeof profile_insns[0]),
                                   .filter = profile_insns };
    return 0;
}

/* SIGCHLD only interrupts the caller's ppoll(): blocked everywhere else, it needs no state. */
static void on_child(int sig)
{
    (void)sig;
}

static void send_record(int s, uint32_t kind, int32_t value, const char *text)
{
    struct call_record r = { .kind = kind, .value = value, .len = text ? strlen(text) : 0 };
    if (write_all(s, &r, sizeof r) && r.len)
        write_all(s, text, r.len);
}

/* One record from S, with up to 4 descriptors into FDS (-1 where none came). */
static int recv_record(int s, struct call_record *r, int fds[4])
{
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = { .iov_base = r, .iov_len = sizeof *r };
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf
    };
    ssize_t n;
    while ((n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    for (int i = 0; i < 4; i++)
        fds[i] = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            memcpy(fds, CMSG_DATA(c), (k > 4 ? 4 : k) * sizeof(int));
        }
    if (n <= 0)
        return -1;
    return (size_t)n == sizeof *r || read_full(s, (char *)r + n, sizeof *r - (size_t)n) ? 0 : -1;
}

/*
 * The call's argv and environment from the payload of R (NUL-ended
 * strings: R->value of them arguments, the rest the environment), in one
 * allocation; NULL when malformed.
 */
static char **read_call(int s, const struct call_record *r, char ***envp)
{
    if (r->len == 0 || r->len > CALL_PAYLOAD_MAX || r->value < 1)
        return NULL;
    char *text = malloc(r->len);
    if (!text || !read_full(s, text, r->len) || text[r->len - 1] != '\0') {
        free(text);
        return NULL;
    }
    size_t count = 0;
    for (uint32_t i = 0; i < r->len; i++)
        count += text[i] == '\0';
    char **v = count >= (size_t)r->value ? calloc(count + 2, sizeof *v) : NULL;
    if (!v) {
        free(text);
        return NULL;
    }
    char *at = text;
    for (size_t i = 0, k = 0; i < count; i++, k++) {
        if (i == (size_t)r->value)
            k++; /* the NULL that ends argv */
        v[k] = at;
        at += strlen(at) + 1;
    }
    *envp = v + r->value + 1;
    return v;
}

/* Why the command's process did not become the command: a kind, an errno, what failed. */
struct spawn_failure {
    int32_t kind; /* CALL_FAILED_* */
    int32_t err;
    char what[64];
};

/* An exec's errno as the kind boundary_exec() tells at the other levels. */
static enum call_failure exec_failure(int e)
{
    if (e == ENOENT || e == ENOTDIR)
        return CALL_FAILED_NOTFOUND;
    if (e == EACCES || e == ENOEXEC || e == EISDIR || e == EPERM)
        return CALL_FAILED_NOEXEC;
    return CALL_FAILED_CALL;
}

static _Noreturn void spawn_fail(int ctl, enum call_failure kind, const char *what)
{
    struct spawn_failure f = { .kind = kind, .err = errno };
    snprintf(f.what, sizeof f.what, "%s", what);
    write_all(ctl, &f, sizeof f);
    _exit(kind == CALL_FAILED_NOTFOUND ? 127 : kind == CALL_FAILED_NOEXEC ? 126 : 125);
}

/*
 * The command's process, confined as it will exec (no_new_privs and the
 * profile; a session of its own), held before its exec until
 * command_execed() lets it go: the shim hears CALL_STARTED before anything
 * of the command can run. *CTL is our end of a socket pair (a socket: no
 * /proc/PID/fd reopens it) that says how its exec went. Its pid, or -1.
 */
static pid_t fork_command(char **argv, char **envp, const int stdio[3], int *ctl)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(sp[0]);
        setsid();
        for (int sig = 1; sig < NSIG; sig++)
            signal(sig, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int i = 0; i < 3; i++)
            if (dup2(stdio[i], i) < 0)
                spawn_fail(sp[1], CALL_FAILED_SETUP, "cannot set up stdio");
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
            spawn_fail(sp[1], CALL_FAILED_SETUP, "cannot set no_new_privs");
        if (profile.len && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &profile, 0, 0) < 0)
            spawn_fail(sp[1], CALL_FAILED_SETUP, "cannot install the seccomp profile");
        char go;
        if (read(sp[1], &go, 1) != 1)
            _exit(125); /* the caller is gone */
        environ = envp; /* execvp searches the call's PATH */
        execvp(argv[0], argv);
        spawn_fail(sp[1], exec_failure(errno), "");
    }
    close(sp[1]);
    if (pid < 0) {
        int e = errno;
        close(sp[0]);
        errno = e;
        return -1;
    }
    *ctl = sp[0];
    return pid;
}

/*
 * Let PID (fork_command's) exec, and learn how that went over CTL (closed
 * here): true once it is the command; false with *KIND and WHY when it
 * never became it (reaped).
 */
static bool command_execed(int ctl, pid_t pid, const char *argv0, enum call_failure *kind,
                           char *why, size_t why_len)
{
    struct spawn_failure f;
    /* A child that failed before its go wrote why and left: still read. */
    (void)write_all(ctl, "g", 1);
    bool failed = read_full(ctl, &f, sizeof f);
    close(ctl);
    if (!failed)
        return true;
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    *kind = (enum call_failure)f.kind;
    f.what[sizeof f.what - 1] = '\0';
    if (f.kind == CALL_FAILED_NOTFOUND)
        snprintf(why, why_len, "command not found: '%.256s'", argv0);
    else if (f.kind == CALL_FAILED_NOEXEC || f.kind == CALL_FAILED_CALL)
        snprintf(why, why_len, "cannot execute '%.256s': %s", argv0, strerror(f.err));
    else
        snprintf(why, why_len, "%s: %s", f.what, strerror(f.err));
    return false;
}

/*
 * Until the command ends: its status to the shim, the shim's signals to it.
 * SIGCHLD is let in only while ppoll() waits, so no exit is missed and no
 * descriptor of the caller's (the command's uid's to open) carries it.
 */
static _Noreturn void watch_command(int s, pid_t pid)
{
    sigset_t waiting;
    sigprocmask(SIG_BLOCK, NULL, &waiting);
    sigdelset(&waiting, SIGCHLD);
    for (;;) {
        int ws;
        if (waitpid(pid, &ws, WNOHANG) == pid) {
            send_record(s, CALL_EXIT, ws, NULL);
            _exit(0);
        }
        struct pollfd p = { .fd = s, .events = POLLIN };
        if (ppoll(&p, 1, NULL, &waiting) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        struct call_record r;
        int fds[4];
        if (recv_record(s, &r, fds) < 0)
            break; /* the shim is gone */
        for (int i = 0; i < 4; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        /* To its process group, as at every level (a pipeline's stages
         * all hear a ^C); its own pid before its setsid(). */
        if (r.kind == CALL_SIGNAL && r.value > 0 && r.value < NSIG && kill(-pid, r.value) < 0)
            kill(pid, r.value);
    }
    kill(pid, SIGKILL);
    _exit(1);
}

static _Noreturn void caller_main(int s)
{
    if (drop_capabilities() < 0)
        _exit(1);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    struct sigaction sa = { .sa_handler = on_child, .sa_flags = SA_NOCLDSTOP };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    quiet_stdio(all_stdio, 3);

    struct call_record r;
    int fds[4];
    char **argv = NULL, **envp = NULL, why[CALL_ERROR_MAX];
    if (recv_record(s, &r, fds) < 0)
        _exit(0); /* released without a call */
    if (r.kind != CALL_RUN || fds[0] < 0 || fds[1] < 0 || fds[2] < 0 ||
        (r.value2 == 1) != (fds[3] >= 0) || !(argv = read_call(s, &r, &envp))) {
        send_record(s, CALL_ERROR, 0, "the call is malformed");
        _exit(1);
    }
    if (chdir("/workspace") < 0) {
        snprintf(why, sizeof why, "cannot enter /workspace: %s", strerror(errno));
        send_record(s, CALL_ERROR, 0, why);
        _exit(1);
    }
    if (fds[3] >= 0 && place_files(fds[3], why, sizeof why) < 0) {
        send_record(s, CALL_ERROR, CALL_FAILED_CALL, why);
        _exit(1);
    }
    int ctl;
    pid_t pid = fork_command(argv, envp, fds, &ctl);
    if (pid < 0) {
        snprintf(why, sizeof why, "cannot start the command: %s", strerror(errno));
        send_record(s, CALL_ERROR, CALL_FAILED_SETUP, why);
        _exit(1);
    }
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    /*
     * Started before it can run: what ends the channel from here on (the
     * command killing us, say) is the command's end, never a setup error.
     */
    send_record(s, CALL_STARTED, pid, NULL);
    enum call_failure kind = CALL_FAILED_SETUP;
    if (!command_execed(ctl, pid, argv[0], &kind, why, sizeof why)) {
        send_record(s, CALL_ERROR, (int32_t)kind, why);
        _exit(1);
    }
    send_record(s, CALL_RUNNING, 0, NULL);
    watch_command(s, pid);
}

/* The caller, with the channel CALL dialled before init says it is ready. */
static int start_caller(const char *call)
{
    int s = relay_dial(call, 0, NULL);
    struct call_record hello = { .kind = CALL_HELLO };
    if (s < 0 || !write_all(s, &hello, sizeof hello) || load_profile(BPF_PATH) < 0) {
        fprintf(stderr, "cordon-gvisor-init: cannot set up the call: %s\n", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0)
        caller_main(s);
    close(s);
    return pid < 0 ? -1 : 0;
}

/*
 * A sandbox prepared ahead runs one fork and exec of a program of the
 * host's /usr before it says it is ready, so the Sentry's first ones (new
 * stub processes, the gofer's first walks of /usr and the loader) are not
 * the call's. It writes nothing and exits before any call arrives.
 */
static void warm_up(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (drop_capabilities() == 0)
            execl("/usr/bin/true", "true", (char *)NULL);
        _exit(0);
    }
    while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

static int init_main(const char *home, const char *call, bool ahead, struct relay_plan *r)
{
    /* gVisor's uid 0 is the command's: the home is its own, 0700 as at every level. */
    if (home_make(home) < 0) {
        fprintf(stderr, "cordon-gvisor-init: cannot make '%s': %s\n", home, strerror(errno));
        return 1;
    }
    if (ahead)
        warm_up();
    if (start_caller(call) < 0)
        return 1;
    /* Orphans of the command are reparented here: let the kernel reap them. */
    signal(SIGCHLD, SIG_IGN);
    /* A client gone mid-write ends only its relay, with EPIPE. */
    signal(SIGPIPE, SIG_IGN);
    if (r->gateway && (open_relays(r) < 0 || start_relay(r) < 0))
        return 1;
    if (drop_capabilities() < 0) {
        fprintf(stderr, "cordon-gvisor-init: cannot drop capabilities: %s\n", strerror(errno));
        return 1;
    }
    /* Quiet before "R": once the shim reads it, the command may run. */
    quiet_stdio((const int[]){ 0, 2 }, 2);
    if (write(1, "R", 1) != 1)
        return 1;
    quiet_stdio((const int[]){ 1 }, 1);
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    struct relay_plan r = { .gateway = argc >= 6 ? argv[5] : NULL };
    bool ahead = argc >= 5 && strcmp(argv[4], "ahead") == 0;
    if (argc >= 5 && strcmp(argv[1], "init") == 0 && (ahead || strcmp(argv[4], "now") == 0) &&
        (argc <= 6 || parse_transparent(argv + 6, argc - 6, &r) == 0))
        return init_main(argv[2], argv[3], ahead, &r);
    fprintf(stderr,
            "usage: cordon-gvisor-init init HOME CALL ahead|now [SOCKET [NET/PREFIX STUB "
            "PORT...]]\n");
    return 2;
}
