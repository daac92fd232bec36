/*
 * daemon/sandboxd.h: kubernetes-sigs/agent-sandbox's in-pod API
 * ("sandboxd", proto/process/v1/process.proto and doc/sandboxd.md), served
 * by `cordon serve --sandboxd-grpc ADDR --sandboxd-rest ADDR` on the
 * daemon's loop: gRPC process.v1.ProcessService, each Start or Execute one
 * fresh cordon sandbox on the daemon's workspace, and the REST files,
 * health and metadata endpoints on that workspace. Loopback only; every
 * connection's peer must be a uid the daemon serves.
 */
#pragma once
#include "daemon/daemon_int.h"

/* Open the listeners the configuration names (none: 0, nothing done). -1 with ERR. */
int sandboxd_open(struct daemon *d, struct cordon_err *err);

/* The daemon drains: no new connection, health answers 503, running calls go on. */
void sandboxd_drain(struct daemon *d);

/* The daemon ends: every connection closed, every call's process let go. */
void sandboxd_free(struct daemon *d);

/* {"grpc": "HOST:PORT", "rest": ...} as bound (a port 0 made real), or NULL. */
json_t *sandboxd_addresses(const struct daemon *d);
