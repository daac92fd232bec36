/*
 * tests/fuzz/fuzz_audit.c: libFuzzer target for `cordon audit verify`
 * (audit/verify.c), which reads a log anyone with write access to the file
 * may have edited. audit_verify() takes a path, so each input becomes the
 * contents of a memfd verified through /proc/self/fd. It runs once without
 * a key and, where a checkpoint may count, once with the public half of
 * tests/fuzz/audit-seed-key.pem (the key the signed seed logs were written
 * with), and traps when
 *   - a readable file is not given a verdict (anything but 0 returned);
 *   - the report contradicts itself: intact with a reason, broken without
 *     one, a reason that is not one printable line, a line number past the end;
 *   - a log verifies that an independent reading here does not accept: every
 *     line a JSON object ending in '\n', the first an audit.header whose prev
 *     is the SHA-256 of its genesis, each later prev the SHA-256 of the line
 *     before, seq counting up from 0; with the key, the last line a checkpoint;
 *   - a verified log loses its verdict when its last line is cut off.
 * Built by meson with -Dfuzz=true; see tests/fuzz/README.md.
 */
#include "audit/audit.h"

#include <jansson.h>
#include <openssl/sha.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The public half of tests/fuzz/audit-seed-key.pem. */
static const char seed_pubkey[] = "-----BEGIN PUBLIC KEY-----\n"
                                  "MCowBQYDK2VwAyEAaoGkY+7x7IQ3qPk8e5qAkV7tCnySwJuEShqeMJAzrMA=\n"
                                  "-----END PUBLIC KEY-----\n";

static char log_path[64], key_path[64];
static int log_fd = -1;

static void check(int cond)
{
    if (!cond)
        __builtin_trap();
}

static int memfd_path(const char *name, char *path, size_t len)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    check(fd >= 0);
    snprintf(path, len, "/proc/self/fd/%d", fd);
    return fd;
}

static void set_log(const unsigned char *data, size_t size)
{
    check(ftruncate(log_fd, 0) == 0);
    check(size == 0 || pwrite(log_fd, data, size, 0) == (ssize_t)size);
}

static void sha256_hex(const void *data, size_t n, char out[65])
{
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256(data, n, d);
    for (size_t i = 0; i < sizeof d; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static const char *str_at(json_t *ev, const char *key)
{
    return json_string_value(json_object_get(ev, key));
}

/*
 * The chain read here without audit_verify(): the lines of DATA it accepts.
 * Traps when any line falls short; *LAST_IS_CHECKPOINT for the key's rule.
 */
static uint64_t read_chain(const unsigned char *data, size_t size, bool *last_is_checkpoint)
{
    check(size > 0 && data[size - 1] == '\n');
    char prev[65] = "";
    uint64_t lines = 0;
    for (size_t at = 0; at < size; lines++) {
        const unsigned char *end = memchr(data + at, '\n', size - at);
        size_t len = (size_t)(end - (data + at));
        json_auto_t *ev = json_loadb((const char *)data + at, len, JSON_REJECT_DUPLICATES, NULL);
        check(json_is_object(ev));
        json_t *seq = json_object_get(ev, "seq");
        check(json_is_integer(seq) && (uint64_t)json_integer_value(seq) == lines);
        const char *type = str_at(ev, "type"), *p = str_at(ev, "prev");
        check(type && p && str_at(ev, "ts"));
        if (lines == 0) {
            const char *genesis = str_at(ev, "genesis");
            check(strcmp(type, "audit.header") == 0 && genesis);
            sha256_hex(genesis, strlen(genesis), prev);
        } else {
            check(strcmp(type, "audit.header") != 0);
        }
        check(strcmp(p, prev) == 0);
        *last_is_checkpoint = strcmp(type, "audit.checkpoint") == 0;
        if (*last_is_checkpoint)
            check(strcmp(str_at(ev, "head") ? str_at(ev, "head") : "", prev) == 0);
        sha256_hex(data + at, len, prev);
        at += len + 1;
    }
    return lines;
}

static void check_report(const struct audit_report *r)
{
    check(r->intact == (r->bad_line == 0));
    check(r->intact == (r->why[0] == '\0'));
    check(!r->truncated || !r->intact);
    for (const unsigned char *c = (const unsigned char *)r->why; *c; c++)
        check(*c >= 0x20 && *c != 0x7f);
}

static void verify(const char *key, struct audit_report *r)
{
    struct cordon_err err = { 0 };
    check(audit_verify(log_path, key, NULL, r, &err) == 0);
    check_report(r);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    log_fd = memfd_path("audit.log", log_path, sizeof log_path);
    int key_fd = memfd_path("audit.pub", key_path, sizeof key_path);
    check(write(key_fd, seed_pubkey, strlen(seed_pubkey)) == (ssize_t)strlen(seed_pubkey));
    return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    set_log(data, size);
    struct audit_report plain, keyed;
    verify(NULL, &plain);

    size_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    size_t end = lines + (size && data[size - 1] != '\n') + 1;
    check(plain.bad_line <= end);
    /*
     * Without a key the first problem ends the reading: the lines before it
     * verified. A line that contradicts an earlier one (a second run.end, an
     * end without its start) is itself in the chain: it counts, and is named.
     */
    check(plain.intact || plain.events == plain.bad_line - 1 || plain.events == plain.bad_line);

    /*
     * OpenSSL's PEM decoder costs more than the rest of a run: the key only
     * where it can change the verdict, at a checkpoint or on an intact chain.
     */
    if (!plain.intact && !memmem(data, size, "checkpoint", 10))
        return 0;
    verify(key_path, &keyed);
    check(keyed.bad_line <= end && keyed.events <= plain.events);
    if (!plain.intact) {
        check(!keyed.intact);
        return 0;
    }

    bool last_is_checkpoint = false;
    check(read_chain(data, size, &last_is_checkpoint) == plain.events);
    check(plain.events == lines && plain.runs <= plain.events);
    if (keyed.intact)
        check(last_is_checkpoint && keyed.checkpoints > 0 && keyed.events == plain.events);

    /* A chain is intact line by line: without its last line it still is (or empty). */
    if (lines > 1) {
        size_t cut = size - 1;
        while (data[cut - 1] != '\n')
            cut--;
        set_log(data, cut);
        struct audit_report shorter;
        verify(NULL, &shorter);
        check(shorter.intact && shorter.events == lines - 1);
    }
    return 0;
}
