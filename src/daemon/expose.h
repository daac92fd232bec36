/*
 * daemon/expose.h: a live session's port on the host (session.expose): a
 * listener on the host's loopback, or with "unix": true a unix socket in
 * the state directory (expose-SID/PORT.sock, removed with the port, the
 * session and the daemon), whose connections the daemon carries to
 * 127.0.0.1:PORT inside the session's network namespace: only the
 * session's owner's, root's and an --admin-uid's, each recorded in the
 * audit. The sandbox's network is never opened: the
 * daemon dials from inside it, the sandbox reaches nothing outside.
 * Refused unless the policy lists the port (network.expose).
 */
#pragma once
#include "daemon/daemon_int.h"

/* A session's unix sockets' directory in the state directory: this and its id. */
#define EXPOSE_DIR_PREFIX "expose-"

/* session.expose, or with UN session.unexpose. */
void expose_method(struct client *c, const json_t *id, const json_t *params, struct session *ses,
                   bool un);

/* Every port of SES closed (its box ended, or it is destroyed). */
void expose_close_all(struct daemon *d, struct session *ses);
