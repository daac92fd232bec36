/*
 * broker/broker.h: `cordon mcp wrap`: an MCP server run in a sandbox, with
 * the broker between it and the client on our stdin/stdout. Every message
 * in both directions is parsed, judged against the policy's tools section
 * and re-serialised; what the policy does not allow never reaches the
 * other side.
 */
#pragma once
#include "common/err.h"
#include "policy/policy.h"

/*
 * Broker MCP between stdin/stdout and SERVER_ARGV run under P until the
 * client closes stdin or the server exits. Returns -1 with ERR when the
 * session could not start; otherwise 0 with *STATUS the exit status for
 * cordon (the server's own when it failed, 0 after a clean end).
 */
int mcp_wrap(const struct policy *p, char *const *server_argv, int *status, struct cordon_err *err);

/*
 * The session cannot start (a policy or flag error, WHY): tell the client,
 * who may be the only one watching, by answering its first request with a
 * JSON-RPC error naming WHY. Reads stdin until that request or EOF.
 */
void mcp_refuse_session(const char *why);
