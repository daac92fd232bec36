/*
 * policy/policy_paths.c: the host paths a policy names: made absolute,
 * normalised, checked to exist, and at finalize refused where a component is
 * a symbolic link a run could have planted. Runs in the CLI or supervisor;
 * only stat(), realpath() and access().
 */
#include "policy/policy_int.h"

#include "common/hostpath.h"
#include "common/text.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Lexical normalisation of an absolute path: collapse "//" and "/./", drop a
 * trailing "/". Returns a new string, and *DOTDOT tells whether a ".."
 * component was seen (kept as is: callers refuse it rather than guess).
 */
char *policy_normalize_path(const char *in, bool *dotdot)
{
    return hostpath_normalize(in, false, dotdot);
}

/* TEXT as a host path: not empty, absolute when a file gave it, made absolute into *ABS. */
int policy_host_path_text(const char *text, enum value_origin from, char **abs, char *why,
                          size_t len)
{
    if (text[0] == '\0')
        return why_printf(why, len, "expected a path, got \"\"");
    if (text[0] != '/' && from == FROM_FILE)
        return why_printf(why, len, "host path \"%s\" is not absolute", text);
    *abs = hostpath_absolute(text);
    if (!*abs)
        return errno == ENOMEM
            ? POLICY_ENOMEM
            : why_printf(why, len, "cannot resolve \"%s\": %s", text, strerror(errno));
    return 0;
}

/*
 * An existing host path, made absolute and normalised but not resolved:
 * policy_finalize() decides whether it may pass through links. Relative
 * only when a flag gave it.
 */
int policy_resolve_host(const char *path, enum value_origin from, char **out, char *why, size_t len)
{
    _cleanup_free_ char *abs = NULL;
    int r = policy_host_path_text(path, from, &abs, why, len);
    if (r < 0)
        return r;
    struct stat st;
    if (stat(abs, &st) < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return why_printf(why, len, "\"%s\" does not exist", path);
        return why_printf(why, len, "cannot resolve \"%s\": %s", path, strerror(errno));
    }
    *out = TAKE_PTR(abs);
    return 0;
}

/* An existing host path of type TYPE (S_IFREG or S_IFDIR), resolved into *OUT. */
int policy_resolve_existing(const char *text, enum value_origin from, mode_t type, char **out,
                            char *why, size_t len)
{
    _cleanup_free_ char *real = NULL;
    int r = policy_resolve_host(text, from, &real, why, len);
    if (r < 0)
        return r;
    struct stat st;
    if (stat(real, &st) < 0)
        return why_printf(why, len, "cannot stat \"%s\": %s", text, strerror(errno));
    if ((st.st_mode & S_IFMT) != type)
        return why_printf(why, len, "\"%s\" is not a %s", text,
                          type == S_IFDIR ? "directory" : "regular file");
    if (type == S_IFREG && access(real, R_OK) < 0)
        return why_printf(why, len, "\"%s\" is not readable: %s", text, strerror(errno));
    free(*out);
    *out = TAKE_PTR(real);
    return 0;
}

/*
 * A host path an earlier run could have written to must lead where it
 * says: refused when a component is a symbolic link, unless the policy lets
 * it follow links, when it is resolved once, here.
 */
int policy_settle_path(char **path, bool follow, const char *what, const char *allow,
                       const char *where, struct cordon_err *err)
{
    if (follow) {
        char *real = realpath(*path, NULL);
        if (!real)
            return err_set(err, CORDON_E_POLICY, "%s%s: cannot resolve \"%s\": %s", where, what,
                           *path, strerror(errno));
        free(*path);
        *path = real;
        return 0;
    }
    char link[PATH_MAX], target[PATH_MAX];
    if (hostpath_find_link(*path, link, sizeof link, target, sizeof target))
        return err_set(err, CORDON_E_POLICY,
                       "%s%s: \"%s\" is a symbolic link (to \"%s\") that a run could have "
                       "planted; %s",
                       where, what, link, target,
                       allow ? allow : "cordon never writes through one");
    return 0;
}

/*
 * Is PATH (a file that may not exist yet) inside the directory tree TREE?
 * By name, and by identity of every directory above PATH, so a second
 * mount of the same tree is caught too.
 */
bool policy_inside_tree(const char *path, const char *tree)
{
    if (hostpath_within(path, tree))
        return true;
    struct stat t, d;
    if (stat(tree, &t) < 0)
        return false;
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return false;
    for (char *slash; (slash = strrchr(buf, '/'));) {
        slash[slash == buf] = '\0'; /* "/a/b" -> "/a", "/a" -> "/" */
        if (stat(buf, &d) == 0 && d.st_dev == t.st_dev && d.st_ino == t.st_ino)
            return true;
        if (slash == buf)
            break;
    }
    return false;
}
