/*
 * common/err.h: the error record every fallible function fills. Fixed-size,
 * so the sandbox child can hand it to the supervisor in one write().
 */
#pragma once
#include <stddef.h>

enum cordon_err_kind {
    CORDON_E_OK = 0,
    CORDON_E_USAGE,       /* bad flag or argument: exit 125 */
    CORDON_E_POLICY,      /* malformed or impossible policy: exit 125 */
    CORDON_E_UNSUPPORTED, /* host lacks a feature the run needs: exit 125 */
    CORDON_E_SETUP,       /* building the sandbox failed: exit 125 */
    CORDON_E_NOEXEC,      /* command found but not executable: exit 126 */
    CORDON_E_NOTFOUND,    /* command not found: exit 127 */
    CORDON_E_INTERNAL,    /* a bug or resource exhaustion in cordon: exit 125 */
};

struct cordon_err {
    enum cordon_err_kind kind;
    int errnum; /* errno, or 0 */
    char msg[256];
};

/* Fill ERR (which may be NULL) and return -1. */
int err_set(struct cordon_err *err, enum cordon_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* As err_set, appending ": strerror(errno)" and recording errno. */
int err_sys(struct cordon_err *err, enum cordon_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepend "PREFIX: " to the message already in ERR; returns -1. */
int err_prefix(struct cordon_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The exit status `cordon run` uses when it fails for ERR's reason. */
int err_exit_code(const struct cordon_err *err);

#define TRY(expr)       \
    do {                \
        if ((expr) < 0) \
            return -1;  \
    } while (0)
