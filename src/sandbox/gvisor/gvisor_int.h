/*
 * sandbox/gvisor/gvisor_int.h: what the gvisor level's files share: the
 * run's state (a private directory, runsc's command lines, the keepers) and
 * the bundle's paths inside the sandbox. gvisor.c drives runsc; bundle.c
 * writes the OCI bundle it runs.
 */
#pragma once

#include "common/err.h"
#include "sandbox/backend.h"
#include "sandbox/confine.h"
#include "sandbox/gvisor/call_wire.h"
#include "sandbox/names.h"
#include "sandbox/seccomp.h"
#include "sandbox/usock.h"

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

/* The helper and the compat library, embedded at build time (meson.build's blobs). */
extern const unsigned char cordon_gvisor_init_start[];
extern const uint64_t cordon_gvisor_init_size;
extern const unsigned char cordon_gvisor_compat_start[];
extern const uint64_t cordon_gvisor_compat_size;

#define INIT_PATH "/.cordon/init"
#define COMPAT_PATH "/.cordon/compat.so"
#define GW_DIR "/.cordon/gw"
#define GW_SOCK GW_DIR "/gateway.sock"
/* The two sockets' host paths, relative to the run's directory (in the bundle's root). */
#define HOST_GW_SOCK "bundle/rootfs" GW_SOCK
#define HOST_CALL_SOCK "bundle/rootfs" CALL_SOCK
#define MAX_ARGS 16
#define START_TIMEOUT_MS 30000
/*
 * The run's cgroup holds gVisor itself besides the command: the sentry and
 * gofer are Go programs (~170 threads idle, ~4 more per mount, measured
 * here) and the sentry's own memory. Their share is added to the policy's
 * limits rather than taken from the command's. The command's processes are
 * counted inside, by gVisor's RLIMIT_NPROC (counts_pids): each costs ~5
 * host tasks at rest (its stub process and the sentry's thread tracing it),
 * so the cgroup's pids limit bounds what gVisor makes on the host. A fork
 * flood's refused forks and reaped stubs take gVisor to ~15 a process
 * (peaks 976 and 2042 at --pids 64 and 128, measured here): past the
 * bound, the run ends as pids_limit, which is the flood's verdict too.
 */
#define GVISOR_PIDS_OVERHEAD 1024
#define GVISOR_TASKS_PER_PROCESS 8
#define GVISOR_MEMORY_OVERHEAD (256ull << 20)
/* gVisor's memory file (a memfd of the sentry's): the meter's (sandbox/meter.h). */
#define GVISOR_MEMORY_FILE "runsc-memory"

struct gv_state {
    char dir[64]; /* the run's private directory */
    char runsc[PATH_MAX];
    char cid[40];
    bool rootless;
    bool ahead; /* prepared before its call: warmed up (gvisor/init.c) */
    bool gateway;
    struct usock_keeper uds;   /* what runsc's gofer may connect to (sandbox/engine.h) */
    struct names_keeper names; /* the names it may make in a host workspace */
    struct seccomp_program uds_filter;
    bool transparent; /* egress through the helper's DNS stub and synthetic addresses */
    uint16_t ports[SYNTH_MAX_PORTS]; /* its listeners' ports */
    /* The allowed literals' IPv4 ranges the helper makes its own (door.h's
     * job, which a keeper does elsewhere: gVisor's connect()s are its own). */
    uint32_t nets[SYNTH_MAX_PORTS];
    unsigned prefixes[SYNTH_MAX_PORTS];
    size_t n_nets;
    size_t n_ports;
    struct confine_plan confine;
    char *argv_run[MAX_ARGS]; /* runsc ... run --bundle B CID */
    char *root_arg;           /* --root=DIR/state */
    char store[8][PATH_MAX + 32];
    size_t n_store;
};

/* The bundle of the run's sandbox in ST->dir: config.json, its root, the helper's files. */
int gvisor_build_bundle(const struct sandbox_setup *s, struct gv_state *st, struct cordon_err *err);
