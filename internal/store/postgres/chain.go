package postgres

import (
	"context"
	"encoding/json"
	"errors"

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

// insertEvent stores a pending event with its tenant
// (storecore.DataTenant): its task's, else its recorded attempt's, else
// the one its data names ($8). Its seq is -pend; the linker gives it its
// place (link.go).
const insertEvent = `INSERT INTO runtime_events (seq, time, type, task_id, attempt_id, data, prev_hash, hash, tenant, pend)
	VALUES (-$1::bigint, $2, $3, $4, $5, $6, '', '', COALESCE((SELECT tenant FROM tasks WHERE task_id = $4 AND $4 != ''),
		(SELECT tenant FROM attempt_records WHERE attempt_id = $5 AND $5 != ''), $7), $1)`

// insertAttempt stores a pending attempt's row: its record, its content
// hash where its link will be, and copies of the record's header fields
// for the indexes and filters.
const insertAttempt = `INSERT INTO attempt_records (seq, attempt_id, task_id, attempt, tenant, pack, started_at, record, prev_hash, hash, pend)
	VALUES (-$1::bigint, $2, $3, $4, $5, $6, $7, $8, '', $9, $1)`

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

// flush inserts the queued entries pending, in the order they were
// queued, each under a pend id of its own, noting the newest head this
// node has seen (a floor below their places: ticket.fetch). No lock is
// taken:
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
	pends, err := l.pends(ctx, x.Tx, len(x.pending))
	if err != nil {
		return err
	}
	floor := l.head.Load() // a head seen before these are inserted: below their places
	now := x.s.now()
	var b pgx.Batch
	for i, p := range x.pending {
		pend := pends[i]
		if e := p.ev; e != nil {
			e.Seq, e.Time, e.PrevHash, e.Hash = -pend, now, "", ""
			e.Data = evidence.CompactJSON(e.Data)
			b.Queue(insertEvent, pend, ts(e.Time), e.Type, e.TaskID, e.AttemptID, string(e.Data), p.tenant)
			continue
		}
		a := p.at.a
		for _, v := range p.at.values {
			b.Queue(insertValue, v.Key, v.Data)
		}
		b.Queue(insertAttempt, pend, a.AttemptID, a.TaskID, a.Attempt, a.Tenant, a.Pack, ts(a.StartedAt), p.at.record, a.ContentHash)
		a.EventSeq = -pend
	}
	for _, f := range x.after {
		f(&b)
	}
	err = x.SendBatch(ctx, &b).Close()
	if uniqueViolation(err, "attempt_records_attempt_id_key") {
		return errAttemptExists
	}
	if err != nil {
		return err
	}
	if len(x.pending) > 0 || len(x.linked) > 0 {
		t := &ticket{l: l, pends: pends, entries: x.pending, floor: floor, linked: x.linked}
		l.register(t)
		x.ticket = t
	}
	x.pending, x.after, x.linked = nil, nil, nil
	return nil
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

// insertPlacedEvent and insertPlacedAttempt store entries in their
// places (flushPlaced): as insertEvent and insertAttempt, with the seq and
// the hashes given and no pend.
const (
	insertPlacedEvent = `INSERT INTO runtime_events (seq, time, type, task_id, attempt_id, data, prev_hash, hash, tenant)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, COALESCE((SELECT tenant FROM tasks WHERE task_id = $4 AND $4 != ''),
		(SELECT tenant FROM attempt_records WHERE attempt_id = $5 AND $5 != ''), $9))`
	insertPlacedAttempt = `INSERT INTO attempt_records (seq, attempt_id, task_id, attempt, tenant, pack, started_at, record, prev_hash, hash)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
)

// flushPlaced inserts the queued entries in their places at once when no
// other transaction holds ChainLock: it tries the lock and reads the head
// in one pipeline (the head query, a statement of its own, sees under READ
// COMMITTED the entries of whoever held the lock before), numbers and
// hashes the entries as a link pass would, and holds the lock until the
// transaction ends. The writer is then answered at its commit, with no
// link pass, and its rows are written once. When the lock is taken (a
// pass, or another writer placing its entries) it reports false and the
// entries go pending: no writer ever waits for the lock. An uncontended
// node pays neither a pass nor the rewrite of every row a pass makes. A
// node that hears other nodes write the chain leaves placing to passes
// (linker.alone).
func (x *tx) flushPlaced(ctx context.Context) (bool, error) {
	if !x.s.link.alone() {
		return false, nil
	}
	var b pgx.Batch
	b.Queue(`SELECT pg_try_advisory_xact_lock($1)`, ChainLock)
	b.Queue(headQuery)
	br := x.SendBatch(ctx, &b)
	var got bool
	seq, hash := int64(0), evidence.GenesisHash
	err := br.QueryRow().Scan(&got)
	if err == nil {
		if err = br.QueryRow().Scan(&seq, &hash); errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil || !got {
		return false, err
	}
	now := x.s.now()
	var ib pgx.Batch
	for i := range x.pending {
		p := &x.pending[i]
		seq++
		if e := p.ev; e != nil {
			e.Seq, e.Time, e.PrevHash = seq, now, hash
			e.Data = evidence.CompactJSON(e.Data)
			e.Hash = evidence.HashEvent(e)
			ib.Queue(insertPlacedEvent, e.Seq, ts(e.Time), e.Type, e.TaskID, e.AttemptID, string(e.Data), e.PrevHash, e.Hash, p.tenant)
			hash = e.Hash
		} else {
			a := p.at.a
			for _, v := range p.at.values {
				ib.Queue(insertValue, v.Key, v.Data)
			}
			link := evidence.LinkAttempt(seq, hash, a.ContentHash)
			ib.Queue(insertPlacedAttempt, seq, a.AttemptID, a.TaskID, a.Attempt, a.Tenant, a.Pack, ts(a.StartedAt), p.at.record, hash, link)
			a.EventSeq, hash = seq, link
		}
		p.hash = hash
	}
	for _, f := range x.after {
		f(&ib)
	}
	// Delivered at the commit: other nodes hear they are not alone.
	ib.Queue(`SELECT pg_notify($1, $2)`, linkedChannel, notePlaced+" "+x.s.link.id)
	err = x.SendBatch(ctx, &ib).Close()
	if uniqueViolation(err, "attempt_records_attempt_id_key") {
		return true, errAttemptExists
	}
	if err != nil {
		return true, err
	}
	x.ticket = x.s.link.placed(x.pending, x.linked)
	x.pending, x.after, x.linked = nil, nil, nil
	return true, nil
}
