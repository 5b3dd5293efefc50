package storetest

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// Schedules checks host.Schedules: validation naming the field, names
// unique per tenant, lookups by id or name within a tenant, put, update,
// pause and resume, delete, the earliest next run, and firing: catch-up
// coalesced to one task per evaluation, each slot yielding one task even
// when firings race, each firing's events.
func Schedules(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"FireCoalescesCatchUp", schedulesFireCoalescesCatchUp},
		{"Validation", schedulesValidation},
		{"TenantsAndLookups", schedulesTenantsAndLookups},
		{"PutUpdateDelete", schedulesPutUpdateDelete},
		{"NextScheduleRun", schedulesNextScheduleRun},
		{"SlotFiresOnce", schedulesSlotFiresOnce},
	})
}

func scheduleSpec(name string, every int64) host.ScheduleSpec {
	return host.ScheduleSpec{Name: name, IntervalSeconds: every,
		Task: host.TaskIntent{TaskType: "demo.tick", Payload: json.RawMessage(`{"n":1}`)}}
}

func (f *fixture) createSchedule(spec host.ScheduleSpec) *host.RecurringSchedule {
	f.t.Helper()
	s, err := f.b.CreateSchedule(ctx, spec)
	if err != nil {
		f.t.Fatalf("create schedule: %v", err)
	}
	return s
}

func (f *fixture) fire(now time.Time) []*host.TaskRecord {
	f.t.Helper()
	got, err := f.b.FireDueSchedules(ctx, now)
	if err != nil {
		f.t.Fatalf("fire: %v", err)
	}
	return got
}

func schedulesFireCoalescesCatchUp(f *fixture) {
	t := f.t
	spec := scheduleSpec("tick", 60)
	spec.Tenant = "acme"
	s := f.createSchedule(spec)
	start := f.clock.Now()
	if s.ScheduleID == "" || !s.NextRunAt.Equal(start.Add(time.Minute)) || !s.Enabled || s.LastRunAt != nil || s.Tenant != "acme" ||
		s.IntervalSeconds != 60 || !s.CreatedAt.Equal(start) || s.Task.TaskType != "demo.tick" {
		t.Fatalf("new schedule %+v", s)
	}
	if got := f.fire(start.Add(59 * time.Second)); len(got) != 0 {
		t.Fatalf("fired early: %+v", got)
	}
	// Ten intervals missed: one task, for the first slot, and the next
	// run is one interval after the evaluation.
	eval := start.Add(10*time.Minute + 30*time.Second)
	got := f.fire(eval)
	if len(got) != 1 {
		t.Fatalf("catch-up fired %d tasks", len(got))
	}
	task := got[0]
	if want := host.ScheduleSource(s.ScheduleID, s.NextRunAt); task.Source != want || !task.AvailableAt.Equal(s.NextRunAt) ||
		task.Tenant != "acme" || task.TaskType != "demo.tick" || task.Status != host.TaskPending || string(task.Payload) != `{"n":1}` {
		t.Fatalf("task %+v, want source %q available at %v", task, want, s.NextRunAt)
	}
	if stored := f.task(task.TaskID); !reflect.DeepEqual(stored, task) {
		t.Fatalf("stored task differs:\n%+v\n%+v", stored, task)
	}
	again, err := f.b.Schedule(ctx, "acme", "tick")
	if err != nil {
		t.Fatal(err)
	}
	if !again.NextRunAt.Equal(eval.Add(time.Minute)) || again.LastRunAt == nil || !again.LastRunAt.Equal(eval) {
		t.Fatalf("after firing: next %v last %v", again.NextRunAt, again.LastRunAt)
	}
	// The same evaluation again creates nothing.
	if got := f.fire(eval); len(got) != 0 {
		t.Fatalf("second evaluation created %d tasks", len(got))
	}
	f.wantTypes("the schedule's task", f.eventTypes(task.TaskID), host.EventTaskEnqueued, host.EventScheduleTaskCreated)
	evs := f.events(host.EventFilter{Type: host.EventScheduleTaskCreated})
	if d := eventData(t, evs[0]); d["schedule_id"] != s.ScheduleID || d["slot"] == nil {
		t.Fatalf("schedule_task_created %s", evs[0].Data)
	}
	// The next slot fires one more.
	if got := f.fire(eval.Add(time.Minute)); len(got) != 1 || got[0].Source != host.ScheduleSource(s.ScheduleID, eval.Add(time.Minute)) {
		t.Fatalf("next slot: %+v", got)
	}
	// Paused: never due, not reported by NextScheduleRun.
	off := false
	if _, err := f.b.UpdateSchedule(ctx, "acme", s.ScheduleID, host.ScheduleUpdate{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	if got := f.fire(eval.Add(time.Hour)); len(got) != 0 {
		t.Fatal("a paused schedule fired")
	}
	if _, ok, err := f.b.NextScheduleRun(ctx); err != nil || ok {
		t.Fatalf("NextScheduleRun reports a paused schedule (%v)", err)
	}
	if n := len(f.tasks(host.TaskFilter{})); n != 2 {
		t.Fatalf("%d tasks, want 2", n)
	}
}

func schedulesValidation(f *fixture) {
	t := f.t
	for _, c := range []struct {
		field string
		spec  func(*host.ScheduleSpec)
	}{
		{"name", func(s *host.ScheduleSpec) { s.Name = "" }},
		{"interval_seconds", func(s *host.ScheduleSpec) { s.IntervalSeconds = 0 }},
		{"interval_seconds", func(s *host.ScheduleSpec) { s.IntervalSeconds = host.MaxIntervalSeconds + 1 }},
		{"tenant", func(s *host.ScheduleSpec) { s.Tenant = "Bad Tenant" }},
		{"task.task_type", func(s *host.ScheduleSpec) { s.Task.TaskType = "" }},
		{"task.payload", func(s *host.ScheduleSpec) { s.Task.Payload = json.RawMessage(`[1]`) }},
		{"task.source", func(s *host.ScheduleSpec) { s.Task.Source = "operator" }},
		{"task.available_at", func(s *host.ScheduleSpec) { s.Task.AvailableAt = "2026-01-01T00:00:00Z" }},
	} {
		spec := scheduleSpec("x", 5)
		c.spec(&spec)
		_, err := f.b.CreateSchedule(ctx, spec)
		wantField(t, err, c.field)
		_, err = f.b.PutSchedule(ctx, spec)
		wantField(t, err, c.field)
	}
	if l, err := f.b.ListSchedules(ctx, ""); err != nil || len(l) != 0 {
		t.Fatalf("invalid specs stored %d schedules (%v)", len(l), err)
	}
	s := f.createSchedule(scheduleSpec("x", 5))
	_, err := f.b.CreateSchedule(ctx, scheduleSpec("x", 7))
	wantErr(t, err, host.ErrConflict)
	bad := int64(0)
	_, err = f.b.UpdateSchedule(ctx, "", s.ScheduleID, host.ScheduleUpdate{IntervalSeconds: &bad})
	wantField(t, err, "interval_seconds")
	_, err = f.b.UpdateSchedule(ctx, "", s.ScheduleID, host.ScheduleUpdate{Task: &host.TaskIntent{TaskType: "t", Payload: json.RawMessage(`1`)}})
	wantField(t, err, "task.payload")
	if got, _ := f.b.Schedule(ctx, "", "x"); got.IntervalSeconds != 5 {
		t.Fatalf("a refused update changed the schedule: %+v", got)
	}
	if n := f.countEvents()[host.EventScheduleUpserted]; n != 1 {
		t.Fatalf("%d schedule_upserted events, want 1", n)
	}
}

func schedulesTenantsAndLookups(f *fixture) {
	t := f.t
	mine := f.createSchedule(scheduleSpec("x", 5))
	if mine.Tenant != host.DefaultTenant {
		t.Fatalf("tenant %q", mine.Tenant)
	}
	// Another tenant may use the name; neither sees the other's.
	spec := scheduleSpec("x", 9)
	spec.Tenant = "acme"
	theirs := f.createSchedule(spec)
	if theirs.ScheduleID == mine.ScheduleID {
		t.Fatal("two tenants share a schedule")
	}
	for _, ref := range []string{"x", mine.ScheduleID} {
		got, err := f.b.Schedule(ctx, "", ref)
		if err != nil || got.ScheduleID != mine.ScheduleID {
			t.Fatalf("lookup %s: %+v %v", ref, got, err)
		}
		if got, err := f.b.Schedule(ctx, host.DefaultTenant, ref); err != nil || got.ScheduleID != mine.ScheduleID {
			t.Fatalf("lookup %s as default: %+v %v", ref, got, err)
		}
	}
	if got, err := f.b.Schedule(ctx, "acme", "x"); err != nil || got.ScheduleID != theirs.ScheduleID || got.IntervalSeconds != 9 {
		t.Fatalf("acme's: %+v %v", got, err)
	}
	for _, c := range []struct{ tenant, ref string }{{"acme", mine.ScheduleID}, {"bob", "x"}, {"", theirs.ScheduleID}, {"", "nope"}} {
		_, err := f.b.Schedule(ctx, c.tenant, c.ref)
		wantErr(t, err, host.ErrNotFound)
		_, err = f.b.UpdateSchedule(ctx, c.tenant, c.ref, host.ScheduleUpdate{})
		wantErr(t, err, host.ErrNotFound)
		wantErr(t, f.b.DeleteSchedule(ctx, c.tenant, c.ref), host.ErrNotFound)
	}
	a := scheduleSpec("a", 5)
	a.Tenant = "acme"
	f.createSchedule(a)
	names := func(tenant string) []string {
		l, err := f.b.ListSchedules(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range l {
			out = append(out, s.Tenant+"/"+s.Name)
		}
		return out
	}
	if got := names("acme"); !reflect.DeepEqual(got, []string{"acme/a", "acme/x"}) {
		t.Fatalf("acme's list %v", got)
	}
	if got := names(host.DefaultTenant); !reflect.DeepEqual(got, []string{"default/x"}) {
		t.Fatalf("default's list %v", got)
	}
	if got := names(""); len(got) != 3 || got[0] != "acme/a" {
		t.Fatalf("everyone's list %v", got)
	}
	if got := names("bob"); len(got) != 0 {
		t.Fatalf("bob's list %v", got)
	}
}

func schedulesPutUpdateDelete(f *fixture) {
	t := f.t
	first, err := f.b.PutSchedule(ctx, scheduleSpec("x", 5))
	if err != nil || !first.Enabled {
		t.Fatalf("put creates: %+v %v", first, err)
	}
	// The same spec again writes nothing.
	before := f.countEvents()[host.EventScheduleUpserted]
	if same, err := f.b.PutSchedule(ctx, scheduleSpec("x", 5)); err != nil || same.ScheduleID != first.ScheduleID {
		t.Fatalf("put again: %+v %v", same, err)
	}
	if n := f.countEvents()[host.EventScheduleUpserted]; n != before {
		t.Fatalf("an unchanged put appended %d schedule_upserted events", n-before)
	}
	// A new interval keeps the id and moves the next run.
	f.clock.Add(2 * time.Second)
	put, err := f.b.PutSchedule(ctx, scheduleSpec("x", 9))
	if err != nil || put.ScheduleID != first.ScheduleID || put.IntervalSeconds != 9 || !put.NextRunAt.Equal(f.clock.Now().Add(9*time.Second)) {
		t.Fatalf("put replaces: %+v %v", put, err)
	}
	// Pause, then resume: due one interval after resuming, not caught up.
	off, on := false, true
	if got, err := f.b.UpdateSchedule(ctx, "", "x", host.ScheduleUpdate{Enabled: &off}); err != nil || got.Enabled {
		t.Fatalf("pause: %+v %v", got, err)
	}
	f.clock.Add(time.Hour)
	got, err := f.b.UpdateSchedule(ctx, "", first.ScheduleID, host.ScheduleUpdate{Enabled: &on})
	if err != nil || !got.Enabled || !got.NextRunAt.Equal(f.clock.Now().Add(9*time.Second)) {
		t.Fatalf("resume: %+v %v", got, err)
	}
	task := host.TaskIntent{TaskType: "demo.other", Payload: json.RawMessage(`{"m":2}`)}
	if got, err := f.b.UpdateSchedule(ctx, "", "x", host.ScheduleUpdate{Task: &task}); err != nil || got.Task.TaskType != "demo.other" || got.IntervalSeconds != 9 {
		t.Fatalf("new task: %+v %v", got, err)
	}
	fired := f.fire(f.clock.Now().Add(9 * time.Second))
	if len(fired) != 1 || fired[0].TaskType != "demo.other" || string(fired[0].Payload) != `{"m":2}` {
		t.Fatalf("fired %+v", fired)
	}
	// Delete: gone, its task stays.
	if err := f.b.DeleteSchedule(ctx, "", "x"); err != nil {
		t.Fatal(err)
	}
	_, err = f.b.Schedule(ctx, "", first.ScheduleID)
	wantErr(t, err, host.ErrNotFound)
	if _, err := f.b.Task(ctx, fired[0].TaskID); err != nil {
		t.Fatalf("the task of a deleted schedule: %v", err)
	}
	var changes []string
	for _, e := range f.events(host.EventFilter{Type: host.EventScheduleUpserted}) {
		if d := eventData(t, e); d["schedule_id"] == first.ScheduleID {
			changes = append(changes, d["change"].(string))
		}
	}
	if want := []string{"created", "updated", "paused", "resumed", "updated", "deleted"}; !reflect.DeepEqual(changes, want) {
		t.Fatalf("schedule_upserted changes %v, want %v", changes, want)
	}
	if got := f.fire(f.clock.Now().Add(24 * time.Hour)); len(got) != 0 {
		t.Fatal("a deleted schedule fired")
	}
}

func schedulesNextScheduleRun(f *fixture) {
	t := f.t
	if _, ok, err := f.b.NextScheduleRun(ctx); err != nil || ok {
		t.Fatalf("no schedules: ok=%v %v", ok, err)
	}
	now := f.clock.Now()
	f.createSchedule(scheduleSpec("slow", 600))
	fast := scheduleSpec("fast", 30)
	fast.Tenant = "acme"
	f.createSchedule(fast)
	next, ok, err := f.b.NextScheduleRun(ctx)
	if err != nil || !ok || !next.Equal(now.Add(30*time.Second)) {
		t.Fatalf("next %v %v %v", next, ok, err)
	}
	f.fire(now.Add(45 * time.Second))
	if next, _, _ = f.b.NextScheduleRun(ctx); !next.Equal(now.Add(75 * time.Second)) {
		t.Fatalf("after firing: next %v", next)
	}
}

// Firings racing at the same instants create one task per slot.
func schedulesSlotFiresOnce(f *fixture) { raceScheduleSlots(f, repeat(f.b, 3)) }
