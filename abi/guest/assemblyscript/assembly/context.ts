import { HttpRequest, HttpResult, httpRequest } from "./http";
import {
  Level, Status, statusName, takePacked, takeString, respSlot,
  openwop_log, openwop_now_ms, openwop_random, openwop_variable_get, openwop_variable_set,
  openwop_channel_read, openwop_channel_write, openwop_interrupt,
  host_memory_get, host_memory_put, host_memory_delete, host_memory_list, host_queue_enqueue,
  host_adapter_invoke, host_evidence_record, host_artifact_put, host_config_get, host_message_publish,
  host_sensor_emit,
} from "./abi";
import { JsonObject, JsonValue, parseJson, base64 } from "./json";

/** A packrun:host/v1 function of ABI 1.0, for Context.call. (sensor_emit,
 * ABI 1.1, and message_publish, ABI 1.2, are reached only through
 * Context.sensorEmit and Context.messagePublish: were they here, every module
 * would import them.) */
export enum HostFn {
  MemoryGet,
  MemoryPut,
  MemoryDelete,
  MemoryList,
  QueueEnqueue,
  AdapterInvoke,
  EvidenceRecord,
  ArtifactPut,
  ConfigGet,
}

/** The import name of a HostFn, e.g. "memory_get". */
export function hostFnName(fn: HostFn): string {
  switch (fn) {
    case HostFn.MemoryGet: return "memory_get";
    case HostFn.MemoryPut: return "memory_put";
    case HostFn.MemoryDelete: return "memory_delete";
    case HostFn.MemoryList: return "memory_list";
    case HostFn.QueueEnqueue: return "queue_enqueue";
    case HostFn.AdapterInvoke: return "adapter_invoke";
    case HostFn.EvidenceRecord: return "evidence_record";
    case HostFn.ArtifactPut: return "artifact_put";
    case HostFn.ConfigGet: return "config_get";
  }
  return "unknown";
}

/** The format of an agent message (the three formats of seeds 000-002). */
export enum MessageFormat {
  AgentEnvelope,
  AgentMessage,
  BusEnvelope,
}

/** The publish-form name of a MessageFormat, e.g. "bus-envelope". */
export function messageFormatName(f: MessageFormat): string {
  switch (f) {
    case MessageFormat.AgentEnvelope: return "agent-envelope";
    case MessageFormat.AgentMessage: return "agent-message";
    case MessageFormat.BusEnvelope: return "bus-envelope";
  }
  return "unknown";
}

/** The outcome of a host call: a status and, on success, a JSON result. */
export class HostResult {
  constructor(
    /** The host function, e.g. "packrun:host/v1.memory_get". */
    public fn: string,
    public status: Status,
    /** The result as JSON text (see each Context method); null when the call
     * failed or returned nothing. */
    public json: string | null,
  ) {}

  get ok(): bool { return this.status == Status.OK; }
  get notFound(): bool { return this.status == Status.NotFound; }

  /** The JSON result parsed, or null. */
  value(): JsonValue | null {
    const j = this.json;
    return j == null ? null : parseJson(j);
  }

  /** "packrun:host/v1.memory_get: not_found" */
  toString(): string { return this.fn + ": " + statusName(this.status); }
}

/** One invocation of a node: who runs it, and the host services. Valid only
 * while the handler runs. */
export class Context {
  /** The node being invoked. */
  typeId: string = "";
  runId: string = "";
  nodeId: string = "";
  tenantId: string = "";
  attempt: i32 = 0;
  abiVersion: i32 = 0;
  /** Passed through from the request envelope as JSON text; null when absent. */
  configurable: string | null = null;
  agent: string | null = null;

  // ---- openwop ----

  /** Sends msg to the host log at level. */
  log(level: Level, msg: string): void {
    const b = String.UTF8.encode(msg);
    openwop_log(<i32>level, changetype<usize>(b), b.byteLength);
  }
  debug(msg: string): void { this.log(Level.Debug, msg); }
  info(msg: string): void { this.log(Level.Info, msg); }
  warn(msg: string): void { this.log(Level.Warn, msg); }
  error(msg: string): void { this.log(Level.Error, msg); }

  /** The host clock, Unix milliseconds (recorded for replay). */
  nowMs(): i64 { return openwop_now_ms(); }

  /** Fills buf from the host's generator, seeded by (run, node, attempt). */
  random(buf: Uint8Array): Status {
    if (buf.length == 0) return Status.OK;
    return <Status>openwop_random(buf.dataStart, buf.length);
  }

  /** The JSON value of run variable name, or null when it is unset. */
  variableGet(name: string): string | null {
    const n = String.UTF8.encode(name);
    return takePacked(openwop_variable_get(changetype<usize>(n), n.byteLength));
  }

  /** Sets run variable name to json (JSON text). */
  variableSet(name: string, json: string): Status {
    const n = String.UTF8.encode(name);
    const v = String.UTF8.encode(json);
    return <Status>openwop_variable_set(changetype<usize>(n), n.byteLength, changetype<usize>(v), v.byteLength);
  }

  /** A JSON array of every value written to channel name so far. */
  channelRead(name: string): string {
    const n = String.UTF8.encode(name);
    const s = takePacked(openwop_channel_read(changetype<usize>(n), n.byteLength));
    return s == null ? "[]" : s;
  }

  /** Appends json (JSON text) to channel name. */
  channelWrite(name: string, json: string): Status {
    const n = String.UTF8.encode(name);
    const v = String.UTF8.encode(json);
    return <Status>openwop_channel_write(changetype<usize>(n), n.byteLength, changetype<usize>(v), v.byteLength);
  }

  /** Suspends the run with payload (JSON text) and returns the JSON value it
   * is resumed with. When the invocation has no resume value for this call,
   * the host stops the module here and reports it suspended; once resumed
   * the node runs again from the start and this call returns the value. Code
   * before it must be safe to repeat. To suspend without waiting for a
   * value, return Result.suspend(payload). */
  interrupt(payload: string): string {
    const p = String.UTF8.encode(payload);
    const s = takePacked(openwop_interrupt(changetype<usize>(p), p.byteLength));
    return s == null ? "null" : s;
  }

  // ---- packrun:host/v1 ----

  /** Calls a packrun:host/v1 function with a JSON request; the result's json
   * is the raw response. The methods below wrap this. */
  call(fn: HostFn, request: string): HostResult {
    const req = String.UTF8.encode(request);
    const p = changetype<usize>(req);
    const n = req.byteLength;
    store<u64>(respSlot, 0);
    let s: i32;
    switch (fn) {
      case HostFn.MemoryGet: s = host_memory_get(p, n, respSlot); break;
      case HostFn.MemoryPut: s = host_memory_put(p, n, respSlot); break;
      case HostFn.MemoryDelete: s = host_memory_delete(p, n, respSlot); break;
      case HostFn.MemoryList: s = host_memory_list(p, n, respSlot); break;
      case HostFn.QueueEnqueue: s = host_queue_enqueue(p, n, respSlot); break;
      case HostFn.AdapterInvoke: s = host_adapter_invoke(p, n, respSlot); break;
      case HostFn.EvidenceRecord: s = host_evidence_record(p, n, respSlot); break;
      case HostFn.ArtifactPut: s = host_artifact_put(p, n, respSlot); break;
      case HostFn.ConfigGet: s = host_config_get(p, n, respSlot); break;
      default: s = <i32>Status.Validation;
    }
    const body = takeString(<usize>load<u32>(respSlot), load<u32>(respSlot, 4));
    return new HostResult("packrun:host/v1." + hostFnName(fn), <Status>s, s == 0 ? body : null);
  }

  /** Reads a memory entry: json is its value; Status.NotFound when absent. */
  memoryGet(namespace: string, key: string): HostResult {
    return field(this.call(HostFn.MemoryGet, new JsonObject().str("namespace", namespace).str("key", key).toString()), "value");
  }

  /** Writes json (JSON text) to a memory entry. ttlSeconds > 0 makes it
   * expire; secret makes the host redact it from logs and evidence. */
  memoryPut(namespace: string, key: string, json: string, ttlSeconds: i64 = 0, secret: bool = false): Status {
    const req = new JsonObject().str("namespace", namespace).str("key", key).raw("value", json);
    if (ttlSeconds > 0) req.int("ttlSeconds", ttlSeconds);
    if (secret) req.bool("secret", true);
    return this.call(HostFn.MemoryPut, req.toString()).status;
  }

  /** Deletes a memory entry. */
  memoryDelete(namespace: string, key: string): Status {
    return this.call(HostFn.MemoryDelete, new JsonObject().str("namespace", namespace).str("key", key).toString()).status;
  }

  /** Lists the keys of a namespace starting with prefix: json is an array
   * of strings (see also memoryKeys). */
  memoryList(namespace: string, prefix: string = ""): HostResult {
    const req = new JsonObject().str("namespace", namespace);
    if (prefix.length > 0) req.str("prefix", prefix);
    return field(this.call(HostFn.MemoryList, req.toString()), "keys");
  }

  /** memoryList as a string array; empty when the call fails. */
  memoryKeys(namespace: string, prefix: string = ""): string[] {
    const v = this.memoryList(namespace, prefix).value();
    return v == null ? [] : v.stringArray();
  }

  /** Stages a follow-up task, a TaskIntent as JSON text (e.g.
   * {"task_type":"x","payload":{...}}), enqueued only if this attempt
   * completes: json is the number of tasks staged so far. */
  queueEnqueue(intent: string): HostResult {
    return field(this.call(HostFn.QueueEnqueue, intent), "staged");
  }

  /** Calls a granted adapter with input (JSON text): json is the host's
   * {"output":...,"exit_status":...,"exit_code":...,"error":...}. */
  adapterInvoke(adapter: string, input: string): HostResult {
    return this.call(HostFn.AdapterInvoke, new JsonObject().str("adapter", adapter).raw("input", input).toString());
  }

  /** Adds a record of kind with data (JSON text) to the attempt's evidence. */
  evidenceRecord(kind: string, data: string): Status {
    return this.call(HostFn.EvidenceRecord, new JsonObject().str("kind", kind).raw("data", data).toString()).status;
  }

  /** Stores a text artifact of the attempt: json is
   * {"artifact_id":...,"sha256":...}. role "" means "output". */
  artifactPut(name: string, text: string, role: string = "", contentType: string = ""): HostResult {
    return this.call(HostFn.ArtifactPut, artifactRequest(name, role, contentType).str("text", text).toString());
  }

  /** artifactPut for binary data (sent base64-encoded). */
  artifactPutBytes(name: string, data: Uint8Array, role: string = "", contentType: string = ""): HostResult {
    return this.call(HostFn.ArtifactPut, artifactRequest(name, role, contentType).str("base64", base64(data)).toString());
  }

  /** Reads key of the pack's configuration: json is its value;
   * Status.NotFound when absent. */
  configGet(key: string): HostResult {
    return field(this.call(HostFn.ConfigGet, new JsonObject().str("key", key).toString()), "value");
  }

  // ---- packrun:host/v1, ABI 1.1 ----

  /** Reports a SensorEvent (seed 003 section 5; event, JSON text, is the
   * whole request), staged and applied only if this attempt completes: json
   * is {"event_id":...,"status":"staged","staged":n}. sensor_id defaults to
   * the node's typeId and may not name another node. Needs ABI 1.1
   * ("abi":{"version":1,"minor":1}) and the sensors grant, else
   * Status.AccessDenied; an event the host refuses is Status.Validation. Only
   * a module that calls it imports sensor_emit. */
  sensorEmit(event: string): HostResult {
    const req = String.UTF8.encode(event);
    store<u64>(respSlot, 0);
    const s = host_sensor_emit(changetype<usize>(req), req.byteLength, respSlot);
    const body = takeString(<usize>load<u32>(respSlot), load<u32>(respSlot, 4));
    return new HostResult("packrun:host/v1.sensor_emit", <Status>s, s == 0 ? body : null);
  }

  // ---- packrun:host/v1, ABI 1.2 ----

  /** Publishes an agent message (message, JSON text, in format; signature,
   * its Ed25519 signature, "" for none), staged and published only if this
   * attempt completes: json is {"message_id":...,"hash":...,"status":"staged",
   * "staged":n}. Needs ABI 1.2 ("abi":{"version":1,"minor":2}) and the
   * messages grant with the message's topic: a topic outside it is
   * Status.AccessDenied, a message its seed refuses Status.Validation. Only a
   * module that calls it imports message_publish. */
  messagePublish(format: MessageFormat, message: string, signature: string = ""): HostResult {
    const o = new JsonObject().str("format", messageFormatName(format)).raw("message", message);
    if (signature.length > 0) o.str("signature", signature);
    const req = String.UTF8.encode(o.toString());
    store<u64>(respSlot, 0);
    const s = host_message_publish(changetype<usize>(req), req.byteLength, respSlot);
    const body = takeString(<usize>load<u32>(respSlot), load<u32>(respSlot, 4));
    return new HostResult("packrun:host/v1.message_publish", <Status>s, s == 0 ? body : null);
  }

  // ---- packrun:host/v1, ABI 1.3 ----

  /** Makes an outbound HTTP request through the host. Needs ABI 1.3
   * ("abi":{"version":1,"minor":3}) and an http grant naming the
   * destination; the host adds the grant's secrets (a bearer token, a
   * header, a query parameter) on the way out and strips them from what the
   * module sees. Any HTTP status is a response (result.ok); a refusal is the
   * host's status with its reason in result.error: Status.AccessDenied (no
   * grant for the destination or method, a refused address range, a
   * redirect outside the grant), Status.Validation, Status.CapabilityBreach
   * (result.kind names the limit), Status.HostError (connection, DNS or TLS
   * failure). Only a module that calls it imports http_request. */
  httpRequest(req: HttpRequest): HttpResult { return httpRequest(req); }
}

function artifactRequest(name: string, role: string, contentType: string): JsonObject {
  const req = new JsonObject();
  if (role.length > 0) req.str("role", role);
  req.str("name", name);
  if (contentType.length > 0) req.str("content_type", contentType);
  return req;
}

// field replaces a successful result's json by its member key.
function field(r: HostResult, key: string): HostResult {
  const j = r.json;
  if (j == null) return r;
  const v = parseJson(j);
  if (v == null) return new HostResult(r.fn, Status.HostError, null);
  const f = v.get(key);
  r.json = f == null ? "null" : f.raw;
  return r;
}
