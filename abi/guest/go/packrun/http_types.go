package packrun

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// This file holds the encoding of http_request (ABI 1.3), which does not
// touch the ABI, so it builds and is tested on any platform.

// Header is one HTTP header line: a name and its value. Headers are lists
// of them in order; a name may repeat.
type Header struct {
	Name, Value string
}

// HTTPRequest is an outbound request for Context.HTTPRequest.
type HTTPRequest struct {
	Method  string // "GET" when empty
	URL     string // absolute http:// or https:// URL within the pack's http grant
	Headers []Header
	// Body is sent as text when it is valid UTF-8, else base64-encoded
	// (body_base64). Nil or empty sends no body.
	Body []byte
	// Timeout, when positive, bounds the request (rounded up to whole
	// milliseconds); the host caps it by its own limit and the invocation's
	// deadline.
	Timeout time.Duration
}

// HTTPResponse is the answer of Context.HTTPRequest: any HTTP status (404,
// 500, ...) is a response, not an error.
type HTTPResponse struct {
	Status  int
	Headers []Header
	Body    []byte
	// Truncated is set when the host cut the body at its limit (only when
	// the grant says to truncate; by default an oversized body is an error
	// of kind "http-response-bytes").
	Truncated bool
}

// Text returns the body as a string.
func (r *HTTPResponse) Text() string { return string(r.Body) }

// Header returns the value of the first header named name (case
// insensitive) and whether there is one.
func (r *HTTPResponse) Header(name string) (string, bool) {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Value, true
		}
	}
	return "", false
}

func (h Header) MarshalJSON() ([]byte, error) { return json.Marshal([2]string{h.Name, h.Value}) }

func (h *Header) UnmarshalJSON(b []byte) error {
	var p []string
	if err := json.Unmarshal(b, &p); err != nil || len(p) != 2 {
		return errors.New("header is not a [name, value] pair")
	}
	h.Name, h.Value = p[0], p[1]
	return nil
}

type httpWire struct {
	Method     string   `json:"method"`
	URL        string   `json:"url"`
	Headers    []Header `json:"headers,omitempty"`
	Body       *string  `json:"body,omitempty"`
	BodyBase64 *string  `json:"body_base64,omitempty"`
	TimeoutMs  int64    `json:"timeout_ms,omitempty"`
}

// encodeHTTPRequest is the request JSON of http_request.
func encodeHTTPRequest(r *HTTPRequest) ([]byte, error) {
	w := httpWire{Method: r.Method, URL: r.URL, Headers: r.Headers}
	if w.Method == "" {
		w.Method = "GET"
	}
	if len(r.Body) > 0 {
		if utf8.Valid(r.Body) {
			s := string(r.Body)
			w.Body = &s
		} else {
			s := base64.StdEncoding.EncodeToString(r.Body)
			w.BodyBase64 = &s
		}
	}
	if r.Timeout > 0 {
		w.TimeoutMs = int64((r.Timeout + time.Millisecond - 1) / time.Millisecond)
	}
	return json.Marshal(&w)
}

// decodeHTTPResponse decodes the response JSON of http_request.
func decodeHTTPResponse(b []byte) (*HTTPResponse, error) {
	var w struct {
		Status     *int     `json:"status"`
		Headers    []Header `json:"headers"`
		Body       *string  `json:"body"`
		BodyBase64 *string  `json:"body_base64"`
		Truncated  bool     `json:"truncated"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("packrun: http_request: response: %w", err)
	}
	if w.Status == nil {
		return nil, errors.New("packrun: http_request: response has no status")
	}
	r := &HTTPResponse{Status: *w.Status, Headers: w.Headers, Truncated: w.Truncated}
	switch {
	case w.Body != nil && w.BodyBase64 != nil:
		return nil, errors.New("packrun: http_request: response has both body and body_base64")
	case w.Body != nil:
		r.Body = []byte(*w.Body)
	case w.BodyBase64 != nil:
		var err error
		if r.Body, err = base64.StdEncoding.DecodeString(*w.BodyBase64); err != nil {
			return nil, fmt.Errorf("packrun: http_request: body_base64: %w", err)
		}
	}
	return r, nil
}

// httpError is the *StatusError of a refused http_request, with the
// host's {"error","kind"} when it sent one.
func httpError(s Status, body []byte) *StatusError {
	e := &StatusError{Func: "packrun:host/v1.http_request", Status: s}
	var w struct {
		Error string `json:"error"`
		Kind  string `json:"kind"`
	}
	if json.Unmarshal(body, &w) == nil {
		e.Message, e.Kind = w.Error, w.Kind
	}
	return e
}
