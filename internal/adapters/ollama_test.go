package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeOllama stands in for Ollama: it records each request and answers by
// the model asked for.
type fakeOllama struct {
	mu       sync.Mutex
	requests []received
}

type received struct {
	method, path, contentType string
	body                      map[string]any
}

func (f *fakeOllama) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	json.Unmarshal(b, &body)
	f.mu.Lock()
	f.requests = append(f.requests, received{r.Method, r.URL.Path, r.Header.Get("Content-Type"), body})
	f.mu.Unlock()
	switch body["model"] {
	case "llama3.2":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"model":"llama3.2","created_at":"2025-01-01T00:00:00Z","response":"Hello from the model","done":true,"eval_count":5}`)
	case "broken":
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":"model runner has unexpectedly stopped"}`)
	case "slow":
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	case "odd":
		io.WriteString(w, `{"done":true}`)
	}
}

func (f *fakeOllama) last() received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}

func ollama(id, endpoint, model string, timeoutMS int64) AdapterConfig {
	return AdapterConfig{AdapterID: id, Kind: KindOllamaGenerate, Endpoint: endpoint, Model: model, TimeoutMS: timeoutMS}
}

func TestOllama(t *testing.T) {
	fake := &fakeOllama{}
	srv := httptest.NewServer(fake) // 127.0.0.1, free port
	defer srv.Close()
	r, _ := newRegistry(t,
		ollama("ok", srv.URL+"/", "llama3.2", 5000),
		ollama("broken", srv.URL, "broken", 5000),
		ollama("slow", srv.URL, "slow", 300),
		ollama("odd", srv.URL, "odd", 5000),
	)
	all := r.IDs()

	tests := []struct {
		name, adapter, input, prompt string
		status                       ExitStatus
		sentinel                     error
		response                     string
		httpStatus                   int
		errText                      string
	}{
		{name: "string prompt", adapter: "ok", input: `"Say hello"`, prompt: "Say hello",
			status: StatusOK, response: `"Hello from the model"`, httpStatus: 200},
		{name: "object with prompt", adapter: "ok", input: `{"prompt": "Say hi", "note": 1}`, prompt: "Say hi",
			status: StatusOK, response: `"Hello from the model"`, httpStatus: 200},
		{name: "HTTP 500", adapter: "broken", input: `"x"`, prompt: "x", status: StatusError, sentinel: ErrFailed,
			httpStatus: 500, errText: `HTTP 500: {"error":"model runner has unexpectedly stopped"}`},
		{name: "slow past timeout", adapter: "slow", input: `"x"`, prompt: "x", status: StatusTimeout, sentinel: ErrTimeout,
			errText: "timeout_ms 300"},
		{name: "no response field", adapter: "odd", input: `"x"`, prompt: "x", status: StatusError, sentinel: ErrFailed,
			httpStatus: 200, errText: `no "response" string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			call, err := r.Invoke(context.Background(), all, tt.adapter, req("a1", tt.input))
			if time.Since(start) > 20*time.Second {
				t.Fatal("timeout_ms not enforced")
			}
			if call == nil || !errors.Is(err, tt.sentinel) || (tt.sentinel == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.sentinel)
			}
			if call.ExitStatus != tt.status {
				t.Errorf("exit_status = %s, want %s", call.ExitStatus, tt.status)
			}
			got := fake.last()
			if got.method != http.MethodPost || got.path != "/api/generate" || got.contentType != "application/json" {
				t.Errorf("request: %s %s (%s)", got.method, got.path, got.contentType)
			}
			a, _ := r.Adapter(tt.adapter)
			if len(got.body) != 3 || got.body["model"] != a.Model || got.body["prompt"] != tt.prompt || got.body["stream"] != false {
				t.Errorf("body = %v", got.body)
			}
			if tt.response == "" && call.Response != nil || tt.response != "" && !jsonEq(call.Response, []byte(tt.response)) {
				t.Errorf("response = %s, want %s", call.Response, tt.response)
			}
			if tt.httpStatus == 0 && call.HTTPStatus != nil || tt.httpStatus != 0 && (call.HTTPStatus == nil || *call.HTTPStatus != tt.httpStatus) {
				t.Errorf("http_status = %v, want %d", deref(call.HTTPStatus), tt.httpStatus)
			}
			if !strings.Contains(call.Error, tt.errText) {
				t.Errorf("error = %q, want it to contain %q", call.Error, tt.errText)
			}
			if strp(call.Model) != a.Model || strp(call.Endpoint) != srv.URL+"/api/generate" || call.Argv != nil || call.ExitCode != nil {
				t.Errorf("model %q, endpoint %q, argv %v, exit_code %v", strp(call.Model), strp(call.Endpoint), call.Argv, deref(call.ExitCode))
			}
			if tt.httpStatus != 0 && readFile(t, call.StdoutPath) == "" {
				t.Errorf("response body not kept in %s", call.StdoutPath)
			}
			if readFile(t, call.StderrPath) != "" {
				t.Errorf("stderr file not empty")
			}
		})
	}
}

func TestOllamaBadInput(t *testing.T) {
	fake := &fakeOllama{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	r, ev := newRegistry(t, ollama("ok", srv.URL, "llama3.2", 5000))
	for _, in := range []string{``, `42`, `{"prompt": 1}`, `["x"]`, `{"text":"x"}`, `not json`} {
		call, err := r.Invoke(context.Background(), []string{"ok"}, "ok", req("a1", in))
		if call != nil || !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("input %q: call %v, err %v; want ErrInvalidRequest", in, call, err)
		}
	}
	if len(fake.requests) != 0 {
		t.Errorf("%d requests reached the server", len(fake.requests))
	}
	if entries, _ := readDirNames(ev); len(entries) != 0 {
		t.Errorf("evidence written for refused requests: %v", entries)
	}
}

func TestOllamaNoRedirects(t *testing.T) {
	elsewhere := &fakeOllama{}
	target := httptest.NewServer(elsewhere)
	defer target.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/api/generate", http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	r, _ := newRegistry(t, ollama("o", redirector.URL, "llama3.2", 5000))
	call, err := r.Invoke(context.Background(), []string{"o"}, "o", req("a1", `"secret prompt"`))
	if !errors.Is(err, ErrFailed) || call.HTTPStatus == nil || *call.HTTPStatus != 307 {
		t.Fatalf("err %v, call %+v", err, call)
	}
	if len(elsewhere.requests) != 0 {
		t.Error("the prompt followed a redirect")
	}
}
