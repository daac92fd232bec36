/*
 * sandbox/seccomp.h: the default syscall profile (an allowlist sized for real
 * toolchains) and its compilation to BPF. The supervisor compiles before
 * clone(); the child only installs the program, last, just before exec.
 */
#pragma once
#include "common/err.h"
#include "policy/syscall_table.h"

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>

struct policy;

struct seccomp_program {
    struct sock_filter *filter; /* owned */
    unsigned short len;
};

/*
 * The default profile plus P's syscalls.allow/deny, as BPF: the copy built
 * with cordon when P adds nothing to the default and the kernel matches,
 * a fresh compilation otherwise.
 */
int seccomp_program_build(const struct policy *p, struct seccomp_program *out,
                          struct cordon_err *err);

/* Always compile with libseccomp (what the build-time copy comes from). */
int seccomp_program_compile(const struct policy *p, struct seccomp_program *out,
                            struct cordon_err *err);

/* A libseccomp filter context (scmp_filter_ctx) someone else built, as BPF. */
int seccomp_program_export(void *ctx, struct seccomp_program *out, struct cordon_err *err);

/*
 * The compiled profile as libseccomp's pseudo-code, written to FD: for
 * `cordon check` and for reading what the table became.
 */
int seccomp_program_dump(const struct policy *p, int fd, struct cordon_err *err);

/* In the child: install PROG (needs no_new_privs). Allocates nothing. */
int seccomp_program_install(const struct seccomp_program *prog, struct cordon_err *err);

/*
 * In the child: install PROG, whose SECCOMP_RET_USER_NOTIF calls a keeper
 * answers, and return its listener (-1 with errno). Once the keeper has
 * received a call, the caller waits for the answer through any signal but
 * a fatal one (Linux 5.19's WAIT_KILLABLE_RECV, where the kernel has it):
 * a signal there would restart the call, and the keeper would make it
 * twice (a connect() done, then refused as done: the caller dials again,
 * and the first connection is left dead at its listener). Allocates nothing.
 */
int seccomp_program_install_notifier(const struct seccomp_program *prog);

void seccomp_program_release(struct seccomp_program *prog);
