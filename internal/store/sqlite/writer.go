package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

var errAlreadyClosed = errors.New("already closed")

// op is one write operation. fn runs inside the batch transaction; its
// error is delivered after the batch commits, and if the commit fails
// every operation of the batch gets the commit error.
//
// fn may run more than once. Operations share the transaction without a
// savepoint each (a savepoint makes SQLite copy every page an operation
// first touches into its sub-journal, which cost the writer more than 10%),
// so when one fails after writing, the writer rolls the whole transaction
// back and runs the batch's other operations again in a new one. fn must
// therefore derive everything from the database and its arguments and
// reset whatever it accumulates in captured variables.
type op struct {
	ctx  context.Context
	fn   func(tx *wtx) error
	done chan error
}

// wtx is the write transaction operations run in. The writer owns one
// connection and runs BEGIN IMMEDIATE / COMMIT on it itself instead of going
// through database/sql's Tx: a Tx gives every query a cancellable context,
// and database/sql then starts a watcher goroutine per result set, which
// cost the writer more than the statements did. Statements are prepared
// once on that connection.
type wtx struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	// head is the chain head as of the last event this transaction
	// appended, so a batch reads it from the database once; nil after a
	// rollback (the events it counted are gone).
	head *eventHead
	// touched: the generations of cached data this transaction changed
	// (see touch).
	touched []gen
	// dirty: the running operation's statements changed rows (or one
	// failed), so its failure needs the transaction rolled back.
	dirty bool
	// committed is the chain head the last COMMIT left, if it appended
	// to the chain; the writer tells onHead once it is on disk (the head
	// checkpoint, checkpoint.go).
	committed *eventHead
	// appended are the chain entries this transaction appended, in seq
	// order; emptied by a rollback, handed to known by a COMMIT.
	appended []storecore.KnownEntry
	// known holds the entries this writer committed that the log has
	// not integrated yet (the Store's; see storecore.KnownEntries).
	known *storecore.KnownEntries
	// last is the chain head as of the writer's last COMMIT, and version
	// the database's PRAGMA data_version read inside that transaction:
	// while no other connection commits, data_version keeps its value
	// (SQLite does not count a connection's own commits), so a
	// transaction that finds it unchanged starts from last instead of
	// reading the head from the tables (headQuery). nil when unknown:
	// before the first commit, after a rollback, or once another
	// connection (another process's writer) has committed.
	last    *eventHead
	version int64
	// dataVersion is PRAGMA data_version prepared on the driver's
	// connection: read once per transaction, through the driver it costs
	// a third of what database/sql's QueryRow does.
	dataVersion driver.Stmt
	dest        []driver.Value
}

// begin starts a write transaction (BEGIN IMMEDIATE: the database's
// write lock is the writer's until COMMIT or ROLLBACK, so the chain
// cannot move under it) and the chain head it starts from (see last).
func (x *wtx) begin() error {
	x.head = nil
	if _, err := x.Exec(`BEGIN IMMEDIATE`); err != nil {
		x.last = nil
		return err
	}
	v, err := x.readDataVersion()
	if err != nil {
		x.last = nil
		return nil // the head is read from the tables when needed
	}
	if x.last != nil && v == x.version {
		h := *x.last
		x.head = &h
	} else {
		x.last = nil
	}
	x.version = v
	return nil
}

// readDataVersion reads PRAGMA data_version (see last).
func (x *wtx) readDataVersion() (v int64, err error) {
	err = x.conn.Raw(func(dc any) error {
		if x.dataVersion == nil {
			c, ok := dc.(*sqlite3.SQLiteConn)
			if !ok {
				return fmt.Errorf("not a SQLite connection: %T", dc)
			}
			st, err := c.Prepare(`PRAGMA data_version`)
			if err != nil {
				return err
			}
			x.dataVersion, x.dest = st, make([]driver.Value, 1)
		}
		rows, err := x.dataVersion.Query(nil) //nolint:staticcheck // the driver's own method; no context is needed
		if err != nil {
			return err
		}
		err = rows.Next(x.dest)
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		n, ok := x.dest[0].(int64)
		if !ok {
			return fmt.Errorf("PRAGMA data_version returned %T", x.dest[0])
		}
		v = n
		return nil
	})
	return v, err
}

// keepHead records, after a COMMIT, the chain head the next transaction
// may start from: the last entry the transaction appended, else the head
// it read, else (it did not touch the chain) the one it started from.
func (x *wtx) keepHead() {
	switch {
	case x.committed != nil:
		h := *x.committed
		x.last = &h
	case x.head != nil:
		h := *x.head
		x.last = &h
	}
}

// appendedEntry records that the transaction appended h to the chain:
// it is the head now.
func (x *wtx) appendedEntry(h eventHead) {
	x.head = &h
	x.appended = append(x.appended, storecore.KnownEntry{Seq: h.seq, Hash: h.hash})
}

type eventHead struct {
	seq  int64
	hash string
}

// bg is the context of every writer statement: never cancelled, so neither
// database/sql nor the driver watches it (see writer.do).
var bg = context.Background()

func (x *wtx) stmt(query string) (*sql.Stmt, error) {
	if st, ok := x.stmts[query]; ok {
		return st, nil
	}
	st, err := x.conn.PrepareContext(bg, query)
	if err != nil {
		return nil, err
	}
	x.stmts[query] = st
	return st, nil
}

// Exec, QueryRow and Query run a statement in the transaction; they never
// take the caller's context (see writer.do). QueryRow and Query are for
// reads; a statement with RETURNING goes through WriteRow or WriteQuery.
func (x *wtx) Exec(query string, args ...any) (sql.Result, error) {
	st, err := x.stmt(query)
	if err != nil {
		return nil, err
	}
	res, err := st.ExecContext(bg, args...)
	if err != nil {
		x.dirty = true
	} else if n, _ := res.RowsAffected(); n > 0 {
		x.dirty = true
	}
	return res, err
}

// WriteRow runs a write statement with RETURNING that yields at most one
// row.
func (x *wtx) WriteRow(query string, args ...any) rowScanner {
	return writeRow{x.QueryRow(query, args...), x}
}

type rowScanner interface{ Scan(dest ...any) error }

type writeRow struct {
	row *sql.Row
	x   *wtx
}

func (r writeRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if !errors.Is(err, sql.ErrNoRows) {
		r.x.dirty = true // a row came back, so one was written (or it failed)
	}
	return err
}

// WriteQuery runs a write statement with RETURNING that may yield rows.
func (x *wtx) WriteQuery(query string, args ...any) (*sql.Rows, error) {
	x.dirty = true
	return x.Query(query, args...)
}

// inTx reports whether the connection is still inside the transaction:
// SQLite ends one itself on some errors (I/O, disk full), after which
// statements would run in autocommit mode.
func (x *wtx) inTx() bool {
	in := true
	err := x.conn.Raw(func(dc any) error {
		if c, ok := dc.(*sqlite3.SQLiteConn); ok {
			in = !c.AutoCommit()
		}
		return nil
	})
	return in && err == nil // a connection the pool calls bad holds no transaction
}

func (x *wtx) QueryRow(query string, args ...any) *sql.Row {
	st, err := x.stmt(query)
	if err != nil {
		// database/sql has no way to build a Row holding an error; the
		// unprepared query reports the same error at Scan.
		return x.conn.QueryRowContext(bg, query, args...)
	}
	return st.QueryRowContext(bg, args...)
}

func (x *wtx) Query(query string, args ...any) (*sql.Rows, error) {
	st, err := x.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(bg, args...)
}

// stmtCache holds prepared statements of the hottest reads by query text.
// All are constants, so it stays small.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func (c *stmtCache) get(query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		return nil, host.ErrClosed
	}
	if st, ok := c.m[query]; ok {
		return st, nil
	}
	st, err := c.db.Prepare(query)
	if err != nil {
		return nil, err
	}
	c.m[query] = st
	return st, nil
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// writer serialises all writes of a Store through one connection and
// commits them in groups.
type writer struct {
	conn    *sql.Conn
	x       *wtx // the writer's statements, reused by every transaction
	cache   *stmtCache
	ops     chan *op
	stopped chan struct{}
	maxOps  int
	delay   time.Duration

	mu     sync.RWMutex // held for reading while sending, for writing to close
	closed bool

	// The WAL is synced by sync, a goroutine of its own, so the next batch
	// runs while the last one is synced: run hands each committed batch
	// over on syncq (one waits there at most), and sync acknowledges its
	// operations once an fsync of the WAL that began after the commit has
	// returned. When nothing is being synced and no operation waits, run
	// syncs the commit itself (see pending).
	walPath  string
	wal      *os.File
	onHead   func(eventHead)
	syncq    chan committed
	synced   chan struct{} // closed when sync returns
	syncFail atomic.Pointer[error]

	// commits and committed count the transactions committed and the
	// operations they carried, cpu the CPU time (ns) the writer's thread
	// spent running them (WriterStats).
	commits, committed, cpu atomic.Int64
	// syncs counts the WAL syncs (fsyncs) made.
	syncs atomic.Int64
	// pending counts the committed batches handed to sync and not yet
	// made durable: while it is zero the writer may sync a commit itself
	// (run), and the WAL is never synced by both at once.
	pending atomic.Int64
	// onCommit is Options.OnCommit (may be nil).
	onCommit func(ops int, took time.Duration)
}

// WriterStats is what the store's single writer has done.
type WriterStats struct {
	Commits int64         // write transactions run
	Ops     int64         // operations they carried: Ops ÷ Commits is the mean group commit
	CPU     time.Duration // CPU time of the writer's thread running them (Linux; 0 elsewhere)
	Syncs   int64         // fsyncs of the WAL that made them durable (one may cover several commits)
}

// WriterStats reports what the store's writer has done since Open.
func (s *Store) WriterStats() WriterStats {
	return WriterStats{Commits: s.w.commits.Load(), Ops: s.w.committed.Load(), CPU: time.Duration(s.w.cpu.Load()), Syncs: s.w.syncs.Load()}
}

// Ping checks that the store takes writes: the writer has not failed
// (a failed WAL sync makes it refuse every write until the store is
// opened again) and an empty write transaction commits and is synced.
func (s *Store) Ping(ctx context.Context) error {
	return host.Wrap("ping", "", s.w.do(ctx, func(*wtx) error { return nil }))
}

func startWriter(ctx context.Context, d *sql.DB, walPath string, maxOps int, delay time.Duration, onHead func(eventHead), onCommit func(int, time.Duration)) (*writer, error) {
	conn, err := d.Conn(ctx)
	if err != nil {
		return nil, err
	}
	// openDB opens with synchronous=NORMAL, which in WAL mode does not
	// sync at commit: the writer syncs the WAL itself, off the committing
	// thread (see sync), and acknowledges only durable commits.
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		conn.Close()
		return nil, err
	}
	// Checkpoints copy the WAL into the database and sync it; run in the
	// committing connection they stall every writer. Let the WAL grow
	// further between them (64 MiB of pages instead of 4 MiB).
	if _, err := conn.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 16384`); err != nil {
		conn.Close()
		return nil, err
	}
	// The writer's page cache is never invalidated by another connection
	// of this process, so a larger one than SQLite's default (2 MiB, which
	// the store's indexes outgrow at once, every miss then a read through
	// the WAL) pays — up to a point: at the end of every transaction SQLite
	// may walk the cache's whole hash table (pcache1TruncateUnsafe, 5 % of
	// the queue's CPU at 64 MiB, 2 % at 16 MiB). 16 MiB measured best of
	// 2, 8, 16 and 64 for attempts with evidence, and within noise of 8 for
	// the queue. Readers keep the default: SQLite drops a reader's whole
	// cache whenever the database changed, at a cost that grows with the
	// cache. Memory is only taken as pages are touched.
	if _, err := conn.ExecContext(ctx, `PRAGMA cache_size = -16384`); err != nil {
		conn.Close()
		return nil, err
	}
	// Journals of statements and savepoints (the hot paths use neither)
	// stay in memory instead of spilling to a temporary file page by page
	// once past 64 KiB.
	if _, err := conn.ExecContext(ctx, `PRAGMA temp_store = MEMORY`); err != nil {
		conn.Close()
		return nil, err
	}
	w := &writer{conn: conn, x: &wtx{conn: conn, stmts: map[string]*sql.Stmt{}}, cache: &stmtCache{db: d, m: map[string]*sql.Stmt{}},
		ops: make(chan *op, 4*maxOps), stopped: make(chan struct{}), maxOps: maxOps, delay: delay,
		walPath: walPath, onHead: onHead, onCommit: onCommit, syncq: make(chan committed, 1), synced: make(chan struct{})}
	go w.run()
	go w.sync()
	return w, nil
}

// do runs fn in the writer and waits until its batch is committed. A ctx
// that ends before fn starts cancels it (nothing is written); once fn has
// started, do waits for the commit so that a nil error always means durable
// and a non-nil error means not applied. fn must not use ctx for SQL: a
// cancelled context interrupts the connection, which would abort the whole
// batch.
func (w *writer) do(ctx context.Context, fn func(tx *wtx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p := w.syncFail.Load(); p != nil {
		return *p
	}
	o := &op{ctx: ctx, fn: fn, done: make(chan error, 1)}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return host.ErrClosed
	}
	w.ops <- o
	w.mu.RUnlock()
	return noSpace(<-o.done)
}

// noSpace reports a write that failed for want of disk space (SQLite's
// "database or disk is full", or the OS refusing to grow a file) as
// matching host.ErrUnavailable, keeping the cause: nothing of it was
// stored, and the same write may succeed once there is room.
func noSpace(err error) error {
	var se sqlite3.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	switch {
	case se.Code == sqlite3.ErrFull, se.SystemErrno == syscall.ENOSPC, se.SystemErrno == syscall.EFBIG, se.SystemErrno == syscall.EDQUOT:
		return &noSpaceError{err}
	}
	return err
}

type noSpaceError struct{ cause error }

func (e *noSpaceError) Error() string {
	return "no space left for the database, nothing was stored: " + e.cause.Error()
}
func (e *noSpaceError) Is(target error) bool { return target == host.ErrUnavailable }
func (e *noSpaceError) Unwrap() error        { return e.cause }

func (w *writer) close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errAlreadyClosed
	}
	w.closed = true
	close(w.ops) // no sender holds the read lock now
	w.mu.Unlock()
	<-w.stopped
	<-w.synced
	if w.wal != nil {
		w.wal.Close()
	}
	w.cache.close()
	if w.x.dataVersion != nil {
		w.x.dataVersion.Close()
	}
	for _, st := range w.x.stmts {
		st.Close()
	}
	return w.conn.Close()
}

func (w *writer) run() {
	defer close(w.stopped)
	defer close(w.syncq)
	batch := make([]*op, 0, w.maxOps)
	for first := range w.ops {
		batch = append(batch[:0], first)
		open := true
	collect:
		for open && len(batch) < w.maxOps {
			select {
			case o, ok := <-w.ops:
				if !ok {
					open = false
					break collect
				}
				batch = append(batch, o)
			default:
				if w.delay <= 0 {
					break collect
				}
				t := time.NewTimer(w.delay)
				select {
				case o, ok := <-w.ops:
					t.Stop()
					if !ok {
						open = false
						break collect
					}
					batch = append(batch, o)
				case <-t.C:
					break collect
				}
			}
		}
		// On one thread for the commit, so that its CPU time can be read.
		goruntime.LockOSThread()
		var began time.Time
		if w.onCommit != nil {
			began = time.Now()
		}
		t0 := threadCPU()
		results := w.commit(batch)
		w.cpu.Add(threadCPU() - t0)
		goruntime.UnlockOSThread()
		w.commits.Add(1)
		w.committed.Add(int64(len(batch)))
		if w.onCommit != nil {
			w.onCommit(len(batch), time.Since(began))
		}
		if failedAll(results) {
			// Nothing was committed (every operation failed, and one that
			// wrote before failing was rolled back): there is nothing to
			// sync, so the batch does not wait for a sync. An idle
			// dispatcher's claims are such batches, a few hundred a second.
			for i, o := range batch {
				o.done <- results[i]
			}
		} else if c := (committed{ops: batch, results: results, head: w.x.committed}); w.pending.Load() == 0 && len(w.ops) == 0 {
			// Nothing is being synced and no operation waits: the writer
			// syncs this commit itself rather than wake the sync goroutine
			// for it, one hand-off less for a lone caller (a one-client
			// server). Under load commits go to sync, and the writer runs
			// the next batch while the last one is synced.
			w.durable([]committed{c})
		} else {
			w.pending.Add(1)
			w.syncq <- c
			batch = make([]*op, 0, w.maxOps) // the last one is sync's now
		}
		if !open {
			return
		}
	}
}

// commit runs a batch in one transaction and returns each operation's
// result; the caller acknowledges them once the commit is on disk.
func (w *writer) commit(batch []*op) []error {
	x := w.x
	x.head, x.committed, x.appended = nil, nil, x.appended[:0]
	defer x.afterTouched()
	if len(batch) == 1 {
		// A batch of one: on failure the whole transaction is rolled back.
		o := batch[0]
		err := o.ctx.Err()
		if err == nil {
			if err = x.begin(); err != nil {
				err = fmt.Errorf("begin write transaction: %w", err)
			} else if err = runAlone(x, o.fn); err != nil {
				x.rollback()
			} else if err = x.commit(); err != nil {
				err = fmt.Errorf("commit: %w", err)
			}
		}
		return []error{err}
	}
	results := make([]error, len(batch))
	decided := make([]bool, len(batch)) // results[i] is final
	undecided := func(err error) {
		for i := range results {
			if !decided[i] {
				results[i], decided[i] = err, true
			}
		}
	}
	for attempt := 0; ; attempt++ {
		if err := x.begin(); err != nil {
			undecided(fmt.Errorf("begin write transaction: %w", err))
			break
		}
		redo, broken := false, false
		for i, o := range batch {
			if decided[i] {
				continue
			}
			if err := o.ctx.Err(); err != nil {
				results[i], decided[i] = err, true // not run: nothing to undo
				continue
			}
			x.dirty = false
			err := runAlone(x, o.fn)
			if !x.inTx() {
				broken = true
				if err != nil {
					results[i], decided[i] = err, true
				}
				break
			}
			if err == nil {
				continue
			}
			results[i], decided[i] = err, true
			if x.dirty {
				// It wrote before failing: undo the transaction and run
				// the others again without it.
				redo = true
				break
			}
		}
		if broken {
			// SQLite rolled the transaction back (I/O error, disk full):
			// nothing of the batch is applied.
			x.rollback()
			undecided(errors.New("write transaction aborted by the database"))
			break
		}
		if redo {
			x.rollback()
			continue
		}
		if err := x.commit(); err != nil {
			undecided(fmt.Errorf("commit: %w", err))
		}
		undecided(nil)
		break
	}
	return results
}

// failedAll reports whether every operation of a batch failed: then the
// batch committed nothing (commit rolls back what a failed operation wrote).
func failedAll(results []error) bool {
	for _, err := range results {
		if err == nil {
			return false
		}
	}
	return true
}

// committed is a batch run and committed, not yet on disk.
type committed struct {
	ops     []*op
	results []error
	head    *eventHead
}

// sync makes committed batches durable and acknowledges them: one fsync of
// the WAL for every batch that waits when it starts. A failed fsync fails
// those batches and every write after it: what they committed may or may
// not be on disk, and a later fsync succeeding would not say which
// (PostgreSQL learned this the hard way), so the store refuses writes
// until it is opened again.
func (w *writer) sync() {
	defer close(w.synced)
	var waiting []committed
	for c := range w.syncq {
		waiting = append(waiting[:0], c)
	more:
		for {
			select {
			case c, ok := <-w.syncq:
				if !ok {
					break more
				}
				waiting = append(waiting, c)
			default:
				break more
			}
		}
		w.durable(waiting)
		w.pending.Add(-int64(len(waiting)))
	}
}

// durable makes committed batches durable with one fsync of the WAL that
// begins now, after their commits, answers their operations and tells
// onHead the last chain head they left.
func (w *writer) durable(waiting []committed) {
	var err error
	if p := w.syncFail.Load(); p != nil {
		err = *p
	} else if err = w.syncWAL(); err != nil {
		err = fmt.Errorf("sync the database to disk: %w; the store refuses writes until it is opened again", err)
		w.syncFail.Store(&err)
	}
	var head *eventHead
	for _, c := range waiting {
		for i, o := range c.ops {
			r := c.results[i]
			if r == nil {
				r = err
			}
			o.done <- r
		}
		if c.head != nil {
			head = c.head
		}
	}
	if head != nil && err == nil && w.onHead != nil {
		w.onHead(*head)
	}
}

// syncWAL fsyncs the database's WAL, where every commit is until a
// checkpoint copies it (and SQLite syncs the WAL before that, and the
// database after).
func (w *writer) syncWAL() error {
	if w.wal == nil {
		f, err := os.OpenFile(w.walPath, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		w.wal = f
	}
	w.syncs.Add(1)
	return w.wal.Sync()
}

// walReserveChunk is how much of the WAL reserveWAL writes in one write
// transaction (≈ 1 ms of the writer's time).
const walReserveChunk = 1 << 20

// reserveWAL writes zeros past the end of the WAL until the file holds
// size bytes (see Options.WALReserve), a chunk at a time, each in a write
// transaction of its own: SQLite's write lock is held, so no writer of
// this or another process appends frames meanwhile, and the zeros go only
// past the file's end, where no frame is. SQLite reads a WAL up to its
// last valid frame and takes zeros for its end, as it does the older
// frames a restarted WAL leaves behind. The transaction's sync makes the
// new blocks durable before any commit's frames overwrite them. It returns
// when the WAL holds size bytes, on the first error (a reserve is an
// optimisation: the WAL stays as SQLite keeps it) or once ctx ends.
func (w *writer) reserveWAL(ctx context.Context, size int64) error {
	f, err := os.OpenFile(w.walPath, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	zeros := make([]byte, 64<<10)
	for more := true; more; {
		err := w.do(ctx, func(*wtx) error {
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			at := fi.Size()
			end := min(size, at+walReserveChunk)
			for at < end {
				n, err := f.WriteAt(zeros[:min(int64(len(zeros)), end-at)], at)
				if err != nil {
					return err
				}
				at += int64(n)
			}
			more = at < size
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// touch marks the transaction as changing data cached under generation g:
// g is bumped now, before the commit, and again when the transaction is
// over, whether it committed or not (see memCache for why both).
func (x *wtx) touch(g gen) {
	for _, t := range x.touched {
		if t == g {
			return
		}
	}
	g.bump()
	x.touched = append(x.touched, g)
}

// afterTouched gives each generation the transaction touched its second
// bump.
func (x *wtx) afterTouched() {
	for _, g := range x.touched {
		g.bump()
	}
	x.touched = x.touched[:0]
}

// commit ends the transaction; if COMMIT fails the transaction is rolled
// back so the connection is left outside any transaction.
func (x *wtx) commit() error {
	if _, err := x.Exec(`COMMIT`); err != nil {
		x.rollback()
		return err
	}
	x.committed = nil
	if n := len(x.appended); n > 0 {
		x.committed = &eventHead{seq: x.appended[n-1].Seq, hash: x.appended[n-1].Hash}
	}
	x.keepHead()
	if x.known != nil {
		x.known.Add(x.appended...)
	}
	x.appended = x.appended[:0]
	return nil
}

// rollback ends the transaction, if SQLite has not already done so.
func (x *wtx) rollback() {
	x.head, x.last = nil, nil
	x.appended = x.appended[:0]
	_, _ = x.Exec(`ROLLBACK`) // "no transaction is active" when SQLite rolled back itself
}

// runAlone runs fn, turning a panic into an error.
func runAlone(tx *wtx, fn func(tx *wtx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("host store: internal error: %v", p)
		}
	}()
	return fn(tx)
}
