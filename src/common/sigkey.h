/*
 * common/sigkey.h: Ed25519 keys and detached signatures, the one key
 * handling the audit log's checkpoints, signed policies, break-glass
 * approvals and evidence share. Keys are PEM files; a signature travels as
 * 88 base64 characters; a key is named by its key_id, the hex SHA-256 of
 * the raw 32-byte public key.
 */
#pragma once
#include "common/cleanup.h"
#include "common/err.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>

/* 64 signature bytes in base64, with "==" and a NUL. */
#define SIGKEY_B64_LEN 89

/*
 * An unencrypted Ed25519 private key from PATH (never prompts: a supervisor
 * has nobody to ask). WHAT names it in messages ("audit signing key").
 */
EVP_PKEY *sigkey_load_private(const char *path, const char *what, struct cordon_err *err);

/* An Ed25519 public key (PEM "PUBLIC KEY") from PATH. */
EVP_PKEY *sigkey_load_public(const char *path, struct cordon_err *err);

/* The key's key_id; -1 when KEY is not Ed25519. */
int sigkey_id(EVP_PKEY *key, char out[65]);

/* Sign N bytes at MSG into B64. */
int sigkey_sign(EVP_PKEY *key, const void *msg, size_t n, char b64[SIGKEY_B64_LEN],
                struct cordon_err *err);

/* Does B64 hold KEY's signature of the N bytes at MSG? */
bool sigkey_verify(EVP_PKEY *key, const void *msg, size_t n, const char *b64);

/* Lower-case hex SHA-256 of N bytes (all zeros if the library cannot allocate). */
void sha256_hex(const void *data, size_t n, char out[65]);

/* Is S exactly 64 lower-case hex digits? */
bool sha256_hex_valid(const char *s);

DEFINE_CLEANUP(EVP_PKEY *, EVP_PKEY_free)
DEFINE_CLEANUP(EVP_MD_CTX *, EVP_MD_CTX_free)
