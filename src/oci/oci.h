/*
 * oci/oci.h: cordon-oci, a runc-compatible OCI runtime over cordon's run
 * path (doc/oci.md). An engine (containerd's runc shim, Docker, Podman,
 * Kubernetes through them) calls it with runc's command line; each
 * container is one cordon run whose boundary is the bundle's root, kept by
 * a detached supervisor (the keeper) from create to the workload's end.
 * This header is the front end's own; nothing below src/oci/ includes it.
 */
#pragma once
#include "common/err.h"
#include "policy/policy.h"
#include "sandbox/container.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The global options, runc's. */
struct oci_opts {
    const char *root; /* --root: where containers' state lives */
    const char *log;  /* --log FILE, or NULL: stderr only */
    bool log_json;    /* --log-format json */
    bool debug;
    const char *config_dir; /* where oci.yaml and oci/POLICY are (CORDON_OCI_DIR, /etc/cordon) */
    const char *policy;     /* --policy NAME: the engine's runtime entry names its default */
};

extern struct oci_opts oci_opts;

/* Root of the host's user namespace (not of one a rootless engine made)? */
bool oci_host_root(void);

/* A message for the log (runc's format) and stderr; LEVEL "error", "warning", "info". */
void oci_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Log ERR as an error; the exit status of a failed command (1, as runc's). */
int oci_fail(const struct cordon_err *err);

/* ---- the bundle (spec.c) ---- */

/* What create reads from a bundle: the container, the command, the policy. */
struct oci_spec {
    json_t *config;         /* config.json */
    json_t *process;        /* the process read last (c.cwd points into it) */
    char bundle[4096];      /* absolute */
    char config_path[4096]; /* config.json when it is not the bundle's, or "" */
    char root[4096];        /* the root filesystem, absolute */
    struct sandbox_container c;
    char **argv;
    char **env;
    struct policy *policy;
    char policy_file[4096]; /* where the policy came from ("" built in) */
    char cgroup[4096];      /* linux.cgroupsPath made absolute, or "" */
    uint64_t memory, pids;  /* linux.resources: 0 none */
    int64_t cpu_quota;      /* us per period, 0 none */
    uint64_t cpu_period, cpu_shares;
    bool ipc_own; /* the spec lists an IPC namespace */
};

/* Read BUNDLE/config.json (or CONFIG, a path of its own) for container ID and choose its
 * policy; -1 with ERR naming the first thing cordon cannot do with it. */
int oci_spec_load(const char *bundle, const char *config, const char *id, struct oci_spec *s,
                  struct cordon_err *err);

/* The process of an exec (a process.json or the command line's) into S's c/argv/env. */
int oci_spec_process(const json_t *process, struct oci_spec *s, struct cordon_err *err);

void oci_spec_release(struct oci_spec *s);

/* The spec's seccomp section as a filter (seccomp.c); len 0 when there is none. */
int oci_seccomp_compile(const json_t *seccomp, struct seccomp_program *out, struct cordon_err *err);

/* Capability names ("CAP_CHOWN") of LIST as bits; an unknown one is logged and left out. */
void oci_caps_parse(const json_t *list, uint64_t *out);

/* ---- state (state.c) ---- */

enum oci_status { OCI_CREATING, OCI_CREATED, OCI_RUNNING, OCI_PAUSED, OCI_STOPPED };
const char *oci_status_name(enum oci_status s);

struct oci_state {
    char id[256];
    char dir[4096]; /* ROOT/ID */
    json_t *doc;    /* state.json */
    int lock;       /* the held lock, or -1 */
};

/* Is ID a container name runc would take? */
bool oci_id_valid(const char *id);

/* Make ROOT/ID (refused if it exists) and lock it. */
int oci_state_new(const char *id, struct oci_state *st, struct cordon_err *err);

/* Open and lock ROOT/ID, reading state.json; -1 with ERR ("container ID does not exist"). */
int oci_state_open(const char *id, struct oci_state *st, struct cordon_err *err);

/* Write state.json atomically. */
int oci_state_save(struct oci_state *st, struct cordon_err *err);

void oci_state_close(struct oci_state *st);

/* The container's status now: from the file, and whether its init lives. */
enum oci_status oci_state_status(const struct oci_state *st);

/* The init's pid, or 0 once it is gone (or was never started). */
pid_t oci_state_init(const struct oci_state *st);

/* The runtime-spec state document for ST; new reference. */
json_t *oci_state_json(const struct oci_state *st);

/* Remove ROOT/ID and everything in it. */
void oci_state_remove(struct oci_state *st);

/* An integer field of ST's document (0 when absent). */
long long oci_state_int(const struct oci_state *st, const char *key);
const char *oci_state_str(const struct oci_state *st, const char *key);

/* The start time of PID (/proc/PID/stat's field 22), 0 when it is gone. */
unsigned long long oci_proc_start_time(pid_t pid);

/* Is PID alive (not a zombie) and the process that started at START? */
bool oci_proc_is(pid_t pid, unsigned long long start);

/* The pids in the container's cgroup (its memory or pids hierarchy), into *OUT (malloc'd). */
size_t oci_state_pids(const struct oci_state *st, pid_t **out);

/* ---- the commands ---- */
int oci_create(int argc, char **argv);
int oci_start(int argc, char **argv);
int oci_state_cmd(int argc, char **argv);
int oci_kill(int argc, char **argv);
int oci_delete(int argc, char **argv);
int oci_ps(int argc, char **argv);
int oci_exec(int argc, char **argv);
int oci_pause(int argc, char **argv);
int oci_resume(int argc, char **argv);
int oci_features(int argc, char **argv);
int oci_run(int argc, char **argv);
int oci_update(int argc, char **argv);
int oci_list(int argc, char **argv);

/* The keeper: prepare the run, report to the fd REPORT, serve start, supervise (keeper.c). */
_Noreturn void oci_keeper(struct oci_spec *spec, struct oci_state *st, const char *console,
                          int report);

/* Ask the keeper of ST to start the workload; -1 with ERR. */
int oci_keeper_start(const struct oci_state *st, struct cordon_err *err);

/* Run the spec's hooks of KIND ("prestart", ...) with ST's state on stdin; -1 with ERR. */
int oci_hooks_run(const json_t *config, const char *kind, const struct oci_state *st,
                  struct cordon_err *err);

/* The gvisor level: runsc runs the container (gvisor.c). */
int oci_gvisor_create(struct oci_spec *spec, struct oci_state *st, const char *pid_file,
                      const char *console, struct cordon_err *err);
bool oci_gvisor_delegated(const struct oci_state *st);
/* Hand ARGV (a command of ours, as runc's) to runsc for ST's container; the exit status. */
int oci_gvisor_forward(struct oci_state *st, int argc, char **argv);

/* A signal's number from "TERM", "SIGTERM" or "15"; -1 if none. */
int oci_signal_parse(const char *text);

/* Signal every process of the container's cgroup (kill --all, delete --force). */
void oci_signal_all(const struct oci_state *st, int sig);

/* The container's extra cgroups (freezer, cpu) beside the run's (cgroups.c). */
int oci_cgroups_extra(const struct oci_spec *spec, pid_t init, json_t *state,
                      struct cordon_err *err);
int oci_freeze(const struct oci_state *st, bool frozen, struct cordon_err *err);
bool oci_frozen(const struct oci_state *st);
/* Move this process into every cgroup of the container (exec, before its namespaces). */
int oci_cgroups_join(const struct oci_state *st, struct cordon_err *err);
/* Remove every cgroup directory the state names. */
void oci_cgroups_remove(const struct oci_state *st);
