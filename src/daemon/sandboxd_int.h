/*
 * daemon/sandboxd_int.h: what sandboxd.c (listeners, peers), sandboxd_grpc.c
 * (HTTP/2 and gRPC framing), sandboxd_process.c (ProcessService) and
 * sandboxd_rest.c (files, health, metadata) share.
 */
#pragma once
#include "daemon/sandboxd.h"

#include <nghttp2/nghttp2.h>
#include <stddef.h>
#include <stdint.h>

/* A request message beyond this is refused (gRPC's own default limit). */
#define SBX_MAX_MESSAGE (4u << 20)

/* gRPC status codes (grpc/doc/statuscodes.md). */
enum grpc_status {
    GRPC_OK = 0,
    GRPC_CANCELLED = 1,
    GRPC_INVALID_ARGUMENT = 3,
    GRPC_NOT_FOUND = 5,
    GRPC_PERMISSION_DENIED = 7,
    GRPC_RESOURCE_EXHAUSTED = 8,
    GRPC_FAILED_PRECONDITION = 9,
    GRPC_UNIMPLEMENTED = 12,
    GRPC_INTERNAL = 13,
    GRPC_UNAVAILABLE = 14,
};

struct h2conn;
struct grpc_call;

struct sandboxd {
    struct daemon *d;
    int grpc_fd;
    struct event *grpc_ev;
    struct evhttp *http;
    char grpc_addr[80], rest_addr[80];
    int root_fd; /* the daemon's host workspace (O_PATH), or -1 */
    struct h2conn *conns;
    unsigned n_conns;
    bool draining;
};

/* sandboxd.c: may the peer on FD use the daemon? Its uid and admin-ness out. */
bool sandboxd_peer_allowed(struct sandboxd *sd, int fd, uid_t *uid, bool *admin);

/* ---- gRPC over HTTP/2 (sandboxd_grpc.c) ---- */

/* One RPC: the service's view. */
struct grpc_call {
    struct h2conn *conn;
    struct sandboxd *sd;
    uid_t uid;
    bool admin;
    /* The service's state for the call, and what it does when the peer goes
     * (a reset stream, a closed connection) before it finished. */
    void *ctx;
    void (*cancelled)(struct grpc_call *call);
};

/* Accept a connection on the gRPC listener (the peer checked). */
void grpc_accept(struct sandboxd *sd, int fd, uid_t uid, bool admin);
/* Queue one response message. */
void grpc_send(struct grpc_call *call, const void *msg, size_t len);
/* End the call with STATUS (and a message for anything but OK); CALL is not used after. */
void grpc_finish(struct grpc_call *call, enum grpc_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Bytes queued to the peer and not yet taken by it. */
size_t grpc_backlog(const struct grpc_call *call);
void grpc_close_all(struct sandboxd *sd);

/* ---- ProcessService (sandboxd_process.c) ---- */

/* The request of METHOD (past "/process.v1.ProcessService/") is whole: serve it. */
void process_service(struct grpc_call *call, const char *method, const uint8_t *msg, size_t len);
bool process_service_knows(const char *method);

/* ---- REST (sandboxd_rest.c) ---- */

int rest_open(struct sandboxd *sd, int fd, struct cordon_err *err);
