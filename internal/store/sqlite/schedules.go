package sqlite

import (
	"context"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// The schedule rules are storecore's (schedules.go), run in the writer's
// transaction (coreTx).

// CreateSchedule implements host.Schedules.
func (s *Store) CreateSchedule(ctx context.Context, spec host.ScheduleSpec) (*host.RecurringSchedule, error) {
	return s.putSchedule(ctx, "create schedule", spec, false)
}

// PutSchedule implements host.Schedules.
func (s *Store) PutSchedule(ctx context.Context, spec host.ScheduleSpec) (*host.RecurringSchedule, error) {
	return s.putSchedule(ctx, "put schedule", spec, true)
}

func (s *Store) putSchedule(ctx context.Context, op string, spec host.ScheduleSpec, replace bool) (*host.RecurringSchedule, error) {
	if err := storecore.CheckScheduleSpec(op, &spec); err != nil {
		return nil, err
	}
	var out *host.RecurringSchedule
	err := s.w.do(ctx, func(tx *wtx) error {
		var err error
		out, err = storecore.PutSchedule(ctx, coreTx{s, tx}, op, &spec, replace, s.now())
		return err
	})
	return out, host.Wrap(op, spec.Name, err)
}

// UpdateSchedule implements host.Schedules.
func (s *Store) UpdateSchedule(ctx context.Context, tenant, ref string, u host.ScheduleUpdate) (*host.RecurringSchedule, error) {
	const op = "update schedule"
	if err := storecore.CheckScheduleUpdate(op, u); err != nil {
		return nil, err
	}
	var out *host.RecurringSchedule
	err := s.w.do(ctx, func(tx *wtx) error {
		var err error
		out, err = storecore.ChangeSchedule(ctx, coreTx{s, tx}, op, tenant, ref, u, s.now())
		return err
	})
	return out, host.Wrap(op, ref, err)
}

// Schedule implements host.Schedules.
func (s *Store) Schedule(ctx context.Context, tenant, ref string) (*host.RecurringSchedule, error) {
	r, err := storecore.LoadSchedule(ctx, coreDB{s}, "", "get schedule", tenant, ref)
	return r, host.Wrap("get schedule", ref, err)
}

// ListSchedules implements host.Schedules.
func (s *Store) ListSchedules(ctx context.Context, tenant string) ([]*host.RecurringSchedule, error) {
	out, err := storecore.ListSchedules(ctx, coreDB{s}, tenant)
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
		return storecore.DeleteSchedule(ctx, coreTx{s, tx}, op, tenant, ref)
	})
	return host.Wrap(op, ref, err)
}

// NextScheduleRun implements host.Schedules.
func (s *Store) NextScheduleRun(ctx context.Context) (time.Time, bool, error) {
	next, ok, err := storecore.NextScheduleRun(ctx, coreDB{s}, storecore.SQLiteDialect)
	return next, ok, host.Wrap("next schedule run", "", err)
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
		var err error
		out, err = storecore.FireDueSchedules(ctx, coreTx{s, tx}, s.opts.Quotas, now)
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	return out, nil
}
