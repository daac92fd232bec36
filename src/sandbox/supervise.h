/*
 * sandbox/supervise.h: the supervisor's side of a running sandbox: relays
 * stdio, enforces the wall clock, output cap and polled cgroup limits, and
 * turns how the run ended into a result. Backend-independent.
 */
#pragma once
#include "sandbox/backend.h"
#include "sandbox/cgroup.h"
#include "sandbox/meter.h"

#include <jansson.h>

struct audit_log;

#include <stdint.h>
#include <sys/types.h>

/* The gateway's doors: its proxy's listener, the DNS stub's socket, a listener per port. */
#define SUPERVISE_MAX_DOORS (2 + SYNTH_MAX_PORTS)

struct supervision {
    pid_t init_pid;          /* the sandbox's top process, our child */
    int err_r;               /* setup/exec error records; EOF once exec'd */
    int status_r;            /* the command's wait status, from init */
    int out_r, errout_r;     /* the command's stdout and stderr */
    int in_w;                /* the command's stdin, or -1 */
    int tty_w;               /* the run's terminal (master), for its window size, or -1 */
    int sig_fd;              /* signalfd for SIGINT/SIGTERM/SIGHUP */
    int report_r;            /* the egress gateway's decisions (JSON lines), or -1 */
    struct audit_log *audit; /* where each decision is recorded, or NULL */
    /* Told of each decision as it arrives, or NULL (the core's notices). */
    void (*decided)(void *arg, const json_t *decision);
    void *decided_arg;
    /* The gateway's doors while it is not started (report_r -1): the first
     * connection or datagram at one (or, as the run ends, one waiting there)
     * calls WAKE, which starts it, closes the doors and returns its report_r
     * (or -1 with ERR). */
    const int *doors;
    size_t n_doors;
    int (*wake)(void *arg, struct cordon_err *err);
    void *wake_arg;
    /* Told once the command has exec'd (its error pipe closed with no record), or NULL. */
    void (*started)(void *arg);
    void *started_arg;
    const char *run_id;
    char report_buf[4096]; /* a partial line from report_r */
    size_t report_len;
    const struct sandbox_call *call;
    const struct policy_limits *limits;
    const struct cgroup_set *cg;
    bool poll_cpu, poll_pids; /* tree-wide limits read from the cgroup */
    struct mem_meter *meter;  /* the memory limit held by polling the level's memory, or NULL */
    bool poll_tree_cpu;       /* the CPU limit held by counting init_pid's tree */
    uint64_t start_us;        /* CLOCK_MONOTONIC */
    /* Out: supervise() reaped init. False when init said the run's tree was
     * gone and the result was made without waiting for it: the caller reaps
     * it (its exit is the namespaces' teardown). */
    bool init_reaped;
};

/* Run the loop until the sandbox is gone; fills RES. Closes the fds. */
void supervise(struct supervision *s, struct sandbox_result *res);

uint64_t monotonic_us(void);

/* After the run: read the gateway's last decisions until it closes its end
 * (or TIMEOUT_MS passes), then close report_r. */
void supervise_drain_reports(struct supervision *s, struct sandbox_result *res, int timeout_ms);
