/*
 * egress/tls.c: TLS interception for hosts a secret is bound to. The client
 * gets a certificate from the run's CA (egress/mint.h), which only the
 * sandbox trusts; the server is verified against the host's trust store. The
 * request inside the tunnel is then read and checked like a plain one.
 */
#include "egress/gateway_int.h"
#include "egress/mint.h"

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

int tls_init(struct gateway *gw, struct cordon_err *err)
{
    const struct gateway_config *cfg = gw->cfg;
    if (!cfg->mint)
        return 0;
    /* The trust store is loaded now, whole: once confined, the gateway
     * cannot open files (SSL_CERT_FILE is honoured, as OpenSSL does). */
    gw->upstream_tls = SSL_CTX_new(TLS_client_method());
    const char *env = getenv(X509_get_default_cert_file_env());
    const char *file = cfg->upstream_ca ? cfg->upstream_ca
        : env && *env                   ? env
                                        : X509_get_default_cert_file();
    if (!gw->upstream_tls || SSL_CTX_load_verify_locations(gw->upstream_tls, file, NULL) != 1) {
        ERR_clear_error();
        return err_set(err, CORDON_E_SETUP, "cannot load the trust store '%s'", file);
    }
    SSL_CTX_set_verify(gw->upstream_tls, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_min_proto_version(gw->upstream_tls, TLS1_2_VERSION);
    return 0;
}

void tls_fini(struct gateway *gw)
{
    SSL_CTX_free(gw->upstream_tls);
}

/* The answer is encrypted: free the connection once its records have left
 * the socket's bufferevent too (the idle timer bounds the wait). */
static void free_when_sent(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)fd;
    (void)what;
    struct bufferevent *under = bufferevent_get_underlying(c->client);
    if (!under || evbuffer_get_length(bufferevent_get_output(under)) == 0) {
        conn_free(c);
        return;
    }
    if (!c->flush_ev)
        c->flush_ev = evtimer_new(c->gw->base, free_when_sent, c);
    struct timeval soon = ms_timeval(20);
    if (!c->flush_ev || evtimer_add(c->flush_ev, &soon) < 0) {
        conn_free(c);
        return;
    }
    conn_arm_timer(c, c->gw->cfg->idle_timeout_ms);
}

/* The server's TLS failed, or it finished: refuse if nothing was relayed yet,
 * else flush what it said and close. */
void tls_upstream_done(struct conn *c, short what)
{
    if ((what & BEV_EVENT_ERROR) && c->down_bytes == 0) {
        char msg[160] = "connection failed";
        unsigned long e = bufferevent_get_openssl_error(c->upstream);
        if (e)
            ERR_error_string_n(e, msg, sizeof msg);
        ERR_clear_error();
        conn_refuse(c, 502, "upstream_tls", "TLS with %s failed: %s", c->target.host_text, msg);
        return;
    }
    bufferevent_free(c->upstream);
    c->upstream = NULL;
    c->state = S_CLOSING;
    bufferevent_disable(c->client, EV_READ);
    if (evbuffer_get_length(bufferevent_get_output(c->client)) == 0) {
        free_when_sent(-1, 0, c);
        return;
    }
    bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
    bufferevent_setcb(c->client, NULL, conn_close_when_flushed, conn_closing_event, c);
    conn_arm_timer(c, c->gw->cfg->idle_timeout_ms);
}

static void tls_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    if (what & BEV_EVENT_CONNECTED)
        return; /* a handshake finished */
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
        return;
    if (bev == c->upstream) {
        /* A failed handshake is refused as such; a close ends the answer. */
        if (((what & BEV_EVENT_ERROR) && c->down_bytes == 0 &&
             !(c->answer && c->answer->head_sent)) ||
            relay_answer_eof(c))
            tls_upstream_done(c, what);
        return;
    }
    /* The client: a close after a complete request still gets the answer. */
    if ((what & BEV_EVENT_EOF) && c->state == S_RELAY && c->body_done) {
        bufferevent_disable(c->client, EV_READ);
        return;
    }
    relay_end(c, (what & BEV_EVENT_ERROR) ? "TLS with the client failed" : NULL);
}

static void tls_client_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    conn_arm_timer(c, c->gw->cfg->idle_timeout_ms);
    relay_client_data(c, bufferevent_get_input(bev));
}

static void tls_upstream_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    conn_arm_timer(c, c->gw->cfg->idle_timeout_ms);
    char buf[16384];
    size_t n;
    while ((n = (size_t)evbuffer_remove(in, buf, sizeof buf)) > 0 && n != (size_t)-1)
        if (!relay_answer_bytes(c, buf, n))
            return;
}

/* Output drained: read the other side again. */
static void tls_client_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    (void)bev;
    if (c->upstream)
        bufferevent_enable(c->upstream, EV_READ);
}

static void tls_upstream_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    (void)bev;
    if (c->state == S_RELAY && !c->body_done)
        bufferevent_enable(c->client, EV_READ);
}

/* The inner request was checked and sent: relay its body and the answer. */
void tls_relay_start(struct conn *c)
{
    c->state = S_RELAY;
    c->allowed = true;
    c->status = 200;
    size_t head = conn_request(c)->head_len;
    c->up_bytes += head;
    c->gw->budget.bytes += head;
    bufferevent_setcb(c->client, tls_client_read, tls_client_write, tls_event, c);
    bufferevent_setcb(c->upstream, tls_upstream_read, tls_upstream_write, tls_event, c);
    bufferevent_enable(c->client, EV_READ | EV_WRITE);
    bufferevent_enable(c->upstream, EV_READ | EV_WRITE);
    conn_arm_timer(c, c->gw->cfg->idle_timeout_ms);
    if (evbuffer_get_length(bufferevent_get_input(c->client)))
        relay_client_data(c, bufferevent_get_input(c->client));
}

/*
 * CONNECT to a host a secret is bound to: answer 200, then speak TLS to the
 * client with a certificate from the run's CA (which only the sandbox
 * trusts) and to the server with verification against the host's trust
 * store, and read the request in between like a plain one.
 */
void tls_intercept_start(struct conn *c)
{
    struct gateway *gw = c->gw;
    struct cordon_err err = { 0 };
    SSL_CTX *sctx = mint_server_ctx(gw->cfg->mint, &c->target.host, &err);
    SSL *server = sctx ? SSL_new(sctx) : NULL;
    SSL *client = gw->upstream_tls ? SSL_new(gw->upstream_tls) : NULL;
    if (!server || !client) {
        SSL_free(server);
        SSL_free(client);
        ERR_clear_error();
        conn_refuse(c, 502, "intercept", "cannot intercept TLS to %s%s%s", c->target.host_text,
                    err.msg[0] ? ": " : "", err.msg);
        return;
    }
    if (c->target.host.is_ip) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(client), c->target.host_text);
    } else {
        SSL_set_tlsext_host_name(client, c->target.host.name);
        SSL_set1_host(client, c->target.host.name);
    }
    /* A transparent client sent its ClientHello already: no proxy answer. */
    if (!c->transparent)
        evbuffer_add_printf(bufferevent_get_output(c->client),
                            "HTTP/1.1 200 Connection established\r\n\r\n");
    struct bufferevent *under = c->client;
    struct bufferevent *tc = bufferevent_openssl_filter_new(
        gw->base, c->client, server, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    if (!tc) {
        SSL_free(server);
        SSL_free(client);
        conn_refuse(c, 502, "intercept", "cannot intercept TLS to %s", c->target.host_text);
        return;
    }
    c->client = tc;
    struct bufferevent *tu = bufferevent_openssl_filter_new(
        gw->base, c->upstream, client, BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
    if (!tu) {
        SSL_free(client);
        conn_refuse(c, 502, "intercept", "cannot intercept TLS to %s", c->target.host_text);
        return;
    }
    c->upstream = tu;
    c->inner = true;
    c->state = S_HEAD;
    c->allowed = true; /* the tunnel was; what happens inside is its reason */
    c->status = 200;
    bufferevent_setcb(tc, conn_head_read, NULL, conn_head_event, c);
    bufferevent_enable(tc, EV_READ | EV_WRITE);
    bufferevent_setcb(tu, NULL, NULL, tls_event, c);
    bufferevent_enable(tu, EV_READ | EV_WRITE);
    conn_arm_timer(c, HEAD_DEADLINE_MS);
    /* The ClientHello we peeked waits in the socket's buffer, where no new
     * read would announce it: hand it to the TLS filter now. */
    if (c->transparent && evbuffer_get_length(bufferevent_get_input(under)))
        bufferevent_trigger(under, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}
