package storetest

import (
	"reflect"
	"strings"

	"github.com/packrun/packrun/host"
)

// queueFinishFencesClaim: a settlement names the claim it settles (its
// Claimed record, or its Record); a claim the task is not on (an earlier
// attempt; where claims hold leases, host.Leases, another runner) is
// refused with ErrConflict, on both backends, and the task stays as it
// is. Without leases a task claimed under one runner id may be run by a
// dispatcher of another.
func queueFinishFencesClaim(f *fixture) {
	t := f.t
	f.enqueue(intent("demo", nil), host.EnqueueOptions{})
	task := f.claim()
	otherRunner, earlier := *task, *task
	otherRunner.RunnerID, earlier.AttemptCount = "runner-2", task.AttemptCount-1
	before := len(f.events(host.EventFilter{}))
	type refusal struct {
		name, why string
		in        host.FinishInput
	}
	refusals := []refusal{{"an earlier claim", "the claim is attempt 0 but the task is on attempt 1", host.FinishInput{Claimed: &earlier, Outcome: okOutcome()}}}
	_, leases := f.b.(host.Leases)
	if leases {
		refusals = append(refusals, refusal{"another runner's claim", "runner runner-2 does not hold the task", host.FinishInput{Claimed: &otherRunner, Outcome: okOutcome()}})
	}
	for _, tt := range refusals {
		_, err := f.b.Finish(ctx, task.TaskID, tt.in)
		wantErr(t, err, host.ErrConflict)
		if !strings.Contains(err.Error(), tt.why) {
			t.Fatalf("%s: the refusal does not say why: %v", tt.name, err)
		}
	}
	if after := len(f.events(host.EventFilter{})); after != before {
		t.Fatalf("refused settlements appended %d events", after-before)
	}
	// A Record of another attempt (or, with leases, of another runner) is
	// refused too.
	a := newAttempt(task)
	if a.Attempt++; leases {
		a.Attempt, a.RunnerID = task.AttemptCount, "runner-2"
	}
	_, err := f.b.Finish(ctx, task.TaskID, host.FinishInput{Record: a, Outcome: okOutcome()})
	wantErr(t, err, host.ErrConflict)
	if got := f.task(task.TaskID); !reflect.DeepEqual(got, task) {
		t.Fatalf("a refused settlement changed the task: %+v", got)
	}
	// The claim's own settlement goes through.
	if done := f.finish(task, host.FinishInput{Claimed: task, Outcome: okOutcome()}); done.Status != host.TaskCompleted {
		t.Fatalf("status %s", done.Status)
	}
}
