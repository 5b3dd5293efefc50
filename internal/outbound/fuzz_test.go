package outbound

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/packrun/packrun/abi"
)

// FuzzDecodeRequest: any bytes decode to a request or a one-line
// validation error; nothing panics.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"method":"GET","url":"https://example.com/"}`,
		`{"url":"https://example.com/","headers":[["A","b"],["A","c"]],"body":"x","timeout_ms":100}`,
		`{"url":"https://example.com/","body_base64":"AAEC"}`,
		`{"url":"https://example.com/","body":"x","body_base64":"AA=="}`,
		`{"url":"x","headers":[["a"]]}`, `{"url":"x","timeout_ms":1.5}`, `[]`, `null`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != abi.StatusValidation || strings.Contains(e.Msg, "\n") {
				t.Fatalf("error %v is not a one-line validation error", err)
			}
			return
		}
		if r.URL == "" || r.Timeout < 0 {
			t.Fatalf("accepted %+v", r)
		}
	})
}

// FuzzDecodeCompact: whatever decodeCompact accepts, encoding/json
// decodes to the same wire request.
func FuzzDecodeCompact(f *testing.F) {
	for _, s := range []string{
		`{"url":"https://example.com:8443/1k","method":"GET"}`, `{"method":"POST","url":"http://a/"}`, `{"url":""}`,
		`{"url":"a","url":"b"}`, `{"URL":"x"}`, `{"url":"x\u0041"}`, `{"url":"x",}`, `{"url":"x" }`, `{"url":1}`,
		`{"method":"GET","url":"x","headers":[]}`, `{"url":"x","method":"POST","body":"kkk"}`, `{"body":"","body":"a","url":"x"}`, `{"url":"ÿ"}`, `{}`, `{"url":"x"}}`, `{"url"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := decodeCompact(b)
		if !ok {
			return
		}
		var want wireRequest
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("decodeCompact accepted %q, encoding/json refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeCompact %+v, encoding/json %+v", b, got, want)
		}
	})
}

// The usual request ({"url","method"}) is decoded without encoding/json's
// reflection: two allocations, its two strings.
func TestDecodeRequestCompact(t *testing.T) {
	req := []byte(`{"url":"https://example.com:8443/1k","method":"GET"}`)
	var r Request
	var err error
	if n := testing.AllocsPerRun(100, func() { r, err = DecodeRequest(req) }); n > 2 {
		t.Errorf("DecodeRequest of %s: %v allocations, want at most 2", req, n)
	}
	if err != nil || r.URL != "https://example.com:8443/1k" || r.Method != "GET" || r.Headers != nil || r.Body != nil || r.Timeout != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	post := []byte(`{"url":"https://example.com:8443/1k","method":"POST","body":"kkkk"}`)
	if n := testing.AllocsPerRun(100, func() { r, err = DecodeRequest(post) }); n > 5 {
		t.Errorf("DecodeRequest of %s: %v allocations, want at most 5", post, n)
	}
	if err != nil || r.Method != "POST" || string(r.Body) != "kkkk" {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestDecodeRequest(t *testing.T) {
	r, err := DecodeRequest([]byte(`{"url":"https://e.com/","headers":[["A","1"],["A","2"]],"body_base64":"AAEC","timeout_ms":250}`))
	if err != nil || r.Method != "" || len(r.Headers) != 2 || r.Headers[1] != [2]string{"A", "2"} || string(r.Body) != "\x00\x01\x02" || r.Timeout.Milliseconds() != 250 {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{`{"url":"https://e.com/","body":"x","body_base64":"AA=="}`, `{"method":"GET"}`, `{"url":"u","headers":[["a","b","c"]]}`,
		`{"url":"u","timeout_ms":0}`, `{"url":"u","body_base64":"!"}`, `{"url":1}`} {
		if _, err := DecodeRequest([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if got := string(EncodeResponse(&Response{Status: 404, Body: []byte{0xff}})); got != `{"status":404,"headers":[],"body_base64":"/w=="}` {
		t.Errorf("binary body: %s", got)
	}
}

// FuzzEncodeResponse: whatever a server sends (header values and a body
// of any bytes), the guest's answer is valid JSON that decodes to what
// encoding/json's encoding of the same response decodes to.
func FuzzEncodeResponse(f *testing.F) {
	for _, s := range [][3]string{
		{"Content-Type", "application/json", `{"name":"packrun","n":3}`},
		{"X-Q", "a \"quoted\" \\ value\t<&>", "line\nbreak\r\x00\x1f\x7f é 😀 \u2028"},
		{"X-Bad", "\xff\xfe bad utf-8 \xc3", "\xff\x00\x01"},
		{"", "", ""},
		{"X-Long", "0123456789abcdef\"0123456789abcdef\x7f", "plain text run past eight bytes\\ then é and \xff at odd offsets, \x01 near the end."},
	} {
		f.Add(s[0], s[1], []byte(s[2]), 200, false)
	}
	f.Fuzz(func(t *testing.T, name, value string, body []byte, status int, truncated bool) {
		r := &Response{Status: status, Headers: [][2]string{{name, value}, {"X-Two", value}}, Body: body, Truncated: truncated}
		got := EncodeResponse(r)
		if !json.Valid(got) {
			t.Fatalf("invalid JSON %q", got)
		}
		type wire struct {
			Status     int         `json:"status"`
			Headers    [][2]string `json:"headers"`
			Body       *string     `json:"body,omitempty"`
			BodyBase64 *string     `json:"body_base64,omitempty"`
			Truncated  bool        `json:"truncated,omitempty"`
		}
		w := wire{Status: status, Headers: r.Headers, Truncated: truncated}
		if utf8.Valid(body) {
			s := string(body)
			w.Body = &s
		} else {
			s := base64.StdEncoding.EncodeToString(body)
			w.BodyBase64 = &s
		}
		want, _ := json.Marshal(w)
		var a, b any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("EncodeResponse %s\nencoding/json %s", got, want)
		}
	})
}

// BenchmarkEncodeResponse encodes the answer to a 1 KiB text body with a
// server's usual headers (the benchmarks' loopback response).
func BenchmarkEncodeResponse(b *testing.B) {
	r := &Response{Status: 200, Body: []byte(strings.Repeat("k", 1024)), Headers: [][2]string{
		{"Content-Length", "1024"}, {"Content-Type", "text/plain; charset=utf-8"}, {"Date", "Fri, 27 Nov 2026 20:52:02 GMT"}}}
	b.ReportAllocs()
	for b.Loop() {
		EncodeResponse(r)
	}
}
