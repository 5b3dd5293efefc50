package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// Appends without a shared lock. A writer's transaction inserts its
// chain entries pending (flush): each row's seq is the negative of a
// pend id, unique across nodes (evidence_pend, drawn a block at a time),
// prev_hash is '' and an attempt's hash holds its content hash. Nothing
// is locked across its commit. The linker then gives every pending
// entry, every node's, its place in the chain: under ChainLock, in a
// transaction of its own, it reads the head and the pending rows in pend
// order, numbers and hashes them as flush used to, and updates them (and
// the rows that cite an event's seq: a message's cursor, an artifact's
// event) in one pipeline. The lock is held for one pass over everything
// pending on every node, not once per writer's commit. A writer waits,
// after its commit, for a pass begun after it, so the seqs it returns
// are the chain's (ticket.await). See RATIONALE.md, "Appends without
// the chain lock".

const (
	// pendBlock is how many pend ids one nextval of evidence_pend
	// reserves (the sequence's INCREMENT BY).
	pendBlock = 1024
	// linkBatch caps the entries one link transaction takes.
	linkBatch = 4096
	// linkPoll is how often an idle node looks for entries a crashed
	// writer left pending.
	linkPoll = 50 * time.Millisecond
)

// pendingQuery reads the pending entries in pend order (seq is -pend).
const pendingQuery = `SELECT seq, kind, time, type, task_id, attempt_id, data, hash FROM (
	SELECT seq, 'e' AS kind, time, type, task_id, attempt_id, data, hash FROM runtime_events WHERE seq < 0
	UNION ALL SELECT seq, 'a', '', '', '', '', '', hash FROM attempt_records WHERE seq < 0) p
	ORDER BY seq DESC LIMIT $1`

// linkedQuery finds entries by pend among those linked above a floor.
const linkedQuery = `SELECT pend, seq, prev_hash, hash FROM runtime_events WHERE seq > $1 AND pend = ANY($2)
	UNION ALL SELECT pend, seq, prev_hash, hash FROM attempt_records WHERE seq > $1 AND pend = ANY($2)`

// linker links this node's pending entries, and any other node's.
type linker struct {
	s *Store

	idMu      sync.Mutex
	next, end int64 // this node's block of pend ids: [next, end)

	run sync.Mutex // one pass at a time on this node

	mu      sync.Mutex
	awaited map[int64]*awaited // pend → an entry a writer waits to see linked
	begun   uint64             // passes begun
	ended   uint64             // the newest pass ended
	passed  chan struct{}      // closed, and replaced, when a pass ends
	lastErr error

	wake, stop, finished, listening chan struct{}
	closeOnce                       sync.Once
}

func newLinker(s *Store) *linker {
	return &linker{s: s, awaited: map[int64]*awaited{}, passed: make(chan struct{}),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), finished: make(chan struct{}), listening: make(chan struct{})}
}

// pends reserves n pend ids, in ascending order.
func (l *linker) pends(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, n int) ([]int64, error) {
	l.idMu.Lock()
	defer l.idMu.Unlock()
	out := make([]int64, 0, n)
	for len(out) < n {
		if l.next == l.end {
			var v int64
			if err := q.QueryRow(ctx, `SELECT nextval('evidence_pend')`).Scan(&v); err != nil {
				return nil, fmt.Errorf("reserve pend ids: %w", err)
			}
			l.next, l.end = v, v+pendBlock
		}
		out = append(out, l.next)
		l.next++
	}
	return out, nil
}

// ticket is what a committed transaction waits on: its pending entries.
type ticket struct {
	l       *linker
	pends   []int64
	entries []pendingEntry
	floor   int64    // the chain's head before they were inserted
	linked  []func() // run once they are linked (or given up on)
	// left counts the entries not linked yet (under the linker's mu);
	// ready is closed when it reaches 0.
	left  int
	ready chan struct{}
}

// awaited is an entry a writer waits on, when it was inserted, and its
// ticket.
type awaited struct {
	p  *pendingEntry
	at time.Time
	t  *ticket
}

// register makes t's entries awaited, before its transaction commits,
// so a pass that links them, this node's or another's (listen), fills
// them in.
func (l *linker) register(t *ticket) {
	now := time.Now()
	t.ready = make(chan struct{})
	l.mu.Lock()
	for i, p := range t.pends {
		l.awaited[p] = &awaited{p: &t.entries[i], at: now, t: t}
	}
	t.left = len(t.pends)
	if t.left == 0 {
		close(t.ready)
	}
	l.mu.Unlock()
}

// fill gives an awaited entry its place (l.mu held); false if none
// waits on it.
func (l *linker) fill(pend, seq int64, prev, hash string) (*awaited, bool) {
	w := l.awaited[pend]
	if w == nil || w.p.seq() > 0 {
		return nil, false
	}
	w.p.link(seq, prev, hash)
	if w.t.left--; w.t.left == 0 {
		close(w.t.ready)
	}
	return w, true
}

// forget drops t's entries (its transaction rolled back, or they are
// linked).
func (l *linker) forget(t *ticket) {
	l.mu.Lock()
	l.forgetLocked(t)
	l.mu.Unlock()
}

func (l *linker) forgetLocked(t *ticket) {
	for _, p := range t.pends {
		delete(l.awaited, p)
	}
}

// await waits for a pass begun after the call to end, by which time, if
// it succeeded, t's entries are linked (by this node or another), fills
// in their seqs and hashes and runs t's linked hooks. An entry the pass
// did not link (it failed: the error is the linker's, LogSync reports
// it; the store closed) is left with seq 0: it is durable, and a later
// pass links it. A writer never waits longer than one pass.
func (t *ticket) await(ctx context.Context) {
	if t == nil {
		return
	}
	l := t.l
	defer l.forget(t)
	defer func() {
		for _, f := range t.linked {
			f()
		}
	}()
	l.mu.Lock()
	target := l.begun + 1
	l.mu.Unlock()
	l.poke()
	for {
		l.mu.Lock()
		ok, ch := l.ended >= target, l.passed
		l.mu.Unlock()
		if ok {
			break
		}
		select {
		case <-t.ready: // linked, by whichever node's pass
			return
		case <-ch:
		case <-l.finished:
			t.unlinked()
			return
		}
	}
	var missing []int64
	l.mu.Lock()
	l.forgetLocked(t) // from here on, only this goroutine fills them
	for i, p := range t.pends {
		if t.entries[i].seq() <= 0 {
			missing = append(missing, p)
		}
	}
	l.mu.Unlock()
	if len(missing) > 0 {
		// Another node's pass linked them, or none did.
		_ = t.fetch(ctx, missing) // not found: unlinked
		t.unlinked()
	}
}

// fetch reads the links of the entries another node linked.
func (t *ticket) fetch(ctx context.Context, pends []int64) error {
	rows, err := t.l.s.pool.Query(ctx, linkedQuery, t.floor, pends)
	if err != nil {
		return err
	}
	defer rows.Close()
	byPend := make(map[int64]int, len(t.pends))
	for i, p := range t.pends {
		byPend[p] = i
	}
	for rows.Next() {
		var (
			pend, seq  int64
			prev, hash string
		)
		if err := rows.Scan(&pend, &seq, &prev, &hash); err != nil {
			return err
		}
		if i, ok := byPend[pend]; ok {
			t.entries[i].link(seq, prev, hash)
		}
	}
	return rows.Err()
}

// fillRows fills the awaited entries among rows of linkedQuery.
func (l *linker) fillRows(rows pgx.Rows) error {
	defer rows.Close()
	for rows.Next() {
		var (
			pend, seq  int64
			prev, hash string
		)
		if err := rows.Scan(&pend, &seq, &prev, &hash); err != nil {
			return err
		}
		l.mu.Lock()
		l.fill(pend, seq, prev, hash)
		l.mu.Unlock()
	}
	return rows.Err()
}

// unlinked clears the pending seqs of entries not linked in time.
func (t *ticket) unlinked() {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	for i := range t.entries {
		if t.entries[i].seq() < 0 {
			t.entries[i].link(0, "", "")
		}
	}
}

// seq is the entry's place (negative while pending).
func (p *pendingEntry) seq() int64 {
	if p.ev != nil {
		return p.ev.Seq
	}
	return p.at.a.EventSeq
}

// link gives the entry its place.
func (p *pendingEntry) link(seq int64, prev, hash string) {
	if e := p.ev; e != nil {
		e.Seq, e.PrevHash, e.Hash = seq, prev, hash
		return
	}
	p.at.a.EventSeq = seq
}

func (l *linker) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// linkedChannel is the notification channel a link pass notifies as it
// commits: every node's listener then fills in the entries its writers
// wait on that the pass linked, so a writer is answered by the first
// pass that links its entries, whichever node ran it, not by its own
// node's next pass, which may be queued behind the others'.
const linkedChannel = "packrun_linked"

// start runs the linker's loop (a pass whenever a writer waits, and one
// every linkPoll if anything is pending: a crashed writer's entries) and
// its listener.
func (l *linker) start() {
	go l.loop()
	go l.listen()
}

// listen holds a connection listening on linkedChannel, again after a
// failure, until the linker closes.
func (l *linker) listen() {
	defer close(l.listening)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-l.stop
		cancel()
	}()
	for ctx.Err() == nil {
		if err := l.listenOnce(ctx); err != nil && ctx.Err() == nil {
			select { // the database went away: the passes report it
			case <-time.After(linkPoll):
			case <-ctx.Done():
			}
		}
	}
}

func (l *linker) listenOnce(ctx context.Context) error {
	conn, err := l.s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `LISTEN `+linkedChannel); err != nil {
		return err
	}
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return err
		}
		if err := l.catchUp(ctx); err != nil {
			return err
		}
	}
}

// catchUp fills in the awaited entries other nodes' passes linked.
func (l *linker) catchUp(ctx context.Context) error {
	var pends []int64
	floor := int64(math.MaxInt64)
	l.mu.Lock()
	for p, w := range l.awaited {
		if w.p.seq() < 0 {
			pends = append(pends, p)
			floor = min(floor, w.t.floor)
		}
	}
	l.mu.Unlock()
	if len(pends) == 0 {
		return nil
	}
	rows, err := l.s.pool.Query(ctx, linkedQuery, floor, pends)
	if err != nil {
		return err
	}
	return l.fillRows(rows)
}

func (l *linker) loop() {
	defer close(l.finished)
	t := time.NewTicker(linkPoll)
	defer t.Stop()
	for {
		idle := false
		select {
		case <-l.stop:
			return
		case <-l.wake:
		case <-t.C:
			idle = true
		}
		_ = l.pass(context.Background(), idle) // kept in lastErr; waiters wait for the next
	}
}

// close stops the loop and the listener; writers still waiting give up.
func (l *linker) close() {
	l.closeOnce.Do(func() { close(l.stop) })
	<-l.finished
	<-l.listening
}

// pass links everything pending. idle: first look, without a
// transaction, whether anything is.
func (l *linker) pass(ctx context.Context, idle bool) error {
	l.run.Lock()
	defer l.run.Unlock()
	l.mu.Lock()
	l.begun++
	n := l.begun
	l.mu.Unlock()
	var (
		err error
		any bool
	)
	if idle {
		err = l.s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runtime_events WHERE seq < 0)
			OR EXISTS (SELECT 1 FROM attempt_records WHERE seq < 0)`).Scan(&any)
	}
	for err == nil && (!idle || any) {
		var linked int
		if linked, err = l.linkBatch(ctx); err == nil && linked < linkBatch {
			break
		}
	}
	l.mu.Lock()
	l.lastErr = err
	l.ended = n
	close(l.passed)
	l.passed = make(chan struct{})
	l.mu.Unlock()
	return err
}

// linked is one entry a pass linked.
type linked struct {
	pend, seq  int64
	prev, hash string
}

// linkBatch links up to linkBatch pending entries in one transaction.
func (l *linker) linkBatch(ctx context.Context) (int, error) {
	ptx, err := l.s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer ptx.Rollback(context.WithoutCancel(ctx))
	var b pgx.Batch
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, ChainLock)
	b.Queue(headQuery)
	b.Queue(pendingQuery, linkBatch)
	br := ptx.SendBatch(ctx, &b)
	seq, hash := int64(0), evidence.GenesisHash
	var out []linked
	var up pgx.Batch
	err = func() error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&seq, &hash); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				old                                    int64
				kind, at, typ, taskID, attemptID, data string
				content                                string
			)
			if err := rows.Scan(&old, &kind, &at, &typ, &taskID, &attemptID, &data, &content); err != nil {
				return err
			}
			seq++
			prev := hash
			if kind == "a" {
				hash = evidence.LinkAttempt(seq, prev, content)
				up.Queue(`UPDATE attempt_records SET seq = $1, prev_hash = $2, hash = $3 WHERE seq = $4`, seq, prev, hash, old)
			} else {
				t, err := host.ParseTime(at)
				if err != nil {
					return fmt.Errorf("pending event %d: its time %q does not read: %w", -old, at, err)
				}
				e := &host.Event{Seq: seq, Time: t, Type: typ, TaskID: taskID, AttemptID: attemptID, PrevHash: prev}
				if data != "" {
					e.Data = []byte(data)
				}
				hash = evidence.HashEvent(e)
				up.Queue(`UPDATE runtime_events SET seq = $1, prev_hash = $2, hash = $3 WHERE seq = $4`, seq, prev, hash, old)
				switch typ {
				case host.EventMessageAccepted:
					up.Queue(`UPDATE messages SET event_seq = $1 WHERE event_seq = $2`, seq, old)
				case host.EventArtifactRecorded:
					up.Queue(`UPDATE artifacts SET event_seq = $1 WHERE event_seq = $2`, seq, old)
				}
			}
			out = append(out, linked{pend: -old, seq: seq, prev: prev, hash: hash})
		}
		return rows.Err()
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("link pending chain entries: %w", err)
	}
	if len(out) == 0 {
		return 0, nil // commit nothing: the rollback ends it
	}
	up.Queue(`SELECT pg_notify($1, '')`, linkedChannel) // delivered at the commit
	if err := ptx.SendBatch(ctx, &up).Close(); err != nil {
		return 0, fmt.Errorf("link pending chain entries: %w", err)
	}
	if err := ptx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("link pending chain entries: %w", err)
	}
	oldest := time.Now()
	var mine *host.ChainHead // the last of this node's writers' entries
	l.mu.Lock()
	for _, k := range out {
		if w, ok := l.fill(k.pend, k.seq, k.prev, k.hash); ok {
			if w.at.Before(oldest) {
				oldest = w.at
			}
			mine = &host.ChainHead{Seq: k.seq, Hash: k.hash}
		}
	}
	l.mu.Unlock()
	// The node anchors the entries its writers appended, as it did when
	// they linked their own (not another node's, which that node
	// anchors); the log's sequencer learns they are durable since the
	// oldest was inserted (storecore.Sequencer.Delays).
	if l.s.anchor != nil && mine != nil {
		l.s.anchor.Offer(mine.Seq, mine.Hash)
	}
	l.s.logSeq.AppendedAt(seq, oldest)
	return len(out), nil
}
