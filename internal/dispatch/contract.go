package dispatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host/schema"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// Error codes of attempts a node's schemas refused.
const (
	// CodeInputSchema: the input does not satisfy the node's inputSchema;
	// the guest did not run.
	CodeInputSchema = "input_schema_violation"
	// CodeOutputSchema: the node completed with an output that does not
	// satisfy its outputSchema; the attempt failed.
	CodeOutputSchema = "output_schema_violation"
)

// ErrInputRefused is matched by the error of a direct invocation whose
// input the node's inputSchema refused (an *InputError). The attempt is
// recorded (failed, input_schema_violation); nothing ran.
var ErrInputRefused = errors.New("input refused by the node's inputSchema")

// InputError is a direct invocation refused by the node's inputSchema.
type InputError struct {
	AttemptID string
	Node      string
	Path      string // JSON path of the value at fault ("" for the input itself)
	Reason    string
}

func (e *InputError) Error() string {
	at := "input"
	if e.Path != "" {
		at = "input." + e.Path
	}
	return fmt.Sprintf("%s: %s (refused by %s's inputSchema; nothing ran; attempt %s)", at, e.Reason, e.Node, e.AttemptID)
}

// Is matches ErrInputRefused.
func (e *InputError) Is(target error) bool { return target == ErrInputRefused }

// Contract is a node's inputSchema and outputSchema, compiled. The zero
// value (or nil) checks nothing.
type Contract struct {
	in, out *packs.JSONSchema
}

// contracts caches compiled contracts by archive digest and node: schemas
// are compiled once per installed pack, not per attempt.
var contracts sync.Map // contractKey -> *Contract

type contractKey struct{ pack, node string }

// ContractOf returns the contract of node in manifest m (nil when the node
// declares no schema). key identifies the manifest for caching (the
// archive's digest; "" disables the cache).
func ContractOf(key string, m *packs.Manifest, node string) (*Contract, error) {
	ck := contractKey{key, node}
	if key != "" {
		if c, ok := contracts.Load(ck); ok {
			return c.(*Contract), nil
		}
	}
	n, ok := m.Node(node)
	if !ok || len(n.InputSchema) == 0 && len(n.OutputSchema) == 0 {
		return nil, nil
	}
	c := &Contract{}
	var err error
	if len(n.InputSchema) > 0 {
		if c.in, err = packs.CompileSchema(n.InputSchema); err != nil {
			return nil, fmt.Errorf("node %s: inputSchema: %w", node, err)
		}
	}
	if len(n.OutputSchema) > 0 {
		if c.out, err = packs.CompileSchema(n.OutputSchema); err != nil {
			return nil, fmt.Errorf("node %s: outputSchema: %w", node, err)
		}
	}
	if key != "" {
		contracts.Store(ck, c)
	}
	return c, nil
}

// Violation is a document a node's schema refused: Path is the JSON path
// of the value at fault ("" for the document itself, "items[].name" for
// an element of an array), Reason why, on one line.
type Violation struct {
	Path   string
	Reason string
}

// CheckInput returns the failed result of an invocation whose input the
// inputSchema refuses (nothing ran), or nil when the input is acceptable.
func (c *Contract) CheckInput(node string, input json.RawMessage) *runtime.Result {
	res, _ := c.checkInput(node, input)
	return res
}

// checkInput is CheckInput with the violation. Input that is not JSON is
// left to the runtime.
func (c *Contract) checkInput(node string, input json.RawMessage) (*runtime.Result, *Violation) {
	if c == nil || c.in == nil || len(input) > 0 && !json.Valid(input) {
		return nil, nil
	}
	err := c.in.Validate(orEmptyObject(input))
	if err == nil {
		return nil, nil
	}
	v := asViolation(err)
	return &runtime.Result{Node: node, Outcome: abi.Failed, Error: violation(CodeInputSchema, "input", v)}, v
}

// CheckOutput turns a completed result whose output the outputSchema
// refuses into a failed one (the output is kept as evidence).
func (c *Contract) CheckOutput(res *runtime.Result) {
	if c == nil || c.out == nil || res.Outcome != abi.Completed {
		return
	}
	out := res.Output
	if len(out) == 0 {
		out = json.RawMessage(`null`)
	}
	if err := c.out.Validate(out); err != nil {
		res.Outcome = abi.Failed
		res.Error = violation(CodeOutputSchema, "output", asViolation(err))
	}
}

func asViolation(err error) *Violation {
	if se, ok := errors.AsType[*packs.SchemaError](err); ok {
		p, reason := schema.Locate(se.Err)
		return &Violation{Path: p, Reason: reason}
	}
	return &Violation{Reason: err.Error()}
}

// violation is the error of an attempt a schema refused: the message names
// the path at fault (from the document's root: "input.name"), the details
// hold the path and the reason.
func violation(code, doc string, v *Violation) *abi.Error {
	at := doc
	if v.Path != "" {
		at = doc + "." + v.Path
	}
	details, _ := json.Marshal(map[string]string{"path": at, "reason": v.Reason})
	return &abi.Error{Code: code, Message: at + ": " + v.Reason, Details: details}
}
