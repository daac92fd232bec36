/*
 * tests/unit/test_workspace.c: the pure parts of the workspace scans: which
 * links lead out of the workspace on their face, which names a protected
 * pattern covers, which placeholders are directories.
 */
#include "tap.h"

#include "policy/policy.h"
#include "sandbox/workspace.h"

#include <stdio.h>

struct escape_case {
    unsigned depth;      /* directories between the workspace root and the link */
    const char *target;
    bool escapes;
};

static const struct escape_case escape_cases[] = {
    { 0, "/etc/passwd", true },
    { 0, "/workspace/a", true },  /* the host has no /workspace: out */
    { 0, "", true },
    { 0, "a.txt", false },
    { 0, "./a/./b", false },
    { 0, "..", true },
    { 0, "../ws/a", true },       /* even back in: it leaves on its face */
    { 0, "a/../b", false },
    { 0, "a/../../b", true },
    { 1, "../a.txt", false },
    { 1, "../../x", true },
    { 2, "../tool/bin/cli.js", false }, /* node_modules/.bin/tool */
    { 2, "../../..", true },
    { 3, "a//..//..//../../..", true },
    { 3, "a//..//..//..", false },
};

struct match_case {
    const char *pattern, *name;
    bool match;
};

static const struct match_case match_cases[] = {
    { ".env", ".env", true },
    { ".env", ".env.local", false },
    { ".env*", ".env", true },
    { ".env*", ".env.local", true },
    { ".env*", ".envrc", true },
    { ".env*", "x.env", false },
    { ".git", ".gitignore", false },
    { ".git", ".GIT", false },
};

int main(void)
{
    for (size_t i = 0; i < sizeof escape_cases / sizeof escape_cases[0]; i++) {
        const struct escape_case *c = &escape_cases[i];
        ok(workspace_target_escapes(c->depth, c->target) == c->escapes,
           "link at depth %u to \"%s\" %s", c->depth, c->target,
           c->escapes ? "escapes" : "stays inside");
    }
    for (size_t i = 0; i < sizeof match_cases / sizeof match_cases[0]; i++) {
        const struct match_case *c = &match_cases[i];
        ok(policy_protected_match(c->pattern, c->name) == c->match, "\"%s\" %s \"%s\"",
           c->pattern, c->match ? "matches" : "does not match", c->name);
    }
    ok(workspace_name_is_dir(".git") && workspace_name_is_dir(".vscode") &&
           !workspace_name_is_dir(".bashrc") && !workspace_name_is_dir(".mcp.json"),
       "placeholders: directories for .git and .vscode, files for .bashrc and .mcp.json");
    return done_testing();
}
