/*
 * common/cleanup.h: scope-bound cleanup (GCC/Clang cleanup attribute), so
 * every early return releases what the function held.
 */
#pragma once
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __CPPCHECK__
#define _cleanup_(f) __attribute__((cleanup(f)))
#else
/*
 * cppcheck (2.10) drops the attribute, so it would report each early return
 * past a _cleanup_ variable as a leak. A static local is the one kind its
 * leak checker does not follow; the cost, unseen uninitialised _cleanup_
 * variables, is checked by tests/check-analyser.sh instead.
 */
#define _cleanup_(f) static
#endif

#define DEFINE_CLEANUP(type, func)      \
    static inline void func##p(type *p) \
    {                                   \
        if (*p)                         \
            func(*p);                   \
    }

static inline void freep(void *p)
{
    free(*(void **)p);
}

static inline void closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd); /* never retried: the fd is gone either way */
        errno = saved;
    }
}

static inline void fclosep(FILE **f)
{
    if (*f)
        fclose(*f);
}

/* SIGKILL and reap a child still held on an early return. */
static inline void killp(pid_t *pid)
{
    if (*pid > 0) {
        int saved = errno;
        kill(*pid, SIGKILL);
        while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
            ;
        errno = saved;
    }
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_kill_ _cleanup_(killp)

/* Hand ownership out of a cleanup-scoped variable. */
#define TAKE_PTR(p)              \
    ({                           \
        __typeof__(p) _tp = (p); \
        (p) = NULL;              \
        _tp;                     \
    })
#define TAKE_FD(fd)     \
    ({                  \
        int _tf = (fd); \
        (fd) = -1;      \
        _tf;            \
    })
