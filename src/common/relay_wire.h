/*
 * common/relay_wire.h: transparent egress carried by a relay. Where the
 * gateway cannot hold listeners inside the sandbox (gvisor's netstack, a
 * microvm guest, the process level's host network), something inside or
 * beside the sandbox serves the DNS stub and the synthetic addresses and
 * carries each connection to the gateway's proxy door (after the door's run
 * token, where the door has one). Such a connection opens with a preface:
 *
 *   RELAY_MAGIC (RELAY_MAGIC_LEN bytes, the first a NUL, so no HTTP request
 *   can be mistaken for it), then one kind byte:
 *
 *   RELAY_TCP: u32 IPv4 address, u16 port (both big-endian): the address
 *     and port the client connected to (a synthetic one, or an address the
 *     client named itself); the client's bytes follow, both ways, as on the
 *     namespace level's listeners.
 *   RELAY_TCP6: the same with a 16-byte IPv6 address.
 *   RELAY_DNS: DNS messages, each a big-endian u16 length and the message
 *     (RFC 7766 framing), answered in order on the same stream; a query the
 *     stub cannot parse ends the stream.
 *
 * The preface grants nothing a connection to the address would not: the
 * gateway maps a synthetic address to the name its stub gave out, decides
 * any other as a CONNECT to it would be, and applies the same checks. Plain C, no cordon headers: the guest agent and
 * gvisor's in-sandbox init include it too.
 */
#pragma once

#define RELAY_MAGIC "\0cordon-relay1"
#define RELAY_MAGIC_LEN 14u
#define RELAY_TCP 'T'
#define RELAY_TCP6 '6'
#define RELAY_DNS 'D'
/* The prefaces' lengths: magic, kind, address, port. */
#define RELAY_PREFACE_TCP_LEN (RELAY_MAGIC_LEN + 1u + 4u + 2u)
#define RELAY_PREFACE_TCP6_LEN (RELAY_MAGIC_LEN + 1u + 16u + 2u)
#define RELAY_PREFACE_MAX RELAY_PREFACE_TCP6_LEN
/* A DNS message on a relayed stream, at most (the stub's own UDP cap). */
#define RELAY_DNS_MAX 1500u
