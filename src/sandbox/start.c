/*
 * sandbox/start.c: the start message (see start.h). One sendmsg carries a
 * fixed header and the three stdio descriptors; the strings follow on the
 * same stream socket.
 */
#include "sandbox/start.h"
#include "sandbox/start_files.h"

#include "common/fds.h"

#include "common/syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define START_MAGIC 0x636f7264u /* "cord" */

struct start_header {
    uint32_t magic;
    uint32_t bytes; /* of the strings that follow, each NUL-terminated */
    uint32_t argc;
    uint32_t envc;
    uint32_t files; /* 1: a fourth descriptor holds the files */
    uint32_t flags; /* START_TTY */
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

/* All of P to FD, a socket or a file; -1 on any failure. send(), not write(),
 * on a socket: a boundary that died must not SIGPIPE the supervisor. */
static int put_all(int fd, const void *buf, size_t len, bool sock)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = sock ? send(fd, p, len, MSG_NOSIGNAL) : write(fd, p, len);
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
        if (put_all(sock, *v, strlen(*v) + 1, true) < 0)
            return -1;
    return 0;
}

/* The files as one sealed memfd: the boundary reads exactly what was checked. */
static int files_memfd(const struct start_file *files, size_t n, struct cordon_err *err)
{
    int fd = memfd_create("cordon-files", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create a memfd for the call's files");
    for (size_t i = 0; i < n; i++) {
        struct start_file_header fh = { .path_len = (uint32_t)strlen(files[i].path),
                                        .mode = files[i].mode ? files[i].mode & 0777
                                                              : START_FILE_MODE_DEFAULT,
                                        .len = files[i].len };
        if (put_all(fd, &fh, sizeof fh, false) < 0 ||
            put_all(fd, files[i].path, fh.path_len, false) < 0 ||
            put_all(fd, files[i].data, files[i].len, false) < 0) {
            close(fd);
            return err_sys(err, CORDON_E_SETUP, "cannot write the call's files");
        }
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
        lseek(fd, 0, SEEK_SET) < 0) {
        close(fd);
        return err_sys(err, CORDON_E_SETUP, "cannot seal the call's files");
    }
    return fd;
}

int start_message_send(int sock, char *const *argv, char *const *envp, const int stdio[3],
                       const struct start_file *files, size_t n, bool tty, struct cordon_err *err)
{
    struct start_header h = { .magic = START_MAGIC, .files = n > 0, .flags = tty ? START_TTY : 0 };
    size_t bytes = strv_bytes(argv, &h.argc) + strv_bytes(envp, &h.envc);
    if (h.argc == 0)
        return err_set(err, CORDON_E_USAGE, "no command to run");
    if (bytes > START_MAX_BYTES)
        return err_set(err, CORDON_E_USAGE, "arguments and environment exceed %u bytes",
                       START_MAX_BYTES);
    if (n > START_MAX_FILES)
        return err_set(err, CORDON_E_USAGE, "more than %u files", START_MAX_FILES);
    h.bytes = (uint32_t)bytes;
    int fds[4] = { stdio[0], stdio[1], stdio[2], -1 };
    if (n && (fds[3] = files_memfd(files, n, err)) < 0)
        return -1;
    int rc = send_fds(sock, &h, sizeof h, fds, n ? 4 : 3);
    if (fds[3] >= 0)
        close(fds[3]);
    if (rc < 0 || send_strings(sock, argv) < 0 || send_strings(sock, envp) < 0)
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
    int fds[4] = { -1, -1, -1, -1 };
    /* Peek at the header for how many descriptors come with it. */
    ssize_t got;
    while ((got = recv(sock, &h, sizeof h, MSG_PEEK)) < 0 && errno == EINTR)
        ;
    if (got != (ssize_t)sizeof h || recv_fds(sock, &h, sizeof h, fds, h.files ? 4 : 3) < 0)
        return -1;
    memcpy(m->stdio, fds, sizeof m->stdio);
    m->files = fds[3];
    m->tty = h.flags & START_TTY;
    if (h.magic != START_MAGIC || h.argc == 0 || h.bytes > START_MAX_BYTES ||
        h.argc + (uint64_t)h.envc > h.bytes || (h.flags & ~START_TTY))
        goto bad;
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
    if (m->files >= 0)
        close(m->files);
    m->files = -1;
    return -1;
}

/* The files of FD (a sealed memfd) beneath DIR_FD. */
static int place_files(int fd, int dir_fd, struct cordon_err *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return err_sys(err, CORDON_E_SETUP, "cannot read the call's files");
    }
    char *map = st.st_size ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (map == MAP_FAILED)
        return err_sys(err, CORDON_E_SETUP, "cannot read the call's files");
    char why[512];
    int rc = start_files_place(map, (size_t)st.st_size, dir_fd, why, sizeof why);
    if (rc < 0)
        err_set(err, CORDON_E_SETUP, "%s", why);
    if (map)
        munmap(map, (size_t)st.st_size);
    return rc;
}

int start_place_files(struct start_message *m, const char *dir, struct cordon_err *err)
{
    if (m->files < 0)
        return 0;
    int fd = m->files;
    m->files = -1;
    int dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) {
        close(fd);
        return err_sys(err, CORDON_E_SETUP, "cannot open the workspace '%s'", dir);
    }
    int rc = place_files(fd, dir_fd, err);
    close(dir_fd);
    return rc;
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
