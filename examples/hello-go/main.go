//go:build wasip1

// Command hello is a packrun node pack written in Go, built as a wasip1
// reactor (-buildmode=c-shared). It implements one node, typeId
// "example.hello": inputs {"name":"x"} -> output {"greeting":"Hello, x!"},
// with "world" when the name is missing or null.
//
// Build with ./build.sh. The build constraint keeps this package out of
// host builds and tests of the enclosing module.
package main

import (
	"bytes"
	"encoding/json"
	"unsafe"
)

// main is never called in a reactor; the host calls _initialize (which runs
// package initialisation) and then the exported functions.
func main() {}

const logInfo = 2

var (
	packName = []byte("local.hello.go")
	nodeID   = []byte("example.hello")
	logMsg   = []byte("hello invoked")
)

//go:wasmimport openwop openwop_log
func openwopLog(level int32, ptr unsafe.Pointer, length int32)

// live holds every buffer handed out by openwop_alloc (and every response)
// until the host calls openwop_free, so the garbage collector cannot reclaim
// memory the host still uses. Go's collector does not move objects, so the
// address stays valid for as long as the slice is reachable.
var live = map[uint32][]byte{}

// keep registers b as host-owned and returns its address.
func keep(b []byte) uint32 {
	p := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	live[p] = b
	return p
}

// ptrLen packs (ptr, len) into one i64: ptr in the low 32 bits, len in the
// high 32 bits. //go:wasmexport functions cannot return two values.
func ptrLen(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) | uint64(len(b))<<32
}

//go:wasmexport openwop_abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport openwop_pack_name
func packNameExport() uint64 { return ptrLen(packName) }

//go:wasmexport openwop_node_count
func nodeCount() int32 { return 1 }

//go:wasmexport openwop_node_id_at
func nodeIDAt(index int32) uint64 {
	if index != 0 {
		return 0
	}
	return ptrLen(nodeID)
}

//go:wasmexport openwop_alloc
func alloc(size int32) uint32 {
	if size < 0 {
		return 0
	}
	// Always allocate at least one byte so that the address is unique.
	return keep(make([]byte, max(size, 1)))
}

//go:wasmexport openwop_free
func free(ptr uint32, size int32) {
	delete(live, ptr) // unknown pointers (e.g. the pack name) are ignored
}

//go:wasmexport openwop_node_invoke
func nodeInvoke(index int32, reqPtr uint32, reqLen uint32) (result uint64) {
	defer func() {
		if r := recover(); r != nil {
			result = reply(failed("internal_error", "panic in node"))
		}
	}()
	openwopLog(logInfo, unsafe.Pointer(unsafe.SliceData(logMsg)), int32(len(logMsg)))
	if index != 0 {
		return reply(failed("unknown_node", "node index out of range"))
	}
	// The host writes the request into a buffer it got from openwop_alloc;
	// look it up instead of trusting a raw pointer.
	buf, ok := live[reqPtr]
	if !ok || uint64(reqLen) > uint64(len(buf)) {
		return reply(failed("invalid_input", "request is not a valid JSON envelope"))
	}
	return reply(hello(buf[:reqLen]))
}

// hello runs the node on the request envelope and returns the response envelope.
func hello(req []byte) []byte {
	// Maps rather than structs: encoding/json matches struct fields
	// case-insensitively, while the protocol's keys are exact.
	var env map[string]json.RawMessage
	if err := json.Unmarshal(req, &env); err != nil || env == nil {
		return failed("invalid_input", "request is not a valid JSON envelope")
	}
	name := "world"
	if rawInputs, ok := env["inputs"]; ok && !isNull(rawInputs) {
		var inputs map[string]json.RawMessage
		if err := json.Unmarshal(rawInputs, &inputs); err != nil {
			return failed("invalid_input", "inputs must be a JSON object")
		}
		if rawName, ok := inputs["name"]; ok && !isNull(rawName) {
			if err := json.Unmarshal(rawName, &name); err != nil {
				return failed("invalid_input", "inputs.name must be a string")
			}
		}
	}
	return encode(response{
		Outcome: "completed",
		Output:  &output{Greeting: "Hello, " + name + "!"},
	})
}

type response struct {
	Outcome string     `json:"outcome"`
	Output  *output    `json:"output,omitempty"`
	Error   *nodeError `json:"error,omitempty"`
}

type output struct {
	Greeting string `json:"greeting"`
}

type nodeError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func failed(code, message string) []byte {
	return encode(response{Outcome: "failed", Error: &nodeError{Code: code, Message: message}})
}

func encode(r response) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// reply hands b to the host, which frees it with openwop_free after reading.
func reply(b []byte) uint64 {
	keep(b)
	return ptrLen(b)
}
