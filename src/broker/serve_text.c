/*
 * broker/serve_text.c: what `cordon mcp serve` tells the model: what the
 * sandbox is (told truthfully, from the policy) and what a run did.
 */
#include "broker/serve_int.h"

#include "common/units.h"
#include "sandbox/backend.h"
#include "sandbox/plan.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

/* "64 MiB", "1536 bytes". */
static const char *human_size(uint64_t bytes, char *out, size_t len)
{
    char s[32];
    format_size(bytes, s, sizeof s);
    size_t n = strlen(s);
    const char *unit = NULL;
    switch (s[n - 1]) {
    case 'K':
        unit = "KiB";
        break;
    case 'M':
        unit = "MiB";
        break;
    case 'G':
        unit = "GiB";
        break;
    case 'T':
        unit = "TiB";
        break;
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

/* ---- what the sandbox is, told truthfully to the model ---- */

/* What the network is, for the sandbox's description. */
static void describe_network(const struct policy *p, struct strbuf *b)
{
    if (p->network.mode == POLICY_NET_NONE) {
        strbuf_printf(b,
                      "none. Only loopback exists inside; there is no route to any other host, "
                      "so downloads and package installs fail.");
    } else if (p->network.n_allow == 0) {
        strbuf_printf(b,
                      "only through cordon's egress gateway (an HTTP proxy named by HTTP_PROXY "
                      "and HTTPS_PROXY), which allows no destination: every request is refused.");
    } else {
        strbuf_printf(b,
                      "only through cordon's egress gateway, an HTTP proxy named by HTTP_PROXY and "
                      "HTTPS_PROXY (clients that ignore those have no route at all). It lets "
                      "requests through to ");
        for (size_t i = 0; i < p->network.n_allow; i++)
            strbuf_printf(b, "%s%s",
                          i == 0                           ? ""
                              : i + 1 < p->network.n_allow ? ", "
                                                           : " and ",
                          p->network.allow[i]);
        strbuf_printf(b,
                      "; everything else is refused, private, loopback and link-local addresses "
                      "included.");
    }
}

/* What credentials a run has (placeholders), for the sandbox's description. */
static void describe_credentials(const struct policy *p, struct strbuf *b)
{
    strbuf_printf(b, "\n\nCredentials: ");
    if (p->n_secrets == 0) {
        strbuf_printf(b, "none. No credentials, tokens or keys are available inside.");
    } else {
        for (size_t i = 0; i < p->n_secrets; i++) {
            strbuf_printf(b, "%s$%s (for ", i ? "; " : "", p->secrets[i].name);
            for (size_t h = 0; h < p->secrets[i].n_hosts; h++)
                strbuf_printf(b, "%s%s", h ? ", " : "", p->secrets[i].hosts[h]);
            strbuf_printf(b, ")");
        }
        strbuf_printf(b,
                      " %s a placeholder, not the real value: the gateway puts the real "
                      "credential only into requests to %s, so use %s as usual in requests "
                      "there. No other credentials are available inside.",
                      p->n_secrets > 1 ? "each hold" : "holds",
                      p->n_secrets > 1 ? "their hosts" : "its hosts",
                      p->n_secrets > 1 ? "them" : "it");
    }
}

void describe_sandbox(const struct policy *p, struct strbuf *b)
{
    char a[48], c[48];
    strbuf_printf(
        b,
        "Each call runs in a fresh sandbox (isolation level: %s) that is destroyed when "
        "the call ends: no process survives it, and nothing carries over to the next call",
        cordon_level_name(p->level));
    strbuf_printf(b, "%s", p->workspace ? " except the files in /workspace.\n\n" : ".\n\n");

    strbuf_printf(b, "Files: the working directory is /workspace, ");
    if (p->workspace)
        strbuf_printf(b,
                      "a host directory shared by every call: files written there persist between "
                      "calls and are seen on the host.");
    else
        strbuf_printf(b, "an empty scratch file system of %s, discarded after each call.",
                      human_size(p->workspace_size, a, sizeof a));
    strbuf_printf(b,
                  " /tmp is an empty scratch file system of %s, and HOME is " SANDBOX_HOME
                  " on it. Everything else is read-only: the "
                  "host's /usr (programs such as sh, python3 and node, with the libraries "
                  "installed there) and the few /etc files programs need. The host's home "
                  "directories, /root, /run, /var and its other files are not visible.",
                  human_size(p->tmp_size, a, sizeof a));
    for (size_t i = 0; i < p->n_binds; i++)
        strbuf_printf(b, "%s%s (%s)", i ? ", " : " Also mounted: ", p->binds[i].dest,
                      p->binds[i].writable ? "read-write, shared with the host" : "read-only");
    strbuf_printf(b, "%s\n\nNetwork: ", p->n_binds ? "." : "");

    describe_network(p, b);

    strbuf_printf(b, "\n\nLimits per call: wall-clock time %s",
                  human_ms(p->limits.wall_ms, a, sizeof a));
    if (p->limits.cpu_ms)
        strbuf_printf(b, ", CPU time %s", human_ms(p->limits.cpu_ms, a, sizeof a));
    if (p->limits.memory)
        strbuf_printf(b, ", memory %s", human_size(p->limits.memory, a, sizeof a));
    if (p->limits.pids)
        strbuf_printf(b, ", %llu processes and threads", (unsigned long long)p->limits.pids);
    if (p->limits.output)
        strbuf_printf(b, ", output (stdout and stderr together) %s",
                      human_size(p->limits.output, a, sizeof a));
    if (p->limits.file_size)
        strbuf_printf(b, ", largest file %s", human_size(p->limits.file_size, a, sizeof a));
    if (p->limits.open_files)
        strbuf_printf(b, ", %llu open files", (unsigned long long)p->limits.open_files);
    /* What comes back is the smaller of the result's share and the output limit. */
    uint64_t back = p->tools.max_result_bytes / 2;
    if (p->limits.output && p->limits.output < back)
        back = p->limits.output;
    strbuf_printf(b,
                  ". A run stopped by a limit says so in its result (reason \"timeout\", \"oom\", "
                  "...). Up to %s each of stdout and stderr comes back; the rest is cut off, and "
                  "the result says so.",
                  human_size(back, c, sizeof c));

    describe_credentials(p, b);
    strbuf_printf(b, " The environment holds only PATH, HOME, LANG");
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
            strbuf_printf(b, ", %s", names[i]);
    }
    if (p->network.mode == POLICY_NET_GATEWAY)
        strbuf_printf(b, ", git's safe.directory setting and the proxy variables");
    else
        strbuf_printf(b, " and git's safe.directory setting");
    strbuf_printf(b,
                  ". Commands run as an unprivileged user with no capabilities, under a "
                  "system-call filter.");
}

static void summarise(const struct policy *p, const char *reason, const json_t *exit_code,
                      const json_t *sig, const char *error, struct strbuf *t)
{
    char a[48];
    if (json_is_integer(sig))
        strbuf_printf(t, "killed by signal %d (%s)", (int)json_integer_value(sig),
                      strsignal((int)json_integer_value(sig)));
    else if (strcmp(reason, "setup_error") == 0)
        strbuf_printf(t, "not run: %s", error ? error : "cordon could not start it");
    else if (json_is_integer(exit_code))
        strbuf_printf(t, "exit code %lld", (long long)json_integer_value(exit_code));
    else
        strbuf_printf(t, "ended");
    if (strcmp(reason, "timeout") == 0)
        strbuf_printf(t, "; stopped at the wall-clock limit of %s",
                      human_ms(p->limits.wall_ms, a, sizeof a));
    else if (strcmp(reason, "oom") == 0)
        strbuf_printf(t, "; stopped at the memory limit of %s",
                      human_size(p->limits.memory, a, sizeof a));
    else if (strcmp(reason, "pids_limit") == 0)
        strbuf_printf(t, "; stopped at the limit of %llu processes",
                      (unsigned long long)p->limits.pids);
    else if (strcmp(reason, "output_limit") == 0)
        strbuf_printf(t, "; stopped at the output limit of %s",
                      human_size(p->limits.output, a, sizeof a));
    else if (strcmp(reason, "cpu_limit") == 0)
        strbuf_printf(t, "; stopped at the CPU-time limit of %s",
                      human_ms(p->limits.cpu_ms, a, sizeof a));
    else if (strcmp(reason, "file_size_limit") == 0)
        strbuf_printf(t, "; stopped at the file-size limit of %s",
                      human_size(p->limits.file_size, a, sizeof a));
    else if (strcmp(reason, "killed") == 0)
        strbuf_printf(t, "; the run was killed");
}

static void add_stream(struct strbuf *t, const char *name, const struct strbuf *text,
                       const struct job_output *cap)
{
    if (cap->total == 0)
        return;
    strbuf_printf(t, "\n\n%s:\n", name);
    strbuf_add(t, text->s, text->len);
    if (cap->truncated)
        strbuf_printf(t, "\n[%s cut off: the first %zu of %llu bytes are shown]", name, cap->len,
                      (unsigned long long)cap->total);
}

json_t *run_result(struct call *c, const struct job_end *end)
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

    struct strbuf out = { 0 }, err = { 0 }, text = { 0 };
    strbuf_add_utf8(&out, end->out.data ? end->out.data : "", end->out.len);
    strbuf_add_utf8(&err, end->err.data ? end->err.data : "", end->err.len);
    summarise(p, reason, exit_code, sig, error, &text);
    strbuf_printf(&text, " (run %s, %.0f ms)", c->run_id, wall_ms);
    add_stream(&text, "stdout", &out, &end->out);
    add_stream(&text, "stderr", &err, &end->err);
    if (end->out.total == 0 && end->err.total == 0)
        strbuf_printf(&text, "\n\n(no output)");

    json_t *result = NULL;
    if (!out.failed && !err.failed && !text.failed) {
        /* clang-format off */
        json_t *sc = json_pack("{s:O, s:O, s:s, s:s%, s:s%, s:b, s:b, s:s, s:I}",
                               "exit_code", exit_code, "signal", sig, "reason", reason,
                               "stdout", out.s ? out.s : "", out.len,
                               "stderr", err.s ? err.s : "", err.len,
                               "stdout_truncated", end->out.truncated,
                               "stderr_truncated", end->err.truncated, "run_id", c->run_id,
                               "wall_ms", (json_int_t)(wall_ms + 0.5));
        /* clang-format on */
        if (sc && error)
            json_object_set_new(sc, "error", json_string(error));
        bool failed = strcmp(reason, "exited") != 0 || !json_is_integer(exit_code) ||
            json_integer_value(exit_code) != 0;
        if (sc)
            result = json_pack("{s:[{s:s, s:s%}], s:o, s:b}", "content", "type", "text", "text",
                               text.s, text.len, "structuredContent", sc, "isError", failed);
    }
    strbuf_free(&out);
    strbuf_free(&err);
    strbuf_free(&text);
    return result ? result : rpc_tool_error("cordon could not build the result (out of memory)");
}
