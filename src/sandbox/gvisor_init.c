/*
 * sandbox/gvisor_init.c: cordon-gvisor-init, the static helper cordon ships
 * into every gVisor sandbox (embedded in cordon, bound read-only at
 * /.cordon/init). It runs inside the gVisor kernel, never on the host:
 *
 *   init HOME [SOCKET]  the container's first process. Makes HOME (the
 *                   command's, in the fresh /tmp) and says "R" on stdout once
 *                   ready, then holds the sandbox open; with SOCKET (the
 *                   gateway's unix socket, reached through --host-uds=open)
 *                   it first listens on 127.0.0.1:3128 and relays each
 *                   connection to SOCKET, so HTTP(S)_PROXY works as at the
 *                   namespace level while the sandbox has no network at all.
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
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "sandbox/start_files.h"

#define PROXY_PORT 3128
#define MAX_INSNS 4096

static void relay(int a, int b)
{
    char buf[65536];
    struct pollfd p[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };
    int open_dirs = 2;
    while (open_dirs > 0) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !p[i].revents)
                continue;
            int to = i == 0 ? b : a;
            ssize_t n = read(p[i].fd, buf, sizeof buf);
            if (n <= 0) {
                /* Half-close: the other side still gets its answer. */
                shutdown(to, SHUT_WR);
                p[i].fd = -1;
                open_dirs--;
                continue;
            }
            for (ssize_t off = 0; off < n;) {
                ssize_t w = write(to, buf + off, (size_t)(n - off));
                if (w < 0 && errno == EINTR)
                    continue;
                if (w <= 0)
                    return;
                off += w;
            }
        }
    }
}

static int dial(const char *path)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof a.sun_path)
        return -1;
    strcpy(a.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
        close(s);
        return -1;
    }
    return s;
}

static int listen_proxy(void)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(PROXY_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int one = 1;
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 128) < 0)
        return -1;
    return l;
}

static int init_main(const char *home, const char *gateway)
{
    int l = -1;
    /* gVisor's uid 0 is the command's: the home is its own, 0700 as at every level. */
    if (mkdir(home, 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "cordon-gvisor-init: cannot make '%s': %s\n", home, strerror(errno));
        return 1;
    }
    if (gateway && (l = listen_proxy()) < 0) {
        fprintf(stderr, "cordon-gvisor-init: cannot listen on 127.0.0.1:%d: %s\n", PROXY_PORT,
                strerror(errno));
        return 1;
    }
    /* Orphans of the command are reparented here: let the kernel reap them. */
    signal(SIGCHLD, SIG_IGN);
    if (write(1, "R", 1) != 1)
        return 1;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
    }
    if (l < 0)
        for (;;)
            pause();
    for (;;) {
        int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        pid_t pid = fork();
        if (pid == 0) {
            close(l);
            int g = dial(gateway);
            if (g >= 0)
                relay(c, g);
            _exit(0);
        }
        close(c);
    }
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
    int out = strcmp(p, "..") == 0 ? (errno = EPERM, -1)
                                   : openat(dir, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                                                        O_CLOEXEC, mode & 0777);
    close(dir);
    if (out < 0)
        return -1;
    for (size_t off = 0; off < len;) {
        ssize_t w = write(out, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(out);
            return -1;
        }
        off += (size_t)w;
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
            fprintf(stderr, "cannot place file '%s' in the workspace: %s\n", path,
                    strerror(errno));
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
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "init") == 0)
        return init_main(argv[2], argc == 4 ? argv[3] : NULL);
    if (argc >= 4 && strcmp(argv[1], "exec") == 0)
        return exec_main(argv[2], argv + 3);
    if (argc == 2 && strcmp(argv[1], "place") == 0)
        return place_main();
    fprintf(stderr, "usage: cordon-gvisor-init init HOME [SOCKET] | exec BPF|- COMMAND... | place\n");
    return 2;
}
