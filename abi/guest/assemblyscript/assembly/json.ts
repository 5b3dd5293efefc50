// Minimal JSON for node handlers: a parser to JsonValue (which keeps each
// value's source text) and builders that write JSON text. No dependencies.

/** The kind of a JsonValue. */
export enum JsonKind {
  Null,
  Bool,
  Number,
  String,
  Array,
  Object,
}

/** A parsed JSON value. Accessors never trap: a missing key or a value of
 * another kind gives the default. */
export class JsonValue {
  kind: JsonKind = JsonKind.Null;
  /** The value's JSON text exactly as it appeared in the input. */
  raw: string = "null";
  // Internal: set by the parser.
  _b: bool = false;
  _n: f64 = 0;
  _s: string = "";
  _items: JsonValue[] | null = null; // array items, object values
  _keys: string[] | null = null; // object keys

  get isNull(): bool { return this.kind == JsonKind.Null; }
  get isBool(): bool { return this.kind == JsonKind.Bool; }
  get isNumber(): bool { return this.kind == JsonKind.Number; }
  get isString(): bool { return this.kind == JsonKind.String; }
  get isArray(): bool { return this.kind == JsonKind.Array; }
  get isObject(): bool { return this.kind == JsonKind.Object; }

  /** Number of array items or object members; 0 for other kinds. */
  get length(): i32 {
    const items = this._items;
    return items == null ? 0 : items.length;
  }

  /** Object keys, in order (duplicates included); empty for other kinds. */
  keys(): string[] {
    const keys = this._keys;
    return keys == null ? [] : keys.slice(0);
  }

  /** The member named key of an object (the last one if repeated), or null. */
  get(key: string): JsonValue | null {
    const keys = this._keys;
    if (keys == null) return null;
    for (let i = keys.length - 1; i >= 0; i--) {
      if (keys[i] == key) return this._items![i];
    }
    return null;
  }

  has(key: string): bool { return this.get(key) != null; }

  /** Item i of an array (or member i of an object), or null. */
  at(i: i32): JsonValue | null {
    const items = this._items;
    if (items == null || i < 0 || i >= items.length) return null;
    return items[i];
  }

  asBool(def: bool = false): bool { return this.kind == JsonKind.Bool ? this._b : def; }
  asNumber(def: f64 = 0): f64 { return this.kind == JsonKind.Number ? this._n : def; }
  asString(def: string = ""): string { return this.kind == JsonKind.String ? this._s : def; }

  /** The number as an integer: exact for integers written without a fraction
   * or exponent (the full i64 range), truncated otherwise. */
  asInteger(def: i64 = 0): i64 {
    if (this.kind != JsonKind.Number) return def;
    const r = this.raw;
    for (let i = 0; i < r.length; i++) {
      const c = r.charCodeAt(i);
      if (c == 0x2e || c == 0x65 || c == 0x45) return <i64>this._n; // . e E
    }
    return I64.parseInt(r, 10);
  }

  getBool(key: string, def: bool = false): bool {
    const v = this.get(key);
    return v == null ? def : v.asBool(def);
  }
  getNumber(key: string, def: f64 = 0): f64 {
    const v = this.get(key);
    return v == null ? def : v.asNumber(def);
  }
  getInteger(key: string, def: i64 = 0): i64 {
    const v = this.get(key);
    return v == null ? def : v.asInteger(def);
  }
  getString(key: string, def: string = ""): string {
    const v = this.get(key);
    return v == null ? def : v.asString(def);
  }

  /** The string items of an array (other items are skipped). */
  stringArray(): string[] {
    const out = new Array<string>();
    const items = this._items;
    if (this.kind != JsonKind.Array || items == null) return out;
    for (let i = 0; i < items.length; i++) {
      if (items[i].isString) out.push(items[i]._s);
    }
    return out;
  }

  toString(): string { return this.raw; }
}

/** Parses text as one JSON value; null when it is not valid JSON. */
export function parseJson(text: string): JsonValue | null {
  const p = new Parser(text);
  p.ws();
  const v = p.value();
  if (v == null) return null;
  p.ws();
  return p.pos == text.length ? v : null;
}

/** Reports whether text is one valid JSON value. */
export function isValidJson(text: string): bool {
  return parseJson(text) != null;
}

const MAX_DEPTH: i32 = 512;

class Parser {
  pos: i32 = 0;
  depth: i32 = 0;
  constructor(public src: string) {}

  ws(): void {
    const src = this.src;
    let pos = this.pos;
    while (pos < src.length) {
      const c = src.charCodeAt(pos);
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      pos++;
    }
    this.pos = pos;
  }

  peek(): i32 { return this.pos < this.src.length ? this.src.charCodeAt(this.pos) : -1; }

  literal(word: string): bool {
    if (this.src.substr(this.pos, word.length) != word) return false;
    this.pos += word.length;
    return true;
  }

  value(): JsonValue | null {
    const start = this.pos;
    const v = new JsonValue();
    const c = this.peek();
    if (c == 0x7b) { // {
      if (!this.object(v)) return null;
    } else if (c == 0x5b) { // [
      if (!this.array(v)) return null;
    } else if (c == 0x22) { // "
      const s = this.string();
      if (s == null) return null;
      v.kind = JsonKind.String;
      v._s = s;
    } else if (c == 0x74) { // t
      if (!this.literal("true")) return null;
      v.kind = JsonKind.Bool;
      v._b = true;
    } else if (c == 0x66) { // f
      if (!this.literal("false")) return null;
      v.kind = JsonKind.Bool;
    } else if (c == 0x6e) { // n
      if (!this.literal("null")) return null;
    } else {
      if (!this.number()) return null;
      v.kind = JsonKind.Number;
      v._n = parseFloat(this.src.substring(start, this.pos));
    }
    v.raw = this.src.substring(start, this.pos);
    return v;
  }

  number(): bool {
    const src = this.src;
    let pos = this.pos;
    if (pos < src.length && src.charCodeAt(pos) == 0x2d) pos++; // -
    if (pos >= src.length) return false;
    let c = src.charCodeAt(pos);
    if (c == 0x30) {
      pos++;
    } else if (c >= 0x31 && c <= 0x39) {
      while (pos < src.length && isDigit(src.charCodeAt(pos))) pos++;
    } else {
      return false;
    }
    if (pos < src.length && src.charCodeAt(pos) == 0x2e) { // .
      pos++;
      const d = pos;
      while (pos < src.length && isDigit(src.charCodeAt(pos))) pos++;
      if (pos == d) return false;
    }
    if (pos < src.length && (src.charCodeAt(pos) | 0x20) == 0x65) { // e E
      pos++;
      if (pos < src.length && (src.charCodeAt(pos) == 0x2b || src.charCodeAt(pos) == 0x2d)) pos++;
      const d = pos;
      while (pos < src.length && isDigit(src.charCodeAt(pos))) pos++;
      if (pos == d) return false;
    }
    this.pos = pos;
    return true;
  }

  // string parses a JSON string at pos (on the opening quote).
  string(): string | null {
    const src = this.src;
    let pos = this.pos + 1;
    let start = pos;
    let out: string | null = null; // set once an escape is seen
    while (true) {
      if (pos >= src.length) return null;
      const c = src.charCodeAt(pos);
      if (c == 0x22) break;
      if (c < 0x20) return null;
      if (c != 0x5c) {
        pos++;
        continue;
      }
      let part = src.substring(start, pos);
      out = out == null ? part : out + part;
      pos++;
      if (pos >= src.length) return null;
      const e = src.charCodeAt(pos++);
      let ch: i32;
      switch (e) {
        case 0x22: ch = 0x22; break;
        case 0x5c: ch = 0x5c; break;
        case 0x2f: ch = 0x2f; break;
        case 0x62: ch = 0x08; break;
        case 0x66: ch = 0x0c; break;
        case 0x6e: ch = 0x0a; break;
        case 0x72: ch = 0x0d; break;
        case 0x74: ch = 0x09; break;
        case 0x75: { // uXXXX: one UTF-16 code unit, as AssemblyScript strings are
          if (pos + 4 > src.length) return null;
          ch = 0;
          for (let i = 0; i < 4; i++) {
            const h = hexValue(src.charCodeAt(pos++));
            if (h < 0) return null;
            ch = (ch << 4) | h;
          }
          break;
        }
        default: return null;
      }
      out = out! + String.fromCharCode(ch);
      start = pos;
    }
    const last = src.substring(start, pos);
    this.pos = pos + 1;
    return out == null ? last : out + last;
  }

  array(v: JsonValue): bool {
    if (++this.depth > MAX_DEPTH) return false;
    this.pos++; // [
    const items = new Array<JsonValue>();
    this.ws();
    if (this.peek() == 0x5d) {
      this.pos++;
    } else {
      while (true) {
        this.ws();
        const item = this.value();
        if (item == null) return false;
        items.push(item);
        this.ws();
        const c = this.peek();
        this.pos++;
        if (c == 0x5d) break;
        if (c != 0x2c) return false;
      }
    }
    this.depth--;
    v.kind = JsonKind.Array;
    v._items = items;
    return true;
  }

  object(v: JsonValue): bool {
    if (++this.depth > MAX_DEPTH) return false;
    this.pos++; // {
    const keys = new Array<string>();
    const items = new Array<JsonValue>();
    this.ws();
    if (this.peek() == 0x7d) {
      this.pos++;
    } else {
      while (true) {
        this.ws();
        if (this.peek() != 0x22) return false;
        const k = this.string();
        if (k == null) return false;
        this.ws();
        if (this.peek() != 0x3a) return false;
        this.pos++;
        this.ws();
        const item = this.value();
        if (item == null) return false;
        keys.push(k);
        items.push(item);
        this.ws();
        const c = this.peek();
        this.pos++;
        if (c == 0x7d) break;
        if (c != 0x2c) return false;
      }
    }
    this.depth--;
    v.kind = JsonKind.Object;
    v._keys = keys;
    v._items = items;
    return true;
  }
}

function isDigit(c: i32): bool { return c >= 0x30 && c <= 0x39; }

function hexValue(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  c |= 0x20;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  return -1;
}

const HEX = "0123456789abcdef";

/** Returns s as a JSON string literal (quoted and escaped). Lone surrogates
 * are written as \\u escapes, so the result is always valid UTF-8 JSON. */
export function quote(s: string): string {
  let out = "\"";
  let start = 0;
  const n = s.length;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    let esc: string | null = null;
    if (c == 0x22) esc = "\\\"";
    else if (c == 0x5c) esc = "\\\\";
    else if (c == 0x0a) esc = "\\n";
    else if (c == 0x0d) esc = "\\r";
    else if (c == 0x09) esc = "\\t";
    else if (c < 0x20) esc = unicodeEscape(c);
    else if (c >= 0xd800 && c <= 0xdfff) {
      if (c <= 0xdbff && i + 1 < n) {
        const d = s.charCodeAt(i + 1);
        if (d >= 0xdc00 && d <= 0xdfff) {
          i++; // a valid pair
          continue;
        }
      }
      esc = unicodeEscape(c);
    }
    if (esc != null) {
      out += s.substring(start, i) + esc;
      start = i + 1;
    }
  }
  return out + s.substring(start) + "\"";
}

function unicodeEscape(c: i32): string {
  return "\\u" + HEX.charAt((c >> 12) & 15) + HEX.charAt((c >> 8) & 15) + HEX.charAt((c >> 4) & 15) + HEX.charAt(c & 15);
}

/** Formats a number as JSON: integers without a fraction, NaN and
 * infinities as null (JSON has no such numbers). */
export function numberJson(x: f64): string {
  if (!isFinite(x)) return "null";
  if (x == Math.trunc(x) && Math.abs(x) < 9007199254740992.0) return (<i64>x).toString();
  return x.toString();
}

/** Builds a JSON object: new JsonObject().str("a", "x").int("n", 1).toString(). */
export class JsonObject {
  private body: string = "";

  /** Adds key with value, which must already be JSON text. */
  raw(key: string, json: string): JsonObject {
    if (this.body.length > 0) this.body += ",";
    this.body += quote(key) + ":" + json;
    return this;
  }
  str(key: string, value: string): JsonObject { return this.raw(key, quote(value)); }
  int(key: string, value: i64): JsonObject { return this.raw(key, value.toString()); }
  num(key: string, value: f64): JsonObject { return this.raw(key, numberJson(value)); }
  bool(key: string, value: bool): JsonObject { return this.raw(key, value ? "true" : "false"); }
  null(key: string): JsonObject { return this.raw(key, "null"); }

  toString(): string { return "{" + this.body + "}"; }
}

/** Builds a JSON array. */
export class JsonArray {
  private body: string = "";

  /** Appends value, which must already be JSON text. */
  raw(json: string): JsonArray {
    if (this.body.length > 0) this.body += ",";
    this.body += json;
    return this;
  }
  str(value: string): JsonArray { return this.raw(quote(value)); }
  int(value: i64): JsonArray { return this.raw(value.toString()); }
  num(value: f64): JsonArray { return this.raw(numberJson(value)); }
  bool(value: bool): JsonArray { return this.raw(value ? "true" : "false"); }

  toString(): string { return "[" + this.body + "]"; }
}

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** Standard base64 (with padding) of data. */
export function base64(data: Uint8Array): string {
  let out = "";
  const n = data.length;
  let i = 0;
  for (; i + 2 < n; i += 3) {
    const v = (<u32>data[i] << 16) | (<u32>data[i + 1] << 8) | <u32>data[i + 2];
    out += B64.charAt(v >> 18) + B64.charAt((v >> 12) & 63) + B64.charAt((v >> 6) & 63) + B64.charAt(v & 63);
  }
  if (i < n) {
    let v = <u32>data[i] << 16;
    if (i + 1 < n) v |= <u32>data[i + 1] << 8;
    out += B64.charAt(v >> 18) + B64.charAt((v >> 12) & 63);
    out += i + 1 < n ? B64.charAt((v >> 6) & 63) : "=";
    out += "=";
  }
  return out;
}
