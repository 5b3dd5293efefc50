// Outbound HTTP through the host: packrun:host/v1 http_request (ABI 1.3).
import { host_http_request, Status, statusName, respSlot, takeString } from "./abi";
import { JsonArray, JsonObject, JsonValue, parseJson, base64 } from "./json";

/** An outbound request for Context.httpRequest. */
export class HttpRequest {
  /** Headers as [name, value] pairs, sent in this order; a name may repeat. */
  headers: string[][] = [];
  /** The body: sent as text when it is valid UTF-8, else base64-encoded.
   * null for none. */
  body: Uint8Array | null = null;
  /** Timeout in milliseconds (the host caps it); 0 for the host's. */
  timeoutMs: i64 = 0;

  /** method "" means GET; url is an absolute http:// or https:// URL within
   * the pack's http grant. */
  constructor(public url: string, public method: string = "GET") {}

  /** Appends a header. */
  header(name: string, value: string): HttpRequest {
    this.headers.push([name, value]);
    return this;
  }
  /** Sets the body bytes. */
  bytes(body: Uint8Array): HttpRequest {
    this.body = body;
    return this;
  }
  /** Sets a text body. */
  text(body: string): HttpRequest {
    this.body = Uint8Array.wrap(String.UTF8.encode(body));
    return this;
  }
  /** Sets the timeout. */
  timeout(ms: i64): HttpRequest {
    this.timeoutMs = ms;
    return this;
  }

  /** The request JSON of http_request. */
  toJson(): string {
    const o = new JsonObject().str("method", this.method.length > 0 ? this.method : "GET").str("url", this.url);
    if (this.headers.length > 0) {
      const hs = new JsonArray();
      for (let i = 0; i < this.headers.length; i++) {
        hs.raw(new JsonArray().str(this.headers[i][0]).str(this.headers[i][1]).toString());
      }
      o.raw("headers", hs.toString());
    }
    const b = this.body;
    if (b != null && b.length > 0) {
      if (validUtf8(b)) o.str("body", String.UTF8.decodeUnsafe(b.dataStart, <usize>b.length));
      else o.str("body_base64", base64(b));
    }
    if (this.timeoutMs > 0) o.int("timeout_ms", this.timeoutMs);
    return o.toString();
  }
}

/** The host's answer: any HTTP status (404, 500, ...) is a response. */
export class HttpResponse {
  status: i32 = 0;
  /** Headers as [name, value] pairs in the order received. */
  headers: string[][] = [];
  body: Uint8Array = new Uint8Array(0);
  /** The host cut the body at its limit (only when the grant says so). */
  truncated: bool = false;

  /** The body as text (invalid UTF-8 replaced by U+FFFD). */
  text(): string { return String.UTF8.decodeUnsafe(this.body.dataStart, <usize>this.body.length); }

  /** The value of the first header named name (ASCII case-insensitive), or null. */
  header(name: string): string | null {
    const want = name.toLowerCase();
    for (let i = 0; i < this.headers.length; i++) {
      if (this.headers[i][0].toLowerCase() == want) return this.headers[i][1];
    }
    return null;
  }
}

/** The outcome of Context.httpRequest: ok with a response, or the host's
 * status with its one-line reason (error) and, for
 * Status.CapabilityBreach, the limit hit (kind: "http-requests",
 * "http-request-bytes", "http-response-bytes", "http-timeout"). A response
 * that does not decode is Status.HostError with error saying so. */
export class HttpResult {
  constructor(
    public status: Status,
    public response: HttpResponse | null,
    public error: string = "",
    public kind: string = "",
  ) {}

  get ok(): bool { return this.status == Status.OK; }

  /** "packrun:host/v1.http_request: capability_breach (http-timeout): ..." */
  toString(): string {
    let s = "packrun:host/v1.http_request: " + statusName(this.status);
    if (this.kind.length > 0) s += " (" + this.kind + ")";
    if (this.error.length > 0) s += ": " + this.error;
    return s;
  }
}

/** Sends req (see Context.httpRequest). */
export function httpRequest(req: HttpRequest): HttpResult {
  const body = String.UTF8.encode(req.toJson());
  store<u64>(respSlot, 0);
  const s = host_http_request(changetype<usize>(body), body.byteLength, respSlot);
  const resp = takeString(<usize>load<u32>(respSlot), load<u32>(respSlot, 4));
  let v: JsonValue | null = null;
  if (resp != null) v = parseJson(resp);
  if (s != 0) {
    let err = "", kind = "";
    if (v != null) {
      err = v.getString("error");
      kind = v.getString("kind");
    }
    return new HttpResult(<Status>s, null, err, kind);
  }
  return decodeHttpResponse(v);
}

/** Decodes the response JSON of http_request. */
export function decodeHttpResponse(v: JsonValue | null): HttpResult {
  const bad = new HttpResult(Status.HostError, null, "http_request: response does not decode");
  if (v == null || !v.isObject) return bad;
  const st = v.get("status");
  if (st == null || !st.isNumber) return bad;
  const r = new HttpResponse();
  r.status = <i32>st.asInteger();
  r.truncated = v.getBool("truncated");
  const hs = v.get("headers");
  if (hs != null && !hs.isNull) {
    if (!hs.isArray) return bad;
    for (let i = 0; i < hs.length; i++) {
      const h = hs.at(i)!;
      if (!h.isArray || h.length != 2 || !h.at(0)!.isString || !h.at(1)!.isString) return bad;
      r.headers.push([h.at(0)!.asString(), h.at(1)!.asString()]);
    }
  }
  const text = v.get("body"), b64 = v.get("body_base64");
  if (text != null && b64 != null) return bad;
  if (text != null) {
    if (!text.isString) return bad;
    r.body = Uint8Array.wrap(String.UTF8.encode(text.asString()));
  } else if (b64 != null) {
    const d = b64.isString ? unbase64(b64.asString()) : null;
    if (d == null) return bad;
    r.body = d;
  }
  return new HttpResult(Status.OK, r);
}

function validUtf8(b: Uint8Array): bool {
  const n = b.length;
  let i = 0;
  while (i < n) {
    const c = <u32>b[i];
    let k = 0;
    let min: u32 = 0;
    if (c < 0x80) { i++; continue; }
    else if (c >= 0xc2 && c <= 0xdf) { k = 1; min = 0x80; }
    else if (c >= 0xe0 && c <= 0xef) { k = 2; min = 0x800; }
    else if (c >= 0xf0 && c <= 0xf4) { k = 3; min = 0x10000; }
    else return false;
    let cp = c & (0x3f >> k);
    for (let j = 1; j <= k; j++) {
      if (i + j >= n) return false;
      const d = <u32>b[i + j];
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += k + 1;
  }
  return true;
}

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

function unbase64(s: string): Uint8Array | null {
  const n = s.length;
  if (n % 4 != 0) return null;
  let pad = 0;
  if (n > 0 && s.charCodeAt(n - 1) == 61) pad++;
  if (n > 1 && s.charCodeAt(n - 2) == 61) pad++;
  const out = new Uint8Array((n / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < n; i += 4) {
    let v: u32 = 0;
    for (let j = 0; j < 4; j++) {
      const c = s.charAt(i + j);
      let d = B64.indexOf(c);
      if (d < 0) {
        if (c != "=" || i + 4 != n || j < 4 - pad) return null;
        d = 0;
      }
      v = (v << 6) | <u32>d;
    }
    if (o < out.length) out[o++] = <u8>(v >> 16);
    if (o < out.length) out[o++] = <u8>(v >> 8);
    if (o < out.length) out[o++] = <u8>v;
  }
  return out;
}
