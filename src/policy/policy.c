/*
 * policy/policy.c: the key table, defaults and the setters that every source
 * of policy (file or flag) goes through, plus the cross-field checks. Runs in
 * the supervisor (or the CLI) before anything is built; touches the
 * filesystem only to resolve host paths.
 */
#include "policy/policy_int.h"
#include "common/digest.h"
#include "common/hostpath.h"
#include "common/strv.h"
#include "common/text.h"

#include "common/units.h"
#include "policy/syscall_table.h"

#include <ctype.h>
#include <pthread.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define KEY(path, type, field, min, def) \
    { path, type, offsetof(struct policy, field), min, def, false, NULL }
#define LIST(path, type, flag) { path, type, 0, 0, 0, flag, NULL }
#define SECTION(path) { path, KT_SECTION, 0, 0, 0, false, NULL }
#define RESERVED(path, note) { path, KT_RESERVED, 0, 0, 0, false, note }

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
    KEY("isolation", KT_LEVEL, level, 0, CORDON_LEVEL_NAMESPACE),
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
    KEY("workspace.mode", KT_WS_MODE, workspace_mode, 0, POLICY_WS_DIRECT),
    KEY("workspace.commit", KT_WS_COMMIT, workspace_commit, 0, POLICY_WS_COMMIT_ON_SUCCESS),
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
    KEY("microvm.accel", KT_ACCEL, microvm_accel, 0, POLICY_ACCEL_KVM),
    SECTION("network"),
    KEY("network.mode", KT_NET_MODE, network.mode, 0, POLICY_NET_NONE),
    LIST("network.allow", KT_RULES, true),
    LIST("network.deny", KT_RULES, false),
    LIST("network.ask", KT_RULES, false),
    LIST("network.allow_private", KT_CIDRS, false),
    LIST("network.resolve", KT_PINS, false),
    LIST("network.dns", KT_NAMESERVERS, false),
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
    KEY("audit.fsync", KT_FSYNC, audit.fsync, 0, POLICY_AUDIT_FSYNC_CLOSE),
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


static const char *const level_names[] = {
    [CORDON_LEVEL_PROCESS] = "process",
    [CORDON_LEVEL_NAMESPACE] = "namespace",
    [CORDON_LEVEL_GVISOR] = "gvisor",
    [CORDON_LEVEL_MICROVM] = "microvm",
};

static const char *const limit_names[POLICY_LIMIT_COUNT] = {
    [POLICY_LIMIT_WALL] = "wall",
    [POLICY_LIMIT_CPU] = "cpu",
    [POLICY_LIMIT_MEMORY] = "memory",
    [POLICY_LIMIT_PIDS] = "pids",
    [POLICY_LIMIT_OUTPUT] = "output",
    [POLICY_LIMIT_FILE_SIZE] = "file_size",
    [POLICY_LIMIT_OPEN_FILES] = "open_files",
};

const char *cordon_level_name(enum cordon_level level)
{
    if ((unsigned)level >= sizeof level_names / sizeof level_names[0])
        return NULL;
    return level_names[level];
}

const char *policy_limit_name(enum policy_limit l)
{
    if ((unsigned)l >= POLICY_LIMIT_COUNT)
        return NULL;
    return limit_names[l];
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

const char *policy_key_expect(const struct policy_key *k)
{
    switch (k->type) {
    case KT_SECTION: return "a mapping";
    case KT_VERSION: return "1";
    case KT_LEVEL: return "one of process, namespace, gvisor, microvm, or a list of them";
    case KT_SIZE: return "a size like 256M";
    case KT_DURATION: return "a duration like 30s, 2m or 500ms";
    case KT_COUNT: return "a whole number";
    case KT_DIR: return "a directory path";
    case KT_BINDS: return "a list of paths";
    case KT_NAMES: return "a list of variable names";
    case KT_ENV_MAP: return "a mapping of NAME: value";
    case KT_SYSCALLS: return "a list of syscall names";
    case KT_BEST_EFFORT: return "a list of limit names, or true";
    case KT_LOG_FILE: return "a file path";
    case KT_KEY_FILE: return "a key file path";
    case KT_UINT: return "a whole number";
    case KT_BOOL: return "true or false";
    case KT_FSYNC: return "one of always, close";
    case KT_NET_MODE: return "one of none, gateway";
    case KT_ACCEL: return "one of kvm, tcg";
    case KT_WS_MODE: return "one of direct, overlay";
    case KT_WS_COMMIT: return "one of always, on_success, manual";
    case KT_RULES: return "a list of HOST[:PORT] rules";
    case KT_CIDRS: return "a list of CIDRs";
    case KT_NAMESERVERS: return "a list of IP[:PORT] nameservers";
    case KT_PINS: return "a list of HOST=IP pins";
    case KT_SECRETS: return "a list of secrets";
    case KT_TOOL_NAMES: return "a list of tool names";
    case KT_PROTECTED: return "a list of file names";
    case KT_TOOL_RULES: return "a mapping of TOOL: {ARGUMENT: rule}";
    case KT_RESERVED: return "nothing";
    case KT_TEXT: return "a text";
    case KT_KEY_PATHS: return "a list of policy keys";
    case KT_TOOL_PINS: return "a list of TOOL=SHA256 pins";
    case KT_UNIX_SOCKETS: return "a list of socket paths";
    }
    return "a value";
}

const char *policy_key_item_expect(const struct policy_key *k)
{
    switch (k->type) {
    case KT_BINDS: return "a path";
    case KT_RULES: return "HOST[:PORT]";
    case KT_CIDRS: return "a CIDR";
    case KT_NAMESERVERS: return "an IP[:PORT] nameserver";
    case KT_PINS: return "HOST=IP";
    case KT_PROTECTED: return "a file name";
    case KT_UNIX_SOCKETS: return "an absolute socket path";
    default: return "a name";
    }
}

int policy_parse_bool(const char *s)
{
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
        return 1;
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
        return 0;
    return -1;
}

/* ---- paths ---- */

/*
 * Lexical normalisation of an absolute path: collapse "//" and "/./", drop a
 * trailing "/". Returns a new string, and *DOTDOT tells whether a ".."
 * component was seen (kept as is: callers refuse it rather than guess).
 */
char *policy_normalize_path(const char *in, bool *dotdot)
{
    return hostpath_normalize(in, false, dotdot);
}

/*
 * The sandbox builds /, /proc and /dev itself and mounts the workspace at
 * /workspace; a bind there would hide or be hidden by those mounts. A bind
 * beneath /workspace would have to create its mountpoint inside the host's
 * workspace directory, a trace on the host, so that is refused too.
 */
static int check_dest(const char *dest, char *why, size_t len)
{
    static const char *const reserved[] = { "/proc", "/dev" };
    if (strcmp(dest, "/") == 0)
        return why_printf(why, len, "dest \"/\" is the sandbox root, which cordon builds");
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (hostpath_within(dest, reserved[i]))
            return why_printf(why, len, "dest \"%s\" is inside %s, which the sandbox builds itself",
                           dest, reserved[i]);
    if (strcmp(dest, "/workspace") == 0)
        return why_printf(why, len,
                       "dest \"/workspace\" is the workspace; use filesystem.workspace");
    if (hostpath_within(dest, "/workspace"))
        return why_printf(why, len, "dest \"%s\" is inside /workspace; bind it elsewhere", dest);
    return 0;
}

/* TEXT as a host path: not empty, absolute when a file gave it, made absolute into *ABS. */
static int host_path_text(const char *text, enum value_origin from, char **abs, char *why,
                          size_t len)
{
    if (text[0] == '\0')
        return why_printf(why, len, "expected a path, got \"\"");
    if (text[0] != '/' && from == FROM_FILE)
        return why_printf(why, len, "host path \"%s\" is not absolute", text);
    *abs = hostpath_absolute(text);
    if (!*abs)
        return errno == ENOMEM ? POLICY_ENOMEM
                               : why_printf(why, len, "cannot resolve \"%s\": %s", text,
                                            strerror(errno));
    return 0;
}

/*
 * An existing host path, made absolute and normalised but not resolved:
 * policy_finalize() decides whether it may pass through links. Relative
 * only when a flag gave it.
 */
static int resolve_host(const char *path, enum value_origin from, char **out, char *why,
                        size_t len)
{
    _cleanup_free_ char *abs = NULL;
    int r = host_path_text(path, from, &abs, why, len);
    if (r < 0)
        return r;
    struct stat st;
    if (stat(abs, &st) < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return why_printf(why, len, "\"%s\" does not exist", path);
        return why_printf(why, len, "cannot resolve \"%s\": %s", path, strerror(errno));
    }
    *out = TAKE_PTR(abs);
    return 0;
}

/* ---- sorted string sets (env.pass, syscalls.*) ---- */

/* Insert S in sorted position, ignoring a duplicate: order never matters. */
int policy_strv_add(char ***v, size_t *n, const char *s)
{
    size_t at = 0;
    while (at < *n && strcmp((*v)[at], s) < 0)
        at++;
    if (at < *n && strcmp((*v)[at], s) == 0)
        return 0;
    char **nv = realloc(*v, (*n + 1) * sizeof **v);
    if (!nv)
        return POLICY_ENOMEM;
    *v = nv;
    char *copy = strdup(s);
    if (!copy)
        return POLICY_ENOMEM;
    memmove(nv + at + 1, nv + at, (*n - at) * sizeof *nv);
    nv[at] = copy;
    (*n)++;
    return 0;
}

void policy_strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* ---- setters ---- */

static uint64_t *u64_field(struct policy *p, const struct policy_key *k)
{
    return (uint64_t *)((char *)p + k->offset);
}

/*
 * One level, or several separated by commas (a YAML list arrives so): the
 * first is the level, the rest explicit fallbacks, each named once.
 */
static int apply_level(struct policy *p, const char *text, char *why, size_t len)
{
    enum cordon_level got[4];
    size_t n = 0;
    for (const char *s = text;; s++) {
        const char *end = strchr(s, ',');
        size_t l = end ? (size_t)(end - s) : strlen(s);
        size_t i = 0;
        while (i < sizeof level_names / sizeof level_names[0] &&
               (strlen(level_names[i]) != l || strncmp(s, level_names[i], l) != 0))
            i++;
        if (i == sizeof level_names / sizeof level_names[0])
            return why_printf(why, len,
                              "expected one of process, namespace, gvisor, microvm, got \"%.*s\"",
                              (int)l, s);
        for (size_t j = 0; j < n; j++)
            if (got[j] == (enum cordon_level)i)
                return why_printf(why, len, "\"%s\" is listed twice", level_names[i]);
        got[n++] = (enum cordon_level)i;
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
    int rc = host_path_text(text, from, &abs, why, len);
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

/* An existing host path of type TYPE (S_IFREG or S_IFDIR), resolved into *OUT. */
static int resolve_existing(const char *text, enum value_origin from, mode_t type, char **out,
                            char *why, size_t len)
{
    _cleanup_free_ char *real = NULL;
    int r = resolve_host(text, from, &real, why, len);
    if (r < 0)
        return r;
    struct stat st;
    if (stat(real, &st) < 0)
        return why_printf(why, len, "cannot stat \"%s\": %s", text, strerror(errno));
    if ((st.st_mode & S_IFMT) != type)
        return why_printf(why, len, "\"%s\" is not a %s", text,
                       type == S_IFDIR ? "directory" : "regular file");
    if (type == S_IFREG && access(real, R_OK) < 0)
        return why_printf(why, len, "\"%s\" is not readable: %s", text, strerror(errno));
    free(*out);
    *out = TAKE_PTR(real);
    return 0;
}

/* audit.sign_key: checked now so a run never starts only to fail at its first event. */
static int apply_key_file(struct policy *p, const struct policy_key *k, const char *text,
                          enum value_origin from, char *why, size_t len)
{
    return resolve_existing(text, from, S_IFREG, str_field(p, k), why, len);
}

static int apply_dir(struct policy *p, const char *text, enum value_origin from, char *why,
                     size_t len)
{
    return resolve_existing(text, from, S_IFDIR, &p->workspace, why, len);
}

/* The limit K sets, or POLICY_LIMIT_COUNT when K is not one. */
static enum policy_limit key_limit(const struct policy_key *k)
{
    if (strncmp(k->path, "limits.", 7) != 0)
        return POLICY_LIMIT_COUNT;
    for (int l = 0; l < POLICY_LIMIT_COUNT; l++)
        if (strcmp(k->path + 7, limit_names[l]) == 0)
            return (enum policy_limit)l;
    return POLICY_LIMIT_COUNT;
}

/* A file or a flag wrote limit K: it is no longer a default that may degrade. */
static void limit_given(struct policy *p, const struct policy_key *k)
{
    enum policy_limit l = key_limit(k);
    if (l < POLICY_LIMIT_COUNT)
        p->limits.defaulted &= ~(1u << l);
}

int policy_apply_scalar(struct policy *p, const struct policy_key *k, const char *text,
                        enum value_origin from, char *why, size_t len)
{
    uint64_t v = 0;
    int r = 0;
    /* Wherever 0 means "no limit", the word says so too: --memory unlimited. */
    if (k->min == 0 && !strcmp(text, "unlimited") &&
        (k->type == KT_SIZE || k->type == KT_DURATION || k->type == KT_COUNT)) {
        *u64_field(p, k) = 0;
        limit_given(p, k);
        return 0;
    }
    switch (k->type) {
    case KT_VERSION:
        if (parse_count(text, &v, why, len) < 0)
            return -1;
        if (v != 1)
            return why_printf(why, len, "unsupported version %s (this cordon reads version 1)",
                           text);
        p->version = 1;
        return 0;
    case KT_LEVEL:
        return apply_level(p, text, why, len);
    case KT_DIR:
        return apply_dir(p, text, from, why, len);
    case KT_LOG_FILE:
        return apply_log_file(p, k, text, from, why, len);
    case KT_KEY_FILE:
        return apply_key_file(p, k, text, from, why, len);
    case KT_TEXT:
        return policy_gov_set_text(str_field(p, k), text, why, len);
    case KT_UINT:
        if (parse_count(text, &v, why, len) < 0)
            return -1;
        if (v > UINT_MAX)
            return why_printf(why, len, "\"%s\" is too large", text);
        *(unsigned *)((char *)p + k->offset) = (unsigned)v;
        return 0;
    case KT_BOOL: {
        int b = policy_parse_bool(text);
        if (b < 0)
            return why_printf(why, len, "expected true or false, got \"%s\"", text);
        *(bool *)((char *)p + k->offset) = b;
        return 0;
    }
    case KT_ACCEL:
        if (!strcmp(text, "kvm"))
            p->microvm_accel = POLICY_ACCEL_KVM;
        else if (!strcmp(text, "tcg"))
            p->microvm_accel = POLICY_ACCEL_TCG;
        else
            return why_printf(why, len, "expected one of kvm, tcg, got \"%s\"", text);
        return 0;
    case KT_WS_MODE:
        if (!strcmp(text, "direct"))
            p->workspace_mode = POLICY_WS_DIRECT;
        else if (!strcmp(text, "overlay"))
            p->workspace_mode = POLICY_WS_OVERLAY;
        else
            return why_printf(why, len, "expected one of direct, overlay, got \"%s\"", text);
        return 0;
    case KT_WS_COMMIT:
        if (!strcmp(text, "always"))
            p->workspace_commit = POLICY_WS_COMMIT_ALWAYS;
        else if (!strcmp(text, "on_success"))
            p->workspace_commit = POLICY_WS_COMMIT_ON_SUCCESS;
        else if (!strcmp(text, "manual"))
            p->workspace_commit = POLICY_WS_COMMIT_MANUAL;
        else
            return why_printf(why, len, "expected one of always, on_success, manual, got \"%s\"",
                              text);
        return 0;
    case KT_NET_MODE:
        if (!strcmp(text, "none"))
            p->network.mode = POLICY_NET_NONE;
        else if (!strcmp(text, "gateway"))
            p->network.mode = POLICY_NET_GATEWAY;
        else
            return why_printf(why, len, "expected one of none, gateway, got \"%s\"", text);
        p->network.mode_explicit = true;
        return 0;
    case KT_FSYNC:
        if (!strcmp(text, "always"))
            p->audit.fsync = POLICY_AUDIT_FSYNC_ALWAYS;
        else if (!strcmp(text, "close"))
            p->audit.fsync = POLICY_AUDIT_FSYNC_CLOSE;
        else
            return why_printf(why, len, "expected one of always, close, got \"%s\"", text);
        return 0;
    case KT_SIZE:
        r = parse_size(text, &v, why, len);
        break;
    case KT_DURATION:
        r = parse_duration_ms(text, &v, why, len);
        break;
    case KT_COUNT:
        r = parse_count(text, &v, why, len);
        break;
    case KT_BEST_EFFORT: {
        int b = policy_parse_bool(text);
        if (b < 0)
            return policy_apply_item(p, k, text, why, len);
        policy_set_best_effort_all(p, b);
        return 0;
    }
    default:
        return why_printf(why, len, "expected %s, got \"%s\"", policy_key_expect(k), text);
    }
    if (r < 0)
        return -1;
    /* A 0 reads as "none allowed" to some and "no limit" to others: say which. */
    if (v == 0 && key_limit(k) < POLICY_LIMIT_COUNT)
        return why_printf(why, len, "0 is not a limit; write unlimited for none");
    if (v < k->min && k->min == 1)
        return why_printf(why, len, "must be greater than 0, got \"%s\"", text);
    if (v < k->min)
        return why_printf(why, len, "must be at least %llu, got \"%s\"",
                          (unsigned long long)k->min, text);
    /* JSON integers are signed 64-bit; nothing sane is that large anyway. */
    if (v > (uint64_t)INT64_MAX)
        return why_printf(why, len, "\"%s\" is too large", text);
    *u64_field(p, k) = v;
    limit_given(p, k);
    return 0;
}

void policy_set_best_effort_all(struct policy *p, bool all)
{
    p->limits.best_effort = all ? (1u << POLICY_LIMIT_COUNT) - 1 : 0;
}

static bool valid_env_name(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (s++; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
              (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

static int check_env_name(const char *name, char *why, size_t len)
{
    if (!valid_env_name(name))
        return why_printf(why, len,
                       "\"%s\" is not a variable name (expected [A-Za-z_][A-Za-z0-9_]*)", name);
    return 0;
}

static ssize_t env_set_find(const struct policy *p, const char *name)
{
    for (size_t i = 0; i < p->n_env_set; i++)
        if (strcmp(p->env_set[i].name, name) == 0)
            return (ssize_t)i;
    return -1;
}

static bool is_secret(const struct policy *p, const char *name)
{
    for (size_t i = 0; i < p->n_secrets; i++)
        if (strcmp(p->secrets[i].name, name) == 0)
            return true;
    return false;
}

/* ---- network ---- */

/*
 * Surrounding blanks are dropped before parsing: a quoted " api.example.com"
 * in YAML or a pasted flag value means the name, not a refusal.
 */
static char *trimmed(const char *text)
{
    while (isspace((unsigned char)*text))
        text++;
    size_t n = strlen(text);
    while (n && isspace((unsigned char)text[n - 1]))
        n--;
    return strndup(text, n);
}

/* The rule's canonical text, or a preset's rules (presets.c). */
static int apply_rule(struct policy *p, const char *path, const char *text, char *why, size_t len)
{
    _cleanup_free_ char *t = trimmed(text);
    if (!t)
        return POLICY_ENOMEM;
    return policy_net_add_rule(p, path, t, why, len);
}

static int apply_cidr(struct policy *p, const char *text, char *why, size_t len)
{
    _cleanup_free_ char *t = trimmed(text);
    if (!t)
        return POLICY_ENOMEM;
    /* "[fd00::]/8" as network.allow writes it is the same range as "fd00::/8". */
    size_t n = strlen(t);
    char *close = t[0] == '[' ? strchr(t, ']') : NULL;
    if (close && close[1] == '/') {
        memmove(close, close + 1, n - (size_t)(close - t));
        memmove(t, t + 1, n);
    }
    struct cidr c;
    if (cidr_parse(t, &c, why, len) < 0)
        return -1;
    char addr[64], canon[80];
    ip_addr_format(&c.base, addr, sizeof addr);
    snprintf(canon, sizeof canon, "%s/%u", addr, c.prefix);
    return policy_strv_add(&p->network.allow_private, &p->network.n_allow_private, canon);
}

/* A nameserver the gateway asks instead of the host's resolv.conf. */
static int apply_nameserver(struct policy *p, const char *text, char *why, size_t len)
{
    _cleanup_free_ char *t = trimmed(text);
    if (!t)
        return POLICY_ENOMEM;
    struct authority a;
    if (authority_parse(t, strlen(t), &a, why, len) < 0)
        return -1;
    if (!a.host.is_ip || a.has_userinfo)
        return why_printf(why, len, "expected IP[:PORT] of a nameserver, got \"%s\"", t);
    char addr[64], canon[80];
    ip_addr_format_bracketed(&a.host.ip, addr, sizeof addr);
    snprintf(canon, sizeof canon, "%s:%u", addr, a.port ? a.port : 53);
    return policy_strv_add(&p->network.dns, &p->network.n_dns, canon);
}

/*
 * Two pins for one name are two addresses for it, as a DNS answer may
 * hold; the gateway checks each like any other answer.
 */
static int apply_pin(struct policy *p, const char *text, char *why, size_t len)
{
    _cleanup_free_ char *t = trimmed(text);
    if (!t)
        return POLICY_ENOMEM;
    struct egress_pin pin;
    if (egress_pin_parse(t, &pin, why, len) < 0)
        return -1;
    /* Bracketed as the parser wants IPv6, so the canonical text parses back. */
    char addr[64], canon[330];
    ip_addr_format_bracketed(&pin.ip, addr, sizeof addr);
    snprintf(canon, sizeof canon, "%s=%s", pin.name, addr);
    return policy_strv_add(&p->network.resolve, &p->network.n_resolve, canon);
}

/* ---- secrets ---- */

void policy_secret_release(struct policy_secret *s)
{
    free(s->name);
    free(s->from);
    policy_strv_free(s->hosts, s->n_hosts);
    free(s->host_rules);
    *s = (struct policy_secret){ 0 };
}

int policy_secret_set_name(struct policy_secret *s, const char *text, char *why, size_t len)
{
    if (check_env_name(text, why, len) < 0)
        return -1;
    if (strlen(text) > POLICY_SECRET_NAME_MAX)
        return why_printf(why, len, "\"%.40s...\" is too long (at most %d characters)", text,
                          POLICY_SECRET_NAME_MAX);
    char *n = strdup(text);
    if (!n)
        return POLICY_ENOMEM;
    free(s->name);
    s->name = n;
    return 0;
}

/*
 * Only the reference is checked and kept, never the value: the supervisor
 * reads it when the run starts. A wrong `from` is not echoed back, since
 * the likeliest mistake is pasting the credential itself there.
 */
int policy_secret_set_from(struct policy_secret *s, const char *text, enum value_origin from,
                           char *why, size_t len)
{
    char *canon = NULL;
    if (strncmp(text, "env:", 4) == 0) {
        const char *var = text + 4;
        if (check_env_name(var, why, len) < 0)
            return -1;
        const char *v = getenv(var);
        if (!v)
            return why_printf(why, len, "environment variable \"%s\" is not set", var);
        /* An empty credential would only surface as a puzzling 401 mid-run. */
        if (v[0] == '\0')
            return why_printf(why, len, "environment variable \"%s\" is empty", var);
        if (asprintf(&canon, "env:%s", var) < 0)
            return POLICY_ENOMEM;
    } else if (strncmp(text, "file:", 5) == 0) {
        _cleanup_free_ char *real = NULL;
        int r = resolve_existing(text + 5, from, S_IFREG, &real, why, len);
        if (r < 0)
            return r;
        if (asprintf(&canon, "file:%s", real) < 0)
            return POLICY_ENOMEM;
    } else {
        return why_printf(why, len, "expected env:VAR or file:PATH, a reference to where the "
                                    "value is, not the value");
    }
    free(s->from);
    s->from = canon;
    return 0;
}

/*
 * The gateway swaps the value in only for a name it intercepts by TLS with a
 * certificate for that name; an address cannot be bound that way. A host
 * without a port binds 443 only (for an allow rule it means 80 and 443): a
 * token must not cross the network in clear unless the policy names the
 * plain-HTTP port itself.
 */
int policy_secret_add_host(struct policy_secret *s, const char *text, char *why, size_t len)
{
    _cleanup_free_ char *t = trimmed(text);
    if (!t)
        return POLICY_ENOMEM;
    struct egress_rule r;
    if (egress_rule_parse(t, &r, why, len) < 0)
        return -1;
    if (r.kind != EGRESS_RULE_NAME && r.kind != EGRESS_RULE_SUFFIX)
        return why_printf(why, len, "a secret binds to host names, not addresses");
    if (r.port == 0)
        r.port = 443;
    char canon[300];
    egress_rule_format(&r, canon, sizeof canon);
    return policy_strv_add(&s->hosts, &s->n_hosts, canon);
}

int policy_secret_set_ttl(struct policy_secret *s, const char *text, char *why, size_t len)
{
    uint64_t v = 0;
    if (parse_duration_ms(text, &v, why, len) < 0)
        return -1;
    /* Absent means the run's lifetime; a written 0 reads as "already dead" to some. */
    if (v == 0)
        return why_printf(why, len, "must be greater than 0, got \"%s\"", text);
    if (v > (uint64_t)INT64_MAX)
        return why_printf(why, len, "\"%s\" is too large", text);
    s->ttl_ms = v;
    return 0;
}

static void secret_releasep(struct policy_secret *s)
{
    policy_secret_release(s);
}

int policy_add_secret(struct policy *p, struct policy_secret *s, char *why, size_t len)
{
    _cleanup_(secret_releasep) struct policy_secret own = *s;
    *s = (struct policy_secret){ 0 };
    if (!own.name || !own.from || own.n_hosts == 0)
        return why_printf(why, len, "a secret needs a name, from and at least one host");
    if (strv_contains(p->env_pass, p->n_env_pass, own.name))
        return why_printf(why, len, "\"%s\" is also in env.pass", own.name);
    if (env_set_find(p, own.name) >= 0)
        return why_printf(why, len, "\"%s\" is also in env.set", own.name);
    size_t at = 0;
    while (at < p->n_secrets && strcmp(p->secrets[at].name, own.name) < 0)
        at++;
    if (at < p->n_secrets && strcmp(p->secrets[at].name, own.name) == 0)
        return why_printf(why, len, "\"%s\" is already a secret", own.name);
    if (p->n_secrets >= POLICY_MAX_SECRETS)
        return why_printf(why, len, "more than %d secrets", POLICY_MAX_SECRETS);
    struct policy_secret *ns = realloc(p->secrets, (p->n_secrets + 1) * sizeof *ns);
    if (!ns)
        return POLICY_ENOMEM;
    p->secrets = ns;
    memmove(ns + at + 1, ns + at, (p->n_secrets - at) * sizeof *ns);
    ns[at] = own;
    own = (struct policy_secret){ 0 };
    p->n_secrets++;
    return 0;
}

/*
 * --secret NAME=SOURCE@HOST[,HOST...]. NAME cannot hold '=' and a host
 * cannot hold '@', so the first '=' and the last '@' split it, whatever the
 * file path between them holds. The spec is not echoed: it may be the value.
 */
static int apply_secret_flag(struct policy *p, const char *spec, char *why, size_t len)
{
    const char *eq = strchr(spec, '='), *at = strrchr(spec, '@');
    if (!eq || !at || at < eq)
        return why_printf(why, len, "expected NAME=env:VAR@HOST[,HOST] or NAME=file:PATH@HOST[,HOST]");
    _cleanup_(secret_releasep) struct policy_secret s = { 0 };
    _cleanup_free_ char *name = strndup(spec, (size_t)(eq - spec));
    _cleanup_free_ char *from = strndup(eq + 1, (size_t)(at - eq - 1));
    if (!name || !from)
        return POLICY_ENOMEM;
    int r = policy_secret_set_name(&s, name, why, len);
    if (r < 0)
        return r;
    if ((r = policy_secret_set_from(&s, from, FROM_FLAG, why, len)) < 0)
        return r;
    /* Split by hand: strtok would skip an empty item instead of refusing it. */
    for (const char *h = at + 1;;) {
        const char *comma = strchr(h, ',');
        _cleanup_free_ char *host = strndup(h, comma ? (size_t)(comma - h) : strlen(h));
        if (!host)
            return POLICY_ENOMEM;
        if ((r = policy_secret_add_host(&s, host, why, len)) < 0)
            return r;
        if (!comma)
            break;
        h = comma + 1;
    }
    return policy_add_secret(p, &s, why, len);
}

/*
 * One name of filesystem.protected: a single path component, so it means
 * the same at the workspace's root and in every directory the scan visits;
 * '*' only at the end, the one glob cordon matches.
 */
static int check_protected_name(const char *name, char *why, size_t len)
{
    size_t n = strlen(name);
    if (n == 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
        strcmp(name, "*") == 0)
        return why_printf(why, len, "expected a file name, got \"%s\"", name);
    if (n > NAME_MAX)
        return why_printf(why, len, "\"%.32s...\" is longer than a file name can be", name);
    if (strchr(name, '/'))
        return why_printf(why, len, "\"%s\" is a path; expected a single file name", name);
    const char *star = strchr(name, '*');
    if (star && star[1] != '\0')
        return why_printf(why, len, "\"%s\": '*' may only end a name", name);
    return 0;
}

static int apply_protected(struct policy *p, bool add, const char *text, char *why, size_t len)
{
    if (check_protected_name(text, why, len) < 0)
        return -1;
    if (add)
        return policy_strv_add(&p->protected, &p->n_protected, text);
    /* Only by its exact name: a default is never dropped by a pattern or a typo. */
    if (!policy_protected_default(text))
        return why_printf(why, len, "\"%s\" is not a default protected name", text);
    return policy_strv_add(&p->unprotect, &p->n_unprotect, text);
}

/*
 * A host socket the run may connect to: an absolute path, kept normalised.
 * Whether it is a socket is asked when a run opens it (it may be made
 * later than the policy is read), never here.
 */
static int apply_unix_socket(struct policy *p, const char *text, char *why, size_t len)
{
    bool dotdot = false;
    if (text[0] != '/')
        return why_printf(why, len, "expected an absolute path, got \"%s\"", text);
    _cleanup_free_ char *norm = policy_normalize_path(text, &dotdot);
    if (!norm)
        return POLICY_ENOMEM;
    if (dotdot)
        return why_printf(why, len, "\"..\" is not allowed in \"%s\"", text);
    if (strcmp(norm, "/") == 0)
        return why_printf(why, len, "\"/\" is not a socket");
    if (strlen(norm) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return why_printf(why, len, "\"%s\" is longer than a unix socket's address", text);
    if (strv_contains(p->unix_sockets, p->n_unix_sockets, norm))
        return 0;
    return policy_strv_add(&p->unix_sockets, &p->n_unix_sockets, norm);
}

bool policy_protected_match(const char *pattern, const char *name)
{
    size_t n = strlen(pattern);
    if (n && pattern[n - 1] == '*')
        return strncmp(pattern, name, n - 1) == 0;
    return strcmp(pattern, name) == 0;
}

int policy_apply_item(struct policy *p, const struct policy_key *k, const char *text,
                      char *why, size_t len)
{
    switch (k->type) {
    case KT_NAMES:
        if (check_env_name(text, why, len) < 0)
            return -1;
        if (env_set_find(p, text) >= 0)
            return why_printf(why, len, "\"%s\" is also in env.set", text);
        if (is_secret(p, text))
            return why_printf(why, len, "\"%s\" is also in secrets", text);
        return policy_strv_add(&p->env_pass, &p->n_env_pass, text);
    case KT_SYSCALLS: {
        bool allow = k->flag;
        if (seccomp_check_name(text, allow, why, len) < 0)
            return -1;
        if (strv_contains(allow ? p->syscalls_deny : p->syscalls_allow,
                     allow ? p->n_syscalls_deny : p->n_syscalls_allow, text))
            return why_printf(why, len, "\"%s\" is also in syscalls.%s", text,
                           allow ? "deny" : "allow");
        return allow ? policy_strv_add(&p->syscalls_allow, &p->n_syscalls_allow, text)
                     : policy_strv_add(&p->syscalls_deny, &p->n_syscalls_deny, text);
    }
    case KT_BEST_EFFORT:
        for (int l = 0; l < POLICY_LIMIT_COUNT; l++) {
            if (strcmp(text, limit_names[l]) == 0) {
                p->limits.best_effort |= 1u << l;
                return 0;
            }
        }
        return why_printf(why, len,
                       "expected one of wall, cpu, memory, pids, output, file_size, "
                       "open_files, got \"%s\"", text);
    case KT_RULES:
        return apply_rule(p, k->path, text, why, len);
    case KT_CIDRS:
        return apply_cidr(p, text, why, len);
    case KT_PINS:
        return apply_pin(p, text, why, len);
    case KT_NAMESERVERS:
        return apply_nameserver(p, text, why, len);
    case KT_TOOL_NAMES:
        return k->flag ? policy_tools_ask(p, text, why, len) : policy_tools_allow(p, text, why, len);
    case KT_KEY_PATHS:
        return policy_gov_add_relax(p, text, why, len);
    case KT_TOOL_PINS:
        return policy_tools_pin(p, text, why, len);
    case KT_PROTECTED:
        return apply_protected(p, k->flag, text, why, len);
    case KT_UNIX_SOCKETS:
        return apply_unix_socket(p, text, why, len);
    default:
        return why_printf(why, len, "expected %s, got \"%s\"", policy_key_expect(k), text);
    }
}

int policy_apply_env_set(struct policy *p, const char *name, const char *value,
                         size_t value_len, char *why, size_t len)
{
    if (check_env_name(name, why, len) < 0)
        return -1;
    if (memchr(value, '\0', value_len))
        return why_printf(why, len, "value of \"%s\" contains a NUL byte", name);
    if (strv_contains(p->env_pass, p->n_env_pass, name))
        return why_printf(why, len, "\"%s\" is also in env.pass", name);
    if (is_secret(p, name))
        return why_printf(why, len, "\"%s\" is also in secrets", name);
    _cleanup_free_ char *v = strndup(value, value_len);
    if (!v)
        return POLICY_ENOMEM;
    /* The same name again replaces: a flag overrides the file. */
    ssize_t i = env_set_find(p, name);
    if (i >= 0) {
        free(p->env_set[i].value);
        p->env_set[i].value = TAKE_PTR(v);
        return 0;
    }
    _cleanup_free_ char *n = strdup(name);
    if (!n)
        return POLICY_ENOMEM;
    struct policy_env_set *ns = realloc(p->env_set, (p->n_env_set + 1) * sizeof *ns);
    if (!ns)
        return POLICY_ENOMEM;
    p->env_set = ns;
    size_t at = 0;
    while (at < p->n_env_set && strcmp(ns[at].name, name) < 0)
        at++;
    memmove(ns + at + 1, ns + at, (p->n_env_set - at) * sizeof *ns);
    ns[at].name = TAKE_PTR(n);
    ns[at].value = TAKE_PTR(v);
    p->n_env_set++;
    return 0;
}

/*
 * Binds are kept sorted by dest: a canonical order for the digest, and one in
 * which a parent directory is always mounted before anything beneath it.
 */
int policy_apply_bind(struct policy *p, const char *source, const char *dest,
                      bool writable, bool follow, enum value_origin from, char *why, size_t len)
{
    _cleanup_free_ char *real = NULL;
    int r = resolve_host(source, from, &real, why, len);
    if (r < 0)
        return r;
    /* Without DEST the sandbox sees the path as written, not where it points. */
    const char *d = dest ? dest : (source[0] == '/' ? source : real);
    if (d[0] != '/')
        return why_printf(why, len, "dest \"%s\" is not absolute", d);
    bool dotdot = false;
    _cleanup_free_ char *nd = policy_normalize_path(d, &dotdot);
    if (!nd)
        return POLICY_ENOMEM;
    if (dotdot)
        return why_printf(why, len, "dest \"%s\" contains \"..\"", d);
    if (check_dest(nd, why, len) < 0)
        return -1;
    size_t at = 0;
    while (at < p->n_binds && strcmp(p->binds[at].dest, nd) < 0)
        at++;
    if (at < p->n_binds && strcmp(p->binds[at].dest, nd) == 0)
        return why_printf(why, len, "dest \"%s\" is already bound", nd);
    struct policy_bind *nb = realloc(p->binds, (p->n_binds + 1) * sizeof *nb);
    if (!nb)
        return POLICY_ENOMEM;
    p->binds = nb;
    memmove(nb + at + 1, nb + at, (p->n_binds - at) * sizeof *nb);
    nb[at] = (struct policy_bind){ TAKE_PTR(real), TAKE_PTR(nd), writable, follow };
    p->n_binds++;
    return 0;
}

/* ---- public ---- */

static void egress_release(struct policy_egress *e)
{
    egress_rules_release(&e->rules);
    free(e->dns);
    *e = (struct policy_egress){ 0 };
}


struct policy *policy_new(struct cordon_err *err)
{
    struct policy *p = calloc(1, sizeof *p);
    if (!p) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    size_t n_defaults = 0;
    const struct policy_protected *defaults = policy_protected_defaults(&n_defaults);
    for (size_t i = 0; i < n_defaults; i++)
        if (policy_strv_add(&p->protected, &p->n_protected, defaults[i].name) < 0) {
            policy_free(p);
            err_set(err, CORDON_E_INTERNAL, "out of memory");
            return NULL;
        }
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
        case KT_FSYNC:
            p->audit.fsync = (enum policy_audit_fsync)k->def;
            break;
        case KT_NET_MODE:
            p->network.mode = (enum policy_net_mode)k->def;
            break;
        case KT_ACCEL:
            p->microvm_accel = (enum policy_accel)k->def;
            break;
        case KT_WS_MODE:
            p->workspace_mode = (enum policy_ws_mode)k->def;
            break;
        case KT_WS_COMMIT:
            p->workspace_commit = (enum policy_ws_commit)k->def;
            break;
        default:
            break;
        }
    }
    p->limits.defaulted = (1u << POLICY_LIMIT_COUNT) - 1;
    return p;
}

void policy_free(struct policy *p)
{
    if (!p)
        return;
    free(p->origin);
    free(p->workspace);
    for (size_t i = 0; i < p->n_binds; i++) {
        free(p->binds[i].source);
        free(p->binds[i].dest);
    }
    free(p->binds);
    policy_strv_free(p->protected, p->n_protected);
    policy_strv_free(p->unprotect, p->n_unprotect);
    policy_strv_free(p->unix_sockets, p->n_unix_sockets);
    policy_strv_free(p->env_pass, p->n_env_pass);
    for (size_t i = 0; i < p->n_env_set; i++) {
        free(p->env_set[i].name);
        free(p->env_set[i].value);
    }
    free(p->env_set);
    policy_strv_free(p->syscalls_allow, p->n_syscalls_allow);
    policy_strv_free(p->syscalls_deny, p->n_syscalls_deny);
    policy_strv_free(p->network.allow, p->network.n_allow);
    policy_strv_free(p->network.deny, p->network.n_deny);
    policy_strv_free(p->network.ask, p->network.n_ask);
    policy_strv_free(p->network.allow_private, p->network.n_allow_private);
    policy_strv_free(p->network.dns, p->network.n_dns);
    policy_strv_free(p->network.resolve, p->network.n_resolve);
    policy_presets_release(&p->network);
    for (size_t i = 0; i < p->n_secrets; i++)
        policy_secret_release(&p->secrets[i]);
    free(p->secrets);
    policy_tools_release(&p->tools);
    egress_release(&p->egress);
    free(p->audit.file);
    free(p->audit.sign_key);
    free(p->audit.witness);
    free(p->network.upstream_ca);
    policy_gov_release(&p->gov);
    json_decref(p->break_glass);
    json_decref(p->loaded);
    json_decref(p->flags);
    free(p);
}

/* Turn a setter's result into ERR, prefixed with the flag (or key). */
static int flag_result(int r, const char *prefix, const char *why, struct cordon_err *err)
{
    if (r == POLICY_ENOMEM)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    if (r < 0)
        return err_set(err, CORDON_E_POLICY, "%s: %s", prefix, why);
    return 0;
}

static int add_bind(struct policy *p, const char *spec, bool writable, const char *prefix,
                    struct cordon_err *err);

int policy_set(struct policy *p, const char *key, const char *value, const char *flag,
               struct cordon_err *err)
{
    TRY(policy_check_tighten(p, key, value, flag, err));
    return policy_set_unchecked(p, key, value, flag, err);
}

int policy_set_unchecked(struct policy *p, const char *key, const char *value, const char *flag,
                         struct cordon_err *err)
{
    const char *prefix = flag ? flag : key;
    const struct policy_key *k = policy_key_find(key);
    char why[200] = "";
    if (!k)
        return err_set(err, CORDON_E_POLICY, "%s: unknown policy key \"%s\"", prefix, key);
    switch (k->type) {
    case KT_SECTION:
        return err_set(err, CORDON_E_POLICY, "%s: \"%s\" is a section, not a value", prefix,
                       key);
    case KT_RESERVED:
        return err_set(err, CORDON_E_POLICY, "%s: %s: %s", prefix, key, k->note);
    case KT_BINDS:
        return add_bind(p, value, k->flag, prefix, err);
    case KT_ENV_MAP: {
        const char *eq = strchr(value, '=');
        if (!eq)
            return err_set(err, CORDON_E_POLICY, "%s: expected NAME=VALUE, got \"%s\"",
                           prefix, value);
        _cleanup_free_ char *name = strndup(value, (size_t)(eq - value));
        if (!name)
            return err_set(err, CORDON_E_INTERNAL, "out of memory");
        return flag_result(policy_apply_env_set(p, name, eq + 1, strlen(eq + 1), why,
                                                sizeof why), prefix, why, err);
    }
    case KT_NAMES:
    case KT_SYSCALLS:
    case KT_RULES:
    case KT_CIDRS:
    case KT_PINS:
    case KT_NAMESERVERS:
    case KT_TOOL_NAMES:
    case KT_KEY_PATHS:
    case KT_TOOL_PINS:
    case KT_PROTECTED:
    case KT_UNIX_SOCKETS:
        return flag_result(policy_apply_item(p, k, value, why, sizeof why), prefix, why, err);
    case KT_SECRETS:
        return flag_result(apply_secret_flag(p, value, why, sizeof why), prefix, why, err);
    case KT_BEST_EFFORT: {
        /* A flag lists several limits at once: --best-effort memory,pids (or all). */
        if (strcmp(value, "all") == 0) {
            policy_set_best_effort_all(p, true);
            return 0;
        }
        if (policy_parse_bool(value) >= 0 || !strchr(value, ','))
            return flag_result(policy_apply_scalar(p, k, value, FROM_FLAG, why, sizeof why),
                               prefix, why, err);
        _cleanup_free_ char *copy = strdup(value);
        if (!copy)
            return err_set(err, CORDON_E_INTERNAL, "out of memory");
        char *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
            TRY(flag_result(policy_apply_item(p, k, t, why, sizeof why), prefix, why, err));
        return 0;
    }
    default:
        return flag_result(policy_apply_scalar(p, k, value, FROM_FLAG, why, sizeof why),
                           prefix, why, err);
    }
}

int policy_add_bind(struct policy *p, const char *spec, bool writable, const char *flag,
                    struct cordon_err *err)
{
    const char *key = writable ? "filesystem.read_write" : "filesystem.read_only";
    TRY(policy_check_tighten(p, key, spec, flag, err));
    return add_bind(p, spec, writable, flag ? flag : key, err);
}

static int add_bind(struct policy *p, const char *spec, bool writable, const char *prefix,
                    struct cordon_err *err)
{
    char why[200] = "";
    /* The first ':' splits; a path containing ':' needs the {source, dest} form. */
    const char *colon = strchr(spec, ':');
    _cleanup_free_ char *source = strndup(spec, colon ? (size_t)(colon - spec) : strlen(spec));
    if (!source)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    return flag_result(policy_apply_bind(p, source, colon ? colon + 1 : NULL, writable, false,
                                         FROM_FLAG, why, sizeof why), prefix, why, err);
}

int policy_add_env(struct policy *p, const char *spec, const char *flag,
                   struct cordon_err *err)
{
    return policy_set(p, strchr(spec, '=') ? "env.set" : "env.pass", spec,
                      flag ? flag : "--env", err);
}

/*
 * A host path an earlier run could have written to must lead where it
 * says: refused when a component is a symbolic link, unless the policy lets
 * it follow links, when it is resolved once, here.
 */
static int settle_host_path(char **path, bool follow, const char *what, const char *allow,
                            const char *where, struct cordon_err *err)
{
    if (follow) {
        char *real = realpath(*path, NULL);
        if (!real)
            return err_set(err, CORDON_E_POLICY, "%s%s: cannot resolve \"%s\": %s", where, what,
                           *path, strerror(errno));
        free(*path);
        *path = real;
        return 0;
    }
    char link[PATH_MAX], target[PATH_MAX];
    if (hostpath_find_link(*path, link, sizeof link, target, sizeof target))
        return err_set(err, CORDON_E_POLICY,
                       "%s%s: \"%s\" is a symbolic link (to \"%s\") that a run could have "
                       "planted; %s", where, what, link, target,
                       allow ? allow : "cordon never writes through one");
    return 0;
}

/*
 * Is PATH (a file that may not exist yet) inside the directory tree TREE?
 * By name, and by identity of every directory above PATH, so a second
 * mount of the same tree is caught too.
 */
static bool inside_tree(const char *path, const char *tree)
{
    if (hostpath_within(path, tree))
        return true;
    struct stat t, d;
    if (stat(tree, &t) < 0)
        return false;
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return false;
    for (char *slash; (slash = strrchr(buf, '/'));) {
        slash[slash == buf] = '\0'; /* "/a/b" -> "/a", "/a" -> "/" */
        if (stat(buf, &d) == 0 && d.st_dev == t.st_dev && d.st_ino == t.st_ino)
            return true;
        if (slash == buf)
            break;
    }
    return false;
}

/* The audit log and its key stay out of every tree the sandbox can write. */
static int check_outside_writable(const struct policy *p, const char *file, const char *what,
                                  const char *where, struct cordon_err *err)
{
    if (!file)
        return 0;
    if (p->workspace && inside_tree(file, p->workspace))
        return err_set(err, CORDON_E_POLICY,
                       "%s%s: \"%s\" is inside the workspace \"%s\", which the sandbox can "
                       "write; keep it outside", where, what, file, p->workspace);
    for (size_t i = 0; i < p->n_binds; i++)
        if (p->binds[i].writable && inside_tree(file, p->binds[i].source))
            return err_set(err, CORDON_E_POLICY,
                           "%s%s: \"%s\" is inside the writable bind \"%s\"; keep it outside",
                           where, what, file, p->binds[i].source);
    return 0;
}

bool policy_outside_writable(const struct policy *p, const char *file)
{
    struct cordon_err ignored;
    return check_outside_writable(p, file, "", "", &ignored) == 0;
}

/* A secret's file must not be readable inside: the value would enter the sandbox. */
static int check_secret_hidden(const struct policy *p, const struct policy_secret *sec,
                               const char *where, struct cordon_err *err)
{
    if (strncmp(sec->from, "file:", 5) != 0)
        return 0;
    const char *file = sec->from + 5;
    const char *tree = p->workspace && inside_tree(file, p->workspace) ? p->workspace : NULL;
    for (size_t i = 0; !tree && i < p->n_binds; i++)
        if (inside_tree(file, p->binds[i].source))
            tree = p->binds[i].source;
    if (tree)
        return err_set(err, CORDON_E_POLICY,
                       "%ssecrets: the file of \"%s\" (\"%s\") is inside \"%s\", which the "
                       "sandbox sees; the value would enter the sandbox", where, sec->name, file,
                       tree);
    return 0;
}

/* ---- the parsed network section and the evidence, built at finalize ---- */

static int parse_rules(char *const *texts, size_t n, struct egress_rule **out, char *why,
                       size_t len)
{
    *out = calloc(n + 1, sizeof **out);
    if (!*out)
        return POLICY_ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (egress_rule_parse(texts[i], &(*out)[i], why, len) < 0)
            return -1;
    return 0;
}

/* The canonical texts the setters stored, parsed once for the gateway. */
static int build_egress(struct policy *p, char *why, size_t len)
{
    const struct policy_network *n = &p->network;
    struct policy_egress *e = &p->egress;
    struct egress_rules *rules = &e->rules;
    egress_release(e);
    int r = 0;
    for (size_t i = 0; i < p->n_secrets && r == 0; i++) {
        struct policy_secret *s = &p->secrets[i];
        free(s->host_rules);
        r = parse_rules(s->hosts, s->n_hosts, &s->host_rules, why, len);
    }
    if (r < 0 || (r = parse_rules(n->allow, n->n_allow, &rules->allow, why, len)) < 0 ||
        (r = parse_rules(n->deny, n->n_deny, &rules->deny, why, len)) < 0 ||
        (r = parse_rules(n->ask, n->n_ask, &rules->ask, why, len)) < 0)
        return r;
    rules->n_allow = n->n_allow;
    rules->n_deny = n->n_deny;
    rules->n_ask = n->n_ask;
    rules->allow_private = calloc(n->n_allow_private + 1, sizeof *rules->allow_private);
    rules->pins = calloc(n->n_resolve + 1, sizeof *rules->pins);
    e->dns = calloc(n->n_dns + 1, sizeof *e->dns);
    if (!rules->allow_private || !rules->pins || !e->dns)
        return POLICY_ENOMEM;
    for (; rules->n_allow_private < n->n_allow_private; rules->n_allow_private++)
        if (cidr_parse(n->allow_private[rules->n_allow_private],
                       &rules->allow_private[rules->n_allow_private], why, len) < 0)
            return -1;
    for (; rules->n_pins < n->n_resolve; rules->n_pins++)
        if (egress_pin_parse(n->resolve[rules->n_pins], &rules->pins[rules->n_pins], why, len) < 0)
            return -1;
    for (; e->n_dns < n->n_dns; e->n_dns++) {
        const char *t = n->dns[e->n_dns];
        struct authority a;
        if (authority_parse(t, strlen(t), &a, why, len) < 0)
            return -1;
        if (!a.host.is_ip)
            return why_printf(why, len, "nameserver \"%s\" is not an address", t);
        e->dns[e->n_dns] = (struct policy_nameserver){ a.host.ip, a.port ? a.port : 53 };
    }
    return 0;
}

static void build_evidence(struct policy *p);

const struct policy_evidence *policy_evidence(const struct policy *p)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    /* Logically const: the digests are a function of P, cached in it. */
    struct policy *mp = (struct policy *)p;
    pthread_mutex_lock(&lock);
    if (!mp->evidence_done) {
        build_evidence(mp);
        mp->evidence_done = true;
    }
    pthread_mutex_unlock(&lock);
    return &p->evidence;
}

static void build_evidence(struct policy *p)
{
    struct policy_evidence *ev = &p->evidence;
    policy_digest_hex(p, ev->policy);
    policy_network_digest_hex(p, ev->network);
    policy_tools_digest_hex(p, ev->tools);
    unsigned char d[32];
    seccomp_profile_digest(p, d);
    hex_encode(d, sizeof d, ev->syscalls);
    ev->file[0] = '\0';
    if (p->loaded)
        json_sha256_hex(p->loaded, ev->file);
}

/* The audit log and its witness are never written through a link, nor kept where a run writes. */
static int settle_audit_files(struct policy *p, const char *where, struct cordon_err *err)
{
    if (p->audit.file)
        TRY(settle_host_path(&p->audit.file, false, "audit.file", NULL, where, err));
    if (p->audit.witness)
        TRY(settle_host_path(&p->audit.witness, false, "audit.witness", NULL, where, err));
    TRY(check_outside_writable(p, p->audit.file, "audit.file", where, err));
    TRY(check_outside_writable(p, p->audit.witness, "audit.witness", where, err));
    return check_outside_writable(p, p->audit.sign_key, "audit.sign_key", where, err);
}

int policy_finalize(struct policy *p, struct cordon_err *err)
{
    p->finalized = false;
    char where[200] = "";
    if (p->origin)
        snprintf(where, sizeof where, "%s: ", p->origin);
    char why[200];
    if (p->workspace)
        TRY(settle_host_path(&p->workspace, p->workspace_follow_symlinks, "filesystem.workspace",
                             "filesystem.workspace_follow_symlinks: true allows it", where, err));
    for (size_t i = 0; i < p->n_binds; i++)
        TRY(settle_host_path(&p->binds[i].source, p->binds[i].follow_symlinks,
                             p->binds[i].writable ? "filesystem.read_write"
                                                  : "filesystem.read_only",
                             "follow_symlinks: true on that bind allows it", where, err));
    if (p->workspace_mode == POLICY_WS_OVERLAY && !p->workspace)
        return err_set(err, CORDON_E_POLICY, "%sworkspace.mode: overlay needs a host workspace "
                       "(filesystem.workspace or -w DIR)", where);
    TRY(settle_audit_files(p, where, err));
    TRY(check_outside_writable(p, p->gov.require_signature, "require_signature", where, err));
    TRY(check_outside_writable(p, p->tools.pins, "tools.pins", where, err));
    for (size_t i = 0; i < p->n_secrets; i++)
        TRY(check_secret_hidden(p, &p->secrets[i], where, err));
    /* The setters refuse these already; this catches a struct filled by hand. */
    for (size_t i = 0; i < p->n_binds; i++) {
        if (check_dest(p->binds[i].dest, why, sizeof why) < 0)
            return err_set(err, CORDON_E_POLICY, "%sfilesystem: %s", where, why);
        for (size_t j = i + 1; j < p->n_binds; j++)
            if (strcmp(p->binds[i].dest, p->binds[j].dest) == 0)
                return err_set(err, CORDON_E_POLICY, "%sfilesystem: dest \"%s\" is bound twice",
                               where, p->binds[i].dest);
        /* Its mountpoint would be made in the host directory, where a run may plant links. */
        for (size_t j = 0; j < p->n_binds; j++)
            if (j != i && p->binds[j].writable && hostpath_within(p->binds[i].dest, p->binds[j].dest))
                return err_set(err, CORDON_E_POLICY,
                               "%sfilesystem: dest \"%s\" is inside the writable bind at \"%s\"; "
                               "bind it elsewhere", where, p->binds[i].dest, p->binds[j].dest);
    }
    for (size_t i = 0; i < p->n_syscalls_allow; i++)
        if (strv_contains(p->syscalls_deny, p->n_syscalls_deny, p->syscalls_allow[i]))
            return err_set(err, CORDON_E_POLICY,
                           "%ssyscalls: \"%s\" is both allowed and denied", where,
                           p->syscalls_allow[i]);
    for (size_t i = 0; i < p->n_env_pass; i++)
        if (env_set_find(p, p->env_pass[i]) >= 0)
            return err_set(err, CORDON_E_POLICY, "%senv: \"%s\" is both passed and set",
                           where, p->env_pass[i]);
    /* A key or a checkpoint rate with nothing to sign would be a silent no-op. */
    if (p->audit.sign_key && !p->audit.file)
        return err_set(err, CORDON_E_POLICY, "%saudit: sign_key is set but file is not", where);
    if (p->audit.witness && !p->audit.file)
        return err_set(err, CORDON_E_POLICY, "%saudit: witness is set but file is not", where);
    /* A witness beside the log is only a copy: who cuts one cuts the other. */
    if (p->audit.witness && !strcmp(p->audit.witness, p->audit.file))
        return err_set(err, CORDON_E_POLICY, "%saudit: witness \"%s\" is the log itself; keep "
                       "it on another path, out of reach of whoever may edit the log", where,
                       p->audit.witness);
    if (p->audit.checkpoint_every && !p->audit.sign_key)
        return err_set(err, CORDON_E_POLICY,
                       "%saudit: checkpoint_every needs sign_key (checkpoints are signed)", where);
    for (size_t i = 0; i < p->n_secrets; i++) {
        const char *name = p->secrets[i].name;
        if (strv_contains(p->env_pass, p->n_env_pass, name) || env_set_find(p, name) >= 0)
            return err_set(err, CORDON_E_POLICY, "%ssecrets: \"%s\" is also in env.%s", where,
                           name, env_set_find(p, name) >= 0 ? "set" : "pass");
    }
    /*
     * A bound host is one the user meant to reach, so it is allowed too, and
     * secrets only work through the gateway. Before the allow check below, so
     * a refusal names the secrets that asked for the gateway.
     */
    if (p->n_secrets) {
        if (p->network.mode == POLICY_NET_NONE && p->network.mode_explicit)
            return err_set(err, CORDON_E_POLICY,
                           "%ssecrets: need network mode gateway (mode is none)", where);
        for (size_t i = 0; i < p->n_secrets; i++)
            for (size_t j = 0; j < p->secrets[i].n_hosts; j++)
                if (policy_strv_add(&p->network.allow, &p->network.n_allow, p->secrets[i].hosts[j]) < 0)
                    return err_set(err, CORDON_E_INTERNAL, "out of memory");
        p->network.mode = POLICY_NET_GATEWAY;
    }
    /* An allow entry implies the gateway, unless the policy said "none" outright. */
    if ((p->network.n_allow || p->network.n_ask) && p->network.mode == POLICY_NET_NONE) {
        if (p->network.mode_explicit)
            return err_set(err, CORDON_E_POLICY,
                           "%snetwork.%s: needs mode gateway (mode is none)", where,
                           p->network.n_allow ? "allow" : "ask");
        p->network.mode = POLICY_NET_GATEWAY;
    }
    if (policy_tools_check(p, why, sizeof why) < 0)
        return err_set(err, CORDON_E_POLICY, "%stools: %s", where, why);
    if (policy_gov_check(p, why, sizeof why) < 0)
        return err_set(err, CORDON_E_POLICY, "%s%s", where, why);
    if (p->version != 1)
        return err_set(err, CORDON_E_POLICY, "%sversion: unsupported version %d", where,
                       p->version);
    if (p->tmp_size == 0 || p->shm_size == 0 || p->workspace_size == 0)
        return err_set(err, CORDON_E_POLICY, "%sfilesystem: tmpfs sizes must be greater than 0",
                       where);
    /* Taken out last, so a name is unprotected however the sources were ordered. */
    for (size_t i = 0; i < p->n_unprotect; i++)
        for (size_t j = 0; j < p->n_protected; j++)
            if (strcmp(p->protected[j], p->unprotect[i]) == 0) {
                free(p->protected[j]);
                memmove(p->protected + j, p->protected + j + 1,
                        (p->n_protected - j - 1) * sizeof *p->protected);
                p->n_protected--;
                break;
            }
    int r = build_egress(p, why, sizeof why);
    if (r == POLICY_ENOMEM)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    if (r < 0)
        return err_set(err, CORDON_E_POLICY, "%snetwork: %s", where, why);
    p->evidence_done = false; /* a relaxed (break-glass) policy is finalized again */
    p->finalized = true;
    return 0;
}
