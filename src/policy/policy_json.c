/*
 * policy/policy_json.c: the effective policy as JSON, every default spelled
 * out, its SHA-256 digests, and the evidence each run's audit record
 * carries (those digests, computed once per policy). Pure: no syscalls.
 */
#include "policy/policy_int.h"

#include "common/digest.h"
#include "common/text.h"
#include "policy/syscall_table.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Steals V; returns -1 (and drops V) when either is missing. */
static int put(json_t *obj, const char *key, json_t *v)
{
    if (!obj || !v) {
        json_decref(v);
        return -1;
    }
    return json_object_set_new(obj, key, v) < 0 ? -1 : 0;
}

static json_t *strv_json(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        if (json_array_append_new(a, json_string(v[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *binds_json(const struct policy *p, bool writable)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < p->n_binds; i++) {
        if (p->binds[i].writable != writable)
            continue;
        json_t *b = json_pack("{s:s, s:s}", "source", p->binds[i].source, "dest", p->binds[i].dest);
        /* Only when set, so the digest of a policy without it is unchanged. */
        if (b && p->binds[i].follow_symlinks)
            json_object_set_new(b, "follow_symlinks", json_true());
        if (json_array_append_new(a, b) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *env_json(const struct policy *p)
{
    _cleanup_(json_decrefp) json_t *env = json_object();
    json_t *set = NULL;
    if (put(env, "pass", strv_json(p->env_pass, p->n_env_pass)) < 0 ||
        put(env, "set", set = json_object()) < 0)
        return NULL;
    for (size_t i = 0; i < p->n_env_set; i++)
        if (put(set, p->env_set[i].name, json_string(p->env_set[i].value)) < 0)
            return NULL;
    return TAKE_PTR(env);
}

/* The names of the limits in MASK (1u << enum policy_limit), in the enum's order. */
static json_t *limit_names_json(unsigned mask)
{
    json_t *a = json_array();
    for (int l = 0; a && l < POLICY_LIMIT_COUNT; l++)
        if ((mask & (1u << l)) && json_array_append_new(a, json_string(policy_limit_name(l))) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/*
 * "defaults" names the limits neither file nor flag set: they degrade where
 * this host cannot enforce them, so it is part of what the digest covers.
 */
static json_t *limits_json(const struct policy_limits *lim)
{
    /* clang-format off */
    _cleanup_(json_decrefp) json_t *o = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
        "wall_ms", (json_int_t)lim->wall_ms, "cpu_ms", (json_int_t)lim->cpu_ms,
        "memory", (json_int_t)lim->memory, "pids", (json_int_t)lim->pids,
        "output", (json_int_t)lim->output, "file_size", (json_int_t)lim->file_size,
        "open_files", (json_int_t)lim->open_files);
    /* clang-format on */
    if (put(o, "best_effort", limit_names_json(lim->best_effort)) < 0 ||
        put(o, "defaults", limit_names_json(lim->defaulted)) < 0)
        return NULL;
    return TAKE_PTR(o);
}

static json_t *audit_json(const struct policy_audit *a)
{
    /* clang-format off */
    json_t *o = json_pack("{s:o, s:o, s:I, s:s}",
                          "file", a->file ? json_string(a->file) : json_null(),
                          "sign_key", a->sign_key ? json_string(a->sign_key) : json_null(),
                          "checkpoint_every", (json_int_t)a->checkpoint_every,
                          "fsync", policy_choice_name(&policy_fsyncs, (int)a->fsync));
    /* clang-format on */
    /* Only where set: a policy without one keeps the digest it had. */
    if (o && a->witness && put(o, "witness", json_string(a->witness)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *network_json(const struct policy_network *n)
{
    _cleanup_(json_decrefp) json_t *o = json_object();
    if (put(o, "mode", json_string(policy_choice_name(&policy_net_modes, (int)n->mode))) < 0 ||
        put(o, "allow", strv_json(n->allow, n->n_allow)) < 0 ||
        /* Only where named: a policy without one keeps the digest it had. */
        (n->n_presets && put(o, "presets", policy_presets_json(n, false)) < 0) ||
        put(o, "deny", strv_json(n->deny, n->n_deny)) < 0 ||
        (n->n_ask && put(o, "ask", strv_json(n->ask, n->n_ask)) < 0) ||
        (n->n_expose && put(o, "expose", strv_json(n->expose, n->n_expose)) < 0) ||
        put(o, "allow_private", strv_json(n->allow_private, n->n_allow_private)) < 0 ||
        put(o, "resolve", strv_json(n->resolve, n->n_resolve)) < 0 ||
        put(o, "dns", strv_json(n->dns, n->n_dns)) < 0 ||
        put(o, "upstream_ca", n->upstream_ca ? json_string(n->upstream_ca) : json_null()) < 0 ||
        /* clang-format off */
        put(o, "budgets", json_pack("{s:I, s:I, s:I, s:I}",
                                    "requests", (json_int_t)n->requests,
                                    "bytes", (json_int_t)n->bytes,
                                    "connections", (json_int_t)n->connections,
                                    "request_rate", (json_int_t)n->request_rate)) < 0)
        /* clang-format on */
        return NULL;
    return TAKE_PTR(o);
}

static json_t *arg_rule_json(const struct policy_arg_rule *r)
{
    _cleanup_(json_decrefp) json_t *o = json_object();
    if (put(o, "under", strv_json(r->under, r->n_under)) < 0 ||
        put(o, "deny", strv_json(r->deny, r->n_deny)) < 0 ||
        put(o, "max_length", json_integer((json_int_t)r->max_length)) < 0 ||
        put(o, "pattern", r->pattern ? json_string(r->pattern) : json_null()) < 0)
        return NULL;
    return TAKE_PTR(o);
}

static json_t *tools_json(const struct policy_tools *t)
{
    _cleanup_(json_decrefp) json_t *o = json_object();
    json_t *rules = NULL;
    if (put(o, "allow", strv_json(t->allow, t->n_allow)) < 0 ||
        put(o, "rules", rules = json_object()) < 0)
        return NULL;
    for (size_t i = 0; i < t->n_rules; i++) {
        json_t *args = NULL;
        if (put(rules, t->rules[i].tool, args = json_object()) < 0)
            return NULL;
        for (size_t j = 0; j < t->rules[i].n_args; j++)
            if (put(args, t->rules[i].args[j].arg, arg_rule_json(&t->rules[i].args[j])) < 0)
                return NULL;
    }
    if (put(o, "max_calls", json_integer((json_int_t)t->max_calls)) < 0 ||
        put(o, "max_result_bytes", json_integer((json_int_t)t->max_result_bytes)) < 0 ||
        put(o, "max_message_bytes", json_integer((json_int_t)t->max_message_bytes)) < 0 ||
        put(o, "call_timeout_ms", json_integer((json_int_t)t->call_timeout_ms)) < 0 ||
        put(o, "record_arguments", json_boolean(t->record_arguments)) < 0 ||
        put(o, "resources", json_boolean(t->resources)) < 0 ||
        put(o, "prompts", json_boolean(t->prompts)) < 0 ||
        put(o, "logging", json_boolean(t->logging)) < 0 ||
        put(o, "sampling", json_boolean(t->sampling)) < 0 ||
        put(o, "elicitation", json_boolean(t->elicitation)) < 0 ||
        put(o, "roots", json_boolean(t->roots)) < 0)
        return NULL;
    /* Only when set, so the digest of a policy without them is unchanged. */
    if ((t->n_ask && put(o, "ask", strv_json(t->ask, t->n_ask)) < 0) ||
        (t->pins && put(o, "pins", json_string(t->pins)) < 0) ||
        (t->n_pinned && put(o, "pinned", strv_json(t->pinned, t->n_pinned)) < 0))
        return NULL;
    return TAKE_PTR(o);
}

/* References only: the policy never holds a secret's value. */
static json_t *secrets_json(const struct policy *p)
{
    _cleanup_(json_decrefp) json_t *a = json_array();
    for (size_t i = 0; a && i < p->n_secrets; i++) {
        const struct policy_secret *s = &p->secrets[i];
        if (json_array_append_new(a,
                                  json_pack("{s:s, s:s, s:o, s:I}", "name", s->name, "from",
                                            s->from, "hosts", strv_json(s->hosts, s->n_hosts),
                                            "ttl_ms", (json_int_t)s->ttl_ms)) < 0)
            return NULL;
    }
    return TAKE_PTR(a);
}

/*
 * origin is left out on purpose: the same rules loaded from another file
 * name, or written as JSON instead of YAML, must have the same digest.
 */
/* One level as a name; with fallbacks, the list in the order they are tried. */
static json_t *isolation_json(const struct policy *p)
{
    if (!p->n_level_fallbacks)
        return json_string(cordon_level_name(p->level));
    json_t *a = json_array();
    json_array_append_new(a, json_string(cordon_level_name(p->level)));
    for (size_t i = 0; i < p->n_level_fallbacks; i++)
        json_array_append_new(a, json_string(cordon_level_name(p->level_fallbacks[i])));
    return a;
}

json_t *policy_to_json(const struct policy *p)
{
    _cleanup_(json_decrefp) json_t *root = json_object();
    json_t *fs = NULL, *sc = NULL;
    if (put(root, "version", json_integer(p->version)) < 0 ||
        put(root, "isolation", isolation_json(p)) < 0 ||
        /* Only when set: every other policy keeps the digest it had. */
        (p->microvm_accel != POLICY_ACCEL_KVM &&
         put(root, "microvm",
             json_pack("{s:s}", "accel",
                       policy_choice_name(&policy_accels, (int)p->microvm_accel))) < 0) ||
        (p->workspace_mode != POLICY_WS_DIRECT &&
         put(root, "workspace",
             json_pack("{s:s, s:s}", "mode",
                       policy_choice_name(&policy_ws_modes, (int)p->workspace_mode), "commit",
                       policy_choice_name(&policy_ws_commits, (int)p->workspace_commit))) < 0) ||
        put(root, "filesystem", fs = json_object()) < 0 ||
        put(fs, "workspace", p->workspace ? json_string(p->workspace) : json_null()) < 0 ||
        put(fs, "workspace_size", json_integer((json_int_t)p->workspace_size)) < 0 ||
        put(fs, "tmp_size", json_integer((json_int_t)p->tmp_size)) < 0 ||
        (p->workspace_follow_symlinks && put(fs, "workspace_follow_symlinks", json_true()) < 0) ||
        put(fs, "shm_size", json_integer((json_int_t)p->shm_size)) < 0 ||
        put(fs, "workspace_inodes", json_integer((json_int_t)p->workspace_inodes)) < 0 ||
        put(fs, "tmp_inodes", json_integer((json_int_t)p->tmp_inodes)) < 0 ||
        put(fs, "shm_inodes", json_integer((json_int_t)p->shm_inodes)) < 0 ||
        put(fs, "read_only", binds_json(p, false)) < 0 ||
        put(fs, "read_write", binds_json(p, true)) < 0 ||
        put(fs, "protected", strv_json(p->protected, p->n_protected)) < 0 ||
        put(fs, "unsafe_unprotect", strv_json(p->unprotect, p->n_unprotect)) < 0 ||
        put(fs, "unix_sockets", strv_json(p->unix_sockets, p->n_unix_sockets)) < 0 ||
        put(root, "env", env_json(p)) < 0 || put(root, "limits", limits_json(&p->limits)) < 0)
        return NULL;
    if (put(root, "syscalls", sc = json_object()) < 0 ||
        put(sc, "allow", strv_json(p->syscalls_allow, p->n_syscalls_allow)) < 0 ||
        put(sc, "deny", strv_json(p->syscalls_deny, p->n_syscalls_deny)) < 0)
        return NULL;
    if (put(root, "network", network_json(&p->network)) < 0 ||
        put(root, "secrets", secrets_json(p)) < 0 ||
        put(root, "tools", tools_json(&p->tools)) < 0 ||
        put(root, "audit", audit_json(&p->audit)) < 0 || policy_gov_json(p, root) < 0)
        return NULL;
    return TAKE_PTR(root);
}

/* SHA-256 of J's canonical text; steals J. */
static void json_digest(json_t *j, unsigned char out[32])
{
    json_sha256(j, out);
    json_decref(j);
}

void policy_digest(const struct policy *p, unsigned char out[32])
{
    json_digest(policy_to_json(p), out);
}

void policy_digest_hex(const struct policy *p, char out[65])
{
    unsigned char d[32];
    policy_digest(p, d);
    hex_encode(d, sizeof d, out);
}

void policy_network_digest_hex(const struct policy *p, char out[65])
{
    unsigned char d[32];
    json_digest(network_json(&p->network), d);
    hex_encode(d, sizeof d, out);
}

void policy_tools_digest_hex(const struct policy *p, char out[65])
{
    unsigned char d[32];
    json_digest(tools_json(&p->tools), d);
    hex_encode(d, sizeof d, out);
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

void policy_derive(const struct policy *base, struct policy *out)
{
    *out = *base;
    /* Its digests are its own, computed at its first run: none of BASE's. */
    memset(&out->evidence, 0, sizeof out->evidence);
    out->evidence_done = false;
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
