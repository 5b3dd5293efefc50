// demo: the pack `packrun demo` runs. Three nodes that use the host services:
//   demo.counter    (skill, task type demo.count)     counts calls per name in memory, with a TTL
//   demo.sensor     (sensor, every second)            reports what it observes as SensorEvents
//   demo.summarize  (skill, task type demo.summarize) asks the "wordcount" adapter, stores the result
//   demo.responder  (skill, subscribed to crisis.*)   answers a crisis with a seed-001 response
// The sensor also raises a seed-002 crisis.detection message (message_publish);
// the bus delivers it to demo.responder as a task, which answers with a
// seed-001 response carrying an evidence chain.
// Written against the raw ABI (see abi/ and examples/hello-c) so it needs no SDK.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT(name) __attribute__((export_name(#name)))
#define OPENWOP(name) __attribute__((import_module("openwop"), import_name(#name)))
#define HOST(name) __attribute__((import_module("packrun:host/v1"), import_name(#name)))

OPENWOP(openwop_log) void ow_log(int32_t level, const char *p, int32_t n);
OPENWOP(openwop_now_ms) int64_t ow_now_ms(void);
HOST(memory_get) int32_t memory_get(const char *req, int32_t n, uint32_t *out);
HOST(memory_put) int32_t memory_put(const char *req, int32_t n, uint32_t *out);
HOST(adapter_invoke) int32_t adapter_invoke(const char *req, int32_t n, uint32_t *out);
HOST(sensor_emit) int32_t sensor_emit(const char *req, int32_t n, uint32_t *out);
HOST(message_publish) int32_t message_publish(const char *req, int32_t n, uint32_t *out);

static const char *nodes[] = {"demo.counter", "demo.sensor", "demo.summarize", "demo.responder"};
static uint64_t pack(const void *p, uint32_t n) { return ((uint64_t)n << 32) | (uint32_t)(uintptr_t)p; }

EXPORT(openwop_abi_version) int32_t abi_version(void) { return 1; }
EXPORT(openwop_pack_name) uint64_t pack_name(void) { return pack("local.demo", 10); }
EXPORT(openwop_node_count) int32_t node_count(void) { return 4; }
EXPORT(openwop_node_id_at) uint64_t node_id_at(int32_t i) {
  return (i >= 0 && i < 4) ? pack(nodes[i], strlen(nodes[i])) : 0;
}
EXPORT(openwop_alloc) void *ow_alloc(int32_t n) { return malloc(n > 0 ? n : 1); }
EXPORT(openwop_free) void ow_free(void *p, int32_t n) { (void)n; free(p); }

static char out[16384];
static uint64_t respond(int n) { return pack(out, n < 0 || n >= (int)sizeof out ? 0 : (uint32_t)n); }
static uint64_t fail(const char *code, const char *msg) {
  return respond(snprintf(out, sizeof out, "{\"outcome\":\"failed\",\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code, msg));
}
static void log_info(const char *s) { ow_log(2, s, (int32_t)strlen(s)); }

// field copies the string value of "key" found after "inputs" into dst
// (escapes are kept as written, which is fine for re-embedding in JSON).
static int field(const char *req, int32_t len, const char *key, char *dst, int cap) {
  const char *end = req + len;
  const char *in = strstr(req, "\"inputs\"");
  if (!in) return 0;
  char pat[64];
  int pl = snprintf(pat, sizeof pat, "\"%s\"", key);
  for (const char *p = in; p + pl < end; p++) {
    if (memcmp(p, pat, pl) != 0) continue;
    p += pl;
    while (p < end && (*p == ' ' || *p == ':')) p++;
    if (p >= end || *p != '"') return 0;
    p++;
    int n = 0;
    while (p < end && *p != '"' && n < cap - 1) {
      if (*p == '\\' && p + 1 < end) dst[n++] = *p++;
      dst[n++] = *p++;
    }
    dst[n] = 0;
    return n;
  }
  return 0;
}

static const char *resp_of(uint32_t o[2]) { return o[1] ? (const char *)(uintptr_t)o[0] : ""; }

EXPORT(openwop_node_invoke) uint64_t node_invoke(int32_t node, const char *req, int32_t len) {
  char name[256], text[4096], q[8192];
  uint32_t o[2] = {0, 0};
  switch (node) {
  case 0: { // counter
    if (!field(req, len, "name", name, sizeof name)) strcpy(name, "world");
    int n = snprintf(q, sizeof q, "{\"namespace\":\"counters\",\"key\":\"%s\"}", name);
    long count = 0;
    if (memory_get(q, n, o) == 0) { // {"value":N}
      const char *v = strstr(resp_of(o), "\"value\":");
      if (v) count = strtol(v + 8, NULL, 10);
      free((void *)(uintptr_t)o[0]);
    }
    count++;
    n = snprintf(q, sizeof q, "{\"namespace\":\"counters\",\"key\":\"%s\",\"value\":%ld,\"ttlSeconds\":3600}", name, count);
    if (memory_put(q, n, o) != 0) return fail("memory", "memory_put refused");
    log_info("counter updated");
    return respond(snprintf(out, sizeof out, "{\"outcome\":\"completed\",\"output\":{\"name\":\"%s\",\"count\":%ld}}", name, count));
  }
  case 1: { // sensor: run on its cadence, it watches two (simulated) log sources
    // and reports what it sees as SensorEvents. Each finding has a stable
    // dedupe_key, so the host turns it into at most one task however many
    // runs report it again.
    static const char *disk = "disk error on node 3 during nightly backup";
    static const char *quiet = "all quiet on node 2";
    int64_t ms = ow_now_ms();
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    char now[32], deadline[32];
    gmtime_r(&secs, &tm);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
    secs += 300;
    gmtime_r(&secs, &tm);
    strftime(deadline, sizeof deadline, "%Y-%m-%dT%H:%M:%SZ", &tm);
    // The error: through sensor_emit, proposing a summarize task; fresh for
    // five minutes.
    int n = snprintf(q, sizeof q,
                     "{\"event_id\":\"disk-%lld\",\"observed_at\":\"%s\",\"source_ref\":\"syslog://node3\","
                     "\"dedupe_key\":\"node3-disk-error\",\"freshness_deadline\":\"%s\",\"payload\":{\"observation\":\"%s\"},"
                     "\"proposed_task\":{\"task_type\":\"demo.summarize\",\"priority\":1,\"payload\":{\"text\":\"%s\"}}}",
                     (long long)ms, now, deadline, disk, disk);
    if (sensor_emit(q, n, o) != 0) return fail("sensor", "sensor_emit refused");
    free((void *)(uintptr_t)o[0]);
    log_info("reported the disk error");
    // The crisis, on the bus: a seed-002 crisis.detection message (its id
    // made from the clock, so each run raises its own).
    n = snprintf(q, sizeof q,
                 "{\"format\":\"bus-envelope\",\"message\":{\"metadata\":{\"message_id\":\"c0ffee00-d15c-4e44-8000-%012llx\","
                 "\"timestamp\":\"%s\",\"source\":\"demo.sensor\",\"message_type\":\"crisis.detection\",\"version\":\"1.0\"},"
                 "\"payload\":{\"crisis_id\":\"node3-disk\",\"severity\":0.8,\"confidence\":0.9,\"crisis_type\":\"safety_concern\","
                 "\"detected_by\":{\"module\":\"demo.sensor\",\"detection_method\":\"log_scan\",\"detection_signals\":"
                 "[{\"signal\":\"syslog\",\"value\":\"%s\",\"confidence\":0.9}]},\"context\":{\"conversation_id\":\"ops-node3\"},"
                 "\"response_guidance\":{\"priority\":\"immediate\",\"required_actions\":[\"answer_with_evidence\"]},"
                 "\"escalation_path\":{\"internal_escalation\":true,\"external_escalation\":false},"
                 "\"timeout\":{\"response_deadline_ms\":5000}}}}",
                 (unsigned long long)ms, now, disk);
    if (message_publish(q, n, o) != 0) return fail("bus", "message_publish refused the crisis");
    free((void *)(uintptr_t)o[0]);
    // The quiet node: in the output's sensor_events, recorded only.
    return respond(snprintf(out, sizeof out,
                            "{\"outcome\":\"completed\",\"output\":{\"sensor_events\":[{\"event_id\":\"quiet-%lld\","
                            "\"observed_at\":\"%s\",\"source_ref\":\"syslog://node2\",\"dedupe_key\":\"node2-quiet\","
                            "\"payload\":{\"observation\":\"%s\"}}]}}",
                            (long long)ms, now, quiet));
  }
  case 2: { // summarize through the wordcount adapter, remember the result
    if (!field(req, len, "text", text, sizeof text)) return fail("invalid_input", "text is required");
    int n = snprintf(q, sizeof q, "{\"adapter\":\"wordcount\",\"input\":\"%s\"}", text);
    if (adapter_invoke(q, n, o) != 0) return fail("adapter", "adapter_invoke refused");
    const char *r = strstr(resp_of(o), "\"output\":");
    long words = r ? strtol(r + 9, NULL, 10) : -1;
    free((void *)(uintptr_t)o[0]);
    n = snprintf(q, sizeof q, "{\"namespace\":\"summaries\",\"key\":\"last\",\"value\":{\"words\":%ld}}", words);
    memory_put(q, n, o);
    return respond(snprintf(out, sizeof out, "{\"outcome\":\"completed\",\"output\":{\"words\":%ld}}", words));
  }
  case 3: { // responder: a crisis delivered by the bus; answer it with evidence
    char id[64];
    if (!field(req, len, "message_id", id, sizeof id) || strlen(id) != 36) return fail("invalid_input", "message_id is required");
    int64_t ms = ow_now_ms();
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    char now[32];
    gmtime_r(&secs, &tm);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int n = snprintf(q, sizeof q,
                     "{\"format\":\"agent-message\",\"message\":{\"id\":\"msg-%.8s-0000-4000-8000-%.12s\",\"timestamp\":\"%s\","
                     "\"version\":\"1.0.0\",\"from\":{\"agentId\":\"demo-responder\",\"instanceId\":\"r-1\"},"
                     "\"to\":{\"agentId\":\"demo-sensor\",\"instanceId\":\"s-1\"},\"replyTo\":\"%s\",\"type\":\"response\","
                     "\"payload\":{\"content\":{\"crisis_id\":\"node3-disk\",\"action\":\"acknowledged\","
                     "\"summary\":\"node 3's disk failed during the nightly backup; the backup is rescheduled on node 2\"},"
                     "\"format\":\"json\",\"language\":\"en\",\"encoding\":\"utf-8\"},"
                     "\"evidence\":{\"sources\":[{\"id\":\"syslog-node3\",\"name\":\"syslog of node 3\",\"type\":\"log\"},"
                     "{\"id\":\"%s\",\"name\":\"crisis.detection from demo.sensor\",\"type\":\"message\"}],"
                     "\"confidence\":90,\"citations\":[{\"text\":\"disk error on node 3\",\"source\":\"syslog-node3\"}],"
                     "\"provenance\":[{\"entity\":\"node3-disk\",\"wasGeneratedBy\":\"demo-responder\",\"wasDerivedFrom\":\"%s\"}]}}}",
                     id, id + 24, now, id, id, id);
    if (message_publish(q, n, o) != 0) return fail("bus", "message_publish refused the response");
    free((void *)(uintptr_t)o[0]);
    log_info("answered the crisis");
    return respond(snprintf(out, sizeof out, "{\"outcome\":\"completed\",\"output\":{\"answered\":\"%s\"}}", id));
  }
  }
  return fail("unknown_node", "no such node");
}
