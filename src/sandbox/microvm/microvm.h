/*
 * sandbox/microvm/microvm.h: what the microvm level tells beyond its backend table
 * (backend.h): whether this host has a hardware hypervisor, and how to say
 * what runs the guest when it has none.
 */
#pragma once
#include "sandbox/backend.h"

#include <stdbool.h>

/* KVM boots the guest here (probed once per kernel, QEMU and host boot); WHY says how it was found. */
bool microvm_has_kvm(char *why, size_t size);

/* One line on what the accelerator is, for `cordon check` and the result. */
const char *microvm_accel_note(bool kvm);

/* The QEMU binary this level runs (CORDON_QEMU, or Debian's): a pause finds the VM by it. */
const char *microvm_qemu_path(void);
