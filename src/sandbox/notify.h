/*
 * sandbox/notify.h: the pieces every keeper of seccomp user notifications
 * shares (the process level's netnotify.c, the unix-socket keeper usock.c):
 * answering a notification, taking the caller's descriptor as our own, and
 * reading or writing the caller's memory. They run in the keeper, which is
 * not confined by the filter it serves.
 */
#pragma once
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Ask the kernel to hand the CPU straight from a caller to its keeper and
 * back (6.6; a no-op before): a notification then costs a switch, not two
 * wake-ups across CPUs.
 */
void notify_sync_wakeup(int listener);

/* Answer ID with ERROR (0: success, the call returning VAL). -1 when LISTENER is broken. */
int notify_respond(int listener, __u64 id, int error, __s64 val);

/* Let the kernel run the call: only where it bounds the effect itself. */
int notify_continue(int listener, __u64 id);

/* The descriptor FD of thread TID, as our own; -1 when it has none there. */
int notify_take_fd(pid_t tid, int fd);

/* Whether thread TID's FD is close-on-exec. */
bool notify_fd_cloexec(pid_t tid, int fd);

/*
 * The caller's socket (its first argument) as a descriptor of ours, once the
 * notification is known to be still live: the same task, waiting in this
 * very call, so what was read from it before was its. -1 with *RC what the
 * handler returns: 0 when the call is gone, the EBADF answer otherwise.
 */
int notify_claim_socket(int listener, const struct seccomp_notif *n, int *rc);

/* LEN bytes of the caller PID's memory at FROM into TO; -1 when unreadable. */
int notify_read(pid_t pid, void *to, __u64 from, size_t len);

/* LEN bytes from FROM into the caller PID's memory at TO; -1 when unwritable. */
int notify_write(pid_t pid, __u64 to, const void *from, size_t len);
