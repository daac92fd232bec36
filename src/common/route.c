/*
 * common/route.c: a range made loopback's, by rtnetlink (see route.h).
 */
#include "common/route.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* One rtnetlink attribute after the message in NH (room checked by the caller). */
static void nl_attr(struct nlmsghdr *nh, unsigned short type, const void *data, size_t len)
{
    struct rtattr *rta = (struct rtattr *)((char *)nh + NLMSG_ALIGN(nh->nlmsg_len));
    rta->rta_type = type;
    rta->rta_len = (unsigned short)RTA_LENGTH(len);
    memcpy(RTA_DATA(rta), data, len);
    nh->nlmsg_len = NLMSG_ALIGN(nh->nlmsg_len) + RTA_ALIGN(rta->rta_len);
}

/* Send REQ to the kernel and read its acknowledgement: 0, or -1 with errno. */
static int nl_request(struct nlmsghdr *req)
{
    int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (s < 0)
        return -1;
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    struct {
        struct nlmsghdr nh;
        struct nlmsgerr e;
    } ack;
    ssize_t n = -1;
    if (sendto(s, req, req->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) >= 0)
        n = recv(s, &ack, sizeof ack, 0);
    int e = errno;
    close(s);
    if (n < 0) {
        errno = e;
        return -1;
    }
    if (n < (ssize_t)sizeof ack || ack.nh.nlmsg_type != NLMSG_ERROR || ack.e.error != 0) {
        errno = n >= (ssize_t)sizeof ack && ack.e.error ? -ack.e.error : EPROTO;
        return -1;
    }
    return 0;
}

#define NL_CREATE (NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK)

static int local_range(uint32_t net, unsigned prefix, unsigned short type, unsigned short flags)
{
    struct {
        struct nlmsghdr nh;
        struct rtmsg rt;
        char attrs[64];
    } req = {
        .nh = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg)),
                .nlmsg_type = type,
                .nlmsg_flags = flags,
                .nlmsg_seq = 1 },
        .rt = { .rtm_family = AF_INET,
                .rtm_dst_len = (unsigned char)prefix,
                .rtm_table = RT_TABLE_LOCAL,
                .rtm_protocol = RTPROT_BOOT,
                .rtm_scope = RT_SCOPE_HOST,
                .rtm_type = RTN_LOCAL },
    };
    uint32_t dst = htonl(net);
    int lo = (int)if_nametoindex("lo");
    nl_attr(&req.nh, RTA_DST, &dst, sizeof dst);
    nl_attr(&req.nh, RTA_OIF, &lo, sizeof lo);
    return nl_request(&req.nh);
}

int route_local_range(uint32_t net, unsigned prefix)
{
    return local_range(net, prefix, RTM_NEWROUTE, NL_CREATE);
}

int route_local_range_del(uint32_t net, unsigned prefix)
{
    return local_range(net, prefix, RTM_DELROUTE, NLM_F_REQUEST | NLM_F_ACK);
}

int route_own_range(uint32_t net, unsigned prefix)
{
    return route_own_address(net + 1, prefix);
}

int route_own_address(uint32_t addr, unsigned prefix)
{
    struct {
        struct nlmsghdr nh;
        struct ifaddrmsg ifa;
        char attrs[64];
    } req = {
        .nh = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg)),
                .nlmsg_type = RTM_NEWADDR,
                .nlmsg_flags = NL_CREATE,
                .nlmsg_seq = 1 },
        .ifa = { .ifa_family = AF_INET,
                 .ifa_prefixlen = (unsigned char)prefix,
                 .ifa_scope = RT_SCOPE_HOST,
                 .ifa_index = if_nametoindex("lo") },
    };
    if (req.ifa.ifa_index == 0)
        return -1; /* errno from if_nametoindex */
    uint32_t first = htonl(addr);
    nl_attr(&req.nh, IFA_LOCAL, &first, sizeof first);
    nl_attr(&req.nh, IFA_ADDRESS, &first, sizeof first);
    return nl_request(&req.nh);
}
