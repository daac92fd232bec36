/*
 * common/protowire.c: see protowire.h. Pure: no I/O, bounds checked on
 * every byte read, so a hostile message can only be refused.
 */
#include "common/protowire.h"

#include <stdlib.h>
#include <string.h>

static int get_varint(struct pb_reader *r, uint64_t *v)
{
    uint64_t out = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return -1;
        uint8_t b = *r->p++;
        /* The tenth byte may hold only the top bit. */
        if (shift == 63 && b > 1)
            return -1;
        out |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = out;
            return 0;
        }
    }
    return -1;
}

int pb_next(struct pb_reader *r, struct pb_field *f)
{
    if (r->p >= r->end)
        return 0;
    uint64_t key = 0;
    if (get_varint(r, &key) < 0 || (key >> 3) == 0 || (key >> 3) > 0x1fffffff)
        return -1;
    *f = (struct pb_field){ .num = (uint32_t)(key >> 3), .wire = (enum pb_wire)(key & 7) };
    size_t width = 0;
    switch (f->wire) {
    case PB_VARINT:
        return get_varint(r, &f->varint) < 0 ? -1 : 1;
    case PB_LEN:
        if (get_varint(r, &f->varint) < 0 || f->varint > (uint64_t)(r->end - r->p))
            return -1;
        f->data = r->p;
        f->len = (size_t)f->varint;
        r->p += f->len;
        return 1;
    case PB_I64:
        width = 8;
        break;
    case PB_I32:
        width = 4;
        break;
    default: /* groups (3, 4) are gone from proto3; 6 and 7 never were */
        return -1;
    }
    if ((size_t)(r->end - r->p) < width)
        return -1;
    for (size_t i = 0; i < width; i++)
        f->varint |= (uint64_t)r->p[i] << (8 * i);
    r->p += width;
    return 1;
}

static void reserve(struct pb_writer *w, size_t more)
{
    if (w->failed || w->len + more <= w->cap)
        return;
    size_t cap = w->cap ? w->cap : 64;
    while (cap < w->len + more)
        cap *= 2;
    uint8_t *buf = realloc(w->buf, cap);
    if (!buf) {
        w->failed = true;
        return;
    }
    w->buf = buf;
    w->cap = cap;
}

static void raw_varint(struct pb_writer *w, uint64_t v)
{
    reserve(w, 10);
    if (w->failed)
        return;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        w->buf[w->len++] = b | (v ? 0x80 : 0);
    } while (v);
}

void pb_put_varint(struct pb_writer *w, uint32_t num, uint64_t v)
{
    raw_varint(w, (uint64_t)num << 3 | PB_VARINT);
    raw_varint(w, v);
}

void pb_put_int32(struct pb_writer *w, uint32_t num, int32_t v)
{
    pb_put_varint(w, num, (uint64_t)(int64_t)v);
}

void pb_put_len_header(struct pb_writer *w, uint32_t num, size_t len)
{
    raw_varint(w, (uint64_t)num << 3 | PB_LEN);
    raw_varint(w, len);
}

void pb_put_bytes(struct pb_writer *w, uint32_t num, const void *data, size_t len)
{
    pb_put_len_header(w, num, len);
    reserve(w, len);
    if (w->failed)
        return;
    if (len)
        memcpy(w->buf + w->len, data, len);
    w->len += len;
}

void pb_writer_release(struct pb_writer *w)
{
    free(w->buf);
    *w = (struct pb_writer){ 0 };
}
