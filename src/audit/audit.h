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
 * With a witness (a second file, elsewhere), every checkpoint and run.end
 * line is also noted there as {"log", "seq", "sha256", "type", "ts"}: "log"
 * is the SHA-256 of the log's header line, "sha256" that of the noted line.
 * A log cut short, even at a checkpoint, is shorter than its witness.
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
    AUDIT_FSYNC_CLOSE,  /* fsync once, when the log is closed (default) */
    AUDIT_FSYNC_ALWAYS, /* fsync after every event */
};

struct audit_options {
    const char *path;          /* the log file; created 0600 if missing */
    const char *sign_key;      /* Ed25519 private key (PEM), or NULL */
    unsigned checkpoint_every; /* with sign_key: a checkpoint every N events (0: only at close) */
    enum audit_fsync fsync;
    json_t *stamp;           /* fields added to every event (a break-glass), or NULL; borrowed */
    const char *export_otlp; /* OTLP/HTTP logs endpoint each line is also sent to, or NULL */
    const char *witness;     /* a second file noting each checkpoint and run.end, or NULL */
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
 * and seq, write the line in one write(), fsync per policy, note it in the
 * witness, and add a signed checkpoint when one is due. A write that fails
 * part-way (a full disk) is cut back, so the log still ends on a whole line.
 * Returns 0; -1 with ERR when the event is not in the log; 1 with ERR when
 * it is, but what follows it failed (its fsync, its witness note, the
 * checkpoint after it).
 */
int audit_append(struct audit_log *log, const char *type, const char *run, json_t *fields,
                 struct cordon_err *err);

/*
 * audit_append of an event a run has once (its run.end), by a process that
 * cannot know whether another wrote it: the watchdog, after its supervisor
 * died at any point. Under the same lock, the lines from byte SINCE on
 * (audit_size() before the run's first event) are read, and the event is
 * written only if they hold RUN's AFTER event and no TYPE event of RUN.
 * *WRITTEN says whether it was; the return is audit_append's.
 */
int audit_append_once(struct audit_log *log, const char *type, const char *run, const char *after,
                      json_t *fields, uint64_t since, bool *written, struct cordon_err *err);

/* The log's size now: where the next event starts, at the earliest. */
uint64_t audit_size(const struct audit_log *log);

/*
 * Make sure the room for what the log must still record is there: AUDIT_RESERVE
 * bytes allocated past its end (fallocate, kept through every append), so a
 * run that fills the log's filesystem with its own writes leaves its run.end
 * room to land; the witness keeps a smaller one. Where the filesystem cannot
 * allocate ahead, as much free space is required instead. -1 with ERR when
 * the room is not there: the run should not start.
 */
#define AUDIT_RESERVE (1u << 20)
#define AUDIT_WITNESS_RESERVE (64u << 10)
int audit_keep_reserve(struct audit_log *log, struct cordon_err *err);

/*
 * A final checkpoint (when signing and this process wrote since the last
 * one) and fsync. Safe to call more than once; audit_free() alone writes
 * nothing, so a log freed without closing ends unsigned. 0; -1 with ERR;
 * 1 with ERR when the checkpoint is in the log but its witness note is not.
 */
int audit_close(struct audit_log *log, struct cordon_err *err);

void audit_free(struct audit_log *log);

/* The descriptors LOG holds (into OUT); a forked helper keeps these and closes the rest. */
#define AUDIT_LOG_FDS_MAX 4
size_t audit_log_fds(const struct audit_log *log, int out[AUDIT_LOG_FDS_MAX]);

/* Events whose export was dropped (the exporter was slow or gone); the chain has them all. */
unsigned long audit_export_dropped(const struct audit_log *log);
DEFINE_CLEANUP(struct audit_log *, audit_free)

/* A fresh 128-bit run id as 32 hex digits. */
void audit_new_run_id(char out[33]);

/* A run whose run.start has no run.end (verify lists the first few). */
#define AUDIT_OPEN_RUNS_SHOWN 8
struct audit_open_run {
    char run[33];
    uint64_t line; /* of its run.start */
};

/* What verify found. */
struct audit_report {
    bool intact;            /* every line chains and every signature holds */
    bool truncated;         /* the only problem: the last line is torn */
    uint64_t events;        /* complete lines that verified */
    uint64_t runs;          /* distinct run ids */
    uint64_t checkpoints;   /* signed checkpoints verified */
    uint64_t unsigned_tail; /* events after the last checkpoint (with a key) */
    char first_ts[40], last_ts[40];
    char head[65];     /* digest of the last intact line */
    uint64_t bad_line; /* 1-based line of the first problem; 0 if none */
    char why[200];     /* "digest mismatch", "seq gap: expected 7, got 9", ... */
    /* Runs with a run.start and no run.end whose supervisor is gone (their
     * end was lost: warnings, not a broken chain), and those still running. */
    uint64_t lost_ends, live_runs;
    struct audit_open_run lost[AUDIT_OPEN_RUNS_SHOWN];
    /* With a witness: its entries (all of this log) and the last seq they name. */
    uint64_t witness_entries, witness_seq;
};

/*
 * Verify PATH; with PUBKEY (PEM), every checkpoint must be signed by it, at
 * least one must exist and the last line must be one: anyone can extend a
 * chain, so lines after the last signature are reported ("not signed: ...").
 * Without a key only the chain is checked, which cannot tell a well-forged
 * appended line (or an edit of the last line) from a real one. Without a
 * WITNESS, a log cut after any whole line (at a checkpoint, too) is a
 * shorter log that verifies; with one, every line the witness notes must be
 * in the log with the digest it noted, so a cut tail is reported
 * ("truncated: ..."), naming the last seq the witness holds. A run with two
 * run.starts or two run.ends, or a run.end without its run.start, breaks
 * the log. Returns 0 when the files could be read (the verdict is in
 * REPORT), -1 with ERR when one of them or the key could not be opened or
 * read, or the witness is not one.
 */
int audit_verify(const char *path, const char *pubkey, const char *witness,
                 struct audit_report *report, struct cordon_err *err);

/*
 * Who writes a run's end, for run.start ({"pid", "boot_id", "start_ticks"}
 * of this process): verify tells a run still going from one whose end was
 * lost by whether that process still lives. New reference.
 */
json_t *audit_writer_stamp(void);

struct audit_filter {
    const char *run;  /* only this run id (a prefix is enough), or NULL */
    const char *type; /* only this event type ("run": run.start, run.end...), or NULL */
    bool json;        /* pass matching lines through unchanged */
};

/*
 * A readable timeline of PATH on OUT: one block per run (concurrent runs'
 * lines are gathered), the log's own events on a line each. Lines that are
 * not events are named in the timeline and left out of --json.
 */
int audit_show(const char *path, const struct audit_filter *f, FILE *out, struct cordon_err *err);

struct audit_html_options {
    const char *run;     /* only runs whose id starts so, or NULL: every run */
    const char *pubkey;  /* as audit_verify's: checkpoints checked against it */
    const char *witness; /* as audit_verify's */
};

/*
 * A self-contained HTML page of PATH on OUT for a person: the chain's
 * verdict (audit_verify with O's key and witness), the runs on a timeline,
 * and each run's level, policy digest, limits as enforced, egress
 * decisions, tool calls, break-glass and verification status. Every string
 * from the log is escaped; the page loads nothing and runs no script.
 * Returns 0 when the chain is intact, 1 when it is not (the page says
 * where it breaks), -1 with ERR when the files cannot be read or O->run
 * matches no run.
 */
int audit_html(const char *path, const struct audit_html_options *o, FILE *out,
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
    bool intact;            /* lines chain, checkpoint signs them, summary matches */
    bool checkpoint;        /* the lines end in a checkpoint */
    bool signature_checked; /* and its signature verified with the given key */
    uint64_t lines;
    char key_id[65];
    char why[200];
};

/* Check DOC offline; with PUBKEY the checkpoint's signature too. -1 only when the key cannot be read. */
int audit_evidence_verify(const json_t *doc, const char *pubkey, struct evidence_report *r,
                          struct cordon_err *err);
