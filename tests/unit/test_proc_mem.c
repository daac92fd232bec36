/*
 * tests/unit/test_proc_mem.c: proc_mem.force_override read from a kernel
 * release, command line and config, as `cordon check` reports it.
 */
#include "tap.h"

#include "sandbox/proc_mem.h"

#define ALWAYS_Y                                     \
    "CONFIG_FOO=y\nCONFIG_PROC_MEM_ALWAYS_FORCE=y\n" \
    "# CONFIG_PROC_MEM_FORCE_PTRACE is not set\n# CONFIG_PROC_MEM_NO_FORCE is not set\n"
#define PTRACE_Y "# CONFIG_PROC_MEM_ALWAYS_FORCE is not set\nCONFIG_PROC_MEM_FORCE_PTRACE=y\n"
#define NEVER_Y "CONFIG_PROC_MEM_NO_FORCE=y"

struct case_ {
    const char *release, *cmdline, *config;
    enum proc_mem_force force;
    const char *why;
};

static const struct case_ cases[] = {
    { "6.18.44-fc", "quiet panic=1\n", ALWAYS_Y, PROC_MEM_FORCE_ALWAYS,
      "always (default: always, CONFIG_PROC_MEM_ALWAYS_FORCE)" },
    { "6.12.0", "ro proc_mem.force_override=never quiet\n", ALWAYS_Y, PROC_MEM_FORCE_NEVER,
      "never (proc_mem.force_override=never on the kernel command line; "
      "default: always, CONFIG_PROC_MEM_ALWAYS_FORCE)" },
    { "6.12.0", "proc_mem.force_override=ptrace", NULL, PROC_MEM_FORCE_PTRACE,
      "ptrace (proc_mem.force_override=ptrace on the kernel command line; "
      "default: unknown, no kernel config found)" },
    /* The last recognised value wins; an unknown one leaves the setting be. */
    { "6.13.1", "proc_mem.force_override=never proc_mem.force_override=bogus", PTRACE_Y,
      PROC_MEM_FORCE_NEVER,
      "never (proc_mem.force_override=never on the kernel command line; "
      "default: ptrace, CONFIG_PROC_MEM_FORCE_PTRACE)" },
    { "6.13.1", "proc_mem.force_override=bogus", PTRACE_Y, PROC_MEM_FORCE_PTRACE,
      "ptrace (default: ptrace, CONFIG_PROC_MEM_FORCE_PTRACE)" },
    { "6.13.1", "proc_mem.force_override=", NEVER_Y, PROC_MEM_FORCE_NEVER,
      "never (default: never, CONFIG_PROC_MEM_NO_FORCE)" },
    { "6.13.1", "proc_mem.force_override=neverland", NEVER_Y, PROC_MEM_FORCE_NEVER,
      "never (default: never, CONFIG_PROC_MEM_NO_FORCE)" },
    /* Arguments after "--" belong to init, not to the kernel. */
    { "6.14", "quiet -- proc_mem.force_override=never", ALWAYS_Y, PROC_MEM_FORCE_ALWAYS,
      "always (default: always, CONFIG_PROC_MEM_ALWAYS_FORCE)" },
    { "6.14", "xproc_mem.force_override=never", ALWAYS_Y, PROC_MEM_FORCE_ALWAYS,
      "always (default: always, CONFIG_PROC_MEM_ALWAYS_FORCE)" },
    /* A commented-out or =n choice is no choice. */
    { "6.14", "", "# CONFIG_PROC_MEM_NO_FORCE=y\nCONFIG_PROC_MEM_FORCE_PTRACE=n\n",
      PROC_MEM_FORCE_UNKNOWN,
      "unknown (not on the kernel command line; default: unknown, not in the kernel config)" },
    { "6.14", NULL, NULL, PROC_MEM_FORCE_UNKNOWN,
      "unknown (not on the kernel command line; default: unknown, no kernel config found)" },
    /* Before 6.12 there is no setting: writes are always forced. */
    { "6.11.9-arch1", "proc_mem.force_override=never", NULL, PROC_MEM_FORCE_ALWAYS,
      "always (the kernel predates proc_mem.force_override, 6.12)" },
    { "5.15.0-91-generic", NULL, NULL, PROC_MEM_FORCE_ALWAYS,
      "always (the kernel predates proc_mem.force_override, 6.12)" },
    /* A release that does not parse is taken as new. */
    { "weird", NULL, NEVER_Y, PROC_MEM_FORCE_NEVER,
      "never (default: never, CONFIG_PROC_MEM_NO_FORCE)" },
};

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct case_ *c = &cases[i];
        char why[256] = "";
        enum proc_mem_force f = proc_mem_force(c->release, c->cmdline, c->config, why, sizeof why);
        char label[160];
        snprintf(label, sizeof label, "%s, \"%s\"", c->release,
                 tap_show(c->cmdline ? c->cmdline : "(none)"));
        ok(f == c->force, "%s: setting %d", label, (int)f);
        is_str(why, c->why, label);
    }
    return done_testing();
}
