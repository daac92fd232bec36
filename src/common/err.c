/*
 * common/err.c: formatting of error records. Runs anywhere, including the
 * sandbox child between clone() and exec(), so it allocates nothing.
 */
#include "common/err.h"

#include "common/text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

__attribute__((format(printf, 4, 0))) static void vset(struct cordon_err *err,
                                                       enum cordon_err_kind kind, int errnum,
                                                       const char *fmt, va_list ap)
{
    err->kind = kind;
    err->errnum = errnum;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    if (errnum) {
        size_t len = strlen(err->msg);
        snprintf(err->msg + len, sizeof err->msg - len, ": %s", strerror(errnum));
    }
    /* Messages quote paths, policy values and parsers' tokens: bytes others chose. */
    text_escape_controls(err->msg, sizeof err->msg);
}

int err_set(struct cordon_err *err, enum cordon_err_kind kind, const char *fmt, ...)
{
    if (!err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vset(err, kind, 0, fmt, ap);
    va_end(ap);
    return -1;
}

int err_sys(struct cordon_err *err, enum cordon_err_kind kind, const char *fmt, ...)
{
    int saved = errno;
    if (!err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vset(err, kind, saved, fmt, ap);
    va_end(ap);
    errno = saved;
    return -1;
}

int err_prefix(struct cordon_err *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char prefix[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);

    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    /* A long chain of prefixes may truncate the tail: the head says what failed. */
    int n = snprintf(err->msg, sizeof err->msg, "%s: ", prefix);
    if (n > 0 && (size_t)n < sizeof err->msg) {
        size_t len = strnlen(old, sizeof err->msg - (size_t)n - 1);
        memcpy(err->msg + n, old, len);
        err->msg[(size_t)n + len] = '\0';
    }
    return -1;
}

int err_exit_code(const struct cordon_err *err)
{
    switch (err->kind) {
    case CORDON_E_NOEXEC:
        return 126;
    case CORDON_E_NOTFOUND:
        return 127;
    default:
        return 125;
    }
}
