/*
 * audit/evidence.c: `cordon evidence`: the record of the boundary one run
 * had, taken from the audit log, with every log line from the run's first
 * to the nearest signed checkpoint after its last, so that the record can
 * be checked offline: the lines chain, the checkpoint signs their head,
 * and the summary is exactly what the lines say. Runs in the CLI.
 */
#include "audit/audit.h"
#include "audit/audit_int.h"
#include "common/json.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define EVIDENCE_FORMAT "cordon-evidence v1"

static const char *str_of(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* FIELDS of EV (those present) into a new object. */
static json_t *pick(const json_t *ev, const char *const *fields)
{
    json_t *o = json_object();
    for (; *fields; fields++) {
        json_t *v = json_object_get(ev, *fields);
        if (v)
            json_object_set(o, *fields, v);
    }
    return o;
}

/* EV less the chain fields. */
static json_t *body(const json_t *ev)
{
    json_t *o = json_deep_copy(ev);
    static const char *const chain[] = { "seq", "ts", "run", "prev", "break_glass" };
    for (size_t i = 0; i < sizeof chain / sizeof chain[0]; i++)
        json_object_del(o, chain[i]);
    return o;
}

json_t *audit_summary_new(const char *run)
{
    return json_pack("{s:s, s:[], s:[], s:[], s:[], s:[]}", "run", run, "egress_decisions",
                     "tool_calls", "tool_changes", "limits_fired", "other_events");
}

void audit_summary_add(json_t *s, const json_t *ev)
{
    static const char *const start_keys[] = {
        "level",
        "policy_digest",
        "policy_signer",
        "network_digest",
        "tools_digest",
        "syscalls_digest",
        "secrets",
        "limits",
        "argv",
        "uid",
        "host",
        "workspace",
        "cordon_version",
        "network",
        NULL,
    };
    static const char *const end_keys[] = {
        "reason", "exit_code",         "signal",       "status",       "wall_ms",
        "cpu_ms", "peak_memory_bytes", "stdout_bytes", "stderr_bytes", "error",
        NULL,
    };
    const char *type = str_of(ev, "type");
    if (!s || !type)
        return;
    if (json_object_get(ev, "break_glass") && !json_object_get(s, "break_glass"))
        json_object_set(s, "break_glass", json_object_get(ev, "break_glass"));
    if (!strcmp(type, "run.start")) {
        json_auto_t *st = pick(ev, start_keys);
        json_object_update(s, st);
    } else if (!strcmp(type, "run.end")) {
        json_object_set_new(s, "result", pick(ev, end_keys));
        static const char *const more[] = { "enforcement", "egress", "workspace", "transaction",
                                            NULL };
        json_t *m = pick(ev, more);
        if (json_object_get(m, "enforcement"))
            json_object_set(s, "limits_enforced", json_object_get(m, "enforcement"));
        if (json_object_get(m, "egress"))
            json_object_set(s, "egress", json_object_get(m, "egress"));
        if (json_object_get(m, "transaction"))
            json_object_set(s, "transaction", json_object_get(m, "transaction"));
        json_decref(m);
    } else if (!strcmp(type, "egress.decision")) {
        json_array_append_new(json_object_get(s, "egress_decisions"), body(ev));
    } else if (!strcmp(type, "mcp.call")) {
        json_array_append_new(json_object_get(s, "tool_calls"), body(ev));
    } else if (!strcmp(type, "mcp.tool_changed")) {
        json_array_append_new(json_object_get(s, "tool_changes"), body(ev));
    } else if (!strcmp(type, "limit.fired")) {
        json_array_append_new(json_object_get(s, "limits_fired"), body(ev));
    } else if (!strcmp(type, "mcp.session")) {
        json_object_set(s, "mcp_server", json_object_get(ev, "server"));
    } else {
        json_array_append_new(json_object_get(s, "other_events"), json_string(type));
    }
}

/*
 * The summary of RUN from LINES (the evidence's "lines": {seq, sha256,
 * text}); the same function builds it and checks it, so a summary that
 * says more or other than its lines does not verify.
 */
static json_t *derive(const json_t *lines, const char *run)
{
    json_t *s = audit_summary_new(run);
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l)
    {
        json_auto_t *ev = json_parse_strict_str(str_of(l, "text") ?: "", 0, NULL);
        const char *r = str_of(ev, "run");
        if (r && !strcmp(r, run))
            audit_summary_add(s, ev);
    }
    return s;
}

json_t *audit_evidence(const char *path, const char *run_prefix, struct cordon_err *err)
{
    _cleanup_fclose_ FILE *f = audit_open_reader(path, err);
    if (!f)
        return NULL;
    _cleanup_free_ char *buf = malloc(AUDIT_MAX_LINE + 1);
    json_auto_t *lines = json_array();
    if (!buf || !lines) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    char run[33] = "";
    size_t last_mine = 0, n = 0;
    bool started = false;
    for (;;) {
        size_t len = 0;
        bool nl = false;
        int got = audit_read_line(f, buf, &len, &nl);
        if (got == 0 || (got == 1 && !nl))
            break;
        if (got < 0) {
            err_set(err, CORDON_E_POLICY, "audit log '%s': an unreadable line", path);
            return NULL;
        }
        json_auto_t *ev = json_parse_strict(buf, len, 0, NULL);
        const char *r = str_of(ev, "run");
        bool mine = false;
        if (r && strlen(r) == 32 && !strncmp(r, run_prefix, strlen(run_prefix))) {
            if (run[0] && strcmp(run, r) != 0) {
                err_set(err, CORDON_E_USAGE, "run id '%s' is ambiguous in '%s'", run_prefix, path);
                return NULL;
            }
            memcpy(run, r, 33);
            mine = started = true;
        }
        if (!started)
            continue;
        char sha[65];
        sha256_hex(buf, len, sha);
        json_t *seq = json_object_get(ev, "seq");
        json_array_append_new(lines,
                              json_pack("{s:O?, s:s, s:s%, s:b}", "seq", seq, "sha256", sha, "text",
                                        buf, len, "run", mine));
        n++;
        if (mine)
            last_mine = n;
    }
    if (!run[0]) {
        err_set(err, CORDON_E_USAGE, "no run '%s' in audit log '%s'", run_prefix, path);
        return NULL;
    }
    /* Keep up to the first checkpoint after our last line; without one, up to our last line. */
    size_t keep = last_mine;
    for (size_t i = last_mine; i < json_array_size(lines); i++) {
        json_auto_t *ev = json_parse_strict_str(str_of(json_array_get(lines, i), "text"), 0, NULL);
        if (!strcmp(str_of(ev, "type") ?: "", AUDIT_TYPE_CHECKPOINT)) {
            keep = i + 1;
            break;
        }
    }
    while (json_array_size(lines) > keep)
        json_array_remove(lines, json_array_size(lines) - 1);
    json_t *cp = NULL;
    json_auto_t *last =
        json_parse_strict_str(str_of(json_array_get(lines, keep - 1), "text"), 0, NULL);
    if (!strcmp(str_of(last, "type") ?: "", AUDIT_TYPE_CHECKPOINT)) {
        static const char *const cp_keys[] = { "seq", "head", "signed_seq", "key_id", "sig", NULL };
        cp = pick(last, cp_keys);
    }
    /* clang-format off */
    json_t *doc = json_pack("{s:s, s:s, s:o, s:{s:s, s:O, s:o}}", "format", EVIDENCE_FORMAT,
                            "run", run, "summary", derive(lines, run), "audit", "file", path,
                            "lines", lines, "checkpoint", cp ? cp : json_null());
    /* clang-format on */
    if (!doc)
        err_set(err, CORDON_E_INTERNAL, "out of memory");
    return doc;
}

int audit_evidence_verify(const json_t *doc, const char *pubkey, struct evidence_report *r,
                          struct cordon_err *err)
{
    *r = (struct evidence_report){ .intact = true };
    _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL;
    char key_id[65] = "";
    if (pubkey) {
        if (!(key = sigkey_load_public(pubkey, err)))
            return -1;
        sigkey_id(key, key_id);
    }
#define BAD(...) (r->intact = false, snprintf(r->why, sizeof r->why, __VA_ARGS__), 0)
    const char *fmt = str_of(doc, "format"), *run = str_of(doc, "run");
    json_t *audit = json_object_get(doc, "audit");
    json_t *lines = json_object_get(audit, "lines");
    if (!fmt || strcmp(fmt, EVIDENCE_FORMAT) != 0 || !run || !json_is_array(lines) ||
        !json_array_size(lines))
        return BAD("not a cordon evidence record");
    char prev[65] = "";
    uint64_t seq = 0;
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l)
    {
        const char *text = str_of(l, "text"), *sha = str_of(l, "sha256");
        char got[65];
        if (!text || !sha)
            return BAD("line %zu: no text or sha256", i + 1);
        sha256_hex(text, strlen(text), got);
        if (strcmp(got, sha) != 0)
            return BAD("line %zu: sha256 does not match its text", i + 1);
        json_auto_t *ev = json_parse_strict_str(text, 0, NULL);
        json_t *s = json_object_get(ev, "seq");
        const char *p = str_of(ev, "prev");
        if (!json_is_integer(s) || !p)
            return BAD("line %zu: not an audit event", i + 1);
        if (i > 0 && ((uint64_t)json_integer_value(s) != seq + 1 || strcmp(p, prev) != 0))
            return BAD("line %zu (seq %" PRId64 "): does not chain to the line before", i + 1,
                       (int64_t)json_integer_value(s));
        seq = (uint64_t)json_integer_value(s);
        memcpy(prev, got, sizeof prev);
        r->lines++;
    }
    json_auto_t *last =
        json_parse_strict_str(str_of(json_array_get(lines, r->lines - 1), "text"), 0, NULL);
    if (!strcmp(str_of(last, "type") ?: "", AUDIT_TYPE_CHECKPOINT)) {
        const char *head = str_of(last, "head"), *sig = str_of(last, "sig");
        const char *kid = str_of(last, "key_id");
        json_t *ss = json_object_get(last, "signed_seq");
        const char *before =
            r->lines > 1 ? str_of(json_array_get(lines, r->lines - 2), "sha256") : NULL;
        if (!head || !sig || !kid || !json_is_integer(ss) || !before || strcmp(head, before) ||
            (uint64_t)json_integer_value(ss) != seq - 1)
            return BAD("the checkpoint does not sign the line before it");
        r->checkpoint = true;
        snprintf(r->key_id, sizeof r->key_id, "%s", kid);
        if (key) {
            char msg[128];
            snprintf(msg, sizeof msg, AUDIT_SIGN_FMT, (unsigned long long)(seq - 1), head);
            if (strcmp(kid, key_id) != 0)
                return BAD("the checkpoint is signed by another key (key_id %.12s...)", kid);
            if (!sigkey_verify(key, msg, strlen(msg), sig))
                return BAD("bad checkpoint signature");
            r->signature_checked = true;
        }
    } else if (key) {
        return BAD("no signed checkpoint after the run's last line");
    }
    json_auto_t *want = derive(lines, run);
    if (!json_equal(want, json_object_get(doc, "summary")))
        return BAD("the summary is not what the lines say");
#undef BAD
    return 0;
}
