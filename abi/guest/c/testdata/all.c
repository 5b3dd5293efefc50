/* all.c - test module: one node that calls every host function and JSON
 * helper of the C SDK and reports what it got. Built by sdk_test.go when
 * the toolchain is available (no committed .wasm). */
#include <string.h>

#include "packrun.h"

PACKRUN_PACK("local.sdk.c.all")

static packrun_buf o;

/* The messages of ../publish_test.go (opsAlert, offGrant, invalidMsg): within the grant, outside
 * it, refused by its seed. */
static const char OPS_ALERT[] =
    "{\"metadata\":{\"message_id\":\"11111111-2222-3333-4444-555555555555\",\"timestamp\":\"2026-01-02T15:04:05Z\","
    "\"source\":\"probe\",\"message_type\":\"ops.alert\",\"version\":\"1.0\"},\"payload\":{\"n\":1}}";
static const char OFF_GRANT[] =
    "{\"metadata\":{\"message_id\":\"11111111-2222-3333-4444-666666666666\",\"timestamp\":\"2026-01-02T15:04:05Z\","
    "\"source\":\"probe\",\"message_type\":\"billing.charge\",\"version\":\"1.0\"},\"payload\":{\"n\":2}}";
static const char INVALID[] = "{\"metadata\":{\"source\":\"probe\"},\"payload\":{}}";
/* The sensor events of internal/guesttest (SensorEvent, InvalidEvent). */
static const char SENSOR_EVENT[] = "{\"event_id\":\"ev-1\",\"observed_at\":\"2026-01-02T15:04:05Z\",\"source_ref\":\"probe:1\","
                                   "\"dedupe_key\":\"k1\",\"payload\":{\"n\":1}}";
static const char INVALID_EVENT[] = "{\"event_id\":\"ev-2\",\"payload\":{}}";

static void field(const char *name) {
    packrun_buf_raw(&o, o.len ? ",\"" : "{\"");
    packrun_buf_raw(&o, name);
    packrun_buf_raw(&o, "\":");
}
static void num(const char *name, long long v) { field(name); packrun_buf_int(&o, v); }
static void raw(const char *name, const packrun_str *s) { field(name); packrun_buf_rawn(&o, s->data, s->len); }
static void str(const char *name, const char *s) { field(name); packrun_buf_cstring(&o, s); }

static packrun_result all(const packrun_ctx *ctx, const char *in, size_t len) {
    packrun_str s, s2;
    unsigned char r[4];
    long long staged = -1, n = 0;
    char buf[8], esc[32];
    size_t full = 0;
    int l, b = -1;
    const char *v;
    size_t vn;

    memset(&o, 0, sizeof o);
    for (l = 0; l <= 4; l++)
        packrun_logf(l, "level %d %s %.*s %u %zu %x %lld %c%% %q", l, "s", 2, "abc", 7u, (size_t)8, 255u, -9LL, 'z');
    num("now", packrun_now_ms());
    num("random", packrun_random(r, sizeof r));
    num("varUnset", packrun_variable_get("v", &s));
    num("varSet", packrun_variable_set("v", "{\"a\":[1,2]}"));
    num("varBad", packrun_variable_set("v", "{bad"));
    packrun_variable_get("v", &s);
    raw("var", &s);
    packrun_channel_read("c", &s);
    raw("chanEmpty", &s);
    packrun_channel_write("c", "1");
    packrun_channel_write("c", "\"two\"");
    packrun_channel_read("c", &s);
    raw("chan", &s);
    num("putA", packrun_memory_put("ns", "a", "{\"x\":1}", 0, 1));
    num("putB", packrun_memory_put("ns", "b", "2", 60, 0));
    packrun_memory_get("ns", "a", &s);
    raw("memA", &s);
    num("memMissing", packrun_memory_get("ns", "zz", &s));
    packrun_memory_list("ns", NULL, &s);
    raw("list", &s);
    packrun_memory_list("ns", "b", &s);
    raw("listB", &s);
    num("del", packrun_memory_delete("ns", "a"));
    num("memAfterDel", packrun_memory_get("ns", "a", &s));
    num("queue", packrun_queue_enqueue("{\"task_type\":\"t\",\"payload\":{}}", &staged));
    num("staged", staged);
    num("adapter", packrun_adapter_invoke("echo", "{\"q\":\"hi\"}", &s, &s2));
    raw("adapterOut", &s);
    raw("adapterResp", &s2);
    num("evidence", packrun_evidence_record("note", "{\"n\":1}"));
    num("artifact", packrun_artifact_put_text("output", "a.txt", "text/plain", "hello \"x\"\n", 10, &s, &s2));
    str("artifactId", s.data);
    str("sha256", s2.data);
    num("artifact64", packrun_artifact_put_base64("output", "b.bin", NULL, "AAE=", NULL, NULL));
    packrun_config_get("greeting", &s);
    raw("config", &s);
    num("configMissing", packrun_config_get("missing", &s));
    num("rawCall", packrun_host_call("config_get", "{\"key\":\"greeting\"}", strlen("{\"key\":\"greeting\"}"), &s));
    raw("rawResp", &s);
    num("rawBad", packrun_host_call("nope", "{}", 2, &s));
    num("rawPublish", packrun_host_call("message_publish", "{}", 2, &s));
    staged = -1;
    num("publish", packrun_message_publish(PACKRUN_BUS_ENVELOPE, OPS_ALERT, NULL, &s, &s2, &staged));
    str("pubId", s.data);
    str("pubHash", s2.data);
    num("pubStaged", staged);
    num("pubDenied", packrun_message_publish(PACKRUN_BUS_ENVELOPE, OFF_GRANT, "c2ln", NULL, NULL, NULL));
    num("pubInvalid", packrun_message_publish(PACKRUN_AGENT_ENVELOPE, INVALID, NULL, &s, NULL, &staged));
    num("pubAfterRefusal", staged);
    num("pubBadJson", packrun_message_publish(PACKRUN_BUS_ENVELOPE, "{", NULL, NULL, NULL, NULL));
    num("pubBadFormat", packrun_message_publish((packrun_message_format)7, OPS_ALERT, NULL, NULL, NULL, NULL));
    num("rawSensor", packrun_host_call("sensor_emit", "{}", 2, &s));
    staged = -1;
    num("sensor", packrun_sensor_emit(SENSOR_EVENT, &s, &staged));
    str("sensorId", s.data);
    num("sensorStaged", staged);
    num("sensorInvalid", packrun_sensor_emit(INVALID_EVENT, &s, &staged));
    num("sensorAfterRefusal", staged);
    num("sensorBadJson", packrun_sensor_emit("{", NULL, NULL));

    /* JSON helpers over the input */
    num("getStr", packrun_json_get_string_n(in, len, "s", buf, sizeof buf, &full));
    str("strPrefix", buf);
    num("strFull", (long long)full);
    num("getInt", packrun_json_get_int(in, len, "n", &n));
    num("int", n);
    num("getBig", packrun_json_get_int(in, len, "big", &n));
    num("getBool", packrun_json_get_bool(in, len, "b", &b));
    num("bool", b);
    num("getNull", packrun_json_get_string(in, len, "z", buf, sizeof buf));
    num("getMissing", packrun_json_get(in, len, "missing", &v, &vn));
    num("getType", packrun_json_get_int(in, len, "s", &n));
    num("notObject", packrun_json_get("[1]", 3, "a", &v, &vn));
    num("badJson", packrun_json_get("{\"a\":1,}", 8, "a", &v, &vn));
    num("dupLast", (packrun_json_get_int("{\"a\":1,\"\\u0061\":2}", 18, "a", &n), n));
    num("valid", packrun_json_valid(" [1, {\"a\": null}] ", strlen(" [1, {\"a\": null}] ")));
    num("escLen", (long long)packrun_json_escape("a\"\x01\xff", 4, esc, sizeof esc));
    str("esc", esc);

    /* context */
    str("typeId", ctx->type_id);
    str("runId", ctx->run_id);
    str("nodeId", ctx->node_id);
    str("tenantId", ctx->tenant_id);
    num("attempt", ctx->attempt);
    field("configurable");
    packrun_buf_rawn(&o, ctx->configurable ? ctx->configurable : "null", ctx->configurable ? ctx->configurable_len : 4);
    packrun_buf_raw(&o, "}");
    return packrun_complete_buf(&o);
}
PACKRUN_NODE("test.all", all)

static packrun_result bad_output(const packrun_ctx *ctx, const char *in, size_t len) {
    (void)ctx, (void)in, (void)len;
    return packrun_complete("{not json");
}
PACKRUN_NODE("test.bad_output", bad_output)

static packrun_result bad_utf8(const packrun_ctx *ctx, const char *in, size_t len) {
    (void)ctx, (void)in, (void)len;
    return packrun_complete("\"\xff\"");
}
PACKRUN_NODE("test.bad_utf8", bad_utf8)

static packrun_result no_outcome(const packrun_ctx *ctx, const char *in, size_t len) {
    (void)ctx, (void)in, (void)len;
    return PACKRUN_COMPLETED;
}
PACKRUN_NODE("test.no_outcome", no_outcome)

static packrun_result details(const packrun_ctx *ctx, const char *in, size_t len) {
    (void)ctx, (void)in, (void)len;
    return packrun_fail_details("quota", "too \"many\"", "{\"limit\":3}");
}
PACKRUN_NODE("test.details", details)
