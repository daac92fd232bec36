/*
 * sandbox/proc_mem.h: what the kernel lets a write through /proc/PID/mem
 * force into read-only mappings (proc_mem.force_override, Linux 6.12), read
 * from the kernel's release, command line and build config. Pure: the
 * caller reads the files; `cordon check` reports the answer.
 */
#pragma once
#include <stddef.h>

enum proc_mem_force {
    PROC_MEM_FORCE_UNKNOWN,
    PROC_MEM_FORCE_ALWAYS, /* any writer with ptrace access (the old behaviour) */
    PROC_MEM_FORCE_PTRACE, /* only a writer that is ptracing the target */
    PROC_MEM_FORCE_NEVER,
};

/*
 * The setting of a kernel RELEASE (uname -r) booted with CMDLINE
 * (/proc/cmdline) and built with CONFIG (its .config text); CMDLINE and
 * CONFIG may be NULL when unreadable. Writes the answer and where it comes
 * from into WHY, e.g. "never (proc_mem.force_override=never on the kernel
 * command line; default: always, CONFIG_PROC_MEM_ALWAYS_FORCE)".
 */
enum proc_mem_force proc_mem_force(const char *release, const char *cmdline, const char *config,
                                   char *why, size_t len);
