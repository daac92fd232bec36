/*
 * common/route.c: a local route for a range, by rtnetlink (see route.h).
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

int route_local_range(uint32_t net, unsigned prefix)
{
    int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (s < 0)
        return -1;
    struct {
        struct nlmsghdr nh;
        struct rtmsg rt;
        char attrs[64];
    } req = {
        .nh = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg)), .nlmsg_type = RTM_NEWROUTE,
                .nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK, .nlmsg_seq = 1 },
        .rt = { .rtm_family = AF_INET, .rtm_dst_len = (unsigned char)prefix,
                .rtm_table = RT_TABLE_LOCAL, .rtm_protocol = RTPROT_BOOT,
                .rtm_scope = RT_SCOPE_HOST, .rtm_type = RTN_LOCAL },
    };
    uint32_t dst = htonl(net);
    int lo = (int)if_nametoindex("lo");
    nl_attr(&req.nh, RTA_DST, &dst, sizeof dst);
    nl_attr(&req.nh, RTA_OIF, &lo, sizeof lo);
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    struct {
        struct nlmsghdr nh;
        struct nlmsgerr e;
    } ack;
    ssize_t n = -1;
    if (sendto(s, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) >= 0)
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
