package packrun

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/api"
	"github.com/packrun/packrun/internal/api/openapitest"
	"github.com/packrun/packrun/internal/testing/hosttest"
)

// refusalEnv is an authEnv whose host log and HTTP server log are kept,
// so a test can check that no request panicked.
type refusalEnv struct {
	*authEnv
	logs, srvLogs *hosttest.SyncBuffer
}

// newRefusalEnv serves the Host's real handler (API and console) on
// 127.0.0.1 with tokens required, specs installed and the dispatcher
// running.
func newRefusalEnv(t *testing.T, opts HandlerOptions, specs ...packSpec) *refusalEnv {
	t.Helper()
	logs, srvLogs := &hosttest.SyncBuffer{}, &hosttest.SyncBuffer{}
	home := filepath.Join(t.TempDir(), "home")
	k := newTestKey(t)
	savePolicy(t, home, trustKey(t, k, "local.*", "vendor.acme.*"))
	h, err := Open(ctx, home, Config{Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: logs})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	f := &fixture{Host: h, home: home, key: k}
	for _, s := range specs {
		f.install(t, s)
	}
	srv := httptest.NewUnstartedServer(nil)
	opts.Addr = srv.Listener.Addr().String()
	hd, err := f.Handler(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Every API response is checked against the OpenAPI document.
	srv.Config.Handler = apiSpec(t).Handler(t, hd)
	srv.Config.ErrorLog = log.New(srvLogs, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &refusalEnv{authEnv: &authEnv{f, srv.URL}, logs: logs, srvLogs: srvLogs}
}

// apiSpecOnce is the API's OpenAPI document, parsed and validated once.
var apiSpecOnce = sync.OnceValues(func() (*openapitest.Checker, error) {
	b, err := api.OpenAPI()
	if err != nil {
		return nil, err
	}
	return openapitest.Load(b, "ErrorBody|OpenwopErrorBody", "/v1/", "/.well-known/")
})

func apiSpec(t *testing.T) *openapitest.Checker {
	t.Helper()
	c, err := apiSpecOnce()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// noPanic fails the test if a request panicked: net/http logs a handler's
// panic ("http: panic serving ...") with its stack.
func (e *refusalEnv) noPanic(t *testing.T) {
	t.Helper()
	for _, l := range []string{e.srvLogs.String(), e.logs.String()} {
		if strings.Contains(l, "panic") || strings.Contains(l, "goroutine ") {
			t.Fatalf("a request panicked:\n%s", l)
		}
	}
}

// POST /v1/invoke with an input the node's inputSchema refuses is a 422
// naming the JSON path, through the Host's handler (whose Invoker returns
// no attempt with the refusal): not a panic and a reset connection.
func TestAPIInvokeInputSchemaRefused(t *testing.T) {
	e := newRefusalEnv(t, HandlerOptions{}, helloSchemas("1.0.0", `{"type":"object"}`))
	tok, tokRec := e.token(t, "acme", "invoke,evidence:read")
	for _, tc := range []struct{ input, field string }{
		{`{"name":5}`, "input.name"},
		{`{}`, "input.name"}, // required
	} {
		r := e.call(t, tok, "POST", "/v1/invoke", `{"pack":"local.hello.wat","node":"example.hello","input":`+tc.input+`}`)
		var env struct {
			Error struct{ Code, Message, Field string }
		}
		if err := json.Unmarshal([]byte(r.body), &env); err != nil || r.code != http.StatusUnprocessableEntity ||
			env.Error.Code != "input_schema_violation" || env.Error.Field != tc.field || !strings.HasPrefix(env.Error.Message, tc.field+":") {
			t.Fatalf("input %s: %d %s (want 422 input_schema_violation, field %s)", tc.input, r.code, r.body, tc.field)
		}
	}
	e.noPanic(t)
	// Each refused attempt is recorded, and its api_call event names it.
	atts, err := e.Store().ListAttempts(ctx, host.AttemptFilter{})
	if err != nil || len(atts) != 2 {
		t.Fatalf("attempts %v %v, want the two refused ones", atts, err)
	}
	evs, err := e.Store().Events(ctx, host.EventFilter{Type: "api_call"})
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, ev := range evs {
		if strings.Contains(string(ev.Data), tokRec.ID) {
			named[ev.AttemptID] = true
		}
	}
	for _, a := range atts {
		if a.Error == nil || a.Error.Code != "input_schema_violation" || !named[a.AttemptID] {
			t.Errorf("attempt %s: error %+v, api_call event %v", a.AttemptID, a.Error, named[a.AttemptID])
		}
	}
}

// The console spends the same bucket per token as the API: a token over
// its rate on one surface is over it on the other (429 with Retry-After,
// in each surface's own form), and the console's Replay button counts.
func TestConsoleRateLimitSharedWithAPI(t *testing.T) {
	e := newRefusalEnv(t, HandlerOptions{RateLimit: 0.01}) // a burst of 1, then one per 100 s
	console := func(tok, method, path string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, e.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(&http.Cookie{Name: "packrun_console", Value: tok})
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	wantPage429 := func(what string, resp *http.Response, body string) {
		t.Helper()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "over its rate") {
			t.Errorf("%s: %d Retry-After %q\n%s", what, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	// API first, then the console.
	a, _ := e.token(t, "acme", "tasks:read,evidence:read")
	if r := e.call(t, a, "GET", "/v1/tasks", ""); r.code != http.StatusOK {
		t.Fatalf("API within the burst: %d %s", r.code, r.body)
	}
	resp, body := console(a, "GET", "/console/tasks")
	wantPage429("console after the API spent the burst", resp, body)
	resp, body = console(a, "POST", "/console/attempts/att_x/replay")
	wantPage429("console Replay after the API spent the burst", resp, body)

	// The console first, then the API.
	b, _ := e.token(t, "acme", "tasks:read")
	if resp, body := console(b, "GET", "/console/tasks"); resp.StatusCode != http.StatusOK {
		t.Fatalf("console within the burst: %d\n%s", resp.StatusCode, body)
	}
	r := e.call(t, b, "GET", "/v1/tasks", "")
	if r.code != http.StatusTooManyRequests || r.errCode() != "rate_limited" || r.header.Get("Retry-After") == "" {
		t.Fatalf("API after the console spent the burst: %d %v %s", r.code, r.header, r.body)
	}
	e.noPanic(t)
}
