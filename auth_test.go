package packrun

import (
	"context"
	"encoding/json"

	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// authEnv is a Host serving its API with tokens required, the hello pack
// installed with task type hello.c, and its dispatcher running.
type authEnv struct {
	*fixture
	url string
}

func newAuthEnv(t *testing.T, opts HandlerOptions) *authEnv {
	t.Helper()
	f := newFixture(t)
	s := hello("1.0.0")
	s.nodes = `[{"typeId":"example.hello","kind":"skill","taskTypes":["hello.c"]}]`
	f.install(t, s)
	opts.Addr = "127.0.0.1:0"
	hd, err := f.Handler(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	hd = apiSpec(t).Handler(t, hd) // every API response checked against the OpenAPI document
	srv := httptest.NewServer(hd)
	t.Cleanup(srv.Close)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &authEnv{f, srv.URL}
}

func (e *authEnv) token(t *testing.T, tenant, scopes string) (string, *Token) {
	t.Helper()
	sc, err := ParseScopes(scopes)
	if err != nil {
		t.Fatal(err)
	}
	secret, tok, err := e.CreateToken(ctx, TokenSpec{Tenant: tenant, Scopes: sc, Name: tenant + "-test"})
	if err != nil {
		t.Fatal(err)
	}
	return secret, tok
}

type apiReply struct {
	code   int
	header http.Header
	body   string
	path   string // the request's path, without its query
}

// errCode is the code of the JSON error envelope (packrun's, or on the
// openwop routes openwop's), or "".
func (r apiReply) errCode() string {
	code, _ := r.errDetail()
	return code
}

func (r apiReply) errMessage() string {
	_, msg := r.errDetail()
	return msg
}

func (r apiReply) errDetail() (code, message string) {
	var env struct {
		Error   json.RawMessage
		Message string
	}
	json.Unmarshal([]byte(r.body), &env)
	if json.Unmarshal(env.Error, &code) == nil {
		return code, env.Message
	}
	var d struct{ Code, Message string }
	json.Unmarshal(env.Error, &d)
	return d.Code, d.Message
}

func (e *authEnv) call(t *testing.T, token, method, path, body string) apiReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return apiReply{resp.StatusCode, resp.Header, string(b), req.URL.Path}
}

// Without a valid token every route answers 401 in the error envelope;
// without the route's scope, 403 naming it.
func TestAPIAuthentication(t *testing.T) {
	e := newAuthEnv(t, HandlerOptions{})
	reader, _ := e.token(t, "acme", "tasks:read")
	revoked, rtok := e.token(t, "acme", "admin")
	if _, err := e.RevokeToken(ctx, rtok.ID); err != nil {
		t.Fatal(err)
	}
	sc, _ := ParseScopes("admin")
	expired, _, err := e.CreateToken(ctx, TokenSpec{Tenant: "acme", Scopes: sc, TTL: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	wrongSecret := reader[:len(reader)-4] + "AAAA"
	if wrongSecret == reader {
		wrongSecret = reader[:len(reader)-4] + "BBBB"
	}
	routes := [][2]string{{"GET", "/v1/tasks"}, {"POST", "/v1/tasks"}, {"GET", "/v1/attempts"}, {"POST", "/v1/invoke"},
		{"GET", "/v1/packs"}, {"GET", "/.well-known/packrun"}, {"GET", "/v1/memory/ns/k"}, {"GET", "/v1/tasks/task_x/events"}}
	for _, tok := range []struct{ name, token string }{{"none", ""}, {"malformed", "hunter2"}, {"revoked", revoked}, {"expired", expired}, {"wrong secret", wrongSecret}} {
		for _, rt := range routes {
			body := ""
			if rt[0] == "POST" {
				body = "{}"
			}
			r := e.call(t, tok.token, rt[0], rt[1], body)
			if r.code != http.StatusUnauthorized || r.errCode() != "unauthorized" || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s token, %s %s: %d %s", tok.name, rt[0], rt[1], r.code, r.body)
			}
		}
	}
	if r := e.call(t, reader, "GET", "/v1/tasks", ""); r.code != http.StatusOK {
		t.Fatalf("tasks:read token, GET /v1/tasks: %d %s", r.code, r.body)
	}
	for _, rt := range [][3]string{
		{"POST", "/v1/tasks", "tasks:write"}, {"POST", "/v1/invoke", "invoke"}, {"GET", "/v1/attempts", "evidence:read"},
		{"GET", "/v1/memory/ns/k", "memory:read"}, {"PUT", "/v1/memory/ns/k", "memory:write"}, {"POST", "/v1/tasks/x:cancel", "tasks:write"},
	} {
		body := ""
		if rt[0] != "GET" {
			body = `{"value":1}`
		}
		r := e.call(t, reader, rt[0], rt[1], body)
		if r.code != http.StatusForbidden || r.errCode() != "forbidden" || !strings.Contains(r.errMessage(), rt[2]) {
			t.Errorf("tasks:read token, %s %s: %d %s (want 403 naming %s)", rt[0], rt[1], r.code, r.body, rt[2])
		}
	}
}

// Over its rate a token gets 429 with Retry-After; another token is not
// slowed by it.
func TestAPIRateLimit(t *testing.T) {
	e := newAuthEnv(t, HandlerOptions{RateLimit: 0.01}) // a burst of 1, then one per 100 s
	a, _ := e.token(t, "acme", "tasks:read")
	b, _ := e.token(t, "acme", "tasks:read")
	if r := e.call(t, a, "GET", "/v1/tasks", ""); r.code != http.StatusOK {
		t.Fatalf("first: %d %s", r.code, r.body)
	}
	r := e.call(t, a, "GET", "/v1/tasks", "")
	if r.code != http.StatusTooManyRequests || r.errCode() != "rate_limited" || r.header.Get("Retry-After") == "" {
		t.Fatalf("second: %d %v %s", r.code, r.header, r.body)
	}
	if r := e.call(t, b, "GET", "/v1/tasks", ""); r.code != http.StatusOK {
		t.Fatalf("another token: %d %s", r.code, r.body)
	}
}

// A tenant's token cannot read, list, cancel, replay or infer another
// tenant's tasks, attempts, artifacts, events or memory, route by route;
// what it is refused reads exactly as what does not exist.
func TestAPITenantIsolation(t *testing.T) {
	e := newAuthEnv(t, HandlerOptions{})
	const all = "invoke,tasks:write,tasks:read,memory:read,memory:write,evidence:read"
	acme, acmeTok := e.token(t, "acme", all)
	globex, _ := e.token(t, "globex", all)

	// acme's work: a task run to completion, an invocation, memory and an
	// artifact.
	r := e.call(t, acme, "POST", "/v1/tasks", `{"task_type":"hello.c","payload":{"name":"acme"}}`)
	if r.code != http.StatusCreated {
		t.Fatalf("enqueue: %d %s", r.code, r.body)
	}
	var task host.TaskRecord
	json.Unmarshal([]byte(r.body), &task)
	if task.Tenant != "acme" {
		t.Fatalf("task tenant %q, want the token's", task.Tenant)
	}
	if r := e.call(t, acme, "POST", "/v1/tasks", `{"task_type":"hello.c","tenant":"globex"}`); r.code != http.StatusBadRequest {
		t.Fatalf("an intent naming a tenant: %d %s", r.code, r.body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		tr, err := e.Store().Task(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Status == host.TaskCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task stays %s: %s", tr.Status, tr.LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
	atts, err := e.Store().ListAttempts(ctx, host.AttemptFilter{TaskID: task.TaskID})
	if err != nil || len(atts) != 1 || atts[0].Tenant != "acme" {
		t.Fatalf("the task's attempt: %v %v", atts, err)
	}
	taskAttempt := atts[0].AttemptID
	r = e.call(t, acme, "POST", "/v1/invoke", `{"pack":"local.hello.c","node":"example.hello","input":{"name":"a"}}`)
	if r.code != http.StatusOK {
		t.Fatalf("invoke: %d %s", r.code, r.body)
	}
	var inv struct {
		AttemptID string `json:"attempt_id"`
	}
	json.Unmarshal([]byte(r.body), &inv)
	if r := e.call(t, acme, "PUT", "/v1/memory/notes/plan", `{"value":{"step":1}}`); r.code != http.StatusOK {
		t.Fatalf("memory put: %d %s", r.code, r.body)
	}
	art, err := e.Store().PutArtifact(ctx, host.ArtifactInput{TaskID: task.TaskID, AttemptID: taskAttempt, Role: host.ArtifactRole("output"), Name: "out.txt", Data: []byte("acme only")})
	if err != nil {
		t.Fatal(err)
	}

	// acme sees all of it.
	for _, p := range []string{"/v1/tasks/" + task.TaskID, "/v1/tasks/" + task.TaskID + "/events", "/v1/attempts/" + taskAttempt,
		"/v1/attempts/" + inv.AttemptID, "/v1/memory/notes/plan", "/v1/artifacts/" + art.ArtifactID} {
		if r := e.call(t, acme, "GET", p, ""); r.code != http.StatusOK {
			t.Errorf("acme GET %s: %d %s", p, r.code, r.body)
		}
	}
	if r := e.call(t, acme, "POST", "/v1/attempts/"+taskAttempt+":replay", ""); r.code != http.StatusOK || !strings.Contains(r.body, `"identical":true`) {
		t.Errorf("acme replay: %d %s", r.code, r.body)
	}

	// globex: each of acme's things answers as a thing that does not exist.
	same := func(route, acmeID, missingID, method string) {
		t.Helper()
		got := e.call(t, globex, method, strings.Replace(route, "ID", acmeID, 1), "")
		want := e.call(t, globex, method, strings.Replace(route, "ID", missingID, 1), "")
		if got.code != http.StatusNotFound || got.errCode() != "not_found" ||
			strings.ReplaceAll(got.errMessage(), acmeID, "X") != strings.ReplaceAll(want.errMessage(), missingID, "X") {
			t.Errorf("globex %s %s: %d %q; a missing one: %d %q", method, route, got.code, got.errMessage(), want.code, want.errMessage())
		}
	}
	same("/v1/tasks/ID", task.TaskID, "task_missing", "GET")
	same("/v1/tasks/ID:cancel", task.TaskID, "task_missing", "POST")
	same("/v1/tasks/ID/events", task.TaskID, "task_missing", "GET")
	same("/v1/attempts/ID", taskAttempt, "att_missing", "GET")
	same("/v1/attempts/ID", inv.AttemptID, "att_missing", "GET")
	same("/v1/attempts/ID:replay", taskAttempt, "att_missing", "POST")
	same("/v1/artifacts/ID", art.ArtifactID, "art_missing", "GET")
	same("/v1/memory/notes/ID", "plan", "nothing", "GET")

	// Lists hold only globex's (nothing), whatever the filter.
	for _, p := range []string{"/v1/tasks", "/v1/tasks?status=completed", "/v1/tasks?task_type=hello.c", "/v1/attempts",
		"/v1/attempts?task_id=" + task.TaskID, "/v1/attempts?pack=local.hello.c", "/v1/memory/notes"} {
		r := e.call(t, globex, "GET", p, "")
		if r.code != http.StatusOK || strings.Contains(r.body, "acme") || strings.Contains(r.body, task.TaskID) || strings.Contains(r.body, "plan") {
			t.Errorf("globex GET %s: %d %s", p, r.code, r.body)
		}
	}
	// Naming acme's tenant is refused, not honoured.
	if r := e.call(t, globex, "GET", "/v1/attempts?tenant=acme", ""); r.code != http.StatusForbidden {
		t.Errorf("globex ?tenant=acme: %d %s", r.code, r.body)
	}
	if r := e.call(t, globex, "POST", "/v1/invoke", `{"pack":"local.hello.c","node":"example.hello","tenant":"acme"}`); r.code != http.StatusForbidden {
		t.Errorf("globex invoke as acme: %d %s", r.code, r.body)
	}
	// globex's writes land in globex: its memory does not touch acme's.
	if r := e.call(t, globex, "PUT", "/v1/memory/notes/plan", `{"value":"globex"}`); r.code != http.StatusOK {
		t.Fatalf("globex put: %d %s", r.code, r.body)
	}
	if r := e.call(t, acme, "GET", "/v1/memory/notes/plan", ""); !strings.Contains(r.body, `"step":1`) {
		t.Errorf("acme's memory after globex wrote: %s", r.body)
	}
	// acme's own lists show its task, and the task is still there (the
	// cancel above did nothing).
	if r := e.call(t, acme, "GET", "/v1/tasks", ""); !strings.Contains(r.body, task.TaskID) || !strings.Contains(r.body, `"status":"completed"`) {
		t.Errorf("acme tasks: %s", r.body)
	}

	// State-changing calls left api_call events naming the token.
	evs, err := e.Store().Events(ctx, host.EventFilter{Type: "api_call"})
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, ev := range evs {
		var d map[string]string
		json.Unmarshal(ev.Data, &d)
		calls[d["token_id"]+" "+d["route"]]++
	}
	for _, want := range []string{acmeTok.ID + " POST /v1/tasks", acmeTok.ID + " POST /v1/invoke", acmeTok.ID + " PUT /v1/memory/{namespace}/{key}"} {
		if calls[want] != 1 {
			t.Errorf("api_call %q: %d, all: %v", want, calls[want], calls)
		}
	}
	if len(calls) != 4 {
		t.Errorf("api_call events: %v (want acme's three and globex's put)", calls)
	}
}
