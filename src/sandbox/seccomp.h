/*
 * sandbox/seccomp.h: the default syscall profile (an allowlist sized for real
 * toolchains) and its compilation to BPF. The supervisor compiles before
 * clone(); the child only installs the program, last, just before exec.
 */
#pragma once
#include "common/err.h"

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>

struct policy;

struct seccomp_program {
    struct sock_filter *filter; /* owned */
    unsigned short len;
};

/* What a syscall named in the rule table gets. */
enum seccomp_verdict {
    SECCOMP_ALLOW,      /* allowed (possibly with argument conditions) */
    SECCOMP_DENY_EPERM, /* refused with EPERM */
    SECCOMP_DENY_ENOSYS,/* refused with ENOSYS so libc falls back (clone3) */
};

/* One row of the readable rule table: a name, a verdict and why. */
struct seccomp_rule {
    const char *name;
    enum seccomp_verdict verdict;
    bool hard;          /* refusal the policy cannot lift with syscalls.allow */
    const char *why;
};

/* The whole table, for `cordon check` and the unit tests. */
const struct seccomp_rule *seccomp_rule_table(size_t *n);

/*
 * Validate a name for syscalls.allow (ALLOW true) or syscalls.deny: it must
 * be a syscall of this architecture, and allow may not lift a hard refusal.
 * On failure writes a reason into WHY and returns -1.
 */
int seccomp_check_name(const char *name, bool allow, char *why, size_t why_len);

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

/*
 * The compiled profile as libseccomp's pseudo-code, written to FD: for
 * `cordon check` and for reading what the table became.
 */
int seccomp_program_dump(const struct policy *p, int fd, struct cordon_err *err);

/* SHA-256 of the profile P asks for (rule table plus its allow/deny), for
 * the audit record; cheap, unlike compiling. */
void seccomp_profile_digest(const struct policy *p, unsigned char out[32]);

/* In the child: install PROG (needs no_new_privs). Allocates nothing. */
int seccomp_program_install(const struct seccomp_program *prog, struct cordon_err *err);

void seccomp_program_release(struct seccomp_program *prog);
