/*
 * common/sigkey.c: Ed25519 keys, signatures and SHA-256 through OpenSSL.
 * Pure apart from reading the key files; runs in the CLI or supervisor.
 */
#include "common/sigkey.h"

#include "common/text.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <string.h>

void sha256_hex(const void *data, size_t n, char out[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    /* Only fails when the library cannot allocate; an all-zero digest never matches. */
    if (EVP_Digest(data, n, md, &len, EVP_sha256(), NULL) != 1)
        memset(md, 0, sizeof md);
    hex_encode(md, sizeof md, out);
}

bool sha256_hex_valid(const char *s)
{
    size_t i = 0;
    for (; s[i]; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return i == 64;
}

int sigkey_id(EVP_PKEY *key, char out[65])
{
    unsigned char raw[32];
    size_t len = sizeof raw;
    if (EVP_PKEY_id(key) != EVP_PKEY_ED25519 || EVP_PKEY_get_raw_public_key(key, raw, &len) != 1 ||
        len != sizeof raw) {
        ERR_clear_error();
        return -1;
    }
    sha256_hex(raw, len, out);
    return 0;
}

static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    return -1;
}

EVP_PKEY *sigkey_load_private(const char *path, const char *what, struct cordon_err *err)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f) {
        err_sys(err, CORDON_E_POLICY, "cannot open %s '%s'", what, path);
        return NULL;
    }
    EVP_PKEY *key = PEM_read_PrivateKey(f, NULL, no_passphrase, NULL);
    if (!key) {
        ERR_clear_error();
        err_set(err, CORDON_E_POLICY, "%s '%s' is not an unencrypted PEM private key", what, path);
        return NULL;
    }
    if (EVP_PKEY_id(key) != EVP_PKEY_ED25519) {
        EVP_PKEY_free(key);
        err_set(err, CORDON_E_POLICY, "%s '%s' is not an Ed25519 key", what, path);
        return NULL;
    }
    return key;
}

EVP_PKEY *sigkey_load_public(const char *path, struct cordon_err *err)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f) {
        err_sys(err, CORDON_E_POLICY, "cannot open public key '%s'", path);
        return NULL;
    }
    EVP_PKEY *key = PEM_read_PUBKEY(f, NULL, NULL, NULL);
    ERR_clear_error();
    if (!key) {
        err_set(err, CORDON_E_POLICY,
                "'%s' is not a PEM public key (for a private key, give "
                "its public half: openssl pkey -in KEY -pubout)",
                path);
        return NULL;
    }
    if (EVP_PKEY_id(key) != EVP_PKEY_ED25519) {
        EVP_PKEY_free(key);
        err_set(err, CORDON_E_POLICY, "public key '%s' is not an Ed25519 key", path);
        return NULL;
    }
    return key;
}

int sigkey_sign(EVP_PKEY *key, const void *msg, size_t n, char b64[SIGKEY_B64_LEN],
                struct cordon_err *err)
{
    unsigned char sig[64];
    size_t siglen = sizeof sig;
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestSignInit(ctx, NULL, NULL, NULL, key) != 1 ||
        EVP_DigestSign(ctx, sig, &siglen, msg, n) != 1 || siglen != sizeof sig) {
        ERR_clear_error();
        return err_set(err, CORDON_E_INTERNAL, "cannot sign with an Ed25519 key");
    }
    EVP_EncodeBlock((unsigned char *)b64, sig, (int)siglen);
    return 0;
}

/* Ed25519 signatures are 64 bytes: 88 base64 characters ending "==". */
static bool decode_sig(const char *b64, unsigned char sig[64])
{
    size_t n = strlen(b64);
    if (n != 88 || b64[86] != '=' || b64[87] != '=')
        return false;
    unsigned char out[66];
    return EVP_DecodeBlock(out, (const unsigned char *)b64, (int)n) == 66 &&
        (memcpy(sig, out, 64), true);
}

bool sigkey_verify(EVP_PKEY *key, const void *msg, size_t n, const char *b64)
{
    unsigned char raw[64];
    _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool good = b64 && decode_sig(b64, raw) && ctx &&
        EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) == 1 &&
        EVP_DigestVerify(ctx, raw, sizeof raw, msg, n) == 1;
    ERR_clear_error();
    return good;
}
