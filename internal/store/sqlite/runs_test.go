package sqlite

import (
	"testing"

	"github.com/packrun/packrun/host"
)

// TestUnfinishedRunsAcrossRestart: the runs left running, of every tenant
// and oldest first, are the ones a reopened store gives a claimer (the
// contract suite's scenarios, internal/store/storetest, check the rest);
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
	if _, err := f.AdvanceRun(ctx, "", "run_c", "", host.RunCompleted, nil, []host.RunEvent{{Type: host.RunEventCompleted}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AdvanceRun(ctx, "", "run_d", "", host.RunCancelled, nil, []host.RunEvent{{Type: host.RunEventCancelled}}); err != nil {
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
		runs, err := s.ClaimRuns(ctx, "next", host.ClaimEveryRun, f.clock.Now())
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
	if _, err := s.AdvanceRun(ctx, "acme", "run_a", "", "", nil, []host.RunEvent{{Type: host.RunEventResumed, NodeID: "a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdvanceRun(ctx, "acme", "run_a", "", host.RunCompleted, nil, []host.RunEvent{{Type: host.RunEventCompleted}}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.RunEvents(ctx, "acme", "run_a")
	if err != nil || len(evs) != 4 || evs[2].Type != host.RunEventResumed || evs[2].Seq != 3 || evs[3].Seq != 4 {
		t.Fatalf("events after a restart: %+v %v", evs, err)
	}
	_, err = s.AdvanceRun(ctx, "", "run_d", "", "", nil, []host.RunEvent{{Type: host.RunEventResumed}})
	wantErr(t, err, host.ErrConflict)
	if got := unfinished(); len(got) != 1 || got[0] != "default/run_b" {
		t.Fatalf("unfinished runs once run_a completed: %v", got)
	}
}
