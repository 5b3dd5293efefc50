package storetest

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

// Queue checks host.Queue: enqueue and its validation, claim order and
// availability, every way Finish settles a task (statuses, evidence
// requirements, refusals, follow-ups, the outbox), the operator controls
// (cancel, resume, retry), the boot sweep, listing and counting, and that
// concurrent claimers never share a task; with the events each write
// appends.
func Queue(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"EnqueueDefaults", queueEnqueueDefaults},
		{"EnqueueValidation", queueEnqueueValidation},
		{"ClaimOrder", queueClaimOrder},
		{"ClaimAvailability", queueClaimAvailability},
		{"ClaimEmpty", queueClaimEmpty},
		{"FinishStatuses", queueFinishStatuses},
		{"RetriesUntilMaxAttempts", queueRetriesUntilMaxAttempts},
		{"CompletionRequiresEvidence", queueCompletionRequiresEvidence},
		{"FinishRefusals", queueFinishRefusals},
		{"FinishWithoutAttempt", queueFinishWithoutAttempt},
		{"FinishRecordsAttempt", queueFinishRecordsAttempt},
		{"FinishWithClaimedRecord", queueFinishWithClaimedRecord},
		{"FinishFencesClaim", queueFinishFencesClaim},
		{"FollowUps", queueFollowUps},
		{"FollowUpsRefused", queueFollowUpsRefused},
		{"Outbox", queueOutbox},
		{"Cancel", queueCancel},
		{"Resume", queueResume},
		{"ResumeLimits", queueResumeLimits},
		{"Retry", queueRetry},
		{"ReclaimRunning", queueReclaimRunning},
		{"ListAndCount", queueListAndCount},
		{"TenantCounts", queueTenantCounts},
		{"ListPages", queueListPages},
		{"ConcurrentClaims", queueConcurrentClaims},
	})
}

func queueEnqueueDefaults(f *fixture) {
	t := f.t
	in := intent("demo", nil)
	in.Subject, in.SkillIDs = "s", []string{"k1"}
	rec := f.enqueue(in, host.EnqueueOptions{})
	now := f.clock.Now()
	if rec.TaskID == "" || rec.Priority != host.DefaultPriority || rec.MaxAttempts != host.DefaultMaxAttempts || rec.Status != host.TaskPending ||
		rec.AttemptCount != 0 || rec.Tenant != host.DefaultTenant || rec.Source != "test" || rec.Subject != "s" || string(rec.Payload) != `{"n":1}` ||
		!rec.AvailableAt.Equal(now) || !rec.CreatedAt.Equal(now) || rec.StartedAt != nil || rec.FinishedAt != nil || rec.Outcome != nil {
		t.Fatalf("defaults: %+v", rec)
	}
	got := f.task(rec.TaskID)
	if !reflect.DeepEqual(got, rec) {
		t.Fatalf("stored record differs from the one Enqueue returned:\n%+v\n%+v", got, rec)
	}
	evs := f.events(host.EventFilter{TaskID: rec.TaskID})
	if len(evs) != 1 || evs[0].Type != host.EventTaskEnqueued || evs[0].TaskID != rec.TaskID {
		t.Fatalf("events %+v", evs)
	}
	other := f.enqueue(intent("demo", host.Priority(2)), host.EnqueueOptions{MaxAttempts: 7, Tenant: "acme"})
	if other.TaskID == rec.TaskID || other.Priority != 2 || other.MaxAttempts != 7 || other.Tenant != "acme" {
		t.Fatalf("options: %+v", other)
	}
	_, err := f.b.Task(ctx, "task-nope")
	wantErr(t, err, host.ErrNotFound)
}

func queueEnqueueValidation(f *fixture) {
	t := f.t
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
		{"max_attempts too many", func(*host.TaskIntent) {}, host.EnqueueOptions{MaxAttempts: host.MaxMaxAttempts + 1}, "max_attempts"},
		{"tenant", func(*host.TaskIntent) {}, host.EnqueueOptions{Tenant: "Not A Tenant"}, "tenant"},
	}
	for _, tt := range tests {
		in := intent("demo", nil)
		tt.edit(&in)
		_, err := f.b.Enqueue(ctx, in, tt.opts)
		wantField(t, err, tt.field)
	}
	big := intent("demo", nil)
	big.Payload = json.RawMessage(`{"x":"` + strings.Repeat("a", host.MaxPayloadBytes) + `"}`)
	_, err := f.b.Enqueue(ctx, big, host.EnqueueOptions{})
	wantErr(t, err, host.ErrTooLarge)
	if n := f.tasks(host.TaskFilter{}); len(n) != 0 {
		t.Fatalf("refused intents stored %d tasks", len(n))
	}
	if evs := f.events(host.EventFilter{}); len(evs) != 0 {
		t.Fatalf("refused intents appended events: %+v", evs)
	}
}

// claimAll claims every task available at at, returning their subjects.
func (f *fixture) claimAll(at time.Time) []string {
	f.t.Helper()
	var got []string
	for {
		rec, err := f.b.Claim(ctx, "r", at)
		if err != nil {
			wantErr(f.t, err, host.ErrEmpty)
			return got
		}
		got = append(got, rec.Subject)
	}
}

func queueClaimOrder(f *fixture) {
	t := f.t
	// Enqueued in this order, all at the same instant; lower priority
	// numbers run first, then the earliest available_at, then enqueue order.
	tasks := []struct {
		name  string
		prio  *int
		delay int // minutes
	}{
		{"p5-a", nil, 0}, {"p1-late", host.Priority(1), 10}, {"p9", host.Priority(9), 0}, {"p1-a", host.Priority(1), 0},
		{"p5-b", host.Priority(5), 0}, {"p0", host.Priority(0), 0}, {"p-3", host.Priority(-3), 5}, {"p1-b", host.Priority(1), 0},
		{"p5-c", nil, 0},
	}
	for _, tk := range tasks {
		in := intent("demo", tk.prio)
		in.Subject = tk.name
		if tk.delay > 0 {
			in.Schedule = &host.Schedule{DelayMinutes: tk.delay}
		}
		f.enqueue(in, host.EnqueueOptions{})
	}
	now := f.clock.Now()
	if got, want := f.claimAll(now), []string{"p0", "p1-a", "p1-b", "p5-a", "p5-b", "p5-c", "p9"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("claims now: %v, want %v", got, want)
	}
	if got, want := f.claimAll(now.Add(10*time.Minute)), []string{"p-3", "p1-late"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("claims after 10m: %v, want %v", got, want)
	}
	// Same priority: the earlier available_at first, whatever the order
	// of enqueueing.
	for _, d := range []int{3, 1, 2} {
		in := intent("demo", nil)
		in.Subject = "d" + string(rune('0'+d))
		in.AvailableAt = now.Add(time.Duration(d) * time.Minute).Format(time.RFC3339)
		f.enqueue(in, host.EnqueueOptions{})
	}
	if got, want := f.claimAll(now.Add(time.Hour)), []string{"d1", "d2", "d3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("claims by available_at: %v, want %v", got, want)
	}
}

func queueClaimAvailability(f *fixture) {
	t := f.t
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
		in := intent("demo", nil)
		tt.edit(&in)
		rec := f.enqueue(in, host.EnqueueOptions{})
		if !rec.AvailableAt.Equal(tt.avail) {
			t.Fatalf("%s: available_at %v, want %v", tt.name, rec.AvailableAt, tt.avail)
		}
		if tt.avail.After(now) {
			_, err := f.b.Claim(ctx, "r", tt.avail.Add(-time.Millisecond))
			wantErr(t, err, host.ErrEmpty)
		}
		got, err := f.b.Claim(ctx, "r", tt.avail)
		if err != nil || got.TaskID != rec.TaskID {
			t.Fatalf("%s: claim at available_at: %+v %v", tt.name, got, err)
		}
	}
}

func queueClaimEmpty(f *fixture) {
	t := f.t
	_, err := f.b.Claim(ctx, "runner-1", f.clock.Now())
	wantErr(t, err, host.ErrEmpty)
	rec := f.enqueue(intent("demo", nil), host.EnqueueOptions{})
	f.clock.Add(time.Second)
	task := f.claim()
	if task.TaskID != rec.TaskID || task.Status != host.TaskRunning || task.AttemptCount != 1 || task.RunnerID != "runner-1" {
		t.Fatalf("claimed %+v", task)
	}
	if got := f.task(rec.TaskID); got.Status != host.TaskRunning || got.AttemptCount != 1 || got.RunnerID != "runner-1" {
		t.Fatalf("stored after the claim: %+v", got)
	}
	// A running task is not available again.
	_, err = f.b.Claim(ctx, "runner-2", f.clock.Now().Add(time.Hour))
	wantErr(t, err, host.ErrEmpty)
	f.wantTypes("claimed task", f.eventTypes(rec.TaskID), host.EventTaskEnqueued, host.EventTaskClaimed)
	claimed := f.events(host.EventFilter{TaskID: rec.TaskID, Type: host.EventTaskClaimed})
	if d := eventData(t, claimed[0]); d["runner_id"] != "runner-1" {
		t.Fatalf("task_claimed data %s", claimed[0].Data)
	}
}

func queueFinishStatuses(f *fixture) {
	t := f.t
	tests := []struct {
		name   string
		ms     host.MachineStatus
		rc     host.RetryClass
		maxAtt int
		want   host.TaskStatus
		last   string
		final  string // the last event of the settlement
	}{
		{"ok", host.MachineOK, "", 3, host.TaskCompleted, "", host.EventTaskFinished},
		{"ok with retry class permanent is still ok", host.MachineOK, host.RetryPermanent, 3, host.TaskCompleted, "", host.EventTaskFinished},
		{"needs_retry", host.MachineNeedsRetry, "", 3, host.TaskRetryableFailure, "e", host.EventTaskRetryScheduled},
		{"needs_retry but permanent", host.MachineNeedsRetry, host.RetryPermanent, 3, host.TaskPermanentFailure, "e", host.EventTaskFinished},
		{"needs_retry on the last attempt", host.MachineNeedsRetry, "", 1, host.TaskPermanentFailure, "e", host.EventTaskFinished},
		{"failed", host.MachineFailed, "", 3, host.TaskPermanentFailure, "e", host.EventTaskFinished},
		{"failed but retryable", host.MachineFailed, host.RetryRetryable, 3, host.TaskRetryableFailure, "e", host.EventTaskRetryScheduled},
		{"blocked", host.MachineBlocked, "", 3, host.TaskBlocked, "e", host.EventTaskFinished},
		{"canceled", host.MachineCanceled, "", 3, host.TaskOperatorCanceled, "e", host.EventTaskFinished},
	}
	for i, tt := range tests {
		in := intent("demo", host.Priority(i)) // claimed in this order
		in.Subject = tt.name
		f.enqueue(in, host.EnqueueOptions{MaxAttempts: tt.maxAtt})
	}
	for _, tt := range tests {
		task := f.claim()
		if task.Subject != tt.name {
			t.Fatalf("claimed %q, want %q", task.Subject, tt.name)
		}
		f.clock.Add(1500 * time.Millisecond)
		rec := f.finish(task, host.FinishInput{Outcome: host.TaskOutcome{MachineStatus: tt.ms}, RetryClass: tt.rc, Error: "e"})
		if rec.Status != tt.want || rec.LastError != tt.last || rec.Outcome == nil || rec.Outcome.Status != tt.want {
			t.Fatalf("%s: status %s (%q), want %s (%q)", tt.name, rec.Status, rec.LastError, tt.want, tt.last)
		}
		// finished_at is set when the task is settled for good or blocked.
		if (rec.FinishedAt != nil) != (tt.want.Terminal() || tt.want == host.TaskBlocked) || rec.StartedAt == nil {
			t.Fatalf("%s: started_at %v finished_at %v with status %s", tt.name, rec.StartedAt, rec.FinishedAt, rec.Status)
		}
		if stored := f.task(task.TaskID); !reflect.DeepEqual(rec, stored) {
			t.Fatalf("%s: Finish returned\n%+v\nstored\n%+v", tt.name, rec, stored)
		}
		types := f.eventTypes(task.TaskID)
		f.wantTypes(tt.name, types, host.EventTaskEnqueued, host.EventTaskClaimed, host.EventAttemptRecorded, host.EventTaskStarted,
			host.EventTaskAttemptFinished, tt.final)
		if tt.final == host.EventTaskFinished {
			evs := f.events(host.EventFilter{TaskID: task.TaskID, Type: host.EventTaskFinished})
			if d := eventData(t, evs[0]); d["status"] != string(tt.want) {
				t.Fatalf("%s: task_finished data %s", tt.name, evs[0].Data)
			}
		}
	}
}

func queueRetriesUntilMaxAttempts(f *fixture) {
	t := f.t
	rec := f.enqueue(intent("flaky", nil), host.EnqueueOptions{MaxAttempts: 3})
	retry := host.FinishInput{Outcome: host.TaskOutcome{MachineStatus: host.MachineNeedsRetry}, RetryClass: host.RetryRetryable, Error: "upstream 503"}
	for attempt := 1; attempt <= 3; attempt++ {
		task := f.claim()
		if task.TaskID != rec.TaskID || task.AttemptCount != attempt {
			t.Fatalf("attempt %d: claimed %+v", attempt, task)
		}
		done := f.finish(task, retry)
		if attempt == 3 {
			if done.Status != host.TaskPermanentFailure || done.FinishedAt == nil || done.Outcome.Status != host.TaskPermanentFailure {
				t.Fatalf("after max attempts: %+v", done)
			}
			break
		}
		// Available again after a backoff (its length is the backend's).
		now := f.clock.Now()
		if done.Status != host.TaskRetryableFailure || !done.AvailableAt.After(now) || done.LastError != "upstream 503" || done.FinishedAt != nil {
			t.Fatalf("attempt %d: %+v", attempt, done)
		}
		_, err := f.b.Claim(ctx, "r", done.AvailableAt.Add(-time.Millisecond))
		wantErr(t, err, host.ErrEmpty)
		f.clock.Set(done.AvailableAt)
	}
	_, err := f.b.Claim(ctx, "r", f.clock.Now().Add(24*time.Hour))
	wantErr(t, err, host.ErrEmpty)
	f.wantTypes("three attempts", f.eventTypes(rec.TaskID), "task_enqueued",
		"task_claimed", "attempt_recorded", "task_started", "task_attempt_finished", "task_retry_scheduled",
		"task_claimed", "attempt_recorded", "task_started", "task_attempt_finished", "task_retry_scheduled",
		"task_claimed", "attempt_recorded", "task_started", "task_attempt_finished", "task_finished")
	if n, err := f.b.CountAttempts(ctx, host.AttemptFilter{TaskID: rec.TaskID}); err != nil || n != 3 {
		t.Fatalf("attempts of the task: %d %v", n, err)
	}
}

func queueCompletionRequiresEvidence(f *fixture) {
	t := f.t
	tests := []struct {
		name    string
		req     *host.EvidenceRequirements
		put     []host.ArtifactInput // AttemptID "" means the finishing attempt
		paths   []string
		changes []string
		want    host.TaskStatus
		missing string
	}{
		{"nothing required", nil, nil, nil, nil, host.TaskCompleted, ""},
		{"required artifact present by name", &host.EvidenceRequirements{RequiredArtifacts: []string{"report.md"}},
			[]host.ArtifactInput{{Role: host.RoleOutput, Name: "report.md"}}, nil, nil, host.TaskCompleted, ""},
		{"required artifact present by role", &host.EvidenceRequirements{RequiredArtifacts: []string{"verify-report"}},
			[]host.ArtifactInput{{Role: host.RoleVerifyReport, Name: "v.json"}}, nil, nil, host.TaskCompleted, ""},
		{"required artifact missing", &host.EvidenceRequirements{RequiredArtifacts: []string{"report.md", "plan"}},
			[]host.ArtifactInput{{Role: host.RolePlan, Name: "p.md"}}, nil, nil, host.TaskRetryableFailure, "missing evidence: required artifact report.md"},
		{"artifact of another attempt does not count", &host.EvidenceRequirements{RequiredArtifacts: []string{"report.md"}},
			[]host.ArtifactInput{{Role: host.RoleOutput, Name: "report.md", AttemptID: "other"}}, nil, nil, host.TaskRetryableFailure, "missing evidence: required artifact report.md"},
		{"artifact_paths must resolve", nil, []host.ArtifactInput{{Role: host.RoleOutput, Name: "a.txt"}}, []string{"a.txt", "b.txt"}, nil,
			host.TaskRetryableFailure, "missing evidence: artifact path b.txt"},
		{"adapter audit", &host.EvidenceRequirements{RequireAdapterAudit: true}, nil, nil, nil, host.TaskRetryableFailure, "missing evidence: adapter-audit artifact"},
		{"adapter audit present", &host.EvidenceRequirements{RequireAdapterAudit: true},
			[]host.ArtifactInput{{Role: host.RoleAdapterAudit, Name: "audit.json"}}, nil, nil, host.TaskCompleted, ""},
		{"file changes", &host.EvidenceRequirements{RequireFileChangeVerification: true},
			[]host.ArtifactInput{{Role: host.RoleSnapshot, Name: "src/a.go"}}, nil, []string{"src/a.go", "src/b.go"}, host.TaskRetryableFailure, "missing evidence: file change src/b.go"},
	}
	for i, tt := range tests {
		in := intent("demo", host.Priority(i))
		in.EvidenceRequirements = tt.req
		rec := f.enqueue(in, host.EnqueueOptions{})
		task := f.claim()
		if task.TaskID != rec.TaskID {
			t.Fatalf("%s: claimed another task", tt.name)
		}
		a := f.record(task)
		var arts []*host.Artifact
		for _, p := range tt.put {
			p.TaskID = rec.TaskID
			if p.AttemptID == "" {
				p.AttemptID = a.AttemptID
			}
			p.Data = []byte("content of " + p.Name)
			art, err := f.b.PutArtifact(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			arts = append(arts, art)
		}
		out := okOutcome()
		out.ArtifactPaths, out.FileChanges = tt.paths, tt.changes
		done, err := f.b.Finish(ctx, rec.TaskID, host.FinishInput{AttemptID: a.AttemptID, Outcome: out})
		if err != nil {
			t.Fatal(err)
		}
		if done.Status != tt.want || done.LastError != tt.missing {
			t.Fatalf("%s: status %s %q, want %s %q", tt.name, done.Status, done.LastError, tt.want, tt.missing)
		}
		for _, art := range arts {
			got, err := f.b.Artifact(ctx, art.ArtifactID)
			if err != nil {
				t.Fatal(err)
			}
			verified := got.AttemptID == a.AttemptID && tt.want == host.TaskCompleted
			if (got.VerifiedAt != nil) != verified {
				t.Fatalf("%s: artifact %s verified_at %v with status %s", tt.name, got.RelativePath, got.VerifiedAt, done.Status)
			}
		}
	}
}

func queueFinishRefusals(f *fixture) {
	t := f.t
	rec := f.enqueue(intent("demo", nil), host.EnqueueOptions{})
	// Not running yet.
	early := f.record(&host.TaskRecord{TaskID: rec.TaskID, AttemptCount: 1, Payload: rec.Payload})
	_, err := f.b.Finish(ctx, rec.TaskID, host.FinishInput{AttemptID: early.AttemptID, Outcome: okOutcome()})
	wantErr(t, err, host.ErrConflict)

	task := f.claim()
	stranger := f.record(&host.TaskRecord{TaskID: "someone-else", AttemptCount: 1, Payload: rec.Payload})
	before := len(f.events(host.EventFilter{}))
	for _, tt := range []struct {
		name string
		id   string
		in   host.FinishInput
		kind error
	}{
		{"unrecorded attempt", task.TaskID, host.FinishInput{AttemptID: "att-nope", Outcome: okOutcome()}, host.ErrValidation},
		{"another task's attempt", task.TaskID, host.FinishInput{AttemptID: stranger.AttemptID, Outcome: okOutcome()}, host.ErrValidation},
		{"bad machine status", task.TaskID, host.FinishInput{AttemptID: early.AttemptID, Outcome: host.TaskOutcome{MachineStatus: "great"}}, host.ErrValidation},
		{"bad retry class", task.TaskID, host.FinishInput{AttemptID: early.AttemptID, Outcome: okOutcome(), RetryClass: "x"}, host.ErrValidation},
		{"unknown task", "task-nope", host.FinishInput{AttemptID: early.AttemptID, Outcome: okOutcome()}, host.ErrNotFound},
	} {
		_, err := f.b.Finish(ctx, tt.id, tt.in)
		if !errors.Is(err, tt.kind) {
			t.Fatalf("%s: %v, want %v", tt.name, err, tt.kind)
		}
	}
	if got := f.task(task.TaskID); got.Status != host.TaskRunning || !reflect.DeepEqual(got, task) {
		t.Fatalf("a refused finish changed the task: %+v", got)
	}
	if after := len(f.events(host.EventFilter{})); after != before {
		t.Fatalf("refused finishes appended %d events", after-before)
	}
	// A stale attempt (from an earlier claim) is refused once the task moved on.
	if n, err := f.b.ReclaimRunning(ctx, f.clock.Now()); err != nil || n != 1 {
		t.Fatalf("reclaim: %d %v", n, err)
	}
	task2 := f.claim()
	if task2.TaskID != task.TaskID || task2.AttemptCount != 2 {
		t.Fatalf("second claim %+v", task2)
	}
	_, err = f.b.Finish(ctx, task2.TaskID, host.FinishInput{AttemptID: early.AttemptID, Outcome: okOutcome()})
	wantErr(t, err, host.ErrConflict)
	if !strings.Contains(err.Error(), "is attempt 1 but the task is on attempt 2") {
		t.Fatalf("a stale attempt's refusal does not say why: %v", err)
	}
	done := f.finish(task2, host.FinishInput{Outcome: okOutcome()})
	if done.Status != host.TaskCompleted {
		t.Fatal(done.Status)
	}
	// A completed task can be finished no more.
	latest := f.record(task2)
	_, err = f.b.Finish(ctx, task2.TaskID, host.FinishInput{AttemptID: latest.AttemptID, Outcome: okOutcome()})
	wantErr(t, err, host.ErrConflict)
}

func queueFinishWithoutAttempt(f *fixture) {
	t := f.t
	tests := []struct {
		name string
		in   host.FinishInput
		want host.TaskStatus
		last string
	}{
		{"permanent", host.FinishInput{Outcome: host.TaskOutcome{MachineStatus: host.MachineFailed}, RetryClass: host.RetryPermanent, Error: "unknown task type"},
			host.TaskPermanentFailure, "unknown task type"},
		{"retryable", host.FinishInput{Outcome: host.TaskOutcome{MachineStatus: host.MachineNeedsRetry}, RetryClass: host.RetryRetryable, Error: "busy"},
			host.TaskRetryableFailure, "busy"},
		{"ok without evidence", host.FinishInput{Outcome: okOutcome(), FollowUps: []host.TaskIntent{intent("child", nil)}},
			host.TaskRetryableFailure, "missing evidence: recorded attempt"},
	}
	for i, tt := range tests {
		f.enqueue(intent("demo", host.Priority(i)), host.EnqueueOptions{})
		task := f.claim()
		rec, err := f.b.Finish(ctx, task.TaskID, tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != tt.want || rec.LastError != tt.last {
			t.Fatalf("%s: status %s (%s), want %s (%s)", tt.name, rec.Status, rec.LastError, tt.want, tt.last)
		}
	}
	if all := f.tasks(host.TaskFilter{}); len(all) != len(tests) {
		t.Fatal("follow-ups applied without an attempt")
	}
}

func queueFinishRecordsAttempt(f *fixture) {
	t := f.t
	rec := f.enqueue(intent("demo", nil), host.EnqueueOptions{})
	task := f.claim()
	a := newAttempt(task)
	done, err := f.b.Finish(ctx, task.TaskID, host.FinishInput{Record: a, Outcome: okOutcome()})
	if err != nil || done.Status != host.TaskCompleted {
		t.Fatalf("%v %+v", err, done)
	}
	got, err := f.b.Attempt(ctx, a.AttemptID)
	if err != nil || a.AttemptID == "" || got.ContentHash != a.ContentHash || got.EventSeq == 0 || got.EventSeq != a.EventSeq {
		t.Fatalf("attempt not recorded with the settlement: %v %+v", err, got)
	}
	f.wantTypes("settled with its record", f.eventTypes(rec.TaskID),
		"task_enqueued", "task_claimed", "task_started", "attempt_recorded", "task_attempt_finished", "task_finished")
	started := f.events(host.EventFilter{TaskID: rec.TaskID, Type: host.EventTaskStarted})
	if d := eventData(t, started[0]); started[0].AttemptID != a.AttemptID || d["attempt"] != 1.0 || d["runner_id"] != "runner-1" ||
		d["started_at"] != host.FormatTime(a.StartedAt) {
		t.Fatalf("task_started %s (attempt %s started at %s)", started[0].Data, a.AttemptID, host.FormatTime(a.StartedAt))
	}

	// A settle repeated after the task's own claim was settled is refused
	// and records nothing (a backend with leases records an attempt only
	// when the caller's claim was taken from it: see host.FinishInput).
	late := newAttempt(task)
	_, err = f.b.Finish(ctx, task.TaskID, host.FinishInput{Record: late, Outcome: okOutcome()})
	wantErr(t, err, host.ErrConflict)
	if again, err := f.b.Task(ctx, task.TaskID); err != nil || again.Status != host.TaskCompleted || again.AttemptCount != done.AttemptCount {
		t.Fatalf("a refused settlement changed the task: %+v %v", again, err)
	}
	if late.AttemptID != "" {
		if _, err := f.b.Attempt(ctx, late.AttemptID); !errors.Is(err, host.ErrNotFound) {
			t.Fatalf("attempt of an unsettled task was recorded: %v", err)
		}
	}
	if n, _ := f.b.CountAttempts(ctx, host.AttemptFilter{}); n != 1 {
		t.Fatalf("%d attempts recorded, want 1", n)
	}
	// Nor one that belongs to another task.
	f.enqueue(intent("demo", nil), host.EnqueueOptions{})
	task2 := f.claim()
	_, err = f.b.Finish(ctx, task2.TaskID, host.FinishInput{Record: newAttempt(task), Outcome: okOutcome()})
	wantErr(t, err, host.ErrValidation)

	// An attempt recorded before (a retried call) settles the task once.
	b := newAttempt(task2)
	if err := f.b.RecordAttempt(ctx, b); err != nil {
		t.Fatal(err)
	}
	again := newAttempt(task2)
	again.AttemptID, again.StartedAt, again.EndedAt = b.AttemptID, b.StartedAt, b.EndedAt
	done, err = f.b.Finish(ctx, task2.TaskID, host.FinishInput{Record: again, Outcome: okOutcome()})
	if err != nil || done.Status != host.TaskCompleted || again.EventSeq != b.EventSeq {
		t.Fatalf("%v %+v (event %d, first recorded at %d)", err, done, again.EventSeq, b.EventSeq)
	}
	// The bundle the attempt ran as is chained just before it.
	f.enqueue(intent("demo", nil), host.EnqueueOptions{})
	task4 := f.claim()
	withBundle := newAttempt(task4)
	if _, err := f.b.Finish(ctx, task4.TaskID, host.FinishInput{Record: withBundle, Outcome: okOutcome(), Bundle: json.RawMessage(`{"bundle_hash":"sha256:ab"}`)}); err != nil {
		t.Fatal(err)
	}
	f.wantTypes("settled with its bundle", f.eventTypes(task4.TaskID), "task_enqueued", "task_claimed", "bundle_compiled", "task_started",
		"attempt_recorded", "task_attempt_finished", "task_finished")
	if bc := f.events(host.EventFilter{TaskID: task4.TaskID, Type: host.EventBundleCompiled}); bc[0].AttemptID != withBundle.AttemptID ||
		eventData(t, bc[0])["bundle_hash"] != "sha256:ab" {
		t.Fatalf("bundle_compiled %+v", bc[0])
	}
	// Different content under a recorded id is refused.
	f.enqueue(intent("demo", nil), host.EnqueueOptions{})
	task3 := f.claim()
	clash := newAttempt(task3)
	clash.AttemptID = b.AttemptID
	_, err = f.b.Finish(ctx, task3.TaskID, host.FinishInput{Record: clash, Outcome: okOutcome()})
	wantErr(t, err, host.ErrConflict)
	if got := f.task(task3.TaskID); got.Status != host.TaskRunning {
		t.Fatalf("a refused settlement changed the task: %s", got.Status)
	}
}

func queueFinishWithClaimedRecord(f *fixture) {
	t := f.t
	in := intent("demo", nil)
	in.SkillIDs = []string{"s1"}
	in.EvidenceRequirements = &host.EvidenceRequirements{RequiredArtifacts: []string{"report.md"}}
	f.enqueue(in, host.EnqueueOptions{})
	claimed := f.claim()
	// Changed since the claim: the operator asked to cancel it.
	f.clock.Add(time.Second)
	if _, err := f.b.Cancel(ctx, claimed.TaskID); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(time.Second)
	rec, err := f.b.Finish(ctx, claimed.TaskID, host.FinishInput{Record: newAttempt(claimed), Claimed: claimed, Outcome: okOutcome()})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != host.TaskOperatorCanceled {
		t.Fatalf("status %s: the cancel request made after the claim was not read", rec.Status)
	}
	if stored := f.task(claimed.TaskID); !reflect.DeepEqual(rec, stored) {
		t.Fatalf("Finish returned\n%+v\nstored\n%+v", rec, stored)
	}
	// A stale claim (the task was settled since) is refused.
	_, err = f.b.Finish(ctx, claimed.TaskID, host.FinishInput{Claimed: claimed, Outcome: okOutcome()})
	wantErr(t, err, host.ErrConflict)
}

func queueFollowUps(f *fixture) {
	t := f.t
	followUps := []host.TaskIntent{
		{TaskType: "child.a", Source: "spoofed-operator", Payload: json.RawMessage(`{"i":1}`), Priority: host.Priority(2)},
		{TaskType: "child.b", Source: "x", Payload: json.RawMessage(`{"i":2}`), Schedule: &host.Schedule{DelayMinutes: 5}},
	}
	tests := []struct {
		name    string
		ms      host.MachineStatus
		cancel  bool
		applied bool
	}{
		{"not applied on failure", host.MachineFailed, false, false},
		{"not applied on retry", host.MachineNeedsRetry, false, false},
		{"not applied on blocked", host.MachineBlocked, false, false},
		{"not applied when cancel was requested", host.MachineOK, true, false},
		{"applied on verified completion", host.MachineOK, false, true},
	}
	// An outcome's follow_up_tasks are recorded with it; only FollowUps
	// are applied.
	f.enqueue(intent("parent", host.Priority(-5)), host.EnqueueOptions{})
	only := f.claim()
	out := okOutcome()
	out.FollowUpTasks = followUps
	if done := f.finish(only, host.FinishInput{Outcome: out}); done.Status != host.TaskCompleted || len(done.Outcome.FollowUpTasks) != 2 {
		t.Fatalf("outcome with follow_up_tasks: %+v", done)
	}
	if n := len(f.tasks(host.TaskFilter{})); n != 1 {
		t.Fatalf("outcome.follow_up_tasks applied: %d tasks", n)
	}
	for _, tt := range tests {
		parent := f.enqueue(intent("parent", host.Priority(-5)), host.EnqueueOptions{Tenant: "acme"})
		task := f.claim()
		if task.TaskID != parent.TaskID {
			t.Fatalf("%s: claimed another task", tt.name)
		}
		if tt.cancel {
			if _, err := f.b.Cancel(ctx, task.TaskID); err != nil {
				t.Fatal(err)
			}
		}
		before := len(f.tasks(host.TaskFilter{}))
		done := f.finish(task, host.FinishInput{Outcome: host.TaskOutcome{MachineStatus: tt.ms}, FollowUps: followUps})
		children := map[string]*host.TaskRecord{}
		for _, c := range f.tasks(host.TaskFilter{}) {
			if c.ParentTaskID == parent.TaskID {
				children[c.TaskType] = c
			}
		}
		if !tt.applied {
			if len(children) != 0 || len(f.tasks(host.TaskFilter{})) != before {
				t.Fatalf("%s: follow-ups applied with status %s", tt.name, done.Status)
			}
		} else {
			if len(children) != 2 || done.Status != host.TaskCompleted {
				t.Fatalf("%s: %d follow-ups applied (status %s)", tt.name, len(children), done.Status)
			}
			a := children["child.a"]
			if a.Source != "task:"+parent.TaskID || a.ParentTaskID != parent.TaskID || a.Priority != 2 || a.Status != host.TaskPending || a.Tenant != "acme" {
				t.Fatalf("follow-up: %+v", a)
			}
			if b := children["child.b"]; !b.AvailableAt.Equal(f.clock.Now().Add(5*time.Minute)) || b.Tenant != "acme" {
				t.Fatalf("follow-up delay: %+v", b)
			}
			evs := f.events(host.EventFilter{TaskID: a.TaskID})
			d := eventData(t, evs[0])
			if evs[0].Type != host.EventTaskEnqueued || d["source"] != "task:"+parent.TaskID || d["parent_task_id"] != parent.TaskID || evs[0].AttemptID == "" {
				t.Fatalf("follow-up event: %s %s", evs[0].Type, evs[0].Data)
			}
		}
		// Staged follow-ups are in the evidence either way.
		evs := f.events(host.EventFilter{TaskID: parent.TaskID, Type: host.EventTaskAttemptFinished})
		var d struct {
			FollowUps []host.TaskIntent `json:"follow_ups"`
			Applied   []string          `json:"follow_ups_applied"`
		}
		if len(evs) != 1 || json.Unmarshal(evs[0].Data, &d) != nil {
			t.Fatalf("%s: task_attempt_finished events %+v", tt.name, evs)
		}
		if len(d.FollowUps) != 2 || d.FollowUps[0].Source != "task:"+parent.TaskID || (len(d.Applied) == 2) != tt.applied {
			t.Fatalf("%s: staged follow-ups in the event: %s", tt.name, evs[0].Data)
		}
	}
}

func queueFollowUpsRefused(f *fixture) {
	t := f.t
	many := make([]host.TaskIntent, host.MaxFollowUps+1)
	for i := range many {
		many[i] = intent("child", nil)
	}
	huge := intent("child", nil)
	huge.Payload = json.RawMessage(`{"x":"` + strings.Repeat("a", host.MaxPayloadBytes-10) + `"}`)
	tests := []struct {
		name      string
		in        host.FinishInput
		lastError string
	}{
		{"invalid", host.FinishInput{FollowUps: []host.TaskIntent{intent("ok", nil), {TaskType: "x"}}}, "follow-up 1: payload: must be a JSON object"},
		{"too many", host.FinishInput{FollowUps: many}, "the attempt staged 101 follow-up tasks; the limit is 100"},
		{"too large", host.FinishInput{FollowUps: []host.TaskIntent{huge, huge, huge, huge, huge}},
			"the attempt staged follow-up payloads of 5242870 bytes; the limit is 4194304"},
		{"refused by the caller", host.FinishInput{FollowUps: []host.TaskIntent{intent("ok", nil)}, FollowUpsRefused: "queue_enqueue: bad JSON"}, ""},
	}
	for _, tt := range tests {
		f.enqueue(intent("demo", nil), host.EnqueueOptions{})
		task := f.claim()
		tt.in.Outcome = okOutcome()
		rec := f.finish(task, tt.in)
		if rec.Status != host.TaskPermanentFailure || rec.Outcome.MachineStatus != host.MachineFailed || (tt.lastError != "" && rec.LastError != tt.lastError) {
			t.Fatalf("%s: %s %q", tt.name, rec.Status, rec.LastError)
		}
		if tt.lastError == "" && !strings.Contains(rec.LastError, tt.in.FollowUpsRefused) {
			t.Fatalf("%s: last_error %q does not say why", tt.name, rec.LastError)
		}
	}
	if all := f.tasks(host.TaskFilter{}); len(all) != len(tests) {
		t.Fatalf("follow-ups applied: %d tasks", len(all))
	}
}

func queueOutbox(f *fixture) {
	t := f.t
	f.enqueue(intent("demo", nil), host.EnqueueOptions{Tenant: "acme"})
	task := f.claim()
	a := f.record(task)
	for _, msgs := range [][]json.RawMessage{{json.RawMessage(`[]`)}, {json.RawMessage(`null`)}, make([]json.RawMessage, host.MaxExternalMessages+1)} {
		out := okOutcome()
		out.ExternalMessage = msgs
		_, err := f.b.Finish(ctx, task.TaskID, host.FinishInput{AttemptID: a.AttemptID, Outcome: out})
		wantField(t, err, "outcome.external_messages")
	}
	if got := f.task(task.TaskID); got.Status != host.TaskRunning {
		t.Fatalf("a refused outcome settled the task: %s", got.Status)
	}
	if msgs, err := f.b.Outbox(ctx, task.TaskID); err != nil || len(msgs) != 0 {
		t.Fatalf("outbox before completion: %v %+v", err, msgs)
	}
	out := okOutcome()
	out.ExternalMessage = []json.RawMessage{json.RawMessage(`{"to": "ops"}`), json.RawMessage(`{"n":2}`)}
	rec, err := f.b.Finish(ctx, task.TaskID, host.FinishInput{AttemptID: a.AttemptID, Outcome: out})
	if err != nil || rec.Status != host.TaskCompleted {
		t.Fatalf("%v %+v", err, rec)
	}
	msgs, err := f.b.Outbox(ctx, task.TaskID)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("outbox: %v %+v", err, msgs)
	}
	for i, m := range msgs {
		if m.TaskID != task.TaskID || m.AttemptID != a.AttemptID || m.Tenant != "acme" || m.Status != host.OutboxPending || m.MessageID == "" {
			t.Fatalf("outbox message %d: %+v", i, m)
		}
	}
	if string(msgs[0].Message) != `{"to":"ops"}` || string(msgs[1].Message) != `{"n":2}` {
		t.Fatalf("outbox order or content: %s, %s", msgs[0].Message, msgs[1].Message)
	}
	// A failed task's messages are not kept.
	f.enqueue(intent("demo", nil), host.EnqueueOptions{})
	failed := f.claim()
	out.MachineStatus = host.MachineFailed
	f.finish(failed, host.FinishInput{Outcome: out})
	if msgs, err := f.b.Outbox(ctx, failed.TaskID); err != nil || len(msgs) != 0 {
		t.Fatalf("outbox of a failed task: %v %+v", err, msgs)
	}
}

func queueCancel(f *fixture) {
	t := f.t
	pending := f.enqueue(intent("a", host.Priority(9)), host.EnqueueOptions{})
	c, err := f.b.Cancel(ctx, pending.TaskID)
	if err != nil || c.Status != host.TaskOperatorCanceled || c.FinishedAt == nil {
		t.Fatalf("cancel pending: %+v %v", c, err)
	}
	f.wantTypes("canceled while pending", f.eventTypes(pending.TaskID), host.EventTaskEnqueued, host.EventTaskFinished)
	_, err = f.b.Claim(ctx, "r", f.clock.Now())
	wantErr(t, err, host.ErrEmpty)
	_, err = f.b.Cancel(ctx, pending.TaskID)
	wantErr(t, err, host.ErrConflict)

	// Retryable and blocked tasks cancel at once too.
	for _, ms := range []host.MachineStatus{host.MachineNeedsRetry, host.MachineBlocked} {
		f.enqueue(intent("b", nil), host.EnqueueOptions{})
		task := f.claim()
		f.finish(task, host.FinishInput{Outcome: host.TaskOutcome{MachineStatus: ms}})
		if c, err := f.b.Cancel(ctx, task.TaskID); err != nil || c.Status != host.TaskOperatorCanceled {
			t.Fatalf("cancel after %s: %+v %v", ms, c, err)
		}
	}

	// A running task is marked; the finish of its attempt cancels it,
	// whatever the attempt's outcome.
	f.enqueue(intent("c", nil), host.EnqueueOptions{})
	running := f.claim()
	c, err = f.b.Cancel(ctx, running.TaskID)
	if err != nil || c.Status != host.TaskRunning || !c.CancelRequested {
		t.Fatalf("cancel running: %+v %v", c, err)
	}
	f.wantTypes("cancel requested", f.eventTypes(running.TaskID), host.EventTaskEnqueued, host.EventTaskClaimed, host.EventTaskCancelRequested)
	done := f.finish(running, host.FinishInput{Outcome: okOutcome()})
	if done.Status != host.TaskOperatorCanceled || done.LastError != "canceled by the operator" {
		t.Fatalf("finish after cancel request: %+v", done)
	}
	_, err = f.b.Cancel(ctx, done.TaskID)
	wantErr(t, err, host.ErrConflict)
	_, err = f.b.Cancel(ctx, "task-nope")
	wantErr(t, err, host.ErrNotFound)

	// A completed or permanently failed task cannot be canceled.
	for _, ms := range []host.MachineStatus{host.MachineOK, host.MachineFailed} {
		f.enqueue(intent("d", nil), host.EnqueueOptions{})
		task := f.claim()
		f.finish(task, host.FinishInput{Outcome: host.TaskOutcome{MachineStatus: ms}})
		_, err = f.b.Cancel(ctx, task.TaskID)
		wantErr(t, err, host.ErrConflict)
	}
}

// settle claims the next task and settles it with one attempt of the
// given outcome and machine status.
func (f *fixture) settle(outcome abi.Outcome, ms host.MachineStatus) *host.TaskRecord {
	f.t.Helper()
	task := f.claim()
	a := newAttempt(task)
	a.Outcome = outcome
	if outcome == abi.Suspended {
		a.Interrupt = json.RawMessage(`{"question":"approve?"}`)
	}
	rec, err := f.b.Finish(ctx, task.TaskID, host.FinishInput{Record: a, Claimed: task, Outcome: host.TaskOutcome{MachineStatus: ms}})
	if err != nil {
		f.t.Fatal(err)
	}
	return rec
}

func queueResume(f *fixture) {
	t := f.t
	task := f.enqueue(intent("demo", nil), host.EnqueueOptions{MaxAttempts: 1})
	_, err := f.b.Resume(ctx, task.TaskID, json.RawMessage(`1`), "cli:ada")
	wantErr(t, err, host.ErrConflict) // pending
	if rec := f.settle(abi.Suspended, host.MachineBlocked); rec.Status != host.TaskBlocked {
		t.Fatalf("suspended: %s", rec.Status)
	}
	for _, bad := range []string{``, `{`, `nul`} {
		_, err := f.b.Resume(ctx, task.TaskID, json.RawMessage(bad), "cli:ada")
		wantField(t, err, "value")
	}
	rec, err := f.b.Resume(ctx, task.TaskID, json.RawMessage(` {"ok": true} `), "cli:ada")
	if err != nil {
		t.Fatal(err)
	}
	// The one attempt was used: resuming allows one more.
	if rec.Status != host.TaskPending || rec.MaxAttempts != 2 || rec.FinishedAt != nil || !rec.AvailableAt.Equal(f.clock.Now()) ||
		!reflect.DeepEqual(rec.ResumeValues, []json.RawMessage{json.RawMessage(`{"ok":true}`)}) {
		t.Fatalf("resumed: %+v", rec)
	}
	_, err = f.b.Resume(ctx, task.TaskID, json.RawMessage(`2`), "cli:ada")
	wantErr(t, err, host.ErrConflict) // pending again
	claimed := f.claim()
	if !reflect.DeepEqual(claimed.ResumeValues, rec.ResumeValues) {
		t.Fatalf("claimed without its resume values: %+v", claimed)
	}
	// Suspended again: a second value is appended after the first.
	a := newAttempt(claimed)
	a.Outcome, a.Interrupt = abi.Suspended, json.RawMessage(`{}`)
	if _, err := f.b.Finish(ctx, claimed.TaskID, host.FinishInput{Record: a, Outcome: host.TaskOutcome{MachineStatus: host.MachineBlocked}}); err != nil {
		t.Fatal(err)
	}
	rec, err = f.b.Resume(ctx, task.TaskID, json.RawMessage(`null`), "token:tok_1 (ops)")
	if err != nil || len(rec.ResumeValues) != 2 || string(rec.ResumeValues[1]) != "null" || rec.MaxAttempts != 3 {
		t.Fatalf("second resume: %v %+v", err, rec)
	}
	evs := f.events(host.EventFilter{TaskID: task.TaskID, Type: host.EventTaskResumed})
	if len(evs) != 2 {
		t.Fatalf("task_resumed events: %v", evs)
	}
	if d := eventData(t, evs[0]); d["by"] != "cli:ada" || d["resume_values"] != 1.0 || d["max_attempts"] != 2.0 {
		t.Fatalf("task_resumed %s", evs[0].Data)
	}

	// Blocked by a machine status, not a suspension: resume refuses.
	f.claim()
	other := f.enqueue(intent("demo", host.Priority(1)), host.EnqueueOptions{})
	if rec := f.settle(abi.Completed, host.MachineBlocked); rec.TaskID != other.TaskID || rec.Status != host.TaskBlocked {
		t.Fatalf("blocked: %+v", rec)
	}
	_, err = f.b.Resume(ctx, other.TaskID, json.RawMessage(`1`), "cli:ada")
	wantErr(t, err, host.ErrConflict)
	_, err = f.b.Resume(ctx, "task-nope", json.RawMessage(`1`), "cli:ada")
	wantErr(t, err, host.ErrNotFound)
}

func queueResumeLimits(f *fixture) {
	t := f.t
	task := f.enqueue(intent("demo", nil), host.EnqueueOptions{MaxAttempts: host.MaxMaxAttempts})
	big := json.RawMessage(`"` + strings.Repeat("x", host.MaxResumeBytes/2) + `"`)
	f.settle(abi.Suspended, host.MachineBlocked)
	if _, err := f.b.Resume(ctx, task.TaskID, big, "cli:ada"); err != nil {
		t.Fatal(err)
	}
	f.settle(abi.Suspended, host.MachineBlocked)
	_, err := f.b.Resume(ctx, task.TaskID, big, "cli:ada")
	wantField(t, err, "value")
	rec := f.task(task.TaskID)
	if rec.Status != host.TaskBlocked || len(rec.ResumeValues) != 1 {
		t.Fatalf("a refused resume changed the task: %+v", rec)
	}
}

func queueRetry(f *fixture) {
	t := f.t
	task := f.enqueue(intent("demo", nil), host.EnqueueOptions{MaxAttempts: 1})
	_, err := f.b.Retry(ctx, task.TaskID, "cli:ada")
	wantErr(t, err, host.ErrConflict) // pending
	if rec := f.settle(abi.Failed, host.MachineNeedsRetry); rec.Status != host.TaskPermanentFailure {
		t.Fatalf("no attempts left: %s", rec.Status)
	}
	rec, err := f.b.Retry(ctx, task.TaskID, "cli:ada")
	if err != nil || rec.Status != host.TaskPending || rec.MaxAttempts != 2 || rec.AttemptCount != 1 || rec.FinishedAt != nil ||
		!rec.AvailableAt.Equal(f.clock.Now()) {
		t.Fatalf("retried: %v %+v", err, rec)
	}
	if rec := f.settle(abi.Completed, host.MachineOK); rec.Status != host.TaskCompleted {
		t.Fatalf("retried attempt: %s %s", rec.Status, rec.LastError)
	}
	_, err = f.b.Retry(ctx, task.TaskID, "cli:ada")
	wantErr(t, err, host.ErrConflict) // completed
	evs := f.events(host.EventFilter{TaskID: task.TaskID, Type: host.EventTaskRetryRequested})
	if len(evs) != 1 {
		t.Fatalf("task_retry_requested: %v", evs)
	}
	if d := eventData(t, evs[0]); d["by"] != "cli:ada" || d["from"] != string(host.TaskPermanentFailure) || d["max_attempts"] != 2.0 {
		t.Fatalf("task_retry_requested %s", evs[0].Data)
	}
	// A blocked task and a retryable one go back too; attempts left: the
	// cap stays.
	for _, ms := range []host.MachineStatus{host.MachineBlocked, host.MachineNeedsRetry} {
		other := f.enqueue(intent("demo", nil), host.EnqueueOptions{MaxAttempts: 5})
		if rec := f.settle(abi.Failed, ms); rec.TaskID != other.TaskID {
			t.Fatal("settled another task")
		}
		rec, err := f.b.Retry(ctx, other.TaskID, "cli:ada")
		if err != nil || rec.Status != host.TaskPending || rec.MaxAttempts != 5 {
			t.Fatalf("retry after %s: %v %+v", ms, err, rec)
		}
		if _, err := f.b.Cancel(ctx, other.TaskID); err != nil {
			t.Fatal(err)
		}
		_, err = f.b.Retry(ctx, other.TaskID, "cli:ada")
		wantErr(t, err, host.ErrConflict) // canceled
	}
	_, err = f.b.Retry(ctx, "task_nope", "cli:ada")
	wantErr(t, err, host.ErrNotFound)
}

func queueReclaimRunning(f *fixture) {
	t := f.t
	fresh := f.enqueue(intent("fresh", host.Priority(1)), host.EnqueueOptions{MaxAttempts: 3})
	last := f.enqueue(intent("last", host.Priority(2)), host.EnqueueOptions{MaxAttempts: 1})
	canceled := f.enqueue(intent("canceled", host.Priority(3)), host.EnqueueOptions{})
	done := f.enqueue(intent("done", host.Priority(4)), host.EnqueueOptions{})
	waiting := f.enqueue(intent("waiting", host.Priority(5)), host.EnqueueOptions{})
	for range 4 {
		f.claim()
	}
	if _, err := f.b.Cancel(ctx, canceled.TaskID); err != nil {
		t.Fatal(err)
	}
	f.finish(f.task(done.TaskID), host.FinishInput{Outcome: okOutcome()})

	later := f.clock.Add(time.Minute)
	n, err := f.b.ReclaimRunning(ctx, later)
	if err != nil || n != 3 {
		t.Fatalf("reclaimed %d, %v", n, err)
	}
	want := map[string]host.TaskStatus{
		fresh.TaskID: host.TaskRetryableFailure, last.TaskID: host.TaskPermanentFailure,
		canceled.TaskID: host.TaskOperatorCanceled, done.TaskID: host.TaskCompleted, waiting.TaskID: host.TaskPending,
	}
	for id, st := range want {
		if got := f.task(id); got.Status != st {
			t.Errorf("%s: %s, want %s (%s)", got.TaskType, got.Status, st, got.LastError)
		}
	}
	got := f.task(fresh.TaskID)
	if !got.AvailableAt.Equal(later) || !strings.Contains(got.LastError, "attempt 1 was interrupted") {
		t.Fatalf("reclaimed task: %+v", got)
	}
	for _, id := range []string{fresh.TaskID, last.TaskID, canceled.TaskID} {
		if ev := f.eventTypes(id); ev[len(ev)-1] != host.EventBootSweepReclaimed {
			t.Fatalf("events of a reclaimed task: %v", ev)
		}
	}
	// The sweep is idempotent, and the completed task never runs again.
	if n, err := f.b.ReclaimRunning(ctx, later); err != nil || n != 0 {
		t.Fatalf("second sweep reclaimed %d (%v)", n, err)
	}
	claimed := map[string]int{}
	for {
		task, err := f.b.Claim(ctx, "r2", later.Add(time.Hour))
		if err != nil {
			wantErr(t, err, host.ErrEmpty)
			break
		}
		claimed[task.TaskID] = task.AttemptCount
	}
	if len(claimed) != 2 || claimed[fresh.TaskID] != 2 || claimed[waiting.TaskID] != 1 {
		t.Fatalf("claimed after the sweep (id → attempt): %v", claimed)
	}
}

func queueListAndCount(f *fixture) {
	t := f.t
	var ids []string
	for i, tenant := range []string{"", "acme", "acme", ""} {
		in := intent([]string{"alpha", "beta"}[i%2], nil)
		ids = append(ids, f.enqueue(in, host.EnqueueOptions{Tenant: tenant}).TaskID)
		f.clock.Add(time.Second)
	}
	f.claim() // ids[0] is running
	all := f.tasks(host.TaskFilter{})
	var got []string
	for _, r := range all {
		got = append(got, r.TaskID)
	}
	if want := []string{ids[3], ids[2], ids[1], ids[0]}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ListTasks order %v, want newest first %v", got, want)
	}
	for _, tt := range []struct {
		name   string
		filter host.TaskFilter
		want   int
	}{
		{"status", host.TaskFilter{Status: host.TaskRunning}, 1},
		{"pending", host.TaskFilter{Status: host.TaskPending}, 3},
		{"type", host.TaskFilter{TaskType: "beta"}, 2},
		{"tenant", host.TaskFilter{Tenant: "acme"}, 2},
		{"default tenant", host.TaskFilter{Tenant: host.DefaultTenant}, 2},
		{"tenant and type", host.TaskFilter{Tenant: "acme", TaskType: "alpha"}, 1},
		{"another tenant", host.TaskFilter{Tenant: "bob"}, 0},
		{"limit", host.TaskFilter{Limit: 3}, 3},
	} {
		got, err := f.b.ListTasks(ctx, tt.filter)
		if err != nil || len(got) != tt.want {
			t.Fatalf("%s: %d tasks (%v), want %d", tt.name, len(got), err, tt.want)
		}
	}
	for range 100 {
		f.enqueue(intent("gamma", nil), host.EnqueueOptions{})
	}
	if got, err := f.b.ListTasks(ctx, host.TaskFilter{}); err != nil || len(got) != 100 || got[0].TaskType != "gamma" {
		t.Fatalf("without a limit: %d tasks (%v), want the newest 100", len(got), err)
	}
	counts, err := f.b.CountTasks(ctx)
	if err != nil || counts[host.TaskPending] != 103 || counts[host.TaskRunning] != 1 || counts[host.TaskCompleted] != 0 {
		t.Fatalf("counts %v %v", counts, err)
	}
}

// ListTasks pages with a keyset cursor (TaskFilter.After, the last task
// of a page): the pages, filtered or not, are the whole list in order,
// each task once, even when a task changes between two pages; an
// unknown cursor lists nothing.
func queueListPages(f *fixture) {
	t := f.t
	for i := range 7 {
		f.enqueue(intent([]string{"alpha", "beta"}[i%2], nil), host.EnqueueOptions{Tenant: []string{"acme", "bob"}[i%3/2]})
		f.clock.Add(time.Second)
	}
	for _, filter := range []host.TaskFilter{{}, {TaskType: "alpha"}, {Tenant: "acme", TaskType: "beta"}} {
		all := f.tasks(filter)
		var paged []string
		page := filter
		page.Limit = 2
		for n := 0; ; n++ {
			got, err := f.b.ListTasks(ctx, page)
			if err != nil || n > len(all) {
				t.Fatalf("page %d of %+v: %v", n, filter, err)
			}
			if n == 0 {
				f.claim() // a task that changes between pages keeps its place
			}
			for _, r := range got {
				paged = append(paged, r.TaskID)
			}
			if len(got) < page.Limit {
				break
			}
			page.After = got[len(got)-1].TaskID
		}
		var want []string
		for _, r := range all {
			want = append(want, r.TaskID)
		}
		if !reflect.DeepEqual(paged, want) {
			t.Fatalf("%+v: paged %v, want %v", filter, paged, want)
		}
	}
	if got, err := f.b.ListTasks(ctx, host.TaskFilter{After: "task_nope"}); err != nil || len(got) != 0 {
		t.Fatalf("unknown cursor: %d tasks, %v", len(got), err)
	}
}

// Claimers running at once on one store never get the same task, and
// every task is claimed.
func queueConcurrentClaims(f *fixture) {
	const tasks = 60
	for range tasks {
		f.enqueue(intent("demo", nil), host.EnqueueOptions{})
	}
	for id := range raceClaims(f, repeat(f.b, 6), tasks) {
		if got := f.task(id); got.Status != host.TaskRunning || got.AttemptCount != 1 {
			f.t.Fatalf("task %s after one claim: %+v", id, got)
		}
	}
}
