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
	return s.queue().NextScheduleRun(ctx, storecore.PostgresDialect)
}

// FireDueSchedules implements host.Schedules (storecore.Queue); a zero
// now is the store's clock.
func (s *Store) FireDueSchedules(ctx context.Context, now time.Time) ([]*host.TaskRecord, error) {
	return s.queue().FireDueSchedules(ctx, s.opts.Quotas, now)
}
