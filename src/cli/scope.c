/*
 * cli/scope.c: an ordinary user's way to a cgroup on a cgroup v2 host with
 * systemd. Such a user cannot write the cgroup its login put it in, but its
 * user manager can make a scope and delegate it (systemd-run --user --scope
 * -p Delegate=yes). cordon re-runs itself there when a run needs a cgroup
 * and its own is not writable; inside, it moves into a leaf so the scope can
 * hold the runs' cgroups beside it.
 */
#include "cli/cli.h"

#include "common/hostpath.h"
#include "common/cleanup.h"
#include "sandbox/backend.h"
#include "sandbox/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Set in the re-run cordon: it is in its scope already (never a second hop). */
#define SCOPE_ENV "CORDON_DELEGATED_SCOPE"

/* Is there a user manager to ask? Its private socket is the sign of one. */
static bool user_manager(void)
{
    const char *rt = getenv("XDG_RUNTIME_DIR");
    char sock[PATH_MAX];
    struct stat st;
    return rt && *rt && snprintf(sock, sizeof sock, "%s/systemd/private", rt) < (int)sizeof sock &&
        stat(sock, &st) == 0;
}

/* Does the v2 hierarchy offer what a run's limits need? A hybrid host keeps
 * memory and pids on v1, and a scope there would hold nothing. */
static bool v2_has_controllers(const char *dir)
{
    char f[PATH_MAX], buf[512];
    if (snprintf(f, sizeof f, "%s/cgroup.controllers", dir) >= (int)sizeof f ||
        read_small_at(AT_FDCWD, f, buf, sizeof buf) <= 0)
        return false;
    return strstr(buf, "memory") && strstr(buf, "pids");
}

/* Can this process make a run's cgroup beneath its own v2 cgroup? */
static bool v2_own_writable(const char *dir)
{
    char f[PATH_MAX];
    return snprintf(f, sizeof f, "%s/cgroup.subtree_control", dir) < (int)sizeof f &&
        access(dir, W_OK) == 0 && access(f, W_OK) == 0;
}

void cli_scope_enter(const struct policy *p)
{
    char **argv = cli_main_argv;
    if (getenv(SCOPE_ENV)) {
        /* The second hop's process: move aside for the runs. A scope that
         * is not ours to change leaves the limits to degrade or refuse. */
        unsetenv(SCOPE_ENV);
        struct cordon_err err = { 0 };
        if (cgroup_enter_delegated(&err) < 0)
            fprintf(stderr, "cordon: the delegated scope is not usable: %s\n", err.msg);
        return;
    }
    char dir[PATH_MAX], systemd_run[PATH_MAX], self[PATH_MAX];
    if (geteuid() == 0 || !sandbox_needs_cgroup(p) || cgroup_v2_dir(dir, sizeof dir) < 0 ||
        !v2_has_controllers(dir) || v2_own_writable(dir) || !user_manager() ||
        !hostpath_find_program("systemd-run", systemd_run, sizeof systemd_run))
        return;
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return;
    self[n] = '\0';
    size_t argc = 0;
    while (argv[argc])
        argc++;
    _cleanup_free_ char **args = calloc(argc + 12, sizeof *args);
    if (!args)
        return;
    size_t k = 0;
    static char *const head[] = { "systemd-run", "--user", "--scope",      "--quiet",
                                  "--collect",   "-p",     "Delegate=yes", "--" };
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        args[k++] = head[i];
    args[k++] = self;
    for (size_t i = 1; i < argc; i++)
        args[k++] = argv[i];
    args[k] = NULL;
    setenv(SCOPE_ENV, "1", 1);
    execv(systemd_run, args);
    /* Still here: run without the scope, as if there were no systemd. */
    unsetenv(SCOPE_ENV);
}

void cli_delegation_advice(const struct cgroup_set *cg, char *out, size_t len)
{
    char dir[PATH_MAX], tool[PATH_MAX];
    bool all = true;
    for (int c = 0; c < CGROUP_COUNT; c++)
        all &= cgroup_has(cg, c);
    if (all) {
        snprintf(out, len, "not needed: cordon can make the runs' cgroups here");
    } else if (cgroup_v2_dir(dir, sizeof dir) < 0 || !v2_has_controllers(dir)) {
        snprintf(out, len,
                 "this host keeps memory and pids on cgroup v1, which is not delegated "
                 "to ordinary users: run cordon as root, boot with "
                 "systemd.unified_cgroup_hierarchy=1, or mark limits best_effort");
    } else if (geteuid() == 0) {
        snprintf(out, len,
                 "cordon's own cgroup (%s) holds processes or lacks the memory and "
                 "pids controllers: start cordon from a cgroup of its own, e.g. "
                 "systemd-run --scope -p Delegate=yes cordon ...",
                 dir);
    } else if (!hostpath_find_program("systemd-run", tool, sizeof tool) || !user_manager()) {
        snprintf(out, len,
                 "no systemd user manager here (%s): log in through a PAM session or "
                 "run `loginctl enable-linger %d` as root; cordon then runs itself in "
                 "systemd-run --user --scope -p Delegate=yes when a limit needs it",
                 getenv("XDG_RUNTIME_DIR") ? "no $XDG_RUNTIME_DIR/systemd/private"
                                           : "XDG_RUNTIME_DIR is not set",
                 (int)getuid());
    } else {
        snprintf(out, len,
                 "automatic: cordon runs itself in systemd-run --user --scope -p "
                 "Delegate=yes when a limit needs a cgroup (the user manager must "
                 "delegate memory and pids: systemd 244 or later)");
    }
}
