/*
 * broker/schema.c: JSON Schema checks of a tools/call's arguments against the
 * tool's inputSchema, in the broker before the call is forwarded. The schema
 * comes from the MCP server and the arguments from the agent, so both are
 * untrusted: the walk is bounded in depth and in steps, every regex match in
 * backtracking, and whatever this file cannot check refuses the call. Pure:
 * no syscalls.
 */
#include "broker/schema.h"

#include "broker/ecma_regex.h"
#include "broker/json_equal.h"
#include "common/cleanup.h"
#include "common/text.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Schema levels, $ref hops included: this also ends $ref cycles. */
#define MAX_DEPTH 64
/*
 * Work per call, in subschema visits (about 0.3 us each); a regex match costs
 * REGEX_STEPS. Bounds schemas that fan out (anyOf of $refs to anyOfs) and huge
 * instances alike: a call is refused after about half a second of walking, or
 * 15,000 matches.
 */
#define MAX_STEPS 2000000ul
#define REGEX_STEPS 128
/*
 * Per match: pcre2's backtracking counter (a match that hits it takes about
 * 1 ms), nesting depth and heap (KiB).
 */
#define MATCH_LIMIT 100000u
#define DEPTH_LIMIT 20000u
#define HEAP_LIMIT_KIB 16384u
#define MAX_PATTERN 4096
#define REGEX_CACHE 32
#define MAX_REF 1024
#define PATH_SIZE 2048
/* A path shown in a reason: its head and its tail, so reasons fit in 256 bytes. */
#define PATH_SHOWN 120
#define MSG_SIZE 512
#define QUOTE_SIZE 72
#define LIST_MAX 120

/* A check's verdict: the public API folds BAD and ERR into -1. */
enum {
    OK = 0,
    BAD = -1, /* the instance breaks the schema */
    ERR = -2, /* the schema cannot be checked: refuse, never guess */
};

/* jansson's iterators take no const object; they do not write to it. */
#define OBJECT_EACH(obj, it)                               \
    for (void *it = json_object_iter((json_t *)(obj)); it; \
         it = json_object_iter_next((json_t *)(obj), it))

#define PASS(expr)          \
    do {                    \
        int pass_ = (expr); \
        if (pass_ != OK)    \
            return pass_;   \
    } while (0)

struct regex_slot {
    const char *src; /* the schema's own string: stable for the call */
    pcre2_code *code;
};

struct check {
    const json_t *root;
    unsigned depth;
    unsigned rebased; /* inside a subschema with its own $id */
    unsigned long steps;
    bool exhausted;
    size_t plen;
    char path[PATH_SIZE];
    char msg[MSG_SIZE];
    pcre2_compile_context *cctx;
    pcre2_match_context *mctx;
    pcre2_match_data *md;
    size_t ncache;
    struct regex_slot cache[REGEX_CACHE];
};

static void check_release(struct check *ck)
{
    for (size_t i = 0; i < ck->ncache; i++)
        pcre2_code_free(ck->cache[i].code);
    pcre2_match_data_free(ck->md);
    pcre2_match_context_free(ck->mctx);
    pcre2_compile_context_free(ck->cctx);
}

static int check_value(struct check *ck, const json_t *schema, const json_t *inst);

/* ---- messages and paths ------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static int fail(struct check *ck, int verdict,
                                                      const char *fmt, ...)
{
    char reason[MSG_SIZE - PATH_SHOWN - 16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    size_t head = ck->plen, tail = ck->plen;
    if (ck->plen > PATH_SHOWN) {
        /* Cut at segment starts: "arguments.a[0]...[7].name". */
        head = PATH_SHOWN / 2;
        while (head > 0 && ck->path[head] != '.' && ck->path[head] != '[')
            head--;
        tail = ck->plen - PATH_SHOWN / 2;
        while (tail < ck->plen && ck->path[tail] != '.' && ck->path[tail] != '[')
            tail++;
        if (head == 0)
            head = PATH_SHOWN / 2;
    }
    snprintf(ck->msg, sizeof ck->msg, "%.*s%s%s: %s", (int)head, ck->path, head < tail ? "..." : "",
             ck->path + tail, reason);
    return verdict;
}

/*
 * Keys, patterns and refs end up in audit reasons: quote them as JSON does
 * '"' and '\\', everything else but printable ASCII as \xNN (no forged log
 * lines), with the length capped.
 */
static const char *quote(char out[QUOTE_SIZE], const char *s, size_t len)
{
    return text_quote(out, QUOTE_SIZE, s, len, true);
}

static void path_append(struct check *ck, const char *seg)
{
    size_t n = strlen(seg);
    /* Keep room for "..." so a cut path says it was cut. */
    if (ck->plen + n + 4 > sizeof ck->path) {
        if (ck->plen < 3 || memcmp(ck->path + ck->plen - 3, "...", 3) != 0) {
            memcpy(ck->path + ck->plen, "...", 4);
            ck->plen += 3;
        }
        return;
    }
    memcpy(ck->path + ck->plen, seg, n + 1);
    ck->plen += n;
}

static bool is_ident(const char *s, size_t n)
{
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

/* Each push returns the length for path_pop(). */
static size_t path_push_key(struct check *ck, const char *key, size_t n)
{
    size_t old = ck->plen;
    char seg[QUOTE_SIZE + 4];
    if (is_ident(key, n)) {
        snprintf(seg, sizeof seg, ".%.*s", (int)n, key);
    } else {
        char q[QUOTE_SIZE];
        snprintf(seg, sizeof seg, "[%s]", quote(q, key, n));
    }
    path_append(ck, seg);
    return old;
}

static size_t path_push_index(struct check *ck, size_t i)
{
    size_t old = ck->plen;
    char seg[32];
    snprintf(seg, sizeof seg, "[%zu]", i);
    path_append(ck, seg);
    return old;
}

static void path_pop(struct check *ck, size_t old)
{
    ck->plen = old;
    ck->path[old] = '\0';
}

static const char *got_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
        return "null";
    }
    return "unknown";
}

static const char *plural(size_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* Shortest text that reads back as the same double, or the integer. */
static const char *fmt_num(char out[40], const json_t *v)
{
    if (json_is_integer(v)) {
        snprintf(out, 40, "%lld", (long long)json_integer_value(v));
        return out;
    }
    double d = json_real_value(v);
    snprintf(out, 40, "%.15g", d);
    if (strtod(out, NULL) != d)
        snprintf(out, 40, "%.17g", d);
    return out;
}

/* A schema's value (never the instance's) as compact ASCII JSON, capped. */
static void fmt_json(char *out, size_t size, const json_t *v)
{
    _cleanup_free_ char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
    if (!s) {
        snprintf(out, size, "(value)");
        return;
    }
    if (strlen(s) >= size && size > 4)
        snprintf(out, size, "%.*s...", (int)(size - 4), s);
    else
        snprintf(out, size, "%s", s);
}

/* Past the budget, every later step fails too, and so does the whole check. */
static int too_costly(struct check *ck)
{
    ck->exhausted = true;
    return fail(ck, ERR, "schema too costly to check (over %lu steps)", MAX_STEPS);
}

/* Charge N steps for a keyword's own loop (a long enum, type or required list). */
static int spend(struct check *ck, size_t n)
{
    ck->steps += n;
    return ck->steps > MAX_STEPS ? too_costly(ck) : OK;
}

/* ---- keyword values ---------------------------------------------------- */

/* 1 with *OUT when KW is present, 0 when absent, ERR when it is no count. */
static int get_count(struct check *ck, const json_t *schema, const char *kw, size_t *out)
{
    const json_t *v = json_object_get(schema, kw);
    if (!v)
        return 0;
    if (!json_is_number(v) || !json_is_integral(v) || json_number_value(v) < 0)
        return fail(ck, ERR, "invalid schema: '%s' must be a non-negative integer", kw);
    if (json_is_integer(v))
        *out = (size_t)json_integer_value(v);
    else
        *out = json_real_value(v) >= 1.8e19 ? SIZE_MAX : (size_t)json_real_value(v);
    return 1;
}

/* OK with *OUT (NULL when absent), or ERR when KW is present but no number. */
static int get_number(struct check *ck, const json_t *schema, const char *kw, const json_t **out)
{
    *out = json_object_get(schema, kw);
    if (*out && !json_is_number(*out))
        return fail(ck, ERR, "invalid schema: '%s' must be a number", kw);
    return OK;
}

static int get_kind(struct check *ck, const json_t *schema, const char *kw, json_type want,
                    const json_t **out)
{
    *out = json_object_get(schema, kw);
    if (*out && json_typeof(*out) != want)
        return fail(ck, ERR, "invalid schema: '%s' must be an %s", kw,
                    want == JSON_ARRAY ? "array" : "object");
    return OK;
}

/* ---- regular expressions ----------------------------------------------- */

static int regex_setup(struct check *ck)
{
    if (ck->md)
        return OK;
    ck->cctx = pcre2_compile_context_create(NULL);
    ck->mctx = pcre2_match_context_create(NULL);
    ck->md = pcre2_match_data_create(1, NULL);
    if (!ck->cctx || !ck->mctx || !ck->md)
        return fail(ck, ERR, "out of memory");
    pcre2_set_compile_extra_options(ck->cctx, PCRE2_EXTRA_ALT_BSUX);
    /* Hostile patterns and subjects must not hold the broker. */
    pcre2_set_match_limit(ck->mctx, MATCH_LIMIT);
    pcre2_set_depth_limit(ck->mctx, DEPTH_LIMIT);
    pcre2_set_heap_limit(ck->mctx, HEAP_LIMIT_KIB);
    return OK;
}

/* The compiled pattern SRC; *OWNED when the caller must free it (cache full). */
static int regex_get(struct check *ck, const char *src, size_t n, pcre2_code **out, bool *owned)
{
    char q[QUOTE_SIZE];
    *owned = false;
    for (size_t i = 0; i < ck->ncache; i++) {
        if (ck->cache[i].src == src) {
            *out = ck->cache[i].code;
            return OK;
        }
    }
    PASS(regex_setup(ck));
    if (n > MAX_PATTERN)
        return fail(ck, ERR, "cannot check pattern %s: longer than %d bytes", quote(q, src, n),
                    MAX_PATTERN);

    struct strbuf b = { 0 };
    char bad = 0;
    int translated = ecma_to_pcre(src, n, &b, &bad);
    _cleanup_free_ char *pat = b.s;
    if (translated < 0)
        return fail(ck, ERR, "cannot check pattern %s: \\%c is no ECMA 262 escape",
                    quote(q, src, n), bad);
    if (b.failed)
        return fail(ck, ERR, "out of memory");

    int code = 0;
    PCRE2_SIZE off = 0;
    uint32_t opts = PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALT_BSUX | PCRE2_ALLOW_EMPTY_CLASS |
        PCRE2_MATCH_UNSET_BACKREF | PCRE2_NEVER_BACKSLASH_C | PCRE2_NEVER_UCP;
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)(pat ? pat : ""), b.len, opts, &code, &off, ck->cctx);
    if (!re) {
        char reason[160];
        pcre2_get_error_message(code, (PCRE2_UCHAR *)reason, sizeof reason);
        return fail(ck, ERR, "cannot check pattern %s: %s", quote(q, src, n), reason);
    }
    if (ck->ncache < REGEX_CACHE) {
        ck->cache[ck->ncache++] = (struct regex_slot){ src, re };
    } else {
        *owned = true;
    }
    *out = re;
    return OK;
}

/* 1 when pattern SRC matches somewhere in SUBJECT (unanchored), 0 when not, or ERR. */
static int regex_search(struct check *ck, const char *src, size_t n, const char *subject,
                        size_t slen)
{
    char q[QUOTE_SIZE];
    pcre2_code *re = NULL;
    bool owned = false;
    PASS(spend(ck, REGEX_STEPS));
    PASS(regex_get(ck, src, n, &re, &owned));
    int rc = pcre2_match(re, (PCRE2_SPTR)subject, slen, 0, 0, ck->md, ck->mctx);
    if (owned)
        pcre2_code_free(re);
    if (rc >= 0)
        return 1;
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT)
        return fail(ck, ERR, "cannot check pattern %s: matching hit its backtracking limit",
                    quote(q, src, n));
    char reason[160];
    pcre2_get_error_message(rc, (PCRE2_UCHAR *)reason, sizeof reason);
    return fail(ck, ERR, "cannot check pattern %s: %s", quote(q, src, n), reason);
}

/* ---- $ref -------------------------------------------------------------- */

/*
 * A subschema whose $id names another document changes what its refs are
 * relative to. Resolving them against the root would check the wrong schema:
 * refs under such a subschema, or through one, are refused.
 */
static bool has_base_id(const json_t *v)
{
    const json_t *id = json_object_get(v, "$id");
    return json_is_string(id) && json_string_value(id)[0] != '#';
}

/* A local reference ("#", "#/$defs/a", "#/properties/x/items/0") into the root. */
static const json_t *resolve_ref(const json_t *root, const char *ref, size_t n)
{
    char ptr[MAX_REF];
    size_t len = 0;
    if (n == 0 || ref[0] != '#' || n > sizeof ptr)
        return NULL;
    /* A URI fragment: percent-decode first, then read the JSON pointer. */
    for (size_t i = 1; i < n; i++) {
        if (ref[i] == '%') {
            int hi = i + 2 < n ? hex_digit((unsigned char)ref[i + 1]) : -1;
            int lo = i + 2 < n ? hex_digit((unsigned char)ref[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return NULL;
            ptr[len++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            ptr[len++] = ref[i];
        }
    }
    const json_t *at = root;
    if (len == 0)
        return at;
    if (ptr[0] != '/')
        return NULL; /* "#name": an $anchor, which this file does not resolve */
    size_t i = 1;
    for (;;) {
        char tok[MAX_REF];
        size_t t = 0;
        for (; i < len && ptr[i] != '/'; i++) {
            if (ptr[i] != '~') {
                tok[t++] = ptr[i];
                continue;
            }
            if (i + 1 >= len || (ptr[i + 1] != '0' && ptr[i + 1] != '1'))
                return NULL;
            tok[t++] = ptr[++i] == '0' ? '~' : '/';
        }
        if (json_is_object(at)) {
            at = json_object_getn(at, tok, t);
        } else if (json_is_array(at)) {
            size_t idx = 0;
            if (t == 0 || t > 9 || (t > 1 && tok[0] == '0'))
                return NULL;
            for (size_t k = 0; k < t; k++) {
                if (tok[k] < '0' || tok[k] > '9')
                    return NULL;
                idx = idx * 10 + (size_t)(tok[k] - '0');
            }
            at = json_array_get(at, idx);
        } else {
            return NULL;
        }
        if (!at || has_base_id(at))
            return NULL;
        if (i >= len)
            return at;
        i++; /* past the '/' */
    }
}

/* ---- keywords by instance type ----------------------------------------- */

/* In the order reasons list them: "expected a string or null". */
enum type_id { T_STRING, T_NUMBER, T_INTEGER, T_BOOLEAN, T_OBJECT, T_ARRAY, T_NULL, NTYPES };

static const struct {
    const char *name;
    const char *phrase; /* in "expected ..." */
} types[NTYPES] = {
    [T_STRING] = { "string", "a string" },
    [T_NUMBER] = { "number", "a number" },
    [T_INTEGER] = { "integer", "an integer" },
    [T_BOOLEAN] = { "boolean", "a boolean" },
    [T_OBJECT] = { "object", "an object" },
    [T_ARRAY] = { "array", "an array" },
    [T_NULL] = { "null", "null" },
};

static bool type_matches(enum type_id t, const json_t *v)
{
    switch (t) {
    case T_STRING:
        return json_is_string(v);
    case T_NUMBER:
        return json_is_number(v);
    case T_INTEGER:
        return json_is_number(v) && json_is_integral(v); /* 3.0 too */
    case T_BOOLEAN:
        return json_is_boolean(v);
    case T_OBJECT:
        return json_is_object(v);
    case T_ARRAY:
        return json_is_array(v);
    case T_NULL:
    case NTYPES:
        break;
    }
    return json_is_null(v);
}

static int type_bit(struct check *ck, const json_t *name, unsigned *mask)
{
    char q[QUOTE_SIZE];
    if (!json_is_string(name))
        return fail(ck, ERR, "invalid schema: 'type' must be a string or an array of strings");
    for (enum type_id t = 0; t < NTYPES; t++) {
        if (strcmp(json_string_value(name), types[t].name) == 0) {
            *mask |= 1u << t;
            return OK;
        }
    }
    return fail(ck, ERR, "invalid schema: unknown type %s",
                quote(q, json_string_value(name), json_string_length(name)));
}

static int check_type(struct check *ck, const json_t *type, const json_t *inst)
{
    unsigned mask = 0;
    PASS(spend(ck, json_array_size(type)));
    if (json_is_array(type)) {
        for (size_t i = 0; i < json_array_size(type); i++)
            PASS(type_bit(ck, json_array_get(type, i), &mask));
    } else {
        PASS(type_bit(ck, type, &mask));
    }
    if (!mask)
        return fail(ck, ERR, "invalid schema: 'type' is an empty array");
    for (enum type_id t = 0; t < NTYPES; t++)
        if ((mask & (1u << t)) && type_matches(t, inst))
            return OK;

    char num[40];
    if (mask == 1u << T_INTEGER && json_is_number(inst))
        return fail(ck, BAD, "expected an integer, got %s", fmt_num(num, inst));
    char want[160] = "";
    size_t left = (size_t)__builtin_popcount(mask), o = 0;
    for (enum type_id t = 0; t < NTYPES; t++) {
        if (!(mask & (1u << t)))
            continue;
        left--;
        o += (size_t)snprintf(want + o, sizeof want - o, "%s%s", types[t].phrase,
                              left > 1        ? ", "
                                  : left == 1 ? " or "
                                              : "");
    }
    return fail(ck, BAD, "expected %s, got %s", want, got_name(inst));
}

static int check_enum(struct check *ck, const json_t *schema, const json_t *inst)
{
    const json_t *e = NULL;
    PASS(get_kind(ck, schema, "enum", JSON_ARRAY, &e));
    if (!e)
        return OK;
    PASS(spend(ck, json_array_size(e)));
    for (size_t i = 0; i < json_array_size(e); i++)
        if (json_same(json_array_get(e, i), inst))
            return OK;
    char list[LIST_MAX + 8] = "";
    size_t o = 0;
    for (size_t i = 0; i < json_array_size(e) && o < LIST_MAX; i++) {
        char one[LIST_MAX];
        fmt_json(one, sizeof one, json_array_get(e, i));
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", i ? ", " : "", one);
    }
    if (o >= LIST_MAX)
        snprintf(list + LIST_MAX - 4, 8, "...");
    return fail(ck, BAD, "expected one of %s", list);
}

static int check_const(struct check *ck, const json_t *schema, const json_t *inst)
{
    const json_t *c = json_object_get(schema, "const");
    if (c && !json_same(c, inst)) {
        char one[LIST_MAX];
        fmt_json(one, sizeof one, c);
        return fail(ck, BAD, "expected %s", one);
    }
    return OK;
}

static int check_string(struct check *ck, const json_t *schema, const json_t *inst)
{
    const char *s = json_string_value(inst);
    size_t n = json_string_length(inst), min = 0, max = 0;
    int has_min, has_max;
    if ((has_min = get_count(ck, schema, "minLength", &min)) < 0)
        return has_min;
    if ((has_max = get_count(ck, schema, "maxLength", &max)) < 0)
        return has_max;
    if (has_min || has_max) {
        /* Lengths count code points, as RFC 8259 characters: jansson's UTF-8 is valid. */
        size_t cps = utf8_length(s, n);
        if (has_min && cps < min)
            return fail(ck, BAD, "expected at least %zu %s, got %zu", min,
                        plural(min, "character", "characters"), cps);
        if (has_max && cps > max)
            return fail(ck, BAD, "expected at most %zu %s, got %zu", max,
                        plural(max, "character", "characters"), cps);
    }
    const json_t *pat = json_object_get(schema, "pattern");
    if (pat) {
        char q[QUOTE_SIZE];
        if (!json_is_string(pat))
            return fail(ck, ERR, "invalid schema: 'pattern' must be a string");
        int m = regex_search(ck, json_string_value(pat), json_string_length(pat), s, n);
        if (m < 0)
            return m;
        if (!m)
            return fail(ck, BAD, "does not match pattern %s",
                        quote(q, json_string_value(pat), json_string_length(pat)));
    }
    return OK;
}

static bool is_multiple(const json_t *x, const json_t *m)
{
    json_int_t mi = 0;
    if (json_is_integer(m))
        mi = json_integer_value(m);
    else if (json_is_integral(m) && json_real_value(m) < 9e18)
        mi = (json_int_t)json_real_value(m);
    if (mi > 0 && json_is_integer(x))
        return json_integer_value(x) % mi == 0;
    if (mi > 0) /* fmod is exact */
        return json_is_integral(x) && fmod(json_real_value(x), (double)mi) == 0;
    /*
     * A decimal step ("0.01") is inexact in binary, and so is the quotient:
     * allow the few ulps that parsing and dividing cost.
     */
    double q = json_number_value(x) / json_number_value(m);
    if (!isfinite(q))
        return false;
    return fabs(q - nearbyint(q)) <= 8 * DBL_EPSILON * fmax(fabs(q), 1.0);
}

static int check_number(struct check *ck, const json_t *schema, const json_t *inst)
{
    const json_t *min, *max, *xmin, *xmax, *mult;
    bool min_open = false, max_open = false;
    char a[40], b[40];
    PASS(get_number(ck, schema, "minimum", &min));
    PASS(get_number(ck, schema, "maximum", &max));
    PASS(get_number(ck, schema, "multipleOf", &mult));
    /* Draft-04 spells exclusive bounds as booleans beside minimum/maximum. */
    xmin = json_object_get(schema, "exclusiveMinimum");
    if (json_is_boolean(xmin)) {
        min_open = json_is_true(xmin);
        xmin = NULL;
    } else {
        PASS(get_number(ck, schema, "exclusiveMinimum", &xmin));
    }
    xmax = json_object_get(schema, "exclusiveMaximum");
    if (json_is_boolean(xmax)) {
        max_open = json_is_true(xmax);
        xmax = NULL;
    } else {
        PASS(get_number(ck, schema, "exclusiveMaximum", &xmax));
    }

    if (min) {
        int c = json_num_cmp(inst, min);
        if (c < 0 || (min_open && c == 0))
            return fail(ck, BAD, "expected %s %s, got %s", min_open ? "more than" : "at least",
                        fmt_num(a, min), fmt_num(b, inst));
    }
    if (xmin && json_num_cmp(inst, xmin) <= 0)
        return fail(ck, BAD, "expected more than %s, got %s", fmt_num(a, xmin), fmt_num(b, inst));
    if (max) {
        int c = json_num_cmp(inst, max);
        if (c > 0 || (max_open && c == 0))
            return fail(ck, BAD, "expected %s %s, got %s", max_open ? "less than" : "at most",
                        fmt_num(a, max), fmt_num(b, inst));
    }
    if (xmax && json_num_cmp(inst, xmax) >= 0)
        return fail(ck, BAD, "expected less than %s, got %s", fmt_num(a, xmax), fmt_num(b, inst));
    if (mult) {
        if (json_number_value(mult) <= 0)
            return fail(ck, ERR, "invalid schema: 'multipleOf' must be more than 0");
        if (!is_multiple(inst, mult))
            return fail(ck, BAD, "expected a multiple of %s, got %s", fmt_num(a, mult),
                        fmt_num(b, inst));
    }
    return OK;
}

struct hashed {
    uint64_t h;
    size_t i;
};

static int cmp_hashed(const void *pa, const void *pb)
{
    const struct hashed *a = pa, *b = pb;
    if (a->h != b->h)
        return a->h < b->h ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* Sorted by hash, so a long array costs n log n, not n^2 comparisons. */
static int check_unique(struct check *ck, const json_t *inst)
{
    size_t n = json_array_size(inst);
    if (n < 2)
        return OK;
    _cleanup_free_ struct hashed *hs = calloc(n, sizeof *hs);
    if (!hs)
        return fail(ck, ERR, "out of memory");
    for (size_t i = 0; i < n; i++)
        hs[i] = (struct hashed){ json_same_hash(json_array_get(inst, i)), i };
    qsort(hs, n, sizeof *hs, cmp_hashed);
    size_t best_a = SIZE_MAX, best_b = SIZE_MAX;
    for (size_t start = 0, end; start < n; start = end) {
        for (end = start + 1; end < n && hs[end].h == hs[start].h; end++)
            ;
        for (size_t x = start; x < end; x++) {
            for (size_t y = x + 1; y < end; y++) {
                if (++ck->steps > MAX_STEPS)
                    return too_costly(ck);
                if (hs[y].i < best_b &&
                    json_same(json_array_get(inst, hs[x].i), json_array_get(inst, hs[y].i))) {
                    best_a = hs[x].i;
                    best_b = hs[y].i;
                }
            }
        }
    }
    if (best_b != SIZE_MAX)
        return fail(ck, BAD, "items %zu and %zu are equal", best_a, best_b);
    return OK;
}

static int check_items(struct check *ck, const json_t *schema, const json_t *inst)
{
    const json_t *prefix = NULL, *tuple = NULL, *rest[2] = { NULL, NULL };
    const json_t *items = json_object_get(schema, "items");
    const json_t *addl = json_object_get(schema, "additionalItems");
    size_t n = json_array_size(inst);

    /* 2020-12: prefixItems + items; draft-07: items as a tuple + additionalItems. */
    PASS(get_kind(ck, schema, "prefixItems", JSON_ARRAY, &prefix));
    if (prefix) {
        if (json_is_array(items))
            return fail(ck, ERR, "invalid schema: 'items' must be a schema beside 'prefixItems'");
        tuple = prefix;
        rest[0] = items;
        rest[1] = addl;
    } else if (json_is_array(items)) {
        tuple = items;
        rest[0] = addl;
    } else {
        rest[0] = items; /* additionalItems means nothing without a tuple */
    }
    size_t ntuple = json_array_size(tuple);
    for (size_t i = 0; i < n; i++) {
        const json_t *item = json_array_get(inst, i);
        if (i < ntuple) {
            size_t old = path_push_index(ck, i);
            int r = check_value(ck, json_array_get(tuple, i), item);
            path_pop(ck, old);
            PASS(r);
            continue;
        }
        for (size_t k = 0; k < 2; k++) {
            if (!rest[k])
                continue;
            if (json_is_false(rest[k]))
                return fail(ck, BAD, "expected at most %zu %s, got %zu", ntuple,
                            plural(ntuple, "item", "items"), n);
            size_t old = path_push_index(ck, i);
            int r = check_value(ck, rest[k], item);
            path_pop(ck, old);
            PASS(r);
        }
    }
    return OK;
}

static int check_contains(struct check *ck, const json_t *schema, const json_t *inst)
{
    const json_t *contains = json_object_get(schema, "contains");
    size_t min = 1, max = SIZE_MAX, count = 0;
    if (!contains)
        return OK;
    if (get_count(ck, schema, "minContains", &min) < 0 ||
        get_count(ck, schema, "maxContains", &max) < 0)
        return ERR;
    for (size_t i = 0; i < json_array_size(inst); i++) {
        size_t old = path_push_index(ck, i);
        int r = check_value(ck, contains, json_array_get(inst, i));
        path_pop(ck, old);
        if (r == ERR)
            return r;
        count += r == OK;
    }
    if (count < min)
        return fail(ck, BAD, "expected at least %zu %s matching 'contains', got %zu", min,
                    plural(min, "item", "items"), count);
    if (count > max)
        return fail(ck, BAD, "expected at most %zu %s matching 'contains', got %zu", max,
                    plural(max, "item", "items"), count);
    return OK;
}

static int check_array(struct check *ck, const json_t *schema, const json_t *inst)
{
    size_t n = json_array_size(inst), lim = 0;
    int r;
    if ((r = get_count(ck, schema, "minItems", &lim)) < 0)
        return r;
    if (r && n < lim)
        return fail(ck, BAD, "expected at least %zu %s, got %zu", lim, plural(lim, "item", "items"),
                    n);
    if ((r = get_count(ck, schema, "maxItems", &lim)) < 0)
        return r;
    if (r && n > lim)
        return fail(ck, BAD, "expected at most %zu %s, got %zu", lim, plural(lim, "item", "items"),
                    n);
    const json_t *unique = json_object_get(schema, "uniqueItems");
    if (unique && !json_is_boolean(unique))
        return fail(ck, ERR, "invalid schema: 'uniqueItems' must be a boolean");
    if (json_is_true(unique))
        PASS(check_unique(ck, inst));
    PASS(check_items(ck, schema, inst));
    return check_contains(ck, schema, inst);
}

/* Every name in REQ (an array of strings) must be a property of INST. */
static int check_required(struct check *ck, const json_t *req, const json_t *inst, const char *kw,
                          const char *because, size_t because_len)
{
    if (!json_is_array(req))
        return fail(ck, ERR, "invalid schema: '%s' must be an array of strings", kw);
    PASS(spend(ck, json_array_size(req)));
    for (size_t i = 0; i < json_array_size(req); i++) {
        const json_t *name = json_array_get(req, i);
        if (!json_is_string(name))
            return fail(ck, ERR, "invalid schema: '%s' must be an array of strings", kw);
        if (json_object_getn(inst, json_string_value(name), json_string_length(name)))
            continue;
        char q[QUOTE_SIZE];
        size_t old = path_push_key(ck, json_string_value(name), json_string_length(name));
        if (because)
            fail(ck, BAD, "missing property required when %s is present",
                 quote(q, because, because_len));
        else
            fail(ck, BAD, "missing required property");
        path_pop(ck, old);
        return BAD;
    }
    return OK;
}

/* One member of INST against properties, patternProperties, additionalProperties. */
static int check_member(struct check *ck, const json_t *schema, const char *key, size_t klen,
                        const json_t *val)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *pprops = json_object_get(schema, "patternProperties");
    const json_t *addl = json_object_get(schema, "additionalProperties");
    bool matched = false;
    int r = OK;

    const json_t *sub = props ? json_object_getn(props, key, klen) : NULL;
    if (sub) {
        matched = true;
        size_t old = path_push_key(ck, key, klen);
        r = check_value(ck, sub, val);
        path_pop(ck, old);
        PASS(r);
    }
    OBJECT_EACH(pprops, it)
    {
        const char *pat = json_object_iter_key(it);
        int m = regex_search(ck, pat, json_object_iter_key_len(it), key, klen);
        if (m < 0)
            return m;
        if (!m)
            continue;
        matched = true;
        size_t old = path_push_key(ck, key, klen);
        r = check_value(ck, json_object_iter_value(it), val);
        path_pop(ck, old);
        PASS(r);
    }
    if (matched || !addl)
        return OK;
    if (json_is_false(addl)) {
        char q[QUOTE_SIZE];
        return fail(ck, BAD, "unexpected property %s", quote(q, key, klen));
    }
    size_t old = path_push_key(ck, key, klen);
    r = check_value(ck, addl, val);
    path_pop(ck, old);
    return r;
}

static int check_property_name(struct check *ck, const json_t *names, const char *key, size_t klen)
{
    char q[QUOTE_SIZE], seg[QUOTE_SIZE + 20];
    _cleanup_(json_decrefp) json_t *name = json_stringn(key, klen);
    if (!name)
        return fail(ck, ERR, "out of memory");
    size_t old = ck->plen;
    snprintf(seg, sizeof seg, ": property name %s", quote(q, key, klen));
    path_append(ck, seg);
    int r = check_value(ck, names, name);
    path_pop(ck, old);
    return r;
}

/* dependentRequired, dependentSchemas, and draft-07 dependencies (either kind). */
static int check_dependencies(struct check *ck, const json_t *schema, const json_t *inst)
{
    static const char *const kws[] = { "dependentRequired", "dependentSchemas", "dependencies" };
    for (size_t k = 0; k < 3; k++) {
        const json_t *deps = NULL;
        PASS(get_kind(ck, schema, kws[k], JSON_OBJECT, &deps));
        OBJECT_EACH(deps, it)
        {
            const char *key = json_object_iter_key(it);
            size_t klen = json_object_iter_key_len(it);
            const json_t *dep = json_object_iter_value(it);
            if (!json_object_getn(inst, key, klen))
                continue;
            if (k == 0 || (k == 2 && json_is_array(dep)))
                PASS(check_required(ck, dep, inst, kws[k], key, klen));
            else
                PASS(check_value(ck, dep, inst));
        }
    }
    return OK;
}

static int check_object(struct check *ck, const json_t *schema, const json_t *inst)
{
    size_t n = json_object_size(inst), lim = 0;
    const json_t *v = NULL;
    int r;
    if ((r = get_count(ck, schema, "minProperties", &lim)) < 0)
        return r;
    if (r && n < lim)
        return fail(ck, BAD, "expected at least %zu %s, got %zu", lim,
                    plural(lim, "property", "properties"), n);
    if ((r = get_count(ck, schema, "maxProperties", &lim)) < 0)
        return r;
    if (r && n > lim)
        return fail(ck, BAD, "expected at most %zu %s, got %zu", lim,
                    plural(lim, "property", "properties"), n);
    if ((v = json_object_get(schema, "required")))
        PASS(check_required(ck, v, inst, "required", NULL, 0));

    PASS(get_kind(ck, schema, "properties", JSON_OBJECT, &v));
    PASS(get_kind(ck, schema, "patternProperties", JSON_OBJECT, &v));
    const json_t *names = json_object_get(schema, "propertyNames");
    OBJECT_EACH(inst, it)
    {
        const char *key = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        if (names)
            PASS(check_property_name(ck, names, key, klen));
        PASS(check_member(ck, schema, key, klen, json_object_iter_value(it)));
    }
    return check_dependencies(ck, schema, inst);
}

/* ---- combinators ------------------------------------------------------- */

static int get_schemas(struct check *ck, const json_t *schema, const char *kw, const json_t **out)
{
    PASS(get_kind(ck, schema, kw, JSON_ARRAY, out));
    if (*out && json_array_size(*out) == 0)
        return fail(ck, ERR, "invalid schema: '%s' must not be empty", kw);
    return OK;
}

static int check_combinators(struct check *ck, const json_t *schema, const json_t *inst)
{
    const json_t *all, *any, *one;
    PASS(get_schemas(ck, schema, "allOf", &all));
    PASS(get_schemas(ck, schema, "anyOf", &any));
    PASS(get_schemas(ck, schema, "oneOf", &one));

    for (size_t i = 0; i < json_array_size(all); i++)
        PASS(check_value(ck, json_array_get(all, i), inst));

    if (any) {
        char saved[MSG_SIZE] = "";
        bool matched = false;
        for (size_t i = 0; i < json_array_size(any) && !matched; i++) {
            int r = check_value(ck, json_array_get(any, i), inst);
            matched = r == OK;
            /* A branch it cannot check decides only if no other branch matches. */
            if (r == ERR && !saved[0])
                memcpy(saved, ck->msg, sizeof saved);
        }
        if (!matched && saved[0]) {
            memcpy(ck->msg, saved, sizeof saved);
            return ERR;
        }
        if (!matched)
            return fail(ck, BAD, "does not match any of the %zu schemas in anyOf",
                        json_array_size(any));
    }

    if (one) {
        size_t first = SIZE_MAX;
        for (size_t i = 0; i < json_array_size(one); i++) {
            int r = check_value(ck, json_array_get(one, i), inst);
            if (r == ERR)
                return r;
            if (r == OK && first != SIZE_MAX)
                return fail(ck, BAD, "matches more than one schema in oneOf (%zu and %zu)", first,
                            i);
            if (r == OK)
                first = i;
        }
        if (first == SIZE_MAX)
            return fail(ck, BAD, "does not match any of the %zu schemas in oneOf",
                        json_array_size(one));
    }

    const json_t *neg = json_object_get(schema, "not");
    if (neg) {
        int r = check_value(ck, neg, inst);
        if (r == ERR)
            return r;
        if (r == OK)
            return fail(ck, BAD, "matches the schema in 'not'");
    }

    const json_t *cond = json_object_get(schema, "if");
    if (cond) {
        int r = check_value(ck, cond, inst);
        if (r == ERR)
            return r;
        const json_t *branch = json_object_get(schema, r == OK ? "then" : "else");
        if (branch)
            PASS(check_value(ck, branch, inst));
    }
    return OK;
}

/* ---- the walk ---------------------------------------------------------- */

/* Keywords that constrain values in ways this file does not check. */
static const char *const refused[] = {
    "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
    "$recursiveRef",         "extends",          "disallow",
    "divisibleBy",
};

static int check_keywords(struct check *ck, const json_t *schema, const json_t *inst);

static int check_schema(struct check *ck, const json_t *schema, const json_t *inst)
{
    if (++ck->steps > MAX_STEPS || ck->exhausted)
        return too_costly(ck);
    if (json_is_true(schema))
        return OK;
    if (json_is_false(schema))
        return fail(ck, BAD, "not allowed by the schema");
    if (!json_is_object(schema))
        return fail(ck, ERR, "invalid schema: expected an object or a boolean, got %s",
                    got_name(schema));

    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const json_t *v = json_object_get(schema, refused[i]);
        /* "unevaluatedProperties: true" allows what it would check: harmless. */
        if (v && !json_is_true(v))
            return fail(ck, ERR, "schema keyword '%s' is not supported by the broker", refused[i]);
    }
    if (json_is_null(inst) && json_is_true(json_object_get(schema, "nullable")))
        return OK;

    bool rebased = schema != ck->root && has_base_id(schema);
    ck->rebased += rebased;
    int r = check_keywords(ck, schema, inst);
    ck->rebased -= rebased;
    return r;
}

static int check_keywords(struct check *ck, const json_t *schema, const json_t *inst)
{
    const json_t *ref = json_object_get(schema, "$ref");
    if (ref) {
        char q[QUOTE_SIZE];
        if (!json_is_string(ref))
            return fail(ck, ERR, "invalid schema: '$ref' must be a string");
        const json_t *target = ck->rebased
            ? NULL
            : resolve_ref(ck->root, json_string_value(ref), json_string_length(ref));
        if (!target)
            return fail(ck, ERR, "cannot resolve $ref %s",
                        quote(q, json_string_value(ref), json_string_length(ref)));
        /* Siblings of $ref apply too (2019-09 on; draft-07 ignored them): stricter. */
        PASS(check_value(ck, target, inst));
    }

    const json_t *type = json_object_get(schema, "type");
    if (type)
        PASS(check_type(ck, type, inst));
    PASS(check_enum(ck, schema, inst));
    PASS(check_const(ck, schema, inst));

    switch (json_typeof(inst)) {
    case JSON_STRING:
        PASS(check_string(ck, schema, inst));
        break;
    case JSON_INTEGER:
    case JSON_REAL:
        PASS(check_number(ck, schema, inst));
        break;
    case JSON_ARRAY:
        PASS(check_array(ck, schema, inst));
        break;
    case JSON_OBJECT:
        PASS(check_object(ck, schema, inst));
        break;
    default:
        break;
    }
    return check_combinators(ck, schema, inst);
}

static int check_value(struct check *ck, const json_t *schema, const json_t *inst)
{
    if (ck->depth >= MAX_DEPTH)
        return fail(ck, ERR, "schema nesting deeper than %d levels (or a $ref cycle)", MAX_DEPTH);
    ck->depth++;
    int r = check_schema(ck, schema, inst);
    ck->depth--;
    return r;
}

int schema_check(const json_t *schema, const json_t *instance, const char *root_name, char *why,
                 size_t len)
{
    _cleanup_(check_release) struct check ck = { .root = schema };
    snprintf(ck.path, 65, "%s", root_name ? root_name : "value");
    size_t root_len = ck.plen = strlen(ck.path);
    if (!schema || !instance)
        return why_printf(why, len, "%s: nothing to check", ck.path);

    int r = check_value(&ck, schema, instance);
    if (ck.exhausted) {
        /* Wherever the budget ran out, the whole check failed. */
        path_pop(&ck, root_len);
        r = too_costly(&ck);
    }
    if (r != OK)
        return why_printf(why, len, "%s", ck.msg);
    return 0;
}
