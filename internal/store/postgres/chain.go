package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

// pendingEntry is a chain entry queued by an operation: an event, or an
// attempt (whose row is its entry).
type pendingEntry struct {
	ev     *host.Event
	tenant string // ev's data names (storecore.EventTenant)
	at     *attemptRow
	hash   string // its hash in the chain, once linked
}

// headQuery reads the chain's head: its newest entry, an event or an
// attempt (both share one sequence), pending ones aside.
const headQuery = `SELECT seq, hash FROM (
	(SELECT seq, hash FROM runtime_events WHERE seq > 0 ORDER BY seq DESC LIMIT 1)
	UNION ALL (SELECT seq, hash FROM attempt_records WHERE seq > 0 ORDER BY seq DESC LIMIT 1)) h
	ORDER BY seq DESC LIMIT 1`

// insertEvent stores an event with its tenant (storecore.DataTenant):
// its task's, else its recorded attempt's, else the one its data names
// ($9). A pending one has seq -pend, no hashes and its pend ($10); one
// its writer placed (flushPlaced) has its seq, its hashes and no pend.
const insertEvent = `INSERT INTO runtime_events (seq, time, type, task_id, attempt_id, data, prev_hash, hash, tenant, pend)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, COALESCE((SELECT tenant FROM tasks WHERE task_id = $4 AND $4 != ''),
		(SELECT tenant FROM attempt_records WHERE attempt_id = $5 AND $5 != ''), $9), $10)`

// insertAttempt stores an attempt's row: its record, copies of the
// record's header fields for the indexes and filters, and its link (a
// pending one: its content hash where its link will be, and its pend).
const insertAttempt = `INSERT INTO attempt_records (seq, attempt_id, task_id, attempt, tenant, pack, started_at, record, prev_hash, hash, pend)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

// queueEntry queues p's row (an attempt's values first) at seq, after
// prev, with hash; pend is its pend id, nil for an entry placed by its
// writer. An event's seq, time and hashes are filled in as stored.
func queueEntry(b *pgx.Batch, p *pendingEntry, now time.Time, seq int64, prev, hash string, pend *int64) {
	if e := p.ev; e != nil {
		e.Seq, e.Time, e.PrevHash, e.Hash = seq, now, prev, hash
		b.Queue(insertEvent, seq, ts(now), e.Type, e.TaskID, e.AttemptID, string(e.Data), prev, hash, p.tenant, pend)
		return
	}
	a := p.at.a
	for _, v := range p.at.values {
		b.Queue(insertValue, v.Key, v.Data)
	}
	b.Queue(insertAttempt, seq, a.AttemptID, a.TaskID, a.Attempt, a.Tenant, a.Pack, ts(a.StartedAt), p.at.record, prev, hash, pend)
	a.EventSeq = seq
}

// event queues an event whose data is marshalled from v (a map's keys
// come out sorted, as evidence hashes them).
func (x *tx) event(typ, taskID, attemptID string, v any) (*host.Event, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	e := &host.Event{Type: typ, TaskID: taskID, AttemptID: attemptID, Data: data}
	x.pending = append(x.pending, pendingEntry{ev: e, tenant: storecore.EventTenant(v, data)})
	return e, nil
}

// attempt queues a prepared attempt.
func (x *tx) attempt(row *attemptRow) {
	x.pending = append(x.pending, pendingEntry{at: row})
}

// onLinked runs f once the transaction's entries have their places in
// the chain (after its commit).
func (x *tx) onLinked(f func()) { x.linked = append(x.linked, f) }

// flush queues the inserts of the queued entries pending, in the order
// they were queued, each under a pend id of its own, noting the newest
// head this node has seen (a floor below their places: ticket.fetch).
// The inserts go with the COMMIT (x.final, tx.commit). No lock is taken:
// the linker gives them their places after the commit (link.go). The
// ticket it leaves (x.ticket) is registered before the commit, so the
// pass that links them fills them in.
func (x *tx) flush(ctx context.Context) error {
	if len(x.pending) == 0 && len(x.after) == 0 && len(x.linked) == 0 {
		return nil
	}
	if len(x.pending) > 0 {
		if placed, err := x.flushPlaced(ctx); placed || err != nil {
			return err
		}
	}
	l := x.s.link
	pends, err := l.pends(ctx, x, len(x.pending))
	if err != nil {
		return err
	}
	floor := l.head.Load() // a head seen before these are inserted: below their places
	now := x.s.now()
	var b pgx.Batch
	for i := range x.pending {
		p := &x.pending[i]
		hash := "" // an attempt's content hash waits where its link will be
		if p.ev != nil {
			p.ev.Data = evidence.CompactJSON(p.ev.Data)
		} else {
			hash = p.at.a.ContentHash
		}
		queueEntry(&b, p, now, -pends[i], "", hash, &pends[i])
	}
	for _, f := range x.after {
		f(&b)
	}
	x.final = &b // sent with the COMMIT (tx.commit)
	if len(x.pending) > 0 || len(x.linked) > 0 {
		t := &ticket{l: l, pends: pends, entries: x.pending, floor: floor, linked: x.linked}
		l.register(t)
		x.ticket = t
	}
	x.pending, x.after, x.linked = nil, nil, nil
	return nil
}

// lockHead takes the chain lock with lock (a statement answering
// whether it got it) and reads the head in one pipeline: the head query,
// a statement of its own, sees under READ COMMITTED what the lock's
// previous holder committed.
func (x *tx) lockHead(ctx context.Context, lock string) (got bool, seq int64, hash string, err error) {
	var b pgx.Batch
	b.Queue(lock, ChainLock)
	b.Queue(headQuery)
	br := x.SendBatch(ctx, &b)
	seq, hash = 0, evidence.GenesisHash
	err = br.QueryRow().Scan(&got)
	if err == nil {
		if err = br.QueryRow().Scan(&seq, &hash); errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return got, seq, hash, err
}

// AppendEvent implements host.Evidence.
func (s *Store) AppendEvent(ctx context.Context, e host.Event) (*host.Event, error) {
	const op = "append event"
	if err := storecore.CheckEvent(e); err != nil {
		return nil, err
	}
	var out *host.Event
	tenant := storecore.DataTenant(e.Data)
	err := s.write(ctx, func(x *tx) error {
		out = &host.Event{Type: e.Type, TaskID: e.TaskID, AttemptID: e.AttemptID, Data: e.Data}
		x.pending = append(x.pending, pendingEntry{ev: out, tenant: tenant})
		return nil
	})
	if err != nil {
		return nil, host.Wrap(op, e.Type, err)
	}
	return out, nil
}

// args numbers a query's arguments as they are added ($1, $2, ...).
type args = storecore.Args

// Events implements host.Evidence (storecore.Events).
func (s *Store) Events(ctx context.Context, f host.EventFilter) ([]*host.Event, error) {
	return storecore.Events(ctx, corePool{s.pool}, f)
}

// flushPlaced inserts the queued entries in their places at once when no
// other transaction holds ChainLock: it tries the lock and reads the head
// in one pipeline (the head query, a statement of its own, sees under READ
// COMMITTED the entries of whoever held the lock before), numbers and
// hashes the entries as a link pass would (their inserts go with the
// COMMIT: x.final), and holds the lock until the transaction ends. The
// writer is then answered at its commit, with no
// link pass, and its rows are written once. When the lock is taken by
// this node's other writer placing its entries (linker.placing), it
// waits for that commit and places its own; when it is taken otherwise (a
// pass, another node) it reports false and the entries go pending. An uncontended
// node pays neither a pass nor the rewrite of every row a pass makes. A
// node that hears other nodes write the chain leaves placing to passes
// (linker.alone).
func (x *tx) flushPlaced(ctx context.Context) (bool, error) {
	if !x.s.link.alone() {
		return false, nil
	}
	got, seq, hash, err := x.lockHead(ctx, `SELECT pg_try_advisory_xact_lock($1)`)
	if err == nil && !got && x.s.link.placing.Load() > 0 {
		// This node's other writer holds it, placing its entries: wait
		// for its commit rather than go pending.
		got, seq, hash, err = x.lockHead(ctx, `SELECT true FROM pg_advisory_xact_lock($1)`)
	}
	if err != nil || !got {
		return false, err
	}
	x.placing = true
	x.s.link.placing.Add(1)
	now := x.s.now()
	var ib pgx.Batch
	for i := range x.pending {
		p := &x.pending[i]
		seq++
		prev := hash
		if e := p.ev; e != nil {
			e.Seq, e.Time, e.PrevHash = seq, now, prev
			e.Data = evidence.CompactJSON(e.Data)
			hash = evidence.HashEvent(e)
		} else {
			hash = evidence.LinkAttempt(seq, prev, p.at.a.ContentHash)
		}
		queueEntry(&ib, p, now, seq, prev, hash, nil)
		p.hash = hash
	}
	for _, f := range x.after {
		f(&ib)
	}
	// Delivered at the commit: other nodes hear they are not alone.
	ib.Queue(`SELECT pg_notify($1, $2)`, linkedChannel, notePlaced+" "+x.s.link.id)
	x.final = &ib // sent with the COMMIT (tx.commit)
	x.ticket = x.s.link.placed(x.pending, x.linked)
	x.pending, x.after, x.linked = nil, nil, nil
	return true, nil
}
