/*
 * broker/serve.c: `cordon mcp serve`: cordon as an MCP server on
 * stdin/stdout with two tools, run_command and run_code. Each call runs in
 * a fresh sandbox in a child process (broker/spawn.h), so the loop goes on
 * serving while it runs: at most MAX_RUNNING at once, the rest queued in
 * arrival order. Runs outside every sandbox; what it reads was written by
 * a model and is treated as hostile.
 */
#include "broker/serve.h"

#include "audit/audit.h"
#include "broker/jsonrpc.h"
#include "core/jobs.h"
#include "common/cleanup.h"
#include "common/decider.h"
#include "common/digest.h"
#include "common/text.h"
#include "common/units.h"
#include "core/run.h"
#include "policy/policy.h"
#include "sandbox/backend.h"
#include "sandbox/plan.h"

#include <event2/event.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RUNNING 4
/* Calls waiting for a slot; a client that floods is refused, not buffered. */
#define MAX_QUEUED 64
#define DEFAULT_WALL_MS 60000
/* A source or a stdin: larger ones are refused, never cut. */
#define MAX_TEXT (1u << 20)
/* One argv string, NUL included, is at most MAX_ARG_STRLEN (32 pages) to execve. */
#define MAX_ARG_BYTES ((128u << 10) - 1)
#define MAX_ARGV_ITEMS 4096
#define MAX_ARGV_TOTAL (1u << 20)
/* How long queued answers may take to reach a slow client at the end. */
#define DRAIN_MS 5000

static const char *const protocol_versions[] = {
    "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", /* newest first */
};

/* ---- small helpers ---- */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A growing string; a failed allocation sticks, and the text comes out NULL. */
struct sbuf {
    char *s;
    size_t len, cap;
    bool failed;
};

static void sb_add(struct sbuf *b, const char *data, size_t n)
{
    if (b->failed || n == 0)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->len, data, n);
    b->len += n;
    b->s[b->len] = '\0';
}

__attribute__((format(printf, 2, 3)))
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        sb_add(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_add(b, big, (size_t)n);
    free(big);
}

static void sb_free(struct sbuf *b)
{
    free(b->s);
    *b = (struct sbuf){ 0 };
}

/* DATA as valid UTF-8 (JSON strings must be): each bad byte becomes U+FFFD. */
static void sb_add_utf8(struct sbuf *b, const char *data, size_t n)
{
    size_t run = 0, i = 0;
    while (i < n) {
        size_t len = utf8_decode(data + i, n - i, NULL);
        if (len) {
            i += len;
            continue;
        }
        sb_add(b, data + run, i - run);
        sb_add(b, "\xef\xbf\xbd", 3);
        run = ++i;
    }
    sb_add(b, data + run, n - run);
}

/* "64 MiB", "1536 bytes". */
static const char *human_size(uint64_t bytes, char *out, size_t len)
{
    char s[32];
    format_size(bytes, s, sizeof s);
    size_t n = strlen(s);
    const char *unit = NULL;
    switch (s[n - 1]) {
    case 'K': unit = "KiB"; break;
    case 'M': unit = "MiB"; break;
    case 'G': unit = "GiB"; break;
    case 'T': unit = "TiB"; break;
    }
    if (unit)
        snprintf(out, len, "%.*s %s", (int)(n - 1), s, unit);
    else
        snprintf(out, len, "%s bytes", s);
    return out;
}

/* "60s", "1500ms". */
static const char *human_ms(uint64_t ms, char *out, size_t len)
{
    if (ms % 1000 == 0)
        snprintf(out, len, "%llus", (unsigned long long)(ms / 1000));
    else
        snprintf(out, len, "%llums", (unsigned long long)ms);
    return out;
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "something else";
}

/* ---- the session ---- */

struct server;
struct call;

/* What a tool call's arguments become: the command and its stdin. */
struct tool {
    const char *name;
    const char *title;
    const char *summary;
    int (*build)(const json_t *args, struct call *c, char *why, size_t len);
    json_t *(*input_schema)(void);
};

struct call {
    struct server *srv;
    struct call *next;             /* in srv->calls, oldest first */
    json_t *id;                    /* the request's id */
    const struct tool *tool;
    json_t *arguments;             /* kept only when the audit records them */
    char digest[65];               /* of the arguments */
    char **argv;                   /* NULL-terminated, owned */
    char *input;                   /* the command's stdin, or NULL */
    size_t input_len;
    bool cancelled;
    uint64_t received_ms;
    char run_id[33];               /* once it is queued to run */
    struct job *job;               /* queued or running; NULL once it ended */
    json_t *elicit_id;             /* our elicitation/create about it, while it waits */
    struct event *elicit_timer;    /* its deadline */
};

struct server {
    struct policy pol;             /* the caller's, with the per-call wall default */
    struct event_base *base;
    struct rpc_stream *rpc;
    struct audit_log *audit;
    json_t *tools;                 /* the tools/list answer's array */
    char *instructions;
    struct call *calls;            /* queued and running, oldest first */
    struct jobs *jobs;             /* their runs */
    struct decider *decider;       /* asked about tools.ask calls, or NULL */
    bool client_elicits;           /* the client declared the elicitation capability */
    json_t *elicit_allowed;        /* tools the client allowed for the session -> true */
    uint64_t n_elicits;
    uint64_t n_calls;              /* tools/call accepted, against tools.max_calls */
    bool input_done, output_failed, stopping, finishing;
    unsigned signals;
    struct event *sig_term, *sig_int, *drain_ev;
    uint64_t drain_deadline;
};

static void reply(struct server *srv, json_t *msg)
{
    if (msg && !srv->output_failed)
        rpc_send(srv->rpc, msg);
    json_decref(msg);
}

/* ---- what the sandbox is, told truthfully to the model ---- */

static void describe_sandbox(const struct policy *p, struct sbuf *b)
{
    char a[48], c[48];
    sb_printf(b, "Each call runs in a fresh sandbox (isolation level: %s) that is destroyed when "
                 "the call ends: no process survives it, and nothing carries over to the next call",
              cordon_level_name(p->level));
    sb_printf(b, "%s", p->workspace ? " except the files in /workspace.\n\n" : ".\n\n");

    sb_printf(b, "Files: the working directory is /workspace, ");
    if (p->workspace)
        sb_printf(b, "a host directory shared by every call: files written there persist between "
                     "calls and are seen on the host.");
    else
        sb_printf(b, "an empty scratch file system of %s, discarded after each call.",
                  human_size(p->workspace_size, a, sizeof a));
    sb_printf(b, " /tmp is an empty scratch file system of %s, and HOME is " SANDBOX_HOME
                 " on it. Everything else is read-only: the "
                 "host's /usr (programs such as sh, python3 and node, with the libraries "
                 "installed there) and the few /etc files programs need. The host's home "
                 "directories, /root, /run, /var and its other files are not visible.",
              human_size(p->tmp_size, a, sizeof a));
    for (size_t i = 0; i < p->n_binds; i++)
        sb_printf(b, "%s%s (%s)", i ? ", " : " Also mounted: ", p->binds[i].dest,
                  p->binds[i].writable ? "read-write, shared with the host" : "read-only");
    sb_printf(b, "%s\n\nNetwork: ", p->n_binds ? "." : "");

    if (p->network.mode == POLICY_NET_NONE) {
        sb_printf(b, "none. Only loopback exists inside; there is no route to any other host, "
                     "so downloads and package installs fail.");
    } else if (p->network.n_allow == 0) {
        sb_printf(b, "only through cordon's egress gateway (an HTTP proxy named by HTTP_PROXY "
                     "and HTTPS_PROXY), which allows no destination: every request is refused.");
    } else {
        sb_printf(b, "only through cordon's egress gateway, an HTTP proxy named by HTTP_PROXY and "
                     "HTTPS_PROXY (clients that ignore those have no route at all). It lets "
                     "requests through to ");
        for (size_t i = 0; i < p->network.n_allow; i++)
            sb_printf(b, "%s%s", i == 0 ? "" : i + 1 < p->network.n_allow ? ", " : " and ",
                      p->network.allow[i]);
        sb_printf(b, "; everything else is refused, private, loopback and link-local addresses "
                     "included.");
    }

    sb_printf(b, "\n\nLimits per call: wall-clock time %s", human_ms(p->limits.wall_ms, a, sizeof a));
    if (p->limits.cpu_ms)
        sb_printf(b, ", CPU time %s", human_ms(p->limits.cpu_ms, a, sizeof a));
    if (p->limits.memory)
        sb_printf(b, ", memory %s", human_size(p->limits.memory, a, sizeof a));
    if (p->limits.pids)
        sb_printf(b, ", %llu processes and threads", (unsigned long long)p->limits.pids);
    if (p->limits.output)
        sb_printf(b, ", output (stdout and stderr together) %s",
                  human_size(p->limits.output, a, sizeof a));
    if (p->limits.file_size)
        sb_printf(b, ", largest file %s", human_size(p->limits.file_size, a, sizeof a));
    if (p->limits.open_files)
        sb_printf(b, ", %llu open files", (unsigned long long)p->limits.open_files);
    /* What comes back is the smaller of the result's share and the output limit. */
    uint64_t back = p->tools.max_result_bytes / 2;
    if (p->limits.output && p->limits.output < back)
        back = p->limits.output;
    sb_printf(b, ". A run stopped by a limit says so in its result (reason \"timeout\", \"oom\", "
                 "...). Up to %s each of stdout and stderr comes back; the rest is cut off, and "
                 "the result says so.",
              human_size(back, c, sizeof c));

    sb_printf(b, "\n\nCredentials: ");
    if (p->n_secrets == 0) {
        sb_printf(b, "none. No credentials, tokens or keys are available inside.");
    } else {
        for (size_t i = 0; i < p->n_secrets; i++) {
            sb_printf(b, "%s$%s (for ", i ? "; " : "", p->secrets[i].name);
            for (size_t h = 0; h < p->secrets[i].n_hosts; h++)
                sb_printf(b, "%s%s", h ? ", " : "", p->secrets[i].hosts[h]);
            sb_printf(b, ")");
        }
        sb_printf(b, " %s a placeholder, not the real value: the gateway puts the real "
                     "credential only into requests to %s, so use %s as usual in requests "
                     "there. No other credentials are available inside.",
                  p->n_secrets > 1 ? "each hold" : "holds", p->n_secrets > 1 ? "their hosts" :
                  "its hosts", p->n_secrets > 1 ? "them" : "it");
    }
    sb_printf(b, " The environment holds only PATH, HOME, LANG");
    /* Each name once: env.set may well set HOME or LANG again, or a secret's name. */
    size_t n_names = 3 + p->n_secrets + p->n_env_pass + p->n_env_set, k = 0;
    _cleanup_free_ const char **names = calloc(n_names, sizeof *names);
    if (names) {
        names[k++] = "PATH";
        names[k++] = "HOME";
        names[k++] = "LANG";
        for (size_t i = 0; i < p->n_secrets; i++)
            names[k++] = p->secrets[i].name;
        for (size_t i = 0; i < p->n_env_pass; i++)
            names[k++] = p->env_pass[i];
        for (size_t i = 0; i < p->n_env_set; i++)
            names[k++] = p->env_set[i].name;
    }
    for (size_t i = 3; i < k; i++) {
        bool again = false;
        for (size_t j = 0; j < i && !again; j++)
            again = strcmp(names[j], names[i]) == 0;
        if (!again)
            sb_printf(b, ", %s", names[i]);
    }
    if (p->network.mode == POLICY_NET_GATEWAY)
        sb_printf(b, ", git's safe.directory settings for the mounted paths and the proxy "
                     "variables");
    else
        sb_printf(b, " and git's safe.directory settings for the mounted paths");
    sb_printf(b, ". Commands run as an unprivileged user with no capabilities, under a "
                 "system-call filter.");
}

/* ---- the tools ---- */

static int copy_string(const json_t *v, char **out)
{
    *out = malloc(json_string_length(v) + 1);
    if (!*out)
        return -1;
    memcpy(*out, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

/* ARGS is an object whose keys are all in KEYS. */
static int check_keys(const json_t *args, const char *tool, const char *const *keys, size_t n,
                      const char *takes, char *why, size_t len)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)args, key, v) {
        bool known = false;
        for (size_t i = 0; i < n && !known; i++)
            known = strcmp(key, keys[i]) == 0;
        char quoted[80];
        if (!known)
            return why_printf(why, len, "unknown argument %s: %s takes %s",
                              text_quote(quoted, sizeof quoted, key, strlen(key), true), tool,
                              takes);
    }
    return 0;
}

static int check_text(const json_t *v, const char *name, size_t max, bool nul_ok, char *why,
                      size_t len)
{
    if (!json_is_string(v))
        return why_printf(why, len, "\"%s\" must be a string, got %s", name, json_type_name(v));
    size_t n = json_string_length(v);
    if (n > max)
        return why_printf(why, len, "\"%s\" is %zu bytes long; the limit is %zu", name, n, max);
    if (!nul_ok && strlen(json_string_value(v)) != n)
        return why_printf(why, len, "\"%s\" contains a NUL character", name);
    return 0;
}

static int set_argv(struct call *c, const char *const *argv, size_t n)
{
    c->argv = calloc(n + 1, sizeof *c->argv);
    if (!c->argv)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!(c->argv[i] = strdup(argv[i])))
            return -1;
    return 0;
}

static int build_run_command(const json_t *args, struct call *c, char *why, size_t len)
{
    static const char *const keys[] = { "argv", "command", "stdin" };
    TRY(check_keys(args, "run_command", keys, 3, "argv or command, and stdin", why, len));
    json_t *argv = json_object_get(args, "argv");
    json_t *command = json_object_get(args, "command");
    json_t *in = json_object_get(args, "stdin");
    if (!argv == !command)
        return why_printf(why, len, "give exactly one of \"argv\" (a list of strings, run "
                                    "directly) and \"command\" (a string run by /bin/sh -c)");
    if (argv) {
        if (!json_is_array(argv) || json_array_size(argv) == 0)
            return why_printf(why, len, "\"argv\" must be a non-empty array of strings, got %s",
                              json_is_array(argv) ? "an empty array" : json_type_name(argv));
        size_t n = json_array_size(argv), total = 0;
        if (n > MAX_ARGV_ITEMS)
            return why_printf(why, len, "\"argv\" has %zu items; the limit is %u", n,
                              MAX_ARGV_ITEMS);
        for (size_t i = 0; i < n; i++) {
            char name[32];
            snprintf(name, sizeof name, "argv[%zu]", i);
            json_t *item = json_array_get(argv, i);
            TRY(check_text(item, name, MAX_ARG_BYTES, false, why, len));
            total += json_string_length(item) + 1;
        }
        if (total > MAX_ARGV_TOTAL)
            return why_printf(why, len, "\"argv\" is %zu bytes long; the limit is %u", total,
                              MAX_ARGV_TOTAL);
        if (json_string_length(json_array_get(argv, 0)) == 0)
            return why_printf(why, len, "\"argv[0]\" must name a program");
        c->argv = calloc(n + 1, sizeof *c->argv);
        if (!c->argv)
            return why_printf(why, len, "out of memory");
        for (size_t i = 0; i < n; i++)
            if (copy_string(json_array_get(argv, i), &c->argv[i]) < 0)
                return why_printf(why, len, "out of memory");
    } else {
        TRY(check_text(command, "command", MAX_ARG_BYTES, false, why, len));
        if (json_string_length(command) == 0)
            return why_printf(why, len, "\"command\" must not be empty");
        const char *sh[] = { "/bin/sh", "-c", json_string_value(command) };
        if (set_argv(c, sh, 3) < 0)
            return why_printf(why, len, "out of memory");
    }
    if (in) {
        TRY(check_text(in, "stdin", MAX_TEXT, true, why, len));
        c->input_len = json_string_length(in);
        if (copy_string(in, &c->input) < 0)
            return why_printf(why, len, "out of memory");
    }
    return 0;
}

static const struct {
    const char *language;
    const char *argv[2];
} languages[] = {
    { "python", { "python3", "-" } },
    { "node", { "node", "-" } },
    { "sh", { "sh", "-s" } },
};

static int build_run_code(const json_t *args, struct call *c, char *why, size_t len)
{
    static const char *const keys[] = { "language", "source" };
    TRY(check_keys(args, "run_code", keys, 2, "language and source", why, len));
    json_t *language = json_object_get(args, "language");
    json_t *source = json_object_get(args, "source");
    if (!language || !source)
        return why_printf(why, len, "missing \"%s\": run_code takes language and source",
                          language ? "source" : "language");
    size_t l = 0;
    while (l < sizeof languages / sizeof languages[0] &&
           !(json_is_string(language) && strcmp(json_string_value(language),
                                                languages[l].language) == 0))
        l++;
    if (l == sizeof languages / sizeof languages[0])
        return why_printf(why, len, "\"language\" must be \"python\", \"node\" or \"sh\"");
    TRY(check_text(source, "source", MAX_TEXT, true, why, len));
    /* The source goes in on stdin: argv, which the audit log records, stays short. */
    if (set_argv(c, languages[l].argv, 2) < 0 || copy_string(source, &c->input) < 0)
        return why_printf(why, len, "out of memory");
    c->input_len = json_string_length(source);
    return 0;
}

static json_t *run_command_schema(void)
{
    return json_pack(
        "{s:s, s:{s:{s:s, s:{s:s}, s:i, s:s}, s:{s:s, s:i, s:s}, s:{s:s, s:s}}, s:b}",
        "type", "object", "properties",
        "argv", "type", "array", "items", "type", "string", "minItems", 1, "description",
        "The program and its arguments, run directly (no shell); argv[0] is looked up in PATH. "
        "Give this or command, not both.",
        "command", "type", "string", "minLength", 1, "description",
        "A shell command line, run by /bin/sh -c. Give this or argv, not both.",
        "stdin", "type", "string", "description",
        "Text for the command's standard input (at most 1 MiB); without it stdin is empty.",
        "additionalProperties", 0);
}

static json_t *run_code_schema(void)
{
    return json_pack(
        "{s:s, s:{s:{s:s, s:[sss], s:s}, s:{s:s, s:s}}, s:[ss], s:b}",
        "type", "object", "properties",
        "language", "type", "string", "enum", "python", "node", "sh", "description",
        "python (python3), node (Node.js) or sh (POSIX shell).",
        "source", "type", "string", "description",
        "The program's text (at most 1 MiB).",
        "required", "language", "source", "additionalProperties", 0);
}

static const struct tool tools[] = {
    { "run_command", "Run a command in a sandbox",
      "Run a command in a fresh, isolated sandbox and return its exit status, stdout and "
      "stderr. Give argv (a list of strings: argv[0] is looked up in PATH, no shell) or "
      "command (a string run by /bin/sh -c), not both; stdin is optional text for the "
      "command's standard input.",
      build_run_command, run_command_schema },
    { "run_code", "Run a program in a sandbox",
      "Run a program in a fresh, isolated sandbox and return its exit status, stdout and "
      "stderr. language is python (python3), node (Node.js) or sh (POSIX shell); source is "
      "the program, run as `python3 -`, `node -` or `sh -s` with the source on standard "
      "input, so the program itself has no input to read (with sh, a command that reads "
      "stdin would read the rest of the script).",
      build_run_code, run_code_schema },
};

static json_t *output_schema(void)
{
    json_t *reasons = json_array();
    for (int r = RUN_EXITED; r <= RUN_SETUP_ERROR; r++)
        json_array_append_new(reasons, json_string(run_reason_name((enum run_reason)r)));
    return json_pack(
        "{s:s, s:{s:{s:[ss], s:s}, s:{s:[ss], s:s}, s:{s:s, s:o, s:s}, s:{s:s}, s:{s:s}, "
        "s:{s:s}, s:{s:s}, s:{s:s, s:s}, s:{s:s, s:s}, s:{s:s, s:s}}, s:[sssssssss]}",
        "type", "object", "properties",
        "exit_code", "type", "integer", "null", "description",
        "The command's exit status; null when it was killed by a signal or never started.",
        "signal", "type", "integer", "null", "description",
        "The signal that killed the command, or null.",
        "reason", "type", "string", "enum", reasons, "description",
        "Why the run ended: exited (on its own), or the limit or failure that stopped it.",
        "stdout", "type", "string", "stderr", "type", "string",
        "stdout_truncated", "type", "boolean", "stderr_truncated", "type", "boolean",
        "run_id", "type", "string", "description", "Names the run in cordon's audit log.",
        "wall_ms", "type", "integer", "description", "Wall-clock time of the run.",
        "error", "type", "string", "description", "Why cordon could not run it (setup_error).",
        "required", "exit_code", "signal", "reason", "stdout", "stderr", "stdout_truncated",
        "stderr_truncated", "run_id", "wall_ms");
}

static bool offered(const struct policy *p, const struct tool *t)
{
    /* tools.allow names tools of servers cordon wraps; given here, it narrows ours. */
    return p->tools.n_allow == 0 || policy_tool_allowed(p, t->name);
}

static const struct tool *find_tool(const struct policy *p, const char *name)
{
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++)
        if (strcmp(tools[i].name, name) == 0)
            return offered(p, &tools[i]) ? &tools[i] : NULL;
    return NULL;
}

static json_t *tool_list(const struct policy *p)
{
    struct sbuf about = { 0 };
    describe_sandbox(p, &about);
    json_t *list = json_array();
    bool writes_host = p->workspace != NULL;
    for (size_t i = 0; i < p->n_binds; i++)
        writes_host |= p->binds[i].writable;
    for (size_t i = 0; list && i < sizeof tools / sizeof tools[0]; i++) {
        if (!offered(p, &tools[i]))
            continue;
        struct sbuf d = { 0 };
        sb_printf(&d, "%s\n\n%s", tools[i].summary, about.s ? about.s : "");
        json_t *t = d.failed ? NULL : json_pack(
            "{s:s, s:s, s:s, s:o, s:o, s:{s:s, s:b, s:b, s:b, s:b}}",
            "name", tools[i].name, "title", tools[i].title, "description", d.s,
            "inputSchema", tools[i].input_schema(), "outputSchema", output_schema(),
            "annotations", "title", tools[i].title, "readOnlyHint", 0,
            "destructiveHint", writes_host, "idempotentHint", 0,
            "openWorldHint", p->network.mode == POLICY_NET_GATEWAY && p->network.n_allow > 0);
        sb_free(&d);
        if (!t || json_array_append_new(list, t) < 0) {
            json_decref(list);
            list = NULL;
        }
    }
    sb_free(&about);
    return list;
}

static char *instructions(const struct policy *p)
{
    struct sbuf b = { 0 };
    sb_printf(&b, "cordon runs each tool call in a fresh, isolated sandbox: run_code runs a "
                  "Python, Node.js or shell program, run_command runs a command. Results carry "
                  "the exit code, the reason the run ended, stdout and stderr.\n\n");
    describe_sandbox(p, &b);
    if (b.failed)
        sb_free(&b);
    return b.s;
}

/* ---- a call's life: queued, running (spawned, read), reaped, answered ---- */

static void maybe_finish(struct server *srv);

static struct call *call_new(struct server *srv, const json_t *id, const struct tool *tool)
{
    struct call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->srv = srv;
    c->id = json_deep_copy(id);
    c->tool = tool;
    c->received_ms = now_ms();
    if (!c->id) {
        free(c);
        return NULL;
    }
    return c;
}

static void unlink_call(struct server *srv, struct call *c)
{
    for (struct call **pp = &srv->calls; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    c->next = NULL;
}

static void call_free(struct call *c)
{
    if (!c)
        return;
    if (c->argv)
        for (char **a = c->argv; *a; a++)
            free(*a);
    free(c->argv);
    free(c->input);
    json_decref(c->arguments);
    json_decref(c->id);
    json_decref(c->elicit_id);
    if (c->elicit_timer)
        event_free(c->elicit_timer);
    free(c);
}

/*
 * The audit's mcp.call event for C, in the fields `mcp wrap` uses: a refusal
 * names its RULE and REASON; a call that ran brings its RESULT's exit_code,
 * signal and reason (how the run ended), and is_error.
 */
static void record_call(struct server *srv, const struct call *c, const char *decision,
                        const char *rule, const char *reason, const json_t *result)
{
    if (!srv->audit)
        return;
    json_t *f = json_pack("{s:s, s:s, s:s, s:I}", "tool", c->tool->name, "decision", decision,
                          "arguments_digest", c->digest,
                          "duration_ms", (json_int_t)(now_ms() - c->received_ms));
    if (!f)
        return;
    if (rule)
        json_object_set_new(f, "rule", json_string(rule));
    if (reason)
        json_object_set_new(f, "reason", json_string(reason));
    if (c->cancelled)
        json_object_set_new(f, "cancelled", json_true());
    json_t *sc = json_object_get(result, "structuredContent");
    if (sc) {
        static const char *const keys[] = { "exit_code", "signal", "reason", "error" };
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            json_t *v = json_object_get(sc, keys[i]);
            if (v)
                json_object_set(f, keys[i], v);
        }
        json_object_set(f, "is_error", json_object_get(result, "isError"));
    }
    /* Kept only when the policy's tools.record_arguments asks for them. */
    if (c->arguments)
        json_object_set(f, "arguments", c->arguments);
    struct cordon_err ignored;
    /* The run already happened; its own run.start/run.end are in the log either way. */
    audit_append(srv->audit, "mcp.call", c->run_id[0] ? c->run_id : NULL, f, &ignored);
}

static void summarise(const struct policy *p, const char *reason, const json_t *exit_code,
                      const json_t *sig, const char *error, struct sbuf *t)
{
    char a[48];
    if (json_is_integer(sig))
        sb_printf(t, "killed by signal %d (%s)", (int)json_integer_value(sig),
                  strsignal((int)json_integer_value(sig)));
    else if (strcmp(reason, "setup_error") == 0)
        sb_printf(t, "not run: %s", error ? error : "cordon could not start it");
    else if (json_is_integer(exit_code))
        sb_printf(t, "exit code %lld", (long long)json_integer_value(exit_code));
    else
        sb_printf(t, "ended");
    if (strcmp(reason, "timeout") == 0)
        sb_printf(t, "; stopped at the wall-clock limit of %s",
                  human_ms(p->limits.wall_ms, a, sizeof a));
    else if (strcmp(reason, "oom") == 0)
        sb_printf(t, "; stopped at the memory limit of %s",
                  human_size(p->limits.memory, a, sizeof a));
    else if (strcmp(reason, "pids_limit") == 0)
        sb_printf(t, "; stopped at the limit of %llu processes",
                  (unsigned long long)p->limits.pids);
    else if (strcmp(reason, "output_limit") == 0)
        sb_printf(t, "; stopped at the output limit of %s",
                  human_size(p->limits.output, a, sizeof a));
    else if (strcmp(reason, "cpu_limit") == 0)
        sb_printf(t, "; stopped at the CPU-time limit of %s",
                  human_ms(p->limits.cpu_ms, a, sizeof a));
    else if (strcmp(reason, "file_size_limit") == 0)
        sb_printf(t, "; stopped at the file-size limit of %s",
                  human_size(p->limits.file_size, a, sizeof a));
    else if (strcmp(reason, "killed") == 0)
        sb_printf(t, "; the run was killed");
}

static void add_stream(struct sbuf *t, const char *name, const struct sbuf *text,
                       const struct job_output *cap)
{
    if (cap->total == 0)
        return;
    sb_printf(t, "\n\n%s:\n", name);
    sb_add(t, text->s, text->len);
    if (cap->truncated)
        sb_printf(t, "\n[%s cut off: the first %zu of %llu bytes are shown]", name, cap->len,
                  (unsigned long long)cap->total);
}

/* The tools/call result of a finished run, from its result JSON and captures. */
static json_t *run_result(struct call *c, const struct job_end *end)
{
    const struct policy *p = &c->srv->pol;
    json_t *res = end->result;
    json_t *exit_code = json_null(), *sig = json_null();
    const char *reason = "setup_error", *error = NULL;
    char why[160] = "";
    double wall_ms = 0;
    if (end->start_error) {
        /* Nothing ran: the reason is why it could not start. */
        error = end->start_error->msg;
    } else if (res) {
        json_t *v = json_object_get(res, "exit_code");
        exit_code = json_is_integer(v) ? v : json_null();
        v = json_object_get(res, "signal");
        sig = json_is_integer(v) ? v : json_null();
        v = json_object_get(res, "reason");
        reason = json_is_string(v) ? json_string_value(v) : "killed";
        v = json_object_get(res, "error");
        error = json_is_string(v) ? json_string_value(v) : NULL;
        wall_ms = json_number_value(json_object_get(res, "wall_ms"));
    } else {
        /* The supervisor died before it could report: killed, or a bug. */
        if (WIFSIGNALED(end->wstatus)) {
            reason = "killed";
            snprintf(why, sizeof why, "the run's supervisor was killed by signal %d",
                     WTERMSIG(end->wstatus));
        } else {
            snprintf(why, sizeof why, "the run's supervisor ended without a result (status %d)",
                     WIFEXITED(end->wstatus) ? WEXITSTATUS(end->wstatus) : -1);
        }
        error = why;
        wall_ms = (double)(now_ms() - c->received_ms);
    }

    struct sbuf out = { 0 }, err = { 0 }, text = { 0 };
    sb_add_utf8(&out, end->out.data ? end->out.data : "", end->out.len);
    sb_add_utf8(&err, end->err.data ? end->err.data : "", end->err.len);
    summarise(p, reason, exit_code, sig, error, &text);
    sb_printf(&text, " (run %s, %.0f ms)", c->run_id, wall_ms);
    add_stream(&text, "stdout", &out, &end->out);
    add_stream(&text, "stderr", &err, &end->err);
    if (end->out.total == 0 && end->err.total == 0)
        sb_printf(&text, "\n\n(no output)");

    json_t *result = NULL;
    if (!out.failed && !err.failed && !text.failed) {
        json_t *sc = json_pack("{s:O, s:O, s:s, s:s%, s:s%, s:b, s:b, s:s, s:I}",
                               "exit_code", exit_code, "signal", sig, "reason", reason,
                               "stdout", out.s ? out.s : "", out.len,
                               "stderr", err.s ? err.s : "", err.len,
                               "stdout_truncated", end->out.truncated,
                               "stderr_truncated", end->err.truncated, "run_id", c->run_id,
                               "wall_ms", (json_int_t)(wall_ms + 0.5));
        if (sc && error)
            json_object_set_new(sc, "error", json_string(error));
        bool failed = strcmp(reason, "exited") != 0 || !json_is_integer(exit_code) ||
                      json_integer_value(exit_code) != 0;
        if (sc)
            result = json_pack("{s:[{s:s, s:s%}], s:o, s:b}", "content", "type", "text",
                               "text", text.s, text.len, "structuredContent", sc, "isError",
                               failed);
    }
    sb_free(&out);
    sb_free(&err);
    sb_free(&text);
    return result ? result : rpc_tool_error("cordon could not build the result (out of memory)");
}

/* A run ended: answer its call (unless the client cancelled it), record it, forget it. */
static void on_job_done(void *ctx, const struct job_end *end)
{
    struct call *c = ctx;
    struct server *srv = c->srv;
    c->job = NULL;
    json_t *result = run_result(c, end);
    record_call(srv, c, "allowed", NULL, NULL, result);
    if (!c->cancelled)
        reply(srv, rpc_result(c->id, json_incref(result)));
    json_decref(result);
    unlink_call(srv, c);
    call_free(c);
    maybe_finish(srv);
}

/* ---- the end of the session ---- */

static void on_drain(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    if (srv->output_failed || rpc_stream_pending_output(srv->rpc) == 0 ||
        now_ms() >= srv->drain_deadline) {
        event_base_loopbreak(srv->base);
        return;
    }
    struct timeval tv = { 0, 10000 };
    evtimer_add(srv->drain_ev, &tv);
}

/* Once nothing is left to answer, write what is queued and end the loop. */
static void maybe_finish(struct server *srv)
{
    if (srv->finishing || srv->calls || !(srv->input_done || srv->stopping))
        return;
    srv->finishing = true;
    rpc_stream_close_output(srv->rpc);
    srv->drain_deadline = now_ms() + DRAIN_MS;
    on_drain(-1, 0, srv);
}

/* A queued call's run was dropped at shutdown: it is refused. */
static void on_job_dropped(void *ctx)
{
    struct call *c = ctx;
    struct server *srv = c->srv;
    c->job = NULL;
    if (!c->cancelled)
        reply(srv, rpc_error(c->id, RPC_REFUSED, "cordon is shutting down; the call did "
                                                 "not run"));
    record_call(srv, c, "allowed", NULL, "not run: cordon shut down", NULL);
    unlink_call(srv, c);
    call_free(c);
}

/* Stop serving: queued calls are refused, running ones stopped (NOW: killed). */
static void stop(struct server *srv, bool now)
{
    srv->stopping = true;
    jobs_stop_all(srv->jobs, now, on_job_dropped);
    maybe_finish(srv);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    struct server *srv = arg;
    /* A second one does not wait for the runs' grace. */
    stop(srv, ++srv->signals > 1);
}

/* ---- the protocol ---- */

static struct call *find_call(struct server *srv, const json_t *id)
{
    /* A cancelled call gets no answer, so its id is free again. */
    for (struct call *c = srv->calls; c; c = c->next)
        if (!c->cancelled && json_equal(c->id, id))
            return c;
    return NULL;
}

static json_t *initialize_result(struct server *srv, const json_t *params)
{
    json_t *caps = json_is_object(params) ? json_object_get(params, "capabilities") : NULL;
    srv->client_elicits = json_is_object(json_object_get(caps, "elicitation"));
    const char *version = protocol_versions[0];
    json_t *asked = json_is_object(params) ? json_object_get(params, "protocolVersion") : NULL;
    for (size_t i = 0; json_is_string(asked) && i < sizeof protocol_versions /
                                                    sizeof protocol_versions[0]; i++)
        if (strcmp(json_string_value(asked), protocol_versions[i]) == 0)
            version = protocol_versions[i];
    return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version,
                     "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "cordon",
                     "title", "cordon sandbox", "version", CORDON_VERSION, "instructions",
                     srv->instructions);
}

static void link_call(struct server *srv, struct call *c)
{
    struct call **tail = &srv->calls;
    while (*tail)
        tail = &(*tail)->next;
    *tail = c;
}

/* C (not in srv->calls) goes to the run queue. */
static void queue_call(struct server *srv, struct call *c)
{
    link_call(srv, c);
    struct cordon_err err = { 0 };
    c->job = jobs_submit(srv->jobs, c->argv, c->input, c->input_len, c, &err);
    if (!c->job) {
        record_call(srv, c, "refused", "queue", err.msg, NULL);
        reply(srv, rpc_error(c->id, RPC_REFUSED, "%s", err.msg));
        unlink_call(srv, c);
        call_free(c);
        return;
    }
    memcpy(c->run_id, job_run_id(c->job), sizeof c->run_id);
}

/* The decider.ask event; EV is decider_answer_json()'s or the elicitation's. */
static void record_ask(struct server *srv, const struct call *c, json_t *ev)
{
    json_object_set_new(ev, "kind", json_string("tool_call"));
    json_object_set_new(ev, "tool", json_string(c->tool->name));
    json_object_set_new(ev, "arguments_digest", json_string(c->digest));
    struct cordon_err ignored;
    if (srv->audit)
        audit_append(srv->audit, "decider.ask", NULL, ev, &ignored);
    else
        json_decref(ev);
}

/* The end of an elicitation about C: ALLOWED runs it, otherwise WHY refuses it. */
static void elicit_done(struct server *srv, struct call *c, const char *decision,
                        const char *why, json_t *answer)
{
    bool allowed = strncmp(decision, "allow_", 6) == 0;
    if (!strcmp(decision, "allow_session"))
        json_object_set_new(srv->elicit_allowed, c->tool->name, json_true());
    record_ask(srv, c, json_pack("{s:s, s:s, s:b, s:I, s:{s:s, s:O?}}", "decision", decision,
                                 "reason", why, "cached", 0, "elapsed_ms",
                                 (json_int_t)(now_ms() - c->received_ms), "decider",
                                 "elicitation", "client", "answer", answer));
    if (c->elicit_timer)
        evtimer_del(c->elicit_timer);
    json_decref(c->elicit_id);
    c->elicit_id = NULL;
    unlink_call(srv, c);
    if (c->cancelled) {
        record_call(srv, c, "refused", "decider", "not run: cancelled by the client", NULL);
        call_free(c);
    } else if (allowed) {
        queue_call(srv, c);
        return;
    } else {
        char msg[300];
        snprintf(msg, sizeof msg, "the decider did not allow it: %s", why);
        record_call(srv, c, "refused", "decider", msg, NULL);
        reply(srv, rpc_result(c->id, rpc_tool_error("cordon refused this call: %s", msg)));
        call_free(c);
    }
    maybe_finish(srv);
}

static void on_elicit_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct call *c = arg;
    struct server *srv = c->srv;
    reply(srv, json_pack("{s:s, s:s, s:{s:O, s:s}}", "jsonrpc", "2.0", "method",
                         "notifications/cancelled", "params", "requestId", c->elicit_id,
                         "reason", "cordon's deadline for the answer passed"));
    elicit_done(srv, c, "deny", "timeout: the client did not answer before the deadline", NULL);
}

/* A response from the client: the answer to one of our elicitations, or nothing. */
static void elicit_answer(struct server *srv, const json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    struct call *c = srv->calls;
    while (c && !(c->elicit_id && json_equal(c->elicit_id, id)))
        c = c->next;
    if (!c)
        return;
    json_t *result = json_object_get(msg, "result");
    const char *action = json_string_value(json_object_get(result, "action"));
    const char *decision = json_string_value(
        json_object_get(json_object_get(result, "content"), "decision"));
    if (!result)
        elicit_done(srv, c, "deny", "the client answered with an error", NULL);
    else if (!action || strcmp(action, "accept") != 0)
        elicit_done(srv, c, "deny", "the person declined", result);
    else if (decision && (!strcmp(decision, "allow_once") || !strcmp(decision, "allow_session")))
        elicit_done(srv, c, decision, "the person allowed it", result);
    else
        elicit_done(srv, c, "deny", "the person chose deny", result);
}

/* Ask the client's person about C; the call waits in srv->calls for the answer. */
static void elicit(struct server *srv, struct call *c, const json_t *params)
{
    _cleanup_free_ char *args = json_dumps(json_object_get(params, "arguments"),
                                           JSON_COMPACT | JSON_SORT_KEYS);
    char msg[1200];
    snprintf(msg, sizeof msg, "The agent asks to run %s with %.900s. Allow it?", c->tool->name,
             args ? args : "{}");
    char rid[48];
    snprintf(rid, sizeof rid, "cordon-ask-%llu", (unsigned long long)++srv->n_elicits);
    c->elicit_id = json_string(rid);
    c->elicit_timer = evtimer_new(srv->base, on_elicit_timeout, c);
    uint64_t ms = srv->pol.gov.decider_timeout_ms;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    if (!c->elicit_id || !c->elicit_timer || evtimer_add(c->elicit_timer, &tv) < 0) {
        reply(srv, rpc_error(c->id, RPC_INTERNAL_ERROR, "out of memory"));
        call_free(c);
        return;
    }
    link_call(srv, c);
    reply(srv, json_pack("{s:s, s:O, s:s, s:{s:s, s:{s:s, s:{s:{s:s, s:s, s:[s, s, s]}}, s:[s]}}}",
                         "jsonrpc", "2.0", "id", c->elicit_id, "method", "elicitation/create",
                         "params", "message", msg, "requestedSchema", "type", "object",
                         "properties", "decision", "type", "string", "title", "Decision", "enum",
                         "allow_once", "allow_session", "deny", "required", "decision"));
}

static void tools_call(struct server *srv, const json_t *id, const json_t *params)
{
    json_t *name = json_is_object(params) ? json_object_get(params, "name") : NULL;
    if (!json_is_string(name)) {
        reply(srv, rpc_error(id, RPC_INVALID_PARAMS, "tools/call needs params.name, a string"));
        return;
    }
    const struct tool *tool = find_tool(&srv->pol, json_string_value(name));
    if (!tool) {
        char quoted[80];
        reply(srv, rpc_error(id, RPC_INVALID_PARAMS, "unknown tool %s",
                             text_quote(quoted, sizeof quoted, json_string_value(name),
                                        json_string_length(name), true)));
        return;
    }
    struct call *c = call_new(srv, id, tool);
    if (!c) {
        reply(srv, rpc_error(id, RPC_INTERNAL_ERROR, "out of memory"));
        return;
    }
    json_t *args = json_object_get(params, "arguments");
    json_t *empty = args ? NULL : json_object();
    if (!args)
        args = empty;
    json_sha256_hex(args, c->digest);
    if (srv->pol.tools.record_arguments)
        c->arguments = json_incref(args);

    char why[300];
    if (srv->pol.tools.max_calls && srv->n_calls >= srv->pol.tools.max_calls) {
        snprintf(why, sizeof why, "the session's limit of %llu tool calls is reached",
                 (unsigned long long)srv->pol.tools.max_calls);
        record_call(srv, c, "refused", "max_calls", why, NULL);
        reply(srv, rpc_error(id, RPC_REFUSED, "%s", why));
        call_free(c);
        json_decref(empty);
        return;
    }
    unsigned queued = jobs_queued(srv->jobs);
    if (queued >= MAX_QUEUED) {
        snprintf(why, sizeof why, "%u calls are already waiting to run; try again later",
                 queued);
        record_call(srv, c, "refused", "queue", why, NULL);
        reply(srv, rpc_error(id, RPC_REFUSED, "%s", why));
        call_free(c);
        json_decref(empty);
        return;
    }
    srv->n_calls++;
    int rc = json_is_object(args)
                 ? tool->build(args, c, why, sizeof why)
                 : why_printf(why, sizeof why, "arguments must be an object, got %s",
                              json_type_name(args));
    json_decref(empty);
    if (rc < 0) {
        record_call(srv, c, "refused", "arguments", why, NULL);
        reply(srv, rpc_result(id, rpc_tool_error("invalid arguments for %s: %s", tool->name, why)));
        call_free(c);
        return;
    }
    /* An `ask` tool runs only if the decider allows this call now (waited for, bounded). */
    bool ask = policy_tool_ask(&srv->pol, tool->name);
    if (ask && json_object_get(srv->elicit_allowed, tool->name)) {
        ask = false; /* the person allowed it for the session */
    } else if (ask && srv->pol.gov.decider_elicit && srv->client_elicits) {
        elicit(srv, c, params);
        return;
    } else if (ask && !srv->decider) {
        snprintf(why, sizeof why, "the decider did not allow it: the client cannot be asked "
                 "(no elicitation capability) and no decider socket or command is set");
        record_call(srv, c, "refused", "decider", why, NULL);
        reply(srv, rpc_result(id, rpc_tool_error("cordon refused this call: %s", why)));
        call_free(c);
        return;
    }
    if (ask) {
        struct decider_answer a;
        decider_ask(srv->decider, "tool_call", tool->name, NULL, params, &a);
        record_ask(srv, c, decider_answer_json(srv->decider, &a));
        if (a.decision == DECIDER_DENY) {
            snprintf(why, sizeof why, "the decider did not allow it: %s", a.reason);
            record_call(srv, c, "refused", "decider", why, NULL);
            reply(srv, rpc_result(id, rpc_tool_error("cordon refused this call: %s", why)));
            call_free(c);
            return;
        }
    }
    queue_call(srv, c);
}

static void cancel(struct server *srv, const json_t *params)
{
    json_t *id = json_is_object(params) ? json_object_get(params, "requestId") : NULL;
    struct call *c = id ? find_call(srv, id) : NULL;
    if (!c || c->cancelled)
        return;
    c->cancelled = true; /* no answer goes out for it */
    if (c->elicit_id) {
        elicit_done(srv, c, "deny", "cancelled by the client", NULL);
        return;
    }
    if (job_stop(c->job, false))
        return; /* running: its end is recorded as it comes */
    c->job = NULL;
    record_call(srv, c, "allowed", NULL, "not run: cancelled by the client", NULL);
    unlink_call(srv, c);
    call_free(c);
    maybe_finish(srv);
}

static void request(struct server *srv, const char *method, const json_t *id,
                    const json_t *params)
{
    if (find_call(srv, id)) {
        reply(srv, rpc_error(id, RPC_INVALID_REQUEST,
                             "a request with this id is still in progress"));
        return;
    }
    if (params && !json_is_object(params)) {
        reply(srv, rpc_error(id, RPC_INVALID_PARAMS, "params must be an object"));
        return;
    }
    if (strcmp(method, "initialize") == 0)
        reply(srv, rpc_result(id, initialize_result(srv, params)));
    else if (strcmp(method, "ping") == 0)
        reply(srv, rpc_result(id, json_object()));
    else if (strcmp(method, "tools/list") == 0)
        reply(srv, rpc_result(id, json_pack("{s:O}", "tools", srv->tools)));
    else if (strcmp(method, "tools/call") == 0)
        tools_call(srv, id, params);
    else {
        char quoted[80];
        reply(srv, rpc_error(id, RPC_METHOD_NOT_FOUND, "method not found: %s",
                             text_quote(quoted, sizeof quoted, method, strlen(method), true)));
    }
}

static void on_message(void *ctx, struct rpc_stream *s, json_t *msg)
{
    (void)s;
    struct server *srv = ctx;
    if (srv->stopping)
        return;
    const char *method = NULL;
    json_t *id = NULL;
    char why[160];
    switch (rpc_classify(msg, &method, &id, why, sizeof why)) {
    case RPC_KIND_INVALID:
        reply(srv, rpc_error(id, RPC_INVALID_REQUEST, "invalid request: %s", why));
        return;
    case RPC_KIND_RESPONSE:
        elicit_answer(srv, msg); /* all we ask the client about is a tools.ask call */
        return;
    case RPC_KIND_NOTIFICATION:
        if (strcmp(method, "notifications/cancelled") == 0)
            cancel(srv, json_object_get(msg, "params"));
        return; /* initialized and the rest need nothing from us */
    case RPC_KIND_REQUEST:
        request(srv, method, id, json_object_get(msg, "params"));
        return;
    }
}

static void on_garbage(void *ctx, struct rpc_stream *s, const char *line, size_t len,
                       bool oversized, const char *why)
{
    (void)s;
    struct server *srv = ctx;
    if (srv->stopping)
        return;
    if (!oversized) {
        reply(srv, rpc_error(NULL, RPC_PARSE_ERROR, "parse error: %s", why));
        return;
    }
    /*
     * The request is gone, but its id may be read from what is left of it,
     * unless that could be the id of a call still running, which would then
     * seem answered.
     */
    json_t *id = NULL;
    long long guess = rpc_guess_id(line, len);
    if (guess >= 0) {
        id = json_integer(guess);
        if (find_call(srv, id)) {
            json_decref(id);
            id = NULL;
        }
    }
    reply(srv, rpc_error(id, RPC_INVALID_REQUEST, "message refused: %s (tools.max_message_bytes)",
                         why));
    json_decref(id);
}

static void on_closed(void *ctx, struct rpc_stream *s, bool output_failed)
{
    (void)s;
    struct server *srv = ctx;
    if (output_failed) {
        /* Nobody is left to answer: stop the runs. */
        srv->output_failed = true;
        stop(srv, false);
        return;
    }
    /* The client is done asking; what it asked is still answered. */
    srv->input_done = true;
    maybe_finish(srv);
}

static const struct rpc_handlers handlers = {
    .message = on_message,
    .garbage = on_garbage,
    .closed = on_closed,
};

/* ---- setup ---- */

static void server_release(struct server *srv)
{
    /* Any run still here (the loop failed) is killed and reaped. */
    jobs_free(srv->jobs);
    while (srv->calls) {
        struct call *c = srv->calls;
        srv->calls = c->next;
        call_free(c);
    }
    if (srv->rpc)
        rpc_stream_free(srv->rpc);
    if (srv->sig_term)
        event_free(srv->sig_term);
    if (srv->sig_int)
        event_free(srv->sig_int);
    if (srv->drain_ev)
        event_free(srv->drain_ev);
    if (srv->audit) {
        struct cordon_err ignored;
        audit_close(srv->audit, &ignored);
        audit_free(srv->audit);
    }
    json_decref(srv->tools);
    free(srv->instructions);
    decider_free(srv->decider);
    json_decref(srv->elicit_allowed);
    if (srv->base)
        event_base_free(srv->base);
}

static int server_init(struct server *srv, const struct policy *p, unsigned pool,
                       struct cordon_err *err)
{
    /*
     * A shallow copy: its pointers stay the caller's, borrowed for the
     * session and never freed through it. Only a scalar differs: a model's
     * code must not be able to run forever when the policy sets no limit.
     */
    srv->pol = *p;
    if (srv->pol.limits.wall_ms == 0 ||
        (srv->pol.limits.defaulted & (1u << POLICY_LIMIT_WALL)))
        srv->pol.limits.wall_ms = DEFAULT_WALL_MS;

    /* What every call would meet, met once now: a policy this host cannot
     * enforce (a limit without a cgroup, a level it lacks) fails the session
     * at its start, with the reason, not each call after it. Prepared and
     * released, a run leaves nothing: no process, cgroup or audit record. */
    struct run *trial = NULL;
    if (run_prepare(&srv->pol, NULL, &trial, err) < 0)
        return err_prefix(err, "this host cannot enforce the policy");
    run_release(trial);

    if (cordon_audit_open(p, &srv->audit, err) < 0)
        return -1;
    if ((p->gov.decider || p->gov.decider_command) &&
        !(srv->decider = decider_new(p->gov.decider, p->gov.decider_command,
                                     p->gov.decider_timeout_ms, err)))
        return -1;
    srv->elicit_allowed = json_object();
    srv->tools = tool_list(&srv->pol);
    srv->instructions = instructions(&srv->pol);
    if (!srv->tools || !srv->instructions)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");

    srv->base = rpc_event_base_new();
    if (!srv->base)
        return err_set(err, CORDON_E_INTERNAL, "cannot create the event loop");
    struct jobs_config jc = {
        .base = srv->base,
        .policy = &srv->pol,
        .max_running = MAX_RUNNING,
        .max_queued = MAX_QUEUED,
        .output_cap = (size_t)(srv->pol.tools.max_result_bytes / 2),
        .done = on_job_done,
        .pool = pool,
    };
    if (!(srv->jobs = jobs_new(&jc, err)))
        return -1;

    /* Our own descriptors, so that ending the stream does not close fds 0 and 1. */
    int in = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
    if (in < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot use stdin");
    int out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (out < 0) {
        close(in);
        return err_sys(err, CORDON_E_SETUP, "cannot use stdout");
    }
    srv->rpc = rpc_stream_new(srv->base, in, out, (size_t)p->tools.max_message_bytes, &handlers,
                              srv, err);
    if (!srv->rpc) {
        close(in);
        close(out);
        return -1;
    }
    /* A client that stops reading stops being read: answers do not pile up. */
    rpc_stream_throttle(srv->rpc, srv->rpc);
    srv->sig_term = evsignal_new(srv->base, SIGTERM, on_signal, srv);
    srv->sig_int = evsignal_new(srv->base, SIGINT, on_signal, srv);
    srv->drain_ev = evtimer_new(srv->base, on_drain, srv);
    if (!srv->sig_term || !srv->sig_int || !srv->drain_ev || evsignal_add(srv->sig_term, NULL) < 0 ||
        evsignal_add(srv->sig_int, NULL) < 0)
        return err_set(err, CORDON_E_INTERNAL, "cannot watch for signals");
    return 0;
}

int mcp_serve(const struct policy *p, unsigned pool, struct cordon_err *err)
{
    /* A client that goes away must not kill us in the middle of a write. */
    signal(SIGPIPE, SIG_IGN);
    struct server srv = { 0 };
    if (server_init(&srv, p, pool, err) < 0) {
        server_release(&srv);
        return -1;
    }
    int rc = event_base_dispatch(srv.base);
    server_release(&srv);
    if (rc < 0)
        return err_set(err, CORDON_E_INTERNAL, "the event loop failed");
    return 0;
}
