/*
 * sandbox/microvm/vm_wire.h: the framing between cordon (the host) and the microvm
 * guest agent, over virtio-serial ports. Every frame is an 8-byte header,
 * type then payload length (both little-endian u32), then the payload. Both
 * ends treat the other as hostile: a frame with an unknown type or a length
 * over its type's cap ends the session. Shared by guest/agent.c and
 * src/sandbox/microvm/vmproto.c; plain C, no cordon headers.
 */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define VM_FRAME_HEADER 8u
/* Data frames (stdio, egress) carry at most this much. */
#define VM_DATA_MAX (64u << 10)
/*
 * Stdin the host may have sent that the guest has not yet handed to the
 * command (VM_STDIN_TAKEN returns it): the agent queues no more than this
 * and never blocks on the command's pipe, and the host's writes to the
 * control port stay within its socket's buffer, so neither end stops
 * reading the other while a command leaves its stdin unread.
 */
#define VM_STDIN_WINDOW VM_DATA_MAX
/* The call (argv, environment, mounts, filter) at most this much. */
#define VM_CALL_MAX (8u << 20)
/* An error message from the guest. */
#define VM_ERROR_MAX 512u
#define VM_ENTROPY_BYTES 64u
#define VM_MAX_MOUNTS 1024u /* shares, tmpfs and the workspace's covered entries */
#define VM_MAX_RLIMITS 16u
/* Transparent egress: the ports the guest listens on for synthetic addresses. */
#define VM_MAX_PORTS 32u
#define VM_MAX_NETS 32u
/*
 * Egress connections one guest may have open at once (their ids are below
 * it): room for the gateway's cap (256), its head budget and connections
 * ending, so the gateway decides what the run may hold, as at the other
 * levels; past it the agent answers 429 itself.
 */
#define VM_EG_MAX_CONNS 1024u
/*
 * An egress connection's bytes in flight each way: the guest holds at most
 * this much of the host's for a client that is not reading, the host as much
 * of the guest's for a gateway connection that is not, and VM_EG_TAKEN gives
 * the room back as the bytes are handed on. A connection left unread then
 * holds up no other one, nor the run's stdio and status. Eight data frames,
 * so a download's keep coming while the guest hands on the last ones (with
 * two, one ran at two thirds of its speed under TCG); it is also the most an
 * unread connection holds in each end's memory.
 */
#define VM_EG_WINDOW (8 * VM_DATA_MAX)
/* The guest's fixed addresses (policy.h's GATEWAY_PORT, DNS_STUB_ADDR,
 * SYNTH_NET and SYNTH_PREFIX; microvm.c asserts they agree). */
#define VM_GATEWAY_PORT 3128u
#define VM_DNS_STUB_ADDR 0x7f000035u /* 127.0.0.53 */
#define VM_SYNTH_NET 0xc6120000u     /* 198.18.0.0/15 */
#define VM_SYNTH_PREFIX 15u

/* The control port (the first virtserialport, /dev/vport0p1 in the guest). */
enum vm_frame_type {
    /* host -> guest */
    VM_CALL = 1,      /* the command: layout below */
    VM_STDIN = 2,     /* bytes for the command's stdin */
    VM_STDIN_EOF = 3, /* empty */
    VM_SIGNAL = 4,    /* u32 signal number, for the command's session */
    VM_SETUP = 5,     /* the boundary, before the call: layout below */
    /* guest -> host */
    VM_READY = 16,       /* empty: the agent is up and waits for the setup */
    VM_STDOUT = 17,      /* bytes */
    VM_STDERR = 18,      /* bytes */
    VM_EXIT = 19,        /* u32 wait status of the command, u32 VM_EXIT_* flags */
    VM_ERROR = 20,       /* u32 kind (VM_ERR_*), then a message */
    VM_SET = 21,         /* empty: the setup is in place, the agent waits for the call */
    VM_STDIN_TAKEN = 22, /* u32: that many more bytes of stdin handed to the command:
                            room for as many again (none once it closed its stdin) */
    /* the egress port (/dev/vport0p2), both ways: u32 connection id first */
    VM_EG_OPEN = 32,  /* guest -> host: a connection to the gateway */
    VM_EG_DATA = 33,  /* id, then bytes */
    VM_EG_CLOSE = 34, /* id: that side closed */
    VM_EG_TAKEN = 35, /* id, u32: that many of the other side's bytes handed on */
    VM_EG_RESET = 36, /* guest -> host: id: the client is gone (not a half close): drop it */
};

enum vm_error_kind {
    VM_ERR_SETUP = 1,    /* the agent could not set the command up */
    VM_ERR_NOTFOUND = 2, /* argv[0] not found */
    VM_ERR_NOEXEC = 3,   /* found, not executable */
};

/*
 * A session: READY (the snapshot is taken before it is read), SETUP, SET,
 * then CALL, stdio, and EXIT or ERROR. The setup is what the policy decides
 * and the call what a run brings, so a prepared guest (the daemon's pool)
 * has its shares mounted before any call arrives.
 *
 * VM_SETUP payload, in order (u32/u64 little-endian; a "str" is u32 length
 * then that many bytes, no NUL):
 *   u32 uid, u32 gid (the command's: the sandbox user, which the caller's files
 *       show as: QEMU's user namespace maps the caller to it)
 *   u32 flags (VM_CALL_EGRESS, VM_CALL_TRANSPARENT, VM_SETUP_WARM)
 *   u32 n_ports, then n x u32 port (transparent egress: see vm_ports_take())
 *   u32 n_nets (at most VM_MAX_NETS), then n x (u32 net, u32 prefix from 8 to
 *       32): allowed literals' IPv4 ranges, routed to the guest's loopback
 *   u32 n_rlimits, then n x (u32 resource, u64 soft, u64 hard)
 *   u32 n_mounts, then n x (u32 flags (VM_MOUNT_*), str tag, str guest path)
 *   u32 n_insns, then n x 8-byte struct sock_filter (the seccomp filter; 0: none)
 *
 * VM_CALL payload:
 *   entropy[VM_ENTROPY_BYTES] (restored clones share one RNG state: reseeded first)
 *   u64 the host's CLOCK_REALTIME in ns (a restored guest's clock is the snapshot's)
 *   str cwd
 *   u32 argc, then argc x str
 *   u32 envc, then envc x str
 *   u64 files_len, then that many bytes: the call's files in
 *       sandbox/start_files.h's layout, placed beneath cwd as the command's
 *       uid before it starts (0: none)
 */
#define VM_CALL_EGRESS 1u
/* With egress: a DNS stub on 127.0.0.53, 198.18.0.0/15 routed locally and a
 * listener on 0.0.0.0 for each of the call's ports, each connection carried
 * to the gateway behind a relay preface (common/relay_wire.h). */
#define VM_CALL_TRANSPARENT 2u
/* Prepared ahead (the daemon's pool): once the shares are in, run a
 * throwaway /usr/bin/true as the command would run, so the call finds the
 * loader and libc in the page cache and, under TCG, their code translated. */
#define VM_SETUP_WARM 4u
/* VM_EXIT: the guest kernel's OOM killer fired while the command ran. */
#define VM_EXIT_OOM 1u
#define VM_MOUNT_READONLY 1u
#define VM_MOUNT_TMPFS 2u /* tag is tmpfs options, not a 9p share */
#define VM_MOUNT_FILE 4u  /* tag is "TAG/NAME": file NAME of share TAG, bound at path */
#define VM_MOUNT_COVER 8u /* a protected workspace entry: bound read-only over itself */
#define VM_MOUNT_MASK 16u /* a socket, FIFO or link there: an empty read-only file on it */

/*
 * The call's port list at P (LEN bytes left): u32 n_ports, then n x u32
 * port. Into PORTS (room for VM_MAX_PORTS); the bytes it took, or 0 when the
 * list is cut short, longer than VM_MAX_PORTS, or names port 0, one past
 * 65535, the gateway's own port or one twice. Shared by both ends, so the
 * unit test checks what the guest accepts.
 */
static inline uint32_t vm_wire_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline size_t vm_ports_take(const void *p, size_t len, uint16_t *ports, uint32_t *n_ports)
{
    const unsigned char *b = p;
    if (len < 4)
        return 0;
    uint32_t n = vm_wire_le32(b);
    if (n > VM_MAX_PORTS || len - 4 < (size_t)n * 4)
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t port = vm_wire_le32(b + 4 + 4 * i);
        if (port == 0 || port > 65535 || port == VM_GATEWAY_PORT)
            return 0;
        for (uint32_t j = 0; j < i; j++)
            if (ports[j] == port)
                return 0;
        ports[i] = (uint16_t)port;
    }
    *n_ports = n;
    return 4 + (size_t)n * 4;
}
