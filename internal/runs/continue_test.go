package runs

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/packrun/packrun/host"
)

// TestContinueLeavesAWaitingRun: Continue may claim a run while this
// process still executes it, and spawn its continuation only once that
// execution returned: by then the run's node may have suspended and the
// run wait on its interrupt. The continuation reads the run again and
// leaves it waiting; it does not end it as a suspension cut short (what
// a log holding a suspension and a run still running means).
func TestContinueLeavesAWaitingRun(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	const runner = "runner-1"
	s := New(Config{Store: st, RunnerID: runner, LeaseTTL: time.Minute, Log: hclog.NewNullLogger()})
	t.Cleanup(s.Stop)

	r := &host.Run{RunID: host.NewID("run"), Tenant: "default", WorkflowID: "conformance-approval", Status: host.RunRunning,
		Holder: runner, LeaseUntil: time.Now().Add(time.Minute)}
	if err := st.CreateRun(ctx, r, []host.RunEvent{runEvent(host.RunEventStarted, "", nil), runEvent(host.RunEventNodeStarted, "gate", nil)}); err != nil {
		t.Fatal(err)
	}
	claimed := *r // what the claim handed over: the run still running
	if _, err := st.AdvanceRun(ctx, r.Tenant, r.RunID, runner, host.RunWaitingApproval, nil, []host.RunEvent{
		runEvent(host.RunEventNodeSuspend, "gate", map[string]any{"nodeId": "gate"}),
		runEvent(host.RunEventInterruptRequested, "gate", map[string]any{"nodeId": "gate", "kind": "approval", "actions": []string{"accept", "reject"}}),
	}); err != nil {
		t.Fatal(err)
	}
	s.continueRun(ctx, &claimed)
	got, err := st.Run(ctx, r.Tenant, r.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != host.RunWaitingApproval || got.Error != nil {
		t.Fatalf("after the stale continuation the run is %s (%+v), want %s", got.Status, got.Error, host.RunWaitingApproval)
	}

	// The same log with the run still running (written before runs could
	// wait) is a suspension cut short: the run ends failed.
	old := &host.Run{RunID: host.NewID("run"), Tenant: "default", WorkflowID: "conformance-approval", Status: host.RunRunning,
		Holder: runner, LeaseUntil: time.Now().Add(time.Minute)}
	if err := st.CreateRun(ctx, old, []host.RunEvent{runEvent(host.RunEventStarted, "", nil), runEvent(host.RunEventNodeStarted, "gate", nil),
		runEvent(host.RunEventNodeSuspend, "gate", map[string]any{"nodeId": "gate"})}); err != nil {
		t.Fatal(err)
	}
	s.continueRun(ctx, old)
	if got, err := st.Run(ctx, old.Tenant, old.RunID); err != nil || got.Status != host.RunFailed || got.Error == nil || got.Error.Code != RunErrSuspendNotImplemented {
		t.Fatalf("a suspension cut short: %+v, %v", got, err)
	}
}
