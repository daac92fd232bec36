/*
 * sandbox/gvisor/relay.h: cordon-gvisor-init's relay to the gateway's unix
 * socket (gvisor/relay.c), inside the gVisor sandbox.
 */
#pragma once
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

/* A connection to GATEWAY that opens with the relay preface of KIND (and TO's
 * address and port), or with nothing when KIND is 0; -1 when it cannot. */
int relay_dial(const char *gateway, char kind, const struct sockaddr_in *to);

/* FD's close, which follows, sends a reset. */
void relay_reset_on_close(int fd);

/*
 * Relay every connection accepted on LISTENERS ([0] the proxy's port, the
 * rest transparent listeners) to GATEWAY, in this process, forever.
 */
_Noreturn void relay_serve(const int *listeners, size_t n_listeners, const char *gateway);
