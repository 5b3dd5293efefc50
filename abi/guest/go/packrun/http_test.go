package packrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestEncodeHTTPRequest(t *testing.T) {
	for _, c := range []struct {
		name string
		req  HTTPRequest
		want string
	}{
		{"defaults", HTTPRequest{URL: "https://a.example/x"}, `{"method":"GET","url":"https://a.example/x"}`},
		{"headers in order, text body, timeout rounded up",
			HTTPRequest{Method: "POST", URL: "http://127.0.0.1/", Headers: []Header{{"B", "2"}, {"A", "1"}, {"B", "3"}}, Body: []byte("hé"), Timeout: 1500*time.Microsecond + time.Second},
			`{"method":"POST","url":"http://127.0.0.1/","headers":[["B","2"],["A","1"],["B","3"]],"body":"hé","timeout_ms":1002}`},
		{"bytes body", HTTPRequest{Method: "PUT", URL: "http://h/", Body: []byte{0xff, 0}}, `{"method":"PUT","url":"http://h/","body_base64":"/wA="}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := encodeHTTPRequest(&c.req)
			if err != nil || string(b) != c.want {
				t.Fatalf("%s %v\nwant %s", b, err, c.want)
			}
		})
	}
}

func TestDecodeHTTPResponse(t *testing.T) {
	r, err := decodeHTTPResponse([]byte(`{"status":500,"headers":[["X","1"],["x","2"]],"body_base64":"AAE=","truncated":true}`))
	if err != nil || r.Status != 500 || !bytes.Equal(r.Body, []byte{0, 1}) || !r.Truncated || len(r.Headers) != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	if v, ok := r.Header("X"); !ok || v != "1" {
		t.Errorf("Header(X) %q %v", v, ok)
	}
	if r, err := decodeHTTPResponse([]byte(`{"status":200,"body":"ok"}`)); err != nil || r.Text() != "ok" {
		t.Errorf("%+v %v", r, err)
	}
	for _, bad := range []string{`{}`, `[`, `{"status":200,"body":"a","body_base64":"YQ=="}`, `{"status":200,"body_base64":"!"}`, `{"status":200,"headers":[["a"]]}`, `{"status":200,"headers":[1]}`} {
		if _, err := decodeHTTPResponse([]byte(bad)); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}

func TestHTTPError(t *testing.T) {
	e := httpError(StatusCapabilityBreach, []byte(`{"error":"took over 2s","kind":"http-timeout"}`))
	if !errors.Is(e, ErrCapabilityBreach) || e.Kind != "http-timeout" || e.Error() != "packrun:host/v1.http_request: capability_breach (http-timeout): took over 2s" {
		t.Errorf("%+v %q", e, e.Error())
	}
	if e := httpError(StatusHostError, nil); e.Error() != "packrun:host/v1.http_request: host_error" {
		t.Errorf("%q", e.Error())
	}
}

// FuzzDecodeHTTPResponse: any bytes decode or fail without panicking, and a
// decoded response encodes back to an equivalent one.
func FuzzDecodeHTTPResponse(f *testing.F) {
	for _, s := range []string{`{"status":200,"headers":[["a","b"]],"body":"x"}`, `{"status":1,"body_base64":"AAE=","truncated":true}`, `{"status":null}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeHTTPResponse(b)
		if err != nil {
			return
		}
		again, err := json.Marshal(map[string]any{"status": r.Status, "headers": r.Headers, "body_base64": r.Body, "truncated": r.Truncated})
		if err != nil {
			t.Fatal(err)
		}
		r2, err := decodeHTTPResponse(again)
		if err != nil || r2.Status != r.Status || !bytes.Equal(r2.Body, r.Body) || len(r2.Headers) != len(r.Headers) {
			t.Fatalf("%s -> %s: %+v %v", b, again, r2, err)
		}
	})
}

// BenchmarkHTTPCodec measures the SDK's side of one http_request with a
// 1 KiB text body each way: encoding the request and decoding the response.
// The anchor, BenchmarkHTTPCodecAnchor, is the floor: encoding/json of the
// same request as a plain struct with the body as a string, and decoding
// the same response into one.
func BenchmarkHTTPCodec(b *testing.B) {
	body := bytes.Repeat([]byte("abcdefgh"), 128)
	req := HTTPRequest{Method: "POST", URL: "http://127.0.0.1:8080/x", Headers: []Header{{"Content-Type", "text/plain"}, {"X-A", "1"}}, Body: body}
	resp := benchResponse(body)
	b.ReportAllocs()
	reportCPU(b)
	for b.Loop() {
		if _, err := encodeHTTPRequest(&req); err != nil {
			b.Fatal(err)
		}
		if _, err := decodeHTTPResponse(resp); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHTTPCodecAnchor(b *testing.B) {
	body := bytes.Repeat([]byte("abcdefgh"), 128)
	type plain struct {
		Method  string      `json:"method,omitempty"`
		Status  int         `json:"status,omitempty"`
		URL     string      `json:"url,omitempty"`
		Headers [][2]string `json:"headers"`
		Body    string      `json:"body"`
	}
	req := plain{Method: "POST", URL: "http://127.0.0.1:8080/x", Headers: [][2]string{{"Content-Type", "text/plain"}, {"X-A", "1"}}, Body: string(body)}
	resp := benchResponse(body)
	b.ReportAllocs()
	reportCPU(b)
	for b.Loop() {
		if _, err := json.Marshal(&req); err != nil {
			b.Fatal(err)
		}
		var p plain
		if err := json.Unmarshal(resp, &p); err != nil {
			b.Fatal(err)
		}
	}
}

func benchResponse(body []byte) []byte {
	b, _ := json.Marshal(map[string]any{"status": 200, "headers": [][2]string{{"Content-Type", "text/plain"}, {"X-A", "1"}}, "body": string(body)})
	return b
}
