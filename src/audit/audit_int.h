/*
 * audit/audit_int.h: what the writer, verify and show share and nobody else
 * sees: the line reader, digests and the names fixed by the log format.
 * Pure helpers except the reader, which only reads a FILE.
 */
#pragma once
#include "common/cleanup.h"

#include "common/sigkey.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* A longer line is refused by every reader: no event comes near it. */
#define AUDIT_MAX_LINE (1u << 20)

#define AUDIT_VERSION 1
#define AUDIT_TYPE_HEADER "audit.header"
#define AUDIT_TYPE_CHECKPOINT "audit.checkpoint"

/* What a checkpoint signs: the head digest and the seq of that line. */
#define AUDIT_SIGN_FMT "cordon-audit-checkpoint v1 %llu %s"

/*
 * One line of F into BUF (capacity AUDIT_MAX_LINE + 1), without its '\n',
 * NUL-terminated (the line itself may hold NULs: use *LEN). *NL tells
 * whether the line ended in '\n' (only the last line of a file may not).
 * Returns 1 for a line, 0 at EOF, -1 for a line longer than AUDIT_MAX_LINE
 * (skipped to its end), -2 on a read error (errno set).
 */
int audit_read_line(FILE *f, char *buf, size_t *len, bool *nl);

/* This boot's id (/proc/sys/kernel/random/boot_id), 36 characters: 0, or -1. */
int audit_boot_id(char out[40]);

/* When PID started, in clock ticks since boot (/proc/PID/stat): 0, or -1 when it is gone. */
int audit_process_start(pid_t pid, unsigned long long *ticks);

/* PATH opened for reading line by line (not a directory), or NULL with ERR. */
FILE *audit_open_reader(const char *path, struct cordon_err *err);

