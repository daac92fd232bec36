/*
 * daemon/expose.c: see expose.h.
 */
#include "daemon/expose.h"

void expose_method(struct client *c, const json_t *id, const json_t *params,
                   struct session *ses)
{
    (void)params;
    (void)ses;
    daemon_reply(c, rpc_error(id, RPC_REFUSED, "session.expose: not yet"));
}

void expose_close_all(struct daemon *d, struct session *ses)
{
    (void)d;
    (void)ses;
}
