/*
 * audit/audit.h: the hash-chained audit log. JSON Lines, one event a line,
 * written only by the supervisor (outside the boundary). Each event carries
 * seq, ts, run, type and prev (the SHA-256 of the previous line's exact
 * bytes); optional Ed25519 checkpoints sign the head. Appends from several
 * processes serialise on a lock of the file and read the tail under it.
 *
 * The log's own events (written here, refused from callers):
 *   audit.header      line 1: genesis (64 hex), version (1), host, cordon_version;
 *                     its prev is the SHA-256 of the genesis string
 *   audit.checkpoint  head (= its prev), signed_seq (= its seq - 1), key_id
 *                     (SHA-256 of the raw public key), sig (base64 Ed25519 over
 *                     "cordon-audit-checkpoint v1 <signed_seq> <head>")
 * The timeline (audit_show) knows these callers' events by their fields:
 *   run.start    uid, level, argv (+ host, workspace, digests, limits...)
 *   run.end      reason, exit_code, signal, status, wall_ms, cpu_ms,
 *                peak_memory_bytes, stdout_bytes, stderr_bytes, error
 *   limit.fired  limit, reason
 *   run.refused  reason, front_end, uid, argv (+ policy_file, digests, signer,
 *                flags): a run refused before it started, its only event
 * and shows any other type generically.
 */
#pragma once
#include "common/cleanup.h"
#include "common/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum audit_fsync {
    AUDIT_FSYNC_CLOSE,   /* fsync once, when the log is closed (default) */
    AUDIT_FSYNC_ALWAYS,  /* fsync after every event */
};

struct audit_options {
    const char *path;            /* the log file; created 0600 if missing */
    const char *sign_key;        /* Ed25519 private key (PEM), or NULL */
    unsigned checkpoint_every;   /* with sign_key: a checkpoint every N events (0: only at close) */
    enum audit_fsync fsync;
    json_t *stamp;               /* fields added to every event (a break-glass), or NULL; borrowed */
    const char *export_otlp;     /* OTLP/HTTP logs endpoint each line is also sent to, or NULL */
};

struct audit_log;

/*
 * Open (creating with a header event if empty) and check that the file ends
 * on a complete line; a log whose tail is torn is refused, never extended.
 * The descriptor is close-on-exec. The caller owns the result. A log may be
 * used in a child after fork() (the child locks through a descriptor of its
 * own); its count toward the next checkpoint is then per process.
 */
struct audit_log *audit_open(const struct audit_options *o, struct cordon_err *err);

/*
 * Append one event: TYPE ("run.start", ...), RUN (a run id, or NULL), and
 * FIELDS (an object; reference stolen, may be NULL) merged after the chain
 * fields seq, ts, run, type, prev. Under the file lock: read the tail digest
 * and seq, write the line in one write(), fsync per policy, and add a signed
 * checkpoint when one is due.
 */
int audit_append(struct audit_log *log, const char *type, const char *run, json_t *fields,
                 struct cordon_err *err);

/*
 * A final checkpoint (when signing and this process wrote since the last
 * one) and fsync. Safe to call more than once; audit_free() alone writes
 * nothing, so a log freed without closing ends unsigned.
 */
int audit_close(struct audit_log *log, struct cordon_err *err);

void audit_free(struct audit_log *log);

/* The descriptors LOG holds (into OUT); a forked helper keeps these and closes the rest. */
#define AUDIT_LOG_FDS_MAX 3
size_t audit_log_fds(const struct audit_log *log, int out[AUDIT_LOG_FDS_MAX]);

/* Events whose export was dropped (the exporter was slow or gone); the chain has them all. */
unsigned long audit_export_dropped(const struct audit_log *log);
DEFINE_CLEANUP(struct audit_log *, audit_free)

/* A fresh 128-bit run id as 32 hex digits. */
void audit_new_run_id(char out[33]);

/* What verify found. */
struct audit_report {
    bool intact;                 /* every line chains and every signature holds */
    bool truncated;              /* the only problem: the last line is torn */
    uint64_t events;             /* complete lines that verified */
    uint64_t runs;               /* distinct run ids */
    uint64_t checkpoints;        /* signed checkpoints verified */
    uint64_t unsigned_tail;      /* events after the last checkpoint (with a key) */
    char first_ts[40], last_ts[40];
    char head[65];               /* digest of the last intact line */
    uint64_t bad_line;           /* 1-based line of the first problem; 0 if none */
    char why[200];               /* "digest mismatch", "seq gap: expected 7, got 9", ... */
};

/*
 * Verify PATH; with PUBKEY (PEM), every checkpoint must be signed by it, at
 * least one must exist and the last line must be one: anyone can extend a
 * chain, so lines after the last signature are reported ("not signed: ...").
 * Without a key only the chain is checked, which cannot tell a well-forged
 * appended line (or an edit of the last line) from a real one. Returns 0
 * when the file could be read (the verdict is in REPORT), -1 with ERR when
 * it or the key could not be opened or read.
 */
int audit_verify(const char *path, const char *pubkey, struct audit_report *report,
                 struct cordon_err *err);

struct audit_filter {
    const char *run;             /* only this run id (a prefix is enough), or NULL */
    const char *type;            /* only this event type ("run": run.start, run.end...), or NULL */
    bool json;                   /* pass matching lines through unchanged */
};

/*
 * A readable timeline of PATH on OUT: one block per run (concurrent runs'
 * lines are gathered), the log's own events on a line each. Lines that are
 * not events are named in the timeline and left out of --json.
 */
int audit_show(const char *path, const struct audit_filter *f, FILE *out,
               struct cordon_err *err);

/*
 * Evidence of one run (RUN: its id or a unique prefix) from the log at
 * PATH: {"format", "run", "summary" (level, digests, signer, secrets'
 * names, limits and how they were enforced, egress decisions, tool calls,
 * break-glass, result), "audit": {"file", "lines": [{seq, sha256, text,
 * run}] from the run's first line to the nearest checkpoint after its
 * last, "checkpoint"}}. New reference, or NULL with ERR.
 */
json_t *audit_evidence(const char *path, const char *run, struct cordon_err *err);

struct evidence_report {
    bool intact;                 /* lines chain, checkpoint signs them, summary matches */
    bool checkpoint;             /* the lines end in a checkpoint */
    bool signature_checked;      /* and its signature verified with the given key */
    uint64_t lines;
    char key_id[65];
    char why[200];
};

/* Check DOC offline; with PUBKEY the checkpoint's signature too. -1 only when the key cannot be read. */
int audit_evidence_verify(const json_t *doc, const char *pubkey, struct evidence_report *r,
                          struct cordon_err *err);
