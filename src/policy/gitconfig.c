/*
 * policy/gitconfig.c: git's config syntax, read as git 2.39's config.c
 * reads it, and the table of keys that make git run something (see
 * gitconfig.h). Pure: no syscalls.
 */
#include "policy/gitconfig.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- the syntax ---- */

struct cursor {
    const char *p, *end;
    unsigned line, at; /* lines read past; the line of the last character read */
    bool eof;
};

/* The next character as git's get_next_char() gives it: "\r\n" is '\n'; '\n' at the end. */
static int next(struct cursor *c)
{
    c->at = c->line + 1;
    if (c->p >= c->end) {
        c->eof = true;
        return '\n';
    }
    int ch = (unsigned char)*c->p++;
    if (ch == '\r' && c->p < c->end && *c->p == '\n')
        ch = (unsigned char)*c->p++;
    if (ch == '\n')
        c->line++;
    return ch;
}

static bool keychar(int c)
{
    return isalnum(c) || c == '-';
}

static bool add(char *buf, size_t size, size_t *len, int c, bool *cut)
{
    if (*len + 1 >= size) {
        *cut = true;
        return false;
    }
    buf[(*len)++] = (char)c;
    buf[*len] = '\0';
    return true;
}

static int fail(char *why, size_t len, const struct cursor *c, const char *what)
{
    snprintf(why, len, "line %u: %s", c->at, what);
    return -1;
}

/* "[section]" or "[section \"sub\"]" after its '[', into SEC (with its dot). */
static int header(struct cursor *c, char *sec, size_t size, size_t *len, bool *cut, char *why,
                  size_t why_len)
{
    *len = 0;
    sec[0] = '\0';
    for (;;) {
        int ch = next(c);
        if (c->eof)
            return fail(why, why_len, c, "unterminated section header");
        if (ch == ']')
            break;
        if (isspace(ch)) {
            /* [base "extension"]: blanks, a quoted subsection as written, ']' */
            while (isspace(ch)) {
                if (ch == '\n')
                    return fail(why, why_len, c, "incomplete section header");
                ch = next(c);
            }
            if (ch != '"')
                return fail(why, why_len, c, "a section's subsection must be quoted");
            add(sec, size, len, '.', cut);
            for (;;) {
                ch = next(c);
                if (ch == '\n')
                    return fail(why, why_len, c, "incomplete section header");
                if (ch == '"')
                    break;
                if (ch == '\\' && (ch = next(c)) == '\n')
                    return fail(why, why_len, c, "incomplete section header");
                add(sec, size, len, ch, cut);
            }
            if (next(c) != ']')
                return fail(why, why_len, c, "section header does not end in ']'");
            break;
        }
        if (!keychar(ch) && ch != '.')
            return fail(why, why_len, c, "bad character in a section name");
        add(sec, size, len, tolower(ch), cut);
    }
    if (!*len)
        return fail(why, why_len, c, "empty section name");
    return 0;
}

/* A value after its '=', as git's parse_value() reads it. */
static int value(struct cursor *c, struct gitconfig_entry *e, char *why, size_t why_len)
{
    bool quote = false, comment = false;
    size_t len = 0, space = 0;
    for (;;) {
        int ch = next(c);
        if (ch == '\n') {
            if (quote)
                return fail(why, why_len, c, "unterminated quote in a value");
            return 0;
        }
        if (comment)
            continue;
        if (isspace(ch) && !quote) {
            if (len)
                space++;
            continue;
        }
        if (!quote && (ch == ';' || ch == '#')) {
            comment = true;
            continue;
        }
        for (; space; space--)
            add(e->value, sizeof e->value, &len, ' ', &e->cut);
        if (ch == '\\') {
            ch = next(c);
            if (ch == '\n')
                continue; /* a continuation (at the end of the file too, as git reads it) */
            switch (ch) {
            case 't':
                ch = '\t';
                break;
            case 'b':
                ch = '\b';
                break;
            case 'n':
                ch = '\n';
                break;
            case '\\':
            case '"':
                break;
            default:
                return fail(why, why_len, c, "bad escape in a value");
            }
            add(e->value, sizeof e->value, &len, ch, &e->cut);
            continue;
        }
        if (ch == '"') {
            quote = !quote;
            continue;
        }
        add(e->value, sizeof e->value, &len, ch, &e->cut);
    }
}

int gitconfig_parse(const char *text, size_t len,
                    bool (*each)(void *ctx, const struct gitconfig_entry *e), void *ctx, char *why,
                    size_t why_len)
{
    struct cursor c = { text, text + len, 0, 0, false };
    if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3))
        c.p += 3;
    char sec[GITCONFIG_KEY_MAX] = "";
    size_t sec_len = 0;
    bool sec_cut = false, comment = false;
    for (;;) {
        const char *at = c.p;
        int ch = next(&c);
        if (c.eof)
            return 0;
        if (ch == '\n') {
            comment = false;
            continue;
        }
        if (comment || isspace(ch))
            continue;
        if (ch == '#' || ch == ';') {
            comment = true;
            continue;
        }
        if (ch == '[') {
            sec_cut = false;
            if (header(&c, sec, sizeof sec, &sec_len, &sec_cut, why, why_len) < 0)
                return -1;
            continue;
        }
        if (!isalpha(ch))
            return fail(why, why_len, &c, "a key must begin with a letter");
        if (!sec_len)
            return fail(why, why_len, &c, "a key outside any section");
        struct gitconfig_entry e = { .cut = sec_cut };
        /* The entry's text from its line's start (a rewrite drops lines whole), or from
         * the key where a section header begins the line. */
        const char *from = at;
        while (from > text && (from[-1] == ' ' || from[-1] == '\t'))
            from--;
        e.start = (size_t)((from == text || from[-1] == '\n' ? from : at) - text);
        size_t klen = 0;
        for (size_t i = 0; i < sec_len; i++)
            add(e.key, sizeof e.key, &klen, sec[i], &e.cut);
        add(e.key, sizeof e.key, &klen, '.', &e.cut);
        while (keychar(ch)) {
            add(e.key, sizeof e.key, &klen, tolower(ch), &e.cut);
            ch = next(&c);
        }
        while (ch == ' ' || ch == '\t')
            ch = next(&c);
        if (ch == '\n') {
            e.bare = true;
        } else if (ch != '=') {
            return fail(why, why_len, &c, "a key must be followed by '=' or the line's end");
        } else if (value(&c, &e, why, why_len) < 0) {
            return -1;
        }
        e.end = (size_t)(c.p - text);
        if (!each(ctx, &e))
            return 0;
    }
}

/* ---- the keys ---- */

#define RULE(p, w, y)                           \
    {                                           \
        .pattern = (p), .when = (w), .why = (y) \
    }
#define RUNS "the program it names runs"

static const struct gitconfig_rule rules[] = {
    RULE("core.fsmonitor", NULL, "a hook program every git status, diff and add runs"),
    RULE("core.hookspath", NULL, "where git looks for hooks: a directory the run wrote"),
    RULE("core.sshcommand", NULL, RUNS " on every fetch and push over ssh"),
    RULE("core.pager", NULL, RUNS " (through the shell) for log, diff, show"),
    RULE("core.editor", NULL, RUNS " for commit, tag and rebase -i messages"),
    RULE("core.askpass", NULL, RUNS " when git needs a password"),
    RULE("core.gitproxy", NULL, RUNS " to connect over git://"),
    RULE("core.alternaterefscommand", NULL, RUNS " to list an alternate's refs"),
    RULE("core.worktree", "escapes",
         "points the repository's work tree elsewhere: refused "
         "when absolute or climbing out of the workspace (checkout and reset write there)"),
    RULE("sequence.editor", NULL, RUNS " for rebase -i's todo list"),
    RULE("diff.external", NULL, RUNS " for every diff"),
    RULE("diff.*.command", NULL, RUNS " for a diff driver's paths"),
    RULE("diff.*.textconv", NULL, RUNS " to show a diff driver's files"),
    RULE("merge.*.driver", NULL, RUNS " for a merge driver's paths"),
    RULE("filter.*.clean", NULL, RUNS " on add and status for a filter's paths"),
    RULE("filter.*.smudge", NULL, RUNS " on checkout for a filter's paths"),
    RULE("filter.*.process", NULL, RUNS " as a long-running filter"),
    RULE("credential.helper", NULL,
         RUNS " (a helper, or '!' through the shell) for "
              "credentials, and receives them"),
    RULE("credential.*.helper", NULL, "the same, for one URL"),
    RULE("gpg.program", NULL, RUNS " to sign and verify"),
    RULE("gpg.*.program", NULL, "the same, for one signature format"),
    RULE("gpg.ssh.defaultkeycommand", NULL, RUNS " to pick the signing key"),
    RULE("include.*", NULL, "reads another config file, whose keys are not checked here"),
    RULE("includeif.*", NULL, "the same, under a condition"),
    RULE("alias.*", NULL,
         "'!' runs a shell command, and any alias may pass -c options "
         "(core.pager=...) to git; a repository's alias overrides the user's own of that "
         "name"),
    RULE("uploadpack.packobjectshook", NULL, RUNS " instead of pack-objects"),
    RULE("remote.*.uploadpack", NULL, RUNS " when fetching from a local or ssh remote"),
    RULE("remote.*.receivepack", NULL, RUNS " when pushing to a local or ssh remote"),
    RULE("remote.*.vcs", NULL, "runs git-remote-<vcs> as the remote's helper"),
    RULE("remote.*.url", "ext",
         "ext:: and fd:: URLs run a command or speak over a "
         "descriptor"),
    RULE("remote.*.pushurl", "ext", "ext:: and fd:: push URLs, as for url"),
    RULE("url.*.insteadof", NULL,
         "rewrites every URL with that prefix, the user's later "
         "clones and fetches too, to one the run chose"),
    RULE("url.*.pushinsteadof", NULL, "the same, for pushes"),
    RULE("protocol.allow", NULL, "lets transports run that git refuses by default (ext::)"),
    RULE("protocol.*.allow", NULL, "the same, for one transport"),
    RULE("submodule.*.update", "!", "'!command' runs the command on submodule update"),
    RULE("difftool.*.cmd", NULL, RUNS " on git difftool"),
    RULE("difftool.*.path", NULL, "the same, as a path"),
    RULE("mergetool.*.cmd", NULL, RUNS " on git mergetool"),
    RULE("mergetool.*.path", NULL, "the same, as a path"),
    RULE("pager.*", "not-bool", "a command instead of true or false: " RUNS " as the pager"),
    RULE("interactive.difffilter", NULL, RUNS " on add -p's diffs"),
    RULE("browser.*.cmd", NULL, RUNS " on git web--browse and help -w"),
    RULE("browser.*.path", NULL, "the same, as a path"),
    RULE("man.*.cmd", NULL, RUNS " on git help"),
    RULE("man.*.path", NULL, "the same, as a path"),
    RULE("guitool.*.cmd", NULL, RUNS " from git gui's menu"),
    RULE("instaweb.httpd", NULL, RUNS " on git instaweb"),
    RULE("imap.tunnel", NULL, RUNS " on git imap-send"),
    RULE("sendemail.*", NULL,
         "smtpServer as a path, sendmailCmd, toCmd, ccCmd and "
         "headerCmd run programs on git send-email"),
    RULE("trailer.*.command", NULL, RUNS " to fill in a trailer"),
    RULE("trailer.*.cmd", NULL, RUNS " to fill in a trailer (the older name)"),
    RULE("hook.*", NULL, "config-based hooks (newer git): the commands they name run"),
    RULE("lfs.customtransfer.*.path", NULL, "git-lfs runs it to transfer objects"),
    RULE("lfs.extension.*.clean", NULL, "git-lfs runs it on add"),
    RULE("lfs.extension.*.smudge", NULL, "git-lfs runs it on checkout"),
};

const struct gitconfig_rule *gitconfig_rules(size_t *n)
{
    *n = sizeof rules / sizeof rules[0];
    return rules;
}

/*
 * Does KEY match PATTERN? "a.b" exactly; "a.*" any key of section a;
 * "a.*.b" section a, any (non-empty) subsection, name b. Section and name
 * compare as git compares them (lowercased by the parser); "a.*.b.c" for
 * lfs's two-level names: the subsection is what lies between.
 */
static bool matches(const char *pattern, const char *key)
{
    const char *star = strchr(pattern, '*');
    if (!star)
        return strcmp(pattern, key) == 0;
    size_t pre = (size_t)(star - pattern); /* "a." */
    if (strncmp(pattern, key, pre))
        return false;
    const char *rest = star + 1; /* "" or ".b" */
    if (!*rest)
        return key[pre] != '\0';
    size_t klen = strlen(key), rlen = strlen(rest);
    return klen > pre + rlen && !strcmp(key + klen - rlen, rest);
}

static bool boolean(const struct gitconfig_entry *e)
{
    static const char *const words[] = { "true", "false", "yes", "no", "on", "off", "1", "0", "" };
    if (e->bare)
        return true;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strcasecmp(e->value, words[i]))
            return true;
    return false;
}

/* Does the relative path V, from a directory DEPTH levels down, climb out (or is it absolute)? */
static bool escapes(const char *v, unsigned depth)
{
    if (v[0] == '/' || v[0] == '~' || !v[0])
        return true;
    long level = depth;
    for (const char *c = v; *c;) {
        const char *end = strchr(c, '/');
        size_t n = end ? (size_t)(end - c) : strlen(c);
        if (n == 2 && c[0] == '.' && c[1] == '.') {
            if (--level < 0)
                return true;
        } else if (n && !(n == 1 && c[0] == '.')) {
            level++;
        }
        c += n + (end ? 1 : 0);
    }
    return false;
}

/*
 * An entry longer than the bounds: its key may have lost the name a rule
 * would match ([credential "https://<300 bytes>"] helper = !x reads as a
 * key cut inside its subsection), or its value the part a rule reads.
 */
static const struct gitconfig_rule cut_rule = RULE(
    "*", NULL, "a key or value longer than cordon reads (256 and 1024 bytes): not vouched for");

const struct gitconfig_rule *gitconfig_refused(const struct gitconfig_entry *e, unsigned depth)
{
    if (e->cut)
        return &cut_rule;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        const struct gitconfig_rule *r = &rules[i];
        if (!matches(r->pattern, e->key))
            continue;
        if (!r->when)
            return r;
        if (!strcmp(r->when, "!") && e->value[0] == '!')
            return r;
        if (!strcmp(r->when, "not-bool") && !boolean(e))
            return r;
        if (!strcmp(r->when, "escapes") && escapes(e->value, depth))
            return r;
        if (!strcmp(r->when, "ext") &&
            (!strncasecmp(e->value, "ext::", 5) || !strncasecmp(e->value, "fd::", 4)))
            return r;
    }
    return NULL;
}
