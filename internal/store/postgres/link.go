package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
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
// after its commit, for the first pass that links its entries (this
// node's, or another's: its NOTIFY reaches every node's listener), and
// at most for one pass of its own node begun after it, so the seqs it
// returns are the chain's (ticket.await). See RATIONALE.md, "Appends
// without the chain lock".

const (
	// pendBlock is how many pend ids one nextval of evidence_pend
	// reserves (the sequence's INCREMENT BY).
	pendBlock = 1024
	// linkBatch caps the entries one link transaction takes.
	linkBatch = 4096
	// linkPoll is how often an idle node looks for entries a crashed
	// writer left pending.
	linkPoll = 50 * time.Millisecond
	// aloneAfter is how long a node must have heard of no other node
	// writing the chain before its writers place their entries themselves
	// (flushPlaced).
	aloneAfter = time.Second
)

// pendingQuery reads the pending entries in pend order (seq is -pend).
const pendingQuery = `SELECT seq, kind, time, type, task_id, attempt_id, data, hash FROM (
	SELECT seq, 'e' AS kind, time, type, task_id, attempt_id, data, hash FROM runtime_events WHERE seq < 0
	UNION ALL SELECT seq, 'a', '', '', '', '', '', hash FROM attempt_records WHERE seq < 0) p
	ORDER BY seq DESC LIMIT $1`

// anyPendingQuery says whether any entry is pending: the lowest seq of
// each table, read from its primary key's first entry (min() of an
// indexed column). An EXISTS (... WHERE seq < 0) was planned as a
// sequential scan of the tables while their statistics were young, and
// at every idle poll (linkPoll) read them whole to find nothing.
const anyPendingQuery = `SELECT COALESCE((SELECT min(seq) FROM runtime_events), 0) < 0
	OR COALESCE((SELECT min(seq) FROM attempt_records), 0) < 0`

// linkEvents and linkAttempts give pending rows their places: $1 the
// pending seqs, $2 the places, $3 the previous entries' hashes, $4 theirs.
const (
	linkEvents = `UPDATE runtime_events e SET seq = v.seq, prev_hash = v.prev, hash = v.hash
	FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) v(old, seq, prev, hash) WHERE e.seq = v.old`
	linkAttempts = `UPDATE attempt_records a SET seq = v.seq, prev_hash = v.prev, hash = v.hash
	FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) v(old, seq, prev, hash) WHERE a.seq = v.old`
)

// linkedQuery finds entries by pend among those linked above a floor.
const linkedQuery = `SELECT pend, seq, prev_hash, hash FROM runtime_events WHERE seq > $1 AND pend = ANY($2)
	UNION ALL SELECT pend, seq, prev_hash, hash FROM attempt_records WHERE seq > $1 AND pend = ANY($2)`

// linker links this node's pending entries, and any other node's.
type linker struct {
	s *Store
	// id names this node in the notifications it sends (linkedChannel).
	id string
	// othersAt is when (UnixNano) this node last heard of another node
	// writing the chain: a pass it committed, or entries it placed.
	othersAt atomic.Int64
	// placing counts this node's writers holding the chain lock to place
	// their entries (flushPlaced), until their transactions end.
	placing atomic.Int32

	idMu      sync.Mutex
	next, end int64 // this node's block of pend ids: [next, end)

	// head is the newest place in the chain this node has seen (its
	// passes, its listener, Open): every entry inserted after it was
	// read is placed above it.
	head atomic.Int64

	run sync.Mutex // one pass at a time on this node

	mu      sync.Mutex
	awaited map[int64]*awaited // pend → an entry a writer waits to see linked
	begun   uint64             // passes begun
	ended   uint64             // the newest pass ended
	passed  chan struct{}      // closed, and replaced, when a pass ends

	wake, stop, finished, listening chan struct{}
	closeOnce                       sync.Once
}

func newLinker(s *Store) *linker {
	var id [8]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)
	return &linker{s: s, id: hex.EncodeToString(id[:]), awaited: map[int64]*awaited{}, passed: make(chan struct{}),
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
	at    time.Time // when it was registered
	// placed: its writer gave the entries their places (flushPlaced).
	placed bool
}

// awaited is an entry a writer waits on, and its ticket.
type awaited struct {
	p *pendingEntry
	t *ticket
}

// register makes t's entries awaited, before its transaction commits,
// so a pass that links them, this node's or another's (listen), fills
// them in.
func (l *linker) register(t *ticket) {
	now := time.Now()
	t.ready, t.at = make(chan struct{}), now
	l.mu.Lock()
	for i, p := range t.pends {
		l.awaited[p] = &awaited{p: &t.entries[i], t: t}
	}
	t.left = len(t.pends)
	if t.left == 0 {
		close(t.ready)
	}
	l.mu.Unlock()
}

// placed is the ticket of entries a writer placed itself (flushPlaced):
// already linked, so awaiting it only anchors them and runs the hooks.
func (l *linker) placed(entries []pendingEntry, hooks []func()) *ticket {
	return &ticket{l: l, entries: entries, linked: hooks, placed: true, at: time.Now()}
}

// fill gives an awaited entry its place (l.mu held), if one waits on it
// still.
func (l *linker) fill(pend, seq int64, prev, hash string) {
	w := l.awaited[pend]
	if w == nil || w.p.seq() > 0 {
		return
	}
	w.p.link(seq, prev, hash)
	if w.t.left--; w.t.left == 0 {
		close(w.t.ready)
	}
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
// did not link (it failed: LogSync's own pass reports why; the store
// closed) is left with seq 0: it is durable, and a later
// pass links it. A writer never waits longer than one pass.
func (t *ticket) await(ctx context.Context) {
	if t == nil {
		return
	}
	l := t.l
	defer l.forget(t)
	defer func() {
		t.anchor()
		for _, f := range t.linked {
			f()
		}
	}()
	if t.placed {
		for i := range t.entries {
			l.saw(t.entries[i].seq())
		}
		return
	}
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

// anchor offers the last of t's entries that was linked to the node's
// head checkpoint, and tells the log's sequencer it is durable since t
// was registered (storecore.Sequencer.Delays).
func (t *ticket) anchor() {
	var head *host.ChainHead
	t.l.mu.Lock()
	for i := range t.entries {
		if p := &t.entries[i]; p.seq() > 0 && (head == nil || p.seq() > head.Seq) {
			head = &host.ChainHead{Seq: p.seq(), Hash: p.hash}
		}
	}
	t.l.mu.Unlock()
	if head != nil {
		t.l.s.committed(head, t.at)
	}
}

// fetch reads the links of the entries another node linked.
func (t *ticket) fetch(ctx context.Context, pends []int64) error {
	rows, err := t.l.s.pool.Query(ctx, linkedQuery, t.floor, pends)
	if err != nil {
		return err
	}
	byPend := make(map[int64]int, len(t.pends))
	for i, p := range t.pends {
		byPend[p] = i
	}
	return eachLinked(rows, func(pend, seq int64, prev, hash string) {
		t.l.saw(seq)
		if i, ok := byPend[pend]; ok {
			t.entries[i].link(seq, prev, hash)
		}
	})
}

// fillRows fills the awaited entries among rows of linkedQuery.
func (l *linker) fillRows(rows pgx.Rows) error {
	return eachLinked(rows, func(pend, seq int64, prev, hash string) {
		l.saw(seq)
		l.mu.Lock()
		l.fill(pend, seq, prev, hash)
		l.mu.Unlock()
	})
}

// saw notes a place seen in the chain (linker.head).
func (l *linker) saw(seq int64) {
	for {
		h := l.head.Load()
		if seq <= h || l.head.CompareAndSwap(h, seq) {
			return
		}
	}
}

// eachLinked hands each row of linkedQuery to fn, and closes rows.
func eachLinked(rows pgx.Rows, fn func(pend, seq int64, prev, hash string)) error {
	defer rows.Close()
	for rows.Next() {
		var (
			pend, seq  int64
			prev, hash string
		)
		if err := rows.Scan(&pend, &seq, &prev, &hash); err != nil {
			return err
		}
		fn(pend, seq, prev, hash)
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

// knownOf is the places and hashes of entries placed.
func knownOf(entries []pendingEntry) []storecore.KnownEntry {
	out := make([]storecore.KnownEntry, 0, len(entries))
	for i := range entries {
		if seq := entries[i].seq(); seq > 0 {
			out = append(out, storecore.KnownEntry{Seq: seq, Hash: entries[i].hash})
		}
	}
	return out
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
	p.hash = hash
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
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		kind, node, _ := strings.Cut(n.Payload, " ")
		if node != l.id {
			l.othersAt.Store(time.Now().UnixNano())
		}
		if kind == notePlaced {
			continue // it linked nobody's pending entries
		}
		if err := l.catchUp(ctx); err != nil {
			return err
		}
	}
}

// The notifications on linkedChannel: "linked NODE" as a pass commits,
// "placed NODE" as a writer's placed entries commit.
const (
	noteLinked = "linked"
	notePlaced = "placed"
)

// alone reports whether this node has heard of no other node writing the
// chain for aloneAfter: then its writers try to place their entries
// themselves (flushPlaced). Where nodes share the chain they do not: a
// writer holding the lock through its commit would stall the other
// nodes' passes, and its try would cost a round trip for nothing when
// they hold it.
func (l *linker) alone() bool {
	return time.Since(time.Unix(0, l.othersAt.Load())) >= aloneAfter
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
		_ = l.pass(context.Background(), idle) // its writers get no place; LogSync's own pass reports it
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
		err = l.s.pool.QueryRow(ctx, anyPendingQuery).Scan(&any)
	}
	for err == nil && (!idle || any) {
		var linked int
		if linked, err = l.linkBatch(ctx); err == nil && linked < linkBatch {
			break
		}
	}
	l.mu.Lock()
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
	var (
		out            []linked
		evOld, evSeq   []int64
		evPrev, evHash []string
		atOld, atSeq   []int64
		atPrev, atHash []string
		msgOld, msgSeq []int64
		artOld, artSeq []int64
	)
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
				atOld, atSeq, atPrev, atHash = append(atOld, old), append(atSeq, seq), append(atPrev, prev), append(atHash, hash)
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
				evOld, evSeq, evPrev, evHash = append(evOld, old), append(evSeq, seq), append(evPrev, prev), append(evHash, hash)
				switch typ {
				case host.EventMessageAccepted:
					msgOld, msgSeq = append(msgOld, old), append(msgSeq, seq)
				case host.EventArtifactRecorded:
					artOld, artSeq = append(artOld, old), append(artSeq, seq)
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
	// One statement a table, whatever the number of entries.
	var up pgx.Batch
	if len(evOld) > 0 {
		up.Queue(linkEvents, evOld, evSeq, evPrev, evHash)
	}
	if len(atOld) > 0 {
		up.Queue(linkAttempts, atOld, atSeq, atPrev, atHash)
	}
	if len(msgOld) > 0 {
		up.Queue(`UPDATE messages m SET event_seq = v.seq FROM unnest($1::bigint[], $2::bigint[]) v(old, seq) WHERE m.event_seq = v.old`, msgOld, msgSeq)
	}
	if len(artOld) > 0 {
		up.Queue(`UPDATE artifacts a SET event_seq = v.seq FROM unnest($1::bigint[], $2::bigint[]) v(old, seq) WHERE a.event_seq = v.old`, artOld, artSeq)
	}
	up.Queue(`SELECT pg_notify($1, $2)`, linkedChannel, noteLinked+" "+l.id) // delivered at the commit
	if err := ptx.SendBatch(ctx, &up).Close(); err != nil {
		return 0, fmt.Errorf("link pending chain entries: %w", err)
	}
	if err := ptx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("link pending chain entries: %w", err)
	}
	l.saw(seq)
	known := make([]storecore.KnownEntry, len(out))
	for i, k := range out {
		known[i] = storecore.KnownEntry{Seq: k.seq, Hash: k.hash}
	}
	l.s.logKnown.Add(known...)
	// The writers waiting on them anchor them (ticket.anchor): a node
	// anchors its own writers' entries, not another node's.
	l.mu.Lock()
	for _, k := range out {
		l.fill(k.pend, k.seq, k.prev, k.hash)
	}
	l.mu.Unlock()
	return len(out), nil
}
