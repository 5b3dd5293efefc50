package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// coreTx is a write transaction as the rules written once see it
// (storecore.Tx).
type coreTx struct{ x *tx }

var (
	_ storecore.TaskTx   = coreTx{}
	_ storecore.SettleTx = coreTx{}
	_ storecore.SensorTx = coreTx{}
)

func (c coreTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.x.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (c coreTx) Query(ctx context.Context, query string, args ...any) (storecore.Rows, error) {
	return c.x.Query(ctx, query, args...)
}

func (c coreTx) QueryRow(ctx context.Context, query string, args ...any) storecore.Row {
	return pgRow{c.x.QueryRow(ctx, query, args...)}
}

func (c coreTx) Event(typ, taskID, attemptID string, data any) error {
	_, err := c.x.event(typ, taskID, attemptID, data)
	return err
}

func (coreTx) Dialect() *storecore.Dialect { return storecore.PostgresDialect }

func (c coreTx) InsertTask(ctx context.Context, t *host.TaskRecord) error {
	return storecore.InsertTask(ctx, c, t, "")
}

// corePool reads from the pool (or a read transaction) for the rules
// written once.
type corePool struct {
	p interface {
		Query(ctx context.Context, query string, args ...any) (pgx.Rows, error)
		QueryRow(ctx context.Context, query string, args ...any) pgx.Row
	}
}

func (c corePool) Query(ctx context.Context, query string, args ...any) (storecore.Rows, error) {
	return c.p.Query(ctx, query, args...)
}

func (c corePool) QueryRow(ctx context.Context, query string, args ...any) storecore.Row {
	return pgRow{c.p.QueryRow(ctx, query, args...)}
}

type pgRow struct{ r pgx.Row }

func (r pgRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return storecore.ErrNoRows
	}
	return err
}

// InsertTaskFor inserts a task a workflow state emits (storecore.WorkflowTx).
func (c coreTx) InsertTaskFor(ctx context.Context, t *host.TaskRecord, attemptID string) error {
	return c.x.insertTask(ctx, t, attemptID)
}

// LockName takes a transaction-level advisory lock on name in space
// (storecore.LockTx).
func (c coreTx) LockName(ctx context.Context, space int64, name string) error {
	_, err := c.x.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, $2))`, name, space)
	return err
}

// WriteQuery runs a write statement with RETURNING (storecore.MemoryTx).
func (c coreTx) WriteQuery(ctx context.Context, query string, args ...any) (storecore.Rows, error) {
	return c.x.Query(ctx, query, args...)
}

// The queue's rules (storecore.SettleTx).

// EventData queues an event whose data is built already.
func (c coreTx) EventData(typ, taskID, attemptID string, d *storecore.EventData) error {
	e := &host.Event{Type: typ, TaskID: taskID, AttemptID: attemptID, Data: d.Bytes()}
	c.x.pending = append(c.x.pending, pendingEntry{ev: e, tenant: d.Tenant()})
	return nil
}

// LockTask reads the task FOR UPDATE.
func (c coreTx) LockTask(ctx context.Context, op, taskID string, _ *host.TaskRecord) (*host.TaskRecord, error) {
	return loadTask(ctx, c.x, op, taskID, true)
}

// RecordAttempt queues the prepared attempt (linked at the end, flush).
func (c coreTx) RecordAttempt(_ context.Context, prepared any) error {
	c.x.attempt(prepared.(*attemptRow))
	return nil
}

func (c coreTx) ApplyStaged(ctx context.Context, t *host.TaskRecord, in *host.FinishInput, now time.Time) (string, error) {
	return c.x.applyStaged(ctx, t, in, now)
}

// ExecAll sends stmts in one pipeline: one network round trip.
func (c coreTx) ExecAll(_ context.Context, stmts []storecore.Stmt) error {
	if len(stmts) == 1 {
		_, err := c.x.Exec(c.x.ctx, stmts[0].SQL, stmts[0].Args...)
		return err
	}
	var b pgx.Batch
	for _, st := range stmts {
		b.Queue(st.SQL, st.Args...)
	}
	return c.x.SendBatch(c.x.ctx, &b).Close()
}

// Leases: a PostgreSQL claim holds a lease other nodes reclaim.
func (coreTx) Leases() bool { return true }

func (c coreTx) Now() time.Time { return c.x.s.now() }

func (c coreTx) Backoff(n int) time.Duration { return c.x.s.opts.Backoff(n) }

// queue is the store as the queue's operations written once see it.
func (s *Store) queue() storecore.Queue {
	return storecore.Queue{
		Write: func(ctx context.Context, fn func(storecore.SettleTx) error) error {
			return s.write(ctx, func(x *tx) error { return fn(coreTx{x}) })
		},
		Read:    corePool{s.pool},
		Now:     s.now,
		Prepare: func(a *host.Attempt) (any, error) { return s.prepareAttempt(a) },
		Stored:  func(p any) { s.values.Stored(p.(*attemptRow).values) },
	}
}
