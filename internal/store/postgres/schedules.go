package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
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
