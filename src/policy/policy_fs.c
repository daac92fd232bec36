/*
 * policy/policy_fs.c: the filesystem section: binds, the names protected in
 * a host workspace, the host sockets a run may reach. Runs in the CLI or
 * supervisor; touches the filesystem only to resolve host paths.
 */
#include "policy/policy_int.h"

#include "common/hostpath.h"
#include "common/strv.h"
#include "common/text.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

/*
 * The sandbox builds /, /proc and /dev itself and mounts the workspace at
 * /workspace; a bind there would hide or be hidden by those mounts. A bind
 * beneath /workspace would have to create its mountpoint inside the host's
 * workspace directory, a trace on the host, so that is refused too.
 */
int policy_check_dest(const char *dest, char *why, size_t len)
{
    static const char *const reserved[] = { "/proc", "/dev" };
    if (strcmp(dest, "/") == 0)
        return why_printf(why, len, "dest \"/\" is the sandbox root, which cordon builds");
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (hostpath_within(dest, reserved[i]))
            return why_printf(why, len, "dest \"%s\" is inside %s, which the sandbox builds itself",
                              dest, reserved[i]);
    if (strcmp(dest, "/workspace") == 0)
        return why_printf(why, len,
                          "dest \"/workspace\" is the workspace; use filesystem.workspace");
    if (hostpath_within(dest, "/workspace"))
        return why_printf(why, len, "dest \"%s\" is inside /workspace; bind it elsewhere", dest);
    return 0;
}

/*
 * One name of filesystem.protected: a single path component, so it means
 * the same at the workspace's root and in every directory the scan visits;
 * '*' only at the end, the one glob cordon matches.
 */
static int check_protected_name(const char *name, char *why, size_t len)
{
    size_t n = strlen(name);
    if (n == 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, "*") == 0)
        return why_printf(why, len, "expected a file name, got \"%s\"", name);
    if (n > NAME_MAX)
        return why_printf(why, len, "\"%.32s...\" is longer than a file name can be", name);
    if (strchr(name, '/'))
        return why_printf(why, len, "\"%s\" is a path; expected a single file name", name);
    const char *star = strchr(name, '*');
    if (star && star[1] != '\0')
        return why_printf(why, len, "\"%s\": '*' may only end a name", name);
    return 0;
}

static int apply_protected(struct policy *p, bool add, const char *text, char *why, size_t len)
{
    if (check_protected_name(text, why, len) < 0)
        return -1;
    if (add)
        return policy_strv_add(&p->protected, &p->n_protected, text);
    /* Only by its exact name: a default is never dropped by a pattern or a typo. */
    if (!policy_protected_default(text))
        return why_printf(why, len, "\"%s\" is not a default protected name", text);
    return policy_strv_add(&p->unprotect, &p->n_unprotect, text);
}

/*
 * A host socket the run may connect to: an absolute path, kept normalised.
 * Whether it is a socket is asked when a run opens it (it may be made
 * later than the policy is read), never here.
 */
static int apply_unix_socket(struct policy *p, const char *text, char *why, size_t len)
{
    bool dotdot = false;
    if (text[0] != '/')
        return why_printf(why, len, "expected an absolute path, got \"%s\"", text);
    _cleanup_free_ char *norm = policy_normalize_path(text, &dotdot);
    if (!norm)
        return POLICY_ENOMEM;
    if (dotdot)
        return why_printf(why, len, "\"..\" is not allowed in \"%s\"", text);
    if (strcmp(norm, "/") == 0)
        return why_printf(why, len, "\"/\" is not a socket");
    if (strlen(norm) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return why_printf(why, len, "\"%s\" is longer than a unix socket's address", text);
    if (strv_contains(p->unix_sockets, p->n_unix_sockets, norm))
        return 0;
    return policy_strv_add(&p->unix_sockets, &p->n_unix_sockets, norm);
}

/* One item of filesystem.protected, unsafe_unprotect or unix_sockets. */
int policy_fs_item(struct policy *p, const struct policy_key *k, const char *text, char *why,
                   size_t len)
{
    if (k->type == KT_PROTECTED)
        return apply_protected(p, k->flag, text, why, len);
    return apply_unix_socket(p, text, why, len);
}

bool policy_protected_match(const char *pattern, const char *name)
{
    size_t n = strlen(pattern);
    if (n && pattern[n - 1] == '*')
        return strncmp(pattern, name, n - 1) == 0;
    return strcmp(pattern, name) == 0;
}

/*
 * Binds are kept sorted by dest: a canonical order for the digest, and one in
 * which a parent directory is always mounted before anything beneath it.
 */
int policy_apply_bind(struct policy *p, const char *source, const char *dest, bool writable,
                      bool follow, enum value_origin from, char *why, size_t len)
{
    _cleanup_free_ char *real = NULL;
    int r = policy_resolve_host(source, from, &real, why, len);
    if (r < 0)
        return r;
    /* Without DEST the sandbox sees the path as written, not where it points. */
    const char *d = dest ? dest : (source[0] == '/' ? source : real);
    if (d[0] != '/')
        return why_printf(why, len, "dest \"%s\" is not absolute", d);
    bool dotdot = false;
    _cleanup_free_ char *nd = policy_normalize_path(d, &dotdot);
    if (!nd)
        return POLICY_ENOMEM;
    if (dotdot)
        return why_printf(why, len, "dest \"%s\" contains \"..\"", d);
    if (policy_check_dest(nd, why, len) < 0)
        return -1;
    size_t at = 0;
    while (at < p->n_binds && strcmp(p->binds[at].dest, nd) < 0)
        at++;
    if (at < p->n_binds && strcmp(p->binds[at].dest, nd) == 0)
        return why_printf(why, len, "dest \"%s\" is already bound", nd);
    struct policy_bind *nb = realloc(p->binds, (p->n_binds + 1) * sizeof *nb);
    if (!nb)
        return POLICY_ENOMEM;
    p->binds = nb;
    memmove(nb + at + 1, nb + at, (p->n_binds - at) * sizeof *nb);
    nb[at] = (struct policy_bind){ TAKE_PTR(real), TAKE_PTR(nd), writable, follow };
    p->n_binds++;
    return 0;
}

/* The protected names every policy starts with (policy_new(); the table is protected.c's). */
int policy_fs_defaults(struct policy *p)
{
    size_t n_defaults = 0;
    const struct policy_protected *defaults = policy_protected_defaults(&n_defaults);
    for (size_t i = 0; i < n_defaults; i++)
        if (policy_strv_add(&p->protected, &p->n_protected, defaults[i].name) < 0)
            return POLICY_ENOMEM;
    return 0;
}
