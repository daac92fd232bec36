/*
 * broker/serve_tools.c: the tools of `cordon mcp serve`, run_command and
 * run_code: their schemas, and the checks that turn a call's hostile
 * arguments into a command and its stdin.
 */
#include "broker/serve_int.h"

#include "common/text.h"
#include "sandbox/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    json_object_foreach((json_t *)args, key, v)
    {
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
        return why_printf(why, len,
                          "give exactly one of \"argv\" (a list of strings, run "
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
           !(json_is_string(language) &&
             strcmp(json_string_value(language), languages[l].language) == 0))
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
    /* clang-format off */
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
    /* clang-format on */
}

static json_t *run_code_schema(void)
{
    /* clang-format off */
    return json_pack(
        "{s:s, s:{s:{s:s, s:[sss], s:s}, s:{s:s, s:s}}, s:[ss], s:b}",
        "type", "object", "properties",
        "language", "type", "string", "enum", "python", "node", "sh", "description",
        "python (python3), node (Node.js) or sh (POSIX shell).",
        "source", "type", "string", "description",
        "The program's text (at most 1 MiB).",
        "required", "language", "source", "additionalProperties", 0);
    /* clang-format on */
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
    /* clang-format off */
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
    /* clang-format on */
}

static bool offered(const struct policy *p, const struct tool *t)
{
    /* tools.allow names tools of servers cordon wraps; given here, it narrows ours. */
    return p->tools.n_allow == 0 || policy_tool_allowed(p, t->name);
}

const struct tool *find_tool(const struct policy *p, const char *name)
{
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++)
        if (strcmp(tools[i].name, name) == 0)
            return offered(p, &tools[i]) ? &tools[i] : NULL;
    return NULL;
}

json_t *tool_list(const struct policy *p)
{
    struct strbuf about = { 0 };
    describe_sandbox(p, &about);
    json_t *list = json_array();
    bool writes_host = p->workspace != NULL;
    for (size_t i = 0; i < p->n_binds; i++)
        writes_host |= p->binds[i].writable;
    for (size_t i = 0; list && i < sizeof tools / sizeof tools[0]; i++) {
        if (!offered(p, &tools[i]))
            continue;
        struct strbuf d = { 0 };
        strbuf_printf(&d, "%s\n\n%s", tools[i].summary, about.s ? about.s : "");
        /* clang-format off */
        json_t *t = d.failed ? NULL : json_pack(
            "{s:s, s:s, s:s, s:o, s:o, s:{s:s, s:b, s:b, s:b, s:b}}",
            "name", tools[i].name, "title", tools[i].title, "description", d.s,
            "inputSchema", tools[i].input_schema(), "outputSchema", output_schema(),
            "annotations", "title", tools[i].title, "readOnlyHint", 0,
            "destructiveHint", writes_host, "idempotentHint", 0,
            "openWorldHint", p->network.mode == POLICY_NET_GATEWAY && p->network.n_allow > 0);
        /* clang-format on */
        strbuf_free(&d);
        if (!t || json_array_append_new(list, t) < 0) {
            json_decref(list);
            list = NULL;
        }
    }
    strbuf_free(&about);
    return list;
}

char *instructions(const struct policy *p)
{
    struct strbuf b = { 0 };
    strbuf_printf(&b,
                  "cordon runs each tool call in a fresh, isolated sandbox: run_code runs a "
                  "Python, Node.js or shell program, run_command runs a command. Results carry "
                  "the exit code, the reason the run ended, stdout and stderr.\n\n");
    describe_sandbox(p, &b);
    if (b.failed)
        strbuf_free(&b);
    return b.s;
}
