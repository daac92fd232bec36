/*
 * sandbox/microvm/vmproto.c: checks and reassembles the frames a microvm guest
 * sends, and builds the call the host sends it. Runs in the microvm shim.
 */
#include "sandbox/microvm/vmproto.h"

#include <stdlib.h>
#include <string.h>

struct frame_rule {
    uint32_t type;
    uint32_t min, max; /* payload length bounds */
    bool conn_id;      /* starts with a connection id below VM_EG_MAX_CONNS */
};

static const struct frame_rule control_rules[] = {
    { VM_READY, 0, 0, false },
    { VM_SET, 0, 0, false },
    { VM_STDOUT, 1, VM_DATA_MAX, false },
    { VM_STDERR, 1, VM_DATA_MAX, false },
    { VM_EXIT, 8, 8, false },
    { VM_ERROR, 4, VM_ERROR_MAX, false },
    { VM_STDIN_TAKEN, 4, 4, false },
};

static const struct frame_rule egress_rules[] = {
    { VM_EG_OPEN, 4, 4, true },  { VM_EG_DATA, 5, VM_DATA_MAX + 4, true },
    { VM_EG_CLOSE, 4, 4, true }, { VM_EG_TAKEN, 8, 8, true },
    { VM_EG_RESET, 4, 4, true },
};

static const struct frame_rule *rule_for(enum vm_port port, uint32_t type)
{
    const struct frame_rule *t = port == VM_PORT_CONTROL ? control_rules : egress_rules;
    size_t n = port == VM_PORT_CONTROL ? sizeof control_rules / sizeof control_rules[0]
                                       : sizeof egress_rules / sizeof egress_rules[0];
    for (size_t i = 0; i < n; i++)
        if (t[i].type == type)
            return &t[i];
    return NULL;
}

int vm_frame_check(enum vm_port port, uint32_t type, uint32_t len, struct cordon_err *err)
{
    const struct frame_rule *r = rule_for(port, type);
    if (!r)
        return err_set(err, CORDON_E_SETUP, "microvm guest sent a frame of unknown type %u", type);
    if (len < r->min || len > r->max)
        return err_set(err, CORDON_E_SETUP,
                       "microvm guest sent a frame of type %u with length %u (allowed %u-%u)", type,
                       len, r->min, r->max);
    return 0;
}

void vm_reader_init(struct vm_reader *r, enum vm_port port)
{
    r->port = port;
    r->have = 0;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int vm_reader_feed(struct vm_reader *r, const void *data, size_t len, size_t *used,
                   struct vm_frame *out, struct cordon_err *err)
{
    const unsigned char *in = data;
    size_t taken = 0;
    *used = 0;
    for (;;) {
        /* The header first; its length is checked before any payload is taken. */
        size_t want = VM_FRAME_HEADER;
        if (r->have >= VM_FRAME_HEADER) {
            uint32_t type = le32(r->buf), flen = le32(r->buf + 4);
            if (vm_frame_check(r->port, type, flen, err) < 0)
                return -1;
            want = VM_FRAME_HEADER + flen;
            if (r->have == want) {
                const struct frame_rule *rule = rule_for(r->port, type);
                if (rule->conn_id && le32(r->buf + VM_FRAME_HEADER) >= VM_EG_MAX_CONNS)
                    return err_set(err, CORDON_E_SETUP,
                                   "microvm guest named egress connection %u (at most %u)",
                                   le32(r->buf + VM_FRAME_HEADER), VM_EG_MAX_CONNS);
                *out = (struct vm_frame){ .type = type,
                                          .len = flen,
                                          .data = r->buf + VM_FRAME_HEADER };
                r->have = 0;
                *used = taken;
                return 1;
            }
        }
        if (taken == len) {
            *used = taken;
            return 0;
        }
        size_t n = want - r->have;
        if (n > len - taken)
            n = len - taken;
        memcpy(r->buf + r->have, in + taken, n);
        r->have += n;
        taken += n;
    }
}

static void reserve(struct vm_buf *b, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > VM_CALL_MAX) {
        b->failed = b->over = true;
        return;
    }
    if (b->len + n <= b->cap)
        return;
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < b->len + n)
        cap *= 2;
    unsigned char *d = realloc(b->data, cap);
    if (!d) {
        b->failed = true;
        return;
    }
    b->data = d;
    b->cap = cap;
}

void vm_buf_bytes(struct vm_buf *b, const void *p, size_t n)
{
    reserve(b, n);
    if (b->failed || !n)
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void vm_buf_u32(struct vm_buf *b, uint32_t v)
{
    unsigned char p[4] = { (unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                           (unsigned char)(v >> 24) };
    vm_buf_bytes(b, p, sizeof p);
}

void vm_buf_u64(struct vm_buf *b, uint64_t v)
{
    vm_buf_u32(b, (uint32_t)v);
    vm_buf_u32(b, (uint32_t)(v >> 32));
}

void vm_buf_str(struct vm_buf *b, const char *s)
{
    size_t n = strlen(s);
    vm_buf_u32(b, (uint32_t)n);
    vm_buf_bytes(b, s, n);
}

void vm_buf_release(struct vm_buf *b)
{
    free(b->data);
    *b = (struct vm_buf){ 0 };
}
