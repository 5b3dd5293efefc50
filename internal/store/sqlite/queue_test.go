package sqlite

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

func TestEnqueueValidation(t *testing.T) {
	f := newFixture(t, Options{})
	base := func() host.TaskIntent { return intent("demo", nil) }
	tests := []struct {
		name  string
		edit  func(*host.TaskIntent)
		opts  host.EnqueueOptions
		field string
	}{
		{"task_type required", func(i *host.TaskIntent) { i.TaskType = "" }, host.EnqueueOptions{}, "task_type"},
		{"task_type charset", func(i *host.TaskIntent) { i.TaskType = "two words" }, host.EnqueueOptions{}, "task_type"},
		{"source required", func(i *host.TaskIntent) { i.Source = "" }, host.EnqueueOptions{}, "source"},
		{"payload missing", func(i *host.TaskIntent) { i.Payload = nil }, host.EnqueueOptions{}, "payload"},
		{"payload array", func(i *host.TaskIntent) { i.Payload = json.RawMessage(`[1]`) }, host.EnqueueOptions{}, "payload"},
		{"payload null", func(i *host.TaskIntent) { i.Payload = json.RawMessage(`null`) }, host.EnqueueOptions{}, "payload"},
		{"payload invalid", func(i *host.TaskIntent) { i.Payload = json.RawMessage(`{"a":`) }, host.EnqueueOptions{}, "payload"},
		{"negative delay", func(i *host.TaskIntent) { i.Schedule = &host.Schedule{DelayMinutes: -1} }, host.EnqueueOptions{}, "schedule.delay_minutes"},
		{"delay and available_at", func(i *host.TaskIntent) {
			i.Schedule = &host.Schedule{DelayMinutes: 1}
			i.AvailableAt = "2026-01-01T00:00:00Z"
		}, host.EnqueueOptions{}, "available_at"},
		{"available_at format", func(i *host.TaskIntent) { i.AvailableAt = "tomorrow" }, host.EnqueueOptions{}, "available_at"},
		{"workflow_ref incomplete", func(i *host.TaskIntent) { i.WorkflowRef = &host.WorkflowRef{WorkflowID: "w"} }, host.EnqueueOptions{}, "workflow_ref"},
		{"required artifact empty", func(i *host.TaskIntent) {
			i.EvidenceRequirements = &host.EvidenceRequirements{RequiredArtifacts: []string{""}}
		}, host.EnqueueOptions{}, "evidence_requirements.required_artifacts[0]"},
		{"max_attempts", func(*host.TaskIntent) {}, host.EnqueueOptions{MaxAttempts: -1}, "max_attempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			tt.edit(&in)
			_, err := f.Enqueue(ctx, in, tt.opts)
			wantErr(t, err, host.ErrValidation)
			he := err.(*host.Error)
			if he.Field != tt.field || he.Op != "enqueue" || !strings.HasPrefix(err.Error(), "enqueue: "+tt.field+": ") {
				t.Fatalf("error %q (field %q), want field %q", err, he.Field, tt.field)
			}
		})
	}
	if n, _ := f.ListTasks(ctx, host.TaskFilter{}); len(n) != 0 {
		t.Fatal("a refused intent was stored")
	}
	big := base()
	big.Payload = json.RawMessage(`{"x":"` + strings.Repeat("a", host.MaxPayloadBytes) + `"}`)
	_, err := f.Enqueue(ctx, big, host.EnqueueOptions{})
	wantErr(t, err, host.ErrTooLarge)

	rec := mustEnqueue(t, f.Store, base(), host.EnqueueOptions{})
	if rec.Priority != host.DefaultPriority || rec.MaxAttempts != 3 || rec.Status != host.TaskPending || rec.AttemptCount != 0 {
		t.Fatalf("defaults: %+v", rec)
	}
	got, err := f.Task(ctx, rec.TaskID)
	if err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("stored record differs:\n%+v\n%+v", got, rec)
	}
	if ev := eventTypes(t, f.Store, rec.TaskID); !reflect.DeepEqual(ev, []string{host.EventTaskEnqueued}) {
		t.Fatal(ev)
	}
}

func TestQueueOrder(t *testing.T) {
	f := newFixture(t, Options{})
	now := f.clock.Now()
	type task struct {
		name  string
		prio  *int
		delay int // minutes
	}
	// Enqueued in this order; lower priority numbers run first, then the
	// earliest available_at, then enqueue order.
	tasks := []task{
		{"p5-a", nil, 0},
		{"p1-late", host.Priority(1), 10},
		{"p9", host.Priority(9), 0},
		{"p1-a", host.Priority(1), 0},
		{"p5-b", host.Priority(5), 0},
		{"p0", host.Priority(0), 0},
		{"p-3", host.Priority(-3), 5},
		{"p1-b", host.Priority(1), 0},
	}
	names := map[string]string{}
	for _, tk := range tasks {
		in := intent("demo", tk.prio)
		in.Subject = tk.name
		if tk.delay > 0 {
			in.Schedule = &host.Schedule{DelayMinutes: tk.delay}
		}
		rec := mustEnqueue(t, f.Store, in, host.EnqueueOptions{})
		names[rec.TaskID] = tk.name
	}
	claimAll := func(at time.Time) []string {
		var got []string
		for {
			rec, err := f.Claim(ctx, "r", at)
			if err != nil {
				wantErr(t, err, host.ErrEmpty)
				return got
			}
			got = append(got, names[rec.TaskID])
		}
	}
	if got, want := claimAll(now), []string{"p0", "p1-a", "p1-b", "p5-a", "p5-b", "p9"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("claims now: %v, want %v", got, want)
	}
	if got, want := claimAll(now.Add(10*time.Minute)), []string{"p-3", "p1-late"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("claims after 10m: %v, want %v", got, want)
	}
}

func TestDelay(t *testing.T) {
	f := newFixture(t, Options{})
	now := f.clock.Now()
	tests := []struct {
		name  string
		edit  func(*host.TaskIntent)
		avail time.Time
	}{
		{"delay_minutes", func(i *host.TaskIntent) { i.Schedule = &host.Schedule{DelayMinutes: 30} }, now.Add(30 * time.Minute)},
		{"available_at", func(i *host.TaskIntent) { i.AvailableAt = now.Add(2 * time.Hour).Format(time.RFC3339) }, now.Add(2 * time.Hour)},
		{"available_at with offset", func(i *host.TaskIntent) {
			i.AvailableAt = now.Add(time.Hour).In(time.FixedZone("x", 3600)).Format(time.RFC3339)
		}, now.Add(time.Hour)},
		{"available_at in the past", func(i *host.TaskIntent) { i.AvailableAt = now.Add(-time.Hour).Format(time.RFC3339) }, now.Add(-time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := intent("demo", nil)
			tt.edit(&in)
			rec := mustEnqueue(t, f.Store, in, host.EnqueueOptions{})
			if !rec.AvailableAt.Equal(tt.avail) {
				t.Fatalf("available_at %v, want %v", rec.AvailableAt, tt.avail)
			}
			if tt.avail.After(now) {
				_, err := f.Claim(ctx, "r", tt.avail.Add(-time.Nanosecond))
				wantErr(t, err, host.ErrEmpty)
			}
			got, err := f.Claim(ctx, "r", tt.avail)
			if err != nil || got.TaskID != rec.TaskID {
				t.Fatalf("claim at available_at: %v %v", got, err)
			}
		})
	}
}

// finishWith records an attempt for a claimed task and finishes it.
func finishWith(t *testing.T, f *fixture, task *host.TaskRecord, in host.FinishInput) *host.TaskRecord {
	t.Helper()
	a := attemptFor(t, f.Store, task)
	in.AttemptID = a.AttemptID
	rec, err := f.Finish(ctx, task.TaskID, in)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestRetriesUntilMaxAttempts(t *testing.T) {
	f := newFixture(t, Options{})
	rec := mustEnqueue(t, f.Store, intent("flaky", nil), host.EnqueueOptions{MaxAttempts: 3})
	retry := host.FinishInput{Outcome: host.TaskOutcome{MachineStatus: host.MachineNeedsRetry}, RetryClass: host.RetryRetryable, Error: "upstream 503"}
	for attempt := 1; attempt <= 3; attempt++ {
		task := mustClaim(t, f.Store, f.clock.Now())
		if task.TaskID != rec.TaskID || task.AttemptCount != attempt {
			t.Fatalf("attempt %d: claimed %+v", attempt, task)
		}
		done := finishWith(t, f, task, retry)
		if attempt < 3 {
			backoff := DefaultBackoff(attempt)
			if done.Status != host.TaskRetryableFailure || !done.AvailableAt.Equal(f.clock.Now().Add(backoff)) || done.LastError != "upstream 503" || done.FinishedAt != nil {
				t.Fatalf("attempt %d: %+v", attempt, done)
			}
			// Not available before its backoff has passed.
			_, err := f.Claim(ctx, "r", f.clock.Now().Add(backoff-time.Second))
			wantErr(t, err, host.ErrEmpty)
			f.clock.Add(backoff)
		} else if done.Status != host.TaskPermanentFailure || done.FinishedAt == nil || done.Outcome.Status != host.TaskPermanentFailure {
			t.Fatalf("after max attempts: %+v", done)
		}
	}
	_, err := f.Claim(ctx, "r", f.clock.Now().Add(time.Hour))
	wantErr(t, err, host.ErrEmpty)
	want := []string{"task_enqueued",
		"task_claimed", "attempt_recorded", "task_started", "task_attempt_finished", "task_retry_scheduled",
		"task_claimed", "attempt_recorded", "task_started", "task_attempt_finished", "task_retry_scheduled",
		"task_claimed", "attempt_recorded", "task_started", "task_attempt_finished", "task_finished"}
	if got := eventTypes(t, f.Store, rec.TaskID); !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n%v\nwant\n%v", got, want)
	}
}

func TestCancel(t *testing.T) {
	f := newFixture(t, Options{})
	pending := mustEnqueue(t, f.Store, intent("a", host.Priority(9)), host.EnqueueOptions{})
	c, err := f.Cancel(ctx, pending.TaskID)
	if err != nil || c.Status != host.TaskOperatorCanceled || c.FinishedAt == nil {
		t.Fatalf("cancel pending: %+v %v", c, err)
	}
	_, err = f.Claim(ctx, "r", f.clock.Now())
	wantErr(t, err, host.ErrEmpty)
	_, err = f.Cancel(ctx, pending.TaskID)
	wantErr(t, err, host.ErrConflict)

	// Retryable and blocked tasks cancel at once too.
	for _, ms := range []host.MachineStatus{host.MachineNeedsRetry, host.MachineBlocked} {
		mustEnqueue(t, f.Store, intent("b", nil), host.EnqueueOptions{})
		task := mustClaim(t, f.Store, f.clock.Now())
		finishWith(t, f, task, host.FinishInput{Outcome: host.TaskOutcome{MachineStatus: ms}})
		if c, err := f.Cancel(ctx, task.TaskID); err != nil || c.Status != host.TaskOperatorCanceled {
			t.Fatalf("cancel after %s: %+v %v", ms, c, err)
		}
	}

	// A running task is marked; the finish of its attempt cancels it.
	mustEnqueue(t, f.Store, intent("c", nil), host.EnqueueOptions{})
	running := mustClaim(t, f.Store, f.clock.Now())
	c, err = f.Cancel(ctx, running.TaskID)
	if err != nil || c.Status != host.TaskRunning || !c.CancelRequested {
		t.Fatalf("cancel running: %+v %v", c, err)
	}
	done := finishWith(t, f, running, host.FinishInput{Outcome: okOutcome()})
	if done.Status != host.TaskOperatorCanceled || done.LastError != "canceled by the operator" {
		t.Fatalf("finish after cancel request: %+v", done)
	}
	_, err = f.Cancel(ctx, done.TaskID)
	wantErr(t, err, host.ErrConflict)
	_, err = f.Cancel(ctx, "task-nope")
	wantErr(t, err, host.ErrNotFound)

	// A completed task cannot be canceled.
	mustEnqueue(t, f.Store, intent("d", nil), host.EnqueueOptions{})
	task := mustClaim(t, f.Store, f.clock.Now())
	finishWith(t, f, task, host.FinishInput{Outcome: okOutcome()})
	_, err = f.Cancel(ctx, task.TaskID)
	wantErr(t, err, host.ErrConflict)
}

func TestReclaimRunning(t *testing.T) {
	f := newFixture(t, Options{})
	fresh := mustEnqueue(t, f.Store, intent("fresh", host.Priority(1)), host.EnqueueOptions{MaxAttempts: 3})
	last := mustEnqueue(t, f.Store, intent("last", host.Priority(2)), host.EnqueueOptions{MaxAttempts: 1})
	canceled := mustEnqueue(t, f.Store, intent("canceled", host.Priority(3)), host.EnqueueOptions{})
	done := mustEnqueue(t, f.Store, intent("done", host.Priority(4)), host.EnqueueOptions{})
	waiting := mustEnqueue(t, f.Store, intent("waiting", host.Priority(5)), host.EnqueueOptions{})
	now := f.clock.Now()
	for range 4 {
		mustClaim(t, f.Store, now)
	}
	f.Cancel(ctx, canceled.TaskID)
	doneTask, _ := f.Task(ctx, done.TaskID)
	finishWith(t, f, doneTask, host.FinishInput{Outcome: okOutcome()})

	// "The process crashed": reopen the database and sweep.
	f.Close()
	s2, err := Open(ctx, f.path, Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	later := f.clock.Add(time.Minute)
	n, err := s2.ReclaimRunning(ctx, later)
	if err != nil || n != 3 {
		t.Fatalf("reclaimed %d, %v", n, err)
	}
	want := map[string]host.TaskStatus{
		fresh.TaskID: host.TaskRetryableFailure, last.TaskID: host.TaskPermanentFailure,
		canceled.TaskID: host.TaskOperatorCanceled, done.TaskID: host.TaskCompleted, waiting.TaskID: host.TaskPending,
	}
	for id, st := range want {
		got, _ := s2.Task(ctx, id)
		if got.Status != st {
			t.Errorf("%s: %s, want %s (%s)", got.TaskType, got.Status, st, got.LastError)
		}
	}
	got, _ := s2.Task(ctx, fresh.TaskID)
	if !got.AvailableAt.Equal(later) || !strings.Contains(got.LastError, "attempt 1 was interrupted") {
		t.Fatalf("reclaimed task: %+v", got)
	}
	if ev := eventTypes(t, s2, fresh.TaskID); ev[len(ev)-1] != host.EventBootSweepReclaimed {
		t.Fatal(ev)
	}
	// The sweep is idempotent, and the completed task never runs again.
	if n, _ := s2.ReclaimRunning(ctx, later); n != 0 {
		t.Fatalf("second sweep reclaimed %d", n)
	}
	for {
		task, err := s2.Claim(ctx, "r2", later.Add(time.Hour))
		if err != nil {
			break
		}
		if task.TaskID == done.TaskID {
			t.Fatal("completed task claimed again")
		}
		if task.TaskID == fresh.TaskID && task.AttemptCount != 2 {
			t.Fatalf("attempt count %d", task.AttemptCount)
		}
	}
}

func TestDispatchLock(t *testing.T) {
	f := newFixture(t, Options{})
	l, err := f.AcquireDispatchLock(ctx, "proc-a", time.Minute)
	if err != nil || l.Holder != "proc-a" || !l.ExpiresAt.Equal(f.clock.Now().Add(time.Minute)) {
		t.Fatalf("%+v %v", l, err)
	}
	_, err = f.AcquireDispatchLock(ctx, "proc-b", time.Minute)
	wantErr(t, err, host.ErrLocked)
	if !strings.Contains(err.Error(), "held by proc-a") {
		t.Fatal(err)
	}
	f.clock.Add(30 * time.Second)
	if l, err = f.AcquireDispatchLock(ctx, "proc-a", time.Minute); err != nil || !l.ExpiresAt.Equal(f.clock.Now().Add(time.Minute)) {
		t.Fatalf("renew: %+v %v", l, err)
	}
	wantErr(t, f.ReleaseDispatchLock(ctx, "proc-b"), host.ErrNotFound)
	f.clock.Add(2 * time.Minute) // proc-a died without releasing
	if l, err = f.AcquireDispatchLock(ctx, "proc-b", time.Minute); err != nil || l.Holder != "proc-b" {
		t.Fatalf("take over a stale lock: %+v %v", l, err)
	}
	if err := f.ReleaseDispatchLock(ctx, "proc-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AcquireDispatchLock(ctx, "proc-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	evs, _ := f.Events(ctx, host.EventFilter{})
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	want := []string{"dispatch_locked", "dispatch_lock_stale_cleared", "dispatch_locked", "dispatch_lock_released", "dispatch_locked"}
	if !reflect.DeepEqual(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	_, err = f.AcquireDispatchLock(ctx, "x", 0)
	wantErr(t, err, host.ErrValidation)
}

func TestTaskTypes(t *testing.T) {
	f := newFixture(t, Options{})
	route := func(tt, node string) host.TaskTypeRoute {
		return host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: tt, DefaultModel: "m"}, Node: node}
	}
	if err := f.SetPackTaskTypes(ctx, "vendor.acme.a", []host.TaskTypeRoute{route("summarize", "acme.sum"), route("translate", "acme.tr")}); err != nil {
		t.Fatal(err)
	}
	if err := f.SetPackTaskTypes(ctx, "vendor.other.b", []host.TaskTypeRoute{route("translate", "other.tr")}); err != nil {
		t.Fatal(err)
	}
	r, err := f.Resolve(ctx, "summarize")
	if err != nil || r.Pack != "vendor.acme.a" || r.Node != "acme.sum" || r.Origin != host.OriginManifest || r.DefaultModel != "m" {
		t.Fatalf("%+v %v", r, err)
	}
	_, err = f.Resolve(ctx, "translate")
	wantErr(t, err, host.ErrConflict)
	if !strings.Contains(err.Error(), "vendor.acme.a, vendor.other.b") {
		t.Fatal(err)
	}
	_, err = f.Resolve(ctx, "unknown")
	wantErr(t, err, host.ErrNotFound)

	// The operator override wins.
	if err := f.SetTaskTypeOverride(ctx, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "translate"}, Pack: "vendor.other.b", Node: "other.tr"}); err != nil {
		t.Fatal(err)
	}
	if r, err = f.Resolve(ctx, "translate"); err != nil || r.Pack != "vendor.other.b" || r.Origin != host.OriginOperator {
		t.Fatalf("%+v %v", r, err)
	}
	if err := f.SetTaskTypeOverride(ctx, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "summarize"}, Pack: "local.mine", Node: "mine.sum"}); err != nil {
		t.Fatal(err)
	}
	if r, _ = f.Resolve(ctx, "summarize"); r.Pack != "local.mine" {
		t.Fatal(r)
	}
	// Uninstalling a pack drops its routes; feeding the same routes again is a no-op.
	before, _ := f.Events(ctx, host.EventFilter{})
	f.SetPackTaskTypes(ctx, "vendor.other.b", []host.TaskTypeRoute{route("translate", "other.tr")})
	if after, _ := f.Events(ctx, host.EventFilter{}); len(after) != len(before) {
		t.Fatal("unchanged routes appended an event")
	}
	f.SetPackTaskTypes(ctx, "vendor.acme.a", nil)
	if err := f.RemoveTaskTypeOverride(ctx, "translate"); err != nil {
		t.Fatal(err)
	}
	if r, err = f.Resolve(ctx, "translate"); err != nil || r.Pack != "vendor.other.b" || r.Origin != host.OriginManifest {
		t.Fatalf("%+v %v", r, err)
	}
	wantErr(t, f.RemoveTaskTypeOverride(ctx, "translate"), host.ErrNotFound)
	all, _ := f.ListTaskTypes(ctx)
	if len(all) != 2 || all[0].TaskType != "summarize" || all[1].TaskType != "translate" {
		t.Fatalf("%+v", all)
	}
	err = f.SetPackTaskTypes(ctx, "p", []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: "bad type"}, Node: "n"}})
	wantErr(t, err, host.ErrValidation)
	err = f.SetPackTaskTypes(ctx, "p", []host.TaskTypeRoute{route("x", "n"), route("x", "m")})
	wantErr(t, err, host.ErrValidation)
}

// Finish can record the attempt it settles in the same write: both happen
// or neither does.
func TestFinishRecordsAttempt(t *testing.T) {
	newAttempt := func(task *host.TaskRecord) *host.Attempt {
		return &host.Attempt{TaskID: task.TaskID, Pack: "local.test@1.0.0", ModuleSHA256: "ab12", Node: "test.node",
			Attempt: task.AttemptCount, ABIVersion: "1.0", Input: task.Payload, Output: json.RawMessage(`{"ok":true}`), Outcome: abi.Completed}
	}
	f := newFixture(t, Options{})
	rec := mustEnqueue(t, f.Store, intent("demo", nil), host.EnqueueOptions{})
	task := mustClaim(t, f.Store, f.clock.Now())
	a := newAttempt(task)
	done, err := f.Finish(ctx, task.TaskID, host.FinishInput{Record: a, Outcome: okOutcome()})
	if err != nil || done.Status != host.TaskCompleted {
		t.Fatalf("%v %+v", err, done)
	}
	got, err := f.Attempt(ctx, a.AttemptID)
	if err != nil || got.ContentHash != a.ContentHash || got.EventSeq == 0 || got.EventSeq != a.EventSeq {
		t.Fatalf("attempt not recorded with the settlement: %v %+v", err, got)
	}
	want := []string{"task_enqueued", "task_claimed", "task_started", "attempt_recorded", "task_attempt_finished", "task_finished"}
	if got := eventTypes(t, f.Store, rec.TaskID); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}

	// A task that cannot be settled records nothing.
	late := newAttempt(task)
	_, err = f.Finish(ctx, task.TaskID, host.FinishInput{Record: late, Outcome: okOutcome()})
	wantErr(t, err, host.ErrConflict)
	if _, err := f.Attempt(ctx, late.AttemptID); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("attempt of an unsettled task was recorded: %v", err)
	}
	// Nor one that belongs to another task.
	mustEnqueue(t, f.Store, intent("demo", nil), host.EnqueueOptions{})
	task2 := mustClaim(t, f.Store, f.clock.Now())
	_, err = f.Finish(ctx, task2.TaskID, host.FinishInput{Record: newAttempt(task), Outcome: okOutcome()})
	wantErr(t, err, host.ErrValidation)

	// An attempt recorded before (a retried call) settles the task once.
	b := newAttempt(task2)
	if err := f.RecordAttempt(ctx, b); err != nil {
		t.Fatal(err)
	}
	again := newAttempt(task2)
	again.AttemptID, again.StartedAt, again.EndedAt = b.AttemptID, b.StartedAt, b.EndedAt
	done, err = f.Finish(ctx, task2.TaskID, host.FinishInput{Record: again, Outcome: okOutcome()})
	if err != nil || done.Status != host.TaskCompleted || again.EventSeq != b.EventSeq {
		t.Fatalf("%v %+v (event %d, first recorded at %d)", err, done, again.EventSeq, b.EventSeq)
	}
	// Different content under a recorded id is refused.
	mustEnqueue(t, f.Store, intent("demo", nil), host.EnqueueOptions{})
	task3 := mustClaim(t, f.Store, f.clock.Now())
	clash := newAttempt(task3)
	clash.AttemptID = b.AttemptID
	_, err = f.Finish(ctx, task3.TaskID, host.FinishInput{Record: clash, Outcome: okOutcome()})
	wantErr(t, err, host.ErrConflict)
	if rep, err := f.VerifyChain(ctx); err != nil || !rep.OK {
		t.Fatalf("chain: %v %+v", err, rep)
	}
}

// Resolve answers from a cache that another store on the same database
// (another process) invalidates by changing the routes.
func TestResolveCacheCoherentAcrossStores(t *testing.T) {
	a := newFixture(t, Options{})
	b := a.another(t)
	route := func(node string) []host.TaskTypeRoute {
		return []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: "sum"}, Node: node}}
	}
	resolve := func(s *Store) string {
		t.Helper()
		r, err := s.Resolve(ctx, "sum")
		if errors.Is(err, host.ErrNotFound) {
			return "<none>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return r.Pack + "/" + r.Node
	}
	expect := func(step, want string) {
		t.Helper()
		for i := 0; i < 2; i++ { // the second answer comes from the cache
			if got := resolve(a.Store); got != want {
				t.Fatalf("%s (read %d): %s, want %s", step, i, got, want)
			}
		}
	}
	expect("nothing installed", "<none>")
	if err := b.SetPackTaskTypes(ctx, "local.p", route("p.one")); err != nil {
		t.Fatal(err)
	}
	expect("installed elsewhere", "local.p/p.one")

	// The answer is cached: a change made behind the store's back (no
	// generation bump) is not seen until the cache's max age...
	if _, err := a.db.Exec(`UPDATE task_type_routes SET node = 'p.raw' WHERE task_type = 'sum'`); err != nil {
		t.Fatal(err)
	}
	expect("raw change, cached", "local.p/p.one")
	a.routes.maxAge = time.Millisecond
	time.Sleep(2 * time.Millisecond)
	expect("raw change, past max age", "local.p/p.raw")
	a.routes.maxAge = time.Hour

	// ...while every change through a store is seen at once.
	if err := b.SetTaskTypeOverride(ctx, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "sum"}, Pack: "local.q", Node: "q.sum"}); err != nil {
		t.Fatal(err)
	}
	expect("override set elsewhere", "local.q/q.sum")
	if err := b.RemoveTaskTypeOverride(ctx, "sum"); err != nil {
		t.Fatal(err)
	}
	expect("override removed elsewhere", "local.p/p.raw")
	if err := b.SetPackTaskTypes(ctx, "local.p", route("p.two")); err != nil {
		t.Fatal(err)
	}
	expect("reinstalled elsewhere", "local.p/p.two")
	if err := b.SetPackTaskTypes(ctx, "local.p", nil); err != nil {
		t.Fatal(err)
	}
	expect("uninstalled elsewhere", "<none>")
}
