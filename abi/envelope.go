package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Outcome of an invocation.
type Outcome string

const (
	Completed Outcome = "completed"
	Suspended Outcome = "suspended"
	Failed    Outcome = "failed"
)

// NodeContext is the per-invocation context passed in the request envelope.
type NodeContext struct {
	RunID        string          `json:"runId"`
	NodeID       string          `json:"nodeId"`
	TenantID     string          `json:"tenantId"`
	Attempt      int             `json:"attempt"`
	Configurable json.RawMessage `json:"configurable,omitempty"`
	Agent        json.RawMessage `json:"agent,omitempty"`
}

// Request is the envelope the host writes into guest memory.
type Request struct {
	ABIVersion  int             `json:"abiVersion"`
	NodeContext NodeContext     `json:"nodeContext"`
	Inputs      json.RawMessage `json:"inputs"`
}

// AppendRequest appends the JSON encoding of r to dst. It is the hot-path
// encoder: it avoids reflection and produces exactly what json.Marshal would
// for the same value, with Inputs copied verbatim (the caller guarantees it is
// valid JSON; an empty Inputs is written as {}).
func AppendRequest(dst []byte, r *Request) []byte {
	dst = append(dst, `{"abiVersion":`...)
	dst = appendInt(dst, r.ABIVersion)
	dst = append(dst, `,"nodeContext":{"runId":`...)
	dst = AppendJSONString(dst, r.NodeContext.RunID)
	dst = append(dst, `,"nodeId":`...)
	dst = AppendJSONString(dst, r.NodeContext.NodeID)
	dst = append(dst, `,"tenantId":`...)
	dst = AppendJSONString(dst, r.NodeContext.TenantID)
	dst = append(dst, `,"attempt":`...)
	dst = appendInt(dst, r.NodeContext.Attempt)
	if len(r.NodeContext.Configurable) > 0 {
		dst = append(dst, `,"configurable":`...)
		dst = append(dst, r.NodeContext.Configurable...)
	}
	if len(r.NodeContext.Agent) > 0 {
		dst = append(dst, `,"agent":`...)
		dst = append(dst, r.NodeContext.Agent...)
	}
	dst = append(dst, `},"inputs":`...)
	if len(r.Inputs) == 0 {
		dst = append(dst, `{}`...)
	} else {
		dst = append(dst, r.Inputs...)
	}
	return append(dst, '}')
}

func appendInt(dst []byte, v int) []byte {
	return fmt.Appendf(dst, "%d", v)
}

// Error is the error object of a failed outcome.
type Error struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details,omitempty"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Response is the envelope a node returns.
type Response struct {
	Outcome   Outcome         `json:"outcome"`
	Output    json.RawMessage `json:"output,omitempty"`
	Interrupt json.RawMessage `json:"interrupt,omitempty"`
	Error     *Error          `json:"error,omitempty"`
	// TaskOutcome is the optional "taskOutcome" of a completed response
	// (see TaskOutcome).
	TaskOutcome *TaskOutcome `json:"taskOutcome,omitempty"`
}

// Errors returned by DecodeResponse; each maps to a Code* constant.
var (
	ErrResponseUTF8     = errors.New("response is not valid UTF-8")
	ErrResponseJSON     = errors.New("response is not valid JSON")
	ErrResponseEnvelope = errors.New("response is not a valid envelope")
)

// DecodeResponse validates and decodes a response envelope read from guest
// memory. It never panics; every failure wraps one of the ErrResponse*
// sentinels. Unknown top-level fields are refused, as are unknown fields of
// "error" and of "taskOutcome" (see TaskOutcome); for duplicate keys the
// last one wins, as with encoding/json.
//
// It is on the hot path of every invocation, so it validates with
// validJSON (json.Valid's rules, ≈ 15× faster on string-heavy outputs) and
// then walks the top level of the (now known-valid) object instead of
// decoding through reflection; output and interrupt are returned as raw
// slices of b.
func DecodeResponse(b []byte) (Response, error) {
	var r Response
	if !utf8.Valid(b) {
		return r, ErrResponseUTF8
	}
	if !validJSON(b) {
		var v any
		err := json.Unmarshal(b, &v) // only to explain what is wrong
		return r, fmt.Errorf("%w: %v", ErrResponseJSON, err)
	}
	i := skipSpace(b, 0)
	if b[i] != '{' {
		return r, fmt.Errorf("%w: the envelope is not a JSON object", ErrResponseEnvelope)
	}
	i = skipSpace(b, i+1)
	var errRaw, outcomeRaw []byte
	for b[i] != '}' {
		kEnd := skipValue(b, i)
		key := b[i:kEnd]
		i = skipSpace(b, kEnd)
		i = skipSpace(b, i+1) // ':'
		vEnd := skipValue(b, i)
		val := b[i:vEnd]
		switch string(key) {
		case `"outcome"`:
			if val[0] != '"' {
				return Response{}, fmt.Errorf("%w: \"outcome\" is not a string", ErrResponseEnvelope)
			}
			r.Outcome = outcomeOf(val[1 : len(val)-1])
		case `"output"`:
			r.Output = val
		case `"interrupt"`:
			r.Interrupt = val
		case `"error"`:
			errRaw = val
		case `"taskOutcome"`:
			outcomeRaw = val
		default:
			return Response{}, fmt.Errorf("%w: unknown field %s", ErrResponseEnvelope, key)
		}
		i = skipSpace(b, vEnd)
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if errRaw != nil && string(errRaw) != "null" {
		dec := json.NewDecoder(bytes.NewReader(errRaw))
		dec.DisallowUnknownFields()
		r.Error = new(Error)
		if err := dec.Decode(r.Error); err != nil {
			return Response{}, fmt.Errorf("%w: \"error\": %v", ErrResponseEnvelope, err)
		}
	}
	if err := r.validate(); err != nil {
		return Response{}, fmt.Errorf("%w: %v", ErrResponseEnvelope, err)
	}
	if outcomeRaw != nil && string(outcomeRaw) != "null" {
		if r.Outcome != Completed {
			return Response{}, fmt.Errorf("%w: taskOutcome comes only with outcome \"completed\", not %q", ErrResponseTaskOutcome, r.Outcome)
		}
		t, err := decodeTaskOutcome(outcomeRaw)
		if err != nil {
			return Response{}, err
		}
		r.TaskOutcome = t
	}
	return r, nil
}

// outcomeOf maps the raw (still escaped) outcome string to a constant
// without allocating; anything else is kept verbatim for the error message.
func outcomeOf(raw []byte) Outcome {
	for _, o := range []Outcome{Completed, Suspended, Failed} {
		if string(raw) == string(o) {
			return o
		}
	}
	var s string
	if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s); err != nil {
		return Outcome(raw)
	}
	return Outcome(s)
}

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value starting at i. b
// must be valid JSON (checked by the caller), so only strings and nesting
// need care.
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			for i++; b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

func (r *Response) validate() error {
	switch r.Outcome {
	case Completed:
		if len(r.Output) == 0 {
			r.Output = json.RawMessage("null")
		}
	case Suspended:
		if len(r.Interrupt) == 0 {
			return errors.New(`outcome "suspended" needs an "interrupt"`)
		}
	case Failed:
		if r.Error == nil || r.Error.Code == "" {
			return errors.New(`outcome "failed" needs an "error" with a "code"`)
		}
	case "":
		return errors.New(`missing "outcome"`)
	default:
		return fmt.Errorf("unknown outcome %q (want completed, suspended or failed)", r.Outcome)
	}
	return nil
}
