/*
 * egress/credentials.c: the gateway's side of secrets. The supervisor reads
 * each value and makes a random placeholder for it (the sandbox only ever
 * sees the placeholder); in the gateway a placeholder is swapped for its
 * value in requests to the hosts the secret is bound to, refused (and
 * recorded) anywhere else, in headers and bodies alike; answers are
 * scrubbed of the values (egress/scrub.h) and the TLS of bound hosts is
 * intercepted with the run's CA (egress/mint.h).
 */
#include "egress/gateway_int.h"

#include "common/cleanup.h"
#include "common/text.h"
#include "egress/mint.h"
#include "policy/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

int credentials_init(struct gateway *gw, struct cordon_err *err)
{
    const struct gateway_config *cfg = gw->cfg;
    if (!cfg->n_secrets)
        return 0;
    gw->values = calloc(cfg->n_secrets, sizeof *gw->values);
    gw->placeholders = calloc(cfg->n_secrets, sizeof *gw->placeholders);
    if (!gw->values || !gw->placeholders)
        return err_set(err, CORDON_E_SETUP, "out of memory for the gateway's secrets");
    for (size_t i = 0; i < cfg->n_secrets; i++) {
        const struct gateway_secret *sec = &cfg->secrets[i];
        size_t ph = strlen(sec->placeholder);
        gw->values[i] = (struct scrub_pair){ sec->value, sec->value_len, sec->placeholder, ph };
        gw->placeholders[i] = (struct scrub_pair){ sec->placeholder, ph, "", 0 };
    }
    gw->n_pairs = cfg->n_secrets;
    return 0;
}

void credentials_fini(struct gateway *gw)
{
    free(gw->values);
    free(gw->placeholders);
}

json_t *credentials_names(const struct gateway_config *cfg, uint64_t mask)
{
    json_t *names = json_array();
    for (size_t i = 0; i < cfg->n_secrets; i++)
        if (mask & (1ull << i))
            json_array_append_new(names, json_string(cfg->secrets[i].name));
    return names;
}

/*
 * A placeholder of a secret not bound here in the body's data IN[FROM,
 * FROM + LEN), or across its seam with the data before: the secret's index,
 * or -1. Data only, so that chunk framing cannot split one unseen. Called
 * before the bytes are forwarded: the upstream never gets a whole one.
 */
int credentials_body_exfil(struct conn *c, struct evbuffer *in, size_t from, size_t len)
{
    struct gateway *gw = c->gw;
    if (!c->foreign)
        return -1;
    struct evbuffer_ptr ptr;
    if (evbuffer_ptr_set(in, &ptr, from, EVBUFFER_PTR_SET) < 0)
        return -1;
    while (len) {
        struct evbuffer_iovec v[16];
        int nv = evbuffer_peek(in, (ev_ssize_t)len, &ptr, v, 16);
        size_t done = 0;
        for (int i = 0; i < nv && i < 16 && done < len; i++) {
            size_t take = v[i].iov_len < len - done ? v[i].iov_len : len - done;
            int hit = scrub_find(&c->find_body, gw->placeholders, gw->n_pairs, c->foreign,
                                 v[i].iov_base, take);
            if (hit >= 0)
                return hit;
            done += take;
        }
        if (!done || evbuffer_ptr_set(in, &ptr, done, EVBUFFER_PTR_ADD) < 0)
            break;
        len -= done;
    }
    return -1;
}

/* The same for one whole framing line (a chunk-size line, a trailer field). */
int credentials_line_exfil(const struct conn *c, const char *line, size_t len)
{
    const struct gateway *gw = c->gw;
    for (size_t i = 0; i < gw->n_pairs; i++)
        if ((c->foreign >> i & 1) &&
            memmem(line, len, gw->placeholders[i].from, gw->placeholders[i].from_len))
            return (int)i;
    return -1;
}

static bool secret_bound_here(const struct gateway_secret *sec, const struct conn *c)
{
    for (size_t k = 0; k < sec->n_hosts; k++)
        if (egress_rule_matches_host(&sec->hosts[k], &c->target.host, c->target.port))
            return true;
    return false;
}

/* Is any secret bound to this destination? (Then its TLS is intercepted.) */
bool credentials_bound_here(const struct conn *c)
{
    const struct gateway_config *cfg = c->gw->cfg;
    for (size_t i = 0; i < cfg->n_secrets; i++)
        if (secret_bound_here(&cfg->secrets[i], c))
            return true;
    return false;
}

static bool carries(const char *buf, size_t len, const struct gateway_secret *sec)
{
    return memmem(buf, len, sec->placeholder, strlen(sec->placeholder)) != NULL;
}

/*
 * H's Basic credentials ("Authorization: Basic base64(user:password)", as
 * git and most HTTP clients send a password), decoded into a fresh buffer
 * of *N bytes; NULL when H is no Authorization header of the Basic scheme
 * with valid base64. A placeholder hides there from a plain search.
 */
static char *basic_credentials(const struct http_header *h, size_t *n)
{
    const char *v = h->value, *end = h->value + h->value_len;
    if (!http_header_is(h, "authorization") || h->value_len < 6 || !http_equal_ci(v, 5, "basic") ||
        (v[5] != ' ' && v[5] != '\t'))
        return NULL;
    v += 5;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    char *out = malloc((size_t)(end - v) / 4 * 3 + 1);
    if (out && base64_decode(v, (size_t)(end - v), out, n) == 0)
        return out;
    free(out);
    return NULL;
}

/* The base64 text of H's Basic credentials (after the scheme and its blanks). */
static const char *basic_text(const struct http_header *h, size_t *n)
{
    const char *v = h->value + 5, *end = h->value + h->value_len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    *n = (size_t)(end - v);
    return v;
}

/* Free a buffer that held credentials, wiped first. */
static void wipe_free(char *p, size_t n)
{
    if (p)
        explicit_bzero(p, n);
    free(p);
}

/* Does REQ carry SEC's placeholder: in its target, a header, or Basic credentials? */
static bool request_carries(const struct http_request *req, const struct gateway_secret *sec)
{
    if (carries(req->target, req->target_len, sec))
        return true;
    for (size_t h = 0; h < req->n_headers; h++) {
        const struct http_header *hd = &req->headers[h];
        if (carries(hd->value, hd->value_len, sec) || carries(hd->name, hd->name_len, sec))
            return true;
        size_t n = 0;
        char *basic = basic_credentials(hd, &n);
        bool in = basic && carries(basic, n, sec);
        wipe_free(basic, n);
        if (in)
            return true;
    }
    return false;
}

/*
 * Which placeholders the request carries (in its target or any header).
 * One bound elsewhere is an exfiltration attempt: refused and recorded.
 * One bound here is swapped for its value in the headers sent upstream.
 */
bool credentials_check(struct conn *c, const struct http_request *req)
{
    const struct gateway_config *cfg = c->gw->cfg;
    for (size_t i = 0; i < cfg->n_secrets; i++) {
        const struct gateway_secret *sec = &cfg->secrets[i];
        if (!secret_bound_here(sec, c))
            c->foreign |= 1ull << i; /* looked for in the body too */
        if (!request_carries(req, sec))
            continue;
        char rule[200];
        if (!secret_bound_here(sec, c)) {
            snprintf(rule, sizeof rule, "exfil:%s", sec->name);
            conn_refuse(c, 403, rule, "secret %s may only be sent to its own hosts, not %s",
                        sec->name, c->target.host_text);
            return false;
        }
        if (c->target.port == 443 && !c->inner) {
            /* 443 is TLS's port: a request in clear there would carry the value in clear. */
            snprintf(rule, sizeof rule, "exfil:%s", sec->name);
            conn_refuse(c, 403, rule, "secret %s goes to %s:443 inside TLS only, not in plain HTTP",
                        sec->name, c->target.host_text);
            return false;
        }
        if (sec->expires_us && gateway_now_us() > sec->expires_us) {
            snprintf(rule, sizeof rule, "secret_expired:%s", sec->name);
            conn_refuse(c, 403, rule, "secret %s has expired", sec->name);
            return false;
        }
        c->secrets_used |= 1ull << i;
    }
    /* One set of credentials: a second Authorization would go up unswapped or unscrubbed. */
    size_t auths = 0;
    for (size_t h = 0; h < req->n_headers; h++)
        auths += http_header_is(&req->headers[h], "authorization");
    if (c->secrets_used && auths > 1) {
        conn_refuse(c, 400, "bad_request", "more than one Authorization header");
        return false;
    }
    /*
     * TRACE echoes the request, value and all. The answer is scrubbed, but
     * a method whose whole point is the reflection is refused outright.
     * Any case: some servers read "trace" as TRACE.
     */
    if (c->secrets_used &&
        (strcasecmp(req->method, "TRACE") == 0 || strcasecmp(req->method, "TRACK") == 0)) {
        conn_refuse(c, 403, "trace_with_secret", "%s would echo a secret back; refused",
                    req->method);
        return false;
    }
    return true;
}

/* A placeholder of secret I in the body of a request to a host it is not
 * bound to: refused like one in a header, or cut if the answer has begun. */
void credentials_refuse_exfil(struct conn *c, size_t i)
{
    const struct gateway_secret *sec = &c->gw->cfg->secrets[i];
    char rule[200];
    snprintf(rule, sizeof rule, "exfil:%s", sec->name);
    if (c->down_bytes == 0 && !(c->answer && c->answer->head_sent)) {
        relay_stop_reading(c);
        conn_refuse(c, 403, rule, "secret %s may only be sent to its own hosts, not %s", sec->name,
                    c->target.host_text);
        return;
    }
    snprintf(c->rule, sizeof c->rule, "%s", rule);
    c->allowed = false;
    c->status = 403;
    relay_end(c, "a secret's placeholder in the body, for a host it is not bound to");
}

/* A header value on its way upstream, with the placeholders of the secrets
 * bound here replaced by their values. */
void credentials_add_value(struct conn *c, struct evbuffer *out, const char *v, size_t n)
{
    const struct gateway_config *cfg = c->gw->cfg;
    size_t pos = 0;
    while (pos < n) {
        const struct gateway_secret *hit = NULL;
        const char *at = v + n;
        for (size_t i = 0; i < cfg->n_secrets; i++) {
            if (!(c->secrets_used & (1ull << i)))
                continue;
            const struct gateway_secret *sec = &cfg->secrets[i];
            const char *p = memmem(v + pos, n - pos, sec->placeholder, strlen(sec->placeholder));
            if (p && p < at) {
                at = p;
                hit = sec;
            }
        }
        evbuffer_add(out, v + pos, (size_t)(at - (v + pos)));
        if (!hit)
            return;
        evbuffer_add(out, hit->value, hit->value_len);
        pos = (size_t)(at - v) + strlen(hit->placeholder);
    }
}

void credentials_prepare_basic(struct conn *c, const struct http_request *req)
{
    const struct http_header *h = NULL;
    for (size_t i = 0; i < req->n_headers && !h; i++)
        if (http_header_is(&req->headers[i], "authorization"))
            h = &req->headers[i];
    size_t n = 0;
    char *plain = h && c->secrets_used ? basic_credentials(h, &n) : NULL;
    struct evbuffer *swapped = plain ? evbuffer_new() : NULL;
    if (swapped) {
        /* The credentials with the values in, encoded again. Out of memory,
         * the header goes as the client wrote it: placeholders, no value. */
        credentials_add_value(c, swapped, plain, n);
        size_t len = evbuffer_get_length(swapped), ln;
        char *text = (char *)evbuffer_pullup(swapped, -1);
        const char *as_sent = basic_text(h, &ln);
        c->basic_real = text ? malloc(4 * ((len + 2) / 3) + 1) : NULL;
        c->basic_client = c->basic_real ? strndup(as_sent, ln) : NULL;
        if (c->basic_client) {
            base64_encode(text, len, c->basic_real);
        } else {
            free(c->basic_real);
            c->basic_real = NULL;
        }
        if (text)
            explicit_bzero(text, len);
        evbuffer_free(swapped);
    }
    wipe_free(plain, n);
}

uint64_t credentials_scrubbed(const struct conn *c)
{
    size_t n = c->gw->n_pairs;
    uint64_t own = n < 64 ? c->scrubbed & ((1ull << n) - 1) : c->scrubbed;
    /* The pair after the values is the Basic credentials: the secrets they held. */
    if (c->basic_real && n < 64 && (c->scrubbed >> n & 1))
        own |= c->secrets_used;
    return own;
}

void credentials_scrub_answer(struct conn *c, const struct http_request *req, bool bound)
{
    struct gateway *gw = c->gw;
    if (!gw->n_pairs)
        return;
    const struct scrub_pair *pairs = gw->values;
    size_t n_pairs = gw->n_pairs;
    /* An endpoint that echoes Authorization would hand back the value, encoded. */
    if (c->basic_real && n_pairs < SCRUB_MAX_PAIRS &&
        (c->pairs = calloc(n_pairs + 1, sizeof *c->pairs))) {
        memcpy(c->pairs, gw->values, n_pairs * sizeof *c->pairs);
        c->pairs[n_pairs] = (struct scrub_pair){ c->basic_real, strlen(c->basic_real),
                                                 c->basic_client, strlen(c->basic_client) };
        pairs = c->pairs;
        n_pairs++;
    }
    c->answer = calloc(1, sizeof *c->answer);
    if (c->answer)
        scrub_answer_init(c->answer, pairs, n_pairs,
                          (strcmp(c->method, "HEAD") == 0 ? SCRUB_HEAD_REQUEST : 0) |
                              (req->version_minor == 0 ? SCRUB_CLIENT_HTTP10 : 0) |
                              (bound ? SCRUB_REFUSE_ENCODED : 0));
}

/* A secret's real value from "env:VAR" or "file:PATH", read by the supervisor. */
static int read_secret_value(const char *from, char **value, size_t *len, char *why, size_t why_len)
{
    if (strncmp(from, "env:", 4) == 0) {
        const char *v = getenv(from + 4);
        if (!v || !*v)
            return why_printf(why, why_len, "environment variable \"%s\" is not set", from + 4);
        *len = strlen(v);
        *value = strdup(v);
        return *value ? 0 : why_printf(why, why_len, "out of memory");
    }
    if (strncmp(from, "file:", 5) != 0)
        return why_printf(why, why_len, "unknown secret source \"%s\"", from);
    _cleanup_close_ int fd = open(from + 5, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return why_printf(why, why_len, "cannot open \"%s\": %s", from + 5, strerror(errno));
    char buf[65536];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 || n == (ssize_t)sizeof buf)
        return why_printf(why, why_len, "cannot read \"%s\" (at most 64 KiB)", from + 5);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--; /* the newline an editor adds is not part of a token */
    *value = malloc((size_t)n + 1);
    if (!*value) {
        explicit_bzero(buf, sizeof buf);
        return why_printf(why, why_len, "out of memory");
    }
    memcpy(*value, buf, (size_t)n);
    (*value)[n] = '\0';
    *len = (size_t)n;
    explicit_bzero(buf, sizeof buf);
    return 0;
}

/* Values and placeholders for P's secrets. */
int credentials_load(const struct policy *p, struct gateway_config *out, char *why, size_t why_len)
{
    /* The policy refuses more; each secret is a bit of secrets_used. */
    _Static_assert(POLICY_MAX_SECRETS <= 64, "secrets_used is a 64-bit mask");
    if (p->n_secrets > POLICY_MAX_SECRETS)
        return why_printf(why, why_len, "at most %d secrets", POLICY_MAX_SECRETS);
    out->secrets = calloc(p->n_secrets, sizeof *out->secrets);
    if (!out->secrets)
        return why_printf(why, why_len, "out of memory");
    for (size_t i = 0; i < p->n_secrets; i++, out->n_secrets++) {
        const struct policy_secret *ps = &p->secrets[i];
        struct gateway_secret *gs = &out->secrets[i];
        snprintf(gs->name, sizeof gs->name, "%s", ps->name);
        if (read_secret_value(ps->from, &gs->value, &gs->value_len, why, why_len) < 0)
            return -1;
        /* Random per run: a placeholder seen in one run is worth nothing in another. */
        unsigned char rnd[16];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            return why_printf(why, why_len, "cannot make a placeholder: %s", strerror(errno));
        int o = snprintf(gs->placeholder, sizeof gs->placeholder, "cordon-placeholder-");
        for (size_t k = 0; k < sizeof rnd; k++)
            o += snprintf(gs->placeholder + o, sizeof gs->placeholder - (size_t)o, "%02x", rnd[k]);
        gs->hosts = calloc(ps->n_hosts, sizeof *gs->hosts);
        if (!gs->hosts)
            return why_printf(why, why_len, "out of memory");
        memcpy(gs->hosts, ps->host_rules, ps->n_hosts * sizeof *gs->hosts);
        gs->n_hosts = ps->n_hosts;
        gs->expires_us = ps->ttl_ms ? gateway_now_us() + ps->ttl_ms * 1000 : 0;
    }
    return 0;
}

void gateway_config_wipe_values(struct gateway_config *cfg)
{
    for (size_t i = 0; i < cfg->n_secrets; i++)
        if (cfg->secrets[i].value)
            explicit_bzero(cfg->secrets[i].value, cfg->secrets[i].value_len);
}

void credentials_release(struct gateway_config *cfg)
{
    for (size_t i = 0; i < cfg->n_secrets; i++) {
        if (cfg->secrets[i].value) {
            explicit_bzero(cfg->secrets[i].value, cfg->secrets[i].value_len);
            free(cfg->secrets[i].value);
        }
        free(cfg->secrets[i].hosts);
    }
    free(cfg->secrets);
    mint_free(cfg->mint);
    cfg->secrets = NULL;
    cfg->n_secrets = 0;
    cfg->mint = NULL;
}
