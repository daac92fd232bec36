/*
 * sandbox/microvm/qemu.c: QEMU for the microvm level, in the shim: its confinement and argv,
 * one QMP command at a time, and the guest's frames read whole with a deadline.
 */
#include "sandbox/microvm/microvm_int.h"

#include "common/fds.h"
#include "sandbox/supervise.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>

/* ---- QEMU ---- */

/* The shim's QEMU, reaped before the shim goes: a QEMU that outlives it even
 * as a zombie would hold the run's cgroup. */
pid_t shim_qemu = -1;

void vm_kill(struct vm *vm)
{
    if (vm->qemu > 0) {
        kill(vm->qemu, SIGKILL);
        waitpid(vm->qemu, NULL, 0);
        vm->qemu = -1;
        shim_qemu = -1;
    }
    if (vm->keeper > 0) {
        /* It ends once QEMU is gone (its listener hangs up). */
        waitpid(vm->keeper, NULL, 0);
        vm->keeper = -1;
    }
    closep(&vm->pidfd);
    closep(&vm->ctl);
    closep(&vm->eg);
    closep(&vm->qmp);
    closep(&vm->ram);
    vm->pidfd = vm->ctl = vm->eg = vm->qmp = vm->ram = -1;
}

struct argv_builder {
    char *v[128];
    size_t n;
};

static void arg(struct argv_builder *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(struct argv_builder *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    if (a->n < sizeof a->v / sizeof a->v[0] - 1)
        a->v[a->n++] = s;
    a->v[a->n] = NULL;
}

/* In QEMU's child, before exec: what it may touch on the host; GIVE: its names' keeper's. */
static int confine_qemu(const struct vm_plan *v, bool saving, int give, struct cordon_err *err)
{
    struct landlock_plan ll;
    landlock_plan_init(&ll, landlock_abi());
    static const char *const ro[] = { "/usr", "/lib", "/lib64", "/etc", "/proc", "/sys" };
    for (size_t i = 0; i < sizeof ro / sizeof ro[0]; i++)
        TRY(landlock_plan_add(&ll, ro[i], LANDLOCK_RO, true, err));
    TRY(landlock_plan_add(&ll, "/dev", LANDLOCK_DEV, false, err));
    TRY(landlock_plan_add(&ll, v->kernel, LANDLOCK_RO, false, err));
    TRY(landlock_plan_add(&ll, v->initramfs, LANDLOCK_RO, false, err));
    for (size_t i = 0; i < v->n_shares; i++)
        TRY(landlock_plan_add(&ll, v->shares[i].host,
                              v->shares[i].writable ? LANDLOCK_HOST_RW : LANDLOCK_RO, false, err));
    (void)saving; /* the snapshot travels as an open descriptor either way */
    /* Debugging only: the guest's console, written to a file the caller names. */
    const char *console = getenv("CORDON_MICROVM_CONSOLE");
    char dir[PATH_MAX];
    if (console && snprintf(dir, sizeof dir, "%s", console) < (int)sizeof dir &&
        strrchr(dir, '/')) {
        *strrchr(dir, '/') = '\0';
        TRY(landlock_plan_add(&ll, *dir ? dir : "/", LANDLOCK_RW, false, err));
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot set no_new_privs");
    TRY(landlock_plan_apply(&ll, err));
    if (give >= 0 && engine_keeper_confine(&v->names_filter, give) < 0)
        return err_sys(err, CORDON_E_SETUP, "microvm: cannot hand QEMU's names to its keeper");
    return seccomp_program_install(&v->qemu_filter, err);
}

/* Start QEMU; RESTORE_FD >= 0 restores the snapshot read from it. */
/*
 * Start QEMU; with INCOMING it waits, paused, for a migration stream (see
 * vm_restore). The guest's memory is a memfd we hold too: a snapshot saves
 * it as a file of its own, and a restore fills it while QEMU starts.
 */
/*
 * QEMU's command line for plan V: the microvm machine on the RAM memfd, the
 * guest's kernel and initramfs, its serial ports on CTL and EG, the 9p
 * shares, QMP on QMP, QEMU's own sandbox; INCOMING: paused, for a snapshot.
 */
static void qemu_argv(struct argv_builder *a, const struct vm_plan *v, bool incoming, int ram,
                      int ctl, int eg, int qmp)
{
    arg(a, "%s", v->qemu);
    arg(a, "-M");
    arg(a, "microvm,x-option-roms=off,acpi=off,isa-serial=%s,memory-backend=ram",
        getenv("CORDON_MICROVM_CONSOLE") ? "on" : "off");
    arg(a, "-object");
    arg(a, "memory-backend-file,id=ram,size=%lluM,mem-path=/proc/self/fd/%d,share=on",
        (unsigned long long)v->mem_mib, ram);
    arg(a, "-accel");
    arg(a, "%s", v->kvm ? "kvm" : "tcg,tb-size=64");
    arg(a, "-cpu");
    arg(a, "%s", v->kvm ? "host" : "max");
    arg(a, "-m");
    arg(a, "%lluM", (unsigned long long)v->mem_mib);
    arg(a, "-smp");
    arg(a, "1");
    static const char *const fixed[] = { "-nodefaults", "-no-user-config", "-display",
                                         "none",        "-no-reboot",      "-kernel" };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        arg(a, "%s", fixed[i]);
    arg(a, "%s", v->kernel);
    arg(a, "-initrd");
    arg(a, "%s", v->initramfs);
    arg(a, "-append");
    arg(a, "console=ttyS0 quiet panic=-1 random.trust_cpu=on");
    const char *console = getenv("CORDON_MICROVM_CONSOLE");
    if (console) {
        arg(a, "-serial");
        arg(a, "file:%s", console);
    }
    arg(a, "-device");
    arg(a, "virtio-serial-device,max_ports=3");
    arg(a, "-chardev");
    arg(a, "socket,id=ctl,fd=%d", ctl);
    arg(a, "-device");
    arg(a, "virtserialport,chardev=ctl,nr=1");
    arg(a, "-chardev");
    arg(a, "socket,id=eg,fd=%d", eg);
    arg(a, "-device");
    arg(a, "virtserialport,chardev=eg,nr=2");
    for (size_t i = 0; i < VM_SLOTS; i++) {
        bool used = i < v->n_shares;
        arg(a, "-fsdev");
        arg(a, "local,id=fs%zu,path=%s,security_model=none,multidevs=remap%s", i,
            used ? v->shares[i].host : "/usr", used && v->shares[i].writable ? "" : ",readonly=on");
        arg(a, "-device");
        arg(a, "virtio-9p-device,fsdev=fs%zu,mount_tag=s%zu", i, i);
    }
    arg(a, "-chardev");
    arg(a, "socket,id=qmp,fd=%d", qmp);
    arg(a, "-mon");
    arg(a, "chardev=qmp,mode=control");
    /* QEMU's own seccomp sandbox: it never spawns (a snapshot travels over a descriptor). */
    arg(a, "-sandbox");
    arg(a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
    if (incoming) {
        /* Paused once loaded, then `cont`: under TCG a guest restored straight
         * into the running state is never kicked and stays idle. */
        arg(a, "-S");
        arg(a, "-incoming");
        arg(a, "defer");
    }
}

int vm_spawn(const struct vm_plan *v, bool incoming, struct vm *vm, struct cordon_err *err)
{
    int ctl[2] = { -1, -1 }, eg[2] = { -1, -1 }, qmp[2] = { -1, -1 };
    *vm = (struct vm){
        .qemu = -1, .pidfd = -1, .ctl = -1, .eg = -1, .qmp = -1, .ram = -1, .keeper = -1
    };
    struct engine_keeper ek = { -1, -1 };
    if (v->names.mode != NAMES_OFF && engine_keeper_start(NULL, &v->names, &ek, err) < 0)
        return -1;
    vm->keeper = ek.keeper;
    int ram = memfd_create("cordon-vm-ram", MFD_CLOEXEC);
    if (ram < 0 || ftruncate(ram, (off_t)(v->mem_mib << 20)) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, eg) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, qmp) < 0) {
        int all[] = { ram, ctl[0], ctl[1], eg[0], eg[1], qmp[0], qmp[1] };
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i] >= 0)
                close(all[i]);
        return err_sys(err, CORDON_E_SETUP,
                       "microvm: cannot create the guest's memory and sockets");
    }
    struct argv_builder a = { .n = 0 };
    qemu_argv(&a, v, incoming, ram, ctl[1], eg[1], qmp[1]);
    bool oom = false;
    for (size_t i = 0; i < a.n; i++)
        oom |= !a.v[i];

    pid_t pid = oom ? -1 : fork();
    if (pid == 0) {
        struct cordon_err cerr = { 0 };
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        int keep[] = { ctl[1], eg[1], qmp[1], ram, 2 };
        for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
            if (keep[i] >= 0)
                fcntl(keep[i], F_SETFD, 0);
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 0);
        dup2(devnull, 1);
        /* A snapshot that fails to load is expected now and then (a changed
         * QEMU): the cold boot that follows speaks for itself. */
        if ((incoming || v->quiet) && !getenv("CORDON_MICROVM_CONSOLE"))
            dup2(devnull, 2);
        if (confine_qemu(v, false, ek.give, &cerr) < 0) {
            dprintf(2, "cordon: microvm: %s\n", cerr.msg);
            _exit(125);
        }
        execv(a.v[0], a.v);
        _exit(127);
    }
    for (size_t i = 0; i < a.n; i++)
        free(a.v[i]);
    if (ek.give >= 0)
        close(ek.give);
    close(ctl[1]);
    close(eg[1]);
    close(qmp[1]);
    if (pid < 0) {
        close(ctl[0]);
        close(eg[0]);
        close(qmp[0]);
        close(ram);
        return err_sys(err, CORDON_E_SETUP, "microvm: cannot start QEMU");
    }
    vm->qemu = pid;
    shim_qemu = pid;
    vm->pidfd = sys_pidfd_open(pid, 0);
    vm->ctl = ctl[0];
    vm->eg = eg[0];
    vm->qmp = qmp[0];
    vm->ram = ram;
    return 0;
}

/* ---- QMP: one command, its answer ---- */

static int qmp_line(int fd, char *buf, size_t size, int timeout_ms)
{
    size_t n = 0;
    uint64_t deadline = monotonic_us() + (uint64_t)timeout_ms * 1000;
    while (n < size - 1) {
        uint64_t now = monotonic_us();
        if (now >= deadline)
            return -1;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, (int)((deadline - now) / 1000) + 1) <= 0)
            return -1;
        ssize_t r = read(fd, buf + n, 1);
        if (r <= 0)
            return -1;
        if (buf[n] == '\n') {
            buf[n] = '\0';
            return 0;
        }
        n++;
    }
    return -1;
}

/* Send CMD (with FD passed alongside when >= 0); 0 when it returned, its answer in OUT. */
int qmp(int sock, const char *cmd, int fd, char *out, size_t size)
{
    int rc = fd >= 0 ? send_fds(sock, cmd, strlen(cmd), &fd, 1)
                     : (write(sock, cmd, strlen(cmd)) == (ssize_t)strlen(cmd) ? 0 : -1);
    if (rc < 0)
        return -1;
    for (;;) {
        if (qmp_line(sock, out, size, 10000) < 0)
            return -1;
        if (strstr(out, "\"return\""))
            return 0;
        if (strstr(out, "\"error\""))
            return -1;
        /* an event: read on */
    }
}

int qmp_handshake(int sock)
{
    char line[4096];
    if (qmp_line(sock, line, sizeof line, 10000) < 0 || !strstr(line, "QMP"))
        return -1;
    return qmp(sock, "{\"execute\":\"qmp_capabilities\"}\n", -1, line, sizeof line);
}

/* ---- guest frames, read whole with a deadline (boot and restore only) ---- */

static enum cordon_err_kind error_kind(uint32_t vm_kind)
{
    return vm_kind == VM_ERR_NOTFOUND ? CORDON_E_NOTFOUND
        : vm_kind == VM_ERR_NOEXEC    ? CORDON_E_NOEXEC
                                      : CORDON_E_SETUP;
}

/* A VM_ERROR frame F as ERR: the guest's words, shown to the user, printable bytes only. */
void guest_error(const struct vm_frame *f, struct cordon_err *err)
{
    uint32_t kind;
    memcpy(&kind, f->data, 4);
    size_t mlen = f->len - 4 < sizeof err->msg - 1 ? f->len - 4 : sizeof err->msg - 1;
    err->kind = error_kind(kind);
    memcpy(err->msg, f->data + 4, mlen);
    err->msg[mlen] = '\0';
    for (size_t i = 0; i < mlen; i++)
        if ((unsigned char)err->msg[i] < 0x20 || (unsigned char)err->msg[i] > 0x7e)
            err->msg[i] = '?';
}

/*
 * The guest's next frame, which must be WANT (VM_READY once it is up, VM_SET
 * once the setup is in place) and the last it sends until the host speaks:
 * an error frame is its reason, anything else breaks the protocol.
 */
int wait_frame(struct vm *vm, uint32_t want, int timeout_ms, struct cordon_err *err)
{
    struct vm_reader *r = malloc(sizeof *r);
    if (!r)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    vm_reader_init(r, VM_PORT_CONTROL);
    uint64_t deadline = monotonic_us() + (uint64_t)timeout_ms * 1000;
    const char *what = want == VM_READY ? "come up" : "set the run up";
    int rc = -1;
    char buf[VM_ERROR_MAX + VM_FRAME_HEADER];
    for (;;) {
        uint64_t now = monotonic_us();
        struct pollfd p = { .fd = vm->ctl, .events = POLLIN };
        if (now >= deadline || poll(&p, 1, (int)((deadline - now) / 1000) + 1) <= 0) {
            err_set(err, CORDON_E_SETUP, "microvm: the guest did not %s within %d ms", what,
                    timeout_ms);
            break;
        }
        ssize_t n = read(vm->ctl, buf, sizeof buf);
        if (n <= 0) {
            err_set(err, CORDON_E_SETUP, "microvm: the guest stopped before it could %s", what);
            break;
        }
        size_t used;
        struct vm_frame f;
        int got = vm_reader_feed(r, buf, (size_t)n, &used, &f, err);
        if (got < 0)
            break;
        if (got == 1 && f.type == VM_ERROR) {
            guest_error(&f, err);
            break;
        }
        if (got == 1 && f.type == want && used == (size_t)n) {
            rc = 0;
            break;
        }
        if (got == 1) {
            err_set(err, CORDON_E_SETUP, "microvm: the guest spoke out of turn (frame type %u)",
                    f.type);
            break;
        }
    }
    free(r);
    return rc;
}
