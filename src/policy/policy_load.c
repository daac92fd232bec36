/*
 * policy/policy_load.c: reads a policy file (YAML, or JSON which is YAML)
 * with libfyaml and feeds each value through the key table's setters, so
 * every diagnostic can name FILE:LINE and the key path. Runs in the CLI or
 * supervisor, never in the sandbox.
 */
#include "policy/policy_int.h"

#include "common/hostpath.h"
#include "common/text.h"

#include <libfyaml.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct loader {
    const char *file;
    struct fy_diag *diag;
    struct policy *p;
    struct cordon_err *err;
};

/* fy_diag_unref() alone would leak the collected error records. */
static void diag_destroyp(struct fy_diag **d)
{
    if (*d)
        fy_diag_destroy(*d);
}

static void parser_destroyp(struct fy_parser **fyp)
{
    if (*fyp)
        fy_parser_destroy(*fyp);
}

/*
 * libfyaml 0.7 has no public accessor for a node's position, but it reports
 * on a node through the document's diag object, which we set to collect:
 * the collected record carries the (1-based) line. Only used on error paths.
 */
static int line_of(struct loader *l, struct fy_node *n)
{
    if (!n)
        return 0;
    fy_node_report(n, FYET_ERROR, "position");
    void *it = NULL;
    struct fy_diag_error *e, *last = NULL;
    while ((e = fy_diag_errors_iterate(l->diag, &it)))
        last = e;
    return last && last->line > 0 ? last->line : 0;
}

__attribute__((format(printf, 4, 0))) static int vfail(struct loader *l, int line, const char *path,
                                                       const char *fmt, va_list ap)
{
    char msg[200];
    vsnprintf(msg, sizeof msg, fmt, ap);
    char loc[32] = "";
    if (line > 0)
        snprintf(loc, sizeof loc, ":%d", line);
    return err_set(l->err, CORDON_E_POLICY, "%s%s: %s%s%s", l->file, loc, path ? path : "",
                   path ? ": " : "", msg);
}

__attribute__((format(printf, 4, 5))) static int fail(struct loader *l, struct fy_node *at,
                                                      const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(l, line_of(l, at), path, fmt, ap);
    va_end(ap);
    return -1;
}

/*
 * An empty value has no token of its own, so no trustworthy position: report
 * it at the key (or list) that holds it.
 */
__attribute__((format(printf, 5, 6))) static int fail_near(struct loader *l, struct fy_node *at,
                                                           struct fy_node *near, const char *path,
                                                           const char *fmt, ...)
{
    int line = line_of(l, at);
    if (line <= 0)
        line = line_of(l, near);
    va_list ap;
    va_start(ap, fmt);
    vfail(l, line, path, fmt, ap);
    va_end(ap);
    return -1;
}

static int oom(struct loader *l)
{
    return err_set(l->err, CORDON_E_INTERNAL, "out of memory");
}

/* A setter's result, located at node AT. */
static int setter_result(struct loader *l, int r, struct fy_node *at, const char *path,
                         const char *why)
{
    if (r == POLICY_ENOMEM)
        return oom(l);
    if (r < 0)
        return fail(l, at, path, "%s", why);
    return 0;
}

/* An empty value, "~" or "null" (unquoted): the key keeps its default. */
static bool is_null(struct fy_node *n)
{
    if (!n)
        return true;
    if (fy_node_get_type(n) != FYNT_SCALAR || fy_node_get_style(n) != FYNS_PLAIN)
        return false;
    size_t len = 0;
    const char *s = fy_node_get_scalar(n, &len);
    return len == 0 || (len == 1 && s[0] == '~') ||
        (len == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4)));
}

static const char *kind_of(struct fy_node *n)
{
    if (is_null(n))
        return "null";
    switch (fy_node_get_type(n)) {
    case FYNT_SEQUENCE:
        return "a list";
    case FYNT_MAPPING:
        return "a mapping";
    default:
        return "a single value";
    }
}

/*
 * The scalar's text as a C string. *LEN keeps the real length so a value
 * with an embedded NUL ("\0" in a double-quoted scalar) can be refused.
 */
static int scalar_text(struct loader *l, struct fy_node *n, const char *path, const char *expect,
                       char **out, size_t *lenp)
{
    if (fy_node_is_alias(n))
        return fail(l, n, path, "YAML aliases are not supported");
    if (fy_node_get_type(n) != FYNT_SCALAR)
        return fail(l, n, path, "expected %s, got %s", expect, kind_of(n));
    size_t len = 0;
    const char *s = fy_node_get_scalar(n, &len);
    char *t = strndup(s ? s : "", len);
    if (!t)
        return oom(l);
    if (!lenp && strlen(t) != len) {
        free(t);
        return fail(l, n, path, "value contains a NUL byte");
    }
    if (lenp)
        *lenp = len;
    *out = t;
    return 0;
}

static int check_type(struct loader *l, struct fy_node *n, enum fy_node_type want, const char *path,
                      const char *expect)
{
    if (fy_node_is_alias(n))
        return fail(l, n, path, "YAML aliases are not supported");
    if (fy_node_get_type(n) != want)
        return fail(l, n, path, "expected %s, got %s", expect, kind_of(n));
    return 0;
}

/* One read_only/read_write item: "PATH[:DEST]" or {source, dest, follow_symlinks}. */
static int load_bind(struct loader *l, struct fy_node *n, struct fy_node *key, const char *path,
                     bool writable)
{
    char why[200] = "";
    _cleanup_free_ char *source = NULL;
    _cleanup_free_ char *dest = NULL;
    bool follow = false;
    if (!is_null(n) && fy_node_get_type(n) == FYNT_MAPPING) {
        void *it = NULL;
        struct fy_node_pair *pair;
        while ((pair = fy_node_mapping_iterate(n, &it))) {
            struct fy_node *k = fy_node_pair_key(pair), *v = fy_node_pair_value(pair);
            _cleanup_free_ char *name = NULL;
            TRY(scalar_text(l, k, path, "source, dest or follow_symlinks", &name, NULL));
            char sub[160];
            snprintf(sub, sizeof sub, "%s.%s", path, name);
            if (strcmp(name, "follow_symlinks") == 0) {
                _cleanup_free_ char *text = NULL;
                TRY(scalar_text(l, v, sub, "true or false", &text, NULL));
                int b = policy_parse_bool(text);
                if (b < 0)
                    return fail(l, v, sub, "expected true or false, got \"%s\"", text);
                follow = b;
                continue;
            }
            if (strcmp(name, "source") && strcmp(name, "dest"))
                return fail(l, k, sub, "unknown key; known: source, dest, follow_symlinks");
            if (is_null(v))
                return fail_near(l, NULL, k, sub, "expected a path, got null");
            TRY(scalar_text(l, v, sub, "a path", name[0] == 's' ? &source : &dest, NULL));
        }
        if (!source)
            return fail(l, n, path, "source: missing");
        return setter_result(
            l, policy_apply_bind(l->p, source, dest, writable, follow, FROM_FILE, why, sizeof why),
            n, path, why);
    }
    if (is_null(n))
        return fail_near(l, NULL, key, path, "expected a path, got null");
    _cleanup_free_ char *spec = NULL;
    TRY(scalar_text(l, n, path, "a path or {source, dest}", &spec, NULL));
    char *colon = strchr(spec, ':');
    if (colon)
        *colon = '\0';
    return setter_result(l,
                         policy_apply_bind(l->p, spec, colon ? colon + 1 : NULL, writable, false,
                                           FROM_FILE, why, sizeof why),
                         n, path, why);
}

static int load_secret(struct loader *l, struct fy_node *n, struct fy_node *near, const char *path);

static int load_list(struct loader *l, const struct policy_key *k, struct fy_node *key,
                     struct fy_node *n)
{
    char buf[160];
    TRY(check_type(l, n, FYNT_SEQUENCE, k->path, policy_key_expect(k, buf, sizeof buf)));
    void *it = NULL;
    struct fy_node *item;
    for (size_t i = 0; (item = fy_node_sequence_iterate(n, &it)); i++) {
        char path[96];
        snprintf(path, sizeof path, "%s[%zu]", k->path, i);
        if (k->type == KT_BINDS) {
            TRY(load_bind(l, item, key, path, k->flag));
            continue;
        }
        if (k->type == KT_SECRETS) {
            TRY(load_secret(l, item, key, path));
            continue;
        }
        const char *expect = policy_key_item_expect(k);
        if (is_null(item))
            return fail_near(l, NULL, key, path, "expected %s, got null", expect);
        _cleanup_free_ char *text = NULL;
        TRY(scalar_text(l, item, path, expect, &text, NULL));
        char why[200] = "";
        TRY(setter_result(l, policy_apply_item(l->p, k, text, why, sizeof why), item, path, why));
    }
    return 0;
}

/* isolation: [namespace, process]: the levels in order, joined as --level takes them. */
static int load_levels(struct loader *l, const struct policy_key *k, struct fy_node *n)
{
    char text[128] = "";
    void *it = NULL;
    struct fy_node *item;
    for (size_t i = 0; (item = fy_node_sequence_iterate(n, &it)); i++) {
        char path[96];
        snprintf(path, sizeof path, "%s[%zu]", k->path, i);
        _cleanup_free_ char *name = NULL;
        TRY(scalar_text(l, item, path, "a level name", &name, NULL));
        if (strchr(name, ',') || strlen(text) + strlen(name) + 2 > sizeof text)
            return fail(l, item, path, "expected a level name, got \"%s\"", name);
        if (i)
            strcat(text, ",");
        strcat(text, name);
    }
    if (!text[0])
        return fail(l, n, k->path, "expected at least one level, got an empty list");
    char why[200] = "";
    return setter_result(l, policy_apply_scalar(l->p, k, text, FROM_FILE, why, sizeof why), n,
                         k->path, why);
}

static int load_env_set(struct loader *l, const struct policy_key *k, struct fy_node *n)
{
    char expect[160];
    TRY(check_type(l, n, FYNT_MAPPING, k->path, policy_key_expect(k, expect, sizeof expect)));
    void *it = NULL;
    struct fy_node_pair *pair;
    while ((pair = fy_node_mapping_iterate(n, &it))) {
        struct fy_node *kn = fy_node_pair_key(pair), *v = fy_node_pair_value(pair);
        _cleanup_free_ char *name = NULL;
        TRY(scalar_text(l, kn, k->path, "a variable name", &name, NULL));
        char path[160];
        snprintf(path, sizeof path, "%s.%s", k->path, name);
        /* An empty value must be written "" so a forgotten value is not silently "". */
        if (is_null(v))
            return fail_near(l, NULL, kn, path, "expected a string, got null");
        _cleanup_free_ char *value = NULL;
        size_t vlen = 0;
        TRY(scalar_text(l, v, path, "a string", &value, &vlen));
        char why[200] = "";
        TRY(setter_result(l, policy_apply_env_set(l->p, name, value, vlen, why, sizeof why), v,
                          path, why));
    }
    return 0;
}

static void secret_releasep(struct policy_secret *s)
{
    policy_secret_release(s);
}

/* secrets[i].hosts: a list, at least one, each a name or *.suffix rule. */
static int load_secret_hosts(struct loader *l, struct policy_secret *s, struct fy_node *key,
                             struct fy_node *v, const char *path)
{
    if (is_null(v))
        return fail_near(l, NULL, key, path, "expected a list of host names, got null");
    TRY(check_type(l, v, FYNT_SEQUENCE, path, "a list of host names"));
    void *it = NULL;
    struct fy_node *item;
    size_t i = 0;
    for (; (item = fy_node_sequence_iterate(v, &it)); i++) {
        char sub[200];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        if (is_null(item))
            return fail_near(l, NULL, key, sub, "expected a host name, got null");
        _cleanup_free_ char *text = NULL;
        TRY(scalar_text(l, item, sub, "a host name", &text, NULL));
        char why[200] = "";
        TRY(setter_result(l, policy_secret_add_host(s, text, why, sizeof why), item, sub, why));
    }
    if (i == 0)
        return fail(l, v, path, "a secret needs at least one host");
    return 0;
}

/* One secrets item: {name, from, hosts, ttl}; each error names its field. */
static int load_secret(struct loader *l, struct fy_node *n, struct fy_node *near, const char *path)
{
    static const char expect[] = "a mapping of name, from, hosts, ttl";
    if (is_null(n))
        return fail_near(l, NULL, near, path, "expected %s, got null", expect);
    TRY(check_type(l, n, FYNT_MAPPING, path, expect));
    _cleanup_(secret_releasep) struct policy_secret s = { 0 };
    struct fy_node *name_at = NULL;
    void *it = NULL;
    struct fy_node_pair *pair;
    while ((pair = fy_node_mapping_iterate(n, &it))) {
        struct fy_node *k = fy_node_pair_key(pair), *v = fy_node_pair_value(pair);
        _cleanup_free_ char *field = NULL;
        TRY(scalar_text(l, k, path, "a key name", &field, NULL));
        char sub[160];
        snprintf(sub, sizeof sub, "%s.%s", path, field);
        char why[200] = "";
        if (strcmp(field, "hosts") == 0) {
            TRY(load_secret_hosts(l, &s, k, v, sub));
            continue;
        }
        const char *what = !strcmp(field, "name") ? "a variable name"
            : !strcmp(field, "from")              ? "env:VAR or file:PATH"
            : !strcmp(field, "ttl")               ? "a duration like 30s, 2m or 500ms"
                                                  : NULL;
        if (!what)
            return fail(l, k, sub, "unknown key; known: name, from, hosts, ttl");
        /* A null ttl is the default (the run's lifetime); name and from have none. */
        if (is_null(v)) {
            if (field[0] == 't')
                continue;
            return fail_near(l, NULL, k, sub, "expected %s, got null", what);
        }
        _cleanup_free_ char *text = NULL;
        TRY(scalar_text(l, v, sub, what, &text, NULL));
        int r;
        if (field[0] == 'n') {
            r = policy_secret_set_name(&s, text, why, sizeof why);
            name_at = v;
        } else if (field[0] == 'f') {
            r = policy_secret_set_from(&s, text, FROM_FILE, why, sizeof why);
        } else {
            r = policy_secret_set_ttl(&s, text, why, sizeof why);
        }
        TRY(setter_result(l, r, v, sub, why));
    }
    if (!s.name)
        return fail(l, n, path, "name: missing");
    if (!s.from)
        return fail(l, n, path, "from: missing");
    if (!s.n_hosts)
        return fail(l, n, path, "hosts: missing");
    char sub[160], why[200] = "";
    snprintf(sub, sizeof sub, "%s.name", path);
    return setter_result(l, policy_add_secret(l->p, &s, why, sizeof why), name_at, sub, why);
}

/* A list of scalars under PATH, each handed to ADD (one argument rule's under or deny). */
static int load_rule_list(struct loader *l, struct policy_arg_rule *r, struct fy_node *key,
                          struct fy_node *v, const char *path, const char *expect,
                          int (*add)(struct policy_arg_rule *, const char *, char *, size_t))
{
    if (is_null(v))
        return fail_near(l, NULL, key, path, "expected a list of %ss, got null", expect);
    TRY(check_type(l, v, FYNT_SEQUENCE, path, "a list"));
    void *it = NULL;
    struct fy_node *item;
    for (size_t i = 0; (item = fy_node_sequence_iterate(v, &it)); i++) {
        char sub[600];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        if (is_null(item))
            return fail_near(l, NULL, key, sub, "expected a %s, got null", expect);
        _cleanup_free_ char *text = NULL;
        TRY(scalar_text(l, item, sub, expect, &text, NULL));
        char why[200] = "";
        TRY(setter_result(l, add(r, text, why, sizeof why), item, sub, why));
    }
    return 0;
}

static void arg_rule_releasep(struct policy_arg_rule *r)
{
    policy_arg_rule_release(r);
}

/* tools.rules.TOOL.ARG: {under, deny, max_length, pattern}. */
static int load_arg_rule(struct loader *l, const char *tool, const char *arg, struct fy_node *key,
                         struct fy_node *n, const char *path)
{
    static const char expect[] = "a mapping of under, deny, max_length, pattern";
    if (is_null(n))
        return fail_near(l, NULL, key, path, "expected %s, got null", expect);
    TRY(check_type(l, n, FYNT_MAPPING, path, expect));
    _cleanup_(arg_rule_releasep) struct policy_arg_rule r = { 0 };
    void *it = NULL;
    struct fy_node_pair *pair;
    while ((pair = fy_node_mapping_iterate(n, &it))) {
        struct fy_node *k = fy_node_pair_key(pair), *v = fy_node_pair_value(pair);
        _cleanup_free_ char *field = NULL;
        TRY(scalar_text(l, k, path, "a key name", &field, NULL));
        char sub[512], why[200] = "";
        snprintf(sub, sizeof sub, "%s.%s", path, field);
        if (!strcmp(field, "under")) {
            TRY(load_rule_list(l, &r, k, v, sub, "directory", policy_arg_rule_add_under));
            continue;
        }
        if (!strcmp(field, "deny")) {
            TRY(load_rule_list(l, &r, k, v, sub, "glob", policy_arg_rule_add_deny));
            continue;
        }
        bool is_len = !strcmp(field, "max_length");
        if (!is_len && strcmp(field, "pattern"))
            return fail(l, k, sub, "unknown key; known: under, deny, max_length, pattern");
        const char *what = is_len ? "a whole number" : "a regular expression";
        if (is_null(v))
            return fail_near(l, NULL, k, sub, "expected %s, got null", what);
        _cleanup_free_ char *text = NULL;
        TRY(scalar_text(l, v, sub, what, &text, NULL));
        int rc = is_len ? policy_arg_rule_set_max_length(&r, text, why, sizeof why)
                        : policy_arg_rule_set_pattern(&r, text, why, sizeof why);
        TRY(setter_result(l, rc, v, sub, why));
    }
    char why[200] = "";
    return setter_result(l, policy_add_arg_rule(l->p, tool, arg, &r, why, sizeof why), n, path,
                         why);
}

/* tools.rules: TOOL: {ARG: rule}. */
static int load_tool_rules(struct loader *l, const struct policy_key *k, struct fy_node *n)
{
    char expect[160];
    TRY(check_type(l, n, FYNT_MAPPING, k->path, policy_key_expect(k, expect, sizeof expect)));
    void *it = NULL;
    struct fy_node_pair *pair;
    while ((pair = fy_node_mapping_iterate(n, &it))) {
        struct fy_node *tk = fy_node_pair_key(pair), *tv = fy_node_pair_value(pair);
        _cleanup_free_ char *tool = NULL;
        TRY(scalar_text(l, tk, k->path, "a tool name", &tool, NULL));
        char tpath[256];
        snprintf(tpath, sizeof tpath, "%s.%s", k->path, tool);
        if (is_null(tv))
            return fail_near(l, NULL, tk, tpath, "expected a mapping of ARGUMENT: rule, got null");
        TRY(check_type(l, tv, FYNT_MAPPING, tpath, "a mapping of ARGUMENT: rule"));
        void *ait = NULL;
        struct fy_node_pair *apair;
        while ((apair = fy_node_mapping_iterate(tv, &ait))) {
            struct fy_node *ak = fy_node_pair_key(apair);
            _cleanup_free_ char *arg = NULL;
            TRY(scalar_text(l, ak, tpath, "an argument name", &arg, NULL));
            char apath[384];
            snprintf(apath, sizeof apath, "%s.%s", tpath, arg);
            TRY(load_arg_rule(l, tool, arg, ak, fy_node_pair_value(apair), apath));
        }
    }
    return 0;
}

static int load_value(struct loader *l, const struct policy_key *k, struct fy_node *key,
                      struct fy_node *v);

/* A mapping of keys under SECTION ("" for the top level). */
static int load_section(struct loader *l, const char *section, struct fy_node *n)
{
    void *it = NULL;
    struct fy_node_pair *pair;
    while ((pair = fy_node_mapping_iterate(n, &it))) {
        struct fy_node *kn = fy_node_pair_key(pair), *v = fy_node_pair_value(pair);
        _cleanup_free_ char *name = NULL;
        TRY(scalar_text(l, kn, section[0] ? section : NULL, "a key name", &name, NULL));
        char path[128];
        int w = snprintf(path, sizeof path, "%s%s%s", section, section[0] ? "." : "", name);
        const struct policy_key *k =
            w > 0 && (size_t)w < sizeof path && !strchr(name, '.') ? policy_key_find(path) : NULL;
        if (!k) {
            char known[200];
            policy_key_children(section, known, sizeof known);
            return fail(l, kn, path, "unknown key; known: %s", known);
        }
        if (k->type == KT_RESERVED)
            return fail(l, kn, k->path, "%s", k->note);
        TRY(load_value(l, k, kn, v));
    }
    return 0;
}

static int load_value(struct loader *l, const struct policy_key *k, struct fy_node *key,
                      struct fy_node *v)
{
    /* An empty value keeps the default; version alone is required. */
    if (is_null(v)) {
        if (k->type == KT_VERSION)
            return fail(l, key, k->path, "expected 1, got null");
        return 0;
    }
    char why[200] = "";
    switch (k->type) {
    case KT_SECTION:
        TRY(check_type(l, v, FYNT_MAPPING, k->path, "a mapping"));
        return load_section(l, k->path, v);
    case KT_BINDS:
    case KT_NAMES:
    case KT_SYSCALLS:
    case KT_RULES:
    case KT_CIDRS:
    case KT_PINS:
    case KT_NAMESERVERS:
    case KT_PORTS:
    case KT_SECRETS:
    case KT_TOOL_NAMES:
    case KT_KEY_PATHS:
    case KT_TOOL_PINS:
    case KT_PROTECTED:
    case KT_UNIX_SOCKETS:
        return load_list(l, k, key, v);
    case KT_TOOL_RULES:
        return load_tool_rules(l, k, v);
    case KT_ENV_MAP:
        return load_env_set(l, k, v);
    case KT_BEST_EFFORT:
        if (fy_node_get_type(v) == FYNT_SEQUENCE)
            return load_list(l, k, key, v);
        break;
    case KT_LEVEL:
        if (fy_node_get_type(v) == FYNT_SEQUENCE)
            return load_levels(l, k, v);
        break;
    default:
        break;
    }
    _cleanup_free_ char *text = NULL;
    char expect[160];
    TRY(scalar_text(l, v, k->path, policy_key_expect(k, expect, sizeof expect), &text, NULL));
    if (k->type == KT_BEST_EFFORT && policy_parse_bool(text) < 0)
        return fail(l, v, k->path, "expected %s, got \"%s\"",
                    policy_key_expect(k, expect, sizeof expect), text);
    return setter_result(l, policy_apply_scalar(l->p, k, text, FROM_FILE, why, sizeof why), v,
                         k->path, why);
}

/* version first: a file for another schema should fail on that, not on its keys. */
static int load_root(struct loader *l, struct fy_node *root)
{
    if (!root || is_null(root))
        return err_set(l->err, CORDON_E_POLICY,
                       "%s: empty policy; it needs at least "
                       "\"version: 1\"",
                       l->file);
    if (fy_node_get_type(root) != FYNT_MAPPING)
        return fail(l, root, NULL, "expected a mapping of policy keys, got %s", kind_of(root));
    struct fy_node_pair *version = fy_node_mapping_lookup_pair_by_string(root, "version", 7);
    if (!version)
        return err_set(l->err, CORDON_E_POLICY, "%s: version: missing; add \"version: 1\"",
                       l->file);
    TRY(load_value(l, policy_key_find("version"), fy_node_pair_key(version),
                   fy_node_pair_value(version)));
    return load_section(l, "", root);
}

static void iterator_destroyp(struct fy_document_iterator **it)
{
    if (*it)
        fy_document_iterator_destroy(*it);
}

/* The key N is the value of, or else N's parent: where to report an empty N. */
static struct fy_node *holder_of(struct fy_node *n)
{
    struct fy_node *parent = fy_node_get_parent(n);
    if (parent && fy_node_get_type(parent) == FYNT_MAPPING) {
        void *it = NULL;
        struct fy_node_pair *pair;
        while ((pair = fy_node_mapping_iterate(parent, &it)))
            if (fy_node_pair_value(pair) == n)
                return fy_node_pair_key(pair);
    }
    return parent;
}

/*
 * The loader reads a value by its text and quoting, never by a tag, and an
 * empty value with a tag ("read_only: !") would mean "" to YAML but the
 * default to the loader: refused, like aliases. Iterative, so a deeply
 * nested document cannot exhaust the stack.
 */
static int refuse_tags(struct loader *l, struct fy_document *doc)
{
    _cleanup_(iterator_destroyp) struct fy_document_iterator *it = fy_document_iterator_create();
    if (!it)
        return oom(l);
    fy_document_iterator_node_start(it, fy_document_root(doc));
    struct fy_node *n;
    while ((n = fy_document_iterator_node_next(it))) {
        size_t len = 0;
        const char *tag = fy_node_get_tag(n, &len);
        if (tag) {
            char shown[40];
            return fail_near(l, n, holder_of(n), NULL, "YAML tags are not supported, got %s",
                             text_quote(shown, sizeof shown, tag, len, true));
        }
    }
    return 0;
}

/* The first error libfyaml collected, as `FILE:LINE: invalid YAML: ...`. */
static int syntax_error(struct loader *l)
{
    void *it = NULL;
    struct fy_diag_error *e;
    while ((e = fy_diag_errors_iterate(l->diag, &it))) {
        if (e->type < FYET_ERROR)
            continue;
        if (e->line > 0)
            return err_set(l->err, CORDON_E_POLICY, "%s:%d: invalid YAML: %s", l->file, e->line,
                           e->msg);
        return err_set(l->err, CORDON_E_POLICY, "%s: invalid YAML: %s", l->file, e->msg);
    }
    return err_set(l->err, CORDON_E_POLICY, "%s: invalid YAML", l->file);
}

static int parse_into(struct policy *p, const char *text, size_t len, const char *file,
                      struct cordon_err *err)
{
    struct fy_diag_cfg dcfg;
    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL; /* collected below, never printed by the library */
    _cleanup_(diag_destroyp) struct fy_diag *diag = fy_diag_create(&dcfg);
    if (!diag)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    fy_diag_set_collect_errors(diag, true);

    struct loader l = { .file = file, .diag = diag, .p = p, .err = err };
    /*
     * Without FYPCF_ALLOW_DUPLICATE_KEYS a key given twice, in any mapping and
     * any spelling, is an error at its line: never "the last one wins".
     */
    struct fy_parse_cfg cfg = {
        .flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_1_2,
        .diag = diag,
    };
    _cleanup_(parser_destroyp) struct fy_parser *fyp = fy_parser_create(&cfg);
    if (!fyp || fy_parser_set_string(fyp, text, len) < 0)
        return err_set(err, CORDON_E_INTERNAL, "cannot start the YAML parser");

    struct fy_document *doc = fy_parse_load_document(fyp);
    if (!doc) {
        if (fy_diag_got_error(diag) || fy_parser_get_stream_error(fyp))
            return syntax_error(&l);
        return load_root(&l, NULL);
    }
    int r = refuse_tags(&l, doc) < 0 ? -1 : load_root(&l, fy_document_root(doc));
    fy_parse_document_destroy(fyp, doc);
    if (r < 0)
        return -1;
    /* A second document would otherwise be ignored without a word. */
    doc = fy_parse_load_document(fyp);
    if (doc) {
        fy_parse_document_destroy(fyp, doc);
        return err_set(err, CORDON_E_POLICY, "%s: more than one YAML document", file);
    }
    if (fy_diag_got_error(diag) || fy_parser_get_stream_error(fyp))
        return syntax_error(&l);
    return 0;
}

/*
 * What YAML 1.2 lets a stream hold (c-printable), in valid UTF-8, is checked
 * before libfyaml sees the text: 0.7.12 (Debian 12) loops forever on a
 * malformed sequence inside a directive ("%Y\xfe"; libfyaml issue #101) and
 * takes a NUL byte for the end of the file, so the rules after one would be
 * dropped without a word. JSON allows no more than this either.
 */
static int check_text(const char *text, size_t len, const char *file, struct cordon_err *err)
{
    int line = 1;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t n = utf8_decode(text + i, len - i, &cp);
        if (n == 0)
            return err_set(err, CORDON_E_POLICY,
                           "%s:%d: not UTF-8: byte 0x%02x is not part "
                           "of a valid sequence",
                           file, line, (unsigned char)text[i]);
        bool printable = cp == '\t' || cp == '\n' || cp == '\r' || (cp >= 0x20 && cp < 0x7f) ||
            cp == 0x85 || (cp >= 0xa0 && cp != 0xfffe && cp != 0xffff);
        if (!printable)
            return err_set(err, CORDON_E_POLICY,
                           "%s:%d: character U+%04X cannot appear in "
                           "YAML or JSON text (write it escaped in a double-quoted string)",
                           file, line, (unsigned)cp);
        line += cp == '\n';
        i += n;
    }
    return 0;
}

size_t policy_yaml_len(const char *text, size_t len)
{
    /* A last line of blanks without a line break means nothing in YAML or
     * JSON, but libfyaml 0.7.12 takes its tab for the start of a plain
     * scalar and calls the text invalid: it is left out. */
    size_t end = len;
    while (end > 0 && (text[end - 1] == ' ' || text[end - 1] == '\t'))
        end--;
    return end < len && end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r') ? end : len;
}

struct policy *policy_load_string(const char *text, size_t len, const char *name,
                                  struct cordon_err *err)
{
    _cleanup_(policy_freep) struct policy *p = policy_new(err);
    if (!p)
        return NULL;
    p->origin = strdup(name ? name : "<string>");
    if (!p->origin) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    len = policy_yaml_len(text, len);
    if (check_text(text, len, p->origin, err) < 0 || parse_into(p, text, len, p->origin, err) < 0 ||
        policy_finalize(p, err) < 0)
        return NULL;
    /* What the file alone says, before any flag: its digest goes in run.start. */
    if (!(p->loaded = policy_to_json(p))) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    return TAKE_PTR(p);
}

struct policy *policy_load_unverified(const char *path, struct cordon_err *err)
{
    size_t n = 0;
    _cleanup_free_ char *buf = read_small_file(path, POLICY_MAX_BYTES, &n, err);
    return buf ? policy_load_string(buf, n, path, err) : NULL;
}
