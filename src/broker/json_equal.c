/*
 * broker/json_equal.c: JSON values compared and hashed as JSON Schema
 * means them (see json_equal.h). Pure: no syscalls.
 */
#include "broker/json_equal.h"

#include <math.h>
#include <string.h>

/* jansson's iterators take no const object; they do not write to it. */
#define OBJECT_EACH(obj, it)                               \
    for (void *it = json_object_iter((json_t *)(obj)); it; \
         it = json_object_iter_next((json_t *)(obj), it))

bool json_is_integral(const json_t *v)
{
    if (json_is_integer(v))
        return true;
    double d = json_real_value(v);
    return json_is_real(v) && isfinite(d) && d == floor(d);
}

/* The sign of I - D, exact for every long long and double. */
static int cmp_int_real(long long i, double d)
{
    if (d >= 9223372036854775808.0)
        return -1;
    if (d < -9223372036854775808.0)
        return 1;
    double f = floor(d);
    long long fi = (long long)f;
    if (i != fi)
        return i < fi ? -1 : 1;
    return d > f ? -1 : 0;
}

/* JSON Schema compares numbers by value: 1 == 1.0. */
int json_num_cmp(const json_t *a, const json_t *b)
{
    if (json_is_integer(a) && json_is_integer(b)) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        return (x > y) - (x < y);
    }
    if (json_is_integer(a))
        return cmp_int_real(json_integer_value(a), json_real_value(b));
    if (json_is_integer(b))
        return -cmp_int_real(json_integer_value(b), json_real_value(a));
    double x = json_real_value(a), y = json_real_value(b);
    return (x > y) - (x < y);
}

bool json_same(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_num_cmp(a, b) == 0;
    if (json_typeof(a) != json_typeof(b))
        return false;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
            memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!json_same(json_array_get(a, i), json_array_get(b, i)))
                return false;
        return true;
    case JSON_OBJECT:
        if (json_object_size(a) != json_object_size(b))
            return false;
        OBJECT_EACH(a, it)
        {
            const json_t *other =
                json_object_getn(b, json_object_iter_key(it), json_object_iter_key_len(it));
            if (!other || !json_same(json_object_iter_value(it), other))
                return false;
        }
        return true;
    default:
        return true; /* true, false, null: the type is the value */
    }
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return mix(h);
}

/* Equal values (json_same) hash equal: numbers by their double value. */
uint64_t json_same_hash(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_INTEGER:
    case JSON_REAL: {
        double d = json_number_value(v);
        uint64_t bits;
        if (d == 0)
            d = 0; /* -0.0 == 0 */
        memcpy(&bits, &d, sizeof bits);
        return mix(bits ^ 0x6e756dull);
    }
    case JSON_STRING:
        return hash_bytes(json_string_value(v), json_string_length(v));
    case JSON_ARRAY: {
        uint64_t h = 0x617272ull;
        for (size_t i = 0; i < json_array_size(v); i++)
            h = mix(h ^ json_same_hash(json_array_get(v, i)));
        return h;
    }
    case JSON_OBJECT: {
        /* A sum, so member order does not matter. */
        uint64_t h = 0x6f626aull;
        OBJECT_EACH(v, it)
        h += mix(hash_bytes(json_object_iter_key(it), json_object_iter_key_len(it)) ^
                 (json_same_hash(json_object_iter_value(it)) * 0x9e3779b97f4a7c15ull));
        return mix(h);
    }
    case JSON_TRUE:
        return 1;
    case JSON_FALSE:
        return 2;
    case JSON_NULL:
        return 3;
    }
    return 0;
}
