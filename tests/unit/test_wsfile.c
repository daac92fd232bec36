/*
 * tests/unit/test_wsfile.c: wsfile_check_path, the daemon's first check on
 * every path a client names in a session or a run's files, and
 * wsfile_normalize, sandboxd's and a process cwd's (openat2 then confines
 * what passes).
 */
#include "daemon/workspace_files.h"

#include "tap.h"

#include <stdio.h>
#include <string.h>

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

int main(void)
{
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
