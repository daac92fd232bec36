/*
 * sandbox/notify.h: the pieces every keeper of seccomp user notifications
 * shares (the process level's netnotify.c, the unix-socket keeper usock.c):
 * answering a notification, taking the caller's descriptor as our own, and
 * reading or writing the caller's memory. They run in the keeper, which is
 * not confined by the filter it serves.
 */
#pragma once
#include <linux/capability.h>
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

/*
 * A NUL-terminated string of the caller PID at FROM into BUF (SIZE bytes), a
 * page at a time (the next may be unmapped): 0, EFAULT, or TOO_LONG when
 * it does not fit.
 */
int notify_read_string(pid_t pid, __u64 from, char *buf, size_t size, int too_long);

/* The caller's umask (its /proc/PID/status), or 022 when unreadable. */
mode_t notify_umask(pid_t pid);

/*
 * A keeper's effective capabilities, dropped for a call it makes for a
 * caller that has none (a root caller's command), and given back.
 */
struct notify_caps {
    struct __user_cap_header_struct hdr;
    struct __user_cap_data_struct data[2];
    bool lowered;
};
int notify_lower_caps(struct notify_caps *c);
void notify_restore_caps(struct notify_caps *c);

/*
 * PATH with empty and "." components dropped, in place; ".." is kept (the
 * kernel resolves it beneath a tree, which a lexical fold could not).
 */
void notify_tidy(char *path);

/*
 * The caller TID's PATH (read from it once) made absolute against its
 * directory DIR (AT_FDCWD: its working directory), tidied: 0 or an errno.
 */
int notify_absolute(pid_t tid, long long dir, const char *path, char *out, size_t size);

/*
 * Is PATH (absolute, tidied) one of thread TID's own descriptors by a magic
 * link: /proc/self/fd/N and its spellings, /dev/fd/N, /dev/stdin...? N
 * into *FD.
 */
bool notify_magic_fd(const char *path, pid_t tid, int *fd);

/* LEN bytes of the caller PID's memory at FROM into TO; -1 when unreadable. */
int notify_read(pid_t pid, void *to, __u64 from, size_t len);

/* LEN bytes from FROM into the caller PID's memory at TO; -1 when unwritable. */
int notify_write(pid_t pid, __u64 to, const void *from, size_t len);
