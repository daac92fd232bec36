/*
 * policy/policy_keys.c: every key of the policy once (type, bounds,
 * default), the lookups the loader and the flags make in it, and the generic
 * setters of its scalar keys (numbers, booleans, levels, choices, texts,
 * host paths). Runs in the CLI or supervisor; touches the filesystem only to
 * check host paths.
 */
#include "policy/policy_int.h"

#include "common/text.h"
#include "common/units.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/*
 * The values of each enumerated key, in the order messages list them, each
 * with its rank: a signed policy may only move to a lower one (see
 * policy_narrow.c), so the rank column says which value is the tighter.
 */
static const struct policy_choice level_choices[] = {
    /* microvm < gvisor < namespace < process: a stronger boundary is the tighter */
    { "process", CORDON_LEVEL_PROCESS, 3 },
    { "namespace", CORDON_LEVEL_NAMESPACE, 2 },
    { "gvisor", CORDON_LEVEL_GVISOR, 1 },
    { "microvm", CORDON_LEVEL_MICROVM, 0 },
};
static const struct policy_choice accel_choices[] = {
    { "kvm", POLICY_ACCEL_KVM, 0 },
    /* QEMU's emulator, which is not a hypervisor boundary */
    { "tcg", POLICY_ACCEL_TCG, 1 },
};
static const struct policy_choice ws_mode_choices[] = {
    { "direct", POLICY_WS_DIRECT, 1 },
    /* keeps the run's writes off the host until its commit */
    { "overlay", POLICY_WS_OVERLAY, 0 },
};
static const struct policy_choice ws_commit_choices[] = {
    /* on_success < manual (the caller decides) < always */
    { "always", POLICY_WS_COMMIT_ALWAYS, 2 },
    { "on_success", POLICY_WS_COMMIT_ON_SUCCESS, 0 },
    { "manual", POLICY_WS_COMMIT_MANUAL, 1 },
};
static const struct policy_choice net_mode_choices[] = {
    { "none", POLICY_NET_NONE, 0 },
    { "gateway", POLICY_NET_GATEWAY, 1 },
};
static const struct policy_choice fsync_choices[] = {
    /* an fsync per event: a crash loses none of them */
    { "always", POLICY_AUDIT_FSYNC_ALWAYS, 0 },
    { "close", POLICY_AUDIT_FSYNC_CLOSE, 1 },
};
#define CHOICES(a)                \
    {                             \
        a, sizeof a / sizeof a[0] \
    }
const struct policy_enum policy_levels = CHOICES(level_choices);
const struct policy_enum policy_accels = CHOICES(accel_choices);
const struct policy_enum policy_ws_modes = CHOICES(ws_mode_choices);
const struct policy_enum policy_ws_commits = CHOICES(ws_commit_choices);
const struct policy_enum policy_net_modes = CHOICES(net_mode_choices);
const struct policy_enum policy_fsyncs = CHOICES(fsync_choices);

/* An enumerated key's field is read and written as an int. */
_Static_assert(sizeof(enum cordon_level) == sizeof(int) &&
                   sizeof(enum policy_accel) == sizeof(int) &&
                   sizeof(enum policy_ws_mode) == sizeof(int) &&
                   sizeof(enum policy_ws_commit) == sizeof(int) &&
                   sizeof(enum policy_net_mode) == sizeof(int) &&
                   sizeof(enum policy_audit_fsync) == sizeof(int),
               "an enumerated field is not int-sized");

#define KEY(path, type, field, min, def)                                        \
    {                                                                           \
        path, type, offsetof(struct policy, field), min, def, false, NULL, NULL \
    }
#define CHOICE(path, type, field, choices, def)                                   \
    {                                                                             \
        path, type, offsetof(struct policy, field), 0, def, false, NULL, &choices \
    }
#define ENUM(path, field, choices, def) CHOICE(path, KT_ENUM, field, choices, def)
#define LIST(path, type, flag)                \
    {                                         \
        path, type, 0, 0, 0, flag, NULL, NULL \
    }
#define SECTION(path)                                \
    {                                                \
        path, KT_SECTION, 0, 0, 0, false, NULL, NULL \
    }
#define RESERVED(path, note)                          \
    {                                                 \
        path, KT_RESERVED, 0, 0, 0, false, note, NULL \
    }

/*
 * Every key, once. A limit is lifted only by the word "unlimited" (stored
 * as 0); a written 0 is refused, being ambiguous; the tmpfs sizes take no
 * "unlimited", since a 0-byte /tmp is only a
 * confusing failure later. Network budgets are unlimited when absent but at
 * least 1 when given: a budget of 0 would read as "none allowed" to some and
 * "unlimited" to others.
 *
 * The limits default to what an agent's tool call may safely use: a run
 * given no limit at all still cannot fork-bomb, eat the host's memory, run
 * for hours, flood its caller, or leave a 4 TiB sparse file. A default that
 * this host cannot enforce exactly degrades (policy_limits.defaulted) rather
 * than refuse a run that asked for nothing.
 */
static const struct policy_key keys[] = {
    KEY("version", KT_VERSION, version, 1, 1),
    CHOICE("isolation", KT_LEVEL, level, policy_levels, CORDON_LEVEL_NAMESPACE),
    SECTION("filesystem"),
    KEY("filesystem.workspace", KT_DIR, workspace, 0, 0),
    KEY("filesystem.workspace_follow_symlinks", KT_BOOL, workspace_follow_symlinks, 0, false),
    KEY("filesystem.workspace_size", KT_SIZE, workspace_size, 1, 256ull << 20),
    KEY("filesystem.tmp_size", KT_SIZE, tmp_size, 1, 64ull << 20),
    KEY("filesystem.shm_size", KT_SIZE, shm_size, 1, 64ull << 20),
    KEY("filesystem.workspace_inodes", KT_COUNT, workspace_inodes, 0, 65536),
    KEY("filesystem.tmp_inodes", KT_COUNT, tmp_inodes, 0, 16384),
    KEY("filesystem.shm_inodes", KT_COUNT, shm_inodes, 0, 4096),
    LIST("filesystem.read_only", KT_BINDS, false),
    LIST("filesystem.read_write", KT_BINDS, true),
    LIST("filesystem.protected", KT_PROTECTED, true),
    LIST("filesystem.unsafe_unprotect", KT_PROTECTED, false),
    LIST("filesystem.unix_sockets", KT_UNIX_SOCKETS, false),
    SECTION("workspace"),
    ENUM("workspace.mode", workspace_mode, policy_ws_modes, POLICY_WS_DIRECT),
    ENUM("workspace.commit", workspace_commit, policy_ws_commits, POLICY_WS_COMMIT_ON_SUCCESS),
    SECTION("env"),
    LIST("env.pass", KT_NAMES, false),
    LIST("env.set", KT_ENV_MAP, false),
    SECTION("limits"),
    KEY("limits.wall", KT_DURATION, limits.wall_ms, 0, 10 * 60 * 1000),
    KEY("limits.cpu", KT_DURATION, limits.cpu_ms, 0, 10 * 60 * 1000),
    KEY("limits.memory", KT_SIZE, limits.memory, 0, 1ull << 30),
    KEY("limits.output", KT_SIZE, limits.output, 0, 16ull << 20),
    KEY("limits.file_size", KT_SIZE, limits.file_size, 0, 1ull << 30),
    KEY("limits.pids", KT_COUNT, limits.pids, 0, 256),
    KEY("limits.open_files", KT_COUNT, limits.open_files, 0, 1024),
    LIST("limits.best_effort", KT_BEST_EFFORT, false),
    SECTION("syscalls"),
    LIST("syscalls.allow", KT_SYSCALLS, true),
    LIST("syscalls.deny", KT_SYSCALLS, false),
    SECTION("microvm"),
    ENUM("microvm.accel", microvm_accel, policy_accels, POLICY_ACCEL_KVM),
    SECTION("network"),
    ENUM("network.mode", network.mode, policy_net_modes, POLICY_NET_NONE),
    LIST("network.allow", KT_RULES, true),
    LIST("network.deny", KT_RULES, false),
    LIST("network.ask", KT_RULES, false),
    LIST("network.allow_private", KT_CIDRS, false),
    LIST("network.resolve", KT_PINS, false),
    LIST("network.dns", KT_NAMESERVERS, false),
    LIST("network.expose", KT_PORTS, false),
    KEY("network.upstream_ca", KT_KEY_FILE, network.upstream_ca, 0, 0),
    SECTION("network.budgets"),
    KEY("network.budgets.requests", KT_COUNT, network.requests, 1, 0),
    KEY("network.budgets.bytes", KT_SIZE, network.bytes, 1, 0),
    KEY("network.budgets.connections", KT_COUNT, network.connections, 1, 0),
    KEY("network.budgets.request_rate", KT_COUNT, network.request_rate, 1, 0),
    LIST("secrets", KT_SECRETS, false),
    SECTION("tools"),
    LIST("tools.allow", KT_TOOL_NAMES, false),
    LIST("tools.rules", KT_TOOL_RULES, false),
    KEY("tools.max_calls", KT_COUNT, tools.max_calls, 0, 0),
    KEY("tools.max_result_bytes", KT_SIZE, tools.max_result_bytes, 1, 4ull << 20),
    KEY("tools.max_message_bytes", KT_SIZE, tools.max_message_bytes, 4096, 8ull << 20),
    KEY("tools.call_timeout", KT_DURATION, tools.call_timeout_ms, 0, 300000),
    KEY("tools.record_arguments", KT_BOOL, tools.record_arguments, 0, false),
    KEY("tools.resources", KT_BOOL, tools.resources, 0, false),
    KEY("tools.prompts", KT_BOOL, tools.prompts, 0, false),
    KEY("tools.logging", KT_BOOL, tools.logging, 0, true),
    KEY("tools.sampling", KT_BOOL, tools.sampling, 0, false),
    KEY("tools.elicitation", KT_BOOL, tools.elicitation, 0, false),
    KEY("tools.roots", KT_BOOL, tools.roots, 0, false),
    LIST("tools.ask", KT_TOOL_NAMES, true),
    KEY("tools.pins", KT_LOG_FILE, tools.pins, 0, 0),
    LIST("tools.pinned", KT_TOOL_PINS, false),
    SECTION("audit"),
    KEY("audit.file", KT_LOG_FILE, audit.file, 0, 0),
    KEY("audit.sign_key", KT_KEY_FILE, audit.sign_key, 0, 0),
    KEY("audit.witness", KT_LOG_FILE, audit.witness, 0, 0),
    KEY("audit.checkpoint_every", KT_UINT, audit.checkpoint_every, 0, 0),
    RESERVED("audit.record_arguments", "moved to tools.record_arguments"),
    ENUM("audit.fsync", audit.fsync, policy_fsyncs, POLICY_AUDIT_FSYNC_CLOSE),
    KEY("audit.export", KT_TEXT, gov.export, 0, 0),
    KEY("audit.export_endpoint", KT_TEXT, gov.export_endpoint, 0, 0),
    KEY("require_signature", KT_KEY_FILE, gov.require_signature, 0, 0),
    SECTION("decider"),
    KEY("decider.socket", KT_LOG_FILE, gov.decider, 0, 0),
    KEY("decider.command", KT_TEXT, gov.decider_command, 0, 0),
    KEY("decider.elicit", KT_BOOL, gov.decider_elicit, 0, false),
    KEY("decider.timeout", KT_DURATION, gov.decider_timeout_ms, 1, 5000),
    SECTION("break_glass"),
    LIST("break_glass.may_relax", KT_KEY_PATHS, false),
    KEY("break_glass.max_duration", KT_DURATION, gov.break_glass_max_ms, 0, 0),
    KEY("break_glass.approval_key", KT_KEY_FILE, gov.approval_key, 0, 0),
};
#define N_KEYS (sizeof keys / sizeof keys[0])

static const struct policy_choice *choice_of(const struct policy_enum *e, int value)
{
    for (size_t i = 0; i < e->n; i++)
        if (e->choices[i].value == value)
            return &e->choices[i];
    return NULL;
}

/* The choice named by the N bytes at S, or NULL. */
static const struct policy_choice *choice_named(const struct policy_enum *e, const char *s,
                                                size_t n)
{
    for (size_t i = 0; i < e->n; i++)
        if (strlen(e->choices[i].name) == n && strncmp(s, e->choices[i].name, n) == 0)
            return &e->choices[i];
    return NULL;
}

/* "kvm, tcg": E's names as messages list them, in BUF. */
static const char *choice_names(const struct policy_enum *e, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < e->n; i++) {
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", e->choices[i].name);
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
    }
    return buf;
}

const char *policy_choice_name(const struct policy_enum *e, int value)
{
    const struct policy_choice *c = choice_of(e, value);
    return c ? c->name : NULL;
}

int policy_choice_rank(const struct policy_enum *e, int value)
{
    const struct policy_choice *c = choice_of(e, value);
    return c ? c->rank : INT_MAX;
}

const char *cordon_level_name(enum cordon_level level)
{
    return policy_choice_name(&policy_levels, (int)level);
}

const struct policy_key *policy_key_at(size_t i)
{
    return i < N_KEYS ? &keys[i] : NULL;
}

const struct policy_key *policy_key_find(const char *path)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].path, path) == 0)
            return &keys[i];
    return NULL;
}

void policy_key_children(const char *section, char *buf, size_t len)
{
    size_t slen = strlen(section), used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_KEYS; i++) {
        const char *name = keys[i].path;
        if (slen) {
            if (strncmp(name, section, slen) != 0 || name[slen] != '.')
                continue;
            name += slen + 1;
        }
        /* Only direct children: "network.budgets.bytes" is not one of network's. */
        if (strchr(name, '.') || keys[i].type == KT_RESERVED)
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", name);
        if (n < 0 || (size_t)n >= len - used)
            return;
        used += (size_t)n;
    }
}

const char *policy_key_expect(const struct policy_key *k, char *buf, size_t len)
{
    char names[128];
    switch (k->type) {
    case KT_SECTION:
        return "a mapping";
    case KT_VERSION:
        return "1";
    case KT_LEVEL:
        snprintf(buf, len, "one of %s, or a list of them",
                 choice_names(k->choices, names, sizeof names));
        return buf;
    case KT_ENUM:
        snprintf(buf, len, "one of %s", choice_names(k->choices, names, sizeof names));
        return buf;
    case KT_SIZE:
        return "a size like 256M";
    case KT_DURATION:
        return "a duration like 30s, 2m or 500ms";
    case KT_COUNT:
        return "a whole number";
    case KT_DIR:
        return "a directory path";
    case KT_BINDS:
        return "a list of paths";
    case KT_NAMES:
        return "a list of variable names";
    case KT_ENV_MAP:
        return "a mapping of NAME: value";
    case KT_SYSCALLS:
        return "a list of syscall names";
    case KT_BEST_EFFORT:
        return "a list of limit names, or true";
    case KT_LOG_FILE:
        return "a file path";
    case KT_KEY_FILE:
        return "a key file path";
    case KT_UINT:
        return "a whole number";
    case KT_BOOL:
        return "true or false";
    case KT_RULES:
        return "a list of HOST[:PORT] rules";
    case KT_CIDRS:
        return "a list of CIDRs";
    case KT_NAMESERVERS:
        return "a list of IP[:PORT] nameservers";
    case KT_PINS:
        return "a list of HOST=IP pins";
    case KT_SECRETS:
        return "a list of secrets";
    case KT_TOOL_NAMES:
        return "a list of tool names";
    case KT_PROTECTED:
        return "a list of file names";
    case KT_TOOL_RULES:
        return "a mapping of TOOL: {ARGUMENT: rule}";
    case KT_RESERVED:
        return "nothing";
    case KT_TEXT:
        return "a text";
    case KT_KEY_PATHS:
        return "a list of policy keys";
    case KT_TOOL_PINS:
        return "a list of TOOL=SHA256 pins";
    case KT_UNIX_SOCKETS:
        return "a list of socket paths";
    case KT_PORTS:
        return "a list of ports";
    }
    return "a value";
}

const char *policy_key_item_expect(const struct policy_key *k)
{
    switch (k->type) {
    case KT_BINDS:
        return "a path";
    case KT_RULES:
        return "HOST[:PORT]";
    case KT_CIDRS:
        return "a CIDR";
    case KT_NAMESERVERS:
        return "an IP[:PORT] nameserver";
    case KT_PINS:
        return "HOST=IP";
    case KT_PROTECTED:
        return "a file name";
    case KT_UNIX_SOCKETS:
        return "an absolute socket path";
    case KT_PORTS:
        return "a port from 1 to 65535";
    default:
        return "a name";
    }
}

static uint64_t *u64_field(struct policy *p, const struct policy_key *k)
{
    return (uint64_t *)((char *)p + k->offset);
}

/*
 * One level, or several separated by commas (a YAML list arrives so): the
 * first is the level, the rest explicit fallbacks, each named once.
 */
static int apply_level(struct policy *p, const struct policy_key *k, const char *text, char *why,
                       size_t len)
{
    enum cordon_level got[4];
    size_t n = 0;
    for (const char *s = text;; s++) {
        const char *end = strchr(s, ',');
        size_t l = end ? (size_t)(end - s) : strlen(s);
        const struct policy_choice *c = choice_named(k->choices, s, l);
        char names[128];
        if (!c)
            return why_printf(why, len, "expected one of %s, got \"%.*s\"",
                              choice_names(k->choices, names, sizeof names), (int)l, s);
        for (size_t j = 0; j < n; j++)
            if (got[j] == (enum cordon_level)c->value)
                return why_printf(why, len, "\"%s\" is listed twice", c->name);
        got[n++] = (enum cordon_level)c->value;
        if (!end)
            break;
        s = end;
    }
    p->level = got[0];
    p->n_level_fallbacks = n - 1;
    for (size_t j = 1; j < n; j++)
        p->level_fallbacks[j - 1] = got[j];
    return 0;
}

static int *enum_field(struct policy *p, const struct policy_key *k)
{
    return (int *)((char *)p + k->offset);
}

/* One of K's choices, by its name. */
static int apply_enum(struct policy *p, const struct policy_key *k, const char *text, char *why,
                      size_t len)
{
    const struct policy_choice *c = choice_named(k->choices, text, strlen(text));
    char names[128];
    if (!c)
        return why_printf(why, len, "expected one of %s, got \"%s\"",
                          choice_names(k->choices, names, sizeof names), text);
    *enum_field(p, k) = c->value;
    /* Written, not implied by an allow rule: finalize refuses such rules under it. */
    if (k->offset == offsetof(struct policy, network.mode))
        p->network.mode_explicit = true;
    return 0;
}

static char **str_field(struct policy *p, const struct policy_key *k)
{
    return (char **)((char *)p + k->offset);
}

/*
 * audit.file: the log may not exist yet, but its directory must, so a typo
 * fails here and not after the run. The path is kept as written (made
 * absolute): the log is opened without following links, so the path
 * recorded is where the log lands.
 */
static int apply_log_file(struct policy *p, const struct policy_key *k, const char *text,
                          enum value_origin from, char *why, size_t len)
{
    _cleanup_free_ char *abs = NULL;
    int rc = policy_host_path_text(text, from, &abs, why, len);
    if (rc < 0)
        return rc;
    size_t n = strlen(text);
    if (text[n - 1] == '/')
        return why_printf(why, len, "\"%s\" names a directory, not a file", text);
    const char *slash = strrchr(text, '/');
    const char *base = slash ? slash + 1 : text;
    if (!strcmp(base, ".") || !strcmp(base, ".."))
        return why_printf(why, len, "\"%s\" is a directory", text);
    struct stat st;
    if (stat(abs, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return why_printf(why, len, "\"%s\" is a directory", text);
    } else {
        if (errno != ENOENT && errno != ENOTDIR)
            return why_printf(why, len, "cannot resolve \"%s\": %s", text, strerror(errno));
        char *dir = strrchr(abs, '/');
        *dir = '\0';
        int r = stat(abs[0] ? abs : "/", &st);
        *dir = '/';
        int dir_len = slash ? (int)(slash - text) : 1;
        const char *shown = slash ? text : ".";
        if (r < 0 && (errno == ENOENT || errno == ENOTDIR))
            return why_printf(why, len, "the directory of \"%s\" does not exist", text);
        if (r < 0)
            return why_printf(why, len, "cannot resolve \"%.*s\": %s", dir_len, shown,
                              strerror(errno));
        if (!S_ISDIR(st.st_mode))
            return why_printf(why, len, "\"%.*s\" is not a directory", dir_len, shown);
    }
    char **field = str_field(p, k);
    free(*field);
    *field = TAKE_PTR(abs);
    return 0;
}

/* audit.sign_key: checked now so a run never starts only to fail at its first event. */
static int apply_key_file(struct policy *p, const struct policy_key *k, const char *text,
                          enum value_origin from, char *why, size_t len)
{
    return policy_resolve_existing(text, from, S_IFREG, str_field(p, k), why, len);
}

static int apply_dir(struct policy *p, const char *text, enum value_origin from, char *why,
                     size_t len)
{
    return policy_resolve_existing(text, from, S_IFDIR, &p->workspace, why, len);
}

/* KT_TEXT: one line (decider.command, audit.export...), checked where it is used. */
static int set_text(char **field, const char *text, char *why, size_t len)
{
    if (!*text || strlen(text) > 1024 || strpbrk(text, "\r\n"))
        return why_printf(why, len, "expected one line of text (1 to 1024 bytes)");
    char *v = strdup(text);
    if (!v)
        return POLICY_ENOMEM;
    free(*field);
    *field = v;
    return 0;
}

/* A size, a duration or a count, within K's bounds. */
/*
 * Limits the kernel holds only up to a ceiling of its own: refused when
 * read, not as a setup error at the run.
 */
static uint64_t limit_ceiling(enum policy_limit l)
{
    if (l == POLICY_LIMIT_PIDS)
        return 4194304; /* PID_MAX_LIMIT: pids.max and RLIMIT_NPROC count no further */
    if (l == POLICY_LIMIT_OPEN_FILES)
        return 1073741816; /* the most fs.nr_open, RLIMIT_NOFILE's ceiling, takes */
    return INT64_MAX;
}

static int apply_number(struct policy *p, const struct policy_key *k, const char *text, char *why,
                        size_t len)
{
    uint64_t v = 0;
    int r = 0;
    /* Wherever 0 means "no limit", the word says so too: --memory unlimited. */
    if (k->min == 0 && !strcmp(text, "unlimited")) {
        *u64_field(p, k) = 0;
        policy_limit_given(p, k);
        return 0;
    }
    if (k->type == KT_SIZE)
        r = parse_size(text, &v, why, len);
    else if (k->type == KT_DURATION)
        r = parse_duration_ms(text, &v, why, len);
    else
        r = parse_count(text, &v, why, len);
    if (r < 0)
        return -1;
    /* A 0 reads as "none allowed" to some and "no limit" to others: say which. */
    if (v == 0 && policy_key_limit(k) < POLICY_LIMIT_COUNT)
        return why_printf(why, len, "0 is not a limit; write unlimited for none");
    if (v < k->min && k->min == 1)
        return why_printf(why, len, "must be greater than 0, got \"%s\"", text);
    if (v < k->min)
        return why_printf(why, len, "must be at least %llu, got \"%s\"", (unsigned long long)k->min,
                          text);
    /* JSON integers are signed 64-bit; nothing sane is that large anyway. */
    if (v > (uint64_t)INT64_MAX)
        return why_printf(why, len, "\"%s\" is too large", text);
    uint64_t most = limit_ceiling(policy_key_limit(k));
    if (v > most)
        return why_printf(why, len, "\"%s\" is more than the kernel can hold (at most %llu)", text,
                          (unsigned long long)most);
    *u64_field(p, k) = v;
    policy_limit_given(p, k);
    return 0;
}

static int apply_version(struct policy *p, const char *text, char *why, size_t len)
{
    uint64_t v = 0;
    if (parse_count(text, &v, why, len) < 0)
        return -1;
    if (v != 1)
        return why_printf(why, len, "unsupported version %s (this cordon reads version 1)", text);
    p->version = 1;
    return 0;
}

static int apply_uint(struct policy *p, const struct policy_key *k, const char *text, char *why,
                      size_t len)
{
    uint64_t v = 0;
    if (parse_count(text, &v, why, len) < 0)
        return -1;
    if (v > UINT_MAX)
        return why_printf(why, len, "\"%s\" is too large", text);
    *(unsigned *)((char *)p + k->offset) = (unsigned)v;
    return 0;
}

static int apply_bool(struct policy *p, const struct policy_key *k, const char *text, char *why,
                      size_t len)
{
    int b = policy_parse_bool(text);
    if (b < 0)
        return why_printf(why, len, "expected true or false, got \"%s\"", text);
    *(bool *)((char *)p + k->offset) = b;
    return 0;
}

int policy_apply_scalar(struct policy *p, const struct policy_key *k, const char *text,
                        enum value_origin from, char *why, size_t len)
{
    char expect[160];
    switch (k->type) {
    case KT_VERSION:
        return apply_version(p, text, why, len);
    case KT_LEVEL:
        return apply_level(p, k, text, why, len);
    case KT_ENUM:
        if (apply_enum(p, k, text, why, len) < 0)
            return -1;
        if (k->offset == offsetof(struct policy, network.mode) && from == FROM_FLAG)
            p->network.none_by_caller = p->network.mode == POLICY_NET_NONE;
        return 0;
    case KT_SIZE:
    case KT_DURATION:
    case KT_COUNT:
        return apply_number(p, k, text, why, len);
    case KT_UINT:
        return apply_uint(p, k, text, why, len);
    case KT_BOOL:
        return apply_bool(p, k, text, why, len);
    case KT_TEXT:
        return set_text(str_field(p, k), text, why, len);
    case KT_DIR:
        return apply_dir(p, text, from, why, len);
    case KT_LOG_FILE:
        return apply_log_file(p, k, text, from, why, len);
    case KT_KEY_FILE:
        return apply_key_file(p, k, text, from, why, len);
    case KT_BEST_EFFORT: {
        int b = policy_parse_bool(text);
        if (b < 0)
            return policy_best_effort_add(p, text, why, len);
        policy_set_best_effort_all(p, b);
        return 0;
    }
    default:
        return why_printf(why, len, "expected %s, got \"%s\"",
                          policy_key_expect(k, expect, sizeof expect), text);
    }
}

/* Every scalar key at its default (policy_new()). */
void policy_keys_defaults(struct policy *p)
{
    for (size_t i = 0; i < N_KEYS; i++) {
        const struct policy_key *k = &keys[i];
        switch (k->type) {
        case KT_VERSION:
            p->version = (int)k->def;
            break;
        case KT_LEVEL:
            p->level = (enum cordon_level)k->def;
            break;
        case KT_SIZE:
        case KT_DURATION:
        case KT_COUNT:
            *u64_field(p, k) = k->def;
            break;
        case KT_UINT:
            *(unsigned *)((char *)p + k->offset) = (unsigned)k->def;
            break;
        case KT_BOOL:
            *(bool *)((char *)p + k->offset) = k->def != 0;
            break;
        case KT_ENUM:
            *enum_field(p, k) = (int)k->def;
            break;
        default:
            break;
        }
    }
}
