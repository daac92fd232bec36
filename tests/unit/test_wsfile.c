/*
 * tests/unit/test_wsfile.c: wsfile_check_path, the daemon's first check on
 * every path a client names in a session or a run's files (openat2 then
 * confines what passes).
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

int main(void)
{
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
