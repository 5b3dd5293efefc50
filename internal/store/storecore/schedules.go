package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
)

// The schedule rules of host.Schedules, written once against Tx.

// ScheduleColumns are the columns of a schedules row, as ScanSchedule
// reads them.
const ScheduleColumns = `schedule_id, tenant, name, enabled, interval_seconds, next_run_at, last_run_at, task, created_at, updated_at`

// ScanSchedule reads a schedules row (ScheduleColumns).
func ScanSchedule(row Row) (*host.RecurringSchedule, error) {
	var r host.RecurringSchedule
	var next, created, updated, task string
	var last *string
	if err := row.Scan(&r.ScheduleID, &r.Tenant, &r.Name, &r.Enabled, &r.IntervalSeconds, &next, &last, &task, &created, &updated); err != nil {
		return nil, err
	}
	r.NextRunAt, r.CreatedAt, r.UpdatedAt = ParseTime(next), ParseTime(created), ParseTime(updated)
	if last != nil {
		t := ParseTime(*last)
		r.LastRunAt = &t
	}
	if err := json.Unmarshal([]byte(task), &r.Task); err != nil {
		return nil, err
	}
	return &r, nil
}

// CollectRows scans every row with scan and closes rows.
func CollectRows[T any](rows Rows, scan func(Row) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// LoadSchedule reads a schedule by id or, failing that, by name; lock
// (Dialect.LockRows, or "" for a read) ends the query.
func LoadSchedule(ctx context.Context, q Querier, lock, op, tenant, ref string) (*host.RecurringSchedule, error) {
	if ref == "" {
		return nil, host.Invalid(op, "schedule", "an id or a name is required")
	}
	r, err := ScanSchedule(q.QueryRow(ctx, `SELECT `+ScheduleColumns+` FROM schedules
		WHERE tenant = $1 AND (schedule_id = $2 OR name = $2) ORDER BY schedule_id = $2 DESC LIMIT 1`+lock, TenantOr(tenant), ref))
	if errors.Is(err, ErrNoRows) {
		return nil, host.Errorf(op, ref, host.ErrNotFound, "no schedule has this id or name")
	}
	return r, err
}

// ListSchedules lists the schedules of tenant ("": all).
func ListSchedules(ctx context.Context, q Querier, tenant string) ([]*host.RecurringSchedule, error) {
	rows, err := q.Query(ctx, `SELECT `+ScheduleColumns+` FROM schedules WHERE $1 = '' OR tenant = $1 ORDER BY name, tenant`, tenant)
	if err != nil {
		return nil, err
	}
	return CollectRows(rows, ScanSchedule)
}

// NextScheduleRun is the earliest next run of an enabled schedule.
func NextScheduleRun(ctx context.Context, q Querier, d *Dialect) (time.Time, bool, error) {
	var next *string
	err := q.QueryRow(ctx, `SELECT MIN(next_run_at) FROM schedules WHERE enabled = `+d.True).Scan(&next)
	if err != nil || next == nil {
		return time.Time{}, false, err
	}
	return ParseTime(*next), true, nil
}

func scheduleEvent(tx Tx, change string, r *host.RecurringSchedule) error {
	return tx.Event(host.EventScheduleUpserted, "", "", ScheduleEventData(change, r))
}

// scheduleTask is r's task as stored: its source is the schedule's.
func scheduleTask(r *host.RecurringSchedule) (string, error) {
	r.Task.Source = host.ScheduleTaskSource(r.ScheduleID)
	b, err := json.Marshal(r.Task)
	return string(b), err
}

// CheckScheduleSpec validates spec and sets its tenant.
func CheckScheduleSpec(op string, spec *host.ScheduleSpec) error {
	if err := host.ValidateScheduleSpec(op, spec); err != nil {
		return err
	}
	spec.Tenant = TenantOr(spec.Tenant)
	return nil
}

// PutSchedule creates the schedule, or finds the tenant's schedule of
// that name (locked) and, if replace, updates it. A schedule of the name
// another writer inserts meanwhile is found as existing: the insert waits
// for that writer's transaction (ON CONFLICT), then the row is read again.
func PutSchedule(ctx context.Context, tx Tx, op string, spec *host.ScheduleSpec, replace bool, now time.Time) (*host.RecurringSchedule, error) {
	for try := 0; ; try++ {
		old, err := LoadSchedule(ctx, tx, tx.Dialect().LockRows, op, spec.Tenant, spec.Name)
		switch {
		case err == nil && old.Name != spec.Name:
			// spec.Name matched another schedule's id: names and ids
			// must not be confused.
			return nil, host.Errorf(op, spec.Name, host.ErrConflict, "is the id of schedule %q", old.Name)
		case err == nil && !replace:
			return nil, host.Errorf(op, spec.Name, host.ErrConflict, "a schedule of this name exists (%s)", old.ScheduleID)
		case err == nil:
			u := host.ScheduleUpdate{Enabled: spec.Enabled, IntervalSeconds: &spec.IntervalSeconds, Task: &spec.Task}
			return applyScheduleUpdate(ctx, tx, old, u, now)
		case !errors.Is(err, host.ErrNotFound) || try > 0:
			return nil, err
		}
		r := NewSchedule(host.NewID("sched"), spec, now)
		task, err := scheduleTask(r)
		if err != nil {
			return nil, err
		}
		n, err := tx.Exec(ctx, `INSERT INTO schedules (`+ScheduleColumns+`) VALUES ($1, $2, $3, $4, $5, $6, NULL, $7, $8, $9)
			ON CONFLICT (tenant, name) DO NOTHING`,
			r.ScheduleID, r.Tenant, r.Name, r.Enabled, r.IntervalSeconds, host.FormatTime(r.NextRunAt), task, host.FormatTime(r.CreatedAt), host.FormatTime(r.UpdatedAt))
		if err != nil {
			return nil, err
		}
		if n == 1 {
			return r, scheduleEvent(tx, "created", r)
		}
	}
}

// applyScheduleUpdate applies u to r (locked); unchanged, it writes
// nothing.
func applyScheduleUpdate(ctx context.Context, tx Tx, r *host.RecurringSchedule, u host.ScheduleUpdate, now time.Time) (*host.RecurringSchedule, error) {
	c, change, changed := UpdateSchedule(r, u, now)
	if !changed {
		return r, nil
	}
	task, err := scheduleTask(c)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `UPDATE schedules SET enabled = $1, interval_seconds = $2, next_run_at = $3, task = $4, updated_at = $5
		WHERE schedule_id = $6`, c.Enabled, c.IntervalSeconds, host.FormatTime(c.NextRunAt), task, host.FormatTime(c.UpdatedAt), c.ScheduleID); err != nil {
		return nil, err
	}
	return c, scheduleEvent(tx, change, c)
}

// CheckScheduleUpdate validates u.
func CheckScheduleUpdate(op string, u host.ScheduleUpdate) error {
	if u.IntervalSeconds != nil {
		if err := host.CheckInterval(op, *u.IntervalSeconds); err != nil {
			return err
		}
	}
	if u.Task != nil {
		return host.ValidateScheduleTask(op, u.Task)
	}
	return nil
}

// ChangeSchedule applies u to the schedule ref of tenant.
func ChangeSchedule(ctx context.Context, tx Tx, op, tenant, ref string, u host.ScheduleUpdate, now time.Time) (*host.RecurringSchedule, error) {
	r, err := LoadSchedule(ctx, tx, tx.Dialect().LockRows, op, tenant, ref)
	if err != nil {
		return nil, err
	}
	return applyScheduleUpdate(ctx, tx, r, u, now)
}

// DeleteSchedule deletes the schedule ref of tenant.
func DeleteSchedule(ctx context.Context, tx Tx, op, tenant, ref string) error {
	r, err := LoadSchedule(ctx, tx, tx.Dialect().LockRows, op, tenant, ref)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM schedules WHERE schedule_id = $1`, r.ScheduleID); err != nil {
		return err
	}
	return scheduleEvent(tx, "deleted", r)
}

// TaskTx is a Tx that inserts tasks (the queue's rule, not yet written
// once: see RATIONALE.md).
type TaskTx interface {
	Tx
	InsertTask(ctx context.Context, t *host.TaskRecord) error
}

// FireDueSchedules fires the schedules due at now. Several writers may
// fire at once: each locks the due schedules it fires
// (Dialect.SkipLocked: one another writer is firing or changing is
// skipped, and a schedule another has just fired is no longer due when
// its row is read again), and a slot's task is created only by the
// firing that inserts its row in schedule_runs (primary key
// (schedule_id, slot)).
func FireDueSchedules(ctx context.Context, tx TaskTx, quotas host.StoreQuotas, now time.Time) ([]*host.TaskRecord, error) {
	d := tx.Dialect()
	rows, err := tx.Query(ctx, `SELECT `+ScheduleColumns+` FROM schedules WHERE enabled = `+d.True+` AND next_run_at <= $1
		ORDER BY next_run_at, schedule_id`+d.SkipLocked, host.FormatTime(now))
	if err != nil {
		return nil, err
	}
	due, err := CollectRows(rows, ScanSchedule)
	if err != nil {
		return nil, err
	}
	var out []*host.TaskRecord
	for _, r := range due {
		t, err := fireSchedule(ctx, tx, quotas, r, now)
		if err != nil {
			return nil, err
		}
		if t != nil {
			out = append(out, t)
		}
	}
	return out, nil
}

// fireSchedule creates the task of r's due slot (its next_run_at) and
// advances r to now + interval. The slot's row in schedule_runs is
// inserted first: if it exists, no task is made. A task the queue refuses
// (its type no longer valid...) is not made either; the refusal is in the
// event.
func fireSchedule(ctx context.Context, tx TaskTx, quotas host.StoreQuotas, r *host.RecurringSchedule, now time.Time) (*host.TaskRecord, error) {
	intent, data := ScheduleSlotIntent(r)
	t, refused := NewTask("fire schedule", &intent, 0, now)
	var task *host.TaskRecord
	if refused == nil {
		if why := ScheduleSlotRefused(quotas, r.Tenant); why != "" {
			refused = errors.New(why)
		}
	}
	if refused == nil {
		t.Tenant = r.Tenant
		n, err := tx.Exec(ctx, `INSERT INTO schedule_runs (schedule_id, slot, task_id, fired_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (schedule_id, slot) DO NOTHING`, r.ScheduleID, r.NextRunAt.Unix(), t.TaskID, host.FormatTime(now))
		if err != nil {
			return nil, err
		}
		if n == 1 {
			if err := tx.InsertTask(ctx, t); err != nil {
				return nil, err
			}
			task = t
			data["task_id"] = t.TaskID
		} else {
			data["refused"] = "this slot already has a task"
		}
	} else {
		data["refused"] = refused.Error()
	}
	next := now.Add(time.Duration(r.IntervalSeconds) * time.Second)
	if _, err := tx.Exec(ctx, `UPDATE schedules SET next_run_at = $1, last_run_at = $2 WHERE schedule_id = $3`,
		host.FormatTime(next), host.FormatTime(now), r.ScheduleID); err != nil {
		return nil, err
	}
	taskID := ""
	if task != nil {
		taskID = task.TaskID
	}
	data["next_run_at"] = host.FormatTime(next)
	return task, tx.Event(host.EventScheduleTaskCreated, taskID, "", data)
}
