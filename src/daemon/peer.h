/*
 * daemon/peer.h: who is on the other end of a connection the daemon
 * accepted on a host listener it opened for someone (an exposed port, the
 * sandboxd listeners): the peer's uid from SO_PEERCRED on a unix socket, or
 * for a TCP connection over loopback from the kernel's socket table
 * (/proc/net/tcp, tcp6: the socket whose ends are the peer's and ours, and
 * its owner, and only while a process holds that socket: one already
 * closed shows uid 0), which no peer can forge.
 */
#pragma once
#include <stdbool.h>
#include <sys/types.h>

/* FD's peer uid: 0 with *UID, or -1 (not loopback, or no longer connected). */
int peer_uid(int fd, uid_t *uid);
