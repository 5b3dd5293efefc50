package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
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

// The schedule rules are storecore's (schedules.go), run in a write
// transaction (coreTx): rows they change are locked (FOR UPDATE), and
// FireDueSchedules skips the schedules another node is firing (SKIP
// LOCKED); see storecore.PutSchedule and storecore.FireDueSchedules.

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
	err := s.write(ctx, func(x *tx) error {
		var err error
		out, err = storecore.PutSchedule(ctx, coreTx{x}, op, &spec, replace, s.now())
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
	err := s.write(ctx, func(x *tx) error {
		var err error
		out, err = storecore.ChangeSchedule(ctx, coreTx{x}, op, tenant, ref, u, s.now())
		return err
	})
	return out, host.Wrap(op, ref, err)
}

// Schedule implements host.Schedules.
func (s *Store) Schedule(ctx context.Context, tenant, ref string) (*host.RecurringSchedule, error) {
	r, err := storecore.LoadSchedule(ctx, corePool{s.pool}, "", "get schedule", tenant, ref)
	return r, host.Wrap("get schedule", ref, err)
}

// ListSchedules implements host.Schedules.
func (s *Store) ListSchedules(ctx context.Context, tenant string) ([]*host.RecurringSchedule, error) {
	out, err := storecore.ListSchedules(ctx, corePool{s.pool}, tenant)
	return out, host.Wrap("list schedules", "", err)
}

// DeleteSchedule implements host.Schedules.
func (s *Store) DeleteSchedule(ctx context.Context, tenant, ref string) error {
	const op = "delete schedule"
	err := s.write(ctx, func(x *tx) error {
		return storecore.DeleteSchedule(ctx, coreTx{x}, op, tenant, ref)
	})
	return host.Wrap(op, ref, err)
}

// NextScheduleRun implements host.Schedules.
func (s *Store) NextScheduleRun(ctx context.Context) (time.Time, bool, error) {
	next, ok, err := storecore.NextScheduleRun(ctx, corePool{s.pool}, storecore.PostgresDialect)
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
	err := s.write(ctx, func(x *tx) error {
		var err error
		out, err = storecore.FireDueSchedules(ctx, coreTx{x}, s.opts.Quotas, now)
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	return out, nil
}
