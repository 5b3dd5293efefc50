// The packrun host ABI v1 as seen from AssemblyScript: imports, status codes
// and the buffers exchanged with the host. Internal to the SDK.

// ---- openwop ----

@external("openwop", "openwop_log")
export declare function openwop_log(level: i32, ptr: usize, len: i32): void;
@external("openwop", "openwop_now_ms")
export declare function openwop_now_ms(): i64;
@external("openwop", "openwop_random")
export declare function openwop_random(ptr: usize, len: i32): i32;
@external("openwop", "openwop_variable_get")
export declare function openwop_variable_get(name: usize, nameLen: i32): u64;
@external("openwop", "openwop_variable_set")
export declare function openwop_variable_set(name: usize, nameLen: i32, value: usize, valueLen: i32): i32;
@external("openwop", "openwop_channel_read")
export declare function openwop_channel_read(name: usize, nameLen: i32): u64;
@external("openwop", "openwop_channel_write")
export declare function openwop_channel_write(name: usize, nameLen: i32, value: usize, valueLen: i32): i32;
@external("openwop", "openwop_interrupt")
export declare function openwop_interrupt(payload: usize, len: i32): u64;

// ---- packrun:host/v1: (req_ptr, req_len, resp_out) -> status ----

@external("packrun:host/v1", "memory_get")
export declare function host_memory_get(req: usize, len: i32, out: usize): i32;
@external("packrun:host/v1", "memory_put")
export declare function host_memory_put(req: usize, len: i32, out: usize): i32;
@external("packrun:host/v1", "memory_delete")
export declare function host_memory_delete(req: usize, len: i32, out: usize): i32;
@external("packrun:host/v1", "memory_list")
export declare function host_memory_list(req: usize, len: i32, out: usize): i32;
@external("packrun:host/v1", "queue_enqueue")
export declare function host_queue_enqueue(req: usize, len: i32, out: usize): i32;
@external("packrun:host/v1", "adapter_invoke")
export declare function host_adapter_invoke(req: usize, len: i32, out: usize): i32;
@external("packrun:host/v1", "evidence_record")
export declare function host_evidence_record(req: usize, len: i32, out: usize): i32;
@external("packrun:host/v1", "artifact_put")
export declare function host_artifact_put(req: usize, len: i32, out: usize): i32;
@external("packrun:host/v1", "config_get")
export declare function host_config_get(req: usize, len: i32, out: usize): i32;
// ABI 1.2: called only by Context.messagePublish (not through Context.call),
// so only a module that publishes messages imports it.
@external("packrun:host/v1", "message_publish")
export declare function host_message_publish(req: usize, len: i32, out: usize): i32;
// ABI 1.1: called only by Context.sensorEmit, likewise.
@external("packrun:host/v1", "sensor_emit")
export declare function host_sensor_emit(req: usize, len: i32, out: usize): i32;
// ABI 1.3: called only by Context.httpRequest, likewise.
@external("packrun:host/v1", "http_request")
export declare function host_http_request(req: usize, len: i32, out: usize): i32;

/** Status code returned by a host function. Any unknown non-zero value is a
 * failure too. */
export enum Status {
  OK = 0,
  AccessDenied = 1,
  Validation = 10,
  NotFound = 11,
  CapabilityBreach = 20,
  HostError = 99,
}

/** The stable name of a status, e.g. "not_found". */
export function statusName(s: Status): string {
  switch (s) {
    case Status.OK: return "ok";
    case Status.AccessDenied: return "access_denied";
    case Status.Validation: return "validation_error";
    case Status.NotFound: return "not_found";
    case Status.CapabilityBreach: return "capability_breach";
    case Status.HostError: return "host_error";
  }
  return "status " + (<i32>s).toString();
}

/** Log levels of openwop_log. */
export enum Level {
  Trace = 0,
  Debug = 1,
  Info = 2,
  Warn = 3,
  Error = 4,
}

// ---- buffers ----
//
// The module's allocator is the runtime's heap (heap.alloc / heap.free),
// which the garbage collector does not manage: openwop_alloc hands out heap
// blocks, openwop_free returns them. Buffers the host fills during a host
// call (results, host/v1 responses) are decoded into strings and freed at
// once. Strings sent to the host are encoded to UTF-8 ArrayBuffers that stay
// referenced for the duration of the call.

/** Decodes the UTF-8 buffer (ptr,len) the host allocated with openwop_alloc
 * and frees it. (0,0) gives null. */
export function takeString(ptr: usize, len: u32): string | null {
  if (ptr == 0) return null;
  const s = String.UTF8.decodeUnsafe(ptr, <usize>len);
  heap.free(ptr);
  return s;
}

/** takeString for a packed (ptr,len): ptr in the low, len in the high 32 bits. */
export function takePacked(v: u64): string | null {
  return takeString(<usize>(<u32>v), <u32>(v >>> 32));
}

/** Packs (ptr,len) into one i64. */
export function pack(ptr: usize, len: i32): u64 {
  return len == 0 ? 0 : ((<u64>len) << 32) | <u64>ptr;
}

/** A UTF-8 copy of s in a heap block, owned by whoever frees it. */
export class HeapString {
  ptr: usize;
  len: i32;
  constructor(s: string) {
    const n = String.UTF8.byteLength(s);
    this.len = n;
    this.ptr = heap.alloc(n > 0 ? <usize>n : 1);
    String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, this.ptr);
  }
}

/** The response slot of packrun:host/v1 calls (8 bytes of static memory). */
export const respSlot: usize = memory.data(8, 8);
