package packrun

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
)

// adaptersJSON configures "echo" (a script: no model) and "llm" (Ollama,
// default model m1, also m2; never called by these tests).
const adaptersJSON = `{"adapters":[{"adapter_id":"echo","kind":"script","command":"/bin/cat","timeout_ms":5000},
	{"adapter_id":"llm","kind":"ollama-generate","endpoint":"http://127.0.0.1:1","model":"m1","models":["m2"],"timeout_ms":5000}]}`

// withAdapters is a fixture whose home configures adaptersJSON, with the
// skilled hello-wat pack installed (skill "greeting", task type hello.wat).
func withAdapters(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	f.install(t, skilled("1.0.0"))
	if err := os.WriteFile(filepath.Join(f.home, "adapters.json"), []byte(adaptersJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	f.Host = openHost(t, f.home)
	return f
}

func intent(mod func(*host.TaskIntent)) host.TaskIntent {
	in := host.TaskIntent{TaskType: "hello.wat", Source: "test", Payload: json.RawMessage(`{"name":"x"}`)}
	if mod != nil {
		mod(&in)
	}
	return in
}

// Unknown skills, adapters, profiles and models are refused at enqueue
// with an error naming the field, and nothing is stored.
func TestEnqueueChecksWhatTheIntentNames(t *testing.T) {
	f := withAdapters(t)
	for _, c := range []struct {
		field string
		mod   func(*host.TaskIntent)
	}{
		{"skill_ids", func(in *host.TaskIntent) { in.SkillIDs = []string{"not.a.skill"} }},
		{"requested_adapter_id", func(in *host.TaskIntent) { in.RequestedAdapterID = "nonexistent" }},
		{"requested_profile_id", func(in *host.TaskIntent) { in.RequestedProfileID = "nope" }},
		{"requested_model", func(in *host.TaskIntent) { in.RequestedModel = "gpt-x"; in.RequestedAdapterID = "llm" }},
		{"requested_model", func(in *host.TaskIntent) { in.RequestedModel = "m1" }}, // no adapter to offer it
		{"requested_model", func(in *host.TaskIntent) { in.RequestedModel = "m1"; in.RequestedAdapterID = "echo" }},
	} {
		_, err := f.Enqueue(ctx, intent(c.mod), host.EnqueueOptions{})
		var he *host.Error
		if !errors.As(err, &he) || he.Field != c.field || !errors.Is(err, host.ErrValidation) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v", c.field, err)
		}
	}
	if tasks, _ := f.Store().ListTasks(ctx, host.TaskFilter{}); len(tasks) != 0 {
		t.Fatalf("refused intents stored %d tasks", len(tasks))
	}
	for _, mod := range []func(*host.TaskIntent){
		func(in *host.TaskIntent) { in.SkillIDs = []string{"greeting"} },
		func(in *host.TaskIntent) { in.RequestedAdapterID, in.RequestedModel = "llm", "m2" },
	} {
		if _, err := f.Enqueue(ctx, intent(mod), host.EnqueueOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// allowed_skill_ids narrows the installed skills.
	if err := f.SetTaskType(ctx, host.TaskTypeSpec{TaskType: "hello.wat", AllowedSkillIDs: []string{"greeting"}}, nil); err != nil {
		t.Fatal(err)
	}
	other := probe()
	other.nodes = `[{"typeId":"probe.echo","kind":"skill","taskTypes":["other.t"]}]`
	f.install(t, other)
	_, err := f.Enqueue(ctx, intent(func(in *host.TaskIntent) { in.SkillIDs = []string{"probe.echo"} }), host.EnqueueOptions{})
	if he, ok := errors.AsType[*host.Error](err); !ok || he.Field != "skill_ids" || !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("skill not allowed: %v", err)
	}
}

// A task type's spec is set, shown, listed and unset; what it names must
// exist; a route chooses the pack.
func TestTaskTypeSpecOperated(t *testing.T) {
	f := withAdapters(t)
	for _, c := range []struct {
		field string
		spec  host.TaskTypeSpec
	}{
		{"default_profile_id", host.TaskTypeSpec{TaskType: "hello.wat", DefaultProfileID: "nope"}},
		{"default_adapter_id", host.TaskTypeSpec{TaskType: "hello.wat", DefaultAdapterID: "nope"}},
		{"default_model", host.TaskTypeSpec{TaskType: "hello.wat", DefaultAdapterID: "llm", DefaultModel: "gpt-x"}},
		{"allowed_skill_ids", host.TaskTypeSpec{TaskType: "hello.wat", AllowedSkillIDs: []string{"nope"}}},
		{"success_policy", host.TaskTypeSpec{TaskType: "hello.wat", ArtifactRoles: []string{"a", "a"}}},
	} {
		err := f.SetTaskType(ctx, c.spec, nil)
		if he, ok := errors.AsType[*host.Error](err); !ok || (he.Field != c.field && c.field != "success_policy") || !errors.Is(err, host.ErrValidation) {
			t.Errorf("%s: %v", c.field, err)
		}
	}
	if err := f.SetTaskType(ctx, host.TaskTypeSpec{TaskType: "hello.wat", PayloadSchemaID: "my.schema"}, nil); !errors.Is(err, host.ErrValidation) || !strings.Contains(err.Error(), "payload_schema_id") {
		t.Errorf("unknown payload schema: %v", err)
	}
	if specs, _ := f.Store().ListTaskTypeSpecs(ctx); len(specs) != 0 {
		t.Fatalf("refused specs stored: %+v", specs)
	}
	// A published payload schema is applied at enqueue.
	if err := f.SetTaskType(ctx, host.TaskTypeSpec{TaskType: "hello.wat", PayloadSchemaID: "agent-runtime/wallet.identity/v1"}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := f.Enqueue(ctx, intent(nil), host.EnqueueOptions{})
	if he, ok := errors.AsType[*host.Error](err); !ok || he.Field != "payload.agent_id" {
		t.Fatalf("payload against its schema: %v", err)
	}
	spec := host.TaskTypeSpec{TaskType: "hello.wat", DefaultAdapterID: "llm", DefaultModel: "m2", ArtifactRoles: []string{"execute-report"},
		SuccessPolicy: &host.SuccessPolicy{RequireAdapterAudit: true}}
	route := &host.TaskTypeRoute{Pack: "local.hello.wat", Node: "example.hello"}
	if err := f.SetTaskType(ctx, spec, route); err != nil {
		t.Fatal(err)
	}
	tt, err := f.TaskType(ctx, "hello.wat")
	if err != nil || tt.Spec == nil || tt.Spec.DefaultModel != "m2" || tt.Spec.PayloadSchemaID != NodeInputSchema || tt.Resolved == nil || tt.Resolved.Origin != host.OriginOperator {
		t.Fatalf("task type %+v %v", tt, err)
	}
	if list, _ := f.TaskTypes(ctx); len(list) != 1 {
		t.Fatalf("list %+v", list)
	}
	if err := f.SetTaskType(ctx, spec, &host.TaskTypeRoute{Pack: "local.hello.wat", Node: "nope"}); !errors.Is(err, host.ErrValidation) {
		t.Fatalf("route to a missing node: %v", err)
	}
	if err := f.UnsetTaskType(ctx, "hello.wat"); err != nil {
		t.Fatal(err)
	}
	if tt, _ := f.TaskType(ctx, "hello.wat"); tt.Spec != nil || tt.Resolved.Origin != host.OriginManifest {
		t.Fatalf("after unset %+v", tt)
	}
	if err := f.UnsetTaskType(ctx, "hello.wat"); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("second unset: %v", err)
	}
}

// The task type registry and enqueue checks through the HTTP API.
func TestTaskTypesAPI(t *testing.T) {
	f := withAdapters(t)
	hd, err := f.Handler(ctx, HandlerOptions{Addr: "127.0.0.1:0", InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	hd = apiSpec(t).Handler(t, hd) // every API response checked against the OpenAPI document
	do := func(method, path, body string) (int, string) {
		req := httptest.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		w := httptest.NewRecorder()
		hd.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	for _, c := range []struct {
		body, field string
		code        int
	}{
		{`{"default_model":"gpt-x","default_adapter_id":"llm"}`, "default_model", 400},
		{`{"allowed_skill_ids":["nope"]}`, "allowed_skill_ids", 400},
		{`{"frobnicate":true}`, "frobnicate", 400},
		{`{"task_type":"other"}`, "task_type", 400},
		{`{"pack":"local.hello.wat"}`, "node", 400},
	} {
		code, body := do("PUT", "/v1/task-types/hello.wat", c.body)
		if code != c.code || !strings.Contains(body, `"field":"`+c.field+`"`) {
			t.Errorf("PUT %s: %d %s, want %d naming %s", c.body, code, body, c.code, c.field)
		}
	}
	code, body := do("PUT", "/v1/task-types/hello.wat", `{"default_adapter_id":"llm","default_model":"m2","allowed_skill_ids":["greeting"],"pack":"local.hello.wat","node":"example.hello"}`)
	if code != 200 || !strings.Contains(body, `"default_model":"m2"`) || !strings.Contains(body, `"origin":"operator"`) {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if code, body := do("GET", "/v1/task-types", ""); code != 200 || !strings.Contains(body, `"task_types":[{"task_type":"hello.wat"`) {
		t.Fatalf("GET list: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/tasks", `{"task_type":"hello.wat","payload":{},"skill_ids":["not.a.skill"]}`); code != 400 || !strings.Contains(body, `"field":"skill_ids"`) {
		t.Fatalf("enqueue unknown skill: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/tasks", `{"task_type":"hello.wat","payload":{},"requested_model":"m1"}`); code != 201 {
		t.Fatalf("enqueue with the type's adapter: %d %s", code, body)
	}
	if code, _ := do("DELETE", "/v1/task-types/hello.wat", ""); code != 204 {
		t.Fatalf("DELETE: %d", code)
	}
	if code, _ := do("DELETE", "/v1/task-types/hello.wat", ""); code != 404 {
		t.Fatalf("second DELETE: %d", code)
	}
	if code, _ := do("GET", "/v1/task-types/nobody.serves", ""); code != 404 {
		t.Fatalf("GET unknown: %d", code)
	}
}
