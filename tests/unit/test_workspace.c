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
    ok(workspace_name_is_dir(".devcontainer") && workspace_name_is_dir(".mise") &&
           workspace_name_is_dir(".continue") && !workspace_name_is_dir(".tool-versions") &&
           !workspace_name_is_dir("mise.toml") && !workspace_name_is_dir("README.md"),
       "placeholders: directories for .devcontainer, .mise, .continue; files for .tool-versions "
       "and mise.toml; none for an unprotected name");
    /* The table: one row a name, each a single component with a reason. */
    size_t n = 0;
    const struct policy_protected *rows = policy_protected_defaults(&n);
    for (size_t i = 0; i < n; i++) {
        const char *name = rows[i].name, *star = strchr(name, '*');
        ok(!strchr(name, '/') && (!star || star[1] == '\0') && rows[i].who[0] &&
               strlen(rows[i].why) > 10 && policy_protected_default(name) == &rows[i],
           "protected row %s: one component, read by %s, a reason, listed once", name,
           rows[i].who);
    }
    rows = policy_protected_left_out(&n);
    for (size_t i = 0; i < n; i++)
        ok(strlen(rows[i].why) > 10 && !policy_protected_default(rows[i].name),
           "left out: %s, with a reason", rows[i].name);
    return done_testing();
}
