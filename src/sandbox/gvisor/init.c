/*
 * sandbox/gvisor/init.c: cordon-gvisor-init, the static helper cordon ships
 * into every gVisor sandbox (embedded in cordon, bound read-only at
 * /.cordon/init). It runs inside the gVisor kernel, never on the host:
 *
 *   init HOME [SOCKET [NET/PREFIX STUB PORT...]]
 *                   the container's first process. Makes HOME (the
 *                   command's, in the fresh /tmp) and says "R" on stdout once
 *                   ready, then holds the sandbox open; with SOCKET (the
 *                   gateway's unix socket, reached through --host-uds=open)
 *                   it first listens on 127.0.0.1:3128 and relays each
 *                   connection to SOCKET (all of them from one process,
 *                   gvisor/relay.c), so HTTP(S)_PROXY works as at the
 *                   namespace level while the sandbox has no network at all.
 *                   With NET/PREFIX (the synthetic range), STUB (the DNS
 *                   stub's address) and the ports, egress is transparent too
 *                   (relay_wire.h): the range is made loopback's, the stub
 *                   relays each query over one DNS stream to SOCKET, and a
 *                   listener on 0.0.0.0:PORT relays each connection with a
 *                   preface naming the address and port it came to. Each
 *                   "+NET/PREFIX" after the ports (an allowed literal's
 *                   range) is made the sandbox's own as well, so a client
 *                   that names the address reaches a listener too.
 *   exec BPF CMD... the command's wrapper: installs the seccomp program in
 *                   file BPF ("-" for none), then execs CMD.
 *   place           before the command, with nothing else of the call
 *                   running: writes the call's files (their memfd on stdin,
 *                   start_files.h) under the working directory, the
 *                   workspace. gVisor has no openat2, so each component is
 *                   opened O_NOFOLLOW: a link on the way fails the call.
 *
 * Self-contained on purpose (no cordon library): it must stay small and
 * static, and it holds nothing of the supervisor's.
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
#include <unistd.h>

#include "common/home.h"
#include "common/relay_wire.h"
#include "common/route.h"
#include "common/syscalls.h"
#include "sandbox/gvisor/relay.h"
#include "sandbox/start_files.h"

#define PROXY_PORT 3128
#define MAX_INSNS 4096
#define MAX_PORTS 32

static int write_all(int fd, const void *data, size_t len)
{
    for (const char *p = data; len > 0;) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

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
        if (write_all(g, q, 2 + (size_t)n) < 0) {
            close(g);
            g = -1;
            have = waiting = 0;
            continue;
        }
        askers[(head + waiting++) % DNS_PENDING] = from;
    }
}

/* No capability left: the init is then no more than the command it serves. */
static int drop_capabilities(void)
{
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
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        for (size_t i = 0; i < r->n_fds; i++)
            close(r->fds[i]);
        if (drop_capabilities() < 0)
            _exit(1);
        dns_main(u, r->gateway);
    }
    close(u);
    return 0;
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
    int done[2];
    if (pipe2(done, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        struct rlimit nofile = { RELAY_NOFILE, RELAY_NOFILE };
        close(done[0]);
        if (setrlimit(RLIMIT_NOFILE, &nofile) < 0 || drop_capabilities() < 0 ||
            write(done[1], "d", 1) != 1)
            _exit(1);
        close(done[1]);
        relay_serve(r->fds, r->n_fds, r->gateway);
    }
    close(done[1]);
    char c;
    ssize_t n = read(done[0], &c, 1);
    close(done[0]);
    for (size_t i = 0; i < r->n_fds; i++)
        close(r->fds[i]);
    if (n != 1) {
        fprintf(stderr, "cordon-gvisor-init: cannot start the relay: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

static int init_main(const char *home, struct relay_plan *r)
{
    /* gVisor's uid 0 is the command's: the home is its own, 0700 as at every level. */
    if (home_make(home) < 0) {
        fprintf(stderr, "cordon-gvisor-init: cannot make '%s': %s\n", home, strerror(errno));
        return 1;
    }
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
    if (write(1, "R", 1) != 1)
        return 1;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
    }
    for (;;)
        pause();
}

static int install_profile(const char *path)
{
    static struct sock_filter insns[MAX_INSNS];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, insns, sizeof insns);
    close(fd);
    if (n <= 0 || n % (ssize_t)sizeof insns[0]) {
        errno = EINVAL;
        return -1;
    }
    struct sock_fprog prog = { .len = (unsigned short)(n / (ssize_t)sizeof insns[0]),
                               .filter = insns };
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

static int exec_main(const char *bpf, char **argv)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        fprintf(stderr, "cordon: cannot set no_new_privs: %s\n", strerror(errno));
        return 125;
    }
    if (strcmp(bpf, "-") != 0 && install_profile(bpf) < 0) {
        fprintf(stderr, "cordon: cannot install the seccomp profile: %s\n", strerror(errno));
        return 125;
    }
    execvp(argv[0], argv);
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) {
        fprintf(stderr, "cordon: command not found: '%s'\n", argv[0]);
        return 127;
    }
    fprintf(stderr, "cordon: cannot execute '%s': %s\n", argv[0], strerror(e));
    return 126;
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

/* Write LEN bytes of DATA to PATH (relative, made of plain components) under ".". */
static int place_one(char *path, const char *data, size_t len, unsigned mode)
{
    int dir = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    char *p = path, *slash;
    while (dir >= 0 && (slash = strchr(p, '/'))) {
        *slash = '\0';
        int next = -1;
        if (strcmp(p, "..") == 0)
            errno = EPERM;
        else if (mkdirat(dir, p, 0755) < 0 && errno != EEXIST)
            ;
        else
            next = openat(dir, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(dir);
        *slash = '/';
        dir = next;
        p = slash + 1;
    }
    if (dir < 0)
        return -1;
    int out = strcmp(p, "..") == 0
        ? (errno = EPERM, -1)
        : openat(dir, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0777);
    close(dir);
    if (out < 0)
        return -1;
    if (write_all(out, data, len) < 0) {
        int e = errno;
        close(out);
        errno = e;
        return -1;
    }
    return close(out);
}

static int place_main(void)
{
    size_t size = 0, off = 0;
    char *map = read_all(0, (size_t)1 << 32, &size);
    if (!map) {
        fprintf(stderr, "cannot read the call's files: %s\n", strerror(errno));
        return 1;
    }
    char path[4096];
    while (off < size) {
        struct start_file_header fh;
        if (size - off < sizeof fh)
            break;
        memcpy(&fh, map + off, sizeof fh);
        off += sizeof fh;
        if (fh.path_len == 0 || fh.path_len >= sizeof path || size - off < fh.path_len ||
            size - off - fh.path_len < fh.len)
            break;
        memcpy(path, map + off, fh.path_len);
        path[fh.path_len] = '\0';
        off += fh.path_len;
        if (memchr(path, '\0', fh.path_len) ||
            place_one(path, map + off, (size_t)fh.len, fh.mode) < 0) {
            fprintf(stderr, "cannot place file '%s' in the workspace: %s\n", path, strerror(errno));
            return 1;
        }
        off += (size_t)fh.len;
    }
    if (off != size) {
        fprintf(stderr, "the call's files are malformed\n");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct relay_plan r = { .gateway = argc >= 4 ? argv[3] : NULL };
    if (argc >= 3 && strcmp(argv[1], "init") == 0 &&
        (argc <= 4 || parse_transparent(argv + 4, argc - 4, &r) == 0))
        return init_main(argv[2], &r);
    if (argc >= 4 && strcmp(argv[1], "exec") == 0)
        return exec_main(argv[2], argv + 3);
    if (argc == 2 && strcmp(argv[1], "place") == 0)
        return place_main();
    fprintf(stderr,
            "usage: cordon-gvisor-init init HOME [SOCKET [NET/PREFIX STUB PORT...]] | exec BPF|- "
            "COMMAND... | place\n");
    return 2;
}
