package packrun

import (
	"context"
	"encoding/json"
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
