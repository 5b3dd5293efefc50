package host

import "context"

// TenantUsage is what the per-tenant quotas count (internal/quota), as a
// store reads it.
type TenantUsage struct {
	// Schedules counts the tenant's schedules, enabled or paused.
	Schedules int `json:"schedules"`
	// ActiveWorkflows counts its workflow records whose status is active.
	ActiveWorkflows int `json:"active_workflows"`
	// QueuedTasks counts its tasks not finished yet: pending, running,
	// waiting for a retry or blocked.
	QueuedTasks int `json:"queued_tasks"`
}

// UsageCounter counts what the quotas bound.
type UsageCounter interface {
	// TenantUsage returns the usage of every tenant that has any (a
	// tenant left out has none), in one read.
	TenantUsage(ctx context.Context) (map[string]TenantUsage, error)
}

// StoreQuotas are the quota rules a store applies inside its own writes,
// where nothing above it can check first. internal/quota decides them; a
// store given none applies none. Both are called inside a write
// transaction and must not block.
type StoreQuotas interface {
	// WorkflowStep is asked before record r, active, makes another
	// transition (r.Transitions counts those it made): an error blocks
	// the record instead (workflow_blocked, the error's message in
	// data.reason) and enqueues nothing.
	WorkflowStep(r *WorkflowRecord) error
	// ScheduleSlot is asked before a due schedule of tenant creates its
	// task: an error skips the slot (the schedule still advances to its
	// next one; schedule_task_created says data.refused, the error's
	// message, and names no task).
	ScheduleSlot(tenant string) error
}
