package postgres

import (
	"context"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/packrun/packrun/host"
)

// Group commit. Every appending transaction holds the chain lock through
// its commit (see flush), so the chain takes at most one commit per WAL
// flush across all nodes. A node's writers therefore carry several
// operations in one transaction, each under a savepoint of its own (one
// that fails is rolled back alone), and link all their entries into the
// chain under one hold of the lock: the chain's ceiling is multiplied by
// the batch size. A batch that fails as a whole (a deadlock, an attempt
// id taken at flush, a lost connection) is run again one operation per
// transaction, so that each operation gets its own outcome.

// maxBatch caps the operations of one transaction: each savepoint that
// writes is a subtransaction, and PostgreSQL's snapshots slow down past 64
// of them in one transaction.
const maxBatch = 48

// op is one write operation waiting for a writer.
type op struct {
	ctx  context.Context
	fn   func(*tx) error
	done chan error
	// claim marks a Claim, which the batch may answer together with its
	// other claims (claimTogether) before fn runs.
	claim *claimReq
}

// writers run the store's write operations, batched.
type writers struct {
	s    *Store
	ops  chan *op
	stop chan struct{}
	wg   sync.WaitGroup
	// waiting are the deliveries waiting for their entries' link pass.
	waiting sync.WaitGroup
}

// startWriters starts n writers for s.
func startWriters(s *Store, n int) *writers {
	w := &writers{s: s, ops: make(chan *op), stop: make(chan struct{})}
	for range n {
		w.wg.Go(w.run)
	}
	return w
}

// close stops the writers once the operations already taken are done.
func (w *writers) close() {
	close(w.stop)
	w.wg.Wait()
	w.waiting.Wait()
}

// do runs fn in a batch with other operations and returns its outcome.
func (w *writers) do(ctx context.Context, fn func(*tx) error) error {
	return w.send(&op{ctx: ctx, fn: fn})
}

// send runs o in a batch with other operations and returns its outcome.
func (w *writers) send(o *op) error {
	ctx := o.ctx
	o.done = make(chan error, 1)
	select {
	case w.ops <- o:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.stop:
		return host.ErrClosed
	}
	return <-o.done
}

func (w *writers) run() {
	for {
		var first *op
		select {
		case first = <-w.ops:
		case <-w.stop:
			return
		}
		batch := []*op{first}
	more:
		for len(batch) < maxBatch {
			select {
			case o := <-w.ops:
				batch = append(batch, o)
			default:
				break more
			}
		}
		w.runBatch(batch)
	}
}

// runBatch runs ops in one transaction, or one by one if that fails,
// and answers them once their chain entries are linked (deliver).
func (w *writers) runBatch(ops []*op) {
	errs := make([]error, len(ops))
	var tickets []*ticket
	alone := func(i int) {
		t, err := w.s.writeAloneTicket(ops[i].ctx, ops[i].fn)
		errs[i] = err
		if t != nil {
			tickets = append(tickets, t)
		}
	}
	if len(ops) == 1 {
		alone(0)
	} else if t, berrs, err := w.batch(ops); err != nil {
		for i := range ops {
			alone(i)
		}
	} else {
		copy(errs, berrs)
		if t != nil {
			tickets = append(tickets, t)
		}
		for i := range ops {
			if retryable(errs[i]) {
				// A deadlock or serialization failure of its own statements
				// rolled back to its savepoint: run it again alone.
				alone(i)
			}
		}
	}
	w.deliver(ops, errs, tickets)
}

// deliver answers ops once the tickets are linked, on a goroutine of its
// own: the writer goes on to its next batch meanwhile, so the link pass
// of one batch overlaps the transaction of the next.
func (w *writers) deliver(ops []*op, errs []error, tickets []*ticket) {
	if len(tickets) == 0 {
		for i, o := range ops {
			o.done <- errs[i]
		}
		return
	}
	w.waiting.Go(func() {
		for _, t := range tickets {
			t.await(context.Background())
		}
		for i, o := range ops {
			o.done <- errs[i]
		}
	})
}

// batch runs ops in one transaction, each under a savepoint, and returns
// its ticket and each one's error; err is the batch's own failure
// (nothing committed).
func (w *writers) batch(ops []*op) (t *ticket, errs []error, err error) {
	ctx := context.Background()
	ltx, err := begin(ctx, w.s.pool)
	if err != nil {
		return nil, nil, err
	}
	x := &tx{Tx: ltx, s: w.s, ctx: ctx}
	defer x.rollback()
	defer func() {
		if err != nil {
			unclaim(ops)
		}
	}()
	if err := x.claimTogether(ctx, ops); err != nil {
		return nil, nil, err
	}
	errs = make([]error, len(ops))
	for i, o := range ops {
		// A claim answered already runs whatever its context: its task
		// is taken in this transaction.
		if o.claim == nil || !o.claim.ready {
			if errs[i] = o.ctx.Err(); errs[i] != nil {
				continue
			}
		}
		// The savepoint rides with the operation's first statement
		// (x.savepoint); an operation that sent none has nothing to undo.
		x.sp, x.savepoint = savepointName(i), true
		mark, markAfter, markLinked := len(x.pending), len(x.after), len(x.linked)
		if errs[i] = o.fn(x); errs[i] != nil {
			x.pending, x.after, x.linked = x.pending[:mark], x.after[:markAfter], x.linked[:markLinked]
			if err := x.undo(); err != nil {
				return nil, nil, err
			}
		}
		x.savepoint = false
	}
	if err := x.flush(ctx); err != nil {
		return nil, nil, err
	}
	if err := x.commit(ctx); err != nil {
		if x.ticket != nil {
			w.s.link.forget(x.ticket)
		}
		return nil, nil, err
	}
	return x.ticket, errs, nil
}

// savepointNames are the savepoints of a batch's operations, by index.
var savepointNames = func() (out [maxBatch]string) {
	for i := range out {
		out[i] = "op" + strconv.Itoa(i)
	}
	return out
}()

func savepointName(i int) string { return savepointNames[i] }

// The statements of an operation run on the batch's context, never the
// caller's: a caller giving up must not cancel the statements of the
// operations it shares a transaction with.

// withSavepoint sends the pending savepoint and b's statements in one
// pipeline; the results are b's.
func (x *tx) withSavepoint(b *pgx.Batch) pgx.BatchResults {
	x.savepoint = false
	b.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: `SAVEPOINT ` + x.sp}}, b.QueuedQueries...)
	br := x.Tx.SendBatch(x.ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return errBatch{err}
	}
	return br
}

// alone reports whether a statement may go to the connection by itself:
// neither the operation's savepoint nor the transaction's BEGIN is still
// to go with it.
func (x *tx) alone() bool { return !x.savepoint && x.Tx.direct() }

// one sends a pipeline of one statement, with what must go with it.
func (x *tx) one(sql string, args []any) pgx.BatchResults {
	var b pgx.Batch
	b.Queue(sql, args...)
	return x.SendBatch(x.ctx, &b)
}

// Exec runs a statement in the transaction.
func (x *tx) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if x.alone() {
		return x.Tx.conn.Exec(x.ctx, sql, args...)
	}
	br := x.one(sql, args)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs a query in the transaction.
func (x *tx) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	if x.alone() {
		return x.Tx.conn.Query(x.ctx, sql, args...)
	}
	br := x.one(sql, args)
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return batchRows{rows, br}, nil
}

// QueryRow runs a one-row query in the transaction.
func (x *tx) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	if x.alone() {
		return x.Tx.conn.QueryRow(x.ctx, sql, args...)
	}
	br := x.one(sql, args)
	return batchRow{br.QueryRow(), br}
}

// undo rolls the running operation back to its savepoint, if that was
// sent (an operation that sent nothing has nothing to undo).
func (x *tx) undo() error {
	if x.savepoint {
		x.savepoint = false
		return nil
	}
	_, err := x.Exec(x.ctx, `ROLLBACK TO SAVEPOINT `+x.sp)
	return err
}

// SendBatch sends b in the transaction (with the pending savepoint).
func (x *tx) SendBatch(_ context.Context, b *pgx.Batch) pgx.BatchResults {
	if x.savepoint {
		return x.withSavepoint(b)
	}
	return x.Tx.SendBatch(x.ctx, b)
}

// batchRows are a pipeline's rows: closing them ends the pipeline.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r batchRows) Close() {
	r.Rows.Close()
	r.br.Close()
}

// batchRow is a pipeline's one row: scanning it ends the pipeline.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// errBatch is a pipeline that failed at its savepoint.
type errBatch struct{ err error }

func (e errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, e.err }
func (e errBatch) Query() (pgx.Rows, error)         { return nil, e.err }
func (e errBatch) QueryRow() pgx.Row                { return errRow(e) }
func (e errBatch) Close() error                     { return e.err }

type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }

func (errBatch) Tx() pgx.Tx { return nil }
