/*
 * tests/unit/test_relay.c: the gateway's side of relayed transparent egress
 * (common/relay_wire.h), against a real gateway process on a real socket:
 * a DNS stream answers allowed names with synthetic addresses and refuses
 * the rest, a relayed connection is held to the name its address stands
 * for, prefaces the gateway did not agree to are refused, and a connection
 * the head budget cuts before its door token, preface or client's bytes
 * were read (or came) is answered as its client's own first byte says
 * (HTTP, or not a byte). The levels' relays are tested end to end by
 * tests/integration/test_transparent_egress.py.
 */
#include "common/relay_wire.h"
#include "egress/gateway.h"
#include "egress/gateway_int.h"
#include "egress/synth.h"
#include "tap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static struct sockaddr_un door_addr;

static int door_listener(const char *tag)
{
    door_addr = (struct sockaddr_un){ .sun_family = AF_UNIX };
    /* Abstract: nothing left in the file system, and private to this test run. */
    snprintf(door_addr.sun_path + 1, sizeof door_addr.sun_path - 1, "cordon-test-relay-%d-%s",
             (int)getpid(), tag);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* Room for more than the head budget's connections while the gateway is stopped. */
    if (l < 0 || bind(l, (struct sockaddr *)&door_addr, sizeof door_addr) < 0 ||
        listen(l, 2 * HEAD_BUDGET) < 0)
        return -1;
    return l;
}

static int dial(void)
{
    int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = { .tv_sec = 10 };
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (c >= 0 && connect(c, (struct sockaddr *)&door_addr, sizeof door_addr) < 0) {
        close(c);
        return -1;
    }
    return c;
}

static bool send_all(int fd, const void *p, size_t n)
{
    return write(fd, p, n) == (ssize_t)n;
}

static bool read_exact(int fd, void *p, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    return true;
}

/* Everything until the gateway closes (at most CAP bytes). */
static size_t read_to_eof(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    return got;
}

/* A query for NAME of QTYPE, RFC 7766-framed, into OUT; its framed length. */
static size_t framed_query(uint16_t id, const char *name, uint16_t qtype, uint8_t *out)
{
    uint8_t *p = out + 2;
    const uint8_t head[12] = { id >> 8, id & 0xff, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 };
    memcpy(p, head, sizeof head);
    size_t n = sizeof head;
    for (const char *label = name; *label;) {
        const char *dot = strchr(label, '.');
        size_t len = dot ? (size_t)(dot - label) : strlen(label);
        p[n++] = (uint8_t)len;
        memcpy(p + n, label, len);
        n += len;
        label += len + (dot ? 1 : 0);
    }
    p[n++] = 0;
    p[n++] = (uint8_t)(qtype >> 8);
    p[n++] = (uint8_t)qtype;
    p[n++] = 0;
    p[n++] = DNS_CLASS_IN;
    out[0] = (uint8_t)(n >> 8);
    out[1] = (uint8_t)n;
    return n + 2;
}

struct answer {
    int rcode;
    int n_answers;
    uint32_t a; /* host order; 0 without an A record */
};

/* Ask NAME on the DNS stream FD; false when the stream ended instead. */
static bool ask(int fd, uint16_t id, const char *name, uint16_t qtype, struct answer *ans)
{
    uint8_t q[600], len_be[2], r[DNS_MAX_PACKET];
    if (!send_all(fd, q, framed_query(id, name, qtype, q)) || !read_exact(fd, len_be, 2))
        return false;
    size_t n = (size_t)len_be[0] << 8 | len_be[1];
    if (n < 12 || n > sizeof r || !read_exact(fd, r, n))
        return false;
    *ans = (struct answer){ .rcode = r[3] & 0x0f, .n_answers = r[6] << 8 | r[7] };
    /* One A record, last in the packet: its four bytes end it. */
    if (ans->n_answers == 1)
        ans->a = (uint32_t)r[n - 4] << 24 | (uint32_t)r[n - 3] << 16 | (uint32_t)r[n - 2] << 8 |
            r[n - 1];
    return (r[0] << 8 | r[1]) == id;
}

static int dns_stream(void)
{
    int c = dial();
    if (c >= 0 && (!send_all(c, RELAY_MAGIC, RELAY_MAGIC_LEN) || !send_all(c, "D", 1))) {
        close(c);
        return -1;
    }
    return c;
}

/* A relayed connection to ADDR:PORT sending REQUEST; the gateway's whole answer. */
static size_t relayed(uint32_t addr, uint16_t port, const char *request, char *buf, size_t cap)
{
    int c = dial();
    if (c < 0)
        return 0;
    uint8_t pre[RELAY_PREFACE_MAX];
    memcpy(pre, RELAY_MAGIC, RELAY_MAGIC_LEN);
    pre[RELAY_MAGIC_LEN] = RELAY_TCP;
    uint32_t a_be = htonl(addr);
    uint16_t p_be = htons(port);
    memcpy(pre + RELAY_MAGIC_LEN + 1, &a_be, 4);
    memcpy(pre + RELAY_MAGIC_LEN + 5, &p_be, 2);
    size_t n = 0;
    if (send_all(c, pre, RELAY_PREFACE_TCP_LEN) && send_all(c, request, strlen(request)))
        n = read_to_eof(c, buf, cap);
    close(c);
    return n;
}

/* What a connection that opens with RAW gets back. */
static size_t raw(const void *bytes, size_t len, char *buf, size_t cap)
{
    int c = dial();
    size_t n = 0;
    if (c >= 0 && send_all(c, bytes, len))
        n = read_to_eof(c, buf, cap);
    if (c >= 0)
        close(c);
    return n;
}

static pid_t start(struct gateway_config *cfg, bool relay, const char *tag, int *report)
{
    int l = door_listener(tag);
    if (l < 0)
        return -1;
    struct gateway_doors doors = { .proxy = l, .dns = -1, .relay = relay };
    struct cordon_err err;
    pid_t pid = gateway_start(cfg, &doors, getuid(), NULL, NULL, report, &err);
    close(l);
    return pid;
}

static void stop(pid_t pid, int report, char *reports, size_t cap)
{
    kill(pid, SIGTERM);
    read_to_eof(report, reports, cap);
    close(report);
    waitpid(pid, NULL, 0);
}

/* A relay's preface for ADDR:PORT (IPv4, or ::1 for an IPv6 one) into OUT; its length. */
static size_t preface(bool v6, uint32_t addr, uint16_t port, uint8_t *out)
{
    uint32_t a_be = htonl(addr);
    uint8_t a6[16] = { [15] = 1 };
    size_t alen = v6 ? 16 : 4;
    memcpy(out, RELAY_MAGIC, RELAY_MAGIC_LEN);
    out[RELAY_MAGIC_LEN] = v6 ? RELAY_TCP6 : RELAY_TCP;
    memcpy(out + RELAY_MAGIC_LEN + 1, v6 ? (void *)a6 : (void *)&a_be, alen);
    out[RELAY_MAGIC_LEN + 1 + alen] = (uint8_t)(port >> 8);
    out[RELAY_MAGIC_LEN + 2 + alen] = (uint8_t)port;
    return RELAY_MAGIC_LEN + 3 + alen;
}

/* Bytes sent while the gateway is stopped, or only once it has cut the connection. */
enum late { LATE_NONE, LATE_ALL, LATE_CLIENT };

/* What each connection the head budget cuts at once sends: its client's own first bytes. */
static const struct {
    const char *what;
    int relay; /* 0 to the proxy; 4 or 6, a relay's preface of that family first */
    const char *first;
    enum late late; /* all sent before, all after the cut, or the client's own after */
    bool http;      /* answered in HTTP (429), or cut without a byte */
} unread[] = {
    /* The first: its answer says the batch was taken in and cut. */
    { "a proxy client's request", 0, "G", LATE_NONE, true },
    { "a proxy client's token alone", 0, "", LATE_NONE, true },
    { "a relayed plain request", 4, "G", LATE_NONE, true },
    { "a relayed ClientHello", 4, "\x16\x03\x01", LATE_NONE, false },
    { "a relayed ClientHello (IPv6)", 6, "\x16\x03\x01", LATE_NONE, false },
    { "a relayed connection whose client sends nothing", 4, "", LATE_NONE, false },
    { "a proxy request whose every byte comes after", 0, "G", LATE_ALL, true },
    { "a relayed plain request whose every byte comes after", 4, "G", LATE_ALL, true },
    { "a relayed ClientHello whose every byte comes after", 4, "\x16\x03\x01", LATE_ALL, false },
    { "a relayed plain request whose client's bytes come after", 4, "G", LATE_CLIENT, true },
    { "a relayed ClientHello whose client's bytes come after", 4, "\x16", LATE_CLIENT, false },
};
#define N_UNREAD (sizeof unread / sizeof unread[0])

/* Connection I's bytes (the I-th of unread[], or a filler past them) into HEAD: the door token
 * and any preface (when HEAD_TOO), then the client's own (when CLIENT_TOO); their length. */
static size_t unread_bytes(const struct gateway_config *cfg, size_t i, bool head_too,
                           bool client_too, uint8_t *head)
{
    size_t n = 0;
    /* Past the ones cut: slow heads to the proxy that hold the budget. */
    const char *first = i < N_UNREAD ? unread[i].first : "GET ";
    if (head_too) {
        memcpy(head, cfg->door_token, GATEWAY_DOOR_TOKEN_LEN);
        n = GATEWAY_DOOR_TOKEN_LEN;
        if (i < N_UNREAD && unread[i].relay)
            n += preface(unread[i].relay == 6, SYNTH_NET + 2, 443, head + n);
    }
    if (client_too) {
        memcpy(head + n, first, strlen(first));
        n += strlen(first);
    }
    return n;
}

static bool cut_429(const char *buf, size_t n)
{
    return n > 0 && strstr(buf, "HTTP/1.1 429") && strstr(buf, "budget:heads");
}

/*
 * The head budget cuts connections the gateway took in but never read (the
 * process level's door under load): each opens with the door token, and a
 * relay's preface before its client's bytes where it came to an address.
 * The answer follows the client's own first byte, not the token's (TOKEN0)
 * nor the preface's NUL, and where it has not come, the gateway waits for
 * it (or for the deadline, then what came says). The gateway is stopped
 * while they queue, so it takes them in at once (its listener accepts until
 * the backlog is empty): past the head budget the first ones are cut before
 * any byte was read, and the late ones before their bytes were sent.
 */
static void cut_unread(struct gateway_config *cfg, uint8_t token0)
{
    static char buf[4096], reports[1 << 20];
    for (size_t i = 0; i < sizeof cfg->door_token; i++)
        cfg->door_token[i] = (uint8_t)(token0 + i);
    cfg->door_token_set = true;
    int report = -1, st = 0, c[N_UNREAD + HEAD_BUDGET];
    char tag[16];
    snprintf(tag, sizeof tag, "unread%02x", token0);
    pid_t gw = start(cfg, true, tag, &report);
    bool stopped =
        gw > 0 && kill(gw, SIGSTOP) == 0 && waitpid(gw, &st, WUNTRACED) == gw && WIFSTOPPED(st);
    ok(stopped, "the gateway (token from 0x%02x) starts, and is stopped", token0);
    if (!stopped)
        return;
    bool sent = true;
    uint8_t head[GATEWAY_DOOR_TOKEN_LEN + RELAY_PREFACE_MAX + 8];
    for (size_t i = 0; i < N_UNREAD + HEAD_BUDGET; i++) {
        enum late late = i < N_UNREAD ? unread[i].late : LATE_NONE;
        size_t n = unread_bytes(cfg, i, late != LATE_ALL, late == LATE_NONE, head);
        c[i] = dial();
        sent = sent && c[i] >= 0 && (n == 0 || send_all(c[i], head, n));
    }
    ok(sent && kill(gw, SIGCONT) == 0, "%zu connections wait in its backlog",
       N_UNREAD + HEAD_BUDGET);
    /* The first one's answer is out: the others were cut with it, the late ones silent. */
    size_t n0 = sent ? read_to_eof(c[0], buf, sizeof buf) : 0;
    bool answered0 = cut_429(buf, n0);
    for (size_t i = 1; i < N_UNREAD && sent; i++) {
        enum late late = unread[i].late;
        size_t n = late == LATE_NONE ? 0 : unread_bytes(cfg, i, late == LATE_ALL, true, head);
        if (n) /* it fails where the gateway closed already: what comes back says */
            (void)send_all(c[i], head, n);
    }
    for (size_t i = 0; i < N_UNREAD; i++) {
        size_t n = i == 0 ? n0 : sent ? read_to_eof(c[i], buf, sizeof buf) : 0;
        bool answered = i == 0 ? answered0 : cut_429(buf, n);
        ok(unread[i].http ? answered : n == 0, "token from 0x%02x, %s, cut unread: %s", token0,
           unread[i].what, unread[i].http ? "429 in HTTP" : "not a byte back");
    }
    for (size_t i = 0; i < N_UNREAD + HEAD_BUDGET; i++)
        if (c[i] >= 0)
            close(c[i]);
    stop(gw, report, reports, sizeof reports);
    size_t cut = 0;
    for (const char *p = reports; (p = strstr(p, "\"budget:heads\"")); p++)
        cut++;
    ok(cut == N_UNREAD, "each cut one is reported (%zu of %zu)", cut, N_UNREAD);
    cfg->door_token_set = false;
}

int main(void)
{
    static const char *const allow_texts[] = { "allowed.test", "*.wild.test" };
    struct egress_rule allow[2];
    char why[200];
    for (size_t i = 0; i < 2; i++)
        if (egress_rule_parse(allow_texts[i], &allow[i], why, sizeof why) < 0)
            return ok(0, "rule %s: %s", allow_texts[i], why), 1;
    struct gateway_config cfg = { .rules = { .allow = allow, .n_allow = 2 },
                                  .connect_timeout_ms = 2000 };
    static char buf[65536], reports[1 << 20];
    int report;
    signal(SIGPIPE, SIG_IGN); /* a connection the gateway cut: its write fails, no more */

    pid_t gw = start(&cfg, true, "on", &report);
    ok(gw > 0, "the gateway starts with relays allowed");

    int s = dns_stream();
    struct answer a;
    ok(s >= 0 && ask(s, 1, "allowed.test", DNS_TYPE_A, &a) && a.rcode == DNS_RCODE_NOERROR &&
           a.n_answers == 1 && a.a == SYNTH_NET + 2,
       "an allowed name gets the first synthetic address");
    ok(ask(s, 2, "Allowed.Test", DNS_TYPE_A, &a) && a.a == SYNTH_NET + 2,
       "the same name again (any case) gets the same address");
    ok(ask(s, 3, "allowed.test", DNS_TYPE_AAAA, &a) && a.rcode == DNS_RCODE_NOERROR &&
           a.n_answers == 0,
       "AAAA gets an empty answer (IPv4 only)");
    ok(ask(s, 4, "evil.test", DNS_TYPE_A, &a) && a.rcode == DNS_RCODE_NXDOMAIN && a.n_answers == 0,
       "a name off the allowlist gets NXDOMAIN");
    bool all = true;
    for (int i = 1; i < SYNTH_MAX_NAMES && all; i++) {
        char name[64];
        snprintf(name, sizeof name, "n%d.wild.test", i);
        all = ask(s, (uint16_t)(100 + i), name, DNS_TYPE_A, &a) && a.rcode == DNS_RCODE_NOERROR;
    }
    ok(all, "a wildcard rule's names get addresses up to the cap (%d)", SYNTH_MAX_NAMES);
    ok(ask(s, 5, "one-too-many.wild.test", DNS_TYPE_A, &a) && a.rcode == DNS_RCODE_NXDOMAIN,
       "past the cap, an allowed name gets NXDOMAIN");
    const uint8_t oversized[2] = { 0xff, 0xff };
    ok(send_all(s, oversized, 2) && read_to_eof(s, buf, sizeof buf) == 0,
       "a frame longer than any DNS message ends the stream");
    close(s);

    size_t n =
        relayed(SYNTH_NET + 2, 80, "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n", buf, sizeof buf);
    ok(n > 0 && strstr(buf, "HTTP/1.1 403") && strstr(buf, "X-Cordon-Denied: fronting"),
       "a relayed request whose Host is not the address's name is fronting (403)");
    n = relayed(SYNTH_NET + 300, 443, "\x16\x03\x01", buf, sizeof buf);
    ok(n == 0, "a relayed connection to an address never given out gets nothing back");
    n = relayed(0x7f000001, 3128, "GET http://allowed.test/ HTTP/1.1\r\n\r\n", buf, sizeof buf);
    ok(n == 0, "a relayed connection to an address no rule allows (loopback) is cut");
    /* An IPv6 literal no rule allows: cut before a byte comes back. */
    uint8_t pre6[RELAY_PREFACE_TCP6_LEN];
    memcpy(pre6, RELAY_MAGIC, RELAY_MAGIC_LEN);
    pre6[RELAY_MAGIC_LEN] = RELAY_TCP6;
    memset(pre6 + RELAY_MAGIC_LEN + 1, 0, 16);
    pre6[RELAY_MAGIC_LEN + 16] = 1; /* ::1 */
    pre6[RELAY_MAGIC_LEN + 17] = 0;
    pre6[RELAY_MAGIC_LEN + 18] = 9;
    n = raw(pre6, sizeof pre6, buf, sizeof buf);
    ok(n == 0, "a relayed connection to an IPv6 literal no rule allows is cut");
    const char unknown[] = "\0cordon-relay1X";
    n = raw(unknown, sizeof unknown - 1, buf, sizeof buf);
    ok(n > 0 && strstr(buf, "HTTP/1.1 400"), "a preface of an unknown kind gets 400");
    const char not_magic[] = "\0cordon-relayX";
    n = raw(not_magic, sizeof not_magic - 1, buf, sizeof buf);
    ok(n > 0 && strstr(buf, "HTTP/1.1 400"), "a NUL that is not the preface gets 400");
    n = raw("GET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", 51, buf, sizeof buf);
    ok(n > 0 && strstr(buf, "HTTP/1.1 403") && strstr(buf, "not_allowed"),
       "a proxy request on the same door is still decided as one");
    stop(gw, report, reports, sizeof reports);
    ok(strstr(reports, "\"method\": \"DNS\"") || strstr(reports, "\"method\":\"DNS\""),
       "the refused name is in the gateway's reports");
    ok(strstr(reports, "budget:dns_names") != NULL, "so is the cap");
    ok(strstr(reports, "\"fronting\"") != NULL, "and the fronting");
    ok(strstr(reports, "\"::1\"") != NULL, "and the IPv6 literal, refused");

    cut_unread(&cfg, 'G'); /* a token that looks like HTTP: the ClientHellos get no 429 */
    cut_unread(&cfg, 0);   /* one that looks like a preface: the proxy's clients get their 429 */

    gw = start(&cfg, false, "off", &report);
    n = raw(RELAY_MAGIC "D", RELAY_MAGIC_LEN + 1, buf, sizeof buf);
    ok(gw > 0 && n > 0 && strstr(buf, "HTTP/1.1 400"),
       "where no relay was agreed, the preface is only a bad request");
    stop(gw, report, reports, sizeof reports);
    return done_testing();
}
