// A packrun node pack written with the AssemblyScript guest SDK.
//
//   example.counter  {"key":"k","by":n} -> {"key":"k","count":c}
//                    adds n (default 1) to the counter in memory namespace
//                    "counters" (kept for a day) and logs the new value
//   example.fail     always fails with code "not_allowed"
//   example.suspend  suspends the run with {"question":"approve?"}
//   example.approve  asks the host for approval through an interrupt and
//                    returns {"approved":<resume value>}
//
// Build with ../build.sh. A pack outside this repository imports
// "@packrun/as-sdk/assembly" and "@packrun/as-sdk/assembly/exports" instead.

import { Context, Level, Result, Status, JsonObject, parseJson, node, pack } from "../assembly";
export * from "../assembly/exports";

const DAY: i64 = 24 * 60 * 60;

pack("local.counter.as");
node("example.counter", counter);
node("example.fail", (ctx: Context, input: string): Result => {
  ctx.warn("about to fail");
  return Result.fail("not_allowed", "this node always fails", new JsonObject().raw("input", input).toString());
});
node("example.suspend", (ctx: Context, input: string): Result => {
  return Result.suspend(new JsonObject().str("question", "approve?").toString());
});
node("example.approve", (ctx: Context, input: string): Result => {
  const v = ctx.interrupt(new JsonObject().str("question", "approve?").toString());
  return Result.ok(new JsonObject().raw("approved", v).toString());
});

function counter(ctx: Context, input: string): Result {
  const inp = parseJson(input);
  if (inp == null || !inp.isObject) return Result.fail("invalid_input", "inputs must be a JSON object");
  const key = inp.getString("key", "default");
  const by = inp.getInteger("by", 1);

  let n: i64 = 0;
  const got = ctx.memoryGet("counters", key);
  if (got.ok) {
    n = got.value()!.asInteger();
  } else if (!got.notFound) {
    return Result.hostError(got);
  }
  n += by;
  const st = ctx.memoryPut("counters", key, n.toString(), DAY);
  if (st != Status.OK) return Result.hostStatus("memory_put", st);
  ctx.log(Level.Info, "counter " + key + " = " + n.toString());
  return Result.ok(new JsonObject().str("key", key).int("count", n).toString());
}
