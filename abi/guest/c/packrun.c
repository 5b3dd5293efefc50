//go:build ignore

// (The line above only keeps the Go tool from treating this directory as a
// cgo package: its Go test file lives next to this C source.)

/*
 * packrun.c - C guest SDK for the packrun host ABI v1 (see packrun.h).
 *
 * Build it together with the node's source for wasm32-wasi as a reactor:
 *   clang --target=wasm32-wasi -O2 -mexec-model=reactor -Wl,--strip-all \
 *         -I abi/guest/c -o node.wasm node.c abi/guest/c/packrun.c
 *
 * Sections: imports, heap and invocation scope, node registry, exports,
 * JSON scanning, JSON writing, outcomes, host calls.
 */
#include "packrun.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name(name)))
#define OPENWOP(name) __attribute__((import_module("openwop"), import_name(name)))
#define HOSTV1(name) __attribute__((import_module("packrun:host/v1"), import_name(name)))

typedef unsigned char uchar;

/* ================================================================ imports */

/* (ptr,len) results use the packed i64 form: ptr low 32 bits, len high. */
OPENWOP("openwop_log") extern void ow_log(int32_t level, const char *ptr, int32_t len);
OPENWOP("openwop_now_ms") extern int64_t ow_now_ms(void);
OPENWOP("openwop_random") extern int32_t ow_random(void *ptr, int32_t len);
OPENWOP("openwop_variable_get") extern uint64_t ow_variable_get(const char *name, int32_t n);
OPENWOP("openwop_variable_set") extern int32_t ow_variable_set(const char *name, int32_t n, const char *v, int32_t vn);
OPENWOP("openwop_channel_read") extern uint64_t ow_channel_read(const char *name, int32_t n);
OPENWOP("openwop_channel_write") extern int32_t ow_channel_write(const char *name, int32_t n, const char *v, int32_t vn);
OPENWOP("openwop_interrupt") extern uint64_t ow_interrupt(const char *ptr, int32_t n);

/* packrun:host/v1: (req_ptr, req_len, resp_out) -> status; the host writes
 * the response (ptr, len) as two little-endian u32 at resp_out. */
typedef int32_t (*hostv1_fn)(const char *req, int32_t n, uint32_t *out);
HOSTV1("memory_get") extern int32_t h_memory_get(const char *req, int32_t n, uint32_t *out);
HOSTV1("memory_put") extern int32_t h_memory_put(const char *req, int32_t n, uint32_t *out);
HOSTV1("memory_delete") extern int32_t h_memory_delete(const char *req, int32_t n, uint32_t *out);
HOSTV1("memory_list") extern int32_t h_memory_list(const char *req, int32_t n, uint32_t *out);
HOSTV1("queue_enqueue") extern int32_t h_queue_enqueue(const char *req, int32_t n, uint32_t *out);
HOSTV1("adapter_invoke") extern int32_t h_adapter_invoke(const char *req, int32_t n, uint32_t *out);
HOSTV1("evidence_record") extern int32_t h_evidence_record(const char *req, int32_t n, uint32_t *out);
HOSTV1("artifact_put") extern int32_t h_artifact_put(const char *req, int32_t n, uint32_t *out);
HOSTV1("config_get") extern int32_t h_config_get(const char *req, int32_t n, uint32_t *out);
/* ABI 1.2: not in hostv1_lookup's table, so only a module calling
 * packrun_message_publish references it and imports it. */
HOSTV1("message_publish") extern int32_t h_message_publish(const char *req, int32_t n, uint32_t *out);
/* ABI 1.1: not in the table either, so only a module calling
 * packrun_sensor_emit imports it. */
HOSTV1("sensor_emit") extern int32_t h_sensor_emit(const char *req, int32_t n, uint32_t *out);
/* ABI 1.3: likewise, only a module calling packrun_http_send imports it. */
HOSTV1("http_request") extern int32_t h_http_request(const char *req, int32_t n, uint32_t *out);

/* Defined by PACKRUN_PACK in the node's source. */
extern const char packrun__pack_name[];
extern const size_t packrun__pack_name_len;

/* Provided by wasm-ld: the first address past static data and the stack. */
extern uchar __heap_base;

static uint64_t ptrlen(const void *ptr, size_t len) {
    return (uint64_t)(uintptr_t)ptr | ((uint64_t)len << 32);
}

/* ==================================================== heap and scope */

/* Every block handed to the host or received from it comes from malloc.
 * openwop_alloc reserves one more byte and zeroes it, so whatever the host
 * writes (request, host-call responses) is NUL-terminated. */
EXPORT("openwop_alloc")
void *openwop_alloc(int32_t size) {
    uchar *p;
    if (size < 0)
        return NULL;
    p = malloc((size_t)size + 1);
    if (p)
        p[size] = 0;
    return p;
}

/* Pointers below the heap (static strings such as the pack name or the
 * fallback envelopes) were never allocated: they are ignored. */
EXPORT("openwop_free")
void openwop_free(void *ptr, int32_t size) {
    (void)size;
    if ((uchar *)ptr < &__heap_base)
        return;
    free(ptr);
}

/* The invocation scope: blocks that live until the handler returns (host
 * responses, decoded context strings, the input copy). */
static void **scope;
static size_t scope_len, scope_cap;

/* Takes ownership of p; frees it right away and reports 0 when the scope
 * cannot grow. */
static int scope_add(void *p) {
    if (!p)
        return 0;
    if (scope_len == scope_cap) {
        size_t cap = scope_cap ? scope_cap * 2 : 16;
        void **s = realloc(scope, cap * sizeof *s);
        if (!s) {
            free(p);
            return 0;
        }
        scope = s;
        scope_cap = cap;
    }
    scope[scope_len++] = p;
    return 1;
}

static void *scope_alloc(size_t n) {
    void *p = malloc(n ? n : 1);
    return scope_add(p) ? p : NULL;
}

static void scope_release(void) {
    while (scope_len)
        free(scope[--scope_len]);
}

/* ======================================================= node registry */

typedef struct {
    const char *type_id;
    size_t len;
    packrun_handler handler;
} node;

static node *nodes;
static size_t node_count, node_cap;

int packrun_register(const char *type_id, packrun_handler handler) {
    size_t i, len;
    if (!type_id || !*type_id || !handler)
        return PACKRUN_E_ARG;
    len = strlen(type_id);
    for (i = 0; i < node_count; i++)
        if (nodes[i].len == len && memcmp(nodes[i].type_id, type_id, len) == 0)
            return PACKRUN_VALIDATION;
    if (node_count == node_cap) {
        size_t cap = node_cap ? node_cap * 2 : 8;
        node *n = realloc(nodes, cap * sizeof *n);
        if (!n)
            return PACKRUN_E_NOMEM;
        nodes = n;
        node_cap = cap;
    }
    nodes[node_count].type_id = type_id;
    nodes[node_count].len = len;
    nodes[node_count].handler = handler;
    node_count++;
    return PACKRUN_OK;
}

const char *packrun_status_name(int status) {
    switch (status) {
    case PACKRUN_OK: return "ok";
    case PACKRUN_ACCESS_DENIED: return "access_denied";
    case PACKRUN_VALIDATION: return "validation_error";
    case PACKRUN_NOT_FOUND: return "not_found";
    case PACKRUN_CAPABILITY_BREACH: return "capability_breach";
    case PACKRUN_HOST_ERROR: return "host_error";
    case PACKRUN_E_NOMEM: return "out_of_memory";
    case PACKRUN_E_JSON: return "invalid_json";
    case PACKRUN_E_TYPE: return "wrong_type";
    case PACKRUN_E_TRUNCATED: return "truncated";
    case PACKRUN_E_ARG: return "invalid_argument";
    }
    return "unknown";
}

/* ===================================================== JSON scanning */

enum { MAX_DEPTH = 64 };

typedef struct {
    const uchar *p, *end;
} scanner;

static void skip_ws(scanner *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static int hexval(uchar c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Length of the well-formed UTF-8 sequence at p (p[0] >= 0x80), or 0. */
static size_t utf8_len(const uchar *p, const uchar *end) {
    uchar c = p[0];
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

/* s->p at the opening quote; on success s->p is past the closing quote and
 * [*a, *b) is the raw contents. */
static int scan_string(scanner *s, const uchar **a, const uchar **b) {
    const uchar *p = s->p + 1, *end = s->end;
    *a = p;
    while (p < end) {
        uchar c = *p;
        if (c == '"') {
            *b = p;
            s->p = p + 1;
            return 1;
        }
        if (c < 0x20)
            return 0;
        if (c == '\\') {
            if (end - p < 2)
                return 0;
            c = p[1];
            if (c == 'u') {
                if (end - p < 6 || (hexval(p[2]) | hexval(p[3]) | hexval(p[4]) | hexval(p[5])) < 0)
                    return 0;
                p += 6;
                continue;
            }
            if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' && c != 't')
                return 0;
            p += 2;
            continue;
        }
        if (c >= 0x80) { /* JSON text must be UTF-8 */
            size_t n = utf8_len(p, end);
            if (n == 0)
                return 0;
            p += n;
            continue;
        }
        p++;
    }
    return 0;
}

static int is_digit_at(const uchar *p, const uchar *end) { return p < end && *p >= '0' && *p <= '9'; }

static int scan_number(scanner *s) {
    const uchar *p = s->p, *end = s->end, *d;
    if (p < end && *p == '-')
        p++;
    if (p >= end)
        return 0;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (is_digit_at(p, end))
            p++;
    else
        return 0;
    if (p < end && *p == '.') {
        d = ++p;
        while (is_digit_at(p, end))
            p++;
        if (p == d)
            return 0;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        d = p;
        while (is_digit_at(p, end))
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

/* Validates and skips the value at s->p (which must not be whitespace). */
static int skip_value(scanner *s, int depth) {
    const uchar *a, *b;
    uchar close;
    if (s->p >= s->end)
        return 0;
    switch (*s->p) {
    case '"':
        return scan_string(s, &a, &b);
    case 't':
        return scan_literal(s, "true", 4);
    case 'f':
        return scan_literal(s, "false", 5);
    case 'n':
        return scan_literal(s, "null", 4);
    case '{':
    case '[':
        break;
    default:
        return scan_number(s);
    }
    if (depth >= MAX_DEPTH)
        return 0;
    close = *s->p == '{' ? '}' : ']';
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 1;
    }
    for (;;) {
        if (close == '}') {
            if (s->p >= s->end || *s->p != '"' || !scan_string(s, &a, &b))
                return 0;
            skip_ws(s);
            if (s->p >= s->end || *s->p != ':')
                return 0;
            s->p++;
            skip_ws(s);
        }
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
        if (*s->p == close) {
            s->p++;
            return 1;
        }
        return 0;
    }
}

int packrun_json_valid(const char *json, size_t len) {
    scanner s;
    if (!json)
        return 0;
    s.p = (const uchar *)json;
    s.end = s.p + len;
    skip_ws(&s);
    if (!skip_value(&s, 0))
        return 0;
    skip_ws(&s);
    return s.p == s.end;
}

/* Iterates over the members of a top-level object, validating as it goes;
 * after the last member it checks that only whitespace follows. */
typedef struct {
    scanner s;
    int done;
} member_iter;

typedef struct {
    const uchar *key, *key_end; /* raw key contents */
    const uchar *val, *val_end; /* raw value */
} member;

/* PACKRUN_OK, PACKRUN_E_TYPE (not an object) or PACKRUN_E_JSON. */
static int iter_begin(member_iter *it, const char *json, size_t len) {
    it->s.p = (const uchar *)json;
    it->s.end = it->s.p + len;
    it->done = 0;
    skip_ws(&it->s);
    if (it->s.p >= it->s.end)
        return PACKRUN_E_JSON;
    if (*it->s.p != '{')
        return packrun_json_valid(json, len) ? PACKRUN_E_TYPE : PACKRUN_E_JSON;
    it->s.p++;
    skip_ws(&it->s);
    if (it->s.p < it->s.end && *it->s.p == '}') {
        it->s.p++;
        it->done = 1;
    }
    return PACKRUN_OK;
}

/* 1: *m is the next member; 0: end (document valid); -1: invalid JSON. */
static int iter_next(member_iter *it, member *m) {
    scanner *s = &it->s;
    if (it->done) {
        skip_ws(s);
        return s->p == s->end ? 0 : -1;
    }
    if (s->p >= s->end || *s->p != '"' || !scan_string(s, &m->key, &m->key_end))
        return -1;
    skip_ws(s);
    if (s->p >= s->end || *s->p != ':')
        return -1;
    s->p++;
    skip_ws(s);
    m->val = s->p;
    if (!skip_value(s, 1))
        return -1;
    m->val_end = s->p;
    skip_ws(s);
    if (s->p >= s->end)
        return -1;
    if (*s->p == ',') {
        s->p++;
        skip_ws(s);
        if (s->p < s->end && *s->p == '}')
            return -1; /* trailing comma */
        return 1;
    }
    if (*s->p == '}') {
        s->p++;
        it->done = 1;
        return 1;
    }
    return -1;
}

/* Reads one code point from validated raw string contents at *pp. Escapes
 * are decoded (surrogate pairs combined, lone surrogates -> U+FFFD) and
 * invalid UTF-8 bytes become U+FFFD. */
static uint32_t next_cp(const uchar **pp, const uchar *end) {
    const uchar *p = *pp;
    uint32_t u;
    uchar c = *p;
    if (c == '\\') {
        switch (p[1]) {
        case 'b': *pp = p + 2; return '\b';
        case 'f': *pp = p + 2; return '\f';
        case 'n': *pp = p + 2; return '\n';
        case 'r': *pp = p + 2; return '\r';
        case 't': *pp = p + 2; return '\t';
        case 'u': break;
        default: *pp = p + 2; return p[1]; /* " \ / */
        }
        u = (uint32_t)(hexval(p[2]) << 12 | hexval(p[3]) << 8 | hexval(p[4]) << 4 | hexval(p[5]));
        p += 6;
        if (u >= 0xD800 && u <= 0xDBFF && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            uint32_t lo = (uint32_t)(hexval(p[2]) << 12 | hexval(p[3]) << 8 | hexval(p[4]) << 4 | hexval(p[5]));
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                *pp = p + 6;
                return 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
        }
        *pp = p;
        return (u >= 0xD800 && u <= 0xDFFF) ? 0xFFFD : u;
    }
    if (c < 0x80) {
        *pp = p + 1;
        return c;
    }
    {
        size_t n = utf8_len(p, end);
        if (n == 2)
            u = (uint32_t)(c & 0x1F) << 6 | (p[1] & 0x3F);
        else if (n == 3)
            u = (uint32_t)(c & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
        else if (n == 4)
            u = (uint32_t)(c & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 | (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
        if (n == 0) {
            *pp = p + 1;
            return 0xFFFD;
        }
        *pp = p + n;
        return u;
    }
}

static size_t utf8_put(uint32_t cp, uchar out[4]) {
    if (cp < 0x80) {
        out[0] = (uchar)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uchar)(0xC0 | cp >> 6);
        out[1] = (uchar)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uchar)(0xE0 | cp >> 12);
        out[1] = (uchar)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (uchar)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uchar)(0xF0 | cp >> 18);
    out[1] = (uchar)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (uchar)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (uchar)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes raw string contents into buf (cap > 0), never splitting a
 * character; *full gets the complete decoded length. */
static int decode_string(const uchar *p, const uchar *end, char *buf, size_t cap, size_t *full) {
    size_t n = 0, total = 0;
    int truncated = 0;
    while (p < end) {
        uchar tmp[4];
        size_t k = utf8_put(next_cp(&p, end), tmp);
        if (!truncated && n + k < cap) {
            memcpy(buf + n, tmp, k);
            n += k;
        } else {
            truncated = 1;
        }
        total += k;
    }
    buf[n] = 0;
    if (full)
        *full = total;
    return truncated ? PACKRUN_E_TRUNCATED : PACKRUN_OK;
}

/* Compares raw key contents with a NUL-terminated UTF-8 key. */
static int key_equals(const uchar *p, const uchar *end, const char *key) {
    const uchar *k = (const uchar *)key;
    while (p < end) {
        uchar tmp[4];
        size_t i, n = utf8_put(next_cp(&p, end), tmp);
        for (i = 0; i < n; i++, k++)
            if (*k != tmp[i])
                return 0;
    }
    return *k == 0;
}

int packrun_json_get(const char *json, size_t len, const char *key, const char **value, size_t *value_len) {
    member_iter it;
    member m;
    const uchar *v = NULL, *ve = NULL;
    int st, r;
    if (!json || !key)
        return PACKRUN_E_ARG;
    if ((st = iter_begin(&it, json, len)) != PACKRUN_OK)
        return st;
    while ((r = iter_next(&it, &m)) > 0)
        if (key_equals(m.key, m.key_end, key))
            v = m.val, ve = m.val_end;
    if (r < 0)
        return PACKRUN_E_JSON;
    if (!v)
        return PACKRUN_NOT_FOUND;
    if (value)
        *value = (const char *)v;
    if (value_len)
        *value_len = (size_t)(ve - v);
    return PACKRUN_OK;
}

int packrun_json_string(const char *value, size_t value_len, char *buf, size_t cap, size_t *out_len) {
    scanner s;
    const uchar *a, *b;
    if (!value || !buf || cap == 0)
        return PACKRUN_E_ARG;
    buf[0] = 0;
    s.p = (const uchar *)value;
    s.end = s.p + value_len;
    skip_ws(&s);
    if (s.p < s.end && *s.p != '"')
        return packrun_json_valid(value, value_len) ? PACKRUN_E_TYPE : PACKRUN_E_JSON;
    if (s.p >= s.end || !scan_string(&s, &a, &b))
        return PACKRUN_E_JSON;
    skip_ws(&s);
    if (s.p != s.end)
        return PACKRUN_E_JSON;
    return decode_string(a, b, buf, cap, out_len);
}

static int is_null(const char *v, size_t n) { return n == 4 && memcmp(v, "null", 4) == 0; }

int packrun_json_get_string_n(const char *json, size_t len, const char *key, char *buf, size_t cap, size_t *out_len) {
    const char *v;
    size_t vn;
    int st;
    if (!buf || cap == 0)
        return PACKRUN_E_ARG;
    buf[0] = 0;
    if ((st = packrun_json_get(json, len, key, &v, &vn)) != PACKRUN_OK)
        return st;
    if (is_null(v, vn))
        return PACKRUN_NOT_FOUND;
    return packrun_json_string(v, vn, buf, cap, out_len);
}

int packrun_json_get_string(const char *json, size_t len, const char *key, char *buf, size_t cap) {
    return packrun_json_get_string_n(json, len, key, buf, cap, NULL);
}

/* Parses a JSON integer literal spanning exactly [v, v+n). */
static int parse_int(const char *v, size_t n, long long *out) {
    unsigned long long acc = 0, limit;
    size_t i = 0;
    int neg = 0;
    if (n && v[0] == '-')
        neg = 1, i = 1;
    if (i == n)
        return PACKRUN_E_TYPE;
    limit = neg ? (unsigned long long)9223372036854775807LL + 1 : 9223372036854775807ULL;
    for (; i < n; i++) {
        unsigned d;
        if (v[i] < '0' || v[i] > '9')
            return PACKRUN_E_TYPE;
        d = (unsigned)(v[i] - '0');
        if (acc > (limit - d) / 10)
            return PACKRUN_E_TYPE;
        acc = acc * 10 + d;
    }
    *out = neg ? (long long)(0 - acc) : (long long)acc;
    return PACKRUN_OK;
}

int packrun_json_int(const char *value, size_t value_len, long long *out) {
    scanner s;
    const uchar *a;
    long long x;
    int st;
    if (!value)
        return PACKRUN_E_ARG;
    if (!packrun_json_valid(value, value_len))
        return PACKRUN_E_JSON;
    s.p = (const uchar *)value;
    s.end = s.p + value_len;
    skip_ws(&s);
    a = s.p;
    s.p = s.end;
    while (s.p > a && (s.p[-1] == ' ' || s.p[-1] == '\t' || s.p[-1] == '\n' || s.p[-1] == '\r'))
        s.p--;
    if ((st = parse_int((const char *)a, (size_t)(s.p - a), &x)) != PACKRUN_OK)
        return st;
    if (out)
        *out = x;
    return PACKRUN_OK;
}

int packrun_json_get_int(const char *json, size_t len, const char *key, long long *out) {
    const char *v;
    size_t vn;
    long long x;
    int st;
    if ((st = packrun_json_get(json, len, key, &v, &vn)) != PACKRUN_OK)
        return st;
    if (is_null(v, vn))
        return PACKRUN_NOT_FOUND;
    if ((st = parse_int(v, vn, &x)) != PACKRUN_OK)
        return st;
    if (out)
        *out = x;
    return PACKRUN_OK;
}

int packrun_json_get_bool(const char *json, size_t len, const char *key, int *out) {
    const char *v;
    size_t vn;
    int st, b;
    if ((st = packrun_json_get(json, len, key, &v, &vn)) != PACKRUN_OK)
        return st;
    if (is_null(v, vn))
        return PACKRUN_NOT_FOUND;
    if (vn == 4 && memcmp(v, "true", 4) == 0)
        b = 1;
    else if (vn == 5 && memcmp(v, "false", 5) == 0)
        b = 0;
    else
        return PACKRUN_E_TYPE;
    if (out)
        *out = b;
    return PACKRUN_OK;
}

/* ====================================================== JSON writing */

/* A writer into d[0..cap); counts everything, writes what fits. */
typedef struct {
    char *d;
    size_t cap, n;
} writer;

static void w_byte(writer *w, char c) {
    if (w->n < w->cap)
        w->d[w->n] = c;
    w->n++;
}

/* Writes s as a quoted JSON string; invalid UTF-8 becomes \ufffd. */
static void w_escaped(writer *w, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const uchar *p = (const uchar *)s, *end = p + n;
    w_byte(w, '"');
    while (p < end) {
        uchar c = *p;
        if (c >= 0x80) {
            const uchar *q = p;
            uint32_t cp = next_cp(&q, end);
            if (cp == 0xFFFD && q == p + 1) { /* an invalid byte (a valid U+FFFD is 3 bytes) */
                const char *r = "\\ufffd";
                while (*r)
                    w_byte(w, *r++);
            } else {
                while (p < q)
                    w_byte(w, (char)*p++);
            }
            p = q;
            continue;
        }
        switch (c) {
        case '"': w_byte(w, '\\'); w_byte(w, '"'); break;
        case '\\': w_byte(w, '\\'); w_byte(w, '\\'); break;
        case '\b': w_byte(w, '\\'); w_byte(w, 'b'); break;
        case '\f': w_byte(w, '\\'); w_byte(w, 'f'); break;
        case '\n': w_byte(w, '\\'); w_byte(w, 'n'); break;
        case '\r': w_byte(w, '\\'); w_byte(w, 'r'); break;
        case '\t': w_byte(w, '\\'); w_byte(w, 't'); break;
        default:
            if (c < 0x20) {
                w_byte(w, '\\'); w_byte(w, 'u'); w_byte(w, '0'); w_byte(w, '0');
                w_byte(w, hex[c >> 4]); w_byte(w, hex[c & 15]);
            } else {
                w_byte(w, (char)c);
            }
        }
        p++;
    }
    w_byte(w, '"');
}

size_t packrun_json_escape(const char *s, size_t n, char *out, size_t cap) {
    writer w = {out, cap ? cap - 1 : 0, 0};
    if (!s)
        n = 0;
    w_escaped(&w, s ? s : "", n);
    if (cap)
        out[w.n < cap - 1 ? w.n : cap - 1] = 0;
    return w.n;
}

/* Makes room for n more bytes plus a NUL. */
static int buf_reserve(packrun_buf *b, size_t n) {
    size_t need, cap;
    char *d;
    if (b->err)
        return 0;
    need = b->len + n + 1;
    if (need < b->len) {
        b->err = PACKRUN_E_NOMEM;
        return 0;
    }
    if (need <= b->cap)
        return 1;
    cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap * 2 > cap ? cap * 2 : need;
    d = realloc(b->data, cap);
    if (!d) {
        b->err = PACKRUN_E_NOMEM;
        return 0;
    }
    b->data = d;
    b->cap = cap;
    return 1;
}

void packrun_buf_rawn(packrun_buf *b, const char *s, size_t n) {
    if (!buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void packrun_buf_raw(packrun_buf *b, const char *s) { packrun_buf_rawn(b, s, s ? strlen(s) : 0); }

void packrun_buf_string(packrun_buf *b, const char *s, size_t n) {
    writer count = {NULL, 0, 0}, w;
    if (!s)
        s = "", n = 0;
    w_escaped(&count, s, n);
    if (!buf_reserve(b, count.n))
        return;
    w.d = b->data + b->len;
    w.cap = count.n;
    w.n = 0;
    w_escaped(&w, s, n);
    b->len += count.n;
    b->data[b->len] = 0;
}

void packrun_buf_cstring(packrun_buf *b, const char *s) { packrun_buf_string(b, s, s ? strlen(s) : 0); }

void packrun_buf_int(packrun_buf *b, long long v) {
    char tmp[24];
    size_t i = sizeof tmp;
    unsigned long long u = v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[--i] = '-';
    packrun_buf_rawn(b, tmp + i, sizeof tmp - i);
}

void packrun_buf_free(packrun_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->err = 0;
}

/* ========================================================== outcomes */

/* The response envelope of the running invocation, malloc'ed; handed to
 * the host (which frees it with openwop_free) when the handler returns. */
static char *resp;
static size_t resp_len;
static int resp_oom; /* the last outcome could not be built */

#define LIT(s) s, sizeof(s) - 1
static const char OOM_ENVELOPE[] =
    "{\"outcome\":\"failed\",\"error\":{\"code\":\"out_of_memory\",\"message\":\"the module could not allocate its response\"}}";

static void set_response(packrun_buf *b) {
    free(resp);
    resp = NULL;
    resp_len = 0;
    resp_oom = b->err != 0;
    if (b->err) {
        packrun_buf_free(b);
        return; /* resp == NULL: answered with OOM_ENVELOPE */
    }
    resp = b->data;
    resp_len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
}

packrun_result packrun_fail_details(const char *code, const char *message, const char *details_json) {
    packrun_buf b = {0};
    if (!code || !*code)
        code = "failed";
    if (details_json && !packrun_json_valid(details_json, strlen(details_json))) {
        message = "packrun_fail_details: details is not valid JSON";
        code = "invalid_output";
        details_json = NULL;
    }
    packrun_buf_raw(&b, "{\"outcome\":\"failed\",\"error\":{\"code\":");
    packrun_buf_cstring(&b, code);
    packrun_buf_raw(&b, ",\"message\":");
    packrun_buf_cstring(&b, message ? message : "");
    if (details_json) {
        packrun_buf_raw(&b, ",\"details\":");
        packrun_buf_raw(&b, details_json);
    }
    packrun_buf_raw(&b, "}}");
    set_response(&b);
    return PACKRUN_FAILED;
}

packrun_result packrun_fail(const char *code, const char *message) {
    return packrun_fail_details(code, message, NULL);
}

static packrun_result envelope(const char *head, size_t head_len, const char *json, size_t len,
                               packrun_result r) {
    packrun_buf b = {0};
    if (!json || !packrun_json_valid(json, len)) {
        if (r == PACKRUN_COMPLETED)
            return packrun_fail("invalid_output", "the node's output is not valid JSON");
        return packrun_fail("invalid_interrupt", "the node's interrupt payload is not valid JSON");
    }
    packrun_buf_rawn(&b, head, head_len);
    packrun_buf_rawn(&b, json, len);
    packrun_buf_rawn(&b, "}", 1);
    set_response(&b);
    return r;
}

packrun_result packrun_complete_n(const char *output_json, size_t len) {
    return envelope(LIT("{\"outcome\":\"completed\",\"output\":"), output_json, len, PACKRUN_COMPLETED);
}

packrun_result packrun_complete(const char *output_json) {
    return packrun_complete_n(output_json, output_json ? strlen(output_json) : 0);
}

packrun_result packrun_suspend_n(const char *payload_json, size_t len) {
    return envelope(LIT("{\"outcome\":\"suspended\",\"interrupt\":"), payload_json, len, PACKRUN_SUSPENDED);
}

packrun_result packrun_suspend(const char *payload_json) {
    return packrun_suspend_n(payload_json, payload_json ? strlen(payload_json) : 0);
}

static packrun_result from_buf(packrun_buf *b, int suspend) {
    packrun_result r;
    if (b->err) {
        packrun_buf_free(b);
        return packrun_fail("out_of_memory", "the node's JSON buffer could not grow");
    }
    if (!b->data) /* nothing appended */
        r = suspend ? packrun_suspend_n("", 0) : packrun_complete_n("", 0);
    else
        r = suspend ? packrun_suspend_n(b->data, b->len) : packrun_complete_n(b->data, b->len);
    packrun_buf_free(b);
    return r;
}

packrun_result packrun_complete_buf(packrun_buf *b) { return from_buf(b, 0); }
packrun_result packrun_suspend_buf(packrun_buf *b) { return from_buf(b, 1); }

/* ============================================================ exports */

static const char ERR_UNKNOWN_NODE[] =
    "{\"outcome\":\"failed\",\"error\":{\"code\":\"unknown_node\",\"message\":\"node index out of range\"}}";
static const char ERR_REQUEST[] =
    "{\"outcome\":\"failed\",\"error\":{\"code\":\"invalid_request\",\"message\":\"request is not a valid JSON envelope\"}}";
static const char ERR_NO_OUTCOME[] =
    "{\"outcome\":\"failed\",\"error\":{\"code\":\"no_outcome\",\"message\":\"the handler returned without packrun_complete, packrun_fail or packrun_suspend\"}}";

EXPORT("openwop_abi_version")
int32_t openwop_abi_version(void) { return 1; }

EXPORT("openwop_pack_name")
uint64_t openwop_pack_name(void) { return ptrlen(packrun__pack_name, packrun__pack_name_len); }

EXPORT("openwop_node_count")
int32_t openwop_node_count(void) { return (int32_t)node_count; }

EXPORT("openwop_node_id_at")
uint64_t openwop_node_id_at(int32_t index) {
    if (index < 0 || (size_t)index >= node_count)
        return 0;
    return ptrlen(nodes[index].type_id, nodes[index].len);
}

/* Decodes a string member into a scope allocation ("" when absent). */
static const char *ctx_string(const member *m) {
    size_t full = 0;
    char *s;
    scanner sc;
    const uchar *a, *b;
    if (!m || *m->val != '"')
        return "";
    sc.p = m->val;
    sc.end = m->val_end;
    if (!scan_string(&sc, &a, &b))
        return "";
    /* decoding never produces more than 3 bytes per raw byte (\uXXXX -> 3, byte -> U+FFFD 3) */
    s = scope_alloc((size_t)(b - a) * 3 + 1);
    if (!s)
        return "";
    decode_string(a, b, s, (size_t)(b - a) * 3 + 1, &full);
    return s;
}

/* Parses the envelope: abiVersion, nodeContext and inputs (last duplicate
 * wins). Returns 0 when it is not a valid JSON object. */
static int parse_request(const char *req, size_t len, packrun_ctx *ctx, const char **in, size_t *in_len) {
    member_iter it, cit;
    member m, nc = {0}, run = {0}, nid = {0}, ten = {0};
    int r, have_nc = 0, have_run = 0, have_nid = 0, have_ten = 0;
    long long x;
    if (iter_begin(&it, req, len) != PACKRUN_OK)
        return 0;
    *in = "{}";
    *in_len = 2;
    while ((r = iter_next(&it, &m)) > 0) {
        if (key_equals(m.key, m.key_end, "inputs")) {
            *in = (const char *)m.val;
            *in_len = (size_t)(m.val_end - m.val);
        } else if (key_equals(m.key, m.key_end, "nodeContext")) {
            nc = m;
            have_nc = 1;
        } else if (key_equals(m.key, m.key_end, "abiVersion")) {
            if (parse_int((const char *)m.val, (size_t)(m.val_end - m.val), &x) == PACKRUN_OK)
                ctx->abi_version = (int)x;
        }
    }
    if (r < 0)
        return 0;
    if (have_nc && iter_begin(&cit, (const char *)nc.val, (size_t)(nc.val_end - nc.val)) == PACKRUN_OK) {
        while (iter_next(&cit, &m) > 0) {
            if (key_equals(m.key, m.key_end, "runId"))
                run = m, have_run = 1;
            else if (key_equals(m.key, m.key_end, "nodeId"))
                nid = m, have_nid = 1;
            else if (key_equals(m.key, m.key_end, "tenantId"))
                ten = m, have_ten = 1;
            else if (key_equals(m.key, m.key_end, "attempt")) {
                if (parse_int((const char *)m.val, (size_t)(m.val_end - m.val), &x) == PACKRUN_OK)
                    ctx->attempt = (int)x;
            } else if (key_equals(m.key, m.key_end, "configurable")) {
                ctx->configurable = (const char *)m.val;
                ctx->configurable_len = (size_t)(m.val_end - m.val);
            } else if (key_equals(m.key, m.key_end, "agent")) {
                ctx->agent = (const char *)m.val;
                ctx->agent_len = (size_t)(m.val_end - m.val);
            }
        }
    }
    ctx->run_id = ctx_string(have_run ? &run : NULL);
    ctx->node_id = ctx_string(have_nid ? &nid : NULL);
    ctx->tenant_id = ctx_string(have_ten ? &ten : NULL);
    return 1;
}

/* Returns a malloc'ed copy of a static envelope (or the static one itself
 * when out of memory: openwop_free ignores static pointers). */
static uint64_t reply_static(const char *msg, size_t len) {
    char *out = malloc(len);
    if (!out)
        return ptrlen(msg, len);
    memcpy(out, msg, len);
    return ptrlen(out, len);
}

EXPORT("openwop_node_invoke")
uint64_t openwop_node_invoke(int32_t index, const char *req, uint32_t len) {
    packrun_ctx ctx;
    const char *in;
    size_t in_len;
    char *input;
    uint64_t out;

    free(resp);
    resp = NULL;
    resp_len = 0;
    scope_release();
    if (index < 0 || (size_t)index >= node_count)
        return reply_static(LIT(ERR_UNKNOWN_NODE));
    /* the request must lie inside linear memory */
    if ((uint64_t)(uintptr_t)req + len > (uint64_t)__builtin_wasm_memory_size(0) * 65536)
        return reply_static(LIT(ERR_REQUEST));
    memset(&ctx, 0, sizeof ctx);
    ctx.type_id = nodes[index].type_id;
    ctx.attempt = 1;
    ctx.abi_version = 1;
    if (!parse_request(req, len, &ctx, &in, &in_len)) {
        scope_release();
        return reply_static(LIT(ERR_REQUEST));
    }
    /* a NUL-terminated copy, so handlers may use C string functions */
    input = scope_alloc(in_len + 1);
    if (!input) {
        scope_release();
        return ptrlen(OOM_ENVELOPE, sizeof OOM_ENVELOPE - 1);
    }
    memcpy(input, in, in_len);
    input[in_len] = 0;

    resp_oom = 0;
    (void)nodes[index].handler(&ctx, input, in_len); /* the outcome is in resp */
    scope_release();
    if (!resp) {
        if (resp_oom)
            return ptrlen(OOM_ENVELOPE, sizeof OOM_ENVELOPE - 1);
        return reply_static(LIT(ERR_NO_OUTCOME));
    }
    out = ptrlen(resp, resp_len);
    resp = NULL; /* the host owns it now and frees it with openwop_free */
    resp_len = 0;
    return out;
}

/* ========================================================== host calls */

void packrun_log_n(int level, const char *message, size_t len) {
    if (!message)
        message = "", len = 0;
    ow_log(level, message, (int32_t)len);
}

void packrun_log(int level, const char *message) { packrun_log_n(level, message, message ? strlen(message) : 0); }

/* Appends the decimal (or hex) form of v to w. */
static void w_uint(writer *w, unsigned long long v, unsigned base) {
    char tmp[24];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    while (i < sizeof tmp)
        w_byte(w, tmp[i++]);
}

void packrun_logf(int level, const char *format, ...) {
    char msg[1024];
    writer w = {msg, sizeof msg, 0};
    const char *f = format ? format : "";
    va_list ap;
    va_start(ap, format);
    while (*f) {
        const char *spec = f;
        int lng = 0, prec = -1;
        if (*f != '%') {
            w_byte(&w, *f++);
            continue;
        }
        f++;
        if (f[0] == '.' && f[1] == '*' && f[2] == 's') {
            prec = va_arg(ap, int);
            f++;
            f++;
        }
        while (*f == 'l' || *f == 'z') { /* 1: l, 2: ll, 3: z */
            lng = *f == 'z' ? 3 : lng + 1;
            f++;
        }
        switch (*f) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            if (!s)
                s = "(null)";
            for (; *s && prec != 0; s++, prec--)
                w_byte(&w, *s);
            break;
        }
        case 'c':
            w_byte(&w, (char)va_arg(ap, int));
            break;
        case 'd':
        case 'i': {
            long long v = lng == 3 ? (long long)va_arg(ap, size_t)
                        : lng == 2 ? va_arg(ap, long long)
                        : lng == 1 ? va_arg(ap, long)
                        : va_arg(ap, int);
            if (v < 0)
                w_byte(&w, '-');
            w_uint(&w, v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v, 10);
            break;
        }
        case 'u':
        case 'x': {
            unsigned long long v = lng == 3 ? va_arg(ap, size_t)
                                 : lng == 2 ? va_arg(ap, unsigned long long)
                                 : lng == 1 ? va_arg(ap, unsigned long)
                                 : va_arg(ap, unsigned);
            w_uint(&w, v, *f == 'x' ? 16 : 10);
            break;
        }
        case '%':
            w_byte(&w, '%');
            break;
        default: /* unsupported: copied as is */
            while (spec <= f && *spec)
                w_byte(&w, *spec++);
            if (!*f)
                continue;
        }
        f++;
    }
    va_end(ap);
    packrun_log_n(level, msg, w.n < sizeof msg ? w.n : sizeof msg);
}

int64_t packrun_now_ms(void) { return ow_now_ms(); }

int packrun_random(void *buf, size_t n) {
    if (!buf && n)
        return PACKRUN_E_ARG;
    return ow_random(buf, (int32_t)n);
}

/* Takes a (ptr,len) the host returned (allocated with openwop_alloc, so
 * NUL-terminated) into the scope. */
static int take(uint64_t pl, packrun_str *out, const char *empty) {
    char *p = (char *)(uintptr_t)(uint32_t)pl;
    size_t n = (size_t)(pl >> 32);
    if (n == 0) {
        if (out) {
            out->data = empty ? empty : "";
            out->len = empty ? strlen(empty) : 0;
        }
        return empty ? PACKRUN_OK : PACKRUN_NOT_FOUND;
    }
    if (!scope_add(p))
        return PACKRUN_E_NOMEM;
    if (out) {
        out->data = p;
        out->len = n;
    }
    return PACKRUN_OK;
}

static void clear(packrun_str *s) {
    if (s) {
        s->data = "";
        s->len = 0;
    }
}

int packrun_variable_get(const char *name, packrun_str *value) {
    clear(value);
    if (!name)
        return PACKRUN_E_ARG;
    return take(ow_variable_get(name, (int32_t)strlen(name)), value, NULL);
}

int packrun_variable_set(const char *name, const char *value_json) {
    size_t n;
    if (!name || !value_json)
        return PACKRUN_E_ARG;
    n = strlen(value_json);
    if (!packrun_json_valid(value_json, n))
        return PACKRUN_E_JSON;
    return ow_variable_set(name, (int32_t)strlen(name), value_json, (int32_t)n);
}

int packrun_channel_read(const char *name, packrun_str *values) {
    clear(values);
    if (!name)
        return PACKRUN_E_ARG;
    return take(ow_channel_read(name, (int32_t)strlen(name)), values, "[]");
}

int packrun_channel_write(const char *name, const char *value_json) {
    size_t n;
    if (!name || !value_json)
        return PACKRUN_E_ARG;
    n = strlen(value_json);
    if (!packrun_json_valid(value_json, n))
        return PACKRUN_E_JSON;
    return ow_channel_write(name, (int32_t)strlen(name), value_json, (int32_t)n);
}

int packrun_interrupt(const char *payload_json, packrun_str *resume) {
    size_t n;
    clear(resume);
    if (!payload_json)
        return PACKRUN_E_ARG;
    n = strlen(payload_json);
    if (!packrun_json_valid(payload_json, n))
        return PACKRUN_E_JSON;
    return take(ow_interrupt(payload_json, (int32_t)n), resume, "null");
}

static hostv1_fn hostv1_lookup(const char *fn) {
    static const struct {
        const char *name;
        hostv1_fn f;
    } table[] = {
        {"memory_get", h_memory_get},       {"memory_put", h_memory_put},
        {"memory_delete", h_memory_delete}, {"memory_list", h_memory_list},
        {"queue_enqueue", h_queue_enqueue}, {"adapter_invoke", h_adapter_invoke},
        {"evidence_record", h_evidence_record}, {"artifact_put", h_artifact_put},
        {"config_get", h_config_get},
    };
    size_t i;
    for (i = 0; fn && i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, fn) == 0)
            return table[i].f;
    return NULL;
}

/* Performs one packrun:host/v1 call; the response (if any) joins the scope. */
static int hostv1(hostv1_fn f, const char *req, size_t n, packrun_str *response) {
    uint32_t out[2] = {0, 0};
    int32_t st;
    clear(response);
    st = f(req, (int32_t)n, out);
    if (out[1] != 0) {
        char *p = (char *)(uintptr_t)out[0];
        if (!scope_add(p))
            return PACKRUN_E_NOMEM;
        if (response) {
            response->data = p;
            response->len = out[1];
        }
    }
    return st;
}

int packrun_host_call(const char *fn, const char *request_json, size_t len, packrun_str *response) {
    hostv1_fn f = hostv1_lookup(fn);
    clear(response);
    if (!f || !request_json)
        return PACKRUN_E_ARG;
    return hostv1(f, request_json, len, response);
}

/* Sends a request built in b (freed here). */
static int hostv1_buf(hostv1_fn f, packrun_buf *b, packrun_str *response) {
    int st;
    if (b->err) {
        packrun_buf_free(b);
        clear(response);
        return PACKRUN_E_NOMEM;
    }
    st = hostv1(f, b->data, b->len, response);
    packrun_buf_free(b);
    return st;
}

/* Points *out at member key of a host response object, NUL-terminated in
 * place (the response buffer is ours and is not read again). */
static int member_of(packrun_str *resp, const char *key, packrun_str *out) {
    const char *v;
    size_t n;
    int st;
    if (!out)
        return PACKRUN_OK;
    clear(out);
    if (resp->len == 0)
        return PACKRUN_E_JSON;
    if ((st = packrun_json_get(resp->data, resp->len, key, &v, &n)) != PACKRUN_OK)
        return st == PACKRUN_NOT_FOUND || st == PACKRUN_E_TYPE ? PACKRUN_E_JSON : st;
    ((char *)v)[n] = 0;
    out->data = v;
    out->len = n;
    return PACKRUN_OK;
}

/* {"namespace":ns,"key":key  (no closing brace) */
static void ns_key(packrun_buf *b, const char *ns, const char *key) {
    packrun_buf_raw(b, "{\"namespace\":");
    packrun_buf_cstring(b, ns);
    packrun_buf_raw(b, ",\"key\":");
    packrun_buf_cstring(b, key);
}

static int valid_arg(const char *json) { return json && packrun_json_valid(json, strlen(json)); }

int packrun_memory_get(const char *ns, const char *key, packrun_str *value) {
    packrun_buf b = {0};
    packrun_str r;
    int st;
    clear(value);
    if (!ns || !key)
        return PACKRUN_E_ARG;
    ns_key(&b, ns, key);
    packrun_buf_raw(&b, "}");
    if ((st = hostv1_buf(h_memory_get, &b, &r)) != PACKRUN_OK)
        return st;
    return member_of(&r, "value", value);
}

int packrun_memory_put(const char *ns, const char *key, const char *value_json, long long ttl_seconds, int secret) {
    packrun_buf b = {0};
    if (!ns || !key || !value_json)
        return PACKRUN_E_ARG;
    if (!valid_arg(value_json))
        return PACKRUN_E_JSON;
    ns_key(&b, ns, key);
    packrun_buf_raw(&b, ",\"value\":");
    packrun_buf_raw(&b, value_json);
    if (ttl_seconds > 0) {
        packrun_buf_raw(&b, ",\"ttlSeconds\":");
        packrun_buf_int(&b, ttl_seconds);
    }
    if (secret)
        packrun_buf_raw(&b, ",\"secret\":true");
    packrun_buf_raw(&b, "}");
    return hostv1_buf(h_memory_put, &b, NULL);
}

int packrun_memory_delete(const char *ns, const char *key) {
    packrun_buf b = {0};
    if (!ns || !key)
        return PACKRUN_E_ARG;
    ns_key(&b, ns, key);
    packrun_buf_raw(&b, "}");
    return hostv1_buf(h_memory_delete, &b, NULL);
}

int packrun_memory_list(const char *ns, const char *prefix, packrun_str *keys) {
    packrun_buf b = {0};
    packrun_str r;
    int st;
    clear(keys);
    if (!ns)
        return PACKRUN_E_ARG;
    packrun_buf_raw(&b, "{\"namespace\":");
    packrun_buf_cstring(&b, ns);
    if (prefix) {
        packrun_buf_raw(&b, ",\"prefix\":");
        packrun_buf_cstring(&b, prefix);
    }
    packrun_buf_raw(&b, "}");
    if ((st = hostv1_buf(h_memory_list, &b, &r)) != PACKRUN_OK)
        return st;
    return member_of(&r, "keys", keys);
}

int packrun_queue_enqueue(const char *intent_json, long long *staged) {
    packrun_str r;
    int st;
    if (!intent_json)
        return PACKRUN_E_ARG;
    if (!valid_arg(intent_json))
        return PACKRUN_E_JSON;
    st = hostv1(h_queue_enqueue, intent_json, strlen(intent_json), &r);
    if (st == PACKRUN_OK && staged) {
        *staged = 0;
        if (r.len)
            packrun_json_get_int(r.data, r.len, "staged", staged);
    }
    return st;
}

int packrun_adapter_invoke(const char *adapter, const char *input_json, packrun_str *output, packrun_str *response) {
    packrun_buf b = {0};
    packrun_str r;
    int st;
    clear(output);
    clear(response);
    if (!adapter || !input_json)
        return PACKRUN_E_ARG;
    if (!valid_arg(input_json))
        return PACKRUN_E_JSON;
    packrun_buf_raw(&b, "{\"adapter\":");
    packrun_buf_cstring(&b, adapter);
    packrun_buf_raw(&b, ",\"input\":");
    packrun_buf_raw(&b, input_json);
    packrun_buf_raw(&b, "}");
    if ((st = hostv1_buf(h_adapter_invoke, &b, &r)) != PACKRUN_OK)
        return st;
    if (output) {
        /* copy first: member_of terminates the value in place */
        const char *v;
        size_t n;
        if (response) {
            char *copy = scope_alloc(r.len + 1);
            if (!copy)
                return PACKRUN_E_NOMEM;
            memcpy(copy, r.data, r.len + 1);
            response->data = copy;
            response->len = r.len;
        }
        if (r.len == 0 || packrun_json_get(r.data, r.len, "output", &v, &n) != PACKRUN_OK)
            return PACKRUN_E_JSON;
        ((char *)v)[n] = 0;
        output->data = v;
        output->len = n;
        return PACKRUN_OK;
    }
    if (response)
        *response = r;
    return PACKRUN_OK;
}

int packrun_evidence_record(const char *kind, const char *data_json) {
    packrun_buf b = {0};
    if (!kind || !data_json)
        return PACKRUN_E_ARG;
    if (!valid_arg(data_json))
        return PACKRUN_E_JSON;
    packrun_buf_raw(&b, "{\"kind\":");
    packrun_buf_cstring(&b, kind);
    packrun_buf_raw(&b, ",\"data\":");
    packrun_buf_raw(&b, data_json);
    packrun_buf_raw(&b, "}");
    return hostv1_buf(h_evidence_record, &b, NULL);
}

static int artifact_put(const char *role, const char *name, const char *content_type, const char *field,
                        const char *data, size_t n, packrun_str *artifact_id, packrun_str *sha256) {
    packrun_buf b = {0};
    packrun_str r, v;
    int st;
    char *copy = NULL;
    clear(artifact_id);
    clear(sha256);
    if (!role || !name || !data)
        return PACKRUN_E_ARG;
    packrun_buf_raw(&b, "{\"role\":");
    packrun_buf_cstring(&b, role);
    packrun_buf_raw(&b, ",\"name\":");
    packrun_buf_cstring(&b, name);
    if (content_type) {
        packrun_buf_raw(&b, ",\"content_type\":");
        packrun_buf_cstring(&b, content_type);
    }
    packrun_buf_raw(&b, field);
    packrun_buf_string(&b, data, n);
    packrun_buf_raw(&b, "}");
    if ((st = hostv1_buf(h_artifact_put, &b, &r)) != PACKRUN_OK)
        return st;
    if (!artifact_id && !sha256)
        return PACKRUN_OK;
    if (r.len == 0)
        return PACKRUN_E_JSON;
    /* decode both strings into one scope block */
    copy = scope_alloc(r.len * 2 + 2);
    if (!copy)
        return PACKRUN_E_NOMEM;
    if (artifact_id && packrun_json_get(r.data, r.len, "artifact_id", &v.data, &v.len) == PACKRUN_OK &&
        packrun_json_string(v.data, v.len, copy, r.len + 1, &v.len) == PACKRUN_OK) {
        artifact_id->data = copy;
        artifact_id->len = v.len;
    }
    if (sha256 && packrun_json_get(r.data, r.len, "sha256", &v.data, &v.len) == PACKRUN_OK &&
        packrun_json_string(v.data, v.len, copy + r.len + 1, r.len + 1, &v.len) == PACKRUN_OK) {
        sha256->data = copy + r.len + 1;
        sha256->len = v.len;
    }
    return PACKRUN_OK;
}

int packrun_artifact_put_text(const char *role, const char *name, const char *content_type,
                              const char *text, size_t n, packrun_str *artifact_id, packrun_str *sha256) {
    return artifact_put(role, name, content_type, ",\"text\":", text, n, artifact_id, sha256);
}

int packrun_artifact_put_base64(const char *role, const char *name, const char *content_type,
                                const char *base64, packrun_str *artifact_id, packrun_str *sha256) {
    return artifact_put(role, name, content_type, ",\"base64\":", base64, base64 ? strlen(base64) : 0,
                        artifact_id, sha256);
}

int packrun_config_get(const char *key, packrun_str *value) {
    packrun_buf b = {0};
    packrun_str r;
    int st;
    clear(value);
    if (!key)
        return PACKRUN_E_ARG;
    packrun_buf_raw(&b, "{\"key\":");
    packrun_buf_cstring(&b, key);
    packrun_buf_raw(&b, "}");
    if ((st = hostv1_buf(h_config_get, &b, &r)) != PACKRUN_OK)
        return st;
    return member_of(&r, "value", value);
}

int packrun_message_publish(packrun_message_format format, const char *message_json, const char *signature,
                            packrun_str *message_id, packrun_str *hash, long long *staged) {
    static const char *const names[] = {"agent-envelope", "agent-message", "bus-envelope"};
    packrun_buf b = {0};
    packrun_str r, v;
    int st;
    char *copy;
    clear(message_id);
    clear(hash);
    if (staged)
        *staged = 0;
    if (!message_json || (unsigned)format >= sizeof names / sizeof names[0])
        return PACKRUN_E_ARG;
    if (!valid_arg(message_json))
        return PACKRUN_E_JSON;
    packrun_buf_raw(&b, "{\"format\":");
    packrun_buf_cstring(&b, names[format]);
    packrun_buf_raw(&b, ",\"message\":");
    packrun_buf_raw(&b, message_json);
    if (signature) {
        packrun_buf_raw(&b, ",\"signature\":");
        packrun_buf_cstring(&b, signature);
    }
    packrun_buf_raw(&b, "}");
    if ((st = hostv1_buf(h_message_publish, &b, &r)) != PACKRUN_OK)
        return st;
    if (r.len == 0)
        return PACKRUN_E_JSON;
    if (staged)
        packrun_json_get_int(r.data, r.len, "staged", staged);
    if (!message_id && !hash)
        return PACKRUN_OK;
    /* decode both strings into one scope block */
    copy = scope_alloc(r.len * 2 + 2);
    if (!copy)
        return PACKRUN_E_NOMEM;
    if (message_id && packrun_json_get(r.data, r.len, "message_id", &v.data, &v.len) == PACKRUN_OK &&
        packrun_json_string(v.data, v.len, copy, r.len + 1, &v.len) == PACKRUN_OK) {
        message_id->data = copy;
        message_id->len = v.len;
    }
    if (hash && packrun_json_get(r.data, r.len, "hash", &v.data, &v.len) == PACKRUN_OK &&
        packrun_json_string(v.data, v.len, copy + r.len + 1, r.len + 1, &v.len) == PACKRUN_OK) {
        hash->data = copy + r.len + 1;
        hash->len = v.len;
    }
    return PACKRUN_OK;
}

int packrun_sensor_emit(const char *event_json, packrun_str *event_id, long long *staged) {
    packrun_str r, v;
    int st;
    char *copy;
    clear(event_id);
    if (staged)
        *staged = 0;
    if (!event_json)
        return PACKRUN_E_ARG;
    if (!valid_arg(event_json))
        return PACKRUN_E_JSON;
    if ((st = hostv1(h_sensor_emit, event_json, strlen(event_json), &r)) != PACKRUN_OK)
        return st;
    if (r.len == 0)
        return PACKRUN_E_JSON;
    if (staged)
        packrun_json_get_int(r.data, r.len, "staged", staged);
    if (!event_id)
        return PACKRUN_OK;
    copy = scope_alloc(r.len + 1);
    if (!copy)
        return PACKRUN_E_NOMEM;
    if (packrun_json_get(r.data, r.len, "event_id", &v.data, &v.len) == PACKRUN_OK &&
        packrun_json_string(v.data, v.len, copy, r.len + 1, &v.len) == PACKRUN_OK) {
        event_id->data = copy;
        event_id->len = v.len;
    }
    return PACKRUN_OK;
}

/* ==================================================== http_request (ABI 1.3) */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void buf_base64(packrun_buf *b, const uchar *p, size_t n) {
    size_t i;
    char q[4];
    for (i = 0; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        q[0] = B64[v >> 18], q[1] = B64[v >> 12 & 63], q[2] = B64[v >> 6 & 63], q[3] = B64[v & 63];
        packrun_buf_rawn(b, q, 4);
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        q[0] = B64[v >> 18], q[1] = B64[v >> 12 & 63];
        q[2] = i + 1 < n ? B64[v >> 6 & 63] : '=';
        q[3] = '=';
        packrun_buf_rawn(b, q, 4);
    }
}

/* Decodes standard padded base64 [p, p+n) into out (room for n/4*3 bytes);
 * returns the length or -1. */
static long b64_decode(const uchar *p, size_t n, uchar *out) {
    size_t i, o = 0;
    if (n % 4)
        return -1;
    for (i = 0; i < n; i += 4) {
        int v[4], k;
        for (k = 0; k < 4; k++) {
            const char *c = p[i + k] ? strchr(B64, p[i + k]) : NULL;
            v[k] = c ? (int)(c - B64) : (p[i + k] == '=' && i + 4 == n && k >= 2) ? -2 : -1;
            if (v[k] == -1)
                return -1;
        }
        if (v[2] == -2 && v[3] != -2)
            return -1;
        out[o++] = (uchar)(v[0] << 2 | v[1] >> 4);
        if (v[2] != -2)
            out[o++] = (uchar)((v[1] & 15) << 4 | v[2] >> 2);
        if (v[3] != -2)
            out[o++] = (uchar)((v[2] & 3) << 6 | v[3]);
    }
    return (long)o;
}

static int utf8_valid(const uchar *p, size_t n) {
    const uchar *end = p + n;
    while (p < end) {
        size_t k = *p < 0x80 ? 1 : utf8_len(p, end);
        if (k == 0)
            return 0;
        p += k;
    }
    return 1;
}

/* Decodes the JSON string value [v, v+n) into a scope buffer. */
static int scope_string(const char *v, size_t n, packrun_str *out) {
    scanner s = {(const uchar *)v, (const uchar *)v + n};
    const uchar *a, *b;
    char *buf;
    size_t full;
    if (n == 0 || *v != '"' || !scan_string(&s, &a, &b))
        return PACKRUN_E_JSON;
    if (!(buf = scope_alloc(n + 1)))
        return PACKRUN_E_NOMEM;
    decode_string(a, b, buf, n + 1, &full);
    out->data = buf;
    out->len = full;
    return PACKRUN_OK;
}

/* Decodes [[name,value],...] into a scope array of headers. */
static int decode_headers(const char *v, size_t n, packrun_http_header **out, size_t *count) {
    scanner s = {(const uchar *)v, (const uchar *)v + n};
    size_t c = 0, i;
    char *space;
    packrun_http_header *h;
    if (is_null(v, n))
        return PACKRUN_OK;
    if (n == 0 || *v != '[' || !skip_value(&s, 0))
        return PACKRUN_E_JSON;
    /* count the elements (the array is valid JSON now) */
    s.p = (const uchar *)v + 1;
    skip_ws(&s);
    while (s.p < s.end && *s.p != ']') {
        skip_value(&s, 0);
        c++;
        skip_ws(&s);
        if (s.p < s.end && *s.p == ',')
            s.p++;
        skip_ws(&s);
    }
    if (c == 0)
        return PACKRUN_OK;
    h = scope_alloc(c * sizeof *h);
    space = scope_alloc(n + 1);
    if (!h || !space)
        return PACKRUN_E_NOMEM;
    s.p = (const uchar *)v + 1;
    for (i = 0; i < c; i++) {
        const char **dst[2] = {&h[i].name, &h[i].value};
        int k;
        skip_ws(&s);
        if (*s.p != '[')
            return PACKRUN_E_JSON;
        s.p++;
        for (k = 0; k < 2; k++) {
            const uchar *a, *b;
            size_t full;
            skip_ws(&s);
            if (s.p >= s.end || *s.p != '"' || !scan_string(&s, &a, &b))
                return PACKRUN_E_JSON;
            decode_string(a, b, space, (size_t)(b - a) + 1, &full);
            *dst[k] = space;
            space += full + 1;
            skip_ws(&s);
            if (s.p >= s.end || *s.p != (k == 0 ? ',' : ']'))
                return PACKRUN_E_JSON;
            s.p++;
        }
        skip_ws(&s);
        if (s.p < s.end && *s.p == ',')
            s.p++;
    }
    *out = h;
    *count = c;
    return PACKRUN_OK;
}

int packrun_http_send(const packrun_http_request *req, packrun_http_response *resp) {
    packrun_buf b = {0};
    packrun_str r, v;
    size_t i;
    int st, hs;
    long long status;
    if (resp) {
        memset(resp, 0, sizeof *resp);
        clear(&resp->body);
        clear(&resp->error);
        clear(&resp->kind);
    }
    if (!req || !req->url || !resp || (req->header_count && !req->headers) || (req->body_len && !req->body))
        return PACKRUN_E_ARG;
    packrun_buf_raw(&b, "{\"method\":");
    packrun_buf_cstring(&b, req->method && *req->method ? req->method : "GET");
    packrun_buf_raw(&b, ",\"url\":");
    packrun_buf_cstring(&b, req->url);
    if (req->header_count) {
        packrun_buf_raw(&b, ",\"headers\":[");
        for (i = 0; i < req->header_count; i++) {
            if (!req->headers[i].name || !req->headers[i].value) {
                packrun_buf_free(&b);
                return PACKRUN_E_ARG;
            }
            packrun_buf_raw(&b, i ? ",[" : "[");
            packrun_buf_cstring(&b, req->headers[i].name);
            packrun_buf_raw(&b, ",");
            packrun_buf_cstring(&b, req->headers[i].value);
            packrun_buf_raw(&b, "]");
        }
        packrun_buf_raw(&b, "]");
    }
    if (req->body_len) {
        if (utf8_valid(req->body, req->body_len)) {
            packrun_buf_raw(&b, ",\"body\":");
            packrun_buf_string(&b, req->body, req->body_len);
        } else {
            packrun_buf_raw(&b, ",\"body_base64\":\"");
            buf_base64(&b, req->body, req->body_len);
            packrun_buf_raw(&b, "\"");
        }
    }
    if (req->timeout_ms > 0) {
        packrun_buf_raw(&b, ",\"timeout_ms\":");
        packrun_buf_int(&b, req->timeout_ms);
    }
    packrun_buf_raw(&b, "}");
    hs = hostv1_buf(h_http_request, &b, &r);
    if (hs < 0)
        return hs;
    if (hs != PACKRUN_OK) {
        if (r.len && packrun_json_get(r.data, r.len, "error", &v.data, &v.len) == PACKRUN_OK)
            scope_string(v.data, v.len, &resp->error);
        if (r.len && packrun_json_get(r.data, r.len, "kind", &v.data, &v.len) == PACKRUN_OK)
            scope_string(v.data, v.len, &resp->kind);
        return hs;
    }
    if (r.len == 0 || packrun_json_get_int(r.data, r.len, "status", &status) != PACKRUN_OK)
        return PACKRUN_E_JSON;
    resp->status = (int)status;
    if (packrun_json_get_bool(r.data, r.len, "truncated", &resp->truncated) == PACKRUN_E_TYPE)
        return PACKRUN_E_JSON;
    if (packrun_json_get(r.data, r.len, "headers", &v.data, &v.len) == PACKRUN_OK &&
        (st = decode_headers(v.data, v.len, &resp->headers, &resp->header_count)) != PACKRUN_OK)
        return st;
    if (packrun_json_get(r.data, r.len, "body", &v.data, &v.len) == PACKRUN_OK) {
        if ((st = scope_string(v.data, v.len, &resp->body)) != PACKRUN_OK)
            return st;
    } else if (packrun_json_get(r.data, r.len, "body_base64", &v.data, &v.len) == PACKRUN_OK) {
        scanner s = {(const uchar *)v.data, (const uchar *)v.data + v.len};
        const uchar *a, *e;
        uchar *out;
        long n;
        if (v.len == 0 || *v.data != '"' || !scan_string(&s, &a, &e))
            return PACKRUN_E_JSON;
        if (!(out = scope_alloc(v.len + 1)))
            return PACKRUN_E_NOMEM;
        if ((n = b64_decode(a, (size_t)(e - a), out)) < 0)
            return PACKRUN_E_JSON;
        out[n] = 0;
        resp->body.data = (const char *)out;
        resp->body.len = (size_t)n;
    }
    return PACKRUN_OK;
}
