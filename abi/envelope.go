package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	dst = appendString(dst, r.NodeContext.RunID)
	dst = append(dst, `,"nodeId":`...)
	dst = appendString(dst, r.NodeContext.NodeID)
	dst = append(dst, `,"tenantId":`...)
	dst = appendString(dst, r.NodeContext.TenantID)
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

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string, escaping like encoding/json
// (including <, >, & and U+2028/U+2029); invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
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
}

// Errors returned by DecodeResponse; each maps to a Code* constant.
var (
	ErrResponseUTF8     = errors.New("response is not valid UTF-8")
	ErrResponseJSON     = errors.New("response is not valid JSON")
	ErrResponseEnvelope = errors.New("response is not a valid envelope")
)

// DecodeResponse validates and decodes a response envelope read from guest
// memory. It never panics; every failure wraps one of the ErrResponse*
// sentinels.
func DecodeResponse(b []byte) (Response, error) {
	var r Response
	if !utf8.Valid(b) {
		return r, ErrResponseUTF8
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return Response{}, fmt.Errorf("%w: %v", ErrResponseJSON, err)
		}
		return Response{}, fmt.Errorf("%w: %v", ErrResponseEnvelope, err)
	}
	if dec.More() {
		return Response{}, fmt.Errorf("%w: trailing data after the envelope", ErrResponseJSON)
	}
	if err := r.validate(); err != nil {
		return Response{}, fmt.Errorf("%w: %v", ErrResponseEnvelope, err)
	}
	return r, nil
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
