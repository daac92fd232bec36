/*
 * sandbox/backend.h: the one interface every isolation level implements,
 * and the run's result. The policy, the relay and the limits are the same
 * above each level; a backend decides only how the boundary is built.
 */
#pragma once
#include "common/err.h"
#include "policy/policy.h"
#include "sandbox/workspace.h"

#include <stdbool.h>
#include <stdint.h>

enum run_reason {
    RUN_EXITED,
    RUN_TIMEOUT,
    RUN_OOM,
    RUN_PIDS_LIMIT,
    RUN_OUTPUT_LIMIT,
    RUN_CPU_LIMIT,
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
};

const char *enforcement_name(enum enforcement e);

struct watchdog;
struct audit_log;

struct sandbox_call {
    char *const *argv;       /* command and arguments; argv[0] searched in PATH */
    struct watchdog *watchdog; /* guards what the run leaves if we die; may be NULL */
    struct audit_log *audit;   /* where the gateway records its decisions; may be NULL */
    const char *run_id;        /* names the run in the audit log; NULL: cordon_run() makes one */
    int in_fd;               /* relayed to the command's stdin (-1: empty) */
    int out_fd;              /* where stdout is relayed */
    int err_fd;              /* where stderr is relayed */
};

struct sandbox_result {
    char run_id[33];         /* set by cordon_run() */
    enum run_reason reason;
    int exit_code;           /* valid when !signaled */
    int signal;              /* valid when signaled */
    bool signaled;
    int status;              /* cordon's exit status for this run */
    uint64_t wall_us;
    uint64_t cpu_us;
    uint64_t peak_memory;    /* bytes; 0 when unknown */
    uint64_t stdout_bytes;   /* relayed */
    uint64_t stderr_bytes;
    enum enforcement enforced[POLICY_LIMIT_COUNT];
    struct egress_summary {
        uint64_t allowed, refused;     /* gateway decisions */
        uint64_t bytes_up, bytes_down; /* through allowed connections */
        char recent[16][768];          /* the last decisions, as JSON lines */
        unsigned n_recent, next;
    } egress;
    struct workspace_report workspace; /* a host workspace's scans */
    struct cordon_err error; /* kind != OK when reason is RUN_SETUP_ERROR */
};

struct sandbox_backend {
    const char *name;
    enum cordon_level level;
    /* Can this host run the level? 0, or -1 with the reason in ERR. */
    int (*probe)(struct cordon_err *err);
    /*
     * Run CALL under P to completion and fill RES. Returns -1 only when
     * nothing ran (refused before start); a run that started and failed
     * inside still returns 0 with RES saying why.
     */
    int (*run)(const struct policy *p, const struct sandbox_call *call,
               struct sandbox_result *res, struct cordon_err *err);
};

extern const struct sandbox_backend namespace_backend;

/* The backend for LEVEL, or NULL with ERR naming why it cannot run here. */
const struct sandbox_backend *sandbox_backend_for(enum cordon_level level,
                                                  struct cordon_err *err);

/*
 * Only the tree-wide limits (memory, pids, CPU) need a cgroup: without one
 * the run still dies whole with its PID namespace, and peak memory falls
 * back to the largest process's RSS.
 */
bool sandbox_needs_cgroup(const struct policy *p);

/* The result as JSON (the --result file); new reference. */
json_t *sandbox_result_to_json(const struct sandbox_result *res, const struct policy *p);
