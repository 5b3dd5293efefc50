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
}

// headQuery reads the chain's head: its newest entry, an event or an
// attempt (both share one sequence).
const headQuery = `SELECT seq, hash FROM (
	(SELECT seq, hash FROM runtime_events ORDER BY seq DESC LIMIT 1)
	UNION ALL (SELECT seq, hash FROM attempt_records ORDER BY seq DESC LIMIT 1)) h
	ORDER BY seq DESC LIMIT 1`

// insertEvent stores an event with its tenant (storecore.DataTenant): its
// task's, else its recorded attempt's, else the one its data names ($9).
const insertEvent = `INSERT INTO runtime_events (seq, time, type, task_id, attempt_id, data, prev_hash, hash, tenant)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, COALESCE((SELECT tenant FROM tasks WHERE task_id = $4 AND $4 != ''),
		(SELECT tenant FROM attempt_records WHERE attempt_id = $5 AND $5 != ''), $9))`

// insertAttempt stores an attempt's row: its record, its link in the chain
// and copies of the record's header fields for the indexes and filters.
const insertAttempt = `INSERT INTO attempt_records (seq, attempt_id, task_id, attempt, tenant, pack, started_at, record, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

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

// flush links the queued entries into the chain, in the order they were
// queued, and inserts them. pg_advisory_xact_lock(ChainLock), held until
// this transaction ends, makes read-head-then-append atomic across every
// node: the head is read after the lock is granted, by a statement of its
// own, so that under READ COMMITTED it sees the entries of the
// transaction that held the lock before (PostgreSQL makes a commit
// visible before it releases the committer's locks). The lock is taken
// as late as possible, at the end of the operation, so that chain appends
// serialise only the inserts and the commit, not the operation's reads.
func (x *tx) flush(ctx context.Context) error {
	if len(x.pending) == 0 && len(x.after) == 0 {
		return nil
	}
	seq, hash, err := x.lockHead(ctx)
	if err != nil {
		return err
	}
	now := x.s.now()
	var b pgx.Batch
	for _, p := range x.pending {
		seq++
		if e := p.ev; e != nil {
			e.Seq, e.Time, e.PrevHash = seq, now, hash
			e.Data = evidence.CompactJSON(e.Data)
			e.Hash = evidence.HashEvent(e)
			b.Queue(insertEvent, e.Seq, ts(e.Time), e.Type, e.TaskID, e.AttemptID, string(e.Data), e.PrevHash, e.Hash, p.tenant)
			hash = e.Hash
			continue
		}
		a := p.at.a
		for _, v := range p.at.values {
			b.Queue(insertValue, v.Key, v.Data)
		}
		link := evidence.LinkAttempt(seq, hash, a.ContentHash)
		b.Queue(insertAttempt, seq, a.AttemptID, a.TaskID, a.Attempt, a.Tenant, a.Pack, ts(a.StartedAt), p.at.record, hash, link)
		a.EventSeq, hash = seq, link
	}
	for _, f := range x.after {
		f(&b)
	}
	if len(x.pending) > 0 {
		x.head = &host.ChainHead{Seq: seq, Hash: hash}
	}
	x.pending, x.after = nil, nil
	err = x.SendBatch(ctx, &b).Close()
	if uniqueViolation(err, "attempt_records_attempt_id_key") {
		return errAttemptExists
	}
	return err
}

// lockHead takes ChainLock and reads the chain's head in one round trip:
// the two statements go in one pipeline, and the server runs the head
// query, with a snapshot of its own (READ COMMITTED), only once the lock
// is granted. The lock is held until the transaction ends, so sending
// them together takes a network round trip out of every hold.
func (x *tx) lockHead(ctx context.Context) (int64, string, error) {
	var b pgx.Batch
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, ChainLock)
	b.Queue(headQuery)
	br := x.SendBatch(ctx, &b)
	seq, hash := int64(0), evidence.GenesisHash
	_, err := br.Exec()
	if err == nil {
		if err = br.QueryRow().Scan(&seq, &hash); errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return seq, hash, err
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
