// A test pack for sdk_test.go: makes the requests of
// internal/testing/guesttest (HTTPRequests) through Context.httpRequest and
// reports what each answer decoded to (HTTPWant).

import { Context, HttpRequest, Result, JsonArray, JsonObject, parseJson, node, pack } from "../assembly";
export * from "../assembly/exports";

const BASE = "http://127.0.0.1:8080";

pack("local.sdk.http.as");
node("test.http", (ctx: Context, input: string): Result => {
  const out = new JsonObject();
  let r = ctx.httpRequest(new HttpRequest(BASE + "/json").header("Accept", "application/json").header("X-Tag", "a").header("X-Tag", "b").timeout(1500));
  if (!r.ok) return Result.fail("get", r.toString());
  let resp = r.response!;
  const doc = parseJson(resp.text());
  out.int("get_status", resp.status).int("get_headers", resp.headers.length).str("get_tag2", resp.headers[2][1])
    .int("get_len", resp.body.length).str("get_name", doc == null ? "" : doc.getString("name"));

  r = ctx.httpRequest(new HttpRequest(BASE + "/echo", "POST").header("Content-Type", "text/plain; charset=utf-8").text("héllo"));
  if (!r.ok) return Result.fail("post", r.toString());
  resp = r.response!;
  out.int("post_status", resp.status).str("post_body", resp.text());

  const bin = new Uint8Array(3);
  bin[0] = 0; bin[1] = 1; bin[2] = 255;
  r = ctx.httpRequest(new HttpRequest(BASE + "/bin", "PUT").bytes(bin));
  if (!r.ok) return Result.fail("put", r.toString());
  resp = r.response!;
  const bytes = new JsonArray();
  for (let i = 0; i < resp.body.length; i++) bytes.int(resp.body[i]);
  out.int("bin_status", resp.status).raw("bin_bytes", bytes.toString()).bool("bin_truncated", resp.truncated);

  r = ctx.httpRequest(new HttpRequest(BASE + "/denied", ""));
  out.int("denied_status", r.status).str("denied_error", r.error);
  r = ctx.httpRequest(new HttpRequest(BASE + "/big"));
  out.int("big_status", r.status).str("big_kind", r.kind).str("big_error", r.error);
  return Result.ok(out.toString());
});

// Responses that do not decode: each gives Status.HostError (99).
import { decodeHttpResponse } from "../assembly/http";
node("test.http_decode", (ctx: Context, input: string): Result => {
  const bad = ["{}", "[", "{\"status\":200,\"body\":\"a\",\"body_base64\":\"YQ==\"}", "{\"status\":200,\"body_base64\":\"!\"}",
    "{\"status\":200,\"headers\":[[\"a\"]]}", "{\"status\":200,\"headers\":[1]}", "{\"status\":200,\"body_base64\":\"AA=A\"}"];
  const out = new JsonArray();
  for (let i = 0; i < bad.length; i++) out.int(decodeHttpResponse(parseJson(bad[i])).status);
  const good = decodeHttpResponse(parseJson("{\"status\":500,\"headers\":[[\"X\",\"1\"],[\"x\",\"2\"]],\"body_base64\":\"AAE=\"}"));
  const r = good.response!;
  out.int(r.status).int(r.body.length).int(r.body[1]).str(r.header("x")!);
  return Result.ok(out.toString());
});
