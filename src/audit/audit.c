/*
 * audit/audit.c: the writer. Opens the log, serialises appends from any
 * number of processes on a lock of the file, chains each line to the one
 * before it and signs checkpoints; also the helpers verify and show share.
 * Runs in the supervisor (and in its cleanup watchdog), never in the sandbox.
 */
#include "audit/audit.h"
#include "audit/audit_int.h"
#include "audit/export.h"
#include "common/hostpath.h"
#include "common/json.h"
#include "common/procfs.h"

#include <openssl/err.h>
#include <openssl/pem.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

struct audit_log {
    char *path;
    int wfd;       /* O_APPEND: a write lands at the end, whoever wrote last */
    int rfd;       /* reads the tail, and carries the lock */
    pid_t owner;   /* the process rfd was opened in (see lock_log) */
    EVP_PKEY *key; /* Ed25519 private key, or NULL */
    char key_id[65];
    unsigned checkpoint_every;
    enum audit_fsync fsync;
    uint64_t since_checkpoint; /* lines this process wrote since its last checkpoint */
    bool closed;
    json_t *stamp; /* merged into every event */
    int export_fd; /* to the OTLP exporter, or -1 */
    unsigned long export_dropped;
    int witness_fd; /* O_APPEND, read for its tail; written under rfd's lock */
    char *witness;
};

/* The last line of the file as the next event needs it. */
struct tail {
    bool empty;
    uint64_t seq;
    char digest[65];
    off_t size; /* of the file with that line: where the next one goes */
};

/* Keys every event starts with, in this order; fields may not set them. */
static const char *const chain_keys[] = { "seq", "ts", "run", "type", "prev" };

/* ---- shared helpers ---- */

static void hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

int audit_read_line(FILE *f, char *buf, size_t *len, bool *nl)
{
    size_t n = 0;
    bool too_long = false;
    int c;
    *nl = false;
    while ((c = getc_unlocked(f)) != EOF) {
        if (c == '\n') {
            *nl = true;
            break;
        }
        if (n < AUDIT_MAX_LINE)
            buf[n++] = (char)c;
        else
            too_long = true;
    }
    if (c == EOF && ferror(f))
        return -2;
    buf[n] = '\0';
    *len = n;
    if (too_long)
        return -1;
    return (c == EOF && n == 0) ? 0 : 1;
}

static int random_bytes(void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom((char *)buf + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

void audit_new_run_id(char out[33])
{
    unsigned char b[16];
    if (random_bytes(b, sizeof b) < 0) {
        /*
         * getrandom() exists on every kernel cordon runs on; should it fail,
         * an id only has to be unique, not secret: time, pid and a counter.
         */
        static unsigned counter;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t a = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        uint64_t c = ((uint64_t)getpid() << 32) | ++counter;
        memcpy(b, &a, 8);
        memcpy(b + 8, &c, 8);
    }
    hex(b, sizeof b, out);
}

int audit_boot_id(char out[40])
{
    if (read_small_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", out, 40) < 36)
        return -1;
    out[36] = '\0';
    return 0;
}

int audit_process_start(pid_t pid, unsigned long long *ticks)
{
    char buf[1024];
    const char *stat = proc_stat(pid, buf, sizeof buf);
    return stat && proc_stat_field(stat, 22, ticks) ? 0 : -1;
}

json_t *audit_writer_stamp(void)
{
    char boot[40];
    unsigned long long ticks;
    if (audit_boot_id(boot) < 0 || audit_process_start(getpid(), &ticks) < 0)
        return json_null(); /* no /proc: verify cannot tell, and says so */
    return json_pack("{s:i, s:s, s:I}", "pid", (int)getpid(), "boot_id", boot, "start_ticks",
                     (json_int_t)ticks);
}

/* RFC 3339, UTC, microseconds: 2026-12-02T15:04:05.123456Z */
static void now_rfc3339(char out[40])
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 40 - n, ".%06ldZ", ts.tv_nsec / 1000);
}

/* ---- the file ---- */

static int pread_full(int fd, void *buf, size_t n, off_t at)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, at + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {
            errno = EIO; /* the file shrank under the lock: someone truncated it */
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t r = write(fd, buf, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        buf += r;
        n -= (size_t)r;
    }
    return 0;
}

/*
 * LEN bytes at the end of FD (O_APPEND), whose size under the lock was
 * SIZE: all of them, or none. A write that stops part-way (a full disk, a
 * quota, a file size limit) is cut back to SIZE, so the file still ends on
 * a whole line and the next writer extends the chain instead of refusing a
 * torn tail. -1 with the write's errno; *TORN when even the cut failed.
 */
static int append_whole(int fd, const char *buf, size_t len, off_t size, bool *torn)
{
    if (write_full(fd, buf, len) == 0)
        return 0;
    int saved = errno;
    while (ftruncate(fd, size) < 0)
        if (errno != EINTR) {
            *torn = true;
            break;
        }
    errno = saved;
    return -1;
}

/*
 * Room for RESERVE more bytes past SIZE, allocated now and kept past the
 * end (a later append uses it without asking the filesystem again). 0, or
 * -1 with errno; where the filesystem cannot allocate ahead (EOPNOTSUPP),
 * the same room free on it will do.
 */
static int reserve_room(int fd, off_t size, off_t reserve)
{
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, size, reserve) == 0)
        return 0;
    if (errno != EOPNOTSUPP && errno != ENOSYS)
        return -1;
    struct statvfs vfs;
    if (fstatvfs(fd, &vfs) < 0)
        return -1;
    if ((uint64_t)vfs.f_bavail * vfs.f_frsize >= (uint64_t)reserve)
        return 0;
    errno = ENOSPC;
    return -1;
}

/* 1-based number of the line that starts at or contains offset SIZE - 1. */
static int count_lines(int fd, off_t size, uint64_t *lines)
{
    char block[65536];
    uint64_t nl = 0;
    for (off_t at = 0; at < size;) {
        size_t n = (size_t)(size - at < (off_t)sizeof block ? size - at : (off_t)sizeof block);
        if (pread_full(fd, block, n, at) < 0)
            return -1;
        for (size_t i = 0; i < n; i++)
            nl += block[i] == '\n';
        at += (off_t)n;
    }
    *lines = nl + 1;
    return 0;
}

/*
 * A second descriptor of the same file (not of whatever the path names
 * now), through /proc; the path itself only if /proc is missing.
 */
static int reopen_for_reading(const struct audit_log *log)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", log->wfd);
    int fd = open(proc, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd >= 0 || errno != ENOENT)
        return fd;
    fd = hostpath_open(AT_FDCWD, log->path, O_RDONLY | O_NOCTTY, 0, false, NULL);
    struct stat a, b;
    if (fd >= 0 &&
        (fstat(fd, &a) < 0 || fstat(log->wfd, &b) < 0 || a.st_dev != b.st_dev ||
         a.st_ino != b.st_ino)) {
        close(fd);
        errno = ESTALE;
        return -1;
    }
    return fd;
}

static void unlockp(int *fd)
{
    if (*fd >= 0)
        flock(*fd, LOCK_UN);
}

/*
 * flock() belongs to the open file description, which fork() shares: a
 * child (the cleanup watchdog) locking the parent's descriptor would not
 * exclude the parent. So a process other than the opener locks a
 * description of its own.
 */
static int lock_log(struct audit_log *log, int *locked, struct cordon_err *err)
{
    if (log->owner != getpid()) {
        int fd = reopen_for_reading(log);
        if (fd < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot reopen audit log '%s'", log->path);
        close(log->rfd);
        log->rfd = fd;
        log->owner = getpid();
    }
    while (flock(log->rfd, LOCK_EX) < 0)
        if (errno != EINTR)
            return err_sys(err, CORDON_E_SETUP, "cannot lock audit log '%s'", log->path);
    *locked = log->rfd;
    return 0;
}

/* Under the lock: the seq and digest of the last line, or "empty". */
static int read_tail(struct audit_log *log, struct tail *t, struct cordon_err *err)
{
    struct stat st;
    if (fstat(log->rfd, &st) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot stat audit log '%s'", log->path);
    if (!S_ISREG(st.st_mode))
        return err_set(err, CORDON_E_SETUP, "audit log '%s' is not a regular file", log->path);
    *t = (struct tail){ .empty = st.st_size == 0, .size = st.st_size };
    if (t->empty)
        return 0;

    off_t end = st.st_size - 1;
    char last = 0;
    if (pread_full(log->rfd, &last, 1, end) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot read audit log '%s'", log->path);
    uint64_t line = 0;
    if (last != '\n') {
        if (count_lines(log->rfd, st.st_size, &line) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot read audit log '%s'", log->path);
        return err_set(err, CORDON_E_SETUP,
                       "audit log '%s' ends in a torn line (line %llu); verify it and start a "
                       "new file",
                       log->path, (unsigned long long)line);
    }

    /* Back from the final '\n' to the one before it, a block at a time. */
    char block[65536];
    off_t start = 0;
    for (off_t pos = end; pos > 0;) {
        size_t n = (size_t)(pos < (off_t)sizeof block ? pos : (off_t)sizeof block);
        off_t from = pos - (off_t)n;
        if (pread_full(log->rfd, block, n, from) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot read audit log '%s'", log->path);
        const char *nl = memrchr(block, '\n', n);
        if (nl) {
            start = from + (nl - block) + 1;
            break;
        }
        pos = from;
        if (end - pos > (off_t)AUDIT_MAX_LINE)
            break;
    }
    if (end - start > (off_t)AUDIT_MAX_LINE)
        return err_set(err, CORDON_E_SETUP,
                       "audit log '%s': the last line is longer than 1 MiB; verify it and start "
                       "a new file",
                       log->path);
    size_t len = (size_t)(end - start);
    _cleanup_free_ char *buf = malloc(len + 1);
    if (!buf)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    if (pread_full(log->rfd, buf, len, start) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot read audit log '%s'", log->path);
    sha256_hex(buf, len, t->digest);

    json_auto_t *ev = json_parse_strict(buf, len, 0, NULL);
    json_t *seq = json_object_get(ev, "seq");
    if (!json_is_integer(seq) || json_integer_value(seq) < 0) {
        if (count_lines(log->rfd, st.st_size, &line) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot read audit log '%s'", log->path);
        return err_set(err, CORDON_E_SETUP,
                       "audit log '%s': the last line (line %llu) is not an audit event; verify "
                       "it and start a new file",
                       log->path, (unsigned long long)(line - 1));
    }
    t->seq = (uint64_t)json_integer_value(seq);
    return 0;
}

/* ---- the witness ---- */

/* The lines a witness notes: each signed head, and each run's end. */
static bool witness_noted(const char *type)
{
    return !strcmp(type, AUDIT_TYPE_CHECKPOINT) || !strcmp(type, "run.end");
}

/* Under the lock: the SHA-256 of the log's first line, which names the log in its witness. */
static int log_id(struct audit_log *log, char out[65], struct cordon_err *err)
{
    char head[4096];
    ssize_t n;
    while ((n = pread(log->rfd, head, sizeof head, 0)) < 0 && errno == EINTR)
        ;
    if (n < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot read audit log '%s'", log->path);
    const char *nl = memchr(head, '\n', (size_t)n);
    if (!nl)
        return err_set(err, CORDON_E_SETUP, "audit log '%s': no header line", log->path);
    sha256_hex(head, (size_t)(nl - head), out);
    return 0;
}

/*
 * Under the log's lock, the one the witness is written under too: where the
 * witness ends on a whole line. Only a writer killed mid-line leaves a
 * partial one (the others cut theirs back), so it is cut off here: a note
 * half written noted nothing.
 */
static int witness_end(struct audit_log *log, off_t *end, struct cordon_err *err)
{
    struct stat st;
    if (fstat(log->witness_fd, &st) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot stat audit witness '%s'", log->witness);
    char block[4096];
    off_t at = st.st_size;
    while (at > 0 && st.st_size - at < 65536) {
        size_t n = (size_t)(at < (off_t)sizeof block ? at : (off_t)sizeof block);
        if (pread_full(log->witness_fd, block, n, at - (off_t)n) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot read audit witness '%s'", log->witness);
        const char *nl = memrchr(block, '\n', n);
        if (nl) {
            at = at - (off_t)n + (nl - block) + 1;
            break;
        }
        at -= (off_t)n;
    }
    if (at > 0 && st.st_size - at >= 65536)
        return err_set(err, CORDON_E_SETUP,
                       "audit witness '%s' ends in a line longer than 64 "
                       "KiB: it is not a witness",
                       log->witness);
    if (at < st.st_size && ftruncate(log->witness_fd, at) < 0)
        return err_sys(err, CORDON_E_SETUP,
                       "cannot cut the torn last line of audit witness "
                       "'%s'",
                       log->witness);
    *end = at;
    return 0;
}

/* Under the lock: note LINE (a TYPE event written at TS) in the witness. */
static int note_in_witness(struct audit_log *log, const char *type, const struct tail *line,
                           const char *ts, struct cordon_err *err)
{
    char id[65], text[320];
    off_t end;
    if (log_id(log, id, err) < 0 || witness_end(log, &end, err) < 0)
        return err_prefix(err, "audit witness '%s' (the event is in the log)", log->witness);
    int n = snprintf(text, sizeof text,
                     "{\"log\":\"%s\",\"seq\":%llu,\"sha256\":\"%s\","
                     "\"type\":\"%s\",\"ts\":\"%s\"}\n",
                     id, (unsigned long long)line->seq, line->digest, type, ts);
    bool torn = false;
    if (append_whole(log->witness_fd, text, (size_t)n, end, &torn) < 0)
        return err_sys(err, CORDON_E_SETUP,
                       "cannot write to audit witness '%s' (the event is "
                       "in the log)%s",
                       log->witness, torn ? "; the part written could not be cut back" : "");
    (void)fallocate(log->witness_fd, FALLOC_FL_KEEP_SIZE, end + n, AUDIT_WITNESS_RESERVE);
    return 0;
}

/*
 * Under the lock: one line after T, in a single write() so that a reader
 * (or a crash) sees all of it or a torn tail, never a mix. FIELDS borrowed.
 * 0; -1 when the line is not in the log; 1 when it is but its fsync or its
 * witness note failed.
 */
static int write_event(struct audit_log *log, const struct tail *t, const char *type,
                       const char *run, json_t *fields, struct tail *out, struct cordon_err *err)
{
    char ts[40];
    now_rfc3339(ts);
    uint64_t seq = t->empty ? 0 : t->seq + 1;
    json_auto_t *ev = json_object();
    if (!ev || json_object_set_new(ev, "seq", json_integer((json_int_t)seq)) < 0 ||
        json_object_set_new(ev, "ts", json_string(ts)) < 0 ||
        json_object_set_new(ev, "run", run ? json_string(run) : json_null()) < 0 ||
        json_object_set_new(ev, "type", json_string(type)) < 0 ||
        json_object_set_new(ev, "prev", json_string(t->digest)) < 0)
        return err_set(err, CORDON_E_INTERNAL,
                       "audit event '%s': cannot build it "
                       "(out of memory, or a run id that is not UTF-8)",
                       type);
    const char *key;
    json_t *value;
    json_object_foreach(fields, key, value) if (json_object_set(ev, key, value) < 0) return err_set(
        err, CORDON_E_INTERNAL, "out of memory");
    /* The log's own lines stay as the format fixes them. */
    if (strncmp(type, "audit.", 6) != 0)
        json_object_foreach(log->stamp, key, value) if (json_object_set(ev, key, value) <
                                                        0) return err_set(err, CORDON_E_INTERNAL,
                                                                          "out of memory");

    /* 15 digits: 41.2, not 41.200000000000003; durations need no more. */
    _cleanup_free_ char *text = json_dumps(
        ev, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    if (!text)
        return err_set(err, CORDON_E_INTERNAL, "audit event '%s': cannot serialise it", type);
    size_t len = strlen(text);
    if (len > AUDIT_MAX_LINE)
        return err_set(err, CORDON_E_INTERNAL, "audit event '%s' is larger than 1 MiB", type);
    sha256_hex(text, len, out->digest);
    out->seq = seq;
    out->empty = false;
    out->size = t->size + (off_t)len + 1;
    text[len] = '\n'; /* replaces the NUL: the line goes out in one write */
    bool torn = false;
    if (append_whole(log->wfd, text, len + 1, t->size, &torn) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot write to audit log '%s'%s", log->path,
                       torn ? " (and the part written could not be cut back)" : "");
    log->since_checkpoint++;
    /* After the chain has it, and never waiting: an export is a copy, not the record. */
    if (log->export_fd >= 0 && !audit_export_send(log->export_fd, text, len))
        log->export_dropped++;
    /* The line is in the log now: what fails from here leaves it there. */
    if (log->fsync == AUDIT_FSYNC_ALWAYS && fsync(log->wfd) < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot sync audit log '%s'", log->path);
        return 1;
    }
    if (log->witness_fd >= 0 && witness_noted(type) && note_in_witness(log, type, out, ts, err) < 0)
        return 1;
    return 0;
}

static int write_header(struct audit_log *log, struct tail *out, struct cordon_err *err)
{
    unsigned char g[32];
    if (random_bytes(g, sizeof g) < 0)
        return err_sys(err, CORDON_E_SETUP, "audit log '%s': no random genesis", log->path);
    char genesis[65];
    hex(g, sizeof g, genesis);
    struct tail t = { .empty = true };
    sha256_hex(genesis, 64, t.digest);
    struct utsname u;
    if (uname(&u) < 0)
        strcpy(u.nodename, "?");
    json_auto_t *f = json_pack("{s:s, s:i, s:s, s:s}", "genesis", genesis, "version", AUDIT_VERSION,
                               "host", u.nodename, "cordon_version", CORDON_VERSION);
    if (!f)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    return write_event(log, &t, AUDIT_TYPE_HEADER, NULL, f, out, err);
}

/* Signs T (the line just written) with a checkpoint line after it; write_event's return. */
static int write_checkpoint(struct audit_log *log, const struct tail *t, struct cordon_err *err)
{
    char msg[128];
    snprintf(msg, sizeof msg, AUDIT_SIGN_FMT, (unsigned long long)t->seq, t->digest);
    char b64[SIGKEY_B64_LEN];
    if (sigkey_sign(log->key, msg, strlen(msg), b64, err) < 0)
        return err_prefix(err, "audit log '%s': checkpoint", log->path);
    json_auto_t *f = json_pack("{s:s, s:I, s:s, s:s}", "head", t->digest, "signed_seq",
                               (json_int_t)t->seq, "key_id", log->key_id, "sig", b64);
    if (!f)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    struct tail out;
    int rc = write_event(log, t, AUDIT_TYPE_CHECKPOINT, NULL, f, &out, err);
    if (rc >= 0)
        log->since_checkpoint = 0;
    return rc;
}

/* ---- public ---- */

/* The witness, opened as the log is (no link, created 0600), and never the log itself. */
static int open_witness(struct audit_log *log, const char *path, struct cordon_err *err)
{
    if (!(log->witness = strdup(path)))
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    log->witness_fd = hostpath_open(
        AT_FDCWD, path, O_RDWR | O_APPEND | O_CREAT | O_NOCTTY | O_NONBLOCK, 0600, false, err);
    if (log->witness_fd < 0) {
        if (errno != ELOOP && errno != ENXIO)
            err_sys(err, CORDON_E_SETUP, "cannot open audit witness '%s'", path);
        return -1;
    }
    struct stat w, l;
    if (fstat(log->witness_fd, &w) < 0 || !S_ISREG(w.st_mode))
        return err_set(err, CORDON_E_SETUP, "audit witness '%s' is not a regular file", path);
    if (fstat(log->wfd, &l) == 0 && l.st_dev == w.st_dev && l.st_ino == w.st_ino)
        return err_set(err, CORDON_E_SETUP, "audit witness '%s' is the audit log itself", path);
    fcntl(log->witness_fd, F_SETFL, O_APPEND);
    return 0;
}

struct audit_log *audit_open(const struct audit_options *o, struct cordon_err *err)
{
    if (!o || !o->path || !o->path[0]) {
        err_set(err, CORDON_E_SETUP, "no audit log file given");
        return NULL;
    }
    _cleanup_(audit_freep) struct audit_log *log = calloc(1, sizeof *log);
    if (log)
        log->wfd = log->rfd = log->export_fd = log->witness_fd = -1;
    if (!log || !(log->path = strdup(o->path))) {
        err_set(err, CORDON_E_INTERNAL, "out of memory");
        return NULL;
    }
    log->checkpoint_every = o->checkpoint_every;
    log->stamp = json_incref(o->stamp);
    log->fsync = o->fsync;
    log->owner = getpid();
    /* Never through a link: a swapped directory would send the records elsewhere. */
    log->wfd = hostpath_open(
        AT_FDCWD, o->path, O_WRONLY | O_APPEND | O_CREAT | O_NOCTTY | O_NONBLOCK, 0600, false, err);
    if (log->wfd < 0) {
        if (errno != ELOOP && errno != ENXIO) /* those are named as such already */
            err_sys(err, CORDON_E_SETUP, "cannot open audit log '%s'", o->path);
        return NULL;
    }
    struct stat st;
    if (fstat(log->wfd, &st) < 0 || !S_ISREG(st.st_mode)) {
        err_set(err, CORDON_E_SETUP, "audit log '%s' is not a regular file", o->path);
        return NULL;
    }
    fcntl(log->wfd, F_SETFL, O_APPEND); /* O_NONBLOCK only kept a FIFO from hanging the open */
    log->rfd = reopen_for_reading(log);
    if (log->rfd < 0) {
        err_sys(err, CORDON_E_SETUP, "cannot open audit log '%s' for reading", o->path);
        return NULL;
    }
    if (o->sign_key) {
        log->key = sigkey_load_private(o->sign_key, "audit signing key", err);
        if (!log->key || sigkey_id(log->key, log->key_id) < 0) {
            if (log->key)
                err_set(err, CORDON_E_POLICY, "audit signing key '%s' has no public half",
                        o->sign_key);
            return NULL;
        }
    }

    if (o->witness && open_witness(log, o->witness, err) < 0)
        return NULL;
    if (o->export_otlp && audit_export_start(o->export_otlp, &log->export_fd, err) < 0)
        return NULL;

    /* A new file gets its header now; a torn one is refused before any run starts. */
    _cleanup_(unlockp) int locked = -1;
    struct tail t;
    if (lock_log(log, &locked, err) < 0 || read_tail(log, &t, err) < 0)
        return NULL;
    if (t.empty && write_header(log, &t, err) < 0)
        return NULL;
    /* Best effort: audit_keep_reserve() insists. */
    (void)fallocate(log->wfd, FALLOC_FL_KEEP_SIZE, t.size, AUDIT_RESERVE);
    return TAKE_PTR(log);
}

/* What audit_append refuses before it takes the lock. */
static int check_event(const struct audit_log *log, const char *type, json_t *f,
                       struct cordon_err *err)
{
    if (log->closed)
        return err_set(err, CORDON_E_INTERNAL, "audit log '%s' is already closed", log->path);
    if (!type || !type[0])
        return err_set(err, CORDON_E_INTERNAL, "audit event without a type");
    /* The log's own types would let a caller forge a header or a checkpoint. */
    if (!strncmp(type, "audit.", 6))
        return err_set(err, CORDON_E_INTERNAL, "audit event type '%s' is reserved for the log",
                       type);
    if (f && !json_is_object(f))
        return err_set(err, CORDON_E_INTERNAL, "audit event '%s': fields are not an object", type);
    for (size_t i = 0; f && i < sizeof chain_keys / sizeof chain_keys[0]; i++)
        if (json_object_get(f, chain_keys[i]))
            return err_set(err, CORDON_E_INTERNAL,
                           "audit event '%s': field '%s' belongs to the chain", type,
                           chain_keys[i]);
    return 0;
}

/* Under the lock, after T: the event, its checkpoint when one is due, the reserve topped up. */
static int append_locked(struct audit_log *log, struct tail *t, const char *type, const char *run,
                         json_t *f, struct cordon_err *err)
{
    struct tail written;
    if (t->empty && write_header(log, t, err) != 0)
        return -1; /* someone emptied the file since we opened it */
    int rc = write_event(log, t, type, run, f, &written, err);
    if (rc < 0)
        return -1;
    struct cordon_err later;
    if (log->key && log->checkpoint_every && log->since_checkpoint >= log->checkpoint_every &&
        write_checkpoint(log, &written, rc ? &later : err) != 0)
        rc = 1;
    /* Best effort, and no more than a fallocate: on a full disk the reserve shrinks by
     * what was written. */
    struct stat st;
    if (fstat(log->wfd, &st) == 0)
        (void)fallocate(log->wfd, FALLOC_FL_KEEP_SIZE, st.st_size, AUDIT_RESERVE);
    return rc;
}

int audit_append(struct audit_log *log, const char *type, const char *run, json_t *fields,
                 struct cordon_err *err)
{
    json_auto_t *f = fields; /* stolen, whatever happens */
    TRY(check_event(log, type, f, err));
    _cleanup_(unlockp) int locked = -1;
    struct tail t;
    TRY(lock_log(log, &locked, err));
    TRY(read_tail(log, &t, err));
    return append_locked(log, &t, type, run, f, err);
}

/*
 * Under the lock: does the log from byte SINCE to SIZE hold RUN's AFTER
 * event (bit 0 of *SEEN) and its TYPE event (bit 1)? Only lines naming the
 * run are parsed.
 */
static int scan_run(struct audit_log *log, const char *run, const char *type, const char *after,
                    uint64_t since, off_t size, unsigned *seen, struct cordon_err *err)
{
    *seen = 0;
    /* Emptied and begun again since: the run's lines, if any, are all there is. */
    if (since > (uint64_t)size)
        since = 0;
    int fd = fcntl(log->rfd, F_DUPFD_CLOEXEC, 3); /* its offset is nobody's: rfd is read by pread */
    _cleanup_fclose_ FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return err_sys(err, CORDON_E_SETUP, "cannot read audit log '%s'", log->path);
    }
    _cleanup_free_ char *buf = malloc(AUDIT_MAX_LINE + 1);
    if (!buf)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    if (fseeko(f, (off_t)since, SEEK_SET) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot read audit log '%s'", log->path);
    char needle[64];
    int nlen = snprintf(needle, sizeof needle, "\"run\":\"%.40s\"", run);
    size_t len;
    bool nl, first = since > 0;
    int got;
    while ((got = audit_read_line(f, buf, &len, &nl)) != 0) {
        if (got == -2)
            return err_sys(err, CORDON_E_SETUP, "cannot read audit log '%s'", log->path);
        /* SINCE was taken without the lock: it may fall inside another writer's line. */
        char before = '\n';
        bool partial =
            first && (pread_full(log->rfd, &before, 1, (off_t)since - 1) < 0 || before != '\n');
        first = false;
        if (got < 0 || !nl || partial || !memmem(buf, len, needle, (size_t)nlen))
            continue;
        json_auto_t *ev = json_parse_strict(buf, len, 0, NULL);
        const char *t = json_string_value(json_object_get(ev, "type"));
        if (!t || strcmp(json_string_value(json_object_get(ev, "run")) ?: "", run) != 0)
            continue;
        *seen |= (!strcmp(t, after) ? 1u : 0u) | (!strcmp(t, type) ? 2u : 0u);
    }
    return 0;
}

int audit_append_once(struct audit_log *log, const char *type, const char *run, const char *after,
                      json_t *fields, uint64_t since, bool *written, struct cordon_err *err)
{
    json_auto_t *f = fields;
    *written = false;
    TRY(check_event(log, type, f, err));
    if (!run)
        return err_set(err, CORDON_E_INTERNAL, "audit event '%s' once: no run", type);
    _cleanup_(unlockp) int locked = -1;
    struct tail t;
    unsigned seen = 0;
    TRY(lock_log(log, &locked, err));
    TRY(read_tail(log, &t, err));
    TRY(scan_run(log, run, type, after, since, t.size, &seen, err));
    if (seen != 1)
        return 0; /* no AFTER yet (nothing to close), or TYPE is there already */
    int rc = append_locked(log, &t, type, run, f, err);
    *written = rc >= 0;
    return rc;
}

uint64_t audit_size(const struct audit_log *log)
{
    struct stat st;
    return fstat(log->wfd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

int audit_keep_reserve(struct audit_log *log, struct cordon_err *err)
{
    _cleanup_(unlockp) int locked = -1;
    TRY(lock_log(log, &locked, err));
    const struct {
        int fd;
        const char *what, *path;
        off_t room;
    } files[] = {
        { log->wfd, "audit log", log->path, AUDIT_RESERVE },
        { log->witness_fd, "audit witness", log->witness, AUDIT_WITNESS_RESERVE },
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct stat st;
        if (files[i].fd < 0)
            continue;
        if (fstat(files[i].fd, &st) < 0 || reserve_room(files[i].fd, st.st_size, files[i].room) < 0)
            return err_sys(err, CORDON_E_SETUP,
                           "%s '%s': no room for the %u KiB it keeps in "
                           "reserve for the runs' ends",
                           files[i].what, files[i].path, (unsigned)(files[i].room >> 10));
    }
    return 0;
}

int audit_close(struct audit_log *log, struct cordon_err *err)
{
    if (log->closed)
        return 0;
    log->closed = true;
    if (log->key && log->since_checkpoint > 0) {
        _cleanup_(unlockp) int locked = -1;
        struct tail t;
        TRY(lock_log(log, &locked, err));
        TRY(read_tail(log, &t, err));
        int rc = t.empty ? 0 : write_checkpoint(log, &t, err);
        if (rc != 0)
            return rc;
    }
    if (fsync(log->wfd) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot sync audit log '%s'", log->path);
    if (log->witness_fd >= 0 && fsync(log->witness_fd) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot sync audit witness '%s'", log->witness);
    return 0;
}

void audit_free(struct audit_log *log)
{
    if (!log)
        return;
    if (log->wfd >= 0)
        close(log->wfd);
    if (log->rfd >= 0)
        close(log->rfd);
    if (log->export_fd >= 0)
        close(log->export_fd);
    if (log->witness_fd >= 0)
        close(log->witness_fd);
    EVP_PKEY_free(log->key);
    json_decref(log->stamp);
    free(log->path);
    free(log->witness);
    free(log);
}

FILE *audit_open_reader(const char *path, struct cordon_err *err)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        err_sys(err, CORDON_E_SETUP, "cannot open audit log '%s'", path);
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        err_set(err, CORDON_E_SETUP, "cannot read audit log '%s': it is a directory", path);
        return NULL;
    }
    return f;
}

unsigned long audit_export_dropped(const struct audit_log *log)
{
    return log->export_dropped;
}

size_t audit_log_fds(const struct audit_log *log, int out[AUDIT_LOG_FDS_MAX])
{
    size_t n = 0;
    if (log && log->export_fd >= 0)
        out[n++] = log->export_fd;
    if (log && log->wfd >= 0)
        out[n++] = log->wfd;
    if (log && log->rfd >= 0)
        out[n++] = log->rfd;
    if (log && log->witness_fd >= 0)
        out[n++] = log->witness_fd;
    return n;
}
