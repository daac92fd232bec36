/*
 * guest/agent.h: what the guest agent's files share: the call as the host
 * sent it, the control port's frames, and the egress forwarder
 * (forwarder.c) that agent.c starts.
 */
#pragma once

#include "../src/sandbox/microvm/vm_wire.h"

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

struct call {
    unsigned char entropy[VM_ENTROPY_BYTES];
    uid_t uid;
    gid_t gid;
    uint32_t flags;
    uint16_t ports[VM_MAX_PORTS];
    uint32_t n_ports;
    uint32_t nets[VM_MAX_NETS], prefixes[VM_MAX_NETS]; /* allowed literals' ranges */
    uint32_t n_nets;
    uint64_t realtime_ns;
    uint32_t n_rlimits;
    struct {
        int resource;
        struct rlimit value;
    } rlimits[VM_MAX_RLIMITS];
    uint32_t n_mounts;
    struct {
        uint32_t flags;
        char *tag, *path;
    } mounts[VM_MAX_MOUNTS];
    struct sock_fprog filter;
    char *cwd;
    char **argv, **envp;
    const char *files; /* the call's files (start_files.h), in the call's frame */
    uint64_t files_len;
};

/* Power the guest off (the run's end, whatever ended it). */
_Noreturn void power_off(void);

/* WHAT and errno on the console, then power_off(). */
void die(const char *what);

/* One frame, header and payload (A then B) in one write. */
bool send_frame(int fd, uint32_t type, const void *a, size_t alen, const void *b, size_t blen);

/*
 * The egress forwarder, in a child: 127.0.0.1:3128 (and, with transparent
 * egress, the DNS stub and a listener per port of CALL) carried over the
 * egress port PORT to the host. False with WHY when it cannot start.
 */
bool start_forwarder(const struct call *call, int port, char *why, size_t why_len);
