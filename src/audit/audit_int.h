/*
 * audit/audit_int.h: what the writer, verify and show share and nobody else
 * sees: the line reader, digests and the names fixed by the log format.
 * Pure helpers except the reader, which only reads a FILE.
 */
#pragma once
#include "common/cleanup.h"

#include "common/sigkey.h"

#include <jansson.h>

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

/* One line of a log, as audit_walk hands it on. */
struct audit_line {
    uint64_t no;      /* 1-based */
    const char *text; /* its bytes, NUL-terminated (LEN counts them) */
    size_t len;
    bool nl;                /* it ended in '\n' (else: the torn last line) */
    json_t *ev;             /* the event, parsed strictly; NULL: not an event */
    const char *type, *run; /* of EV; RUN NULL for the log's own events */
};

/*
 * The one reader the timeline (show), the report and evidence share: each
 * line of the log at PATH in order, to FN. A line that is no JSON object
 * with a "type" comes with EV NULL; one longer than AUDIT_MAX_LINE is
 * skipped (verify names it). FN returns 0 to go on, 1 to stop there, or -1
 * to stop with ERR. 0, or -1 with ERR.
 */
typedef int audit_line_fn(void *arg, const struct audit_line *l, struct cordon_err *err);
int audit_walk(const char *path, audit_line_fn *fn, void *arg, struct cordon_err *err);

/*
 * A run's summary as evidence states it (audit.h, audit_evidence): a new
 * one for RUN, and EV (one of RUN's events) added to it. The report shows
 * the same summary.
 */
json_t *audit_summary_new(const char *run);
void audit_summary_add(json_t *summary, const json_t *ev);

/* What the timeline and the report both print. */
/* "2026-12-02T15:04:05.123456Z" -> "2026-12-02 15:04:05.123" */
void audit_short_time(const char *ts, char out[32]);
void audit_human_size(double bytes, char out[32]);
void audit_human_ms(double ms, char out[32]);
/* ARGV as a shell would take it (control characters as '?'), cut to MAX bytes. */
void audit_put_command(FILE *o, const json_t *argv, size_t max);
