package sqlite

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/packrun/packrun/host"
)

// startGoalLoop starts a goal-loop record with instance key key.
func startGoalLoop(t *testing.T, f *fixture, key string) *host.WorkflowRecord {
	t.Helper()
	r, created, err := f.StartWorkflow(ctx, host.WorkflowStart{WorkflowType: host.GoalLoop, InstanceKey: key, Context: json.RawMessage(`{"goal":"g"}`)})
	if err != nil || !created {
		t.Fatalf("start: %v created=%v", err, created)
	}
	return r
}

// signalNext claims the next task, checks its type and workflow_ref, and
// completes it with signal.
func signalNext(t *testing.T, f *fixture, r *host.WorkflowRecord, taskType, signal string) *host.TaskRecord {
	t.Helper()
	task := mustClaim(t, f.Store, f.clock.Now())
	if task == nil || task.TaskType != taskType || task.WorkflowRef == nil || task.WorkflowRef.WorkflowID != r.WorkflowID ||
		task.Source != host.WorkflowSource(r.WorkflowID) || string(task.Payload) != `{"goal":"g"}` {
		t.Fatalf("claimed %+v, want a %s task of %s", task, taskType, r.WorkflowID)
	}
	out := okOutcome()
	out.WorkflowSignal = signal
	return finishWith(t, f, task, host.FinishInput{Outcome: out})
}

func mustRecord(t *testing.T, f *fixture, id string) *host.WorkflowRecord {
	t.Helper()
	r, err := f.WorkflowRecord(ctx, "", id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// countEvents counts the events of each type in the chain.
func countEvents(t *testing.T, f *fixture) map[string]int {
	t.Helper()
	evs, err := f.Events(ctx, host.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range evs {
		n[e.Type]++
	}
	return n
}

// The built-in goal-loop runs plan → execute → verify → (rejected)
// execute → verify → complete through verified signals, each task
// emitted by the state it enters.
func TestGoalLoopThroughSignals(t *testing.T) {
	f := newFixture(t, Options{})
	r := startGoalLoop(t, f, "g1")
	if r.CurrentState != "plan" || r.Status != host.WorkflowActive {
		t.Fatalf("started %+v", r)
	}
	steps := []struct{ taskType, signal, state string }{
		{"goal.plan", "planned", "execute"},
		{"goal.execute", "executed", "verify"},
		{"goal.verify", "rejected", "execute"},
		{"goal.execute", "executed", "verify"},
		{"goal.verify", "verified", "complete"},
	}
	for _, s := range steps {
		signalNext(t, f, r, s.taskType, s.signal)
		if got := mustRecord(t, f, r.WorkflowID); got.CurrentState != s.state {
			t.Fatalf("after %s: state %s, want %s", s.signal, got.CurrentState, s.state)
		}
	}
	got := mustRecord(t, f, r.WorkflowID)
	if got.Status != host.WorkflowCompleted || got.CompletedAt == nil {
		t.Fatalf("not completed: %+v", got)
	}
	if task, _ := f.Claim(ctx, "runner-1", f.clock.Now()); task != nil {
		t.Fatalf("a completed workflow left a task: %+v", task)
	}
	n := countEvents(t, f)
	if n[host.EventWorkflowCreated] != 1 || n[host.EventWorkflowTransitioned] != 5 || n[host.EventWorkflowTaskCreated] != 5 ||
		n[host.EventWorkflowCompleted] != 1 {
		t.Fatalf("events %v", n)
	}
}

// A signal no transition or completion of the state matches blocks the
// record; a signal for a state the record left is stale and changes
// nothing; a failed task's signal is not applied.
func TestWorkflowUnmatchedAndStaleSignals(t *testing.T) {
	f := newFixture(t, Options{})
	r := startGoalLoop(t, f, "g2")
	task := mustClaim(t, f.Store, f.clock.Now())
	out := okOutcome()
	out.MachineStatus, out.WorkflowSignal = host.MachineFailed, "planned"
	finishWith(t, f, task, host.FinishInput{Outcome: out})
	if got := mustRecord(t, f, r.WorkflowID); got.CurrentState != "plan" {
		t.Fatalf("a failed task moved the record: %+v", got)
	}
	// Two operator tasks naming the plan state: the first moves the
	// record on, the second's signal is stale.
	var manual []*host.TaskRecord
	for range 2 {
		manual = append(manual, mustEnqueue(t, f.Store, host.TaskIntent{TaskType: "goal.plan", Source: "op", Payload: json.RawMessage(`{"goal":"g"}`),
			WorkflowRef: &host.WorkflowRef{WorkflowID: r.WorkflowID, StateID: "plan", InstanceKey: "g2"}}, host.EnqueueOptions{}))
	}
	for i, want := range []string{"transitioned", "stale"} {
		claimed := mustClaim(t, f.Store, f.clock.Now())
		if claimed.TaskID != manual[i].TaskID {
			t.Fatalf("claimed %s, want %s", claimed.TaskID, manual[i].TaskID)
		}
		out = okOutcome()
		out.WorkflowSignal = "planned"
		finishWith(t, f, claimed, host.FinishInput{Outcome: out})
		if got := mustRecord(t, f, r.WorkflowID); got.CurrentState != "execute" || got.Status != host.WorkflowActive {
			t.Fatalf("task %d: record %+v", i, got)
		}
		if evs, _ := f.Events(ctx, host.EventFilter{TaskID: claimed.TaskID}); !hasData(evs, host.EventTaskAttemptFinished, "workflow", want) {
			t.Fatalf("task %d: %s not recorded: %+v", i, want, evs)
		}
	}
	signalNext(t, f, r, "goal.execute", "what?")
	got := mustRecord(t, f, r.WorkflowID)
	if got.Status != host.WorkflowBlocked || got.CurrentState != "execute" {
		t.Fatalf("unmatched: %+v", got)
	}
	if n := countEvents(t, f); n[host.EventWorkflowBlocked] != 1 {
		t.Fatalf("events %v", n)
	}
	if task, _ := f.Claim(ctx, "runner-1", f.clock.Now()); task != nil {
		t.Fatalf("a blocked workflow left a task: %+v", task)
	}
	c, err := f.CancelWorkflowRecord(ctx, host.DefaultTenant, r.WorkflowID)
	if err != nil || c.Status != host.WorkflowCanceled {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	_, err = f.CancelWorkflowRecord(ctx, "", r.WorkflowID)
	wantErr(t, err, host.ErrConflict)
	_, err = f.CancelWorkflowRecord(ctx, "other", r.WorkflowID)
	wantErr(t, err, host.ErrNotFound)
}

func hasData(evs []*host.Event, typ, key, want string) bool {
	for _, e := range evs {
		var d map[string]any
		if e.Type == typ && json.Unmarshal(e.Data, &d) == nil && d[key] == want {
			return true
		}
	}
	return false
}

// A sensor's proposed_workflow creates the record of (template,
// instance_key) once, with its first task; the same again (another
// dedupe_key) is deduped to that record.
func TestSensorProposedWorkflowDedupe(t *testing.T) {
	f := newFixture(t, Options{})
	ev := sensorEvent(t, `{"sensor_id":"s","event_id":"e1","observed_at":"2026-03-01T10:00:00Z","source_ref":"r","dedupe_key":"k1",
		"payload":{},"proposed_workflow":{"template":"goal-loop","instance_key":"ticket-7","context":{"goal":"g"}}}`)
	a, err := f.RecordSensorEvent(ctx, ev, host.SensorEventOptions{})
	if err != nil || a.Status != host.SensorWorkflowCreated {
		t.Fatalf("first: %+v %v", a, err)
	}
	ev.DedupeKey, ev.EventID = "k2", "e2"
	b, err := f.RecordSensorEvent(ctx, ev, host.SensorEventOptions{})
	if err != nil || b.Status != host.SensorWorkflowDeduped || b.WorkflowID != a.WorkflowID {
		t.Fatalf("second: %+v %v", b, err)
	}
	recs, _ := f.ListWorkflowRecords(ctx, host.WorkflowRecordFilter{WorkflowType: host.GoalLoop})
	if len(recs) != 1 || recs[0].InstanceKey != "ticket-7" {
		t.Fatalf("records %+v", recs)
	}
	n := countEvents(t, f)
	if n[host.EventSensorWorkflowCreated] != 1 || n[host.EventSensorWorkflowDeduped] != 1 || n[host.EventWorkflowTaskCreated] != 1 {
		t.Fatalf("events %v", n)
	}
	ev.DedupeKey, ev.ProposedWorkflow.InstanceKey, ev.ProposedWorkflow.State = "k3", "ticket-8", "nowhere"
	_, err = f.RecordSensorEvent(ctx, ev, host.SensorEventOptions{})
	if he, ok := err.(*host.Error); !ok || he.Field != "proposed_workflow.state" {
		t.Fatalf("bad state: %v", err)
	}
	// Reported with a proposed_task nothing serves: the event is refused
	// and its workflow is not created either.
	ev.DedupeKey, ev.ProposedWorkflow.InstanceKey, ev.ProposedWorkflow.State = "k4", "ticket-9", ""
	ev.ProposedTask = &host.TaskIntent{TaskType: "no.route", Payload: json.RawMessage(`{}`)}
	got, err := f.ApplySensorEvents(ctx, []host.SensorEvent{ev}, host.SensorEventOptions{}, "att-1")
	if err != nil || len(got) != 1 || got[0].Status != host.SensorRefused {
		t.Fatalf("refused: %+v %v", got, err)
	}
	if recs, _ := f.ListWorkflowRecords(ctx, host.WorkflowRecordFilter{}); len(recs) != 1 {
		t.Fatalf("a refused event created a record: %+v", recs)
	}
	// A signal the plan state does not know blocks the record; the
	// sensor proposing it again wakes it: active, its plan task again.
	signalNext(t, f, recs[0], "goal.plan", "no-such-signal")
	if got := mustRecord(t, f, recs[0].WorkflowID); got.Status != host.WorkflowBlocked {
		t.Fatalf("not blocked: %+v", got)
	}
	ev.DedupeKey, ev.ProposedWorkflow.InstanceKey, ev.ProposedTask = "k5", "ticket-7", nil
	if r, err := f.RecordSensorEvent(ctx, ev, host.SensorEventOptions{}); err != nil || r.Status != host.SensorWorkflowDeduped {
		t.Fatalf("wake: %+v %v", r, err)
	}
	if got := mustRecord(t, f, recs[0].WorkflowID); got.Status != host.WorkflowActive || got.CurrentState != "plan" {
		t.Fatalf("not woken: %+v", got)
	}
	signalNext(t, f, recs[0], "goal.plan", "planned")
	if got := mustRecord(t, f, recs[0].WorkflowID); got.CurrentState != "execute" {
		t.Fatalf("after wake: %+v", got)
	}
}

// Bad definitions are refused naming the JSON path, and nothing is
// stored.
func TestWorkflowDefinitionRefused(t *testing.T) {
	f := newFixture(t, Options{})
	for _, c := range []struct{ doc, field string }{
		{`{"workflow_type":"w","initial_state":"a","states":[{"state_id":"a","bogus":1}]}`, "states[].bogus"}, // the schema library does not say which element
		{`{"workflow_type":"w","initial_state":"b","states":[{"state_id":"a"}]}`, "initial_state"},
		{`{"workflow_type":"w","initial_state":"a","states":[{"state_id":"a"},{"state_id":"a"}]}`, "states[1].state_id"},
		{`{"workflow_type":"w","initial_state":"a","states":[{"state_id":"a","emits_task_intent":true}]}`, "states[0].task_type"},
		{`{"workflow_type":"w","initial_state":"a","states":[{"state_id":"a","transitions":[{"signal":"s","next_state":"z"}]}]}`, "states[0].transitions[0].next_state"},
		{`{"workflow_type":"w","initial_state":"a","states":[{"state_id":"a","transitions":[{"signal":"s","next_state":"a"},{"signal":"s","next_state":"a"}]}]}`, "states[0].transitions[1].signal"},
		{`{"workflow_type":"w","initial_state":"a","states":[{"state_id":"a","task_type":"t","emits_task_intent":true,"completion_signals":["s"],"transitions":[{"signal":"s","next_state":"a"}]}]}`, "states[0].transitions[0].next_state"},
		{`{"workflow_type":"w","initial_state":"a","states":[]}`, "states"},
		{`{"workflow_type":"w","initial_state":"a","states":[{"state_id":"a","task_type":"has space"}]}`, "states[0].task_type"},
		{`{"workflow_type":"w","initial_state":"a","states":[{"state_id":"a","task_type":"t","default_skill_ids":["ok","bad\u0001"]}]}`, "states[0].default_skill_ids[1]"},
	} {
		_, err := host.DecodeWorkflowDefinition([]byte(c.doc))
		var he *host.Error
		if !errors.As(err, &he) || he.Field != c.field {
			t.Errorf("%s: %v, want field %s", c.doc, err, c.field)
		}
	}
	_, err := f.PutWorkflow(ctx, &host.WorkflowDefinition{WorkflowType: "w", InitialState: "x", States: []host.WorkflowState{{StateID: "a"}}})
	if err == nil {
		t.Fatal("a bad definition was stored")
	}
	if defs, _ := f.ListWorkflows(ctx); len(defs) != 1 || defs[0].WorkflowType != host.GoalLoop {
		t.Fatalf("definitions %+v", defs)
	}
	_, err = f.Workflow(ctx, "w")
	wantErr(t, err, host.ErrNotFound)
}

// A workflow_ref must name an existing record; starting twice returns the
// same record; a definition can be replaced.
func TestWorkflowRefAndStart(t *testing.T) {
	f := newFixture(t, Options{})
	in := host.TaskIntent{TaskType: "x", Source: "op", Payload: json.RawMessage(`{}`),
		WorkflowRef: &host.WorkflowRef{WorkflowID: "wf-nope", StateID: "plan", InstanceKey: "k"}}
	_, err := f.Enqueue(ctx, in, host.EnqueueOptions{})
	if he, ok := err.(*host.Error); !ok || he.Field != "workflow_ref.workflow_id" {
		t.Fatalf("missing record: %v", err)
	}
	def := &host.WorkflowDefinition{WorkflowType: "quiet", InitialState: "a", States: []host.WorkflowState{
		{StateID: "a", Transitions: []host.WorkflowTransition{{Signal: "go", NextState: "b"}}}, {StateID: "b", CompletionSignals: []string{"done"}}}}
	if replaced, err := f.PutWorkflow(ctx, def); err != nil || replaced {
		t.Fatalf("put: %v %v", replaced, err)
	}
	if replaced, err := f.PutWorkflow(ctx, def); err != nil || !replaced {
		t.Fatalf("replace: %v %v", replaced, err)
	}
	r, created, err := f.StartWorkflow(ctx, host.WorkflowStart{WorkflowType: "quiet", InstanceKey: "k"})
	if err != nil || !created || r.Context != nil {
		t.Fatalf("start: %+v %v", r, err)
	}
	again, created, err := f.StartWorkflow(ctx, host.WorkflowStart{WorkflowType: "quiet", InstanceKey: "k"})
	if err != nil || created || again.WorkflowID != r.WorkflowID {
		t.Fatalf("again: %+v %v %v", again, created, err)
	}
	in.WorkflowRef = &host.WorkflowRef{WorkflowID: r.WorkflowID, StateID: "a", InstanceKey: "other"}
	_, err = f.Enqueue(ctx, in, host.EnqueueOptions{})
	if he, ok := err.(*host.Error); !ok || he.Field != "workflow_ref.instance_key" {
		t.Fatalf("wrong key: %v", err)
	}
	in.WorkflowRef.InstanceKey = "k"
	_, err = f.Enqueue(ctx, in, host.EnqueueOptions{Tenant: "t2"})
	if he, ok := err.(*host.Error); !ok || he.Field != "workflow_ref.workflow_id" {
		t.Fatalf("another tenant's record: %v", err)
	}
	task := mustEnqueue(t, f.Store, in, host.EnqueueOptions{})
	claimed := mustClaim(t, f.Store, f.clock.Now())
	if claimed.TaskID != task.TaskID {
		t.Fatal("claimed another task")
	}
	out := okOutcome()
	out.WorkflowSignal = "go"
	finishWith(t, f, claimed, host.FinishInput{Outcome: out})
	if got := mustRecord(t, f, r.WorkflowID); got.CurrentState != "b" || got.Status != host.WorkflowActive {
		t.Fatalf("after go: %+v", got)
	}
	if _, err := f.WorkflowRecord(ctx, "t2", r.WorkflowID); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("another tenant read it: %v", err)
	}
}
