/*
 * tests/unit/test_wsfile.c: wsfile_check_path, the daemon's first check on
 * every path a client names in a session or a run's files, and
 * wsfile_normalize, sandboxd's and a process cwd's (openat2 then confines
 * what passes); what sandboxd's writes take for a .git or a git directory
 * (gitscan_dotgit_name, gitscan_gitdir_shaped) and an emptying that keeps
 * some entries (wsfile_empty_dir).
 */
#include "daemon/workspace_files.h"

#include "common/cleanup.h"
#include "common/hostpath.h"
#include "sandbox/gitscan.h"
#include "tap.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct path_case {
    const char *path;
    const char *why; /* NULL: accepted */
};

static const struct path_case cases[] = {
    { "a.txt", NULL },
    { "src/main.py", NULL },
    { ".hidden/x", NULL },
    { "..x/y...", NULL },
    { "", "path must be relative to the workspace, got \"\"" },
    { "/etc/passwd", "path must be relative to the workspace, got \"/etc/passwd\"" },
    { "../x", "path \"../x\" has an empty, \".\" or \"..\" component" },
    { "a/../../x", "path \"a/../../x\" has an empty, \".\" or \"..\" component" },
    { "a//b", "path \"a//b\" has an empty, \".\" or \"..\" component" },
    { "a/./b", "path \"a/./b\" has an empty, \".\" or \"..\" component" },
    { "a/", "path \"a/\" has an empty, \".\" or \"..\" component" },
    { ".", "path \".\" has an empty, \".\" or \"..\" component" },
    { "..", "path \"..\" has an empty, \".\" or \"..\" component" },
};

struct norm_case {
    const char *path;
    int rc;
    const char *want;
};

static const struct norm_case norms[] = {
    { "", 0, "." },
    { "/", 0, "." },
    { "././/", 0, "." },
    { "a", 0, "a" },
    { "/a//b/./c/", 0, "a/b/c" },
    { "..x/y..", 0, "..x/y.." },
    { "..", WSFILE_PATH_UP, NULL },
    { "a/../b", WSFILE_PATH_UP, NULL },
    { "/a/b/..", WSFILE_PATH_UP, NULL },
};

static void normalize(void)
{
    for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++) {
        char out[64] = "";
        int rc = wsfile_normalize(norms[i].path, out, sizeof out);
        ok(rc == norms[i].rc, "normalize %s: %d", tap_show(norms[i].path), rc);
        if (norms[i].want)
            is_str(out, norms[i].want, tap_show(norms[i].path));
    }
    char out[8];
    ok(wsfile_normalize("abc/defg", out, sizeof out) == -1, "a result that does not fit");
    char name[300];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    char big[512];
    ok(wsfile_normalize(name, big, sizeof big) == -1, "a name past NAME_MAX");
}

static void dotgit(void)
{
    static const char *const yes[] = {
        ".git", ".GIT", ".Git", ".git.", ".git ..", "git~1", "GIT~1"
    };
    static const char *const no[] = { "git",   ".gitignore", ".git.bak", ".gi",
                                      "x.git", "git~2",      ".git~1" };
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        ok(gitscan_dotgit_name(yes[i], strlen(yes[i])), "'%s' is a .git", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        ok(!gitscan_dotgit_name(no[i], strlen(no[i])), "'%s' is no .git", no[i]);
    ok(gitscan_dotgit_name(".git/config", 4), "a component's length counts, not the string's");
}

static void make(int dir, const char *name, bool is_dir)
{
    if (is_dir)
        mkdirat(dir, name, 0755);
    else
        close(openat(dir, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
}

static bool keep_git(int dir, const char *name, const char *rel, void *ctx)
{
    (void)ctx;
    (void)rel;
    _cleanup_close_ int sub = openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return gitscan_dotgit_name(name, strlen(name)) ||
        (sub >= 0 && gitscan_gitdir_shaped(sub, NULL));
}

static void shapes_and_emptying(void)
{
    char tmp[] = "/tmp/cordon-unit-wsfile-XXXXXX";
    if (!mkdtemp(tmp)) {
        ok(0, "mkdtemp");
        return;
    }
    _cleanup_close_ int top = open(tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
    make(top, "d", true);
    _cleanup_close_ int d = openat(top, "d", O_PATH | O_DIRECTORY | O_CLOEXEC);
    ok(!gitscan_gitdir_shaped(d, "HEAD"), "HEAD alone is no git directory");
    make(d, "HEAD", false);
    make(d, "objects", false);
    ok(!gitscan_gitdir_shaped(d, NULL), "HEAD and objects: none");
    ok(gitscan_gitdir_shaped(d, "refs") && gitscan_gitdir_shaped(d, "REFS"),
       "refs added (in any case) makes one");
    ok(gitscan_gitdir_shaped(d, "commondir"), "so does a commondir");
    make(d, "refs", true);
    ok(gitscan_gitdir_shaped(d, NULL) && gitscan_is_gitdir(d),
       "a file objects counts (git asks access(X_OK)), for the scan too");
    make(top, "sub", true);
    _cleanup_close_ int sub = openat(top, "sub", O_PATH | O_DIRECTORY | O_CLOEXEC);
    make(sub, ".git", true);
    make(sub, "file", false);
    make(top, "plain", true);
    _cleanup_close_ int plain = openat(top, "plain", O_PATH | O_DIRECTORY | O_CLOEXEC);
    make(plain, "x", false);
    struct cordon_err err = { 0 };
    struct wsfile_keep keep = { .keep = keep_git, .top = "ws", .dry = true };
    ok(wsfile_empty_dir(top, &keep, &err) == 0 && keep.kept == 2, "a dry walk finds 2 kept: %u",
       keep.kept);
    ok(!strcmp(keep.first, "ws/d") || !strcmp(keep.first, "ws/sub/.git"),
       "the first kept, by its path from the top: %s", keep.first);
    struct stat st;
    ok(fstatat(plain, "x", &st, 0) == 0, "a dry walk removes nothing");
    keep.dry = false;
    ok(wsfile_empty_dir(top, &keep, &err) == 0 && keep.kept == 2, "an emptying keeps 2");
    ok(fstatat(top, "plain", &st, 0) < 0 && fstatat(sub, "file", &st, 0) < 0,
       "and removes the rest");
    ok(fstatat(sub, ".git", &st, 0) == 0 && fstatat(d, "HEAD", &st, 0) == 0,
       "the kept are there, with the directory holding one");
    hostpath_remove_tree(tmp);
}

int main(void)
{
    dotgit();
    shapes_and_emptying();
    normalize();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char why[256] = "";
        int rc = wsfile_check_path(cases[i].path, why, sizeof why);
        ok(rc == (cases[i].why ? -1 : 0), "%s: %s", tap_show(cases[i].path),
           cases[i].why ? "refused" : "accepted");
        if (cases[i].why)
            is_str(why, cases[i].why, tap_show(cases[i].path));
    }
    char longp[5000];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    char why[256];
    ok(wsfile_check_path(longp, why, sizeof why) < 0 && strcmp(why, "path too long") == 0,
       "a path past PATH_MAX is refused");
    return done_testing();
}
