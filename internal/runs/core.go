package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/packrun/packrun/host"
)

// Core node types: openwop's conformance fixtures are built of them, and
// packrun runs them itself, without a pack or a Wasm instance. They are
// always available, so the fixtures made of them are always advertised.
const (
	// CoreNoop completes at once with the output {}.
	CoreNoop = "core.noop"
	// CoreDelay completes with {"delayMs": n} after its input delayMs
	// (0 to MaxCoreDelay in milliseconds), or stops when the run is
	// cancelled.
	CoreDelay = "core.delay"
	// CoreFail always fails, with the error code CoreFailCode.
	CoreFail = "core.fail"
)

// MaxCoreDelay bounds core.delay.
const MaxCoreDelay = 60 * time.Second

// Error codes of the core nodes.
const (
	CoreFailCode         = "fixture_failure"
	CoreInvalidInputCode = "invalid_input"
)

// isCore reports whether typeID is a core node type.
func isCore(typeID string) bool {
	return typeID == CoreNoop || typeID == CoreDelay || typeID == CoreFail || isMemoryNode(typeID)
}

// coreError is a core node's failure, as a node's error.
type coreError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// runCore runs the core node typeID on input: its output, or its
// failure; ok false when ctx ended first (the run was cancelled, or the
// host is closing).
func runCore(ctx context.Context, typeID string, input json.RawMessage) (out json.RawMessage, fail *coreError, ok bool) {
	switch typeID {
	case CoreNoop:
		return json.RawMessage(`{}`), nil, true
	case CoreFail:
		return nil, &coreError{Code: CoreFailCode, Message: "core.fail always fails"}, true
	}
	var in struct {
		DelayMs *float64 `json:"delayMs"`
	}
	if json.Unmarshal(input, &in) != nil || in.DelayMs == nil || *in.DelayMs < 0 || *in.DelayMs > float64(MaxCoreDelay.Milliseconds()) || *in.DelayMs != float64(int64(*in.DelayMs)) {
		return nil, &coreError{Code: CoreInvalidInputCode, Message: fmt.Sprintf("core.delay: input delayMs must be a whole number of milliseconds from 0 to %d", MaxCoreDelay.Milliseconds())}, true
	}
	d := int64(*in.DelayMs)
	t := time.NewTimer(time.Duration(d) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return json.RawMessage(fmt.Sprintf(`{"delayMs":%d}`, d)), nil, true
	case <-ctx.Done():
		return nil, nil, false
	}
}

// runInputs is a run's inputs with w's variables applied: a variable
// left out takes its default; one left out without a default that is
// required is refused, as is a value not of its variable's type.
func runInputs(op string, w *host.OpenwopWorkflow, inputs map[string]json.RawMessage) error {
	for _, v := range w.Variables {
		got, ok := inputs[v.Name]
		switch {
		case !ok && v.DefaultValue != nil:
			inputs[v.Name] = v.DefaultValue
		case !ok && v.Required:
			return host.Invalid(op, "inputs."+v.Name, "is required (a variable of workflow %s)", w.WorkflowID)
		case ok && !host.OpenwopValueHasType(got, v.Type):
			return host.Invalid(op, "inputs."+v.Name, "must be a %s (a variable of workflow %s)", v.Type, w.WorkflowID)
		}
	}
	return nil
}

// nodeInput is what node n is handed: the run's inputs when it binds no
// port, else an object of its ports' values (a static value, or the
// variable's input; an optional variable left out is left out).
func nodeInput(n host.OpenwopNode, inputs json.RawMessage) json.RawMessage {
	if len(n.Inputs) == 0 {
		return inputs
	}
	var vars map[string]json.RawMessage
	_ = json.Unmarshal(inputs, &vars) // an object: checked when the run started
	in := map[string]json.RawMessage{}
	for port, p := range n.Inputs {
		switch p.Type {
		case "static":
			in[port] = p.Value
		case "variable":
			if v, ok := vars[p.VariableName]; ok {
				in[port] = v
			}
		}
	}
	b, _ := json.Marshal(in)
	return b
}
