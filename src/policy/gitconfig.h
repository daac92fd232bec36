/*
 * policy/gitconfig.h: git's config files as git reads them, and the keys
 * whose values make git (or a tool that reads git's config, git-lfs) run a
 * program or read another file. Pure: no syscalls; the workspace's git scan
 * (sandbox/gitscan.h) feeds it the bytes.
 *
 * The parser follows git 2.39's config.c: an optional UTF-8 BOM; comments
 * from '#' or ';'; "[section]", "[section.sub]" (lowercased whole) and
 * "[section \"sub\"]" (the subsection as written, '\' escaping the next
 * character); "key" (alphabetic first, then alphanumerics and '-',
 * lowercased) alone or "= value", the value with quotes, the escapes \n \t
 * \b \\ \" and a backslash-newline continuation, comments outside quotes,
 * and leading and trailing blanks dropped. What git would refuse as a bad
 * config line, this refuses too; anything this cannot read the same way git
 * would is refused rather than guessed at.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define GITCONFIG_KEY_MAX 256
#define GITCONFIG_VALUE_MAX 1024

/* One key = value of a config file, and where its text lies. */
struct gitconfig_entry {
    char key[GITCONFIG_KEY_MAX];     /* section[.subsection].name, as git compares it */
    char value[GITCONFIG_VALUE_MAX]; /* "" for a bare key; cut at the bound (see cut) */
    bool bare;                       /* "key" with no '=': a boolean true */
    bool cut;                        /* the key or value was longer than the bounds */
    size_t start, end;               /* its bytes in the file: [start, end), lines whole */
};

/*
 * Parse the config text TEXT (LEN bytes), calling EACH for every entry
 * with CTX; EACH returns false to stop. 0, or -1 with the line and what was
 * wrong in WHY (a file git would refuse, or one this does not read).
 */
int gitconfig_parse(const char *text, size_t len,
                    bool (*each)(void *ctx, const struct gitconfig_entry *e), void *ctx, char *why,
                    size_t why_len);

/* A row of the table: a key (or a family) git or git-lfs acts on by running something. */
struct gitconfig_rule {
    const char *pattern; /* "section.name", "section.*.name" (any subsection), "section.*" */
    const char *when;    /* which values: NULL any, else see gitconfig_refused() */
    const char *why;     /* what runs, or what it redirects */
};

/* The rows, for `cordon check --protected`; static. */
const struct gitconfig_rule *gitconfig_rules(size_t *n);

/*
 * Does E, a key the run wrote into the config of a repository in the
 * workspace at DEPTH directories below the workspace's root, make git run a
 * program or read a file the run chose? The matching row, or NULL.
 */
const struct gitconfig_rule *gitconfig_refused(const struct gitconfig_entry *e, unsigned depth);
