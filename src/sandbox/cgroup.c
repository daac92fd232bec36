/*
 * sandbox/cgroup.c: creating, limiting, reading and removing a run's cgroup.
 * Runs in the supervisor; cgroup_destroy() also runs in the cleanup watchdog
 * after the supervisor died, so it sticks to async-signal-safe calls.
 */
#include "sandbox/cgroup.h"

#include "common/cleanup.h"
#include "common/hostpath.h"
#include "common/syscalls.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const v1_names[CGROUP_COUNT] = {
    [CGROUP_MEMORY] = "memory",
    [CGROUP_PIDS] = "pids",
    [CGROUP_CPU] = "cpuacct",
};

static int write_file(const char *dir, const char *file, const char *value)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, value, strlen(value));
    int saved = errno;
    close(fd);
    errno = saved;
    return n < 0 ? -1 : 0;
}

static uint64_t parse_u64(const char *s)
{
    uint64_t v = 0;
    while (*s >= '0' && *s <= '9')
        v = v * 10 + (uint64_t)(*s++ - '0');
    return v;
}

/* The value after "KEY " in BUF, a flat keyed file's text. */
static uint64_t keyed_in(const char *buf, const char *key)
{
    size_t klen = strlen(key);
    for (const char *line = buf; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, key, klen) == 0 && line[klen] == ' ')
            return parse_u64(line + klen + 1);
    return 0;
}

/* The value after "KEY " in a flat keyed file (memory.events, pids.events...). */
static uint64_t keyed_value(const char *dir, const char *file, const char *key)
{
    char path[PATH_MAX], buf[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (read_small_at(AT_FDCWD, path, buf, sizeof buf) < 0)
        return 0;
    return keyed_in(buf, key);
}

static uint64_t file_value(const char *dir, const char *file)
{
    char path[PATH_MAX], buf[64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return read_small_at(AT_FDCWD, path, buf, sizeof buf) < 0 ? 0 : parse_u64(buf);
}

/* What /proc/self/cgroup and /proc/self/mountinfo said, read and parsed once per run. */
struct own_view {
    char *cgroup;
    struct cgroup_mounts mounts;
};

/* PATH's whole text, NUL-terminated (NULL when it cannot be read). */
static char *read_whole(const char *path)
{
    size_t len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char *buf = NULL;
    size_t cap = 0;
    if (fd < 0)
        return NULL;
    for (;;) {
        if (len + 4096 > cap) {
            char *more = realloc(buf, cap = cap * 2 + 8192);
            if (!more) {
                free(buf);
                close(fd);
                return NULL;
            }
            buf = more;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    return buf;
}

/* mountinfo's octal escapes (\040 for a space, \134 for a backslash) decoded in place. */
static void unescape_octal(char *s)
{
    char *out = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
            s += 3;
        } else {
            *out++ = *s;
        }
    }
    *out = '\0';
}

/*
 * The cgroup mounts among mountinfo's lines, cut in place: "id parent
 * maj:min root mountpoint opts [optional...] - fstype source superopts".
 * One pass, with no scanf: a run reads this once, before its limits.
 */
static void parse_mounts(struct cgroup_mounts *ms)
{
    char *next;
    for (char *line = ms->text; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *sep = strstr(line, " - ");
        if (!sep || strncmp(sep + 3, "cgroup", 6) != 0)
            continue;
        *sep = '\0';
        char *save = NULL, *fstype = strtok_r(sep + 3, " ", &save);
        char *source = strtok_r(NULL, " ", &save), *super = strtok_r(NULL, " ", &save);
        bool v2 = strcmp(fstype, "cgroup2") == 0;
        if (!source || (!v2 && strcmp(fstype, "cgroup") != 0))
            continue;
        char *field[5];
        save = NULL;
        size_t i = 0;
        for (char *tok = strtok_r(line, " ", &save); tok && i < 5; tok = strtok_r(NULL, " ", &save))
            field[i++] = tok;
        if (i < 5)
            continue;
        if (ms->n == ms->cap) {
            size_t cap = ms->cap ? 2 * ms->cap : 16;
            struct cgroup_mount *more = realloc(ms->at, cap * sizeof *more);
            if (!more)
                return; /* what was found is what there is to go on */
            ms->at = more;
            ms->cap = cap;
        }
        unescape_octal(field[3]);
        unescape_octal(field[4]);
        ms->at[ms->n++] = (struct cgroup_mount){
            .root = field[3], .mnt = field[4], .super = super ? super : "", .v2 = v2
        };
    }
}

void cgroup_mounts_parse(struct cgroup_mounts *ms, char *mountinfo)
{
    *ms = (struct cgroup_mounts){ .text = mountinfo };
    parse_mounts(ms);
}

int cgroup_mounts_load(struct cgroup_mounts *ms)
{
    cgroup_mounts_parse(ms, read_whole("/proc/self/mountinfo"));
    return ms->text ? 0 : -1;
}

void cgroup_mounts_free(struct cgroup_mounts *ms)
{
    free(ms->text);
    free(ms->at);
    *ms = (struct cgroup_mounts){ 0 };
}

static void own_view_free(struct own_view *v)
{
    free(v->cgroup);
    cgroup_mounts_free(&v->mounts);
}

/* Is NAME one of the comma-separated LIST's first LEN bytes? */
static bool in_list(const char *list, size_t len, const char *name)
{
    size_t nlen = strlen(name);
    for (const char *p = list, *end = list + len; p < end;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t tlen = (size_t)((comma ? comma : end) - p);
        if (tlen == nlen && memcmp(p, name, nlen) == 0)
            return true;
        p += tlen + 1;
    }
    return false;
}

bool cgroup_mount_holds(const struct cgroup_mount *m, const char *controller)
{
    return *controller ? !m->v2 && in_list(m->super, strlen(m->super), controller) : m->v2;
}

/* Our cgroup's path in CONTROLLER's hierarchy ("" for the v2 one), per /proc/self/cgroup. */
static int own_path(const struct own_view *v, const char *controller, char *out, size_t size)
{
    if (!v->cgroup)
        return -1;
    for (const char *line = v->cgroup; *line;) {
        const char *eol = strchr(line, '\n');
        if (!eol)
            eol = line + strlen(line);
        /* "ID:CONTROLLERS:PATH": ID 0 with no controllers is the v2 hierarchy */
        const char *c1 = memchr(line, ':', (size_t)(eol - line));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
        if (c2) {
            bool match = *controller ? in_list(c1 + 1, (size_t)(c2 - c1 - 1), controller)
                                     : c1 - line == 1 && line[0] == '0' && c2 == c1 + 1;
            if (match && (size_t)(eol - c2 - 1) < size) {
                memcpy(out, c2 + 1, (size_t)(eol - c2 - 1));
                out[eol - c2 - 1] = '\0';
                return 0;
            }
        }
        line = *eol ? eol + 1 : eol;
    }
    return -1;
}

/*
 * Where the hierarchy holding CONTROLLER ("" for the v2 one) is mounted, and
 * our cgroup's path in it (MINE) or the hierarchy's own root; joined into OUT.
 */
static int hierarchy_dir(const struct own_view *v, const char *controller, bool mine, char *out,
                         size_t size)
{
    char own[PATH_MAX];
    if (own_path(v, controller, own, sizeof own) < 0)
        return -1;
    for (size_t i = 0; i < v->mounts.n; i++) {
        const struct cgroup_mount *m = &v->mounts.at[i];
        if (!cgroup_mount_holds(m, controller))
            continue;
        /* The mount shows ROOT of the hierarchy; our path must lie beneath it. */
        const char *rel = own;
        size_t rlen = strlen(m->root);
        if (strcmp(m->root, "/") != 0) {
            if (strncmp(own, m->root, rlen) != 0 || (own[rlen] != '/' && own[rlen] != '\0'))
                continue;
            rel = own + rlen;
        }
        if (strcmp(rel, "/") == 0 || !mine)
            rel = "";
        snprintf(out, size, "%s%s", m->mnt, rel);
        return 0;
    }
    return -1;
}

static int own_cgroup_dir(const struct own_view *v, const char *controller, char *out, size_t size)
{
    return hierarchy_dir(v, controller, true, out, size);
}

/* In a scope delegated to cordon, the supervisor sits in this leaf and
 * runs are its siblings (the no-internal-processes rule of cgroup v2). */
#define SUPERVISOR_LEAF "cordon-supervisor-"

/* PROC_CGROUP: whose membership counts (/proc/self/cgroup, or another process's). */
static void own_view_load(struct own_view *v, const char *proc_cgroup)
{
    v->cgroup = read_whole(proc_cgroup);
    (void)cgroup_mounts_load(&v->mounts);
}

/* The supervisor's cgroup v2 directory, or the scope above its leaf. */
static int v2_base(const struct own_view *v, char *out, size_t size)
{
    if (own_cgroup_dir(v, "", out, size) < 0)
        return -1;
    char *slash = strrchr(out, '/');
    if (slash && strncmp(slash + 1, SUPERVISOR_LEAF, strlen(SUPERVISOR_LEAF)) == 0)
        *slash = '\0';
    return 0;
}

int cgroup_v2_dir(char *out, size_t size)
{
    struct own_view v = { 0 };
    own_view_load(&v, "/proc/self/cgroup");
    int rc = v2_base(&v, out, size);
    own_view_free(&v);
    return rc;
}

int cgroup_enter_delegated(struct cordon_err *err)
{
    char own[PATH_MAX], leaf[PATH_MAX], pid[32];
    struct own_view v = { 0 };
    own_view_load(&v, "/proc/self/cgroup");
    int found = own_cgroup_dir(&v, "", own, sizeof own);
    own_view_free(&v);
    if (found < 0)
        return err_set(err, CORDON_E_UNSUPPORTED, "no cgroup v2 hierarchy");
    if (snprintf(leaf, sizeof leaf, "%s/" SUPERVISOR_LEAF "%d", own, (int)getpid()) >=
        (int)sizeof leaf)
        return err_set(err, CORDON_E_SETUP, "cgroup path too long");
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    if (mkdir(leaf, 0755) < 0 && errno != EEXIST)
        return err_sys(err, CORDON_E_SETUP, "cannot create cgroup '%s'", leaf);
    if (write_file(leaf, "cgroup.procs", pid) < 0) {
        int saved = errno;
        rmdir(leaf);
        errno = saved;
        return err_sys(err, CORDON_E_SETUP, "cannot move into cgroup '%s'", leaf);
    }
    return 0;
}

/* Who is told of a directory before it is made. */
struct guard {
    int (*fn)(void *arg, const char *dir, struct cordon_err *err);
    void *arg;
    struct cordon_err *err;
};

static int make_guarded(const struct guard *g, const char *dir)
{
    /* Where we may not make it (an ordinary user's v1 hierarchy), the
     * watchdog need not hear of it, nor be forked for it. */
    char parent[PATH_MAX];
    const char *slash = strrchr(dir, '/');
    if (slash && (size_t)(slash - dir) < sizeof parent) {
        memcpy(parent, dir, (size_t)(slash - dir));
        parent[slash - dir] = '\0';
        if (faccessat(AT_FDCWD, parent[0] ? parent : "/", W_OK, AT_EACCESS) < 0)
            return -1;
    }
    if (g->fn && g->fn(g->arg, dir, g->err) < 0)
        return -2;
    return mkdir(dir, 0755);
}

/* 1 made, 0 not here (v1 may do), -1 the guard failed. */
static int try_v2(const struct own_view *v, struct cgroup_set *cg, const char *name,
                  const struct guard *g)
{
    char own[PATH_MAX], buf[512];
    if (v2_base(v, own, sizeof own) < 0)
        return 0;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/cgroup.controllers", own) >= (int)sizeof path ||
        read_small_at(AT_FDCWD, path, buf, sizeof buf) < 0 || !strstr(buf, "memory") ||
        !strstr(buf, "pids"))
        return 0;
    /* Fails with EBUSY when our own cgroup holds processes (no internal
     * processes rule): then v1 is the way, or nothing. */
    if (write_file(own, "cgroup.subtree_control", "+memory +pids") < 0)
        return 0;
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/%s", own, name) >= (int)sizeof dir)
        return 0;
    int made = make_guarded(g, dir);
    if (made < 0)
        return made == -2 ? -1 : 0;
    for (int c = 0; c < CGROUP_COUNT; c++)
        snprintf(cg->dir[c], sizeof cg->dir[c], "%s", dir);
    cg->version = 2;
    return 1;
}

static int create_v1(const struct own_view *v, struct cgroup_set *cg, const char *name,
                     const struct cgroup_slot_use *slots, const struct guard *g);

int cgroup_create(struct cgroup_set *cg, const char *name, const struct cgroup_slot_use *slots,
                  int (*guard)(void *arg, const char *dir, struct cordon_err *err), void *arg,
                  struct cordon_err *err)
{
    memset(cg, 0, sizeof *cg);
    struct own_view v = { 0 };
    own_view_load(&v, "/proc/self/cgroup");
    const struct guard g = { guard, arg, err };
    int rc = try_v2(&v, cg, name, &g);
    if (rc == 0)
        rc = create_v1(&v, cg, name, slots, &g);
    own_view_free(&v);
    return rc < 0 ? -1 : 0;
}

static enum cgroup_reuse reset_one(const char *dir, int c, struct cgroup_stats *base);

/* The last run's limits lifted, as a new cgroup has none (the caller sets this run's). */
static int unlimit(const char *dir, int c)
{
    if (c == CGROUP_MEMORY)
        /* memsw first: v1 keeps the limit at or below it at every step. */
        return (write_file(dir, "memory.memsw.limit_in_bytes", "-1") < 0 && errno != ENOENT) ||
                write_file(dir, "memory.limit_in_bytes", "-1") < 0
            ? -1
            : 0;
    if (c == CGROUP_PIDS)
        return write_file(dir, "pids.max", "max");
    return 0;
}

/*
 * Slot K of controller C beneath OWN, locked and ready for a run that will
 * set USE: 1 (in CG), 0 busy or not fit for use (try the next), -1 none can
 * be had here (make the run's own cgroup instead).
 */
static int claim_slot(const char *own, int c, int k, const struct cgroup_slot_use *use,
                      struct cgroup_set *cg)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/" CGROUP_SLOT_PREFIX "%u-%d", own, (unsigned)geteuid(), k) >=
        (int)sizeof dir)
        return -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        /* 0700: no one else can open it, so no one else can hold its lock. */
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
            return -1;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (fd < 0)
        return -1;
    struct stat st, now;
    struct cgroup_stats base = cg->base;
    /* Another user's (a shared, writable parent) could be changed under the
     * run; one removed since we opened it (a leaver found it spent) is no
     * longer the slot. */
    if (flock(fd, LOCK_EX | LOCK_NB) < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid() ||
        stat(dir, &now) < 0 || now.st_ino != st.st_ino) {
        close(fd);
        return 0;
    }
    if ((st.st_mode & 077) && fchmod(fd, 0700) < 0) {
        close(fd);
        return 0;
    }
    enum cgroup_reuse r = reset_one(dir, c, &base);
    bool too_full = c == CGROUP_MEMORY && use->memory && base.memory_peak > use->memory / 4;
    if (r != CGROUP_REUSED || too_full || unlimit(dir, c) < 0) {
        /* Spent (memory it will not give back, say): gone, for a new one. */
        if (r == CGROUP_SPENT)
            rmdir(dir);
        close(fd);
        return 0;
    }
    cg->base = base;
    snprintf(cg->dir[c], sizeof cg->dir[c], "%s", dir);
    cg->slot[c] = true;
    cg->slot_lock[c] = fd;
    cg->version = 1;
    return 1;
}

/*
 * Controller C mounted with one made before it (memory,pids on some hosts):
 * the run's cgroup there serves both (a slot's counters of C reset too, or
 * C is not had). True when C is done with.
 */
static bool comounted(struct cgroup_set *cg, int c, const char *own)
{
    size_t len = strlen(own);
    for (int d = 0; d < c; d++) {
        const char *dir = cg->dir[d];
        if (!cgroup_has(cg, d) || strncmp(dir, own, len) != 0 || dir[len] != '/' ||
            strchr(dir + len + 1, '/'))
            continue;
        if (cg->slot[d] && (reset_one(dir, c, &cg->base) != CGROUP_REUSED || unlimit(dir, c) < 0)) {
            snprintf(cg->why[c], sizeof cg->why[c], "cannot reset '%s' counters in '%.120s'",
                     v1_names[c], dir);
            return true;
        }
        snprintf(cg->dir[c], sizeof cg->dir[c], "%s", dir);
        cg->slot[c] = cg->slot[d];
        cg->slot_lock[c] = -1; /* held once, by D */
        return true;
    }
    return false;
}

static int create_v1(const struct own_view *v, struct cgroup_set *cg, const char *name,
                     const struct cgroup_slot_use *slots, const struct guard *g)
{
    for (int c = 0; c < CGROUP_COUNT; c++) {
        char own[PATH_MAX];
        if (own_cgroup_dir(v, v1_names[c], own, sizeof own) < 0) {
            snprintf(cg->why[c], sizeof cg->why[c],
                     "no cgroup v1 '%s' hierarchy and no cgroup v2 with it enabled", v1_names[c]);
            continue;
        }
        if (comounted(cg, c, own))
            continue;
        int claimed = 0;
        for (int k = 0; slots && k < CGROUP_SLOT_MAX && !claimed; k++)
            claimed = claim_slot(own, c, k, slots, cg);
        if (claimed > 0)
            continue;
        char dir[PATH_MAX];
        if (snprintf(dir, sizeof dir, "%s/%s", own, name) >= (int)sizeof dir)
            continue;
        int made = make_guarded(g, dir);
        if (made == -2)
            return -1;
        if (made < 0) {
            snprintf(cg->why[c], sizeof cg->why[c], "cannot create cgroup '%.120s': %s", dir,
                     strerror(errno));
            continue;
        }
        snprintf(cg->dir[c], sizeof cg->dir[c], "%s", dir);
        cg->version = 1;
    }
    return 0;
}

/* mkdir -p of PATH beneath BASE, each new level's controllers enabled below it (v2: CTRL). */
static int make_path(const char *base, const char *path, const char *ctrl, char *out, size_t size,
                     const struct guard *g)
{
    if (snprintf(out, size, "%s%s%s", base, *path == '/' ? "" : "/", path) >= (int)size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *slash = out + strlen(base) + 1; (slash = strchr(slash, '/')); slash++) {
        *slash = '\0';
        int rc = mkdir(out, 0755);
        *slash = '/';
        if (rc < 0 && errno != EEXIST)
            return -1;
    }
    for (char *slash = out + strlen(base); ctrl && slash; slash = strchr(slash + 1, '/')) {
        char saved = *slash;
        *slash = '\0';
        (void)write_file(out, "cgroup.subtree_control", ctrl);
        *slash = saved;
    }
    return make_guarded(g, out);
}

int cgroup_create_at(struct cgroup_set *cg, const char *path,
                     int (*guard)(void *arg, const char *dir, struct cordon_err *err), void *arg,
                     struct cordon_err *err)
{
    memset(cg, 0, sizeof *cg);
    const struct guard g = { guard, arg, err };
    struct own_view v = { 0 };
    own_view_load(&v, "/proc/self/cgroup");
    char root[PATH_MAX], buf[512], probe[PATH_MAX + 32];
    int rc = 0;
    if (hierarchy_dir(&v, "", false, root, sizeof root) == 0 &&
        snprintf(probe, sizeof probe, "%s/cgroup.controllers", root) < (int)sizeof probe &&
        read_small_at(AT_FDCWD, probe, buf, sizeof buf) > 0 && strstr(buf, "memory") &&
        strstr(buf, "pids")) {
        char dir[PATH_MAX];
        int made = make_path(root, path, "+memory +pids +cpu", dir, sizeof dir, &g);
        if (made == -1)
            rc = err_sys(err, CORDON_E_SETUP, "cannot create cgroup '%s' under '%s'", path, root);
        else if (made < 0)
            rc = -1; /* the guard said why */
        for (int c = 0; rc == 0 && c < CGROUP_COUNT; c++)
            snprintf(cg->dir[c], sizeof cg->dir[c], "%s", dir);
        cg->version = rc == 0 ? 2 : 0;
        own_view_free(&v);
        return rc;
    }
    for (int c = 0; c < CGROUP_COUNT && rc == 0; c++) {
        if (hierarchy_dir(&v, v1_names[c], false, root, sizeof root) < 0) {
            snprintf(cg->why[c], sizeof cg->why[c], "no cgroup v1 '%s' hierarchy", v1_names[c]);
            continue;
        }
        int made = make_path(root, path, NULL, cg->dir[c], sizeof cg->dir[c], &g);
        if (made < 0) {
            rc = made == -1
                ? err_sys(err, CORDON_E_SETUP, "cannot create cgroup '%s' under '%s'", path, root)
                : -1;
            cg->dir[c][0] = '\0';
        } else {
            cg->version = 1;
        }
    }
    own_view_free(&v);
    if (rc < 0)
        cgroup_destroy(cg);
    return rc;
}

bool cgroup_has(const struct cgroup_set *cg, enum cgroup_controller c)
{
    return cg->dir[c][0] != '\0';
}

int cgroup_set_memory(const struct cgroup_set *cg, uint64_t bytes, struct cordon_err *err)
{
    if (!bytes)
        return 0;
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)bytes);
    const char *dir = cg->dir[CGROUP_MEMORY];
    if (cg->version == 2) {
        if (write_file(dir, "memory.max", v) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot set memory.max in '%s'", dir);
        /* Swap would let the run grow past its limit; absent without swap accounting. */
        if (write_file(dir, "memory.swap.max", "0") < 0 && errno != ENOENT)
            return err_sys(err, CORDON_E_SETUP, "cannot set memory.swap.max in '%s'", dir);
        return 0;
    }
    /* v1 keeps limit <= memsw limit at every step: a raise goes memsw first. */
    if (write_file(dir, "memory.limit_in_bytes", v) < 0 &&
        (errno != EINVAL || write_file(dir, "memory.memsw.limit_in_bytes", v) < 0 ||
         write_file(dir, "memory.limit_in_bytes", v) < 0))
        return err_sys(err, CORDON_E_SETUP, "cannot set memory.limit_in_bytes in '%s'", dir);
    if (write_file(dir, "memory.memsw.limit_in_bytes", v) < 0 && errno != ENOENT)
        return err_sys(err, CORDON_E_SETUP, "cannot set memory.memsw.limit_in_bytes in '%s'", dir);
    return 0;
}

int cgroup_set_pids(const struct cgroup_set *cg, uint64_t max, struct cordon_err *err)
{
    if (!max)
        return 0;
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)max);
    if (write_file(cg->dir[CGROUP_PIDS], "pids.max", v) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot set pids.max in '%s'", cg->dir[CGROUP_PIDS]);
    return 0;
}

int cgroup_ticket_open(const struct cgroup_set *cg, struct cgroup_ticket *t, struct cordon_err *err)
{
    *t = (struct cgroup_ticket)CGROUP_TICKET_INIT;
    for (int c = 0; c < CGROUP_COUNT; c++) {
        if (!cgroup_has(cg, c))
            continue;
        bool shared = false; /* co-mounted controllers share one hierarchy */
        for (int d = 0; d < c; d++)
            shared |= cgroup_has(cg, d) && strcmp(cg->dir[d], cg->dir[c]) == 0;
        if (shared)
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", cg->dir[c],
                 cg->version == 2 ? "cgroup.procs" : "tasks");
        if ((t->fd[c] = open(path, O_WRONLY | O_CLOEXEC)) < 0)
            goto fail;
        if (cg->version == 2 && (t->dir = open(cg->dir[c], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
            goto fail;
    }
    return 0;
fail:
    err_sys(err, CORDON_E_SETUP, "cannot open the run's cgroup for joining");
    cgroup_ticket_close(t);
    return -1;
}

int cgroup_ticket_use(const struct cgroup_ticket *t)
{
    for (int c = 0; c < CGROUP_COUNT; c++)
        if (t->fd[c] >= 0 && write(t->fd[c], "0", 1) != 1)
            return -1;
    return 0;
}

void cgroup_ticket_close(struct cgroup_ticket *t)
{
    for (int c = 0; c < CGROUP_COUNT; c++)
        closep(&t->fd[c]);
    closep(&t->dir);
    *t = (struct cgroup_ticket)CGROUP_TICKET_INIT;
}

static void read_stats(const struct cgroup_set *cg, unsigned want, struct cgroup_stats *out);

static uint64_t since(uint64_t now, uint64_t base)
{
    return now > base ? now - base : 0;
}

void cgroup_read_stats(const struct cgroup_set *cg, unsigned want, struct cgroup_stats *out)
{
    read_stats(cg, want, out);
    out->memory_peak = since(out->memory_peak, cg->base.memory_peak);
    out->oom_kills = since(out->oom_kills, cg->base.oom_kills);
    out->pids_max_hits = since(out->pids_max_hits, cg->base.pids_max_hits);
    out->cpu_usage_us = since(out->cpu_usage_us, cg->base.cpu_usage_us);
}

/* Does DIR hold a process? (A missing file holds none.) */
static bool populated(const char *dir)
{
    char path[PATH_MAX], buf[16];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    return read_small_at(AT_FDCWD, path, buf, sizeof buf) > 0;
}

/* Does the v1 memory cgroup DIR still hold the last run's tmpfs, System V or anonymous pages? */
static bool memory_settling(const char *dir)
{
    char path[PATH_MAX], buf[4096];
    snprintf(path, sizeof path, "%s/memory.stat", dir);
    /* Unreadable: say so, and the cgroup is passed over. */
    if (read_small_at(AT_FDCWD, path, buf, sizeof buf) < 0)
        return true;
    return keyed_in(buf, "shmem") || keyed_in(buf, "rss");
}

/*
 * One v1 cgroup of controller C, its run's processes gone: its resettable
 * counters reset and the others read into BASE (see cgroup_reuse).
 */
static enum cgroup_reuse reset_one(const char *dir, int c, struct cgroup_stats *base)
{
    if (populated(dir))
        return CGROUP_SPENT;
    switch (c) {
    case CGROUP_MEMORY:
        /* tmpfs and System V pages ("shmem"): the run's /tmp, /dev/shm and IPC objects, freed
         * with its namespaces; anonymous memory ("rss") goes with the processes. */
        if (memory_settling(dir))
            return CGROUP_SETTLING;
        /* What else is charged (page cache the last run read first, kernel
         * objects, IPC memory its namespace frees later) would be taken from
         * the next run's limit, and hide its peak should that limit reclaim
         * it: past a little, the cgroup is not reused. */
        base->memory_peak = file_value(dir, "memory.usage_in_bytes");
        if (base->memory_peak > CGROUP_REUSE_MAX_CHARGE)
            return CGROUP_SPENT;
        /* The peak restarts from what is charged now, subtracted from the next run's. */
        if (write_file(dir, "memory.max_usage_in_bytes", "0") < 0 ||
            (write_file(dir, "memory.memsw.max_usage_in_bytes", "0") < 0 && errno != ENOENT) ||
            write_file(dir, "memory.failcnt", "0") < 0)
            return CGROUP_SPENT;
        base->oom_kills = keyed_value(dir, "memory.oom_control", "oom_kill");
        return CGROUP_REUSED;
    case CGROUP_PIDS:
        base->pids_max_hits = keyed_value(dir, "pids.events", "max");
        return CGROUP_REUSED;
    case CGROUP_CPU:
        if (write_file(dir, "cpuacct.usage", "0") < 0)
            return CGROUP_SPENT;
        base->cpu_usage_us = 0;
        return CGROUP_REUSED;
    }
    return CGROUP_SPENT;
}

enum cgroup_reuse cgroup_reuse(struct cgroup_set *cg)
{
    if (cg->version != 1)
        return CGROUP_SPENT;
    for (int c = 0; c < CGROUP_COUNT; c++) {
        enum cgroup_reuse r =
            cgroup_has(cg, c) ? reset_one(cg->dir[c], c, &cg->base) : CGROUP_REUSED;
        if (r != CGROUP_REUSED)
            return r;
    }
    return CGROUP_REUSED;
}

static void read_stats(const struct cgroup_set *cg, unsigned want, struct cgroup_stats *out)
{
    memset(out, 0, sizeof *out);
    if (cg->version == 2) {
        const char *d = cg->dir[CGROUP_MEMORY];
        if (want & CGROUP_STAT_MEMORY) {
            out->memory_peak = file_value(d, "memory.peak");
            out->oom_kills = keyed_value(d, "memory.events", "oom_kill");
        }
        if (want & CGROUP_STAT_PIDS)
            out->pids_max_hits = keyed_value(d, "pids.events", "max");
        if (want & CGROUP_STAT_CPU)
            out->cpu_usage_us = keyed_value(d, "cpu.stat", "usage_usec");
        return;
    }
    if ((want & CGROUP_STAT_MEMORY) && cgroup_has(cg, CGROUP_MEMORY)) {
        out->memory_peak = file_value(cg->dir[CGROUP_MEMORY], "memory.max_usage_in_bytes");
        out->oom_kills = keyed_value(cg->dir[CGROUP_MEMORY], "memory.oom_control", "oom_kill");
    }
    if ((want & CGROUP_STAT_PIDS) && cgroup_has(cg, CGROUP_PIDS))
        out->pids_max_hits = keyed_value(cg->dir[CGROUP_PIDS], "pids.events", "max");
    if ((want & CGROUP_STAT_CPU) && cgroup_has(cg, CGROUP_CPU))
        out->cpu_usage_us = file_value(cg->dir[CGROUP_CPU], "cpuacct.usage") / 1000;
}

/* Kill whatever is listed in DIR/cgroup.procs; true when it was empty. */
static bool kill_members(const char *dir)
{
    char path[PATH_MAX], buf[8192];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    if (read_small_at(AT_FDCWD, path, buf, sizeof buf) <= 0)
        return true;
    for (char *p = buf; *p;) {
        pid_t pid = (pid_t)parse_u64(p);
        if (pid > 0)
            kill(pid, SIGKILL);
        p = strchr(p, '\n');
        if (!p)
            break;
        p++;
    }
    return false;
}

/* The cgroups beneath DIR, each removed first (no allocation: the watchdog's too). */
static void remove_children(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[4096];
    long n;
    while ((n = sys_getdents64(fd, buf, sizeof buf)) > 0)
        for (long off = 0; off < n;) {
            struct linux_dirent64 {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *e = (void *)(buf + off);
            off += e->reclen;
            char sub[PATH_MAX];
            if (e->type == DT_DIR && strcmp(e->name, ".") && strcmp(e->name, "..") &&
                snprintf(sub, sizeof sub, "%s/%s", dir, e->name) < (int)sizeof sub)
                cgroup_remove_dir(sub);
        }
    close(fd);
}

void cgroup_remove_dir(const char *dir)
{
    /* Empty, as a run's almost always is by now: the rest finds nothing to do. */
    if (rmdir(dir) == 0 || errno == ENOENT)
        return;
    remove_children(dir);
    write_file(dir, "cgroup.kill", "1"); /* v2 only; absent on v1 */
    /* Exiting tasks leave the cgroup asynchronously: retry a while. */
    for (int tries = 0; tries < 500; tries++) {
        kill_members(dir);
        if (rmdir(dir) == 0 || errno == ENOENT)
            return;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}

/* Slot C of CG emptied and unlocked: it stays for the next run (a process
 * still leaving it has the next claimer pass it over). */
static void leave_slot(struct cgroup_set *cg, int c)
{
    kill_members(cg->dir[c]);
    /* Charged past what the next run may inherit: removed now (its pages go
     * to the parent), and the next run makes the slot anew. */
    if (c == CGROUP_MEMORY &&
        file_value(cg->dir[c], "memory.usage_in_bytes") > CGROUP_REUSE_MAX_CHARGE)
        rmdir(cg->dir[c]);
    if (cg->slot_lock[c] >= 0)
        close(cg->slot_lock[c]);
    cg->slot[c] = false;
    cg->dir[c][0] = '\0';
}

bool cgroup_try_destroy(struct cgroup_set *cg)
{
    bool gone = true;
    for (int c = 0; c < CGROUP_COUNT; c++) {
        if (!cgroup_has(cg, c))
            continue;
        if (cg->slot[c]) {
            leave_slot(cg, c);
            continue;
        }
        kill_members(cg->dir[c]);
        if (rmdir(cg->dir[c]) == 0 || errno == ENOENT)
            cg->dir[c][0] = '\0';
        else
            gone = false;
    }
    if (gone)
        cg->version = 0;
    return gone;
}

void cgroup_destroy(struct cgroup_set *cg)
{
    for (int c = 0; c < CGROUP_COUNT; c++) {
        if (!cgroup_has(cg, c))
            continue;
        if (cg->slot[c]) {
            leave_slot(cg, c);
            continue;
        }
        bool shared = false;
        for (int d = 0; d < c; d++)
            if (strcmp(cg->dir[d], cg->dir[c]) == 0)
                shared = true;
        if (!shared)
            cgroup_remove_dir(cg->dir[c]);
    }
    for (int c = 0; c < CGROUP_COUNT; c++)
        cg->dir[c][0] = '\0';
    cg->version = 0;
}

int cgroup_dir_of(pid_t pid, const char *controller, char *out, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    struct own_view v = { 0 };
    own_view_load(&v, path);
    int rc = hierarchy_dir(&v, controller, true, out, size);
    own_view_free(&v);
    return rc;
}
