/*
 * sandbox/gvisor.h: what the `gvisor` level shares beyond its backend table:
 * the host's platforms for `cordon check`, and the cleanup of a run's
 * private directory for the watchdog.
 */
#pragma once
#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>

/* runsc's path on PATH into BUF, or -1 with ERR when it is not installed. */
int gvisor_find_runsc(char *buf, size_t len, struct cordon_err *err);

/*
 * Whether gVisor platform NAME ("ptrace", "kvm", "systrap") runs `true`
 * here within a second: 0, or -1 with the reason in ERR.
 */
int gvisor_platform_probe(const char *name, struct cordon_err *err);
