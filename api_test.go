package packrun

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHandlerInvokeGoesThroughTheHost: POST /v1/invoke is checked and
// defaulted as Host.Invoke is — without a tenant the node runs as
// "default" (its memory calls work), and a malformed version range is the
// caller's mistake (400), not the server's.
func TestHandlerInvokeGoesThroughTheHost(t *testing.T) {
	f := newFixture(t)
	p := probe()
	p.extra = `"grants":{"services":["config","memory"],"memoryNamespaces":["ns"]},`
	f.install(t, p)
	hd, err := f.Handler(ctx, HandlerOptions{Addr: "127.0.0.1:0", InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	hd = apiSpec(t).Handler(t, hd) // every API response checked against the OpenAPI document
	post := func(body string) (int, []byte) {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v1/invoke", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		hd.ServeHTTP(w, req)
		return w.Code, w.Body.Bytes()
	}

	code, body := post(`{"pack":"local.probe","node":"probe.host"}`)
	var res struct {
		AttemptID string `json:"attempt_id"`
		Outcome   string
		Output    struct{ Put, Get int }
	}
	if err := json.Unmarshal(body, &res); err != nil || code != http.StatusOK || res.Outcome != "completed" || res.Output.Put != 0 || res.Output.Get != 0 {
		t.Fatalf("no tenant: %d %s (want memory_put and memory_get to succeed, status 0)", code, body)
	}
	att, err := f.Store().Attempt(ctx, res.AttemptID)
	if err != nil || att.Tenant != "default" {
		t.Fatalf("attempt %s: tenant %q, %v", res.AttemptID, att.Tenant, err)
	}

	for _, c := range []struct {
		body string
		code int
	}{
		{`{"pack":"local.probe@nonsense","node":"probe.host"}`, http.StatusBadRequest},
		{`{"pack":"local.probe@2","node":"probe.host"}`, http.StatusNotFound},
		{`{"pack":"local.probe","node":"probe.nope"}`, http.StatusNotFound},
	} {
		if code, body := post(c.body); code != c.code {
			t.Errorf("%s: %d %s, want %d", c.body, code, body, c.code)
		}
	}
}
