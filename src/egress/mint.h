/*
 * egress/mint.h: the per-run certificate authority the egress gateway uses to
 * intercept TLS to hosts a credential is bound to. Runs in the gateway
 * process: the CA key is created there, is never written anywhere and never
 * leaves it; only the CA certificate goes to the sandbox's trust store.
 * Not thread-safe: one mint belongs to the gateway's event loop.
 */
#pragma once
#include <openssl/ssl.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/addr.h"

/* Most leaf contexts one mint caches; a run that needs more is refused. */
#define MINT_MAX_HOSTS 256

struct mint;

/*
 * A fresh CA for one run: an EC P-256 key and a self-signed certificate
 * (CN "cordon run CA <16 random hex>", O "cordon", CA:TRUE pathlen:0,
 * keyCertSign and cRLSign, valid from an hour ago for seven days). The caller
 * owns the result; NULL with ERR set (CORDON_E_SETUP) on failure.
 */
struct mint *mint_new(struct cordon_err *err);

/* The CA certificate as PEM, NUL-terminated. Borrowed; valid until mint_free(). */
const char *mint_ca_pem(const struct mint *m);

/*
 * A TLS server context (TLS 1.2 or later) presenting a leaf certificate for
 * H, signed by M's CA, with the chain leaf + CA: subjectAltName DNS:<name>
 * or IP:<address> (scope ignored), serverAuth, valid from an hour ago for a
 * day. All leaves of one mint share one key. The same host (same name, or
 * same family and address) returns the same context. Borrowed; valid until
 * mint_free() (SSL_new() takes its own reference). NULL with ERR set
 * (CORDON_E_SETUP) on failure, for an empty name, or once MINT_MAX_HOSTS
 * hosts are cached.
 */
SSL_CTX *mint_server_ctx(struct mint *m, const struct host *h, struct cordon_err *err);

/* Frees the CA key, every cached context and M itself. */
void mint_free(struct mint *m);
DEFINE_CLEANUP(struct mint *, mint_free)
