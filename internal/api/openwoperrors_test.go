package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// wantOpenwopError checks the status and openwop's error envelope: only
// the keys error, message and details, the code, a one-line message, and
// details.field when one is expected.
func wantOpenwopError(t *testing.T, r resp, status int, code, field string) openwopErrorBody {
	t.Helper()
	wantStatus(t, r, status)
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &keys); err != nil {
		t.Fatalf("not JSON: %s", r.body)
	}
	for k := range keys {
		if k != "error" && k != "message" && k != "details" {
			t.Fatalf("key %q outside {error, message, details}: %s", k, r.body)
		}
	}
	var b struct {
		Error   string          `json:"error"`
		Message string          `json:"message"`
		Details json.RawMessage `json:"details"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil || b.Error != code || b.Message == "" || strings.Contains(b.Message, "\n") {
		t.Fatalf("envelope %s, want error %q and a one-line message", r.body, code)
	}
	var d openwopErrorDetails
	if b.Details != nil {
		if err := json.Unmarshal(b.Details, &d); err != nil || string(b.Details) == "null" {
			t.Fatalf("details is not an object: %s", r.body)
		}
	}
	if d.Field != field {
		t.Fatalf("details.field %q, want %q: %s", d.Field, field, r.body)
	}
	return openwopErrorBody{Error: b.Error, Message: b.Message, Details: &d}
}

// refusingRuns refuses every run start as the Host refuses one without a
// workflowId, or of an unknown one.
type refusingRuns struct{ *fakeRuns }

func (refusingRuns) StartRun(_ context.Context, _, workflowID string, _ json.RawMessage) (*host.Run, error) {
	if workflowID == "" {
		return nil, host.Invalid("start run", "workflowId", "is required")
	}
	return nil, host.Errorf("start run", workflowID, host.ErrNotFound, "no such workflow")
}

// TestOpenwopErrorEnvelope: the openwop routes refuse in openwop's
// envelope (errors.test.ts: 404 and 400; auth.test.ts: 401), also for a
// path under an openwop prefix that is no route; packrun's own routes
// keep theirs.
func TestOpenwopErrorEnvelope(t *testing.T) {
	e := newEnv(t, newBackend(t), func(c *Config) { c.Runs = refusingRuns{newFakeRuns()} })
	wantOpenwopError(t, e.get("/v1/runs/openwop-conformance-this-run-id-does-not-exist"), http.StatusNotFound, "not_found", "")
	wantOpenwopError(t, e.post("/v1/runs", `{}`), http.StatusBadRequest, "validation_error", "workflowId")
	wantOpenwopError(t, e.post("/v1/runs", `{"workflowId":"x","nope":1}`), http.StatusBadRequest, "validation_error", "nope")
	wantOpenwopError(t, e.post("/v1/runs", `{"workflowId":"x"}`), http.StatusNotFound, "not_found", "")
	wantOpenwopError(t, e.post("/v1/openwop/workflows", `[]`), http.StatusBadRequest, "validation_error", "")
	wantOpenwopError(t, e.get("/v1/runs/run_1/events/poll/x"), http.StatusNotFound, "not_found", "")
	wantOpenwopError(t, e.get("/v1/openwop/nothing"), http.StatusNotFound, "not_found", "")
	wantOpenwopError(t, e.do(http.MethodDelete, "/v1/runs", "", ""), http.StatusMethodNotAllowed, CodeMethodNotAllowed, "")
	// packrun's own routes are as they were.
	wantError(t, e.get("/v1/tasks/nope"), http.StatusNotFound, CodeNotFound, "")
	wantError(t, e.get("/v1/runsx"), http.StatusNotFound, CodeNotFound, "")
	wantError(t, e.post("/v1/tasks", `{}`), http.StatusBadRequest, CodeInvalid, "task_type")
}

// TestOpenwopAuthAndRateEnvelope: no token or an unknown one is 401
// unauthenticated (auth.test.ts), a token over its rate is 429
// rate_limited with Retry-After and details.retryAfterMs and scope "key"
// (rate-limit-envelope.test.ts), in openwop's envelope.
func TestOpenwopAuthAndRateEnvelope(t *testing.T) {
	f := newFakeRuns()
	e := newEnv(t, newBackend(t), func(c *Config) {
		c.Runs = f
		c.Auth = Auth{Rate: 0.001, Burst: 1, Authenticate: func(_ context.Context, tok string) (*auth.Principal, error) {
			if tok == "good" {
				return &auth.Principal{TokenID: "g", Tenant: "t1", Scopes: []auth.Scope{auth.ScopeAdmin}}, nil
			}
			return nil, fmt.Errorf("unknown token")
		}}
	})
	const body = `{"workflowId":"conformance-noop"}`
	wantOpenwopError(t, e.raw(http.MethodPost, "/v1/runs", "application/json", "", body), http.StatusUnauthorized, "unauthenticated", "")
	wantOpenwopError(t, e.raw(http.MethodPost, "/v1/runs", "application/json", "hk_definitely_not_a_real_key_12345", body), http.StatusUnauthorized, "unauthenticated", "")
	// packrun's routes keep their code.
	wantError(t, e.raw(http.MethodGet, "/v1/tasks", "", "", ""), http.StatusUnauthorized, CodeUnauthorized, "")
	// The burst of 1 is taken by the first request; the second is over.
	wantStatus(t, e.raw(http.MethodGet, "/v1/runs/run_1", "", "good", ""), http.StatusOK)
	r := e.raw(http.MethodGet, "/v1/runs/run_1", "", "good", "")
	b := wantOpenwopError(t, r, http.StatusTooManyRequests, "rate_limited", "")
	sec, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || sec < 1 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	if b.Details.Scope != "key" || b.Details.RetryAfterMs != sec*1000 {
		t.Fatalf("details %+v, want scope key and retryAfterMs %d", b.Details, sec*1000)
	}
	// packrun's own route, over the same rate: its own envelope.
	wantError(t, e.raw(http.MethodGet, "/v1/tasks", "", "good", ""), http.StatusTooManyRequests, CodeRateLimited, "")
}

// discoveryRuns answers discovery's questions: fixtures, and each
// tenant's registered definitions.
type discoveryRuns struct {
	*fakeRuns
	registered map[string][]string
}

func (discoveryRuns) OpenwopFixtures(context.Context) ([]string, error) {
	return []string{"conformance-noop"}, nil
}

func (d discoveryRuns) OpenwopRegistered(_ context.Context, tenant string) ([]string, error) {
	return d.registered[tenant], nil
}

func (discoveryRuns) OpenwopLoadedPacks(context.Context) ([]string, error) { return []string{}, nil }

// TestDiscoveryRegisteredFixtures: discovery is public and lists the
// built-in fixtures; a caller with a valid token also sees its tenant's
// registered definitions (never another tenant's), in an answer marked
// private; an invalid token gets the public answer.
func TestDiscoveryRegisteredFixtures(t *testing.T) {
	e := newEnv(t, newBackend(t), func(c *Config) {
		c.Runs = discoveryRuns{newFakeRuns(), map[string][]string{"t1": {"mine", "conformance-noop"}, "t2": {"theirs"}}}
		c.Auth = Auth{Authenticate: func(_ context.Context, tok string) (*auth.Principal, error) {
			if tok == "t1" {
				return &auth.Principal{TokenID: "a", Tenant: "t1", Scopes: []auth.Scope{auth.ScopeTasksRead}}, nil
			}
			return nil, fmt.Errorf("unknown token")
		}}
	})
	for _, c := range []struct {
		token, cache string
		want         []string
	}{
		{"", discoveryCacheControl, []string{"conformance-noop"}},
		{"nope", discoveryCacheControl, []string{"conformance-noop"}},
		{"t1", discoveryPrivateCacheControl, []string{"conformance-noop", "mine"}},
	} {
		r := e.raw(http.MethodGet, "/.well-known/openwop", "", c.token, "")
		wantStatus(t, r, http.StatusOK)
		d := decode[openwopDiscovery](t, r)
		if fmt.Sprint(d.Fixtures) != fmt.Sprint(c.want) || r.header.Get("Cache-Control") != c.cache || r.header.Get("Vary") != "Authorization" {
			t.Errorf("token %q: fixtures %v, Cache-Control %q, Vary %q; want %v, %q", c.token, d.Fixtures, r.header.Get("Cache-Control"), r.header.Get("Vary"), c.want, c.cache)
		}
	}
}

// storingRuns keeps the workflow definitions put.
type storingRuns struct {
	*fakeRuns
	put *[]*host.OpenwopWorkflow
}

func (s storingRuns) PutOpenwopWorkflow(_ context.Context, w *host.OpenwopWorkflow) error {
	*s.put = append(*s.put, w)
	return nil
}

// TestPutPublishedOpenwopWorkflow: POST /v1/openwop/workflows takes a
// definition in openwop's published shape (edges, triggers, variables,
// settings...) and stores what packrun runs of it; an unknown field is a
// 400 naming it, a construct packrun cannot execute a 422 unsupported
// naming it, in openwop's envelope; the {workflowId, nodes} shape still
// works.
func TestPutPublishedOpenwopWorkflow(t *testing.T) {
	var put []*host.OpenwopWorkflow
	e := newEnv(t, newBackend(t), func(c *Config) { c.Runs = storingRuns{newFakeRuns(), &put} })
	const published = `{"id":"pub-delay","name":"Delay","version":"1.0.0",
		"nodes":[{"id":"done","typeId":"core.noop","name":"Done","position":{"x":1,"y":0},"config":{},"inputs":{}},
		         {"id":"wait","typeId":"core.delay","name":"Wait","position":{"x":0,"y":0},"config":{},"inputs":{"delayMs":{"type":"variable","variableName":"delayMs"}}}],
		"edges":[{"id":"e1","sourceNodeId":"wait","targetNodeId":"done"}],
		"triggers":[{"id":"manual","type":"manual","enabled":true}],
		"variables":[{"name":"delayMs","type":"number","required":true,"defaultValue":10}],
		"metadata":{"tags":["conformance"]},"settings":{"timeout":10000}}`
	r := e.post("/v1/openwop/workflows", published)
	wantStatus(t, r, http.StatusCreated)
	if len(put) != 1 || put[0].WorkflowID != "pub-delay" || len(put[0].Nodes) != 2 || put[0].Nodes[0].ID != "wait" ||
		put[0].Nodes[0].Inputs["delayMs"].VariableName != "delayMs" || string(put[0].Variables[0].DefaultValue) != "10" {
		t.Fatalf("stored %+v", put)
	}
	wantOpenwopError(t, e.post("/v1/openwop/workflows", strings.Replace(published, `"version":"1.0.0"`, `"version":"1.0.0","nope":1`, 1)),
		http.StatusBadRequest, "validation_error", "nope")
	wantOpenwopError(t, e.post("/v1/openwop/workflows", strings.Replace(published, `"id":"e1",`, `"id":"e1","condition":{"type":"truthy","left":"x"},`, 1)),
		http.StatusUnprocessableEntity, CodeUnsupported, "edges[0].condition")
	wantOpenwopError(t, e.post("/v1/openwop/workflows", strings.Replace(published, `"type":"manual"`, `"type":"webhook"`, 1)),
		http.StatusUnprocessableEntity, CodeUnsupported, "triggers[0].type")
	wantOpenwopError(t, e.post("/v1/openwop/workflows", strings.Replace(published, `"name":"Delay",`, ``, 1)),
		http.StatusBadRequest, "validation_error", "name")
	if len(put) != 1 {
		t.Fatalf("a refused definition was stored: %+v", put)
	}
	wantStatus(t, e.post("/v1/openwop/workflows", `{"workflowId":"old-shape","nodes":[{"id":"n","typeId":"core.noop"}]}`), http.StatusCreated)
	wantOpenwopError(t, e.post("/v1/openwop/workflows", `{"workflowId":"old-shape","triggers":[],"nodes":[{"id":"n","typeId":"core.noop"}]}`),
		http.StatusBadRequest, "validation_error", "triggers")
	if len(put) != 2 || put[1].WorkflowID != "old-shape" {
		t.Fatalf("old shape: %+v", put)
	}
}
