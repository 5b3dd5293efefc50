/*
 * counter.c - an example node pack written with the packrun C SDK.
 *
 * Pack "local.counter.c", three nodes:
 *
 *   example.counter  {"key":"k","by"?:n}  ->  {"key":"k","count":n}
 *       Reads memory entry counters/<key> (absent -> 0), adds "by" (default 1),
 *       writes it back with a one-hour TTL and logs the new value. Fails with
 *       invalid_input when "key" is missing or not a string.
 *   example.gate     {"approved"?:true}   ->  {"approved":true}
 *       Suspends with {"question":"approve?"} until called with approved=true.
 *   example.ask      {}                   ->  {"answer":<resume value>}
 *       Asks the host to suspend (openwop_interrupt); on resume, returns the
 *       resume value.
 *
 * Build: ./build.sh
 */
#include <string.h>

#include "packrun.h"

PACKRUN_PACK("local.counter.c")

enum { TTL_SECONDS = 3600 };

static packrun_result counter(const packrun_ctx *ctx, const char *input, size_t len) {
    char key[128];
    long long count = 0, by = 1;
    packrun_str value;
    packrun_buf b = {0};
    int st;

    st = packrun_json_get_string(input, len, "key", key, sizeof key);
    if (st == PACKRUN_E_TRUNCATED)
        return packrun_fail("invalid_input", "inputs.key is longer than 127 bytes");
    if (st != PACKRUN_OK)
        return packrun_fail("invalid_input", "inputs.key must be a string");
    st = packrun_json_get_int(input, len, "by", &by);
    if (st != PACKRUN_OK && st != PACKRUN_NOT_FOUND)
        return packrun_fail("invalid_input", "inputs.by must be an integer");

    st = packrun_memory_get("counters", key, &value);
    if (st == PACKRUN_OK) {
        /* the stored value is a bare JSON integer; anything else restarts at 0 */
        if (packrun_json_int(value.data, value.len, &count) != PACKRUN_OK)
            count = 0;
    } else if (st != PACKRUN_NOT_FOUND) {
        return packrun_fail(packrun_status_name(st), "memory_get failed");
    }
    count += by;

    packrun_buf_int(&b, count);
    st = packrun_memory_put("counters", key, b.data, TTL_SECONDS, 0);
    packrun_buf_free(&b);
    if (st != PACKRUN_OK)
        return packrun_fail(packrun_status_name(st), "memory_put failed");

    packrun_logf(PACKRUN_LOG_INFO, "counter %s = %lld (run %s, attempt %d)", key, count, ctx->run_id, ctx->attempt);

    packrun_buf_raw(&b, "{\"key\":");
    packrun_buf_cstring(&b, key);
    packrun_buf_raw(&b, ",\"count\":");
    packrun_buf_int(&b, count);
    packrun_buf_raw(&b, "}");
    return packrun_complete_buf(&b);
}
PACKRUN_NODE("example.counter", counter)

static packrun_result gate(const packrun_ctx *ctx, const char *input, size_t len) {
    int approved = 0;
    (void)ctx;
    if (packrun_json_get_bool(input, len, "approved", &approved) == PACKRUN_OK && approved)
        return packrun_complete("{\"approved\":true}");
    packrun_log(PACKRUN_LOG_WARN, "gate: waiting for approval");
    return packrun_suspend("{\"question\":\"approve?\"}");
}
PACKRUN_NODE("example.gate", gate)

static packrun_result ask(const packrun_ctx *ctx, const char *input, size_t len) {
    packrun_str answer;
    packrun_buf b = {0};
    int st;
    (void)ctx, (void)input, (void)len;
    /* Does not return on the first run: the host suspends the invocation. */
    st = packrun_interrupt("{\"question\":\"name?\"}", &answer);
    if (st != PACKRUN_OK)
        return packrun_fail(packrun_status_name(st), "interrupt failed");
    packrun_buf_raw(&b, "{\"answer\":");
    packrun_buf_rawn(&b, answer.data, answer.len);
    packrun_buf_raw(&b, "}");
    return packrun_complete_buf(&b);
}
PACKRUN_NODE("example.ask", ask)
