package sqlite

import (
	"encoding/json"
	"testing"

	"github.com/packrun/packrun/host"
)

// TestOpenwopRunsStore: definitions are a tenant's, replaced whole; a run's log
// numbers its events, carries the detail under payload and data, and a
// terminal run refuses further changes; another tenant's run is not found.
func TestOpenwopRunsStore(t *testing.T) {
	f := newFixture(t, Options{})
	w := &host.OpenwopWorkflow{WorkflowID: "wf", Tenant: "acme", Nodes: []host.OpenwopNode{{ID: "a", TypeID: "vendor.x.y.greet"}}}
	if err := f.PutOpenwopWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	w.Nodes = append(w.Nodes, host.OpenwopNode{ID: "b", TypeID: "vendor.x.y.greet"})
	if err := f.PutOpenwopWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	if got, err := f.OpenwopWorkflow(ctx, "acme", "wf"); err != nil || len(got.Nodes) != 2 {
		t.Fatalf("replaced definition: %+v %v", got, err)
	}
	_, err := f.OpenwopWorkflow(ctx, "other", "wf")
	wantErr(t, err, host.ErrNotFound)
	bad := &host.OpenwopWorkflow{WorkflowID: "wf", Nodes: []host.OpenwopNode{{ID: "a", TypeID: "t"}, {ID: "a", TypeID: "t"}}}
	err = f.PutOpenwopWorkflow(ctx, bad)
	wantErr(t, err, host.ErrValidation)
	if he := err.(*host.Error); he.Field != "nodes[1].id" {
		t.Fatalf("field %q", he.Field)
	}

	r := &host.Run{RunID: "run_1", Tenant: "acme", WorkflowID: "wf", Status: host.RunRunning, Inputs: json.RawMessage(`{"name":"x"}`)}
	if err := f.CreateRun(ctx, r, []host.RunEvent{{Type: host.RunEventStarted}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AdvanceRun(ctx, "acme", "run_1", "", nil, []host.RunEvent{{Type: host.RunEventNodeDone, NodeID: "a", Payload: json.RawMessage(`{"output":1}`)}}); err != nil {
		t.Fatal(err)
	}
	got, err := f.AdvanceRun(ctx, "acme", "run_1", host.RunFailed, &host.RunError{Code: "node_failed", Message: "m"}, []host.RunEvent{{Type: host.RunEventFailed}})
	if err != nil || got.Status != host.RunFailed || got.Error.Code != "node_failed" {
		t.Fatalf("fail: %+v %v", got, err)
	}
	_, err = f.AdvanceRun(ctx, "acme", "run_1", host.RunCancelled, nil, []host.RunEvent{{Type: host.RunEventCancelled}})
	wantErr(t, err, host.ErrConflict)
	evs, err := f.RunEvents(ctx, "acme", "run_1")
	if err != nil || len(evs) != 3 {
		t.Fatalf("events %+v %v", evs, err)
	}
	if evs[1].Seq != 2 || evs[1].NodeID != "a" || string(evs[1].Payload) != `{"output":1}` || string(evs[1].Data) != `{"output":1}` || string(evs[0].Payload) != `{}` {
		t.Fatalf("event %+v", evs[1])
	}
	if run, err := f.Run(ctx, "acme", "run_1"); err != nil || run.Status != host.RunFailed || string(run.Inputs) != `{"name":"x"}` {
		t.Fatalf("run %+v %v", run, err)
	}
	_, err = f.Run(ctx, "other", "run_1")
	wantErr(t, err, host.ErrNotFound)
	_, err = f.RunEvents(ctx, "other", "run_1")
	wantErr(t, err, host.ErrNotFound)
	_, err = f.AdvanceRun(ctx, "other", "run_1", "", nil, nil)
	wantErr(t, err, host.ErrNotFound)
}

// TestUnfinishedRunsAcrossRestart: the runs left running, of every tenant
// and oldest first, are the ones a reopened store offers to continue;
// AdvanceRun on the reopened store numbers on from the log, and a run
// completed or cancelled is never offered.
func TestUnfinishedRunsAcrossRestart(t *testing.T) {
	f := newFixture(t, Options{})
	for _, r := range []*host.Run{
		{RunID: "run_a", Tenant: "acme", WorkflowID: "wf", Status: host.RunRunning},
		{RunID: "run_b", WorkflowID: "wf", Status: host.RunRunning},
		{RunID: "run_c", WorkflowID: "wf", Status: host.RunRunning},
		{RunID: "run_d", WorkflowID: "wf", Status: host.RunRunning},
	} {
		if err := f.CreateRun(ctx, r, []host.RunEvent{{Type: host.RunEventStarted}, {Type: host.RunEventNodeStarted, NodeID: "a"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.AdvanceRun(ctx, "", "run_c", host.RunCompleted, nil, []host.RunEvent{{Type: host.RunEventCompleted}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AdvanceRun(ctx, "", "run_d", host.RunCancelled, nil, []host.RunEvent{{Type: host.RunEventCancelled}}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err := Open(ctx, f.path, Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	unfinished := func() []string {
		t.Helper()
		runs, err := s.UnfinishedRuns(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.Tenant+"/"+r.RunID)
		}
		return ids
	}
	if got := unfinished(); len(got) != 2 || got[0] != "acme/run_a" || got[1] != "default/run_b" {
		t.Fatalf("unfinished runs after a restart: %v", got)
	}
	if _, err := s.AdvanceRun(ctx, "acme", "run_a", "", nil, []host.RunEvent{{Type: host.RunEventResumed, NodeID: "a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdvanceRun(ctx, "acme", "run_a", host.RunCompleted, nil, []host.RunEvent{{Type: host.RunEventCompleted}}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.RunEvents(ctx, "acme", "run_a")
	if err != nil || len(evs) != 4 || evs[2].Type != host.RunEventResumed || evs[2].Seq != 3 || evs[3].Seq != 4 {
		t.Fatalf("events after a restart: %+v %v", evs, err)
	}
	_, err = s.AdvanceRun(ctx, "", "run_d", "", nil, []host.RunEvent{{Type: host.RunEventResumed}})
	wantErr(t, err, host.ErrConflict)
	if got := unfinished(); len(got) != 1 || got[0] != "default/run_b" {
		t.Fatalf("unfinished runs once run_a completed: %v", got)
	}
}
