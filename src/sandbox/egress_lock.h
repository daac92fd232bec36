/*
 * sandbox/egress_lock.h: a boundary's egress held by the kernel where its
 * network namespace is not its own (an OCI container joining a pod's, one an
 * engine gave an interface): cgroup-bpf programs on the container's cgroup
 * v2 directory let connect() and sendmsg() reach only loopback (the
 * gateway's door, the DNS stub) and the synthetic range routed there. Every
 * process in the cgroup and below is held, whatever its privileges inside,
 * and none can detach them (that takes CAP_SYS_ADMIN in the host's user
 * namespace). Runs in a supervisor that is the host's root.
 */
#pragma once
#include "common/err.h"

/* Attach the programs to the cgroup v2 directory DIR; 0, or -1 with ERR (nothing attached). */
int egress_lock_attach(const char *dir, struct cordon_err *err);
