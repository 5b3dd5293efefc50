package packrun

import (
	"context"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/quota"
)

// Quotas bound what one tenant can make this host store and run (see
// README "Quotas"). A zero field is its default; a negative one, no limit.
// A refusal names the quota, its limit and the `packrun serve` flag that
// raises it (an HTTP 409 for a count, 429 for a rate) and stores nothing.
type Quotas struct {
	// Schedules caps a tenant's schedules (default 100).
	Schedules int
	// ScheduleMinInterval is the shortest interval of a tenant's schedule
	// (default 1s, a whole number of seconds). Sensor schedules, which the
	// host keeps from the installed manifests, are the operator's and not
	// bound by it.
	ScheduleMinInterval time.Duration
	// ActiveWorkflows caps a tenant's active workflow records (default
	// 1000).
	ActiveWorkflows int
	// WorkflowSteps caps the state transitions of one workflow record
	// (default 100): the record is blocked instead of making the next one
	// (workflow_blocked, data.reason names the quota).
	WorkflowSteps int
	// QueuedTasks caps a tenant's unfinished tasks: pending, running,
	// waiting for a retry or blocked (default 10000). A schedule of a
	// tenant at the cap skips its slot, and a task's follow-ups are
	// refused (the task fails naming the quota).
	QueuedTasks int
	// SensorEventsPerMinute and MessagesPerMinute cap the sensor events
	// and the agent messages a tenant hands over a minute (default 600
	// each).
	SensorEventsPerMinute int
	MessagesPerMinute     int
}

func (q Quotas) limits() quota.Limits {
	return quota.Limits{Schedules: q.Schedules, ScheduleMinInterval: q.ScheduleMinInterval, ActiveWorkflows: q.ActiveWorkflows,
		WorkflowSteps: q.WorkflowSteps, QueuedTasks: q.QueuedTasks, SensorEventsPerMinute: q.SensorEventsPerMinute,
		MessagesPerMinute: q.MessagesPerMinute}
}

// QuotaUsage is one quota's state across every tenant, naming none (for
// /metrics).
type QuotaUsage struct {
	// Quota names the quota (schedules, schedule_min_interval,
	// active_workflows, workflow_steps, queued_tasks,
	// sensor_events_per_minute, messages_per_minute); Limit is its limit
	// (0: none).
	Quota string
	Limit int64
	// Ratio is the highest usage over the limit among the tenants, of a
	// count (0 for the others).
	Ratio float64
	// Refusals counts this host's refusals of the quota since Open.
	Refusals uint64
}

// QuotaUsage reports each quota's usage, reading the store's counts if
// they are older than a second.
func (h *Host) QuotaUsage(ctx context.Context) []QuotaUsage {
	_ = h.quotas.Refresh(ctx) // on failure, the counts last read
	var out []QuotaUsage
	for _, u := range h.quotas.Usage() {
		out = append(out, QuotaUsage{Quota: u.Quota, Limit: u.Limit, Ratio: u.Ratio, Refusals: u.Refusals})
	}
	return out
}

// limited is the host's store as the API, the CLI and a Go program
// (Host.Store) create things through it: each creation is checked against
// the quotas first and counted (internal/quota). The dispatcher and the
// store's own writes use the store itself.
type limited struct {
	backend
	q *quota.Keeper
}

func tenantOr(t string) string {
	if t == "" {
		return host.DefaultTenant
	}
	return t
}

// Enqueue implements host.Queue.
func (l *limited) Enqueue(ctx context.Context, intent host.TaskIntent, opts host.EnqueueOptions) (*host.TaskRecord, error) {
	tenant := tenantOr(opts.Tenant)
	if err := l.q.Tasks(ctx, tenant, 1); err != nil {
		return nil, err
	}
	t, err := l.backend.Enqueue(ctx, intent, opts)
	if err != nil {
		l.q.Release(tenant, quota.QueuedTasks, 1)
	}
	return t, err
}

// CreateSchedule implements host.Schedules.
func (l *limited) CreateSchedule(ctx context.Context, spec host.ScheduleSpec) (*host.RecurringSchedule, error) {
	if err := host.ValidateScheduleSpec("create schedule", &spec); err != nil {
		return nil, err
	}
	tenant := tenantOr(spec.Tenant)
	if err := l.q.Schedule(ctx, tenant, spec.IntervalSeconds); err != nil {
		return nil, err
	}
	s, err := l.backend.CreateSchedule(ctx, spec)
	if err != nil {
		l.q.Release(tenant, quota.Schedules, 1)
	}
	return s, err
}

// PutSchedule implements host.Schedules.
func (l *limited) PutSchedule(ctx context.Context, spec host.ScheduleSpec) (*host.RecurringSchedule, error) {
	if err := host.ValidateScheduleSpec("put schedule", &spec); err != nil {
		return nil, err
	}
	tenant := tenantOr(spec.Tenant)
	_, err := l.backend.Schedule(ctx, tenant, spec.Name)
	switch {
	case errors.Is(err, host.ErrNotFound):
		if err := l.q.Schedule(ctx, tenant, spec.IntervalSeconds); err != nil {
			return nil, err
		}
		s, err := l.backend.PutSchedule(ctx, spec)
		if err != nil {
			l.q.Release(tenant, quota.Schedules, 1)
		}
		return s, err
	case err != nil:
		return nil, err
	}
	if err := l.q.ScheduleInterval(tenant, spec.IntervalSeconds); err != nil {
		return nil, err
	}
	return l.backend.PutSchedule(ctx, spec)
}

// UpdateSchedule implements host.Schedules.
func (l *limited) UpdateSchedule(ctx context.Context, tenant, ref string, u host.ScheduleUpdate) (*host.RecurringSchedule, error) {
	if u.IntervalSeconds != nil {
		if err := host.CheckInterval("update schedule", *u.IntervalSeconds); err != nil {
			return nil, err
		}
		if err := l.q.ScheduleInterval(tenantOr(tenant), *u.IntervalSeconds); err != nil {
			return nil, err
		}
	}
	return l.backend.UpdateSchedule(ctx, tenant, ref, u)
}

// DeleteSchedule implements host.Schedules.
func (l *limited) DeleteSchedule(ctx context.Context, tenant, ref string) error {
	err := l.backend.DeleteSchedule(ctx, tenant, ref)
	if err == nil {
		l.q.Release(tenantOr(tenant), quota.Schedules, 1)
	}
	return err
}

// StartWorkflow implements host.Workflows: a new record counts against
// the active records, and its first task against the queued tasks.
func (l *limited) StartWorkflow(ctx context.Context, st host.WorkflowStart) (*host.WorkflowRecord, bool, error) {
	if err := host.ValidateWorkflowStart("start workflow", &st); err != nil {
		return nil, false, err
	}
	tenant := tenantOr(st.Tenant)
	if err := l.q.Workflow(ctx, tenant); err != nil {
		// A start of an existing record creates nothing: it answers as
		// ever, even at the cap.
		recs, lerr := l.backend.ListWorkflowRecords(ctx, host.WorkflowRecordFilter{Tenant: tenant, WorkflowType: st.WorkflowType,
			InstanceKey: st.InstanceKey, Limit: 1})
		if lerr == nil && len(recs) == 1 {
			return recs[0], false, nil
		}
		return nil, false, err
	}
	if err := l.q.Tasks(ctx, tenant, 1); err != nil {
		l.q.Release(tenant, quota.ActiveWorkflows, 1)
		return nil, false, err
	}
	r, created, err := l.backend.StartWorkflow(ctx, st)
	if err != nil || !created {
		l.q.Release(tenant, quota.ActiveWorkflows, 1)
		l.q.Release(tenant, quota.QueuedTasks, 1)
	}
	return r, created, err
}

// CancelWorkflowRecord implements host.Workflows.
func (l *limited) CancelWorkflowRecord(ctx context.Context, tenant, id string) (*host.WorkflowRecord, error) {
	before, err := l.backend.WorkflowRecord(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	r, err := l.backend.CancelWorkflowRecord(ctx, tenant, id)
	if err == nil && before.Status == host.WorkflowActive {
		l.q.Release(before.Tenant, quota.ActiveWorkflows, 1)
	}
	return r, err
}

// RecordSensorEvent implements host.Sensors: every event counts against
// the tenant's rate; one that proposes a task or a workflow against the
// queued tasks (and the active records).
func (l *limited) RecordSensorEvent(ctx context.Context, ev host.SensorEvent, opts host.SensorEventOptions) (*host.SensorEventRecord, error) {
	tenant := tenantOr(opts.Tenant)
	if err := l.q.SensorEvent(tenant); err != nil {
		return nil, err
	}
	workflows, tasks := 0, 0
	if ev.ProposedWorkflow != nil {
		if err := l.q.Workflow(ctx, tenant); err != nil {
			return nil, err
		}
		workflows = 1
	}
	if ev.ProposedTask != nil || ev.ProposedWorkflow != nil {
		if err := l.q.Tasks(ctx, tenant, 1); err != nil {
			l.q.Release(tenant, quota.ActiveWorkflows, workflows)
			return nil, err
		}
		tasks = 1
	}
	rec, err := l.backend.RecordSensorEvent(ctx, ev, opts)
	if err != nil || rec.TaskID == "" && rec.Status != host.SensorWorkflowCreated {
		// Nothing was created (refused, deduped, expired, only recorded).
		l.q.Release(tenant, quota.ActiveWorkflows, workflows)
		l.q.Release(tenant, quota.QueuedTasks, tasks)
	}
	return rec, err
}

// PublishMessage implements host.Messages: every message counts against
// the tenant's rate, and it is refused while the tenant's queue is full;
// its deliveries count as queued tasks.
func (l *limited) PublishMessage(ctx context.Context, in *host.MessageInput) (*host.MessageReceipt, error) {
	tenant := tenantOr(in.Tenant)
	if err := l.q.Message(tenant); err != nil {
		return nil, err
	}
	if err := l.q.Tasks(ctx, tenant, 1); err != nil {
		return nil, err
	}
	rec, err := l.backend.PublishMessage(ctx, in)
	made := 0
	if err == nil && !rec.Duplicate {
		made = len(rec.Message.Deliveries)
	}
	l.q.Release(tenant, quota.QueuedTasks, 1-made)
	return rec, err
}
