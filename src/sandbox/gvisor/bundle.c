/*
 * sandbox/gvisor/bundle.c: the OCI bundle runsc runs for a run of the
 * gvisor level (see gvisor.c): a root of empty directories and the
 * merged-/usr links, the mount plan the namespace level would make turned
 * into the spec's mounts, generated /etc files, the helper, its compat
 * library, the seccomp profile and, for egress, the gateway's socket.
 */
#include "sandbox/gvisor/gvisor_int.h"

#include "sandbox/gvisor/gvisor.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/hostpath.h"
#include "common/syscalls.h"
#include "sandbox/backend.h"
#include "sandbox/boundary.h"
#include "sandbox/cgroup.h"
#include "sandbox/engine.h"
#include "sandbox/meter.h"
#include "sandbox/plan.h"
#include "sandbox/start.h"
#include "sandbox/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* mkdir DIR, or find a real directory there: never a link (the bundle's
 * root holds links such as /etc/localtime whose targets are host paths). */
static int make_dir(const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0755) == 0)
        return 0;
    if (errno != EEXIST || lstat(dir, &st) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* Make every missing directory of PATH (relative to the bundle's root ROOT). */
static int make_parents(const char *root, const char *path, bool last_too)
{
    char buf[PATH_MAX];
    if ((size_t)snprintf(buf, sizeof buf, "%s%s", root, path) >= sizeof buf)
        return -1;
    size_t skip = strlen(root);
    for (char *p = buf + skip + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (make_dir(buf) < 0)
                return -1;
            *p = '/';
        }
    if (last_too && make_dir(buf) < 0)
        return -1;
    return 0;
}

static int write_file(const char *path, const void *data, size_t len, mode_t mode,
                      struct cordon_err *err)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot create '%s'", path);
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return err_sys(err, CORDON_E_SETUP, "gvisor: cannot write '%s'", path);
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/*
 * DATA as the file DEST of the bundle's own root (read-only inside, as a
 * read-only bind would be): each mount costs runsc's gofer and the boot a
 * few ms (3.5 ms a bind, measured with bare runsc), a file in the root
 * nothing. 1 when DEST is there already (a mountpoint of the policy's):
 * the caller binds it then.
 */
static int root_file(const char *rootfs, const char *dest, const void *data, size_t len,
                     mode_t mode, struct cordon_err *err)
{
    char path[PATH_MAX];
    struct stat st;
    if ((size_t)snprintf(path, sizeof path, "%s%s", rootfs, dest) >= sizeof path ||
        make_parents(rootfs, dest, false) < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", dest);
    if (lstat(path, &st) == 0)
        return 1;
    return write_file(path, data, len, mode, err);
}

/* The most of host /etc copied into the root rather than bound: a file, a directory's tree. */
#define COPY_MAX (1u << 20)
#define COPY_TREE_ENTRIES 64
#define COPY_TREE_DEPTH 3

/* The regular file SRC, of ST, whole into a buffer of ours (*LEN); NULL: bind it instead. */
static char *read_copy(int src, const struct stat *st, size_t *len)
{
    char *buf = S_ISREG(st->st_mode) && (st->st_mode & S_IROTH) && st->st_size <= (off_t)COPY_MAX
        ? malloc((size_t)st->st_size + 1)
        : NULL;
    ssize_t n = buf ? read(src, buf, (size_t)st->st_size + 1) : -1;
    if (n != (ssize_t)st->st_size) {
        free(buf); /* changing under us, or unreadable: bound as it is */
        return NULL;
    }
    *len = (size_t)n;
    return buf;
}

/*
 * NAME in DST where the host has what only root may read, for a root
 * caller, whose command would own it: there, but mode 0, as unreadable as
 * the namespace level's unprivileged uid finds it. 0, or -1 with ERR.
 */
static int unreadable_placeholder(int dst, const char *name, bool dir, struct cordon_err *err)
{
    int fd = dir ? mkdirat(dst, name, 0)
                 : openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot copy '%s'", name);
    if (!dir)
        close(fd);
    return 0;
}

/*
 * The tree of host directory SRC into DST, links as links: 0, 1 when a
 * part of it is not for anyone to read and the caller is not root (or it is
 * too big: bind it instead, over what was copied), -1 with ERR.
 */
static int copy_tree(int src, int dst, int depth, size_t *entries, size_t *bytes,
                     struct cordon_err *err)
{
    int dup = openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
    if (!d) {
        if (dup >= 0)
            close(dup);
        return 1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        struct stat st;
        char target[PATH_MAX];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (++*entries > COPY_TREE_ENTRIES ||
            fstatat(src, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = 1;
        } else if (!sandbox_readable_by_all(st.st_mode)) {
            /* The caller's own view (the gofer's) where it is not root. */
            rc = geteuid() == 0 ? unreadable_placeholder(dst, e->d_name, S_ISDIR(st.st_mode), err)
                                : 1;
        } else if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlinkat(src, e->d_name, target, sizeof target - 1);
            if (n < 0)
                rc = 1;
            else if ((target[n] = '\0', symlinkat(target, dst, e->d_name)) < 0)
                rc = err_sys(err, CORDON_E_SETUP, "gvisor: cannot copy the link '%s'", e->d_name);
        } else if (S_ISDIR(st.st_mode)) {
            int from = -1, to = -1;
            if (depth >= COPY_TREE_DEPTH)
                rc = 1;
            else if (mkdirat(dst, e->d_name, 0755) < 0 ||
                     (to = openat(dst, e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
                         0)
                rc = err_sys(err, CORDON_E_SETUP, "gvisor: cannot copy '%s'", e->d_name);
            else if ((from = openat(src, e->d_name,
                                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                rc = 1;
            else
                rc = copy_tree(from, to, depth + 1, entries, bytes, err);
            if (from >= 0)
                close(from);
            if (to >= 0)
                close(to);
        } else {
            _cleanup_close_ int from = S_ISREG(st.st_mode)
                ? openat(src, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
                : -1;
            size_t len = 0;
            _cleanup_free_ char *data =
                from >= 0 && fstat(from, &st) == 0 ? read_copy(from, &st, &len) : NULL;
            _cleanup_close_ int out = data && (*bytes += len) <= COPY_MAX
                ? openat(dst, e->d_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                         0444 | (st.st_mode & 0111))
                : -2;
            if (out == -2)
                rc = 1;
            else if (out < 0 || !write_all(out, data, len))
                rc = err_sys(err, CORDON_E_SETUP, "gvisor: cannot copy '%s'", e->d_name);
        }
    }
    closedir(d);
    return rc;
}

/* Is S one of cordon's own host /etc entries (sandbox_etc_files), not the policy's binds? */
static bool own_etc_entry(const struct mount_step *s)
{
    return s->kind == MOUNT_BIND && s->optional && s->follow_symlinks && !s->writable &&
        !s->in_workspace && strcmp(s->source, s->dest) == 0 && strncmp(s->dest, "/etc/", 5) == 0;
}

/*
 * One of cordon's own host /etc entries copied into the root when it is
 * small, instead of bound: a file, or a directory's tree. What the command
 * reads is the same, one mount fewer. 1: bind it.
 */
static int copy_host_file(const char *rootfs, const struct mount_step *s, struct cordon_err *err)
{
    if (!own_etc_entry(s))
        return 1;
    _cleanup_close_ int fd = open(s->source, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return 1;
    if (S_ISDIR(st.st_mode)) {
        char path[PATH_MAX];
        size_t entries = 0, bytes = 0;
        if ((st.st_mode & (S_IROTH | S_IXOTH)) != (S_IROTH | S_IXOTH) ||
            (size_t)snprintf(path, sizeof path, "%s%s", rootfs, s->dest) >= sizeof path)
            return 1;
        if (make_parents(rootfs, s->dest, true) < 0)
            return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", s->dest);
        _cleanup_close_ int to = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (to < 0)
            return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", s->dest);
        return copy_tree(fd, to, 0, &entries, &bytes, err);
    }
    size_t len = 0;
    _cleanup_free_ char *buf = read_copy(fd, &st, &len);
    return buf ? root_file(rootfs, s->dest, buf, len, 0444, err) : 1;
}

/* ---- the bundle ---- */

/* Is DEST inside the mount of an earlier step (so its mountpoint is not ours to make)? */
static bool under_mount(const struct ns_plan *plan, size_t upto, const char *dest)
{
    for (size_t i = 0; i < upto; i++) {
        const struct mount_step *s = &plan->steps[i];
        if (s->kind != MOUNT_BIND && s->kind != MOUNT_TMPFS && s->kind != MOUNT_PROC)
            continue;
        size_t n = strlen(s->dest);
        if (strncmp(dest, s->dest, n) == 0 && dest[n] == '/')
            return true;
    }
    return false;
}

/*
 * DEST lies beneath an earlier bind, whose host tree may hold links an
 * earlier run planted: runsc would make the mountpoint through them (making
 * directories on the host, or mounting somewhere else). Refused where any
 * existing component is a link, as the namespace level refuses it
 * (mounts.c's open_parent); a missing one runsc makes, as that level does.
 */
static int check_beneath_bind(const struct ns_plan *plan, size_t upto, const char *dest,
                              struct cordon_err *err)
{
    const struct mount_step *cover = NULL;
    size_t best = 0;
    for (size_t i = 0; i < upto; i++) {
        const struct mount_step *s = &plan->steps[i];
        size_t n = strlen(s->dest);
        if ((s->kind == MOUNT_BIND || s->kind == MOUNT_TMPFS || s->kind == MOUNT_PROC) &&
            n > best && strncmp(dest, s->dest, n) == 0 && dest[n] == '/') {
            cover = s;
            best = n;
        }
    }
    if (!cover || cover->kind != MOUNT_BIND || cover->source_in_root)
        return 0; /* beneath gVisor's own tmpfs or proc: nothing planted there */
    _cleanup_close_ int top = open(cover->source, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (top < 0)
        return 0; /* not a directory: runsc refuses the mount itself */
    struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                            .resolve =
                                RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
    int fd = sys_openat2(top, dest + best + 1, &how, sizeof how);
    if (fd >= 0)
        close(fd);
    else if (errno == ELOOP || errno == ENOTDIR || errno == EXDEV)
        return err_set(err, CORDON_E_SETUP,
                       "cannot make '%s': a component is not a directory "
                       "(a symbolic link is never followed there)",
                       dest);
    return 0;
}

/*
 * Is the host workspace's entry REL one runsc cannot mount over? A link (it
 * mounts at the target), a socket (it fails) or a FIFO (it hangs).
 */
static bool unmaskable(const char *workspace, const char *rel)
{
    char path[PATH_MAX];
    struct stat st;
    if ((size_t)snprintf(path, sizeof path, "%s%s", workspace, rel) >= sizeof path)
        return true;
    return lstat(path, &st) < 0 || S_ISLNK(st.st_mode) || S_ISSOCK(st.st_mode) ||
        S_ISFIFO(st.st_mode);
}

/* gVisor brings its own /dev (null, zero, full, random, urandom, tty, pts, fd). */
static bool gvisor_provides(const struct mount_step *s)
{
    if (strcmp(s->dest, "/dev/shm") == 0)
        return false; /* sized by the policy */
    return strcmp(s->dest, "/dev") == 0 || strncmp(s->dest, "/dev/", 5) == 0;
}

static json_t *bind_mount(const char *dest, const char *source, bool writable)
{
    return json_pack("{s:s, s:s, s:s, s:[s, s, s]}", "destination", dest, "type", "bind", "source",
                     source, "options", "rbind", writable ? "rw" : "ro", "nosuid");
}

static json_t *tmpfs_mount(const char *dest, const char *data)
{
    json_t *opts = json_pack("[s, s]", "nosuid", "nodev");
    /*
     * gVisor's tmpfs takes mode and size; nr_inodes it does not know. The
     * owner stays gVisor's uid 0, the command's here (process_json), not
     * the namespace level's sandbox user, or the scratch workspace would
     * not be the command's to write.
     */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", data ? data : "");
    for (char *save = NULL, *o = strtok_r(buf, ",", &save); o; o = strtok_r(NULL, ",", &save))
        if (strncmp(o, "nr_inodes=", 10) != 0 && strncmp(o, "uid=", 4) != 0 &&
            strncmp(o, "gid=", 4) != 0)
            json_array_append_new(opts, json_string(o));
    return json_pack("{s:s, s:s, s:s, s:o}", "destination", dest, "type", "tmpfs", "source",
                     "tmpfs", "options", opts);
}

/*
 * One of cordon's /etc entries bound for a root caller, whose command would
 * own root's files: what only root may read beneath it masked (an empty,
 * mode-0 tmpfs over a directory, the empty mode-0 file over a file), or the
 * entry left out where it cannot be looked through. 0, or 1: left out.
 */
static int bind_readable(json_t *mounts, const struct mount_step *s, const char *empty)
{
    struct sandbox_unreadable u;
    sandbox_find_unreadable(s->source, &u);
    if (u.all) {
        sandbox_unreadable_free(&u);
        return 1;
    }
    json_array_append_new(mounts, bind_mount(s->dest, s->source, false));
    for (size_t i = 0; i < u.n; i++)
        /* clang-format off */
        json_array_append_new(mounts, u.dir[i]
            ? json_pack("{s:s, s:s, s:s, s:[s, s, s, s, s]}", "destination", u.path[i],
                        "type", "tmpfs", "source", "tmpfs", "options", "ro", "nosuid", "nodev",
                        "mode=0", "size=4k")
            : bind_mount(u.path[i], empty, false));
    /* clang-format on */
    sandbox_unreadable_free(&u);
    return 0;
}

/* A file or one of cordon's host files as a file of the root: 0, or 1 to mount it as planned. */
static int instead_of_mount(const char *rootfs, const struct mount_step *s, struct cordon_err *err)
{
    if (s->kind == MOUNT_FILE)
        return root_file(rootfs, s->dest, s->source, strlen(s->source), 0444, err);
    return s->kind == MOUNT_BIND ? copy_host_file(rootfs, s, err) : 1;
}

/*
 * The namespace level's mount plan as OCI mounts: the one place that
 * decides what a sandbox sees stays mounts.c, at both levels.
 */
static int plan_to_mounts(const struct policy *p, const struct ns_plan *plan, const char *dir,
                          json_t *mounts, struct cordon_err *err)
{
    char rootfs[PATH_MAX], path[PATH_MAX];
    snprintf(rootfs, sizeof rootfs, "%s/bundle/rootfs", dir);
    char empty[PATH_MAX];
    snprintf(empty, sizeof empty, "%s/files/empty", dir);
    /* Mode 0: a mask is unreadable, as the namespace level's /dev/null bind is. */
    TRY(write_file(empty, "", 0, 0, err));

    for (size_t i = 0; i < plan->n_steps; i++) {
        const struct mount_step *s = &plan->steps[i];
        if (gvisor_provides(s))
            continue;
        bool ours = !under_mount(plan, i, s->dest);
        int mount = ours ? instead_of_mount(rootfs, s, err) : 1;
        if (mount <= 0) {
            if (mount < 0)
                return -1;
            continue;
        }
        switch (s->kind) {
        case MOUNT_DIR:
            if (ours && make_parents(rootfs, s->dest, true) < 0)
                return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", s->dest);
            continue;
        case MOUNT_SYMLINK:
            snprintf(path, sizeof path, "%s%s", rootfs, s->dest);
            if (ours &&
                (make_parents(rootfs, s->dest, false) < 0 ||
                 (symlink(s->source, path) < 0 && errno != EEXIST)))
                return err_sys(err, CORDON_E_SETUP, "gvisor: cannot link '%s'", s->dest);
            continue;
        case MOUNT_PROC:
            /* Read-only, as the namespace level mounts it: nothing of it is the command's to set. */
            /* clang-format off */
            json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:[s, s, s, s]}",
                                                    "destination", s->dest, "type", "proc",
                                                    "source", "proc", "options", "ro", "nosuid",
                                                    "nodev", "noexec"));
            /* clang-format on */
            break;
        case MOUNT_DEVPTS:
            continue;
        case MOUNT_SYSFS:
        case MOUNT_MQUEUE:
        case MOUNT_CGROUP2:
        case MOUNT_MASK:
            /* Only an OCI container's plan has these, and gvisor builds none. */
            return err_set(err, CORDON_E_INTERNAL, "gvisor: no mount of kind %d", (int)s->kind);
        case MOUNT_TMPFS:
            json_array_append_new(mounts, tmpfs_mount(s->dest, s->data));
            break;
        case MOUNT_FILE: {
            char file[PATH_MAX];
            snprintf(file, sizeof file, "%s/files/%zu", dir, i);
            TRY(write_file(file, s->source, strlen(s->source), 0444, err));
            json_array_append_new(mounts, bind_mount(s->dest, file, false));
            break;
        }
        case MOUNT_BIND: {
            const char *source = s->source;
            char in_ws[PATH_MAX];
            if (s->source_in_root && p->workspace) {
                /* A protected entry bound read-only over itself. */
                snprintf(in_ws, sizeof in_ws, "%s%s", p->workspace, s->dest + strlen("/workspace"));
                source = in_ws;
            } else if (strcmp(source, "/dev/null") == 0 && s->in_workspace && p->workspace &&
                       unmaskable(p->workspace, s->dest + strlen("/workspace"))) {
                /*
                 * The workspace's sockets, FIFOs and protected links are
                 * masked in place at the namespace level. runsc resolves
                 * a mount's destination through links (it would mount at
                 * the target, making its directories in the host
                 * workspace) and cannot mount over a socket or FIFO.
                 */
                return err_set(err, CORDON_E_UNSUPPORTED,
                               "gvisor: cannot hide '%s' in the workspace: runsc mounts "
                               "nothing over a link, socket or FIFO (move it out, or use "
                               "another level)",
                               s->dest + strlen("/workspace/"));
            } else if (strcmp(source, "/dev/null") == 0) {
                /* A mask: an empty read-only file, not a host device. */
                source = empty;
            }
            struct stat st;
            if (stat(source, &st) < 0) {
                if (s->optional || s->in_workspace)
                    continue;
                return err_sys(err, CORDON_E_SETUP, "gvisor: cannot bind '%s'", source);
            }
            if (own_etc_entry(s) && geteuid() == 0) {
                if (bind_readable(mounts, s, empty))
                    continue;
                break;
            }
            json_array_append_new(mounts, bind_mount(s->dest, source, s->writable));
            break;
        }
        }
        /* The mountpoint, where it lies in the bundle's own root. */
        if (!ours) {
            TRY(check_beneath_bind(plan, i, s->dest, err));
            continue;
        }
        struct stat st;
        bool is_dir = s->kind != MOUNT_FILE &&
            (s->kind != MOUNT_BIND || (stat(s->source, &st) == 0 && S_ISDIR(st.st_mode)));
        snprintf(path, sizeof path, "%s%s", rootfs, s->dest);
        if (make_parents(rootfs, s->dest, is_dir) < 0)
            return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", s->dest);
        if (!is_dir) {
            int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
            if (fd < 0 && errno != EEXIST)
                return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", s->dest);
            if (fd >= 0)
                close(fd);
        }
    }
    return 0;
}

/*
 * The plan's rlimits, which gVisor enforces inside (but RLIMIT_DATA, the
 * namespace level's fallback for memory: without a cgroup the supervisor
 * holds memory by its meter instead, so the plan has none).
 */
static json_t *rlimits_json(const struct confine_plan *c)
{
    static const char *const names[] = {
        [RLIMIT_CPU] = "RLIMIT_CPU",         [RLIMIT_FSIZE] = "RLIMIT_FSIZE",
        [RLIMIT_DATA] = "RLIMIT_DATA",       [RLIMIT_STACK] = "RLIMIT_STACK",
        [RLIMIT_CORE] = "RLIMIT_CORE",       [RLIMIT_RSS] = "RLIMIT_RSS",
        [RLIMIT_NPROC] = "RLIMIT_NPROC",     [RLIMIT_NOFILE] = "RLIMIT_NOFILE",
        [RLIMIT_MEMLOCK] = "RLIMIT_MEMLOCK", [RLIMIT_AS] = "RLIMIT_AS",
    };
    json_t *a = json_array();
    for (size_t i = 0; i < c->n_rlimits; i++) {
        int r = c->rlimits[i].resource;
        if (r < 0 || (size_t)r >= sizeof names / sizeof names[0] || !names[r])
            continue;
        json_array_append_new(a,
                              json_pack("{s:s, s:I, s:I}", "type", names[r], "hard",
                                        (json_int_t)c->rlimits[i].value.rlim_max, "soft",
                                        (json_int_t)c->rlimits[i].value.rlim_cur));
    }
    return a;
}

/*
 * The OCI process for ARGS: no capability, no new privileges, as gVisor's
 * uid 0. The gofer shows the caller's files as owned by 0 (root-started: the
 * host's owners; rootless: its user namespace maps the caller to 0) and
 * creates files on the host as the caller, so uid 0 is what the namespace
 * level's idmapped sandbox user is there: the caller, for the files the
 * policy binds, and nobody to the host kernel, which it never calls.
 */
static json_t *process_json(json_t *args, json_t *env, const char *cwd, const struct gv_state *st)
{
    /* clang-format off */
    return json_pack("{s:o, s:o, s:s, s:{s:i, s:i}, s:b, s:{s:[], s:[], s:[], s:[], s:[]}, s:o}",
                     "args", args, "env", env, "cwd", cwd, "user", "uid", 0, "gid", 0, "noNewPrivileges", 1, "capabilities", "bounding", "effective",
                     "inheritable", "permitted", "ambient", "rlimits",
                     rlimits_json(&st->confine));
    /* clang-format on */
}

static int write_json(const char *path, json_t *o, struct cordon_err *err)
{
    if (!o)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    _cleanup_free_ char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    return write_file(path, text, strlen(text), 0600, err);
}

/*
 * The helper, the compat library (gvisor/compat.c: this runsc refuses stat
 * flags Linux accepts) preloaded through /etc/ld.so.preload, the seccomp
 * profile, and the directories of the call channel and the gateway's door,
 * all in the bundle's read-only root at /.cordon.
 */
static int add_cordon_files(const struct policy *p, const struct gv_state *st, json_t *mounts,
                            struct cordon_err *err)
{
    char rootfs[PATH_MAX], path[PATH_MAX];
    snprintf(rootfs, sizeof rootfs, "%s/bundle/rootfs", st->dir);
    TRY(root_file(rootfs, INIT_PATH, cordon_gvisor_init_start, (size_t)cordon_gvisor_init_size,
                  0555, err));
    TRY(root_file(rootfs, COMPAT_PATH, cordon_gvisor_compat_start,
                  (size_t)cordon_gvisor_compat_size, 0555, err));
    static const char preload[] = COMPAT_PATH "\n";
    int rc = root_file(rootfs, "/etc/ld.so.preload", preload, sizeof preload - 1, 0444, err);
    if (rc > 0) {
        /* A policy's bind at /etc/ld.so.preload made its mountpoint: ours goes over it. */
        snprintf(path, sizeof path, "%s/files/ld.so.preload", st->dir);
        TRY(write_file(path, preload, sizeof preload - 1, 0444, err));
        json_array_append_new(mounts, bind_mount("/etc/ld.so.preload", path, false));
    }
    TRY(rc);

    struct seccomp_program prog = { 0 };
    TRY(seccomp_program_build(p, &prog, err));
    rc = root_file(rootfs, BPF_PATH, prog.filter, prog.len * sizeof prog.filter[0], 0444, err);
    seccomp_program_release(&prog);
    TRY(rc);

    static const char *const dirs[] = { CALL_DIR, GW_DIR };
    for (size_t i = 0; i < (st->gateway ? 2u : 1u); i++)
        if (make_parents(rootfs, dirs[i], true) < 0)
            return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", dirs[i]);
    return 0;
}

/*
 * The helper's command line: `init HOME CALL ahead|now`, with the gateway's socket when
 * the run has egress, and for transparent egress the synthetic range, the
 * DNS stub's address, the ports to listen on and "+NET/PREFIX" for each
 * allowed literal's range.
 */
static json_t *init_args(const struct gv_state *st)
{
    json_t *a = json_pack("[s, s, s, s, s]", INIT_PATH, "init", SANDBOX_HOME, CALL_SOCK,
                          st->ahead ? "ahead" : "now");
    if (st->gateway)
        json_array_append_new(a, json_string(GW_SOCK));
    if (!st->transparent)
        return a;
    char text[32];
    snprintf(text, sizeof text, "%u.%u.%u.%u/%d", SYNTH_NET >> 24, (SYNTH_NET >> 16) & 0xff,
             (SYNTH_NET >> 8) & 0xff, SYNTH_NET & 0xff, SYNTH_PREFIX);
    json_array_append_new(a, json_string(text));
    snprintf(text, sizeof text, "%u.%u.%u.%u", DNS_STUB_ADDR >> 24, (DNS_STUB_ADDR >> 16) & 0xff,
             (DNS_STUB_ADDR >> 8) & 0xff, DNS_STUB_ADDR & 0xff);
    json_array_append_new(a, json_string(text));
    for (size_t i = 0; i < st->n_ports; i++) {
        snprintf(text, sizeof text, "%u", st->ports[i]);
        json_array_append_new(a, json_string(text));
    }
    for (size_t i = 0; i < st->n_nets; i++) {
        uint32_t n = st->nets[i];
        snprintf(text, sizeof text, "+%u.%u.%u.%u/%u", n >> 24, (n >> 16) & 0xff, (n >> 8) & 0xff,
                 n & 0xff, st->prefixes[i]);
        json_array_append_new(a, json_string(text));
    }
    return a;
}

/*
 * gVisor's capabilities for the helper: CAP_SETPCAP, to empty the bounding
 * set its processes (the command's parent among them) pass on. With
 * egress, CAP_SYS_RESOURCE too, for its relay to raise its own
 * RLIMIT_NOFILE past the command's (the command's processes take their
 * limits from the helper's spec, so that stays the policy's); for
 * transparent egress also the two it needs to make the synthetic range
 * loopback's and to listen on port 53 and the policy's ports. Every process
 * of the helper drops them all, bounding set included, before it says it
 * is ready, before anything of the call runs (gvisor/init.c).
 */
static json_t *init_capabilities(const struct gv_state *st)
{
    static const char *const sets[] = { "bounding", "effective", "permitted" };
    json_t *caps = json_pack("{s:[], s:[], s:[], s:[], s:[]}", "bounding", "effective",
                             "inheritable", "permitted", "ambient");
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        json_t *set = json_object_get(caps, sets[i]);
        json_array_append_new(set, json_string("CAP_SETPCAP"));
        if (!st->gateway)
            continue;
        json_array_append_new(set, json_string("CAP_SYS_RESOURCE"));
        if (st->transparent) {
            json_array_append_new(set, json_string("CAP_NET_ADMIN"));
            json_array_append_new(set, json_string("CAP_NET_BIND_SERVICE"));
        }
    }
    return caps;
}

int gvisor_build_bundle(const struct sandbox_setup *s, struct gv_state *st, struct cordon_err *err)
{
    const struct policy *p = s->p;
    char path[PATH_MAX];
    static const char *const subdirs[] = { "bundle", "bundle/rootfs", "bundle/rootfs/.cordon",
                                           "files", "state" };
    for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", st->dir, subdirs[i]);
        if (mkdir(path, 0755) < 0)
            return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", path);
    }

    struct ns_plan plan = { .caller_is_root = geteuid() == 0,
                            .confine = *s->confine,
                            .transparent = st->transparent };
    _cleanup_(json_decrefp) json_t *mounts = json_array();
    int rc = mounts_plan(p, &plan, s->host_base + 1, s->workspace, err);
    if (rc == 0 && s->ca_pem)
        rc = mounts_add_ca(&plan, s->ca_pem, err);
    if (rc == 0)
        rc = plan_to_mounts(p, &plan, st->dir, mounts, err);
    st->confine = *s->confine;
    mounts_plan_release(&plan);
    if (rc < 0 || add_cordon_files(p, st, mounts, err) < 0)
        return -1;
    /*
     * runsc mounts gVisor's own sysfs at /sys unless the spec mounts
     * something there; the namespace level has no /sys: an empty read-only
     * tmpfs stands in for it.
     */
    json_t *sys = tmpfs_mount("/sys", "mode=0555,size=4k");
    json_array_append_new(json_object_get(sys, "options"), json_string("ro"));
    json_array_append_new(mounts, sys);
    snprintf(path, sizeof path, "%s/bundle/rootfs/sys", st->dir);
    if (make_dir(path) < 0)
        return err_sys(err, CORDON_E_SETUP, "gvisor: cannot make '%s'", path);

    json_t *init = process_json(init_args(st), json_pack("[s]", "PATH=/usr/bin:/bin"), "/", st);
    json_object_set_new(init, "capabilities", init_capabilities(st));
    /* clang-format off */
    json_t *config = json_pack(
        "{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:{s:[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}]}}",
        "ociVersion", "1.0.2",
        "process", init,
        "root", "path", "rootfs", "readonly", 1,
        "hostname", SANDBOX_HOSTNAME,
        "mounts", json_incref(mounts),
        "linux", "namespaces", "type", "pid", "type", "network", "type", "ipc", "type", "uts",
        "type", "mount");
    /* clang-format on */
    snprintf(path, sizeof path, "%s/bundle/config.json", st->dir);
    return write_json(path, config, err);
}
