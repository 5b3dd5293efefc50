package guesttest

import (
	"encoding/json"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/internal/testing/hosttest"
)

// ABI13 is the ABI a pack calling http_request declares.
var ABI13 = abi.Version{Major: 1, Minor: 3}

// HTTPBase is the origin of the URLs the SDK test modules request; the
// fake answers by path.
const HTTPBase = "http://127.0.0.1:8080"

// The canned answers of http_request, by URL: /json is a JSON document,
// /echo a 404 (data, not an error), /bin bytes that are not UTF-8
// (body_base64), /denied a refusal for want of a grant, /big a response
// over the limit.
var httpAnswers = map[string]struct {
	status abi.Status
	body   string
}{
	HTTPBase + "/json": {abi.StatusOK, `{"status":200,"headers":[["Content-Type","application/json"],["X-Tag","one"],["X-Tag","two"]],` +
		`"body":"{\"name\":\"packrun\",\"n\":3}"}`},
	HTTPBase + "/echo":   {abi.StatusOK, `{"status":404,"headers":[],"body":"no such page"}`},
	HTTPBase + "/bin":    {abi.StatusOK, `{"status":200,"headers":[["Content-Type","application/octet-stream"]],"body_base64":"AAH/","truncated":true}`},
	HTTPBase + "/denied": {abi.StatusAccessDenied, `{"error":"no http grant for 127.0.0.1:8080"}`},
	HTTPBase + "/big":    {abi.StatusCapabilityBreach, `{"error":"response body over 1024 bytes","kind":"http-response-bytes"}`},
}

// httpRequest serves http_request from httpAnswers; an unknown URL is a
// validation error.
func (s *Services) httpRequest(req []byte) (abi.Status, []byte) {
	var r struct {
		URL string `json:"url"`
	}
	if json.Unmarshal(req, &r) != nil {
		return abi.StatusValidation, []byte(`{"error":"request is not JSON"}`)
	}
	a, ok := httpAnswers[r.URL]
	if !ok {
		return abi.StatusValidation, []byte(`{"error":"no canned answer"}`)
	}
	return a.status, []byte(a.body)
}

// HTTPWant is the output every SDK's test node "test.http" returns after
// making the HTTPRequests in order (each SDK builds it with its own JSON
// code): what each response or refusal decoded to.
const HTTPWant = `{"get_status":200,"get_headers":3,"get_tag2":"two","get_len":24,"get_name":"packrun",
	"post_status":404,"post_body":"no such page",
	"bin_status":200,"bin_bytes":[0,1,255],"bin_truncated":true,
	"denied_status":1,"denied_error":"no http grant for 127.0.0.1:8080",
	"big_status":20,"big_kind":"http-response-bytes","big_error":"response body over 1024 bytes"}`

// HTTPRequests are the requests the SDK test modules send, in order: a GET
// with repeated headers in order and a timeout, a POST of UTF-8 text (as
// "body"), a PUT of bytes that are not UTF-8 (as "body_base64"), a request
// with the method left empty (sent as GET), and one more GET.
var HTTPRequests = []string{
	`{"method":"GET","url":"` + HTTPBase + `/json","headers":[["Accept","application/json"],["X-Tag","a"],["X-Tag","b"]],"timeout_ms":1500}`,
	`{"method":"POST","url":"` + HTTPBase + `/echo","headers":[["Content-Type","text/plain; charset=utf-8"]],"body":"héllo"}`,
	`{"method":"PUT","url":"` + HTTPBase + `/bin","body_base64":"AAH/"}`,
	`{"method":"GET","url":"` + HTTPBase + `/denied"}`,
	`{"method":"GET","url":"` + HTTPBase + `/big"}`,
}

// CheckHTTP fails t unless the module's output is HTTPWant and it sent
// exactly HTTPRequests (compared as JSON, so member order is free but the
// header order is not).
func CheckHTTP(t testing.TB, s *Services, output []byte) {
	t.Helper()
	if !hosttest.JSONEqual(output, HTTPWant) {
		t.Errorf("test.http output %s\nwant %s", output, HTTPWant)
	}
	calls := s.CallsOf(abi.HostHTTPRequest)
	if len(calls) != len(HTTPRequests) {
		t.Fatalf("http_request calls %v, want %d", calls, len(HTTPRequests))
	}
	for i, c := range calls {
		if !hosttest.JSONEqual(c.Raw, HTTPRequests[i]) {
			t.Errorf("http_request request %d: %s\nwant %s", i, c.Raw, HTTPRequests[i])
		}
	}
}
