package sqlite

import (
	"context"
	"database/sql"
	"errors"

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
	return c.s.insertTask(c.tx, t, "")
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

var _ storecore.ControlTx = coreTx{}

func (c coreTx) LoadTask(ctx context.Context, op, taskID string, _ bool) (*host.TaskRecord, error) {
	return c.s.loadTask(txq{c.tx}, ctx, op, taskID)
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
