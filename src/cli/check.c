/*
 * cli/check.c: `cordon check`: what this host supports and which isolation
 * levels can run here, with the reason for each that cannot.
 */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/hostpath.h"
#include "policy/gitconfig.h"
#include "policy/policy.h"
#include "sandbox/microvm/microvm.h"
#include "sandbox/backend.h"
#include "sandbox/cgroup.h"
#include "common/landlock.h"
#include "sandbox/gvisor/gvisor.h"
#include "sandbox/proc_mem.h"
#include "sandbox/txn.h"
#include "common/units.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zlib.h>

static bool in_path(const char *name)
{
    char full[PATH_MAX];
    return hostpath_find_program(name, full, sizeof full);
}

/*
 * All of PATH (gzip-compressed or plain: zlib reads both) as a string the
 * caller frees, or NULL when it cannot be read. A kernel config is some
 * 300 KiB; LIMIT bounds what a strange file could make us hold.
 */
static char *slurp(const char *path, size_t limit)
{
    gzFile f = gzopen(path, "rb");
    if (!f)
        return NULL;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 65536) {
            if (cap >= limit)
                break;
            char *n = realloc(buf, cap + 65536 + 1);
            if (!n)
                break;
            buf = n;
            cap += 65536;
        }
        int got = gzread(f, buf + len, (unsigned)(cap - len));
        if (got <= 0) {
            if (got < 0)
                free(TAKE_PTR(buf));
            break;
        }
        len += (size_t)got;
    }
    gzclose(f);
    if (buf)
        buf[len] = '\0';
    return TAKE_PTR(buf);
}

/* proc_mem.force_override, from the kernel's command line and config. */
static void print_proc_mem(const char *release)
{
    char path[300];
    snprintf(path, sizeof path, "/boot/config-%s", release);
    _cleanup_free_ char *cmdline = slurp("/proc/cmdline", 1 << 16);
    _cleanup_free_ char *config = slurp(path, 4 << 20);
    if (!config)
        config = slurp("/proc/config.gz", 4 << 20);
    char why[256];
    proc_mem_force(release, cmdline, config, why, sizeof why);
    printf("  proc_mem force   %s\n", why);
    printf(
        "                   inside a run /proc is read-only: no /proc/PID/mem opens for writing\n");
}

/* LIMIT's value in LIM as a flag would write it; "unlimited" for 0. */
static void limit_text(const struct policy_limits *lim, enum policy_limit l, char *out, size_t len)
{
    uint64_t v = 0;
    switch (l) {
    case POLICY_LIMIT_WALL:
        v = lim->wall_ms;
        break;
    case POLICY_LIMIT_CPU:
        v = lim->cpu_ms;
        break;
    case POLICY_LIMIT_MEMORY:
        v = lim->memory;
        break;
    case POLICY_LIMIT_PIDS:
        v = lim->pids;
        break;
    case POLICY_LIMIT_OUTPUT:
        v = lim->output;
        break;
    case POLICY_LIMIT_FILE_SIZE:
        v = lim->file_size;
        break;
    case POLICY_LIMIT_OPEN_FILES:
        v = lim->open_files;
        break;
    case POLICY_LIMIT_COUNT:
        break;
    }
    if (!v)
        snprintf(out, len, "unlimited");
    else if (l == POLICY_LIMIT_WALL || l == POLICY_LIMIT_CPU)
        format_duration_ms(v, out, len);
    else if (l == POLICY_LIMIT_PIDS || l == POLICY_LIMIT_OPEN_FILES)
        snprintf(out, len, "%llu", (unsigned long long)v);
    else
        format_size(v, out, len);
}

/*
 * What a run given no limit gets here, and how each default is enforced for
 * this caller: the tree-wide ones by the cgroup just probed, or else
 * degraded to a per-process rlimit, as a defaulted limit may.
 */
static void default_how(const struct cgroup_set *cg, const char *how[POLICY_LIMIT_COUNT])
{
    const char *v = cg->version == 2 ? "cgroup-v2" : "cgroup-v1";
    const char *table[POLICY_LIMIT_COUNT] = {
        [POLICY_LIMIT_WALL] = "supervisor",
        [POLICY_LIMIT_CPU] = cgroup_has(cg, CGROUP_CPU) ? v : "rlimit (RLIMIT_CPU per process)",
        [POLICY_LIMIT_MEMORY] =
            cgroup_has(cg, CGROUP_MEMORY) ? v : "rlimit (RLIMIT_DATA per process)",
        [POLICY_LIMIT_PIDS] = cgroup_has(cg, CGROUP_PIDS) ? v
                                                          : "rlimit (RLIMIT_NPROC in the run's "
                                                            "user namespace; at the process "
                                                            "level, on top of the caller's tasks)",
        [POLICY_LIMIT_OUTPUT] = "supervisor",
        [POLICY_LIMIT_FILE_SIZE] = "rlimit (RLIMIT_FSIZE, any one file)",
        [POLICY_LIMIT_OPEN_FILES] = "rlimit (RLIMIT_NOFILE)",
    };
    memcpy(how, table, sizeof table);
}

static void print_defaults(const struct cgroup_set *cg)
{
    struct cordon_err err = { 0 };
    _cleanup_(policy_freep) struct policy *p = policy_new(&err);
    if (!p)
        return;
    const char *how[POLICY_LIMIT_COUNT];
    default_how(cg, how);
    puts("default limits (when neither policy nor flag sets one; unlimited: none):");
    for (int l = 0; l < POLICY_LIMIT_COUNT; l++) {
        char text[32];
        limit_text(&p->limits, (enum policy_limit)l, text, sizeof text);
        printf("  %-11s %-9s %s\n", policy_limit_name((enum policy_limit)l), text, how[l]);
    }
    char a[32], b[32], c[32];
    format_size(p->tmp_size, a, sizeof a);
    format_size(p->shm_size, b, sizeof b);
    format_size(p->workspace_size, c, sizeof c);
    printf("  tmpfs       /tmp %s and %llu inodes, /dev/shm %s and %llu, scratch /workspace %s "
           "and %llu\n",
           a, (unsigned long long)p->tmp_inodes, b, (unsigned long long)p->shm_inodes, c,
           (unsigned long long)p->workspace_inodes);
    puts("  a host workspace (-w) has no total write budget: only file_size caps each file");
}

/* The default filesystem.protected list, as a run with -w applies it. */
static void print_protected(void)
{
    struct cordon_err err = { 0 };
    _cleanup_(policy_freep) struct policy *p = policy_new(&err);
    if (!p)
        return;
    printf("protected in a host workspace (filesystem.protected; "
           "filesystem.unsafe_unprotect removes one;\n"
           "cordon check --protected says why each is there):\n ");
    int col = 1;
    for (size_t i = 0; i < p->n_protected; i++) {
        int w = (int)strlen(p->protected[i]) + 1;
        if (col + w > 78) {
            printf("\n ");
            col = 1;
        }
        printf(" %s", p->protected[i]);
        col += w;
    }
    printf("\n  no fifo, socket or device node is made there (landlock); afterwards links "
           "leaving it are removed and o+w is stripped\n");
    printf("  --workspace-mode overlay (namespace level only): the run writes an overlayfs layer "
           "on a tmpfs\n  (workspace_size), committed whole or not at all; a protected name at "
           "any depth refuses it\n");
}

/* TEXT from column INDENT, wrapped before column 100. */
static void print_wrapped(const char *text, int indent)
{
    int col = indent;
    printf("%*s", indent, "");
    while (*text) {
        size_t n = strcspn(text, " ");
        if (col > indent && col + 1 + (int)n > 100) {
            printf("\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            putchar(' ');
            col++;
        }
        printf("%.*s", (int)n, text);
        col += (int)n;
        text += n;
        text += strspn(text, " ");
    }
    putchar('\n');
}

/* cordon check --protected: each default protected name, who reads it and why. */
static int check_protected(void)
{
    size_t n = 0;
    const struct policy_protected *rows = policy_protected_defaults(&n);
    puts("protected in a host workspace by default (a directory's whole tree; filesystem.protected "
         "adds,\nfilesystem.unsafe_unprotect removes): what host tools run or trust from each");
    for (size_t i = 0; i < n; i++) {
        printf("  %s%s  (%s%s)\n", rows[i].name, rows[i].dir ? "/" : "", rows[i].who,
               rows[i].checked ? "; written by the run, checked after it" : "");
        print_wrapped(rows[i].why, 6);
    }
    size_t nk = 0;
    const struct gitconfig_rule *keys = gitconfig_rules(&nk);
    puts("in a repository of the workspace (.git at any depth, a bare one, a submodule's), the "
         "run may\nnot leave a hook, info/attributes naming a driver, a gitdir link out of the "
         "workspace,\nnor one of these config keys it did not find there (git config "
         "--help names each):");
    for (size_t i = 0; i < nk; i++) {
        printf("  %s%s%s%s\n", keys[i].pattern, keys[i].when ? "  (when: " : "",
               keys[i].when ? keys[i].when : "", keys[i].when ? ")" : "");
        print_wrapped(keys[i].why, 6);
    }
    puts("considered and not protected:");
    rows = policy_protected_left_out(&n);
    for (size_t i = 0; i < n; i++) {
        printf("  %s  (%s)\n", rows[i].name, rows[i].who);
        print_wrapped(rows[i].why, 6);
    }
    return 0;
}

/* The same table as JSON, for check --json. */
static json_t *protected_json(void)
{
    json_t *o = json_object(), *in = json_array(), *out = json_array();
    size_t n = 0;
    const struct policy_protected *rows = policy_protected_defaults(&n);
    for (size_t i = 0; i < n; i++)
        /* clang-format off */
        json_array_append_new(in, json_pack("{s:s, s:b, s:s, s:s}", "name", rows[i].name,
                                            "directory", rows[i].dir, "read_by", rows[i].who,
                                            "why", rows[i].why));
    /* clang-format on */
    rows = policy_protected_left_out(&n);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(out,
                              json_pack("{s:s, s:s, s:s}", "names", rows[i].name, "read_by",
                                        rows[i].who, "why", rows[i].why));
    json_t *keys = json_array();
    size_t nk = 0;
    const struct gitconfig_rule *rules = gitconfig_rules(&nk);
    for (size_t i = 0; i < nk; i++)
        json_array_append_new(keys,
                              json_pack("{s:s, s:s?, s:s}", "key", rules[i].pattern, "when",
                                        rules[i].when, "why", rules[i].why));
    json_object_set_new(o, "defaults", in);
    json_object_set_new(o, "not_protected", out);
    json_object_set_new(o, "git_config_keys", keys);
    return o;
}

/*
 * Which gVisor platforms start a sandbox here: each is tried with
 * `runsc do true` (3 s at most). cordon uses ptrace, the one Debian's 2022
 * runsc and a host without nested virtualisation both support.
 */
static void print_gvisor_platforms(void)
{
    char runsc[4096];
    struct cordon_err err = { 0 };
    if (gvisor_find_runsc(runsc, sizeof runsc, &err) < 0)
        return;
    static const char *const platforms[] = { "ptrace", "kvm" };
    for (size_t i = 0; i < sizeof platforms / sizeof platforms[0]; i++) {
        err = (struct cordon_err){ 0 };
        int ok = gvisor_platform_probe(platforms[i], &err) == 0;
        printf("    %-7s        %s%s\n", platforms[i], ok ? "works" : err.msg,
               i == 0 ? " (the one cordon uses)" : "");
    }
}

/* How a level's command reaches the allowed hosts (README: transparent egress). */
static const char *egress_note(enum cordon_level l)
{
    switch (l) {
    case CORDON_LEVEL_GVISOR:
        return "transparent: a DNS stub and synthetic addresses for allowed names in gVisor's "
               "netstack, relayed to the gateway by the sandbox's init, and the proxy";
    case CORDON_LEVEL_MICROVM:
        return "transparent: a DNS stub and synthetic addresses for allowed names in the guest, "
               "relayed to the gateway by the guest agent, and the proxy";
    case CORDON_LEVEL_PROCESS:
        return "transparent: the host resolver's queries (UDP to port 53) reach the gateway's "
               "DNS stub instead, synthetic addresses for allowed names, and the proxy "
               "(HTTP(S)_PROXY); no other UDP";
    case CORDON_LEVEL_NAMESPACE:
        break;
    }
    return "transparent: a DNS stub and synthetic addresses for allowed names, and the "
           "proxy (HTTP(S)_PROXY)";
}

/*
 * What a connect() to a unix socket's path reaches at level L (sandbox/usock.h):
 * a bind never hands in a host socket, present at start or made later.
 */
static const char *unix_sockets_note(enum cordon_level l)
{
    switch (l) {
    case CORDON_LEVEL_PROCESS:
        return "a path reaches a socket the run bound (its keeper sees each bind) or one "
               "filesystem.unix_sockets lists, checked by inode; no abstract name, no unix "
               "datagram socket";
    case CORDON_LEVEL_GVISOR:
        return "gVisor's own; its gofer reaches the gateway's door and the sockets "
               "filesystem.unix_sockets lists, a keeper checking each connect by inode";
    case CORDON_LEVEL_MICROVM:
        return "the guest's own: 9p shares carry no socket, so filesystem.unix_sockets is "
               "refused";
    case CORDON_LEVEL_NAMESPACE:
        break;
    }
    return "a path reaches a socket of the run's network namespace or one "
           "filesystem.unix_sockets lists, init making every connect() and checking it by "
           "inode; no unix datagram socket";
}

/* The same facts as the text report, as one JSON object on stdout (--json). */
static int check_json(void)
{
    struct utsname u;
    uname(&u);
    struct cordon_err ns_err = { 0 };
    bool ns_ok = namespace_backend.probe(&ns_err) == 0;
    int abi = landlock_abi();
    struct cgroup_set cg;
    char name[64], advice[512];
    snprintf(name, sizeof name, "cordon-check-%d", (int)getpid());
    cgroup_create(&cg, name, NULL, NULL, NULL, NULL);
    cli_delegation_advice(&cg, advice, sizeof advice);
    static const char *const names[] = { "memory", "pids", "cpu" };
    json_t *cgroups = json_pack("{s:i, s:s}", "version", cg.version, "delegation", advice);
    for (int c = 0; c < CGROUP_COUNT; c++)
        json_object_set_new(cgroups, names[c],
                            json_pack("{s:b, s:s?}", "usable", cgroup_has(&cg, c), "why",
                                      cgroup_has(&cg, c) ? NULL : cg.why[c]));
    json_t *levels = json_object();
    for (int l = CORDON_LEVEL_PROCESS; l <= CORDON_LEVEL_MICROVM; l++) {
        struct cordon_err err = { 0 };
        const struct sandbox_backend *b = sandbox_backend_for((enum cordon_level)l, &err);
        bool ok = b && b->probe(&err) == 0;
        json_object_set_new(levels, cordon_level_name((enum cordon_level)l),
                            /* clang-format off */
                            json_pack("{s:b, s:s?, s:b, s:s, s:s}", "usable", ok, "why",
                                      ok ? NULL : err.msg, "default", l == CORDON_LEVEL_NAMESPACE,
                                      "egress", egress_note((enum cordon_level)l),
                                      "unix_sockets", unix_sockets_note((enum cordon_level)l)));
        /* clang-format on */
    }
    struct cordon_err err = { 0 };
    _cleanup_(policy_freep) struct policy *p = policy_new(&err);
    json_t *defaults = json_object();
    const char *how[POLICY_LIMIT_COUNT];
    default_how(&cg, how);
    for (int l = 0; p && l < POLICY_LIMIT_COUNT; l++) {
        char text[32];
        limit_text(&p->limits, (enum policy_limit)l, text, sizeof text);
        json_object_set_new(defaults, policy_limit_name((enum policy_limit)l),
                            json_pack("{s:s, s:s}", "value", text, "enforced_by", how[l]));
    }
    cgroup_destroy(&cg);
    int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    int kvm_errno = errno;
    if (kvm >= 0)
        close(kvm);
    /* clang-format off */
    _cleanup_(json_decrefp) json_t *o = json_pack(
        "{s:s, s:{s:s, s:s, s:s}, s:i, s:{s:b, s:s?}, s:b, s:i, s:o, s:{s:b, s:s?}, s:b, s:b, "
        "s:o, s:o, s:o}",
        "cordon_version", CORDON_VERSION, "kernel", "sysname", u.sysname, "release", u.release,
        "machine", u.machine, "uid", (int)getuid(), "user_namespaces", "usable", ns_ok, "why",
        ns_ok ? NULL : ns_err.msg, "seccomp", prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0,
        "landlock_abi", abi > 0 ? abi : 0, "cgroups", cgroups, "kvm", "usable", kvm >= 0, "why",
        kvm >= 0 ? NULL : strerror(kvm_errno), "runsc", in_path("runsc"), "qemu",
        in_path("qemu-system-x86_64"), "levels", levels, "default_limits", defaults,
        "protected", protected_json());
    /* clang-format on */
    _cleanup_free_ char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    if (!text)
        return cli_usage_error("check: out of memory");
    puts(text);
    return 0;
}

/*
 * cordon check -w DIR [-p FILE]: finish or undo a commit into DIR whose
 * process died (--workspace-mode overlay), as its journal says, checked
 * against the policy's protected names (FILE, or the one run would use).
 */
static int check_workspace(const char *dir, const char *policy_file)
{
    struct cordon_err err = { 0 };
    char path[4096];
    const char *from;
    int found = policy_file ? 1 : cli_default_policy(path, sizeof path, &from, &err);
    if (found < 0)
        return cli_fail(&err);
    _cleanup_(policy_freep) struct policy *p =
        found ? policy_load(policy_file ? policy_file : path, &err) : policy_new(&err);
    if (!p || policy_finalize(p, &err) < 0)
        return cli_fail(&err);
    _cleanup_close_ int fd = hostpath_open(AT_FDCWD, dir, O_PATH | O_DIRECTORY, 0, false, &err);
    if (fd < 0)
        return err_prefix(&err, "check: workspace"), cli_fail(&err);
    struct txn_recovery rec;
    if (txn_recover(fd, p, 10000, &rec) < 0) {
        err_set(&err, CORDON_E_SETUP,
                "check: workspace '%s': an interrupted commit could not be "
                "finished or undone: %s",
                dir, rec.reason);
        return cli_fail(&err);
    }
    if (rec.busy)
        printf("workspace %s: a commit, or a run writing it directly, holds it; try again when "
               "it is done\n",
               dir);
    else if (rec.rolled_back + rec.rolled_forward)
        printf("workspace %s: finished %u interrupted commit(s), undid %u; the tree is whole\n",
               dir, rec.rolled_forward, rec.rolled_back);
    else
        printf("workspace %s: no interrupted commit\n", dir);
    if (rec.settled)
        printf("workspace %s: %u entr%s changed by someone else meanwhile: %s\n", dir, rec.settled,
               rec.settled == 1 ? "y was" : "ies were", rec.settled_note);
    return 0;
}

int cmd_check(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        puts("usage: cordon check [--json | --protected | -w DIR [-p FILE]]\n\nReport the "
             "kernel features cordon uses and which isolation levels can run on this host.\n\n"
             "  --json        the same as one JSON object\n  --protected   the names protected "
             "in a host workspace, and why each is\n  -w DIR        finish or undo a commit into "
             "DIR whose process died\n  -p FILE       with -w: the policy (else the one run "
             "uses)");
        return 0;
    }
    if (argc >= 3 && (!strcmp(argv[1], "-w") || !strcmp(argv[1], "--workspace"))) {
        if (argc == 3)
            return check_workspace(argv[2], NULL);
        if (argc == 5 && (!strcmp(argv[3], "-p") || !strcmp(argv[3], "--policy")))
            return check_workspace(argv[2], argv[4]);
        return cli_usage_error("check: expected -w DIR [-p FILE]");
    }
    if (argc == 2 && !strcmp(argv[1], "--json"))
        return check_json();
    if (argc == 2 && !strcmp(argv[1], "--protected"))
        return check_protected();
    if (argc > 1)
        return cli_usage_error("check: unexpected argument '%s'", argv[1]);

    struct utsname u;
    uname(&u);
    printf("cordon %s on %s %s %s, running as uid %d\n", CORDON_VERSION, u.sysname, u.release,
           u.machine, (int)getuid());

    struct cordon_err ns_err = { 0 };
    int ns_ok = namespace_backend.probe(&ns_err) == 0;
    printf("  user namespaces  %s\n", ns_ok ? "yes" : ns_err.msg);

    int seccomp_ok = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
    printf("  seccomp          %s\n", seccomp_ok ? "yes (filter mode)" : "no");

    int abi = landlock_abi();
    if (abi > 0)
        printf("  landlock         ABI %d\n", abi);
    else
        printf("  landlock         no (the kernel lacks it or it is disabled)\n");

    print_proc_mem(u.release);

    struct cgroup_set cg;
    char name[64];
    snprintf(name, sizeof name, "cordon-check-%d", (int)getpid());
    cgroup_create(&cg, name, NULL, NULL, NULL, NULL);
    static const char *const names[] = { "memory", "pids", "cpu" };
    printf("  cgroups          %s\n",
           cg.version == 2       ? "v2"
               : cg.version == 1 ? "v1"
                                 : "none usable");
    for (int c = 0; c < CGROUP_COUNT; c++)
        printf("    %-7s        %s\n", names[c], cgroup_has(&cg, c) ? "usable" : cg.why[c]);
    char advice[512];
    cli_delegation_advice(&cg, advice, sizeof advice);
    printf("    delegation     %s\n", advice);

    int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    printf("  kvm              %s\n", kvm >= 0 ? "usable" : strerror(errno));
    if (kvm >= 0)
        close(kvm);
    printf("  runsc            %s\n", in_path("runsc") ? "found" : "not found");
    print_gvisor_platforms();
    printf("  qemu-system-x86_64 %s\n", in_path("qemu-system-x86_64") ? "found" : "not found");

    puts("levels:");
    for (int l = CORDON_LEVEL_PROCESS; l <= CORDON_LEVEL_MICROVM; l++) {
        struct cordon_err err = { 0 };
        const struct sandbox_backend *b = sandbox_backend_for((enum cordon_level)l, &err);
        if (b && b->probe(&err) == 0 && l == CORDON_LEVEL_MICROVM) {
            /* Say what would run the guest: without VMX/SVM it is QEMU's emulator. */
            char why[160];
            bool hw = microvm_has_kvm(why, sizeof why);
            printf("  %-10s yes, %s%s\n", cordon_level_name((enum cordon_level)l),
                   microvm_accel_note(hw),
                   hw ? ""
                      : " (runs only where the policy says "
                        "microvm.accel: tcg)");
            printf("  %-10s kvm: %s\n", "", why);
        } else if (b && b->probe(&err) == 0)
            printf("  %-10s yes%s\n", cordon_level_name((enum cordon_level)l),
                   l == CORDON_LEVEL_NAMESPACE ? " (default)" : "");
        else
            printf("  %-10s no: %s\n", cordon_level_name((enum cordon_level)l), err.msg);
        if (b && b->shares)
            printf("  %-10s does not hide: %s\n", "", b->shares);
        printf("  %-10s egress: %s\n", "", egress_note((enum cordon_level)l));
        printf("  %-10s unix sockets: %s\n", "", unix_sockets_note((enum cordon_level)l));
    }
    print_defaults(&cg);
    cgroup_destroy(&cg);
    printf("a limit a policy or flag sets and this host cannot enforce is refused unless marked "
           "best_effort;\na default one degrades as shown above\n");
    print_protected();
    return 0;
}
