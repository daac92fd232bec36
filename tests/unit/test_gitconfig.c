/*
 * tests/unit/test_gitconfig.c: git's config syntax as git 2.39 reads it
 * (each case's keys and values, or the refusal), and which keys the run may
 * not leave in a repository's config; which directories the post-run scan
 * takes for git directories, and the commondir pointers it removes.
 */
#include "tap.h"

#include "policy/gitconfig.h"
#include "sandbox/gitscan.h"

#include "common/cleanup.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct parse_case {
    const char *text;
    const char *want; /* "key=value;..." ("key" alone when bare), or "!why" */
};

static const struct parse_case parse_cases[] = {
    { "[core]\n\tfsmonitor = evil\n", "core.fsmonitor=evil;" },
    { "[Core]\nFSMonitor=evil", "core.fsmonitor=evil;" },
    { "\xef\xbb\xbf[core]\n\tbare\n", "core.bare;" },
    { "[core] pager = less # a comment\n", "core.pager=less;" },
    { "[core]\n pager = \"less ; -R\" ; a comment\n", "core.pager=less ; -R;" },
    { "[core]\n editor = a  \\\n b\n", "core.editor=a   b;" }, /* as git: each blank one */
    { "[core]\n editor = \"a\\tb\\\\\\\"\"\n", "core.editor=a\tb\\\";" },
    { "[remote \"Origin\"]\n url = x\n", "remote.Origin.url=x;" },
    { "[remote \"a\\\"b\"]\n url = x\n", "remote.a\"b.url=x;" },
    { "[remote.Origin]\n url = x\n", "remote.origin.url=x;" },
    { "[filter \"lfs\"]\n\tsmudge = git-lfs smudge %f\n", "filter.lfs.smudge=git-lfs smudge %f;" },
    { "# only a comment\n; another\n\n", "" },
    { "[a]\r\nb = c\r\n", "a.b=c;" },
    { "[a] b = 1\n[c]\nd\n", "a.b=1;c.d;" },
    { "[include]\n\tpath = ../x\n", "include.path=../x;" },
    { "key = outside\n", "!line 1: a key outside any section" },
    { "[core\n", "!line 1: incomplete section header" },
    { "[co;re]\n", "!line 1: bad character in a section name" },
    { "[core x]\n", "!line 1: a section's subsection must be quoted" },
    { "[core]\n 1key = v\n", "!line 2: a key must begin with a letter" },
    { "[core]\n key v\n", "!line 2: a key must be followed by '=' or the line's end" },
    { "[core]\n key = \"open\n", "!line 2: unterminated quote in a value" },
    { "[core]\n key = a\\qb\n", "!line 2: bad escape in a value" },
    { "[]\n", "!line 1: empty section name" },
};

struct collect {
    char out[512];
};

static bool each(void *ctx, const struct gitconfig_entry *e)
{
    struct collect *c = ctx;
    size_t n = strlen(c->out);
    snprintf(c->out + n, sizeof c->out - n, e->bare ? "%s;" : "%s=%s;", e->key, e->value);
    return true;
}

static bool spans(void *ctx, const struct gitconfig_entry *e)
{
    struct collect *c = ctx;
    size_t n = strlen(c->out);
    snprintf(c->out + n, sizeof c->out - n, "%zu-%zu;", e->start, e->end);
    return true;
}

struct rule_case {
    const char *key, *value;
    bool bare;
    unsigned depth;
    bool refused;
};

static const struct rule_case rule_cases[] = {
    { "core.fsmonitor", "true", false, 1, true },
    { "core.hookspath", "hooks", false, 1, true },
    { "core.pager", "less", false, 1, true },
    { "core.filemode", "true", false, 1, false },
    { "core.worktree", "../../sub", false, 3, false }, /* a submodule's, inside */
    { "core.worktree", "../../../../x", false, 1, true },
    { "core.worktree", "/home/x", false, 1, true },
    { "alias.st", "status", false, 1, true },
    { "alias.x", "!sh", false, 1, true },
    { "pager.branch", "false", false, 1, false },
    { "pager.log", "", true, 1, false },
    { "pager.log", "less -R", false, 1, true },
    { "diff.lfs.textconv", "cat", false, 1, true },
    { "diff.lfs.binary", "true", false, 1, false },
    { "diff.command", "x", false, 1, false },
    { "filter.lfs.process", "git-lfs filter-process", false, 1, true },
    { "filter.lfs.required", "true", false, 1, false },
    { "credential.https://x.example.helper", "store", false, 1, true },
    { "remote.origin.url", "https://example.com/r.git", false, 1, false },
    { "remote.origin.url", "ext::sh -c evil", false, 1, true },
    { "remote.origin.uploadpack", "evil", false, 1, true },
    { "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*", false, 1, false },
    { "url.https://evil/.insteadof", "https://github.com/", false, 1, true },
    { "submodule.s.update", "!evil", false, 1, true },
    { "submodule.s.update", "rebase", false, 1, false },
    { "includeif.gitdir:/x/.path", "y", false, 1, true },
    { "lfs.customtransfer.x.path", "evil", false, 1, true },
    { "lfs.url", "https://lfs.example", false, 1, false },
    { "user.name", "agent", false, 1, false },
    { "branch.main.remote", "origin", false, 1, false },
    { "gpg.ssh.program", "evil", false, 1, true },
    { "sendemail.smtpserver", "/bin/evil", false, 1, true },
};

struct pointer_case {
    const char *text;
    bool gitdir;
    unsigned depth;
    enum gitscan_pointer want;
    const char *out;
};

static const struct pointer_case pointer_cases[] = {
    { "gitdir: ../.git/modules/sub\n", true, 1, GITSCAN_POINTER_OK, NULL },
    { "gitdir: ../../x\n", true, 1, GITSCAN_POINTER_OUT, NULL },
    { "gitdir: /workspace/.git/worktrees/wt\n", true, 1, GITSCAN_POINTER_REWRITE,
      "gitdir: /home/u/ws/.git/worktrees/wt\n" },
    { "gitdir: /home/u/ws/.git\n", true, 1, GITSCAN_POINTER_OK, NULL },
    { "gitdir: /home/u/other/.git\n", true, 1, GITSCAN_POINTER_OUT, NULL },
    { "gitdir: /workspace/../etc\n", true, 1, GITSCAN_POINTER_OUT, NULL },
    { "gitdir: /home/u/wsx/.git\n", true, 1, GITSCAN_POINTER_OUT, NULL },
    { "nonsense\n", true, 1, GITSCAN_POINTER_OUT, NULL },
    { "../..\n", false, 3, GITSCAN_POINTER_OK, NULL }, /* a worktree's commondir */
    { "../../../..\n", false, 3, GITSCAN_POINTER_OUT, NULL },
    { "/workspace/wt/.git\n", false, 3, GITSCAN_POINTER_REWRITE, "/home/u/ws/wt/.git\n" },
};

struct config_case {
    const char *now, *before;
    enum gitscan_config want;
    const char *kept; /* what the file keeps (KEYS) */
};

static const struct config_case config_cases[] = {
    { "[user]\n\tname = a\n", NULL, GITSCAN_CONFIG_OK, NULL },
    { "[core]\n\tbare = false\n\tfsmonitor = x\n[user]\n\tname = a\n", NULL, GITSCAN_CONFIG_KEYS,
      "[core]\n\tbare = false\n[user]\n\tname = a\n" },
    { "[alias]\n\tmine = !echo\n\tnew = !evil\n", "[alias]\n\tmine = !echo\n", GITSCAN_CONFIG_KEYS,
      "[alias]\n\tmine = !echo\n" }, /* the user's own stays */
    { "[alias]\n\tmine = !other\n", "[alias]\n\tmine = !echo\n", GITSCAN_CONFIG_KEYS,
      "[alias]\n" }, /* the same key, a new value */
    { "[core]\n\tpager = a \\\n\t\tb\n\teditor=c\n", NULL, GITSCAN_CONFIG_KEYS,
      "[core]\n" }, /* a continued line goes whole */
    { "[core\n", NULL, GITSCAN_CONFIG_SYNTAX, NULL },
};

/*
 * PATH (beneath TOP) made: a directory when it ends in '/', a link to TEXT
 * when MODE is S_IFLNK, else a file of TEXT with MODE.
 */
static void make(int top, const char *path, const char *text, mode_t mode)
{
    size_t n = strlen(path);
    if (mode == S_IFLNK) {
        if (symlinkat(text, top, path) < 0)
            ok(0, "symlink %s", path);
        return;
    }
    if (path[n - 1] == '/') {
        char dir[256];
        snprintf(dir, sizeof dir, "%.*s", (int)(n - 1), path);
        mkdirat(top, dir, 0755);
        return;
    }
    _cleanup_close_ int fd = openat(top, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        ok(0, "write %s", path);
}

static bool is_gitdir(int top, const char *path)
{
    _cleanup_close_ int fd = openat(top, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd >= 0 && gitscan_is_gitdir(fd);
}

/* gitscan_dir() on PATH (DEPTH below TOP) with nothing kept before: the notes' first line. */
static const char *scan(int top, const char *path, unsigned depth, struct gitscan_notes *notes)
{
    struct gitscan gs = { 0 };
    bool incomplete = false;
    *notes = (struct gitscan_notes){ 0 };
    _cleanup_close_ int fd = openat(top, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
        gitscan_dir(&gs, fd, path, depth, "/nonexistent/ws", notes, &incomplete);
    return notes->n ? notes->line[0] : "";
}

/*
 * What git 2.39 takes for a git directory (is_git_directory(): a valid
 * HEAD, access(X_OK) of objects and refs, or of the commondir's) the scan
 * takes for one too; a commondir to a directory it does not scan goes.
 */
static void gitdir_shapes(void)
{
    char tmp[] = "/tmp/cordon-unit-gitscan-XXXXXX";
    if (!mkdtemp(tmp)) {
        ok(0, "mkdtemp");
        return;
    }
    _cleanup_close_ int top = open(tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
    const char *head = "ref: refs/heads/main\n";
    make(top, "plain/", NULL, 0);
    make(top, "plain/HEAD", head, 0644);
    make(top, "plain/objects/", NULL, 0);
    ok(!is_gitdir(top, "plain"), "HEAD and objects alone: no git directory");
    make(top, "plain/refs/", NULL, 0);
    ok(is_gitdir(top, "plain"), "HEAD, objects and refs: one");
    make(top, "file/", NULL, 0);
    make(top, "file/HEAD", head, 0644);
    make(top, "file/objects/", NULL, 0);
    make(top, "file/refs", "#!/bin/sh\n", 0755);
    ok(is_gitdir(top, "file"), "a 0755 file refs passes git's access(X_OK): one");
    make(top, "links/", NULL, 0);
    make(top, "links/HEAD", "refs/heads/main", S_IFLNK);
    make(top, "links/objects", "../plain/objects", S_IFLNK);
    make(top, "links/refs", "../plain/refs", S_IFLNK);
    ok(is_gitdir(top, "links"), "HEAD, objects and refs as links: one");
    make(top, "common/", NULL, 0);
    make(top, "common/objects/", NULL, 0);
    make(top, "common/refs/", NULL, 0);
    ok(!is_gitdir(top, "common"), "objects and refs with no HEAD: none of its own");
    make(top, "wt/", NULL, 0);
    make(top, "wt/HEAD", head, 0644);
    make(top, "wt/commondir", "../common\n", 0644);
    ok(is_gitdir(top, "wt"), "HEAD and a commondir: one");

    struct gitscan_notes notes;
    is_str(scan(top, "wt", 1, &notes),
           "removed wt/commondir (its common dir is no repository the scan checks)",
           "a commondir to a directory with no HEAD is removed");
    ok(faccessat(top, "wt/commondir", F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
           faccessat(top, "wt/HEAD", F_OK, 0) == 0,
       "the pointer is gone, the rest stays");
    make(top, "wt/commondir", "../plain\n", 0644);
    ok(!*scan(top, "wt", 1, &notes) && faccessat(top, "wt/commondir", F_OK, 0) == 0,
       "one to a repository the scan checks (a linked worktree's main .git) stays");
    make(top, "plain/worktrees/", NULL, 0);
    make(top, "plain/worktrees/w/", NULL, 0);
    make(top, "plain/worktrees/w/HEAD", head, 0644);
    make(top, "plain/worktrees/w/commondir", "../..\n", 0644);
    ok(!*scan(top, "plain", 1, &notes) && !*scan(top, "plain/worktrees/w", 3, &notes) &&
           faccessat(top, "plain/worktrees/w/commondir", F_OK, 0) == 0,
       "a linked worktree's commondir stays, scanned from the repository or on its own");
    make(top, "common-path", "../common\n", 0644);
    unlinkat(top, "wt/commondir", 0);
    make(top, "wt/commondir", "../common-path", S_IFLNK);
    is_str(scan(top, "wt", 1, &notes),
           "removed wt/commondir (not a regular file of at most 4096 bytes)",
           "a commondir git reads through a link is removed");
    make(top, "elsewhere/", NULL, 0);
    make(top, "elsewhere/attributes", "* filter=x\n", 0644);
    make(top, "plain/info", "../elsewhere", S_IFLNK);
    is_str(scan(top, "plain", 1, &notes),
           "removed plain/info (a link git reads info/attributes through)",
           "an info/ link is removed: git reads attributes through it, the scan does not");
    char rm[64];
    snprintf(rm, sizeof rm, "rm -rf '%s'", tmp);
    if (system(rm) != 0)
        ok(0, "%s", rm);
}

int main(void)
{
    for (size_t i = 0; i < sizeof pointer_cases / sizeof pointer_cases[0]; i++) {
        const struct pointer_case *c = &pointer_cases[i];
        char out[256] = "";
        enum gitscan_pointer got = gitscan_pointer(c->text, strlen(c->text), c->gitdir, c->depth,
                                                   "/home/u/ws", out, sizeof out);
        ok(got == c->want && (!c->out || !strcmp(out, c->out)), "pointer %s: %d%s%s",
           tap_show(c->text), got, c->out ? " " : "", c->out ? tap_show(out) : "");
    }
    for (size_t i = 0; i < sizeof config_cases / sizeof config_cases[0]; i++) {
        const struct config_case *c = &config_cases[i];
        struct gitscan_notes notes = { 0 };
        char why[256] = "", *kept = NULL;
        size_t kl = 0;
        enum gitscan_config got =
            gitscan_config(c->now, strlen(c->now), c->before, c->before ? strlen(c->before) : 0, 1,
                           ".git/config", &notes, why, sizeof why, &kept, &kl);
        ok(got == c->want && (!c->kept || (kept && !strcmp(kept, c->kept))) &&
               (got != GITSCAN_CONFIG_KEYS || notes.n >= 1),
           "config %s: %d, %u noted%s", tap_show(c->now), got, notes.n,
           got == GITSCAN_CONFIG_KEYS && notes.n ? "" : why);
        if (kept && c->kept && strcmp(kept, c->kept))
            printf("#   kept: %s\n", tap_show(kept));
        free(kept);
    }
    static const struct {
        const char *text;
        bool refused;
    } attrs[] = {
        { "*.c diff=cpp\n", true },
        { "* text=auto eol=lf\n", false },
        { "*.bin -diff -merge binary\n", false },
        { "a filter=lfs\n", true },
        { "# filter=x\n", false },
        { "[attr]m merge=evil\n", true },
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        char why[160];
        ok(gitscan_attributes_refused(attrs[i].text, strlen(attrs[i].text), why, sizeof why) ==
               attrs[i].refused,
           "attributes %s %s", tap_show(attrs[i].text), attrs[i].refused ? "refused" : "allowed");
    }
    ok(gitscan_hook_inert("pre-commit.sample", S_IFREG | 0755) &&
           !gitscan_hook_inert("pre-commit", S_IFREG | 0644) &&
           !gitscan_hook_inert("x.sample", S_IFLNK | 0777),
       "hooks: a .sample file is never run; a hook's name or a link is judged");
    for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
        const struct parse_case *c = &parse_cases[i];
        struct collect col = { "" };
        char why[128] = "", got[600];
        int rc = gitconfig_parse(c->text, strlen(c->text), each, &col, why, sizeof why);
        snprintf(got, sizeof got, "%s%s", rc < 0 ? "!" : "", rc < 0 ? why : col.out);
        is_str(got, c->want, tap_show(c->text));
    }
    for (size_t i = 0; i < sizeof rule_cases / sizeof rule_cases[0]; i++) {
        const struct rule_case *c = &rule_cases[i];
        struct gitconfig_entry e = { .bare = c->bare };
        snprintf(e.key, sizeof e.key, "%s", c->key);
        snprintf(e.value, sizeof e.value, "%s", c->value);
        ok((gitconfig_refused(&e, c->depth) != NULL) == c->refused, "%s = %s: %s", c->key, c->value,
           c->refused ? "refused" : "allowed");
    }
    /* A subsection past the key's bound hides the name a rule matches: refused whole. */
    char long_config[600];
    snprintf(long_config, sizeof long_config, "[credential \"https://%0300d\"]\n\thelper = !evil\n",
             0);
    struct gitscan_notes long_notes = { 0 };
    char long_why[256] = "", *long_kept = NULL;
    size_t long_kl = 0;
    ok(gitscan_config(long_config, strlen(long_config), NULL, 0, 1, ".git/config", &long_notes,
                      long_why, sizeof long_why, &long_kept, &long_kl) == GITSCAN_CONFIG_KEYS &&
           long_kept && !strstr(long_kept, "evil"),
       "a credential helper behind a 300-byte subsection is refused");
    free(long_kept);
    /* An entry's bytes: whole lines, or from the key after a header on its line. */
    const char *text = "[core]\n\tpager = less\n[x] k = v \\\n w\n";
    struct collect col = { "" };
    char why[128];
    gitconfig_parse(text, strlen(text), spans, &col, why, sizeof why);
    is_str(col.out, "7-21;25-36;", "entries span whole lines, or start at the key");
    size_t n = 0;
    const struct gitconfig_rule *rules = gitconfig_rules(&n);
    for (size_t i = 0; i < n; i++)
        ok(rules[i].pattern[0] && strlen(rules[i].why) > 8, "rule %s has a reason",
           rules[i].pattern);
    gitdir_shapes();
    return done_testing();
}
