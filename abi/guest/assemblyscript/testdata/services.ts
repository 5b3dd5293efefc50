// A test pack for sdk_test.go: calls every host service through the SDK and
// reports what it got back.

import { Context, HostResult, Level, MessageFormat, Result, Status, JsonArray, JsonObject, parseJson, quote, node, pack } from "../assembly";
export * from "../assembly/exports";

// The messages of internal/guesttest (OpsAlert, OffGrant, InvalidMsg): within the grant, outside
// it, refused by its seed.
// (Declared before the nodes: AssemblyScript initialises globals in order.)
const OPS_ALERT = "{\"metadata\":{\"message_id\":\"11111111-2222-3333-4444-555555555555\",\"timestamp\":\"2026-01-02T15:04:05Z\"," +
  "\"source\":\"probe\",\"message_type\":\"ops.alert\",\"version\":\"1.0\"},\"payload\":{\"n\":1}}";
const OFF_GRANT = "{\"metadata\":{\"message_id\":\"11111111-2222-3333-4444-666666666666\",\"timestamp\":\"2026-01-02T15:04:05Z\"," +
  "\"source\":\"probe\",\"message_type\":\"billing.charge\",\"version\":\"1.0\"},\"payload\":{\"n\":2}}";
const INVALID = "{\"metadata\":{\"source\":\"probe\"},\"payload\":{}}";
// The sensor events of internal/guesttest (SensorEvent, InvalidEvent).
const SENSOR_EVENT = "{\"event_id\":\"ev-1\",\"observed_at\":\"2026-01-02T15:04:05Z\",\"source_ref\":\"probe:1\"," +
  "\"dedupe_key\":\"k1\",\"payload\":{\"n\":1}}";
const INVALID_EVENT = "{\"event_id\":\"ev-2\",\"payload\":{}}";

pack("local.sdk.services.as");
node("test.services", services);
node("test.raw", (ctx: Context, input: string): Result => {
  return Result.ok(new JsonObject().bool("raw", true).raw("in", input).str("run", ctx.runId).str("tenant", ctx.tenantId)
    .int("attempt", ctx.attempt).str("node", ctx.nodeId).str("type", ctx.typeId).toString());
});
node("test.badoutput", (ctx: Context, input: string): Result => Result.ok("{oops"));
node("test.trap", (ctx: Context, input: string): Result => {
  throw new Error("boom");
});
node("test.big", (ctx: Context, input: string): Result => {
  const n = <i32>parseJson(input)!.getInteger("n");
  const st = ctx.memoryPut("ns", "big", quote("x".repeat(n)));
  if (st != Status.OK) return Result.hostStatus("memory_put", st);
  const got = ctx.memoryGet("ns", "big");
  if (!got.ok) return Result.hostError(got);
  return Result.ok(got.value()!.asString().length.toString());
});
node("test.json", (ctx: Context, input: string): Result => {
  // Round-trips strings through the parser and quote().
  const v = parseJson(input)!;
  const out = new JsonArray();
  const items = v.get("strings")!;
  for (let i = 0; i < items.length; i++) out.str(items.at(i)!.asString());
  return Result.ok(new JsonObject().raw("strings", out.toString())
    .int("big", v.getInteger("big")).num("half", v.getNumber("half")).num("nan", NaN)
    .bool("invalid", parseJson("[1,]") == null || parseJson("01") == null).toString());
});

function st(s: Status): string { return (<i32>s).toString(); }

function res(r: HostResult): string {
  const j = r.json;
  return new JsonObject().int("status", <i64>r.status).raw("json", j == null ? "null" : j).toString();
}

function services(ctx: Context, input: string): Result {
  const out = new JsonObject();
  ctx.log(Level.Debug, "debug line");
  out.int("now", ctx.nowMs());
  const buf = new Uint8Array(8);
  out.raw("randomStatus", st(ctx.random(buf)));
  let nonZero = false;
  for (let i = 0; i < buf.length; i++) if (buf[i] != 0) nonZero = true;
  out.bool("randomNonZero", nonZero);

  out.bool("unsetVar", ctx.variableGet("v") == null);
  out.raw("setVar", st(ctx.variableSet("v", "{\"n\":1}")));
  const v = ctx.variableGet("v");
  out.raw("var", v == null ? "null" : v);
  out.raw("write1", st(ctx.channelWrite("c", "1")));
  out.raw("write2", st(ctx.channelWrite("c", "\"two\"")));
  out.raw("channel", ctx.channelRead("c"));

  out.raw("put1", st(ctx.memoryPut("ns", "k1", "\"v1\"", 0, true)));
  out.raw("put2", st(ctx.memoryPut("ns", "k2", "2")));
  out.raw("list", res(ctx.memoryList("ns", "k")));
  const keys = ctx.memoryKeys("ns");
  const ka = new JsonArray();
  for (let i = 0; i < keys.length; i++) ka.str(keys[i]);
  out.raw("keys", ka.toString());
  out.raw("delete", st(ctx.memoryDelete("ns", "k1")));
  out.bool("deleted", ctx.memoryGet("ns", "k1").notFound);

  out.raw("enqueue", res(ctx.queueEnqueue("{\"task_type\":\"next\",\"payload\":{\"from\":\"sdk\"}}")));
  out.raw("adapter", res(ctx.adapterInvoke("echo", "{\"x\":1}")));
  out.raw("evidence", st(ctx.evidenceRecord("note", "{\"a\":\"b\"}")));
  out.raw("artifact", res(ctx.artifactPut("a.txt", "hello")));
  const bin = new Uint8Array(3);
  bin[0] = 0; bin[1] = 1; bin[2] = 2;
  out.raw("artifact2", res(ctx.artifactPutBytes("b.bin", bin, "log", "application/octet-stream")));
  out.raw("config", res(ctx.configGet("greeting")));
  const missing = ctx.configGet("missing");
  out.raw("configMissing", res(missing));
  out.str("configMissingText", missing.toString());
  out.raw("published", res(ctx.messagePublish(MessageFormat.BusEnvelope, OPS_ALERT)));
  const denied = ctx.messagePublish(MessageFormat.BusEnvelope, OFF_GRANT, "c2ln");
  out.raw("pubDenied", res(denied));
  out.str("pubDeniedText", denied.toString());
  out.raw("pubInvalid", res(ctx.messagePublish(MessageFormat.AgentEnvelope, INVALID)));
  out.raw("emitted", res(ctx.sensorEmit(SENSOR_EVENT)));
  const refused = ctx.sensorEmit(INVALID_EVENT);
  out.raw("sensorInvalid", res(refused));
  out.str("sensorInvalidText", refused.toString());
  return Result.ok(out.toString());
}
