import { HeapString, Status } from "./abi";
import { Context, HostResult } from "./context";
import { JsonObject, isValidJson, parseJson, quote } from "./json";

/** What a handler returns: completed with an output, failed with an error
 * code, or suspended with an interrupt payload. All payloads are JSON text. */
export class Result {
  constructor(
    /** "completed", "failed" or "suspended". */
    public outcome: string,
    /** The output, the error object or the interrupt payload (JSON text). */
    public json: string,
  ) {}

  /** Completed with output (JSON text; "null" when omitted). */
  static ok(output: string = "null"): Result { return new Result("completed", output); }

  /** Failed with a stable code and a message; details is optional JSON text. */
  static fail(code: string, message: string, details: string | null = null): Result {
    const e = new JsonObject().str("code", code.length > 0 ? code : "node_error").str("message", message);
    if (details != null) e.raw("details", details);
    return new Result("failed", e.toString());
  }

  /** Suspended: the run waits, with payload (JSON text) as the interrupt,
   * until it is resumed and the node invoked again. */
  static suspend(payload: string = "null"): Result { return new Result("suspended", payload); }

  /** Failed with code "host_call_failed" for a host call that did not
   * succeed, with {"function","status"} as details. */
  static hostError(r: HostResult): Result {
    return Result.fail("host_call_failed", r.toString(),
      new JsonObject().str("function", r.fn).int("status", <i64>r.status).toString());
  }

  /** hostError for a call that returned only a Status. */
  static hostStatus(fn: string, s: Status): Result {
    return Result.hostError(new HostResult("packrun:host/v1." + fn, s, null));
  }
}

/** A node handler: input is the request's "inputs" as JSON text ({} when the
 * host sent none). */
export type Handler = (ctx: Context, input: string) => Result;

let packName: HeapString | null = null;
const typeIds = new Array<string>();
const nodeIds = new Array<HeapString>();
const handlers = new Array<Handler>();

/** Sets the pack name (e.g. "local.counter") reported to the host. Call it
 * at the top level of the entry file. */
export function pack(name: string): void {
  packName = new HeapString(name);
}

/** Registers a node under typeId, at the top level of the entry file (the
 * host reads the node list right after the module is initialised). A
 * duplicate typeId aborts. */
export function node(typeId: string, handler: Handler): void {
  for (let i = 0; i < typeIds.length; i++) {
    assert(typeIds[i] != typeId, "packrun: node registered twice");
  }
  typeIds.push(typeId);
  nodeIds.push(new HeapString(typeId));
  handlers.push(handler);
}

// ---- used by ./exports ----

export function packNameString(): HeapString | null { return packName; }
export function nodeCount(): i32 { return typeIds.length; }
export function nodeIdAt(i: i32): HeapString | null {
  return i < 0 || i >= nodeIds.length ? null : nodeIds[i];
}

function failed(code: string, message: string): string {
  return envelope(Result.fail(code, message));
}

function envelope(r: Result): string {
  let key = "output";
  if (r.outcome == "failed") key = "error";
  else if (r.outcome == "suspended") key = "interrupt";
  else if (r.outcome != "completed") return failed("invalid_output", "unknown outcome " + quote(r.outcome));
  if (!isValidJson(r.json)) return failed("invalid_output", "the " + key + " is not valid JSON");
  return "{\"outcome\":\"" + r.outcome + "\",\"" + key + "\":" + r.json + "}";
}

/** Runs node index on the request envelope and returns the response envelope. */
export function dispatch(index: i32, request: string): string {
  if (index < 0 || index >= handlers.length) return failed("unknown_node", "node index " + index.toString() + " out of range");
  const env = parseJson(request);
  if (env == null || !env.isObject) return failed("invalid_request", "the request is not a valid JSON envelope");
  const ctx = new Context();
  ctx.typeId = typeIds[index];
  ctx.abiVersion = <i32>env.getInteger("abiVersion");
  const nc = env.get("nodeContext");
  if (nc != null) {
    ctx.runId = nc.getString("runId");
    ctx.nodeId = nc.getString("nodeId");
    ctx.tenantId = nc.getString("tenantId");
    ctx.attempt = <i32>nc.getInteger("attempt");
    const c = nc.get("configurable");
    if (c != null) ctx.configurable = c.raw;
    const a = nc.get("agent");
    if (a != null) ctx.agent = a.raw;
  }
  const inputs = env.get("inputs");
  const input = inputs == null || inputs.isNull ? "{}" : inputs.raw;
  return envelope(handlers[index](ctx, input));
}
