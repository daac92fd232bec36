/*
 * tests/unit/test_names.c: which calls the names keeper hears (names.h), by
 * mode: the namespace level's init (NAMES_MAKE, with connect) and an
 * engine's keeper (NAMES_CHECK) hear what makes a name, never a read.
 */
#include "tap.h"
#include "bpf_run.h"

#include "sandbox/names.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <sys/syscall.h>

#define NOTIFY SECCOMP_RET_USER_NOTIF
#define ALLOW SECCOMP_RET_ALLOW

struct call {
    const char *what;
    int nr;
    __u64 args[6];
    unsigned make, check; /* what each filter answers */
};

static const struct call calls[] = {
    { "openat O_RDONLY", __NR_openat, { AT_FDCWD, 0, O_RDONLY }, ALLOW, ALLOW },
    { "openat O_WRONLY", __NR_openat, { AT_FDCWD, 0, O_WRONLY | O_TRUNC }, ALLOW, ALLOW },
    { "openat O_CREAT", __NR_openat, { AT_FDCWD, 0, O_WRONLY | O_CREAT }, NOTIFY, NOTIFY },
    { "open O_CREAT", __NR_open, { 0, O_CREAT | O_EXCL }, NOTIFY, NOTIFY },
    { "creat", __NR_creat, { 0 }, NOTIFY, NOTIFY },
    { "openat2", __NR_openat2, { 0 }, NOTIFY, NOTIFY },
    { "mkdir", __NR_mkdir, { 0 }, NOTIFY, NOTIFY },
    { "mknodat", __NR_mknodat, { 0 }, NOTIFY, NOTIFY },
    { "symlinkat", __NR_symlinkat, { 0 }, NOTIFY, NOTIFY },
    { "linkat", __NR_linkat, { 0 }, NOTIFY, NOTIFY },
    { "rename", __NR_rename, { 0 }, NOTIFY, NOTIFY },
    { "renameat2", __NR_renameat2, { 0 }, NOTIFY, NOTIFY },
    { "unlinkat", __NR_unlinkat, { 0 }, ALLOW, ALLOW },
    { "connect", __NR_connect, { 0 }, NOTIFY, ALLOW },
    { "read", __NR_read, { 0 }, ALLOW, ALLOW },
};

int main(void)
{
    struct seccomp_program make = { 0 }, check = { 0 }, off = { 0 };
    struct cordon_err err = { 0 };
    ok(names_program(NAMES_MAKE, true, &make, &err) == 0, "the namespace level's filter: %s",
       err.msg);
    ok(names_program(NAMES_CHECK, false, &check, &err) == 0, "an engine's filter: %s", err.msg);
    ok(names_program(NAMES_OFF, true, &off, &err) == 0, "connect alone: %s", err.msg);
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        const struct call *c = &calls[i];
        struct seccomp_data d = { .nr = c->nr, .arch = AUDIT_ARCH_X86_64 };
        memcpy(d.args, c->args, sizeof c->args);
        ok(run(&make, &d) == c->make && run(&check, &d) == c->check, "%s: %#x and %#x", c->what,
           run(&make, &d), run(&check, &d));
        ok(run(&off, &d) == (c->nr == __NR_connect ? NOTIFY : ALLOW), "%s without a workspace",
           c->what);
    }
    struct seccomp_data i386 = { .nr = __NR_mkdir, .arch = AUDIT_ARCH_I386 };
    ok(run(&make, &i386) == ALLOW, "another arch passes (the allowlist kills it)");
    seccomp_program_release(&make);
    seccomp_program_release(&check);
    seccomp_program_release(&off);
    return done_testing();
}
