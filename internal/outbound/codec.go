package outbound

import (
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"
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
	var w wireRequest
	if err := json.Unmarshal(b, &w); err != nil {
		return Request{}, invalid("http_request: the request is not a JSON object of the documented shape: %s", firstLine(err))
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

// EncodeResponse encodes r as the guest receives it: the body as "body"
// when it is UTF-8, else "body_base64".
func EncodeResponse(r *Response) []byte {
	type wire struct {
		Status     int         `json:"status"`
		Headers    [][2]string `json:"headers"`
		Body       *string     `json:"body,omitempty"`
		BodyBase64 *string     `json:"body_base64,omitempty"`
		Truncated  bool        `json:"truncated,omitempty"`
	}
	w := wire{Status: r.Status, Headers: r.Headers, Truncated: r.Truncated}
	if w.Headers == nil {
		w.Headers = [][2]string{}
	}
	if utf8.Valid(r.Body) {
		s := string(r.Body)
		w.Body = &s
	} else {
		s := base64.StdEncoding.EncodeToString(r.Body)
		w.BodyBase64 = &s
	}
	b, _ := json.Marshal(w)
	return b
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
