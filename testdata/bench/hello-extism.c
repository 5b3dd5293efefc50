/*
 * hello-extism.c - the hello node of examples/hello-c/hello.c packaged as an
 * Extism plugin, used to benchmark packrun against the Extism go-sdk.
 *
 * Export: hello() -> i32 (0 on success, 1 on invalid input). The plugin input
 * is the inputs object itself, {"name":"x"} (no packrun envelope); the output
 * is {"greeting":"Hello, x!"}, with "world" when the name is missing or null.
 * Input and output go through the Extism kernel imports (extism:host/env).
 * Like hello.c, the input is parsed with the same JSON scanner, the output is
 * built in a malloc'ed buffer, and the module is a wasm32-wasi reactor.
 *
 * Build: ./build.sh
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name(name)))
#define EXTISM_IMPORT(name) __attribute__((import_module("extism:host/env"), import_name(name)))

EXTISM_IMPORT("input_length") extern uint64_t extism_input_length(void);
EXTISM_IMPORT("input_load_u8") extern uint8_t extism_input_load_u8(uint64_t offset);
EXTISM_IMPORT("input_load_u64") extern uint64_t extism_input_load_u64(uint64_t offset);
EXTISM_IMPORT("alloc") extern uint64_t extism_alloc(uint64_t length);
EXTISM_IMPORT("store_u8") extern void extism_store_u8(uint64_t offset, uint8_t value);
EXTISM_IMPORT("store_u64") extern void extism_store_u64(uint64_t offset, uint64_t value);
EXTISM_IMPORT("output_set") extern void extism_output_set(uint64_t offset, uint64_t length);

/* ======================================================================
 * JSON scanning: copied verbatim from examples/hello-c/hello.c (the section
 * up to "end of JSON scanning"), so both benchmark subjects run the same
 * algorithm; keep the two in sync.
 *
 * The whole document is validated (strings, escapes, numbers, literals,
 * nesting up to MAX_DEPTH). Strings are not copied while scanning: a
 * string is reported as the raw span between its quotes plus flags, and only
 * the name is decoded, directly while it is re-encoded into the output.
 * ====================================================================== */

enum { MAX_DEPTH = 64 };

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} scanner;

#define STR_ESCAPES  1 /* contains a backslash escape */
#define STR_NONASCII 2 /* contains a byte >= 0x80 */

static void skip_ws(scanner *s) {
    while (s->p < s->end) {
        uint8_t c = *s->p;
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        s->p++;
    }
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* s->p is at the opening quote. On success the raw contents are
 * [*start, *stop), *flags is set and s->p is past the closing quote. */
static int scan_string(scanner *s, const uint8_t **start, const uint8_t **stop, int *flags) {
    const uint8_t *p = s->p + 1, *end = s->end;
    int f = 0;
    *start = p;
    while (p < end) {
        uint8_t c = *p;
        if (c == '"') {
            *stop = p;
            *flags = f;
            s->p = p + 1;
            return 1;
        }
        if (c < 0x20)
            return 0;
        if (c == '\\') {
            f |= STR_ESCAPES;
            if (end - p < 2)
                return 0;
            c = p[1];
            if (c == 'u') {
                if (end - p < 6 || (hexval(p[2]) | hexval(p[3]) | hexval(p[4]) | hexval(p[5])) < 0)
                    return 0;
                p += 6;
            } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                       c == 'r' || c == 't') {
                p += 2;
            } else {
                return 0;
            }
            continue;
        }
        if (c >= 0x80)
            f |= STR_NONASCII;
        p++;
    }
    return 0;
}

static int is_digit(const uint8_t *p, const uint8_t *end) {
    return p < end && *p >= '0' && *p <= '9';
}

static int scan_number(scanner *s) {
    const uint8_t *p = s->p, *end = s->end, *d;
    if (p < end && *p == '-')
        p++;
    if (p >= end)
        return 0;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (is_digit(p, end))
            p++;
    } else {
        return 0;
    }
    if (p < end && *p == '.') {
        d = ++p;
        while (is_digit(p, end))
            p++;
        if (p == d)
            return 0;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        d = p;
        while (is_digit(p, end))
            p++;
        if (p == d)
            return 0;
    }
    s->p = p;
    return 1;
}

static int scan_literal(scanner *s, const char *lit, size_t n) {
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n) != 0)
        return 0;
    s->p += n;
    return 1;
}

/* Called for each object member with s->p at the value; must consume it. */
typedef int (*member_fn)(scanner *s, const uint8_t *key, const uint8_t *key_end, int key_flags,
                         int depth, void *ctx);

static int skip_value(scanner *s, int depth);

/* s->p is at '{'. Calls fn (or skips the value when fn is NULL) per member. */
static int scan_object(scanner *s, int depth, member_fn fn, void *ctx) {
    if (depth >= MAX_DEPTH)
        return 0;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return 1;
    }
    for (;;) {
        const uint8_t *k, *ke;
        int kf;
        if (s->p >= s->end || *s->p != '"' || !scan_string(s, &k, &ke, &kf))
            return 0;
        skip_ws(s);
        if (s->p >= s->end || *s->p != ':')
            return 0;
        s->p++;
        skip_ws(s);
        if (!(fn ? fn(s, k, ke, kf, depth + 1, ctx) : skip_value(s, depth + 1)))
            return 0;
        skip_ws(s);
        if (s->p >= s->end)
            return 0;
        if (*s->p == ',') {
            s->p++;
            skip_ws(s);
            continue;
        }
        if (*s->p == '}') {
            s->p++;
            return 1;
        }
        return 0;
    }
}

static int scan_array(scanner *s, int depth) {
    if (depth >= MAX_DEPTH)
        return 0;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return 1;
    }
    for (;;) {
        if (!skip_value(s, depth + 1))
            return 0;
        skip_ws(s);
        if (s->p >= s->end)
            return 0;
        if (*s->p == ',') {
            s->p++;
            skip_ws(s);
            continue;
        }
        if (*s->p == ']') {
            s->p++;
            return 1;
        }
        return 0;
    }
}

/* Validates and skips the value at s->p. */
static int skip_value(scanner *s, int depth) {
    const uint8_t *a, *b;
    int f;
    if (s->p >= s->end)
        return 0;
    switch (*s->p) {
    case '"':
        return scan_string(s, &a, &b, &f);
    case '{':
        return scan_object(s, depth, NULL, NULL);
    case '[':
        return scan_array(s, depth);
    case 't':
        return scan_literal(s, "true", 4);
    case 'f':
        return scan_literal(s, "false", 5);
    case 'n':
        return scan_literal(s, "null", 4);
    default:
        return scan_number(s);
    }
}

/* Reads the escape at p (p[0] == '\\', already validated by scan_string).
 * Returns the position after it; *cp is the code point. A \uXXXX high
 * surrogate followed by a \uXXXX low surrogate is combined; any other
 * surrogate becomes U+FFFD. */
static const uint8_t *read_escape(const uint8_t *p, const uint8_t *end, uint32_t *cp) {
    uint32_t u;
    switch (p[1]) {
    case 'b': *cp = '\b'; return p + 2;
    case 'f': *cp = '\f'; return p + 2;
    case 'n': *cp = '\n'; return p + 2;
    case 'r': *cp = '\r'; return p + 2;
    case 't': *cp = '\t'; return p + 2;
    case 'u': break;
    default: *cp = p[1]; return p + 2; /* " \ / */
    }
    u = (uint32_t)(hexval(p[2]) << 12 | hexval(p[3]) << 8 | hexval(p[4]) << 4 | hexval(p[5]));
    p += 6;
    if (u >= 0xD800 && u <= 0xDBFF && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
        uint32_t lo = (uint32_t)(hexval(p[2]) << 12 | hexval(p[3]) << 8 | hexval(p[4]) << 4 | hexval(p[5]));
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
            *cp = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            return p + 6;
        }
    }
    *cp = (u >= 0xD800 && u <= 0xDFFF) ? 0xFFFD : u;
    return p;
}

/* Length of the well-formed UTF-8 sequence at p (p[0] >= 0x80), or 0. */
static size_t utf8_seq(const uint8_t *p, const uint8_t *end) {
    uint8_t c = p[0];
    size_t avail = (size_t)(end - p);
    if (c >= 0xC2 && c <= 0xDF)
        return avail >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (avail < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
            return 0;
        if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0))
            return 0; /* overlong, surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (avail < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
            return 0;
        if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] >= 0x90))
            return 0; /* overlong, > U+10FFFF */
        return 4;
    }
    return 0;
}

/* Output sink; with d == NULL it only counts. */
typedef struct {
    uint8_t *d;
    uint64_t n;
} sink;

static void put(sink *o, uint8_t c) {
    if (o->d)
        o->d[o->n] = c;
    o->n++;
}

static void put_cp(sink *o, uint32_t cp) {
    static const char hex[] = "0123456789abcdef";
    if (cp < 0x80) {
        switch (cp) {
        case '"': put(o, '\\'); put(o, '"'); return;
        case '\\': put(o, '\\'); put(o, '\\'); return;
        case '\b': put(o, '\\'); put(o, 'b'); return;
        case '\f': put(o, '\\'); put(o, 'f'); return;
        case '\n': put(o, '\\'); put(o, 'n'); return;
        case '\r': put(o, '\\'); put(o, 'r'); return;
        case '\t': put(o, '\\'); put(o, 't'); return;
        }
        if (cp < 0x20) {
            put(o, '\\'); put(o, 'u'); put(o, '0'); put(o, '0');
            put(o, hex[cp >> 4]); put(o, hex[cp & 15]);
            return;
        }
        put(o, (uint8_t)cp);
    } else if (cp < 0x800) {
        put(o, (uint8_t)(0xC0 | cp >> 6));
        put(o, (uint8_t)(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        put(o, (uint8_t)(0xE0 | cp >> 12));
        put(o, (uint8_t)(0x80 | (cp >> 6 & 0x3F)));
        put(o, (uint8_t)(0x80 | (cp & 0x3F)));
    } else {
        put(o, (uint8_t)(0xF0 | cp >> 18));
        put(o, (uint8_t)(0x80 | (cp >> 12 & 0x3F)));
        put(o, (uint8_t)(0x80 | (cp >> 6 & 0x3F)));
        put(o, (uint8_t)(0x80 | (cp & 0x3F)));
    }
}

/* Re-encodes the raw (validated) JSON string contents [p, end) as the body of
 * a JSON string: escapes are decoded and re-escaped canonically, invalid
 * UTF-8 bytes become U+FFFD. */
static void put_json_string_body(sink *o, const uint8_t *p, const uint8_t *end) {
    while (p < end) {
        uint32_t cp;
        if (*p == '\\') {
            p = read_escape(p, end, &cp);
            put_cp(o, cp);
        } else if (*p < 0x80) {
            put_cp(o, *p++);
        } else {
            size_t n = utf8_seq(p, end);
            if (n == 0) {
                put_cp(o, 0xFFFD);
                p++;
            } else {
                while (n--)
                    put(o, *p++);
            }
        }
    }
}

/* Compares a raw key span with an ASCII literal, decoding escapes if needed. */
static int key_equals(const uint8_t *k, const uint8_t *ke, int flags, const char *lit, size_t n) {
    size_t i = 0;
    if (!(flags & STR_ESCAPES))
        return (size_t)(ke - k) == n && memcmp(k, lit, n) == 0;
    while (k < ke) {
        uint32_t cp;
        if (*k == '\\')
            k = read_escape(k, ke, &cp);
        else
            cp = *k++;
        if (i >= n || cp != (uint8_t)lit[i])
            return 0;
        i++;
    }
    return i == n;
}

static int is_null(const uint8_t *v, const uint8_t *v_end) {
    return v_end - v == 4 && memcmp(v, "null", 4) == 0;
}

/* ---- the hello node's view of its inputs ---- */

enum { NAME_DEFAULT, NAME_STRING, NAME_NOT_STRING };

typedef struct {
    int inputs_is_object; /* inputs absent, null or an object */
    int name;             /* NAME_* */
    const uint8_t *name_start, *name_end;
    int name_flags;
} hello_args;

static int inputs_member(scanner *s, const uint8_t *k, const uint8_t *ke, int kf, int depth, void *ctx) {
    hello_args *a = ctx;
    const uint8_t *v = s->p;
    if (!key_equals(k, ke, kf, "name", 4))
        return skip_value(s, depth);
    if (v < s->end && *v == '"') {
        if (!scan_string(s, &a->name_start, &a->name_end, &a->name_flags))
            return 0;
        a->name = NAME_STRING;
        return 1;
    }
    if (!skip_value(s, depth))
        return 0;
    a->name = is_null(v, s->p) ? NAME_DEFAULT : NAME_NOT_STRING;
    return 1;
}

/* Parses the inputs value at s->p (the last "inputs" member wins). */
static int parse_inputs(scanner *s, int depth, hello_args *a) {
    const uint8_t *v = s->p;
    a->inputs_is_object = 1;
    a->name = NAME_DEFAULT;
    if (v < s->end && *v == '{')
        return scan_object(s, depth, inputs_member, a);
    if (!skip_value(s, depth))
        return 0;
    a->inputs_is_object = is_null(v, s->p);
    return 1;
}

/* ======================= end of JSON scanning ======================= */

static const char OK_PREFIX[] = "{\"greeting\":\"Hello, ";
static const char OK_SUFFIX[] = "!\"}";
static const char DEFAULT_NAME[] = "world";

/* Builds the output in a malloc'ed buffer (same code as greet() in hello.c).
 * Returns NULL on failure. */
static uint8_t *greet(const hello_args *a, size_t *out_len) {
    const uint8_t *name = (const uint8_t *)DEFAULT_NAME;
    size_t raw = sizeof DEFAULT_NAME - 1, pre = sizeof OK_PREFIX - 1, suf = sizeof OK_SUFFIX - 1;
    int plain = 1; /* ASCII without escapes: copied as is */
    uint64_t body = raw;
    uint8_t *out;
    if (a->name == NAME_STRING) {
        name = a->name_start;
        raw = body = (size_t)(a->name_end - a->name_start);
        if (a->name_flags != 0) {
            sink count = {NULL, 0};
            put_json_string_body(&count, name, name + raw);
            body = count.n;
            plain = 0;
        }
    }
    if (body > INT32_MAX - pre - suf)
        return NULL;
    out = malloc(pre + body + suf);
    if (!out)
        return NULL;
    memcpy(out, OK_PREFIX, pre);
    if (plain) {
        memcpy(out + pre, name, raw);
    } else {
        sink o = {out + pre, 0};
        put_json_string_body(&o, name, name + raw);
    }
    memcpy(out + pre + body, OK_SUFFIX, suf);
    *out_len = pre + body + suf;
    return out;
}

/* The input is the inputs object itself. */
static int parse_input(const uint8_t *in, size_t len, hello_args *a) {
    scanner s = {in, in + len};
    skip_ws(&s);
    if (!parse_inputs(&s, 0, a))
        return 0;
    skip_ws(&s);
    return s.p == s.end;
}

EXPORT("hello")
int32_t hello(void) {
    uint64_t n = extism_input_length(), i, off;
    uint8_t *in, *out;
    size_t out_len;
    hello_args a;
    int ok;

    if (n > INT32_MAX || !(in = malloc(n ? (size_t)n : 1)))
        return 1;
    for (i = 0; i + 8 <= n; i += 8) {
        uint64_t w = extism_input_load_u64(i);
        memcpy(in + i, &w, 8);
    }
    for (; i < n; i++)
        in[i] = extism_input_load_u8(i);

    ok = parse_input(in, (size_t)n, &a) && a.inputs_is_object && a.name != NAME_NOT_STRING;
    out = ok ? greet(&a, &out_len) : NULL;
    free(in);
    if (!out)
        return 1;

    off = extism_alloc(out_len);
    for (i = 0; i + 8 <= out_len; i += 8) {
        uint64_t w;
        memcpy(&w, out + i, 8);
        extism_store_u64(off + i, w);
    }
    for (; i < out_len; i++)
        extism_store_u8(off + i, out[i]);
    extism_output_set(off, out_len);
    free(out);
    return 0;
}
