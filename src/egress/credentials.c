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
        if ((c->foreign >> i & 1) && memmem(line, len, gw->placeholders[i].from,
                                            gw->placeholders[i].from_len))
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
        bool found = carries(req->target, req->target_len, sec);
        for (size_t h = 0; h < req->n_headers && !found; h++)
            found = carries(req->headers[h].value, req->headers[h].value_len, sec) ||
                    carries(req->headers[h].name, req->headers[h].name_len, sec);
        if (!found)
            continue;
        char rule[200];
        if (!secret_bound_here(sec, c)) {
            snprintf(rule, sizeof rule, "exfil:%s", sec->name);
            conn_refuse(c, 403, rule, "secret %s may only be sent to its own hosts, not %s",
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
    /*
     * TRACE echoes the request, value and all. The answer is scrubbed, but
     * a method whose whole point is the reflection is refused outright.
     * Any case: some servers read "trace" as TRACE.
     */
    if (c->secrets_used && (strcasecmp(req->method, "TRACE") == 0 ||
                            strcasecmp(req->method, "TRACK") == 0)) {
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

void credentials_scrub_answer(struct conn *c, const struct http_request *req, bool bound)
{
    struct gateway *gw = c->gw;
    if (!gw->n_pairs)
        return;
    c->answer = calloc(1, sizeof *c->answer);
    if (c->answer)
        scrub_answer_init(c->answer, gw->values, gw->n_pairs,
                          (strcmp(c->method, "HEAD") == 0 ? SCRUB_HEAD_REQUEST : 0) |
                          (req->version_minor == 0 ? SCRUB_CLIENT_HTTP10 : 0) |
                          (bound ? SCRUB_REFUSE_ENCODED : 0));
}

/* A secret's real value from "env:VAR" or "file:PATH", read by the supervisor. */
static int read_secret_value(const char *from, char **value, size_t *len, char *why,
                             size_t why_len)
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
int credentials_load(const struct policy *p, struct gateway_config *out, char *why,
                     size_t why_len)
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
