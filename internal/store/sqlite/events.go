package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

// headQuery reads the chain's head: its newest entry, an event or an
// attempt (both share one sequence).
const headQuery = `SELECT seq, hash FROM (SELECT seq, hash FROM runtime_events ORDER BY seq DESC LIMIT 1)
	UNION ALL SELECT seq, hash FROM (SELECT seq, hash FROM attempt_records ORDER BY seq DESC LIMIT 1)
	ORDER BY seq DESC LIMIT 1`

// chainHead is the chain's head as of this transaction: read from the
// database once per transaction (the write lock keeps it from moving under
// it), then followed as entries are appended.
func (x *wtx) chainHead() (eventHead, error) {
	if x.head != nil {
		return *x.head, nil
	}
	h := eventHead{hash: evidence.GenesisHash}
	err := x.QueryRow(headQuery).Scan(&h.seq, &h.hash)
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	return h, err
}

// insertEvent stores an event with its tenant (storecore.DataTenant): its
// task's, else its recorded attempt's, else the one its data names.
const insertEvent = `INSERT OR FAIL INTO runtime_events (seq, time, type, task_id, attempt_id, data, prev_hash, hash, tenant)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, COALESCE((SELECT tenant FROM tasks WHERE task_id = ?4 AND ?4 != ''),
		(SELECT tenant FROM attempt_records WHERE attempt_id = ?5 AND ?5 != ''), ?9))`

// appendEvent appends e to the chain inside a write transaction: it reads
// the head, assigns seq, time and hashes, and fills them into e. The write
// transaction (BEGIN IMMEDIATE) makes the read-then-append atomic across
// processes. tenant is the one e's data names (storecore.EventTenant),
// stored unless its task or attempt says otherwise.
func (s *Store) appendEvent(tx *wtx, e *host.Event, tenant string) error {
	head, err := tx.chainHead()
	if err != nil {
		return err
	}
	e.Seq = head.seq + 1
	e.Time = s.now()
	e.PrevHash = head.hash
	e.Data = evidence.CompactJSON(e.Data)
	e.Hash = evidence.HashEvent(e)
	_, err = tx.Exec(insertEvent, e.Seq, ts(e.Time), e.Type, e.TaskID, e.AttemptID, string(e.Data), e.PrevHash, e.Hash, tenant)
	if err != nil {
		tx.head = nil
		return err
	}
	tx.appendedEntry(eventHead{seq: e.Seq, hash: e.Hash})
	return nil
}

// event appends an event whose data is marshalled from v.
func (s *Store) event(tx *wtx, typ, taskID, attemptID string, v any) (*host.Event, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	e := &host.Event{Type: typ, TaskID: taskID, AttemptID: attemptID, Data: data}
	return e, s.appendEvent(tx, e, storecore.EventTenant(v, data))
}

// AppendEvent implements host.Evidence.
func (s *Store) AppendEvent(ctx context.Context, e host.Event) (*host.Event, error) {
	const op = "append event"
	if err := storecore.CheckEvent(e); err != nil {
		return nil, err
	}
	out := &host.Event{Type: e.Type, TaskID: e.TaskID, AttemptID: e.AttemptID, Data: e.Data}
	tenant := storecore.DataTenant(e.Data) // parsed before the writer is taken
	if err := s.w.do(ctx, func(tx *wtx) error { return s.appendEvent(tx, out, tenant) }); err != nil {
		return nil, host.Wrap(op, e.Type, err)
	}
	return out, nil
}

// Events implements host.Evidence (storecore.Events).
func (s *Store) Events(ctx context.Context, f host.EventFilter) ([]*host.Event, error) {
	return storecore.Events(ctx, coreDB{s}, f)
}
