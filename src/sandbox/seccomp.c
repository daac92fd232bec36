/*
 * sandbox/seccomp.c: compiles the default profile (policy/syscall_table.c) plus the
 * policy's syscalls.allow/deny into classic BPF with libseccomp. Compiling
 * runs in the supervisor before clone(); seccomp_program_install() runs in
 * the child, last before exec, and allocates nothing.
 *
 * The default profile is also compiled once at build time (seccomp_gen.c)
 * and reused when the policy adds nothing and the kernel's seccomp API level
 * matches: same rules, same libseccomp, same output.
 *
 * The filter covers native x86-64 only. Any other audit arch (i386 through
 * int 0x80) kills the process, and libseccomp's x86-64 prologue sends x32
 * numbers (bit 30 set) to that same bad-arch action.
 */
#include "sandbox/seccomp.h"

#include "common/cleanup.h"
#include "common/strv.h"
#include "common/syscalls.h"
#include "policy/policy.h"

#include <errno.h>
#include <stdio.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <unistd.h>

#include "common/compat.h"

static void ctx_releasep(scmp_filter_ctx *ctx)
{
    if (*ctx)
        seccomp_release(*ctx);
}

/* Namespace flags clone() must not carry: unshare and setns are refused too. */
#define CLONE_NS_FLAGS                                                                     \
    ((uint64_t)(CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | \
                CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_NEWTIME))

/*
 * Socket families are compared below this bound: every family the kernel
 * knows (AF_MAX is 46 on 6.x) lies under it, and larger values are garbage.
 */
#define FAMILY_BOUND_BITS 6

static int add_rule(scmp_filter_ctx ctx, uint32_t action, int nr, const char *name, unsigned n_cmp,
                    const struct scmp_arg_cmp *cmp, struct cordon_err *err)
{
    int rc = seccomp_rule_add_array(ctx, action, nr, n_cmp, cmp);
    if (rc < 0) {
        errno = -rc;
        return err_sys(err, CORDON_E_SETUP, "cannot add the seccomp rule for \"%s\"", name);
    }
    return 0;
}

/*
 * Add ACTION for every value of the low 32 bits of argument ARG that lies in
 * the block [BASE, BASE + 2^(32-PREFIX)) but is not one of EXCLUDED, on top
 * of the N_FIXED comparisons in FIXED (on earlier arguments). libseccomp has
 * no "not equal under a mask", and it refuses a conditional rule whose action
 * equals the default, so a complement is spelt out as the few aligned blocks
 * that cover it: at most two per bit per excluded value. The mask leaves the
 * upper 32 bits out because the kernel truncates these arguments to int (the
 * classic TIOCSTI bypass passes 0x1_0000_5412).
 */
static int add_complement(scmp_filter_ctx ctx, uint32_t action, int nr, const char *name,
                          const struct scmp_arg_cmp *fixed, unsigned n_fixed, unsigned arg,
                          uint32_t base, unsigned prefix, const uint32_t *excluded,
                          size_t n_excluded, struct cordon_err *err)
{
    uint32_t mask = prefix ? ~(uint32_t)0 << (32 - prefix) : 0;
    bool hit = false;
    for (size_t i = 0; i < n_excluded; i++)
        if ((excluded[i] & mask) == base)
            hit = true;
    if (!hit) {
        struct scmp_arg_cmp cmp[4];
        if (n_fixed >= sizeof cmp / sizeof cmp[0])
            return err_set(err, CORDON_E_INTERNAL, "too many conditions for \"%s\"", name);
        if (n_fixed) /* FIXED may be NULL when there are none */
            memcpy(cmp, fixed, n_fixed * sizeof *fixed);
        cmp[n_fixed] = SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, mask, base);
        return add_rule(ctx, action, nr, name, n_fixed + 1, cmp, err);
    }
    if (prefix == 32)
        return 0; /* the excluded value itself */
    uint32_t half = (uint32_t)1 << (31 - prefix);
    TRY(add_complement(ctx, action, nr, name, fixed, n_fixed, arg, base, prefix + 1, excluded,
                       n_excluded, err));
    return add_complement(ctx, action, nr, name, fixed, n_fixed, arg, base | half, prefix + 1,
                          excluded, n_excluded, err);
}

/* ALLOW when the low 32 bits of ARG are one of VALUES. */
static int add_allow_values(scmp_filter_ctx ctx, int nr, const char *name, unsigned arg,
                            const uint32_t *values, size_t n, struct cordon_err *err)
{
    for (size_t i = 0; i < n; i++) {
        struct scmp_arg_cmp cmp = SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, 0xffffffffu, values[i]);
        TRY(add_rule(ctx, SCMP_ACT_ALLOW, nr, name, 1, &cmp, err));
    }
    return 0;
}

static int add_clone(scmp_filter_ctx ctx, int nr, const char *name, struct cordon_err *err)
{
    /* The full 64-bit flags word: the kernel reads all of it. */
    struct scmp_arg_cmp cmp = SCMP_A0_64(SCMP_CMP_MASKED_EQ, CLONE_NS_FLAGS, 0);
    return add_rule(ctx, SCMP_ACT_ALLOW, nr, name, 1, &cmp, err);
}

/*
 * Other families get EAFNOSUPPORT rather than EPERM: it is what a kernel
 * built without them answers, and libc and runtimes treat it as "not here"
 * (glibc's getaddrinfo and getifaddrs probe AF_NETLINK and carry on).
 */
static int refuse_other_families(scmp_filter_ctx ctx, int nr, const char *name,
                                 const uint32_t *families, size_t n, struct cordon_err *err)
{
    return add_complement(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), nr, name, NULL, 0, 0, 0,
                          32 - FAMILY_BOUND_BITS, families, n, err);
}

/*
 * The inet sockets a run may make, by family, type (without SOCK_NONBLOCK and
 * SOCK_CLOEXEC) and protocol: TCP, UDP and ping sockets. UDP-Lite, SCTP,
 * MPTCP and the rest are kernel code no tool here needs; like an unknown
 * family they get the answer of a kernel built without them,
 * EPROTONOSUPPORT. Other types (SOCK_RAW, SOCK_SEQPACKET, SOCK_PACKET) get
 * the default EPERM, what the kernel says to raw sockets without CAP_NET_RAW.
 */
static const struct {
    uint32_t family, type;
    size_t n;
    uint32_t protocols[3];
} inet_sockets[] = {
    { AF_INET, SOCK_STREAM, 2, { IPPROTO_IP, IPPROTO_TCP } },
    { AF_INET, SOCK_DGRAM, 3, { IPPROTO_IP, IPPROTO_UDP, IPPROTO_ICMP } },
    { AF_INET6, SOCK_STREAM, 2, { IPPROTO_IP, IPPROTO_TCP } },
    { AF_INET6, SOCK_DGRAM, 3, { IPPROTO_IP, IPPROTO_UDP, IPPROTO_ICMPV6 } },
};

/* The type's low bits; the flags above them are SOCK_NONBLOCK and SOCK_CLOEXEC. */
#define SOCK_TYPE_BITS 0xfu

/*
 * Protocols are compared below this bound: the kernel answers EINVAL to
 * anything at or above IPPROTO_MAX (263 on 6.x); larger values get EPERM.
 */
#define PROTOCOL_BOUND_BITS 9

/*
 * Unix streams and seqpacket sockets; a unix datagram socket gets EACCES:
 * any send on one may name an address past connect(), which the keeper
 * (sandbox/usock.h) cannot check without making every send itself. Other
 * types (none the kernel has) get the default. Any protocol: the kernel
 * takes only 0 anyway.
 */
static int add_unix(scmp_filter_ctx ctx, int nr, const char *name, struct cordon_err *err)
{
    static const uint32_t types[] = { SOCK_STREAM, SOCK_SEQPACKET };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        struct scmp_arg_cmp cmp[] = { SCMP_CMP(0, SCMP_CMP_MASKED_EQ, 0xffffffffu, AF_UNIX),
                                      SCMP_CMP(1, SCMP_CMP_MASKED_EQ, SOCK_TYPE_BITS, types[i]) };
        TRY(add_rule(ctx, SCMP_ACT_ALLOW, nr, name, 2, cmp, err));
    }
    struct scmp_arg_cmp dgram[] = { SCMP_CMP(0, SCMP_CMP_MASKED_EQ, 0xffffffffu, AF_UNIX),
                                    SCMP_CMP(1, SCMP_CMP_MASKED_EQ, SOCK_TYPE_BITS, SOCK_DGRAM) };
    return add_rule(ctx, SCMP_ACT_ERRNO(EACCES), nr, name, 2, dgram, err);
}

static int add_socket(scmp_filter_ctx ctx, int nr, const char *name, struct cordon_err *err)
{
    static const uint32_t families[] = { AF_UNIX, AF_INET, AF_INET6 };
    TRY(add_unix(ctx, nr, name, err));
    for (size_t i = 0; i < sizeof inet_sockets / sizeof inet_sockets[0]; i++) {
        const uint32_t *protocols = inet_sockets[i].protocols;
        struct scmp_arg_cmp fixed[] = {
            SCMP_CMP(0, SCMP_CMP_MASKED_EQ, 0xffffffffu, inet_sockets[i].family),
            SCMP_CMP(1, SCMP_CMP_MASKED_EQ, SOCK_TYPE_BITS, inet_sockets[i].type),
        };
        for (size_t p = 0; p < inet_sockets[i].n; p++) {
            struct scmp_arg_cmp cmp[] = {
                fixed[0],
                fixed[1],
                SCMP_CMP(2, SCMP_CMP_MASKED_EQ, 0xffffffffu, protocols[p]),
            };
            TRY(add_rule(ctx, SCMP_ACT_ALLOW, nr, name, 3, cmp, err));
        }
        TRY(add_complement(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), nr, name, fixed, 2, 2, 0,
                           32 - PROTOCOL_BOUND_BITS, protocols, inet_sockets[i].n, err));
    }
    return refuse_other_families(ctx, nr, name, families, sizeof families / sizeof families[0],
                                 err);
}

static int add_socketpair(scmp_filter_ctx ctx, int nr, const char *name, struct cordon_err *err)
{
    static const uint32_t families[] = { AF_UNIX };
    TRY(add_unix(ctx, nr, name, err));
    return refuse_other_families(ctx, nr, name, families, 1, err);
}

/* TIOCSTI and TIOCLINUX fall through to the default EPERM. */
static int add_ioctl(scmp_filter_ctx ctx, int nr, const char *name, struct cordon_err *err)
{
    static const uint32_t refused[] = { TIOCSTI, TIOCLINUX };
    return add_complement(ctx, SCMP_ACT_ALLOW, nr, name, NULL, 0, 1, 0, 0, refused, 2, err);
}

/* Query, plain Linux, and the two uname tweaks old build scripts use. */
static int add_personality(scmp_filter_ctx ctx, int nr, const char *name, struct cordon_err *err)
{
    static const uint32_t values[] = { 0xffffffffu, PER_LINUX, PER_LINUX32, UNAME26,
                                       UNAME26 | PER_LINUX32 };
    return add_allow_values(ctx, nr, name, 0, values, sizeof values / sizeof values[0], err);
}

/*
 * Setuid and setgid bits are refused wherever a mode is given: files the run
 * writes in the workspace belong to the caller on the host, so a setuid bit
 * set inside would become a setuid-caller (for root: setuid-root) program
 * outside. The mask keeps only those two bits, so upper garbage cannot hide them.
 */
#define SETID_BITS 06000u

static int add_mode_arg(scmp_filter_ctx ctx, int nr, const char *name, unsigned arg,
                        struct cordon_err *err)
{
    struct scmp_arg_cmp cmp = SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, SETID_BITS, 0);
    return add_rule(ctx, SCMP_ACT_ALLOW, nr, name, 1, &cmp, err);
}

static int add_mode1(scmp_filter_ctx ctx, int nr, const char *name, struct cordon_err *err)
{
    return add_mode_arg(ctx, nr, name, 1, err);
}

static int add_mode2(scmp_filter_ctx ctx, int nr, const char *name, struct cordon_err *err)
{
    return add_mode_arg(ctx, nr, name, 2, err);
}

static int add_mode3(scmp_filter_ctx ctx, int nr, const char *name, struct cordon_err *err)
{
    return add_mode_arg(ctx, nr, name, 3, err);
}

/* SECCOMP_ALLOW rows whose allowance depends on the arguments. */
static const struct {
    const char *name;
    int (*add)(scmp_filter_ctx ctx, int nr, const char *name, struct cordon_err *err);
} conditional[] = {
    { "clone", add_clone },
    { "socket", add_socket },
    { "socketpair", add_socketpair },
    { "ioctl", add_ioctl },
    { "personality", add_personality },
    { "open", add_mode2 },
    { "openat", add_mode3 },
    { "creat", add_mode1 },
    { "mknod", add_mode1 },
    { "mknodat", add_mode2 },
    { "chmod", add_mode1 },
    { "fchmod", add_mode1 },
    { "fchmodat", add_mode2 },
    { "fchmodat2", add_mode2 },
};

static int check_list(char *const *names, size_t n, bool allow, struct cordon_err *err)
{
    char why[200];
    for (size_t i = 0; i < n; i++)
        if (seccomp_check_name(names[i], allow, why, sizeof why) < 0)
            return err_set(err, CORDON_E_POLICY, "syscalls.%s: %s", allow ? "allow" : "deny", why);
    return 0;
}

static int add_table_row(scmp_filter_ctx ctx, const struct seccomp_rule *r, int nr,
                         struct cordon_err *err)
{
    switch (r->verdict) {
    case SECCOMP_ALLOW:
        for (size_t i = 0; i < sizeof conditional / sizeof conditional[0]; i++)
            if (strcmp(conditional[i].name, r->name) == 0)
                return conditional[i].add(ctx, nr, r->name, err);
        return add_rule(ctx, SCMP_ACT_ALLOW, nr, r->name, 0, NULL, err);
    case SECCOMP_DENY_EPERM:
        return 0; /* the default action; libseccomp refuses a rule repeating it */
    case SECCOMP_DENY_ENOSYS:
        return add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, r->name, 0, NULL, err);
    }
    return err_set(err, CORDON_E_INTERNAL, "bad verdict for \"%s\"", r->name);
}

/*
 * The whole profile in a libseccomp context. Verdicts are settled here
 * before any rule is added, because libseccomp cannot take a rule back:
 * a policy deny drops the table's row, and a policy allow turns a
 * refusal into an unconditional allow. Allowing a row that is already
 * allowed under conditions keeps the conditions: they are the boundary.
 */
static int build_ctx(const struct policy *p, scmp_filter_ctx *out, struct cordon_err *err)
{
    char *const *allow = p ? p->syscalls_allow : NULL;
    size_t n_allow = p ? p->n_syscalls_allow : 0;
    char *const *deny = p ? p->syscalls_deny : NULL;
    size_t n_deny = p ? p->n_syscalls_deny : 0;

    if (seccomp_arch_native() != SCMP_ARCH_X86_64)
        return err_set(err, CORDON_E_UNSUPPORTED, "the seccomp profile is written for x86-64 only");
    TRY(check_list(deny, n_deny, false, err));
    TRY(check_list(allow, n_allow, true, err));

    _cleanup_(ctx_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!ctx)
        return err_set(err, CORDON_E_SETUP, "cannot create a seccomp filter");
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (rc < 0) {
        errno = -rc;
        return err_sys(err, CORDON_E_SETUP, "cannot set the seccomp bad-arch action");
    }
    /*
     * A binary search on the syscall number instead of a linear scan of
     * some 300 comparisons: kernels without the seccomp action cache run
     * the whole program on every call.
     */
    rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    if (rc < 0) {
        errno = -rc;
        return err_sys(err, CORDON_E_SETUP, "cannot ask libseccomp for a binary-tree filter");
    }

    size_t n;
    const struct seccomp_rule *rules = seccomp_rule_table(&n);
    for (size_t i = 0; i < n; i++) {
        const struct seccomp_rule *r = &rules[i];
        int nr = seccomp_syscall_nr(r->name);
        if (nr < 0)
            return err_set(err, CORDON_E_INTERNAL, "seccomp table: unknown system call \"%s\"",
                           r->name);
        bool allowed = strv_contains(allow, n_allow, r->name);
        if (allowed && r->verdict != SECCOMP_ALLOW)
            TRY(add_rule(ctx, SCMP_ACT_ALLOW, nr, r->name, 0, NULL, err));
        else if (!allowed && strv_contains(deny, n_deny, r->name))
            continue;
        else
            TRY(add_table_row(ctx, r, nr, err));
    }
    for (size_t i = 0; i < n_allow; i++) {
        if (seccomp_rule_find(allow[i]) || strv_contains(allow, i, allow[i]))
            continue; /* handled with the table, or named twice */
        TRY(add_rule(ctx, SCMP_ACT_ALLOW, seccomp_syscall_nr(allow[i]), allow[i], 0, NULL, err));
    }
    *out = TAKE_PTR(ctx);
    return 0;
}

int seccomp_program_compile(const struct policy *p, struct seccomp_program *out,
                            struct cordon_err *err)
{
    *out = (struct seccomp_program){ 0 };
    _cleanup_(ctx_releasep) scmp_filter_ctx ctx = NULL;
    TRY(build_ctx(p, &ctx, err));
    return seccomp_program_export(ctx, out, err);
}

int seccomp_program_export(void *ctx, struct seccomp_program *out, struct cordon_err *err)
{
    *out = (struct seccomp_program){ 0 };
    _cleanup_close_ int fd = memfd_create("cordon-seccomp", MFD_CLOEXEC);
    if (fd < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create a memfd for the seccomp filter");
    int rc = seccomp_export_bpf(ctx, fd);
    if (rc < 0) {
        errno = -rc;
        return err_sys(err, CORDON_E_SETUP, "cannot export the seccomp filter");
    }
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot size the seccomp filter");
    if (size == 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
        size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
        return err_set(err, CORDON_E_SETUP, "seccomp filter has a bad size (%lld bytes)",
                       (long long)size);

    _cleanup_free_ struct sock_filter *filter = malloc((size_t)size);
    if (!filter)
        return err_set(err, CORDON_E_INTERNAL, "out of memory for the seccomp filter");
    for (off_t done = 0; done < size;) {
        ssize_t got = pread(fd, (char *)filter + done, (size_t)(size - done), done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got < 0 ? err_sys(err, CORDON_E_SETUP, "cannot read the seccomp filter back")
                           : err_set(err, CORDON_E_SETUP, "seccomp filter ended early");
        done += got;
    }
    out->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
    out->filter = TAKE_PTR(filter);
    return 0;
}

#ifndef SECCOMP_NO_PRECOMPILED
#include "seccomp_default.h" /* generated at build time by seccomp-gen */

/*
 * The default profile was compiled when cordon was built: copying it saves
 * the millisecond or two libseccomp spends per run. Valid only while the
 * kernel offers the same seccomp API level libseccomp compiled it for.
 */
static bool precompiled_applies(const struct policy *p)
{
    if (p && (p->n_syscalls_allow || p->n_syscalls_deny))
        return false;
    return seccomp_api_get() == SECCOMP_DEFAULT_API;
}
#endif

int seccomp_program_build(const struct policy *p, struct seccomp_program *out,
                          struct cordon_err *err)
{
#ifndef SECCOMP_NO_PRECOMPILED
    if (precompiled_applies(p)) {
        size_t size = sizeof seccomp_default_filter;
        out->filter = malloc(size);
        if (!out->filter)
            return err_set(err, CORDON_E_INTERNAL, "out of memory for the seccomp filter");
        memcpy(out->filter, seccomp_default_filter, size);
        out->len = (unsigned short)(size / sizeof seccomp_default_filter[0]);
        return 0;
    }
#endif
    return seccomp_program_compile(p, out, err);
}

int seccomp_program_dump(const struct policy *p, int fd, struct cordon_err *err)
{
    _cleanup_(ctx_releasep) scmp_filter_ctx ctx = NULL;
    TRY(build_ctx(p, &ctx, err));
    int rc = seccomp_export_pfc(ctx, fd);
    if (rc < 0) {
        errno = -rc;
        return err_sys(err, CORDON_E_SETUP, "cannot export the seccomp filter as text");
    }
    return 0;
}

int seccomp_program_install(const struct seccomp_program *prog, struct cordon_err *err)
{
    if (!prog->filter || prog->len == 0)
        return err_set(err, CORDON_E_INTERNAL, "no seccomp program to install");
    /* The kernel refuses a filter from an unprivileged task without it. */
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot set no_new_privs");
    struct sock_fprog fprog = { .len = prog->len, .filter = prog->filter };
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot install the seccomp filter");
    return 0;
}

int seccomp_program_install_notifier(const struct seccomp_program *prog)
{
    struct sock_fprog fprog = { .len = prog->len, .filter = prog->filter };
    int listener = sys_seccomp(
        SECCOMP_SET_MODE_FILTER,
        SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &fprog);
    if (listener < 0 && errno == EINVAL) /* before Linux 5.19 */
        listener = sys_seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fprog);
    return listener;
}

void seccomp_program_release(struct seccomp_program *prog)
{
    free(prog->filter);
    prog->filter = NULL;
    prog->len = 0;
}
