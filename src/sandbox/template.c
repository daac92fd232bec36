/*
 * sandbox/template.c: the namespace level's template (see template.h). The
 * supervisor plans and compiles once, a builder child makes the root in a
 * fresh user and mount namespace and is gone as soon as they are pinned;
 * each run's helper enters them and clones the run's init. Runs in the
 * supervisor, and in the builder and helper children.
 */
#include "sandbox/template.h"

#include "common/cleanup.h"
#include "common/fds.h"
#include "common/syscalls.h"
#include "sandbox/boundary.h"
#include "sandbox/ns_int.h"
#include "sandbox/seccomp.h"
#include "sandbox/usock.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* A run's namespaces: the template's user namespace is the parent of its own. */
#define RUN_NS \
    (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)

bool template_admits(const struct policy *p)
{
    return !p->workspace && !p->n_unix_sockets && !p->n_secrets && !p->n_binds;
}

/* TEXT into /proc/PID/FILE, beneath PROC (a descriptor of a /proc, or AT_FDCWD for ours). */
static int write_map(int proc, pid_t pid, const char *file, const char *text)
{
    char path[64];
    snprintf(path, sizeof path, "%s%d/%s", proc == AT_FDCWD ? "/proc/" : "", (int)pid, file);
    int fd = openat(proc, path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    int saved = errno;
    close(fd);
    errno = saved;
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/*
 * The template's own ids. Root-started: a range of unprivileged host ids
 * (each run maps its own pair out of it); else the sandbox user is the
 * caller, as at every run.
 */
static int write_template_maps(pid_t pid, const struct sandbox_template *t, struct cordon_err *err)
{
    char uid[64], gid[64];
    if (t->root) {
        snprintf(uid, sizeof uid, "0 %u %u\n", t->host_base, TEMPLATE_HOST_IDS);
        snprintf(gid, sizeof gid, "0 %u %u\n", t->host_base, TEMPLATE_HOST_IDS);
    } else {
        snprintf(uid, sizeof uid, "%d %u 1\n", SANDBOX_UID, (unsigned)getuid());
        snprintf(gid, sizeof gid, "%d %u 1\n", SANDBOX_GID, (unsigned)getgid());
    }
    if (write_map(AT_FDCWD, pid, "uid_map", uid) < 0 ||
        (!t->root && write_map(AT_FDCWD, pid, "setgroups", "deny") < 0) ||
        write_map(AT_FDCWD, pid, "gid_map", gid) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot map the template's ids");
    return 0;
}

struct builder {
    const struct ns_plan *plan;
    int sync_r, err_w, ready_w;
};

/* In the builder: the root, then wait to be killed once the namespaces are pinned. */
static _Noreturn void builder_main(const struct builder *b)
{
    int keep[] = { b->sync_r, b->err_w, b->ready_w };
    close_fds_except(keep, sizeof keep / sizeof keep[0]);
    boundary_scrub_args_and_env("cordon-template");
    struct cordon_err err = { 0 };
    char go;
    if (read(b->sync_r, &go, 1) != 1)
        _exit(125);
    if (b->plan->caller_is_root && (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)) {
        err_sys(&err, CORDON_E_SETUP, "cannot switch to the template's root");
        boundary_fail(b->err_w, &err);
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    int layer = -1;
    if (mounts_enter_root(b->plan, &layer, &err) < 0)
        boundary_fail(b->err_w, &err);
    (void)!write(b->ready_w, "r", 1);
    (void)!read(b->sync_r, &go, 1);
    _exit(0);
}

static int open_ns(pid_t pid, const char *which, struct cordon_err *err)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)pid, which);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open '%s'", path);
    return fd;
}

/*
 * The builder, PID 1 of a PID namespace of its own (so that the template's
 * /proc, which each run covers with its own, shows nobody once it is
 * gone), in a new user and mount namespace; they outlive it, pinned.
 */
static int build(struct sandbox_template *t, struct cordon_err *err)
{
    int sync[2] = { -1, -1 }, errp[2] = { -1, -1 }, ready[2] = { -1, -1 };
    if (pipe2(sync, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0) {
        int all[] = { sync[0], sync[1], errp[0], errp[1], ready[0], ready[1] };
        for (size_t i = 0; i < 6; i++)
            closep(&all[i]);
        return err_sys(err, CORDON_E_SETUP, "cannot create pipes");
    }
    pid_t pid = sys_clone_ns(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID);
    if (pid == 0) {
        struct builder b = { &t->plan, sync[0], errp[1], ready[1] };
        builder_main(&b);
    }
    closep(&sync[0]);
    closep(&errp[1]);
    closep(&ready[1]);
    int rc = -1;
    char r;
    if (pid < 0)
        err_sys(err, CORDON_E_UNSUPPORTED, "cannot create the template's namespaces");
    else if (write_template_maps(pid, t, err) < 0)
        ; /* ERR says why */
    else if (write(sync[1], "g", 1) != 1 || read(ready[0], &r, 1) != 1)
        boundary_child_error(errp[0], err);
    else if ((t->userns = open_ns(pid, "user", err)) >= 0 &&
             (t->mntns = open_ns(pid, "mnt", err)) >= 0)
        rc = 0;
    if (pid > 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    closep(&sync[1]);
    closep(&errp[0]);
    closep(&ready[0]);
    return rc;
}

void template_free(struct sandbox_template *t)
{
    if (!t)
        return;
    closep(&t->userns);
    closep(&t->mntns);
    mounts_plan_release(&t->plan);
    seccomp_program_release(&t->plan.seccomp);
    seccomp_program_release(&t->plan.keeper_filter);
    free(t);
}

DEFINE_CLEANUP(struct sandbox_template *, template_free)

size_t template_fds(const struct sandbox_template *t, int *out, size_t max)
{
    size_t n = 0;
    if (n < max)
        out[n++] = t->userns;
    if (n < max)
        out[n++] = t->mntns;
    return n;
}

int template_build(const struct policy *p, uid_t host_base, struct sandbox_template **out,
                   struct cordon_err *err)
{
    *out = NULL;
    if (!template_admits(p))
        return 0;
    bool root = geteuid() == 0;
    _cleanup_(template_freep) struct sandbox_template *t = calloc(1, sizeof *t);
    if (!t)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    *t = (struct sandbox_template){ .userns = -1,
                                    .mntns = -1,
                                    .root = root,
                                    .host_base = host_base,
                                    .plan = { .caller_is_root = root, .template = true } };
    /* Every run but a container's has a gateway (ns_prepare uses no template without one). */
    TRY(ns_plan_sandbox(p, true, NULL, host_base + 1, &t->plan, err));
    TRY(seccomp_program_build(p, &t->plan.seccomp, err));
    TRY(build(t, err));
    *out = TAKE_PTR(t);
    return 0;
}

/* ---- a run's clone ---- */

/* What the helper reports: the init's pid, or what failed (and the init it may leave). */
struct spawned {
    pid_t pid;
    int errnum;
    char what[48];
};

/* The run's ids out of the template's (root: its own pair of host ids, as offsets). */
static int write_run_maps(int proc, pid_t pid, const struct sandbox_template *t, uid_t host_base)
{
    char map[96];
    if (t->root) {
        /* Its root is the template's (the tree's owner), its sandbox user its own. */
        unsigned off = host_base - t->host_base;
        snprintf(map, sizeof map, "0 0 1\n%d %u 1\n", SANDBOX_UID, off + 1);
    } else {
        snprintf(map, sizeof map, "%d %d 1\n", SANDBOX_UID, SANDBOX_UID);
    }
    return write_map(proc, pid, "uid_map", map) < 0 || write_map(proc, pid, "gid_map", map) < 0 ? -1
                                                                                                : 0;
}

/*
 * In the helper, a fork of the supervisor: into the template (its user
 * namespace, where it acts as its root, and its mount namespace), then the
 * init cloned as the supervisor's child. A run's user namespace is a child
 * of the template's, owned by its root: no process but this helper, gone
 * at once, is ever in the template's to hold that power.
 */
static _Noreturn void helper_main(const struct sandbox_template *t, uid_t host_base,
                                  const struct cgroup_ticket *ticket,
                                  void (*child)(void *arg, bool in_cgroup), void *arg, int out)
{
    struct spawned sp = { .pid = -1 };
    /* Here, where /proc/self is ours: the init cloned below inherits its
     * name and blanked command line and environment (inside, the template's
     * /proc is not the init's, and `kill --all` finds inits by name). */
    boundary_scrub_args_and_env("cordon-init");
    const char *what = "open /proc";
    /* The host's /proc: the run's map files are reached through it once we are inside. */
    int proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (proc < 0)
        goto fail;
    what = "enter its user namespace";
    if (setns(t->userns, CLONE_NEWUSER) < 0)
        goto fail;
    what = "enter its mount namespace";
    if (setns(t->mntns, CLONE_NEWNS) < 0)
        goto fail;
    what = "act as its root";
    if (t->root && (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0))
        goto fail;
    /* Our ids changed: dumpable again, or the init's map files would be the host root's. */
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    what = "clone the run's namespaces";
    unsigned long flags = RUN_NS | CLONE_PARENT;
    bool into = ticket->dir >= 0;
    sp.pid = into ? sys_clone_ns_into_cgroup(flags, ticket->dir) : -1;
    if (sp.pid < 0) {
        into = false;
        sp.pid = sys_clone_ns(flags);
    }
    if (sp.pid == 0) {
        child(arg, into); /* does not return */
        _exit(125);
    }
    if (sp.pid < 0)
        goto fail;
    what = "map its ids";
    if (write_run_maps(proc, sp.pid, t, host_base) < 0) {
        kill(sp.pid, SIGKILL);
        goto fail;
    }
    write_all(out, &sp, sizeof sp);
    _exit(0);
fail:
    sp.errnum = errno;
    snprintf(sp.what, sizeof sp.what, "%s", what);
    write_all(out, &sp, sizeof sp);
    _exit(1);
}

pid_t template_spawn(const struct sandbox_template *t, uid_t host_base,
                     const struct cgroup_ticket *ticket, void (*child)(void *arg, bool in_cgroup),
                     void *arg, struct cordon_err *err)
{
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create a pipe");
    pid_t helper = fork();
    if (helper == 0) {
        close(pp[0]);
        helper_main(t, host_base, ticket, child, arg, pp[1]);
    }
    close(pp[1]);
    struct spawned sp = { .pid = -1, .errnum = ECHILD };
    snprintf(sp.what, sizeof sp.what, "%s", "start its helper");
    if (helper < 0)
        sp.errnum = errno;
    else if (!read_full(pp[0], &sp, sizeof sp))
        sp = (struct spawned){ .pid = -1, .errnum = ECHILD, .what = "hear from its helper" };
    close(pp[0]);
    while (helper > 0 && waitpid(helper, NULL, 0) < 0 && errno == EINTR)
        ;
    if (sp.pid > 0 && sp.errnum == 0)
        return sp.pid;
    if (sp.pid > 0) {
        /* Cloned, then not mapped: killed by the helper, ours to reap. */
        while (waitpid(sp.pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    sp.what[sizeof sp.what - 1] = '\0';
    errno = sp.errnum;
    return err_sys(err, CORDON_E_SETUP, "cannot clone the sandbox from its template: cannot %s",
                   sp.what);
}
