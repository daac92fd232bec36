/*
 * common/protowire.h: protocol buffers' wire format, the few parts a gRPC
 * front end needs (varints, length-delimited fields), without a code
 * generator: each message is read field by field and written by hand
 * against its .proto (proto/). Unknown fields are skipped, as proto3 says.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pb_wire { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

struct pb_field {
    uint32_t num;
    enum pb_wire wire;
    uint64_t varint;     /* PB_VARINT (and the fixed widths, as read) */
    const uint8_t *data; /* PB_LEN */
    size_t len;
};

struct pb_reader {
    const uint8_t *p, *end;
};

static inline struct pb_reader pb_reader(const void *data, size_t len)
{
    return (struct pb_reader){ data, (const uint8_t *)data + len };
}

/* The next field into *F: 1, or 0 at the end, or -1 when the bytes are malformed. */
int pb_next(struct pb_reader *r, struct pb_field *f);

/* A growing buffer a message is written into; FAILED once memory ran out. */
struct pb_writer {
    uint8_t *buf;
    size_t len, cap;
    bool failed;
};

void pb_put_varint(struct pb_writer *w, uint32_t num, uint64_t v);
/* A signed 32-bit value as int32 encodes it (a negative one in ten bytes). */
void pb_put_int32(struct pb_writer *w, uint32_t num, int32_t v);
void pb_put_bytes(struct pb_writer *w, uint32_t num, const void *data, size_t len);
/* The field NUM's length-delimited header for LEN bytes that the caller appends. */
void pb_put_len_header(struct pb_writer *w, uint32_t num, size_t len);
void pb_writer_release(struct pb_writer *w);
