/*
 * cli/fetch.c: `cordon fetch URL`: the egress gateway as a tool. The request
 * goes through the very same gateway code a sandbox gets (allowlist, own
 * resolution, address classes, budgets), served in a child process over a
 * socketpair; https goes through CONNECT and is verified against the host's
 * trust store here.
 */
#include "cli/cli.h"
#include "common/hostpath.h"
#include "common/units.h"
#include "common/addr.h"
#include "egress/gateway.h"
#include "policy/policy.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: cordon fetch [OPTIONS] URL\n"
    "\n"
    "Fetch an http:// or https:// URL from the host under the egress rules a\n"
    "sandbox would get, and print the body. Refusals exit 125 with the reason.\n"
    "\n"
    "  -p, --policy FILE        take the network rules from a policy\n"
    "      --allow HOST[:PORT]  allow a destination (repeatable)\n"
    "      --deny HOST[:PORT]   refuse a destination even if allowed (repeatable)\n"
    "      --allow-private CIDR let addresses in CIDR through the SSRF rules\n"
    "      --resolve HOST=IP    pin a name to an address\n"
    "      --dns IP[:PORT]      resolve through this nameserver (repeatable)\n"
    "  -o, --output FILE        write the body to FILE instead of stdout\n"
    "      --max-size SIZE      refuse a body larger than SIZE (default 10M)\n"
    "  -t, --timeout DURATION   give up after DURATION (default 30s)\n"
    "  -h, --help               this help\n"
    "\n"
    "Exit status: 0 for a 2xx answer; 1 for another HTTP status; 125 when cordon\n"
    "refused the request or could not complete it.\n";

enum { OPT_ALLOW = 256, OPT_DENY, OPT_ALLOW_PRIVATE, OPT_RESOLVE, OPT_DNS, OPT_MAX_SIZE };

static const struct option options[] = {
    { "policy", required_argument, NULL, 'p' },
    { "allow", required_argument, NULL, OPT_ALLOW },
    { "deny", required_argument, NULL, OPT_DENY },
    { "allow-private", required_argument, NULL, OPT_ALLOW_PRIVATE },
    { "resolve", required_argument, NULL, OPT_RESOLVE },
    { "dns", required_argument, NULL, OPT_DNS },
    { "output", required_argument, NULL, 'o' },
    { "max-size", required_argument, NULL, OPT_MAX_SIZE },
    { "timeout", required_argument, NULL, 't' },
    { "help", no_argument, NULL, 'h' },
    { 0 },
};

struct channel {
    int fd;
    SSL *ssl;
    uint64_t deadline_ms;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool wait_fd(struct channel *ch, short events)
{
    uint64_t now = now_ms();
    if (now >= ch->deadline_ms)
        return false;
    struct pollfd p = { .fd = ch->fd, .events = events };
    return poll(&p, 1, (int)(ch->deadline_ms - now)) > 0;
}

static ssize_t ch_read(struct channel *ch, char *buf, size_t len)
{
    for (;;) {
        if (ch->ssl) {
            int n = SSL_read(ch->ssl, buf, (int)len);
            if (n > 0)
                return n;
            int e = SSL_get_error(ch->ssl, n);
            if (e == SSL_ERROR_ZERO_RETURN)
                return 0;
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                return -1;
            if (!wait_fd(ch, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT))
                return -2;
            continue;
        }
        if (!wait_fd(ch, POLLIN))
            return -2;
        ssize_t n = read(ch->fd, buf, len);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        return n;
    }
}

static int ch_write(struct channel *ch, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n;
        if (ch->ssl) {
            int r = SSL_write(ch->ssl, buf, (int)len);
            if (r <= 0) {
                int e = SSL_get_error(ch->ssl, r);
                if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) ||
                    !wait_fd(ch, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT))
                    return -1;
                continue;
            }
            n = r;
        } else {
            if (!wait_fd(ch, POLLOUT))
                return -1;
            n = write(ch->fd, buf, len);
            if (n < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (n < 0)
                return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

struct response {
    int status;
    bool denied; /* the gateway's own answer (X-Cordon-Denied) */
    bool chunked;
    long long length; /* -1 when absent */
    char head[65536];
    size_t head_len, have; /* bytes of head; bytes in head[] in all */
};

/* Read and parse a response head; body bytes already read stay after it. */
static int read_head(struct channel *ch, struct response *r, char *why, size_t why_len)
{
    r->length = -1;
    for (;;) {
        char *end = memmem(r->head, r->have, "\r\n\r\n", 4);
        if (end) {
            r->head_len = (size_t)(end - r->head) + 4;
            break;
        }
        if (r->have == sizeof r->head) {
            snprintf(why, why_len, "response head too large");
            return -1;
        }
        ssize_t n = ch_read(ch, r->head + r->have, sizeof r->head - r->have);
        if (n <= 0) {
            snprintf(why, why_len, n == -2 ? "timed out" : "connection closed before a response");
            return -1;
        }
        r->have += (size_t)n;
    }
    if (sscanf(r->head, "HTTP/1.%*1[01] %3d", &r->status) != 1) {
        snprintf(why, why_len, "malformed response status line");
        return -1;
    }
    for (char *line = strstr(r->head, "\r\n") + 2; line < r->head + r->head_len - 2;) {
        char *eol = strstr(line, "\r\n");
        if (!strncasecmp(line, "X-Cordon-Denied:", 16))
            r->denied = true;
        else if (!strncasecmp(line, "Content-Length:", 15))
            r->length = strtoll(line + 15, NULL, 10);
        else if (!strncasecmp(line, "Transfer-Encoding:", 18) &&
                 memmem(line, (size_t)(eol - line), "chunked", 7))
            r->chunked = true;
        line = eol + 2;
    }
    return 0;
}

/* The body, de-chunked, to OUT; at most MAX bytes. */
static int copy_body(struct channel *ch, struct response *r, FILE *out, uint64_t max, char *why,
                     size_t why_len)
{
    static char buf[65536];
    size_t pending = r->have - r->head_len;
    memmove(buf, r->head + r->head_len, pending);
    uint64_t total = 0;
    uint64_t chunk_left = 0;
    enum { SIZE, DATA, DATA_CRLF } state = SIZE;
    bool eof = false;
    for (;;) {
        if (r->chunked) {
            /* Decode as much of BUF as is complete; keep a partial line. */
            size_t pos = 0;
            for (;;) {
                if (state == DATA) {
                    size_t n = pending - pos < chunk_left ? pending - pos : (size_t)chunk_left;
                    if (total + n > max)
                        goto too_big;
                    fwrite(buf + pos, 1, n, out);
                    total += n;
                    pos += n;
                    chunk_left -= n;
                    if (chunk_left)
                        break;
                    state = DATA_CRLF;
                }
                if (state == DATA_CRLF) {
                    if (pending - pos < 2)
                        break; /* its CRLF has not arrived */
                    if (memcmp(buf + pos, "\r\n", 2) != 0)
                        goto bad_chunk;
                    pos += 2;
                    state = SIZE;
                }
                char *eol = memmem(buf + pos, pending - pos, "\r\n", 2);
                if (!eol) {
                    if (pending - pos > 1024)
                        goto bad_chunk;
                    break;
                }
                char *end;
                if (!isxdigit((unsigned char)buf[pos]))
                    goto bad_chunk;
                chunk_left = strtoull(buf + pos, &end, 16);
                if (end != eol && *end != ';')
                    goto bad_chunk;
                pos = (size_t)(eol - buf) + 2;
                if (chunk_left == 0)
                    return 0;
                state = DATA;
            }
            memmove(buf, buf + pos, pending - pos);
            pending -= pos;
        } else {
            uint64_t n = pending;
            if (r->length >= 0 && total + n > (uint64_t)r->length)
                n = (uint64_t)r->length - total;
            if (total + n > max)
                goto too_big;
            fwrite(buf, 1, (size_t)n, out);
            total += n;
            pending = 0;
            if (r->length >= 0 && total >= (uint64_t)r->length)
                return 0;
        }
        if (eof) {
            if (r->chunked || (r->length >= 0 && total < (uint64_t)r->length)) {
                snprintf(why, why_len, "response ended early");
                return -1;
            }
            return 0;
        }
        ssize_t n = ch_read(ch, buf + pending, sizeof buf - pending);
        if (n == -2) {
            snprintf(why, why_len, "timed out");
            return -1;
        }
        if (n < 0) {
            snprintf(why, why_len, "connection error");
            return -1;
        }
        if (n == 0)
            eof = true;
        pending += (size_t)n;
    }
too_big:
    snprintf(why, why_len, "response larger than the --max-size of %llu bytes",
             (unsigned long long)max);
    return -1;
bad_chunk:
    snprintf(why, why_len, "malformed chunked response");
    return -1;
}

static int start_tls(struct channel *ch, const struct url *u, SSL_CTX **ctx, char *why,
                     size_t why_len)
{
    *ctx = SSL_CTX_new(TLS_client_method());
    if (!*ctx || SSL_CTX_set_default_verify_paths(*ctx) != 1) {
        snprintf(why, why_len, "cannot load the host's trust store");
        return -1;
    }
    SSL_CTX_set_verify(*ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_min_proto_version(*ctx, TLS1_2_VERSION);
    ch->ssl = SSL_new(*ctx);
    SSL_set_fd(ch->ssl, ch->fd);
    char host[256];
    if (u->authority.host.is_ip) {
        ip_addr_format(&u->authority.host.ip, host, sizeof host);
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ch->ssl), host);
    } else {
        snprintf(host, sizeof host, "%s", u->authority.host.name);
        SSL_set_tlsext_host_name(ch->ssl, host);
        SSL_set1_host(ch->ssl, host);
    }
    for (;;) {
        int r = SSL_connect(ch->ssl);
        if (r == 1)
            return 0;
        int e = SSL_get_error(ch->ssl, r);
        if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) &&
            wait_fd(ch, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT))
            continue;
        long v = SSL_get_verify_result(ch->ssl);
        snprintf(why, why_len, "TLS with %s failed: %s", host,
                 v != X509_V_OK ? X509_verify_cert_error_string(v) : "handshake error");
        return -1;
    }
}

/*
 * -o FILE: opened without following a link in its path, and only as a
 * regular file (a FIFO would hang us), so a planted link cannot redirect
 * the body onto another of the caller's files.
 */
static FILE *open_output(const char *path, char *why, size_t len)
{
    struct cordon_err err = { 0 };
    int fd = hostpath_open(AT_FDCWD, path, O_WRONLY | O_CREAT | O_NONBLOCK, 0666, false, &err);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        snprintf(why, len, "'%.200s' is not a regular file", path);
        return NULL;
    }
    if (fd < 0 || ftruncate(fd, 0) < 0 || fcntl(fd, F_SETFL, 0) < 0) {
        if (fd >= 0)
            err_sys(&err, CORDON_E_SETUP, "cannot truncate '%s'", path);
        snprintf(why, len, "%s", err.msg);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        snprintf(why, len, "cannot open '%.200s': %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

/* The gateway of one connection, in a child: SV[1] is its side. */
static pid_t start_gateway(const struct policy *p, int sv[2], struct cordon_err *err)
{
    struct gateway_config cfg;
    if (gateway_config_from_policy(p, &cfg, err) < 0)
        return -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        gateway_config_release(&cfg);
        return err_sys(err, CORDON_E_SETUP, "fetch: cannot create a socket pair");
    }
    pid_t gw = fork();
    if (gw == 0) {
        close(sv[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        struct cordon_err e;
        /* Root's gateway drops to nobody: it parses what the far side sends. */
        _exit(gateway_serve_one(&cfg, sv[1], 65534, &e) < 0 ? 1 : 0);
    }
    close(sv[1]);
    gateway_config_release(&cfg);
    if (gw < 0) {
        close(sv[0]);
        return err_sys(err, CORDON_E_SETUP, "fetch: cannot start the gateway");
    }
    return gw;
}

/* Send U's request on CH (a CONNECT and TLS first for https) and read the
 * answer's head into R; -1 with WHY when that failed. */
static int request(struct channel *ch, const struct url *u, const char *target, const char *host,
                   SSL_CTX **ctx, struct response *r, char *why, size_t len)
{
    char req[8192];
    if (u->https) {
        snprintf(req, sizeof req, "CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n\r\n", host, u->port,
                 host, u->port);
        if (ch_write(ch, req, strlen(req)) < 0 || read_head(ch, r, why, len) < 0)
            return -1;
        if (r->status != 200 || r->head_len != r->have)
            return 0; /* the gateway's own answer */
        memset(r, 0, sizeof *r);
        if (start_tls(ch, u, ctx, why, len) < 0)
            return -1;
    }
    snprintf(req, sizeof req,
             "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: cordon-fetch/%s\r\n"
             "Accept: */*\r\nConnection: close\r\n\r\n",
             u->https ? u->path : target, host, CORDON_VERSION);
    if (ch_write(ch, req, strlen(req)) < 0) {
        snprintf(why, len, "cannot send the request");
        return -1;
    }
    return read_head(ch, r, why, len);
}

/* The answer R (its head read) to OUTPUT or stdout: cmd_fetch's status. */
static int deliver(struct channel *ch, struct response *r, const char *output, uint64_t max,
                   const char *host)
{
    char why[300];
    if (r->denied) {
        /* The gateway's refusal: its one-line reason is the body. */
        char *body = r->head + r->head_len;
        r->head[r->have < sizeof r->head ? r->have : sizeof r->head - 1] = '\0';
        body[strcspn(body, "\n")] = '\0';
        /* A 5xx of the gateway's (dns, upstream_*) is a failure to get
         * there, not a refusal: the rules let the request through. */
        fprintf(stderr, "cordon: fetch: %s: %s\n", r->status >= 500 ? "failed" : "refused", body);
        return EXIT_CORDON_FAILED;
    }
    FILE *out = output ? open_output(output, why, sizeof why) : stdout;
    if (!out)
        goto failed;
    if (copy_body(ch, r, out, max, why, sizeof why) < 0) {
        if (output) {
            fclose(out);
            unlink(output); /* no partial file left behind */
        }
        goto failed;
    }
    int flushed = fflush(out);
    if (out != stdout)
        fclose(out);
    if (flushed != 0) {
        snprintf(why, sizeof why, "cannot write the body");
        goto failed;
    }
    if (r->status >= 200 && r->status < 300)
        return 0;
    fprintf(stderr, "cordon: fetch: %s answered HTTP %d\n", host, r->status);
    return 1;
failed:
    fprintf(stderr, "cordon: fetch: %s\n", why);
    return EXIT_CORDON_FAILED;
}

struct fetch_args {
    const char *policy_file, *output, *timeout, *max_size, *target;
    struct {
        int opt;
        const char *arg;
    } flags[64];
    size_t n_flags;
};

/* ARGV into A: -1 to go on, or the exit status of --help or a usage error. */
static int parse_args(int argc, char **argv, struct fetch_args *a)
{
    *a = (struct fetch_args){ .timeout = "30s", .max_size = "10M" };
    opterr = 0;
    optind = 1;
    int opt;
    while ((opt = getopt_long(argc, argv, "+:p:o:t:h", options, NULL)) != -1) {
        switch (opt) {
        case 'h':
            fputs(usage, stdout);
            return 0;
        case 'p':
            a->policy_file = optarg;
            break;
        case 'o':
            a->output = optarg;
            break;
        case 't':
            a->timeout = optarg;
            break;
        case OPT_MAX_SIZE:
            a->max_size = optarg;
            break;
        case ':':
        case '?':
            return cli_option_error("fetch", opt, argv);
        default:
            if (a->n_flags == sizeof a->flags / sizeof a->flags[0])
                return cli_usage_error("fetch: too many options");
            a->flags[a->n_flags].opt = opt;
            a->flags[a->n_flags++].arg = optarg;
        }
    }
    if (optind + 1 != argc)
        return cli_usage_error("fetch: expected exactly one URL");
    a->target = argv[optind];
    return -1;
}

/* The policy fetch uses: the file's (or the defaults), with the flags. */
static struct policy *fetch_policy(const struct fetch_args *a, struct cordon_err *err)
{
    _cleanup_(policy_freep) struct policy *p =
        a->policy_file ? policy_load(a->policy_file, err) : policy_new(err);
    if (!p || policy_require_trusted(p, err) < 0)
        return NULL;
    static const struct {
        int opt;
        const char *key, *flag;
    } keys[] = {
        { OPT_ALLOW, "network.allow", "--allow" },
        { OPT_DENY, "network.deny", "--deny" },
        { OPT_ALLOW_PRIVATE, "network.allow_private", "--allow-private" },
        { OPT_RESOLVE, "network.resolve", "--resolve" },
        { OPT_DNS, "network.dns", "--dns" },
    };
    for (size_t i = 0; i < a->n_flags; i++)
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (keys[k].opt == a->flags[i].opt &&
                policy_set(p, keys[k].key, a->flags[i].arg, keys[k].flag, err) < 0)
                return NULL;
    if (policy_finalize(p, err) < 0)
        return NULL;
    return TAKE_PTR(p);
}

int cmd_fetch(int argc, char **argv)
{
    struct fetch_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    struct cordon_err err = { 0 };
    _cleanup_(policy_freep) struct policy *p = fetch_policy(&a, &err);
    if (!p)
        return cli_fail(&err);

    char why[300];
    uint64_t timeout_ms, max;
    if (parse_duration_ms(a.timeout, &timeout_ms, why, sizeof why) < 0 || !timeout_ms)
        return cli_usage_error("--timeout: %s", timeout_ms ? why : "must be more than 0");
    if (parse_size(a.max_size, &max, why, sizeof why) < 0)
        return cli_usage_error("--max-size: %s", why);
    struct url u;
    if (url_parse(a.target, &u, why, sizeof why) < 0)
        return cli_usage_error("fetch: %s", why);

    signal(SIGPIPE, SIG_IGN);
    int sv[2];
    pid_t gw = start_gateway(p, sv, &err);
    if (gw < 0)
        return cli_fail(&err);
    struct channel ch = { .fd = sv[0], .deadline_ms = now_ms() + timeout_ms };
    static struct response r;
    SSL_CTX *ctx = NULL;
    char host[300];
    host_format(&u.authority.host, host, sizeof host);
    int status = EXIT_CORDON_FAILED;
    if (request(&ch, &u, a.target, host, &ctx, &r, why, sizeof why) < 0)
        fprintf(stderr, "cordon: fetch: %s\n", why);
    else
        status = deliver(&ch, &r, a.output, max, host);
    if (ch.ssl)
        SSL_free(ch.ssl);
    SSL_CTX_free(ctx);
    close(sv[0]);
    kill(gw, SIGKILL);
    waitpid(gw, NULL, 0);
    return status;
}
