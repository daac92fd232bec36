/*
 * sandbox/start.c: the start message (see start.h). One sendmsg carries a
 * fixed header and the three stdio descriptors; the strings follow on the
 * same stream socket.
 */
#include "sandbox/start.h"

#include "common/fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define START_MAGIC 0x636f7264u /* "cord" */

struct start_header {
    uint32_t magic;
    uint32_t bytes; /* of the strings that follow, each NUL-terminated */
    uint32_t argc;
    uint32_t envc;
    uint32_t flags;
};

#define START_TTY 1u

int start_ready_send(int sock)
{
    return write(sock, "R", 1) == 1 ? 0 : -1;
}

int start_ready_wait(int sock)
{
    char c;
    ssize_t n;
    do
        n = read(sock, &c, 1);
    while (n < 0 && errno == EINTR);
    return n == 1 && c == 'R' ? 0 : -1;
}

static size_t strv_bytes(char *const *v, uint32_t *count)
{
    size_t bytes = 0;
    *count = 0;
    for (; v && *v; v++, (*count)++)
        bytes += strlen(*v) + 1;
    return bytes;
}

/* send(), not write(): a boundary that died must not SIGPIPE the supervisor. */
static int send_all(int sock, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(sock, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int send_strings(int sock, char *const *v)
{
    for (; v && *v; v++)
        if (send_all(sock, *v, strlen(*v) + 1) < 0)
            return -1;
    return 0;
}

int start_message_send(int sock, char *const *argv, char *const *envp, const int stdio[3],
                       bool tty, struct cordon_err *err)
{
    struct start_header h = { .magic = START_MAGIC, .flags = tty ? START_TTY : 0 };
    size_t bytes = strv_bytes(argv, &h.argc) + strv_bytes(envp, &h.envc);
    if (h.argc == 0)
        return err_set(err, CORDON_E_USAGE, "no command to run");
    if (bytes > START_MAX_BYTES)
        return err_set(err, CORDON_E_USAGE, "arguments and environment exceed %u bytes",
                       START_MAX_BYTES);
    h.bytes = (uint32_t)bytes;
    if (send_fds(sock, &h, sizeof h, stdio, 3) < 0 || send_strings(sock, argv) < 0 ||
        send_strings(sock, envp) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot hand the command to the sandbox");
    return 0;
}

/* Point V[0..COUNT) at the strings from *AT on; false when they run past END. */
static int split(char **v, uint32_t count, char **at, const char *end)
{
    for (uint32_t i = 0; i < count; i++) {
        if (*at >= end)
            return -1;
        v[i] = *at;
        char *nul = memchr(*at, '\0', (size_t)(end - *at));
        if (!nul)
            return -1;
        *at = nul + 1;
    }
    v[count] = NULL;
    return 0;
}

int start_message_recv(int sock, struct start_message *m)
{
    struct start_header h;
    if (recv_fds(sock, &h, sizeof h, m->stdio, 3) < 0)
        return -1;
    if (h.magic != START_MAGIC || h.argc == 0 || h.bytes > START_MAX_BYTES ||
        h.argc + (uint64_t)h.envc > h.bytes || (h.flags & ~START_TTY))
        goto bad;
    m->tty = h.flags & START_TTY;
    size_t ptrs = ((size_t)h.argc + h.envc + 2) * sizeof(char *);
    size_t size = ptrs + h.bytes;
    char *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        goto bad;
    char *strings = mem + ptrs, *end = strings + h.bytes, *at = strings;
    m->argv = (char **)(void *)mem;
    m->envp = m->argv + h.argc + 1;
    if (!read_full(sock, strings, h.bytes) || split(m->argv, h.argc, &at, end) < 0 ||
        split(m->envp, h.envc, &at, end) < 0 || at != end) {
        munmap(mem, size);
        goto bad;
    }
    return 0;
bad:
    for (int i = 0; i < 3; i++)
        close(m->stdio[i]);
    return -1;
}

int start_terminal_send(int sock, struct cordon_err *err)
{
    /* /dev/ptmx is the sandbox's own devpts instance (newinstance). */
    int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open a terminal in the sandbox");
    int unlock = 0;
    /* TIOCGPTPEER: the slave of exactly this master, no path looked up. */
    int slave = ioctl(master, TIOCSPTLCK, &unlock) < 0
                    ? -1
                    : ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot open the terminal's slave");
        close(master);
        return -1;
    }
    int rc = send_fd(sock, master);
    close(master);
    if (rc < 0) {
        close(slave);
        return err_sys(err, CORDON_E_SETUP, "cannot hand the terminal to the supervisor");
    }
    return slave;
}

int start_terminal_recv(int sock)
{
    return recv_fd(sock);
}
