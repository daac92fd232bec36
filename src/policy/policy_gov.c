/*
 * policy/policy_gov.c: what the governance keys govern: detached policy
 * signatures and the trust directory (policy_load() is the loader plus the
 * signature check), and break-glass. Above the loader: it calls the loader,
 * finalize and the setters, never the other way round; the keys themselves
 * are policy_gov_keys.c's. Runs in the CLI or supervisor; reads key and
 * signature files only.
 */
#include "policy/policy_int.h"
#include "common/json.h"

#include "common/sigkey.h"
#include "common/hostpath.h"
#include "common/text.h"
#include "common/units.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define SIG_FORMAT "cordon-policy-signature v1"
#define SIG_MAX_BYTES 4096
#define TRUST_DIR "/etc/cordon/trust.d"

/* ---- detached signatures ---- */

static char *sig_path(const char *path)
{
    char *s = NULL;
    return asprintf(&s, "%s.sig", path) < 0 ? NULL : s;
}

static void sig_message(const char *digest, char out[128])
{
    snprintf(out, 128, SIG_FORMAT " %s", digest);
}

int policy_sign_file(const char *path, const char *key_path, char key_id[65],
                     struct cordon_err *err)
{
    _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = sigkey_load_private(key_path, "signing key", err);
    if (!key)
        return -1;
    size_t n = 0;
    _cleanup_free_ char *text = read_small_file(path, 1u << 20, &n, err);
    if (!text)
        return -1;
    /* Only a valid policy is worth a signature. */
    _cleanup_(policy_freep) struct policy *p = policy_load_string(text, n, path, err);
    if (!p)
        return -1;
    char digest[65], msg[128], sig[SIGKEY_B64_LEN];
    sha256_hex(text, n, digest);
    sig_message(digest, msg);
    if (sigkey_id(key, key_id) < 0 || sigkey_sign(key, msg, strlen(msg), sig, err) < 0)
        return err_set(err, CORDON_E_POLICY, "signing key '%s' is not an Ed25519 key", key_path);
    json_auto_t *j = json_pack("{s:s, s:s, s:s, s:s}", "format", SIG_FORMAT, "sha256", digest,
                               "key_id", key_id, "sig", sig);
    _cleanup_free_ char *out = j ? json_dumps(j, JSON_SORT_KEYS) : NULL;
    _cleanup_free_ char *sp = sig_path(path);
    if (!out || !sp)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    _cleanup_fclose_ FILE *f = fopen(sp, "we");
    if (!f || fprintf(f, "%s\n", out) < 0 || fflush(f) != 0)
        return err_sys(err, CORDON_E_POLICY, "cannot write '%s'", sp);
    return 0;
}

/*
 * Does PATH.sig hold a valid signature of the N bytes at TEXT by one of
 * KEYS? 1 with the signer's key_id, 0 with WHY when not, -1 with ERR when
 * the signature file is missing or unreadable.
 */
static int check_sig(const char *path, const char *text, size_t n, EVP_PKEY **keys, size_t n_keys,
                     char key_id[65], char *why, size_t len, struct cordon_err *err)
{
    _cleanup_free_ char *sp = sig_path(path);
    if (!sp)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    size_t sn = 0;
    _cleanup_free_ char *st = read_small_file(sp, SIG_MAX_BYTES, &sn, err);
    if (!st)
        return -1;
    json_auto_t *j = json_parse_strict(st, sn, 0, NULL);
    const char *fmt = json_string_value(json_object_get(j, "format"));
    const char *digest = json_string_value(json_object_get(j, "sha256"));
    const char *sig = json_string_value(json_object_get(j, "sig"));
    if (!fmt || strcmp(fmt, SIG_FORMAT) != 0 || !digest || !sig) {
        why_printf(why, len, "'%s' is not a cordon policy signature", sp);
        return 0;
    }
    char want[65], msg[128];
    sha256_hex(text, n, want);
    if (strcmp(want, digest) != 0) {
        why_printf(why, len, "'%s' signs another version of the file", sp);
        return 0;
    }
    sig_message(want, msg);
    for (size_t i = 0; i < n_keys; i++)
        if (sigkey_verify(keys[i], msg, strlen(msg), sig)) {
            sigkey_id(keys[i], key_id);
            return 1;
        }
    why_printf(why, len, "'%s' is not signed by a trusted key", path);
    return 0;
}

/* Is NAME a trust directory's key (*.pem)? */
static bool key_name(const char *name)
{
    size_t l = strlen(name);
    return l >= 5 && strcmp(name + l - 4, ".pem") == 0;
}

/* Does DIR hold a key? Unreadable but there counts as yes: its reader says why. */
static bool holds_keys(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno != ENOENT;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)))
        found = key_name(e->d_name);
    closedir(d);
    return found;
}

/*
 * /etc/cordon/trust.d holding keys is the host's mandate, which no caller's
 * environment may replace (it would undo every signature the host asks
 * for). Where it holds none, $CORDON_TRUST_DIR asks it of the caller's own
 * runs.
 */
const char *policy_trust_dir(void)
{
    const char *d = getenv("CORDON_TRUST_DIR");
    return d && *d && !holds_keys(TRUST_DIR) ? d : TRUST_DIR;
}

/* The public keys in the trust directory (*.pem); a missing directory holds none. */
static int load_trusted(EVP_PKEY ***keys, size_t *n, struct cordon_err *err)
{
    const char *dir = policy_trust_dir();
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : err_sys(err, CORDON_E_POLICY, "cannot read '%s'", dir);
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (!key_name(e->d_name))
            continue;
        _cleanup_free_ char *kp = NULL;
        EVP_PKEY **grown = realloc(*keys, (*n + 1) * sizeof **keys);
        if (!grown || asprintf(&kp, "%s/%s", dir, e->d_name) < 0) {
            if (grown)
                *keys = grown;
            rc = err_set(err, CORDON_E_INTERNAL, "out of memory");
            break;
        }
        *keys = grown;
        if (!((*keys)[*n] = sigkey_load_public(kp, err)))
            rc = err_prefix(err, "trust directory");
        else
            (*n)++;
    }
    closedir(d);
    return rc;
}

static void free_keys(EVP_PKEY **keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        EVP_PKEY_free(keys[i]);
    free(keys);
}

/* After a file loaded: its signature, as require_signature and the trust directory ask. */
static int check_signature(struct policy *p, const char *path, const char *text, size_t n,
                           struct cordon_err *err)
{
    EVP_PKEY **keys = NULL;
    size_t n_keys = 0;
    int rc = load_trusted(&keys, &n_keys, err);
    bool system = n_keys > 0;
    if (rc == 0 && p->gov.require_signature) {
        /* require_signature narrows: only that key, which trust.d must hold too if it is set. */
        EVP_PKEY *k = sigkey_load_public(p->gov.require_signature, err);
        if (!k) {
            rc = err_prefix(err, "%s: require_signature", path);
        } else {
            char want[65], have[65];
            bool in_trust = !system;
            sigkey_id(k, want);
            for (size_t i = 0; i < n_keys; i++)
                if (sigkey_id(keys[i], have) == 0 && !strcmp(have, want))
                    in_trust = true;
            free_keys(keys, n_keys);
            keys = NULL;
            n_keys = 0;
            if (!in_trust) {
                EVP_PKEY_free(k);
                rc = err_set(err, CORDON_E_POLICY, "%s: require_signature: key is not in %s", path,
                             policy_trust_dir());
            } else {
                keys = malloc(sizeof *keys);
                if (!keys) {
                    EVP_PKEY_free(k);
                    rc = err_set(err, CORDON_E_INTERNAL, "out of memory");
                } else {
                    keys[0] = k;
                    n_keys = 1;
                }
            }
        }
    }
    if (rc == 0 && n_keys) {
        char why[200] = "";
        int r = check_sig(path, text, n, keys, n_keys, p->signer, why, sizeof why, err);
        if (r < 0 && err->errnum == ENOENT)
            rc = err_set(err, CORDON_E_POLICY, "%s: unsigned policy: no '%s.sig' (%s)", path, path,
                         system ? "trust.d requires a signature" : "require_signature");
        else if (r < 0)
            rc = -1;
        else if (r == 0)
            rc = err_set(err, CORDON_E_POLICY, "%s: refused: %s", path, why);
    }
    free_keys(keys, n_keys);
    /* What the signer wrote holds: from here on a caller may only tighten it. */
    if (rc == 0 && p->signer[0])
        policy_narrow_only(p, POLICY_NARROW_SIGNED);
    return rc;
}

struct policy *policy_load(const char *path, struct cordon_err *err)
{
    size_t n = 0;
    _cleanup_free_ char *buf = read_small_file(path, POLICY_MAX_BYTES, &n, err);
    if (!buf)
        return NULL;
    _cleanup_(policy_freep) struct policy *p = policy_load_string(buf, n, path, err);
    if (!p || check_signature(p, path, buf, n, err) < 0)
        return NULL;
    return TAKE_PTR(p);
}

int policy_require_trusted(const struct policy *p, struct cordon_err *err)
{
    if (p->signer[0])
        return 0;
    EVP_PKEY **keys = NULL;
    size_t n = 0;
    int rc = load_trusted(&keys, &n, err);
    free_keys(keys, n); /* what was loaded before a failure too */
    if (rc < 0)
        return -1;
    if (n)
        return err_set(err, CORDON_E_POLICY, "refused: %s requires a signed policy file (-p)",
                       policy_trust_dir());
    return 0;
}

int policy_verify_file(const char *path, const char *pub, char key_id[65], struct cordon_err *err)
{
    EVP_PKEY *k = sigkey_load_public(pub, err);
    if (!k)
        return -1;
    size_t n = 0;
    _cleanup_free_ char *text = read_small_file(path, 1u << 20, &n, err);
    char why[200] = "";
    int r = text ? check_sig(path, text, n, &k, 1, key_id, why, sizeof why, err) : -1;
    EVP_PKEY_free(k);
    if (r == 0)
        return err_set(err, CORDON_E_POLICY, "%s", why);
    return r < 0 ? -1 : 0;
}

/* ---- break-glass ---- */

#define APPROVAL_FORMAT "cordon-break-glass-approval v1"

/* WHEN: a duration from NOW ("30m") or an RFC 3339 UTC time ("2026-12-03T15:00:00Z"). */
static int parse_until(const char *when, time_t now, time_t *out, char *why, size_t len)
{
    struct tm tm = { 0 };
    const char *end = strptime(when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (end && !*end) {
        *out = timegm(&tm);
        return 0;
    }
    uint64_t ms = 0;
    char dwhy[160];
    if (parse_duration_ms(when, &ms, dwhy, sizeof dwhy) < 0 || ms == 0)
        return why_printf(why, len,
                          "--until: expected a duration like 30m or a time like "
                          "2026-12-03T15:00:00Z, got \"%s\"",
                          when);
    *out = now + (time_t)((ms + 999) / 1000);
    return 0;
}

static void format_utc(time_t t, char out[32])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void approval_message(const char *digest, long long not_after, const char *reason,
                             char out[256])
{
    char rd[65];
    sha256_hex(reason, strlen(reason), rd);
    snprintf(out, 256, APPROVAL_FORMAT " %s %lld %s", digest, not_after, rd);
}

int policy_approve_break_glass(const struct policy *p, const char *key_path, const char *reason,
                               const char *until, char **out, struct cordon_err *err)
{
    char why[200];
    time_t now = time(NULL), end = 0;
    if (!*reason)
        return err_set(err, CORDON_E_USAGE, "approve: the reason is empty");
    if (parse_until(until, now, &end, why, sizeof why) < 0)
        return err_set(err, CORDON_E_USAGE, "approve: %s", why);
    _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = sigkey_load_private(key_path, "approval key", err);
    if (!key)
        return -1;
    char digest[65], msg[256], sig[SIGKEY_B64_LEN], key_id[65], t[32];
    policy_digest_hex(p, digest);
    approval_message(digest, (long long)end, reason, msg);
    TRY(sigkey_sign(key, msg, strlen(msg), sig, err));
    sigkey_id(key, key_id);
    format_utc(end, t);
    json_auto_t *j = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:s}", "format", APPROVAL_FORMAT,
                               "policy_digest", digest, "reason", reason, "not_after",
                               (json_int_t)end, "not_after_utc", t, "key_id", key_id, "sig", sig);
    *out = j ? json_dumps(j, JSON_SORT_KEYS) : NULL;
    return *out ? 0 : err_set(err, CORDON_E_INTERNAL, "out of memory");
}

/* The approval token at PATH for a break-glass of BASE (digest) with REASON, until END. */
static int check_approval(const struct policy *p, const char *path, const char *base,
                          const char *reason, time_t now, time_t end, char key_id[65],
                          struct cordon_err *err)
{
    _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = sigkey_load_public(p->gov.approval_key, err);
    if (!key)
        return err_prefix(err, "break_glass.approval_key");
    size_t n = 0;
    _cleanup_free_ char *text = read_small_file(path, SIG_MAX_BYTES, &n, err);
    if (!text)
        return err_prefix(err, "--approval");
    json_auto_t *j = json_parse_strict(text, n, 0, NULL);
    const char *fmt = json_string_value(json_object_get(j, "format"));
    const char *digest = json_string_value(json_object_get(j, "policy_digest"));
    const char *why = json_string_value(json_object_get(j, "reason"));
    const char *sig = json_string_value(json_object_get(j, "sig"));
    json_t *na = json_object_get(j, "not_after");
    if (!fmt || strcmp(fmt, APPROVAL_FORMAT) != 0 || !digest || !why || !sig ||
        !json_is_integer(na))
        return err_set(err, CORDON_E_POLICY, "--approval: '%s' is not a break-glass approval",
                       path);
    char msg[256];
    approval_message(digest, (long long)json_integer_value(na), why, msg);
    if (!sigkey_verify(key, msg, strlen(msg), sig))
        return err_set(err, CORDON_E_POLICY,
                       "--approval: '%s' is not signed by "
                       "break_glass.approval_key",
                       path);
    if (strcmp(digest, base) != 0)
        return err_set(err, CORDON_E_POLICY,
                       "--approval: '%s' approves another policy "
                       "(digest %.12s..., this one %.12s...)",
                       path, digest, base);
    if (strcmp(why, reason) != 0)
        return err_set(err, CORDON_E_POLICY, "--approval: '%s' approves another reason", path);
    if ((time_t)json_integer_value(na) <= now)
        return err_set(err, CORDON_E_POLICY, "--approval: '%s' expired", path);
    if (end > (time_t)json_integer_value(na))
        return err_set(err, CORDON_E_POLICY, "--until: later than the approval allows");
    sigkey_id(key, key_id);
    return 0;
}

int policy_break_glass(struct policy *p, const struct policy_break_glass_request *req,
                       struct cordon_err *err)
{
    char why[200], base[65];
    time_t now = time(NULL), end = 0;
    if (!req->reason || !*req->reason || strlen(req->reason) > 500)
        return err_set(err, CORDON_E_USAGE, "--break-glass: needs a reason (1 to 500 bytes)");
    if (!req->until)
        return err_set(err, CORDON_E_USAGE, "--break-glass: needs --until DURATION");
    if (!p->gov.break_glass_max_ms)
        return err_set(err, CORDON_E_POLICY,
                       "--break-glass: refused: the policy has no "
                       "break_glass.max_duration");
    if (parse_until(req->until, now, &end, why, sizeof why) < 0)
        return err_set(err, CORDON_E_USAGE, "%s", why);
    if (end <= now) {
        char t[32];
        format_utc(end, t);
        return err_set(err, CORDON_E_POLICY, "--break-glass: refused: the window ended at %s", t);
    }
    if ((uint64_t)(end - now) * 1000 > p->gov.break_glass_max_ms) {
        char max[32];
        format_duration_ms(p->gov.break_glass_max_ms, max, sizeof max);
        return err_set(err, CORDON_E_POLICY,
                       "--until: longer than break_glass.max_duration "
                       "(%s)",
                       max);
    }
    policy_digest_hex(p, base);
    char approver[65] = "";
    if (p->gov.approval_key && !req->approval)
        return err_set(err, CORDON_E_POLICY,
                       "--break-glass: refused: the policy requires a "
                       "signed approval (--approval FILE)");
    if (req->approval && !p->gov.approval_key)
        return err_set(err, CORDON_E_USAGE,
                       "--approval: the policy names no "
                       "break_glass.approval_key");
    if (req->approval &&
        check_approval(p, req->approval, base, req->reason, now, end, approver, err) < 0)
        return -1;

    json_auto_t *relaxed = json_object();
    for (size_t i = 0; i < req->n_relax; i++) {
        const char *eq = strchr(req->relax[i], '=');
        _cleanup_free_ char *key = eq ? strndup(req->relax[i], (size_t)(eq - req->relax[i])) : NULL;
        if (!key)
            return err_set(err, CORDON_E_USAGE, "--relax: expected KEY=VALUE, got \"%s\"",
                           req->relax[i]);
        if (!policy_may_relax(p, key))
            return err_set(err, CORDON_E_POLICY,
                           "--relax: refused: \"%s\" is not in "
                           "break_glass.may_relax",
                           key);
        /* The one way a key relaxes under a signature: it is in may_relax. */
        TRY(policy_set_unchecked(p, key, eq + 1, "--relax", err));
        json_t *prev = json_object_get(relaxed, key);
        json_t *vals = prev ? prev : json_array();
        char shown[80];
        policy_value_shown(key, eq + 1, shown, sizeof shown);
        json_array_append_new(vals, json_string(shown));
        if (!prev)
            json_object_set_new(relaxed, key, vals);
    }
    /* The window is enforced, not only recorded: the run ends when it closes. */
    uint64_t left = (uint64_t)(end - now) * 1000;
    if (!p->limits.wall_ms || p->limits.wall_ms > left)
        p->limits.wall_ms = left;
    p->limits.defaulted &= ~(1u << POLICY_LIMIT_WALL);
    TRY(policy_finalize(p, err));

    char t[32], id[65], seed[600];
    format_utc(end, t);
    snprintf(seed, sizeof seed, "%s %lld %s", base, (long long)now, req->reason);
    sha256_hex(seed, strlen(seed), id);
    id[16] = '\0';
    json_decref(p->break_glass);
    /* clang-format off */
    p->break_glass = json_pack("{s:s, s:s, s:s, s:O, s:o, s:s}", "id", id, "reason", req->reason,
                               "until", t, "relaxed", relaxed, "approved_by",
                               approver[0] ? json_string(approver) : json_null(),
                               "base_policy_digest", base);
    /* clang-format on */
    return p->break_glass ? 0 : err_set(err, CORDON_E_INTERNAL, "out of memory");
}
