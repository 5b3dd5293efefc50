package outbound

import (
	"errors"
	"strings"
	"testing"

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
