// probe: a test module that exercises every openwop host import and the WASI
// shim, one node per area, so runtime tests can check what the host serves.
// Build: ./build.sh (clang --target=wasm32-wasi, reactor).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IMPORT(name) __attribute__((import_module("openwop"), import_name(#name)))
#define EXPORT(name) __attribute__((export_name(#name)))

IMPORT(openwop_log) void ow_log(int32_t level, const char *p, int32_t n);
IMPORT(openwop_now_ms) int64_t ow_now_ms(void);
IMPORT(openwop_random) int32_t ow_random(void *p, int32_t n);
IMPORT(openwop_variable_get) uint64_t ow_variable_get(const char *name, int32_t n);
IMPORT(openwop_variable_set) int32_t ow_variable_set(const char *name, int32_t n, const char *v, int32_t vn);
IMPORT(openwop_channel_read) uint64_t ow_channel_read(const char *name, int32_t n);
IMPORT(openwop_channel_write) int32_t ow_channel_write(const char *name, int32_t n, const char *v, int32_t vn);
IMPORT(openwop_interrupt) uint64_t ow_interrupt(const char *p, int32_t n);

#define HOST(name) __attribute__((import_module("packrun:host/v1"), import_name(#name)))
HOST(memory_put) int32_t h_memory_put(const char *req, int32_t n, uint32_t *out);
HOST(memory_get) int32_t h_memory_get(const char *req, int32_t n, uint32_t *out);
HOST(adapter_invoke) int32_t h_adapter_invoke(const char *req, int32_t n, uint32_t *out);
HOST(config_get) int32_t h_config_get(const char *req, int32_t n, uint32_t *out);
HOST(queue_enqueue) int32_t h_queue_enqueue(const char *req, int32_t n, uint32_t *out);

static const char *nodes[] = {"probe.random", "probe.now", "probe.state", "probe.counter",
                              "probe.wasi", "probe.log", "probe.interrupt2", "probe.echo", "probe.host", "probe.secret", "probe.followup"};
#define NODES (int32_t)(sizeof(nodes) / sizeof(nodes[0]))

static uint64_t pack(const void *p, uint32_t n) { return ((uint64_t)n << 32) | (uint32_t)(uintptr_t)p; }

EXPORT(openwop_abi_version) int32_t abi_version(void) { return 1; }
EXPORT(openwop_pack_name) uint64_t pack_name(void) { return pack("local.probe", 11); }
EXPORT(openwop_node_count) int32_t node_count(void) { return NODES; }
EXPORT(openwop_node_id_at) uint64_t node_id_at(int32_t i) {
  if (i < 0 || i >= NODES) return 0;
  return pack(nodes[i], strlen(nodes[i]));
}
EXPORT(openwop_alloc) void *ow_alloc(int32_t n) { return malloc(n > 0 ? n : 1); }
EXPORT(openwop_free) void ow_free(void *p, int32_t n) { (void)n; free(p); }

static char out[65536];
static uint64_t done(int n) { return pack(out, (uint32_t)n); }
static const char *str(uint64_t pl, uint32_t *n) { *n = pl >> 32; return (const char *)(uintptr_t)(uint32_t)pl; }

static int counter;

EXPORT(openwop_node_invoke) uint64_t node_invoke(int32_t node, const char *req, int32_t req_len) {
  (void)req;
  uint32_t n1, n2;
  switch (node) {
  case 0: { // 16 random bytes as hex
    unsigned char r[16];
    int32_t st = ow_random(r, sizeof r);
    int n = snprintf(out, sizeof out, "{\"outcome\":\"completed\",\"output\":{\"status\":%d,\"random\":\"", st);
    for (int i = 0; i < 16; i++) n += snprintf(out + n, sizeof out - n, "%02x", r[i]);
    n += snprintf(out + n, sizeof out - n, "\"}}");
    return done(n);
  }
  case 1:
    return done(snprintf(out, sizeof out, "{\"outcome\":\"completed\",\"output\":{\"nowMs\":%lld}}", (long long)ow_now_ms()));
  case 2: { // variables and channels
#ifdef PROBE_V2
    ow_channel_write("c", 1, "0", 1); // version 2 writes the channel first: replay must diverge
#endif
    uint64_t before = ow_variable_get("k", 1);
    int32_t s1 = ow_variable_set("k", 1, "{\"v\":42}", 8);
    int32_t bad = ow_variable_set("k", 1, "{oops", 5);
    const char *v = str(ow_variable_get("k", 1), &n1);
    ow_channel_write("c", 1, "1", 1);
    ow_channel_write("c", 1, "\"two\"", 5);
    const char *c = str(ow_channel_read("c", 1), &n2);
    return done(snprintf(out, sizeof out,
                         "{\"outcome\":\"completed\",\"output\":{\"unsetLen\":%u,\"set\":%d,\"badSet\":%d,\"k\":%.*s,\"c\":%.*s}}",
                         (unsigned)(before >> 32), s1, bad, (int)n1, v, (int)n2, c));
  }
  case 3:
    counter++;
    return done(snprintf(out, sizeof out, "{\"outcome\":\"completed\",\"output\":{\"count\":%d}}", counter));
  case 4: { // WASI: stdout/stderr captured, no env, no files, clock through the host
    printf("to stdout\n");
    fflush(stdout);
    fprintf(stderr, "to stderr\n");
    const char *home = getenv("HOME");
    FILE *f = fopen("/etc/hostname", "r");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned char r[8];
    arc4random_buf(r, sizeof r);
    return done(snprintf(out, sizeof out,
                         "{\"outcome\":\"completed\",\"output\":{\"env\":%s,\"file\":%s,\"sec\":%lld,\"rand\":\"%02x%02x%02x%02x\"}}",
                         home ? "true" : "false", f ? "true" : "false", (long long)ts.tv_sec, r[0], r[1], r[2], r[3]));
  }
  case 5:
    for (int lvl = 0; lvl <= 4; lvl++) {
      char m[32];
      int n = snprintf(m, sizeof m, "level %d", lvl);
      ow_log(lvl, m, n);
    }
    return done(snprintf(out, sizeof out, "{\"outcome\":\"completed\",\"output\":{}}"));
  case 6: { // two interrupts in a row
    const char *a = str(ow_interrupt("{\"step\":1}", 10), &n1);
    char first[256];
    int fl = snprintf(first, sizeof first, "%.*s", (int)n1, a);
    const char *b = str(ow_interrupt("{\"step\":2}", 10), &n2);
    return done(snprintf(out, sizeof out, "{\"outcome\":\"completed\",\"output\":{\"a\":%.*s,\"b\":%.*s}}", fl, first, (int)n2, b));
  }
  case 8: { // packrun:host/v1 round trip
    static const char put[] = "{\"namespace\":\"ns\",\"key\":\"k\",\"value\":{\"n\":1}}";
    static const char get[] = "{\"namespace\":\"ns\",\"key\":\"k\"}";
    static const char ad[] = "{\"adapter\":\"echo\",\"input\":\"hi\"}";
    static const char cfg[] = "{\"key\":\"missing\"}";
    uint32_t o1[2] = {0, 0}, o2[2] = {0, 0}, o3[2] = {0, 0}, o4[2] = {0, 0};
    int32_t s1 = h_memory_put(put, sizeof put - 1, o1);
    int32_t s2 = h_memory_get(get, sizeof get - 1, o2);
    int32_t s3 = h_adapter_invoke(ad, sizeof ad - 1, o3);
    int32_t s4 = h_config_get(cfg, sizeof cfg - 1, o4);
    const char *g = o2[1] ? (const char *)(uintptr_t)o2[0] : "null";
    const char *a = o3[1] ? (const char *)(uintptr_t)o3[0] : "null";
    return done(snprintf(out, sizeof out,
                         "{\"outcome\":\"completed\",\"output\":{\"put\":%d,\"get\":%d,\"got\":%.*s,\"adapter\":%d,\"adapterOut\":%.*s,\"config\":%d,\"configLen\":%u}}",
                         s1, s2, (int)(o2[1] ? o2[1] : 4), g, s3, (int)(o3[1] ? o3[1] : 4), a, s4, o4[1]));
  }
  case 9: { // read a secret, log it and return it: evidence must redact it
    static const char get[] = "{\"namespace\":\"ns\",\"key\":\"token\"}";
    uint32_t o[2] = {0, 0};
    int32_t st = h_memory_get(get, sizeof get - 1, o);
    const char *v = o[1] ? (const char *)(uintptr_t)o[0] : "null";
    ow_log(2, v, o[1] ? (int32_t)o[1] : 4);
    return done(snprintf(out, sizeof out, "{\"outcome\":\"completed\",\"output\":{\"status\":%d,\"got\":%.*s}}",
                         st, (int)(o[1] ? o[1] : 4), v));
  }
  case 10: { // stage a follow-up task
    static const char intent[] = "{\"task_type\":\"probe.next\",\"payload\":{\"from\":\"probe\"}}";
    uint32_t o[2] = {0, 0};
    int32_t st = h_queue_enqueue(intent, sizeof intent - 1, o);
    return done(snprintf(out, sizeof out, "{\"outcome\":\"completed\",\"output\":{\"status\":%d}}", st));
  }
  case 7: // echo the whole request envelope
    return done(snprintf(out, sizeof out, "{\"outcome\":\"completed\",\"output\":%.*s}", (int)req_len, req));
  }
  return done(snprintf(out, sizeof out, "{\"outcome\":\"failed\",\"error\":{\"code\":\"no_such_node\",\"message\":\"bad index\"}}"));
}
