// Package replay re-executes recorded attempts against their trace and
// reports whether they behave identically: the same host calls in the same
// order with the same arguments, and the same outcome and output. It also
// reads and writes portable trace files.
package replay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/runtime"
)

// Format is the version tag of trace files.
const Format = "packrun-trace/v1"

// MaxTraceBytes bounds a trace file read from outside.
const MaxTraceBytes = 256 << 20

// ErrInvalidTrace is matched by every refusal of a trace file.
var ErrInvalidTrace = errors.New("invalid trace")

// Expected is what the recorded attempt produced.
type Expected struct {
	Outcome   abi.Outcome     `json:"outcome"`
	Output    json.RawMessage `json:"output,omitempty"`
	Interrupt json.RawMessage `json:"interrupt,omitempty"`
	Error     *abi.Error      `json:"error,omitempty"`
}

// Trace is a self-contained, portable record of one attempt: what module
// ran which node with which input, every host call it made with the values
// it received, and what it produced.
type Trace struct {
	Format       string          `json:"format"`
	AttemptID    string          `json:"attempt_id"`
	Pack         string          `json:"pack,omitempty"` // name@version; "" for a bare module
	ModuleSHA256 string          `json:"module_sha256"`
	Node         string          `json:"node"`
	ABIVersion   string          `json:"abi_version"`
	Tenant       string          `json:"tenant,omitempty"`
	RunID        string          `json:"run_id"`
	Attempt      int             `json:"attempt"`
	Limits       json.RawMessage `json:"limits,omitempty"`
	Input        json.RawMessage `json:"input"`
	// Agent is the nodeContext.agent the attempt was handed (a queued
	// task's agent and profile, from the attempt's diagnostics).
	Agent    json.RawMessage `json:"agent,omitempty"`
	Calls    []runtime.Call  `json:"calls"`
	Expected Expected        `json:"expected"`
	// Digest is the sha256 of the file's canonical content without this
	// field and the seal; a file whose digest does not match was edited.
	Digest string `json:"digest"`
	// Seal is the exporting host's signature over Digest: a file edited
	// and given a matching digest again does not verify.
	Seal *host.Seal `json:"seal,omitempty"`
}

// FromAttempt builds the trace of a recorded attempt.
func FromAttempt(a *host.Attempt) (*Trace, error) {
	t := &Trace{
		Format: Format, AttemptID: a.AttemptID, Pack: a.Pack, ModuleSHA256: a.ModuleSHA256, Node: a.Node,
		ABIVersion: a.ABIVersion, Tenant: a.Tenant, RunID: a.RunID, Attempt: a.Attempt, Limits: a.Limits, Input: a.Input,
		Expected: Expected{Outcome: a.Outcome, Output: a.Output, Interrupt: a.Interrupt, Error: a.Error},
	}
	if len(a.Trace) > 0 {
		if err := json.Unmarshal(a.Trace, &t.Calls); err != nil {
			return nil, fmt.Errorf("attempt %s: recorded trace: %w", a.AttemptID, err)
		}
	}
	if t.Calls == nil {
		t.Calls = []runtime.Call{}
	}
	var diag struct {
		Agent json.RawMessage `json:"agent"`
	}
	if json.Unmarshal(a.Diagnostics, &diag) == nil && len(diag.Agent) > 0 && string(diag.Agent) != "null" {
		t.Agent = diag.Agent
	}
	return t, nil
}

func (t *Trace) digest() (string, error) {
	c := *t
	c.Digest, c.Seal = "", nil
	b, err := json.Marshal(&c)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Marshal encodes the trace as a file, with its digest and, if seal is
// not nil, sealed by it.
func (t *Trace) Marshal(seal func(kind, digest string) (*host.Seal, error)) ([]byte, error) {
	d, err := t.digest()
	if err != nil {
		return nil, err
	}
	t.Digest = d
	if seal != nil {
		if t.Seal, err = seal(Format, d); err != nil {
			return nil, err
		}
	}
	b, err := json.MarshalIndent(t, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Parse reads a trace file from outside: size, format, shape and digest are
// checked, and every refusal wraps ErrInvalidTrace.
func Parse(b []byte) (*Trace, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidTrace, fmt.Sprintf(format, args...))
	}
	if len(b) > MaxTraceBytes {
		return nil, bad("%d bytes, the limit is %d", len(b), MaxTraceBytes)
	}
	var t Trace
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, bad("%v", err)
	}
	switch {
	case t.Format != Format:
		return nil, bad("format %q, want %q", t.Format, Format)
	case len(t.ModuleSHA256) != 64 || strings.Trim(t.ModuleSHA256, "0123456789abcdef") != "":
		return nil, bad("module_sha256 %q is not a sha256", t.ModuleSHA256)
	case t.Node == "":
		return nil, bad("no node")
	case len(t.Input) == 0 || !json.Valid(t.Input):
		return nil, bad("input is not JSON")
	}
	want, err := t.digest()
	if err != nil {
		return nil, bad("%v", err)
	}
	if t.Digest != want {
		return nil, bad("digest mismatch: the file was edited after export (recorded %.12s, content %.12s)", t.Digest, want)
	}
	return &t, nil
}

// Verdict is the result of one replay.
type Verdict struct {
	AttemptID string `json:"attempt_id"`
	Identical bool   `json:"identical"`
	// Divergence is the first host call that differed, if any.
	Divergence *runtime.Divergence `json:"divergence,omitempty"`
	// Difference describes an outcome or output difference when every host
	// call matched.
	Difference string   `json:"difference,omitempty"`
	Expected   Expected `json:"expected"`
	Got        Expected `json:"got"`
	// DurationMs is how long the replay took.
	DurationMs float64 `json:"duration_ms"`
}

// Contract is a node's schema checks, applied as the dispatcher applies
// them (dispatch.Contract): an input refused before anything runs, an
// output refused after.
type Contract interface {
	CheckInput(node string, input json.RawMessage) *runtime.Result
	CheckOutput(res *runtime.Result)
}

// Run replays t on module m (the recorded module, or another version of it)
// with no side effects: every host call is served from the trace. c, if
// not nil, is the node's contract, applied as when the attempt was
// recorded.
func Run(ctx context.Context, m *runtime.Module, t *Trace, c Contract) (*Verdict, error) {
	res, err := invoke(ctx, m, t, c)
	if err != nil {
		return nil, err
	}
	v := &Verdict{AttemptID: t.AttemptID, Expected: t.Expected, DurationMs: float64(res.Duration.Microseconds()) / 1000,
		Got: Expected{Outcome: res.Outcome, Output: res.Output, Interrupt: res.Interrupt, Error: res.Error}}
	switch {
	case res.Divergence != nil:
		v.Divergence = res.Divergence
	case res.Outcome != t.Expected.Outcome:
		v.Difference = fmt.Sprintf("outcome: expected %s, got %s", t.Expected.Outcome, res.Outcome)
	case !sameJSON(res.Output, t.Expected.Output):
		v.Difference = "output: " + Diff(t.Expected.Output, res.Output)
	case !sameJSON(res.Interrupt, t.Expected.Interrupt):
		v.Difference = "interrupt: " + Diff(t.Expected.Interrupt, res.Interrupt)
	case (res.Error == nil) != (t.Expected.Error == nil) || res.Error != nil && res.Error.Code != t.Expected.Error.Code:
		v.Difference = fmt.Sprintf("error: expected %v, got %v", t.Expected.Error, res.Error)
	default:
		v.Identical = true
	}
	return v, nil
}

func invoke(ctx context.Context, m *runtime.Module, t *Trace, c Contract) (*runtime.Result, error) {
	if c != nil {
		if res := c.CheckInput(t.Node, t.Input); res != nil {
			return res, nil
		}
	}
	res, err := m.Invoke(ctx, runtime.Invocation{
		Node: t.Node, Input: t.Input, RunID: t.RunID, TenantID: t.Tenant, Attempt: t.Attempt, AttemptGiven: true, Agent: t.Agent,
		Replay: &runtime.Replay{Calls: t.Calls},
	})
	if err == nil && c != nil {
		c.CheckOutput(res)
	}
	return res, err
}

func canonical(b json.RawMessage) ([]byte, bool) {
	if len(b) == 0 {
		return nil, true
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return b, false
	}
	c, _ := json.Marshal(v)
	return c, true
}

// sameJSON tells whether a and b are the same JSON value. Byte-equal
// values are (the usual case of a replay: the output as recorded), and
// need no decoding.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	ca, _ := canonical(a)
	cb, _ := canonical(b)
	return bytes.Equal(ca, cb)
}

// Diff is a short description of how two JSON values differ: the first
// differing path for objects and arrays, else both values.
func Diff(expected, got json.RawMessage) string {
	var e, g any
	if json.Unmarshal(expected, &e) != nil || json.Unmarshal(got, &g) != nil {
		return fmt.Sprintf("expected %s, got %s", short(expected), short(got))
	}
	if p, ev, gv, ok := firstDiff("$", e, g); ok {
		return fmt.Sprintf("at %s expected %s, got %s", p, ev, gv)
	}
	return "equal"
}

func firstDiff(path string, e, g any) (string, string, string, bool) {
	switch ev := e.(type) {
	case map[string]any:
		if gv, ok := g.(map[string]any); ok {
			keys := map[string]bool{}
			for k := range ev {
				keys[k] = true
			}
			for k := range gv {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				if p, a, b, d := firstDiff(path+"."+k, ev[k], gv[k]); d {
					return p, a, b, true
				}
			}
			return "", "", "", false
		}
	case []any:
		if gv, ok := g.([]any); ok && len(gv) == len(ev) {
			for i := range ev {
				if p, a, b, d := firstDiff(fmt.Sprintf("%s[%d]", path, i), ev[i], gv[i]); d {
					return p, a, b, true
				}
			}
			return "", "", "", false
		}
	}
	eb, _ := json.Marshal(e)
	gb, _ := json.Marshal(g)
	if bytes.Equal(eb, gb) {
		return "", "", "", false
	}
	return path, short(eb), short(gb), true
}

func short(b []byte) string {
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	if len(b) == 0 {
		return "(nothing)"
	}
	return string(b)
}
