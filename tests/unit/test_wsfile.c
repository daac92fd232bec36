/*
 * tests/unit/test_wsfile.c: wsfile_check_path, the daemon's first check on
 * every path a client names in a session or a run's files, and
 * wsfile_normalize, sandboxd's and a process cwd's (openat2 then confines
 * what passes); what sandboxd's writes take for a .git or a git directory
 * (gitscan_dotgit_name, gitscan_gitdir_shaped).
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

static void shapes(void)
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
    ok(gitscan_gitdir_shaped(d, NULL) && !gitscan_is_gitdir(d),
       "a file objects counts (git asks access(X_OK)), as the scan's test does not");
    hostpath_remove_tree(tmp);
}

int main(void)
{
    dotgit();
    shapes();
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
