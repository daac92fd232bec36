/*
 * daemon/peer.h: who is on the other end of a connection the daemon
 * accepted on a host listener it opened for someone (an exposed port, the
 * sandboxd listeners): the peer's uid from SO_PEERCRED on a unix socket, or
 * for a TCP connection over loopback from the kernel's socket table
 * (/proc/net/tcp, tcp6: the socket whose ends are the peer's and ours, and
 * its owner, and only while a process holds that socket: one already
 * closed shows uid 0), which no peer can forge. And who may connect to a
 * unix socket the daemon listens on: its POSIX ACL.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* At most this many uids in one socket's ACL. */
#define PEER_MAX_GRANT 64

/* FD's peer uid: 0 with *UID, or -1 (not loopback, or no longer connected). */
int peer_uid(int fd, uid_t *uid);

/*
 * Let UIDS connect to the unix socket NAME in DFD (0600, ours): a user
 * entry each in its ACL, no one else (group and others none). Our uid and
 * root need none; none left, nothing is written. -1 with errno
 * (EOPNOTSUPP: the filesystem keeps no ACLs).
 */
int peer_grant_connect(int dfd, const char *name, const uid_t *uids, size_t n);
