/*
 * tests/unit/bpf_run.h: a classic-BPF interpreter for the few instructions
 * cordon's notification filters use, so a unit test can run one.
 */
#pragma once
#include "sandbox/seccomp.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <string.h>

/* Run PROG on D: the action it returns, or 0 on an instruction it does not know. */
__attribute__((unused)) static unsigned run(const struct seccomp_program *prog,
                                            const struct seccomp_data *d)
{
    unsigned a = 0;
    for (size_t pc = 0; pc < prog->len; pc++) {
        const struct sock_filter *f = &prog->filter[pc];
        switch (f->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            if (f->k + 4 > sizeof *d)
                return 0;
            memcpy(&a, (const char *)d + f->k, 4);
            break;
        case BPF_ALU | BPF_AND | BPF_K:
            a &= f->k;
            break;
        case BPF_JMP | BPF_JA:
            pc += f->k;
            break;
        case BPF_JMP | BPF_JEQ | BPF_K:
            pc += a == f->k ? f->jt : f->jf;
            break;
        case BPF_JMP | BPF_JSET | BPF_K:
            pc += (a & f->k) ? f->jt : f->jf;
            break;
        case BPF_RET | BPF_K:
            return f->k;
        default:
            return 0;
        }
    }
    return 0;
}
