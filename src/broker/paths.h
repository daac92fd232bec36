/*
 * broker/paths.h: path-like MCP tool arguments judged against a rule's
 * `under` directories and `deny` globs. The server resolves a path its own
 * way, so a value passes only when every plausible reading of it does: the
 * raw text, a file:// URI, percent-decoded (up to 4 rounds), Unicode
 * look-alikes folded to ASCII, backslashes as separators, surrounding
 * whitespace trimmed, in any combination. Pure: no syscalls, no file system
 * (symlinks are the sandbox's business, not this check's).
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct path_rule {
    const char *const *under; /* absolute directories; none: anywhere */
    size_t n_under;
    const char *const *deny; /* glob patterns, see path_glob_match() */
    size_t n_deny;
};

/*
 * 0 when every reading of VALUE is allowed by R; -1 with a reason in WHY
 * (which may be NULL), e.g.
 *   "../../etc/passwd" resolves to /etc/passwd, outside /workspace
 *   "/workspace/key.pem" matches denied pattern "*.pem"
 *   "%2e%2e/x" decodes to ../x, which resolves to /x, outside /workspace
 * Refused outright: empty values, control characters (C0, DEL, C1), invalid
 * UTF-8, a leading ~, more than 4096 bytes, Windows drive and UNC forms,
 * file:// URIs naming a host, more than 4 layers of percent-encoding. CWD is
 * the server's working directory for relative readings; NULL refuses them.
 */
int path_rule_check(const struct path_rule *r, const char *value, const char *cwd, char *why,
                    size_t len);

/*
 * Lexically normalise IN (resolved against CWD when relative) into OUT of
 * size LEN: no ".", "..", empty components or trailing slash; ".." at the
 * root stays there. -1 when IN is relative and CWD is NULL or relative, or
 * when the result (or a step towards it) does not fit.
 */
int path_normalize(const char *in, const char *cwd, char *out, size_t len);

/*
 * Whether PATH (absolute, normalised) matches PATTERN, component by
 * component: `*` within one component (leading dots included), `?` one
 * character, `[a-z]`, `[!x]` or `[^x]` a class, `\` escapes; `**` as a whole
 * component matches zero or more components. A pattern not starting with `/`
 * matches at any depth, as if it opened with a `**` component.
 */
bool path_glob_match(const char *pattern, const char *path);
