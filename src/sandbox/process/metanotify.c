/*
 * sandbox/process/metanotify.c: the process level's metadata boundary (see
 * metanotify.h). Runs in the keeper, which is not itself confined: each
 * path is read once from the caller, resolved by openat2 beneath a writable
 * tree, and the change made on the descriptor that opened, never through
 * the caller's path again.
 */
#include "sandbox/process/metanotify.h"

#include "common/cleanup.h"
#include "common/syscalls.h"
#include "sandbox/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/fscrypt.h>
#include <linux/fsverity.h>
#include <linux/magic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>

enum meta_op {
    META_MODE,       /* ARG: the mode */
    META_OWNER,      /* ARG, ARG + 1: the uid and the gid */
    META_UTIMBUF,    /* ARG: a struct utimbuf, or NULL (now) */
    META_TIMEVAL,    /* ARG: a struct timeval[2], or NULL */
    META_TIMESPEC,   /* ARG: a struct timespec[2], or NULL */
    META_SETXATTR,   /* ARG: the name; then the value, its size and the flags */
    META_SETXATTRAT, /* ARG: the name; then a struct xattr_args and its size */
    META_RMXATTR,    /* ARG: the name */
    META_IOCTL,      /* ARG: the command; then its argument */
};

/*
 * Where a call names its file and its change, by argument: DIR the
 * descriptor a relative PATH starts at (-1: the working directory), or
 * the file itself when PATH is -1; FLAGS its AT_* flags (-1: none).
 */
static const struct meta_call {
    int nr;
    enum meta_op op;
    signed char dir, path, flags, arg;
    bool nofollow; /* lchown, lsetxattr, lremovexattr */
} calls[] = {
    { __NR_chmod, META_MODE, -1, 0, -1, 1, false },
    { __NR_fchmod, META_MODE, 0, -1, -1, 1, false },
    { __NR_fchmodat, META_MODE, 0, 1, -1, 2, false },
    { __NR_fchmodat2, META_MODE, 0, 1, 3, 2, false },
    { __NR_chown, META_OWNER, -1, 0, -1, 1, false },
    { __NR_lchown, META_OWNER, -1, 0, -1, 1, true },
    { __NR_fchown, META_OWNER, 0, -1, -1, 1, false },
    { __NR_fchownat, META_OWNER, 0, 1, 4, 2, false },
    { __NR_utime, META_UTIMBUF, -1, 0, -1, 1, false },
    { __NR_utimes, META_TIMEVAL, -1, 0, -1, 1, false },
    { __NR_futimesat, META_TIMEVAL, 0, 1, -1, 2, false },
    { __NR_utimensat, META_TIMESPEC, 0, 1, 3, 2, false },
    { __NR_setxattr, META_SETXATTR, -1, 0, -1, 1, false },
    { __NR_lsetxattr, META_SETXATTR, -1, 0, -1, 1, true },
    { __NR_fsetxattr, META_SETXATTR, 0, -1, -1, 1, false },
    { __NR_removexattr, META_RMXATTR, -1, 0, -1, 1, false },
    { __NR_lremovexattr, META_RMXATTR, -1, 0, -1, 1, true },
    { __NR_fremovexattr, META_RMXATTR, 0, -1, -1, 1, false },
    { __NR_setxattrat, META_SETXATTRAT, 0, 1, 2, 3, false },
    { __NR_removexattrat, META_RMXATTR, 0, 1, 2, 3, false },
    { __NR_ioctl, META_IOCTL, 0, -1, -1, 1, false },
};
#define N_CALLS (sizeof calls / sizeof calls[0])

/*
 * chattr's ioctls: inode flags (append-only and immutable need a
 * capability; noatime, nodump, sync and the rest only ownership), the
 * fsxattr flags, the inode generation. Verity and encryption policies
 * make a file's contents permanent: refused wherever the file is.
 */
static const unsigned ioctls[] = {
    FS_IOC_SETFLAGS,     FS_IOC32_SETFLAGS,   FS_IOC_FSSETXATTR,    FS_IOC_SETVERSION,
    FS_IOC32_SETVERSION, EXT4_IOC_SETVERSION, FS_IOC_ENABLE_VERITY, FS_IOC_SET_ENCRYPTION_POLICY,
};
#define N_IOCTLS (sizeof ioctls / sizeof ioctls[0])

size_t metanotify_syscalls(int *nrs, size_t room)
{
    size_t n = 0;
    for (size_t i = 0; i < N_CALLS && n < room; i++)
        if (calls[i].nr != __NR_ioctl)
            nrs[n++] = calls[i].nr;
    return n;
}

size_t metanotify_ioctls(unsigned *cmds, size_t room)
{
    size_t n = N_IOCTLS < room ? N_IOCTLS : room;
    memcpy(cmds, ioctls, n * sizeof *cmds);
    return n;
}

static const struct meta_call *call_of(const struct seccomp_notif *n)
{
    for (size_t i = 0; i < N_CALLS; i++)
        if (calls[i].nr == n->data.nr)
            return &calls[i];
    return NULL;
}

bool metanotify_handles(const struct seccomp_notif *n)
{
    if (n->data.nr != __NR_ioctl)
        return call_of(n) != NULL;
    for (size_t i = 0; i < N_IOCTLS; i++)
        if ((unsigned)n->data.args[1] == ioctls[i])
            return true;
    return false;
}

/* ---- the caller: its memory and its descriptors ---- */

/* LEN bytes of the caller PID's memory at FROM into TO: 0, or EFAULT. */
static int read_mem(pid_t pid, void *to, __u64 from, size_t len)
{
    return len && notify_read(pid, to, from, len) < 0 ? EFAULT : 0;
}

/* ---- the writable trees ---- */

/* What of PATH lies beneath the tree NAME ("" for NAME itself), or NULL. */
static const char *beneath(const char *path, const char *name)
{
    size_t n = strlen(name);
    while (n > 1 && name[n - 1] == '/')
        n--;
    if (n == 1 && name[0] == '/')
        return path + 1;
    if (strncmp(path, name, n) != 0 || (path[n] != '/' && path[n] != '\0'))
        return NULL;
    path += n;
    while (*path == '/')
        path++;
    return path;
}

/* The kernel's answers that mean "not beneath the tree" are EPERM's. */
static int refusal(int e)
{
    return e == EXDEV || e == EAGAIN ? EPERM : e;
}

/* Open REL (O_PATH) beneath the writable tree ROOT, into *FD; 0 or an errno. */
static int open_in(int root, const char *rel, bool nofollow, int *fd)
{
    struct stat st;
    if (!rel[0]) {
        *fd = fcntl(root, F_DUPFD_CLOEXEC, 0);
        return *fd < 0 ? errno : 0;
    }
    if (fstat(root, &st) < 0 || !S_ISDIR(st.st_mode))
        return ENOTDIR; /* a file bind: nothing beneath it */
    struct open_how how = { .flags = O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0),
                            .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
    /* EAGAIN: a rename raced the walk, which the kernel will not vouch for; again. */
    for (int i = 0; i < 8; i++) {
        *fd = sys_openat2(root, rel, &how, sizeof how);
        if (*fd >= 0 || errno != EAGAIN)
            break;
    }
    return *fd < 0 ? errno : 0;
}

/*
 * Open the absolute PATH (O_PATH, the last component not followed when
 * NOFOLLOW) beneath the writable tree it names, into *FD; 0 or an errno.
 * A tree is named as the policy gave it, or (a second pass, for paths the
 * kernel wrote: a cwd, a descriptor's) as the kernel shows its descriptor.
 */
static int open_beneath(const struct metanotify *m, const char *path, bool nofollow, int *fd)
{
    const struct landlock_plan *ll = m->ll;
    int kept = m->names ? names_open_writable(m->names, path, nofollow, fd) : -1;
    if (kept >= 0)
        return kept; /* in the host workspace: its keeper's answer */
    int best = EPERM;
    size_t best_len = 0;
    for (int pass = 0; pass < 2 && !best_len; pass++)
        for (size_t i = 0; i < ll->n_rules; i++) {
            int root = ll->rules[i].fd;
            if (root < 0 || !(ll->rules[i].access & (LANDLOCK_RW | LANDLOCK_HOST_RW)))
                continue;
            char real[PATH_MAX], proc[64];
            const char *name = ll->rules[i].path;
            if (pass) {
                snprintf(proc, sizeof proc, "/proc/self/fd/%d", root);
                ssize_t len = readlink(proc, real, sizeof real - 1);
                if (len <= 0)
                    continue;
                real[len] = '\0';
                if (real[0] != '/' || !strcmp(real, name))
                    continue; /* the same name (or none): tried already */
                name = real;
            }
            const char *rel = beneath(path, name);
            if (!rel)
                continue;
            int e = open_in(root, rel, nofollow, fd);
            if (!e)
                return 0;
            size_t matched = (size_t)(rel - path);
            if (matched >= best_len) {
                best = refusal(e);
                best_len = matched;
            }
        }
    return best;
}

/*
 * Has the file FD (whose /proc/self/fd link reads PATH) no host path at all:
 * a pipe, a socket, an anonymous inode, or one unlinked (a memfd, an
 * O_TMPFILE, a deleted file: linked back, if ever, only into a writable tree)?
 */
static bool pathless(int fd, const struct stat *st, const char *path)
{
    struct statfs fs;
    size_t len = strlen(path);
    if (st->st_nlink == 0 && len > 10 && !strcmp(path + len - 10, " (deleted)"))
        return true;
    if (fstatfs(fd, &fs) < 0)
        return false;
    return fs.f_type == PIPEFS_MAGIC || fs.f_type == SOCKFS_MAGIC ||
        fs.f_type == ANON_INODE_FS_MAGIC;
}

/*
 * The caller's descriptor CFD, taken as ours into *FD when its file is one
 * a change may touch: pathless, or the very inode its path opens to beneath
 * a writable tree. STRICT: the call takes no O_PATH descriptor (fchmod...).
 */
static int own_file(const struct seccomp_notif *n, const struct metanotify *m, int cfd, bool strict,
                    int *fd)
{
    _cleanup_close_ int taken = notify_take_fd(n->pid, cfd);
    struct stat st, st2;
    if (taken < 0 || fstat(taken, &st) < 0)
        return EBADF;
    int fl = fcntl(taken, F_GETFL);
    if (fl < 0 || (strict && (fl & O_PATH)))
        return EBADF;
    char proc[64], path[PATH_MAX];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", taken);
    ssize_t len = readlink(proc, path, sizeof path - 1);
    path[len > 0 ? len : 0] = '\0';
    if (!pathless(taken, &st, path)) {
        if (path[0] != '/')
            return EPERM;
        int o = -1;
        int e = open_beneath(m, path, true, &o);
        if (e)
            return e == ENOENT ? EPERM : e; /* moved or deleted since: not known to be inside */
        bool same = fstat(o, &st2) == 0 && st2.st_dev == st.st_dev && st2.st_ino == st.st_ino;
        close(o);
        if (!same)
            return EPERM;
    }
    *fd = TAKE_FD(taken);
    return 0;
}

/* The file call C of N names, opened into *FD; 0 or an errno. */
static int open_target(const struct seccomp_notif *n, const struct meta_call *c,
                       const struct metanotify *m, int *fd)
{
    unsigned flags = c->flags >= 0 ? (unsigned)n->data.args[c->flags] : 0;
    long long dir = c->dir >= 0 ? (long long)(int)n->data.args[c->dir] : AT_FDCWD;
    if (flags & ~(unsigned)(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
        return EINVAL;
    if (c->path < 0)
        return own_file(n, m, (int)dir, true, fd);
    /* utimensat(fd, NULL, ...) (futimens) and futimesat(fd, NULL, ...) name the descriptor */
    if ((c->op == META_TIMESPEC || c->op == META_TIMEVAL) && c->dir >= 0 && !n->data.args[c->path])
        return dir == AT_FDCWD ? EFAULT : own_file(n, m, (int)dir, true, fd);
    char path[PATH_MAX], abs[2 * PATH_MAX];
    int e = notify_read_string(n->pid, n->data.args[c->path], path, sizeof path, ENAMETOOLONG);
    if (e)
        return e;
    if (!path[0] && !(flags & AT_EMPTY_PATH))
        return ENOENT;
    if (!path[0] && dir != AT_FDCWD)
        return own_file(n, m, (int)dir, false, fd);
    e = notify_absolute(n->pid, dir, path[0] ? path : ".", abs, sizeof abs);
    int cfd;
    if (!e && notify_magic_fd(abs, n->pid, &cfd))
        return own_file(n, m, cfd, false, fd);
    return e ? e : open_beneath(m, abs, c->nofollow || (flags & AT_SYMLINK_NOFOLLOW), fd);
}

/* The same, and whether it is a symbolic link itself (a call that does not follow, an O_PATH). */
static int target_of(const struct seccomp_notif *n, const struct meta_call *c,
                     const struct metanotify *m, int *fd, bool *link)
{
    struct stat st;
    int e = open_target(n, c, m, fd);
    *link = !e && fstat(*fd, &st) == 0 && S_ISLNK(st.st_mode);
    return e;
}

/* ---- the change, made with the caller's power ---- */

/* The times a utime-family call asks for, as utimensat()'s (*NOW: NULL, the current time). */
static int times_of(const struct seccomp_notif *n, const struct meta_call *c, struct timespec ts[2],
                    bool *now)
{
    __u64 at = n->data.args[c->arg];
    *now = !at;
    if (!at)
        return 0;
    if (c->op == META_TIMESPEC)
        return read_mem(n->pid, ts, at, 2 * sizeof ts[0]);
    if (c->op == META_UTIMBUF) {
        struct utimbuf u;
        if (read_mem(n->pid, &u, at, sizeof u))
            return EFAULT;
        ts[0] = (struct timespec){ .tv_sec = u.actime };
        ts[1] = (struct timespec){ .tv_sec = u.modtime };
        return 0;
    }
    struct timeval tv[2];
    if (read_mem(n->pid, tv, at, sizeof tv))
        return EFAULT;
    for (int i = 0; i < 2; i++) {
        if (tv[i].tv_usec < 0 || tv[i].tv_usec >= 1000000)
            return EINVAL;
        ts[i] = (struct timespec){ .tv_sec = tv[i].tv_sec, .tv_nsec = tv[i].tv_usec * 1000 };
    }
    return 0;
}

/* An extended attribute's name, value and flags, read from the caller once. */
struct xattr_change {
    char name[XATTR_NAME_MAX + 1];
    size_t size;
    int flags;
};

static unsigned char xattr_value[XATTR_SIZE_MAX]; /* the keeper serves one call at a time */

static int xattr_of(const struct seccomp_notif *n, const struct meta_call *c,
                    struct xattr_change *x)
{
    const __u64 *a = n->data.args;
    int e = notify_read_string(n->pid, a[c->arg], x->name, sizeof x->name, ERANGE);
    if (e)
        return e;
    if (!x->name[0])
        return ERANGE;
    if (c->op == META_RMXATTR)
        return 0;
    __u64 value = a[c->arg + 1];
    x->size = (size_t)a[c->arg + 2];
    x->flags = (int)a[c->arg + 3];
    if (c->op == META_SETXATTRAT) {
        struct cordon_xattr_args xa;
        if (a[c->arg + 2] < sizeof xa)
            return EINVAL;
        if (read_mem(n->pid, &xa, value, sizeof xa))
            return EFAULT;
        value = xa.value;
        x->size = xa.size;
        x->flags = (int)xa.flags;
    }
    if (x->size > XATTR_SIZE_MAX)
        return E2BIG;
    return read_mem(n->pid, xattr_value, value, x->size);
}

/* What an ioctl carries: an int of flags or generation, or a struct fsxattr. */
union ioctl_arg {
    int i;
    struct fsxattr fsx;
};

static int ioctl_of(const struct seccomp_notif *n, union ioctl_arg *arg, size_t *len)
{
    unsigned cmd = (unsigned)n->data.args[1];
    if (cmd == FS_IOC_ENABLE_VERITY || cmd == FS_IOC_SET_ENCRYPTION_POLICY)
        return EPERM;
    *len = cmd == FS_IOC_FSSETXATTR ? sizeof arg->fsx : sizeof arg->i;
    return read_mem(n->pid, arg, n->data.args[2], *len);
}

/* The change itself, on FD (ours), with ARGS read from the caller before. */
struct change {
    struct timespec ts[2];
    bool now;
    struct xattr_change x;
    union ioctl_arg io;
};

static int act(const struct seccomp_notif *n, const struct meta_call *c, int fd, bool link,
               const struct change *ch)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    const __u64 *a = n->data.args;
    int rc;
    switch (c->op) {
    case META_MODE:
        if (link)
            return EOPNOTSUPP; /* Linux has no mode on a link */
        if (a[c->arg] & 06000)
            return EPERM; /* the allowlist's rule (seccomp.c), should a policy lift it there */
        rc = chmod(proc, (mode_t)(a[c->arg] & 07777));
        break;
    case META_OWNER:
        rc = fchownat(fd, "", (uid_t)a[c->arg], (gid_t)a[c->arg + 1],
                      AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
        break;
    case META_UTIMBUF:
    case META_TIMEVAL:
    case META_TIMESPEC:
        rc = utimensat(fd, "", ch->now ? NULL : ch->ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
        break;
    case META_SETXATTR:
    case META_SETXATTRAT:
        if (link)
            return EPERM; /* user.* never sits on a link, and the rest needs capabilities */
        rc = setxattr(proc, ch->x.name, xattr_value, ch->x.size, ch->x.flags);
        break;
    case META_RMXATTR:
        if (link)
            return EPERM;
        rc = removexattr(proc, ch->x.name);
        break;
    case META_IOCTL:
        rc = ioctl(fd, (unsigned long)(unsigned)a[1], &ch->io);
        break;
    default:
        return ENOSYS;
    }
    return rc < 0 ? errno : 0;
}

int metanotify_serve(int listener, const struct seccomp_notif *n, const struct metanotify *m)
{
    const struct meta_call *c = call_of(n);
    if (!c)
        return notify_respond(listener, n->id, ENOSYS, 0);
    _cleanup_close_ int fd = -1;
    bool link = false;
    struct change ch = { .now = false };
    size_t len;
    int e = target_of(n, c, m, &fd, &link);
    if (!e && (c->op == META_UTIMBUF || c->op == META_TIMEVAL || c->op == META_TIMESPEC))
        e = times_of(n, c, ch.ts, &ch.now);
    else if (!e && (c->op == META_SETXATTR || c->op == META_SETXATTRAT || c->op == META_RMXATTR))
        e = xattr_of(n, c, &ch.x);
    else if (!e && c->op == META_IOCTL)
        e = ioctl_of(n, &ch.io, &len);
    /* What was read from the caller was its own only if it still waits in this call. */
    __u64 id = n->id;
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0)
        return 0;
    struct notify_caps caps;
    if (!e)
        e = notify_lower_caps(&caps);
    if (!e) {
        e = act(n, c, fd, link, &ch);
        notify_restore_caps(&caps);
    }
    return notify_respond(listener, n->id, e, 0);
}
