package sqlite

import (
	"context"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// The schedule rules are storecore's (schedules.go), run in the writer's
// transaction (coreTx).

// CreateSchedule implements host.Schedules (storecore.Queue).
func (s *Store) CreateSchedule(ctx context.Context, spec host.ScheduleSpec) (*host.RecurringSchedule, error) {
	return s.queue().PutSchedule(ctx, "create schedule", spec, false)
}

// PutSchedule implements host.Schedules (storecore.Queue).
func (s *Store) PutSchedule(ctx context.Context, spec host.ScheduleSpec) (*host.RecurringSchedule, error) {
	return s.queue().PutSchedule(ctx, "put schedule", spec, true)
}

// UpdateSchedule implements host.Schedules (storecore.Queue).
func (s *Store) UpdateSchedule(ctx context.Context, tenant, ref string, u host.ScheduleUpdate) (*host.RecurringSchedule, error) {
	return s.queue().UpdateSchedule(ctx, tenant, ref, u)
}

// Schedule implements host.Schedules (storecore.Queue).
func (s *Store) Schedule(ctx context.Context, tenant, ref string) (*host.RecurringSchedule, error) {
	return s.queue().Schedule(ctx, tenant, ref)
}

// ListSchedules implements host.Schedules (storecore.Queue).
func (s *Store) ListSchedules(ctx context.Context, tenant string) ([]*host.RecurringSchedule, error) {
	return s.queue().ListSchedules(ctx, tenant)
}

// DeleteSchedule implements host.Schedules (storecore.Queue).
func (s *Store) DeleteSchedule(ctx context.Context, tenant, ref string) error {
	return s.queue().DeleteSchedule(ctx, tenant, ref)
}

// NextScheduleRun implements host.Schedules (storecore.Queue).
func (s *Store) NextScheduleRun(ctx context.Context) (time.Time, bool, error) {
	return s.queue().NextScheduleRun(ctx, storecore.SQLiteDialect)
}

// FireDueSchedules implements host.Schedules (storecore.Queue); a zero
// now is the store's clock.
func (s *Store) FireDueSchedules(ctx context.Context, now time.Time) ([]*host.TaskRecord, error) {
	return s.queue().FireDueSchedules(ctx, s.opts.Quotas, now)
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
