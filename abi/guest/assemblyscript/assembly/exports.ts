// The ABI v1 exports of a node pack. The pack's entry file re-exports them:
//
//   export * from "@packrun/as-sdk/assembly/exports";

import { HeapString, pack } from "./abi";
import { dispatch, nodeCount, nodeIdAt, packNameString } from "./node";

/** The ABI major this module is built for. */
export function openwop_abi_version(): i32 {
  return 1;
}

/** The pack name as packed (ptr,len). */
export function openwop_pack_name(): u64 {
  const s = packNameString();
  return s == null ? 0 : pack(s.ptr, s.len);
}

export function openwop_node_count(): i32 {
  return nodeCount();
}

/** The typeId of node i as packed (ptr,len); (0,0) when out of range. */
export function openwop_node_id_at(i: i32): u64 {
  const s = nodeIdAt(i);
  return s == null ? 0 : pack(s.ptr, s.len);
}

/** Allocates a heap block for the host (at least one byte). */
export function openwop_alloc(size: i32): usize {
  if (size < 0) return 0;
  return heap.alloc(size > 0 ? <usize>size : 1);
}

/** Frees a block from openwop_alloc or a response. */
export function openwop_free(ptr: usize, size: i32): void {
  if (ptr != 0) heap.free(ptr);
}

/** Invokes node index with the request envelope in (reqPtr, reqLen), a buffer
 * the host got from openwop_alloc and keeps. The response is a heap block the
 * host frees with openwop_free. */
export function openwop_node_invoke(index: i32, reqPtr: usize, reqLen: u32): u64 {
  const request = String.UTF8.decodeUnsafe(reqPtr, <usize>reqLen);
  const resp = new HeapString(dispatch(index, request));
  return pack(resp.ptr, resp.len);
}
