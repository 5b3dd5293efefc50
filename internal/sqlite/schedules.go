package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/storecore"
)

const scheduleColumns = `schedule_id, tenant, name, enabled, interval_seconds, next_run_at, last_run_at, task, created_at, updated_at`

func scanSchedule(row interface{ Scan(...any) error }) (*host.RecurringSchedule, error) {
	var r host.RecurringSchedule
	var next, created, updated, task string
	var last sql.NullString
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

// loadSchedule reads a schedule by id or, failing that, by name.
func loadSchedule(q queryer, ctx context.Context, op, tenant, ref string) (*host.RecurringSchedule, error) {
	if ref == "" {
		return nil, host.Invalid(op, "schedule", "an id or a name is required")
	}
	r, err := scanSchedule(q.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE tenant = ?1 AND (schedule_id = ?2 OR name = ?2) ORDER BY schedule_id = ?2 DESC LIMIT 1`, storecore.TenantOr(tenant), ref))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, host.Errorf(op, ref, host.ErrNotFound, "no schedule has this id or name")
	}
	return r, err
}

// scheduleEvent appends schedule_upserted for r.
func (s *Store) scheduleEvent(tx *wtx, change string, r *host.RecurringSchedule) error {
	_, err := s.event(tx, host.EventScheduleUpserted, "", "", storecore.ScheduleEventData(change, r))
	return err
}

// writeSchedule inserts or replaces r's row.
func writeSchedule(tx *wtx, r *host.RecurringSchedule) error {
	r.Task.Source = host.ScheduleTaskSource(r.ScheduleID)
	task, err := json.Marshal(r.Task)
	if err != nil {
		return err
	}
	var last any
	if r.LastRunAt != nil {
		last = ts(*r.LastRunAt)
	}
	_, err = tx.Exec(`INSERT INTO schedules (`+scheduleColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (schedule_id) DO UPDATE SET enabled = excluded.enabled, interval_seconds = excluded.interval_seconds,
			next_run_at = excluded.next_run_at, task = excluded.task, updated_at = excluded.updated_at`,
		r.ScheduleID, r.Tenant, r.Name, r.Enabled, r.IntervalSeconds, ts(r.NextRunAt), last, string(task), ts(r.CreatedAt), ts(r.UpdatedAt))
	return err
}

// CreateSchedule implements host.Schedules.
func (s *Store) CreateSchedule(ctx context.Context, spec host.ScheduleSpec) (*host.RecurringSchedule, error) {
	return s.putSchedule(ctx, "create schedule", spec, false)
}

// PutSchedule implements host.Schedules.
func (s *Store) PutSchedule(ctx context.Context, spec host.ScheduleSpec) (*host.RecurringSchedule, error) {
	return s.putSchedule(ctx, "put schedule", spec, true)
}

func (s *Store) putSchedule(ctx context.Context, op string, spec host.ScheduleSpec, replace bool) (*host.RecurringSchedule, error) {
	if err := host.ValidateScheduleSpec(op, &spec); err != nil {
		return nil, err
	}
	spec.Tenant = storecore.TenantOr(spec.Tenant)
	var out *host.RecurringSchedule
	err := s.w.do(ctx, func(tx *wtx) error {
		now := s.now()
		old, err := loadSchedule(txq{tx}, ctx, op, spec.Tenant, spec.Name)
		switch {
		case err == nil && old.Name != spec.Name:
			// spec.Name matched another schedule's id: names and ids
			// must not be confused.
			return host.Errorf(op, spec.Name, host.ErrConflict, "is the id of schedule %q", old.Name)
		case err == nil && !replace:
			return host.Errorf(op, spec.Name, host.ErrConflict, "a schedule of this name exists (%s)", old.ScheduleID)
		case err == nil:
			u := host.ScheduleUpdate{Enabled: spec.Enabled, IntervalSeconds: &spec.IntervalSeconds, Task: &spec.Task}
			out, err = s.updateSchedule(tx, old, u, now)
			return err
		case !errors.Is(err, host.ErrNotFound):
			return err
		}
		r := storecore.NewSchedule(host.NewID("sched"), &spec, now)
		if err := writeSchedule(tx, r); err != nil {
			return err
		}
		out = r
		return s.scheduleEvent(tx, "created", r)
	})
	return out, host.Wrap(op, spec.Name, err)
}

// updateSchedule applies u to r; unchanged, it writes nothing.
func (s *Store) updateSchedule(tx *wtx, r *host.RecurringSchedule, u host.ScheduleUpdate, now time.Time) (*host.RecurringSchedule, error) {
	c, change, changed := storecore.UpdateSchedule(r, u, now)
	if !changed {
		return r, nil
	}
	if err := writeSchedule(tx, c); err != nil {
		return nil, err
	}
	return c, s.scheduleEvent(tx, change, c)
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
	err := s.w.do(ctx, func(tx *wtx) error {
		r, err := loadSchedule(txq{tx}, ctx, op, tenant, ref)
		if err != nil {
			return err
		}
		out, err = s.updateSchedule(tx, r, u, s.now())
		return err
	})
	return out, host.Wrap(op, ref, err)
}

// Schedule implements host.Schedules.
func (s *Store) Schedule(ctx context.Context, tenant, ref string) (*host.RecurringSchedule, error) {
	r, err := loadSchedule(s.db, ctx, "get schedule", tenant, ref)
	return r, host.Wrap("get schedule", ref, err)
}

// ListSchedules implements host.Schedules.
func (s *Store) ListSchedules(ctx context.Context, tenant string) ([]*host.RecurringSchedule, error) {
	out, err := queryAll(s, ctx, scanSchedule, `SELECT `+scheduleColumns+` FROM schedules WHERE ?1 = '' OR tenant = ?1 ORDER BY name, tenant`, tenant)
	return out, host.Wrap("list schedules", "", err)
}

// queryAll runs a query on the pool and scans every row with scan.
func queryAll[T any](s *Store, ctx context.Context, scan func(interface{ Scan(...any) error }) (T, error), query string, args ...any) ([]T, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
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

// DeleteSchedule implements host.Schedules.
func (s *Store) DeleteSchedule(ctx context.Context, tenant, ref string) error {
	const op = "delete schedule"
	err := s.w.do(ctx, func(tx *wtx) error {
		r, err := loadSchedule(txq{tx}, ctx, op, tenant, ref)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM schedules WHERE schedule_id = ?`, r.ScheduleID); err != nil {
			return err
		}
		return s.scheduleEvent(tx, "deleted", r)
	})
	return host.Wrap(op, ref, err)
}

// NextScheduleRun implements host.Schedules.
func (s *Store) NextScheduleRun(ctx context.Context) (time.Time, bool, error) {
	var next sql.NullString
	err := s.queryRow(ctx, `SELECT MIN(next_run_at) FROM schedules WHERE enabled = 1`).Scan(&next)
	if err != nil || !next.Valid {
		return time.Time{}, false, host.Wrap("next schedule run", "", err)
	}
	return parseTS(next.String), true, nil
}

// FireDueSchedules implements host.Schedules; a zero now is the store's
// clock.
func (s *Store) FireDueSchedules(ctx context.Context, now time.Time) ([]*host.TaskRecord, error) {
	const op = "fire schedules"
	if now.IsZero() {
		now = s.now()
	}
	now = now.UTC()
	var out []*host.TaskRecord
	err := s.w.do(ctx, func(tx *wtx) error {
		out = out[:0]
		rows, err := tx.Query(`SELECT `+scheduleColumns+` FROM schedules WHERE enabled = 1 AND next_run_at <= ? ORDER BY next_run_at, schedule_id`, ts(now))
		if err != nil {
			return err
		}
		var due []*host.RecurringSchedule
		for rows.Next() {
			r, err := scanSchedule(rows)
			if err != nil {
				rows.Close()
				return err
			}
			due = append(due, r)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		for _, r := range due {
			t, err := s.fireSchedule(tx, r, now)
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
// inserted first: if it exists (it cannot while next_run_at moves in the
// same transaction, but the constraint is what guarantees it) no task is
// made. A task the queue refuses (its type no longer valid...) is not made
// either; the refusal is in the event.
func (s *Store) fireSchedule(tx *wtx, r *host.RecurringSchedule, now time.Time) (*host.TaskRecord, error) {
	intent, data := storecore.ScheduleSlotIntent(r)
	slot := r.NextRunAt
	t, refused := storecore.NewTask("fire schedule", &intent, 0, now)
	var task *host.TaskRecord
	if refused == nil {
		if why := storecore.ScheduleSlotRefused(s.opts.Quotas, r.Tenant); why != "" {
			refused = errors.New(why)
		}
	}
	if refused == nil {
		t.Tenant = r.Tenant
		res, err := tx.Exec(`INSERT OR IGNORE INTO schedule_runs (schedule_id, slot, task_id, fired_at) VALUES (?, ?, ?, ?)`,
			r.ScheduleID, slot.Unix(), t.TaskID, ts(now))
		if err != nil {
			return nil, err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			if err := s.insertTask(tx, t, ""); err != nil {
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
	if _, err := tx.Exec(`UPDATE schedules SET next_run_at = ?, last_run_at = ? WHERE schedule_id = ?`, ts(next), ts(now), r.ScheduleID); err != nil {
		return nil, err
	}
	taskID := ""
	if task != nil {
		taskID = task.TaskID
	}
	data["next_run_at"] = ts(next)
	_, err := s.event(tx, host.EventScheduleTaskCreated, taskID, "", data)
	return task, err
}
