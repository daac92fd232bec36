/*
 * policy/policy_narrow.c: which way each policy key moves, and the one check
 * that a signed or trusted policy (or a break-glass run's) is only ever
 * tightened: by `cordon run`'s flags, by libcordon's cordon_policy_set(), by
 * the daemon's session options (all through policy_set()) and by per-call
 * options that are no key of their own (a daemon call's timeout and env, which
 * the daemon asks as limits.wall and env.set). Relaxing goes through
 * break-glass alone (policy_break_glass(), keys its may_relax lists). The
 * setters a caller uses live here too, each asking the check first:
 * policy_set(), policy_add_bind(), policy_add_env().
 * Runs in the CLI or supervisor; pure but for the setters' path checks.
 */
#include "policy/policy_int.h"

#include "common/strv.h"

#include <stdio.h>
#include <string.h>

enum narrow {
    N_LESS,  /* a number: smaller tightens; 0 (unlimited, never, the kernel's default) is widest */
    N_RANK,  /* a choice: a lower rank (the rank column of its choices) tightens */
    N_OFF,   /* a switch: false tightens */
    N_ON,    /* a switch: true tightens */
    N_FEWER, /* a list: an item the policy does not hold relaxes */
    N_MORE,  /* a list: an item added tightens (nothing a caller passes removes one) */
    N_ONCE,  /* a path or text: setting one where there was none tightens; changing relaxes */
    N_FIXED, /* any change relaxes */
};

/*
 * Every key of the key table (policy_keys.c), once; a key missing here is
 * taken as N_FIXED (test-governance checks there is none). A row's comment says
 * why where the direction is a choice; an N_RANK key's order, and why, is
 * the rank column of its choices, beside the key table.
 */
static const struct {
    const char *key;
    enum narrow n;
} directions[] = {
    { "version", N_FIXED },
    /* a stronger level tightens; a fallback may not be weaker either */
    { "isolation", N_RANK },
    /* a host directory where the signer gave none, or another one, is new host state */
    { "filesystem.workspace", N_FIXED },
    { "filesystem.workspace_follow_symlinks", N_OFF },
    { "filesystem.workspace_size", N_LESS },
    { "filesystem.tmp_size", N_LESS },
    { "filesystem.shm_size", N_LESS },
    { "filesystem.workspace_inodes", N_LESS },
    { "filesystem.tmp_inodes", N_LESS },
    { "filesystem.shm_inodes", N_LESS },
    /* a bind the policy has, or a read-write one made read-only; any other bind relaxes */
    { "filesystem.read_only", N_FEWER },
    { "filesystem.read_write", N_FEWER },
    { "filesystem.protected", N_MORE },
    /* a host socket the run may connect to */
    { "filesystem.unix_sockets", N_FEWER },
    { "filesystem.unsafe_unprotect", N_FEWER },
    { "workspace.mode", N_RANK },
    { "workspace.commit", N_RANK },
    /*
     * The environment the signer fixed: a host variable passed in is host
     * data, and a value set per call is recorded nowhere (argv is: a caller
     * who needs a variable writes `env NAME=VALUE CMD`). The same NAME=VALUE
     * again changes nothing.
     */
    { "env.pass", N_FEWER },
    { "env.set", N_FEWER },
    { "limits.wall", N_LESS },
    { "limits.cpu", N_LESS },
    { "limits.memory", N_LESS },
    { "limits.output", N_LESS },
    { "limits.file_size", N_LESS },
    { "limits.pids", N_LESS },
    { "limits.open_files", N_LESS },
    /* a limit that may degrade instead of refusing the run */
    { "limits.best_effort", N_FEWER },
    { "syscalls.allow", N_FEWER },
    { "syscalls.deny", N_MORE },
    { "microvm.accel", N_RANK },
    { "network.mode", N_RANK },
    { "network.allow", N_FEWER },
    { "network.deny", N_MORE },
    /* a destination a decider may then allow */
    { "network.ask", N_FEWER },
    { "network.allow_private", N_FEWER },
    /* a pin or a nameserver decides where an allowed name leads */
    { "network.resolve", N_FEWER },
    { "network.dns", N_FEWER },
    /* a port the host may reach a live session on: one more relaxes */
    { "network.expose", N_FEWER },
    { "network.upstream_ca", N_FIXED },
    { "network.budgets.requests", N_LESS },
    { "network.budgets.bytes", N_LESS },
    { "network.budgets.connections", N_LESS },
    { "network.budgets.request_rate", N_LESS },
    { "secrets", N_FEWER },
    /* "*" in the policy holds every tool */
    { "tools.allow", N_FEWER },
    { "tools.rules", N_MORE },
    { "tools.max_calls", N_LESS },
    { "tools.max_result_bytes", N_LESS },
    { "tools.max_message_bytes", N_LESS },
    { "tools.call_timeout", N_LESS },
    { "tools.record_arguments", N_ON },
    /* each forwards more between client and server */
    { "tools.resources", N_OFF },
    { "tools.prompts", N_OFF },
    { "tools.logging", N_OFF },
    { "tools.sampling", N_OFF },
    { "tools.elicitation", N_OFF },
    { "tools.roots", N_OFF },
    { "tools.ask", N_MORE },
    /* a pin file where none was pins tools; another file trusts them afresh */
    { "tools.pins", N_ONCE },
    { "tools.pinned", N_MORE },
    /* a log, a key, an export where none was records more; another one hides the record */
    { "audit.file", N_ONCE },
    { "audit.sign_key", N_ONCE },
    /* a second record of the log's tail: one where there was none tightens */
    { "audit.witness", N_ONCE },
    { "audit.checkpoint_every", N_LESS },
    { "audit.record_arguments", N_FIXED },
    { "audit.fsync", N_RANK },
    { "audit.export", N_ONCE },
    { "audit.export_endpoint", N_ONCE },
    /* governance: who signs, who decides, how far break-glass goes */
    { "require_signature", N_FIXED },
    { "decider.socket", N_FIXED },
    { "decider.command", N_FIXED },
    { "decider.elicit", N_FIXED },
    { "decider.timeout", N_FIXED },
    { "break_glass.may_relax", N_FIXED },
    { "break_glass.max_duration", N_FIXED },
    { "break_glass.approval_key", N_FIXED },
};

int policy_key_direction(const char *key)
{
    for (size_t i = 0; i < sizeof directions / sizeof directions[0]; i++)
        if (!strcmp(directions[i].key, key))
            return (int)directions[i].n;
    return -1;
}

void policy_value_shown(const char *key, const char *value, char *out, size_t len)
{
    /* An env.set value may be a credential: messages and records name the variable. */
    const char *eq = strchr(value, '=');
    if (!strcmp(key, "env.set") && eq)
        snprintf(out, len, "%.*s=...", (int)(eq - value > 64 ? 64 : eq - value), value);
    else
        snprintf(out, len, "%.64s", value);
}

void policy_narrow_only(struct policy *p, enum policy_narrow why)
{
    /* A signature outranks a break-glass in the message: it is what was promised. */
    if (p->narrow == POLICY_NARROW_NONE || why == POLICY_NARROW_SIGNED)
        p->narrow = why;
}

/* The weakest level P may run at: its own or a fallback's. */
static int weakest_level(const struct policy *p)
{
    int r = policy_choice_rank(&policy_levels, (int)p->level);
    for (size_t i = 0; i < p->n_level_fallbacks; i++)
        if (policy_choice_rank(&policy_levels, (int)p->level_fallbacks[i]) > r)
            r = policy_choice_rank(&policy_levels, (int)p->level_fallbacks[i]);
    return r;
}

static const void *field(const struct policy *p, const struct policy_key *k)
{
    return (const char *)p + k->offset;
}

static uint64_t widest(uint64_t v)
{
    return v ? v : UINT64_MAX;
}

static bool scalar_relaxes(const struct policy_key *k, enum narrow n, const struct policy *cur,
                           const struct policy *s)
{
    switch (k->type) {
    case KT_SIZE:
    case KT_DURATION:
    case KT_COUNT: {
        uint64_t was = *(const uint64_t *)field(cur, k), now = *(const uint64_t *)field(s, k);
        /* Governance numbers mean no order (a max_duration of 0 refuses break-glass). */
        return n == N_FIXED ? now != was : widest(now) > widest(was);
    }
    case KT_UINT:
        return widest(*(const unsigned *)field(s, k)) > widest(*(const unsigned *)field(cur, k));
    case KT_BOOL: {
        bool was = *(const bool *)field(cur, k), now = *(const bool *)field(s, k);
        return n == N_FIXED ? now != was : n == N_ON ? was && !now : now && !was;
    }
    case KT_LEVEL:
        return policy_choice_rank(k->choices, (int)s->level) >
            policy_choice_rank(k->choices, (int)cur->level) ||
            weakest_level(s) > weakest_level(cur);
    case KT_VERSION:
        return s->version != cur->version;
    case KT_DIR:
    case KT_LOG_FILE:
    case KT_KEY_FILE:
    case KT_TEXT: {
        const char *was = *(char *const *)field(cur, k), *now = *(char *const *)field(s, k);
        if (!now || (was && !strcmp(was, now)))
            return false;
        return was || n == N_FIXED;
    }
    case KT_ENUM: {
        int was = *(const int *)field(cur, k), now = *(const int *)field(s, k);
        return policy_choice_rank(k->choices, now) > policy_choice_rank(k->choices, was);
    }
    default: /* a scalar this function does not know: fail closed */
        return true;
    }
}

/* The string lists, by key: where each keeps its items and their count. */
static const struct {
    const char *key;
    size_t items, count;
} lists[] = {
    { "filesystem.unsafe_unprotect", offsetof(struct policy, unprotect),
      offsetof(struct policy, n_unprotect) },
    { "filesystem.unix_sockets", offsetof(struct policy, unix_sockets),
      offsetof(struct policy, n_unix_sockets) },
    { "env.pass", offsetof(struct policy, env_pass), offsetof(struct policy, n_env_pass) },
    { "syscalls.allow", offsetof(struct policy, syscalls_allow),
      offsetof(struct policy, n_syscalls_allow) },
    { "network.allow", offsetof(struct policy, network.allow),
      offsetof(struct policy, network.n_allow) },
    { "network.ask", offsetof(struct policy, network.ask), offsetof(struct policy, network.n_ask) },
    { "network.allow_private", offsetof(struct policy, network.allow_private),
      offsetof(struct policy, network.n_allow_private) },
    { "network.resolve", offsetof(struct policy, network.resolve),
      offsetof(struct policy, network.n_resolve) },
    { "network.dns", offsetof(struct policy, network.dns), offsetof(struct policy, network.n_dns) },
    { "network.expose", offsetof(struct policy, network.expose),
      offsetof(struct policy, network.n_expose) },
    { "tools.allow", offsetof(struct policy, tools.allow), offsetof(struct policy, tools.n_allow) },
    { "break_glass.may_relax", offsetof(struct policy, gov.may_relax),
      offsetof(struct policy, gov.n_may_relax) },
};

static bool same_bind(const struct policy_bind *a, const struct policy_bind *b)
{
    return !strcmp(a->source, b->source) && !strcmp(a->dest, b->dest) &&
        (b->writable || !a->writable) && (b->follow_symlinks || !a->follow_symlinks);
}

static bool same_secret(const struct policy_secret *a, const struct policy_secret *b)
{
    if (strcmp(a->name, b->name) || strcmp(a->from, b->from) || a->n_hosts != b->n_hosts ||
        widest(a->ttl_ms) > widest(b->ttl_ms))
        return false;
    for (size_t i = 0; i < a->n_hosts; i++)
        if (strcmp(a->hosts[i], b->hosts[i]))
            return false;
    return true;
}

/* Does S hold an item of KEY that CUR does not (the items a caller's value adds)? */
static bool list_relaxes(const char *key, const struct policy *cur, const struct policy *s)
{
    if (!strcmp(key, "filesystem.read_only") || !strcmp(key, "filesystem.read_write")) {
        for (size_t i = 0; i < s->n_binds; i++) {
            size_t j = 0;
            while (j < cur->n_binds && !same_bind(&s->binds[i], &cur->binds[j]))
                j++;
            if (j == cur->n_binds)
                return true;
        }
        return false;
    }
    if (!strcmp(key, "env.set")) {
        for (size_t i = 0; i < s->n_env_set; i++) {
            size_t j = 0;
            while (j < cur->n_env_set &&
                   (strcmp(s->env_set[i].name, cur->env_set[j].name) ||
                    strcmp(s->env_set[i].value, cur->env_set[j].value)))
                j++;
            if (j == cur->n_env_set)
                return true;
        }
        return false;
    }
    if (!strcmp(key, "secrets")) {
        for (size_t i = 0; i < s->n_secrets; i++) {
            size_t j = 0;
            while (j < cur->n_secrets && !same_secret(&s->secrets[i], &cur->secrets[j]))
                j++;
            if (j == cur->n_secrets)
                return true;
        }
        return false;
    }
    if (!strcmp(key, "limits.best_effort"))
        return (s->limits.best_effort & ~cur->limits.best_effort) != 0;
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
        if (strcmp(lists[l].key, key))
            continue;
        char *const *have = *(char **const *)((const char *)cur + lists[l].items);
        size_t n_have = *(const size_t *)((const char *)cur + lists[l].count);
        char *const *add = *(char **const *)((const char *)s + lists[l].items);
        size_t n_add = *(const size_t *)((const char *)s + lists[l].count);
        bool every = !strcmp(key, "tools.allow") && strv_contains(have, n_have, "*");
        for (size_t i = 0; i < n_add && !every; i++)
            if (!strv_contains(have, n_have, add[i]))
                return true;
        return false;
    }
    return true; /* a list this file does not know: fail closed */
}

static bool is_list(enum key_type t)
{
    switch (t) {
    case KT_BINDS:
    case KT_NAMES:
    case KT_ENV_MAP:
    case KT_SYSCALLS:
    case KT_RULES:
    case KT_CIDRS:
    case KT_NAMESERVERS:
    case KT_PORTS:
    case KT_PINS:
    case KT_SECRETS:
    case KT_TOOL_NAMES:
    case KT_TOOL_RULES:
    case KT_PROTECTED:
    case KT_KEY_PATHS:
    case KT_TOOL_PINS:
    case KT_UNIX_SOCKETS:
        return true;
    default:
        return false;
    }
}

int policy_check_tighten(const struct policy *p, const char *key, const char *value,
                         const char *flag, struct cordon_err *err)
{
    if (p->narrow == POLICY_NARROW_NONE)
        return 0;
    const struct policy_key *k = policy_key_find(key);
    if (!k || k->type == KT_SECTION || k->type == KT_RESERVED)
        return 0; /* the setter says what is wrong with it */
    int d = policy_key_direction(key);
    enum narrow n = d < 0 ? N_FIXED : (enum narrow)d;
    if (n == N_MORE)
        return 0;
    /*
     * The value as the setter reads it, on a policy of its own: the same
     * rules, and nothing of P changed before the answer.
     */
    _cleanup_(policy_freep) struct policy *s = policy_new(err);
    if (!s || policy_set_unchecked(s, key, value, flag, err) < 0)
        return -1;
    bool relaxes = is_list(k->type) || k->type == KT_BEST_EFFORT ? list_relaxes(key, p, s)
                                                                 : scalar_relaxes(k, n, p, s);
    if (!relaxes)
        return 0;
    const char *f = flag ? flag : key;
    char shown[80];
    policy_value_shown(key, value, shown, sizeof shown);
    if (p->narrow == POLICY_NARROW_BREAK_GLASS)
        return err_set(err, CORDON_E_POLICY,
                       "%s %s relaxes %s, which a break-glass run "
                       "relaxes only by --relax %s=%s (if break_glass.may_relax lists it)",
                       f, shown, key, key, shown);
    return err_set(err, CORDON_E_POLICY,
                   "%s %s relaxes %s of a signed policy; use "
                   "break-glass (--relax %s=%s) if the policy allows it",
                   f, shown, key, key, shown);
}

int policy_set(struct policy *p, const char *key, const char *value, const char *flag,
               struct cordon_err *err)
{
    TRY(policy_check_tighten(p, key, value, flag, err));
    return policy_set_unchecked(p, key, value, flag, err);
}

int policy_add_bind(struct policy *p, const char *spec, bool writable, const char *flag,
                    struct cordon_err *err)
{
    const char *key = writable ? "filesystem.read_write" : "filesystem.read_only";
    TRY(policy_check_tighten(p, key, spec, flag, err));
    return policy_set_unchecked(p, key, spec, flag, err);
}

int policy_add_env(struct policy *p, const char *spec, const char *flag, struct cordon_err *err)
{
    return policy_set(p, strchr(spec, '=') ? "env.set" : "env.pass", spec, flag ? flag : "--env",
                      err);
}
