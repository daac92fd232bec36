/*
 * broker/serve.h: `cordon mcp serve`: cordon itself as an MCP server on
 * stdin/stdout. Its tools, run_command and run_code, run each call in a
 * fresh sandbox under the policy, so an agent can run what its model wrote
 * without trusting it.
 */
#pragma once
#include "common/err.h"

struct policy;

/*
 * Serve MCP on stdin/stdout until the client closes stdin; each tool call
 * runs in a fresh sandbox under P (with a wall limit of 60s when P sets
 * none), at most four at once. SIGTERM or SIGINT stops the calls still
 * running and ends the session. Returns 0 when the session ended normally,
 * -1 with ERR when it could not start. P is borrowed for the whole session.
 */
/* POOL: sandboxes kept prepared for the calls (core/jobs.h), 0 for none. */
int mcp_serve(const struct policy *p, unsigned pool, struct cordon_err *err);
