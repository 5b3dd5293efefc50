package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// QuotaOpener opens a fresh, empty store as Opener does, applying q
// inside its writes (its Options' Quotas).
type QuotaOpener func(t testing.TB, clock *Clock, q host.StoreQuotas) host.Backend

// Quotas checks what a store does for the per-tenant quotas
// (internal/quota decides them): it counts each tenant's schedules,
// active workflow records and unfinished tasks in one read
// (host.UsageCounter); it blocks a workflow record whose next transition
// the quotas refuse (workflow_blocked naming the reason, no task
// enqueued) and counts the transitions a record made; and a due schedule
// whose tenant's queue is full makes no task but still advances.
func Quotas(t *testing.T, open QuotaOpener) {
	q := &stubQuotas{steps: 3, full: "full"}
	o := func(t testing.TB, c *Clock) host.Backend { return open(t, c, q) }
	runAll(t, o, []scenario{
		{"TenantUsage", quotasTenantUsage},
		{"StepCapBlocksCyclingRecord", quotasStepCap},
		{"FullQueueSkipsScheduleSlot", quotasScheduleSkip},
	})
}

// stubQuotas refuses a record's transition past steps, and every
// schedule slot of tenant full.
type stubQuotas struct {
	steps int
	full  string
}

func (q *stubQuotas) WorkflowStep(r *host.WorkflowRecord) error {
	if r.Transitions >= q.steps {
		return fmt.Errorf("quota workflow_steps: record %s made %d transitions, the limit", r.WorkflowID, r.Transitions)
	}
	return nil
}

func (q *stubQuotas) ScheduleSlot(tenant string) error {
	if tenant == q.full {
		return errors.New("quota queued_tasks: tenant full is full")
	}
	return nil
}

func quotasTenantUsage(f *fixture) {
	t := f.t
	var got map[string]host.TenantUsage
	uc, ok := f.b.(host.UsageCounter)
	if !ok {
		t.Fatalf("%T does not count tenant usage (host.UsageCounter)", f.b)
	}
	for _, name := range []string{"a", "b"} {
		spec := scheduleSpec(name, 60)
		spec.Tenant = "acme"
		f.createSchedule(spec)
	}
	f.createSchedule(scheduleSpec("c", 60))
	// Two records of acme, each with its plan task queued; one canceled
	// (its task stays queued).
	f.startGoalLoop("k1", "acme")
	r2 := f.startGoalLoop("k2", "acme")
	if _, err := f.b.CancelWorkflowRecord(ctx, "acme", r2.WorkflowID); err != nil {
		t.Fatal(err)
	}
	// A record is found by its instance key (how the host answers a
	// start of an existing record at the active_workflows cap).
	l, err := f.b.ListWorkflowRecords(ctx, host.WorkflowRecordFilter{Tenant: "acme", WorkflowType: host.GoalLoop, InstanceKey: "k2"})
	if err != nil || len(l) != 1 || l[0].WorkflowID != r2.WorkflowID {
		t.Fatalf("records of key k2: %+v %v", l, err)
	}
	// beta: three tasks.
	for range 3 {
		f.enqueue(intent("demo.beta", nil), host.EnqueueOptions{Tenant: "beta"})
	}
	f.claim() // running: still counted
	done := f.finish(f.claim(), host.FinishInput{Outcome: okOutcome()})
	got, err = uc.TenantUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Five tasks (acme's two plan tasks, beta's three), one completed.
	want := map[string]host.TenantUsage{
		"acme":             {Schedules: 2, ActiveWorkflows: 1, QueuedTasks: 2},
		host.DefaultTenant: {Schedules: 1},
		"beta":             {QueuedTasks: 3},
	}
	u := want[done.Tenant]
	u.QueuedTasks--
	want[done.Tenant] = u
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("usage %+v, want %+v", got, want)
	}
}

// A definition whose one state transitions to itself cycles until the
// step cap blocks it: three transitions, four tasks, then nothing.
func quotasStepCap(f *fixture) {
	t := f.t
	def := &host.WorkflowDefinition{WorkflowType: "spin", InitialState: "s", States: []host.WorkflowState{
		{StateID: "s", TaskType: "spin.step", EmitsTaskIntent: true, Transitions: []host.WorkflowTransition{{Signal: "again", NextState: "s"}}},
	}}
	if _, err := f.b.PutWorkflow(ctx, def); err != nil {
		t.Fatal(err)
	}
	r, _, err := f.b.StartWorkflow(ctx, host.WorkflowStart{WorkflowType: "spin", InstanceKey: "k", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	tasks := 0
	for ; tasks < 10; tasks++ {
		task, err := f.b.Claim(ctx, "runner-1", f.clock.Now())
		if errors.Is(err, host.ErrEmpty) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		out := okOutcome()
		out.WorkflowSignal = "again"
		f.finish(task, host.FinishInput{Outcome: out})
	}
	got := f.workflowRecord(r.WorkflowID)
	if tasks != 4 || got.Status != host.WorkflowBlocked || got.Transitions != 3 || got.CurrentState != "s" {
		t.Fatalf("after %d tasks: %+v, want blocked after 3 transitions and 4 tasks", tasks, got)
	}
	evs := f.events(host.EventFilter{Type: host.EventWorkflowBlocked})
	if len(evs) != 1 {
		t.Fatalf("%d workflow_blocked events, want 1", len(evs))
	}
	var d struct{ Reason, Signal, WorkflowID string }
	if err := json.Unmarshal(evs[0].Data, &d); err != nil {
		t.Fatalf("workflow_blocked data %s: %v", evs[0].Data, err)
	}
	if !strings.Contains(d.Reason, "quota workflow_steps") || d.Signal != "again" {
		t.Fatalf("workflow_blocked data %s: want the quota's reason", evs[0].Data)
	}
	if n := f.countEvents()[host.EventWorkflowTransitioned]; n != 3 {
		t.Fatalf("%d transitions recorded, want 3", n)
	}
}

// A due schedule of a tenant whose queue is full makes no task; the slot
// is skipped with the reason in schedule_task_created and the schedule
// moves on, while another tenant's schedule fires.
func quotasScheduleSkip(f *fixture) {
	t := f.t
	spec := scheduleSpec("tick", 60)
	spec.Tenant = "full"
	full := f.createSchedule(spec)
	spec.Tenant = "acme"
	ok := f.createSchedule(spec)
	now := f.clock.Add(time.Minute)
	got := f.fire(now)
	if len(got) != 1 || got[0].Tenant != "acme" || got[0].Source != host.ScheduleSource(ok.ScheduleID, ok.NextRunAt) {
		t.Fatalf("fired %+v, want acme's task only", got)
	}
	s, err := f.b.Schedule(ctx, "full", full.ScheduleID)
	if err != nil {
		t.Fatal(err)
	}
	if !s.NextRunAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("full's schedule next_run_at %v, want %v", s.NextRunAt, now.Add(time.Minute))
	}
	if n := len(f.tasks(host.TaskFilter{})); n != 1 {
		t.Fatalf("%d tasks, want 1", n)
	}
	skipped := 0
	for _, e := range f.events(host.EventFilter{Type: host.EventScheduleTaskCreated}) {
		var d struct {
			ScheduleID string `json:"schedule_id"`
			Refused    string `json:"refused"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("schedule_task_created data %s: %v", e.Data, err)
		}
		if d.ScheduleID == full.ScheduleID {
			skipped++
			if e.TaskID != "" || !strings.Contains(d.Refused, "quota queued_tasks") {
				t.Fatalf("skipped slot's event %+v %s: want no task and the quota's reason", e, e.Data)
			}
		}
	}
	if skipped != 1 {
		t.Fatalf("%d events for the skipped slot, want 1", skipped)
	}
}
