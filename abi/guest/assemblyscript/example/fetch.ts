// An example skill written with the AssemblyScript guest SDK that reaches
// the network through its http grant (see fetch/pack.json).
//
//   example.fetch  {"url":"http://...","field":"name"}
//                  -> {"status":n,"length":bytes,"value":<the field of the JSON body, null if absent>}
//
// The grant names the destination and a secret the host sends as a bearer
// token: the module never sees it. A refusal fails the invocation with the
// host's reason. Build with ../build.sh.

import { Context, HttpRequest, Result, JsonObject, parseJson, node, pack } from "../assembly";
export * from "../assembly/exports";

pack("local.fetch.as");
node("example.fetch", (ctx: Context, input: string): Result => {
  const inp = parseJson(input);
  if (inp == null || !inp.has("url") || !inp.has("field")) {
    return Result.fail("invalid_input", "inputs.url and inputs.field must be strings");
  }
  const r = ctx.httpRequest(new HttpRequest(inp.getString("url")).header("Accept", "application/json"));
  if (!r.ok) {
    const details = new JsonObject().int("status", r.status).str("kind", r.kind).toString();
    return Result.fail("http_request_failed", r.error.length > 0 ? r.error : r.toString(), details);
  }
  const resp = r.response!;
  const doc = parseJson(resp.text());
  let value = "null";
  if (doc != null) {
    const v = doc.get(inp.getString("field"));
    if (v != null) value = v.raw;
  }
  return Result.ok(new JsonObject().int("status", resp.status).int("length", resp.body.length)
    .raw("value", value).toString());
});
