/*
 * daemon/peer.c: see peer.h. Runs in the daemon.
 */
#include "daemon/peer.h"

#include "common/cleanup.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

/* ADDR:PORT as /proc/net/tcp* writes it (the address's bytes as host-order words, in hex). */
static void proc_net_form(const struct sockaddr_storage *sa, char *out, size_t size)
{
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        snprintf(out, size, "%08X:%04X", in->sin_addr.s_addr, ntohs(in->sin_port));
        return;
    }
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    uint32_t w[4];
    memcpy(w, &in6->sin6_addr, sizeof w);
    snprintf(out, size, "%08X%08X%08X%08X:%04X", w[0], w[1], w[2], w[3], ntohs(in6->sin6_port));
}

static bool loopback(const struct sockaddr_storage *sa)
{
    if (sa->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

/* As an IPv6 socket sees it: an IPv4 address mapped (::ffff:a.b.c.d). */
static void mapped(const struct sockaddr_storage *in, struct sockaddr_storage *out)
{
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)in;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
    memset(out, 0, sizeof *out);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = v4->sin_port;
    v6->sin6_addr.s6_addr[10] = v6->sin6_addr.s6_addr[11] = 0xff;
    memcpy(&v6->sin6_addr.s6_addr[12], &v4->sin_addr, 4);
}

/* The owner of the socket whose ends are LOCAL and REMOTE in the table at PATH. */
static int table_uid(const char *path, const struct sockaddr_storage *local_sa,
                     const struct sockaddr_storage *remote_sa, uid_t *uid)
{
    char local[64], remote[64];
    proc_net_form(local_sa, local, sizeof local);
    proc_net_form(remote_sa, remote, sizeof remote);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char l[64], r[64];
        unsigned st, u;
        unsigned long ino;
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*s %63s %63s %x %*s %*s %*s %u %*s %lu", l, r, &st, &u, &ino) != 5 ||
            strcmp(l, local) != 0 || strcmp(r, remote) != 0)
            continue;
        /*
         * Only a socket some process still holds says who owns it: one its
         * owner closed (a time-wait or orphaned end, which any user makes by
         * connecting, sending and closing before we look) shows uid 0 and
         * inode 0, and is nobody's.
         */
        if (ino == 0)
            return -1;
        *uid = (uid_t)u;
        return 0;
    }
    return -1;
}

int peer_uid(int fd, uid_t *uid)
{
    struct sockaddr_storage mine, theirs;
    socklen_t ml = sizeof mine, tl = sizeof theirs;
    if (getsockname(fd, (struct sockaddr *)&mine, &ml) < 0 ||
        getpeername(fd, (struct sockaddr *)&theirs, &tl) < 0)
        return -1;
    if (mine.ss_family == AF_UNIX) {
        struct ucred cred;
        socklen_t len = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
            return -1;
        *uid = cred.uid;
        return 0;
    }
    if (!loopback(&theirs))
        return -1;
    /* The peer's socket: its local end is our peer, its remote end is us. */
    if (mine.ss_family == AF_INET6)
        return table_uid("/proc/net/tcp6", &theirs, &mine, uid);
    if (table_uid("/proc/net/tcp", &theirs, &mine, uid) == 0)
        return 0;
    /* A dual-stack IPv6 socket reaches an IPv4 listener too (gRPC's do). */
    struct sockaddr_storage theirs6, mine6;
    mapped(&theirs, &theirs6);
    mapped(&mine, &mine6);
    return table_uid("/proc/net/tcp6", &theirs6, &mine6, uid);
}

/* ---- who may connect to a unix socket ---- */

/* A POSIX ACL as the kernel takes it in system.posix_acl_access (little-endian). */
struct acl_entry {
    uint16_t tag, perm;
    uint32_t id;
};

enum {
    ACL_TAG_USER_OBJ = 0x01,
    ACL_TAG_USER = 0x02,
    ACL_TAG_GROUP_OBJ = 0x04,
    ACL_TAG_MASK = 0x10,
    ACL_TAG_OTHER = 0x20
};

#define ACL_RW 6
#define ACL_NO_ID 0xffffffffu

static struct acl_entry acl_entry(uint16_t tag, uint16_t perm, uint32_t id)
{
    return (struct acl_entry){ htole16(tag), htole16(perm), htole32(id) };
}

static int uid_cmp(const void *a, const void *b)
{
    uid_t x = *(const uid_t *)a, y = *(const uid_t *)b;
    return (x > y) - (x < y);
}

int peer_grant_connect(int dfd, const char *name, const uid_t *uids, size_t n)
{
    uid_t sorted[PEER_MAX_GRANT], me = geteuid();
    size_t m = 0;
    if (n > PEER_MAX_GRANT) {
        errno = E2BIG;
        return -1;
    }
    /* We and root need no entry. */
    for (size_t i = 0; i < n; i++)
        if (uids[i] != me && uids[i] != 0)
            sorted[m++] = uids[i];
    if (m == 0)
        return 0;
    /* Connect needs write permission: user entries in the kernel's order (by uid, each once). */
    qsort(sorted, m, sizeof *sorted, uid_cmp);
    struct {
        uint32_t version;
        struct acl_entry e[PEER_MAX_GRANT + 4];
    } acl = { .version = htole32(2) };
    size_t k = 0;
    acl.e[k++] = acl_entry(ACL_TAG_USER_OBJ, ACL_RW, ACL_NO_ID);
    for (size_t i = 0; i < m; i++)
        if (i == 0 || sorted[i] != sorted[i - 1])
            acl.e[k++] = acl_entry(ACL_TAG_USER, ACL_RW, sorted[i]);
    acl.e[k++] = acl_entry(ACL_TAG_GROUP_OBJ, 0, ACL_NO_ID);
    acl.e[k++] = acl_entry(ACL_TAG_MASK, ACL_RW, ACL_NO_ID);
    acl.e[k++] = acl_entry(ACL_TAG_OTHER, 0, ACL_NO_ID);
    char at[PATH_MAX];
    if ((size_t)snprintf(at, sizeof at, "/proc/self/fd/%d/%s", dfd, name) >= sizeof at) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return lsetxattr(at, "system.posix_acl_access", &acl, sizeof acl.version + k * sizeof *acl.e,
                     0);
}
