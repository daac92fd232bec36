/*
 * policy/syscall_table.h: the default syscall profile as a table of names,
 * verdicts and reasons; what the policy's syscalls.allow/deny are checked
 * against and what the profile's digest covers. Compiling it to BPF is the
 * sandbox's job (sandbox/seccomp.h).
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct policy;

/* What a syscall named in the rule table gets. */
enum seccomp_verdict {
    SECCOMP_ALLOW,       /* allowed (possibly with argument conditions) */
    SECCOMP_DENY_EPERM,  /* refused with EPERM */
    SECCOMP_DENY_ENOSYS, /* refused with ENOSYS so libc falls back (clone3) */
};

/* One row of the readable rule table: a name, a verdict and why. */
struct seccomp_rule {
    const char *name;
    enum seccomp_verdict verdict;
    bool hard; /* refusal the policy cannot lift with syscalls.allow */
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

/* The table's row for NAME, or NULL. */
const struct seccomp_rule *seccomp_rule_find(const char *name);

/* NAME's number on x86-64, or -1 when this architecture has no such call. */
int seccomp_syscall_nr(const char *name);

/* SHA-256 of the profile P asks for (rule table plus its allow/deny), for
 * the audit record; cheap, unlike compiling. */
void seccomp_profile_digest(const struct policy *p, unsigned char out[32]);
