/*
 * sandbox/ns_int.h: what the namespace level (namespace.c) shares with the
 * containers it builds from OCI bundles (container.c): the network set-up
 * made inside a network namespace, and the supervisor's writes to /proc.
 */
#pragma once
#include "sandbox/backend.h"
#include "sandbox/plan.h"

/* In the network namespace: loopback up. */
int ns_loopback_up(struct cordon_err *err);

/* In the network namespace: the gateway's listening socket, sent over SOCK. */
int ns_open_gateway_door(int sock, struct cordon_err *err);

/* In the network namespace: the synthetic range routed to loopback, the DNS
 * stub's socket and a listener per port of PLAN, sent over SOCK in that order. */
int ns_open_transparent_doors(const struct ns_plan *plan, int sock, struct cordon_err *err);

/* In the supervisor: what ns_open_transparent_doors() sent, into B; -1 when one is missing. */
/*
 * What a sandbox of P will hold, planned before it exists: its egress doors
 * (with GATEWAY), its keepers (WS: the host workspace whose names init
 * makes, or NULL) and its mounts. A run's own plan, and a template's.
 */
int ns_plan_sandbox(const struct policy *p, bool gateway, const struct workspace_guard *ws,
                    uid_t map_host_uid, struct ns_plan *plan, struct cordon_err *err);

int ns_recv_transparent_doors(const struct ns_plan *plan, int sock, struct sandbox_boundary *b);

/* In the supervisor: write TEXT to /proc/PID/FILE. */
int ns_write_proc(pid_t pid, const char *file, const char *text, struct cordon_err *err);

/*
 * An OCI container's boundary (container.c), for the namespace level (USERNS: in a user
 * namespace of its own) and the process level (without one: the spec's namespaces made
 * with the engine's privilege, the container's ids a private range of host ids, Landlock
 * required).
 */
int container_prepare(const struct sandbox_setup *s, struct sandbox_boundary *b, bool userns,
                      struct cordon_err *err);

/* Release what container_prepare() made (B->container); idempotent. */
void container_boundary_release(struct sandbox_boundary *b);
