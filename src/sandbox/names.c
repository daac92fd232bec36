/*
 * sandbox/names.c: the names a run makes in a host workspace (see names.h).
 * names_keeper_init(), names_calls() and names_program() run in the
 * supervisor; the rest in a keeper (the namespace level's init, the process
 * level's keeper, the keeper of runsc's or QEMU's filter), which reads each
 * path once from the caller and acts only on what it resolved itself.
 * Nothing here allocates after the plan.
 */
#include "sandbox/names.h"

#include "common/cleanup.h"
#include "common/hostpath.h"
#include "common/landlock.h"
#include "common/syscalls.h"
#include "policy/policy.h"
#include "sandbox/notify.h"
#include "sandbox/seccomp.h"
#include "sandbox/txn.h"
#include "sandbox/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "names: unknown architecture"
#endif

enum op {
    OP_OPEN,
    OP_OPEN2,
    OP_MKDIR,
    OP_MKNOD,
    OP_SYMLINK,
    OP_LINK,
    OP_RENAME,
    OP_UNLINK,
    OP_RMDIR,
    OP_TRUNCATE
};

#define M_CHECK (1u << NAMES_CHECK)
#define M_MAKE (1u << NAMES_MAKE)
#define M_WRITE (1u << NAMES_WRITE)
#define M_ALL (M_CHECK | M_MAKE | M_WRITE)

/*
 * Where a call names what it makes or changes, by argument: DIR the
 * descriptor a relative PATH starts at (-1: the working directory); ODIR
 * and OPATH a link's or rename's source (OPATH alone: a symlink's text);
 * FLAGS and MODE (-1: none; creat's flags are FIXED).
 */
static const struct call {
    int nr;
    enum op op;
    signed char dir, path, odir, opath, flags, mode;
    unsigned fixed, modes;
} calls[] = {
#ifdef __NR_open
    { __NR_open, OP_OPEN, -1, 0, -1, -1, 1, 2, 0, M_ALL },
    { __NR_creat, OP_OPEN, -1, 0, -1, -1, -1, 1, O_CREAT | O_WRONLY | O_TRUNC, M_ALL },
    { __NR_mkdir, OP_MKDIR, -1, 0, -1, -1, -1, 1, 0, M_ALL },
    { __NR_mknod, OP_MKNOD, -1, 0, -1, -1, -1, 1, 0, M_ALL },
    { __NR_symlink, OP_SYMLINK, -1, 1, -1, 0, -1, -1, 0, M_ALL },
    { __NR_link, OP_LINK, -1, 1, -1, 0, -1, -1, 0, M_ALL },
    { __NR_rename, OP_RENAME, -1, 1, -1, 0, -1, -1, 0, M_ALL },
    { __NR_unlink, OP_UNLINK, -1, 0, -1, -1, -1, -1, 0, M_WRITE },
    { __NR_rmdir, OP_RMDIR, -1, 0, -1, -1, -1, -1, 0, M_WRITE },
    { __NR_renameat, OP_RENAME, 2, 3, 0, 1, -1, -1, 0, M_ALL },
#endif
    { __NR_openat, OP_OPEN, 0, 1, -1, -1, 2, 3, 0, M_ALL },
    { __NR_openat2, OP_OPEN2, 0, 1, -1, -1, 2, -1, 0, M_ALL },
    { __NR_mkdirat, OP_MKDIR, 0, 1, -1, -1, -1, 2, 0, M_ALL },
    { __NR_mknodat, OP_MKNOD, 0, 1, -1, -1, -1, 2, 0, M_ALL },
    { __NR_symlinkat, OP_SYMLINK, 1, 2, -1, 0, -1, -1, 0, M_ALL },
    { __NR_linkat, OP_LINK, 2, 3, 0, 1, 4, -1, 0, M_ALL },
    { __NR_renameat2, OP_RENAME, 2, 3, 0, 1, 4, -1, 0, M_ALL },
    { __NR_unlinkat, OP_UNLINK, 0, 1, -1, -1, 2, -1, 0, M_WRITE },
    { __NR_truncate, OP_TRUNCATE, -1, 0, -1, -1, -1, -1, 0, M_WRITE },
};
#define N_CALLS (sizeof calls / sizeof calls[0])

/* An open that may make a name; one that may write too, where the keeper writes. */
#define MAKES (unsigned)O_CREAT
#define WRITES ((unsigned)(O_CREAT | O_WRONLY | O_RDWR | O_TRUNC))

void names_keeper_init(struct names_keeper *k, enum names_mode mode, const struct policy *p)
{
    memset(k, 0, sizeof *k);
    k->mode = mode;
    k->p = p;
    k->root = -1;
}

int names_keeper_root(struct names_keeper *k, int root)
{
    struct stat st;
    struct statx sx;
    char proc[64];
    k->root = root;
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", root);
    ssize_t n = readlink(proc, k->real, sizeof k->real - 1);
    if (root < 0 || fstat(root, &st) < 0 || n <= 0 ||
        sys_statx(root, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0 || !(sx.stx_mask & STATX_MNT_ID))
        return -1;
    k->real[n] = '\0';
    k->dev = st.st_dev;
    k->ino = st.st_ino;
    k->mnt = sx.stx_mnt_id;
    return 0;
}

enum names_mode names_mode_for(const struct policy *p, enum names_mode mode)
{
    return p->workspace && p->workspace_mode == POLICY_WS_DIRECT ? mode : NAMES_OFF;
}

size_t names_calls(enum names_mode mode, struct names_call *out, size_t room)
{
    size_t n = 0;
    for (size_t i = 0; i < N_CALLS && n < room; i++) {
        if (!(calls[i].modes & (1u << mode)))
            continue;
        bool open = calls[i].op == OP_OPEN && calls[i].flags >= 0;
        out[n++] = (struct names_call){ .nr = calls[i].nr,
                                        .flags = open ? calls[i].flags : -1,
                                        .mask = mode == NAMES_WRITE ? WRITES : MAKES };
    }
    return n;
}

/* ---- the filter ---- */

enum { L_NOTIFY = 64, L_ALLOW, L_BLOCK };

struct asm_prog {
    struct sock_filter f[96];
    unsigned char jt[96], jf[96]; /* labels; 0: the next instruction */
    size_t at[L_BLOCK + 32];
    size_t n;
};

static void emit(struct asm_prog *a, struct sock_filter ins, unsigned char jt, unsigned char jf)
{
    if (a->n < sizeof a->f / sizeof a->f[0]) {
        a->jt[a->n] = jt;
        a->jf[a->n] = jf;
        a->f[a->n++] = ins;
    }
}

int names_program(enum names_mode mode, bool connect, struct seccomp_program *out,
                  struct cordon_err *err)
{
    struct names_call nc[32];
    size_t n = mode == NAMES_OFF ? 0 : names_calls(mode, nc, 32);
    struct asm_prog a = { .n = 0 };
    emit(
        &a,
        (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        0, 0);
    emit(&a, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0, 0), 0,
         L_ALLOW); /* other arches: the allowlist kills them */
    emit(&a,
         (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
         0, 0);
    if (connect)
        emit(&a, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, 0, 0),
             L_NOTIFY, 0);
    for (size_t i = 0; i < n; i++)
        emit(&a, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nc[i].nr, 0, 0),
             nc[i].flags < 0 ? L_NOTIFY : (unsigned char)(L_BLOCK + i), 0);
    emit(&a, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), 0, 0);
    /* An open: only with a flag that makes (or writes) */
    for (size_t i = 0; i < n; i++) {
        if (nc[i].flags < 0)
            continue;
        a.at[L_BLOCK + i] = a.n;
        emit(&a,
             (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                          offsetof(struct seccomp_data, args) +
                                              (unsigned)nc[i].flags * sizeof(__u64)),
             0, 0);
        emit(&a, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, nc[i].mask, 0, 0),
             L_NOTIFY, L_ALLOW);
    }
    a.at[L_NOTIFY] = a.n;
    emit(&a, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF), 0, 0);
    a.at[L_ALLOW] = a.n;
    emit(&a, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), 0, 0);
    if (a.n == sizeof a.f / sizeof a.f[0])
        return err_set(err, CORDON_E_INTERNAL, "names: the filter is too long");
    for (size_t i = 0; i < a.n; i++) {
        if (BPF_CLASS(a.f[i].code) != BPF_JMP)
            continue;
        size_t t = a.jt[i] ? a.at[a.jt[i]] : i + 1, f = a.jf[i] ? a.at[a.jf[i]] : i + 1;
        if (t <= i || f <= i || t - i - 1 > 255 || f - i - 1 > 255)
            return err_set(err, CORDON_E_INTERNAL, "names: jump out of range at %zu", i);
        a.f[i].jt = (unsigned char)(t - i - 1);
        a.f[i].jf = (unsigned char)(f - i - 1);
    }
    out->len = (unsigned short)a.n;
    out->filter = malloc(a.n * sizeof a.f[0]);
    if (!out->filter)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    memcpy(out->filter, a.f, a.n * sizeof a.f[0]);
    return 0;
}

/* ---- what the caller names ---- */

static const struct call *call_of(const struct seccomp_notif *n)
{
    for (size_t i = 0; i < N_CALLS; i++)
        if (calls[i].nr == n->data.nr)
            return &calls[i];
    return NULL;
}

bool names_handles(const struct names_keeper *k, const struct seccomp_notif *n)
{
    const struct call *c = k->mode == NAMES_OFF ? NULL : call_of(n);
    return c && (c->modes & (1u << k->mode));
}

/* What the keeper read of one call, once. */
struct req {
    const struct call *c;
    pid_t tid;
    pid_t proc; /* the same, as the keeper's /proc numbers it */
    long long dir, odir;
    int flags;
    mode_t mode;
    uint64_t resolve; /* openat2's */
    off_t length;     /* truncate's */
    char path[PATH_MAX], opath[PATH_MAX];
};

/*
 * Thread TID (numbered in the keeper's PID namespace) as the keeper's /proc
 * numbers it: an engine's keeper (microvm's, in the shim's namespace) reads
 * the host's /proc. The pidfd's fdinfo tells; TID itself when it cannot.
 */
static pid_t proc_pid(pid_t tid)
{
    int pidfd = sys_pidfd_open(tid, O_EXCL); /* PIDFD_THREAD */
    if (pidfd < 0)
        pidfd = sys_pidfd_open(tid, 0);
    if (pidfd < 0)
        return tid;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
    ssize_t n = read_small_at(AT_FDCWD, path, buf, sizeof buf);
    close(pidfd);
    if (n <= 0)
        return tid;
    const char *at = strstr(buf, "\nPid:");
    long pid = at ? strtol(at + 5, NULL, 10) : 0;
    return pid > 0 ? (pid_t)pid : tid;
}

/* The directory a relative path of thread TID (as /proc numbers it) starts at: DIR, or its
 * working directory. */
static int caller_dir(pid_t tid, long long dir)
{
    char proc[64];
    if ((int)dir == AT_FDCWD)
        snprintf(proc, sizeof proc, "/proc/%d/cwd", (int)tid);
    else
        snprintf(proc, sizeof proc, "/proc/%d/fd/%d", (int)tid, (int)dir);
    int fd = open(proc, O_PATH | O_CLOEXEC);
    if (fd < 0)
        errno = (int)dir == AT_FDCWD ? ENOENT : EBADF;
    return fd;
}

/*
 * PATH split into its directory (into DIR) and last component (into NAME):
 * 0, ENOENT for an empty path, or -1 when the last component makes no name
 * ("/", ".", ".."): the kernel answers those itself.
 */
static int split(const char *path, char *dir, size_t size, char name[NAME_MAX + 1])
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    if (!len)
        return ENOENT;
    size_t start = len;
    while (start > 0 && path[start - 1] != '/')
        start--;
    size_t nlen = len - start;
    if (!nlen || (nlen == 1 && path[start] == '.') ||
        (nlen == 2 && path[start] == '.' && path[start + 1] == '.'))
        return -1;
    if (nlen > NAME_MAX)
        return ENAMETOOLONG;
    memcpy(name, path + start, nlen);
    name[nlen] = '\0';
    if (start == 0)
        snprintf(dir, size, ".");
    else if ((size_t)snprintf(dir, size, "%.*s", (int)start, path) >= size)
        return ENAMETOOLONG;
    return 0;
}

/*
 * The directory DIR (a path of R's caller, relative to its descriptor
 * DIRARG), opened O_PATH as the caller would resolve it (RESOLVE: openat2's
 * own): 0, ELOOP when it passes a magic link (which would resolve in the
 * keeper, not the caller), or the errno.
 */
static int open_dir(const struct req *r, long long dirarg, const char *dir, uint64_t resolve,
                    int *out)
{
    char proc[64], own[PATH_MAX];
    pid_t tid = r->tid;
    const char *rel = dir;
    int base;
    /* /proc/self names the keeper where the keeper reads it: the caller's, spelled out. */
    if (!strncmp(dir, "/proc/self", 10) && (dir[10] == '/' || !dir[10])) {
        if ((size_t)snprintf(own, sizeof own, "/proc/%d%s", (int)tid, dir + 10) >= sizeof own)
            return ENAMETOOLONG;
        dir = rel = own;
    } else if (!strncmp(dir, "/proc/thread-self", 17) && (dir[17] == '/' || !dir[17])) {
        if ((size_t)snprintf(own, sizeof own, "/proc/%d/task/%d%s", (int)tid, (int)tid, dir + 17) >=
            sizeof own)
            return ENAMETOOLONG;
        dir = rel = own;
    }
    if (dir[0] == '/' && !(resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT))) {
        /* The caller's own root: a keeper outside its mount namespace (runsc's) too. */
        snprintf(proc, sizeof proc, "/proc/%d/root", (int)r->proc);
        base = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
        rel = dir + strspn(dir, "/");
        rel = *rel ? rel : ".";
        resolve |= RESOLVE_IN_ROOT;
    } else {
        base = caller_dir(r->proc, dirarg);
    }
    if (base < 0)
        return errno;
    struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                            .resolve =
                                (resolve & ~(uint64_t)RESOLVE_CACHED) | RESOLVE_NO_MAGICLINKS };
    for (int i = 0; i < 8; i++) {
        *out = sys_openat2(base, rel, &how, sizeof how);
        if (*out >= 0 || errno != EAGAIN)
            break; /* EAGAIN: a rename raced the walk; again */
    }
    int e = *out < 0 ? errno : 0;
    close(base);
    return e;
}

enum where { ELSEWHERE, INSIDE, ROOT };

/*
 * Does the directory FD lie beneath the workspace's root, its ".." chain
 * reaching it? By inode: an engine's keeper sees another mount namespace.
 */
static bool up_to_root(const struct names_keeper *k, int fd)
{
    int at = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    for (int i = 0; at >= 0 && i < 64; i++) {
        int up = openat(at, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct stat st, here;
        bool top = up < 0 || fstat(up, &st) < 0 || fstat(at, &here) < 0 ||
            (st.st_dev == here.st_dev && st.st_ino == here.st_ino);
        close(at);
        at = up;
        if (!top && st.st_dev == k->dev && st.st_ino == k->ino) {
            close(at);
            return true;
        }
        if (top)
            break;
    }
    if (at >= 0)
        close(at);
    return false;
}

/*
 * NAMES_WRITE: is FD (a file or directory) beneath the workspace's root?
 * The name the kernel shows for it, checked: the same inode, reached from
 * the root without a link.
 */
static bool beneath_root(const struct names_keeper *k, int fd)
{
    char proc[64], path[PATH_MAX];
    struct stat st, st2;
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, path, sizeof path - 1);
    size_t rl = strlen(k->real);
    if (n <= 0 || (size_t)n <= rl || strncmp(path, k->real, rl) || path[rl] != '/' ||
        fstat(fd, &st) < 0)
        return false;
    path[n] = '\0';
    struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                            .resolve =
                                RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
    _cleanup_close_ int again = sys_openat2(k->root, path + rl + 1, &how, sizeof how);
    return again >= 0 && fstat(again, &st2) == 0 && st2.st_dev == st.st_dev &&
        st2.st_ino == st.st_ino;
}

/* Is the directory FD the workspace's root, in it, or elsewhere? */
static enum where where_is(const struct names_keeper *k, int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return ELSEWHERE;
    bool root = st.st_dev == k->dev && st.st_ino == k->ino;
    if (k->mode == NAMES_CHECK)
        return root ? ROOT : up_to_root(k, fd) ? INSIDE : ELSEWHERE;
    if (k->mode == NAMES_MAKE) {
        /* One mount is the workspace's: a cover is another, read-only. */
        struct statx sx;
        if (sys_statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0 || sx.stx_mnt_id != k->mnt)
            return ELSEWHERE;
        return root ? ROOT : INSIDE;
    }
    return root ? ROOT : beneath_root(k, fd) ? INSIDE : ELSEWHERE;
}

static bool refused(const struct names_keeper *k, const char *name);

/*
 * Is NAME refused where W says it goes: a protected name (.git aside) at the
 * workspace's root; a name a commit makes for itself (txn.h) anywhere in it,
 * or a journal of the run's making could be recovered later.
 */
static bool refused_at(const struct names_keeper *k, const char *name, enum where w)
{
    if (w != ELSEWHERE && !strncmp(name, TXN_RESERVED, strlen(TXN_RESERVED)))
        return true;
    return w == ROOT && refused(k, name);
}

/* Is NAME refused at the workspace's root (a protected name, .git aside)? */
static bool refused(const struct names_keeper *k, const char *name)
{
    for (size_t i = 0; i < k->p->n_protected; i++)
        if (!policy_protected_checked(k->p->protected[i]) &&
            policy_protected_match(k->p->protected[i], name))
            return true;
    return false;
}

bool names_refused_path(const struct policy *p, const char *path)
{
    const struct names_keeper k = { .p = p };
    char first[NAME_MAX + 1];
    size_t n = strcspn(path, "/");
    snprintf(first, sizeof first, "%.*s", (int)(n > NAME_MAX ? NAME_MAX : n), path);
    if (refused(&k, first))
        return true;
    for (const char *c = path;; c++) {
        if (!strncmp(c, TXN_RESERVED, strlen(TXN_RESERVED)))
            return true;
        if (!(c = strchr(c, '/')))
            return false;
    }
}

static int by_inode(const void *a, const void *b)
{
    const struct workspace_mode *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/*
 * NAMES_WRITE: is FD (in the workspace) a protected entry, or in one? By
 * inode (a hard link elsewhere is the same file) and by path.
 */
static bool guarded(const struct names_keeper *k, int fd)
{
    const struct workspace_guard *g = k->g;
    struct stat st;
    if (!g || fstat(fd, &st) < 0)
        return g != NULL;
    struct workspace_mode key = { .dev = st.st_dev, .ino = st.st_ino };
    if (g->n_modes && bsearch(&key, g->modes, g->n_modes, sizeof key, by_inode))
        return true;
    char proc[64], path[PATH_MAX];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, path, sizeof path - 1);
    size_t rl = strlen(k->real);
    if (n <= 0)
        return true;
    path[n] = '\0';
    if ((size_t)n <= rl || path[rl] != '/')
        return false; /* the root itself */
    const char *rel = path + rl + 1;
    for (size_t i = 0; i < g->n_entries; i++) {
        size_t el = strlen(g->entries[i].rel);
        if (!strncmp(rel, g->entries[i].rel, el) && (rel[el] == '\0' || rel[el] == '/'))
            return true;
    }
    return false;
}

/*
 * Does the directory FD hold a protected entry (the pre-run scan's) beneath
 * it? Renamed, it would take the entry along and free its place for one of
 * the run's making: refused at every level. By inode: an engine's keeper
 * sees another mount namespace's paths.
 */
static bool holds_guarded(const struct names_keeper *k, int fd)
{
    const struct workspace_guard *g = k->g;
    struct stat st;
    if (!g || !g->n_holders || fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
        return false;
    struct workspace_mode key = { .dev = st.st_dev, .ino = st.st_ino };
    return bsearch(&key, g->holders, g->n_holders, sizeof key, by_inode) != NULL;
}

/* NAMES_WRITE: may FD (a source to link or rename) change? In the workspace and unguarded,
 * or beneath another writable tree. */
static bool changeable(const struct names_keeper *k, int fd, enum where w)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode) && st.st_nlink == 0)
        return true; /* unlinked (an O_TMPFILE): the caller's alone */
    if (w != ELSEWHERE)
        return !guarded(k, fd);
    char proc[64], path[PATH_MAX], tree[PATH_MAX];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, path, sizeof path - 1);
    if (n <= 0 || !k->ll)
        return false;
    path[n] = '\0';
    for (size_t i = 0; i < k->ll->n_rules; i++) {
        if (k->ll->rules[i].fd < 0 || !(k->ll->rules[i].access & (LANDLOCK_RW | LANDLOCK_HOST_RW)))
            continue;
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", k->ll->rules[i].fd);
        ssize_t t = readlink(proc, tree, sizeof tree - 1);
        if (t <= 0 || (size_t)t >= (size_t)n || strncmp(path, tree, (size_t)t) || path[t] != '/')
            continue;
        return true;
    }
    return false;
}

/* ---- acting for the caller ---- */

static bool still_waiting(int listener, __u64 id)
{
    return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* Answer N with FD (ours, taken) as the call's new descriptor. */
static int give(int listener, const struct seccomp_notif *n, int fd, bool cloexec)
{
    struct seccomp_notif_addfd add = { .id = n->id,
                                       .flags = SECCOMP_ADDFD_FLAG_SEND,
                                       .srcfd = (__u32)fd,
                                       .newfd_flags = cloexec ? O_CLOEXEC : 0 };
    int rc = ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
    int e = errno;
    close(fd);
    if (rc >= 0 || e == ENOENT)
        return 0; /* answered, or the caller is gone */
    return notify_respond(listener, n->id, e, 0);
}

/* The entry NAME in DIR, O_PATH: the link itself unless FOLLOW. */
static int entry(int dir, const char *name, bool follow)
{
    struct open_how how = { .flags = O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW),
                            .resolve = RESOLVE_NO_MAGICLINKS };
    return sys_openat2(dir, name, &how, sizeof how);
}

/* NAMES_WRITE: open the existing file E (O_PATH, in the workspace) as R asks. */
static int reopen(const struct names_keeper *k, int e, const struct req *r, int *out)
{
    struct stat st;
    if (fstat(e, &st) < 0)
        return errno;
    if (guarded(k, e))
        return EACCES;
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return EACCES; /* a FIFO would block the keeper; nothing else is written here */
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", e);
    int flags = (r->flags & ~(O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC)) | O_CLOEXEC | O_NOCTTY;
    *out = open(proc, flags);
    return *out < 0 ? errno : 0;
}

/* An open of NAME in DIR (W: where DIR is): made, or opened for writing, by the keeper. */
static int do_open(const struct names_keeper *k, const struct req *r, int dir, const char *name,
                   enum where w, int *out)
{
    struct stat st;
    bool follow = !(r->flags & O_NOFOLLOW) && !(r->resolve & RESOLVE_NO_SYMLINKS);
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (k->mode == NAMES_MAKE)
            return -1; /* no name made: Landlock judges the open */
        if ((r->flags & O_CREAT) && (r->flags & O_EXCL))
            return EEXIST;
        if (S_ISLNK(st.st_mode) && !follow)
            return ELOOP;
        _cleanup_close_ int e = entry(dir, name, follow);
        if (e < 0)
            return errno == ENOENT && (r->flags & O_CREAT) ? -1 : errno; /* made through a link */
        if (S_ISLNK(st.st_mode) && !beneath_root(k, e))
            return -1; /* a link out of the workspace: Landlock judges where it leads */
        return reopen(k, e, r, out);
    }
    if (errno != ENOENT)
        return errno;
    if (!(r->flags & O_CREAT))
        return ENOENT;
    if (refused_at(k, name, w))
        return EACCES;
    if (k->mode == NAMES_WRITE && guarded(k, dir))
        return EACCES;
    int flags = (r->flags & ~O_CLOEXEC) | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
    *out = openat(dir, name, flags, r->mode);
    if (*out < 0 && (errno == EEXIST || errno == ELOOP))
        return k->mode == NAMES_MAKE ? -1 : EAGAIN; /* made meanwhile */
    return *out < 0 ? errno : 0;
}

/* A link's or rename's source: R's ODIR and OPATH, opened; its directory and name too. */
struct source {
    int file; /* O_PATH of the entry (the link itself unless followed) */
    int dir;  /* its directory, or -1 (a descriptor linked by itself) */
    char name[NAME_MAX + 1];
    enum where w;
};

static int open_source(const struct names_keeper *k, const struct req *r, bool follow,
                       struct source *s)
{
    s->file = s->dir = -1;
    s->w = ELSEWHERE;
    char abs[2 * PATH_MAX];
    int fdn;
    bool empty = !r->opath[0] && r->c->op == OP_LINK && (r->flags & AT_EMPTY_PATH);
    if (empty ||
        (follow && r->c->op == OP_LINK &&
         notify_absolute(r->proc, r->odir, r->opath, abs, sizeof abs) == 0 &&
         notify_magic_fd(abs, r->proc, &fdn))) {
        /* A descriptor of the caller's (an O_TMPFILE's): linked by itself. */
        s->file = caller_dir(r->proc, empty ? r->odir : fdn);
        if (s->file < 0)
            return EBADF;
        s->w = k->mode == NAMES_WRITE && beneath_root(k, s->file) ? INSIDE : ELSEWHERE;
        return 0;
    }
    char dir[PATH_MAX];
    int e = split(r->opath, dir, sizeof dir, s->name);
    if (e)
        return e < 0 ? EBUSY : e;
    if ((e = open_dir(r, r->odir, dir, 0, &s->dir)))
        return e;
    s->w = where_is(k, s->dir);
    s->file = entry(s->dir, s->name, follow);
    return s->file < 0 ? errno : 0;
}

static void close_source(struct source *s)
{
    if (s->file >= 0)
        close(s->file);
    if (s->dir >= 0)
        close(s->dir);
}

/* A link, or a rename with its FLAGS, of R's source to NAME in DIR. */
static int do_link_or_rename(const struct names_keeper *k, const struct req *r, int dir,
                             const char *name, enum where w)
{
    bool link = r->c->op == OP_LINK, follow = link && (r->flags & AT_SYMLINK_FOLLOW);
    struct source s;
    int e = open_source(k, r, follow, &s);
    if (!e && w == ELSEWHERE && (k->mode == NAMES_MAKE || s.w == ELSEWHERE))
        e = -1; /* out of the workspace: Landlock judges */
    if (!e && refused_at(k, name, w))
        e = EACCES;
    if (!e && !link && (r->flags & RENAME_EXCHANGE) && refused_at(k, s.name, s.w))
        e = EACCES;
    if (!e && !link && s.file >= 0 && holds_guarded(k, s.file))
        e = EACCES;
    if (!e && k->mode == NAMES_WRITE) {
        _cleanup_close_ int there = entry(dir, name, false);
        if (!changeable(k, s.file, s.w) || (s.dir >= 0 && !changeable(k, s.dir, s.w)) ||
            (w == ELSEWHERE ? !changeable(k, dir, w) : guarded(k, dir)) ||
            (there >= 0 && guarded(k, there)))
            e = EACCES;
    }
    if (!e && link) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", s.file);
        e = linkat(AT_FDCWD, proc, dir, name, AT_SYMLINK_FOLLOW) < 0 ? errno : 0;
    } else if (!e) {
        e = renameat2(s.dir, s.name, dir, name, (unsigned)r->flags) < 0 ? errno : 0;
    }
    close_source(&s);
    return e;
}

/* NAMES_WRITE: a removal or truncation of NAME in DIR. */
static int do_remove_or_truncate(const struct names_keeper *k, const struct req *r, int dir,
                                 const char *name, enum where w)
{
    if (w == ELSEWHERE)
        return -1;
    bool trunc = r->c->op == OP_TRUNCATE;
    _cleanup_close_ int e = entry(dir, name, trunc);
    if (e < 0)
        return errno;
    if (trunc) {
        if (!beneath_root(k, e))
            return -1; /* through a link out: Landlock judges */
        struct req wr = *r;
        wr.flags = O_WRONLY;
        int fd = -1, rc = reopen(k, e, &wr, &fd);
        if (rc)
            return rc;
        rc = ftruncate(fd, r->length) < 0 ? errno : 0;
        close(fd);
        return rc;
    }
    if (guarded(k, e))
        return EACCES;
    int flags = r->c->op == OP_RMDIR ? AT_REMOVEDIR : (r->flags & AT_REMOVEDIR);
    return unlinkat(dir, name, flags) < 0 ? errno : 0;
}

/* The call R names, read from the caller once: 0 or the errno it gets. */
static int read_req(const struct seccomp_notif *n, const struct call *c, struct req *r)
{
    const __u64 *a = n->data.args;
    *r = (struct req){ .c = c,
                       .tid = (pid_t)n->pid,
                       .dir = c->dir >= 0 ? (long long)(int)a[c->dir] : AT_FDCWD,
                       .odir = c->odir >= 0 ? (long long)(int)a[c->odir] : AT_FDCWD,
                       .flags = c->flags >= 0 ? (int)a[c->flags] : (int)c->fixed,
                       .mode = c->mode >= 0 ? (mode_t)a[c->mode] : 0 };
    if (c->op == OP_TRUNCATE)
        r->length = (off_t)a[1];
    if (c->op == OP_OPEN2) {
        struct open_how how = { 0 };
        if (a[3] < sizeof how)
            return EINVAL;
        if (notify_read(r->tid, &how, a[2], sizeof how) < 0)
            return EFAULT;
        r->flags = (int)how.flags;
        r->mode = (mode_t)how.mode;
        r->resolve = how.resolve;
    }
    int e = notify_read_string(r->tid, a[c->path], r->path, sizeof r->path, ENAMETOOLONG);
    if (!e && c->opath >= 0)
        e = notify_read_string(r->tid, a[c->opath], r->opath, sizeof r->opath, ENAMETOOLONG);
    return e;
}

/* Is R a call no keeper needs to see (an open that makes and writes nothing here)? */
static bool harmless(const struct names_keeper *k, const struct req *r)
{
    bool open = r->c->op == OP_OPEN || r->c->op == OP_OPEN2;
    if (open && (r->flags & O_PATH))
        return true;
    if (open && (r->flags & O_TMPFILE) == O_TMPFILE)
        return k->mode != NAMES_WRITE; /* no name: a link gives it one, and is seen */
    if (open)
        return !(r->flags & (k->mode == NAMES_WRITE ? (int)WRITES : (int)MAKES));
    if (r->c->op == OP_MKNOD)
        return (r->mode & S_IFMT) && (r->mode & S_IFMT) != S_IFREG; /* Landlock: no FIFO here */
    return false;
}

/* Decide R with its directory DIR, in the mode's way: -1 lets the kernel run it. */
static int decide(const struct names_keeper *k, const struct req *r, int dir, const char *name,
                  int *fd)
{
    enum where w = where_is(k, dir);
    /* A name that is there is made by none: the kernel answers (EEXIST, or the open). */
    struct stat st;
    bool makes = r->c->op != OP_LINK && r->c->op != OP_RENAME && r->c->op != OP_UNLINK &&
        r->c->op != OP_RMDIR && r->c->op != OP_TRUNCATE;
    bool there = makes && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (k->mode == NAMES_CHECK) {
        if (there)
            return -1;
        if (refused_at(k, name, w))
            return EACCES;
        if (r->c->op == OP_RENAME) {
            struct source s;
            int e = open_source(k, r, false, &s);
            bool no = !e &&
                (((r->flags & RENAME_EXCHANGE) && refused_at(k, s.name, s.w)) ||
                 holds_guarded(k, s.file));
            close_source(&s);
            return no ? EACCES : -1;
        }
        return -1;
    }
    bool moves = r->c->op == OP_LINK || r->c->op == OP_RENAME;
    if (w == ELSEWHERE && !moves)
        return -1; /* not in the workspace: Landlock judges */
    mode_t mask = notify_umask(r->proc);
    mode_t old = umask(mask);
    int e;
    switch (r->c->op) {
    case OP_OPEN:
    case OP_OPEN2:
        e = do_open(k, r, dir, name, w, fd);
        break;
    case OP_MKDIR:
    case OP_MKNOD:
    case OP_SYMLINK:
        if (there)
            e = EEXIST;
        else if (refused_at(k, name, w))
            e = EACCES;
        else if (k->mode == NAMES_WRITE && guarded(k, dir))
            e = EACCES;
        else if (r->c->op == OP_MKDIR)
            e = mkdirat(dir, name, r->mode & 07777) < 0 ? errno : 0;
        else if (r->c->op == OP_MKNOD)
            e = mknodat(dir, name, S_IFREG | (r->mode & 07777), 0) < 0 ? errno : 0;
        else
            e = symlinkat(r->opath, dir, name) < 0 ? errno : 0;
        break;
    case OP_LINK:
    case OP_RENAME:
        e = do_link_or_rename(k, r, dir, name, w);
        break;
    default:
        e = do_remove_or_truncate(k, r, dir, name, w);
    }
    umask(old);
    return e;
}

int names_serve(int listener, const struct seccomp_notif *n, const struct names_keeper *k)
{
    const struct call *c = call_of(n);
    struct req r;
    if (!c || k->root < 0)
        return notify_respond(listener, n->id, ENOSYS, 0);
    int e = read_req(n, c, &r);
    if (!e && harmless(k, &r))
        return notify_continue(listener, n->id);
    /* An engine's keeper may number tasks apart from the /proc it reads. */
    r.proc = k->mode == NAMES_CHECK ? proc_pid(r.tid) : r.tid;
    /*
     * As the caller: a root keeper that acts lowers its capabilities, even to
     * resolve the path. One that only checks (cordon's engine as the caller)
     * acts on nothing.
     */
    struct notify_caps caps = { .lowered = false };
    bool check = k->mode == NAMES_CHECK;
    if (!e && !check)
        e = notify_lower_caps(&caps);
    if (e)
        return notify_respond(listener, n->id, e, 0);
    char dir[PATH_MAX], name[NAME_MAX + 1] = "";
    _cleanup_close_ int parent = -1;
    /* An O_TMPFILE names its directory: the file is made there, unnamed. */
    bool tmpfile = (r.flags & O_TMPFILE) == O_TMPFILE && (c->op == OP_OPEN || c->op == OP_OPEN2);
    if (tmpfile)
        snprintf(dir, sizeof dir, "%s", r.path);
    e = tmpfile ? 0 : split(r.path, dir, sizeof dir, name);
    if (!e)
        e = open_dir(&r, r.dir, dir, c->op == OP_OPEN2 ? r.resolve : 0, &parent);
    int fd = -1;
    if (e == 0 && !still_waiting(listener, n->id))
        e = -2; /* what was read was the caller's only if it still waits in this call */
    else if (e == 0 && tmpfile)
        e = where_is(k, parent) == ELSEWHERE || k->mode != NAMES_WRITE                   ? -1
            : guarded(k, parent)                                                         ? EACCES
            : (fd = openat(parent, ".", (r.flags & ~O_CLOEXEC) | O_CLOEXEC, r.mode)) < 0 ? errno
                                                                                         : 0;
    else if (e == 0)
        e = decide(k, &r, parent, name, &fd);
    notify_restore_caps(&caps);
    /*
     * -1: the kernel runs it: elsewhere, a name made by none, or a path
     * through a magic link (which would resolve in the keeper, not the
     * caller; ELOOP). Where it runs, Landlock holds the caller whatever it
     * changes meanwhile.
     */
    if (e == -2)
        return 0;
    /* An engine's call the keeper could not follow (its own state, another root): the kernel's,
     * unless it names a protected name. */
    if (check && e > 0 && e != EACCES && !tmpfile)
        e = refused_at(k, name, ROOT) ? EACCES : -1;
    if (e == -1 || e == ELOOP)
        return notify_continue(listener, n->id);
    if (e)
        return notify_respond(listener, n->id, e, 0);
    if (fd >= 0)
        return give(listener, n, fd, r.flags & O_CLOEXEC);
    return notify_respond(listener, n->id, 0, 0);
}

int names_open_writable(const struct names_keeper *k, const char *path, bool nofollow, int *fd)
{
    size_t rl = strlen(k->real);
    if (k->mode != NAMES_WRITE || strncmp(path, k->real, rl) ||
        (path[rl] != '/' && path[rl] != '\0'))
        return -1;
    const char *rel = path + rl;
    rel += strspn(rel, "/");
    struct open_how how = { .flags = O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0),
                            .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
    for (int i = 0; i < 8; i++) {
        *fd = sys_openat2(k->root, *rel ? rel : ".", &how, sizeof how);
        if (*fd >= 0 || errno != EAGAIN)
            break;
    }
    if (*fd < 0)
        return errno == EXDEV ? EPERM : errno;
    if (guarded(k, *fd)) {
        close(*fd);
        *fd = -1;
        return EPERM;
    }
    return 0;
}
