package abi

import (
	"fmt"
	"slices"
	"strings"
)

// Version is an ABI version: Major selects the namespace, Minor counts
// additive changes within it.
type Version struct {
	Major int `json:"major"`
	Minor int `json:"minor"`
}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// served lists the ABI versions this contract defines, newest first.
var served = []Version{{Major: 1, Minor: 3}}

// Served returns the ABI versions this contract defines, newest first (a
// copy: the set is fixed at build time).
func Served() []Version { return slices.Clone(served) }

// Newest is the newest ABI version served: a module built for the same
// major and a minor up to its minor runs here.
func Newest() Version { return served[0] }

// Serves reports whether major is one of the served ABI majors.
func Serves(major int) bool {
	return slices.ContainsFunc(served, func(v Version) bool { return v.Major == major })
}

// ServedList renders Served for error messages, e.g. "1.0".
func ServedList() string {
	s := make([]string, len(served))
	for i, v := range served {
		s[i] = v.String()
	}
	return strings.Join(s, ", ")
}

// ServedMajorsList renders the served majors with the newest minor of
// each, for messages about a module's openwop_abi_version (which names a
// major only, as openwop counts it): "1 (packrun:host/v1 up to 1.3)".
func ServedMajorsList() string {
	s := make([]string, len(served))
	for i, v := range served {
		s[i] = fmt.Sprintf("%d (packrun:host/v%d up to %s)", v.Major, v.Major, v)
	}
	return strings.Join(s, ", ")
}

// Import module names the host serves.
const (
	// ModuleOpenwop is the openwop RFC 0008 import namespace.
	ModuleOpenwop = "openwop"
	// ModuleHostV1 is packrun's own host-service namespace, major 1.
	ModuleHostV1 = "packrun:host/v1"
	// ModuleWASI is the WASI preview1 namespace, served as a sandboxed shim.
	ModuleWASI = "wasi_snapshot_preview1"
)

// Guest export names.
const (
	ExportMemory     = "memory"
	ExportABIVersion = "openwop_abi_version"
	ExportPackName   = "openwop_pack_name"
	ExportNodeCount  = "openwop_node_count"
	ExportNodeIDAt   = "openwop_node_id_at"
	ExportAlloc      = "openwop_alloc"
	ExportFree       = "openwop_free"
	ExportNodeInvoke = "openwop_node_invoke"
	// ExportInitialize is the reactor initialiser (C -mexec-model=reactor,
	// Go -buildmode=c-shared). When present the host calls it once, before
	// any other export.
	ExportInitialize = "_initialize"
)

// Import names in namespace ModuleOpenwop.
const (
	ImportLog          = "openwop_log"
	ImportNowMs        = "openwop_now_ms"
	ImportRandom       = "openwop_random"
	ImportVariableGet  = "openwop_variable_get"
	ImportVariableSet  = "openwop_variable_set"
	ImportChannelRead  = "openwop_channel_read"
	ImportChannelWrite = "openwop_channel_write"
	ImportInterrupt    = "openwop_interrupt"
)

// ValueType is a WebAssembly value type as used by this ABI.
type ValueType byte

const (
	I32 ValueType = 0x7f
	I64 ValueType = 0x7e
)

func (t ValueType) String() string {
	switch t {
	case I32:
		return "i32"
	case I64:
		return "i64"
	}
	return fmt.Sprintf("0x%02x", byte(t))
}

// Results describes what a function returns. PtrLen results accept either
// encoding; the others must match exactly.
type Results int

const (
	ResultsNone   Results = iota // ()
	ResultsI32                   // (i32)
	ResultsI64                   // (i64)
	ResultsPtrLen                // (i32 i32) or (i64)
)

func (r Results) String() string {
	switch r {
	case ResultsNone:
		return "()"
	case ResultsI32:
		return "(i32)"
	case ResultsI64:
		return "(i64)"
	case ResultsPtrLen:
		return "(i32 i32) or (i64)"
	}
	return "?"
}

// Func is the signature of one export or import of the ABI.
type Func struct {
	Name    string
	Params  []ValueType
	Results Results
	// Required marks exports a node-pack module must provide.
	Required bool
	// Doc is a one-line description, shown by `packrun inspect --host`.
	Doc string
	// Minor is the minor version of its namespace that added it: a pack
	// declaring an older minor may not import it.
	Minor int
	// OrNoResult marks an import a module may also declare with no result
	// at all: openwop_random, which RFC 0008 §C declares (i32 i32) -> ()
	// while packrun's SDKs import it with a status result. The host serves
	// whichever the module declares.
	OrNoResult bool
}

// Allowed reports whether a module built for version v may import f: a
// zero v (a bare module, which declares nothing) may import anything
// served.
func (f Func) Allowed(v Version) bool { return v == (Version{}) || f.Minor <= v.Minor }

// Signature renders the function type, e.g. "(i32 i32) -> (i32)".
func (f Func) Signature() string {
	p := make([]string, len(f.Params))
	for i, t := range f.Params {
		p[i] = t.String()
	}
	sig := "(" + strings.Join(p, " ") + ") -> " + f.Results.String()
	if f.OrNoResult {
		sig += " or ()"
	}
	return sig
}

var (
	i32   = []ValueType{I32}
	i32x2 = []ValueType{I32, I32}
	i32x3 = []ValueType{I32, I32, I32}
	i32x4 = []ValueType{I32, I32, I32, I32}
)

// exports is the guest export set of ABI v1 (openwop RFC 0008), besides
// the "memory" export which every module must have.
var exports = []Func{
	{Name: ExportABIVersion, Results: ResultsI32, Required: true, Doc: "the ABI major the module was built for"},
	{Name: ExportPackName, Results: ResultsPtrLen, Required: true, Doc: "UTF-8 pack name"},
	{Name: ExportNodeCount, Results: ResultsI32, Required: true, Doc: "number of nodes"},
	{Name: ExportNodeIDAt, Params: i32, Results: ResultsPtrLen, Required: true, Doc: "UTF-8 typeId of node i"},
	{Name: ExportAlloc, Params: i32, Results: ResultsI32, Required: true, Doc: "allocate size bytes, return ptr"},
	{Name: ExportFree, Params: i32x2, Results: ResultsNone, Required: true, Doc: "free (ptr, size)"},
	{Name: ExportNodeInvoke, Params: i32x3, Results: ResultsPtrLen, Required: true, Doc: "invoke node i with request (ptr,len); returns response (ptr,len)"},
	{Name: ExportInitialize, Results: ResultsNone, Doc: "reactor initialiser, called once before anything else"},
}

// openwopImports is the import set of namespace ModuleOpenwop in ABI v1.
var openwopImports = []Func{
	{Name: ImportLog, Params: i32x3, Results: ResultsNone, Doc: "(level, ptr, len): log a UTF-8 message at level 0..4"},
	{Name: ImportNowMs, Results: ResultsI64, Doc: "host clock, Unix milliseconds (recorded)"},
	{Name: ImportRandom, Params: i32x2, Results: ResultsI32, OrNoResult: true, Doc: "(ptr, len): fill with bytes seeded by (runId, nodeId, attempt); status, or no result as RFC 0008 §C declares it"},
	{Name: ImportVariableGet, Params: i32x2, Results: ResultsPtrLen, Doc: "(name) -> JSON value, (0,0) when unset"},
	{Name: ImportVariableSet, Params: i32x4, Results: ResultsI32, Doc: "(name, JSON value) -> status"},
	{Name: ImportChannelRead, Params: i32x2, Results: ResultsPtrLen, Doc: "(channel) -> JSON array of values written so far"},
	{Name: ImportChannelWrite, Params: i32x4, Results: ResultsI32, Doc: "(channel, JSON value) -> status"},
	{Name: ImportInterrupt, Params: i32x2, Results: ResultsPtrLen, Doc: "(JSON payload) -> resume value; suspends the invocation until resumed"},
}

// Function names in namespace ModuleHostV1.
const (
	HostMemoryGet      = "memory_get"
	HostMemoryPut      = "memory_put"
	HostMemoryDelete   = "memory_delete"
	HostMemoryList     = "memory_list"
	HostQueueEnqueue   = "queue_enqueue"
	HostAdapterInvoke  = "adapter_invoke"
	HostEvidenceRecord = "evidence_record"
	HostArtifactPut    = "artifact_put"
	HostConfigGet      = "config_get"
	// Added in 1.1.
	HostSensorEmit = "sensor_emit"
	HostAssetRead  = "asset_read"
	// Added in 1.2.
	HostMessagePublish = "message_publish"
	// Added in 1.3.
	HostHTTPRequest = "http_request"
)

// hostV1Imports is the packrun:host/v1 namespace. Every function has the
// same shape: (req_ptr, req_len, resp_out) -> status. The request is a JSON
// object; on return the host has written the response buffer's (ptr, len) as
// two little-endian u32 at resp_out (8 bytes; (0,0) when there is no
// response). The response buffer comes from the module's openwop_alloc and
// belongs to the module. Requests and responses:
//
//	memory_get      {"namespace","key"} -> {"value":<json>}           11 when absent
//	memory_put      {"namespace","key","value":<json>,"ttlSeconds"?,"secret"?} -> (none)
//	memory_delete   {"namespace","key"} -> (none)
//	memory_list     {"namespace","prefix"?} -> {"keys":[...]}
//	queue_enqueue   a TaskIntent -> {"staged":n}   applied only if the attempt completes
//	adapter_invoke  {"adapter","input":<json>} -> {"output":<json>,"exit_status":...}
//	evidence_record {"kind","data":<json>} -> (none)
//	artifact_put    {"role","name","content_type"?,"text"?|"base64"?} -> {"artifact_id","sha256"}
//	config_get      {"key"} -> {"value":<json>}                     11 when absent
//
// Since 1.1:
//
//	sensor_emit     a SensorEvent (the agent runtime schema §5; sensor_id defaults to the node's typeId) -> {"event_id","status":"staged","staged":n}
//	                applied only if the attempt completes; needs the sensors grant
//	asset_read      {"path"} (relative to the pack's assets/) -> {"text"}|{"base64"}  11 when absent
//
// Since 1.2:
//
//	message_publish the publish form {"format":"agent-envelope|agent-message|bus-envelope","message":{…},"signature"?}
//	                -> {"message_id","hash","status":"staged","staged":n}; published only if the attempt
//	                completes; needs the messages grant and a topic within its topics (else 1, naming the topic)
//
// Since 1.3:
//
//	http_request    {"method","url","headers"?:[[name,value],...],"body"?:"text"|"body_base64"?:"...","timeout_ms"?}
//	                -> {"status":n,"headers":[[name,value],...],"body":"text"|"body_base64":"...","truncated"?:true};
//	                needs an http grant naming the destination (else 1 with {"error"}); limits hit are 20 with {"error","kind"}
//
// A function the pack's manifest does not grant returns StatusAccessDenied.
var hostV1Imports = []Func{
	{Name: HostMemoryGet, Params: i32x3, Results: ResultsI32, Doc: "read a memory entry"},
	{Name: HostMemoryPut, Params: i32x3, Results: ResultsI32, Doc: "write a memory entry (optional TTL, secret)"},
	{Name: HostMemoryDelete, Params: i32x3, Results: ResultsI32, Doc: "delete a memory entry"},
	{Name: HostMemoryList, Params: i32x3, Results: ResultsI32, Doc: "list keys by prefix"},
	{Name: HostQueueEnqueue, Params: i32x3, Results: ResultsI32, Doc: "stage a follow-up task (TaskIntent)"},
	{Name: HostAdapterInvoke, Params: i32x3, Results: ResultsI32, Doc: "call a granted adapter"},
	{Name: HostEvidenceRecord, Params: i32x3, Results: ResultsI32, Doc: "add a record to the attempt's evidence"},
	{Name: HostArtifactPut, Params: i32x3, Results: ResultsI32, Doc: "store an artifact of the attempt"},
	{Name: HostConfigGet, Params: i32x3, Results: ResultsI32, Doc: "read pack configuration"},
	{Name: HostSensorEmit, Params: i32x3, Results: ResultsI32, Doc: "report a SensorEvent (sensors grant)", Minor: 1},
	{Name: HostAssetRead, Params: i32x3, Results: ResultsI32, Doc: "read a file of the pack's own assets/", Minor: 1},
	{Name: HostMessagePublish, Params: i32x3, Results: ResultsI32, Doc: "publish an agent message (messages grant)", Minor: 2},
	{Name: HostHTTPRequest, Params: i32x3, Results: ResultsI32, Doc: "make an outbound HTTP request (http grant)", Minor: 3},
}

// Lookup finds a function by name in set.
func Lookup(set []Func, name string) (Func, bool) {
	i := slices.IndexFunc(set, func(f Func) bool { return f.Name == name })
	if i < 0 {
		return Func{}, false
	}
	return set[i], true
}

// PackPtrLen encodes (ptr,len) as the packed i64 form.
func PackPtrLen(ptr, length uint32) uint64 { return uint64(length)<<32 | uint64(ptr) }

// UnpackPtrLen decodes the packed i64 form.
func UnpackPtrLen(v uint64) (ptr, length uint32) { return uint32(v), uint32(v >> 32) }

// Log levels accepted by openwop_log.
const (
	LogTrace = 0
	LogDebug = 1
	LogInfo  = 2
	LogWarn  = 3
	LogError = 4
)

// LogLevelName names a level; unknown levels are reported as "info".
func LogLevelName(level int32) string {
	switch level {
	case LogTrace:
		return "trace"
	case LogDebug:
		return "debug"
	case LogWarn:
		return "warn"
	case LogError:
		return "error"
	}
	return "info"
}

// Exports returns exports (a copy).
func Exports() []Func { return slices.Clone(exports) }

// OpenwopImports returns openwopImports (a copy).
func OpenwopImports() []Func { return slices.Clone(openwopImports) }

// HostV1Imports returns hostV1Imports (a copy).
func HostV1Imports() []Func { return slices.Clone(hostV1Imports) }
