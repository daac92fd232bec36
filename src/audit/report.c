/*
 * audit/report.c: `cordon audit report --html`: the log as one page a
 * person reads: the chain's verdict (audit_verify), the runs on a timeline,
 * and each run's evidence summary (audit_summary_add, the one evidence
 * states). Every string of the log is the runs' own (argv, hosts, reasons,
 * tool names), so every one is escaped on the way out, and the page names
 * a Content-Security-Policy that runs no script and loads nothing. Runs in
 * the CLI.
 */
#include "audit/audit.h"
#include "audit/audit_int.h"
#include "common/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Rows of one table of a run: a run may have made thousands of requests. */
#define ROWS_SHOWN 200

struct report {
    const struct audit_html_options *o;
    json_t *runs;             /* [{summary, first_line, last_line, first_ts, last_ts, ...}] */
    json_t *index;            /* run id -> its position in RUNS */
    json_t *header;           /* the log's audit.header, or NULL */
    uint64_t last_checkpoint; /* the line of the last checkpoint, or 0 */
    uint64_t bad_lines;       /* lines that are no event */
};

static const char *str_of(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* ---- collecting ---- */

/* The entry of RUN, made on its first line; RUN NULL: a new entry of no id. */
static json_t *run_entry(struct report *r, const char *run, const struct audit_line *l)
{
    json_t *at = run ? json_object_get(r->index, run) : NULL;
    if (at)
        return json_array_get(r->runs, (size_t)json_integer_value(at));
    json_t *e = json_pack("{s:o, s:I, s:s}", "summary", audit_summary_new(run ? run : "-"),
                          "first_line", (json_int_t)l->no, "first_ts", str_of(l->ev, "ts") ?: "");
    if (!e || json_array_append_new(r->runs, e))
        return NULL;
    if (run &&
        json_object_set_new(r->index, run, json_integer((json_int_t)json_array_size(r->runs) - 1)))
        return NULL;
    return e;
}

static int collect(void *arg, const struct audit_line *l, struct cordon_err *err)
{
    struct report *r = arg;
    if (!l->ev) {
        r->bad_lines++;
        return 0;
    }
    if (!strcmp(l->type, AUDIT_TYPE_HEADER) && !r->header)
        r->header = json_incref(l->ev);
    if (!strcmp(l->type, AUDIT_TYPE_CHECKPOINT))
        r->last_checkpoint = l->no;
    const char *want = r->o->run;
    /* A run refused before it had an id is an entry of its own (never one --run names). */
    bool anonymous = !l->run && !strcmp(l->type, "run.refused");
    if ((!l->run && !anonymous) || (want && (!l->run || strncmp(l->run, want, strlen(want)))))
        return 0;
    json_t *e = run_entry(r, anonymous ? NULL : l->run, l);
    if (!e)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    audit_summary_add(json_object_get(e, "summary"), l->ev);
    json_object_set_new(e, "last_line", json_integer((json_int_t)l->no));
    json_object_set_new(e, "last_ts", json_string(str_of(l->ev, "ts") ?: ""));
    /* What the summary leaves to the run's other readers. */
    static const char *const start_more[] = { "levels_skipped", "policy_flags", "session" };
    if (!strcmp(l->type, "run.start")) {
        for (size_t i = 0; i < sizeof start_more / sizeof start_more[0]; i++)
            if (json_object_get(l->ev, start_more[i]))
                json_object_set(e, start_more[i], json_object_get(l->ev, start_more[i]));
    } else if (!strcmp(l->type, "run.refused")) {
        json_object_set(e, "refused", l->ev);
    }
    return 0;
}

/* ---- writing ---- */

/*
 * A bidirectional control (U+200E-F, U+202A-E, U+2066-9) at S, in UTF-8: a
 * run's argv could reorder what the page shows around it ("Trojan source").
 */
static bool bidi_control(const unsigned char *s)
{
    return s[0] == 0xe2 &&
        ((s[1] == 0x80 && ((s[2] >= 0x8e && s[2] <= 0x8f) || (s[2] >= 0xaa && s[2] <= 0xae))) ||
         (s[1] == 0x81 && s[2] >= 0xa6 && s[2] <= 0xa9));
}

/* Text as HTML: markup characters as entities, control characters as U+FFFD. */
static void put_text(FILE *o, const char *s)
{
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (bidi_control((const unsigned char *)s)) {
            fputs("&#xfffd;", o);
            s += 2;
            continue;
        }
        switch (c) {
        case '&':
            fputs("&amp;", o);
            break;
        case '<':
            fputs("&lt;", o);
            break;
        case '>':
            fputs("&gt;", o);
            break;
        case '"':
            fputs("&quot;", o);
            break;
        case '\'':
            fputs("&#39;", o);
            break;
        default:
            if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
                fputs("&#xfffd;", o);
            else
                fputc(c, o);
        }
    }
}

/* The first 8 characters of a run id, as a person tells runs apart. */
static void put_short_id(FILE *o, const char *id)
{
    char s[9];
    snprintf(s, sizeof s, "%s", id && strcmp(id, "-") ? id : "(no id)");
    put_text(o, s);
}

/* A value of the log as text: a string as itself, anything else as compact JSON. */
static void put_value(FILE *o, const json_t *v)
{
    if (!v || json_is_null(v)) {
        fputs("<span class=\"none\">-</span>", o);
        return;
    }
    if (json_is_string(v)) {
        put_text(o, json_string_value(v));
        return;
    }
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    put_text(o, t ? t : "?");
    free(t);
}

static void put_row(FILE *o, const char *name, const json_t *v)
{
    fprintf(o, "<tr><th>%s</th><td>", name);
    put_value(o, v);
    fputs("</td></tr>\n", o);
}

/* "2026-12-02T15:04:05.123456Z" in seconds since the epoch; NAN when it is not one. */
static double ts_seconds(const char *ts)
{
    struct tm tm = { 0 };
    double frac = 0;
    int n = 0;
    if (!ts ||
        sscanf(ts, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &n) != 6)
        return NAN;
    if (ts[n] == '.')
        frac = strtod(ts + n, NULL);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm) + frac;
}

/* The result in a few words, and its class: ok, failed, refused or open. */
static const char *outcome(const json_t *e, char *text, size_t len)
{
    const json_t *res = json_object_get(json_object_get(e, "summary"), "result");
    const char *reason = str_of(res, "reason");
    json_t *code = json_object_get(res, "exit_code"), *sig = json_object_get(res, "signal");
    if (json_object_get(e, "refused")) {
        snprintf(text, len, "refused");
        return "refused";
    }
    if (!res) {
        snprintf(text, len, "no run.end");
        return "open";
    }
    if (reason && !strcmp(reason, "exited") && json_is_integer(sig))
        snprintf(text, len, "killed by signal %lld", (long long)json_integer_value(sig));
    else if (reason && !strcmp(reason, "exited") && json_is_integer(code))
        snprintf(text, len, "exited %lld", (long long)json_integer_value(code));
    else
        snprintf(text, len, "%s (status %lld)", reason ? reason : "?",
                 (long long)json_integer_value(json_object_get(res, "status")));
    bool ok = reason && !strcmp(reason, "exited") && json_integer_value(code) == 0 &&
        json_is_integer(code);
    return ok ? "ok" : "failed";
}

static const char style[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:1em 2em;"
    "color:#1d232a;background:#fff}"
    "h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;margin:.3em 0}"
    "h3{font-size:1em;margin:.8em 0 .2em}"
    "code,pre,.mono{font-family:ui-monospace,monospace;font-size:12.5px}"
    "pre{white-space:pre-wrap;word-break:break-all;background:#f4f5f7;padding:.4em .6em;"
    "margin:.3em 0;border-radius:4px}"
    ".chain{padding:.6em .9em;border-radius:6px;margin:.6em 0;font-weight:600}"
    ".chain.intact{background:#e3f4e8;color:#0f5a27}.chain.broken{background:#fde4e1;"
    "color:#8a1c10}.warn{color:#8a5a00}"
    "#timeline{border:1px solid #d8dde3;border-radius:6px;padding:.5em .8em;margin:1em 0}"
    ".axis,.lane{display:grid;grid-template-columns:270px 1fr;column-gap:8px}"
    ".axis div{display:flex;justify-content:space-between;color:#5b6672;font-size:12px}"
    ".lane{margin:3px 0;font-size:12px;line-height:18px}"
    ".lane a{color:#1d232a;text-decoration:none;white-space:nowrap;overflow:hidden}"
    ".track{position:relative;height:18px;background:#f6f7f9;border-radius:3px}"
    ".bar{position:absolute;top:0;height:18px;min-width:5px;border-radius:3px}"
    ".ok{background:#2e7d43}.failed{background:#c0392b}.refused{background:#d68910}"
    ".open{background:#7f8c8d}"
    ".run{border:1px solid #d8dde3;border-radius:6px;padding:.6em 1em;margin:1em 0}"
    ".badge{display:inline-block;border-radius:3px;padding:0 .45em;color:#fff;font-size:12px;"
    "margin-left:.4em}.level{background:#34495e}"
    "table{border-collapse:collapse;margin:.2em 0;width:100%}"
    "th,td{text-align:left;vertical-align:top;padding:2px 8px;border-bottom:1px solid #eceff2}"
    "th{font-weight:600;color:#3a4550;white-space:nowrap;width:1%}"
    "td{overflow-wrap:anywhere}.none{color:#9aa4ae}"
    ".allowed{color:#0f5a27;font-weight:600}.denied{color:#8a1c10;font-weight:600}";

static void put_head(FILE *o, const char *path)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'\">\n"
          "<meta name=\"viewport\" content=\"width=device-width\">\n<title>cordon audit: ",
          o);
    put_text(o, path);
    fprintf(o, "</title>\n<style>%s</style></head>\n<body>\n", style);
}

/* ---- the chain ---- */

static void put_chain(FILE *o, const struct audit_report *v, const struct audit_html_options *opt)
{
    bool broken = !v->intact && !v->truncated;
    fprintf(o, "<div id=\"chain\" class=\"chain %s\">", v->intact ? "intact" : "broken");
    if (v->truncated)
        fprintf(o,
                "Chain: the last line (line %llu) is torn, the writer was interrupted; "
                "the %llu events before it verify",
                (unsigned long long)v->bad_line, (unsigned long long)v->events);
    else if (broken)
        fprintf(o, "Chain broken at line %llu: ", (unsigned long long)v->bad_line);
    if (broken)
        put_text(o, v->why);
    if (v->intact) {
        fprintf(o,
                "Chain intact: %llu events, %llu runs, head <span class=\"mono\">%.16s"
                "</span>&hellip;",
                (unsigned long long)v->events, (unsigned long long)v->runs, v->head);
        if (opt->pubkey)
            fprintf(o, "; every line signed: %llu checkpoints verified with the key",
                    (unsigned long long)v->checkpoints);
        if (opt->witness)
            fprintf(o, "; witnessed to seq %llu", (unsigned long long)v->witness_seq);
    }
    fputs("</div>\n", o);
    if (!opt->pubkey)
        fputs("<p class=\"warn\">No key was given (--key): checkpoint signatures were not "
              "checked, and an unsigned chain can be extended or rewritten by anyone who "
              "can write the file.</p>\n",
              o);
    uint64_t shown = v->lost_ends < AUDIT_OPEN_RUNS_SHOWN ? v->lost_ends : AUDIT_OPEN_RUNS_SHOWN;
    for (uint64_t i = 0; i < shown; i++) {
        fprintf(o, "<p class=\"warn\">Line %llu: run <span class=\"mono\">",
                (unsigned long long)v->lost[i].line);
        put_text(o, v->lost[i].run);
        fputs("</span> has no run.end and is not running: its end was lost.</p>\n", o);
    }
}

/* What the chain says of the run whose lines end at LAST. */
static void put_run_verdict(FILE *o, const struct report *r, const struct audit_report *v,
                            uint64_t last)
{
    fputs("<tr><th>verification</th><td>", o);
    if (!v->intact && last >= v->bad_line)
        fprintf(o,
                "<span class=\"denied\">not verified</span>: the chain breaks at line %llu, "
                "at or before this run's last line",
                (unsigned long long)v->bad_line);
    else if (r->o->pubkey)
        fputs("<span class=\"allowed\">verified and signed</span>: its lines chain, and a "
              "checkpoint after them is signed by the key",
              o);
    else if (r->last_checkpoint > last)
        fputs("<span class=\"allowed\">chain verified</span>; a checkpoint follows (its "
              "signature not checked: no key given)",
              o);
    else
        fputs("<span class=\"allowed\">chain verified</span>, not signed", o);
    fputs("</td></tr>\n", o);
}

/* ---- the timeline ---- */

static void put_timeline(FILE *o, const json_t *runs)
{
    double t0 = INFINITY, t1 = -INFINITY;
    size_t i;
    json_t *e;
    json_array_foreach(runs, i, e)
    {
        double a = ts_seconds(str_of(e, "first_ts")), b = ts_seconds(str_of(e, "last_ts"));
        if (!isnan(a) && a < t0)
            t0 = a;
        if (!isnan(b) && b > t1)
            t1 = b;
    }
    if (!(t1 >= t0))
        return;
    double span = t1 - t0 > 0.001 ? t1 - t0 : 0.001;
    char from[32], to[32], len[32];
    audit_short_time(str_of(json_array_get(runs, 0), "first_ts"), from);
    time_t end = (time_t)t1;
    struct tm tm;
    strftime(to, sizeof to, "%Y-%m-%d %H:%M:%S", gmtime_r(&end, &tm));
    audit_human_ms(span * 1000, len);
    fprintf(o,
            "<section id=\"timeline\"><h2>Timeline</h2>\n<div class=\"axis\"><span></span>"
            "<div><span>%s UTC</span><span>%s</span><span>%s UTC</span></div></div>\n",
            from, len, to);
    json_array_foreach(runs, i, e)
    {
        double a = ts_seconds(str_of(e, "first_ts")), b = ts_seconds(str_of(e, "last_ts"));
        if (isnan(a) || isnan(b))
            continue;
        char text[64];
        const char *cls = outcome(e, text, sizeof text);
        const json_t *s = json_object_get(e, "summary");
        double left = (a - t0) / span * 100, width = (b - a) / span * 100;
        if (left > 99.4)
            left = 99.4;
        if (width > 100 - left)
            width = 100 - left;
        fprintf(o, "<div class=\"lane\"><a href=\"#run-%zu\"><span class=\"mono\">", i + 1);
        put_short_id(o, str_of(s, "run"));
        fputs("</span> ", o);
        put_text(o, str_of(s, "level") ?: "-");
        fprintf(o,
                ", %s</a><div class=\"track\"><a class=\"bar %s\" href=\"#run-%zu\" "
                "style=\"left:%.3f%%;width:%.3f%%\" title=\"",
                text, cls, i + 1, left, width);
        char *cmd = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&cmd, &n);
        if (m) {
            audit_put_command(m, json_object_get(s, "argv"), 200);
            fclose(m);
        }
        put_text(o, cmd);
        free(cmd);
        fputs("\"></a></div></div>\n", o);
    }
    fputs("</section>\n", o);
}

/* ---- one run ---- */

/* A limit's value as the policy wrote it: a size, a duration or a count. */
static void put_limit_value(FILE *o, const char *name, const json_t *limits)
{
    char key[48], h[32];
    bool ms = !strcmp(name, "wall") || !strcmp(name, "cpu");
    snprintf(key, sizeof key, "%s%s", name, ms ? "_ms" : "");
    const json_t *v = json_object_get(limits, key);
    bool bytes = !strcmp(name, "memory") || !strcmp(name, "output") || !strcmp(name, "file_size");
    if (!json_is_integer(v)) {
        put_value(o, v);
        return;
    }
    double n = (double)json_integer_value(v);
    if (n == 0)
        snprintf(h, sizeof h, "none");
    else if (ms)
        audit_human_ms(n, h);
    else if (bytes)
        audit_human_size(n, h);
    else
        snprintf(h, sizeof h, "%lld", (long long)json_integer_value(v));
    fputs(h, o);
}

static bool in_list(const json_t *list, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i,
                       v) if (json_is_string(v) && !strcmp(json_string_value(v), name)) return true;
    return false;
}

/* The policy's limits beside how this run enforced each. */
static void put_limits(FILE *o, const json_t *s)
{
    const json_t *limits = json_object_get(s, "limits");
    const json_t *enforced = json_object_get(s, "limits_enforced");
    if (!json_is_object(enforced) && !json_is_object(limits))
        return;
    fputs("<h3>Limits</h3>\n<table class=\"limits\"><tr><th>limit</th><th>policy</th>"
          "<th>enforced by</th></tr>\n",
          o);
    const char *name;
    json_t *how;
    json_object_foreach((json_t *)enforced, name, how)
    {
        fputs("<tr><td>", o);
        put_text(o, name);
        fputs("</td><td>", o);
        put_limit_value(o, name, limits);
        if (in_list(json_object_get(limits, "defaults"), name))
            fputs(" <span class=\"none\">(default)</span>", o);
        fputs("</td><td>", o);
        put_value(o, how);
        fputs("</td></tr>\n", o);
    }
    fputs("</table>\n", o);
    const json_t *fired = json_object_get(s, "limits_fired");
    size_t i;
    json_t *f;
    json_array_foreach(fired, i, f)
    {
        fputs("<p class=\"warn\">limit fired: ", o);
        put_value(o, json_object_get(f, "limit"));
        fputs(" (", o);
        put_value(o, json_object_get(f, "reason"));
        fputs(")</p>\n", o);
    }
}

/* A table of ROWS (objects) in COLS, at most ROWS_SHOWN of them. */
static void put_table(FILE *o, const char *cls, const json_t *rows, const char *const *cols)
{
    fprintf(o, "<table class=\"%s\"><tr>", cls);
    for (const char *const *c = cols; *c; c++)
        fprintf(o, "<th>%s</th>", *c);
    fputs("</tr>\n", o);
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
    {
        if (i == ROWS_SHOWN) {
            fprintf(o, "<tr><td colspan=\"9\">&hellip; and %zu more in the log</td></tr>\n",
                    json_array_size(rows) - ROWS_SHOWN);
            break;
        }
        fputs("<tr>", o);
        for (const char *const *c = cols; *c; c++) {
            const json_t *v = json_object_get(row, *c);
            /* A decision is coloured by what it was: the gateway's boolean, the broker's word. */
            bool yes = json_is_true(v) ||
                (json_is_string(v) && !strcmp(*c, "decision") &&
                 !strcmp(json_string_value(v), "allowed"));
            bool verdict = !strcmp(*c, "allowed") || !strcmp(*c, "decision");
            fprintf(o, "<td%s>", !verdict ? "" : yes ? " class=\"allowed\"" : " class=\"denied\"");
            if (!strcmp(*c, "allowed"))
                fputs(yes ? "allowed" : "refused", o);
            else
                put_value(o, v);
            fputs("</td>", o);
        }
        fputs("</tr>\n", o);
    }
    fputs("</table>\n", o);
}

static void put_egress(FILE *o, const json_t *s)
{
    static const char *const cols[] = { "allowed",  "method",     "host",   "port",
                                        "address",  "rule",       "reason", "status",
                                        "bytes_up", "bytes_down", NULL };
    const json_t *sum = json_object_get(s, "egress"), *d = json_object_get(s, "egress_decisions");
    if (!sum && !json_array_size(d))
        return;
    fputs("<h3>Egress</h3>\n", o);
    if (sum) {
        char up[32], down[32];
        audit_human_size((double)json_integer_value(json_object_get(sum, "bytes_up")), up);
        audit_human_size((double)json_integer_value(json_object_get(sum, "bytes_down")), down);
        fprintf(o, "<p>%lld allowed, %lld refused; %s up, %s down</p>\n",
                (long long)json_integer_value(json_object_get(sum, "allowed")),
                (long long)json_integer_value(json_object_get(sum, "refused")), up, down);
    }
    if (json_array_size(d))
        put_table(o, "egress", d, cols);
}

static void put_tools(FILE *o, const json_t *s)
{
    static const char *const cols[] = { "tool",        "decision",         "rule", "reason",
                                        "duration_ms", "arguments_digest", NULL };
    const json_t *calls = json_object_get(s, "tool_calls");
    if (!json_array_size(calls) && !json_object_get(s, "mcp_server"))
        return;
    fputs("<h3>Tool calls</h3>\n", o);
    if (json_object_get(s, "mcp_server")) {
        fputs("<p>server: ", o);
        put_value(o, json_object_get(s, "mcp_server"));
        fputs("</p>\n", o);
    }
    put_table(o, "tools", calls, cols);
}

static void put_break_glass(FILE *o, const json_t *s)
{
    const json_t *bg = json_object_get(s, "break_glass");
    if (!bg)
        return;
    fputs("<h3 class=\"warn\">Break-glass</h3>\n<table class=\"breakglass\">\n", o);
    const char *k;
    json_t *v;
    if (json_is_object(bg)) {
        json_object_foreach((json_t *)bg, k, v)
        {
            fputs("<tr><th>", o);
            put_text(o, k);
            fputs("</th><td>", o);
            put_value(o, v);
            fputs("</td></tr>\n", o);
        }
    } else {
        put_row(o, "break_glass", bg);
    }
    fputs("</table>\n", o);
}

static void put_run_facts(FILE *o, const struct report *r, const struct audit_report *v,
                          const json_t *e)
{
    const json_t *s = json_object_get(e, "summary"), *refused = json_object_get(e, "refused");
    const json_t *res = json_object_get(s, "result");
    fputs("<table class=\"facts\">\n", o);
    put_row(o, "run", json_object_get(s, "run"));
    put_row(o, "started", json_object_get(e, "first_ts"));
    if (json_is_number(json_object_get(res, "wall_ms"))) {
        char h[32];
        audit_human_ms(json_number_value(json_object_get(res, "wall_ms")), h);
        fprintf(o, "<tr><th>took</th><td>%s</td></tr>\n", h);
    }
    put_row(o, "uid", json_object_get(refused ? refused : s, "uid"));
    put_row(o, "host", json_object_get(s, "host"));
    put_row(o, "workspace", json_object_get(s, "workspace"));
    put_row(o, "policy digest", json_object_get(s, "policy_digest"));
    put_row(o, "policy signer", json_object_get(s, "policy_signer"));
    put_row(o, "network digest", json_object_get(s, "network_digest"));
    if (json_object_get(e, "levels_skipped"))
        put_row(o, "levels skipped", json_object_get(e, "levels_skipped"));
    if (json_object_get(e, "session"))
        put_row(o, "session", json_object_get(e, "session"));
    if (json_object_get(e, "policy_flags"))
        put_row(o, "flags", json_object_get(e, "policy_flags"));
    if (refused) {
        put_row(o, "front end", json_object_get(refused, "front_end"));
        put_row(o, "refused because", json_object_get(refused, "reason"));
    }
    if (json_object_get(res, "error"))
        put_row(o, "error", json_object_get(res, "error"));
    put_run_verdict(o, r, v, (uint64_t)json_integer_value(json_object_get(e, "last_line")));
    fputs("</table>\n", o);
}

static void put_run(FILE *o, const struct report *r, const struct audit_report *v, size_t i,
                    const json_t *e)
{
    const json_t *s = json_object_get(e, "summary");
    const json_t *refused = json_object_get(e, "refused");
    char text[64];
    const char *cls = outcome(e, text, sizeof text);
    fprintf(o, "<article class=\"run\" id=\"run-%zu\" data-run=\"", i + 1);
    put_text(o, str_of(s, "run"));
    fputs("\">\n<h2>run <span class=\"mono\">", o);
    put_short_id(o, str_of(s, "run"));
    fputs("</span><span class=\"badge level\">", o);
    put_text(o, str_of(s, "level") ?: "no level");
    fprintf(o, "</span><span class=\"badge %s\">%s</span></h2>\n<pre class=\"argv\">$ ", cls, text);
    char *cmd = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&cmd, &n);
    if (m) {
        audit_put_command(m, json_object_get(refused ? refused : s, "argv"), 4096);
        fclose(m);
    }
    put_text(o, cmd);
    free(cmd);
    fputs("</pre>\n", o);
    put_run_facts(o, r, v, e);
    put_break_glass(o, s);
    put_limits(o, s);
    put_egress(o, s);
    put_tools(o, s);
    fputs("</article>\n", o);
}

int audit_html(const char *path, const struct audit_html_options *o, FILE *out,
               struct cordon_err *err)
{
    struct audit_report v;
    if (audit_verify(path, o->pubkey, o->witness, &v, err) < 0)
        return -1;
    struct report r = { .o = o, .runs = json_array(), .index = json_object() };
    int rc = r.runs && r.index ? audit_walk(path, collect, &r, err)
                               : err_set(err, CORDON_E_INTERNAL, "out of memory");
    if (rc == 0 && o->run && !json_array_size(r.runs))
        rc = err_set(err, CORDON_E_USAGE, "no run '%s' in audit log '%s'", o->run, path);
    if (rc == 0) {
        put_head(out, path);
        fputs("<header><h1>cordon audit report</h1>\n<p>log <span class=\"mono\">", out);
        put_text(out, path);
        fputs("</span>", out);
        if (r.header) {
            fputs(", opened on ", out);
            put_value(out, json_object_get(r.header, "host"));
            fputs(" at ", out);
            put_value(out, json_object_get(r.header, "ts"));
        }
        fprintf(out, "; %zu run%s shown%s</p>\n", json_array_size(r.runs),
                json_array_size(r.runs) == 1 ? "" : "s", o->run ? " (--run)" : "");
        put_chain(out, &v, o);
        if (r.bad_lines)
            fprintf(out,
                    "<p class=\"warn\">%llu line%s of the file %s no event and %s not "
                    "shown.</p>\n",
                    (unsigned long long)r.bad_lines, r.bad_lines == 1 ? "" : "s",
                    r.bad_lines == 1 ? "is" : "are", r.bad_lines == 1 ? "is" : "are");
        fputs("</header>\n", out);
        put_timeline(out, r.runs);
        size_t i;
        json_t *e;
        json_array_foreach(r.runs, i, e) put_run(out, &r, &v, i, e);
        fputs("</body></html>\n", out);
        if (fflush(out) != 0 || ferror(out))
            rc = err_sys(err, CORDON_E_SETUP, "cannot write the report");
    }
    json_decref(r.runs);
    json_decref(r.index);
    json_decref(r.header);
    return rc < 0 ? -1 : v.intact ? 0 : 1;
}
