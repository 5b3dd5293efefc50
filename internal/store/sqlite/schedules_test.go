package sqlite

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

func scheduleSpec(name string, every int64) host.ScheduleSpec {
	return host.ScheduleSpec{Name: name, IntervalSeconds: every,
		Task: host.TaskIntent{TaskType: "demo.tick", Payload: json.RawMessage(`{"n":1}`)}}
}

func TestScheduleCoalescesCatchUp(t *testing.T) {
	f := newFixture(t, Options{})
	s, err := f.CreateSchedule(ctx, scheduleSpec("tick", 60))
	if err != nil {
		t.Fatal(err)
	}
	start := f.clock.Now()
	if !s.NextRunAt.Equal(start.Add(time.Minute)) || !s.Enabled || s.LastRunAt != nil {
		t.Fatalf("new schedule %+v", s)
	}
	// Not due yet: nothing.
	if got, err := f.FireDueSchedules(ctx, start.Add(59*time.Second)); err != nil || len(got) != 0 {
		t.Fatalf("early fire: %v %v", got, err)
	}
	// Ten intervals missed: one task, for the first slot, and the next
	// run is one interval after the evaluation.
	eval := start.Add(10*time.Minute + 30*time.Second)
	got, err := f.FireDueSchedules(ctx, eval)
	if err != nil || len(got) != 1 {
		t.Fatalf("catch-up fire: %d tasks, %v", len(got), err)
	}
	task := got[0]
	if want := host.ScheduleSource(s.ScheduleID, s.NextRunAt); task.Source != want || !task.AvailableAt.Equal(s.NextRunAt) {
		t.Fatalf("task source %q available %v, want %q at %v", task.Source, task.AvailableAt, want, s.NextRunAt)
	}
	again, err := f.Schedule(ctx, "", "tick")
	if err != nil {
		t.Fatal(err)
	}
	if !again.NextRunAt.Equal(eval.Add(time.Minute)) || again.LastRunAt == nil || !again.LastRunAt.Equal(eval) {
		t.Fatalf("after fire: next %v last %v", again.NextRunAt, again.LastRunAt)
	}
	// The same evaluation again creates nothing.
	if got, _ := f.FireDueSchedules(ctx, eval); len(got) != 0 {
		t.Fatalf("second evaluation created %d tasks", len(got))
	}
	if types := eventTypes(t, f.Store, task.TaskID); strings.Join(types, ",") != "task_enqueued,schedule_task_created" {
		t.Fatalf("events of the task: %v", types)
	}
	// Paused: never due; resumed: due one interval after resuming.
	off := false
	if _, err := f.UpdateSchedule(ctx, "", s.ScheduleID, host.ScheduleUpdate{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.FireDueSchedules(ctx, eval.Add(time.Hour)); len(got) != 0 {
		t.Fatal("a paused schedule fired")
	}
	if _, ok, _ := f.NextScheduleRun(ctx); ok {
		t.Fatal("NextScheduleRun reports a paused schedule")
	}
}

func TestScheduleValidation(t *testing.T) {
	f := newFixture(t, Options{})
	bad := []struct {
		field string
		spec  func(*host.ScheduleSpec)
	}{
		{"name", func(s *host.ScheduleSpec) { s.Name = "" }},
		{"interval_seconds", func(s *host.ScheduleSpec) { s.IntervalSeconds = 0 }},
		{"task.task_type", func(s *host.ScheduleSpec) { s.Task.TaskType = "" }},
		{"task.payload", func(s *host.ScheduleSpec) { s.Task.Payload = json.RawMessage(`[1]`) }},
		{"task.source", func(s *host.ScheduleSpec) { s.Task.Source = "operator" }},
		{"task.available_at", func(s *host.ScheduleSpec) { s.Task.AvailableAt = "2026-01-01T00:00:00Z" }},
	}
	for _, c := range bad {
		spec := scheduleSpec("x", 5)
		c.spec(&spec)
		_, err := f.CreateSchedule(ctx, spec)
		he, ok := errors.AsType[*host.Error](err)
		if !ok || he.Field != c.field {
			t.Errorf("%s: error %v", c.field, err)
		}
	}
	if l, _ := f.ListSchedules(ctx, ""); len(l) != 0 {
		t.Fatalf("invalid specs stored %d schedules", len(l))
	}
	if _, err := f.CreateSchedule(ctx, scheduleSpec("x", 5)); err != nil {
		t.Fatal(err)
	}
	_, err := f.CreateSchedule(ctx, scheduleSpec("x", 7))
	wantErr(t, err, host.ErrConflict)
	// Another tenant may use the name; it does not see ours.
	other := scheduleSpec("x", 5)
	other.Tenant = "acme"
	if _, err := f.CreateSchedule(ctx, other); err != nil {
		t.Fatal(err)
	}
	_, err = f.Schedule(ctx, "bob", "x")
	wantErr(t, err, host.ErrNotFound)
	// PutSchedule replaces the interval and keeps the id.
	first, _ := f.Schedule(ctx, "", "x")
	put, err := f.PutSchedule(ctx, scheduleSpec("x", 9))
	if err != nil || put.ScheduleID != first.ScheduleID || put.IntervalSeconds != 9 {
		t.Fatalf("put: %+v %v", put, err)
	}
	if err := f.DeleteSchedule(ctx, "", "x"); err != nil {
		t.Fatal(err)
	}
	_, err = f.Schedule(ctx, "", first.ScheduleID)
	wantErr(t, err, host.ErrNotFound)
}

// TestScheduleSlotUniqueAcrossStores fires one schedule from two Store
// handles on one file at once, many times: every slot has one task.
func TestScheduleSlotUniqueAcrossStores(t *testing.T) {
	f := newFixture(t, Options{})
	other := f.another(t)
	if _, err := f.CreateSchedule(ctx, scheduleSpec("tick", 1)); err != nil {
		t.Fatal(err)
	}
	start := f.clock.Now()
	var mu sync.Mutex
	created := 0
	for i := 1; i <= 20; i++ {
		now := start.Add(time.Duration(i) * time.Second)
		var wg sync.WaitGroup
		for _, st := range []*Store{f.Store, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := st.FireDueSchedules(ctx, now)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				created += len(got)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	tasks, err := f.ListTasks(ctx, host.TaskFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, task := range tasks {
		if seen[task.Source] {
			t.Fatalf("two tasks for slot %s", task.Source)
		}
		seen[task.Source] = true
	}
	if created != len(tasks) || created == 0 {
		t.Fatalf("fire returned %d tasks, the queue has %d", created, len(tasks))
	}
}

// TestScheduleSlotConstraint: the slot's row alone refuses a second task,
// even when next_run_at was not advanced (as if a firing was replayed).
func TestScheduleSlotConstraint(t *testing.T) {
	f := newFixture(t, Options{})
	s, err := f.CreateSchedule(ctx, scheduleSpec("tick", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.FireDueSchedules(ctx, s.NextRunAt); err != nil || len(got) != 1 {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := f.db.Exec(`UPDATE schedules SET next_run_at = ? WHERE schedule_id = ?`, ts(s.NextRunAt), s.ScheduleID); err != nil {
		t.Fatal(err)
	}
	if got, err := f.FireDueSchedules(ctx, s.NextRunAt.Add(time.Second)); err != nil || len(got) != 0 {
		t.Fatalf("replayed slot: %v %v", got, err)
	}
	n := 0
	f.db.QueryRow(`SELECT COUNT(*) FROM tasks`).Scan(&n)
	if n != 1 {
		t.Fatalf("%d tasks", n)
	}
}

func TestParseEvery(t *testing.T) {
	for in, want := range map[string]int64{"1s": 1, "30s": 30, "5m": 300, "1h": 3600, "1h30m": 5400} {
		if got, err := host.ParseEvery(in); err != nil || got != want {
			t.Errorf("%s: %d %v", in, got, err)
		}
		if back := host.FormatEvery(want); back != in {
			t.Errorf("FormatEvery(%d) = %s", want, back)
		}
	}
	for _, in := range []string{"1.5s", "0s", "500ms", "-1s", "x", ""} {
		if _, err := host.ParseEvery(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
