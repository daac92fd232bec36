/*
 * sandbox/backend.h: the one interface every isolation level implements,
 * and the run's result. The policy, the relay and the limits are the same
 * above each level; a backend decides only how the boundary is built.
 */
#pragma once
#include "common/err.h"
#include "policy/policy.h"
#include "sandbox/confine.h"
#include "sandbox/start.h"
#include "sandbox/txn.h"
#include "sandbox/workspace.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum run_reason {
    RUN_EXITED,
    RUN_TIMEOUT,
    RUN_OOM,
    RUN_PIDS_LIMIT,
    RUN_OUTPUT_LIMIT,
    RUN_CPU_LIMIT,
    RUN_FILE_SIZE_LIMIT, /* the command died of SIGXFSZ: it wrote past limits.file_size */
    RUN_KILLED,
    RUN_SETUP_ERROR,
};

const char *run_reason_name(enum run_reason r);

/* How a limit was enforced on this run. */
enum enforcement {
    ENFORCED_NONE,
    ENFORCED_CGROUP_V1,
    ENFORCED_CGROUP_V2,
    ENFORCED_RLIMIT,
    ENFORCED_SUPERVISOR,
    ENFORCED_KERNEL, /* the level's own kernel (gVisor's, the guest's), for the whole sandbox */
};

const char *enforcement_name(enum enforcement e);

struct sandbox_result;

/* What a front end brings to a run: the command and where its stdio goes. */
struct sandbox_call {
    char *const *argv;        /* command and arguments; argv[0] searched in PATH */
    const char *run_id;       /* names the run (32 hex digits), or NULL: the one it was prepared
                                under (a pooled run is prepared before its call is known) */
    char *const *envp;        /* NAME=VALUE entries the call adds to the run's environment (NULL:
                                none); the gateway's and the secrets' entries still win */
    uint64_t wall_ms;         /* a wall-clock limit of the call's own, or 0: it only lowers
                                the policy's */
    const char *session_id;   /* the daemon's session the run belongs to, for the audit
                                record, or NULL */
    const char *container_id; /* the OCI container the run is, for the audit record, or NULL */
    const struct start_file *files; /* placed in /workspace before the command starts */
    size_t n_files;
    int in_fd;  /* relayed to the command's stdin (-1: empty) */
    int out_fd; /* where stdout is relayed */
    int err_fd; /* where stderr is relayed */
    int sig_fd; /* a signalfd whose signals pass to the command, or -1: the
                                front end owns its signal handling, the run path never does */
    /* The command on a terminal of the sandbox's own (a pty from its devpts),
     * relayed from in_fd to out_fd; in_fd's window size is passed on. The
     * caller's terminal never enters the sandbox. */
    bool tty;
    /* Told, one line at a time as it happens, what a person watching the run
     * should know (an egress refusal, a limit that degraded); NULL: nobody. */
    void (*notice)(void *arg, const char *line);
    void *notice_arg;
    /* Where an overlay workspace's layer goes when workspace.commit is
     * manual (the result's transaction "pending"); the caller owns it then
     * (sandbox/txn.h). NULL: nobody can decide later, and it is dropped. */
    int *keep_layer;
    /* run_call(): told the result as soon as it is known, the command's
     * processes gone and its output relayed, before the teardown (the
     * boundary's namespaces, the cgroup, the watchdog): a front end answers
     * here, and its caller's wait ends there. NULL: nobody. */
    void (*answer)(void *arg, const struct sandbox_result *res);
    void *answer_arg;
    /* in_fd, out_fd and err_fd become the command's own stdio, not relayed
     * (an OCI container's: its engine reads them); no output limit applies. */
    bool direct_stdio;
    /* The front end the run is for when it is this process's parent (a run
     * handle's: the daemon's, mcp serve's, the broker's), or 0. Gone by the
     * run's end, it was killed or replaced: the overlay's change is
     * discarded, not committed into a workspace nobody is left to answer
     * for (a restarted daemon removes the sessions of the one it replaces). */
    pid_t parent;
};

/* The levels of the policy's list passed over for the one chosen, and why. */
struct sandbox_skips {
    struct sandbox_skip {
        enum cordon_level level;
        char why[sizeof((struct cordon_err *)0)->msg];
    } skip[3]; /* the policy lists at most three fallbacks */
    unsigned n;
};

struct sandbox_result {
    char run_id[33];         /* set by run_once() */
    enum cordon_level level; /* the level the run had (of the policy's list, the one chosen) */
    enum run_reason reason;
    int exit_code; /* valid when !signaled */
    int signal;    /* valid when signaled */
    bool signaled;
    int status; /* cordon's exit status for this run */
    uint64_t wall_us;
    uint64_t cpu_us;
    uint64_t peak_memory;  /* bytes; 0 when unknown */
    uint64_t stdout_bytes; /* relayed */
    uint64_t stderr_bytes;
    enum enforcement enforced[POLICY_LIMIT_COUNT];
    struct egress_summary {
        uint64_t allowed, refused;     /* gateway decisions */
        uint64_t bytes_up, bytes_down; /* through allowed connections */
        char recent[16][768];          /* the last decisions, as JSON lines */
        unsigned n_recent, next;
        char error[256]; /* why the gateway could not start, or "" */
    } egress;
    struct workspace_report workspace; /* a host workspace's scans */
    struct txn_summary txn;            /* an overlay workspace's change, and what became of it */
    char boundary[512];                /* the boundary's evidence (sandbox_boundary.evidence) */
    struct cordon_err error;           /* kind != OK when reason is RUN_SETUP_ERROR */
    char audit[320];              /* what of the run's audit record could not be written, or "" */
    struct sandbox_skips skipped; /* the policy's levels passed over for this one */
};

struct cgroup_set;
struct mem_meter;
struct sandbox_template;

/*
 * What the core decided for a run, the same at every level; a backend builds
 * a boundary to it from the policy alone, before any call is known.
 */
struct sandbox_setup {
    const struct policy *p;
    const struct cgroup_set *cg;        /* the run's cgroup (version 0: none); the boundary
                                       joins it before it runs anything */
    const struct confine_plan *confine; /* the core's part (rlimits); the backend adds its own */
    const char *ca_pem;                 /* the run's CA, to be trusted inside, or NULL */
    const struct workspace_guard *workspace; /* a host workspace's protections, or NULL */
    bool gateway;                            /* open a door for the egress gateway */
    /* Run first in the boundary's first process, a copy of the supervisor:
     * the core wipes there what the boundary must never hold (secret values). */
    void (*in_child)(void *arg);
    void *in_child_arg;
    /* Have host directory DIR removed should the supervisor die (the
     * watchdog's), for a backend that keeps state on disk; may be NULL. */
    int (*guard_dir)(void *arg, const char *dir, struct cordon_err *err);
    void *guard_arg;
    uid_t host_base; /* root-started: the unprivileged host ids the run
                                       uses (base: in-namespace root, +1 the sandbox
                                       user, +2 the gateway) */
    bool ahead;      /* prepared before its call (the daemon's pool):
                                       time spent now to start faster is well spent */
    /* The supervisor holds the memory limit by this meter (meters_memory,
     * and no cgroup): the backend opens it once its boundary runs. NULL: no. */
    struct mem_meter *meter;
    /* An OCI bundle's container (sandbox/container.h) instead of cordon's own
     * root and user; only a level with .containers builds one. */
    const struct sandbox_container *container;
    /* A template of P made by this level's template_build (borrowed): the
     * boundary is cloned from it instead of built, or NULL. */
    const struct sandbox_template *tmpl;
};

/* A boundary built and blocked at the start seam (see sandbox/start.h). */
struct sandbox_boundary {
    pid_t pid;    /* its top process, our child */
    int err_r;    /* error records from inside; EOF once the command has exec'd */
    int status_r; /* the command's wait status */
    int start_w;  /* where the start message goes */
    int door;     /* the listening socket the gateway serves, or -1 */
    /* A door other processes can reach: the gateway must demand this token,
     * which the boundary writes first on each connection it dials. */
    bool door_token_set;
    unsigned char door_token[32];
    int layer; /* an overlay workspace's layer (the tmpfs holding its upper
                         directory, see sandbox/txn.h), or -1 */
    /* Transparent egress (namespace level): the DNS stub's socket, then a
     * listener per port (gateway_doors' order); N_EXTRA_DOORS 0 without. */
    int extra_doors[1 + SYNTH_MAX_PORTS];
    size_t n_extra_doors;
    /* Transparent egress by a relay: the level's relay (elsewhere) serves the
     * stub and the synthetic addresses, and a keeper (sandbox/door.h) hands
     * over literals, carried to DOOR with a preface (common/relay_wire.h). */
    bool relay_transparent;
    void *state; /* the backend's own, for release */
    /* The command's view where it is not the namespace level's fixed one
     * (/workspace, /tmp, SANDBOX_CA_*): NULL there. Owned by STATE. */
    const char *workdir, *tmpdir, *ca_cert, *ca_bundle;
    char evidence[512]; /* the level's own facts (a JSON object) for run.start and
                           the result, or "" */
    int tty_master;     /* a container's terminal, made at prepare (its master), or -1 when
                         none; the front end takes it (run_take_terminal) */
    bool container;     /* built by container_prepare(): its release is container.c's */
};

/*
 * One isolation level: it only builds a boundary and starts a process in it.
 * Audit, limits, the gateway, the environment and supervision are the core's.
 */
struct sandbox_backend {
    const char *name;
    enum cordon_level level;
    /* What the level leaves the command seeing or sharing of the host (cordon check), or NULL. */
    const char *shares;
    /* The command keeps the caller's uid in the host's user namespace, so
     * per-uid limits (RLIMIT_NPROC) count the caller's other processes too. */
    bool host_uid;
    /* Where no cgroup holds the memory limit, the level can be metered
     * (sandbox/meter.h: gVisor ignores RLIMIT_DATA, the per-process fallback):
     * the supervisor holds the limit for the whole sandbox. */
    bool meters_memory;
    /* Likewise for CPU time (gVisor ignores RLIMIT_CPU): the supervisor
     * counts the sandbox's processes' CPU time where no cgroup does. */
    bool meters_cpu;
    /* The level's own kernel counts the command's processes and threads, all
     * of them one user there: RLIMIT_NPROC inside holds the pids limit for
     * the whole sandbox, where the host's pids cgroup would count the level's
     * own threads instead (gVisor's ~5 a process; QEMU's). */
    bool counts_pids;
    /* Every process of a run dies with its supervisor (a PID namespace whose
     * init has PDEATHSIG): a cold run's cgroups may be slots (cgroup_slot_use),
     * which a killed supervisor leaves empty with no watchdog to clean up. */
    bool ends_with_supervisor;
    bool overlay; /* can run a workspace on a copy-on-write layer (workspace.mode) */
    /* Its /tmp, /dev/shm and scratch workspace are tmpfs of the run's own
     * whose size (filesystem.*_size) and inode count (*_inodes) hold. */
    bool tmpfs_sizes, tmpfs_inodes;
    bool containers; /* builds an OCI bundle's container (sandbox_setup.container) */
    /*
     * Gives a call's command a terminal of the sandbox's own (sandbox_call.tty):
     * a level without one refuses such a call, never runs it without.
     */
    bool tty;
    /* Can this host run the level? 0, or -1 with the reason in ERR. */
    int (*probe)(struct cordon_err *err);
    /* Optional: can it run P here (the policy may forbid what the host
     * offers, as microvm's TCG)? 0, or -1 with ERR. Fallbacks skip a level
     * that does not admit the policy, as one whose probe fails. */
    int (*admits)(const struct policy *p, struct cordon_err *err);
    /* Build the boundary and return once it waits at the seam; -1 with ERR
     * (the boundary's own error when it failed inside) and nothing left. */
    int (*prepare)(const struct sandbox_setup *s, struct sandbox_boundary *b,
                   struct cordon_err *err);
    /* Whatever the backend keeps beyond the boundary's process; idempotent. */
    void (*release)(struct sandbox_boundary *b);
    /* Optional: what every run of P shares and none may write, built once
     * for many runs (the pool's), root-started with its host ids from
     * HOST_BASE on; prepare() then clones each boundary from it. 0 with *OUT,
     * or 0 with *OUT NULL where P cannot have one; -1 with ERR. */
    int (*template_build)(const struct policy *p, uid_t host_base, struct sandbox_template **out,
                          struct cordon_err *err);
    void (*template_free)(struct sandbox_template *t);
    /* The descriptors that pin T, which a process preparing runs from it
     * keeps: at most MAX into OUT. */
    size_t (*template_fds)(const struct sandbox_template *t, int *out, size_t max);
};

extern const struct sandbox_backend namespace_backend;
extern const struct sandbox_backend process_backend;
extern const struct sandbox_backend microvm_backend;
extern const struct sandbox_backend gvisor_backend;

/* The backend for LEVEL, or NULL with ERR naming why it cannot run here. */
const struct sandbox_backend *sandbox_backend_for(enum cordon_level level, struct cordon_err *err);

/*
 * The tree-wide limits (memory, pids, CPU; 1u << enum policy_limit) that
 * ENFORCED holds only per process, by an rlimit, for want of a cgroup.
 */
unsigned sandbox_degraded(const enum enforcement enforced[POLICY_LIMIT_COUNT]);

/*
 * The backend for P: its level, or with fallbacks (isolation: [a, b]) the
 * first whose probe passes, with each level tried before it and its reason
 * in SKIPPED (NULL: not wanted). A level that cannot run is never replaced
 * by one the policy did not list: NULL with ERR naming each level's reason.
 */
const struct sandbox_backend *sandbox_backend_choose(const struct policy *p,
                                                     struct sandbox_skips *skipped,
                                                     struct cordon_err *err);

/* SKIPPED as [{"level", "reason"}], for the result and run.start; NULL when none. */
json_t *sandbox_skips_to_json(const struct sandbox_skips *skipped);

/*
 * Only the tree-wide limits (memory, pids, CPU) need a cgroup: without one
 * the run still dies whole with its PID namespace, and peak memory falls
 * back to the largest process's RSS.
 */
bool sandbox_needs_cgroup(const struct policy *p);

/* The result as JSON (the --result file); new reference. */
json_t *sandbox_result_to_json(const struct sandbox_result *res, const struct policy *p);
