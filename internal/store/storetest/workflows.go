package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// Workflows checks host.Workflows: the built-in goal loop every store
// has, definitions (put, replace, refuse, list), starting records (once
// per tenant, type and instance key; the start state's task),
// progression through the completing task's signal in the same write
// (transitions, completion, blocking on an unknown signal, stale signals
// ignored, a failed task's signal not applied), sensors proposing
// workflows (created once, deduped, waking a blocked record), workflow
// refs checked at enqueue, canceling, tenants, and the events.
func Workflows(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"GoalLoopThroughSignals", workflowsGoalLoopThroughSignals},
		{"UnmatchedAndStaleSignals", workflowsUnmatchedAndStaleSignals},
		{"SensorProposedWorkflow", workflowsSensorProposedWorkflow},
		{"Definitions", workflowsDefinitions},
		{"StartRefsAndTenants", workflowsStartRefsAndTenants},
	})
}

func (f *fixture) startGoalLoop(key, tenant string) *host.WorkflowRecord {
	f.t.Helper()
	r, created, err := f.b.StartWorkflow(ctx, host.WorkflowStart{WorkflowType: host.GoalLoop, InstanceKey: key, Context: json.RawMessage(`{"goal":"g"}`), Tenant: tenant})
	if err != nil || !created {
		f.t.Fatalf("start: %v created=%v", err, created)
	}
	return r
}

// signalNext claims the next task, checks it is r's task of taskType, and
// completes it with signal.
func (f *fixture) signalNext(r *host.WorkflowRecord, taskType, signal string) *host.TaskRecord {
	f.t.Helper()
	task := f.claim()
	if task.TaskType != taskType || task.WorkflowRef == nil || task.WorkflowRef.WorkflowID != r.WorkflowID || task.Tenant != r.Tenant ||
		task.Source != host.WorkflowSource(r.WorkflowID) || string(task.Payload) != `{"goal":"g"}` {
		f.t.Fatalf("claimed %+v, want a %s task of %s", task, taskType, r.WorkflowID)
	}
	out := okOutcome()
	out.WorkflowSignal = signal
	return f.finish(task, host.FinishInput{Outcome: out})
}

func (f *fixture) workflowRecord(id string) *host.WorkflowRecord {
	f.t.Helper()
	r, err := f.b.WorkflowRecord(ctx, "", id)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) wantNoTask() {
	f.t.Helper()
	if task, err := f.b.Claim(ctx, "runner-1", f.clock.Now()); !errors.Is(err, host.ErrEmpty) {
		f.t.Fatalf("claimed %+v (%v), want no task", task, err)
	}
}

func workflowsGoalLoopThroughSignals(f *fixture) {
	t := f.t
	r := f.startGoalLoop("g1", "acme")
	if r.WorkflowID == "" || r.CurrentState != "plan" || r.Status != host.WorkflowActive || r.Tenant != "acme" || r.InstanceKey != "g1" ||
		r.WorkflowType != host.GoalLoop || !r.CreatedAt.Equal(f.clock.Now()) || r.CompletedAt != nil {
		t.Fatalf("started %+v", r)
	}
	for _, s := range []struct{ taskType, signal, state string }{
		{"goal.plan", "planned", "execute"},
		{"goal.execute", "executed", "verify"},
		{"goal.verify", "rejected", "execute"},
		{"goal.execute", "executed", "verify"},
		{"goal.verify", "verified", "complete"},
	} {
		f.clock.Add(time.Second)
		f.signalNext(r, s.taskType, s.signal)
		if got := f.workflowRecord(r.WorkflowID); got.CurrentState != s.state {
			t.Fatalf("after %s: state %s, want %s", s.signal, got.CurrentState, s.state)
		}
	}
	got := f.workflowRecord(r.WorkflowID)
	if got.Status != host.WorkflowCompleted || got.CompletedAt == nil || !got.CompletedAt.Equal(f.clock.Now()) {
		t.Fatalf("not completed: %+v", got)
	}
	f.wantNoTask()
	n := f.countEvents()
	if n[host.EventWorkflowCreated] != 1 || n[host.EventWorkflowTransitioned] != 5 || n[host.EventWorkflowTaskCreated] != 5 || n[host.EventWorkflowCompleted] != 1 {
		t.Fatalf("events %v", n)
	}
	// A completed record cannot be canceled.
	_, err := f.b.CancelWorkflowRecord(ctx, "acme", r.WorkflowID)
	wantErr(t, err, host.ErrConflict)
}

func hasData(t testing.TB, evs []*host.Event, typ, key, want string) bool {
	for _, e := range evs {
		if e.Type == typ && eventData(t, e)[key] == want {
			return true
		}
	}
	return false
}

func workflowsUnmatchedAndStaleSignals(f *fixture) {
	t := f.t
	r := f.startGoalLoop("g2", "")
	task := f.claim()
	out := okOutcome()
	out.MachineStatus, out.WorkflowSignal = host.MachineFailed, "planned"
	f.finish(task, host.FinishInput{Outcome: out})
	if got := f.workflowRecord(r.WorkflowID); got.CurrentState != "plan" || got.Status != host.WorkflowActive {
		t.Fatalf("a failed task moved the record: %+v", got)
	}
	// Two operator tasks naming the plan state: the first moves the
	// record on, the second's signal is stale.
	var manual []*host.TaskRecord
	for range 2 {
		manual = append(manual, f.enqueue(host.TaskIntent{TaskType: "goal.plan", Source: "op", Payload: json.RawMessage(`{"goal":"g"}`),
			WorkflowRef: &host.WorkflowRef{WorkflowID: r.WorkflowID, StateID: "plan", InstanceKey: "g2"}}, host.EnqueueOptions{}))
	}
	for i, want := range []string{"transitioned", "stale"} {
		claimed := f.claim()
		if claimed.TaskID != manual[i].TaskID {
			t.Fatalf("claimed %s, want %s", claimed.TaskID, manual[i].TaskID)
		}
		out = okOutcome()
		out.WorkflowSignal = "planned"
		f.finish(claimed, host.FinishInput{Outcome: out})
		if got := f.workflowRecord(r.WorkflowID); got.CurrentState != "execute" || got.Status != host.WorkflowActive {
			t.Fatalf("task %d: record %+v", i, got)
		}
		if !hasData(t, f.events(host.EventFilter{TaskID: claimed.TaskID}), host.EventTaskAttemptFinished, "workflow", want) {
			t.Fatalf("task %d: %s not recorded in task_attempt_finished", i, want)
		}
	}
	f.signalNext(r, "goal.execute", "what?")
	got := f.workflowRecord(r.WorkflowID)
	if got.Status != host.WorkflowBlocked || got.CurrentState != "execute" {
		t.Fatalf("unmatched: %+v", got)
	}
	if n := f.countEvents(); n[host.EventWorkflowBlocked] != 1 {
		t.Fatalf("events %v", n)
	}
	f.wantNoTask()
	_, err := f.b.CancelWorkflowRecord(ctx, "other", r.WorkflowID)
	wantErr(t, err, host.ErrNotFound)
	c, err := f.b.CancelWorkflowRecord(ctx, host.DefaultTenant, r.WorkflowID)
	if err != nil || c.Status != host.WorkflowCanceled {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	_, err = f.b.CancelWorkflowRecord(ctx, "", r.WorkflowID)
	wantErr(t, err, host.ErrConflict)
	_, err = f.b.CancelWorkflowRecord(ctx, "", "wf-nope")
	wantErr(t, err, host.ErrNotFound)
	if n := f.countEvents(); n[host.EventWorkflowCanceled] != 1 {
		t.Fatalf("events %v", n)
	}
}

// A sensor's proposed_workflow creates the record of (template,
// instance_key) once, with its first task; the same again (another
// dedupe_key) is deduped to that record and wakes it when blocked.
func workflowsSensorProposedWorkflow(f *fixture) {
	t := f.t
	ev := sensorEvent(t, `{"sensor_id":"s","event_id":"e1","observed_at":"2026-03-01T10:00:00Z","source_ref":"r","dedupe_key":"k1",
		"payload":{},"proposed_workflow":{"template":"goal-loop","instance_key":"ticket-7","context":{"goal":"g"}}}`)
	a := f.recordSensor(ev, host.SensorEventOptions{})
	if a.Status != host.SensorWorkflowCreated || a.WorkflowID == "" {
		t.Fatalf("first: %+v", a)
	}
	ev.DedupeKey, ev.EventID = "k2", "e2"
	b := f.recordSensor(ev, host.SensorEventOptions{})
	if b.Status != host.SensorWorkflowDeduped || b.WorkflowID != a.WorkflowID {
		t.Fatalf("second: %+v", b)
	}
	recs, err := f.b.ListWorkflowRecords(ctx, host.WorkflowRecordFilter{WorkflowType: host.GoalLoop})
	if err != nil || len(recs) != 1 || recs[0].InstanceKey != "ticket-7" || recs[0].WorkflowID != a.WorkflowID {
		t.Fatalf("records %+v %v", recs, err)
	}
	n := f.countEvents()
	if n[host.EventSensorWorkflowCreated] != 1 || n[host.EventSensorWorkflowDeduped] != 1 || n[host.EventWorkflowTaskCreated] != 1 {
		t.Fatalf("events %v", n)
	}
	// An unregistered template and an unknown state are refused.
	ev.DedupeKey, ev.ProposedWorkflow.InstanceKey, ev.ProposedWorkflow.State = "k3", "ticket-8", "nowhere"
	_, err = f.b.RecordSensorEvent(ctx, ev, host.SensorEventOptions{})
	wantField(t, err, "proposed_workflow.state")
	ev.ProposedWorkflow.State, ev.ProposedWorkflow.Template = "", "triage"
	_, err = f.b.RecordSensorEvent(ctx, ev, host.SensorEventOptions{})
	wantField(t, err, "proposed_workflow.template")
	ev.ProposedWorkflow.Template = host.GoalLoop
	// Reported with a proposed_task nothing serves: refused, and its
	// workflow is not created either.
	ev.DedupeKey, ev.ProposedWorkflow.InstanceKey = "k4", "ticket-9"
	ev.ProposedTask = &host.TaskIntent{TaskType: "no.route", Source: "sensor:s", Payload: json.RawMessage(`{}`)}
	got, err := f.b.ApplySensorEvents(ctx, []host.SensorEvent{ev}, host.SensorEventOptions{}, "att-1")
	if err != nil || len(got) != 1 || got[0].Status != host.SensorRefused {
		t.Fatalf("refused: %+v %v", got, err)
	}
	if recs, _ := f.b.ListWorkflowRecords(ctx, host.WorkflowRecordFilter{}); len(recs) != 1 {
		t.Fatalf("a refused event created a record: %+v", recs)
	}
	// Blocked by an unknown signal, woken by the sensor proposing it again.
	f.signalNext(recs[0], "goal.plan", "no-such-signal")
	if got := f.workflowRecord(recs[0].WorkflowID); got.Status != host.WorkflowBlocked {
		t.Fatalf("not blocked: %+v", got)
	}
	ev.DedupeKey, ev.ProposedWorkflow.InstanceKey, ev.ProposedTask = "k5", "ticket-7", nil
	if r := f.recordSensor(ev, host.SensorEventOptions{}); r.Status != host.SensorWorkflowDeduped {
		t.Fatalf("wake: %+v", r)
	}
	if got := f.workflowRecord(recs[0].WorkflowID); got.Status != host.WorkflowActive || got.CurrentState != "plan" {
		t.Fatalf("not woken: %+v", got)
	}
	f.signalNext(recs[0], "goal.plan", "planned")
	if got := f.workflowRecord(recs[0].WorkflowID); got.CurrentState != "execute" {
		t.Fatalf("after wake: %+v", got)
	}
}

func workflowsDefinitions(f *fixture) {
	t := f.t
	defs, err := f.b.ListWorkflows(ctx)
	if err != nil || len(defs) != 1 || defs[0].WorkflowType != host.GoalLoop {
		t.Fatalf("a fresh store's definitions: %+v %v", defs, err)
	}
	goal, err := f.b.Workflow(ctx, host.GoalLoop)
	if err != nil || goal.InitialState != "plan" || goal.State("verify") == nil {
		t.Fatalf("goal loop %+v %v", goal, err)
	}
	_, err = f.b.PutWorkflow(ctx, &host.WorkflowDefinition{WorkflowType: "w", InitialState: "x", States: []host.WorkflowState{{StateID: "a"}}})
	wantField(t, err, "initial_state")
	_, err = f.b.Workflow(ctx, "w")
	wantErr(t, err, host.ErrNotFound)
	def := &host.WorkflowDefinition{WorkflowType: "quiet", InitialState: "a", States: []host.WorkflowState{
		{StateID: "a", Transitions: []host.WorkflowTransition{{Signal: "go", NextState: "b"}}}, {StateID: "b", CompletionSignals: []string{"done"}}}}
	if replaced, err := f.b.PutWorkflow(ctx, def); err != nil || replaced {
		t.Fatalf("put: %v %v", replaced, err)
	}
	def.States[1].CompletionSignals = []string{"done", "finished"}
	if replaced, err := f.b.PutWorkflow(ctx, def); err != nil || !replaced {
		t.Fatalf("replace: %v %v", replaced, err)
	}
	got, err := f.b.Workflow(ctx, "quiet")
	if err != nil || len(got.States) != 2 || len(got.States[1].CompletionSignals) != 2 || got.States[0].Next("go") != "b" {
		t.Fatalf("stored %+v %v", got, err)
	}
	if defs, _ := f.b.ListWorkflows(ctx); len(defs) != 2 || defs[0].WorkflowType != host.GoalLoop || defs[1].WorkflowType != "quiet" {
		t.Fatalf("definitions %+v", defs)
	}
	// A record keeps its state when its definition is replaced; a state
	// the new definition lacks blocks its next signal.
	r, _, err := f.b.StartWorkflow(ctx, host.WorkflowStart{WorkflowType: "quiet", InstanceKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	f.enqueue(host.TaskIntent{TaskType: "x", Source: "op", Payload: json.RawMessage(`{}`),
		WorkflowRef: &host.WorkflowRef{WorkflowID: r.WorkflowID, StateID: "a", InstanceKey: "k"}}, host.EnqueueOptions{})
	if _, err := f.b.PutWorkflow(ctx, &host.WorkflowDefinition{WorkflowType: "quiet", InitialState: "c", States: []host.WorkflowState{{StateID: "c"}}}); err != nil {
		t.Fatal(err)
	}
	if got := f.workflowRecord(r.WorkflowID); got.CurrentState != "a" || got.Status != host.WorkflowActive {
		t.Fatalf("after the replacement: %+v", got)
	}
	out := okOutcome()
	out.WorkflowSignal = "go"
	f.finish(f.claim(), host.FinishInput{Outcome: out})
	if got := f.workflowRecord(r.WorkflowID); got.Status != host.WorkflowBlocked || got.CurrentState != "a" {
		t.Fatalf("a signal in a state the definition lost: %+v", got)
	}
	if n := f.countEvents()[host.EventWorkflowUpserted]; n != 3 {
		t.Fatalf("%d workflow_upserted events", n)
	}
}

// A workflow_ref must name an existing record of the task's tenant;
// starting twice returns the same record; records are a tenant's.
func workflowsStartRefsAndTenants(f *fixture) {
	t := f.t
	in := host.TaskIntent{TaskType: "x", Source: "op", Payload: json.RawMessage(`{}`),
		WorkflowRef: &host.WorkflowRef{WorkflowID: "wf-nope", StateID: "plan", InstanceKey: "k"}}
	_, err := f.b.Enqueue(ctx, in, host.EnqueueOptions{})
	wantField(t, err, "workflow_ref.workflow_id")
	_, _, err = f.b.StartWorkflow(ctx, host.WorkflowStart{WorkflowType: "nope", InstanceKey: "k"})
	wantField(t, err, "workflow_type")
	_, _, err = f.b.StartWorkflow(ctx, host.WorkflowStart{WorkflowType: host.GoalLoop, InstanceKey: "k", State: "nowhere"})
	wantField(t, err, "state")
	_, _, err = f.b.StartWorkflow(ctx, host.WorkflowStart{WorkflowType: host.GoalLoop, InstanceKey: ""})
	wantField(t, err, "instance_key")
	def := &host.WorkflowDefinition{WorkflowType: "quiet", InitialState: "a", States: []host.WorkflowState{
		{StateID: "a", Transitions: []host.WorkflowTransition{{Signal: "go", NextState: "b"}}}, {StateID: "b", CompletionSignals: []string{"done"}}}}
	if _, err := f.b.PutWorkflow(ctx, def); err != nil {
		t.Fatal(err)
	}
	r, created, err := f.b.StartWorkflow(ctx, host.WorkflowStart{WorkflowType: "quiet", InstanceKey: "k"})
	if err != nil || !created || r.CurrentState != "a" || r.Tenant != host.DefaultTenant {
		t.Fatalf("start: %+v %v", r, err)
	}
	f.wantNoTask() // state a emits no task
	before := len(f.events(host.EventFilter{}))
	again, created, err := f.b.StartWorkflow(ctx, host.WorkflowStart{WorkflowType: "quiet", InstanceKey: "k", Context: json.RawMessage(`{"x":1}`)})
	if err != nil || created || again.WorkflowID != r.WorkflowID {
		t.Fatalf("again: %+v %v %v", again, created, err)
	}
	if after := len(f.events(host.EventFilter{})); after != before {
		t.Fatal("starting an existing record wrote events")
	}
	// Another tenant's record of the same key is another record.
	f.clock.Add(time.Second)
	theirs, created, err := f.b.StartWorkflow(ctx, host.WorkflowStart{WorkflowType: "quiet", InstanceKey: "k", Tenant: "t2"})
	if err != nil || !created || theirs.WorkflowID == r.WorkflowID || theirs.Tenant != "t2" {
		t.Fatalf("t2's: %+v %v %v", theirs, created, err)
	}
	in.WorkflowRef = &host.WorkflowRef{WorkflowID: r.WorkflowID, StateID: "a", InstanceKey: "other"}
	_, err = f.b.Enqueue(ctx, in, host.EnqueueOptions{})
	wantField(t, err, "workflow_ref.instance_key")
	in.WorkflowRef.InstanceKey, in.WorkflowRef.StateID = "k", "zz"
	_, err = f.b.Enqueue(ctx, in, host.EnqueueOptions{})
	wantField(t, err, "workflow_ref.state_id")
	in.WorkflowRef.StateID = "a"
	_, err = f.b.Enqueue(ctx, in, host.EnqueueOptions{Tenant: "t2"})
	wantField(t, err, "workflow_ref.workflow_id")
	task := f.enqueue(in, host.EnqueueOptions{})
	claimed := f.claim()
	if claimed.TaskID != task.TaskID {
		t.Fatal("claimed another task")
	}
	out := okOutcome()
	out.WorkflowSignal = "go"
	f.finish(claimed, host.FinishInput{Outcome: out})
	if got := f.workflowRecord(r.WorkflowID); got.CurrentState != "b" || got.Status != host.WorkflowActive {
		t.Fatalf("after go: %+v", got)
	}
	if _, err := f.b.WorkflowRecord(ctx, "t2", r.WorkflowID); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("another tenant read it: %v", err)
	}
	if got, err := f.b.WorkflowRecord(ctx, host.DefaultTenant, r.WorkflowID); err != nil || got.WorkflowID != r.WorkflowID {
		t.Fatalf("its tenant reads it: %+v %v", got, err)
	}
	_, err = f.b.WorkflowRecord(ctx, "", "wf-nope")
	wantErr(t, err, host.ErrNotFound)
	for _, c := range []struct {
		filter host.WorkflowRecordFilter
		want   []string
	}{
		{host.WorkflowRecordFilter{}, []string{theirs.WorkflowID, r.WorkflowID}},
		{host.WorkflowRecordFilter{Tenant: "t2"}, []string{theirs.WorkflowID}},
		{host.WorkflowRecordFilter{WorkflowType: host.GoalLoop}, nil},
		{host.WorkflowRecordFilter{Limit: 1}, []string{theirs.WorkflowID}},
	} {
		recs, err := f.b.ListWorkflowRecords(ctx, c.filter)
		var ids []string
		for _, r := range recs {
			ids = append(ids, r.WorkflowID)
		}
		if err != nil || len(ids) != len(c.want) || len(ids) > 0 && ids[0] != c.want[0] {
			t.Fatalf("%+v: %v (%v), want %v (newest first)", c.filter, ids, err, c.want)
		}
	}
}
