/*
 * policy/policy.h: the parsed, validated policy. Nothing outside src/policy/
 * reads policy text; the CLI's flags and the policy file fill the same struct
 * through the same key table, so a value has one set of rules wherever it
 * comes from.
 */
#pragma once
#include "common/cleanup.h"
#include "common/err.h"
#include "policy/rules.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cordon_level {
    CORDON_LEVEL_PROCESS,
    CORDON_LEVEL_NAMESPACE, /* the default */
    CORDON_LEVEL_GVISOR,
    CORDON_LEVEL_MICROVM,
};

/* "process", "namespace", ...; NULL for an out-of-range value. */
const char *cordon_level_name(enum cordon_level level);

/* One limit each; a bit per limit in policy_limits.best_effort. */
enum policy_limit {
    POLICY_LIMIT_WALL,
    POLICY_LIMIT_CPU,
    POLICY_LIMIT_MEMORY,
    POLICY_LIMIT_PIDS,
    POLICY_LIMIT_OUTPUT,
    POLICY_LIMIT_FILE_SIZE,
    POLICY_LIMIT_OPEN_FILES,
    POLICY_LIMIT_COUNT,
};

/* "wall", "cpu", "memory", ... as in the policy's limits section. */
const char *policy_limit_name(enum policy_limit l);

struct policy_limits {
    uint64_t wall_ms;     /* 0 = no limit */
    uint64_t cpu_ms;      /* 0 = no limit */
    uint64_t memory;      /* bytes; 0 = no limit */
    uint64_t pids;        /* 0 = no limit */
    uint64_t output;      /* stdout+stderr bytes relayed; 0 = no limit */
    uint64_t file_size;   /* bytes; 0 = no limit */
    uint64_t open_files;  /* 0 = no limit */
    unsigned best_effort; /* 1u << enum policy_limit: may degrade, not refuse */
    unsigned defaulted;   /* 1u << enum policy_limit: neither file nor flag set it,
                              so it degrades like best_effort instead of refusing */
};

struct policy_bind {
    char *source; /* absolute, normalised host path; exists */
    char *dest;   /* absolute, normalised path inside the sandbox */
    bool writable;
    bool follow_symlinks; /* source may pass through links (resolved at finalize) */
};

struct policy_env_set {
    char *name;
    char *value;
};

enum policy_audit_fsync {
    POLICY_AUDIT_FSYNC_CLOSE,  /* fsync once, when the log is closed (default) */
    POLICY_AUDIT_FSYNC_ALWAYS, /* fsync after every event */
};

/* The audit section; see audit/audit.h for what the log holds. */
struct policy_audit {
    char *file;                /* absolute host path of the log; NULL = no log */
    char *sign_key;            /* absolute path of an Ed25519 private key (PEM), or NULL */
    char *witness;             /* absolute path of the log's witness, or NULL */
    unsigned checkpoint_every; /* a signed checkpoint every N events; 0 = only at close */
    enum policy_audit_fsync fsync;
};

/* The port the gateway listens on inside every sandbox (on 127.0.0.1). */
#define GATEWAY_PORT 3128
/* Transparent egress (namespace level): the DNS stub's address inside, and
 * the synthetic range its answers come from (RFC 2544's benchmarking range,
 * 198.18.0.0/15, routed to the sandbox's loopback), host byte order. */
#define DNS_STUB_ADDR 0x7f000035u /* 127.0.0.53 */
#define SYNTH_NET 0xc6120000u     /* 198.18.0.0 */
#define SYNTH_PREFIX 15
/* Distinct names per run the stub gives an address or the gateway resolves
 * for the proxy: a wildcard rule must not become a channel for arbitrary
 * labels. */
#define SYNTH_MAX_NAMES 256
/* Ports a name may be reached on transparently (one listener each). */
#define SYNTH_MAX_PORTS 32

enum policy_net_mode {
    POLICY_NET_NONE,    /* loopback only (default) */
    POLICY_NET_GATEWAY, /* one door: the egress gateway */
};

/*
 * An egress preset network.allow named ("@npm", policy/policy_presets.c): a named,
 * versioned set of rules from a data file; its rules are in network.allow.
 */
struct policy_preset {
    char *name; /* "npm" */
    unsigned version;
    char *file;   /* where it was read */
    char **allow; /* its rules' canonical texts, in the file's order */
    size_t n_allow;
};

/*
 * The network section; see policy/rules.h for the rule syntax. Every list
 * holds canonical texts, sorted and de-duplicated, so the digest does not
 * depend on how or in which order they were written.
 */
struct policy_network {
    enum policy_net_mode mode;
    bool mode_explicit;   /* mode was given (file or flag), not implied */
    bool none_by_caller;  /* a caller's --net none: the policy's rules and secrets are moot */
    bool rules_by_caller; /* a caller's own allow, ask or secret: with none, a contradiction */
    char **allow;         /* egress_rule_format() texts: "api.example.com", "*.example.com:8443" */
    size_t n_allow;
    char **deny; /* the same; refused even if an allow matches */
    size_t n_deny;
    char **ask; /* the same; not allowed, but asked of decider.socket */
    size_t n_ask;
    char **dns;        /* "IP:PORT" nameservers for the gateway; none = resolv.conf */
    char *upstream_ca; /* PEM CAs that intercepted servers are verified against;
                                       NULL = the host's trust store */
    size_t n_dns;
    char **allow_private; /* "127.0.0.2/32", "fd00::/8": let through the SSRF rules */
    size_t n_allow_private;
    char **resolve; /* "api.example.com=127.0.0.2": pins, like curl --resolve */
    size_t n_resolve;
    char **expose; /* "8000": ports of a live session the daemon may forward
                                       to the host (session.expose); none by default */
    size_t n_expose;
    struct policy_preset *presets; /* the presets named, sorted by name */
    size_t n_presets;
    /* budgets; 0 = unlimited */
    uint64_t requests;     /* requests over the run */
    uint64_t bytes;        /* bytes, both directions */
    uint64_t connections;  /* concurrent connections */
    uint64_t request_rate; /* requests per second */
};

/* A nameserver of network.dns, parsed. */
struct policy_nameserver {
    struct ip_addr ip;
    uint16_t port; /* 53 unless written */
};

/*
 * The network section parsed, as the gateway enforces it: built by
 * policy_finalize() from the canonical texts, so nothing parses them again.
 */
struct policy_egress {
    struct egress_rules rules;
    struct policy_nameserver *dns;
    size_t n_dns;
};

/*
 * A credential that never enters the sandbox: the sandbox sees NAME holding
 * a placeholder, and the gateway swaps in the real value only on requests
 * to HOSTS. The policy holds where the value is, never the value itself.
 */
struct policy_secret {
    char *name;     /* the variable the sandbox sees */
    char *from;     /* canonical "env:VAR" or "file:/abs/path" (realpath'd) */
    char **hosts;   /* egress_rule_format() texts of name or *.suffix rules, sorted, unique */
    size_t n_hosts; /* at least 1 */
    struct egress_rule *host_rules; /* HOSTS parsed, by policy_finalize() */
    uint64_t ttl_ms;                /* 0 = the run's lifetime */
};

/*
 * tools.rules.TOOL.ARG: what one argument of one tool may hold. A rule with
 * under or deny judges the value as a path (see broker/paths.h); a list
 * value is judged item by item.
 */
struct policy_arg_rule {
    char *arg;    /* the argument's name */
    char **under; /* normalised absolute dirs; the path must lie in one */
    size_t n_under;
    char **deny; /* globs the normalised path must not match */
    size_t n_deny;
    uint64_t max_length; /* in code points; 0 = no limit */
    char *pattern;       /* PCRE2 pattern the whole value must match, or NULL */
};

struct policy_tool_rules {
    char *tool;
    struct policy_arg_rule *args; /* sorted by arg, unique */
    size_t n_args;
};

/*
 * The tools section: what the MCP broker forwards between a client and a
 * sandboxed server. Everything not allowed here is hidden and refused.
 */
struct policy_tools {
    char **allow; /* tool names, sorted, unique; "*" = every tool */
    size_t n_allow;
    struct policy_tool_rules *rules; /* sorted by tool, unique */
    size_t n_rules;
    uint64_t max_calls;         /* tools/call per session; 0 = unlimited */
    uint64_t max_result_bytes;  /* a larger result is replaced by an error */
    uint64_t max_message_bytes; /* a larger JSON-RPC message is refused */
    uint64_t call_timeout_ms;   /* a call unanswered this long fails; 0 = never */
    bool record_arguments;      /* audit the arguments, not only their digest */
    bool resources;             /* resources/... methods: forwarded, or hidden as a whole */
    bool prompts;               /* prompts/... methods: the same */
    bool logging;               /* logging/setLevel and the server's log messages */
    bool sampling;              /* server-to-client requests forwarded to the client */
    bool elicitation;
    bool roots;
    char **ask; /* allowed tools whose calls the decider must approve */
    size_t n_ask;
    char *pins;    /* host file of trust-on-first-use tool pins, or NULL */
    char **pinned; /* tools.pinned: "TOOL=SHA256" written in the policy, sorted */
    size_t n_pinned;
};

/*
 * Governance of the exceptions (issue 15): who signed the policy, who
 * decides an `ask`, how far a break-glass run may relax it, where events
 * are exported. Absent keys leave the effective policy's JSON unchanged.
 */
struct policy_gov {
    char *require_signature;     /* PEM public key the file's signature must verify with */
    char *decider;               /* unix socket of the runtime decider, or NULL */
    char *decider_command;       /* or a command run (sh -c) per question */
    bool decider_elicit;         /* mcp serve: ask the MCP client (elicitation) when it can */
    uint64_t decider_timeout_ms; /* an answer later than this denies */
    char **may_relax;            /* break_glass.may_relax: policy key paths */
    size_t n_may_relax;
    uint64_t break_glass_max_ms; /* 0: break-glass refused */
    char *approval_key;          /* PEM public key an approval token must verify with */
    char *export;                /* audit.export: "otlp" or NULL */
    char *export_endpoint;       /* http://HOST:PORT/v1/logs */
};

/* The gateway tracks which secrets a connection used in one 64-bit mask. */
#define POLICY_MAX_SECRETS 64
/* The gateway keeps a name in a fixed buffer of 128 bytes. */
#define POLICY_SECRET_NAME_MAX 127

/*
 * microvm.accel: what may run the microvm level's guest. kvm: a hardware
 * hypervisor only; tcg: QEMU's software emulation is allowed where there is
 * none, knowing that an emulator is not a hypervisor boundary.
 */
enum policy_accel { POLICY_ACCEL_KVM, POLICY_ACCEL_TCG };

/*
 * workspace.mode: direct, the host workspace itself is written; overlay, the
 * run writes on a copy-on-write layer that workspace.commit then applies to
 * it or throws away: always, on_success (exit 0, no limit fired) or manual
 * (a daemon session's session.commit / session.discard).
 */
enum policy_ws_mode { POLICY_WS_DIRECT, POLICY_WS_OVERLAY };

/*
 * Who may change a policy after its file (policy_narrow.c): anyone
 * (NONE), or only to tighten it: a signed or trusted policy (SIGNED), a
 * break-glass run's (BREAK_GLASS: it relaxes only by --relax).
 */
enum policy_narrow { POLICY_NARROW_NONE, POLICY_NARROW_SIGNED, POLICY_NARROW_BREAK_GLASS };
enum policy_ws_commit {
    POLICY_WS_COMMIT_ON_SUCCESS,
    POLICY_WS_COMMIT_ALWAYS,
    POLICY_WS_COMMIT_MANUAL
};

struct policy {
    int version; /* 1 */
    enum cordon_level level;
    /* isolation as a list ([namespace, process]): the levels tried, in order, after
     * LEVEL when it cannot run here; none means LEVEL or nothing. */
    enum cordon_level level_fallbacks[3];
    size_t n_level_fallbacks;
    enum policy_accel microvm_accel;
    char *origin; /* file name the policy came from, or NULL */

    /* filesystem */
    char *workspace;                    /* host dir at /workspace; NULL = scratch tmpfs */
    bool workspace_follow_symlinks;     /* workspace may pass through links */
    uint64_t workspace_size;            /* size of the scratch tmpfs, and of an overlay's layer */
    enum policy_ws_mode workspace_mode; /* workspace.mode */
    enum policy_ws_commit workspace_commit; /* workspace.commit */
    uint64_t tmp_size;                      /* size of /tmp */
    uint64_t shm_size;                      /* size of /dev/shm */
    uint64_t tmp_inodes;                    /* nr_inodes of /tmp; 0 = the kernel's tmpfs default */
    uint64_t shm_inodes;                    /* of /dev/shm; the same */
    uint64_t workspace_inodes;              /* of the scratch /workspace; the same */
    struct policy_bind *binds;
    size_t n_binds;
    char **protected; /* names read-only in a host workspace, sorted; a
                                       trailing '*' globs (".env*") */
    size_t n_protected;
    char **unprotect; /* default names taken out (filesystem.unsafe_unprotect) */
    size_t n_unprotect;
    char **unix_sockets; /* host unix sockets the run may connect to (absolute,
                                       normalised); every other host socket is refused */
    size_t n_unix_sockets;

    /* env */
    char **env_pass; /* names taken from the host */
    size_t n_env_pass;
    struct policy_env_set *env_set; /* names set to fixed values */
    size_t n_env_set;

    struct policy_limits limits;

    /* syscalls on top of the default profile, by name */
    char **syscalls_allow;
    size_t n_syscalls_allow;
    char **syscalls_deny;
    size_t n_syscalls_deny;

    struct policy_network network;
    struct policy_secret *secrets; /* sorted by name; names unique and not in env.* */
    size_t n_secrets;
    struct policy_tools tools;
    struct policy_audit audit;

    /* Set by policy_finalize(), from everything above. */
    bool finalized;
    struct policy_egress egress;
    struct policy_evidence { /* hex SHA-256s each run's audit record carries */
        char policy[65];     /* policy_digest_hex() */
        char network[65];    /* policy_network_digest_hex() */
        char tools[65];      /* policy_tools_digest_hex() */
        char syscalls[65];   /* seccomp_profile_digest() */
        char file[65];       /* the policy as its file gave it, before flags; "" if
                                       it came from no file */
    } evidence;              /* read through policy_evidence() */
    bool evidence_done;
    struct policy_gov gov;
    char signer[65];           /* key_id that signed the file (checked at load), or "" */
    enum policy_narrow narrow; /* whether flags and per-call options may only tighten */
    json_t *loaded;            /* policy_to_json() as the file gave it, before any flag */
    json_t *flags;             /* the front end's flags on top of the file:
                                       [{"flag", "value"}], or NULL; for run.start */
    json_t *break_glass;       /* an active break-glass: {id, reason, until, relaxed,
                                       approved_by, base_policy_digest}; in every event */
};

/*
 * P's evidence digests, computed at the first call after policy_finalize()
 * and kept: a run that records nothing and writes no result never pays for
 * them (the first SHA-256 loads OpenSSL's configuration, about 1 ms).
 * Safe from several threads.
 */
const struct policy_evidence *policy_evidence(const struct policy *p);

/*
 * OUT = BASE, to be changed in its scalar keys alone (the workspace path
 * pointed elsewhere, policy_set() of workspace.mode...): a shallow copy that
 * shares every list and string with BASE, which must outlive it (never
 * policy_free() OUT), and none of BASE's cached evidence, so that what a run
 * of OUT records is OUT's digest. policy_set() and policy_add_bind() drop a
 * policy's cached evidence likewise.
 */
void policy_derive(const struct policy *base, struct policy *out);

/* A policy with every default filled in. */
struct policy *policy_new(struct cordon_err *err);

/*
 * Parse and validate PATH (YAML or JSON) on top of the defaults. Errors read
 * `policy.yaml:12: limits.memory: expected a size like 256M, got "lots"`.
 */
struct policy *policy_load(const char *path, struct cordon_err *err);

/* As policy_load, from a buffer; NAME stands for the file in messages. */
/* How much of TEXT (LEN bytes) policy_load_string() hands the YAML parser:
 * all of it but a last line of blanks (see policy_load.c). */
size_t policy_yaml_len(const char *text, size_t len);

struct policy *policy_load_string(const char *text, size_t len, const char *name,
                                  struct cordon_err *err);

/*
 * PATH as policy_load() reads it, but with no signature checked: for the
 * record of a refused file (its digest, and the audit.file its refusal goes
 * to), never to run. NULL with ERR when it cannot be read or parsed.
 */
struct policy *policy_load_unverified(const char *path, struct cordon_err *err);

/*
 * Set one key from text, as a flag does: KEY is the policy path
 * ("limits.memory", "filesystem.tmp_size", "isolation", "audit.file"), VALUE its text and
 * FLAG the flag's name for messages (`--memory: expected a size ...`). A list
 * key ("env.pass", "syscalls.allow", "network.allow", ...) gets VALUE added
 * to what it holds. "secrets" takes NAME=SOURCE@HOST[,HOST...] (split at the
 * last '@', since a file path may hold one) and adds one secret.
 */
int policy_set(struct policy *p, const char *key, const char *value, const char *flag,
               struct cordon_err *err);

/* --ro/--rw PATH[:DEST]: validated like filesystem.read_only/read_write. */
int policy_add_bind(struct policy *p, const char *spec, bool writable, const char *flag,
                    struct cordon_err *err);

/* --env NAME or NAME=VALUE. */
int policy_add_env(struct policy *p, const char *spec, const char *flag, struct cordon_err *err);

/*
 * Cross-field checks after every source has been applied (duplicate dests...).
 * Host paths are kept as written (made absolute, "." and ".." folded); here
 * each bind source and the workspace is refused when a component is a
 * symbolic link, unless the policy lets that path follow links (then it is
 * resolved now). The audit log and its key may not lie in a tree the
 * sandbox can write.
 * Every secret's hosts are added to network.allow, and secrets imply the
 * gateway (an explicit mode none is an error). Last, the network rules are
 * parsed into egress and the evidence digests computed, once per policy.
 */
int policy_finalize(struct policy *p, struct cordon_err *err);

/* The effective policy as JSON (sorted keys); new reference. */
json_t *policy_to_json(const struct policy *p);

/*
 * The presets network.allow named: ["npm@1", ...] (as the policy's JSON has
 * them), or WHOLE, {"npm": {"version", "file", "allow": [rules]}}, for a
 * person to read. New reference.
 */
json_t *policy_presets_json(const struct policy_network *n, bool whole);

/* SHA-256 of the canonical (compact, sorted) JSON form. */
void policy_digest(const struct policy *p, unsigned char out[32]);
void policy_digest_hex(const struct policy *p, char out[65]);

/* SHA-256 of the canonical JSON of the network object alone, for the audit record. */
void policy_network_digest_hex(const struct policy *p, char out[65]);

/* The same of the tools object. */
void policy_tools_digest_hex(const struct policy *p, char out[65]);

/* Does network.expose list PORT (session.expose may forward it to the host)? */
bool policy_exposes(const struct policy *p, unsigned port);

/* One default name of filesystem.protected, with who reads it and why (protected.c). */
struct policy_protected {
    const char *name; /* a file name, or a prefix ending in '*' */
    bool dir;         /* a directory by nature */
    bool checked;     /* written by the run, what it leaves checked after it (.git: what
                          git would run is refused, its objects and refs are the run's) */
    const char *who;  /* the tools that read it */
    const char *why;  /* what they run or trust from it */
};

/* The defaults, in the table's order; static. */
const struct policy_protected *policy_protected_defaults(size_t *n);

/* The default row for NAME exactly, or NULL. */
const struct policy_protected *policy_protected_default(const char *name);

/*
 * Is NAME (from filesystem.protected) one the run may write, whose contents
 * are checked after it instead (.git)? False for any name a policy adds.
 */
bool policy_protected_checked(const char *name);

/* Names considered and left unprotected, each with why; static. */
const struct policy_protected *policy_protected_left_out(size_t *n);

/*
 * Does NAME (one path component) match PATTERN from filesystem.protected:
 * exactly, or by prefix when PATTERN ends in '*'?
 */
bool policy_protected_match(const char *pattern, const char *name);

/* Is tool NAME in tools.allow? */
bool policy_tool_allowed(const struct policy *p, const char *name);

/* The rules for tool NAME, or NULL when it has none. */
const struct policy_tool_rules *policy_tool_rules(const struct policy *p, const char *name);

/* Is tool NAME in tools.ask (its calls need the decider's answer)? */
bool policy_tool_ask(const struct policy *p, const char *name);

/* May a break-glass overlay set KEY (it or a section above it is in break_glass.may_relax)? */
bool policy_may_relax(const struct policy *p, const char *key);

/*
 * Signed policies (policy_gov.c). A detached signature lives in FILE.sig:
 * {"format", "sha256" of the file's bytes, "key_id", "sig"} with an Ed25519
 * signature over "cordon-policy-signature v1 <sha256>". policy_load()
 * refuses a file that require_signature or the trust directory (the .pem
 * files of /etc/cordon/trust.d, or of $CORDON_TRUST_DIR where that holds
 * none) asks to be signed and is not, and fills p->signer when it is.
 */
int policy_sign_file(const char *path, const char *key_path, char key_id[65],
                     struct cordon_err *err);
int policy_verify_file(const char *path, const char *pub, char key_id[65], struct cordon_err *err);

/*
 * Under a signature or trust, and in a break-glass run, what a caller passes
 * may only tighten the policy: every key has a direction (policy_narrow.c,
 * beside the key table). policy_set(), policy_add_bind() and policy_add_env()
 * ask policy_check_tighten() before they change anything; a front end asks it
 * of per-call options that are no key of their own (a daemon call's timeout as
 * limits.wall, its env as env.set NAME=VALUE). 0 when KEY=VALUE tightens P or
 * changes nothing, or when P is POLICY_NARROW_NONE; -1 with ERR naming FLAG
 * (KEY when NULL), VALUE and KEY. A bad VALUE fails as its setter would.
 */
int policy_check_tighten(const struct policy *p, const char *key, const char *value,
                         const char *flag, struct cordon_err *err);

/*
 * VALUE of KEY as messages and the audit record show it (at most 64 bytes):
 * an env.set NAME=VALUE as NAME=... (a value may be a credential).
 */
void policy_value_shown(const char *key, const char *value, char *out, size_t len);

/* From now on P may only be tightened (a signed policy is so from its load). */
void policy_narrow_only(struct policy *p, enum policy_narrow why);

/* A policy not loaded from a signed file is refused when the trust directory holds keys. */
int policy_require_trusted(const struct policy *p, struct cordon_err *err);
const char *policy_trust_dir(void);

/*
 * Break-glass: apply an overlay of KEY=VALUE settings (each key must be in
 * break_glass.may_relax) until a time no further than break_glass.max_duration,
 * with a signed approval token when break_glass.approval_key is set. The
 * wall limit is cut to the window. Fills p->break_glass.
 */
struct policy_break_glass_request {
    const char *reason;
    const char *until;  /* a duration from now, or an RFC 3339 UTC time */
    char *const *relax; /* KEY=VALUE */
    size_t n_relax;
    const char *approval; /* path of an approval token, or NULL */
};
int policy_break_glass(struct policy *p, const struct policy_break_glass_request *req,
                       struct cordon_err *err);

/* A signed approval token (JSON, caller frees) for a break-glass of P with REASON until UNTIL. */
int policy_approve_break_glass(const struct policy *p, const char *key_path, const char *reason,
                               const char *until, char **out, struct cordon_err *err);

/*
 * FILE (NULL is fine) lies outside P's workspace and writable binds, where
 * the sandbox cannot write, swap or relink it: where an audit log, its
 * witness or its key may be.
 */
bool policy_outside_writable(const struct policy *p, const char *file);

void policy_free(struct policy *p);
DEFINE_CLEANUP(struct policy *, policy_free)
