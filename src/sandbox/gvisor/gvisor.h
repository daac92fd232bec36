/*
 * sandbox/gvisor.h: what the `gvisor` level shares beyond its backend table:
 * the host's platforms for `cordon check`, and the cleanup of a run's
 * private directory for the watchdog.
 */
#pragma once
#include "common/err.h"
#include "sandbox/names.h"
#include "sandbox/usock.h"

#include <stdbool.h>
#include <stddef.h>

/* runsc's path on PATH into BUF, or -1 with ERR when it is not installed. */
int gvisor_find_runsc(char *buf, size_t len, struct cordon_err *err);

/*
 * Whether gVisor platform NAME ("ptrace", "kvm", "systrap") runs `true`
 * here within a second: 0, or -1 with the reason in ERR.
 */
int gvisor_platform_probe(const char *name, struct cordon_err *err);

/* The keeper of runsc's connect()s and of the names it makes in a host
 * workspace (gvisor/gofer.c), a child of the shim. */
struct gvisor_uds {
    pid_t keeper;
    int give;  /* runsc run's child sends the filter's listener over it */
};

/* In the shim: fork the keeper for K and NAMES into *U. */
int gvisor_uds_start(const struct usock_keeper *k, const struct names_keeper *names,
                     struct gvisor_uds *u, struct cordon_err *err);

/* In runsc run's child, before exec: no_new_privs, PROG, its listener over GIVE. */
int gvisor_uds_confine(const struct seccomp_program *prog, int give);
