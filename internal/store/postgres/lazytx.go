package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lazyTx is a write transaction whose BEGIN rides in one pipeline with
// its first statements and whose COMMIT rides in one with its last
// (commitWith): a transaction of n pipelines costs n round trips to the
// database, not n + 2 as with pgx's own transactions (BEGIN and COMMIT
// alone each). Behind a network, where a writer's batch is bound by its
// round trips in series, that is two of the five or six a batch makes;
// on the database's machine, each round trip is a write and a wake-up
// on both sides.
//
// A transaction that sent nothing and commits nothing costs nothing. A
// failure that leaves the connection inside a transaction it cannot end
// closes the connection rather than return it to the pool.
type lazyTx struct {
	conn   *pgxpool.Conn
	begun  bool // BEGIN has been sent
	closed bool
	// broken is why the pipeline carrying the BEGIN failed before the
	// BEGIN took effect (a statement PostgreSQL could not prepare fails
	// the whole pipeline before any of it runs): the transaction then
	// answers every statement, and its commit, with that error, as an
	// aborted transaction would, rather than run them outside one.
	broken error
}

// begin takes a connection for a transaction whose BEGIN is sent with its
// first statement.
func begin(ctx context.Context, pool *pgxpool.Pool) (*lazyTx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &lazyTx{conn: conn}, nil
}

// batch returns b with the BEGIN in front if it is still to be sent.
func (t *lazyTx) batch(b *pgx.Batch) *pgx.Batch {
	if t.begun {
		return b
	}
	t.begun = true
	out := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)}
	out.Queue(`BEGIN`)
	out.QueuedQueries = append(out.QueuedQueries, b.QueuedQueries...)
	return out
}

// SendBatch sends b in the transaction.
func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.closed {
		return errBatch{pgx.ErrTxClosed}
	}
	if t.broken != nil {
		return errBatch{t.broken}
	}
	if t.begun {
		return t.conn.SendBatch(ctx, b)
	}
	br := t.conn.SendBatch(ctx, t.batch(b))
	if _, err := br.Exec(); err != nil { // the BEGIN
		br.Close()
		t.begun, t.broken = t.conn.Conn().PgConn().TxStatus() != 'I', err
		return errBatch{err}
	}
	return br
}

// direct reports whether a statement may go to the connection alone:
// the BEGIN is sent and took effect, and the transaction is open.
func (t *lazyTx) direct() bool { return t.begun && !t.closed && t.broken == nil }

// errCommitRolledBack: the database ended the transaction with a
// rollback at its COMMIT (it had failed before).
var errCommitRolledBack = errors.New("the transaction was rolled back at its commit")

// commitWith sends final's statements and the COMMIT in one pipeline
// (with the BEGIN too if nothing was sent yet), and returns the first of
// final's statements' errors, or the commit's. The connection goes back
// to the pool. A transaction that sent nothing and has nothing to send
// commits without a round trip.
func (t *lazyTx) commitWith(ctx context.Context, final *pgx.Batch) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	if t.broken != nil {
		t.end(ctx)
		return t.broken
	}
	if !t.begun && (final == nil || final.Len() == 0) {
		t.end(ctx)
		return nil
	}
	b := &pgx.Batch{}
	if final != nil {
		b.QueuedQueries = append(b.QueuedQueries, final.QueuedQueries...)
	}
	b.Queue(`COMMIT`)
	b = t.batch(b)
	br := t.conn.SendBatch(ctx, b)
	var (
		tag pgconn.CommandTag
		err error
	)
	for range b.Len() {
		if tag, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && tag.String() != "COMMIT" {
		err = errCommitRolledBack
	}
	t.end(ctx)
	return err
}

// Commit commits the transaction.
func (t *lazyTx) Commit(ctx context.Context) error { return t.commitWith(ctx, nil) }

// Rollback rolls the transaction back, if it is still open (a no-op
// after Commit or Rollback, as pgx's), and gives the connection back.
func (t *lazyTx) Rollback(ctx context.Context) error {
	if t.closed {
		return nil
	}
	t.end(ctx)
	return nil
}

// end leaves the connection outside any transaction (a ROLLBACK if one
// is open: one a failure left, or one not committed) and gives it back
// to the pool; a connection whose ROLLBACK fails is closed, so that no
// transaction, nor its locks, outlives it.
func (t *lazyTx) end(ctx context.Context) {
	t.closed = true
	c := t.conn.Conn()
	if t.begun && c.PgConn().TxStatus() != 'I' {
		ctx = context.WithoutCancel(ctx)
		if _, err := c.Exec(ctx, `ROLLBACK`); err != nil {
			c.Close(ctx)
		}
	}
	t.conn.Release()
}
