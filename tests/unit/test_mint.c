/*
 * tests/unit/test_mint.c: the gateway's per-run CA (it runs in the gateway
 * process): the CA and leaf certificates field by field, leaves verified
 * against a store holding only the CA, the per-host cache and its limit, and
 * real TLS handshakes over a socketpair driven in one thread.
 */
#include "egress/mint.h"

#include "tap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

DEFINE_CLEANUP(X509 *, X509_free)
DEFINE_CLEANUP(BIO *, BIO_free)
DEFINE_CLEANUP(BIGNUM *, BN_free)
DEFINE_CLEANUP(SSL_CTX *, SSL_CTX_free)
DEFINE_CLEANUP(SSL *, SSL_free)
DEFINE_CLEANUP(X509_STORE *, X509_STORE_free)
DEFINE_CLEANUP(X509_STORE_CTX *, X509_STORE_CTX_free)

/* 75 bytes: over the 64 a commonName may hold, each label under 64. */
#define LONG_NAME "a-rather-long-label-for-a-service.in-a-deep-namespace.eu-west-1.example.com"

static struct host host_of(const char *s)
{
    struct host h;
    char why[128];
    memset(&h, 0, sizeof h);
    if (host_parse(s, strlen(s), &h, why, sizeof why) < 0)
        printf("# host_parse('%s'): %s\n", s, why);
    return h;
}

static X509 *parse_pem(const char *pem)
{
    _cleanup_(BIO_freep) BIO *bio = BIO_new_mem_buf(pem, -1);
    return bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
}

static const char *name_entry(X509 *x, int nid)
{
    static char buf[2][128];
    static int turn;
    char *out = buf[turn++ & 1];
    if (X509_NAME_get_text_by_NID(X509_get_subject_name(x), nid, out, sizeof buf[0]) < 0)
        return NULL;
    return out;
}

static int ext_critical(X509 *x, int nid)
{
    int i = X509_get_ext_by_NID(x, nid, -1);
    return i < 0 ? -1 : X509_EXTENSION_get_critical(X509_get_ext(x, i));
}

/* Validity span as days and seconds, e.g. 7 and 3600 for now-1h .. now+7d. */
static void span(X509 *x, int *days, int *secs)
{
    *days = *secs = -1;
    ASN1_TIME_diff(days, secs, X509_get0_notBefore(x), X509_get0_notAfter(x));
}

/* notBefore is an hour ago, give or take a slow test machine. */
static bool starts_an_hour_ago(X509 *x)
{
    time_t lo = time(NULL) - 3600 - 60, hi = time(NULL) - 3600 + 1;
    return X509_cmp_time(X509_get0_notBefore(x), &lo) > 0 &&
        X509_cmp_time(X509_get0_notBefore(x), &hi) < 0;
}

static bool serial_is_128_bit_positive(X509 *x)
{
    _cleanup_(BN_freep) BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
    return bn && !BN_is_negative(bn) && BN_num_bits(bn) == 128;
}

static void test_ca(struct mint *m, X509 *ca)
{
    ok(strncmp(mint_ca_pem(m), "-----BEGIN CERTIFICATE-----\n", 28) == 0, "ca pem header");
    ok(ca != NULL, "ca pem parses");
    if (!ca)
        return;
    ok(X509_check_ca(ca) == 1, "ca is a ca");
    ok(X509_get_key_usage(ca) == (KU_KEY_CERT_SIGN | KU_CRL_SIGN),
       "ca key usage keyCertSign, cRLSign");
    ok(ext_critical(ca, NID_key_usage) == 1, "ca key usage critical");
    ok(ext_critical(ca, NID_basic_constraints) == 1, "ca basic constraints critical");
    ok(X509_get_pathlen(ca) == 0, "ca pathlen 0");
    ok(X509_get0_subject_key_id(ca) != NULL, "ca subject key identifier");
    ok(X509_check_issued(ca, ca) == X509_V_OK, "ca self-issued");
    ok(X509_verify(ca, X509_get0_pubkey(ca)) == 1, "ca self-signed");
    ok(X509_get_signature_nid(ca) == NID_ecdsa_with_SHA256, "ca signed ecdsa-with-sha256");
    char group[64] = "";
    size_t glen = 0;
    EVP_PKEY_get_group_name(X509_get0_pubkey(ca), group, sizeof group, &glen);
    is_str(group, "prime256v1", "ca key p-256");

    const char *cn = name_entry(ca, NID_commonName);
    bool cn_ok = cn && strlen(cn) == 30 && strncmp(cn, "cordon run CA ", 14) == 0 &&
        strspn(cn + 14, "0123456789abcdef") == 16;
    ok(cn_ok, "ca cn 'cordon run CA <16 hex>' (%s)", cn ? cn : "none");
    is_str(name_entry(ca, NID_organizationName), "cordon", "ca o");
    ok(serial_is_128_bit_positive(ca), "ca serial 128-bit positive");
    int days, secs;
    span(ca, &days, &secs);
    ok(days == 7 && secs == 3600, "ca valid now-1h .. now+7d (%d days %d s)", days, secs);
    ok(starts_an_hour_ago(ca), "ca notBefore an hour ago");
}

static void test_two_runs_differ(X509 *ca)
{
    struct cordon_err err = { 0 };
    _cleanup_(mint_freep) struct mint *other = mint_new(&err);
    _cleanup_(X509_freep) X509 *ca2 = other ? parse_pem(mint_ca_pem(other)) : NULL;
    ok(ca2 && strcmp(name_entry(ca, NID_commonName), name_entry(ca2, NID_commonName)) != 0,
       "two runs: different ca names");
    ok(ca2 && ASN1_INTEGER_cmp(X509_get0_serialNumber(ca), X509_get0_serialNumber(ca2)) != 0,
       "two runs: different ca serials");
    ok(ca2 && !EVP_PKEY_eq(X509_get0_pubkey(ca), X509_get0_pubkey(ca2)),
       "two runs: different ca keys");
}

static void test_leaf(struct mint *m, X509 *ca)
{
    struct cordon_err err = { 0 };
    struct host h = host_of("api.example.com");
    SSL_CTX *ctx = mint_server_ctx(m, &h, &err);
    ok(ctx != NULL, "leaf ctx for api.example.com%s%s", ctx ? "" : ": ", ctx ? "" : err.msg);
    if (!ctx)
        return;
    X509 *leaf = SSL_CTX_get0_certificate(ctx);
    is_str(name_entry(leaf, NID_commonName), "api.example.com", "leaf cn");
    ok(X509_NAME_cmp(X509_get_issuer_name(leaf), X509_get_subject_name(ca)) == 0,
       "leaf issuer is the ca");
    ok(X509_verify(leaf, X509_get0_pubkey(ca)) == 1, "leaf signed by the ca key");
    ok(X509_get_signature_nid(leaf) == NID_ecdsa_with_SHA256, "leaf signed ecdsa-with-sha256");
    ok(X509_check_ca(leaf) == 0, "leaf is not a ca");
    ok(ext_critical(leaf, NID_basic_constraints) == 0, "leaf basic constraints present");
    ok(X509_get_key_usage(leaf) == KU_DIGITAL_SIGNATURE, "leaf key usage digitalSignature");
    ok(ext_critical(leaf, NID_key_usage) == 1, "leaf key usage critical");
    ok(X509_get_extended_key_usage(leaf) == XKU_SSL_SERVER, "leaf eku serverAuth");
    ok(ext_critical(leaf, NID_subject_alt_name) == 0, "leaf san not critical (cn present)");
    const ASN1_OCTET_STRING *aki = X509_get0_authority_key_id(leaf);
    ok(aki && ASN1_OCTET_STRING_cmp(aki, X509_get0_subject_key_id(ca)) == 0,
       "leaf authority key id is the ca's");
    ok(serial_is_128_bit_positive(leaf), "leaf serial 128-bit positive");
    int days, secs;
    span(leaf, &days, &secs);
    ok(days == 1 && secs == 3600, "leaf valid now-1h .. now+1d (%d days %d s)", days, secs);
    ok(starts_an_hour_ago(leaf), "leaf notBefore an hour ago");
    ok(!EVP_PKEY_eq(X509_get0_pubkey(leaf), X509_get0_pubkey(ca)), "leaf key is not the ca key");
    ok(SSL_CTX_get_min_proto_version(ctx) == TLS1_2_VERSION, "ctx min protocol tls 1.2");
    STACK_OF(X509) *chain = NULL;
    SSL_CTX_get0_chain_certs(ctx, &chain);
    ok(chain && sk_X509_num(chain) == 1 && X509_cmp(sk_X509_value(chain, 0), ca) == 0,
       "ctx chain is the ca");

    struct host ip = host_of("127.0.0.2");
    SSL_CTX *ipctx = mint_server_ctx(m, &ip, &err);
    X509 *ipleaf = ipctx ? SSL_CTX_get0_certificate(ipctx) : NULL;
    ok(ipleaf && EVP_PKEY_eq(X509_get0_pubkey(leaf), X509_get0_pubkey(ipleaf)) == 1,
       "one leaf key per mint");
    ok(ipleaf &&
           ASN1_INTEGER_cmp(X509_get0_serialNumber(leaf), X509_get0_serialNumber(ipleaf)) != 0,
       "leaves have different serials");
    is_str(ipleaf ? name_entry(ipleaf, NID_commonName) : NULL, "127.0.0.2", "ipv4 leaf cn");
    struct host v6 = host_of("[::1]");
    SSL_CTX *v6ctx = mint_server_ctx(m, &v6, &err);
    is_str(v6ctx ? name_entry(SSL_CTX_get0_certificate(v6ctx), NID_commonName) : NULL, "::1",
           "ipv6 leaf cn");

    struct host lng = host_of(LONG_NAME);
    SSL_CTX *lctx = mint_server_ctx(m, &lng, &err);
    X509 *lleaf = lctx ? SSL_CTX_get0_certificate(lctx) : NULL;
    ok(lleaf && name_entry(lleaf, NID_commonName) == NULL &&
           X509_NAME_entry_count(X509_get_subject_name(lleaf)) == 0,
       "name over 64 bytes: empty subject");
    ok(lleaf && ext_critical(lleaf, NID_subject_alt_name) == 1, "name over 64 bytes: san critical");
}

struct verify_case {
    const char *minted; /* host the leaf is minted for */
    const char *dns;    /* name to check, or NULL */
    const char *ip;     /* address to check, or NULL */
    int want;           /* X509_verify_cert() error */
};

static const struct verify_case verify_cases[] = {
    { "api.example.com", "api.example.com", NULL, X509_V_OK },
    { "api.example.com", "evil.example.com", NULL, X509_V_ERR_HOSTNAME_MISMATCH },
    { "api.example.com", "example.com", NULL, X509_V_ERR_HOSTNAME_MISMATCH },
    { "api.example.com", "x.api.example.com", NULL, X509_V_ERR_HOSTNAME_MISMATCH },
    { "api.example.com", NULL, "127.0.0.2", X509_V_ERR_IP_ADDRESS_MISMATCH },
    { "127.0.0.2", NULL, "127.0.0.2", X509_V_OK },
    { "127.0.0.2", NULL, "127.0.0.1", X509_V_ERR_IP_ADDRESS_MISMATCH },
    { "127.0.0.2", NULL, "::ffff:127.0.0.2", X509_V_ERR_IP_ADDRESS_MISMATCH },
    { "127.0.0.2", "api.example.com", NULL, X509_V_ERR_HOSTNAME_MISMATCH },
    { "[::1]", NULL, "::1", X509_V_OK },
    { "[::1]", NULL, "::2", X509_V_ERR_IP_ADDRESS_MISMATCH },
    { "[::1]", NULL, "127.0.0.1", X509_V_ERR_IP_ADDRESS_MISMATCH },
    { "[2001:db8::17]", NULL, "2001:db8::17", X509_V_OK },
    { LONG_NAME, LONG_NAME, NULL, X509_V_OK },
    { LONG_NAME, "api.example.com", NULL, X509_V_ERR_HOSTNAME_MISMATCH },
};

/* The chain a client would check: the leaf, a store holding only CA, serverAuth. */
static int verify_leaf(X509 *ca, X509 *leaf, const char *dns, const char *ip)
{
    _cleanup_(X509_STORE_freep) X509_STORE *store = X509_STORE_new();
    _cleanup_(X509_STORE_CTX_freep) X509_STORE_CTX *vctx = X509_STORE_CTX_new();
    if (!store || !vctx || !X509_STORE_add_cert(store, ca) ||
        !X509_STORE_CTX_init(vctx, store, leaf, NULL) ||
        !X509_STORE_CTX_set_purpose(vctx, X509_PURPOSE_SSL_SERVER))
        return -1;
    X509_VERIFY_PARAM *param = X509_STORE_CTX_get0_param(vctx);
    if ((dns && !X509_VERIFY_PARAM_set1_host(param, dns, 0)) ||
        (ip && !X509_VERIFY_PARAM_set1_ip_asc(param, ip)))
        return -1;
    if (X509_verify_cert(vctx) == 1)
        return X509_V_OK;
    int e = X509_STORE_CTX_get_error(vctx);
    return e == X509_V_OK ? -1 : e;
}

static void test_verify(struct mint *m, X509 *ca)
{
    for (size_t i = 0; i < sizeof verify_cases / sizeof verify_cases[0]; i++) {
        const struct verify_case *c = &verify_cases[i];
        struct cordon_err err = { 0 };
        struct host h = host_of(c->minted);
        SSL_CTX *ctx = mint_server_ctx(m, &h, &err);
        int got = ctx ? verify_leaf(ca, SSL_CTX_get0_certificate(ctx), c->dns, c->ip) : -2;
        ok(got == c->want, "leaf for %.20s checked as %.20s: %s", c->minted,
           c->dns ? c->dns : c->ip, got >= 0 ? X509_verify_cert_error_string(got) : "no result");
    }
    ERR_clear_error();
}

static void test_cache(struct mint *m)
{
    struct cordon_err err = { 0 };
    struct host a = host_of("api.example.com"), b = host_of("API.Example.COM.");
    SSL_CTX *first = mint_server_ctx(m, &a, &err);
    ok(first && mint_server_ctx(m, &a, &err) == first, "same host: cached ctx");
    ok(first && mint_server_ctx(m, &b, &err) == first, "same host, other spelling: cached ctx");
    struct host v4 = host_of("127.0.0.2"), v4b = host_of("0x7f.0.0.2");
    SSL_CTX *v4ctx = mint_server_ctx(m, &v4, &err);
    ok(v4ctx && mint_server_ctx(m, &v4b, &err) == v4ctx, "127.0.0.2 as 0x7f.0.0.2: cached ctx");
    struct host other = host_of("api2.example.com");
    SSL_CTX *octx = mint_server_ctx(m, &other, &err);
    ok(octx && octx != first, "other host: other ctx");
    struct host mapped = host_of("[::ffff:127.0.0.2]");
    SSL_CTX *mctx = mint_server_ctx(m, &mapped, &err);
    ok(mctx && mctx != v4ctx, "ipv4-mapped address: its own ctx");

    struct host empty;
    memset(&empty, 0, sizeof empty);
    err = (struct cordon_err){ 0 };
    ok(mint_server_ctx(m, &empty, &err) == NULL && err.kind == CORDON_E_SETUP,
       "empty host name refused");
    is_str(err.msg, "cannot mint a certificate for an empty host name", "empty host name message");
}

static void test_limit(void)
{
    struct cordon_err err = { 0 };
    _cleanup_(mint_freep) struct mint *m = mint_new(&err);
    if (!ok(m != NULL, "mint for the cache limit"))
        return;
    SSL_CTX *first = NULL;
    int minted = 0;
    char name[64];
    for (int i = 0; i < MINT_MAX_HOSTS; i++) {
        snprintf(name, sizeof name, "h%d.example.com", i);
        struct host h = host_of(name);
        SSL_CTX *ctx = mint_server_ctx(m, &h, &err);
        if (!ctx)
            break;
        if (!first)
            first = ctx;
        minted++;
    }
    ok(minted == MINT_MAX_HOSTS, "%d hosts minted", minted);
    struct host over = host_of("one-more.example.com");
    err = (struct cordon_err){ 0 };
    ok(mint_server_ctx(m, &over, &err) == NULL && err.kind == CORDON_E_SETUP, "host %d refused",
       MINT_MAX_HOSTS + 1);
    is_str(
        err.msg,
        "cannot mint a certificate for 'one-more.example.com': 256 hosts already minted this run",
        "cache full message");
    struct host h0 = host_of("h0.example.com");
    ok(first && mint_server_ctx(m, &h0, &err) == first, "cached host still served when full");
}

/* Drive both ends of a handshake in this thread until both finish or one fails. */
static int handshake(SSL *client, SSL *server)
{
    bool cdone = false, sdone = false;
    for (int round = 0; round < 200 && !(cdone && sdone); round++) {
        SSL *ends[2] = { client, server };
        bool *done[2] = { &cdone, &sdone };
        for (int i = 0; i < 2; i++) {
            if (*done[i])
                continue;
            int r = SSL_do_handshake(ends[i]);
            if (r == 1) {
                *done[i] = true;
                continue;
            }
            int e = SSL_get_error(ends[i], r);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                return -1;
        }
    }
    return cdone && sdone ? 0 : -1;
}

/* FROM writes BYTE; TO reads it (pumping FROM-side records such as tickets). */
static int pass_byte(SSL *from, SSL *to, char byte)
{
    if (SSL_write(from, &byte, 1) != 1)
        return -1;
    for (int round = 0; round < 200; round++) {
        char got;
        int r = SSL_read(to, &got, 1);
        if (r == 1)
            return got == byte ? 0 : -1;
        int e = SSL_get_error(to, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            return -1;
    }
    return -1;
}

struct tls_result {
    int handshake; /* 0 or -1 */
    long verify;   /* the client's verify result */
    int bytes;     /* 0 when one byte went each way */
};

/*
 * Handshake between SERVER_CTX and a client trusting only TRUST_PEM, asking
 * for NAME (SNI for names; SSL_set1_host takes names and addresses).
 */
static struct tls_result tls_run(SSL_CTX *server_ctx, const char *trust_pem, const char *name)
{
    struct tls_result res = { -1, -1, -1 };
    int sv[2] = { -1, -1 };
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        return res;
    _cleanup_close_ int cfd = sv[0];
    _cleanup_close_ int sfd = sv[1];

    _cleanup_(SSL_CTX_freep) SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    _cleanup_(X509_freep) X509 *trust = parse_pem(trust_pem);
    if (!cctx || !trust || !X509_STORE_add_cert(SSL_CTX_get_cert_store(cctx), trust))
        return res;
    SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);

    _cleanup_(SSL_freep) SSL *client = SSL_new(cctx);
    _cleanup_(SSL_freep) SSL *server = SSL_new(server_ctx);
    struct in6_addr a6;
    struct in_addr a4;
    bool is_ip = inet_pton(AF_INET, name, &a4) == 1 || inet_pton(AF_INET6, name, &a6) == 1;
    if (!client || !server || !SSL_set_fd(client, cfd) || !SSL_set_fd(server, sfd) ||
        !SSL_set1_host(client, name) || (!is_ip && !SSL_set_tlsext_host_name(client, name)))
        return res;
    SSL_set_connect_state(client);
    SSL_set_accept_state(server);

    res.handshake = handshake(client, server);
    res.verify = SSL_get_verify_result(client);
    if (res.handshake == 0)
        res.bytes =
            pass_byte(client, server, 'q') == 0 && pass_byte(server, client, 'r') == 0 ? 0 : -1;
    ERR_clear_error();
    return res;
}

static void test_tls(struct mint *m)
{
    struct cordon_err err = { 0 };
    const char *names[] = { "api.example.com", "127.0.0.2", "::1" };
    const char *spellings[] = { "api.example.com", "127.0.0.2", "[::1]" };
    for (size_t i = 0; i < 3; i++) {
        struct host h = host_of(spellings[i]);
        SSL_CTX *ctx = mint_server_ctx(m, &h, &err);
        struct tls_result r =
            ctx ? tls_run(ctx, mint_ca_pem(m), names[i]) : (struct tls_result){ -1, -1, -1 };
        ok(r.handshake == 0 && r.verify == X509_V_OK, "tls handshake to %s verifies (%s)", names[i],
           X509_verify_cert_error_string(r.verify));
        ok(r.bytes == 0, "tls to %s: one byte each way", names[i]);
    }

    struct host h = host_of("api.example.com");
    SSL_CTX *ctx = mint_server_ctx(m, &h, &err);
    struct tls_result r = tls_run(ctx, mint_ca_pem(m), "evil.example.com");
    ok(r.handshake < 0 && r.verify == X509_V_ERR_HOSTNAME_MISMATCH,
       "tls: client expecting another host fails (%s)", X509_verify_cert_error_string(r.verify));

    _cleanup_(mint_freep) struct mint *other = mint_new(&err);
    r = other ? tls_run(ctx, mint_ca_pem(other), "api.example.com")
              : (struct tls_result){ 0, X509_V_OK, 0 };
    ok(r.handshake < 0 && r.verify == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
       "tls: client trusting another run's ca fails (%s)", X509_verify_cert_error_string(r.verify));
}

int main(void)
{
    struct cordon_err err = { 0 };
    _cleanup_(mint_freep) struct mint *m = mint_new(&err);
    if (!ok(m != NULL, "mint_new%s%s", m ? "" : ": ", m ? "" : err.msg))
        return done_testing();
    _cleanup_(X509_freep) X509 *ca = parse_pem(mint_ca_pem(m));
    test_ca(m, ca);
    if (ca) {
        test_two_runs_differ(ca);
        test_leaf(m, ca);
        test_verify(m, ca);
    }
    test_cache(m);
    test_limit();
    test_tls(m);
    return done_testing();
}
