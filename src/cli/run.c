/*
 * cli/run.c: `cordon run`: flags and the policy file fill one policy, the
 * level's backend runs the command, the result decides the exit status.
 */
#include "cli/cli.h"
#include "common/fds.h"
#include "common/hostpath.h"
#include "policy/policy.h"
#include "core/run.h"
#include "sandbox/backend.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

static const char *const usage[2] = {
    "usage: cordon run [OPTIONS] -- COMMAND [ARG...]\n"
    "\n"
    "Run COMMAND in a fresh sandbox, destroyed when it ends.\n"
    "\n",
    "      --tty                run the command on a terminal of the sandbox's own,\n"
    "                           relayed to this one (which never enters the sandbox)\n"
    "      --json               print the result (as --result writes it) on stdout\n"
    "                           after the run\n"
    "  -q, --quiet              no notices (egress refusals, degraded limits) on stderr\n"
    "  -h, --help               this help\n"
    "\n"
    "Exit status: the command's own; 128+N if killed by signal N; 124 on timeout;\n"
    "125 if cordon failed or refused; 126 not executable; 127 not found; 122 if an\n"
    "overlay workspace's change was refused or not applied (--result keeps the code).\n",
};

const char cli_run_options_help[] =
    "  -p, --policy FILE        YAML or JSON policy; the flags below override it\n"
    "                           (default: $CORDON_POLICY, ~/.config/cordon/policy.yaml,\n"
    "                           /etc/cordon/policy.yaml, the first that exists); a\n"
    "                           signed one they may only tighten\n"
    "  -l, --level LEVEL        isolation level: namespace (default), process (no\n"
    "                           namespaces), gvisor (runsc) or microvm; see cordon\n"
    "                           check; A,B: B where A cannot run\n"
    "      --accel ACCEL        microvm: kvm (hardware only, default) or tcg (allow\n"
    "                           QEMU's emulator, which is not a hypervisor boundary)\n"
    "  -w, --workspace DIR      host directory mounted read-write at /workspace, the\n"
    "                           working directory; default: an empty scratch tmpfs\n"
    "      --workspace-mode MODE  direct (default): the run writes the workspace;\n"
    "                           overlay: on a copy-on-write layer, committed after it\n"
    "      --workspace-commit WHEN  overlay: on_success (default: exit 0) or always\n"
    "      --ro PATH[:DEST]     bind a host path read-only (repeatable)\n"
    "      --rw PATH[:DEST]     bind a host path read-write (repeatable)\n"
    "  -e, --env NAME[=VALUE]   pass NAME from the host, or set it (repeatable)\n"
    "  -t, --timeout DURATION   wall-clock limit (30s, 2m, 500ms; default 10m)\n"
    "      --cpu DURATION       CPU-time limit for the whole run (default 10m)\n"
    "  -m, --memory SIZE        memory limit (64M, 1G; default 1G)\n"
    "      --pids N             limit on processes and threads (default 256)\n"
    "      --output SIZE        cap on stdout+stderr bytes relayed (default 16M)\n"
    "                           Each limit takes unlimited for none; a limit left\n"
    "                           at its default degrades to an rlimit where this host\n"
    "                           cannot enforce it (see cordon check)\n"
    "      --tmp-size SIZE      size of /tmp (default 64M)\n"
    "      --best-effort LIMIT  let LIMIT (memory, pids, cpu, open_files, or all)\n"
    "                           degrade to an rlimit where this host has no cgroup\n"
    "                           for it, instead of refusing to run (repeatable)\n"
    "      --net MODE           network: none (default; loopback only) or gateway\n"
    "                           (the egress gateway, the only way out)\n"
    "      --allow HOST[:PORT]  allow a destination through the gateway (repeatable;\n"
    "                           implies --net gateway); HOST is a name, *.suffix,\n"
    "                           an IP or a CIDR; PORT defaults to 80 and 443;\n"
    "                           'GET,HEAD HOST[/PATH]' only those methods there;\n"
    "                           @NAME a preset (npm, pypi, crates, go, rubygems,\n"
    "                           maven, debian, github: read-only)\n"
    "      --deny HOST[:PORT]   refuse a destination even if an allow matches\n"
    "                           (repeatable)\n"
    "      --allow-private CIDR let addresses in CIDR (127.0.0.2/32, fd00::/8)\n"
    "                           through the private-range refusals (repeatable)\n"
    "      --resolve HOST=IP    pin HOST to IP, like curl --resolve (repeatable)\n"
    "      --dns IP[:PORT]      resolve through this nameserver, not the host's\n"
    "                           resolv.conf (repeatable)\n"
    "      --secret NAME=env:VAR@HOST[,HOST]  a credential the sandbox sees only as a\n"
    "                           placeholder; the gateway swaps in the real value for\n"
    "                           HOST (repeatable; NAME=file:PATH@HOST reads a file)\n"
    "      --result FILE        write the run's result as JSON\n"
    "      --audit FILE         append the run to a hash-chained audit log\n"
    "      --expect-policy-digest SHA256  refuse to run unless the effective policy\n"
    "                           (file and flags) has this digest (cordon policy check)\n"
    "      --break-glass REASON run with the policy relaxed in the keys its\n"
    "                           break_glass.may_relax names, for at most\n"
    "                           break_glass.max_duration, recorded in every event;\n"
    "                           by --relax alone: other flags may only tighten\n"
    "      --until DURATION|TIME  the break-glass window: 30m, or 2026-12-03T15:00:00Z\n"
    "      --relax KEY=VALUE    a break-glass setting (repeatable)\n"
    "      --approval FILE      a signed break-glass approval (cordon policy approve)\n";

enum {
    OPT_RO = 256,
    OPT_RW,
    OPT_CPU,
    OPT_PIDS,
    OPT_OUTPUT,
    OPT_TMP_SIZE,
    OPT_RESULT,
    OPT_BEST_EFFORT,
    OPT_AUDIT,
    OPT_NET,
    OPT_ALLOW,
    OPT_DENY,
    OPT_ALLOW_PRIVATE,
    OPT_RESOLVE,
    OPT_DNS,
    OPT_SECRET,
    OPT_ALLOW_TOOL,
    OPT_EXPECT_DIGEST,
    OPT_BREAK_GLASS,
    OPT_UNTIL,
    OPT_RELAX,
    OPT_APPROVAL,
    OPT_JSON,
    OPT_TTY,
    OPT_ACCEL,
    OPT_WS_MODE,
    OPT_WS_COMMIT,
};

static const struct option options[] = {
    { "policy", required_argument, NULL, 'p' },
    { "level", required_argument, NULL, 'l' },
    { "workspace", required_argument, NULL, 'w' },
    { "workspace-mode", required_argument, NULL, OPT_WS_MODE },
    { "workspace-commit", required_argument, NULL, OPT_WS_COMMIT },
    { "ro", required_argument, NULL, OPT_RO },
    { "rw", required_argument, NULL, OPT_RW },
    { "env", required_argument, NULL, 'e' },
    { "timeout", required_argument, NULL, 't' },
    { "cpu", required_argument, NULL, OPT_CPU },
    { "memory", required_argument, NULL, 'm' },
    { "pids", required_argument, NULL, OPT_PIDS },
    { "output", required_argument, NULL, OPT_OUTPUT },
    { "tmp-size", required_argument, NULL, OPT_TMP_SIZE },
    { "accel", required_argument, NULL, OPT_ACCEL },
    { "best-effort", required_argument, NULL, OPT_BEST_EFFORT },
    { "result", required_argument, NULL, OPT_RESULT },
    { "audit", required_argument, NULL, OPT_AUDIT },
    { "net", required_argument, NULL, OPT_NET },
    { "allow", required_argument, NULL, OPT_ALLOW },
    { "deny", required_argument, NULL, OPT_DENY },
    { "allow-private", required_argument, NULL, OPT_ALLOW_PRIVATE },
    { "resolve", required_argument, NULL, OPT_RESOLVE },
    { "dns", required_argument, NULL, OPT_DNS },
    { "secret", required_argument, NULL, OPT_SECRET },
    { "allow-tool", required_argument, NULL, OPT_ALLOW_TOOL },
    { "expect-policy-digest", required_argument, NULL, OPT_EXPECT_DIGEST },
    { "break-glass", required_argument, NULL, OPT_BREAK_GLASS },
    { "until", required_argument, NULL, OPT_UNTIL },
    { "relax", required_argument, NULL, OPT_RELAX },
    { "approval", required_argument, NULL, OPT_APPROVAL },
    { "json", no_argument, NULL, OPT_JSON },
    { "quiet", no_argument, NULL, 'q' },
    { "tty", no_argument, NULL, OPT_TTY },
    { "help", no_argument, NULL, 'h' },
    { 0 },
};

/*
 * Flags and the policy key each one sets; on a list key (network.allow...)
 * the flag adds one item to what the file gave.
 */
static const struct {
    int opt;
    const char *key;
    const char *flag;
} scalar_flags[] = {
    { 'l', "isolation", "--level" },
    { 'w', "filesystem.workspace", "--workspace" },
    { 't', "limits.wall", "--timeout" },
    { OPT_CPU, "limits.cpu", "--cpu" },
    { 'm', "limits.memory", "--memory" },
    { OPT_PIDS, "limits.pids", "--pids" },
    { OPT_OUTPUT, "limits.output", "--output" },
    { OPT_TMP_SIZE, "filesystem.tmp_size", "--tmp-size" },
    { OPT_ACCEL, "microvm.accel", "--accel" },
    { OPT_WS_MODE, "workspace.mode", "--workspace-mode" },
    { OPT_WS_COMMIT, "workspace.commit", "--workspace-commit" },
    { OPT_AUDIT, "audit.file", "--audit" },
    { OPT_NET, "network.mode", "--net" },
    { OPT_ALLOW, "network.allow", "--allow" },
    { OPT_DENY, "network.deny", "--deny" },
    { OPT_ALLOW_PRIVATE, "network.allow_private", "--allow-private" },
    { OPT_RESOLVE, "network.resolve", "--resolve" },
    { OPT_DNS, "network.dns", "--dns" },
    { OPT_SECRET, "secrets", "--secret" },
    { OPT_ALLOW_TOOL, "tools.allow", "--allow-tool" },
};

struct flag_value {
    int opt;
    const char *arg;
};

static const char *flag_name(int opt)
{
    for (size_t i = 0; i < sizeof scalar_flags / sizeof scalar_flags[0]; i++)
        if (scalar_flags[i].opt == opt)
            return scalar_flags[i].flag;
    return opt == OPT_RO ? "--ro" : opt == OPT_RW ? "--rw" : opt == 'e' ? "--env" : "--best-effort";
}

/*
 * One flag into P, through the setters that refuse a relaxing value when P
 * is signed (policy_check_tighten); recorded in P->flags for run.start.
 */
static int apply_flag(struct policy *p, const struct flag_value *f, struct cordon_err *err)
{
    int rc = 0;
    const char *name = flag_name(f->opt);
    for (size_t i = 0; i < sizeof scalar_flags / sizeof scalar_flags[0]; i++)
        if (scalar_flags[i].opt == f->opt)
            rc = policy_set(p, scalar_flags[i].key, f->arg, name, err);
    if (f->opt == OPT_RO || f->opt == OPT_RW)
        rc = policy_add_bind(p, f->arg, f->opt == OPT_RW, name, err);
    else if (f->opt == 'e')
        rc = policy_add_env(p, f->arg, name, err);
    else if (f->opt == OPT_BEST_EFFORT)
        rc = policy_set(p, "limits.best_effort", f->arg, name, err);
    if (rc < 0)
        return -1;
    if (!p->flags)
        p->flags = json_array();
    /* As the audit record may show it: an --env value is the command's, maybe a credential. */
    char shown[80];
    policy_value_shown(f->opt == 'e' ? "env.set" : "", f->arg, shown, sizeof shown);
    if (!p->flags ||
        json_array_append_new(p->flags, json_pack("{s:s, s:s}", "flag", name, "value", shown)))
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    return 0;
}

/* What a person watching the run should know, as it happens. */
static void print_notice(void *arg, const char *line)
{
    (void)arg;
    fprintf(stderr, "cordon: %s\n", line);
}

/* The same, on a terminal in raw mode (--tty), where a newline does not return. */
static void print_notice_raw(void *arg, const char *line)
{
    (void)arg;
    fprintf(stderr, "cordon: %s\r\n", line);
}

/* Replaced whole, never written through: a run may have planted a link or a
 * FIFO there. PATH NULL: on stdout (--json). */
static int write_result(const char *path, const struct sandbox_result *res, const struct policy *p)
{
    json_t *j = sandbox_result_to_json(res, p);
    _cleanup_free_ char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!text) {
        fprintf(stderr, "cordon: cannot write result: out of memory\n");
        return -1;
    }
    if (!path) {
        printf("%s\n", text);
        return fflush(stdout) == 0 ? 0 : -1;
    }
    struct cordon_err err = { 0 };
    if (hostpath_replace_file(path, text, strlen(text), &err) < 0) {
        fprintf(stderr, "cordon: cannot write result to '%s': %s\n", path, err.msg);
        return -1;
    }
    return 0;
}

/*
 * The policy of FILE (or the defaults) with the flags on top, checked,
 * finalised and, with --break-glass, relaxed as it allows: *PP, 0. On a
 * refusal -1 with ERR, and *PP what was built so far (or NULL), for the record.
 */
static int make_policy(const char *cmd, const char *file, const struct flag_value *flags,
                       size_t n_flags, const struct policy_break_glass_request *bg,
                       const char *expect_digest, struct policy **pp, struct cordon_err *err)
{
    struct policy *p = *pp = file ? policy_load(file, err) : policy_new(err);
    if (!p)
        return -1;
    /*
     * A break-glass run relaxes by --relax alone: its flags may only tighten, as a
     * signed policy's (and its record names what it relaxed, nothing else).
     */
    if (bg->reason)
        policy_narrow_only(p, POLICY_NARROW_BREAK_GLASS);
    for (size_t i = 0; i < n_flags; i++)
        TRY(apply_flag(p, &flags[i], err));
    if (policy_finalize(p, err) < 0 || policy_require_trusted(p, err) < 0)
        return -1;
    /* A layer kept for later needs someone to decide later: a daemon session. */
    if (p->workspace_mode == POLICY_WS_OVERLAY && p->workspace_commit == POLICY_WS_COMMIT_MANUAL)
        return err_set(err, CORDON_E_USAGE,
                       "%s: workspace.commit: manual needs a daemon session "
                       "(cordon serve: session.commit, session.discard); here use always or "
                       "on_success",
                       cmd);
    if (!bg->reason && (bg->until || bg->n_relax || bg->approval))
        return err_set(err, CORDON_E_USAGE,
                       "%s: --until, --relax and --approval need "
                       "--break-glass REASON",
                       cmd);
    if (bg->reason && policy_break_glass(p, bg, err) < 0)
        return -1;
    if (expect_digest) {
        char digest[65];
        policy_digest_hex(p, digest);
        if (strcmp(digest, expect_digest) != 0)
            return err_set(err, CORDON_E_POLICY,
                           "%s: refused: the effective policy's digest is "
                           "%s, not the expected %s",
                           cmd, digest, expect_digest);
    }
    return 0;
}

/*
 * A refused run leaves a run.refused event: in the log of P (as far as it
 * was built), or of the --audit flag, or else of the file read without its
 * signature (the record of a refused signature has to go somewhere: the log
 * the file names, with the file's digest; stderr says the same).
 */
static void record_refusal(const char *cmd, const struct policy *p, const char *file,
                           const char *audit, char **argv, const struct cordon_err *why)
{
    struct cordon_err ignored = { 0 };
    _cleanup_(policy_freep) struct policy *unverified =
        !p && file ? policy_load_unverified(file, &ignored) : NULL;
    run_record_refused(p ? p : unverified, false, audit, NULL, argv, cmd, why);
}

int cli_run_args(const char *cmd, const char *const cmd_usage[2], int argc, char **argv, bool mcp,
                 struct run_args *out)
{
    *out = (struct run_args){ 0 };
    const char *policy_file = NULL, *expect_digest = NULL;
    struct policy_break_glass_request bg = { 0 };
    _cleanup_free_ char **relax = calloc((size_t)argc + 1, sizeof *relax);
    if (!relax)
        return cli_usage_error("out of memory");
    _cleanup_free_ struct flag_value *flags = calloc((size_t)argc + 1, sizeof *flags);
    size_t n_flags = 0;
    if (!flags)
        return cli_usage_error("out of memory");

    opterr = 0;
    optind = 1;
    int opt;
    /* "+": options end at the command, whose own flags are not ours. */
    /* The options of a single run that a long-lived MCP front end has no use for. */
    bool run_only = !strcmp(cmd, "run");
    while ((opt = getopt_long(argc, argv, "+:p:l:w:e:t:m:qh", options, NULL)) != -1) {
        if (!run_only && (opt == 'q' || opt == OPT_JSON || opt == OPT_TTY))
            return cli_option_error(cmd, '?', argv);
        switch (opt) {
        case 'h':
            fputs(cmd_usage[0], stdout);
            fputs(cli_run_options_help, stdout);
            fputs(cmd_usage[1], stdout);
            return CLI_HELP_SHOWN;
        case 'p':
            policy_file = optarg;
            break;
        case OPT_RESULT:
            out->result_file = optarg;
            break;
        case OPT_EXPECT_DIGEST:
            expect_digest = optarg;
            break;
        case OPT_BREAK_GLASS:
            bg.reason = optarg;
            break;
        case OPT_UNTIL:
            bg.until = optarg;
            break;
        case OPT_APPROVAL:
            bg.approval = optarg;
            break;
        case OPT_RELAX:
            relax[bg.n_relax++] = optarg;
            break;
        case 'q':
            out->quiet = true;
            break;
        case OPT_JSON:
            out->json = true;
            break;
        case OPT_TTY:
            out->tty = true;
            break;
        case OPT_ALLOW_TOOL:
            if (!mcp)
                return cli_option_error(cmd, '?', argv);
            flags[n_flags++] = (struct flag_value){ opt, optarg };
            break;
        case ':':
        case '?':
            return cli_option_error(cmd, opt, argv);
        default:
            flags[n_flags++] = (struct flag_value){ opt, optarg };
        }
    }
    out->first = optind;
    bg.relax = relax;
    struct policy *p = NULL;
    char default_path[4096];
    const char *from;
    int found =
        policy_file ? 1 : cli_default_policy(default_path, sizeof default_path, &from, &out->error);
    if (found > 0 && !policy_file)
        policy_file = default_path;
    if (found < 0 ||
        make_policy(cmd, policy_file, flags, n_flags, &bg, expect_digest, &p, &out->error) < 0) {
        const char *audit = NULL;
        for (size_t i = 0; i < n_flags; i++)
            if (flags[i].opt == OPT_AUDIT)
                audit = flags[i].arg;
        record_refusal(cmd, p, policy_file, audit, optind < argc ? argv + optind : NULL,
                       &out->error);
        policy_free(p);
        return cli_fail(&out->error);
    }
    out->policy = p;
    return 0;
}

int cmd_run(int argc, char **argv)
{
    struct run_args a;
    int rc = cli_run_args("run", usage, argc, argv, false, &a);
    if (rc)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    _cleanup_(policy_freep) struct policy *p = a.policy;
    if (a.first >= argc)
        return cli_usage_error("run: missing command: cordon run [OPTIONS] -- COMMAND [ARG...]");

    if (a.tty && !isatty(STDIN_FILENO))
        return cli_usage_error("run: --tty needs a terminal on stdin");
    cli_scope_enter(p); /* a cgroup for an ordinary user, where systemd can delegate one */
    /* A vanished reader of our output must not kill the supervisor. */
    signal(SIGPIPE, SIG_IGN);
    struct sandbox_call call = {
        .argv = argv + a.first,
        .in_fd = isatty(STDIN_FILENO) && !a.tty ? -1 : STDIN_FILENO,
        .out_fd = STDOUT_FILENO,
        .err_fd = STDERR_FILENO,
        .sig_fd = signals_to_fd(), /* ^C and friends reach the command, not us */
        .tty = a.tty,
        .notice = a.quiet ? NULL
            : a.tty       ? print_notice_raw
                          : print_notice,
    };
    struct cordon_err err = { 0 };
    /* Refused before the run, not after it, when the result could not be written. */
    if (a.result_file && hostpath_check_dir_of(a.result_file, &err) < 0) {
        err_prefix(&err, "--result");
        return cli_fail(&err);
    }
    /* --tty: our terminal passes every byte (^C included) to the run's own,
     * whose line discipline gives it meaning there; restored afterwards. */
    struct termios saved;
    bool raw = a.tty && tcgetattr(STDIN_FILENO, &saved) == 0;
    if (raw) {
        struct termios t = saved;
        cfmakeraw(&t);
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &t);
    }
    struct sandbox_result res;
    rc = run_once(p, &call, &res, &err);
    if (raw)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
    if (a.result_file)
        write_result(a.result_file, &res, p);
    if (a.json)
        write_result(NULL, &res, p);
    if (rc < 0)
        return cli_fail(&err);

    if (res.reason == RUN_SETUP_ERROR)
        fprintf(stderr, "cordon: %s\n", res.error.msg);
    else if (res.reason != RUN_EXITED)
        fprintf(stderr, "cordon: run ended: %s\n", run_reason_name(res.reason));
    if (res.audit[0])
        fprintf(stderr, "cordon: audit: %s\n", res.audit);
    return res.status;
}
