/*
 * policy/protected.c: the default filesystem.protected names, one row each
 * with who reads it and what they run or trust from it, and the names that
 * were considered and left out, with why. `cordon check --protected` prints
 * both; the policy, the workspace scans and the commit read only the names.
 *
 * The rule a row must meet: a host tool executes or trusts the entry on its
 * own when it enters the directory, opens the folder or starts there, or on
 * an unrelated action (a git commit), without the user choosing to run
 * project code. A Makefile, package.json's scripts or a test suite are
 * project code the user runs on purpose: writing code is the run's job.
 * Several rows are there for a workspace that is someone's $HOME.
 */
#include "policy/policy.h"

#include <string.h>

#define ROW(n, d, w, y)                                 \
    {                                                   \
        .name = (n), .dir = (d), .who = (w), .why = (y) \
    }
#define CHECKED(n, w, y)                                                  \
    {                                                                     \
        .name = (n), .dir = true, .checked = true, .who = (w), .why = (y) \
    }
#define HOME_SHELL "every new shell, in a workspace that is $HOME"
#define VERSIONS "version managers' cd hooks and shims"

static const struct policy_protected defaults[] = {
    /* git: what the next git command runs */
    CHECKED(".git", "git",
            "its objects, refs, index and logs are the run's to write (commit, "
            "branch, clone); what git would run is checked after the run: hooks, config keys "
            "that run programs (core.fsmonitor, core.hooksPath, core.pager, credential "
            "helpers, aliases, filter drivers, ...: `cordon check --protected` lists them), "
            "info/attributes naming drivers, gitdir links out of the workspace"),
    ROW(".gitconfig", false, "git",
        "the user's git config in a workspace that is $HOME: "
        "the same program-running keys as .git/config"),
    ROW(".githooks", true, "git",
        "the usual core.hooksPath of repositories that keep their "
        "hooks in the tree: run on commit, checkout, push"),
    ROW(".husky", true, "husky, git", "the hooks husky points core.hooksPath at: run by git"),
    ROW(".pre-commit-config.yaml", false, "pre-commit, git",
        "the commands pre-commit's git "
        "hook runs on every commit (a local hook runs anything)"),
    ROW("lefthook.yml", false, "lefthook, git", "the commands lefthook's git hooks run"),
    ROW(".lefthook.yml", false, "lefthook, git", "the same as lefthook.yml"),
    ROW("lefthook-local.yml", false, "lefthook, git", "merged over lefthook.yml"),
    ROW(".lefthook-local.yml", false, "lefthook, git", "merged over lefthook.yml"),
    ROW(".lefthook", true, "lefthook, git", "scripts lefthook's hooks run"),

    /* shells: a workspace is often someone's $HOME */
    ROW(".bashrc", false, "bash", "run by " HOME_SHELL),
    ROW(".bash_profile", false, "bash", "run by login shells, in a workspace that is $HOME"),
    ROW(".bash_login", false, "bash", "run by login shells, in a workspace that is $HOME"),
    ROW(".bash_logout", false, "bash",
        "run when a login shell exits, in a workspace that is "
        "$HOME"),
    ROW(".profile", false, "sh, bash", "run by login shells, in a workspace that is $HOME"),
    ROW(".zshrc", false, "zsh", "run by " HOME_SHELL),
    ROW(".zshenv", false, "zsh",
        "run by every zsh, scripts included, in a workspace that is "
        "$HOME"),
    ROW(".zprofile", false, "zsh", "run by login shells, in a workspace that is $HOME"),
    ROW(".zlogin", false, "zsh", "run by login shells, in a workspace that is $HOME"),
    ROW(".zlogout", false, "zsh", "run when a login shell exits, in a workspace that is $HOME"),
    ROW(".cshrc", false, "csh, tcsh", "run by " HOME_SHELL),
    ROW(".tcshrc", false, "tcsh", "run by " HOME_SHELL),
    ROW(".login", false, "csh, tcsh", "run by login shells, in a workspace that is $HOME"),

    /* other start-up configuration of a workspace that is $HOME */
    ROW(".config", true, "XDG applications, mise",
        "in $HOME: autostart entries and systemd "
        "user units run at login, git's, fish's and editors' configs; in a project: mise's "
        ".config/mise.toml"),
    ROW(".ssh", true, "ssh, sshd",
        "in $HOME: authorized_keys lets a key log in; config's "
        "ProxyCommand and LocalCommand run programs"),
    ROW(".aws", true, "AWS CLI and SDKs",
        "in $HOME: credential_process runs a program on "
        "every call"),
    ROW(".kube", true, "kubectl",
        "in $HOME: exec credential plugins run a program on every "
        "call"),

    /* environment loaded on entering the directory or starting a tool */
    ROW(".envrc", false, "direnv", "evaluated as bash on entering the directory, once allowed"),
    ROW(".env", false, "direnv, docker compose, dotenv libraries, agent CLIs",
        "variables "
        "loaded into tools' environment when they start (PATH, NODE_OPTIONS, LD_PRELOAD, "
        "endpoints)"),
    ROW(".env*", false, "the same", ".env.local, .env.development, ...: loaded the same way"),

    /* version managers: which interpreter the host's shims run */
    ROW(".tool-versions", false, "asdf, mise",
        "each tool's version for " VERSIONS "; "
        "'path:DIR' runs the tool from DIR, 'ref:' builds one from source"),
    ROW("mise.toml", false, "mise",
        "[env] (_.source runs scripts), [hooks] that mise "
        "activate runs on entering the directory, tool versions"),
    ROW("mise.local.toml", false, "mise", "merged over mise.toml"),
    ROW(".mise.toml", false, "mise", "the same as mise.toml"),
    ROW(".mise.local.toml", false, "mise", "merged over .mise.toml"),
    ROW(".mise", true, "mise", ".mise/config.toml, read like mise.toml"),
    ROW("mise", true, "mise", "mise/config.toml, read like mise.toml"),
    ROW(".nvmrc", false, "nvm, fnm, mise",
        "the Node.js version " VERSIONS " switch to on cd "
        "(and install when missing)"),
    ROW(".node-version", false, "fnm, nodenv, mise", "the same as .nvmrc"),
    ROW(".python-version", false, "pyenv, uv, mise",
        "the interpreter pyenv's shims and uv "
        "run; a crafted version left pyenv's versions directory (CVE-2022-35861)"),
    ROW(".ruby-version", false, "rbenv, chruby, rvm, mise",
        "the interpreter " VERSIONS " run; rbenv took '../' in it until 2019"),
    ROW(".sdkmanrc", false, "SDKMAN!",
        "with sdkman_auto_env, the Java and tool versions "
        "`sdk env` switches to (and installs) on cd"),

    /* containers and editors: what opening the folder runs */
    ROW(".devcontainer", true, "Dev Containers (VS Code, JetBrains, devcontainer CLI)",
        "devcontainer.json: initializeCommand runs on the host when the folder is opened; the "
        "container's image, mounts and privileges"),
    ROW(".devcontainer.json", false, "Dev Containers", "the same as .devcontainer/"),
    ROW(".vscode", true, "VS Code, Cursor, Windsurf",
        "tasks.json tasks with runOn: folderOpen "
        "run when the folder opens; settings.json names programs extensions run; launch.json"),
    ROW(".idea", true, "JetBrains IDEs",
        "run configurations and startup tasks run on project "
        "open; tool paths"),
    ROW(".exrc", false, "vi, Neovim", "run on start in the directory with 'exrc' set"),
    ROW(".nvimrc", false, "Neovim", "the same as .exrc"),
    ROW(".nvim.lua", false, "Neovim", "the same as .exrc, as Lua"),
    ROW(".pdbrc", false, "pdb", "run as debugger commands when pdb starts in the directory"),
    ROW(".irbrc", false, "irb", "Ruby run when irb starts in the directory"),
    ROW(".pryrc", false, "pry", "Ruby run when pry starts in the directory"),

    /* agent CLIs: servers they start, hooks they run, what they allow */
    ROW(".claude", true, "Claude Code",
        "settings.json: hooks run commands on agent events, "
        "permissions.allow widens what runs unasked; commands, agents, skills"),
    ROW(".mcp.json", false, "Claude Code and other MCP clients",
        "project MCP servers: "
        "commands the agent starts"),
    ROW(".cursor", true, "Cursor",
        "mcp.json starts servers, hooks.json runs commands on "
        "agent events; rules"),
    ROW(".codex", true, "Codex CLI",
        "config.toml of a trusted project: MCP servers it starts, "
        "sandbox and approval policy"),
    ROW(".gemini", true, "Gemini CLI",
        "settings.json: MCP servers it starts, tool discovery "
        "and call commands, hooks"),
    ROW(".aider.conf.yml", false, "Aider",
        "lint-cmd and test-cmd, run after every edit "
        "(auto-lint, auto-test); yes-always"),
    ROW(".continue", true, "Continue",
        "mcpServers/ and config.yaml: MCP servers the extension "
        "starts"),
    ROW(".continuerc.json", false, "Continue",
        "workspace configuration merged into the "
        "user's"),
};

/* Looked at and left out: none is run or trusted on its own. */
static const struct policy_protected left_out[] = {
    ROW("CLAUDE.md, AGENTS.md, GEMINI.md, .cursorrules, .github/copilot-instructions.md", false,
        "agent CLIs",
        "instructions an agent reads as text, never runs; what they ask "
        "still goes through the agent's own permissions, as any file it reads (README, source, "
        "issues) does, and agents keep them up to date"),
    ROW(".github/workflows", false, "CI",
        "run by CI elsewhere, after a push the user makes "
        "and reviews like any code"),
    ROW("Makefile, package.json, pyproject.toml, conftest.py, .npmrc, "
        ".yarnrc.yml",
        false, "build tools",
        "project code and its tools' settings, run when "
        "the user runs the build or the tests: writing code is the run's job"),
    ROW(".gitattributes", false, "git",
        "names the filter, diff and merge drivers a path "
        "uses, but runs none unless a config defines it: the run cannot leave such a "
        "definition in .git/config (a driver of the user's own config, git-lfs's, is the "
        "user's program); `git lfs track` and clones write it"),
    ROW(".gitmodules", false, "git",
        "submodule URLs only: git ignores update = !command "
        "from it (since 2.24.1) and allows no ext:: or file:// transport for submodules by "
        "default; `git submodule add` and clones write it"),
    ROW(".run", false, "JetBrains IDEs",
        "shared run configurations run only when picked; "
        "startup tasks live in .idea"),
    ROW(".gdbinit, .lldbinit", false, "gdb, lldb",
        "refused in a project directory unless "
        "the user allows it (auto-load safe-path, target.load-cwd-lldbinit)"),
    ROW("bin, .local", false, "shells",
        "on PATH in a workspace that is $HOME, but too common "
        "in projects to refuse: use a project directory, not $HOME, as the workspace"),
};

const struct policy_protected *policy_protected_defaults(size_t *n)
{
    *n = sizeof defaults / sizeof defaults[0];
    return defaults;
}

bool policy_protected_checked(const char *name)
{
    const struct policy_protected *row = policy_protected_default(name);
    return row && row->checked;
}

const struct policy_protected *policy_protected_left_out(size_t *n)
{
    *n = sizeof left_out / sizeof left_out[0];
    return left_out;
}

const struct policy_protected *policy_protected_default(const char *name)
{
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (strcmp(defaults[i].name, name) == 0)
            return &defaults[i];
    return NULL;
}
