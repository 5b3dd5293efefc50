//go:build wasip1

package packrun

import (
	"unsafe"
)

// ABI v1 exports and imports. Functions returning (ptr,len) use the packed
// form (one i64: ptr low, len high), since Go functions exported or imported
// through wasm return at most one value.

const abiVersion = 1

// Import namespace openwop.

//go:wasmimport openwop openwop_log
func openwopLog(level int32, msg string)

//go:wasmimport openwop openwop_now_ms
func openwopNowMs() int64

//go:wasmimport openwop openwop_random
func openwopRandom(p unsafe.Pointer, n int32) int32

//go:wasmimport openwop openwop_variable_get
func openwopVariableGet(name string) uint64

//go:wasmimport openwop openwop_variable_set
func openwopVariableSet(name, value string) int32

//go:wasmimport openwop openwop_channel_read
func openwopChannelRead(name string) uint64

//go:wasmimport openwop openwop_channel_write
func openwopChannelWrite(name, value string) int32

//go:wasmimport openwop openwop_interrupt
func openwopInterrupt(payload string) uint64

// Import namespace packrun:host/v1: (req_ptr, req_len, resp_out) -> status.

//go:wasmimport packrun:host/v1 memory_get
func hostMemoryGet(req string, out *[2]uint32) int32

//go:wasmimport packrun:host/v1 memory_put
func hostMemoryPut(req string, out *[2]uint32) int32

//go:wasmimport packrun:host/v1 memory_delete
func hostMemoryDelete(req string, out *[2]uint32) int32

//go:wasmimport packrun:host/v1 memory_list
func hostMemoryList(req string, out *[2]uint32) int32

//go:wasmimport packrun:host/v1 queue_enqueue
func hostQueueEnqueue(req string, out *[2]uint32) int32

//go:wasmimport packrun:host/v1 adapter_invoke
func hostAdapterInvoke(req string, out *[2]uint32) int32

//go:wasmimport packrun:host/v1 evidence_record
func hostEvidenceRecord(req string, out *[2]uint32) int32

//go:wasmimport packrun:host/v1 artifact_put
func hostArtifactPut(req string, out *[2]uint32) int32

//go:wasmimport packrun:host/v1 config_get
func hostConfigGet(req string, out *[2]uint32) int32

// ABI 1.2. The linker keeps an import only when a reachable function calls
// it, so a module that never calls Context.MessagePublish does not import
// message_publish and loads for packs declaring ABI 1.0.
//
//go:wasmimport packrun:host/v1 message_publish
func hostMessagePublish(req string, out *[2]uint32) int32

// ABI 1.1, likewise: only a module that calls Context.SensorEmit imports
// sensor_emit.
//
//go:wasmimport packrun:host/v1 sensor_emit
func hostSensorEmit(req string, out *[2]uint32) int32

// ABI 1.3, likewise: only a module that calls Context.HTTPRequest imports
// http_request.
//
//go:wasmimport packrun:host/v1 http_request
func hostHTTPRequest(req string, out *[2]uint32) int32

// Memory ownership.
//
// Go's collector frees what the program no longer references and cannot see
// references held by the host, so every buffer handed out by openwop_alloc,
// and every response, is kept in live (keyed by address) until the host
// frees it with openwop_free or the SDK takes it back. The collector does not
// move objects, so an address stays valid while its slice is in the map.

var live = map[uint32][]byte{}

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// keep registers b as host-owned and returns its address.
func keep(b []byte) uint32 {
	p := addr(b)
	live[p] = b
	return p
}

// take returns the module-owned buffer the host wrote (ptr,len) into, and
// forgets it: from now on it is an ordinary Go slice. (0,0) gives nil.
func take(ptr, n uint32) []byte {
	if n == 0 {
		return nil
	}
	b, ok := live[ptr]
	if !ok || uint64(n) > uint64(len(b)) {
		return nil // not from openwop_alloc: the host never does this
	}
	delete(live, ptr)
	return b[:n:n]
}

func takePacked(v uint64) []byte { return take(uint32(v), uint32(v>>32)) }

// packed encodes s as (ptr,len) in one i64; the memory must stay reachable.
func packed(p *byte, n int) uint64 {
	if n == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(p))) | uint64(n)<<32
}

//go:wasmexport openwop_abi_version
func exportABIVersion() int32 { return abiVersion }

//go:wasmexport openwop_pack_name
func exportPackName() uint64 { return packed(unsafe.StringData(packName), len(packName)) }

//go:wasmexport openwop_node_count
func exportNodeCount() int32 { return int32(len(nodes)) }

//go:wasmexport openwop_node_id_at
func exportNodeIDAt(i int32) uint64 {
	if i < 0 || int(i) >= len(nodes) {
		return 0
	}
	id := nodes[i].typeID
	return packed(unsafe.StringData(id), len(id))
}

//go:wasmexport openwop_alloc
func exportAlloc(size int32) uint32 {
	if size < 0 {
		return 0
	}
	// At least one byte, so that every buffer has its own address.
	return keep(make([]byte, max(size, 1)))
}

//go:wasmexport openwop_free
func exportFree(ptr uint32, size int32) {
	delete(live, ptr) // unknown pointers (pack name, node ids) are ignored
}

//go:wasmexport openwop_node_invoke
func exportNodeInvoke(index int32, reqPtr, reqLen uint32) uint64 {
	// The host writes the request into a buffer from openwop_alloc, which
	// it keeps and reuses: look it up rather than trust a raw pointer, and
	// do not free it.
	var req []byte
	if b, ok := live[reqPtr]; ok && uint64(reqLen) <= uint64(len(b)) {
		req = b[:reqLen]
	}
	resp := invoke(int(index), req)
	keep(resp) // the host frees it with openwop_free after reading
	return packed(unsafe.SliceData(resp), len(resp))
}

// The response slot of packrun:host/v1 calls. It is a package variable, not
// a local: the host writes it after calling back into openwop_alloc, and a
// goroutine stack may move in between. Calls never overlap.
var respSlot [2]uint32

type hostFunc func(req string, out *[2]uint32) int32

// callHost makes one packrun:host/v1 call and returns its status and
// response (nil when there is none).
func callHost(f hostFunc, req []byte) (Status, []byte) {
	respSlot = [2]uint32{}
	s := Status(f(bytesString(req), &respSlot))
	return s, take(respSlot[0], respSlot[1])
}

// bytesString views b as a string without copying, for import parameters.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
