package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/packs"
	prt "github.com/packrun/packrun/runtime"
)

const (
	helloPack     = "local.hello.wat"
	helloRef      = "local.hello.wat@1.0.0"
	helloNode     = "example.hello"
	helloTaskType = "hello.wat"
)

// packSource serves archives by name, like the CLI's registry adapter.
type packSource map[string]*packs.Archive

func (p packSource) Open(ctx context.Context, ref string) (*packs.Archive, error) {
	name, version, _ := strings.Cut(ref, "@")
	a, ok := p[name]
	if !ok || version != "" && version != a.Manifest.Version {
		return nil, fmt.Errorf("open %s: %w", ref, dispatch.ErrPackNotInstalled)
	}
	return a, nil
}

var helloArchive = sync.OnceValues(func() (*packs.Archive, error) {
	_, file, _, _ := runtime.Caller(0)
	b, err := packs.Pack(filepath.Join(filepath.Dir(file), "..", "..", "examples", "hello-wat"))
	if err != nil {
		return nil, err
	}
	return packs.Read(bytes.NewReader(b), packs.DefaultLimits())
})

type env struct {
	t       *testing.T
	url     string
	client  *http.Client
	backend host.Backend

	mu   sync.Mutex
	logs []string
}

// newEnv starts the API on 127.0.0.1 over a fresh backend with the hello
// pack installed (its task type routed) and a dispatcher that is never
// started (invoke works; enqueued tasks stay pending).
func newEnv(t *testing.T, backend host.Backend, mod func(*Config)) *env {
	t.Helper()
	ctx := context.Background()
	arch, err := helloArchive()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := prt.New(ctx, prt.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	if err := backend.SetPackTaskTypes(ctx, helloPack, []host.TaskTypeRoute{{
		TaskTypeSpec: host.TaskTypeSpec{TaskType: helloTaskType}, Pack: helloPack, Node: helloNode,
	}}); err != nil {
		t.Fatal(err)
	}
	d := dispatch.New(dispatch.Config{Backend: backend, Packs: packSource{helloPack: arch}, Runtime: rt})
	t.Cleanup(func() { d.Close(ctx) })
	e := &env{t: t, backend: backend}
	cfg := Config{
		Backend:    backend,
		Dispatcher: d,
		Packs: func(context.Context) ([]PackInfo, error) {
			return []PackInfo{{Name: helloPack, Version: "1.0.0", SHA256: arch.SHA256, InstalledAt: time.Now().UTC(), Nodes: []string{helloNode}, TaskTypes: []string{helloTaskType}}}, nil
		},
		Host: rt.Host(),
		Auth: Auth{Insecure: true},
		Log: func(msg string, kv ...any) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.logs = append(e.logs, fmt.Sprint(append([]any{msg}, kv...)...))
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	// Every response is checked against the OpenAPI document.
	srv := httptest.NewServer(specFor(t).Handler(t, New(cfg)))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	e.client = &http.Client{Transport: &http.Transport{MaxConnsPerHost: 64, MaxIdleConnsPerHost: 64}, Timeout: time.Minute}
	t.Cleanup(e.client.CloseIdleConnections)
	return e
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; contentType "" sends none.
func (e *env) do(method, path, contentType, body string) resp {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		e.t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return resp{res.StatusCode, res.Header, b}
}

func (e *env) get(path string) resp { return e.do(http.MethodGet, path, "", "") }
func (e *env) post(path, body string) resp {
	return e.do(http.MethodPost, path, "application/json", body)
}

func decode[T any](t *testing.T, r resp) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
	return v
}

// wantStatus fails unless r has status want.
func wantStatus(t *testing.T, r resp, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d; body %s", r.status, want, r.body)
	}
}

// wantError checks the status and the envelope: exactly {"error":{...}}
// with the code, a message, and the field when one is expected.
func wantError(t *testing.T, r resp, status int, code, field string) {
	t.Helper()
	wantStatus(t, r, status)
	var env map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &env); err != nil || len(env) != 1 || env["error"] == nil {
		t.Fatalf("not an error envelope: %s", r.body)
	}
	var d struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	}
	if err := json.Unmarshal(env["error"], &d); err != nil {
		t.Fatal(err)
	}
	if d.Code != code || d.Message == "" || d.Field != field {
		t.Fatalf("error %+v, want code %q field %q", d, code, field)
	}
	if strings.Contains(d.Message, "\n") || strings.Contains(d.Message, "goroutine") {
		t.Fatalf("message is not one line: %q", d.Message)
	}
}

func (e *env) listTasks(query string) []*host.TaskRecord {
	e.t.Helper()
	r := e.get("/v1/tasks" + query)
	wantStatus(e.t, r, http.StatusOK)
	return decode[taskList](e.t, r).Tasks
}

func (e *env) enqueue(body string) *host.TaskRecord {
	e.t.Helper()
	r := e.post("/v1/tasks", body)
	wantStatus(e.t, r, http.StatusCreated)
	return decode[*host.TaskRecord](e.t, r)
}

const helloIntent = `{"task_type":"hello.wat","source":"test","payload":{"name":"x"}}`

func TestTasks(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)

	r := e.post("/v1/tasks?max_attempts=7", `{"task_type":"hello.wat","subject":"s","priority":2,"payload":{"name":"x"}}`)
	wantStatus(t, r, http.StatusCreated)
	rec := decode[*host.TaskRecord](t, r)
	if rec.TaskID == "" || rec.TaskType != helloTaskType || rec.Status != host.TaskPending || rec.MaxAttempts != 7 ||
		rec.Priority != 2 || rec.Source != DefaultSource || string(rec.Payload) != `{"name":"x"}` {
		t.Fatalf("record %+v", rec)
	}
	if loc := r.header.Get("Location"); loc != "/v1/tasks/"+rec.TaskID {
		t.Errorf("Location %q", loc)
	}
	var raw map[string]any
	json.Unmarshal(r.body, &raw)
	if _, err := time.Parse(time.RFC3339, raw["created_at"].(string)); err != nil {
		t.Errorf("created_at: %v", err)
	}

	got := decode[*host.TaskRecord](t, e.get("/v1/tasks/"+rec.TaskID))
	if got.TaskID != rec.TaskID || got.Subject != "s" {
		t.Fatalf("GET: %+v", got)
	}

	second := e.enqueue(helloIntent)
	if second.Source != "test" {
		t.Errorf("source %q, want the intent's", second.Source)
	}
	if list := e.listTasks(""); len(list) != 2 || list[0].TaskID != second.TaskID || list[1].TaskID != rec.TaskID {
		t.Fatalf("list (newest first): %v", ids(list))
	}
	if list := e.listTasks("?limit=1"); len(list) != 1 {
		t.Fatalf("limit=1: %v", ids(list))
	}

	r = e.post("/v1/tasks/"+rec.TaskID+":cancel", "")
	wantStatus(t, r, http.StatusOK)
	if c := decode[*host.TaskRecord](t, r); c.Status != host.TaskOperatorCanceled {
		t.Fatalf("after cancel: %s", c.Status)
	}
	if list := e.listTasks("?status=operator_canceled"); len(list) != 1 || list[0].TaskID != rec.TaskID {
		t.Fatalf("status filter: %v", ids(list))
	}
	if list := e.listTasks("?status=pending&task_type=hello.wat"); len(list) != 1 || list[0].TaskID != second.TaskID {
		t.Fatalf("status filter: %v", ids(list))
	}
	// Query mistakes.
	wantError(t, e.get("/v1/tasks?status=done"), http.StatusBadRequest, CodeInvalid, "status")
	wantError(t, e.get("/v1/tasks?limit=0"), http.StatusBadRequest, CodeInvalid, "limit")
	wantError(t, e.get("/v1/tasks?limit=x"), http.StatusBadRequest, CodeInvalid, "limit")
	wantError(t, e.get("/v1/attempts?since=yesterday"), http.StatusBadRequest, CodeInvalid, "since")
}

func ids(ts []*host.TaskRecord) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.TaskID)
	}
	return out
}

// TestEnqueueRefused: every malformed request gets its 4xx and the
// envelope, and nothing is stored.
func TestEnqueueRefused(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	big := `{"task_type":"hello.wat","source":"t","payload":{"x":"` + strings.Repeat("a", DefaultMaxBodyBytes) + `"}}`
	for _, tc := range []struct {
		name, query, contentType, body string
		status                         int
		code, field                    string
	}{
		{"not JSON", "", "application/json", `{"task_type":`, 400, CodeBadRequest, ""},
		{"garbage", "", "application/json", `hello`, 400, CodeBadRequest, ""},
		{"empty body", "", "application/json", ``, 400, CodeBadRequest, ""},
		{"array", "", "application/json", `[` + helloIntent + `]`, 400, CodeBadRequest, ""},
		{"string", "", "application/json", `"hello.wat"`, 400, CodeBadRequest, ""},
		{"trailing data", "", "application/json", helloIntent + `{}`, 400, CodeBadRequest, ""},
		{"wrong type", "", "application/json", `{"task_type":"hello.wat","source":"t","priority":"high","payload":{}}`, 400, CodeInvalid, "priority"},
		{"task_type not a string", "", "application/json", `{"task_type":7,"source":"t","payload":{}}`, 400, CodeInvalid, "task_type"},
		{"source not a string", "", "application/json", `{"task_type":"hello.wat","source":7,"payload":{}}`, 400, CodeInvalid, "source"},
		{"empty source", "", "application/json", `{"task_type":"hello.wat","source":"","payload":{}}`, 400, CodeInvalid, "source"},
		{"unknown field", "", "application/json", `{"task_type":"hello.wat","source":"t","payload":{},"colour":"red"}`, 400, CodeInvalid, "colour"},
		{"huge unknown field", "", "application/json", `{"task_type":"hello.wat","source":"t","payload":{},"` + strings.Repeat("k", 10000) + `":1}`, 400, CodeInvalid, strings.Repeat("k", 64) + "…"},
		{"missing task_type", "", "application/json", `{"source":"t","payload":{}}`, 400, CodeInvalid, "task_type"},
		{"bad task_type", "", "application/json", `{"task_type":"hello wat","payload":{}}`, 400, CodeInvalid, "task_type"},
		{"payload not an object", "", "application/json", `{"task_type":"hello.wat","source":"t","payload":[1]}`, 400, CodeInvalid, "payload"},
		{"payload null", "", "application/json", `{"task_type":"hello.wat","source":"t","payload":null}`, 400, CodeInvalid, "payload"},
		{"payload missing", "", "application/json", `{"task_type":"hello.wat","source":"t"}`, 400, CodeInvalid, "payload"},
		{"no source and a bad field", "", "application/json", `{"task_type":"hello.wat","payload":{},"available_at":"soon"}`, 400, CodeInvalid, "available_at"},
		{"max_attempts zero", "?max_attempts=0", "application/json", helloIntent, 400, CodeInvalid, "max_attempts"},
		{"max_attempts huge", "?max_attempts=1000", "application/json", helloIntent, 400, CodeInvalid, "max_attempts"},
		{"oversized body", "", "application/json", big, 413, CodeTooLarge, ""},
		{"not JSON content type", "", "text/plain", helloIntent, 415, CodeUnsupportedMediaType, ""},
		{"no content type", "", "", helloIntent, 415, CodeUnsupportedMediaType, ""},
		{"form content type", "", "application/x-www-form-urlencoded", helloIntent, 415, CodeUnsupportedMediaType, ""},
		{"unknown task type", "", "application/json", `{"task_type":"nobody.serves","source":"t","payload":{}}`, 422, CodeUnknownTaskType, "task_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(http.MethodPost, "/v1/tasks"+tc.query, tc.contentType, tc.body)
			wantError(t, r, tc.status, tc.code, tc.field)
			if list := e.listTasks("?limit=100"); len(list) != 0 {
				t.Fatalf("stored %d tasks", len(list))
			}
		})
	}
	// Accepted variants, for contrast: JSON, with a UTF-8 charset.
	wantStatus(t, e.do(http.MethodPost, "/v1/tasks", "application/json", helloIntent), http.StatusCreated)
	wantStatus(t, e.do(http.MethodPost, "/v1/tasks", "application/json; charset=utf-8", helloIntent), http.StatusCreated)
	if n := len(e.listTasks("")); n != 2 {
		t.Fatalf("%d tasks, want 2", n)
	}
}

func TestMaxBodyBytes(t *testing.T) {
	e := newEnv(t, newBackend(t), func(c *Config) { c.MaxBodyBytes = 100 })
	body := `{"task_type":"hello.wat","source":"t","payload":{"x":"` + strings.Repeat("a", 100) + `"}}`
	wantError(t, e.post("/v1/tasks", body), http.StatusRequestEntityTooLarge, CodeTooLarge, "")
	wantError(t, e.post("/v1/invoke", `{"pack":"local.hello.wat","input":{"name":"`+strings.Repeat("a", 100)+`"}}`), http.StatusRequestEntityTooLarge, CodeTooLarge, "")
	e.enqueue(helloIntent)
}

func TestNotFoundAndMethods(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	for _, tc := range []struct {
		method, path, body string
		status             int
		code, allow        string
	}{
		{"GET", "/v1/tasks/task_nope", "", 404, CodeNotFound, ""},
		{"POST", "/v1/tasks/task_nope:cancel", "", 404, CodeNotFound, ""},
		{"POST", "/v1/tasks/task_nope:frobnicate", "", 404, CodeNotFound, ""},
		{"GET", "/v1/attempts/att_nope", "", 404, CodeNotFound, ""},
		{"GET", "/v1/nothing", "", 404, CodeNotFound, ""},
		{"GET", "/", "", 404, CodeNotFound, ""},
		{"DELETE", "/v1/tasks", "", 405, CodeMethodNotAllowed, "GET, HEAD, POST"},
		{"PUT", "/v1/tasks/task_x", "", 405, CodeMethodNotAllowed, "GET, HEAD, POST"},
		{"POST", "/v1/tasks/task_x", "", 405, CodeMethodNotAllowed, "GET, HEAD"},
		{"GET", "/v1/tasks/task_x:cancel", "", 405, CodeMethodNotAllowed, "POST"},
		{"GET", "/v1/invoke", "", 405, CodeMethodNotAllowed, "POST"},
		{"POST", "/v1/packs", "{}", 405, CodeMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/v1/attempts/att_x", "", 405, CodeMethodNotAllowed, "GET, HEAD, POST"},
		{"POST", "/v1/attempts/att_nope:replay", "", 404, CodeNotFound, ""},
		{"POST", "/v1/memory/ns/k", "{}", 405, CodeMethodNotAllowed, "GET, HEAD, PUT, DELETE"},
		{"POST", "/.well-known/packrun", "{}", 405, CodeMethodNotAllowed, "GET, HEAD"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := e.do(tc.method, tc.path, "application/json", tc.body)
			wantError(t, r, tc.status, tc.code, "")
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow %q, want %q", got, tc.allow)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, newBackend(t), nil)

	// Pending: canceled at once; a second cancel conflicts.
	p := e.enqueue(helloIntent)
	wantStatus(t, e.post("/v1/tasks/"+p.TaskID+":cancel", ""), http.StatusOK)
	wantError(t, e.post("/v1/tasks/"+p.TaskID+":cancel", ""), http.StatusConflict, CodeConflict, "")

	// Completed: conflict, and the task is unchanged.
	c := e.enqueue(helloIntent)
	claimed, err := e.backend.Claim(ctx, "runner", time.Now().Add(time.Second))
	if err != nil || claimed.TaskID != c.TaskID {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	att := &host.Attempt{
		TaskID: c.TaskID, RunnerID: "runner", Pack: helloRef, ModuleSHA256: strings.Repeat("0", 64), Node: helloNode,
		RunID: c.TaskID, Attempt: claimed.AttemptCount, ABIVersion: "1.0", Input: json.RawMessage(`{"name":"x"}`),
		Output: json.RawMessage(`{"greeting":"Hello, x!"}`), Outcome: abi.Completed,
		StartedAt: time.Now().UTC(), EndedAt: time.Now().UTC(),
	}
	if err := e.backend.RecordAttempt(ctx, att); err != nil {
		t.Fatal(err)
	}
	if _, err := e.backend.Finish(ctx, c.TaskID, host.FinishInput{AttemptID: att.AttemptID, Outcome: host.TaskOutcome{MachineStatus: host.MachineOK, OperatorSummary: "ok"}}); err != nil {
		t.Fatal(err)
	}
	wantError(t, e.post("/v1/tasks/"+c.TaskID+":cancel", ""), http.StatusConflict, CodeConflict, "")
	if got := decode[*host.TaskRecord](t, e.get("/v1/tasks/"+c.TaskID)); got.Status != host.TaskCompleted {
		t.Fatalf("completed task became %s", got.Status)
	}

	// Its attempt, by id and by task.
	a := decode[*host.Attempt](t, e.get("/v1/attempts/"+att.AttemptID))
	if a.AttemptID != att.AttemptID || a.TaskID != c.TaskID || a.Outcome != abi.Completed || a.ContentHash == "" {
		t.Fatalf("attempt %+v", a)
	}
	list := decode[attemptList](t, e.get("/v1/attempts?task_id="+c.TaskID)).Attempts
	if len(list) != 1 || list[0].AttemptID != att.AttemptID {
		t.Fatalf("attempts of the task: %+v", list)
	}
	if list := decode[attemptList](t, e.get("/v1/attempts?task_id="+p.TaskID)).Attempts; len(list) != 0 {
		t.Fatalf("attempts of a task that never ran: %+v", list)
	}

	// Running: cancel is requested; the task keeps running until its
	// attempt ends.
	rn := e.enqueue(helloIntent)
	if claimed, err := e.backend.Claim(ctx, "runner", time.Now().Add(time.Second)); err != nil || claimed.TaskID != rn.TaskID {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	r := e.post("/v1/tasks/"+rn.TaskID+":cancel", "")
	wantStatus(t, r, http.StatusOK)
	if got := decode[*host.TaskRecord](t, r); got.Status != host.TaskRunning || !got.CancelRequested {
		t.Fatalf("running task after cancel: %s cancel_requested=%v", got.Status, got.CancelRequested)
	}
}

func TestConcurrentEnqueue(t *testing.T) {
	const n = 1000
	e := newEnv(t, newBackend(t), nil)
	var wg sync.WaitGroup
	created := make([]string, n)
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"task_type":"hello.wat","source":"load","subject":"n%d","payload":{"i":%d}}`, i, i)
			res, err := e.client.Post(e.url+"/v1/tasks", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			defer res.Body.Close()
			var rec host.TaskRecord
			if err := json.NewDecoder(res.Body).Decode(&rec); err != nil || res.StatusCode != http.StatusCreated {
				errs <- fmt.Errorf("request %d: status %d, %v", i, res.StatusCode, err)
				return
			}
			created[i] = rec.TaskID
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	list := e.listTasks("?limit=2000")
	if len(list) != n {
		t.Fatalf("listed %d tasks, want %d", len(list), n)
	}
	listed := ids(list)
	slices.Sort(listed)
	slices.Sort(created)
	if !slices.Equal(listed, created) || len(slices.Compact(listed)) != n {
		t.Fatal("listed ids are not the distinct created ids")
	}
}

func TestInvoke(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	for _, body := range []string{
		`{"pack":"local.hello.wat","node":"example.hello","input":{"name":"x"},"tenant":"acme"}`,
		`{"pack":"local.hello.wat@1.0.0","input":{"name":"x"}}`, // single-node pack: node may be omitted
	} {
		r := e.post("/v1/invoke", body)
		wantStatus(t, r, http.StatusOK)
		var keys map[string]json.RawMessage
		json.Unmarshal(r.body, &keys)
		for _, k := range []string{"attempt_id", "outcome", "output", "error", "interrupt", "events", "duration_ms"} {
			if _, ok := keys[k]; !ok {
				t.Errorf("reply has no %q: %s", k, r.body)
			}
		}
		res := decode[invokeResponse](t, r)
		if res.Outcome != abi.Completed || string(res.Output) != `{"greeting":"Hello, x!"}` || res.Error != nil ||
			res.AttemptID == "" || res.Pack != helloRef || res.Node != helloNode || string(res.Events) != `[]` {
			t.Fatalf("invoke: %s", r.body)
		}
		// The evidence record of the invocation.
		a := decode[*host.Attempt](t, e.get("/v1/attempts/"+res.AttemptID))
		if a.Pack != helloRef || a.Node != helloNode || string(a.Output) != string(res.Output) || a.TaskID != "" {
			t.Fatalf("attempt %+v", a)
		}
	}
	if list := decode[attemptList](t, e.get("/v1/attempts")).Attempts; len(list) != 2 {
		t.Fatalf("%d attempts, want 2", len(list))
	}

	for _, tc := range []struct {
		name, body  string
		status      int
		code, field string
	}{
		{"not JSON", `{"pack":`, 400, CodeBadRequest, ""},
		{"unknown field", `{"pack":"local.hello.wat","inputs":{}}`, 400, CodeInvalid, "inputs"},
		{"huge unknown field", `{"pack":"local.hello.wat","` + strings.Repeat("i", 10000) + `":{}}`, 400, CodeInvalid, strings.Repeat("i", 64) + "…"},
		{"wrong type", `{"pack":"local.hello.wat","input":{},"tenant":7}`, 400, CodeInvalid, "tenant"},
		{"input not an object", `{"pack":"local.hello.wat","input":[1]}`, 400, CodeInvalid, "input"},
		{"no pack", `{"input":{}}`, 400, CodeInvalid, "pack"},
		{"no pack name", `{"pack":"@1.0.0"}`, 400, CodeInvalid, "pack"},
		{"unknown pack", `{"pack":"local.nope","input":{}}`, 404, CodeNotFound, "pack"},
		{"unknown version", `{"pack":"local.hello.wat@9.9.9","input":{}}`, 404, CodeNotFound, "pack"},
		{"unknown node", `{"pack":"local.hello.wat","node":"example.nope","input":{}}`, 404, CodeNotFound, "node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, e.post("/v1/invoke", tc.body), tc.status, tc.code, tc.field)
		})
	}
	if list := decode[attemptList](t, e.get("/v1/attempts")).Attempts; len(list) != 2 {
		t.Fatalf("refused invocations recorded attempts: %d, want 2", len(list))
	}
	// Input the node's inputSchema refuses: 422 naming the path; the
	// refused attempt is recorded (failed, nothing ran).
	wantError(t, e.post("/v1/invoke", `{"pack":"local.hello.wat","input":{"name":5}}`), http.StatusUnprocessableEntity, CodeInputSchema, "input.name")
	if list := decode[attemptList](t, e.get("/v1/attempts")).Attempts; len(list) != 3 || list[0].Error == nil || list[0].Error.Code != CodeInputSchema {
		t.Fatalf("the refused attempt is not recorded: %+v", list)
	}

	noDispatch := newEnv(t, newBackend(t), func(c *Config) { c.Dispatcher = nil })
	wantError(t, noDispatch.post("/v1/invoke", `{"pack":"local.hello.wat"}`), http.StatusServiceUnavailable, CodeUnavailable, "")
}

func TestPacksAndWellKnown(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	list := decode[packList](t, e.get("/v1/packs")).Packs
	if len(list) != 1 || list[0].Ref() != helloRef || list[0].SHA256 == "" {
		t.Fatalf("packs %+v", list)
	}

	r := e.get("/.well-known/packrun")
	wantStatus(t, r, http.StatusOK)
	var top map[string]json.RawMessage
	json.Unmarshal(r.body, &top)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range top {
			if !yield(k) {
				return
			}
		}
	})
	if want := []string{"abiVersions", "engine", "limits", "maxLimits", "namespaces", "packs"}; !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	c := decode[capabilities](t, r)
	if len(c.ABIVersions) == 0 || len(c.Namespaces) == 0 || c.Engine == "" || c.Limits.MemoryBytes == 0 ||
		c.MaxLimits.MemoryBytes < c.Limits.MemoryBytes || !slices.Equal(c.Packs, []string{helloRef}) {
		t.Fatalf("capabilities %s", r.body)
	}

	// No packs configured: empty arrays, not null.
	bare := newEnv(t, newBackend(t), func(c *Config) { c.Packs = nil })
	if r := bare.get("/v1/packs"); string(r.body) != "{\"packs\":[]}\n" {
		t.Fatalf("no packs: %s", r.body)
	}
	if c := decode[capabilities](t, bare.get("/.well-known/packrun")); c.Packs == nil {
		t.Fatal("packs is null")
	}
}

// TestHostError: a host failure is a 5xx with a generic message; the cause
// goes to the log only.
func TestHostError(t *testing.T) {
	fb := failingBackend{newBackend(t), errors.New("open /secret/packrun.db: disk I/O error")}
	e := newEnv(t, fb, func(c *Config) {
		c.Packs = func(context.Context) ([]PackInfo, error) { return nil, errors.New("/secret/registry broken") }
	})
	for _, path := range []string{"/v1/tasks", "/v1/packs", "/.well-known/packrun"} {
		r := e.get(path)
		wantError(t, r, http.StatusInternalServerError, CodeInternal, "")
		if bytes.Contains(r.body, []byte("secret")) {
			t.Fatalf("%s leaked the cause: %s", path, r.body)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.logs) != 3 || !strings.Contains(e.logs[0], "disk I/O error") {
		t.Fatalf("logs %q", e.logs)
	}
}

// fullBackend is a backend whose disk is full: every enqueue fails as the
// SQLite store reports it.
type fullBackend struct{ host.Backend }

func (fullBackend) Enqueue(context.Context, host.TaskIntent, host.EnqueueOptions) (*host.TaskRecord, error) {
	return nil, host.Wrap("enqueue", "hello.wat", fmt.Errorf("no space left for the database, nothing was stored: %w", host.ErrUnavailable))
}

// TestDiskFull: a write refused for want of disk space is a 503 with
// Retry-After (the client may try again), not a 500, and stores nothing.
func TestDiskFull(t *testing.T) {
	b := newBackend(t)
	e := newEnv(t, fullBackend{b}, nil)
	r := e.post("/v1/tasks", helloIntent)
	wantError(t, r, http.StatusServiceUnavailable, CodeUnavailable, "")
	if got := r.header.Get("Retry-After"); got != "30" {
		t.Fatalf("Retry-After %q", got)
	}
	if list, err := b.ListTasks(context.Background(), host.TaskFilter{}); err != nil || len(list) != 0 {
		t.Fatalf("%d tasks stored, %v", len(list), err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.logs) != 1 || !strings.Contains(e.logs[0], "no space left") {
		t.Fatalf("logs %q", e.logs)
	}
}

// TestQueryParameters: a query parameter an endpoint does not read, or one
// given twice, is refused rather than ignored (a misspelt filter would
// otherwise answer about everything), and nothing is stored.
func TestQueryParameters(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	e.enqueue(helloIntent)
	for _, tc := range []struct {
		method, path, body string
		code, field        string
	}{
		{"GET", "/v1/attempts?task=x", "", CodeInvalid, "task"},
		{"GET", "/v1/tasks?state=pending", "", CodeInvalid, "state"},
		{"GET", "/v1/tasks?limit=1&limit=2", "", CodeInvalid, "limit"},
		{"GET", "/v1/packs?all=1", "", CodeInvalid, "all"},
		{"GET", "/.well-known/packrun?v=2", "", CodeInvalid, "v"},
		{"GET", "/v1/tasks?%zz", "", CodeBadRequest, ""},
		{"POST", "/v1/tasks?priority=1", helloIntent, CodeInvalid, "priority"},
		{"POST", "/v1/invoke?async=1", `{"pack":"local.hello.wat"}`, CodeInvalid, "async"},
		{"GET", "/v1/tasks?" + strings.Repeat("p", 5000) + "=1", "", CodeInvalid, strings.Repeat("p", 64) + "…"},
	} {
		r := e.do(tc.method, tc.path, "application/json", tc.body)
		wantError(t, r, http.StatusBadRequest, tc.code, tc.field)
		if len(r.body) > 1024 {
			t.Errorf("%s %.60s: a %d-byte error", tc.method, tc.path, len(r.body))
		}
	}
	if n := len(e.listTasks("")); n != 1 {
		t.Fatalf("%d tasks, want the 1 enqueued", n)
	}
	if list := decode[attemptList](t, e.get("/v1/attempts")).Attempts; len(list) != 0 {
		t.Fatalf("a refused invoke recorded %d attempts", len(list))
	}
	// The parameters each endpoint does take still work.
	wantStatus(t, e.get("/v1/tasks?status=pending&task_type=hello.wat&limit=5"), http.StatusOK)
	wantStatus(t, e.get("/v1/attempts?task_id=x&pack=local.hello.wat&tenant=t&since=2026-01-02T15:04:05Z&limit=5"), http.StatusOK)
}
