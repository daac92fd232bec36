/*
 * broker/pins.h: MCP tool pinning against rug-pulls. Per server identity,
 * the SHA-256 of each tool's name, title, description, input and output
 * schemas and annotations, trusted on first use and kept in a JSON file:
 *
 *   {"servers": {IDENTITY: {"tools":   {NAME: DIGEST},
 *                           "pending": {NAME: {"digest", "kind", "tool", "seen"}}}}}
 *
 * A tool whose digest differs from its pin, or that has none once the
 * server is known, is "pending": hidden and its calls refused until
 * `cordon mcp pins approve` moves it into "tools".
 */
#pragma once
#include "common/cleanup.h"
#include "common/err.h"

#include <jansson.h>
#include <stdbool.h>

struct mcp_pins;

enum pin_verdict {
    PIN_OK,      /* matches its pin */
    PIN_FIRST,   /* the server was unknown: pinned now */
    PIN_CHANGED, /* pinned with another digest */
    PIN_NEW,     /* not pinned, and the server is known */
};

/* "changed", "new", ... for the audit. */
const char *pin_verdict_name(enum pin_verdict v);

/* Load PATH (missing: empty). The caller owns the result. */
struct mcp_pins *mcp_pins_open(const char *path, struct cordon_err *err);

/*
 * Pins written in the policy (tools.pinned, "TOOL=SHA256"): the same
 * checks for every server, nothing trusted on first use, nothing saved.
 */
struct mcp_pins *mcp_pins_fixed(char *const *pinned, size_t n, struct cordon_err *err);

/* The server the following checks are about; known or trusted on first use from now. */
void mcp_pins_set_server(struct mcp_pins *pins, const char *identity);

/* Judge TOOL (a tools/list entry); its digest in DIGEST, the pinned one (or "") in OLD. */
enum pin_verdict mcp_pins_check(struct mcp_pins *pins, const json_t *tool, char digest[65],
                                char old[65]);

/* The first listing is done: from now on an unpinned tool is new, not first. */
void mcp_pins_first_done(struct mcp_pins *pins);

/* Write the file if anything changed (replaced whole, never written through). */
int mcp_pins_save(struct mcp_pins *pins, struct cordon_err *err);

void mcp_pins_free(struct mcp_pins *pins);
DEFINE_CLEANUP(struct mcp_pins *, mcp_pins_free)

/* The SHA-256 of the fields of TOOL that a client (and its model) reads. */
void mcp_tool_digest(const json_t *tool, char out[65]);

/*
 * Approve pending tools in PATH: of SERVER (or every server when NULL),
 * the tools named in NAMES (every pending one when N is 0). *APPROVED
 * counts them.
 */
int mcp_pins_approve(const char *path, const char *server, char *const *names, size_t n,
                     size_t *approved, struct cordon_err *err);
