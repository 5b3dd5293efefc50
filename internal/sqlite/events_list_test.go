package sqlite

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// task_started is appended with the settlement, carrying when the node
// started, before the attempt it describes.
func TestTaskStartedWithSettlement(t *testing.T) {
	f := newFixture(t, Options{})
	mustEnqueue(t, f.Store, intent("demo", nil), host.EnqueueOptions{})
	task := mustClaim(t, f.Store, f.clock.Now())
	a := attemptFor(t, f.Store, task)
	if _, err := f.Finish(ctx, task.TaskID, host.FinishInput{AttemptID: a.AttemptID, Outcome: okOutcome()}); err != nil {
		t.Fatal(err)
	}
	evs, err := f.Events(ctx, host.EventFilter{TaskID: task.TaskID, Type: host.EventTaskStarted})
	if err != nil || len(evs) != 1 {
		t.Fatalf("%v %v", err, evs)
	}
	var d struct {
		Attempt   int    `json:"attempt"`
		RunnerID  string `json:"runner_id"`
		StartedAt string `json:"started_at"`
	}
	if err := json.Unmarshal(evs[0].Data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Attempt != 1 || d.RunnerID != "runner-1" || d.StartedAt != ts(a.StartedAt) || evs[0].AttemptID != a.AttemptID {
		t.Fatalf("task_started %s (attempt started %s)", evs[0].Data, ts(a.StartedAt))
	}
}

func TestEventsByTenantAndSince(t *testing.T) {
	f := newFixture(t, Options{})
	mine := mustEnqueue(t, f.Store, intent("demo", nil), host.EnqueueOptions{Tenant: "acme"})
	f.clock.Add(time.Minute)
	theirs := mustEnqueue(t, f.Store, intent("demo", nil), host.EnqueueOptions{Tenant: "other"})
	if _, err := f.AcquireDispatchLock(ctx, "r1", time.Minute); err != nil {
		t.Fatal(err)
	}
	task := mustClaim(t, f.Store, f.clock.Now())
	if task.TaskID != mine.TaskID {
		t.Fatalf("claimed %s", task.TaskID)
	}
	a := &host.Attempt{TaskID: task.TaskID, Pack: "local.test@1.0.0", ModuleSHA256: "ab12", Node: "test.node", Tenant: "acme",
		Attempt: task.AttemptCount, ABIVersion: "1.0", Input: task.Payload, Output: json.RawMessage(`{}`), Outcome: "completed"}
	if _, err := f.Finish(ctx, task.TaskID, host.FinishInput{Record: a, Outcome: okOutcome()}); err != nil {
		t.Fatal(err)
	}

	tasksOf := func(evs []*host.Event) map[string]bool {
		m := map[string]bool{}
		for _, e := range evs {
			m[e.TaskID] = true
		}
		return m
	}
	evs, err := f.Events(ctx, host.EventFilter{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if got := tasksOf(evs); !reflect.DeepEqual(got, map[string]bool{mine.TaskID: true}) {
		t.Fatalf("tenant acme sees the events of %v", got)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if want := []string{"task_enqueued", "task_claimed", "task_started", "attempt_recorded", "task_attempt_finished", "task_finished"}; !reflect.DeepEqual(types, want) {
		t.Fatalf("types %v, want %v", types, want)
	}
	evs, err = f.Events(ctx, host.EventFilter{Tenant: "acme", Untied: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := tasksOf(evs); !reflect.DeepEqual(got, map[string]bool{mine.TaskID: true, "": true}) {
		t.Fatalf("tenant acme with untied events sees %v", got)
	}
	if evs, err := f.Events(ctx, host.EventFilter{Tenant: "other"}); err != nil || len(evs) != 1 || evs[0].TaskID != theirs.TaskID {
		t.Fatalf("tenant other: %v %v", err, evs)
	}

	// Since starts at the chain's position at that time.
	all, err := f.Events(ctx, host.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	since, err := f.Events(ctx, host.EventFilter{Since: f.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(since) != len(all)-1 || since[0].Seq != all[1].Seq {
		t.Fatalf("since the second enqueue: %d of %d events, first %+v", len(since), len(all), since[0])
	}
	if evs, err := f.Events(ctx, host.EventFilter{Since: f.clock.Now().Add(time.Second)}); err != nil || len(evs) != 0 {
		t.Fatalf("since later: %v %v", err, evs)
	}
	// AfterSeq pages on from there.
	page, err := f.Events(ctx, host.EventFilter{Since: f.clock.Now(), AfterSeq: since[2].Seq, Limit: 2})
	if err != nil || len(page) != 2 || page[0].Seq != since[3].Seq {
		t.Fatalf("page: %v %v", err, page)
	}
}
