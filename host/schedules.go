package host

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Schedule events (the agent runtime schema §14).
const (
	// EventScheduleUpserted: a schedule was created, changed, paused,
	// resumed or deleted (data.change says which).
	EventScheduleUpserted = "schedule_upserted"
	// EventScheduleTaskCreated: a due schedule enqueued its task
	// (data.schedule_id, data.slot).
	EventScheduleTaskCreated = "schedule_task_created"
)

// MaxIntervalSeconds is the longest schedule interval (one year).
const MaxIntervalSeconds = 366 * 24 * 3600

// RecurringSchedule is a runtime-owned row that enqueues a normal task
// intent every interval (the agent runtime schema §11b, field names as written there).
// It decides when work should exist; it never runs work itself.
type RecurringSchedule struct {
	ScheduleID      string     `json:"schedule_id"`
	Name            string     `json:"name"`
	Enabled         bool       `json:"enabled"`
	IntervalSeconds int64      `json:"interval_seconds"`
	NextRunAt       time.Time  `json:"next_run_at"`
	LastRunAt       *time.Time `json:"last_run_at"`
	Task            TaskIntent `json:"task"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	// Tenant owns the schedule and the tasks it creates.
	Tenant string `json:"tenant"`
}

// ScheduleSpec creates a schedule (or, for PutSchedule, replaces the
// interval and task of the one with the same name).
type ScheduleSpec struct {
	Name            string
	IntervalSeconds int64
	Task            TaskIntent
	// Enabled nil means true for a new schedule and unchanged for an
	// existing one.
	Enabled *bool
	// Tenant "" is DefaultTenant.
	Tenant string
}

// ScheduleUpdate changes an existing schedule; nil fields are kept. A new
// interval moves next_run_at to now + interval; resuming a paused
// schedule does too, so a pause is not caught up.
type ScheduleUpdate struct {
	Enabled         *bool
	IntervalSeconds *int64
	Task            *TaskIntent
}

// Schedules stores recurring schedules and fires them. Every lookup takes
// the tenant ("" is DefaultTenant) and a schedule's id or its name; a
// schedule of another tenant is ErrNotFound like a missing one.
type Schedules interface {
	// CreateSchedule validates and stores a new schedule (event
	// schedule_upserted); ErrConflict when the tenant has one of that
	// name. Its first run is due at now + interval.
	CreateSchedule(ctx context.Context, spec ScheduleSpec) (*RecurringSchedule, error)
	// PutSchedule is CreateSchedule, or, when the tenant has a schedule
	// of that name, an update of its interval and task (and enabled, if
	// given); nothing is written when nothing changes.
	PutSchedule(ctx context.Context, spec ScheduleSpec) (*RecurringSchedule, error)
	// UpdateSchedule changes a schedule (event schedule_upserted).
	UpdateSchedule(ctx context.Context, tenant, ref string, u ScheduleUpdate) (*RecurringSchedule, error)
	// Schedule returns one schedule.
	Schedule(ctx context.Context, tenant, ref string) (*RecurringSchedule, error)
	// ListSchedules returns the tenant's schedules ("" : every tenant's),
	// by name.
	ListSchedules(ctx context.Context, tenant string) ([]*RecurringSchedule, error)
	// DeleteSchedule removes a schedule (event schedule_upserted with
	// change "deleted"); the tasks it created stay.
	DeleteSchedule(ctx context.Context, tenant, ref string) error
	// NextScheduleRun returns the earliest next_run_at of the enabled
	// schedules; ok is false when there is none. Dispatch reads it to
	// fire schedules only when one is due.
	NextScheduleRun(ctx context.Context) (next time.Time, ok bool, err error)
	// FireDueSchedules enqueues one task for each enabled schedule due at
	// now and returns them. Catch-up is coalesced (the agent runtime schema §11b): however
	// many intervals were missed, one evaluation creates at most one task
	// per schedule, whose slot is the schedule's next_run_at, then
	// next_run_at becomes now + interval. The task is a normal task
	// (Enqueue's validation) available at the slot, with source
	// ScheduleSource(id, slot); each firing is one write (events
	// schedule_task_created and task_enqueued), and a slot never yields a
	// second task, even from two processes or after a crash.
	FireDueSchedules(ctx context.Context, now time.Time) ([]*TaskRecord, error)
}

// ScheduleTaskSource is the source of a schedule's task intent as stored.
func ScheduleTaskSource(scheduleID string) string { return "schedule:" + scheduleID }

// ScheduleSource is the source key of the task a schedule creates for the
// slot due at slot: "schedule:<schedule_id>:<unix seconds>".
func ScheduleSource(scheduleID string, slot time.Time) string {
	return ScheduleTaskSource(scheduleID) + ":" + strconv.FormatInt(slot.Unix(), 10)
}

// ValidateScheduleSpec checks a spec as CreateSchedule does: name
// required (1 to 128 bytes, no control characters), interval whole
// seconds from 1 to MaxIntervalSeconds, the task a valid intent without a
// source (see ValidateScheduleTask).
func ValidateScheduleSpec(op string, spec *ScheduleSpec) error {
	if err := checkName(op, "name", spec.Name, 128, false); err != nil {
		return err
	}
	if err := CheckInterval(op, spec.IntervalSeconds); err != nil {
		return err
	}
	if spec.Tenant != "" {
		if err := CheckTenant(op, spec.Tenant); err != nil {
			return err
		}
	}
	return ValidateScheduleTask(op, &spec.Task)
}

// CheckInterval checks interval_seconds.
func CheckInterval(op string, seconds int64) error {
	if seconds < 1 || seconds > MaxIntervalSeconds {
		return Invalid(op, "interval_seconds", "must be a whole number of seconds from 1 to %d", MaxIntervalSeconds)
	}
	return nil
}

// ValidateScheduleTask checks a schedule's task intent as Enqueue does,
// naming fields "task.<field>". The store sets its source to
// "schedule:<schedule_id>" (each task's is that and ":<slot>"), so a
// source of another form is refused, and so are available_at and
// schedule: the task is available at its slot.
func ValidateScheduleTask(op string, in *TaskIntent) error {
	if in.Source != "" && !strings.HasPrefix(in.Source, "schedule:") {
		return Invalid(op, "task.source", "is set by the schedule (schedule:<schedule_id>); leave it out")
	}
	if in.AvailableAt != "" || in.Schedule != nil {
		return Invalid(op, "task.available_at", "a schedule's task cannot set available_at or schedule; the schedule decides")
	}
	probe := *in
	probe.Source = "schedule"
	if err := ValidateIntent(&probe); err != nil {
		if he, ok := err.(*Error); ok {
			c := *he
			c.Op = op
			if c.Field != "" {
				c.Field = "task." + c.Field
			}
			return &c
		}
		return err
	}
	return nil
}

// ParseEvery parses a schedule interval as the CLI and manifests write it:
// a Go duration of whole seconds, at least 1s ("1s", "30s", "5m", "1h",
// "1h30m"). "1.5s", "0s" and "500ms" are refused.
func ParseEvery(s string) (int64, error) {
	d, err := ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 30s, 5m, 1h or 1d", s)
	}
	if d < time.Second || d%time.Second != 0 {
		return 0, fmt.Errorf("%q: the interval must be whole seconds, 1s or more", s)
	}
	if d > MaxIntervalSeconds*time.Second {
		return 0, fmt.Errorf("%q: the interval may be at most %ds", s, MaxIntervalSeconds)
	}
	return int64(d / time.Second), nil
}

// FormatEvery writes interval seconds as ParseEvery reads them ("5m0s" is
// written "5m").
func FormatEvery(seconds int64) string {
	s := (time.Duration(seconds) * time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
