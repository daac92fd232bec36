/*
 * tests/unit/test_vmproto.c: the host's parser of what a microvm guest sends.
 * The guest is hostile: a table of bad frames (unknown type, lengths past a
 * type's cap, a forged connection id, a type from the other port) must each
 * end the session with the message naming the fault, in every split of the
 * byte stream; then a fuzz-style run of random and mutated streams must never
 * read past its buffer or hand out a frame that breaks the rules. The call's
 * port list (what the guest accepts of it, vm_ports_take()) is a table too.
 */
#include "sandbox/microvm/vmproto.h"

#include "tap.h"

#include <stdlib.h>
#include <string.h>

struct frame_case {
    const char *name;
    enum vm_port port;
    uint32_t type, len;
    uint32_t first_word; /* the payload's first 4 bytes (a connection id) */
    const char *why;     /* NULL: accepted */
};

static const struct frame_case cases[] = {
    { "ready", VM_PORT_CONTROL, VM_READY, 0, 0, NULL },
    { "stdout", VM_PORT_CONTROL, VM_STDOUT, 10, 0, NULL },
    { "stdout at the cap", VM_PORT_CONTROL, VM_STDOUT, VM_DATA_MAX, 0, NULL },
    { "exit", VM_PORT_CONTROL, VM_EXIT, 8, 0, NULL },
    { "error", VM_PORT_CONTROL, VM_ERROR, 20, 1, NULL },
    { "stdin taken", VM_PORT_CONTROL, VM_STDIN_TAKEN, 4, 0, NULL },
    { "stdin taken, short", VM_PORT_CONTROL, VM_STDIN_TAKEN, 2, 0, "length 2 (allowed 4-4)" },
    { "egress open", VM_PORT_EGRESS, VM_EG_OPEN, 4, 1023, NULL },
    { "egress data", VM_PORT_EGRESS, VM_EG_DATA, 100, 5, NULL },
    { "egress taken", VM_PORT_EGRESS, VM_EG_TAKEN, 8, 7, NULL },
    { "egress reset", VM_PORT_EGRESS, VM_EG_RESET, 4, 9, NULL },
    { "unknown type", VM_PORT_CONTROL, 99, 0, 0, "unknown type 99" },
    { "a host-only type", VM_PORT_CONTROL, VM_CALL, 10, 0, "unknown type 1" },
    { "egress type on control", VM_PORT_CONTROL, VM_EG_DATA, 10, 0, "unknown type 33" },
    { "control type on egress", VM_PORT_EGRESS, VM_STDOUT, 10, 0, "unknown type 17" },
    { "ready with payload", VM_PORT_CONTROL, VM_READY, 1, 0, "length 1 (allowed 0-0)" },
    { "empty stdout", VM_PORT_CONTROL, VM_STDOUT, 0, 0, "length 0" },
    { "stdout past the cap", VM_PORT_CONTROL, VM_STDOUT, VM_DATA_MAX + 1, 0, "length 65537" },
    { "huge length", VM_PORT_CONTROL, VM_STDERR, 0xffffffffu, 0, "length 4294967295" },
    { "short exit", VM_PORT_CONTROL, VM_EXIT, 4, 0, "length 4 (allowed 8-8)" },
    { "long exit", VM_PORT_CONTROL, VM_EXIT, 12, 0, "length 12 (allowed 8-8)" },
    { "error past the cap", VM_PORT_CONTROL, VM_ERROR, VM_ERROR_MAX + 1, 1, "length 513" },
    { "egress data without bytes", VM_PORT_EGRESS, VM_EG_DATA, 4, 1, "length 4" },
    { "forged connection id", VM_PORT_EGRESS, VM_EG_OPEN, 4, 1024, "connection 1024" },
    { "forged id on data", VM_PORT_EGRESS, VM_EG_DATA, 8, 0xffffffffu, "connection 4294967295" },
    { "egress taken, short", VM_PORT_EGRESS, VM_EG_TAKEN, 4, 1, "length 4 (allowed 8-8)" },
    { "forged id on taken", VM_PORT_EGRESS, VM_EG_TAKEN, 8, 1024, "connection 1024" },
    { "taken on control", VM_PORT_CONTROL, VM_EG_TAKEN, 8, 0, "unknown type 35" },
    { "reset with bytes", VM_PORT_EGRESS, VM_EG_RESET, 8, 1, "length 8 (allowed 4-4)" },
};

/* A call's port list: the count N as sent (it may lie), the LISTED ports
 * that follow it, less CUT bytes at the end. */
struct ports_case {
    const char *name;
    uint32_t n;
    size_t listed;
    uint32_t ports[VM_MAX_PORTS + 1];
    size_t cut;
    bool accepted;
};

static const struct ports_case ports_cases[] = {
    { "none", 0, 0, { 0 }, 0, true },
    { "two", 2, 2, { 80, 443 }, 0, true },
    { "the highest port", 1, 1, { 65535 }, 0, true },
    { "the cap",
      VM_MAX_PORTS,
      VM_MAX_PORTS,
      { 1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
        17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32 },
      0,
      true },
    { "past the cap",
      VM_MAX_PORTS + 1,
      VM_MAX_PORTS + 1,
      { 1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17,
        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33 },
      0,
      false },
    { "a count past the bytes", 3, 2, { 80, 443 }, 0, false },
    { "a huge count", 0xffffffffu, 1, { 80 }, 0, false },
    { "cut inside a port", 2, 2, { 80, 443 }, 1, false },
    { "cut inside the count", 0, 0, { 0 }, 1, false },
    { "port 0", 1, 1, { 0 }, 0, false },
    { "one past 65535", 1, 1, { 65536 }, 0, false },
    { "the gateway's port", 2, 2, { 80, VM_GATEWAY_PORT }, 0, false },
    { "a port twice", 3, 3, { 80, 443, 80 }, 0, false },
};

static void check_ports(void)
{
    for (size_t i = 0; i < sizeof ports_cases / sizeof ports_cases[0]; i++) {
        const struct ports_case *c = &ports_cases[i];
        struct vm_buf b = { 0 };
        vm_buf_u32(&b, c->n);
        for (size_t k = 0; k < c->listed; k++)
            vm_buf_u32(&b, c->ports[k]);
        size_t len = b.len - c->cut;
        /* What follows in the call is never taken as ports. */
        if (!c->cut)
            vm_buf_u32(&b, 443);
        uint16_t ports[VM_MAX_PORTS];
        uint32_t n = 0xdead;
        size_t used = b.failed ? 0 : vm_ports_take(b.data, c->cut ? len : b.len, ports, &n);
        if (c->accepted) {
            bool same = n == c->n && used == len;
            for (uint32_t k = 0; same && k < n; k++)
                same = ports[k] == c->ports[k];
            ok(same, "ports %s: accepted, %zu bytes taken", c->name, used);
        } else {
            ok(used == 0 && n == 0xdead, "ports %s: refused", c->name);
        }
        vm_buf_release(&b);
    }
}

static size_t encode(const struct frame_case *c, unsigned char *out, size_t cap)
{
    uint32_t h[2] = { c->type, c->len };
    memcpy(out, h, sizeof h);
    size_t body = c->len > cap - 8 ? cap - 8 : c->len;
    memset(out + 8, 'x', body);
    if (body >= 4)
        memcpy(out + 8, &c->first_word, 4);
    return 8 + body;
}

/* Feed BYTES in pieces of STEP; 1 frame, 0 incomplete, -1 refused. */
static int feed_in_steps(struct vm_reader *r, const unsigned char *bytes, size_t n, size_t step,
                         struct vm_frame *f, struct cordon_err *err)
{
    size_t off = 0;
    while (off < n) {
        size_t k = n - off < step ? n - off : step, used;
        int got = vm_reader_feed(r, bytes + off, k, &used, f, err);
        if (got != 0)
            return got;
        off += k;
    }
    return 0;
}

static bool frame_obeys_rules(enum vm_port port, const struct vm_frame *f)
{
    struct cordon_err err = { 0 };
    if (vm_frame_check(port, f->type, f->len, &err) < 0)
        return false;
    if (port == VM_PORT_EGRESS) {
        uint32_t id;
        memcpy(&id, f->data, 4);
        return id < VM_EG_MAX_CONNS;
    }
    return true;
}

int main(void)
{
    static unsigned char bytes[VM_DATA_MAX + 64];
    struct vm_reader *r = malloc(sizeof *r);
    static const size_t steps[] = { 1, 3, 8, 4096, sizeof bytes };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct frame_case *c = &cases[i];
        size_t n = encode(c, bytes, sizeof bytes);
        for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
            struct cordon_err err = { 0 };
            struct vm_frame f;
            vm_reader_init(r, c->port);
            int got = feed_in_steps(r, bytes, n, steps[s], &f, &err);
            if (!c->why) {
                ok(got == 1 && f.type == c->type && f.len == c->len, "%s (pieces of %zu): accepted",
                   c->name, steps[s]);
            } else {
                ok(got == -1 && strstr(err.msg, c->why), "%s (pieces of %zu): refused, \"%s\"",
                   c->name, steps[s], err.msg);
            }
        }
    }

    /* Two frames in one read come out one at a time, the second from where the first ended. */
    {
        struct frame_case a = { "a", VM_PORT_CONTROL, VM_STDOUT, 3, 0, NULL };
        struct frame_case b = { "b", VM_PORT_CONTROL, VM_EXIT, 8, 7, NULL };
        size_t na = encode(&a, bytes, sizeof bytes);
        size_t nb = encode(&b, bytes + na, sizeof bytes - na);
        struct cordon_err err = { 0 };
        struct vm_frame f;
        size_t used;
        vm_reader_init(r, VM_PORT_CONTROL);
        int g1 = vm_reader_feed(r, bytes, na + nb, &used, &f, &err);
        ok(g1 == 1 && f.type == VM_STDOUT && used == na, "first of two frames, %zu bytes used",
           used);
        int g2 = vm_reader_feed(r, bytes + used, na + nb - used, &used, &f, &err);
        uint32_t status = 0;
        if (g2 == 1)
            memcpy(&status, f.data, 4);
        ok(g2 == 1 && f.type == VM_EXIT && status == 7, "second of two frames: exit status 7");
    }

    /* Fuzz: random streams and valid streams with bytes flipped. Every
     * frame handed out obeys the rules; refusal is the only other outcome. */
    srand(14);
    unsigned long frames = 0, refused = 0, bad = 0;
    for (int round = 0; round < 20000; round++) {
        enum vm_port port = round % 2 ? VM_PORT_EGRESS : VM_PORT_CONTROL;
        size_t n = (size_t)(rand() % 256) + 1;
        if (round % 3 == 0) {
            const struct frame_case *c = &cases[(size_t)rand() % 7];
            n = encode(c, bytes, 512 < sizeof bytes ? 512 : sizeof bytes);
            port = c->port;
            bytes[rand() % (int)(n < 12 ? n : 12)] ^= (unsigned char)(1u << (rand() % 8));
        } else {
            for (size_t k = 0; k < n; k++)
                bytes[k] = (unsigned char)rand();
            if (round % 5 == 0) /* a plausible header with a random length */
                bytes[0] = (unsigned char)(port == VM_PORT_CONTROL ? 17 : 33),
                bytes[1] = bytes[2] = bytes[3] = 0;
        }
        vm_reader_init(r, port);
        size_t off = 0;
        while (off < n) {
            struct cordon_err err = { 0 };
            struct vm_frame f;
            size_t used;
            int got = vm_reader_feed(r, bytes + off, n - off, &used, &f, &err);
            if (got < 0) {
                refused++;
                if (!err.msg[0])
                    bad++;
                break;
            }
            if (got == 0)
                break;
            frames++;
            if (!frame_obeys_rules(port, &f) || used == 0 || used > n - off)
                bad++;
            off += used;
        }
    }
    check_ports();
    ok(bad == 0 && refused > 0,
       "fuzz: %lu frames accepted, %lu streams refused, %lu broke the rules", frames, refused, bad);
    free(r);
    return done_testing();
}
