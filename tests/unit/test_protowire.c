/*
 * tests/unit/test_protowire.c: the protobuf wire reader a gRPC peer's bytes
 * go through (sandboxd): values at the varint's edges read back as written,
 * and every malformed form (a varint that never ends or overflows, a length
 * past the end, groups, field 0) is refused, never read past.
 */
#include "common/protowire.h"

#include "tap.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void round_trips(void)
{
    static const uint64_t values[] = {
        0, 1, 127, 128, 300, 16383, 16384, UINT32_MAX, (uint64_t)INT64_MAX, UINT64_MAX
    };
    struct pb_writer w = { 0 };
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        pb_put_varint(&w, (uint32_t)(i + 1), values[i]);
    pb_put_int32(&w, 20, -1);
    pb_put_bytes(&w, 536870911, "abc", 3); /* the highest field number */
    pb_put_bytes(&w, 21, NULL, 0);
    ok(!w.failed, "written");
    struct pb_reader r = pb_reader(w.buf, w.len);
    struct pb_field f;
    size_t i = 0;
    int rc;
    bool same = true;
    while (i < sizeof values / sizeof values[0] && (rc = pb_next(&r, &f)) == 1) {
        same &= f.num == i + 1 && f.wire == PB_VARINT && f.varint == values[i];
        i++;
    }
    ok(same && i == sizeof values / sizeof values[0], "varints read back as written");
    ok(pb_next(&r, &f) == 1 && f.num == 20 && (int32_t)f.varint == -1, "a negative int32");
    ok(pb_next(&r, &f) == 1 && f.num == 536870911 && f.wire == PB_LEN && f.len == 3 &&
           memcmp(f.data, "abc", 3) == 0,
       "bytes with the highest field number");
    ok(pb_next(&r, &f) == 1 && f.num == 21 && f.len == 0, "empty bytes");
    ok(pb_next(&r, &f) == 0, "then the end");
    pb_writer_release(&w);
}

struct bad {
    const char *name;
    const char *bytes;
    size_t len;
};

static void malformed(void)
{
    static const struct bad cases[] = {
        { "a key that never ends", "\x80", 1 },
        { "a varint that never ends", "\x08\xff\xff", 3 },
        { "a varint of eleven bytes", "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12 },
        { "a tenth byte past 64 bits", "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 11 },
        { "a length past the end",
          "\x0a\x05"
          "ab",
          4 },
        { "a length of 2^63", "\x0a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 11 },
        { "a start group", "\x0b", 1 },
        { "an end group", "\x0c", 1 },
        { "wire type 6", "\x0e", 1 },
        { "field number 0", "\x00\x01", 2 },
        { "a fixed64 cut short", "\x09\x01\x02", 3 },
        { "a fixed32 cut short", "\x0d\x01", 2 },
        { "a field number past 2^29", "\x80\x80\x80\x80\x20\x00", 6 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct pb_reader r = pb_reader(cases[i].bytes, cases[i].len);
        struct pb_field f;
        int rc;
        while ((rc = pb_next(&r, &f)) == 1)
            ;
        ok(rc == -1 && r.p <= r.end, "refused: %s", cases[i].name);
    }
    struct pb_reader r = pb_reader("\x0d\x01\x02\x03\x04\x11\x01\x00\x00\x00\x00\x00\x00\x80", 14);
    struct pb_field f;
    ok(pb_next(&r, &f) == 1 && f.wire == PB_I32 && f.varint == 0x04030201, "a fixed32 read");
    ok(pb_next(&r, &f) == 1 && f.wire == PB_I64 && f.varint == 0x8000000000000001ull,
       "a fixed64 read");
    ok(pb_next(&r, &f) == 0, "then the end");
}

int main(void)
{
    round_trips();
    malformed();
    return done_testing();
}
