/*
 * sandbox/container.h: what an OCI bundle asks of a boundary, decided by a
 * front end (src/oci/ reads config.json into it) and built by the namespace
 * level in place of its own root: the bundle's root filesystem, the spec's
 * mounts, its user, hostname and capabilities, namespaces joined by path,
 * and the container's cgroup. cordon's own confinement (its user namespace,
 * no_new_privs, Landlock, its seccomp allowlist) stays on top of it all.
 *
 * The boundary is detached: its init is a child of the front end's parent
 * (CLONE_PARENT), never of the supervisor, so that the caller of `create`
 * (a shim, a subreaper) reaps it; it does not die with the supervisor, and
 * it exits with the workload's status (128+N for a signal).
 */
#pragma once
#include "sandbox/confine.h"
#include "sandbox/seccomp.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum container_mount_type {
    CONTAINER_BIND,
    CONTAINER_TMPFS,
    CONTAINER_PROC,
    CONTAINER_SYSFS, /* always read-only */
    CONTAINER_DEVPTS,
    CONTAINER_MQUEUE,
    CONTAINER_CGROUP, /* the cgroup v2 view, always read-only */
};

struct container_mount {
    enum container_mount_type type;
    char *dest;   /* absolute inside the container */
    char *source; /* a bind's host path */
    char *data;   /* filesystem options (tmpfs size/mode, devpts's) */
    bool readonly;
    bool device; /* a bind of a device node */
};

/* The namespaces a spec may name by path instead of asking for a new one. */
enum container_ns { CONTAINER_NS_NET, CONTAINER_NS_IPC, CONTAINER_NS_UTS, CONTAINER_NS_COUNT };

/* Container ids 0..CONTAINER_IDS-1 map to a private range of host ids. */
#define CONTAINER_IDS 65536u

struct sandbox_container {
    const char *id;
    const char *root; /* the root filesystem: absolute host path */
    bool root_readonly;
    struct container_mount *mounts;
    size_t n_mounts;
    char **masked; /* paths hidden (a file under /dev/null, a dir under an empty
                                    read-only tmpfs); missing ones are skipped */
    size_t n_masked;
    char **readonly; /* paths bound read-only over themselves */
    size_t n_readonly;
    const char *hostname;                    /* NULL: keep the one a joined UTS namespace has */
    const char *ns_path[CONTAINER_NS_COUNT]; /* join this namespace, or NULL: a new one */
    uid_t uid;                               /* the process's ids, inside the container */
    gid_t gid;
    gid_t groups[32];
    size_t n_groups;
    const char *cwd;
    mode_t umask;                  /* process.user.umask, else 022 */
    uint64_t caps;                 /* bounding, permitted and effective: the spec's bounding
                                    set and the policy's allowance together (bit = CAP_*) */
    bool terminal;                 /* the process gets a pty made at create (tty_master) */
    struct seccomp_program filter; /* the spec's own filter (installed before cordon's, so
                                      the stricter wins), or len 0 */
    struct rlimit_step rlimits[CONFINE_MAX_RLIMITS]; /* the spec's: each is a ceiling on top
                                                        of the policy's */
    size_t n_rlimits;
    const char *sysctl[16][2]; /* name ("net.ipv4.ip_unprivileged_port_start"), value: only
                                    of namespaces the container has of its own */
    size_t n_sysctl;
    int oom_score_adj;
    bool set_oom_score_adj;
    uint32_t id_base;      /* root-started: host ids of the container's 0.. */
    const char *cgroup;    /* the container's cgroup ("/default/ID": from each
                                    hierarchy's root), kept after the run for the engine's
                                    stats and removed by the front end; NULL: the run's own */
    bool cgroup_optional;  /* a rootless engine's container asking for no resources: where
                                    no cgroup can be made, the run goes on without (its limits
                                    then hold per process, as the policy allows) */
    const char *hidden[2]; /* host files never shown through a bind (the audit log
                                    and its key), or NULL */
};

/*
 * The command's own confinement for C on top of CP (the run's rlimits): the
 * spec's stricter rlimits, its capabilities and filter, and Landlock over
 * the container's tree. The boundary's command takes it; so does a process
 * a front end starts in the container later (exec).
 */
int container_confine_plan(const struct sandbox_container *c, struct confine_plan *cp,
                           struct cordon_err *err);

/* Free what a front end allocated into C (mounts, paths, the filter). */
void container_release(struct sandbox_container *c);
