/*
 * common/fds.h: closing what a forked process inherited but must not hold,
 * and passing a descriptor to another process.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Write all of BUF to FD, retrying short writes and EINTR; false on any
 * other error (a closed reader drops what is left: callers may ignore it). */
bool write_all(int fd, const void *buf, size_t len);

/* Close every descriptor from 3 up except those in KEEP (sorted in place;
 * negative entries ignored). Async-signal-safe: no allocation. */
void close_fds_except(int *keep, size_t n);

/* At most this many descriptors go in one message. */
#define FDS_MAX 4

/*
 * Pass N descriptors FDS over the unix socket SOCK (SCM_RIGHTS) with LEN
 * bytes of DATA. 0, or -1 with errno. Allocates nothing: usable in a child
 * before exec.
 */
int send_fds(int sock, const void *data, size_t len, const int *fds, size_t n);

/* Receive what send_fds() sent: exactly LEN bytes and N descriptors
 * (close-on-exec). 0, or -1 with nothing left open. */
int recv_fds(int sock, void *data, size_t len, int *fds, size_t n);

/*
 * read() of a stream socket that may carry one descriptor with its bytes:
 * up to LEN bytes, as read() returns them; a descriptor passed with them
 * (close-on-exec) goes to *FD, which is left alone otherwise.
 */
ssize_t read_maybe_fd(int sock, void *data, size_t len, int *fd);

/* One descriptor with one byte. */
int send_fd(int sock, int fd);

/* The descriptor passed by send_fd() (close-on-exec), or -1. */
int recv_fd(int sock);

/* Read exactly LEN bytes (retrying short reads and EINTR); false on EOF or error. */
bool read_full(int fd, void *buf, size_t len);

/* Write all LEN bytes at offset AT (retrying short writes and EINTR); false on error. */
bool pwrite_full(int fd, const void *buf, size_t len, off_t at);

/*
 * For a front end whose process is its own: block SIGINT, SIGTERM, SIGHUP
 * and SIGWINCH and return a close-on-exec signalfd for them, to hand a run
 * as sandbox_call.sig_fd (the run passes the first three on to the command,
 * and SIGWINCH's new size to its terminal, if it has one). -1 on error.
 */
int signals_to_fd(void);
