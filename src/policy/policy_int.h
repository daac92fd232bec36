/*
 * policy/policy_int.h: what the files of src/policy/ share and nobody else
 * sees: the key table and the setters that both the file loader and the
 * flags (policy_set) go through, so a value has one set of rules.
 */
#pragma once
#include "policy/policy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum key_type {
    KT_SECTION,     /* a mapping of further keys */
    KT_VERSION,     /* int, must be 1 */
    KT_LEVEL,       /* enum cordon_level */
    KT_SIZE,        /* uint64_t bytes */
    KT_DURATION,    /* uint64_t ms */
    KT_COUNT,       /* uint64_t */
    KT_DIR,         /* char *, an existing host directory */
    KT_BINDS,       /* list of PATH[:DEST] or {source, dest} */
    KT_NAMES,       /* env.pass: list of variable names */
    KT_ENV_MAP,     /* env.set: NAME: VALUE */
    KT_SYSCALLS,    /* list of syscall names */
    KT_BEST_EFFORT, /* list of limit names, or true/false */
    KT_LOG_FILE,    /* char *, a host file that may not exist yet; its directory must */
    KT_KEY_FILE,    /* char *, an existing, readable host file */
    KT_UINT,        /* unsigned */
    KT_BOOL,        /* bool: true / false */
    KT_FSYNC,       /* enum policy_audit_fsync: always / close */
    KT_NET_MODE,    /* enum policy_net_mode: none / gateway */
    KT_ACCEL,       /* enum policy_accel: kvm / tcg */
    KT_WS_MODE,     /* enum policy_ws_mode: direct / overlay */
    KT_WS_COMMIT,   /* enum policy_ws_commit: always / on_success / manual */
    KT_RULES,       /* list of egress rules HOST[:PORT]; flag: allow (else deny) */
    KT_CIDRS,       /* list of CIDRs */
    KT_NAMESERVERS, /* list of IP[:PORT] DNS servers */
    KT_PINS,        /* list of HOST=IP pins */
    KT_SECRETS,     /* list of {name, from, hosts, ttl}; flag: NAME=SOURCE@HOST[,HOST] */
    KT_TOOL_NAMES,  /* tools.allow: list of tool names, or "*" */
    KT_TOOL_RULES,  /* tools.rules: TOOL: {ARG: {under, deny, max_length, pattern}} */
    KT_PROTECTED,   /* filesystem.protected: names; flag: add (else unsafe_unprotect) */
    KT_RESERVED,    /* a key that is refused, with a note saying why */
    KT_TEXT,        /* char *, any one-line text (checked where it is used) */
    KT_KEY_PATHS,   /* break_glass.may_relax: list of policy key paths */
    KT_TOOL_PINS,   /* tools.pinned: list of TOOL=SHA256 */
    KT_UNIX_SOCKETS, /* filesystem.unix_sockets: list of absolute host paths */
};

struct policy_key {
    const char *path;   /* "limits.memory" */
    enum key_type type;
    size_t offset;      /* of the field in struct policy (scalar types) */
    uint64_t min;       /* smallest accepted value (sizes, durations, counts) */
    uint64_t def;       /* default (scalar types) */
    bool flag;          /* KT_BINDS: writable; KT_SYSCALLS, KT_RULES: allow */
    const char *note;   /* KT_RESERVED: why it is refused */
};

/* Where a value came from: a flag may name a host path relative to the cwd. */
enum value_origin {
    FROM_FILE,
    FROM_FLAG,
};

/* Setters return 0, -1 with a reason in WHY, or -2 when memory ran out. */
#define POLICY_ENOMEM (-2)

const struct policy_key *policy_key_find(const char *path);

/* The I-th key of the table, or NULL past its end (for the tests). */
const struct policy_key *policy_key_at(size_t i);

/* Which way KEY moves (policy_narrow.c's enum narrow), or -1 for a key it does not know. */
int policy_key_direction(const char *key);

/* policy_set() without asking policy_check_tighten(): break-glass's --relax, the check itself. */
int policy_set_unchecked(struct policy *p, const char *key, const char *value, const char *flag,
                         struct cordon_err *err);

/* "version, isolation, ..." : the keys directly under SECTION ("" = top). */
void policy_key_children(const char *section, char *buf, size_t len);

/* What a key's value should look like, for "expected ..., got ..." messages. */
const char *policy_key_expect(const struct policy_key *k);

/* A scalar key (version, isolation, sizes, durations, counts, paths, booleans...). */
int policy_apply_scalar(struct policy *p, const struct policy_key *k, const char *text,
                        enum value_origin from, char *why, size_t len);

/* One item of a list key (env.pass, syscalls.*, limits.best_effort, network.*). */
int policy_apply_item(struct policy *p, const struct policy_key *k, const char *text,
                      char *why, size_t len);

/* limits.best_effort: true / false. */
void policy_set_best_effort_all(struct policy *p, bool all);

/* One bind; DEST NULL means "the same path as SOURCE". */
int policy_apply_bind(struct policy *p, const char *source, const char *dest,
                      bool writable, bool follow, enum value_origin from, char *why, size_t len);

/* env.set NAME=VALUE; VALUE_LEN so an embedded NUL can be refused. */
int policy_apply_env_set(struct policy *p, const char *name, const char *value,
                         size_t value_len, char *why, size_t len);

/*
 * A secret is built field by field (so each error names its field) and then
 * moved into the policy. The setters check one field alone;
 * policy_add_secret() checks the whole and its fit with the rest.
 */
int policy_secret_set_name(struct policy_secret *s, const char *text, char *why, size_t len);
int policy_secret_set_from(struct policy_secret *s, const char *text, enum value_origin from,
                           char *why, size_t len);
int policy_secret_add_host(struct policy_secret *s, const char *text, char *why, size_t len);
int policy_secret_set_ttl(struct policy_secret *s, const char *text, char *why, size_t len);

/* Move S into P, sorted by name; S is left empty either way. */
int policy_add_secret(struct policy *p, struct policy_secret *s, char *why, size_t len);

void policy_secret_release(struct policy_secret *s);

/* tools.allow: one tool name, or "*". */
int policy_tools_allow(struct policy *p, const char *name, char *why, size_t len);

/*
 * An argument rule is built field by field, like a secret, then moved into
 * the policy under TOOL; R is left empty either way.
 */
int policy_arg_rule_add_under(struct policy_arg_rule *r, const char *dir, char *why, size_t len);
int policy_arg_rule_add_deny(struct policy_arg_rule *r, const char *glob, char *why, size_t len);
int policy_arg_rule_set_max_length(struct policy_arg_rule *r, const char *text, char *why,
                                   size_t len);
int policy_arg_rule_set_pattern(struct policy_arg_rule *r, const char *re, char *why, size_t len);
int policy_add_arg_rule(struct policy *p, const char *tool, const char *arg,
                        struct policy_arg_rule *r, char *why, size_t len);
void policy_arg_rule_release(struct policy_arg_rule *r);

/* tools.ask: one allowed tool name whose calls go to the decider. */
int policy_tools_ask(struct policy *p, const char *name, char *why, size_t len);

/* tools.pinned: one TOOL=SHA256 (the digest `cordon mcp pins` shows). */
int policy_tools_pin(struct policy *p, const char *text, char *why, size_t len);

/* Governance keys (policy_gov.c): a KT_TEXT value, one may_relax path, release. */
int policy_gov_set_text(char **field, const char *text, char *why, size_t len);
int policy_gov_add_relax(struct policy *p, const char *path, char *why, size_t len);
int policy_gov_check(const struct policy *p, char *why, size_t len);
void policy_gov_release(struct policy_gov *g);
/* Adds the governance keys that are set to ROOT (the effective policy's JSON). */
int policy_gov_json(const struct policy *p, json_t *root);

/* After a file loaded: its signature, as require_signature and the trust directory ask. */
int policy_check_signature(struct policy *p, const char *path, const char *text, size_t n,
                           struct cordon_err *err);

/* Cross-checks of the tools section (a rule for a tool never allowed...). */
int policy_tools_check(const struct policy *p, char *why, size_t len);
void policy_tools_release(struct policy_tools *t);

/*
 * One egress rule of PATH (network.allow, .deny, .ask), trimmed: a rule's
 * canonical text added to its list, or for network.allow a preset ("@npm")
 * whose rules are added and whose name and version are kept (presets.c).
 */
int policy_net_add_rule(struct policy *p, const char *path, const char *text, char *why,
                        size_t len);
void policy_presets_release(struct policy_network *n);

/* Sorted string sets: insert (a duplicate is ignored), free. */
int policy_strv_add(char ***v, size_t *n, const char *s);
void policy_strv_free(char **v, size_t n);

/* Lexical normalisation of an absolute path; *DOTDOT says a ".." was seen. */
char *policy_normalize_path(const char *in, bool *dotdot);

/* What one item of a list key should look like ("a name", "HOST=IP"...). */
const char *policy_key_item_expect(const struct policy_key *k);

/* "true"/"false" as YAML 1.2 and JSON write them; -1 for anything else. */
int policy_parse_bool(const char *s);
