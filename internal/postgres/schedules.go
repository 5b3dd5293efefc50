package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/storecore"
)

// Compile-time interface guards of this file and its siblings (sensors,
// workflows, runs, messages).
var (
	_ host.Schedules = (*Store)(nil)
	_ host.Sensors   = (*Store)(nil)
	_ host.Workflows = (*Store)(nil)
	_ host.Runs      = (*Store)(nil)
	_ host.Messages  = (*Store)(nil)
)

// queryRower reads one row: a write transaction (*tx) or the pool.
type queryRower interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

const scheduleColumns = `schedule_id, tenant, name, enabled, interval_seconds, next_run_at, last_run_at, task, created_at, updated_at`

func scanSchedule(row pgx.Row) (*host.RecurringSchedule, error) {
	var r host.RecurringSchedule
	var next, created, updated, task string
	var last *string
	if err := row.Scan(&r.ScheduleID, &r.Tenant, &r.Name, &r.Enabled, &r.IntervalSeconds, &next, &last, &task, &created, &updated); err != nil {
		return nil, err
	}
	r.NextRunAt, r.CreatedAt, r.UpdatedAt = parseTS(next), parseTS(created), parseTS(updated)
	r.LastRunAt = parseNullTS(last)
	if err := json.Unmarshal([]byte(task), &r.Task); err != nil {
		return nil, err
	}
	return &r, nil
}

// loadSchedule reads a schedule by id or, failing that, by name;
// forUpdate locks its row until the transaction ends.
func loadSchedule(ctx context.Context, q queryRower, op, tenant, ref string, forUpdate bool) (*host.RecurringSchedule, error) {
	if ref == "" {
		return nil, host.Invalid(op, "schedule", "an id or a name is required")
	}
	lock := ""
	if forUpdate {
		lock = ` FOR UPDATE`
	}
	r, err := scanSchedule(q.QueryRow(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE tenant = $1 AND (schedule_id = $2 OR name = $2) ORDER BY schedule_id = $2 DESC LIMIT 1`+lock, storecore.TenantOr(tenant), ref))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Errorf(op, ref, host.ErrNotFound, "no schedule has this id or name")
	}
	return r, err
}

// scheduleEvent queues schedule_upserted for r.
func (x *tx) scheduleEvent(change string, r *host.RecurringSchedule) error {
	_, err := x.event(host.EventScheduleUpserted, "", "", storecore.ScheduleEventData(change, r))
	return err
}

// scheduleTask is r's task as stored: its source is the schedule's.
func scheduleTask(r *host.RecurringSchedule) (string, error) {
	r.Task.Source = host.ScheduleTaskSource(r.ScheduleID)
	b, err := json.Marshal(r.Task)
	return string(b), err
}

// insertSchedule stores the new schedule r unless the tenant has one of
// its name (inserted false: another node created it meanwhile).
func (x *tx) insertSchedule(ctx context.Context, r *host.RecurringSchedule) (bool, error) {
	task, err := scheduleTask(r)
	if err != nil {
		return false, err
	}
	tag, err := x.Exec(ctx, `INSERT INTO schedules (`+scheduleColumns+`) VALUES ($1, $2, $3, $4, $5, $6, NULL, $7, $8, $9)
		ON CONFLICT (tenant, name) DO NOTHING`,
		r.ScheduleID, r.Tenant, r.Name, r.Enabled, r.IntervalSeconds, ts(r.NextRunAt), task, ts(r.CreatedAt), ts(r.UpdatedAt))
	return tag.RowsAffected() == 1, err
}

// CreateSchedule implements host.Schedules.
func (s *Store) CreateSchedule(ctx context.Context, spec host.ScheduleSpec) (*host.RecurringSchedule, error) {
	return s.putSchedule(ctx, "create schedule", spec, false)
}

// PutSchedule implements host.Schedules.
func (s *Store) PutSchedule(ctx context.Context, spec host.ScheduleSpec) (*host.RecurringSchedule, error) {
	return s.putSchedule(ctx, "put schedule", spec, true)
}

// putSchedule creates the schedule, or finds the tenant's schedule of
// that name (locked) and, if replace, updates it. A schedule of the name
// another node inserts meanwhile is found as existing: the insert waits
// for that node's transaction (ON CONFLICT), then the row is read again.
func (s *Store) putSchedule(ctx context.Context, op string, spec host.ScheduleSpec, replace bool) (*host.RecurringSchedule, error) {
	if err := host.ValidateScheduleSpec(op, &spec); err != nil {
		return nil, err
	}
	spec.Tenant = storecore.TenantOr(spec.Tenant)
	var out *host.RecurringSchedule
	err := s.write(ctx, func(x *tx) error {
		now := s.now()
		for try := 0; ; try++ {
			old, err := loadSchedule(ctx, x, op, spec.Tenant, spec.Name, true)
			switch {
			case err == nil && old.Name != spec.Name:
				// spec.Name matched another schedule's id: names and
				// ids must not be confused.
				return host.Errorf(op, spec.Name, host.ErrConflict, "is the id of schedule %q", old.Name)
			case err == nil && !replace:
				return host.Errorf(op, spec.Name, host.ErrConflict, "a schedule of this name exists (%s)", old.ScheduleID)
			case err == nil:
				u := host.ScheduleUpdate{Enabled: spec.Enabled, IntervalSeconds: &spec.IntervalSeconds, Task: &spec.Task}
				out, err = x.updateSchedule(ctx, old, u, now)
				return err
			case !errors.Is(err, host.ErrNotFound) || try > 0:
				return err
			}
			r := storecore.NewSchedule(host.NewID("sched"), &spec, now)
			inserted, err := x.insertSchedule(ctx, r)
			if err != nil {
				return err
			}
			if inserted {
				out = r
				return x.scheduleEvent("created", r)
			}
		}
	})
	return out, host.Wrap(op, spec.Name, err)
}

// updateSchedule applies u to r (locked); unchanged, it writes nothing.
func (x *tx) updateSchedule(ctx context.Context, r *host.RecurringSchedule, u host.ScheduleUpdate, now time.Time) (*host.RecurringSchedule, error) {
	c, change, changed := storecore.UpdateSchedule(r, u, now)
	if !changed {
		return r, nil
	}
	task, err := scheduleTask(c)
	if err != nil {
		return nil, err
	}
	if _, err := x.Exec(ctx, `UPDATE schedules SET enabled = $1, interval_seconds = $2, next_run_at = $3, task = $4, updated_at = $5
		WHERE schedule_id = $6`, c.Enabled, c.IntervalSeconds, ts(c.NextRunAt), task, ts(c.UpdatedAt), c.ScheduleID); err != nil {
		return nil, err
	}
	return c, x.scheduleEvent(change, c)
}

// UpdateSchedule implements host.Schedules.
func (s *Store) UpdateSchedule(ctx context.Context, tenant, ref string, u host.ScheduleUpdate) (*host.RecurringSchedule, error) {
	const op = "update schedule"
	if u.IntervalSeconds != nil {
		if err := host.CheckInterval(op, *u.IntervalSeconds); err != nil {
			return nil, err
		}
	}
	if u.Task != nil {
		if err := host.ValidateScheduleTask(op, u.Task); err != nil {
			return nil, err
		}
	}
	var out *host.RecurringSchedule
	err := s.write(ctx, func(x *tx) error {
		r, err := loadSchedule(ctx, x, op, tenant, ref, true)
		if err != nil {
			return err
		}
		out, err = x.updateSchedule(ctx, r, u, s.now())
		return err
	})
	return out, host.Wrap(op, ref, err)
}

// Schedule implements host.Schedules.
func (s *Store) Schedule(ctx context.Context, tenant, ref string) (*host.RecurringSchedule, error) {
	r, err := loadSchedule(ctx, s.pool, "get schedule", tenant, ref, false)
	return r, host.Wrap("get schedule", ref, err)
}

// ListSchedules implements host.Schedules.
func (s *Store) ListSchedules(ctx context.Context, tenant string) ([]*host.RecurringSchedule, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE $1 = '' OR tenant = $1 ORDER BY name, tenant`, tenant)
	if err != nil {
		return nil, host.Wrap("list schedules", "", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*host.RecurringSchedule, error) { return scanSchedule(r) })
	return out, host.Wrap("list schedules", "", err)
}

// DeleteSchedule implements host.Schedules.
func (s *Store) DeleteSchedule(ctx context.Context, tenant, ref string) error {
	const op = "delete schedule"
	err := s.write(ctx, func(x *tx) error {
		r, err := loadSchedule(ctx, x, op, tenant, ref, true)
		if err != nil {
			return err
		}
		if _, err := x.Exec(ctx, `DELETE FROM schedules WHERE schedule_id = $1`, r.ScheduleID); err != nil {
			return err
		}
		return x.scheduleEvent("deleted", r)
	})
	return host.Wrap(op, ref, err)
}

// NextScheduleRun implements host.Schedules.
func (s *Store) NextScheduleRun(ctx context.Context) (time.Time, bool, error) {
	var next *string
	err := s.pool.QueryRow(ctx, `SELECT min(next_run_at) FROM schedules WHERE enabled`).Scan(&next)
	if err != nil || next == nil {
		return time.Time{}, false, host.Wrap("next schedule run", "", err)
	}
	return parseTS(*next), true, nil
}

// FireDueSchedules implements host.Schedules; a zero now is the store's
// clock. Several nodes may fire at once: each locks the due schedules it
// fires (FOR UPDATE SKIP LOCKED: one another node is firing or changing
// is skipped, and a schedule another node has just fired is no longer due
// when its row is read again), and a slot's task is created only by the
// firing that inserts its row in schedule_runs (primary key (schedule_id,
// slot)).
func (s *Store) FireDueSchedules(ctx context.Context, now time.Time) ([]*host.TaskRecord, error) {
	const op = "fire schedules"
	if now.IsZero() {
		now = s.now()
	}
	now = now.UTC()
	var out []*host.TaskRecord
	err := s.write(ctx, func(x *tx) error {
		out = out[:0]
		rows, err := x.Query(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE enabled AND next_run_at <= $1
			ORDER BY next_run_at, schedule_id FOR UPDATE SKIP LOCKED`, ts(now))
		if err != nil {
			return err
		}
		due, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*host.RecurringSchedule, error) { return scanSchedule(r) })
		if err != nil {
			return err
		}
		for _, r := range due {
			t, err := x.fireSchedule(ctx, r, now)
			if err != nil {
				return err
			}
			if t != nil {
				out = append(out, t)
			}
		}
		return nil
	})
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	return out, nil
}

// fireSchedule creates the task of r's due slot (its next_run_at) and
// advances r to now + interval. The slot's row in schedule_runs is
// inserted first: if it exists, no task is made. A task the queue refuses
// (its type no longer valid...) is not made either; the refusal is in the
// event.
func (x *tx) fireSchedule(ctx context.Context, r *host.RecurringSchedule, now time.Time) (*host.TaskRecord, error) {
	intent, data := storecore.ScheduleSlotIntent(r)
	t, refused := storecore.NewTask("fire schedule", &intent, 0, now)
	var task *host.TaskRecord
	if refused == nil {
		if why := storecore.ScheduleSlotRefused(x.s.opts.Quotas, r.Tenant); why != "" {
			refused = errors.New(why)
		}
	}
	if refused == nil {
		t.Tenant = r.Tenant
		tag, err := x.Exec(ctx, `INSERT INTO schedule_runs (schedule_id, slot, task_id, fired_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (schedule_id, slot) DO NOTHING`, r.ScheduleID, r.NextRunAt.Unix(), t.TaskID, ts(now))
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 1 {
			if err := x.insertTask(ctx, t, ""); err != nil {
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
	if _, err := x.Exec(ctx, `UPDATE schedules SET next_run_at = $1, last_run_at = $2 WHERE schedule_id = $3`, ts(next), ts(now), r.ScheduleID); err != nil {
		return nil, err
	}
	taskID := ""
	if task != nil {
		taskID = task.TaskID
	}
	data["next_run_at"] = ts(next)
	_, err := x.event(host.EventScheduleTaskCreated, taskID, "", data)
	return task, err
}
