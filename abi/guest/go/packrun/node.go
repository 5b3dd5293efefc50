//go:build wasip1

package packrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Handler runs one invocation of a node. in is the request's "inputs" (a
// JSON value, {} when the host sent none). The result is encoded as JSON
// into the response's "output" (a json.RawMessage is copied as is, after a
// validity check; nil gives null). A *Failure error fails the invocation
// with its code, a *Suspension suspends it, any other error fails it with
// code "node_error"; a panic fails it with code "panic".
type Handler func(ctx *Context, in json.RawMessage) (any, error)

type node struct {
	typeID  string
	handler Handler
}

var (
	packName string
	nodes    []node
)

// Pack sets the pack name (e.g. "local.counter") reported to the host. Call
// it from an init function.
func Pack(name string) { packName = name }

// Node registers a node under typeID. Call it from an init function: the host
// reads the node list right after package initialisation. Registering a
// typeID twice panics.
func Node(typeID string, h Handler) {
	for _, n := range nodes {
		if n.typeID == typeID {
			panic("packrun: node " + typeID + " registered twice")
		}
	}
	nodes = append(nodes, node{typeID, h})
}

// Handle registers a node whose input is decoded from JSON into In and whose
// output Out is encoded to JSON. Input that does not decode fails the
// invocation with code "invalid_input".
func Handle[In, Out any](typeID string, h func(ctx *Context, in In) (Out, error)) {
	Node(typeID, func(ctx *Context, raw json.RawMessage) (any, error) {
		var in In
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, Fail("invalid_input", err.Error())
		}
		return h(ctx, in)
	})
}

// As decodes the JSON value a host call returned into T, passing the call's
// error through:
//
//	n, err := packrun.As[int](ctx.MemoryGet("counters", key))
func As[T any](raw json.RawMessage, err error) (T, error) {
	var v T
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("packrun: decoding host value: %w", err)
	}
	return v, nil
}

// request is the envelope the host sends.
type request struct {
	ABIVersion  int `json:"abiVersion"`
	NodeContext struct {
		RunID        string          `json:"runId"`
		NodeID       string          `json:"nodeId"`
		TenantID     string          `json:"tenantId"`
		Attempt      int             `json:"attempt"`
		Configurable json.RawMessage `json:"configurable"`
		Agent        json.RawMessage `json:"agent"`
	} `json:"nodeContext"`
	Inputs json.RawMessage `json:"inputs"`
}

// invoke runs node index on the request envelope and returns the response
// envelope. It never panics.
func invoke(index int, req []byte) (resp []byte) {
	if index < 0 || index >= len(nodes) {
		return failed("unknown_node", fmt.Sprintf("node index %d out of range", index), nil)
	}
	var r request
	if req == nil || json.Unmarshal(req, &r) != nil {
		return failed("invalid_request", "the request is not a valid JSON envelope", nil)
	}
	if len(r.Inputs) == 0 || string(r.Inputs) == "null" {
		r.Inputs = json.RawMessage("{}")
	}
	n := nodes[index]
	ctx := &Context{
		TypeID: n.typeID, RunID: r.NodeContext.RunID, NodeID: r.NodeContext.NodeID, TenantID: r.NodeContext.TenantID,
		Attempt: r.NodeContext.Attempt, ABIVersion: r.ABIVersion,
		Configurable: r.NodeContext.Configurable, Agent: r.NodeContext.Agent,
	}
	defer func() {
		if p := recover(); p != nil {
			resp = failed("panic", fmt.Sprint(p), nil)
		}
	}()
	out, err := n.handler(ctx, r.Inputs)
	if err != nil {
		return errorResponse(err)
	}
	b, err := marshal(out)
	if err != nil {
		return failed("invalid_output", err.Error(), nil)
	}
	return envelope("completed", "output", b)
}

func errorResponse(err error) []byte {
	if s, ok := errors.AsType[*Suspension](err); ok {
		b, err := marshal(s.Payload)
		if err != nil {
			return failed("invalid_output", "suspension payload: "+err.Error(), nil)
		}
		return envelope("suspended", "interrupt", b)
	}
	if f, ok := errors.AsType[*Failure](err); ok {
		return failed(f.Code, f.Message, f.Details)
	}
	if se, ok := errors.AsType[*StatusError](err); ok {
		return failed("host_call_failed", err.Error(), map[string]any{"function": se.Func, "status": int32(se.Status)})
	}
	return failed("node_error", err.Error(), nil)
}

type errorObject struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details,omitempty"`
}

func failed(code, message string, details any) []byte {
	if code == "" {
		code = "node_error"
	}
	e := errorObject{Code: code, Message: message}
	if details != nil {
		e.Details, _ = marshal(details) // details that do not encode are left out
	}
	b, _ := marshal(e)
	return envelope("failed", "error", b)
}

func envelope(outcome, key string, value []byte) []byte {
	b := make([]byte, 0, len(value)+len(outcome)+len(key)+20)
	b = append(b, `{"outcome":"`...)
	b = append(b, outcome...)
	b = append(b, `","`...)
	b = append(b, key...)
	b = append(b, `":`...)
	b = append(b, value...)
	return append(b, '}')
}

// marshal encodes v as compact JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
