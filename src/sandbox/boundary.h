/*
 * sandbox/boundary.h: the pieces every level's boundary shares between
 * fork and exec (its top process and the command) and the supervisor's
 * side of building one: error records, the compiled filter handed over a
 * pipe, signals passed on to the command, and the command's last steps
 * before exec. Nothing here allocates in the child.
 */
#pragma once
#include "sandbox/backend.h"
#include "common/err.h"
#include "sandbox/seccomp.h"
#include "sandbox/start.h"

#include <stdbool.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

struct policy;

/*
 * What of the host every level shows (bound at the namespace level, allowed
 * by Landlock at the process level): merged-/usr links or real directories,
 * the /etc entries programs need (passwd, group, hosts and nsswitch.conf are
 * generated where a level can, never the host's), and the harmless devices.
 */
#define SANDBOX_N_USR_LINKS 6
#define SANDBOX_N_ETC_FILES 22
#define SANDBOX_N_DEV_NODES 6
extern const char *const sandbox_usr_links[SANDBOX_N_USR_LINKS];
extern const char *const sandbox_etc_files[SANDBOX_N_ETC_FILES];
extern const char *const sandbox_dev_nodes[SANDBOX_N_DEV_NODES];

/*
 * What of one of cordon's own host entries (sandbox_etc_files) not everyone
 * may read: a file without o+r, a directory without o+rx (not looked into).
 * The namespace level shows the entries to an unprivileged uid, so its
 * kernel refuses these; where the command owns root's files (a root
 * caller's run at the process level, and gVisor's and the guest's views of
 * them) they are masked or left out instead, so /etc/ssl/private's keys are
 * unreadable at every level. Links are given as links: where one leads is
 * checked there.
 */
#define SANDBOX_UNREADABLE_MAX 32
struct sandbox_unreadable {
    bool all; /* the entry itself, or more than could be looked through: none of it */
    size_t n;
    char *path[SANDBOX_UNREADABLE_MAX]; /* host paths beneath the entry, malloc'd */
    bool dir[SANDBOX_UNREADABLE_MAX];
};
bool sandbox_readable_by_all(mode_t mode);
void sandbox_find_unreadable(const char *entry, struct sandbox_unreadable *u);
void sandbox_unreadable_free(struct sandbox_unreadable *u);

/*
 * The host files no run may see at any level: the audit log, its witness
 * and its signing key (NULL where the policy has none).
 */
#define SANDBOX_N_HIDDEN_FILES 3
void sandbox_hidden_files(const struct policy *p, const char *out[SANDBOX_N_HIDDEN_FILES]);

/*
 * Where those files would show inside through the policy's binds (never
 * writable ones: policy_finalize refuses that), each to be covered by a
 * read-only, nodev /dev/null: at most MAX paths into AT.
 */
#define SANDBOX_MAX_HIDDEN 64
size_t sandbox_hidden_paths(const struct policy *p, char (*at)[PATH_MAX], size_t max);

/* The generated /etc/passwd, /etc/group, /etc/hosts and /etc/hostname. */
extern const char sandbox_passwd[], sandbox_group[], sandbox_hosts[], sandbox_hostname[];

/*
 * The generated /etc/nsswitch.conf and /etc/resolv.conf, for the levels that
 * write them (namespace, microvm): with TRANSPARENT egress the DNS stub on
 * 127.0.0.53 is the one nameserver and hosts fall back to it; without, no
 * nameserver at all.
 */
const char *sandbox_nsswitch_conf(bool transparent);

/*
 * A writable tmpfs's options into OUT: BASE, its size, and its inode count,
 * without which a run could fill memory with empty files that take no size
 * at all. No INODES (0) leaves the kernel's default, half the RAM's pages.
 */
void sandbox_tmpfs_opts(char *out, size_t len, const char *base, uint64_t size, uint64_t inodes);
const char *sandbox_resolv_conf(bool transparent);

/*
 * The trust store every level shows the command when the gateway intercepts
 * TLS (secrets bound to hosts): the host's store, then the run's CA PEM.
 * *OUT is malloc'ed, *LEN its length.
 */
int sandbox_ca_bundle(const char *ca_pem, char **out, size_t *len, struct cordon_err *err);

/*
 * What a boundary writes on its status pipe once the command is gone: the
 * wait status, then what a kernel of its own saw (microvm's guest kernel;
 * the other levels write the status alone and the host's cgroup tells).
 * A boundary whose top process is the init of the run's PID namespace may
 * say more: that every other process of the run is gone already (killed
 * and reaped), and what their CPU and memory came to; the supervisor then
 * answers at once, and the top's own exit (with it the namespaces'
 * teardown) follows off the answer's path.
 */
#define BOUNDARY_SEEN_OOM 1u  /* its OOM killer fired while the command ran */
#define BOUNDARY_TREE_GONE 2u /* no process of the run is left but the top, which exits next */
struct boundary_status {
    int ws;
    uint32_t seen;
    uint64_t cpu_us;     /* with BOUNDARY_TREE_GONE: the run's processes' CPU, the top's too */
    uint64_t maxrss_kib; /* and the largest of them */
};

/* In the boundary: send ERR to the supervisor over ERR_W and exit with its status. */
_Noreturn void boundary_fail(int err_w, struct cordon_err *err);

/*
 * The boundary's top process is a fork of the supervisor, so its cmdline
 * and environ would show the supervisor's (host paths, flag values, the
 * host's variables): blank them in place and call it NAME.
 */
void boundary_scrub_args_and_env(const char *name);

/* Pass SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2 on to TO's session (or TO). */
void boundary_forward_signals(pid_t to);

/*
 * In the supervisor: compile P's filter into PROG and write it to FD, while
 * the boundary builds itself; EPIPE (the boundary failed first) is not ours
 * to report.
 */
int boundary_send_filter(const struct policy *p, struct seccomp_program *prog, int fd,
                         struct cordon_err *err);

/* In the boundary: that filter, into static storage. */
bool boundary_receive_filter(int fd, struct seccomp_program *out);

/* In the supervisor: kill and reap the boundary's top process and close its
 * descriptors; every level's release starts here. Idempotent. */
void boundary_release(struct sandbox_boundary *b);

/* In the supervisor: the boundary's error record once it failed (-1 always). */
int boundary_child_error(int err_r, struct cordon_err *err);

/*
 * The ports a name rule allows, each to get a transparent listener in the
 * sandbox, into PORTS (SYNTH_MAX_PORTS of them at most); the proxy's own
 * port is left out: every level holds that one at the gateway's door. With
 * NETS (the levels whose own kernel makes the run's connects: gvisor,
 * microvm), the allowed IPv4 literals' ranges too, MAX_NETS at most, their
 * count in *N_NETS, and their ports among PORTS.
 */
size_t boundary_transparent_ports(const struct policy *p, uint16_t ports[SYNTH_MAX_PORTS],
                                  uint32_t *nets, unsigned *prefixes, size_t max_nets,
                                  size_t *n_nets);

/*
 * In the supervisor: a fresh 0700 directory BASE/cordon-KIND-PID-XXXXXX (a
 * random suffix) into OUT, named to S's guard (the watchdog) before it is
 * made, so that no kill leaves it behind. -1 with ERR, OUT "".
 */
int boundary_private_dir(const struct sandbox_setup *s, const char *base, const char *kind,
                         char *out, size_t size, struct cordon_err *err);

/*
 * In the command, after the seam: its own session, stdio from M (or the pty
 * TTY, >= 0, as its controlling terminal), every other
 * descriptor close-on-exec, WORKDIR, then CONFINE(ARG) (the level's chain)
 * and exec. Any failure goes to ERR_W.
 */
_Noreturn void boundary_exec(const struct start_message *m, int tty, const char *workdir, int err_w,
                             int (*confine)(void *arg, struct cordon_err *err), void *arg);
