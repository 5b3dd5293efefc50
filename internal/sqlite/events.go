package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// appendEvent appends e to the chain inside a write transaction: it reads
// the head, assigns seq, time and hashes, and fills them into e. The write
// transaction (BEGIN IMMEDIATE) makes the read-then-append atomic across
// processes.
func (s *Store) appendEvent(tx *wtx, e *host.Event) error {
	var seq int64
	var prev string
	if tx.head != nil {
		seq, prev = tx.head.seq, tx.head.hash
	} else {
		// The write transaction holds the lock, so the head cannot move
		// under it: read it once per transaction.
		err := tx.QueryRow(`SELECT seq, hash FROM runtime_events ORDER BY seq DESC LIMIT 1`).Scan(&seq, &prev)
		if errors.Is(err, sql.ErrNoRows) {
			seq, prev, err = 0, evidence.GenesisHash, nil
		}
		if err != nil {
			return err
		}
	}
	e.Seq = seq + 1
	e.Time = s.now()
	e.PrevHash = prev
	e.Data = evidence.CompactJSON(e.Data)
	e.Hash = evidence.HashEvent(e)
	_, err := tx.Exec(`INSERT OR FAIL INTO runtime_events (seq, time, type, task_id, attempt_id, data, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		e.Seq, ts(e.Time), e.Type, e.TaskID, e.AttemptID, string(e.Data), e.PrevHash, e.Hash)
	if err != nil {
		tx.head = nil
		return err
	}
	tx.head = &eventHead{seq: e.Seq, hash: e.Hash}
	return nil
}

// event appends an event whose data is marshalled from v.
func (s *Store) event(tx *wtx, typ, taskID, attemptID string, v any) (*host.Event, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	e := &host.Event{Type: typ, TaskID: taskID, AttemptID: attemptID, Data: data}
	return e, s.appendEvent(tx, e)
}

// checkEventType: lower-case letters, digits, '_' and '.', 1..64 bytes.
func checkEventType(t string) error {
	if t == "" {
		return host.Invalid("append event", "type", "required")
	}
	if len(t) > 64 || strings.Trim(t, "abcdefghijklmnopqrstuvwxyz0123456789_.") != "" {
		return host.Invalid("append event", "type", "must be 1 to 64 lower-case letters, digits, '_' or '.'")
	}
	return nil
}

// AppendEvent implements host.Evidence.
func (s *Store) AppendEvent(ctx context.Context, e host.Event) (*host.Event, error) {
	const op = "append event"
	if err := checkEventType(e.Type); err != nil {
		return nil, err
	}
	if len(e.Data) > 0 && !json.Valid(e.Data) {
		return nil, host.Invalid(op, "data", "is not valid JSON")
	}
	if len(e.Data) > host.MaxPayloadBytes {
		return nil, host.Errorf(op, e.Type, host.ErrTooLarge, "data is %d bytes; the limit is %d", len(e.Data), host.MaxPayloadBytes)
	}
	out := &host.Event{Type: e.Type, TaskID: e.TaskID, AttemptID: e.AttemptID, Data: e.Data}
	if err := s.w.do(ctx, func(tx *wtx) error { return s.appendEvent(tx, out) }); err != nil {
		return nil, host.Wrap(op, e.Type, err)
	}
	return out, nil
}

const eventColumns = `seq, time, type, task_id, attempt_id, data, prev_hash, hash`

func scanEvent(row interface{ Scan(...any) error }) (*host.Event, error) {
	var e host.Event
	var t, data string
	if err := row.Scan(&e.Seq, &t, &e.Type, &e.TaskID, &e.AttemptID, &data, &e.PrevHash, &e.Hash); err != nil {
		return nil, err
	}
	e.Time = parseTS(t)
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	return &e, nil
}

// Events implements host.Evidence.
func (s *Store) Events(ctx context.Context, f host.EventFilter) ([]*host.Event, error) {
	q := `SELECT ` + eventColumns + ` FROM runtime_events WHERE seq > ?`
	args := []any{f.AfterSeq}
	if f.TaskID != "" {
		q += ` AND task_id = ?`
		args = append(args, f.TaskID)
	}
	if f.AttemptID != "" {
		q += ` AND attempt_id = ?`
		args = append(args, f.AttemptID)
	}
	if f.Type != "" {
		q += ` AND type = ?`
		args = append(args, f.Type)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	q += ` ORDER BY seq LIMIT ?`
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, host.Wrap("list events", "", err)
	}
	defer rows.Close()
	var out []*host.Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, host.Wrap("list events", "", err)
		}
		out = append(out, e)
	}
	return out, host.Wrap("list events", "", rows.Err())
}
