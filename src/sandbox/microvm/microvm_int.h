/*
 * sandbox/microvm/microvm_int.h: what the microvm level's files share: the
 * plan the supervisor makes, the running VM, and the steps each file
 * offers the others. Nothing outside src/sandbox/microvm/ includes it.
 */
#pragma once
#include "sandbox/microvm/microvm.h"
#include "sandbox/microvm/vmproto.h"
#include "common/cleanup.h"
#include "common/err.h"
#include "common/installed.h"
#include "common/syscalls.h"
#include "policy/policy.h"
#include "sandbox/backend.h"
#include "sandbox/engine.h"
#include "sandbox/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define QEMU_DEFAULT "/usr/bin/qemu-system-x86_64"
#define KERNEL_DEFAULT "/var/cache/cordon/guest-kernel/current"
#define SNAPSHOT_DIR_DEFAULT "/var/cache/cordon/microvm"
#define INITRAMFS_NAME "cordon-guest.cpio"
/*
 * A snapshot file: this magic, the digest and a newline, then "ram " and the
 * guest memory's offset in 16 hex digits and a newline; QEMU's migration
 * stream of the devices; then, from that page-aligned offset, the guest's
 * memory as a sparse image (pages that were zero are holes).
 */
#define SNAPSHOT_MAGIC "cordon-microvm-snapshot 2\n"
#define SNAPSHOT_RAM_FIELD "ram %016llx\n"
#define SNAPSHOT_HEAD_LEN (sizeof SNAPSHOT_MAGIC - 1 + 65 + 21)
#define PAGE 4096u
/* 9p share slots: the device layout is fixed so one snapshot serves every
 * policy; a run points the slots it uses at its paths, the rest at /usr. */
#define VM_SLOTS 6 /* microvm has 8 virtio-mmio transports; virtio-serial takes one */
/* QEMU's own threads (vCPU, I/O, 9p workers) at most, where the run has a pids cgroup. */
#define VM_QEMU_TASKS 256
#define BOOT_TIMEOUT_MS 30000
#define RESTORE_TIMEOUT_MS 10000
#define SETUP_TIMEOUT_MS 30000 /* mounting the shares: ~50 ms under TCG */
#define VM_MAX_RAM_MIB 2048

/* The guest agent knows these by vm_wire.h's names. */
_Static_assert(VM_GATEWAY_PORT == GATEWAY_PORT, "the guest's proxy port");
_Static_assert(VM_DNS_STUB_ADDR == DNS_STUB_ADDR, "the guest's DNS stub");
_Static_assert(VM_SYNTH_NET == SYNTH_NET && VM_SYNTH_PREFIX == SYNTH_PREFIX,
               "the guest's synthetic range");
_Static_assert(SYNTH_MAX_PORTS <= VM_MAX_PORTS, "the call carries every transparent port");

struct vm_share {
    const char *host;  /* host directory */
    const char *guest; /* where the agent mounts it */
    const char *file;  /* a file bind: the file's name in HOST, bound at GUEST; or NULL */
    bool writable;
};

/* Everything the shim needs, decided in the supervisor before fork(). */
struct vm_plan {
    char qemu[PATH_MAX];
    char kernel[PATH_MAX];
    char initramfs[PATH_MAX];
    char snapshot[PATH_MAX]; /* the snapshot file for this layout, or "" */
    char snapshot_dir[PATH_MAX - 64];
    char digest[65]; /* kernel, initramfs, QEMU and the machine's shape */
    char kernel_digest[65], initramfs_digest[65];
    bool kvm;
    uint64_t mem_mib;
    struct vm_share shares[VM_SLOTS];
    char paths[VM_SLOTS][PATH_MAX]; /* the shares' host paths, owned here */
    size_t n_shares;
    struct vm_buf setup; /* VM_SETUP's policy part: rlimits, mounts, filter */
    /* Transparent egress: the guest's DNS stub, and a listener per port. */
    bool transparent;
    /* The run's CA and the trust store with it, for the guest's /etc (or NULL). */
    const char *ca_pem;
    char *ca_bundle;
    uint16_t ports[VM_MAX_PORTS];
    uint32_t n_ports;
    uint32_t nets[VM_MAX_NETS]; /* allowed literals' IPv4 ranges, routed to the guest's loopback */
    uint32_t prefixes[VM_MAX_NETS];
    uint32_t n_nets;
    /* The run's own syscall filter, for QEMU too: its -sandbox is QEMU's
     * idea of what QEMU needs; this one is cordon's, under it. */
    struct seccomp_program qemu_filter;
    /* The names QEMU's 9p server makes in a host workspace written directly
     * go to a keeper (sandbox/engine.h): none protected at its root. */
    struct names_keeper names;
    struct seccomp_program names_filter;
    bool quiet; /* QEMU's complaints are expected (the KVM probe) */
};

struct vm {
    pid_t qemu;
    int pidfd;
    int ctl, eg, qmp; /* our ends of the control port, the egress port and QMP */
    int ram;          /* the guest's memory, a memfd QEMU maps shared */
    pid_t keeper;     /* the keeper of QEMU's names, or -1 */
};

struct shim_fds {
    int sync_r, err_w, status_w, start_r, gw_sock, info_w;
    uid_t uid; /* the caller's, the sandbox user in the shim's user namespace */
    gid_t gid;
};

extern pid_t shim_qemu; /* the shim's QEMU, killed if the shim fails */

/* plan.c */
int cached_sha256(const char *path, const char *dir, char out[65], struct cordon_err *err);
void text_sha256(const char *text, char out[65]);
const char *env_or(const char *name, const char *fallback);
int find_initramfs(char out[PATH_MAX], struct cordon_err *err);
int plan_vm(const struct sandbox_setup *s, struct vm_plan *v, struct cordon_err *err);

/* qemu.c */
void vm_kill(struct vm *vm);
int vm_spawn(const struct vm_plan *v, bool incoming, struct vm *vm, struct cordon_err *err);
int qmp(int sock, const char *cmd, int fd, char *out, size_t size);
int qmp_handshake(int sock);
void guest_error(const struct vm_frame *f, struct cordon_err *err);
int wait_frame(struct vm *vm, uint32_t want, int timeout_ms, struct cordon_err *err);

/* snapshot.c */
int vm_restore(const struct vm_plan *v, struct vm *vm, struct cordon_err *err);
int vm_boot(const struct vm_plan *v, bool save, struct vm *vm, struct cordon_err *err);
int vm_resume(struct vm *vm);

/* kvm.c */
bool hardware_kvm(char *why, size_t size);

/* shim_egress.c: the egress port's relay (a port the shim hands it, made non-blocking) */
struct pollfd;
struct eg_relay *eg_relay_new(int port);
/* Its descriptors to poll, into P: the port first; how many. */
size_t eg_relay_poll(const struct eg_relay *r, struct pollfd *p);
/* What poll() found on them; -1 with ERR when the run must end. */
int eg_relay_events(struct eg_relay *r, const struct pollfd *p, struct cordon_err *err);
#define EG_RELAY_FDS (1 + VM_EG_MAX_CONNS)

/* shim.c */
_Noreturn void shim_main(const struct sandbox_setup *s, struct vm_plan *v,
                         const struct shim_fds *fds);

/* microvm.c */
int microvm_probe(struct cordon_err *err);
