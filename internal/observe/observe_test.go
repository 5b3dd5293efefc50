package observe

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/packrun/packrun/internal/auth"
)

// The request log names the token a request carries (auth.Principal), the
// route pattern (or "unmatched"), never the raw path.
func TestMiddlewareLogsRouteAndToken(t *testing.T) {
	var logs bytes.Buffer
	o := New(Config{Log: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs})})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := o.Middleware(mux)
	withPrincipal := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.With(r.Context(), &auth.Principal{TokenID: "tok_abc", Tenant: "tenant-secret"})))
	})
	for _, tc := range []struct {
		name    string
		handler http.Handler
		path    string
		want    []string
		notWant []string
	}{
		{"with a principal", withPrincipal, "/v1/tasks/task_123", []string{"route=\"GET /v1/tasks/{id}\"", "status=418", "token=tok_abc", "method=GET"}, []string{"task_123", "tenant-secret"}},
		{"without", h, "/v1/tasks/task_456", []string{"route=\"GET /v1/tasks/{id}\"", "status=418"}, []string{"token=", "task_456"}},
		{"no route", h, "/nowhere", []string{"route=unmatched", "status=404"}, []string{"/nowhere"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.Reset()
			tc.handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", tc.path, nil))
			line := logs.String()
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("%q lacks %q", line, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(line, w) {
					t.Errorf("%q has %q", line, w)
				}
			}
		})
	}
}

// /readyz answers 503 when the store refuses writes, and the endpoints
// answer 405 in the error envelope to other methods.
func TestReadyzAndMethods(t *testing.T) {
	o := New(Config{})
	ping := errors.New("disk full")
	h := o.Handler(Source{Ping: func(context.Context) error { return ping }, Dispatching: func() bool { return true }})
	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{
		{"GET", "/readyz", 503, `{"status":"unavailable","role":"dispatcher","error":"the store refuses writes: disk full"}`},
		{"POST", "/healthz", 405, `"code":"method_not_allowed"`},
		{"HEAD", "/healthz", 200, ``},
		{"GET", "/healthz", 200, `{"status":"ok"}`},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, w.Code, w.Body.String())
		}
	}
	ping = nil
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
	if w.Code != 200 || w.Body.String() != `{"status":"ready","role":"dispatcher"}`+"\n" {
		t.Errorf("/readyz: %d %s", w.Code, w.Body.String())
	}
}

type capErr string

func (e capErr) Error() string   { return string(e) }
func (e capErr) CapKind() string { return string(e) }

// Outbound requests are counted by the granted host, with bytes and
// latency, and never a tenant label.
func TestOutboundRequestMetrics(t *testing.T) {
	o := New(Config{})
	o.OutboundRequest("api.example.com", 10, 1000, 3*time.Millisecond, nil)
	o.OutboundRequest("api.example.com", 0, 0, time.Millisecond, capErr("http-timeout"))
	o.OutboundRequest("*.example.org", 0, 5, time.Millisecond, errors.New("connection refused"))
	h := o.Handler(Source{})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body := w.Body.String()
	for _, want := range []string{
		`packrun_outbound_requests_total{host="api.example.com",result="ok"} 1`,
		`packrun_outbound_requests_total{host="api.example.com",result="http-timeout"} 1`,
		`packrun_outbound_requests_total{host="*.example.org",result="error"} 1`,
		`packrun_outbound_bytes_total{direction="received",host="api.example.com"} 1000`,
		`packrun_outbound_bytes_total{direction="sent",host="api.example.com"} 10`,
		`packrun_outbound_request_duration_seconds_count{host="api.example.com"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, "tenant") {
		t.Error("/metrics has a tenant label")
	}
}

// A witness that refused degrades /readyz (still 200: the node serves)
// and is counted in packrun_witness_refusals_total; once it cosigns
// again the node is ready.
func TestReadyzDegradedByAWitness(t *testing.T) {
	o := New(Config{})
	ws := []WitnessState{{URL: "http://w.example", Size: 7, Refusals: 2, Problem: "witness refused (409)", Refused: true}}
	h := o.Handler(Source{Witnesses: func() []WitnessState { return ws }})
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w.Code, w.Body.String()
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"status":"degraded"`) || !strings.Contains(body, `"error":"witness http://w.example: witness refused (409)"`) {
		t.Errorf("/readyz with a refusing witness: %d %s", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, `packrun_witness_refusals_total{witness="http://w.example"} 2`) || !strings.Contains(body, `packrun_witness_cosigned_size{witness="http://w.example"} 7`) {
		t.Errorf("/metrics lacks the witness:\n%s", body)
	}
	ws = []WitnessState{{URL: "http://w.example", Size: 9, Refusals: 2}}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"status":"ready"`) {
		t.Errorf("/readyz once cosigned again: %d %s", code, body)
	}
}
