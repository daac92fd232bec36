/*
 * common/fds.h: closing what a forked process inherited but must not hold,
 * and passing a descriptor to another process.
 */
#pragma once
#include <stddef.h>

/* Write all of BUF to FD, retrying short writes and EINTR; gives up
 * silently on any other error (a closed reader drops what is left). */
void write_all(int fd, const char *buf, size_t len);

/* Close every descriptor from 3 up except those in KEEP (sorted in place;
 * negative entries ignored). Async-signal-safe: no allocation. */
void close_fds_except(int *keep, size_t n);

/* Pass FD over the unix socket SOCK (SCM_RIGHTS, with one byte). 0, or -1
 * with errno. Allocates nothing: usable in a child before exec. */
int send_fd(int sock, int fd);

/* The descriptor passed by send_fd() (close-on-exec), or -1. */
int recv_fd(int sock);

/*
 * For a front end whose process is its own: block SIGINT, SIGTERM and SIGHUP
 * and return a close-on-exec signalfd for them, to hand a run as
 * sandbox_call.sig_fd (the run passes them on to the command). -1 on error.
 */
int signals_to_fd(void);
