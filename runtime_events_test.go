package packrun

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// minimumRuntimeEvents are the 21 event types of seed 003 §14, as written.
var minimumRuntimeEvents = []string{
	"task_enqueued", "task_claimed", "bundle_compiled", "task_retry_scheduled", "task_attempt_finished",
	"task_started", "task_finished", "schedule_upserted", "schedule_task_created", "sensor_event_recorded",
	"sensor_event_deduped", "sensor_task_created", "sensor_workflow_created", "sensor_workflow_deduped",
	"workflow_transitioned", "workflow_completed", "workflow_task_created", "dispatch_idle",
	"dispatch_locked", "boot_sweep_reclaimed", "dispatch_lock_stale_cleared",
}

// TestEveryRuntimeEventSeen drives one home through what makes each event
// of seed 003 §14 happen — a stale dispatch lock, a task a crash left
// running, a retryable failure, a recurring schedule, a sensor event and
// its duplicate, a sensor proposing a goal-loop workflow twice (which then
// runs plan → execute → verify → complete through its tasks' signals), a
// task run as an agent's profile, the queue going idle — and checks that
// every one is in the evidence chain, which verifies.
func TestEveryRuntimeEventSeen(t *testing.T) {
	f, _ := withAgent(t)
	f.install(t, goalLoopPack(t))
	store := f.Store()
	echoTask := host.TaskIntent{TaskType: "echo.t", Source: "test", Payload: json.RawMessage(`{}`)}

	// A task whose only settlement is a retryable failure, and one a
	// crashed runner left running (reclaimed by the boot sweep of Run).
	for _, settle := range []bool{true, false} {
		if _, err := store.Enqueue(ctx, echoTask, host.EnqueueOptions{}); err != nil {
			t.Fatal(err)
		}
		claimed, err := store.Claim(ctx, "crashed-runner", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if settle {
			_, err := store.Finish(ctx, claimed.TaskID, host.FinishInput{RetryClass: host.RetryRetryable, Error: "adapter timed out",
				Outcome: host.TaskOutcome{MachineStatus: host.MachineNeedsRetry, OperatorSummary: "adapter timed out"}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// A lock whose holder died: the next dispatcher clears it.
	if _, err := store.AcquireDispatchLock(ctx, "dead-dispatcher", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)

	scheduled := echoTask // a schedule's and a sensor's tasks get their source from it
	scheduled.Source = ""
	if _, err := store.CreateSchedule(ctx, host.ScheduleSpec{Name: "tick", IntervalSeconds: 1, Task: scheduled}); err != nil {
		t.Fatal(err)
	}
	ev := host.SensorEvent{SensorID: "watcher", EventID: "e1", ObservedAt: time.Now().UTC().Format(time.RFC3339),
		SourceRef: "test", DedupeKey: "k1", Payload: json.RawMessage(`{}`), ProposedTask: &scheduled}
	for _, id := range []string{"e1", "e2"} {
		ev.EventID = id
		if _, err := store.RecordSensorEvent(ctx, ev, host.SensorEventOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Two events proposing the same goal-loop record: created, then deduped.
	ev.ProposedTask, ev.ProposedWorkflow = nil, &host.ProposedWorkflow{Template: host.GoalLoop, InstanceKey: "docs", Context: json.RawMessage(`{"goal":"docs"}`)}
	for _, key := range []string{"w1", "w2"} {
		ev.EventID, ev.DedupeKey = key, key
		if _, err := store.RecordSensorEvent(ctx, ev, host.SensorEventOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	want := minimumRuntimeEvents
	var missing []string
	for deadline := time.Now().Add(60 * time.Second); ; {
		seen := map[string]bool{}
		for after := int64(0); ; {
			evs, err := store.Events(ctx, host.EventFilter{AfterSeq: after, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 {
				break
			}
			for _, e := range evs {
				seen[e.Type] = true
			}
			after = evs[len(evs)-1].Seq
		}
		missing = slices.DeleteFunc(slices.Clone(want), func(e string) bool { return seen[e] })
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never seen: %v", missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	report, err := f.VerifyChain(ctx, nil)
	if err != nil || !report.OK {
		t.Fatalf("chain: %+v %v", report, err)
	}
}
