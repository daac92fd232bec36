/*
 * sandbox/mounts.c: the sandbox's filesystem. mounts_plan() runs in the
 * supervisor and decides every mount; mounts_enter_root() runs in the child,
 * in its fresh user and mount namespaces, and builds a root on a tmpfs from
 * read-only binds, then pivots into it. The host's tree is detached at the
 * end: nothing the plan does not name is reachable.
 */
#include "sandbox/boundary.h"
#include "sandbox/plan.h"

#include "common/cleanup.h"
#include "common/hostpath.h"
#include "common/syscalls.h"
#include "policy/policy.h"
#include "sandbox/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Where the build happens, inside the child's private mount namespace. */
#define BASE "/tmp"
#define NEWROOT "/newroot"
#define OLDROOT "/oldroot"

static int add_step(struct ns_plan *plan, size_t *cap, struct mount_step step,
                    struct cordon_err *err)
{
    if (plan->n_steps == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        struct mount_step *n = realloc(plan->steps, ncap * sizeof *n);
        if (!n)
            return err_set(err, CORDON_E_INTERNAL, "out of memory");
        plan->steps = n;
        *cap = ncap;
    }
    plan->steps[plan->n_steps++] = step;
    return 0;
}

static int add(struct ns_plan *plan, size_t *cap, enum mount_kind kind, const char *dest,
               const char *source, const char *data, bool writable, bool optional,
               struct cordon_err *err)
{
    struct mount_step s = {
        .kind = kind,
        .dest = strdup(dest),
        .source = source ? strdup(source) : NULL,
        .data = data ? strdup(data) : NULL,
        .tree_fd = -1,
        .writable = writable,
        .optional = optional,
        .follow_symlinks = true, /* cordon's own host paths; policy binds override */
    };
    if (!s.dest || (source && !s.source) || (data && !s.data)) {
        free(s.dest);
        free(s.source);
        free(s.data);
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    }
    if (add_step(plan, cap, s, err) < 0) {
        free(s.dest);
        free(s.source);
        free(s.data);
        return -1;
    }
    return 0;
}

/*
 * A user namespace mapping the caller's uid/gid to the sandbox's host ids,
 * for idmapped binds: files the caller owns appear owned by the sandbox
 * user, and what the sandbox writes lands on disk as the caller's.
 */
static int idmap_userns(uid_t caller_uid, gid_t caller_gid, uid_t host_uid, uid_t count,
                        struct cordon_err *err)
{
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create pipe");
    _cleanup_close_ int rd = ready[0];
    _cleanup_close_ int wr = ready[1];

    _cleanup_kill_ pid_t pid = sys_clone_ns(CLONE_NEWUSER);
    if (pid < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create idmap user namespace");
    if (pid == 0) {
        char c;
        close(wr);
        (void)!read(rd, &c, 1); /* park until the parent has the ns fd */
        _exit(0);
    }

    char path[64], map[64];
    static const char *const files[] = { "uid_map", "setgroups", "gid_map" };
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "/proc/%d/%s", pid, files[i]);
        if (i == 0)
            snprintf(map, sizeof map, "%u %u %u\n", caller_uid, host_uid, count);
        else if (i == 1)
            snprintf(map, sizeof map, "deny\n");
        else
            snprintf(map, sizeof map, "%u %u %u\n", caller_gid, host_uid, count);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, map, strlen(map)) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot write '%s'", path);
    }
    snprintf(path, sizeof path, "/proc/%d/ns/user", pid);
    int ns = open(path, O_RDONLY | O_CLOEXEC);
    if (ns < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open '%s'", path);
    return ns;
}

/*
 * A detached copy of SOURCE, idmapped through USERNS. The copy is taken of
 * the descriptor opened without following links (unless FOLLOW), so what
 * gets bound is what was checked.
 */
static int idmapped_tree(const char *source, bool follow, int userns, struct cordon_err *err)
{
    _cleanup_close_ int src = hostpath_open(AT_FDCWD, source, O_PATH, 0, follow, err);
    if (src < 0)
        return -1;
    _cleanup_close_ int tree =
        open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (tree < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot clone mount of '%s'", source);
    struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns };
    if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
        return err_sys(err, CORDON_E_SETUP,
                       "cannot idmap '%s' for the sandbox user (its filesystem may not "
                       "support idmapped mounts)",
                       source);
    return TAKE_FD(tree);
}

int mounts_idmapped_tree(const char *source, bool follow, uid_t from, uid_t count,
                         struct cordon_err *err)
{
    _cleanup_close_ int userns = idmap_userns(0, 0, from, count, err);
    return userns < 0 ? -1 : idmapped_tree(source, follow, userns, err);
}

int mounts_cloned_tree(const char *source, bool follow, struct cordon_err *err)
{
    _cleanup_close_ int src = hostpath_open(AT_FDCWD, source, O_PATH, 0, follow, err);
    if (src < 0)
        return -1;
    int tree =
        open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (tree < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot clone mount of '%s'", source);
    return tree;
}

static int plan_landlock(const struct policy *p, struct ns_plan *plan, struct cordon_err *err)
{
    struct landlock_plan *ll = &plan->confine.landlock;
    landlock_plan_init(ll, landlock_abi());
    if (!ll->abi && names_mode_for(p, NAMES_MAKE) == NAMES_MAKE)
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "a host workspace written directly needs Landlock at the namespace level "
                       "(this kernel has none): it keeps the run from making a protected name "
                       "there; use --workspace-mode overlay");
    if (!ll->abi)
        return 0;
    /* /proc gets what / gets: Landlock refuses writes into it as its mount does. */
    TRY(landlock_plan_add(ll, "/", LANDLOCK_RO, false, err));
    TRY(landlock_plan_add(ll, "/dev", LANDLOCK_DEV, false, err));
    TRY(landlock_plan_add(ll, "/tmp", LANDLOCK_RW, false, err));
    TRY(landlock_plan_add(ll, "/dev/shm", LANDLOCK_RW, false, err));
    /*
     * A host tree gets no FIFO, socket or device node: the scratch one hands
     * nothing back. One the run writes directly gets no name made either:
     * init makes each, refusing a protected one (names.h).
     */
    bool kept = names_mode_for(p, NAMES_MAKE) == NAMES_MAKE;
    TRY(landlock_plan_add(ll, "/workspace",
                          kept               ? LANDLOCK_HOST_KEPT
                              : p->workspace ? LANDLOCK_HOST_RW
                                             : LANDLOCK_RW,
                          false, err));
    for (size_t i = 0; i < p->n_binds; i++)
        if (p->binds[i].writable)
            TRY(landlock_plan_add(ll, p->binds[i].dest, LANDLOCK_HOST_RW, false, err));
    return 0;
}

/*
 * PATH as the host has it, if it has it: a link is recreated (merged-/usr
 * links, localtime -> /usr/share/zoneinfo/...) so it resolves inside the
 * sandbox; anything else is bound read-only.
 */
static int add_host_entry(struct ns_plan *plan, size_t *cap, const char *path,
                          struct cordon_err *err)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return 0;
    if (!S_ISLNK(st.st_mode))
        return add(plan, cap, MOUNT_BIND, path, path, NULL, false, true, err);
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot read link '%s'", path);
    target[n] = '\0';
    return add(plan, cap, MOUNT_SYMLINK, path, target, NULL, false, false, err);
}

/* Where host path PATH appears inside the sandbox through a bind of SOURCE at DEST. */
static bool seen_through(const char *path, const char *source, const char *dest, char *out,
                         size_t size)
{
    size_t n = strlen(source);
    if (strcmp(source, "/") == 0)
        n = 0;
    else if (strncmp(path, source, n) != 0 || (path[n] != '/' && path[n] != '\0'))
        return false;
    return snprintf(out, size, "%s%s", dest, path + n) < (int)size;
}

void sandbox_hidden_files(const struct policy *p, const char *out[SANDBOX_N_HIDDEN_FILES])
{
    out[0] = p->audit.file;
    out[1] = p->audit.witness;
    out[2] = p->audit.sign_key;
}

/*
 * The audit log, its witness and its signing key never show inside, even
 * when a read-only bind contains them (policy_finalize refuses them in a
 * writable tree): each place they would appear is covered by a read-only,
 * nodev /dev/null, which can be neither opened nor removed.
 */
size_t sandbox_hidden_paths(const struct policy *p, char (*at)[PATH_MAX], size_t max)
{
    const char *hidden[SANDBOX_N_HIDDEN_FILES];
    sandbox_hidden_files(p, hidden);
    size_t n = 0;
    for (size_t h = 0; h < SANDBOX_N_HIDDEN_FILES; h++) {
        if (!hidden[h])
            continue;
        _cleanup_free_ char *real = realpath(hidden[h], NULL);
        if (!real)
            continue; /* nothing there to see */
        for (size_t i = 0; i < p->n_binds && n < max; i++)
            if (seen_through(real, p->binds[i].source, p->binds[i].dest, at[n], sizeof at[n]))
                n++;
    }
    return n;
}

static int mask_host_files(const struct policy *p, struct ns_plan *plan, size_t *cap,
                           struct cordon_err *err)
{
    char at[SANDBOX_MAX_HIDDEN][PATH_MAX];
    size_t n = sandbox_hidden_paths(p, at, SANDBOX_MAX_HIDDEN);
    for (size_t i = 0; i < n; i++)
        TRY(add(plan, cap, MOUNT_BIND, at[i], "/dev/null", NULL, false, false, err));
    return 0;
}

/*
 * What the pre-run scan found in the host workspace: protected entries
 * bound read-only over themselves (from the workspace's own mount, so the
 * idmapping stays and git sees its files owned by the sandbox user), and
 * sockets, FIFOs and protected links hidden under a read-only /dev/null
 * (nodev: it opens to nothing), which can be neither reached nor removed.
 */
static int cover_workspace(const struct workspace_guard *ws, struct ns_plan *plan, size_t *cap,
                           struct cordon_err *err)
{
    for (size_t i = 0; i < ws->n_entries; i++) {
        char dest[PATH_MAX];
        if (snprintf(dest, sizeof dest, "/workspace/%s", ws->entries[i].rel) >= (int)sizeof dest)
            return err_set(err, CORDON_E_SETUP, "workspace: path too long: '%s'",
                           ws->entries[i].rel);
        bool mask = ws->entries[i].cover == WORKSPACE_MASK;
        TRY(add(plan, cap, MOUNT_BIND, dest, mask ? "/dev/null" : dest, NULL, false, true, err));
        struct mount_step *s = &plan->steps[plan->n_steps - 1];
        s->in_workspace = true;
        s->source_in_root = !mask;
        s->follow_symlinks = false;
    }
    return 0;
}

static int cmp_bind_depth(const void *a, const void *b)
{
    const struct policy_bind *x = a, *y = b;
    return strcmp(x->dest, y->dest); /* a parent sorts before its children */
}

int mounts_plan(const struct policy *p, struct ns_plan *plan, uid_t map_host_uid,
                const struct workspace_guard *ws, struct cordon_err *err)
{
    size_t cap = 0;
    char opts[128];
    /* Root's own files need the idmapping; the scratch workspace does not. */
    bool root = geteuid() == 0 && (p->workspace || p->n_binds || p->n_unix_sockets);
    _cleanup_close_ int userns = -1;
    if (root) {
        userns = idmap_userns(geteuid(), getegid(), map_host_uid, 1, err);
        if (userns < 0)
            return -1;
    }

    TRY(add(plan, &cap, MOUNT_BIND, "/usr", "/usr", NULL, false, false, err));
    for (size_t i = 0; i < SANDBOX_N_USR_LINKS; i++)
        TRY(add_host_entry(plan, &cap, sandbox_usr_links[i], err));
    TRY(add(plan, &cap, MOUNT_DIR, "/etc", NULL, NULL, false, false, err));
    for (size_t i = 0; i < SANDBOX_N_ETC_FILES; i++)
        TRY(add_host_entry(plan, &cap, sandbox_etc_files[i], err));
    TRY(add(plan, &cap, MOUNT_FILE, "/etc/passwd", sandbox_passwd, NULL, false, false, err));
    TRY(add(plan, &cap, MOUNT_FILE, "/etc/group", sandbox_group, NULL, false, false, err));
    TRY(add(plan, &cap, MOUNT_FILE, "/etc/hosts", sandbox_hosts, NULL, false, false, err));
    TRY(add(plan, &cap, MOUNT_FILE, "/etc/hostname", sandbox_hostname, NULL, false, false, err));
    TRY(add(plan, &cap, MOUNT_FILE, "/etc/nsswitch.conf", sandbox_nsswitch_conf(plan->transparent),
            NULL, false, false, err));
    TRY(add(plan, &cap, MOUNT_FILE, "/etc/resolv.conf", sandbox_resolv_conf(plan->transparent),
            NULL, false, false, err));

    TRY(add(plan, &cap, MOUNT_PROC, "/proc", NULL, NULL, false, false, err));

    TRY(add(plan, &cap, MOUNT_TMPFS, "/dev", NULL, "mode=0755,size=64k,nr_inodes=64", false, false,
            err));
    for (size_t i = 0; i < SANDBOX_N_DEV_NODES; i++) {
        char dest[32], src[32];
        snprintf(dest, sizeof dest, "/dev/%s", sandbox_dev_nodes[i]);
        snprintf(src, sizeof src, "/dev/%s", sandbox_dev_nodes[i]);
        TRY(add(plan, &cap, MOUNT_BIND, dest, src, NULL, true, false, err));
        plan->steps[plan->n_steps - 1].device = true;
    }
    TRY(add(plan, &cap, MOUNT_DEVPTS, "/dev/pts", NULL, "newinstance,ptmxmode=0666,mode=0620",
            false, false, err));
    plan->steps[plan->n_steps - 1].per_call = true;
    TRY(add(plan, &cap, MOUNT_SYMLINK, "/dev/ptmx", "pts/ptmx", NULL, false, false, err));
    TRY(add(plan, &cap, MOUNT_SYMLINK, "/dev/fd", "/proc/self/fd", NULL, false, false, err));
    TRY(add(plan, &cap, MOUNT_SYMLINK, "/dev/stdin", "/proc/self/fd/0", NULL, false, false, err));
    TRY(add(plan, &cap, MOUNT_SYMLINK, "/dev/stdout", "/proc/self/fd/1", NULL, false, false, err));
    TRY(add(plan, &cap, MOUNT_SYMLINK, "/dev/stderr", "/proc/self/fd/2", NULL, false, false, err));
    sandbox_tmpfs_opts(opts, sizeof opts, "mode=1777", p->shm_size, p->shm_inodes);
    TRY(add(plan, &cap, MOUNT_TMPFS, "/dev/shm", NULL, opts, true, false, err));
    plan->steps[plan->n_steps - 1].per_call = true;
    sandbox_tmpfs_opts(opts, sizeof opts, "mode=1777", p->tmp_size, p->tmp_inodes);
    TRY(add(plan, &cap, MOUNT_TMPFS, "/tmp", NULL, opts, true, false, err));
    plan->steps[plan->n_steps - 1].per_call = true;

    if (p->workspace) {
        bool overlay = p->workspace_mode == POLICY_WS_OVERLAY;
        char owner[64];
        snprintf(owner, sizeof owner, "mode=0755,uid=%d,gid=%d", SANDBOX_UID, SANDBOX_GID);
        sandbox_tmpfs_opts(opts, sizeof opts, owner, p->workspace_size, p->workspace_inodes);
        /* An overlay's lower layer is read-only: the run writes on its tmpfs. */
        TRY(add(plan, &cap, MOUNT_BIND, "/workspace", p->workspace, overlay ? opts : NULL, !overlay,
                false, err));
        plan->steps[plan->n_steps - 1].follow_symlinks = p->workspace_follow_symlinks;
        plan->steps[plan->n_steps - 1].overlay = overlay;
        if (root) {
            int fd = idmapped_tree(p->workspace, p->workspace_follow_symlinks, userns, err);
            if (fd < 0)
                return err_prefix(err, "workspace");
            plan->steps[plan->n_steps - 1].tree_fd = fd;
        }
        if (ws)
            TRY(cover_workspace(ws, plan, &cap, err));
    } else {
        char owner[64];
        snprintf(owner, sizeof owner, "mode=0755,uid=%d,gid=%d", SANDBOX_UID, SANDBOX_GID);
        sandbox_tmpfs_opts(opts, sizeof opts, owner, p->workspace_size, p->workspace_inodes);
        TRY(add(plan, &cap, MOUNT_TMPFS, "/workspace", NULL, opts, true, false, err));
        plan->steps[plan->n_steps - 1].per_call = true;
    }

    /* Parents before children, so a nested bind lands on its parent's tree. */
    _cleanup_free_ struct policy_bind *binds = NULL;
    if (p->n_binds) {
        binds = malloc(p->n_binds * sizeof *binds);
        if (!binds)
            return err_set(err, CORDON_E_INTERNAL, "out of memory");
        memcpy(binds, p->binds, p->n_binds * sizeof *binds);
        qsort(binds, p->n_binds, sizeof *binds, cmp_bind_depth);
    }
    for (size_t i = 0; i < p->n_binds; i++) {
        TRY(add(plan, &cap, MOUNT_BIND, binds[i].dest, binds[i].source, NULL, binds[i].writable,
                false, err));
        plan->steps[plan->n_steps - 1].follow_symlinks = binds[i].follow_symlinks;
        if (root) {
            int fd = idmapped_tree(binds[i].source, binds[i].follow_symlinks, userns, err);
            if (fd < 0)
                return err_prefix(err, "bind '%s'", binds[i].source);
            plan->steps[plan->n_steps - 1].tree_fd = fd;
        }
    }
    /* The host sockets the policy lists, each at its own path (the keeper
     * lets a connect reach them by their inode: usock.h). */
    for (size_t i = 0; i < p->n_unix_sockets; i++) {
        const char *path = p->unix_sockets[i];
        TRY(add(plan, &cap, MOUNT_BIND, path, path, NULL, false, false, err));
        if (root) {
            int fd = idmapped_tree(path, false, userns, err);
            if (fd < 0)
                return err_prefix(err, "filesystem.unix_sockets '%s'", path);
            plan->steps[plan->n_steps - 1].tree_fd = fd;
        }
    }
    TRY(mask_host_files(p, plan, &cap, err));
    return plan_landlock(p, plan, err);
}

int mounts_add_ca(struct ns_plan *plan, const char *ca_pem, struct cordon_err *err)
{
    size_t cap = plan->n_steps; /* add() grows from the current size */
    _cleanup_free_ char *bundle = NULL;
    size_t len;
    TRY(sandbox_ca_bundle(ca_pem, &bundle, &len, err));
    TRY(add(plan, &cap, MOUNT_FILE, SANDBOX_CA_CERT, ca_pem, NULL, false, false, err));
    return add(plan, &cap, MOUNT_FILE, SANDBOX_CA_BUNDLE, bundle, NULL, false, false, err);
}

int mounts_plan_add(struct ns_plan *plan, size_t *cap, enum mount_kind kind, const char *dest,
                    const char *source, const char *data, bool writable, bool optional,
                    struct cordon_err *err)
{
    return add(plan, cap, kind, dest, source, data, writable, optional, err);
}

void mounts_plan_release(struct ns_plan *plan)
{
    if (plan->root && plan->root_tree >= 0)
        closep(&plan->root_tree);
    plan->root_tree = -1;
    for (size_t i = 0; i < plan->n_steps; i++) {
        free(plan->steps[i].dest);
        free(plan->steps[i].source);
        free(plan->steps[i].data);
        if (plan->steps[i].tree_fd >= 0)
            close(plan->steps[i].tree_fd);
    }
    free(plan->steps);
    plan->steps = NULL;
    plan->n_steps = 0;
}

/* ---- in the child: no allocation below this line ---- */

/* One component beneath DIR, as a directory, never through a link. */
static int open_dir_at(int dir, const char *name, struct open_how *how)
{
    how->flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how->resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH;
    return sys_openat2(dir, name, how, sizeof *how);
}

/*
 * The parent directory of PATH (absolute inside the sandbox) beneath the
 * new root, made where missing, with the last component copied into NAME.
 * No component is followed if it is a link: a bind of a host tree may hold
 * links an earlier run planted, and following one would make directories
 * on the host or put a mount somewhere else.
 */
static int open_parent(int newroot, const char *path, char *name, size_t size, bool create,
                       struct cordon_err *err)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return err_set(err, CORDON_E_SETUP, "path too long: '%s'", path);
    struct open_how how = { 0 };
    char *last = strrchr(buf, '/');
    int dir = -1;
    /* Mostly the parent exists: one openat2 then, which refuses a link
     * anywhere on the way as the walk below does component by component. */
    if (last > buf) {
        *last = '\0';
        dir = open_dir_at(newroot, buf + 1, &how);
        *last = '/';
    }
    char *comp = buf + 1;
    if (dir >= 0)
        comp = last + 1;
    else if ((dir = open_dir_at(newroot, ".", &how)) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open the new root");
    for (char *slash; (slash = strchr(comp, '/')); comp = slash + 1) {
        *slash = '\0';
        int next = open_dir_at(dir, comp, &how);
        if (next < 0 && errno == ENOENT && create &&
            (mkdirat(dir, comp, 0755) == 0 || errno == EEXIST))
            next = open_dir_at(dir, comp, &how);
        if (next < 0) {
            int e = errno;
            close(dir);
            errno = e;
            if (!create && e == ENOENT)
                return -2;
            if (e == ELOOP || e == ENOTDIR)
                return err_set(err, CORDON_E_SETUP,
                               "cannot make '%s': '%s' is not a directory "
                               "(a symbolic link is never followed there)",
                               path, buf);
            return err_sys(err, CORDON_E_SETUP, "cannot create '%s'", buf);
        }
        close(dir);
        dir = next;
        *slash = '/';
    }
    size_t n = strlen(comp);
    if (n == 0 || n >= size) {
        close(dir);
        return err_set(err, CORDON_E_SETUP, "bad path: '%s'", path);
    }
    memcpy(name, comp, n + 1);
    return dir;
}

/*
 * An O_PATH descriptor of a mountpoint at NAME in DIR of the same type (dir
 * or file) as what will be bound on it; an existing one is used as it is
 * (a mask over a file on a read-only bind), unless it is a link.
 */
static int open_mountpoint(int dir, const char *name, bool is_dir, const char *dest,
                           struct cordon_err *err)
{
    struct open_how how = {
        .flags = O_PATH | O_CLOEXEC | (is_dir ? O_DIRECTORY : 0),
        .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH,
    };
    /* Mostly the mountpoint is new in the fresh root: made first (a new
     * file's own descriptor is the target), looked up only when it exists. */
    int fd = -1;
    if (!is_dir)
        fd = openat(dir, name, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    else if (mkdirat(dir, name, 0755) < 0 && errno != EEXIST)
        return err_sys(err, CORDON_E_SETUP, "cannot create '%s'", dest);
    if (fd < 0 && !is_dir && errno != EEXIST)
        return err_sys(err, CORDON_E_SETUP, "cannot create '%s'", dest);
    if (fd < 0)
        fd = sys_openat2(dir, name, &how, sizeof how);
    if (fd < 0) {
        if (errno == ELOOP)
            return err_set(err, CORDON_E_SETUP, "cannot bind at '%s': it is a symbolic link", dest);
        return err_sys(err, CORDON_E_SETUP, "cannot open mountpoint '%s'", dest);
    }
    return fd;
}

/*
 * An entry of the host workspace to cover, as it is: never made (a missing
 * one, gone since the scan, is -2), and a link is opened itself, so the
 * mount hides it rather than landing where it points.
 */
static int open_workspace_entry(int dir, const char *name, const char *dest, struct cordon_err *err)
{
    struct open_how how = {
        .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
        .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH,
    };
    int fd = sys_openat2(dir, name, &how, sizeof how);
    if (fd < 0 && errno == ENOENT)
        return -2;
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open '%s'", dest);
    return fd;
}

/*
 * Resolve the source as the host sees it (beneath OLDROOT, so its links stay
 * in the host tree rather than the half-built one), never through a link
 * unless the step may follow them, and clone the mount of what was opened.
 */
static int clone_source(const struct mount_step *s, int oldroot, int newroot,
                        struct cordon_err *err)
{
    struct open_how how = {
        .flags = O_PATH | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS |
            (s->follow_symlinks ? 0 : RESOLVE_NO_SYMLINKS),
    };
    /* A bind over itself: the entry as the sandbox's root has it, beneath it. */
    if (s->source_in_root)
        how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS;
    _cleanup_close_ int src = s->source_in_root
        ? sys_openat2(newroot, s->source + 1, &how, sizeof how)
        : sys_openat2(oldroot, s->source, &how, sizeof how);
    if (src < 0) {
        if (s->optional && errno == ENOENT)
            return -2;
        if (errno == ELOOP)
            return err_set(err, CORDON_E_SETUP,
                           "'%s' passes through a symbolic link; "
                           "cordon does not follow links in host paths",
                           s->source);
        return err_sys(err, CORDON_E_SETUP, "cannot open '%s'", s->source);
    }
    int tree =
        open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (tree < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot clone mount of '%s'", s->source);
    return tree;
}

static int do_bind(const struct mount_step *s, int parent, const char *name, int oldroot,
                   int newroot, struct cordon_err *err)
{
    _cleanup_close_ int tree = -1;
    if (s->tree_fd >= 0) {
        tree = TAKE_FD(((struct mount_step *)s)->tree_fd);
    } else {
        tree = clone_source(s, oldroot, newroot, err);
        if (tree == -2)
            return 0; /* optional, and missing */
        if (tree < 0)
            return -1;
    }
    struct stat st;
    if (fstat(tree, &st) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot stat '%s'", s->source);

    /* MS_REC semantics: the flags reach every submount of the bind too. Set
     * on the detached tree, so the bind is never visible without them. */
    struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID };
    attr.attr_set |= s->device ? MOUNT_ATTR_NOEXEC : MOUNT_ATTR_NODEV;
    if (!s->writable)
        attr.attr_set |= MOUNT_ATTR_RDONLY;
    if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot set mount flags on '%s'", s->dest);

    _cleanup_close_ int mp = s->in_workspace
        ? open_workspace_entry(parent, name, s->dest, err)
        : open_mountpoint(parent, name, S_ISDIR(st.st_mode), s->dest, err);
    if (mp == -2)
        return 0;
    if (mp < 0)
        return -1;
    if (move_mount(tree, "", mp, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot bind '%s' at '%s'", s->source, s->dest);
    return 0;
}

/* mkdir -p for PATH beneath the new root: the fixed mounts cordon makes. */
static int make_dirs(int newroot, const char *path, struct cordon_err *err);

/*
 * The workspace as an overlay: the host tree bound read-only at /lower in
 * the scratch root, the upper layer and overlay's work directory on a tmpfs
 * of the run's own at /layer (both detached with the scratch root later; the
 * overlay holds its layers, and *LAYER the tmpfs for the supervisor), the
 * overlay at /workspace. userxattr: in a user namespace overlayfs keeps its
 * whiteout and opaque marks in user.* xattrs, which tmpfs stores.
 */
static int do_overlay(const struct mount_step *s, int newroot, int oldroot, int *layer,
                      struct cordon_err *err)
{
    _cleanup_close_ int scratch = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (scratch < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open the scratch root");
    TRY(do_bind(s, scratch, "lower", oldroot, newroot, err));
    struct stat st;
    if (stat("/lower", &st) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot stat the workspace");
    if (mkdir("/layer", 0700) < 0 ||
        mount("tmpfs", "/layer", "tmpfs", MS_NOSUID | MS_NODEV, s->data) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot mount the workspace's layer");
    /* The overlay's top takes the upper directory's owner and mode: the
     * workspace's, as the sandbox sees it. */
    if (mkdir("/layer/"
              "upper",
              st.st_mode & 07777) < 0 ||
        mkdir("/layer/work", 0700) < 0 || chown("/layer/upper", SANDBOX_UID, SANDBOX_GID) < 0 ||
        chmod("/layer/upper", st.st_mode & 07777) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot prepare the workspace's layer");
    TRY(make_dirs(newroot, s->dest, err));
    char dest[PATH_MAX];
    snprintf(dest, sizeof dest, NEWROOT "%s", s->dest);
    if (mount("overlay", dest, "overlay", MS_NOSUID | MS_NODEV,
              "lowerdir=/lower,upperdir=/layer/upper,workdir=/layer/work,userxattr") < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot mount the workspace's overlay");
    *layer = open("/layer", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*layer < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open the workspace's layer");
    return 0;
}

static int make_dirs(int newroot, const char *path, struct cordon_err *err)
{
    char name[NAME_MAX + 1];
    _cleanup_close_ int parent = open_parent(newroot, path, name, sizeof name, true, err);
    if (parent < 0)
        return -1;
    _cleanup_close_ int fd = open_mountpoint(parent, name, true, path, err);
    return fd < 0 ? -1 : 0;
}

/*
 * sysfs, mqueue and cgroup2, fresh where the kernel lets this user namespace
 * mount them (sysfs: a network namespace of its own; mqueue: an IPC one).
 * sysfs in a joined network namespace is the host's /sys bound read-only,
 * as rootless runtimes do; cgroup2 shows the hierarchy from the cgroup
 * namespace's root, which the boundary made its own cgroup.
 */
static int do_kernel_fs(const struct mount_step *s, const char *dest, int oldroot, int newroot,
                        struct cordon_err *err)
{
    static const char *const types[] = {
        [MOUNT_SYSFS] = "sysfs", [MOUNT_MQUEUE] = "mqueue", [MOUNT_CGROUP2] = "cgroup2"
    };
    const char *type = types[s->kind];
    unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
    if (s->kind != MOUNT_MQUEUE || !s->writable)
        flags |= MS_RDONLY;
    if (mount(type, dest, type, flags, NULL) == 0)
        return 0;
    if (s->kind == MOUNT_SYSFS && (errno == EPERM || errno == EACCES)) {
        struct mount_step bind = { .kind = MOUNT_BIND,
                                   .dest = s->dest,
                                   .source = "/sys",
                                   .tree_fd = -1,
                                   .follow_symlinks = false };
        char name[NAME_MAX + 1];
        _cleanup_close_ int parent = open_parent(newroot, s->dest, name, sizeof name, true, err);
        return parent < 0 ? -1 : do_bind(&bind, parent, name, oldroot, newroot, err);
    }
    return err_sys(err, CORDON_E_SETUP, "cannot mount %s at '%s'", type, s->dest);
}

/*
 * Hide what is at DEST, never following a link to it: a directory under an
 * empty read-only tmpfs, anything else under a read-only, nodev /dev/null.
 * A missing path (or a link) is left alone: a mask has nothing to cover.
 */
static int do_mask(const struct mount_step *s, int newroot, int oldroot, struct cordon_err *err)
{
    struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                            .resolve =
                                RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
    _cleanup_close_ int at = sys_openat2(newroot, s->dest + 1, &how, sizeof how);
    if (at < 0 && (errno == ENOENT || errno == ELOOP || errno == ENOTDIR))
        return 0;
    struct stat st;
    if (at < 0 || fstat(at, &st) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open '%s' to mask it", s->dest);
    _cleanup_close_ int tree = -1;
    if (S_ISDIR(st.st_mode)) {
        _cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
            fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
            (tree = fsmount(fs, FSMOUNT_CLOEXEC,
                            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                MOUNT_ATTR_NOEXEC)) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot make a tmpfs to mask '%s'", s->dest);
    } else {
        struct mount_step null = { .kind = MOUNT_BIND, .source = "/dev/null", .tree_fd = -1 };
        tree = clone_source(&null, oldroot, newroot, err);
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                       MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC };
        if (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
            return tree < 0 ? -1 : err_sys(err, CORDON_E_SETUP, "cannot mask '%s'", s->dest);
    }
    if (move_mount(tree, "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot mask '%s'", s->dest);
    return 0;
}

/*
 * A generated file over DEST in a root that is not cordon's own (a bundle's):
 * written in the scratch root, bound read-only, so the bundle keeps its file.
 */
static int do_file_over(const struct mount_step *s, int newroot, int oldroot,
                        struct cordon_err *err)
{
    static unsigned n;
    char scratch[32];
    snprintf(scratch, sizeof scratch, "/generated-%u", n++);
    _cleanup_close_ int fd =
        open(scratch, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    size_t len = strlen(s->source);
    if (fd < 0 || write(fd, s->source, len) != (ssize_t)len)
        return err_sys(err, CORDON_E_SETUP, "cannot write '%s'", s->dest);
    struct mount_step bind = {
        .kind = MOUNT_BIND, .dest = s->dest, .source = scratch, .tree_fd = -1
    };
    bind.tree_fd = open_tree(AT_FDCWD, scratch, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (bind.tree_fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot clone '%s'", scratch);
    char name[NAME_MAX + 1];
    _cleanup_close_ int parent = open_parent(newroot, s->dest, name, sizeof name, true, err);
    int rc = parent < 0 ? -1 : do_bind(&bind, parent, name, oldroot, newroot, err);
    closep(&bind.tree_fd);
    return rc;
}

static int do_step(const struct mount_step *s, int newroot, int oldroot, int *layer,
                   struct cordon_err *err)
{
    char dest[PATH_MAX];
    if (snprintf(dest, sizeof dest, NEWROOT "%s", s->dest) >= (int)sizeof dest)
        return err_set(err, CORDON_E_SETUP, "path too long: '%s'", s->dest);
    char name[NAME_MAX + 1];

    switch (s->kind) {
    case MOUNT_BIND: {
        if (s->overlay)
            return do_overlay(s, newroot, oldroot, layer, err);
        _cleanup_close_ int parent =
            open_parent(newroot, s->dest, name, sizeof name, !s->in_workspace, err);
        if (parent == -2)
            return 0; /* gone from the workspace since the scan */
        return parent < 0 ? -1 : do_bind(s, parent, name, oldroot, newroot, err);
    }
    case MOUNT_TMPFS:
        TRY(make_dirs(newroot, s->dest, err));
        if (mount("tmpfs", dest, "tmpfs",
                  MS_NOSUID | MS_NODEV | (strcmp(s->dest, "/dev") ? 0 : MS_NOEXEC), s->data) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot mount tmpfs at '%s'", s->dest);
        return 0;
    case MOUNT_PROC:
        TRY(make_dirs(newroot, s->dest, err));
        /*
         * Read-only, so no file of /proc opens for writing (EROFS): not
         * /proc/sys, and not /proc/PID/mem, which would write into a
         * sibling's memory (the same uid passes the kernel's ptrace check)
         * or, under proc_mem.force_override, into read-only mappings. The
         * kernel checks the mount of the file opened, so this holds without
         * Landlock too, and magic links (/dev/stdout, /proc/self/fd/N) open
         * their target on its own mount as before.
         */
        if (mount("proc", dest, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot mount /proc");
        return 0;
    case MOUNT_DEVPTS:
        TRY(make_dirs(newroot, s->dest, err));
        if (mount("devpts", dest, "devpts", MS_NOSUID | MS_NOEXEC, s->data) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot mount devpts");
        return 0;
    case MOUNT_SYMLINK: {
        _cleanup_close_ int parent = open_parent(newroot, s->dest, name, sizeof name, true, err);
        if (parent < 0)
            return -1;
        if (symlinkat(s->source, parent, name) < 0 && errno != EEXIST)
            return err_sys(err, CORDON_E_SETUP, "cannot create link '%s'", s->dest);
        return 0;
    }
    case MOUNT_FILE: {
        if (s->over)
            return do_file_over(s, newroot, oldroot, err);
        _cleanup_close_ int parent = open_parent(newroot, s->dest, name, sizeof name, true, err);
        if (parent < 0)
            return -1;
        _cleanup_close_ int fd =
            openat(parent, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot create '%s'", s->dest);
        size_t len = strlen(s->source);
        if (write(fd, s->source, len) != (ssize_t)len)
            return err_sys(err, CORDON_E_SETUP, "cannot write '%s'", s->dest);
        return 0;
    }
    case MOUNT_DIR:
        return make_dirs(newroot, s->dest, err);
    case MOUNT_SYSFS:
    case MOUNT_MQUEUE:
    case MOUNT_CGROUP2:
        TRY(make_dirs(newroot, s->dest, err));
        return do_kernel_fs(s, dest, oldroot, newroot, err);
    case MOUNT_MASK:
        return do_mask(s, newroot, oldroot, err);
    }
    return err_set(err, CORDON_E_INTERNAL, "unknown mount step %d", (int)s->kind);
}

/* A /dev of the plan's own (cordon's root always has one; a bundle's may not). */
static bool has_dev_tmpfs(const struct ns_plan *plan)
{
    for (size_t i = 0; i < plan->n_steps; i++)
        if (plan->steps[i].kind == MOUNT_TMPFS && strcmp(plan->steps[i].dest, "/dev") == 0)
            return true;
    return false;
}

/*
 * A bundle's root filesystem at NEWROOT (its idmapped copy when one was
 * prepared), nosuid and nodev; made read-only with the rest at the end, once
 * the mountpoints are in it, unless it is writable.
 */
static int bind_root(const struct ns_plan *plan, int oldroot, struct cordon_err *err)
{
    struct mount_step root = { .kind = MOUNT_BIND,
                               .dest = "/",
                               .source = (char *)plan->root,
                               .tree_fd = -1,
                               .follow_symlinks = true };
    _cleanup_close_ int tree = plan->root_tree >= 0 ? TAKE_FD(((struct ns_plan *)plan)->root_tree)
                                                    : clone_source(&root, oldroot, -1, err);
    if (tree < 0)
        return -1;
    /* Private: a tree the supervisor cloned keeps the host mount's peer group, and
     * pivot_root refuses a shared new root. */
    struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                               .propagation = MS_PRIVATE };
    if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0 ||
        move_mount(tree, "", AT_FDCWD, NEWROOT, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot bind the root '%s'", plan->root);
    return 0;
}

int mounts_enter_clone(const struct ns_plan *plan, struct cordon_err *err)
{
    /* Read-only like the template's, which the clone's locked copy demands
     * (a proc mount may not reveal more than the one it sits on). */
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot mount /proc");
    for (size_t i = 0; i < plan->n_steps; i++) {
        const struct mount_step *s = &plan->steps[i];
        if (!s->per_call)
            continue;
        bool pts = s->kind == MOUNT_DEVPTS;
        if (mount(pts ? "devpts" : "tmpfs", s->dest, pts ? "devpts" : "tmpfs",
                  MS_NOSUID | (pts ? MS_NOEXEC : MS_NODEV), s->data) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot mount %s at '%s'", pts ? "devpts" : "tmpfs",
                           s->dest);
    }
    return 0;
}

int mounts_enter_root(const struct ns_plan *plan, int *layer, struct cordon_err *err)
{
    *layer = -1;
    /* Nothing we mount may propagate back to the host. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot make mounts private");

    /* A scratch root at BASE; the host tree is kept at OLDROOT only while
     * binds are taken from it (bubblewrap's two-pivot shape). */
    if (mount("tmpfs", BASE, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=1m") < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot mount scratch tmpfs");
    if (chdir(BASE) < 0 || mkdir("." NEWROOT, 0755) < 0 || mkdir("." OLDROOT, 0755) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot prepare scratch root");
    if (sys_pivot_root(".", "." OLDROOT) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot pivot to scratch root");
    if (chdir("/") < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot enter scratch root");
    _cleanup_close_ int oldroot = open(OLDROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (oldroot < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open host root");
    if (plan->root)
        TRY(bind_root(plan, oldroot, err));
    else if (mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot mount root tmpfs");
    _cleanup_close_ int newroot = open(NEWROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (newroot < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open new root");
    for (size_t i = 0; i < plan->n_steps; i++) {
        const struct mount_step *s = &plan->steps[i];
        /* A template keeps the run's own mounts' places, empty, for its clones. */
        if (plan->template && s->per_call)
            TRY(make_dirs(newroot, s->dest, err));
        else
            TRY(do_step(s, newroot, oldroot, layer, err));
    }
    closep(&newroot);
    newroot = -1;

    /* The root and /dev are read-only: only /tmp, /dev/shm, /workspace and
     * rw binds take writes (the sandbox user owns what setup created). */
    struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
    if ((!plan->root || !plan->root_writable) &&
        mount_setattr(AT_FDCWD, NEWROOT, 0, &ro, sizeof ro) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot make root read-only");
    if (has_dev_tmpfs(plan) && mount_setattr(AT_FDCWD, NEWROOT "/dev", 0, &ro, sizeof ro) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot make /dev read-only");

    closep(&oldroot);
    oldroot = -1;
    if (chdir(NEWROOT) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot enter new root");
    if (sys_pivot_root(".", ".") < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot pivot into new root");
    /* The old root (scratch tmpfs and the whole host tree) is stacked under
     * "." now; detach it so no path or fd reaches it. */
    if (umount2(".", MNT_DETACH) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot detach host root");
    if (chdir("/") < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot enter new root");
    return 0;
}
