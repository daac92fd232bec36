/*
 * sandbox/microvm/vmproto.h: the host's side of the microvm guest protocol
 * (sandbox/microvm/vm_wire.h). The guest is hostile: every frame it sends is checked
 * against its port's table (known type, length within the type's bounds,
 * connection id in range) before its payload is read, so a lying header
 * costs at most VM_DATA_MAX + 4 bytes of buffer and ends the session.
 */
#pragma once
#include "common/err.h"
#include "sandbox/microvm/vm_wire.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum vm_port { VM_PORT_CONTROL, VM_PORT_EGRESS };

/* Is a guest frame of TYPE and LEN acceptable on PORT? 0, or -1 with ERR. */
int vm_frame_check(enum vm_port port, uint32_t type, uint32_t len, struct cordon_err *err);

/* Reassembles frames from a byte stream the guest controls. */
struct vm_reader {
    enum vm_port port;
    size_t have; /* bytes of the current frame so far */
    unsigned char buf[VM_FRAME_HEADER + VM_DATA_MAX + 4];
};

struct vm_frame {
    uint32_t type;
    uint32_t len;
    const unsigned char *data; /* in the reader; valid until the next feed */
};

void vm_reader_init(struct vm_reader *r, enum vm_port port);

/*
 * Take bytes from DATA (LEN of them) until a frame is whole: 1 with *OUT
 * (and *USED bytes consumed), 0 when all of DATA went in and more is needed,
 * -1 with ERR when the guest broke the protocol (the session is over).
 */
int vm_reader_feed(struct vm_reader *r, const void *data, size_t len, size_t *used,
                   struct vm_frame *out, struct cordon_err *err);

/* A growable buffer for the call the host builds. */
struct vm_buf {
    unsigned char *data;
    size_t len, cap;
    bool failed; /* out of memory or over VM_CALL_MAX */
    bool over;   /* over VM_CALL_MAX */
};

void vm_buf_u32(struct vm_buf *b, uint32_t v);
void vm_buf_u64(struct vm_buf *b, uint64_t v);
void vm_buf_bytes(struct vm_buf *b, const void *p, size_t n);
void vm_buf_str(struct vm_buf *b, const char *s);
void vm_buf_release(struct vm_buf *b);
