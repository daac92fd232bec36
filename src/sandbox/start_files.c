/*
 * sandbox/start_files.c: placing the call's files (start_files.h's layout)
 * beneath a workspace. libc only: the boundary (namespace and process
 * levels), cordon-gvisor-init inside gVisor and the microvm guest's agent
 * each compile it.
 */
#include "sandbox/start_files.h"

#include "common/fds.h"
#include "common/syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * NAME, one plain component, opened in DIR and never through a link or
 * another mount; openat2 where the kernel has it, else (gVisor's) openat
 * with O_NOFOLLOW, which refuses links but not mount points.
 */
static int open_in(int dir, const char *name, int flags, mode_t mode)
{
    static bool no_openat2;
    if (strcmp(name, "..") == 0 || strcmp(name, ".") == 0 || !name[0]) {
        errno = EPERM;
        return -1;
    }
    if (!no_openat2) {
        struct open_how how = { .flags = (uint64_t)flags | O_CLOEXEC,
                                .mode = (flags & O_CREAT) ? mode : 0,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                    RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
        int fd = sys_openat2(dir, name, &how, sizeof how);
        if (fd >= 0 || errno != ENOSYS)
            return fd;
        no_openat2 = true;
    }
    return openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
}

/* What placing made so far, taken back should a later file fail. */
struct made {
    struct made_entry {
        char *path;
        bool dir;
    } * e;
    size_t n, cap;
};

static void made_add(struct made *m, const char *path, size_t len, bool dir)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        struct made_entry *e = realloc(m->e, cap * sizeof *e);
        if (!e)
            return; /* then it is left: the run still fails, saying why */
        m->e = e;
        m->cap = cap;
    }
    m->e[m->n].path = strndup(path, len);
    m->e[m->n].dir = dir;
    if (m->e[m->n].path)
        m->n++;
}

/*
 * PATH's parent beneath DIR; *LEAF is its last component. With M, its
 * directories are made (0755) on the way and the ones made noted in M.
 */
static int parent_of(int dir, char *path, char **leaf, struct made *m, mode_t umask_was)
{
    dir = fcntl(dir, F_DUPFD_CLOEXEC, 3);
    char *p = path, *slash;
    while (dir >= 0 && (slash = strchr(p, '/'))) {
        *slash = '\0';
        int next = -1;
        if (strcmp(p, "..") == 0 || strcmp(p, ".") == 0 || !p[0]) {
            errno = EPERM;
        } else if (!m) {
            next = open_in(dir, p, O_PATH | O_DIRECTORY, 0);
        } else {
            bool made = mkdirat(dir, p, 0777 & ~umask_was) == 0;
            if (made)
                made_add(m, path, (size_t)(slash - path), true);
            if (made || errno == EEXIST)
                next = open_in(dir, p, O_PATH | O_DIRECTORY, 0);
        }
        int e = errno;
        close(dir);
        errno = e;
        *slash = '/';
        dir = next;
        p = slash + 1;
    }
    *leaf = p;
    return dir;
}

static int place_one(int dir_fd, char *path, const char *data, size_t len, unsigned mode,
                     struct made *m, mode_t umask_was)
{
    char *leaf;
    int dir = parent_of(dir_fd, path, &leaf, m, umask_was);
    if (dir < 0)
        return -1;
    mode_t perm = mode == START_FILE_MODE_DEFAULT ? 0666 & ~umask_was : mode & 0777;
    int out = open_in(dir, leaf, O_WRONLY | O_CREAT | O_EXCL, perm);
    close(dir);
    if (out < 0)
        return -1;
    made_add(m, path, strlen(path), false);
    if (!write_all(out, data, len)) {
        int e = errno;
        close(out);
        errno = e;
        return -1;
    }
    return close(out);
}

/* Take back what M notes, the last made first (a directory after what is in it). */
static void undo(int dir_fd, struct made *m)
{
    while (m->n > 0) {
        struct made_entry *e = &m->e[--m->n];
        char *leaf;
        int dir = parent_of(dir_fd, e->path, &leaf, NULL, 0);
        if (dir >= 0) {
            unlinkat(dir, leaf, e->dir ? AT_REMOVEDIR : 0);
            close(dir);
        }
        free(e->path);
    }
    free(m->e);
}

int start_files_place(const char *buf, size_t size, int dir_fd, char *why, size_t why_len)
{
    char path[4096];
    size_t off = 0;
    struct made m = { 0 };
    /* The modes asked for exactly; where none was, the umask the command will have. */
    mode_t umask_was = umask(0);
    int rc = 0;
    while (rc == 0 && off < size) {
        struct start_file_header fh;
        if (size - off < sizeof fh) {
            rc = -1;
            break;
        }
        memcpy(&fh, buf + off, sizeof fh);
        off += sizeof fh;
        if (fh.path_len == 0 || fh.path_len >= sizeof path || size - off < fh.path_len ||
            size - off - fh.path_len < fh.len || memchr(buf + off, '\0', fh.path_len)) {
            rc = -1;
            break;
        }
        memcpy(path, buf + off, fh.path_len);
        path[fh.path_len] = '\0';
        off += fh.path_len;
        if (place_one(dir_fd, path, buf + off, (size_t)fh.len, fh.mode, &m, umask_was) < 0) {
            snprintf(why, why_len, "cannot place file '%.100s' in the workspace: %s", path,
                     strerror(errno));
            rc = -2;
        }
        off += (size_t)fh.len;
    }
    if (rc == -1)
        snprintf(why, why_len, "the call's files are malformed");
    if (rc < 0)
        undo(dir_fd, &m);
    else {
        for (size_t i = 0; i < m.n; i++)
            free(m.e[i].path);
        free(m.e);
    }
    umask(umask_was);
    return rc < 0 ? -1 : 0;
}
