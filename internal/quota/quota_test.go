package quota

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// counter is a store's counts, and how often they were read.
type counter struct {
	usage map[string]host.TenantUsage
	reads int
}

func (c *counter) count(context.Context) (map[string]host.TenantUsage, error) {
	c.reads++
	out := map[string]host.TenantUsage{}
	for t, u := range c.usage {
		out[t] = u
	}
	return out, nil
}

func newKeeper(lim Limits, c *counter, now *time.Time) *Keeper {
	k := New(lim, c.count)
	k.now = func() time.Time { return *now }
	return k
}

// Zero fields are the defaults, negative ones no limit.
func TestLimitsResolved(t *testing.T) {
	r := Limits{Schedules: -1, QueuedTasks: 5, ScheduleMinInterval: -1}.resolved()
	want := Defaults
	want.Schedules, want.QueuedTasks, want.ScheduleMinInterval = 0, 5, 0
	if r != want {
		t.Fatalf("resolved %+v, want %+v", r, want)
	}
}

// Counts are the store's, read at most once a Refresh, plus what was let
// through since; what is released (or drained, by the next read) frees
// room.
func TestKeeperCounts(t *testing.T) {
	now := time.Unix(1000, 0)
	c := &counter{usage: map[string]host.TenantUsage{"acme": {QueuedTasks: 1}}}
	k := newKeeper(Limits{QueuedTasks: 3}, c, &now)
	ctx := context.Background()
	for i := range 2 {
		if err := k.Tasks(ctx, "acme", 1); err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
	}
	err := k.Tasks(ctx, "acme", 1)
	var qe *Error
	if !errors.As(err, &qe) || qe.Quota != QueuedTasks || qe.Limit != 3 || qe.Rate() || !errors.Is(err, host.ErrConflict) ||
		!strings.Contains(err.Error(), "--quota-queued-tasks") {
		t.Fatalf("over the cap: %v", err)
	}
	if c.reads != 1 {
		t.Fatalf("%d reads within a Refresh, want 1", c.reads)
	}
	if err := k.Tasks(ctx, "globex", 3); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	k.Release("acme", QueuedTasks, 1)
	if err := k.Tasks(ctx, "acme", 1); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	// The store now holds what was let through, and drained two.
	c.usage = map[string]host.TenantUsage{"acme": {QueuedTasks: 1}, "globex": {QueuedTasks: 3}}
	now = now.Add(Refresh)
	if err := k.Tasks(ctx, "acme", 2); err != nil || c.reads != 2 {
		t.Fatalf("after the queue drained: %v (%d reads)", err, c.reads)
	}
	if u := k.Usage()[4]; u.Quota != QueuedTasks || u.Ratio != 1 || u.Refusals != 1 {
		t.Fatalf("usage %+v", u)
	}
}

// Rates are token buckets: a minute's allowance at once, then one per
// 60/limit seconds; a refusal says when to retry.
func TestKeeperRates(t *testing.T) {
	now := time.Unix(1000, 0)
	k := newKeeper(Limits{MessagesPerMinute: 2}, &counter{}, &now)
	for i := range 2 {
		if err := k.Message("acme"); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	err := k.Message("acme")
	var qe *Error
	if !errors.As(err, &qe) || !qe.Rate() || qe.RetryAfter <= 0 || qe.RetryAfter > 30*time.Second {
		t.Fatalf("third message: %v", err)
	}
	if err := k.Message("globex"); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	now = now.Add(30 * time.Second)
	if err := k.Message("acme"); err != nil {
		t.Fatalf("half a minute later: %v", err)
	}
}

// The step cap and the schedule interval; a schedule slot of a full
// tenant is refused without reading the store.
func TestKeeperStoreRules(t *testing.T) {
	now := time.Unix(1000, 0)
	c := &counter{usage: map[string]host.TenantUsage{"acme": {QueuedTasks: 2}}}
	k := newKeeper(Limits{WorkflowSteps: 3, QueuedTasks: 2, ScheduleMinInterval: time.Minute}, c, &now)
	if err := k.WorkflowStep(&host.WorkflowRecord{WorkflowID: "wf", Tenant: "acme", Transitions: 2}); err != nil {
		t.Fatal(err)
	}
	if err := k.WorkflowStep(&host.WorkflowRecord{WorkflowID: "wf", Tenant: "acme", Transitions: 3}); err == nil || !strings.Contains(err.Error(), "quota workflow_steps") {
		t.Fatalf("past the cap: %v", err)
	}
	if err := k.ScheduleInterval("acme", 59); err == nil || !strings.Contains(err.Error(), "--quota-schedule-min-interval") {
		t.Fatalf("59s: %v", err)
	}
	if err := k.ScheduleSlot("acme"); err != nil || c.reads != 0 {
		t.Fatalf("slot before any read: %v (%d reads)", err, c.reads)
	}
	k.Refresh(context.Background())
	if err := k.ScheduleSlot("acme"); err == nil {
		t.Fatal("slot of a full tenant let through")
	}
}
