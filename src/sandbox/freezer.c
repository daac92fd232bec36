/*
 * sandbox/freezer.c: see freezer.h. Runs in the daemon, outside every
 * sandbox it freezes.
 */
#include "sandbox/freezer.h"

#include "common/cleanup.h"
#include "common/hostpath.h"
#include "common/procfs.h"
#include "sandbox/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int put(const char *dir, const char *file, const char *value)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, value, strlen(value));
    return n == (ssize_t)strlen(value) ? 0 : -1;
}

static bool v2(const char *dir)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/cgroup.freeze", dir);
    return access(path, F_OK) == 0;
}

/* Is DIR frozen as asked? v2 says so in cgroup.events, v1 in freezer.state. */
static bool holds(const char *dir, bool frozen)
{
    char path[PATH_MAX + 32], buf[512];
    bool two = v2(dir);
    snprintf(path, sizeof path, "%s/%s", dir, two ? "cgroup.events" : "freezer.state");
    if (read_small_at(AT_FDCWD, path, buf, sizeof buf) <= 0)
        return false;
    if (two)
        return strstr(buf, frozen ? "frozen 1" : "frozen 0") != NULL;
    return strncmp(buf, frozen ? "FROZEN" : "THAWED", 6) == 0;
}

/* PID's parent, or -1 when PID has gone (which ends the walk up to the stop). */
static pid_t parent_of(pid_t pid)
{
    char line[512];
    const char *stat = proc_stat(pid, line, sizeof line);
    unsigned long long ppid;
    return stat && proc_stat_field(stat, 4, &ppid) ? (pid_t)ppid : -1;
}

/* PID into DIR's freezer cgroup; one gone by now is no failure where GONE_OK. */
static int move(const char *dir, pid_t pid, bool gone_ok)
{
    char text[32];
    snprintf(text, sizeof text, "%d", (int)pid);
    return put(dir, "cgroup.procs", text) < 0 && !(gone_ok && errno == ESRCH) ? -1 : 0;
}

static int attach_v2(pid_t pid, char *dir, size_t size)
{
    char own[PATH_MAX];
    if (cgroup_dir_of(pid, "", dir, size) < 0 || cgroup_dir_of(getpid(), "", own, sizeof own) < 0)
        return -1;
    size_t len = strlen(dir);
    /* Never the caller's own cgroup, nor one it is beneath: that would freeze it too. */
    if (strncmp(own, dir, len) == 0 && (own[len] == '\0' || own[len] == '/'))
        return -1;
    return v2(dir) ? 0 : -1;
}

int freezer_attach(pid_t pid, pid_t stop, const char *name, char *dir, size_t size, bool *made,
                   struct cordon_err *err)
{
    *made = false;
    if (attach_v2(pid, dir, size) == 0)
        return 0;
    char base[PATH_MAX];
    if (cgroup_dir_of(getpid(), "freezer", base, sizeof base) < 0)
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "no cgroup of the run's own and no v1 freezer "
                       "hierarchy on this host");
    if (snprintf(dir, size, "%s/%s", base, name) >= (int)size)
        return err_set(err, CORDON_E_UNSUPPORTED, "freezer cgroup path too long");
    if (mkdir(dir, 0755) < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED, "cannot make the freezer cgroup '%s'", dir);
    *made = true;
    /*
     * PID and its ancestors up to STOP, then every descendant PID already has
     * (at the gvisor level, runsc's: the Sentry, its stub processes, the
     * gofer); each moved before its children are listed, so a child forked
     * meanwhile follows it.
     */
    _cleanup_free_ pid_t *kids = NULL;
    size_t n = 0, cap = 0;
    for (pid_t p = pid; p > 1 && p != stop; p = parent_of(p))
        if (move(dir, p, false) < 0)
            goto fail;
    proc_add_children(pid, &kids, &n, &cap);
    for (size_t i = 0; i < n; i++) {
        if (move(dir, kids[i], true) < 0)
            goto fail;
        proc_add_children(kids[i], &kids, &n, &cap);
    }
    return 0;
fail:;
    int e = errno;
    rmdir(dir);
    *made = false;
    errno = e;
    return err_sys(err, CORDON_E_UNSUPPORTED, "cannot move the run's processes into '%s'", dir);
}

/* Ask DIR to be FROZEN (or thawed) and wait up to TRIES x 5 ms: 0 when it
 * holds, 1 when it did not come, -1 with errno when it could not be asked. */
static int set_and_wait(const char *dir, bool frozen, int tries)
{
    bool two = v2(dir);
    const char *value = two ? (frozen ? "1" : "0") : (frozen ? "FROZEN" : "THAWED");
    if (put(dir, two ? "cgroup.freeze" : "freezer.state", value) < 0)
        return -1;
    /* v1 passes through FREEZING, and a task in the middle of a fork may hold
     * it there: ask again while waiting. */
    for (int i = 0; i < tries && !holds(dir, frozen); i++) {
        struct timespec ts = { 0, 5 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        if (!two && frozen && i % 20 == 19)
            put(dir, "freezer.state", value);
    }
    return holds(dir, frozen) ? 0 : 1;
}

int freezer_set(const char *dir, bool frozen, struct cordon_err *err)
{
    /*
     * A freeze can deadlock: a command waiting for its keeper's answer to a
     * seccomp notification waits killable (WAIT_KILLABLE_RECV), which no
     * freezer stops, and a keeper frozen between taking the call and
     * answering it never answers. So a freeze that has not held in half a
     * second is undone (the keeper answers) and asked again, for up to
     * about 10 s; one that fails leaves the session thawed, as it was.
     */
    for (int attempt = 0; attempt < (frozen ? 20 : 1); attempt++) {
        int rc = set_and_wait(dir, frozen, frozen ? 100 : 2000), e = errno;
        if (rc == 0)
            return 0;
        if (frozen)
            set_and_wait(dir, false, 2000);
        if (rc < 0) {
            errno = e;
            return err_sys(err, CORDON_E_SETUP, "cannot %s '%s'", frozen ? "freeze" : "thaw", dir);
        }
    }
    return err_set(err, CORDON_E_SETUP, "'%s' did not %s", dir, frozen ? "freeze" : "thaw");
}

void freezer_detach(const char *dir, bool made)
{
    if (!*dir)
        return;
    put(dir, v2(dir) ? "cgroup.freeze" : "freezer.state", v2(dir) ? "0" : "THAWED");
    for (int tries = 0; made && tries < 50; tries++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}
