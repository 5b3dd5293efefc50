package packrun

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// goalLoopPack is examples/goal-loop as its pack.json describes it.
func goalLoopPack(t *testing.T) packSpec {
	t.Helper()
	var m struct {
		Name    string          `json:"name"`
		Version string          `json:"version"`
		Nodes   json.RawMessage `json:"nodes"`
	}
	if err := json.Unmarshal(mustRead(t, "examples/goal-loop/pack.json"), &m); err != nil {
		t.Fatal(err)
	}
	return packSpec{name: m.Name, version: m.Version, module: "examples/goal-loop/goal.wasm", nodes: string(m.Nodes)}
}

// The shipped examples/goal-loop/workflow.json is the definition every
// home registers, and AddWorkflow takes it.
func TestGoalLoopBuiltIn(t *testing.T) {
	f := newFixture(t)
	builtin, err := f.Store().Workflow(ctx, host.GoalLoop)
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := host.DecodeWorkflowDefinition(mustRead(t, "examples/goal-loop/workflow.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(builtin, shipped) {
		t.Fatalf("built in %+v\nshipped %+v", builtin, shipped)
	}
	if _, replaced, err := f.AddWorkflow(ctx, "examples/goal-loop/workflow.json"); err != nil || !replaced {
		t.Fatalf("add: %v %v", replaced, err)
	}
	bad := shipped
	bad.States = append([]host.WorkflowState{}, shipped.States...)
	bad.States[0].DefaultProfileID = "nobody"
	if _, err := f.PutWorkflow(ctx, bad); err == nil || err.(*host.Error).Field != "states[0].default_profile_id" {
		t.Fatalf("unknown profile: %v", err)
	}
}

// A goal-loop record runs plan → execute → verify → complete through the
// example pack's verified workflow signals, under Host.Run.
func TestGoalLoopEndToEnd(t *testing.T) {
	f := newFixture(t)
	f.install(t, goalLoopPack(t))
	rec, created, err := f.Store().StartWorkflow(ctx, host.WorkflowStart{WorkflowType: host.GoalLoop, InstanceKey: "docs",
		Context: json.RawMessage(`{"goal":"write the docs"}`)})
	if err != nil || !created {
		t.Fatalf("start: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := f.Store().WorkflowRecord(ctx, "", rec.WorkflowID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != host.WorkflowActive {
			if got.Status != host.WorkflowCompleted || got.CurrentState != "complete" || got.CompletedAt == nil {
				t.Fatalf("record %+v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record did not complete: %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	tasks, err := f.Store().ListTasks(ctx, host.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for i := len(tasks) - 1; i >= 0; i-- {
		tk := tasks[i]
		if tk.Status != host.TaskCompleted || tk.WorkflowRef == nil || tk.WorkflowRef.WorkflowID != rec.WorkflowID || tk.Outcome.WorkflowSignal == "" {
			t.Fatalf("task %+v", tk)
		}
		types = append(types, tk.TaskType)
	}
	if !reflect.DeepEqual(types, []string{"goal.plan", "goal.execute", "goal.verify"}) {
		t.Fatalf("tasks %v", types)
	}
	evs, err := f.Store().Events(ctx, host.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range evs {
		n[e.Type]++
	}
	if n[host.EventWorkflowTransitioned] != 3 || n[host.EventWorkflowTaskCreated] != 3 || n[host.EventWorkflowCompleted] != 1 {
		t.Fatalf("events %v", n)
	}
}

// Over the HTTP API with tokens and the dispatcher running: registering a
// definition needs admin; records are per tenant (the same instance_key in
// two tenants is two records, another tenant's answers 404); a goal-loop
// record started over the API runs to completion.
func TestGoalLoopOverAPI(t *testing.T) {
	e := newAuthEnv(t, HandlerOptions{})
	e.install(t, goalLoopPack(t))
	acme, _ := e.token(t, "acme", "tasks:write,tasks:read")
	globex, _ := e.token(t, "globex", "tasks:write,tasks:read")
	admin, _ := e.token(t, "acme", "admin")
	def := `{"workflow_type":"one-step","initial_state":"a","states":[{"state_id":"a","completion_signals":["done"]}]}`
	if r := e.call(t, acme, "POST", "/v1/workflows", def); r.code != http.StatusForbidden {
		t.Fatalf("tasks:write registered a workflow: %d %s", r.code, r.body)
	}
	if r := e.call(t, admin, "POST", "/v1/workflows", def); r.code != http.StatusCreated {
		t.Fatalf("admin: %d %s", r.code, r.body)
	}
	start := func(token string) host.WorkflowRecord {
		t.Helper()
		r := e.call(t, token, "POST", "/v1/workflows/goal-loop/records", `{"instance_key":"docs","context":{"goal":"g"}}`)
		var rec host.WorkflowRecord
		if err := json.Unmarshal([]byte(r.body), &rec); err != nil || r.code != http.StatusCreated {
			t.Fatalf("start: %d %s", r.code, r.body)
		}
		return rec
	}
	a, g := start(acme), start(globex)
	if a.WorkflowID == g.WorkflowID || a.Tenant != "acme" || g.Tenant != "globex" {
		t.Fatalf("records %+v %+v", a, g)
	}
	if r := e.call(t, globex, "GET", "/v1/workflow-records/"+a.WorkflowID, ""); r.code != http.StatusNotFound {
		t.Fatalf("globex read acme's record: %d", r.code)
	}
	if r := e.call(t, globex, "POST", "/v1/workflow-records/"+a.WorkflowID+":cancel", ""); r.code != http.StatusNotFound {
		t.Fatalf("globex canceled acme's record: %d", r.code)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, c := range []struct {
		token string
		rec   host.WorkflowRecord
	}{{acme, a}, {globex, g}} {
		for {
			r := e.call(t, c.token, "GET", "/v1/workflow-records/"+c.rec.WorkflowID, "")
			var got host.WorkflowRecord
			if err := json.Unmarshal([]byte(r.body), &got); err != nil || r.code != http.StatusOK {
				t.Fatalf("get: %d %s", r.code, r.body)
			}
			if got.Status == host.WorkflowCompleted {
				break
			}
			if got.Status != host.WorkflowActive || time.Now().After(deadline) {
				t.Fatalf("record %+v", got)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	r := e.call(t, globex, "GET", "/v1/workflow-records?type=goal-loop", "")
	var list struct {
		Records []host.WorkflowRecord `json:"workflow_records"`
	}
	if err := json.Unmarshal([]byte(r.body), &list); err != nil || len(list.Records) != 1 || list.Records[0].WorkflowID != g.WorkflowID {
		t.Fatalf("globex's list: %s", r.body)
	}
}
