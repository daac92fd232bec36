/*
 * common/digest.c: canonical JSON digests.
 */
#include "common/digest.h"

#include "common/cleanup.h"
#include "common/text.h"

#include <openssl/evp.h>
#include <string.h>

void json_sha256(const json_t *j, unsigned char out[32])
{
    memset(out, 0, 32);
    if (!j)
        return;
    _cleanup_free_ char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    unsigned int len = 0;
    if (!text || EVP_Digest(text, strlen(text), out, &len, EVP_sha256(), NULL) != 1)
        memset(out, 0, 32);
}

void json_sha256_hex(const json_t *j, char out[65])
{
    unsigned char d[32];
    json_sha256(j, d);
    hex_encode(d, sizeof d, out);
}
