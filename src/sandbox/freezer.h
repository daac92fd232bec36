/*
 * sandbox/freezer.h: pausing a running sandbox whole from outside it (the
 * daemon's session.pause): the v2 freezer of the run's own cgroup, or on
 * cgroup v1 a freezer cgroup made for the run beneath the caller's, which
 * the sandbox's first processes join before they start anything (what they
 * start later is born in it). Runs in the daemon.
 */
#pragma once
#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * A freezer for the processes from PID up to (not including) its ancestor
 * STOP and for PID's descendants: their cgroup's own on v2 (never one the
 * caller is in or beneath), else a v1 freezer cgroup NAME made beneath the
 * caller's, which they join (*MADE then). 0 with DIR; -1 with ERR when
 * neither is possible here.
 */
int freezer_attach(pid_t pid, pid_t stop, const char *name, char *dir, size_t size, bool *made,
                   struct cordon_err *err);

/* Freeze or thaw DIR, waiting (generously) for the state to hold. */
int freezer_set(const char *dir, bool frozen, struct cordon_err *err);

/* Thaw DIR, and remove it when MADE (once its processes are gone; bounded). */
void freezer_detach(const char *dir, bool made);
