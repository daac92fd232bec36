/*
 * tests/unit/test_workspace.c: the pure parts of the workspace scans: which
 * links lead out of the workspace on their face, which lead into the
 * system tree, which names a protected pattern covers, the table.
 */
#include "tap.h"

#include "policy/policy.h"
#include "sandbox/workspace.h"

#include <stdio.h>

struct escape_case {
    unsigned depth; /* directories between the workspace root and the link */
    const char *target;
    bool escapes;
};

static const struct escape_case escape_cases[] = {
    { 0, "/etc/passwd", true },
    { 0, "/workspace/a", true }, /* the host has no /workspace: out */
    { 0, "", true },
    { 0, "a.txt", false },
    { 0, "./a/./b", false },
    { 0, "..", true },
    { 0, "../ws/a", true }, /* even back in: it leaves on its face */
    { 0, "a/../b", false },
    { 0, "a/../../b", true },
    { 1, "../a.txt", false },
    { 1, "../../x", true },
    { 2, "../tool/bin/cli.js", false }, /* node_modules/.bin/tool */
    { 2, "../../..", true },
    { 3, "a//..//..//../../..", true },
    { 3, "a//..//..//..", false },
};

struct system_case {
    const char *target;
    bool system;
};

/* Links kept though they leave: the read-only system tree every sandbox has. */
static const struct system_case system_cases[] = {
    { "/usr/bin/python3", true }, /* a venv's interpreter */
    { "/usr", true },
    { "//usr/./lib/x", true },
    { "/bin/sh", true },                     /* merged-/usr names */
    { "/lib64/ld-linux-x86-64.so.2", true }, /* the loader */
    { "/usr/../etc/passwd", false },
    { "/usr/bin/../../home/x", false },
    { "/etc/passwd", false },
    { "/home/x", false },
    { "/proc/self/root", false },
    { "/usrx/bin", false },
    { "/", false },
    { "usr/bin/python3", false }, /* relative: inside, judged as such */
    { "../../outside", false },
    { "/workspace/x", false },
};

struct match_case {
    const char *pattern, *name;
    bool match;
};

static const struct match_case match_cases[] = {
    { ".env", ".env", true },        { ".env", ".env.local", false }, { ".env*", ".env", true },
    { ".env*", ".env.local", true }, { ".env*", ".envrc", true },     { ".env*", "x.env", false },
    { ".git", ".gitignore", false }, { ".git", ".GIT", false },
};

int main(void)
{
    for (size_t i = 0; i < sizeof escape_cases / sizeof escape_cases[0]; i++) {
        const struct escape_case *c = &escape_cases[i];
        ok(workspace_target_escapes(c->depth, c->target) == c->escapes,
           "link at depth %u to \"%s\" %s", c->depth, c->target,
           c->escapes ? "escapes" : "stays inside");
    }
    for (size_t i = 0; i < sizeof system_cases / sizeof system_cases[0]; i++) {
        const struct system_case *c = &system_cases[i];
        ok(workspace_target_system(c->target) == c->system, "link to \"%s\" %s", c->target,
           c->system ? "names the system tree" : "does not name the system tree");
    }
    for (size_t i = 0; i < sizeof match_cases / sizeof match_cases[0]; i++) {
        const struct match_case *c = &match_cases[i];
        ok(policy_protected_match(c->pattern, c->name) == c->match, "\"%s\" %s \"%s\"", c->pattern,
           c->match ? "matches" : "does not match", c->name);
    }
    /* The table: one row a name, each a single component with a reason. */
    size_t n = 0;
    const struct policy_protected *rows = policy_protected_defaults(&n);
    for (size_t i = 0; i < n; i++) {
        const char *name = rows[i].name, *star = strchr(name, '*');
        ok(!strchr(name, '/') && (!star || star[1] == '\0') && rows[i].who[0] &&
               strlen(rows[i].why) > 10 && policy_protected_default(name) == &rows[i],
           "protected row %s: one component, read by %s, a reason, listed once", name, rows[i].who);
    }
    rows = policy_protected_left_out(&n);
    for (size_t i = 0; i < n; i++)
        ok(strlen(rows[i].why) > 10 && !policy_protected_default(rows[i].name),
           "left out: %s, with a reason", rows[i].name);
    return done_testing();
}
