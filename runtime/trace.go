package runtime

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/packrun/packrun/abi"
)

// Call is one host call in an invocation's trace: the function (module.name),
// its arguments, the status and the result the module received. Every value
// that entered the module from outside its request is in the trace, in
// order, which is what replay feeds back.
type Call struct {
	Fn string `json:"fn"`
	// Args are the call's input bytes; arguments longer than
	// maxTracedArgs are recorded as "sha256:<hex>".
	Args   []byte `json:"args,omitempty"`
	Status int32  `json:"status,omitempty"`
	Result []byte `json:"result,omitempty"`
}

const maxTracedArgs = 256

// traceEntryOverhead is what a Call costs beyond its bytes (its struct and
// slice headers), charged so that a flood of empty calls is bounded too.
const traceEntryOverhead = 80

// record appends a call to the trace, charging it to the trace budget.
func (a *activity) record(fn string, args []byte, status abi.Status, result []byte) {
	if len(result) > 0 {
		result = append([]byte(nil), result...)
	}
	a.recordOwned(fn, args, status, result)
}

// recordOwned is record for a result the trace may keep without a copy:
// nothing changes it afterwards (a Services response, see Services.Serve).
func (a *activity) recordOwned(fn string, args []byte, status abi.Status, result []byte) {
	if a.deterministic {
		return
	}
	c := Call{Fn: fn, Status: int32(status)}
	if len(args) > 0 {
		c.Args = append([]byte(nil), traceArgs(args)...)
	}
	if len(result) > 0 {
		c.Result = result
	}
	a.charge(len(c.Args) + len(c.Result) + len(fn) + traceEntryOverhead)
	a.trace = append(a.trace, c)
}

func hashArgs(args []byte) string {
	sum := sha256.Sum256(args)
	return "sha256:" + hex.EncodeToString(sum[:])
}
