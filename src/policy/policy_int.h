/*
 * policy/policy_int.h: what the files of src/policy/ share and nobody else
 * sees: the key table and the setters that both the file loader and the
 * flags (policy_set) go through, so a value has one set of rules.
 *
 * One file per concern, in the shape of Firecracker's vmm_config/ (a file
 * per configuration section). The calls between them form a DAG: a file
 * calls only the files named on its line (NAME for policy_NAME.c or NAME.c),
 * each of them lower down the list (tests/check-policy-dag.sh checks this
 * against the objects' symbols):
 *
 *   policy_gov.c        -> load finalize policy narrow gov_keys json
 *   policy_load.c       -> finalize policy fs env secrets tools json keys text
 *   policy_narrow.c     -> policy keys
 *   policy_finalize.c   -> fs env secrets net tools gov_keys paths text
 *   policy.c            -> fs env secrets net presets tools gov_keys keys limits text syscall_table
 *   policy_json.c       -> gov_keys keys limits presets syscall_table
 *   policy_gov_keys.c   -> tools keys text
 *   policy_secrets.c    -> env paths text rules
 *   policy_fs.c         -> protected paths text
 *   policy_env.c        -> text
 *   policy_net.c        -> presets text rules
 *   policy_presets.c    -> text rules
 *   policy_tools.c      -> paths text
 *   policy_keys.c       -> limits paths text
 *   policy_limits.c     ->
 *   policy_paths.c      ->
 *   policy_text.c       ->
 *   protected.c         ->
 *   syscall_table.c     ->
 *   rules.c             ->
 *   gitconfig.c         ->
 *
 * Governance (signatures, trust, break-glass) sits above the loader: it
 * loads, finalizes and sets; nothing below calls it. The loader reaches the
 * sections through their setters and the key table, never the flags' checked
 * setters (policy_narrow.c), which sit above the generic ones.
 */
#pragma once
#include "policy/policy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum key_type {
    KT_SECTION,      /* a mapping of further keys */
    KT_VERSION,      /* int, must be 1 */
    KT_LEVEL,        /* enum cordon_level, or a list of them (the fallbacks); choices */
    KT_SIZE,         /* uint64_t bytes */
    KT_DURATION,     /* uint64_t ms */
    KT_COUNT,        /* uint64_t */
    KT_DIR,          /* char *, an existing host directory */
    KT_BINDS,        /* list of PATH[:DEST] or {source, dest} */
    KT_NAMES,        /* env.pass: list of variable names */
    KT_ENV_MAP,      /* env.set: NAME: VALUE */
    KT_SYSCALLS,     /* list of syscall names */
    KT_BEST_EFFORT,  /* list of limit names, or true/false */
    KT_LOG_FILE,     /* char *, a host file that may not exist yet; its directory must */
    KT_KEY_FILE,     /* char *, an existing, readable host file */
    KT_UINT,         /* unsigned */
    KT_BOOL,         /* bool: true / false */
    KT_ENUM,         /* a C enum (int-sized): one of the names of its choices */
    KT_RULES,        /* list of egress rules HOST[:PORT]; flag: allow (else deny) */
    KT_CIDRS,        /* list of CIDRs */
    KT_NAMESERVERS,  /* list of IP[:PORT] DNS servers */
    KT_PINS,         /* list of HOST=IP pins */
    KT_SECRETS,      /* list of {name, from, hosts, ttl}; flag: NAME=SOURCE@HOST[,HOST] */
    KT_TOOL_NAMES,   /* tools.allow: list of tool names, or "*" */
    KT_TOOL_RULES,   /* tools.rules: TOOL: {ARG: {under, deny, max_length, pattern}} */
    KT_PROTECTED,    /* filesystem.protected: names; flag: add (else unsafe_unprotect) */
    KT_RESERVED,     /* a key that is refused, with a note saying why */
    KT_TEXT,         /* char *, any one-line text (checked where it is used) */
    KT_KEY_PATHS,    /* break_glass.may_relax: list of policy key paths */
    KT_TOOL_PINS,    /* tools.pinned: list of TOOL=SHA256 */
    KT_UNIX_SOCKETS, /* filesystem.unix_sockets: list of absolute host paths */
    KT_PORTS,        /* network.expose: list of TCP ports */
};

/*
 * One value of an enumerated key (KT_ENUM, KT_LEVEL): its name in a policy,
 * its C value, and its rank for policy_narrow.c: a signed policy may move
 * only to a lower rank (the lower, the tighter).
 */
struct policy_choice {
    const char *name;
    int value;
    int rank;
};

/* An enumerated key's values, in the order messages list them. */
struct policy_enum {
    const struct policy_choice *choices;
    size_t n;
};

/* The choices of each enumerated key (policy_keys.c). */
extern const struct policy_enum policy_levels, policy_accels, policy_ws_modes, policy_ws_commits,
    policy_net_modes, policy_fsyncs;

struct policy_key {
    const char *path; /* "limits.memory" */
    enum key_type type;
    size_t offset;                     /* of the field in struct policy (scalar types) */
    uint64_t min;                      /* smallest accepted value (sizes, durations, counts) */
    uint64_t def;                      /* default (scalar types) */
    bool flag;                         /* KT_BINDS: writable; KT_SYSCALLS, KT_RULES: allow */
    const char *note;                  /* KT_RESERVED: why it is refused */
    const struct policy_enum *choices; /* KT_ENUM, KT_LEVEL: its values */
};

/* Where a value came from: a flag may name a host path relative to the cwd. */
enum value_origin {
    FROM_FILE,
    FROM_FLAG,
};

/* Setters return 0, -1 with a reason in WHY, or -2 when memory ran out. */
#define POLICY_ENOMEM (-2)

/* A policy is a page of settings; anything this large is a mistake. */
#define POLICY_MAX_BYTES (1u << 20)

/* ---- policy_keys.c: the key table and the generic scalar setters ---- */

const struct policy_key *policy_key_find(const char *path);

/* The I-th key of the table, or NULL past its end (for the tests). */
const struct policy_key *policy_key_at(size_t i);

/* "version, isolation, ..." : the keys directly under SECTION ("" = top). */
void policy_key_children(const char *section, char *buf, size_t len);

/*
 * What a key's value should look like, for "expected ..., got ..." messages:
 * a fixed text, or one written into BUF (an enumerated key's names).
 */
const char *policy_key_expect(const struct policy_key *k, char *buf, size_t len);

/* The name of VALUE among E's choices, or NULL. */
const char *policy_choice_name(const struct policy_enum *e, int value);

/* The rank of VALUE among E's choices (the lower, the tighter); INT_MAX when unknown. */
int policy_choice_rank(const struct policy_enum *e, int value);

/* What one item of a list key should look like ("a name", "HOST=IP"...). */
const char *policy_key_item_expect(const struct policy_key *k);

/* A scalar key (version, isolation, sizes, durations, counts, paths, booleans...). */
int policy_apply_scalar(struct policy *p, const struct policy_key *k, const char *text,
                        enum value_origin from, char *why, size_t len);

/* Every scalar key at its default (policy_new()). */
void policy_keys_defaults(struct policy *p);

/* ---- policy.c: a key set by its type ---- */

/* policy_set() without asking policy_check_tighten(): break-glass's --relax, the check itself. */
int policy_set_unchecked(struct policy *p, const char *key, const char *value, const char *flag,
                         struct cordon_err *err);

/* One item of a list key (env.pass, syscalls.*, limits.best_effort, network.*). */
int policy_apply_item(struct policy *p, const struct policy_key *k, const char *text, char *why,
                      size_t len);

/* ---- policy_narrow.c ---- */

/* Which way KEY moves (policy_narrow.c's enum narrow), or -1 for a key it does not know. */
int policy_key_direction(const char *key);

/* ---- policy_limits.c ---- */

/* The limit K sets, or POLICY_LIMIT_COUNT when K is not one. */
enum policy_limit policy_key_limit(const struct policy_key *k);

/* A file or a flag wrote limit K: it is no longer a default that may degrade. */
void policy_limit_given(struct policy *p, const struct policy_key *k);

/* limits.best_effort: true / false. */
void policy_set_best_effort_all(struct policy *p, bool all);

/* limits.best_effort: one limit's name. */
int policy_best_effort_add(struct policy *p, const char *text, char *why, size_t len);

/* ---- policy_fs.c: the filesystem section ---- */

/* One bind; DEST NULL means "the same path as SOURCE". */
int policy_apply_bind(struct policy *p, const char *source, const char *dest, bool writable,
                      bool follow, enum value_origin from, char *why, size_t len);

/* One item of filesystem.protected, unsafe_unprotect or unix_sockets. */
int policy_fs_item(struct policy *p, const struct policy_key *k, const char *text, char *why,
                   size_t len);

/* A bind's DEST (absolute, normalised) is not one the sandbox builds itself. */
int policy_check_dest(const char *dest, char *why, size_t len);

/* The protected names every policy starts with. */
int policy_fs_defaults(struct policy *p);

/* ---- policy_env.c: the env section ---- */

/* One env.pass name. */
int policy_env_pass(struct policy *p, const char *text, char *why, size_t len);

/* env.set NAME=VALUE; VALUE_LEN so an embedded NUL can be refused. */
int policy_apply_env_set(struct policy *p, const char *name, const char *value, size_t value_len,
                         char *why, size_t len);

/* NAME is [A-Za-z_][A-Za-z0-9_]*. */
int policy_check_env_name(const char *name, char *why, size_t len);

/* The index of NAME in env.set, or -1. */
ssize_t policy_env_set_find(const struct policy *p, const char *name);

/* ---- policy_secrets.c: the secrets section ---- */

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

/* --secret NAME=SOURCE@HOST[,HOST...]: one secret, built and added. */
int policy_secret_from_flag(struct policy *p, const char *spec, char *why, size_t len);

void policy_secret_release(struct policy_secret *s);

/* ---- policy_net.c: the network section ---- */

/* One item of network.allow, deny, ask, allow_private, resolve or dns. */
int policy_net_item(struct policy *p, const struct policy_key *k, const char *text, char *why,
                    size_t len);

/* The canonical texts the setters stored, parsed once into p->egress for the gateway. */
int policy_net_build(struct policy *p, char *why, size_t len);

void policy_egress_release(struct policy_egress *e);

/* ---- policy_tools.c: the tools section ---- */

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

/* Cross-checks of the tools section (a rule for a tool never allowed...). */
int policy_tools_check(const struct policy *p, char *why, size_t len);
void policy_tools_release(struct policy_tools *t);

/* ---- policy_gov_keys.c: the governance keys ---- */

/* One break_glass.may_relax path. */
int policy_gov_add_relax(struct policy *p, const char *path, char *why, size_t len);
int policy_gov_check(const struct policy *p, char *why, size_t len);
void policy_gov_release(struct policy_gov *g);
/* Adds the governance keys that are set to ROOT (the effective policy's JSON). */
int policy_gov_json(const struct policy *p, json_t *root);

/* ---- policy_paths.c: host paths ---- */

/* Lexical normalisation of an absolute path; *DOTDOT says a ".." was seen. */
char *policy_normalize_path(const char *in, bool *dotdot);

/* TEXT as a host path: not empty, absolute when a file gave it, made absolute into *ABS. */
int policy_host_path_text(const char *text, enum value_origin from, char **abs, char *why,
                          size_t len);

/* An existing host path, made absolute and normalised into *OUT, not resolved. */
int policy_resolve_host(const char *path, enum value_origin from, char **out, char *why,
                        size_t len);

/* An existing host path of type TYPE (S_IFREG or S_IFDIR), resolved into *OUT. */
int policy_resolve_existing(const char *text, enum value_origin from, mode_t type, char **out,
                            char *why, size_t len);

/*
 * At finalize: *PATH refused when a component is a symbolic link, or
 * resolved when FOLLOW; ERR names WHERE, WHAT and, when set, ALLOW (how to
 * let it follow links).
 */
int policy_settle_path(char **path, bool follow, const char *what, const char *allow,
                       const char *where, struct cordon_err *err);

/* Is PATH (that may not exist yet) inside the tree TREE, by name or by identity? */
bool policy_inside_tree(const char *path, const char *tree);

/* ---- policy_text.c ---- */

/*
 * One egress rule of PATH (network.allow, .deny, .ask), trimmed: a rule's
 * canonical text added to its list, or for network.allow a preset ("@npm")
 * whose rules are added and whose name and version are kept (policy_presets.c).
 */
int policy_net_add_rule(struct policy *p, const char *path, const char *text, char *why,
                        size_t len);
void policy_presets_release(struct policy_network *n);

/* Sorted string sets: insert (a duplicate is ignored), free. */
int policy_strv_add(char ***v, size_t *n, const char *s);
void policy_strv_free(char **v, size_t n);

/* "true"/"false" as YAML 1.2 and JSON write them; -1 for anything else. */
int policy_parse_bool(const char *s);

/* TEXT without surrounding blanks (a new string; NULL when memory ran out). */
char *policy_trimmed(const char *text);
