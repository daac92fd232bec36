/*
 * sandbox/gitscan.c: what git would run from a repository the run wrote
 * (see gitscan.h). Runs in the supervisor, before the run (what to put
 * back) and after it, once no process of it is left. Every file is opened
 * by descriptor beneath its git directory, never through a link.
 */
#include "sandbox/gitscan.h"

#include "common/cleanup.h"
#include "common/hostpath.h"
#include "common/syscalls.h"
#include "common/text.h"
#include "policy/gitconfig.h"
#include "policy/policy.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* A file kept before the run: REL in the workspace, its bytes (a link: its target) and mode. */
struct gitscan_file {
    char *rel;
    char *data;
    size_t len;
    mode_t mode;
};

/* The configs of a git directory (and of each linked worktree's, under worktrees/NAME/). */
static const char *const configs[] = { "config", "config.worktree" };

bool gitscan_enabled(const struct policy *p)
{
    for (size_t i = 0; i < p->n_protected; i++)
        if (policy_protected_checked(p->protected[i]))
            return true;
    return false;
}

json_t *gitscan_notes_json(const struct gitscan_notes *notes)
{
    json_t *a = json_array();
    for (unsigned i = 0; a && i < notes->n; i++) {
        char line[sizeof notes->line[0]];
        memcpy(line, notes->line[i], sizeof line);
        text_escape_controls(line, sizeof line); /* the run's bytes: jansson needs UTF-8 */
        json_array_append_new(a, json_string(line));
    }
    return a;
}

void gitscan_note(struct gitscan_notes *notes, const char *fmt, ...)
{
    notes->total++;
    if (notes->n == GITSCAN_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes->line[notes->n++], sizeof notes->line[0], fmt, ap);
    va_end(ap);
}

static int open_beneath(int dir, const char *rel, int flags)
{
    struct open_how how = { .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
                            .resolve =
                                RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
    return sys_openat2(dir, rel, &how, sizeof how);
}

char *gitscan_read(int dir, const char *name, size_t cap, size_t *len)
{
    _cleanup_close_ int fd = open_beneath(dir, name, O_RDONLY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > cap)
        return NULL;
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    ssize_t r;
    while (buf && got <= (size_t)st.st_size &&
           (r = read(fd, buf + got, (size_t)st.st_size + 1 - got)) > 0)
        got += (size_t)r;
    if (!buf || got > (size_t)st.st_size) {
        free(buf);
        return NULL; /* grew while read */
    }
    buf[got] = '\0';
    *len = got;
    return buf;
}

/* Is NAME in DIR, of any type, or is it ADDING (in any case: a casefolded directory's)? */
static bool has_entry(int dir, const char *name, const char *adding)
{
    struct stat st;
    return (adding && !strcasecmp(adding, name)) ||
        fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

bool gitscan_gitdir_shaped(int dir, const char *adding)
{
    return has_entry(dir, "HEAD", adding) &&
        ((has_entry(dir, "objects", adding) && has_entry(dir, "refs", adding)) ||
         has_entry(dir, "commondir", adding));
}

bool gitscan_is_gitdir(int dir)
{
    /*
     * Git asks for a valid HEAD and access(X_OK) of objects and refs (of
     * the commondir's, when there is one): a 0755 file refs passes, as does
     * a link to a directory. Any type of each is taken here, so the scans
     * look at whatever git may take for a repository; a directory that
     * merely looks like one costs a look, never a repository missed.
     */
    return gitscan_gitdir_shaped(dir, NULL);
}

bool gitscan_dotgit_name(const char *name, size_t len)
{
    while (len && (name[len - 1] == '.' || name[len - 1] == ' '))
        len--;
    return (len == 4 && !strncasecmp(name, ".git", 4)) ||
        (len == 5 && !strncasecmp(name, "git~1", 5));
}

bool gitscan_hook_inert(const char *name, mode_t mode)
{
    const char *ext = strrchr(name, '.');
    /* No hook git knows ends in .sample: git init's templates are never run. */
    return S_ISREG(mode) && ext && ext > name && !strcmp(ext, ".sample");
}

/* ---- judgements ---- */

struct judge {
    const char *old; /* the config before the run, or NULL */
    size_t olen;
    unsigned depth;
    const char *where;
    struct gitscan_notes *notes;
    struct gitconfig_entry *drop; /* the refused entries (their spans) */
    size_t n_drop, cap;
    bool oom;
};

struct seen {
    const struct gitconfig_entry *e;
    bool found;
};

static bool same(void *ctx, const struct gitconfig_entry *e)
{
    struct seen *s = ctx;
    if (!strcmp(s->e->key, e->key) && !strcmp(s->e->value, e->value) && s->e->bare == e->bare &&
        !s->e->cut && !e->cut)
        s->found = true;
    return !s->found;
}

static bool judge_one(void *ctx, const struct gitconfig_entry *e)
{
    struct judge *j = ctx;
    const struct gitconfig_rule *r = gitconfig_refused(e, j->depth);
    if (!r)
        return true;
    struct seen s = { e, false };
    char why[8];
    if (j->old && gitconfig_parse(j->old, j->olen, same, &s, why, sizeof why) == 0 && s.found)
        return true; /* the user's own, there before the run */
    gitscan_note(j->notes, "refused %s in %s: %s", e->key, j->where, r->why);
    if (j->n_drop == j->cap) {
        size_t cap = j->cap ? 2 * j->cap : 8;
        struct gitconfig_entry *d = realloc(j->drop, cap * sizeof *d);
        if (!d) {
            j->oom = true;
            return false;
        }
        j->drop = d;
        j->cap = cap;
    }
    j->drop[j->n_drop++] = *e;
    return true;
}

enum gitscan_config gitscan_config(const char *new, size_t nlen, const char *old, size_t olen,
                                   unsigned depth, const char *where, struct gitscan_notes *notes,
                                   char *why, size_t why_len, char **keep, size_t *keep_len)
{
    struct gitscan_notes dropped = { 0 };
    struct judge j = {
        .old = old, .olen = olen, .depth = depth, .where = where, .notes = &dropped
    };
    char syntax[128];
    if (keep)
        *keep = NULL;
    if (gitconfig_parse(new, nlen, judge_one, &j, syntax, sizeof syntax) < 0 || j.oom) {
        snprintf(why, why_len, "not git's config syntax (%s)", j.oom ? "out of memory" : syntax);
        free(j.drop);
        return GITSCAN_CONFIG_SYNTAX;
    }
    if (!j.n_drop)
        return GITSCAN_CONFIG_OK;
    /* Noted only now: a file refused for its syntax is one refusal, not one per key. */
    for (unsigned i = 0; i < dropped.n; i++)
        gitscan_note(notes, "%s", dropped.line[i]);
    notes->total += dropped.total - dropped.n;
    if (keep && (*keep = malloc(nlen + 1))) {
        size_t at = 0, out = 0;
        for (size_t i = 0; i < j.n_drop; i++) {
            memcpy(*keep + out, new + at, j.drop[i].start - at);
            out += j.drop[i].start - at;
            at = j.drop[i].end;
        }
        memcpy(*keep + out, new + at, nlen - at);
        out += nlen - at;
        (*keep)[out] = '\0';
        *keep_len = out;
    }
    free(j.drop);
    return GITSCAN_CONFIG_KEYS;
}

bool gitscan_attributes_refused(const char *text, size_t len, char *why, size_t why_len)
{
    static const char *const drivers[] = { "filter", "diff", "merge" };
    const char *end = text + len;
    for (const char *line = text; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *stop = nl ? nl : end;
        /* Each word after the pattern: "attr", "-attr", "!attr" or "attr=value". */
        const char *w = line;
        while (w < stop && isspace((unsigned char)*w))
            w++;
        bool first = true;
        while (w < stop && *w != '#') {
            const char *we = w;
            while (we < stop && !isspace((unsigned char)*we))
                we++;
            for (size_t i = 0; !first && i < sizeof drivers / sizeof drivers[0]; i++) {
                size_t dn = strlen(drivers[i]);
                if ((size_t)(we - w) > dn && !strncmp(w, drivers[i], dn) && w[dn] == '=') {
                    snprintf(why, why_len, "names a %s driver (%.*s)", drivers[i],
                             (int)(we - w > 64 ? 64 : we - w), w);
                    return true;
                }
            }
            first = false;
            w = we;
            while (w < stop && isspace((unsigned char)*w))
                w++;
        }
        line = nl ? nl + 1 : end;
    }
    return false;
}

/* Does the relative path V, from a directory DEPTH levels down, climb out of the workspace? */
static bool climbs_out(const char *v, unsigned depth)
{
    long level = depth;
    for (const char *c = v; *c;) {
        const char *e = strchrnul(c, '/');
        size_t n = (size_t)(e - c);
        if (n == 2 && c[0] == '.' && c[1] == '.') {
            if (--level < 0)
                return true;
        } else if (n && !(n == 1 && c[0] == '.')) {
            level++;
        }
        c = *e ? e + 1 : e;
    }
    return false;
}

enum gitscan_pointer gitscan_pointer(const char *text, size_t len, bool gitdir, unsigned depth,
                                     const char *host_ws, char *out, size_t out_len)
{
    char v[PATH_MAX];
    if (gitdir) {
        if (len < 8 || strncmp(text, "gitdir: ", 8))
            return GITSCAN_POINTER_OUT; /* git refuses it: nothing to keep */
        text += 8;
        len -= 8;
    }
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        len--;
    if (!len || len >= sizeof v || memchr(text, '\0', len) || memchr(text, '\n', len))
        return GITSCAN_POINTER_OUT;
    memcpy(v, text, len);
    v[len] = '\0';
    if (v[0] != '/')
        return climbs_out(v, depth) ? GITSCAN_POINTER_OUT : GITSCAN_POINTER_OK;
    /* Absolute: the workspace as the sandbox shows it (/workspace), or as the host does. */
    const char *rest = NULL;
    size_t hl = strlen(host_ws);
    bool host = !strncmp(v, host_ws, hl) && (v[hl] == '/' || !v[hl]);
    if (host)
        rest = v + hl;
    else if (!strncmp(v, "/workspace", 10) && (v[10] == '/' || !v[10]))
        rest = v + 10;
    if (!rest || climbs_out(rest + strspn(rest, "/"), 0))
        return GITSCAN_POINTER_OUT;
    if (host)
        return GITSCAN_POINTER_OK;
    if ((size_t)snprintf(out, out_len, "%s%s%s\n", gitdir ? "gitdir: " : "", host_ws, rest) >=
        out_len)
        return GITSCAN_POINTER_OUT;
    return GITSCAN_POINTER_REWRITE;
}

/* ---- before the run ---- */

static int keep(struct gitscan *gs, const char *rel, char *data, size_t len, mode_t mode,
                struct cordon_err *err)
{
    if (gs->kept + len > GITSCAN_KEPT_MAX) {
        free(data);
        gs->incomplete = true;
        return 0;
    }
    struct gitscan_file *n = realloc(gs->files, (gs->n_files + 1) * sizeof *n);
    char *r = strdup(rel);
    if (!n || !r) {
        free(r);
        free(data);
        if (n)
            gs->files = n;
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    }
    gs->files = n;
    n[gs->n_files++] = (struct gitscan_file){ .rel = r, .data = data, .len = len, .mode = mode };
    gs->kept += len;
    return 0;
}

/* Keep the file or link NAME of DIR (REL in the workspace), if there. */
static int keep_entry(struct gitscan *gs, int dir, const char *name, const char *rel,
                      struct cordon_err *err)
{
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    size_t len = 0;
    char *data = NULL;
    if (S_ISLNK(st.st_mode)) {
        data = malloc(PATH_MAX);
        ssize_t n = data ? readlinkat(dir, name, data, PATH_MAX - 1) : -1;
        if (n < 0) {
            free(data);
            gs->incomplete = true;
            return 0;
        }
        data[n] = '\0';
        len = (size_t)n;
    } else if (S_ISREG(st.st_mode)) {
        data = gitscan_read(dir, name, GITSCAN_FILE_MAX, &len);
    } else if (S_ISDIR(st.st_mode)) {
        return keep(gs, rel, NULL, 0, st.st_mode, err); /* its entries are kept one by one */
    }
    if (!data) {
        gs->incomplete = true;
        return 0;
    }
    return keep(gs, rel, data, len, st.st_mode, err);
}

static int join(char *out, size_t size, const char *a, const char *b)
{
    int n = snprintf(out, size, "%s%s%s", a, *a ? "/" : "", b);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* Every entry of the directory NAME in DIR (REL/NAME in the workspace), each through EACH. */
static int each_entry(int dir, const char *name, void (*each)(void *, int, const char *), void *ctx)
{
    int fd = open_beneath(dir, name, O_RDONLY | O_DIRECTORY);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            each(ctx, dirfd(d), e->d_name);
    closedir(d);
    return 0;
}

struct record_ctx {
    struct gitscan *gs;
    const char *rel; /* the directory being listed, in the workspace */
    int rc;
    unsigned depth;
    struct cordon_err *err;
};

static void record_hook(void *ctx, int dir, const char *name)
{
    struct record_ctx *c = ctx;
    struct stat st;
    char rel[PATH_MAX];
    if (c->rc || fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        gitscan_hook_inert(name, st.st_mode) || join(rel, sizeof rel, c->rel, name) < 0)
        return;
    c->rc = keep_entry(c->gs, dir, name, rel, c->err);
    /* A hook manager's directory (pre-commit.d/): its scripts are kept too. */
    if (!c->rc && S_ISDIR(st.st_mode) && c->depth < 4) {
        struct record_ctx deeper = { c->gs, rel, 0, c->depth + 1, c->err };
        each_entry(dir, name, record_hook, &deeper);
        c->rc = deeper.rc;
    }
}

static int record_dir(struct gitscan *gs, int g, const char *rel, struct cordon_err *err);

static void record_worktree(void *ctx, int dir, const char *name)
{
    struct record_ctx *c = ctx;
    char rel[PATH_MAX];
    _cleanup_close_ int wt = open_beneath(dir, name, O_RDONLY | O_DIRECTORY);
    if (c->rc || wt < 0 || join(rel, sizeof rel, c->rel, name) < 0)
        return;
    /* A linked worktree's git directory (HEAD, commondir): the walk after the run checks it too. */
    if (gitscan_is_gitdir(wt)) {
        c->rc = record_dir(c->gs, wt, rel, c->err);
        return;
    }
    char file[PATH_MAX];
    if (join(file, sizeof file, rel, "config.worktree") == 0)
        c->rc = keep_entry(c->gs, wt, "config.worktree", file, c->err);
}

/* A submodule's git directory under modules/ (its name may hold slashes): recorded too. */
static void record_module(void *ctx, int dir, const char *name)
{
    struct record_ctx *c = ctx;
    char rel[PATH_MAX];
    _cleanup_close_ int sub = open_beneath(dir, name, O_RDONLY | O_DIRECTORY);
    if (c->rc || sub < 0 || join(rel, sizeof rel, c->rel, name) < 0)
        return;
    if (gitscan_is_gitdir(sub)) {
        c->rc = record_dir(c->gs, sub, rel, c->err);
        return;
    }
    if (c->depth >= 4)
        return;
    struct record_ctx deeper = { c->gs, rel, 0, c->depth + 1, c->err };
    each_entry(sub, ".", record_module, &deeper);
    c->rc = deeper.rc;
}

/* The git directory G, REL in the workspace. */
static int record_dir(struct gitscan *gs, int g, const char *rel, struct cordon_err *err)
{
    if (gs->n_repos >= GITSCAN_REPOS_MAX) {
        gs->incomplete = true;
        return 0;
    }
    gs->n_repos++;
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        if (join(path, sizeof path, rel, configs[i]) == 0)
            TRY(keep_entry(gs, g, configs[i], path, err));
    _cleanup_close_ int info = open_beneath(g, "info", O_PATH | O_DIRECTORY);
    if (info >= 0 && join(path, sizeof path, rel, "info/attributes") == 0)
        TRY(keep_entry(gs, info, "attributes", path, err));
    if (info < 0 && join(path, sizeof path, rel, "info") == 0)
        TRY(keep_entry(gs, g, "info", path, err)); /* a link: what it led to */
    char sub[PATH_MAX];
    struct record_ctx c = { gs, sub, 0, 0, err };
    if (join(path, sizeof path, rel, "hooks") == 0)
        TRY(keep_entry(gs, g, "hooks", path, err));
    if (join(sub, sizeof sub, rel, "hooks") == 0)
        each_entry(g, "hooks", record_hook, &c);
    if (!c.rc && join(sub, sizeof sub, rel, "worktrees") == 0)
        each_entry(g, "worktrees", record_worktree, &c);
    if (!c.rc && join(sub, sizeof sub, rel, "modules") == 0)
        each_entry(g, "modules", record_module, &c);
    return c.rc;
}

int gitscan_record(struct gitscan *gs, int ws, const char *rel, struct cordon_err *err)
{
    _cleanup_close_ int g = open_beneath(ws, rel, O_RDONLY | O_DIRECTORY);
    if (g < 0) {
        gs->incomplete = true;
        return 0;
    }
    return record_dir(gs, g, rel, err);
}

void gitscan_release(struct gitscan *gs)
{
    for (size_t i = 0; i < gs->n_files; i++) {
        free(gs->files[i].rel);
        free(gs->files[i].data);
    }
    free(gs->files);
    *gs = (struct gitscan){ 0 };
}

/* ---- after the run ---- */

static const struct gitscan_file *kept(const struct gitscan *gs, const char *rel)
{
    for (size_t i = 0; i < gs->n_files; i++)
        if (!strcmp(gs->files[i].rel, rel))
            return &gs->files[i];
    return NULL;
}

/*
 * NAME in DIR becomes LEN bytes of DATA (a link to DATA when MODE is one),
 * with MODE: a new entry renamed over whatever stood there. 0 or -1.
 */
static int put(int dir, const char *name, const char *data, size_t len, mode_t mode)
{
    static unsigned seq;
    char tmp[64];
    snprintf(tmp, sizeof tmp, ".cordon-git-%d-%u", (int)getpid(), seq++);
    int rc = -1;
    if (S_ISLNK(mode)) {
        rc = symlinkat(data, dir, tmp);
    } else {
        _cleanup_close_ int fd =
            openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        size_t done = 0;
        ssize_t w = 0;
        while (fd >= 0 && done < len && (w = write(fd, data + done, len - done)) > 0)
            done += (size_t)w;
        rc = fd >= 0 && done == len && fchmod(fd, mode & 07777) == 0 ? 0 : -1;
    }
    if (rc == 0 && renameat(dir, tmp, dir, name) == 0)
        return 0;
    unlinkat(dir, tmp, 0);
    return -1;
}

/* Is NAME in DIR what K holds (or, K NULL, absent)? */
static bool as_kept(int dir, const char *name, const struct gitscan_file *k)
{
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return !k && errno == ENOENT;
    if (!k || (st.st_mode & (S_IFMT | 07777)) != (k->mode & (S_IFMT | 07777)))
        return false;
    if (S_ISLNK(st.st_mode)) {
        char t[PATH_MAX];
        ssize_t n = readlinkat(dir, name, t, sizeof t - 1);
        return n >= 0 && (size_t)n == k->len && !memcmp(t, k->data, k->len);
    }
    size_t len = 0;
    _cleanup_free_ char *now = gitscan_read(dir, name, GITSCAN_FILE_MAX, &len);
    return now && len == k->len && !memcmp(now, k->data, len);
}

/* NAME in DIR put back as K holds it, or removed when K is NULL. */
static bool undo(int dir, const char *name, const struct gitscan_file *k)
{
    if (k)
        return put(dir, name, k->data, k->len, k->mode) == 0;
    hostpath_remove_at(dir, name);
    return faccessat(dir, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0;
}

struct check {
    const struct gitscan *gs;
    const char *rel; /* the git directory, in the workspace */
    unsigned depth;
    struct gitscan_notes *notes;
    bool *incomplete;
};

/* The config NAME of DIR (REL in the workspace): the refused entries taken out. */
static void check_config(const struct check *c, int dir, const char *name, const char *rel)
{
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    const struct gitscan_file *k = kept(c->gs, rel);
    if (as_kept(dir, name, k))
        return;
    char why[256];
    size_t len = 0, klen = 0;
    _cleanup_free_ char *now =
        S_ISREG(st.st_mode) ? gitscan_read(dir, name, GITSCAN_FILE_MAX, &len) : NULL;
    _cleanup_free_ char *rest = NULL;
    enum gitscan_config v = GITSCAN_CONFIG_SYNTAX;
    if (!now)
        snprintf(why, sizeof why, "not a regular file of at most %u bytes", GITSCAN_FILE_MAX);
    else
        v = gitscan_config(now, len, k && S_ISREG(k->mode) ? k->data : NULL, k ? k->len : 0,
                           c->depth, rel, c->notes, why, sizeof why, &rest, &klen);
    if (v == GITSCAN_CONFIG_OK)
        return;
    bool done = rest ? put(dir, name, rest, klen, st.st_mode) == 0 : undo(dir, name, k);
    if (!rest)
        gitscan_note(c->notes, "%s %s: %s", k ? "put back" : "removed", rel, why);
    if (!done)
        *c->incomplete = true;
}

/*
 * The hooks tree: NAME in DIR (REL in the workspace) and what is beneath,
 * as kept before the run. A hook (an entry git runs, or a hook manager's
 * script beneath) made, changed or removed by the run is removed or put
 * back; .sample files are never run and stay as they are.
 */
static void check_hooks(const struct check *c, int dir, const char *name, const char *rel,
                        unsigned depth);

/* The kept entries directly beneath REL that are gone: put back. */
static void put_back_beneath(const struct check *c, int dir, const char *rel, unsigned depth)
{
    size_t rl = strlen(rel);
    for (size_t i = 0; i < c->gs->n_files; i++) {
        const struct gitscan_file *k = &c->gs->files[i];
        const char *child = k->rel + rl + 1;
        struct stat st;
        if (strncmp(k->rel, rel, rl) || k->rel[rl] != '/' || strchr(child, '/') ||
            fstatat(dir, child, &st, AT_SYMLINK_NOFOLLOW) == 0)
            continue;
        check_hooks(c, dir, child, k->rel, depth + 1);
    }
}

/* NAME in DIR becomes what K holds: a file or link's bytes, a directory and what was in it. */
static bool restore(const struct check *c, int dir, const char *name, const struct gitscan_file *k,
                    unsigned depth)
{
    if (!S_ISDIR(k->mode))
        return put(dir, name, k->data, k->len, k->mode) == 0;
    hostpath_remove_at(dir, name);
    if (mkdirat(dir, name, k->mode & 07777) < 0)
        return false;
    _cleanup_close_ int sub = open_beneath(dir, name, O_PATH | O_DIRECTORY);
    if (sub >= 0)
        put_back_beneath(c, sub, k->rel, depth);
    return sub >= 0;
}

struct hooks {
    const struct check *c;
    const char *rel;
    unsigned depth;
};

static void check_hook_entry(void *ctx, int dir, const char *name)
{
    const struct hooks *h = ctx;
    char rel[PATH_MAX];
    if (join(rel, sizeof rel, h->rel, name) == 0)
        check_hooks(h->c, dir, name, rel, h->depth + 1);
}

static void check_hooks(const struct check *c, int dir, const char *name, const char *rel,
                        unsigned depth)
{
    struct stat st;
    const struct gitscan_file *k = kept(c->gs, rel);
    bool there = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (there && gitscan_hook_inert(name, st.st_mode))
        return;
    if (there && S_ISDIR(st.st_mode) && (!k || S_ISDIR(k->mode)) && depth < 8) {
        struct hooks h = { c, rel, depth };
        each_entry(dir, name, check_hook_entry, &h);
        _cleanup_close_ int sub = open_beneath(dir, name, O_PATH | O_DIRECTORY);
        if (sub >= 0 && k)
            put_back_beneath(c, sub, rel, depth);
        return;
    }
    if (there ? as_kept(dir, name, k) : !k)
        return;
    bool done = k ? restore(c, dir, name, k, depth) : undo(dir, name, NULL);
    if (!done)
        *c->incomplete = true;
    gitscan_note(c->notes, "%s %s", k ? "put back the hook" : "removed the hook", rel);
}

/*
 * Does the commondir path PATH of DIR lead, as git follows it (from DIR,
 * through links), to a directory the scan takes for a git directory? Git
 * takes the config, hooks and info/ of the common dir, not DIR's. One
 * that is no repository of its own (objects, refs and a config, no HEAD)
 * is never scanned: the pointer to it is removed rather than the common
 * dir scanned too, as what that held before the run was never recorded
 * (a linked worktree's leads to the main .git, a repository, scanned).
 */
static bool common_scanned(int dir, const char *path)
{
    struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                            .resolve = RESOLVE_NO_MAGICLINKS };
    _cleanup_close_ int fd = sys_openat2(dir, path, &how, sizeof how);
    return fd >= 0 && gitscan_is_gitdir(fd);
}

/* NAME of DIR (REL) removed for WHY: noted, or the scan incomplete. */
static void drop_pointer(const struct check *c, int dir, const char *name, const char *rel,
                         const char *why)
{
    if (!undo(dir, name, NULL))
        *c->incomplete = true;
    gitscan_note(c->notes, "removed %s (%s)", rel, why);
}

/*
 * A pointer file (a commondir, a worktree's gitdir) NAME of DIR, DEPTH
 * below the root. A commondir (REFUSE) that leads out of the workspace, to
 * no repository, or that git reads but the scan cannot (a link, a large
 * file) is removed; a worktree's gitdir (where it is, for prune and list:
 * nothing runs) is only rewritten.
 */
static void check_pointer(const struct check *c, int dir, const char *name, const char *rel,
                          unsigned depth, const char *host_ws, bool refuse)
{
    size_t len = 0;
    char out[PATH_MAX + 16];
    struct stat st;
    _cleanup_free_ char *text = gitscan_read(dir, name, 4096, &len);
    if (!text) {
        /* Git reads any file by that name, through a link: one not read here goes. */
        if (refuse && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            drop_pointer(c, dir, name, rel, "not a regular file of at most 4096 bytes");
        return;
    }
    enum gitscan_pointer v = gitscan_pointer(text, len, false, depth, host_ws, out, sizeof out);
    if (v == GITSCAN_POINTER_REWRITE && put(dir, name, out, strlen(out), 0644) < 0)
        *c->incomplete = true;
    if (v == GITSCAN_POINTER_OUT && refuse) {
        drop_pointer(c, dir, name, rel, "it leads out of the workspace");
        return;
    }
    if (!refuse || v == GITSCAN_POINTER_OUT)
        return;
    char *path = v == GITSCAN_POINTER_REWRITE ? out : text;
    for (size_t n = strlen(path); n && (path[n - 1] == '\n' || path[n - 1] == '\r');)
        path[--n] = '\0'; /* as git trims it */
    if (!common_scanned(dir, path))
        drop_pointer(c, dir, name, rel, "its common dir is no repository the scan checks");
}

/* info/attributes (in INFO, REL in the workspace): one naming a driver put back or removed. */
static void check_attributes(const struct check *c, int info, const char *rel)
{
    struct stat st;
    const struct gitscan_file *k = kept(c->gs, rel);
    if (fstatat(info, "attributes", &st, AT_SYMLINK_NOFOLLOW) < 0 || as_kept(info, "attributes", k))
        return;
    size_t len = 0;
    char why[160] = "not a regular file";
    _cleanup_free_ char *text = gitscan_read(info, "attributes", GITSCAN_FILE_MAX, &len);
    if (text && !gitscan_attributes_refused(text, len, why, sizeof why))
        return;
    if (!undo(info, "attributes", k))
        *c->incomplete = true;
    gitscan_note(c->notes, "%s %s: %s", k ? "put back" : "removed", rel, why);
}

/*
 * info/ a link (REL): git reads info/attributes through it, the scan does
 * not. One the run made or changed is removed, or put back as it was.
 */
static void check_info_link(const struct check *c, int dir, const char *rel)
{
    struct stat st;
    if (fstatat(dir, "info", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode))
        return;
    const struct gitscan_file *k = kept(c->gs, rel);
    if (k && !S_ISLNK(k->mode))
        k = NULL;
    if (as_kept(dir, "info", k))
        return;
    if (!undo(dir, "info", k))
        *c->incomplete = true;
    gitscan_note(c->notes, "%s %s (a link git reads info/attributes through)",
                 k ? "put back" : "removed", rel);
}

struct worktrees {
    const struct check *c;
    const char *host_ws;
};

static void check_worktree(void *ctx, int dir, const char *name)
{
    const struct worktrees *w = ctx;
    const struct check *c = w->c;
    char rel[PATH_MAX], file[PATH_MAX];
    _cleanup_close_ int wt = open_beneath(dir, name, O_PATH | O_DIRECTORY);
    if (wt < 0 || snprintf(rel, sizeof rel, "%s/worktrees/%s", c->rel, name) >= (int)sizeof rel)
        return;
    if (join(file, sizeof file, rel, "config.worktree") == 0)
        check_config(c, wt, "config.worktree", file);
    if (join(file, sizeof file, rel, "commondir") == 0)
        check_pointer(c, wt, "commondir", file, c->depth + 2, w->host_ws, true);
    /* Where the worktree is, for prune and list: rewritten, never refused (nothing runs). */
    if (join(file, sizeof file, rel, "gitdir") == 0)
        check_pointer(c, wt, "gitdir", file, c->depth + 2, w->host_ws, false);
}

void gitscan_dir(const struct gitscan *gs, int dir, const char *rel, unsigned depth,
                 const char *host_ws, struct gitscan_notes *notes, bool *incomplete)
{
    struct check c = { gs, rel, depth, notes, incomplete };
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        if (join(path, sizeof path, rel, configs[i]) == 0)
            check_config(&c, dir, configs[i], path);
    if (join(path, sizeof path, rel, "hooks") == 0)
        check_hooks(&c, dir, "hooks", path, 0);
    _cleanup_close_ int info = open_beneath(dir, "info", O_PATH | O_DIRECTORY);
    if (info >= 0 && join(path, sizeof path, rel, "info/attributes") == 0)
        check_attributes(&c, info, path);
    if (info < 0 && join(path, sizeof path, rel, "info") == 0)
        check_info_link(&c, dir, path);
    struct worktrees w = { &c, host_ws };
    each_entry(dir, "worktrees", check_worktree, &w);
    if (join(path, sizeof path, rel, "commondir") == 0)
        check_pointer(&c, dir, "commondir", path, depth, host_ws, true);
}

bool gitscan_gitfile(int dir, const char *name, const char *rel, unsigned depth,
                     const char *host_ws, struct gitscan_notes *notes)
{
    size_t len = 0;
    char out[PATH_MAX + 16];
    _cleanup_free_ char *text = gitscan_read(dir, name, 4096, &len);
    enum gitscan_pointer v = text
        ? gitscan_pointer(text, len, true, depth, host_ws, out, sizeof out)
        : GITSCAN_POINTER_OUT;
    if (v == GITSCAN_POINTER_OK)
        return true;
    if (v == GITSCAN_POINTER_REWRITE && put(dir, name, out, strlen(out), 0644) == 0)
        return true;
    hostpath_remove_at(dir, name);
    gitscan_note(notes, "removed %s (a gitdir link out of the workspace)", rel);
    return false;
}
