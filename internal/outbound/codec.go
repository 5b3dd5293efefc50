package outbound

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/packrun/packrun/abi"
)

// MaxTimeout bounds timeout_ms as a guest may write it.
const maxTimeoutMs = 24 * 60 * 60 * 1000

type wireRequest struct {
	Method     string          `json:"method"`
	URL        string          `json:"url"`
	Headers    [][]string      `json:"headers"`
	Body       *string         `json:"body"`
	BodyBase64 *string         `json:"body_base64"`
	TimeoutMs  json.RawMessage `json:"timeout_ms"`
}

// DecodeRequest decodes an http_request request (ABI 1.3):
// {"method","url","headers"?:[[name,value],...],"body"?|"body_base64"?,"timeout_ms"?}.
// Errors are validation errors (status 10) naming the field.
func DecodeRequest(b []byte) (Request, error) {
	w, ok := decodeCompact(b)
	if !ok {
		var err error
		if w, err = decodeWire(b); err != nil {
			return Request{}, invalid("http_request: the request is not a JSON object of the documented shape: %s", firstLine(err))
		}
	}
	r := Request{Method: w.Method, URL: w.URL}
	if w.URL == "" {
		return Request{}, invalid("http_request: url is required")
	}
	for i, h := range w.Headers {
		if len(h) != 2 {
			return Request{}, invalid("http_request: headers[%d] is not a [name, value] pair", i)
		}
		r.Headers = append(r.Headers, [2]string{h[0], h[1]})
	}
	switch {
	case w.Body != nil && w.BodyBase64 != nil:
		return Request{}, invalid("http_request: body and body_base64 are both set")
	case w.Body != nil:
		r.Body = []byte(*w.Body)
	case w.BodyBase64 != nil:
		d, err := base64.StdEncoding.DecodeString(*w.BodyBase64)
		if err != nil {
			return Request{}, invalid("http_request: body_base64 is not standard base64")
		}
		r.Body = d
	}
	if len(w.TimeoutMs) > 0 && string(w.TimeoutMs) != "null" {
		var ms int64
		if json.Unmarshal(w.TimeoutMs, &ms) != nil || ms < 1 || ms > maxTimeoutMs {
			return Request{}, invalid("http_request: timeout_ms must be an integer between 1 and %d", maxTimeoutMs)
		}
		r.Timeout = time.Duration(ms) * time.Millisecond
	}
	return r, nil
}

// decodeWire is encoding/json's decoding; not inlined, so that only this
// path pays for the wire request escaping to the heap.
//
//go:noinline
func decodeWire(b []byte) (wireRequest, error) {
	var w wireRequest
	err := json.Unmarshal(b, &w)
	return w, err
}

// decodeCompact decodes the usual request without reflection: a compact
// object of "method", "url" and "body" only (each at most once), their values
// strings of printable ASCII without escapes. It reports false for
// anything else, which encoding/json then decodes; on what it accepts it
// gives what encoding/json gives (FuzzDecodeCompact compares them).
func decodeCompact(b []byte) (wireRequest, bool) {
	var w wireRequest
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return w, false
	}
	seenMethod, seenURL := false, false
	for i := 1; ; {
		var key, val []byte
		var ok bool
		if key, i, ok = compactString(b, i); !ok || i >= len(b) || b[i] != ':' {
			return w, false
		}
		if val, i, ok = compactString(b, i+1); !ok {
			return w, false
		}
		switch {
		case string(key) == "method" && !seenMethod:
			w.Method, seenMethod = string(val), true
		case string(key) == "url" && !seenURL:
			w.URL, seenURL = string(val), true
		case string(key) == "body" && w.Body == nil:
			body := string(val)
			w.Body = &body
		default:
			return w, false
		}
		switch {
		case i == len(b)-1:
			return w, true
		case b[i] != ',':
			return w, false
		}
		i++
	}
}

// compactString reads a JSON string of printable ASCII without escapes at
// b[i:], returning its contents and the index after its closing quote.
func compactString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, j, false
		}
	}
	return nil, len(b), false
}

// EncodeResponse encodes r as the guest receives it: the body as "body"
// when it is UTF-8, else "body_base64". It writes the JSON itself (no
// reflection: this is on every request's path); strings are escaped as
// encoding/json would decode them back, invalid UTF-8 in a header value
// becoming U+FFFD as encoding/json makes it.
func EncodeResponse(r *Response) []byte {
	n := 64 + len(r.Body) + len(r.Body)/8
	for _, h := range r.Headers {
		n += len(h[0]) + len(h[1]) + 8
	}
	b := make([]byte, 0, n)
	b = append(b, `{"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, `,"headers":[`...)
	for i, h := range r.Headers {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = abi.AppendJSONString(b, h[0])
		b = append(b, ',')
		b = abi.AppendJSONString(b, h[1])
		b = append(b, ']')
	}
	b = append(b, ']')
	if utf8.Valid(r.Body) {
		b = append(b, `,"body":`...)
		b = abi.AppendJSONString(b, r.Body)
	} else {
		b = append(b, `,"body_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, r.Body)
		b = append(b, '"')
	}
	if r.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	return append(b, '}')
}

// EncodeError encodes e as the guest receives it: {"error"} and, for a
// breach, "kind".
func EncodeError(e *Error) []byte {
	m := map[string]string{"error": e.Msg}
	if e.Kind != "" {
		m["kind"] = e.Kind
	}
	b, _ := json.Marshal(m)
	return b
}
