// publoop: the benchmark node for message_publish. Node "bench.publish"
// publishes ten seed-002 bus envelopes (topic ops.bench) per invocation,
// each with its own message id: an FNV-1a hash of the request (which holds
// the run id, distinct per task) and the message's index.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name(#name)))
#define HOST(name) __attribute__((import_module("packrun:host/v1"), import_name(#name)))

HOST(message_publish) int32_t message_publish(const char *req, int32_t n, uint32_t *out);

static uint64_t pack(const void *p, uint32_t n) { return ((uint64_t)n << 32) | (uint32_t)(uintptr_t)p; }

EXPORT(openwop_abi_version) int32_t abi_version(void) { return 1; }
EXPORT(openwop_pack_name) uint64_t pack_name(void) { return pack("local.publoop", 13); }
EXPORT(openwop_node_count) int32_t node_count(void) { return 1; }
EXPORT(openwop_node_id_at) uint64_t node_id_at(int32_t i) { return i == 0 ? pack("bench.publish", 13) : 0; }
EXPORT(openwop_alloc) void *ow_alloc(int32_t n) { return malloc(n > 0 ? n : 1); }
EXPORT(openwop_free) void ow_free(void *p, int32_t n) { (void)n; free(p); }

static char out[256];
static char q[1024];

EXPORT(openwop_node_invoke) uint64_t node_invoke(int32_t node, const char *req, int32_t len) {
  uint64_t h = 1469598103934665603ULL;
  for (int32_t i = 0; i < len; i++) h = (h ^ (uint8_t)req[i]) * 1099511628211ULL;
  uint32_t o[2];
  int published = 0;
  for (int i = 0; i < 10; i++) {
    int n = snprintf(q, sizeof q,
                     "{\"format\":\"bus-envelope\",\"message\":{\"metadata\":{\"message_id\":\"%08x-%04x-4000-8000-%012x\","
                     "\"timestamp\":\"2026-11-24T06:00:00Z\",\"source\":\"bench.publish\",\"message_type\":\"ops.bench\",\"version\":\"1.0\"},"
                     "\"payload\":{\"i\":%d,\"text\":\"a message of about three hundred bytes on the bus\"}}}",
                     (uint32_t)(h >> 32), (uint32_t)(h >> 16) & 0xffff, i, i);
    if (message_publish(q, n, o) == 0) {
      published++;
      free((void *)(uintptr_t)o[0]);
    }
  }
  return pack(out, snprintf(out, sizeof out, "{\"outcome\":\"completed\",\"output\":{\"published\":%d}}", published));
}
