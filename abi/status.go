package abi

// Status is the i32 a host function returns to the guest. A module treats any
// unknown non-zero status as failure. New codes are only ever added.
type Status int32

const (
	StatusOK               Status = 0
	StatusAccessDenied     Status = 1
	StatusValidation       Status = 10
	StatusNotFound         Status = 11
	StatusCapabilityBreach Status = 20
	StatusHostError        Status = 99
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusAccessDenied:
		return "access_denied"
	case StatusValidation:
		return "validation_error"
	case StatusNotFound:
		return "not_found"
	case StatusCapabilityBreach:
		return "capability_breach"
	case StatusHostError:
		return "host_error"
	}
	return "unknown"
}

// Error codes the host puts in a failed outcome it produces itself (as
// opposed to a failure the module reported). They are stable strings.
const (
	CodeTrap                = "trap"                   // the module trapped (unreachable, bad memory access, ...)
	CodeStackExhausted      = "stack_exhausted"        // call stack overflow
	CodeExit                = "module_exit"            // the module called WASI proc_exit
	CodeCapBreached         = "cap_breached"           // a limit was hit; see the cap.breached event
	CodeResponseOutOfBounds = "response_out_of_bounds" // (ptr,len) outside guest memory
	CodeResponseUTF8        = "response_invalid_utf8"  // response bytes are not UTF-8
	CodeResponseJSON        = "response_invalid_json"  // response bytes are not JSON
	CodeResponseEnvelope    = "response_invalid_envelope"
	// CodeResponseTaskOutcome: the response's "taskOutcome" is refused
	// (ErrResponseTaskOutcome; the message names the field).
	CodeResponseTaskOutcome = "response_invalid_task_outcome"
	CodeAllocFailed         = "alloc_failed"            // openwop_alloc returned 0 or an out-of-range buffer
	CodeHostCallBounds      = "host_call_out_of_bounds" // a host call named guest memory outside the module's memory
	CodeHostError           = "host_error"
	CodeReplayDiverged      = "replay_diverged" // a replay stopped matching its recording
	// CodeHostReentered: the guest called a host import while the host was
	// running its openwop_alloc or openwop_free (package doc, Re-entrancy).
	CodeHostReentered = "host_reentered"
)

// Cap kinds carried by cap.breached events.
const (
	CapMemory    = "wasm-memory"
	CapTime      = "wasm-execution-time"
	CapOutput    = "output-size"
	CapHostCalls = "host-calls"
	// CapHostMemory: the bytes the host held for the guest in one
	// invocation (run state written, host-call trace) passed their budget.
	CapHostMemory = "host-memory"
	// Outbound HTTP (http_request, ABI 1.3): requests per invocation,
	// bytes of one request, bytes of one response (headers included), and
	// the per-request timeout.
	CapHTTPRequests      = "http-requests"
	CapHTTPRequestBytes  = "http-request-bytes"
	CapHTTPResponseBytes = "http-response-bytes"
	CapHTTPTimeout       = "http-timeout"
)
