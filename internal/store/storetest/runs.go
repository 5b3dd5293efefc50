package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// Runs checks host.Runs: openwop workflow definitions (a tenant's,
// replaced whole, validated), runs and their numbered event logs (the
// detail under payload and data), advancing and settling a run, a
// terminal run refusing changes, another tenant's run not found, and the
// runs left unfinished claimed by a runner (every tenant's, oldest first;
// all of them, or those whose lease ended), leases renewed, and an advance
// fenced on the runner holding the run.
func Runs(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"Definitions", runsDefinitions},
		{"RunLog", runsRunLog},
		{"ClaimUnfinishedRuns", runsClaimUnfinished},
		{"RunLeases", runsLeases},
		{"ClaimOldestFirst", runsClaimOldestFirst},
		{"IdempotencyKey", runsIdempotencyKey},
		{"WaitingRun", runsWaiting},
	})
}

func runsDefinitions(f *fixture) {
	t := f.t
	w := &host.OpenwopWorkflow{WorkflowID: "wf", Tenant: "acme", Nodes: []host.OpenwopNode{{ID: "a", TypeID: "vendor.x.y.greet"}}}
	if err := f.b.PutOpenwopWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	w.Nodes = append(w.Nodes, host.OpenwopNode{ID: "b", TypeID: "vendor.x.y.greet"})
	if err := f.b.PutOpenwopWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	got, err := f.b.OpenwopWorkflow(ctx, "acme", "wf")
	if err != nil || got.WorkflowID != "wf" || len(got.Nodes) != 2 || got.Nodes[1].ID != "b" || got.Nodes[1].TypeID != "vendor.x.y.greet" {
		t.Fatalf("replaced definition: %+v %v", got, err)
	}
	_, err = f.b.OpenwopWorkflow(ctx, "other", "wf")
	wantErr(t, err, host.ErrNotFound)
	_, err = f.b.OpenwopWorkflow(ctx, "acme", "nope")
	wantErr(t, err, host.ErrNotFound)
	bad := &host.OpenwopWorkflow{WorkflowID: "wf", Tenant: "acme", Nodes: []host.OpenwopNode{{ID: "a", TypeID: "t"}, {ID: "a", TypeID: "t"}}}
	wantField(t, f.b.PutOpenwopWorkflow(ctx, bad), "nodes[1].id")
	if got, _ := f.b.OpenwopWorkflow(ctx, "acme", "wf"); len(got.Nodes) != 2 || got.Nodes[1].ID != "b" {
		t.Fatalf("a refused definition replaced the stored one: %+v", got)
	}
	// The tenant's definitions, by id, with their variables and ports;
	// none of another tenant's.
	v := &host.OpenwopWorkflow{WorkflowID: "a-first", Tenant: "acme", Nodes: []host.OpenwopNode{{ID: "a", TypeID: "core.delay",
		Inputs: map[string]host.OpenwopPort{"delayMs": {Type: "variable", VariableName: "d"}}}},
		Variables: []host.OpenwopVariable{{Name: "d", Type: "number", DefaultValue: json.RawMessage(`5`)}}}
	if err := f.b.PutOpenwopWorkflow(ctx, v); err != nil {
		t.Fatal(err)
	}
	if err := f.b.PutOpenwopWorkflow(ctx, &host.OpenwopWorkflow{WorkflowID: "theirs", Tenant: "other", Nodes: w.Nodes}); err != nil {
		t.Fatal(err)
	}
	ws, err := f.b.OpenwopWorkflows(ctx, "acme")
	if err != nil || len(ws) != 2 || ws[0].WorkflowID != "a-first" || ws[1].WorkflowID != "wf" ||
		ws[0].Nodes[0].Inputs["delayMs"].VariableName != "d" || string(ws[0].Variables[0].DefaultValue) != "5" {
		t.Fatalf("acme's workflows: %+v %v", ws, err)
	}
	if ws, err := f.b.OpenwopWorkflows(ctx, "nobody"); err != nil || ws == nil || len(ws) != 0 {
		t.Fatalf("no workflows: %v %v", ws, err)
	}
}

func runsRunLog(f *fixture) {
	t := f.t
	r := &host.Run{RunID: "run_1", Tenant: "acme", WorkflowID: "wf", Status: host.RunRunning, Inputs: json.RawMessage(`{"name":"x"}`)}
	if err := f.b.CreateRun(ctx, r, []host.RunEvent{{Type: host.RunEventStarted}}); err != nil {
		t.Fatal(err)
	}
	if run, err := f.b.Run(ctx, "acme", "run_1"); err != nil || run.Status != host.RunRunning || run.WorkflowID != "wf" || string(run.Inputs) != `{"name":"x"}` {
		t.Fatalf("created %+v %v", run, err)
	}
	f.clock.Add(time.Second)
	if _, err := f.b.AdvanceRun(ctx, "acme", "run_1", "", "", nil, []host.RunEvent{{Type: host.RunEventNodeDone, NodeID: "a", Payload: json.RawMessage(`{"output":1}`)}}); err != nil {
		t.Fatal(err)
	}
	got, err := f.b.AdvanceRun(ctx, "acme", "run_1", "", host.RunFailed, &host.RunError{Code: "node_failed", Message: "m"}, []host.RunEvent{{Type: host.RunEventFailed}})
	if err != nil || got.Status != host.RunFailed || got.Error == nil || got.Error.Code != "node_failed" || got.Error.Message != "m" {
		t.Fatalf("fail: %+v %v", got, err)
	}
	_, err = f.b.AdvanceRun(ctx, "acme", "run_1", "", host.RunCancelled, nil, []host.RunEvent{{Type: host.RunEventCancelled}})
	wantErr(t, err, host.ErrConflict)
	evs, err := f.b.RunEvents(ctx, "acme", "run_1")
	if err != nil || len(evs) != 3 {
		t.Fatalf("events %+v %v", evs, err)
	}
	for i, e := range evs {
		if e.Seq != i+1 || e.RunID != "run_1" {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
	if evs[1].Type != host.RunEventNodeDone || evs[1].NodeID != "a" || string(evs[1].Payload) != `{"output":1}` || string(evs[1].Data) != `{"output":1}` ||
		string(evs[0].Payload) != `{}` || evs[2].Type != host.RunEventFailed {
		t.Fatalf("events %+v", evs)
	}
	if run, err := f.b.Run(ctx, "acme", "run_1"); err != nil || run.Status != host.RunFailed || run.Error == nil || string(run.Inputs) != `{"name":"x"}` {
		t.Fatalf("run %+v %v", run, err)
	}
	_, err = f.b.Run(ctx, "other", "run_1")
	wantErr(t, err, host.ErrNotFound)
	_, err = f.b.RunEvents(ctx, "other", "run_1")
	wantErr(t, err, host.ErrNotFound)
	_, err = f.b.AdvanceRun(ctx, "other", "run_1", "", "", nil, nil)
	wantErr(t, err, host.ErrNotFound)
	_, err = f.b.Run(ctx, "acme", "run_nope")
	wantErr(t, err, host.ErrNotFound)
}

func runsClaimUnfinished(f *fixture) {
	t := f.t
	for _, r := range []*host.Run{
		{RunID: "run_a", Tenant: "acme", WorkflowID: "wf", Status: host.RunRunning},
		{RunID: "run_b", WorkflowID: "wf", Status: host.RunRunning},
		{RunID: "run_c", WorkflowID: "wf", Status: host.RunRunning},
		{RunID: "run_d", WorkflowID: "wf", Status: host.RunRunning},
	} {
		f.clock.Add(time.Second)
		if err := f.b.CreateRun(ctx, r, []host.RunEvent{{Type: host.RunEventStarted}, {Type: host.RunEventNodeStarted, NodeID: "a"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.b.AdvanceRun(ctx, "", "run_c", "", host.RunCompleted, nil, []host.RunEvent{{Type: host.RunEventCompleted}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.AdvanceRun(ctx, host.DefaultTenant, "run_d", "", host.RunCancelled, nil, []host.RunEvent{{Type: host.RunEventCancelled}}); err != nil {
		t.Fatal(err)
	}
	unfinished := func() []string {
		t.Helper()
		runs, err := f.b.ClaimRuns(ctx, "n1", host.ClaimEveryRun, f.clock.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range runs {
			if r.Holder != "n1" || !r.LeaseUntil.Equal(f.clock.Now().Add(time.Minute)) {
				t.Fatalf("claimed run %s: holder %q until %v", r.RunID, r.Holder, r.LeaseUntil)
			}
			ids = append(ids, r.Tenant+"/"+r.RunID)
		}
		return ids
	}
	if got := unfinished(); len(got) != 2 || got[0] != "acme/run_a" || got[1] != "default/run_b" {
		t.Fatalf("unfinished runs: %v", got)
	}
	if _, err := f.b.AdvanceRun(ctx, "acme", "run_a", "", "", nil, []host.RunEvent{{Type: host.RunEventResumed, NodeID: "a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.AdvanceRun(ctx, "acme", "run_a", "", host.RunCompleted, nil, []host.RunEvent{{Type: host.RunEventCompleted}}); err != nil {
		t.Fatal(err)
	}
	evs, err := f.b.RunEvents(ctx, "acme", "run_a")
	if err != nil || len(evs) != 4 || evs[2].Type != host.RunEventResumed || evs[2].Seq != 3 || evs[3].Seq != 4 {
		t.Fatalf("events: %+v %v", evs, err)
	}
	_, err = f.b.AdvanceRun(ctx, "", "run_d", "", "", nil, []host.RunEvent{{Type: host.RunEventResumed}})
	wantErr(t, err, host.ErrConflict)
	if got := unfinished(); len(got) != 1 || got[0] != "default/run_b" {
		t.Fatalf("unfinished runs once run_a completed: %v", got)
	}
}

// runsLeases: a run held by a runner is claimed by another only once its
// lease ended (renewals keep it), and from then on the first runner's
// advances are refused, the claimer's accepted.
func runsLeases(f *fixture) {
	t := f.t
	now := f.clock.Now()
	r := &host.Run{RunID: "run_l", Tenant: "acme", WorkflowID: "wf", Status: host.RunRunning, Holder: "n1", LeaseUntil: now.Add(10 * time.Second)}
	if err := f.b.CreateRun(ctx, r, []host.RunEvent{{Type: host.RunEventStarted}}); err != nil {
		t.Fatal(err)
	}
	if got, err := f.b.Run(ctx, "acme", "run_l"); err != nil || got.Holder != "n1" || !got.LeaseUntil.Equal(now.Add(10*time.Second)) {
		t.Fatalf("created run: %+v %v", got, err)
	}
	claim := func(holder string) []*host.Run {
		t.Helper()
		runs, err := f.b.ClaimRuns(ctx, holder, f.clock.Now(), f.clock.Now().Add(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	if runs := claim("n2"); len(runs) != 0 {
		t.Fatalf("a held run was claimed: %+v", runs[0])
	}
	if _, err := f.b.AdvanceRun(ctx, "acme", "run_l", "n1", "", nil, []host.RunEvent{{Type: host.RunEventNodeStarted, NodeID: "a"}}); err != nil {
		t.Fatal(err)
	}
	_, err := f.b.AdvanceRun(ctx, "acme", "run_l", "n2", "", nil, []host.RunEvent{{Type: host.RunEventNodeDone, NodeID: "a"}})
	wantErr(t, err, host.ErrConflict)

	f.clock.Add(8 * time.Second)
	if n, err := f.b.RenewRuns(ctx, "n1", f.clock.Now().Add(10*time.Second)); err != nil || n != 1 {
		t.Fatalf("renewed %d runs, %v; want 1", n, err)
	}
	if n, err := f.b.RenewRuns(ctx, "n2", f.clock.Now().Add(10*time.Second)); err != nil || n != 0 {
		t.Fatalf("n2 renewed %d runs it does not hold, %v", n, err)
	}
	f.clock.Add(8 * time.Second) // 16s: past the first lease, within the renewed one
	if runs := claim("n2"); len(runs) != 0 {
		t.Fatal("a renewed run was claimed")
	}
	f.clock.Add(3 * time.Second) // 19s: the renewed lease (18s) ended
	runs := claim("n2")
	if len(runs) != 1 || runs[0].RunID != "run_l" || runs[0].Holder != "n2" || runs[0].Tenant != "acme" {
		t.Fatalf("claimed after the lease ended: %+v", runs)
	}
	if again := claim("n3"); len(again) != 0 {
		t.Fatal("a claimed run was claimed again")
	}
	// n1 wakes up: its advance is refused and changes nothing.
	_, err = f.b.AdvanceRun(ctx, "acme", "run_l", "n1", host.RunCompleted, nil, []host.RunEvent{{Type: host.RunEventCompleted}})
	wantErr(t, err, host.ErrConflict)
	if n, err := f.b.RenewRuns(ctx, "n1", f.clock.Now().Add(time.Minute)); err != nil || n != 0 {
		t.Fatalf("n1 renewed %d runs after losing its lease, %v", n, err)
	}
	if _, err := f.b.AdvanceRun(ctx, "acme", "run_l", "n2", host.RunCompleted, nil, []host.RunEvent{{Type: host.RunEventCompleted}}); err != nil {
		t.Fatal(err)
	}
	evs, err := f.b.RunEvents(ctx, "acme", "run_l")
	if err != nil || len(evs) != 3 || evs[1].Type != host.RunEventNodeStarted || evs[2].Type != host.RunEventCompleted {
		t.Fatalf("events: %+v %v", evs, err)
	}
	// A user's write (no holder) is not fenced; a terminal run is renewed
	// and claimed no more.
	if n, _ := f.b.RenewRuns(ctx, "n2", f.clock.Now().Add(time.Minute)); n != 0 {
		t.Fatalf("a completed run's lease was renewed")
	}
	f.clock.Add(time.Hour)
	if runs := claim("n3"); len(runs) != 0 {
		t.Fatal("a completed run was claimed")
	}
	if _, err := f.b.ClaimRuns(ctx, "", f.clock.Now(), f.clock.Now()); err == nil {
		t.Fatal("a claim without a holder was taken")
	}
}

// runsClaimOldestFirst: runs are claimed in the order they were created,
// not in the order of their ids.
func runsClaimOldestFirst(f *fixture) {
	t := f.t
	for _, id := range []string{"run_z", "run_m", "run_q", "run_a"} {
		if err := f.b.CreateRun(ctx, &host.Run{RunID: id, WorkflowID: "wf", Status: host.RunRunning}, nil); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := f.b.ClaimRuns(ctx, "n1", host.ClaimEveryRun, f.clock.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.RunID)
	}
	if len(ids) != 4 || ids[0] != "run_z" || ids[1] != "run_m" || ids[2] != "run_q" || ids[3] != "run_a" {
		t.Fatalf("claimed runs, want oldest first: %v", ids)
	}
}

// runsIdempotencyKey: a tenant's key answers the run it started while it
// holds (same digest), refuses another digest, is another tenant's to use
// too, and is taken again once expired.
func runsIdempotencyKey(f *fixture) {
	t := f.t
	k := host.RunIdempotency{Key: "k1", Digest: "d1", TTL: time.Hour}
	newRun := func(id, tenant string) *host.Run {
		return &host.Run{RunID: id, Tenant: tenant, WorkflowID: "wf", Status: host.RunRunning}
	}
	evs := []host.RunEvent{{Type: host.RunEventStarted}}
	got, created, err := f.b.CreateRunOnce(ctx, newRun("run_a", "acme"), evs, k)
	if err != nil || !created || got.RunID != "run_a" {
		t.Fatalf("first: %+v %v %v", got, created, err)
	}
	got, created, err = f.b.CreateRunOnce(ctx, newRun("run_b", "acme"), evs, k)
	if err != nil || created || got.RunID != "run_a" {
		t.Fatalf("replay: %+v %v %v", got, created, err)
	}
	if _, err := f.b.Run(ctx, "acme", "run_b"); err == nil {
		t.Fatal("a replay stored its run")
	}
	_, _, err = f.b.CreateRunOnce(ctx, newRun("run_c", "acme"), evs, host.RunIdempotency{Key: "k1", Digest: "d2", TTL: time.Hour})
	wantErr(t, err, host.ErrIdempotencyMismatch)
	wantErr(t, err, host.ErrConflict)
	if _, err := f.b.Run(ctx, "acme", "run_c"); err == nil {
		t.Fatal("a mismatched request stored its run")
	}
	got, created, err = f.b.CreateRunOnce(ctx, newRun("run_d", "globex"), evs, k)
	if err != nil || !created || got.RunID != "run_d" {
		t.Fatalf("another tenant's key: %+v %v %v", got, created, err)
	}
	f.clock.Add(time.Hour)
	got, created, err = f.b.CreateRunOnce(ctx, newRun("run_e", "acme"), evs, host.RunIdempotency{Key: "k1", Digest: "d2", TTL: time.Hour})
	if err != nil || !created || got.RunID != "run_e" {
		t.Fatalf("expired key: %+v %v %v", got, created, err)
	}
}

// runsWaiting: a run waiting for a person is not claimed, whatever its
// lease; ResumeRun takes it back to running, held by the resolver, with
// the resolution's events; a second ResumeRun, or one of another tenant,
// or of a run not waiting, is refused and changes nothing; a waiting run
// can be cancelled.
func runsWaiting(f *fixture) {
	t := f.t
	now := f.clock.Now()
	for _, id := range []string{"run_w", "run_x"} {
		r := &host.Run{RunID: id, Tenant: "acme", WorkflowID: "wf", Status: host.RunRunning, Holder: "n1", LeaseUntil: now.Add(time.Second)}
		if err := f.b.CreateRun(ctx, r, []host.RunEvent{{Type: host.RunEventStarted}}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.b.AdvanceRun(ctx, "acme", id, "n1", host.RunWaitingApproval, nil, []host.RunEvent{{Type: host.RunEventInterruptRequested, NodeID: "gate"}}); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Add(time.Hour)
	if runs, err := f.b.ClaimRuns(ctx, "n2", host.ClaimEveryRun, f.clock.Now().Add(time.Minute)); err != nil || len(runs) != 0 {
		t.Fatalf("claimed waiting runs: %+v %v", runs, err)
	}
	_, err := f.b.ResumeRun(ctx, "other", "run_w", "n2", f.clock.Now().Add(time.Minute), []host.RunEvent{{Type: host.RunEventApprovalReceived}})
	wantErr(t, err, host.ErrNotFound)
	got, err := f.b.ResumeRun(ctx, "acme", "run_w", "n2", f.clock.Now().Add(time.Minute), []host.RunEvent{{Type: host.RunEventApprovalReceived, NodeID: "gate", Payload: json.RawMessage(`{"action":"accept"}`)}})
	if err != nil || got.Status != host.RunRunning {
		t.Fatalf("resumed: %+v %v", got, err)
	}
	if r, err := f.b.Run(ctx, "acme", "run_w"); err != nil || r.Status != host.RunRunning || r.Holder != "n2" || !r.LeaseUntil.Equal(f.clock.Now().Add(time.Minute)) {
		t.Fatalf("resumed run: %+v %v", r, err)
	}
	_, err = f.b.ResumeRun(ctx, "acme", "run_w", "n3", f.clock.Now().Add(time.Minute), []host.RunEvent{{Type: host.RunEventApprovalReceived}})
	wantErr(t, err, host.ErrConflict)
	evs, err := f.b.RunEvents(ctx, "acme", "run_w")
	if err != nil || len(evs) != 3 || evs[2].Type != host.RunEventApprovalReceived || evs[2].Seq != 3 || string(evs[2].Payload) != `{"action":"accept"}` {
		t.Fatalf("events: %+v %v", evs, err)
	}
	if r, _ := f.b.Run(ctx, "acme", "run_w"); r.Holder != "n2" {
		t.Fatalf("a refused resume changed the holder: %q", r.Holder)
	}
	if _, err := f.b.AdvanceRun(ctx, "acme", "run_x", "", host.RunCancelled, nil, []host.RunEvent{{Type: host.RunEventCancelled}}); err != nil {
		t.Fatal(err)
	}
	_, err = f.b.ResumeRun(ctx, "acme", "run_x", "n2", f.clock.Now().Add(time.Minute), nil)
	wantErr(t, err, host.ErrConflict)
}
