/*
 * audit/audit_int.h: what the writer, verify and show share and nobody else
 * sees: the line reader, digests and the names fixed by the log format.
 * Pure helpers except the reader, which only reads a FILE.
 */
#pragma once
#include "common/cleanup.h"

#include <openssl/evp.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A longer line is refused by every reader: no event comes near it. */
#define AUDIT_MAX_LINE (1u << 20)

#define AUDIT_VERSION 1
#define AUDIT_TYPE_HEADER "audit.header"
#define AUDIT_TYPE_CHECKPOINT "audit.checkpoint"

/* What a checkpoint signs: the head digest and the seq of that line. */
#define AUDIT_SIGN_FMT "cordon-audit-checkpoint v1 %llu %s"

/* The lowercase hex SHA-256 of N bytes at DATA. */
void audit_sha256_hex(const void *data, size_t n, char out[65]);

/* key_id: the hex SHA-256 of the raw 32-byte Ed25519 public key; -1 if not Ed25519. */
int audit_key_id(EVP_PKEY *key, char out[65]);

/* Is S exactly 64 lowercase hex digits? */
bool audit_is_digest(const char *s);

/*
 * One line of F into BUF (capacity AUDIT_MAX_LINE + 1), without its '\n',
 * NUL-terminated (the line itself may hold NULs: use *LEN). *NL tells
 * whether the line ended in '\n' (only the last line of a file may not).
 * Returns 1 for a line, 0 at EOF, -1 for a line longer than AUDIT_MAX_LINE
 * (skipped to its end), -2 on a read error (errno set).
 */
int audit_read_line(FILE *f, char *buf, size_t *len, bool *nl);

/* PATH opened for reading line by line (not a directory), or NULL with ERR. */
FILE *audit_open_reader(const char *path, struct cordon_err *err);

DEFINE_CLEANUP(EVP_PKEY *, EVP_PKEY_free)
DEFINE_CLEANUP(EVP_MD_CTX *, EVP_MD_CTX_free)
