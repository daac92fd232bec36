/*
 * sandbox/plan.h: everything the namespace child needs, decided and
 * allocated by the supervisor before clone(). The child only reads it, so
 * nothing between clone() and exec() allocates or parses.
 */
#pragma once
#include "policy/policy.h"
#include "sandbox/confine.h"
#include "sandbox/door.h"
#include "sandbox/names.h"
#include "sandbox/usock.h"

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

/* The sandbox user inside every sandbox. */
#define SANDBOX_UID 1000
#define SANDBOX_GID 1000
#define SANDBOX_USER "sandbox"
#define SANDBOX_HOSTNAME "cordon"
/* HOME: private to the run, on its /tmp, so tool caches and logs (.npm,
 * .cache/pip, .gitconfig) never land in the workspace. Each level makes it
 * before the command runs. */
#define SANDBOX_HOME "/tmp/home"
/* The run's CA, alone and appended to the host's bundle, when secrets need interception. */
#define SANDBOX_CA_CERT "/etc/cordon/run-ca.pem"
#define SANDBOX_CA_BUNDLE "/etc/cordon/ca-bundle.pem"
/* NO_PROXY inside: loopback, by every name clients compare (core/run.c says why). */
#define SANDBOX_NO_PROXY "localhost,127.0.0.1,::1"

enum mount_kind {
    MOUNT_BIND,    /* host path (or a prepared tree) at dest */
    MOUNT_TMPFS,   /* fresh tmpfs; data holds its options */
    MOUNT_PROC,    /* fresh procfs of the sandbox's PID namespace */
    MOUNT_DEVPTS,  /* a private devpts instance */
    MOUNT_SYMLINK, /* dest -> source */
    MOUNT_FILE,    /* a generated file: source is its content */
    MOUNT_DIR,     /* an empty directory */
    MOUNT_SYSFS,   /* sysfs, read-only (the host's /sys bound read-only where the
                       network namespace is not the boundary's own) */
    MOUNT_MQUEUE,  /* a POSIX message queue filesystem */
    MOUNT_CGROUP2, /* the cgroup v2 hierarchy from the cgroup namespace's root, read-only */
    MOUNT_MASK,    /* whatever is at dest hidden: a file under /dev/null, a directory under
                       an empty read-only tmpfs; nothing there, nothing done */
};

struct mount_step {
    enum mount_kind kind;
    char *dest;   /* absolute path inside the sandbox */
    char *source; /* host path, link target or content, per kind */
    char *data;   /* tmpfs options */
    int tree_fd;  /* MOUNT_BIND: prepared detached tree, or -1 */
    bool writable;
    bool device;          /* MOUNT_BIND of a device node: keep dev, add noexec */
    bool optional;        /* skip when the host source is missing */
    bool follow_symlinks; /* MOUNT_BIND: the source may pass through links (host-owned
                             system paths, or a bind the policy lets follow them) */
    bool in_workspace;    /* MOUNT_BIND onto an entry of the host workspace: its parents
                            and itself are never made, a link there is covered, not
                            followed, and a vanished entry is skipped */
    bool source_in_root;  /* MOUNT_BIND: source is dest itself in the new root (a read-only
                            bind over itself, taken from the workspace's own mount) */
    bool overlay;         /* MOUNT_BIND of the workspace as the read-only lower layer of an
                            overlay whose upper is on a fresh tmpfs (data: its options) */
    bool over;            /* MOUNT_FILE: written in the scratch root and bound read-only
                            over dest, so a root that is not cordon's own is not written */
    bool per_call;        /* the run's own (/tmp, /dev/shm, the scratch workspace, devpts):
                            a template holds only its mountpoint, each clone a fresh one */
};

struct ns_plan {
    struct mount_step *steps;
    size_t n_steps;
    /* The root: a host tree (an OCI bundle's) bound at / instead of a fresh
     * tmpfs, or NULL. ROOT_TREE: its prepared (idmapped) copy, or -1. */
    const char *root;
    bool root_writable;
    int root_tree;
    struct confine_plan confine;    /* the core's rlimits and the Landlock rules of the mounts */
    struct seccomp_program seccomp; /* compiled after clone(), sent to the child */
    /* The command's connect()s, and the names it makes in a host workspace,
     * go to init, which makes them (usock.h, names.h). */
    struct seccomp_program keeper_filter;
    struct usock_keeper usock;
    struct egress_door door;   /* and a connect to a literal goes by the gateway's door */
    struct names_keeper names; /* its root is opened by init, after the pivot */
    bool caller_is_root;       /* root-started: become the sandbox uid, drop groups */
    /* Building a template (sandbox/template.h): the steps every call
     * shares, and only the mountpoints of the per-call ones. */
    bool template;
    /* A clone of a template: only the per-call steps are made; the steps,
     * the Landlock plan and the compiled filters are the template's. */
    bool cloned;
    /* Transparent egress: resolv.conf names the DNS stub, the synthetic range
     * is routed to loopback and the gateway gets a listener on each port. */
    bool transparent;
    uint16_t ports[SYNTH_MAX_PORTS];
    size_t n_ports;
};

struct workspace_guard;

/* In the supervisor: the mount steps for P (and the Landlock rules that match them);
 * WS, when P has a host workspace, says what in it to cover. */
int mounts_plan(const struct policy *p, struct ns_plan *plan, uid_t map_host_uid,
                const struct workspace_guard *ws, struct cordon_err *err);

/* In the supervisor: the run's CA certificate (PEM) at SANDBOX_CA_CERT, and
 * with the host's trust store at SANDBOX_CA_BUNDLE. */
int mounts_add_ca(struct ns_plan *plan, const char *ca_pem, struct cordon_err *err);

/*
 * In the child: build the root described by PLAN and pivot into it. With an
 * overlay workspace, *LAYER is an O_PATH descriptor of the tmpfs holding its
 * upper layer (for the supervisor, who commits it); else -1.
 */
int mounts_enter_root(const struct ns_plan *plan, int *layer, struct cordon_err *err);

/*
 * In the child, a clone of a template's tree (its mount namespace copied):
 * the per-call steps of PLAN, fresh, over their mountpoints, and a /proc of
 * the child's own PID namespace over the template's.
 */
int mounts_enter_clone(const struct ns_plan *plan, struct cordon_err *err);

void mounts_plan_release(struct ns_plan *plan);

/* In the supervisor: one more step (a front end's own root: see container.c); CAP is the
 * size add() grew STEPS to, or the step count when nothing was added yet. */
int mounts_plan_add(struct ns_plan *plan, size_t *cap, enum mount_kind kind, const char *dest,
                    const char *source, const char *data, bool writable, bool optional,
                    struct cordon_err *err);

/*
 * In the supervisor: a detached copy of host tree SOURCE whose files owned
 * by ids 0..COUNT-1 appear owned by FROM.., for a root-started sandbox whose
 * ids start at FROM. -1 with ERR (a filesystem without idmapped mounts).
 */
int mounts_idmapped_tree(const char *source, bool follow, uid_t from, uid_t count,
                         struct cordon_err *err);

/* The same without an idmapping: for a source the sandbox's own ids could not reach. */
int mounts_cloned_tree(const char *source, bool follow, struct cordon_err *err);

/* The host's /etc entries every level shows read-only ("/etc/ssl", ...). */
