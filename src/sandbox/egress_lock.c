/*
 * sandbox/egress_lock.c: the egress lock (see egress_lock.h), four small
 * BPF_PROG_TYPE_CGROUP_SOCK_ADDR programs written out as instructions: no
 * compiler, no libbpf. Each reads the destination the caller asked for from
 * struct bpf_sock_addr and returns 1 (go on) or 0 (EPERM).
 */
#include "sandbox/egress_lock.h"

#include "common/cleanup.h"
#include "common/syscalls.h"
#include "policy/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#define INSN(c, d, s, o, i)                                                 \
    {                                                                       \
        .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) \
    }
#define LDX_W(d, s, o) INSN(BPF_LDX | BPF_MEM | BPF_W, d, s, o, 0)
#define MOV_REG(d, s) INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define AND_IMM(d, i) INSN(BPF_ALU64 | BPF_AND | BPF_K, d, 0, 0, i)
#define JEQ_IMM(d, i, o) INSN(BPF_JMP | BPF_JEQ | BPF_K, d, 0, o, i)
#define JNE_IMM(d, i, o) INSN(BPF_JMP | BPF_JNE | BPF_K, d, 0, o, i)
#define MOV_IMM(d, i) INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define EXIT() INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

#define IP4 offsetof(struct bpf_sock_addr, user_ip4)
#define IP6(n) (offsetof(struct bpf_sock_addr, user_ip6) + 4 * (n))

/* An address in network order as a 32-bit load reads it on this (little-endian) machine. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the egress lock assumes little-endian");
#define NBO_LOW(x) ((int)__builtin_bswap32(x))

/* IPv4: 127.0.0.0/8 and the synthetic range pass; anything else is refused. */
static const struct bpf_insn v4[] = {
    LDX_W(BPF_REG_2, BPF_REG_1, IP4),
    MOV_REG(BPF_REG_3, BPF_REG_2),
    AND_IMM(BPF_REG_3, NBO_LOW(0xff000000u)),
    JEQ_IMM(BPF_REG_3, NBO_LOW(0x7f000000u), 5),
    MOV_REG(BPF_REG_3, BPF_REG_2),
    AND_IMM(BPF_REG_3, NBO_LOW(0xffffffffu << (32 - SYNTH_PREFIX))),
    JEQ_IMM(BPF_REG_3, NBO_LOW(SYNTH_NET), 2),
    MOV_IMM(BPF_REG_0, 0),
    EXIT(),
    MOV_IMM(BPF_REG_0, 1),
    EXIT(),
};

/* IPv6: ::1 alone (a v4-mapped address is refused: the v4 rules are the v4 programs'). */
static const struct bpf_insn v6[] = {
    LDX_W(BPF_REG_2, BPF_REG_1, IP6(0)),
    JNE_IMM(BPF_REG_2, 0, 7),
    LDX_W(BPF_REG_2, BPF_REG_1, IP6(1)),
    JNE_IMM(BPF_REG_2, 0, 5),
    LDX_W(BPF_REG_2, BPF_REG_1, IP6(2)),
    JNE_IMM(BPF_REG_2, 0, 3),
    LDX_W(BPF_REG_2, BPF_REG_1, IP6(3)),
    JNE_IMM(BPF_REG_2, NBO_LOW(1), 1),
    JEQ_IMM(BPF_REG_2, NBO_LOW(1), 2),
    MOV_IMM(BPF_REG_0, 0),
    EXIT(),
    MOV_IMM(BPF_REG_0, 1),
    EXIT(),
};

/* Socket creation: no raw socket and no ICMP one (ping sockets): neither has an address
 * the programs above would see. */
#define SOCK_TYPE offsetof(struct bpf_sock, type)
#define SOCK_PROTO offsetof(struct bpf_sock, protocol)
static const struct bpf_insn create[] = {
    LDX_W(BPF_REG_2, BPF_REG_1, SOCK_TYPE),
    JEQ_IMM(BPF_REG_2, 3 /* SOCK_RAW */, 5),
    LDX_W(BPF_REG_2, BPF_REG_1, SOCK_PROTO),
    JEQ_IMM(BPF_REG_2, 1 /* IPPROTO_ICMP */, 3),
    JEQ_IMM(BPF_REG_2, 58 /* IPPROTO_ICMPV6 */, 2),
    MOV_IMM(BPF_REG_0, 1),
    EXIT(),
    MOV_IMM(BPF_REG_0, 0),
    EXIT(),
};

static int load(const struct bpf_insn *insns, size_t n, enum bpf_attach_type type,
                struct cordon_err *err)
{
    static const char license[] = "Apache-2.0";
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_type = type == BPF_CGROUP_INET_SOCK_CREATE ? BPF_PROG_TYPE_CGROUP_SOCK
                                                      : BPF_PROG_TYPE_CGROUP_SOCK_ADDR;
    a.expected_attach_type = type;
    a.insns = (uint64_t)(uintptr_t)insns;
    a.insn_cnt = (uint32_t)n;
    a.license = (uint64_t)(uintptr_t)license;
    int fd = sys_bpf(BPF_PROG_LOAD, &a, sizeof a);
    if (fd < 0)
        return err_sys(err, CORDON_E_UNSUPPORTED, "cannot load the egress lock (bpf)");
    return fd;
}

int egress_lock_attach(const char *dir, struct cordon_err *err)
{
    static const struct {
        enum bpf_attach_type type;
        const struct bpf_insn *insns;
        size_t n;
    } hooks[] = {
        { BPF_CGROUP_INET4_CONNECT, v4, sizeof v4 / sizeof v4[0] },
        { BPF_CGROUP_UDP4_SENDMSG, v4, sizeof v4 / sizeof v4[0] },
        { BPF_CGROUP_INET6_CONNECT, v6, sizeof v6 / sizeof v6[0] },
        { BPF_CGROUP_UDP6_SENDMSG, v6, sizeof v6 / sizeof v6[0] },
        { BPF_CGROUP_INET_SOCK_CREATE, create, sizeof create / sizeof create[0] },
    };
    _cleanup_close_ int cg = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cg < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open cgroup '%s'", dir);
    for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++) {
        _cleanup_close_ int prog = load(hooks[i].insns, hooks[i].n, hooks[i].type, err);
        if (prog < 0)
            return -1;
        union bpf_attr a;
        memset(&a, 0, sizeof a);
        a.target_fd = (uint32_t)cg;
        a.attach_bpf_fd = (uint32_t)prog;
        a.attach_type = hooks[i].type;
        a.attach_flags = BPF_F_ALLOW_MULTI;
        if (sys_bpf(BPF_PROG_ATTACH, &a, sizeof a) < 0)
            return err_sys(err, CORDON_E_UNSUPPORTED, "cannot attach the egress lock to '%s'", dir);
    }
    return 0;
}
