package runtime

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/packrun/packrun/abi"
)

// Divergence is where a replayed invocation stopped behaving like the
// recorded one: the first host call that differs in function or arguments,
// a call the recording does not have, or a recorded call never made.
type Divergence struct {
	// Index is the position in the trace (0-based).
	Index int `json:"index"`
	// Expected is the recorded call (nil: the module made more calls than
	// were recorded).
	Expected *Call `json:"expected,omitempty"`
	// Got is the call the module made (nil: it made fewer calls).
	Got    *Call  `json:"got,omitempty"`
	Reason string `json:"reason"`
}

func (d *Divergence) Error() string {
	return fmt.Sprintf("diverged at host call %d: %s", d.Index, d.Reason)
}

// traceArgs is how arguments appear in a trace: verbatim up to
// maxTracedArgs bytes, else by digest.
func traceArgs(args []byte) []byte {
	if len(args) > maxTracedArgs {
		return []byte(hashArgs(args))
	}
	return args
}

// replayed returns the recorded call to serve instead of doing the live
// work, or nil when the invocation is not a replay. A call that does not
// match the recording in function or arguments ends the invocation with a
// divergence.
func (a *activity) replayed(fn string, args []byte) *Call {
	if a.replay == nil || a.deterministic {
		return nil
	}
	i := a.replayAt
	got := &Call{Fn: fn, Args: bytes.Clone(traceArgs(args))}
	if i >= len(a.replay) {
		a.diverge(&Divergence{Index: i, Got: got, Reason: fmt.Sprintf("the module called %s, but the recording has only %d calls", fn, len(a.replay))})
	}
	want := &a.replay[i]
	switch {
	case want.Fn != fn:
		a.diverge(&Divergence{Index: i, Expected: want, Got: got, Reason: fmt.Sprintf("expected %s, the module called %s", want.Fn, fn)})
	case !bytes.Equal(want.Args, got.Args):
		a.diverge(&Divergence{Index: i, Expected: want, Got: got, Reason: fmt.Sprintf("%s called with different arguments%s", fn, requestNamed(fn, args))})
	}
	a.replayAt++
	return want
}

func (a *activity) diverge(d *Divergence) {
	if a.divergence == nil {
		a.divergence = d
	}
	panic(errAbort)
}

// replayedU64 decodes an 8-byte recorded result.
func (a *activity) replayedU64(c *Call) uint64 {
	if len(c.Result) != 8 {
		a.diverge(&Divergence{Index: a.replayAt - 1, Expected: c, Reason: fmt.Sprintf("recorded %s result has %d bytes, want 8", c.Fn, len(c.Result))})
	}
	return binary.LittleEndian.Uint64(c.Result)
}

// replayedBytes copies a recorded result into dst, which must have the same
// length.
func (a *activity) replayedBytes(c *Call, dst []byte) {
	if len(c.Result) != len(dst) {
		a.diverge(&Divergence{Index: a.replayAt - 1, Expected: c, Reason: fmt.Sprintf("recorded %s result has %d bytes, the module asked for %d", c.Fn, len(c.Result), len(dst))})
	}
	copy(dst, c.Result)
}

// finishReplay reports recorded calls the module never made.
func (a *activity) finishReplay(res *Result) {
	if a.replay == nil || a.divergence != nil || a.replayAt == len(a.replay) {
		return
	}
	if res.Outcome == abi.Failed && res.Error != nil && res.Error.Code == abi.CodeCapBreached {
		return // the breach is the difference; it is reported as such
	}
	next := a.replay[a.replayAt]
	a.divergence = &Divergence{Index: a.replayAt, Expected: &next, Reason: fmt.Sprintf("the module made %d host calls, the recording has %d (next expected %s)", a.replayAt, len(a.replay), next.Fn)}
}

// requestNamed names the request of an http_request call that diverged
// (" (the module asked for GET https://...)"): its arguments may be
// recorded by digest only. It names the guest's own request, which never
// holds an injected secret.
func requestNamed(fn string, args []byte) string {
	if fn != abi.ModuleHostV1+"."+abi.HostHTTPRequest {
		return ""
	}
	var r struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	}
	if json.Unmarshal(args, &r) != nil || r.URL == "" {
		return ""
	}
	if r.Method == "" {
		r.Method = "GET"
	}
	return fmt.Sprintf(" (the module asked for %.16s %.512s)", r.Method, r.URL)
}
