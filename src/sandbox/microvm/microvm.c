/*
 * sandbox/microvm/microvm.c: the `microvm` isolation level. The command gets a
 * kernel of its own: QEMU's microvm machine boots cordon's guest kernel with
 * the guest agent (guest/agent.c) as /init, or restores a snapshot of one
 * that is booted and idle. The boundary's top process is a shim, a fork of
 * the supervisor, which owns QEMU: it brings the guest up at prepare, blocks
 * at the start seam, then hands the call to the agent over virtio-serial and
 * relays stdio and egress connections (to the gateway's door, in the shim's
 * own network namespace) until the command's status comes back.
 *
 * QEMU itself is confined as well, never instead: no network (the shim's
 * empty network namespace), a user namespace, Landlock over the paths it
 * serves, the run's own seccomp filter (the command's at the other levels)
 * and QEMU's own seccomp sandbox (-sandbox on,...) stacked on it. Without a
 * hardware hypervisor QEMU emulates the CPU (TCG): that is an emulator, not
 * a hypervisor boundary, and a policy must say microvm.accel: tcg to run so.
 *
 * This file is the backend table; the rest of the level is beside it: plan.c
 * (decided in the supervisor), qemu.c, snapshot.c, kvm.c (the KVM verdict),
 * shim.c, and vmproto.c with vm_wire.h (the guest protocol).
 */
#include "sandbox/microvm/microvm_int.h"

#include "common/fds.h"
#include "sandbox/boundary.h"
#include "sandbox/supervise.h"

/*
 * Without hardware KVM, only a policy that allows TCG runs here. A host
 * socket cannot be reached from the guest at all: 9p shares carry none
 * (a connect in the guest finds only the guest's own sockets).
 */
static int microvm_admits(const struct policy *p, struct cordon_err *err)
{
    char why[160];
    if (p->n_unix_sockets)
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "microvm: filesystem.unix_sockets cannot reach a host socket from the "
                       "guest ('%s'): its 9p shares carry no sockets; use another level",
                       p->unix_sockets[0]);
    if (p->microvm_accel == POLICY_ACCEL_TCG || hardware_kvm(why, sizeof why))
        return 0;
    return err_set(err, CORDON_E_UNSUPPORTED,
                   "microvm: no hardware KVM here (%s); QEMU's software emulation (TCG) "
                   "is an emulator, not a hypervisor boundary: allow it with microvm.accel: tcg",
                   why);
}

const char *microvm_qemu_path(void)
{
    return env_or("CORDON_QEMU", QEMU_DEFAULT);
}

int microvm_probe(struct cordon_err *err)
{
    const char *qemu = env_or("CORDON_QEMU", QEMU_DEFAULT);
    if (access(qemu, X_OK) < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED, "microvm: no QEMU at '%s'", qemu);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/vmlinux", env_or("CORDON_GUEST_KERNEL", KERNEL_DEFAULT));
    if (access(path, R_OK) < 0) {
        /* The builder an installed cordon has, or a source tree's. */
        int missing = errno;
        char builder[PATH_MAX];
        if (installed_path("build-guest-kernel", builder) < 0 || access(builder, X_OK) < 0)
            snprintf(builder, sizeof builder, "scripts/build-guest-kernel.sh");
        errno = missing;
        return err_sys(err, CORDON_E_UNSUPPORTED,
                       "microvm: no guest kernel at '%s' (%s builds it, once, in about 6 minutes)",
                       path, builder);
    }
    return find_initramfs(path, err);
}

const char *microvm_accel_note(bool kvm)
{
    return kvm ? "hardware virtualization (KVM)"
               : "TCG: QEMU emulates the CPU; an emulator, not a hypervisor boundary";
}

bool microvm_has_kvm(char *why, size_t size)
{
    return hardware_kvm(why, size);
}

/* ---- supervisor side ---- */

static void microvm_release(struct sandbox_boundary *b)
{
    boundary_release(b);
}

static int microvm_prepare(const struct sandbox_setup *s, struct sandbox_boundary *b,
                           struct cordon_err *err)
{
    *b = (struct sandbox_boundary){
        .pid = -1, .err_r = -1, .status_r = -1, .start_w = -1, .door = -1, .layer = -1
    };
    struct vm_plan *v = calloc(1, sizeof *v);
    if (!v)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    int sync[2] = { -1, -1 }, errp[2] = { -1, -1 }, status[2] = { -1, -1 }, start[2] = { -1, -1 },
        gw[2] = { -1, -1 }, info[2] = { -1, -1 };
    int rc = -1;
    pid_t shim = -1;
    struct cgroup_ticket ticket = CGROUP_TICKET_INIT;
    if (plan_vm(s, v, err) < 0)
        goto out;
    if (pipe2(sync, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 || pipe2(status, O_CLOEXEC) < 0 ||
        pipe2(info, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, start) < 0 ||
        (s->gateway && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, gw) < 0)) {
        err_sys(err, CORDON_E_SETUP, "cannot create pipes");
        goto out;
    }
    uid_t uid = geteuid();
    gid_t gid = getegid();
    /* QEMU is the run's: its memory and CPU count against the limits, its
     * threads against a bound of their own (the command's pids are the
     * guest's to count: counts_pids). The shim joins the run's cgroups
     * itself, first thing (see cgroup.h). */
    if ((cgroup_has(s->cg, CGROUP_PIDS) && s->p->limits.pids &&
         cgroup_set_pids(s->cg, VM_QEMU_TASKS, err) < 0) ||
        (s->cg->version && cgroup_ticket_open(s->cg, &ticket, err) < 0))
        goto out;
    shim = sys_clone_ns(CLONE_NEWUSER | CLONE_NEWPID);
    if (shim < 0) {
        err_sys(err, CORDON_E_UNSUPPORTED, "microvm: cannot create the shim's namespaces");
        goto out;
    }
    if (shim == 0) {
        if (cgroup_ticket_use(&ticket) < 0)
            _exit(125); /* the supervisor reads no record: its "ready" never comes */
        cgroup_ticket_close(&ticket);
        if (s->in_child)
            s->in_child(s->in_child_arg);
        struct shim_fds fds = { .sync_r = sync[0],
                                .err_w = errp[1],
                                .status_w = status[1],
                                .start_r = start[1],
                                .gw_sock = s->gateway ? gw[1] : -1,
                                .info_w = info[1],
                                .uid = uid,
                                .gid = gid };
        shim_main(s, v, &fds);
    }
    int *theirs[] = { &sync[0], &errp[1], &status[1], &start[1], &gw[1], &info[1] };
    for (size_t i = 0; i < sizeof theirs / sizeof theirs[0]; i++) {
        closep(theirs[i]);
        *theirs[i] = -1;
    }
    cgroup_ticket_close(&ticket);
    if (write(sync[1], "g", 1) != 1) {
        if (err->kind == CORDON_E_OK)
            err_sys(err, CORDON_E_SETUP, "microvm: cannot start the shim");
        goto out;
    }
    char restored = 0;
    if ((s->gateway && (b->door = recv_fd(gw[0])) < 0) || read(info[0], &restored, 1) != 1 ||
        start_ready_wait(start[0]) < 0) {
        boundary_child_error(errp[0], err);
        goto out;
    }
    snprintf(b->evidence, sizeof b->evidence,
             "{\"accel\":\"%s\",\"restored\":%s,\"kernel_digest\":\"%s\","
             "\"initramfs_digest\":\"%s\",\"note\":\"%s\"}",
             v->kvm ? "kvm" : "tcg", restored == 'r' ? "true" : "false", v->kernel_digest,
             v->initramfs_digest, microvm_accel_note(v->kvm));
    /* The guest agent serves the DNS stub and the synthetic addresses and
     * opens each such connection at the door with a relay preface. */
    b->relay_transparent = v->transparent;
    b->pid = shim;
    shim = -1;
    b->err_r = TAKE_FD(errp[0]);
    b->status_r = TAKE_FD(status[0]);
    b->start_w = TAKE_FD(start[0]);
    rc = 0;
out:
    if (shim > 0) {
        kill(shim, SIGKILL);
        waitpid(shim, NULL, 0);
    }
    if (rc < 0)
        closep(&b->door);
    cgroup_ticket_close(&ticket);
    int all[] = { sync[0],  sync[1],  errp[0], errp[1], status[0], status[1],
                  start[0], start[1], gw[0],   gw[1],   info[0],   info[1] };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] >= 0)
            close(all[i]);
    vm_buf_release(&v->setup);
    seccomp_program_release(&v->qemu_filter);
    seccomp_program_release(&v->names_filter);
    if (v->names.mode != NAMES_OFF && v->names.root >= 0)
        close(v->names.root);
    free(v->ca_bundle);
    free(v);
    return rc;
}

const struct sandbox_backend microvm_backend = {
    .name = "microvm",
    .level = CORDON_LEVEL_MICROVM,
    .counts_pids = true,
    .tmpfs_sizes = true, /* the guest kernel's tmpfs */
    .tmpfs_inodes = true,
    .probe = microvm_probe,
    .admits = microvm_admits,
    .prepare = microvm_prepare,
    .release = microvm_release,
};
