/*
 * audit/export.c: audit.export: otlp. Each line written to the chain is
 * also handed, without waiting, to an exporter process that posts it to an
 * OpenTelemetry collector as an OTLP/HTTP JSON log record. The chain is
 * written first and never depends on the export: a full or broken export
 * channel drops the export of an event (counted), never the event.
 *
 * The exporter runs detached (double fork: nobody has to reap it), holds
 * only the receiving end of a SOCK_SEQPACKET pair (one message per line, so
 * a line is never torn), and exits when every writer has closed its end,
 * after posting what it holds.
 */
#include "audit/audit_int.h"
#include "audit/export.h"
#include "common/json.h"

#include "common/fds.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCH_MAX 256
#define IO_TIMEOUT_MS 2000
/* What the channel may hold while the collector is slow: past it, exports are dropped. */
#define CHANNEL_BYTES (4u << 20)

struct endpoint {
    char host[256];
    char port[8];
    char path[512];
};

/* http://HOST[:PORT][/PATH]; the path defaults to OTLP's /v1/logs. */
static int parse_endpoint(const char *url, struct endpoint *e, struct cordon_err *err)
{
    *e = (struct endpoint){ .port = "4318", .path = "/v1/logs" };
    if (strncmp(url, "http://", 7) != 0)
        return err_set(err, CORDON_E_POLICY,
                       "audit.export_endpoint: expected http://HOST:PORT/PATH");
    const char *h = url + 7, *slash = strchr(h, '/');
    size_t hl = slash ? (size_t)(slash - h) : strlen(h);
    const char *colon = h[0] == '[' ? memchr(h, ']', hl) : memchr(h, ':', hl);
    if (colon && *colon == ']')
        colon = colon + 1 < h + hl && colon[1] == ':' ? colon + 1 : NULL;
    size_t name_len = colon ? (size_t)(colon - h) : hl;
    if (h[0] == '[')
        h++, name_len -= name_len >= 2 ? 2 : name_len;
    if (!name_len || name_len >= sizeof e->host)
        return err_set(err, CORDON_E_POLICY, "audit.export_endpoint: no host in '%s'", url);
    memcpy(e->host, h, name_len);
    if (colon) {
        size_t pl = hl - (size_t)(colon + 1 - (url + 7));
        if (!pl || pl >= sizeof e->port)
            return err_set(err, CORDON_E_POLICY, "audit.export_endpoint: bad port in '%s'", url);
        memcpy(e->port, colon + 1, pl);
        e->port[pl] = '\0';
    }
    if (slash && snprintf(e->path, sizeof e->path, "%s", slash) >= (int)sizeof e->path)
        return err_set(err, CORDON_E_POLICY, "audit.export_endpoint: path too long");
    return 0;
}

static json_t *attr_str(const char *k, const char *v)
{
    return json_pack("{s:s, s:{s:s}}", "key", k, "value", "stringValue", v ? v : "");
}

/* One OTLP LogRecord for one audit line. */
static json_t *log_record(const char *line, size_t len)
{
    json_auto_t *ev = json_parse_strict(line, len, 0, NULL);
    char sha[65];
    sha256_hex(line, len, sha);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char observed[32];
    snprintf(observed, sizeof observed, "%lld%09ld", (long long)now.tv_sec, now.tv_nsec);
    /* The event's own ts, as nanoseconds since the epoch. */
    char when[32];
    snprintf(when, sizeof when, "%s", observed);
    const char *ts = json_string_value(json_object_get(ev, "ts"));
    struct tm tm = { 0 };
    const char *rest = ts ? strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (rest) {
        long us = *rest == '.' ? strtol(rest + 1, NULL, 10) : 0;
        snprintf(when, sizeof when, "%lld%06ld000", (long long)timegm(&tm), us);
    }
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *attrs = json_array();
    json_array_append_new(attrs, attr_str("cordon.type", type));
    json_array_append_new(attrs,
                          attr_str("cordon.run", json_string_value(json_object_get(ev, "run"))));
    json_array_append_new(attrs, attr_str("cordon.line_sha256", sha));
    json_array_append_new(attrs,
                          attr_str("cordon.prev", json_string_value(json_object_get(ev, "prev"))));
    char seq[24];
    snprintf(seq, sizeof seq, "%lld", (long long)json_integer_value(json_object_get(ev, "seq")));
    json_array_append_new(
        attrs, json_pack("{s:s, s:{s:s}}", "key", "cordon.seq", "value", "intValue", seq));
    bool warn = type &&
        (strstr(type, "refused") || strstr(type, "breakglass") || strstr(type, "tool_changed") ||
         strstr(type, "kill"));
    /* clang-format off */
    return json_pack("{s:s, s:s, s:i, s:s, s:{s:s%}, s:o}", "timeUnixNano", when,
                     "observedTimeUnixNano", observed, "severityNumber", warn ? 13 : 9,
                     "severityText", warn ? "WARN" : "INFO", "body", "stringValue", line, len,
                     "attributes", attrs);
    /* clang-format on */
}

static bool wait_fd(int fd, short ev, int ms)
{
    struct pollfd p = { .fd = fd, .events = ev };
    int r;
    do
        r = poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    return r > 0;
}

/* POST BODY; true when the collector answered 2xx. Bounded by IO_TIMEOUT_MS per step. */
static bool post(const struct endpoint *e, const char *body)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
    if (getaddrinfo(e->host, e->port, &hints, &ai) != 0)
        return false;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    bool ok = fd >= 0 &&
        (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
         (errno == EINPROGRESS && wait_fd(fd, POLLOUT, IO_TIMEOUT_MS)));
    freeaddrinfo(ai);
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (ok && (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr))
        ok = false;
    char *req = NULL;
    int n = ok ? asprintf(&req,
                          "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: "
                          "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                          e->path, e->host, e->port, strlen(body), body)
               : -1;
    for (size_t off = 0; ok && n > 0 && off < (size_t)n;) {
        ssize_t w = send(fd, req + off, (size_t)n - off, MSG_NOSIGNAL);
        if (w > 0)
            off += (size_t)w;
        else if (w < 0 && errno == EAGAIN)
            ok = wait_fd(fd, POLLOUT, IO_TIMEOUT_MS);
        else if (!(w < 0 && errno == EINTR))
            ok = false;
    }
    free(req);
    char status[32] = "";
    size_t got = 0;
    while (ok && got < 12) {
        if (!wait_fd(fd, POLLIN, IO_TIMEOUT_MS))
            break;
        ssize_t r = recv(fd, status + got, sizeof status - 1 - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (fd >= 0)
        close(fd);
    return ok && got >= 12 && !strncmp(status, "HTTP/1.", 7) && status[9] == '2';
}

static void flush(const struct endpoint *e, json_t *records)
{
    if (!json_array_size(records))
        return;
    struct utsname u;
    if (uname(&u) < 0)
        strcpy(u.nodename, "?");
    /* clang-format off */
    json_auto_t *doc = json_pack(
        "{s:[{s:{s:[o, o]}, s:[{s:{s:s, s:s}, s:O}]}]}", "resourceLogs", "resource",
        "attributes", attr_str("service.name", "cordon"), attr_str("host.name", u.nodename),
        "scopeLogs", "scope", "name", "cordon.audit", "version", CORDON_VERSION, "logRecords",
        records);
    /* clang-format on */
    _cleanup_free_ char *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    /* One retry: a collector restarting should not cost a batch. */
    if (body && !post(e, body))
        post(e, body);
    json_array_clear(records);
}

static void exporter(int fd, const struct endpoint *e)
{
    _cleanup_free_ char *buf = malloc(AUDIT_MAX_LINE + 1);
    json_auto_t *records = json_array();
    if (!buf || !records)
        _exit(0);
    for (;;) {
        /* Block for the first line of a batch; then take what is already there. */
        bool more = wait_fd(fd, POLLIN, json_array_size(records) ? 50 : -1);
        ssize_t n = more ? recv(fd, buf, AUDIT_MAX_LINE + 1, 0) : 0;
        if (n > 0 && (size_t)n <= AUDIT_MAX_LINE)
            json_array_append_new(records, log_record(buf, (size_t)n));
        if (n <= 0 || json_array_size(records) >= BATCH_MAX)
            flush(e, records);
        if (n == 0 && more)
            break; /* every writer is gone */
        if (n < 0 && errno != EINTR && errno != EAGAIN)
            break;
    }
    flush(e, records);
    _exit(0);
}

int audit_export_start(const char *url, int *out_fd, struct cordon_err *err)
{
    struct endpoint e;
    TRY(parse_endpoint(url, &e, err));
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return err_sys(err, CORDON_E_SETUP, "audit export: cannot make a channel");
    int size = CHANNEL_BYTES;
    /* Room for the largest line; FORCE works for root past wmem_max. */
    if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0)
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    if (setsockopt(sv[1], SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
        setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    pid_t mid = fork();
    if (mid < 0) {
        close(sv[0]);
        close(sv[1]);
        return err_sys(err, CORDON_E_SETUP, "audit export: cannot fork");
    }
    if (mid == 0) {
        /* Detached from the caller's session and signals, and reparented at once. */
        setsid();
        if (fork() != 0)
            _exit(0);
        prctl(PR_SET_NAME, "cordon-otlp", 0, 0, 0);
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        int keep[1] = { sv[1] };
        close_fds_except(keep, 1);
        signal(SIGPIPE, SIG_IGN);
        exporter(sv[1], &e);
    }
    close(sv[1]);
    waitpid(mid, NULL, 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    *out_fd = sv[0];
    return 0;
}

bool audit_export_send(int fd, const char *line, size_t len)
{
    ssize_t n;
    do
        n = send(fd, line, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)len;
}
