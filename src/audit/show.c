/*
 * audit/show.c: `cordon audit show`: the log as a timeline for a person at
 * a terminal (runs with their decisions and results, one block per run) or,
 * with --json, the matching lines passed through byte for byte. Runs in the
 * CLI; checks nothing (that is verify's job) and never stops at a bad line.
 */
#include "audit/audit.h"
#include "audit/audit_int.h"
#include "common/json.h"
#include "common/text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/*
 * Concurrent runs interleave in the file, so each run's lines are gathered
 * into a block of its own and the blocks printed in order of first line.
 */
struct block {
    char *run; /* NULL: an event outside any run */
    char *text;
    size_t len;
    FILE *mem; /* open_memstream() on text while filling */
    bool started, ended;
};

struct show {
    const struct audit_filter *f;
    struct block *blocks;
    size_t n_blocks, cap_blocks;
    size_t *index; /* run id -> block + 1, open addressing */
    size_t index_cap, n_runs;
    uint64_t checkpoints;
    FILE *out; /* --json passes lines through here */
};

static struct block *new_block(struct show *s, const char *run)
{
    if (s->n_blocks == s->cap_blocks) {
        size_t cap = s->cap_blocks ? 2 * s->cap_blocks : 16;
        struct block *b = realloc(s->blocks, cap * sizeof *b);
        if (!b)
            return NULL;
        s->blocks = b;
        s->cap_blocks = cap;
    }
    struct block *b = &s->blocks[s->n_blocks];
    *b = (struct block){ 0 };
    if (run && !(b->run = strdup(run)))
        return NULL;
    if (!(b->mem = open_memstream(&b->text, &b->len))) {
        free(b->run);
        return NULL;
    }
    s->n_blocks++;
    return b;
}

static int index_insert(size_t *slots, size_t cap, const struct block *blocks, size_t bi)
{
    size_t j = text_hash64(blocks[bi].run) & (cap - 1);
    while (slots[j])
        j = (j + 1) & (cap - 1);
    slots[j] = bi + 1;
    return 0;
}

/* The block of RUN, created on its first event. */
static struct block *run_block(struct show *s, const char *run)
{
    if (s->index_cap) {
        for (size_t j = text_hash64(run) & (s->index_cap - 1); s->index[j];
             j = (j + 1) & (s->index_cap - 1))
            if (!strcmp(s->blocks[s->index[j] - 1].run, run))
                return &s->blocks[s->index[j] - 1];
    }
    if ((s->n_runs + 1) * 2 > s->index_cap) {
        size_t cap = s->index_cap ? 2 * s->index_cap : 64;
        size_t *slots = calloc(cap, sizeof *slots);
        if (!slots)
            return NULL;
        for (size_t i = 0; i < s->n_blocks; i++)
            if (s->blocks[i].run)
                index_insert(slots, cap, s->blocks, i);
        free(s->index);
        s->index = slots;
        s->index_cap = cap;
    }
    struct block *b = new_block(s, run);
    if (!b)
        return NULL;
    index_insert(s->index, s->index_cap, s->blocks, s->n_blocks - 1);
    s->n_runs++;
    return b;
}

/* ---- formatting ---- */

/* "2026-12-02T15:04:05.123456Z" -> "2026-12-02 15:04:05.123" */
void audit_short_time(const char *ts, char out[32])
{
    if (ts && strlen(ts) >= 23 && ts[10] == 'T' && ts[19] == '.') {
        memcpy(out, ts, 23);
        out[10] = ' ';
        out[23] = '\0';
    } else {
        snprintf(out, 32, "%s", ts ? ts : "?");
    }
}

void audit_human_size(double b, char out[32])
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
    if (b < 1024) {
        snprintf(out, 32, "%.0f B", b);
        return;
    }
    int u = -1;
    while (b >= 1024 && u < 3) {
        b /= 1024;
        u++;
    }
    snprintf(out, 32, "%.1f %s", b, units[u]);
}

void audit_human_ms(double ms, char out[32])
{
    if (ms < 1000)
        snprintf(out, 32, "%.1f ms", ms);
    else if (ms < 60000)
        snprintf(out, 32, "%.2f s", ms / 1000);
    else if (ms < 3600000)
        snprintf(out, 32, "%dm%02ds", (int)(ms / 60000), (int)(ms / 1000) % 60);
    else
        snprintf(out, 32, "%dh%02dm", (int)(ms / 3600000), (int)(ms / 60000) % 60);
}

static bool num(json_t *ev, const char *key, double *out)
{
    json_t *v = json_object_get(ev, key);
    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return true;
}

/* A word the shell would take as is; anything else goes in single quotes. */
static void put_shell_word(FILE *o, const char *w)
{
    bool plain = w[0] != '\0';
    for (const char *p = w; *p && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                       "-_./=:,+@%",
                       *p) != NULL;
    if (plain) {
        fputs(w, o);
        return;
    }
    fputc('\'', o);
    for (const char *p = w; *p; p++) {
        if (*p == '\'')
            fputs("'\\''", o);
        else if ((unsigned char)*p < 0x20 || *p == 0x7f)
            fputc('?', o); /* a control character must not drive the terminal */
        else
            fputc(*p, o);
    }
    fputc('\'', o);
}

void audit_put_command(FILE *o, const json_t *argv, size_t max)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m)
        return;
    size_t i;
    json_t *a;
    json_array_foreach(argv, i, a)
    {
        if (i)
            fputc(' ', m);
        put_shell_word(m, json_is_string(a) ? json_string_value(a) : "?");
    }
    fclose(m);
    if (len > max && max > 3)
        fprintf(o, "%.*s...", (int)(max - 3), text);
    else
        fputs(text, o);
    free(text);
}

/* Strings bare when they are plain words, anything else as compact JSON. */
static void put_fields(FILE *o, json_t *ev)
{
    const char *key;
    json_t *v;
    json_object_foreach(ev, key, v)
    {
        if (!strcmp(key, "seq") || !strcmp(key, "ts") || !strcmp(key, "run") ||
            !strcmp(key, "type") || !strcmp(key, "prev"))
            continue;
        fprintf(o, " %s=", key);
        if (json_is_string(v)) {
            put_shell_word(o, json_string_value(v));
            continue;
        }
        char *s =
            json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
        if (s && strlen(s) > 120)
            fprintf(o, "%.117s...", s);
        else
            fputs(s ? s : "?", o);
        free(s);
    }
}

static void put_end(FILE *o, json_t *ev)
{
    const char *reason = json_string_value(json_object_get(ev, "reason"));
    json_t *sig = json_object_get(ev, "signal"), *code = json_object_get(ev, "exit_code");
    double status = 0, ms = 0, out = 0, more = 0;
    fputs("  end ", o);
    if (reason && !strcmp(reason, "exited") && json_is_integer(sig))
        fprintf(o, "killed by signal %lld", (long long)json_integer_value(sig));
    else if (reason && !strcmp(reason, "exited") && json_is_integer(code))
        fprintf(o, "exited %lld", (long long)json_integer_value(code));
    else
        fprintf(o, "%s", reason ? reason : "?");
    if ((!reason || strcmp(reason, "exited")) && num(ev, "status", &status))
        fprintf(o, " (status %.0f)", status);
    char h[32];
    bool first = true;
    if (num(ev, "wall_ms", &ms)) {
        audit_human_ms(ms, h);
        fprintf(o, " in %s", h);
        first = false;
    }
    if (num(ev, "cpu_ms", &ms)) {
        audit_human_ms(ms, h);
        fprintf(o, "%scpu %s", first ? " " : ", ", h);
        first = false;
    }
    if (num(ev, "peak_memory_bytes", &out) && out > 0) {
        audit_human_size(out, h);
        fprintf(o, "%speak %s", first ? " " : ", ", h);
        first = false;
    }
    bool have_out = num(ev, "stdout_bytes", &out);
    if (num(ev, "stderr_bytes", &more) || have_out) {
        audit_human_size(out + more, h);
        fprintf(o, "%sout %s", first ? " " : ", ", h);
    }
    const char *error = json_string_value(json_object_get(ev, "error"));
    if (error) {
        fputs("\n      ", o);
        for (const char *p = error; *p; p++)
            fputc(*p == '\n' ? ' ' : *p, o);
    }
    fputc('\n', o);
}

/* A run refused before it started: who tried what, and why not. */
static void put_refused(FILE *o, json_t *ev, const char *run, const char *when)
{
    const char *front = json_string_value(json_object_get(ev, "front_end"));
    json_t *uid = json_object_get(ev, "uid");
    fprintf(o, "run %.8s  %s  refused   uid %-5lld  %s", run ? run : "-", when,
            json_is_integer(uid) ? (long long)json_integer_value(uid) : -1LL, front ? front : "?");
    json_t *argv = json_object_get(ev, "argv");
    if (json_array_size(argv)) {
        fputs(" $ ", o);
        audit_put_command(o, argv, 100);
    }
    const char *reason = json_string_value(json_object_get(ev, "reason"));
    fputs("\n      ", o);
    for (const char *p = reason ? reason : "?"; *p; p++)
        fputc(*p == '\n' ? ' ' : *p, o);
    fputc('\n', o);
}

static void put_event(struct show *s, FILE *o, json_t *ev, const char *type, const char *run)
{
    char when[32];
    audit_short_time(json_string_value(json_object_get(ev, "ts")), when);
    if (!strcmp(type, AUDIT_TYPE_HEADER)) {
        const char *host = json_string_value(json_object_get(ev, "host"));
        const char *version = json_string_value(json_object_get(ev, "cordon_version"));
        fprintf(o, "log opened on %s  %s  (cordon %s)\n", host ? host : "?", when,
                version ? version : "?");
    } else if (!strcmp(type, AUDIT_TYPE_CHECKPOINT)) {
        const char *key = json_string_value(json_object_get(ev, "key_id"));
        fprintf(o, "checkpoint #%llu signed  %s  (key %.8s...)\n",
                (unsigned long long)++s->checkpoints, when, key ? key : "?");
    } else if (!strcmp(type, "run.start")) {
        const char *level = json_string_value(json_object_get(ev, "level"));
        json_t *uid = json_object_get(ev, "uid");
        char uidtext[24] = "?";
        if (json_is_integer(uid))
            snprintf(uidtext, sizeof uidtext, "%lld", (long long)json_integer_value(uid));
        fprintf(o, "run %.8s  %s  %-9s  uid %-5s  $ ", run ? run : "-", when, level ? level : "?",
                uidtext);
        audit_put_command(o, json_object_get(ev, "argv"), 100);
        fputc('\n', o);
    } else if (!strcmp(type, "run.end")) {
        put_end(o, ev);
    } else if (!strcmp(type, "run.refused")) {
        put_refused(o, ev, run, when);
    } else if (!strcmp(type, "limit.fired")) {
        const char *limit = json_string_value(json_object_get(ev, "limit"));
        const char *reason = json_string_value(json_object_get(ev, "reason"));
        fprintf(o, "  limit %s fired", limit ? limit : "?");
        if (reason)
            fprintf(o, " (%s)", reason);
        fputc('\n', o);
    } else {
        /* The time of day: a generic event's own line has no other anchor. */
        fprintf(o, "%s%s  %s", run ? "  " : "", type, strlen(when) == 23 ? when + 11 : when);
        put_fields(o, ev);
        fputc('\n', o);
    }
}

/* --type run matches run.start and run.end; --type run.end only itself. */
static bool type_matches(const char *want, const char *type)
{
    size_t n = strlen(want);
    return !strcmp(want, type) || (!strncmp(want, type, n) && type[n] == '.');
}

static int show_line(void *arg, const struct audit_line *l, struct cordon_err *err)
{
    struct show *s = arg;
    FILE *out = s->out;
    const char *type = l->type, *run = l->run;
    json_t *ev = l->ev;
    const struct audit_filter *f = s->f;
    bool filtered = f->run || f->type;
    if (ev &&
        ((f->run && (!run || strncmp(run, f->run, strlen(f->run)) != 0)) ||
         (f->type && !type_matches(f->type, type))))
        return 0;
    if (f->json) {
        /* Not an event: nothing a JSON reader downstream could use. */
        if (!ev)
            return 0;
        fwrite(l->text, 1, l->len, out);
        fputc('\n', out);
        return 0;
    }
    if (!ev) {
        if (filtered)
            return 0;
        struct block *b = new_block(s, NULL);
        if (!b)
            return err_set(err, CORDON_E_INTERNAL, "out of memory");
        fprintf(b->mem,
                l->nl ? "line %llu: not an event (see 'cordon audit verify')\n"
                      : "line %llu: truncated (the writer was interrupted)\n",
                (unsigned long long)l->no);
        return 0;
    }
    struct block *b = run ? run_block(s, run) : new_block(s, NULL);
    if (!b)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    /* A refused run never had a run.start: it begins (and ends) its block. */
    bool start = !strcmp(type, "run.start") || !strcmp(type, "run.refused");
    if (run && !b->started && !start && ftell(b->mem) == 0) {
        char when[32];
        audit_short_time(json_string_value(json_object_get(ev, "ts")), when);
        fprintf(b->mem, "run %.8s  %s  (its run.start is not shown)\n", run, when);
    }
    b->started |= start;
    b->ended |= !strcmp(type, "run.end") || !strcmp(type, "run.refused");
    put_event(s, b->mem, ev, type, run);
    return 0;
}

static void show_release(struct show *s)
{
    for (size_t i = 0; i < s->n_blocks; i++) {
        if (s->blocks[i].mem)
            fclose(s->blocks[i].mem);
        free(s->blocks[i].text);
        free(s->blocks[i].run);
    }
    free(s->blocks);
    free(s->index);
}

static void print_blocks(struct show *s, FILE *out)
{
    for (size_t i = 0; i < s->n_blocks; i++) {
        struct block *b = &s->blocks[i];
        if (b->run && b->started && !b->ended && !s->f->type)
            fputs("  (no run.end: still running, or its supervisor was killed)\n", b->mem);
        fclose(b->mem);
        b->mem = NULL;
        /* A blank line between runs, none between one-line log events. */
        bool spaced = b->run || (i > 0 && s->blocks[i - 1].run);
        if (i > 0 && spaced)
            fputc('\n', out);
        /* The log's strings are the run's: none of them may drive the terminal. */
        for (size_t j = 0; j < b->len; j++) {
            unsigned char c = (unsigned char)b->text[j];
            fputc((c < 0x20 && c != '\n') || c == 0x7f ? '?' : c, out);
        }
    }
}

int audit_walk(const char *path, audit_line_fn *fn, void *arg, struct cordon_err *err)
{
    _cleanup_fclose_ FILE *in = audit_open_reader(path, err);
    if (!in)
        return -1;
    _cleanup_free_ char *buf = malloc(AUDIT_MAX_LINE + 1);
    if (!buf)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    for (uint64_t no = 1;; no++) {
        struct audit_line l = { .no = no, .text = buf };
        int got = audit_read_line(in, buf, &l.len, &l.nl);
        if (got == 0)
            return 0;
        if (got == -2)
            return err_sys(err, CORDON_E_SETUP, "cannot read audit log '%s'", path);
        if (got == -1)
            continue; /* longer than any event: verify names it */
        json_auto_t *ev = json_parse_strict(buf, l.len, 0, NULL);
        l.type = json_string_value(json_object_get(ev, "type"));
        if (json_is_object(ev) && l.type) {
            l.ev = ev;
            l.run = json_string_value(json_object_get(ev, "run"));
        } else {
            l.type = NULL;
        }
        int rc = fn(arg, &l, err);
        if (rc)
            return rc < 0 ? -1 : 0;
    }
}

int audit_show(const char *path, const struct audit_filter *f, FILE *out, struct cordon_err *err)
{
    static const struct audit_filter none = { 0 };
    struct show s = { .f = f ? f : &none, .out = out };
    int rc = audit_walk(path, show_line, &s, err);
    if (rc == 0 && !s.f->json)
        print_blocks(&s, out);
    show_release(&s);
    if (rc == 0 && (fflush(out) != 0 || ferror(out)))
        return err_sys(err, CORDON_E_SETUP, "cannot write the timeline");
    return rc;
}
