/*
 * sandbox/gvisor/relay.c: cordon-gvisor-init's relay (gvisor/init.c), run
 * inside the gVisor sandbox: every connection to the proxy port and to the
 * transparent listeners is carried to the gateway's unix socket, all in
 * this one process. A process per connection cost the run a host process
 * (the ptrace platform's stub) and its tracing thread each, counted by the
 * run's pids limit: ~200 idle connections ended a run as pids_limit. Here a
 * connection costs two descriptors and, while a side reads slower than the
 * other writes, one buffer; how many the run may hold is the gateway's to
 * decide (its connection cap and head budget), as at the namespace level.
 */
#include "sandbox/gvisor/relay.h"

#include "common/relay_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 65536
/* After the gateway's end: how long the client may take to read the rest and close. */
#define LINGER_MS 2000
/* accept() failed (out of descriptors): the listeners rest this long. */
#define PAUSE_MS 100

/* One client connection and its connection to the gateway. */
struct pair {
    int fd[2];     /* [0] the client, [1] the gateway; -1 once closed */
    char *pend[2]; /* bytes still to write to fd[i] */
    size_t len[2], off[2];
    bool eof[2];        /* fd[i] has said all it will */
    bool transparent;   /* a gateway that ends it before a byte refused it: a reset */
    bool answered;      /* the gateway has sent a byte */
    uint64_t linger_ms; /* the gateway is done: when the client is closed regardless */
};

static struct pair *pairs;
static size_t n_pairs, cap_pairs;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void relay_reset_on_close(int fd)
{
    struct linger now = { .l_onoff = 1, .l_linger = 0 };
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
}

/*
 * The gateway's door. A connect through gVisor's gofer to the host socket
 * is refused now and then under a burst (ECONNREFUSED, EAGAIN: seen with
 * 200 connections in a row) though the door listens all run long: tried
 * again a few times, a moment apart, before the client is refused.
 */
static int dial(const char *path)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof a.sun_path)
        return -1;
    strcpy(a.sun_path, path);
    for (int tries = 1;; tries++) {
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0)
            return -1;
        if (connect(s, (struct sockaddr *)&a, sizeof a) == 0)
            return s;
        int e = errno;
        close(s);
        if (tries == 8 || (e != ECONNREFUSED && e != EAGAIN && e != ETIMEDOUT && e != EINTR)) {
            errno = e;
            return -1;
        }
        struct timespec pause = { 0, 10 * 1000 * 1000 * tries };
        nanosleep(&pause, NULL);
    }
}

int relay_dial(const char *gateway, char kind, const struct sockaddr_in *to)
{
    if (!kind)
        return dial(gateway);
    unsigned char preface[RELAY_PREFACE_MAX];
    size_t n = RELAY_MAGIC_LEN;
    memcpy(preface, RELAY_MAGIC, RELAY_MAGIC_LEN);
    preface[n++] = (unsigned char)kind;
    if (to) {
        memcpy(preface + n, &to->sin_addr.s_addr, 4); /* both already big-endian */
        memcpy(preface + n + 4, &to->sin_port, 2);
        n += 6;
    }
    int g = dial(gateway);
    if (g >= 0 && send(g, preface, n, MSG_NOSIGNAL) != (ssize_t)n) {
        close(g);
        return -1;
    }
    return g;
}

static void drop(struct pair *p)
{
    for (int i = 0; i < 2; i++) {
        if (p->fd[i] >= 0)
            close(p->fd[i]);
        free(p->pend[i]);
    }
    *p = pairs[--n_pairs];
}

/* Write what is pending to P's side I; false when that side failed. */
static bool flush_side(struct pair *p, int i)
{
    while (p->off[i] < p->len[i]) {
        ssize_t w = send(p->fd[i], p->pend[i] + p->off[i], p->len[i] - p->off[i],
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return true;
        if (w <= 0)
            return false;
        p->off[i] += (size_t)w;
    }
    free(p->pend[i]);
    p->pend[i] = NULL;
    p->len[i] = p->off[i] = 0;
    /* The other side's end follows its last bytes. */
    if (p->eof[1 - i] && p->fd[i] >= 0)
        shutdown(p->fd[i], SHUT_WR);
    return true;
}

/* DATA for P's side I: written now as far as it goes, the rest kept. */
static bool pass(struct pair *p, int i, const char *data, size_t n)
{
    ssize_t w = send(p->fd[i], data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno != EAGAIN && errno != EINTR)
        return false;
    size_t done = w > 0 ? (size_t)w : 0;
    if (done == n)
        return true;
    p->pend[i] = malloc(n - done);
    if (!p->pend[i])
        return false;
    memcpy(p->pend[i], data + done, n - done);
    p->len[i] = n - done;
    p->off[i] = 0;
    return true;
}

/*
 * The gateway is done with P (its end, or an error): what it said goes to
 * the client, then the client's end; it has LINGER_MS to read it and close.
 * A transparent client the gateway refused before any byte gets a reset,
 * as from the namespace level's listeners (a unix socket cannot carry one).
 */
static bool gateway_done(struct pair *p)
{
    if (p->transparent && !p->answered) {
        relay_reset_on_close(p->fd[0]);
        return false;
    }
    close(p->fd[1]);
    p->fd[1] = -1;
    p->eof[1] = true;
    free(p->pend[1]);
    p->pend[1] = NULL;
    p->len[1] = p->off[1] = 0;
    if (!p->len[0])
        shutdown(p->fd[0], SHUT_WR);
    p->linger_ms = now_ms() + LINGER_MS;
    return true;
}

/* Side I of P is readable; false when P is over. */
static bool read_side(struct pair *p, int i)
{
    static char buf[CHUNK];
    ssize_t n = read(p->fd[i], buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    if (i == 1 && n <= 0)
        return gateway_done(p);
    if (n < 0)
        return false; /* the client failed: nobody reads an answer */
    if (n == 0) {
        p->eof[0] = true;
        if (p->fd[1] < 0)
            return false; /* the gateway was done already */
        if (!p->len[1])
            shutdown(p->fd[1], SHUT_WR); /* a half close: the answer still comes */
        return true;
    }
    if (i == 0 && p->fd[1] < 0)
        return true; /* lingering: what the client still sends goes nowhere */
    p->answered |= i == 1;
    if (pass(p, 1 - i, buf, (size_t)n))
        return true;
    return i == 0 ? gateway_done(p) : false;
}

/* A client accepted on a listener: its gateway connection, or a refusal. */
static void add_pair(int c, bool transparent, const char *gateway)
{
    struct sockaddr_in to;
    socklen_t len = sizeof to;
    int g = -1;
    if (!transparent)
        g = relay_dial(gateway, 0, NULL);
    else if (getsockname(c, (struct sockaddr *)&to, &len) == 0 && to.sin_family == AF_INET)
        g = relay_dial(gateway, RELAY_TCP, &to); /* the gateway refuses an address it never gave */
    if (g >= 0 && n_pairs == cap_pairs) {
        size_t more = cap_pairs ? cap_pairs * 2 : 64;
        struct pair *grown = realloc(pairs, more * sizeof *grown);
        if (grown) {
            pairs = grown;
            cap_pairs = more;
        }
    }
    if (g < 0 || n_pairs == cap_pairs || fcntl(g, F_SETFL, O_NONBLOCK) < 0) {
        /* No gateway to decide (or no memory to carry it): refused, with
         * the reason where HTTP can carry one. */
        if (transparent) {
            relay_reset_on_close(c);
        } else {
            char answer[256], why[96];
            int n = snprintf(why, sizeof why, "the sandbox's relay cannot reach the gateway: %s\n",
                             strerror(g < 0 ? errno : ENOMEM));
            n = snprintf(answer, sizeof answer,
                         "HTTP/1.1 502 Bad Gateway\r\nX-Cordon-Denied: relay\r\n"
                         "Connection: close\r\nContent-Length: %d\r\n\r\n%s",
                         n, why);
            (void)!send(c, answer, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        close(c);
        if (g >= 0)
            close(g);
        return;
    }
    pairs[n_pairs++] = (struct pair){ .fd = { c, g }, .transparent = transparent };
}

/* The events P waits for on side I: reading while the other side has
 * nothing pending from it (backpressure), writing while I has. */
static short wanted(const struct pair *p, int i)
{
    if (p->fd[i] < 0)
        return 0;
    short ev = p->len[i] ? POLLOUT : 0;
    if (!p->eof[i] && !p->len[1 - i])
        ev |= POLLIN;
    return ev;
}

_Noreturn void relay_serve(const int *listeners, size_t n_listeners, const char *gateway)
{
    struct pollfd *pf = NULL;
    size_t cap_pf = 0;
    uint64_t resume_ms = 0;
    /* A client gone between poll() and accept() must not block the loop. */
    for (size_t i = 0; i < n_listeners; i++)
        fcntl(listeners[i], F_SETFL, O_NONBLOCK);
    for (;;) {
        size_t need = n_listeners + 2 * n_pairs;
        if (need > cap_pf) {
            struct pollfd *grown = realloc(pf, need * 2 * sizeof *grown);
            if (!grown)
                _exit(1);
            pf = grown;
            cap_pf = need * 2;
        }
        uint64_t now = now_ms();
        bool paused = now < resume_ms;
        for (size_t i = 0; i < n_listeners; i++)
            pf[i] = (struct pollfd){ .fd = paused ? -1 : listeners[i], .events = POLLIN };
        int timeout = paused ? (int)(resume_ms - now) : -1;
        for (size_t k = 0; k < n_pairs; k++) {
            const struct pair *p = &pairs[k];
            for (int i = 0; i < 2; i++)
                pf[n_listeners + 2 * k + (size_t)i] =
                    (struct pollfd){ .fd = p->fd[i], .events = wanted(p, i) };
            if (p->linger_ms) {
                int left = p->linger_ms > now ? (int)(p->linger_ms - now) : 0;
                timeout = timeout < 0 || left < timeout ? left : timeout;
            }
        }
        size_t polled = n_pairs;
        if (poll(pf, n_listeners + 2 * polled, timeout) < 0 && errno != EINTR)
            _exit(1);
        now = now_ms();
        /* From the last, so that dropping one (the last moves into its
         * place) leaves the ones still to look at where they were polled. */
        for (size_t k = polled; k-- > 0;) {
            struct pair *p = &pairs[k];
            bool alive = !(p->linger_ms && now >= p->linger_ms);
            for (int i = 0; alive && i < 2; i++) {
                short re = pf[n_listeners + 2 * k + (size_t)i].revents;
                if (p->fd[i] < 0 || !re)
                    continue;
                if ((re & POLLOUT) && !flush_side(p, i))
                    alive = i == 1 ? gateway_done(p) : false;
                if (alive && (re & (POLLIN | POLLHUP | POLLERR)) && p->fd[i] >= 0 && !p->eof[i])
                    alive = read_side(p, i);
                else if (alive && (re & (POLLHUP | POLLERR)) && p->eof[i] && i == 0)
                    alive = false; /* hung up after its end: nobody reads more */
            }
            if (alive && p->eof[0] && p->eof[1] && !p->len[0] && !p->len[1])
                alive = false;
            if (!alive)
                drop(p);
        }
        for (size_t i = 0; i < n_listeners; i++) {
            if (!(pf[i].revents & POLLIN))
                continue;
            int c = accept4(listeners[i], NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (c >= 0)
                add_pair(c, i > 0, gateway);
            else if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)
                resume_ms = now + PAUSE_MS;
        }
    }
}
