// An Extism plugin, written with the Extism AssemblyScript PDK, that packrun
// runs as the pack local.extism.as. Its one node, extism.count, counts calls
// per name in packrun's memory service:
//
//   input  {"name":"x"}            ("name" defaults to "world")
//   output {"name":"x","count":N}  (N-th call for this name within the TTL)
//
// packrun serves its host services (packrun:host/v1) to Extism plugins as
// Extism host functions: (i64 request_offset) -> i64 response_offset. The
// request is a JSON document in Extism memory; the response is
// {"status":<abi status>,"body":<response JSON or null>}, also in Extism
// memory (0 = ok, 1 = not granted, 10 = invalid request, 11 = not found,
// 99 = host error).
import { Host, Memory } from "@extism/as-pdk";
import { error_set, length } from "@extism/as-pdk/lib/env";

@external("packrun:host/v1", "memory_get")
declare function memory_get(offset: u64): u64;
@external("packrun:host/v1", "memory_put")
declare function memory_put(offset: u64): u64;

const NAMESPACE = "counters";
const TTL_SECONDS = 3600;
const STATUS_OK = 0;
const STATUS_NOT_FOUND = 11;

// A host reply: the abi status and the raw JSON body ("null" when none).
class Reply {
  constructor(public status: i32, public body: string) {}
}

// call sends a JSON request to a packrun:host/v1 function and parses the
// {"status":..,"body":..} envelope of the reply.
function call(fn: (offset: u64) => u64, request: string): Reply {
  const req = Memory.allocateString(request); // UTF-8 bytes, counted correctly
  const off = fn(req.offset);
  req.free();
  if (off == 0) return new Reply(99, "null");
  const resp = new Memory(off, length(off));
  const text = resp.toString();
  resp.free();
  const p = new Parser(text);
  let status: i32 = 99;
  let body = "null";
  if (p.enterObject()) {
    let key = p.nextKey();
    while (key !== null) {
      if (key == "status") {
        const n = p.integer();
        if (n < 0) return new Reply(99, "null");
        status = <i32>n;
      } else if (key == "body") {
        const start = p.i;
        if (!p.skipValue()) return new Reply(99, "null");
        body = text.substring(start, p.i);
      } else if (!p.skipValue()) {
        return new Reply(99, "null");
      }
      key = p.nextKey();
    }
  }
  return new Reply(status, body);
}

// fail reports an error to the host (the node fails with code plugin_error)
// and returns the non-zero result that marks the failure.
function fail(message: string): i32 {
  error_set(Memory.allocateString(message).offset);
  return 1;
}

export function count(): i32 {
  // The input is the node's input JSON, e.g. {"name":"x"}.
  let name = "world";
  const input = new Parser(Host.inputString());
  if (!input.enterObject()) return fail("input is not a JSON object");
  let key = input.nextKey();
  while (key !== null) {
    if (key == "name") {
      const s = input.string();
      if (s === null) return fail('"name" must be a string');
      name = s;
    } else if (!input.skipValue()) {
      return fail("input is not valid JSON");
    }
    key = input.nextKey();
  }
  const jsonKey = quote(name);

  // Read the current count: {"value":N}, or status 11 when there is none.
  let n: i64 = 0;
  const got = call(memory_get, '{"namespace":"' + NAMESPACE + '","key":' + jsonKey + "}");
  if (got.status == STATUS_OK) {
    const body = new Parser(got.body);
    if (body.enterObject()) {
      let k = body.nextKey();
      while (k !== null) {
        if (k == "value") {
          n = body.integer();
          if (n < 0) return fail("memory counters/" + name + " does not hold a count");
        } else if (!body.skipValue()) {
          break;
        }
        k = body.nextKey();
      }
    }
  } else if (got.status != STATUS_NOT_FOUND) {
    return fail("memory_get returned status " + got.status.toString());
  }
  n += 1;

  // Write it back, kept for an hour.
  const put = call(
    memory_put,
    '{"namespace":"' + NAMESPACE + '","key":' + jsonKey + ',"value":' + n.toString() +
      ',"ttlSeconds":' + TTL_SECONDS.toString() + "}",
  );
  if (put.status != STATUS_OK) return fail("memory_put returned status " + put.status.toString());

  // Output bytes: Host.outputString counts UTF-16 units, not UTF-8 bytes, so
  // it would cut non-ASCII output short.
  const out = '{"name":' + jsonKey + ',"count":' + n.toString() + "}";
  Host.output(Uint8Array.wrap(String.UTF8.encode(out)));
  return 0;
}

// abort (wired with --use abort=assembly/index/abort) reports AssemblyScript
// runtime errors through Extism's error_set before trapping.
let aborting = false;
function abort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  if (!aborting) {
    aborting = true;
    const m = message !== null ? message : "abort";
    const f = fileName !== null ? fileName : "?";
    error_set(Memory.allocateString(m + " at " + f + ":" + line.toString() + ":" + column.toString()).offset);
  }
  unreachable();
}

// quote encodes s as a JSON string.
function quote(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x22) out += '\\"';
    else if (c == 0x5c) out += "\\\\";
    else if (c == 0x0a) out += "\\n";
    else if (c == 0x0d) out += "\\r";
    else if (c == 0x09) out += "\\t";
    else if (c < 0x20) out += "\\u00" + (c < 0x10 ? "0" : "") + c.toString(16);
    else out += String.fromCharCode(c);
  }
  return out + '"';
}

// Parser is a minimal JSON reader: enough to walk an object's members,
// decode strings and read non-negative integers, skipping everything else.
class Parser {
  i: i32 = 0;
  constructor(public s: string) {}

  private ws(): void {
    while (this.i < this.s.length) {
      const c = this.s.charCodeAt(this.i);
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      this.i++;
    }
  }

  private peek(): i32 {
    this.ws();
    return this.i < this.s.length ? this.s.charCodeAt(this.i) : -1;
  }

  private first: bool = true;

  // enterObject consumes "{" and prepares nextKey.
  enterObject(): bool {
    if (this.peek() != 0x7b) return false;
    this.i++;
    this.first = true;
    return true;
  }

  // nextKey consumes the next member's key and ":", or returns null at "}"
  // (or on malformed input).
  nextKey(): string | null {
    let c = this.peek();
    if (c == 0x7d) {
      this.i++;
      return null;
    }
    if (!this.first) {
      if (c != 0x2c) return null;
      this.i++;
    }
    this.first = false;
    const k = this.string();
    if (k === null || this.peek() != 0x3a) return null;
    this.i++;
    return k;
  }

  // string decodes a JSON string, or returns null if there is none.
  string(): string | null {
    if (this.peek() != 0x22) return null;
    this.i++;
    let out = "";
    let start = this.i;
    while (this.i < this.s.length) {
      const c = this.s.charCodeAt(this.i);
      if (c == 0x22) {
        out += this.s.substring(start, this.i);
        this.i++;
        return out;
      }
      if (c != 0x5c) {
        this.i++;
        continue;
      }
      out += this.s.substring(start, this.i);
      if (this.i + 1 >= this.s.length) return null;
      const e = this.s.charCodeAt(this.i + 1);
      this.i += 2;
      if (e == 0x22 || e == 0x5c || e == 0x2f) out += String.fromCharCode(e);
      else if (e == 0x62) out += "\b";
      else if (e == 0x66) out += "\f";
      else if (e == 0x6e) out += "\n";
      else if (e == 0x72) out += "\r";
      else if (e == 0x74) out += "\t";
      else if (e == 0x75) {
        if (this.i + 4 > this.s.length) return null;
        const h = I32.parseInt(this.s.substring(this.i, this.i + 4), 16);
        if (isNaN(h)) return null;
        out += String.fromCharCode(<i32>h); // surrogate pairs arrive as two escapes
        this.i += 4;
      } else return null;
      start = this.i;
    }
    return null;
  }

  // integer reads a non-negative integer, or returns -1 if the value is
  // anything else (the value is consumed either way when well-formed).
  integer(): i64 {
    const start = this.i;
    if (!this.skipValue()) return -1;
    const t = this.s.substring(start, this.i).trim();
    if (t.length == 0 || t.length > 15) return -1;
    let n: i64 = 0;
    for (let j = 0; j < t.length; j++) {
      const c = t.charCodeAt(j);
      if (c < 0x30 || c > 0x39) return -1;
      n = n * 10 + (c - 0x30);
    }
    return n;
  }

  // skipValue consumes one JSON value of any kind.
  skipValue(): bool {
    const c = this.peek();
    if (c == 0x22) return this.string() !== null;
    if (c == 0x7b || c == 0x5b) {
      const close = c == 0x7b ? 0x7d : 0x5d;
      this.i++;
      if (this.peek() == close) {
        this.i++;
        return true;
      }
      while (true) {
        if (c == 0x7b) {
          if (this.string() === null || this.peek() != 0x3a) return false;
          this.i++;
        }
        if (!this.skipValue()) return false;
        const d = this.peek();
        this.i++;
        if (d == close) return true;
        if (d != 0x2c) return false;
      }
    }
    // number, true, false, null
    const start = this.i;
    while (this.i < this.s.length) {
      const d = this.s.charCodeAt(this.i);
      if (d == 0x2c || d == 0x7d || d == 0x5d || d == 0x20 || d == 0x09 || d == 0x0a || d == 0x0d) break;
      this.i++;
    }
    return this.i > start;
  }
}
