/*
 * egress/gateway.h: the egress gateway: an HTTP/1.1 forward proxy (absolute
 * URIs and CONNECT) that is the sandbox's only way out. It runs as its own
 * process outside the sandbox, serving a listening socket that lives inside
 * the sandbox's network namespace; it resolves names itself, refuses
 * private and special-purpose addresses, and connects to the address it
 * checked. Each decision goes to the supervisor (a JSON line on a pipe) and
 * to the audit log.
 */
#pragma once
#include "common/err.h"
#include "policy/policy.h"
#include "policy/rules.h"

#include <stdint.h>
#include <sys/types.h>

struct mint;
struct policy;

/* A credential: the sandbox holds only PLACEHOLDER; the value lives here. */
struct gateway_secret {
    char name[128];
    char placeholder[64];
    char *value; /* only ever in the supervisor's and the gateway's memory */
    size_t value_len;
    struct egress_rule *hosts; /* where the value may go */
    size_t n_hosts;
    uint64_t expires_us; /* CLOCK_MONOTONIC; 0 = when the run ends */
};

/* The bytes a connection to a shared door opens with. */
#define GATEWAY_DOOR_TOKEN_LEN 32

struct gateway_config {
    struct egress_rules rules;    /* a copy of the policy's */
    struct sockaddr_storage *dns; /* nameservers; none: the host's resolv.conf */
    socklen_t *dns_len;
    size_t n_dns;
    uint64_t max_requests;    /* 0 = unlimited, likewise below */
    uint64_t max_bytes;       /* both directions, all connections */
    uint64_t max_connections; /* at once */
    uint64_t request_rate;    /* requests per second */
    unsigned connect_timeout_ms;
    unsigned idle_timeout_ms;
    struct gateway_secret *secrets;
    size_t n_secrets;
    struct mint *mint;       /* the run's CA for intercepting bound hosts; NULL without secrets */
    const char *upstream_ca; /* CA file intercepted servers are verified with; NULL: host's */
    const char *decider;     /* decider.socket, asked about network.ask destinations; or NULL */
    uint64_t decider_timeout_ms;
    char run_id[33]; /* named in the decider's questions; "" when unknown */
    /* A door other processes can reach (the process level's, on the host's
     * loopback): each connection must open with these bytes, which only
     * the run's own dialer writes; else it is refused and audited. */
    bool door_token_set;
    unsigned char door_token[GATEWAY_DOOR_TOKEN_LEN];
};

/*
 * The gateway rules of P, parsed (P was validated with the same parsers).
 * With secrets, this reads their real values, makes a placeholder for each
 * and the run's CA: call it in the supervisor, at the start of the run.
 */
int gateway_config_from_policy(const struct policy *p, struct gateway_config *out,
                               struct cordon_err *err);
void gateway_config_release(struct gateway_config *cfg);

/* Overwrite the secrets' values in this process's copy of CFG: the sandbox's
 * init is a fork of the supervisor and must not carry them. */
void gateway_config_wipe_values(struct gateway_config *cfg);

/* What the gateway serves, made inside the sandbox's network namespace. */
struct gateway_doors {
    int proxy;                  /* the proxy's listener, 127.0.0.1:GATEWAY_PORT */
    int dns;                    /* the DNS stub's UDP socket (transparent egress), or -1 */
    int ports[SYNTH_MAX_PORTS]; /* listeners on 0.0.0.0:PORT for synthetic addresses */
    size_t n_ports;
    /* Transparent egress through relays instead (gvisor, microvm, process):
     * a connection to PROXY may open with a preface (common/relay_wire.h). */
    bool relay;
};

/*
 * Fork the gateway serving DOORS (already listening). Its decisions come
 * back as JSON lines on *REPORT_FD (ours to read and close). Started by root,
 * it runs as UID; it never touches a file. It dies with its parent; stop it
 * with SIGTERM (it reports open connections first) and reap it. IN_CHILD,
 * when not NULL, runs first in the new process (the run joins it to its
 * cgroup there).
 */
pid_t gateway_start(const struct gateway_config *cfg, const struct gateway_doors *doors, uid_t uid,
                    void (*in_child)(void *arg), void *arg, int *report_fd, struct cordon_err *err);

/*
 * Serve one connection on FD in this process until it ends (cordon fetch:
 * the same checks from the host), confined as gateway_start() confines the
 * gateway (so call it in a child). Returns 0 when the request was served.
 */
int gateway_serve_one(const struct gateway_config *cfg, int fd, uid_t uid, struct cordon_err *err);
