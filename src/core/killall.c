/*
 * core/killall.c: find every sandbox's top process through /proc and SIGKILL it.
 * Runs in the CLI or the daemon, outside every sandbox.
 */
#include "core/killall.h"

#include "audit/audit.h"
#include "common/cleanup.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ssize_t read_proc(pid_t pid, const char *what, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, what);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

/*
 * Each level's top process of a run, by the name it gives itself, and what
 * shows it is one: the init of a PID namespace below ours, or, at a level
 * without one, forked by cordon itself (the same executable as its
 * parent's). A host process that merely takes the name is not one, and is
 * left alone.
 */
static const struct {
    const char *comm;
    bool own_pid_ns;
} sandbox_tops[] = {
    { "cordon-init\n", true },     /* namespace, and an OCI container */
    { "cordon-vm\n", true },       /* microvm: QEMU's shim, its PID namespace's init */
    { "cordon-gvisor\n", false },  /* gvisor: runsc's shim, runsc dying with it */
    { "cordon-process\n", false }, /* process: the boundary holding the command */
};

/*
 * Is the process of STATUS the init of a PID namespace below ours (NSpid
 * lists more than one id, the last 1)? Its children, before they exec,
 * carry its name too.
 */
static bool init_of_child_pid_ns(const char *status)
{
    const char *ns = strstr(status, "\nNSpid:");
    if (!ns)
        return false;
    int ids = 0;
    long last = 0;
    for (const char *c = ns + 7; *c && *c != '\n';) {
        char *end;
        long v = strtol(c, &end, 10);
        if (end == c) {
            c++;
            continue;
        }
        ids++;
        last = v;
        c = end;
    }
    return ids >= 2 && last == 1;
}

/*
 * Is PID's executable its parent's (named in STATUS), the parent not of
 * PID's name (COMM: the boundary's own child is part of the same run)?
 */
static bool forked_by_its_parent(pid_t pid, const char *status, const char *comm)
{
    const char *pp = strstr(status, "\nPPid:");
    char self[64], parent[64], parent_comm[32];
    struct stat a, b;
    if (!pp)
        return false;
    pid_t ppid = (pid_t)strtol(pp + 6, NULL, 10);
    snprintf(self, sizeof self, "/proc/%d/exe", (int)pid);
    snprintf(parent, sizeof parent, "/proc/%d/exe", (int)ppid);
    return stat(self, &a) == 0 && stat(parent, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino && read_proc(ppid, "comm", parent_comm, sizeof parent_comm) >= 0 &&
        strcmp(parent_comm, comm) != 0;
}

static bool is_sandbox_top(pid_t pid)
{
    char comm[32], status[4096];
    if (read_proc(pid, "comm", comm, sizeof comm) < 0)
        return false;
    for (size_t i = 0; i < sizeof sandbox_tops / sizeof *sandbox_tops; i++) {
        if (strcmp(comm, sandbox_tops[i].comm) != 0)
            continue;
        if (read_proc(pid, "status", status, sizeof status) < 0)
            return false;
        return sandbox_tops[i].own_pid_ns ? init_of_child_pid_ns(status)
                                          : forked_by_its_parent(pid, status, comm);
    }
    return false;
}

int run_kill_all(struct audit_log *log, const char *reason, struct killall_report *r,
                 struct cordon_err *err)
{
    memset(r, 0, sizeof *r);
    DIR *d = opendir("/proc");
    if (!d)
        return err_sys(err, CORDON_E_SETUP, "cannot read '/proc'");
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 1 || pid == getpid() || !is_sandbox_top((pid_t)pid))
            continue;
        /* A nested sandbox's top is inside one already found: killed with it. */
        r->found++;
        if (kill((pid_t)pid, SIGKILL) == 0) {
            if (r->killed < KILLALL_MAX)
                r->pids[r->killed] = (pid_t)pid;
            r->killed++;
        } else if (errno == EPERM) {
            r->refused++;
        }
    }
    closedir(d);
    if (log) {
        json_t *f = killall_report_json(r);
        json_object_set_new(f, "reason", json_string(reason ? reason : ""));
        if (audit_append(log, "kill.all", NULL, f, err) < 0)
            return err_prefix(err, "audit");
    }
    return 0;
}

json_t *killall_report_json(const struct killall_report *r)
{
    json_t *pids = json_array();
    for (size_t i = 0; i < r->killed && i < KILLALL_MAX; i++)
        json_array_append_new(pids, json_integer(r->pids[i]));
    return json_pack("{s:I, s:I, s:I, s:o}", "found", (json_int_t)r->found, "killed",
                     (json_int_t)r->killed, "refused", (json_int_t)r->refused, "pids", pids);
}
