package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// coreTx is the writer's transaction as the rules written once see it
// (storecore.Tx): their $N placeholders become ?N.
type coreTx struct {
	s  *Store
	tx *wtx
}

var (
	_ storecore.TaskTx   = coreTx{}
	_ storecore.SettleTx = coreTx{}
	_ storecore.SensorTx = coreTx{}
)

func (c coreTx) Exec(_ context.Context, query string, args ...any) (int64, error) {
	res, err := c.tx.Exec(storecore.RebindQuestion(query), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c coreTx) Query(_ context.Context, query string, args ...any) (storecore.Rows, error) {
	rows, err := c.tx.Query(storecore.RebindQuestion(query), args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (c coreTx) QueryRow(_ context.Context, query string, args ...any) storecore.Row {
	return sqlRow{c.tx.QueryRow(storecore.RebindQuestion(query), args...)}
}

func (c coreTx) Event(typ, taskID, attemptID string, data any) error {
	_, err := c.s.event(c.tx, typ, taskID, attemptID, data)
	return err
}

func (coreTx) Dialect() *storecore.Dialect { return storecore.SQLiteDialect }

func (c coreTx) InsertTask(_ context.Context, t *host.TaskRecord) error {
	return storecore.InsertTask(bg, c, t, "")
}

// coreDB reads from the pool for the rules written once; one-row reads
// go through the store's cached statements (Store.queryRow).
type coreDB struct{ s *Store }

func (c coreDB) Query(ctx context.Context, query string, args ...any) (storecore.Rows, error) {
	rows, err := c.s.db.QueryContext(ctx, storecore.RebindQuestion(query), args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (c coreDB) QueryRow(ctx context.Context, query string, args ...any) storecore.Row {
	return sqlRow{c.s.queryRow(ctx, storecore.RebindQuestion(query), args...)}
}

type sqlRow struct{ r *sql.Row }

func (r sqlRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return storecore.ErrNoRows
	}
	return err
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

// InsertTaskFor inserts a task a workflow state emits (storecore.WorkflowTx).
func (c coreTx) InsertTaskFor(_ context.Context, t *host.TaskRecord, attemptID string) error {
	return c.s.insertTask(c.tx, t, attemptID)
}

// LockName needs no lock: the single writer runs one write transaction
// at a time (storecore.LockTx).
func (coreTx) LockName(context.Context, int64, string) error { return nil }

// WriteQuery runs a write statement with RETURNING (storecore.MemoryTx).
func (c coreTx) WriteQuery(_ context.Context, query string, args ...any) (storecore.Rows, error) {
	rows, err := c.tx.WriteQuery(storecore.RebindQuestion(query), args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

// The queue's rules (storecore.SettleTx).

func (c coreTx) EventData(typ, taskID, attemptID string, d *storecore.EventData) error {
	return c.s.appendEvent(c.tx, &host.Event{Type: typ, TaskID: taskID, AttemptID: attemptID, Data: d.Bytes()}, d.Tenant())
}

// LockTask reads the task (the single writer holds it); of a task whose
// record the caller holds, only the columns queue operations change.
func (c coreTx) LockTask(ctx context.Context, op, taskID string, held *host.TaskRecord) (*host.TaskRecord, error) {
	if held != nil && held.TaskID == taskID {
		return c.s.reloadTask(c.tx, op, held)
	}
	return c.s.loadTask(txq{c.tx}, ctx, op, taskID)
}

func (c coreTx) RecordAttempt(_ context.Context, prepared any) error {
	return c.s.recordAttempt(c.tx, prepared.(*attemptRow))
}

func (c coreTx) ApplyStaged(_ context.Context, t *host.TaskRecord, in *host.FinishInput, now time.Time) (string, error) {
	opts := host.SensorEventOptions{Tenant: t.Tenant, Origin: "task:" + t.TaskID}
	if _, err := storecore.ApplyReported(bg, c, in.SensorEvents, opts, t.TaskID, in.AttemptID, now); err != nil {
		return "", err
	}
	if err := c.s.applyPublished(c.tx, in.Messages, t.Tenant, t.TaskID, in.AttemptID, now); err != nil {
		return "", err
	}
	if t.WorkflowRef == nil || in.Outcome.WorkflowSignal == "" {
		return "", nil
	}
	return storecore.ApplyWorkflowSignal(bg, c, c.s.opts.Quotas, t, in.Outcome.WorkflowSignal, in.AttemptID, now)
}

// ExecAll runs stmts one after another (in process: no round trips to
// save).
func (c coreTx) ExecAll(ctx context.Context, stmts []storecore.Stmt) error {
	for _, st := range stmts {
		if _, err := c.Exec(ctx, st.SQL, st.Args...); err != nil {
			return err
		}
	}
	return nil
}

// Leases: an SQLite claim holds no lease (a single host's runners).
func (coreTx) Leases() bool { return false }

func (c coreTx) Now() time.Time { return c.s.now() }

func (c coreTx) Backoff(n int) time.Duration { return c.s.opts.Backoff(n) }

// queue is the store as the queue's operations written once see it.
func (s *Store) queue() storecore.Queue {
	return storecore.Queue{
		Write: func(ctx context.Context, fn func(storecore.SettleTx) error) error {
			return s.w.do(ctx, func(tx *wtx) error { return fn(coreTx{s, tx}) })
		},
		Read:    coreDB{s},
		Now:     s.now,
		Prepare: func(a *host.Attempt) (any, error) { return s.prepareAttempt(a) },
		Stored:  func(p any) { s.values.Stored(p.(*attemptRow).values) },
	}
}
