/*
 * egress/mint.c: the per-run CA and the leaf certificates it mints for the
 * hosts whose TLS the gateway intercepts. Runs in the gateway process; the
 * CA key is generated here, held only in memory and freed with the mint.
 */
#include "egress/mint.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

DEFINE_CLEANUP(X509 *, X509_free)
DEFINE_CLEANUP(BIO *, BIO_free)
DEFINE_CLEANUP(BIGNUM *, BN_free)
DEFINE_CLEANUP(SSL_CTX *, SSL_CTX_free)
DEFINE_CLEANUP(GENERAL_NAMES *, GENERAL_NAMES_free)
DEFINE_CLEANUP(ASN1_OCTET_STRING *, ASN1_OCTET_STRING_free)

#define HOUR 3600L
#define DAY (24 * HOUR)

/* RFC 5280's upper bound for a commonName; longer DNS names go in the SAN only. */
#define CN_MAX 64

struct minted {
    struct host host;
    SSL_CTX *ctx;
};

struct mint {
    EVP_PKEY *ca_key;
    X509 *ca;
    char *ca_pem;
    EVP_PKEY *leaf_key;
    size_t n_minted;
    struct minted minted[MINT_MAX_HOSTS];
};

/* WHAT, then the first queued OpenSSL error; the queue is left empty. */
static int ssl_fail(struct cordon_err *err, const char *what)
{
    char reason[160] = "unknown error";
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, reason, sizeof reason);
    ERR_clear_error();
    return err_set(err, CORDON_E_SETUP, "%s: %s", what, reason);
}

/*
 * A positive 128-bit serial. Random, so that no two certificates a client
 * ever sees from any run share issuer and serial.
 */
static int set_random_serial(X509 *x, struct cordon_err *err)
{
    _cleanup_(BN_freep) BIGNUM *bn = BN_new();
    /* TOP_ONE: exactly 128 bits, so never zero. */
    if (!bn || !BN_rand(bn, 128, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY) ||
        !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)))
        return ssl_fail(err, "cannot make a certificate serial");
    return 0;
}

/* Version 3, random serial, valid from an hour ago (clock skew) for LIFETIME from now. */
static X509 *cert_new(EVP_PKEY *key, long lifetime, struct cordon_err *err)
{
    time_t now = time(NULL);
    _cleanup_(X509_freep) X509 *x = X509_new();
    if (!x || !X509_set_version(x, X509_VERSION_3) ||
        !X509_time_adj_ex(X509_getm_notBefore(x), 0, -HOUR, &now) ||
        !X509_time_adj_ex(X509_getm_notAfter(x), 0, lifetime, &now) || !X509_set_pubkey(x, key)) {
        ssl_fail(err, "cannot create a certificate");
        return NULL;
    }
    if (set_random_serial(x, err) < 0)
        return NULL;
    return TAKE_PTR(x);
}

/* Add extension NID from its config text VALUE (ours, never a host's). */
static int add_ext(X509 *x, X509 *issuer, int nid, const char *value, struct cordon_err *err)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext)
        return ssl_fail(err, "cannot build a certificate extension");
    int added = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    if (!added)
        return ssl_fail(err, "cannot add a certificate extension");
    return 0;
}

static EVP_PKEY *new_key(struct cordon_err *err)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    if (!key)
        ssl_fail(err, "cannot generate an ec p-256 key");
    return key;
}

static int make_ca(struct mint *m, struct cordon_err *err)
{
    unsigned char id[8];
    char cn[sizeof "cordon run CA " + 2 * sizeof id];
    if (RAND_bytes(id, sizeof id) != 1)
        return ssl_fail(err, "cannot read random bytes for the ca name");
    int len = snprintf(cn, sizeof cn, "cordon run CA ");
    for (size_t i = 0; i < sizeof id; i++)
        len += snprintf(cn + len, sizeof cn - (size_t)len, "%02x", id[i]);

    _cleanup_(X509_freep) X509 *ca = cert_new(m->ca_key, 7 * DAY, err);
    if (!ca)
        return -1;
    X509_NAME *name = X509_get_subject_name(ca);
    if (!X509_NAME_add_entry_by_NID(name, NID_commonName, MBSTRING_ASC, (const unsigned char *)cn,
                                    -1, -1, 0) ||
        !X509_NAME_add_entry_by_NID(name, NID_organizationName, MBSTRING_ASC,
                                    (const unsigned char *)"cordon", -1, -1, 0) ||
        !X509_set_issuer_name(ca, name))
        return ssl_fail(err, "cannot name the ca certificate");
    TRY(add_ext(ca, ca, NID_basic_constraints, "critical,CA:TRUE,pathlen:0", err));
    TRY(add_ext(ca, ca, NID_key_usage, "critical,keyCertSign,cRLSign", err));
    TRY(add_ext(ca, ca, NID_subject_key_identifier, "hash", err));
    if (!X509_sign(ca, m->ca_key, EVP_sha256()))
        return ssl_fail(err, "cannot sign the ca certificate");

    _cleanup_(BIO_freep) BIO *bio = BIO_new(BIO_s_mem());
    char *data = NULL;
    long n;
    if (!bio || !PEM_write_bio_X509(bio, ca) || (n = BIO_get_mem_data(bio, &data)) <= 0)
        return ssl_fail(err, "cannot encode the ca certificate");
    m->ca_pem = malloc((size_t)n + 1);
    if (!m->ca_pem)
        return err_set(err, CORDON_E_INTERNAL, "out of memory for the ca certificate");
    memcpy(m->ca_pem, data, (size_t)n);
    m->ca_pem[n] = '\0';
    m->ca = TAKE_PTR(ca);
    return 0;
}

struct mint *mint_new(struct cordon_err *err)
{
    _cleanup_(mint_freep) struct mint *m = calloc(1, sizeof *m);
    if (!m) {
        err_set(err, CORDON_E_INTERNAL, "out of memory for the run ca");
        return NULL;
    }
    if (!(m->ca_key = new_key(err)) || !(m->leaf_key = new_key(err)) || make_ca(m, err) < 0) {
        err_prefix(err, "run ca");
        return NULL;
    }
    return TAKE_PTR(m);
}

const char *mint_ca_pem(const struct mint *m)
{
    return m->ca_pem;
}

static bool same_host(const struct host *a, const struct host *b)
{
    if (a->is_ip != b->is_ip)
        return false;
    if (!a->is_ip)
        return strcmp(a->name, b->name) == 0;
    /* The zone routes the connection; the certificate cannot carry it. */
    return a->ip.family == b->ip.family &&
        memcmp(a->ip.bytes, b->ip.bytes, a->ip.family == AF_INET ? 4 : 16) == 0;
}

/*
 * The subjectAltName, built as ASN.1 rather than config text so that no byte
 * of a host name is ever read as config syntax. Critical when the subject is
 * empty, as RFC 5280 requires.
 */
static int add_san(X509 *leaf, const struct host *h, bool critical, struct cordon_err *err)
{
    _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *names = sk_GENERAL_NAME_new_null();
    GENERAL_NAME *gn = GENERAL_NAME_new();
    if (!names || !gn || !sk_GENERAL_NAME_push(names, gn)) {
        GENERAL_NAME_free(gn);
        return ssl_fail(err, "cannot build the subject alternative name");
    }
    if (h->is_ip) {
        _cleanup_(ASN1_OCTET_STRING_freep) ASN1_OCTET_STRING *ip = ASN1_OCTET_STRING_new();
        if (!ip || !ASN1_OCTET_STRING_set(ip, h->ip.bytes, h->ip.family == AF_INET ? 4 : 16))
            return ssl_fail(err, "cannot build the subject alternative name");
        GENERAL_NAME_set0_value(gn, GEN_IPADD, TAKE_PTR(ip));
    } else {
        ASN1_IA5STRING *dns = ASN1_IA5STRING_new();
        if (!dns || !ASN1_STRING_set(dns, h->name, -1)) {
            ASN1_IA5STRING_free(dns);
            return ssl_fail(err, "cannot build the subject alternative name");
        }
        GENERAL_NAME_set0_value(gn, GEN_DNS, dns);
    }
    if (!X509_add1_ext_i2d(leaf, NID_subject_alt_name, names, critical, X509V3_ADD_DEFAULT))
        return ssl_fail(err, "cannot add the subject alternative name");
    return 0;
}

static X509 *make_leaf(struct mint *m, const struct host *h, const char *text,
                       struct cordon_err *err)
{
    _cleanup_(X509_freep) X509 *leaf = cert_new(m->leaf_key, DAY, err);
    if (!leaf)
        return NULL;
    bool has_cn = strlen(text) <= CN_MAX;
    if ((has_cn &&
         !X509_NAME_add_entry_by_NID(X509_get_subject_name(leaf), NID_commonName, MBSTRING_ASC,
                                     (const unsigned char *)text, -1, -1, 0)) ||
        !X509_set_issuer_name(leaf, X509_get_subject_name(m->ca))) {
        ssl_fail(err, "cannot name the certificate");
        return NULL;
    }
    if (add_san(leaf, h, !has_cn, err) < 0 ||
        add_ext(leaf, m->ca, NID_basic_constraints, "CA:FALSE", err) < 0 ||
        add_ext(leaf, m->ca, NID_key_usage, "critical,digitalSignature", err) < 0 ||
        add_ext(leaf, m->ca, NID_ext_key_usage, "serverAuth", err) < 0 ||
        add_ext(leaf, m->ca, NID_authority_key_identifier, "keyid:always", err) < 0)
        return NULL;
    if (!X509_sign(leaf, m->ca_key, EVP_sha256())) {
        ssl_fail(err, "cannot sign the certificate");
        return NULL;
    }
    return TAKE_PTR(leaf);
}

static SSL_CTX *make_ctx(struct mint *m, X509 *leaf, struct cordon_err *err)
{
    _cleanup_(SSL_CTX_freep) SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
        !SSL_CTX_use_certificate(ctx, leaf) || !SSL_CTX_use_PrivateKey(ctx, m->leaf_key) ||
        !SSL_CTX_check_private_key(ctx) || !SSL_CTX_add1_chain_cert(ctx, m->ca)) {
        ssl_fail(err, "cannot set up the tls server context");
        return NULL;
    }
    /* A client-initiated renegotiation would cost the gateway a handshake for free. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    return TAKE_PTR(ctx);
}

SSL_CTX *mint_server_ctx(struct mint *m, const struct host *h, struct cordon_err *err)
{
    for (size_t i = 0; i < m->n_minted; i++)
        if (same_host(&m->minted[i].host, h))
            return m->minted[i].ctx;

    char text[256];
    if (h->is_ip) {
        struct ip_addr bare = h->ip;
        bare.scope_id = 0;
        ip_addr_format(&bare, text, sizeof text);
    } else {
        size_t len = strnlen(h->name, sizeof h->name);
        if (len == 0 || len == sizeof h->name) {
            err_set(err, CORDON_E_SETUP, "cannot mint a certificate for an %s host name",
                    len ? "unterminated" : "empty");
            return NULL;
        }
        snprintf(text, sizeof text, "%s", h->name);
    }
    if (m->n_minted == MINT_MAX_HOSTS) {
        err_set(err, CORDON_E_SETUP,
                "cannot mint a certificate for '%s': %d hosts already minted this run", text,
                MINT_MAX_HOSTS);
        return NULL;
    }

    _cleanup_(X509_freep) X509 *leaf = make_leaf(m, h, text, err);
    SSL_CTX *ctx = leaf ? make_ctx(m, leaf, err) : NULL;
    if (!ctx) {
        err_prefix(err, "certificate for '%s'", text);
        return NULL;
    }
    struct minted *slot = &m->minted[m->n_minted++];
    slot->host = *h;
    slot->ctx = ctx;
    return ctx;
}

void mint_free(struct mint *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_minted; i++)
        SSL_CTX_free(m->minted[i].ctx);
    free(m->ca_pem);
    X509_free(m->ca);
    EVP_PKEY_free(m->leaf_key);
    EVP_PKEY_free(m->ca_key);
    free(m);
}
