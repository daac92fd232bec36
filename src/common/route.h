/*
 * common/route.h: `ip route add local NET/PREFIX dev lo`, by rtnetlink. Every
 * address of the range is then this network namespace's own, so a connection
 * to one lands on whatever listens on its port here (0.0.0.0 or the address).
 * The namespace level routes the synthetic range so in the sandbox's
 * namespace, the microvm guest agent in the guest. Plain C, no cordon
 * headers: the static guest agent links it too.
 */
#pragma once
#include <stdint.h>

/* 0, or -1 with errno (the kernel's answer when it refused the route). */
int route_local_range(uint32_t net, unsigned prefix);

/* The route route_local_range() added, taken away again: 0, or -1 with errno. */
int route_local_range_del(uint32_t net, unsigned prefix);

/*
 * The same by an address instead, NET+1/PREFIX on lo, where a local route is
 * refused (gVisor's netstack takes a loopback address's whole subnet as its
 * own). NET in host order; 0, or -1 with errno.
 */
int route_own_range(uint32_t net, unsigned prefix);

/* ADDR itself (host order) on lo with PREFIX: the range's, or with 32 one address. */
int route_own_address(uint32_t addr, unsigned prefix);
