package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

func rawText(r json.RawMessage) string { return string(r) }

func textRaw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// RecordAttempt implements host.Evidence (storecore.Queue.RecordAttempt).
func (s *Store) RecordAttempt(ctx context.Context, a *host.Attempt) error {
	return s.queue().RecordAttempt(ctx, a)
}

// errAttemptExists: recordAttempt found the attempt id taken.
var errAttemptExists = storecore.ErrAttemptExists

// attemptRow is a normalized attempt with its record encoded and hashed by
// the caller, so that the single writer, which every write of the store
// waits for, only links it into the chain and appends it.
type attemptRow struct {
	a      *host.Attempt
	record []byte
	values []evidence.Value // named by record, not known to be stored
}

// insertValues stores the values a record keeps out of line, in the
// transaction that appends the record: a record never names a value that
// is not stored. A value stored already (by another attempt, or another
// process) is left as it is: its key is its content's digest.
func insertValues(tx *wtx, vals []evidence.Value) error {
	for _, v := range vals {
		if _, err := tx.Exec(`INSERT INTO evidence_values (digest, value) VALUES (?, ?) ON CONFLICT DO NOTHING`, v.Key, v.Data); err != nil {
			return err
		}
	}
	return nil
}

// readValues is the store's storecore.ValueReader.
func (s *Store) readValues(ctx context.Context, keys []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(keys))
	for _, k := range keys {
		if _, ok := out[k]; ok {
			continue
		}
		var v []byte
		err := s.queryRow(ctx, `SELECT value FROM evidence_values WHERE digest = ?`, k).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// The attempt's row: its record, its link in the chain and copies of the
// record's header fields for the indexes and filters (checked against the
// record by evidence verify).
const insertAttempt = `INSERT OR FAIL INTO attempt_records (seq, attempt_id, task_id, attempt, tenant, pack, started_at, record, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// prepareAttempt normalizes a (see storecore.NormalizeAttempt), encodes
// its record and sets its content hash.
func (s *Store) prepareAttempt(a *host.Attempt) (*attemptRow, error) {
	if err := storecore.NormalizeAttempt(a, s.now()); err != nil {
		return nil, err
	}
	rec, vals := s.values.AppendRecord(make([]byte, 0, evidence.RecordSize(a)), a, nil)
	a.ContentHash = evidence.HashRecord(rec)
	return &attemptRow{a: a, record: rec, values: vals}, nil
}

// recordAttempt links a prepared attempt into the chain and appends it
// inside a write transaction, setting its EventSeq. Recording is
// optimistic: an attempt id is new almost always, so the row is inserted
// without looking first, and a taken id (the unique index refuses it)
// fails the operation with errAttemptExists for storecore.SameAttempt to examine. It
// may run more than once for one row (see op).
func (s *Store) recordAttempt(tx *wtx, row *attemptRow) error {
	a := row.a
	if err := insertValues(tx, row.values); err != nil {
		return err
	}
	head, err := tx.chainHead()
	if err != nil {
		return err
	}
	seq := head.seq + 1
	link := evidence.LinkAttempt(seq, head.hash, a.ContentHash)
	_, err = tx.Exec(insertAttempt, seq, a.AttemptID, a.TaskID, a.Attempt, a.Tenant, a.Pack, ts(a.StartedAt), row.record, head.hash, link)
	var se sqlite3.Error
	if errors.As(err, &se) && (se.ExtendedCode == sqlite3.ErrConstraintPrimaryKey || se.ExtendedCode == sqlite3.ErrConstraintUnique) {
		return errAttemptExists
	}
	if err != nil {
		tx.head = nil
		return err
	}
	tx.head = &eventHead{seq: seq, hash: link}
	a.EventSeq = seq
	return nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

const attemptColumns = `seq, record`

func (s *Store) attempt(ctx context.Context, q queryer, id string) (*host.Attempt, error) {
	var seq int64
	var rec []byte
	err := q.QueryRowContext(ctx, `SELECT `+attemptColumns+` FROM attempt_records WHERE attempt_id = ?`, id).Scan(&seq, &rec)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, host.Errorf("get attempt", id, host.ErrNotFound, "")
	}
	if err != nil {
		return nil, host.Wrap("get attempt", id, err)
	}
	a, err := storecore.DecodeAttempt(ctx, s.readValues, seq, rec)
	return a, host.Wrap("get attempt", id, err)
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Attempt implements host.Evidence.
func (s *Store) Attempt(ctx context.Context, attemptID string) (*host.Attempt, error) {
	return s.attempt(ctx, s.db, attemptID)
}

// ListAttempts implements host.Evidence.
// attemptWhere is the WHERE clause of f and its arguments.
func attemptWhere(f host.AttemptFilter) (string, []any) {
	q := ` WHERE 1`
	var args []any
	if f.TaskID != "" {
		q += ` AND task_id = ?`
		args = append(args, f.TaskID)
	}
	if f.TaskType != "" {
		q += ` AND task_id IN (SELECT task_id FROM tasks WHERE task_type = ?)`
		args = append(args, f.TaskType)
	}
	if f.BeforeSeq != 0 {
		q += ` AND seq < ?`
		args = append(args, f.BeforeSeq)
	}
	if f.Pack != "" {
		if strings.Contains(f.Pack, "@") {
			q += ` AND pack = ?`
			args = append(args, f.Pack)
		} else {
			q += ` AND substr(pack, 1, ?) = ?`
			args = append(args, len(f.Pack)+1, f.Pack+"@")
		}
	}
	if f.Tenant != "" {
		q += ` AND tenant = ?`
		args = append(args, f.Tenant)
	}
	if !f.Since.IsZero() {
		q += ` AND started_at >= ?`
		args = append(args, ts(f.Since))
	}
	return q, args
}

// CountAttempts implements host.Evidence.
func (s *Store) CountAttempts(ctx context.Context, f host.AttemptFilter) (int, error) {
	where, args := attemptWhere(f)
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM attempt_records`+where, args...).Scan(&n); err != nil {
		return 0, host.Wrap("count attempts", "", err)
	}
	return n, nil
}

// ListAttempts implements host.Evidence.
func (s *Store) ListAttempts(ctx context.Context, f host.AttemptFilter) ([]*host.Attempt, error) {
	where, args := attemptWhere(f)
	q := `SELECT ` + attemptColumns + ` FROM attempt_records` + where
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q += ` ORDER BY seq DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, host.Wrap("list attempts", "", err)
	}
	defer rows.Close()
	type row struct {
		seq int64
		rec []byte
	}
	var page []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.seq, &r.rec); err != nil {
			return nil, host.Wrap("list attempts", "", err)
		}
		page = append(page, r)
	}
	if err := rows.Err(); err != nil {
		return nil, host.Wrap("list attempts", "", err)
	}
	rows.Close()
	// Values are read once the page is: not while its rows are open.
	out := make([]*host.Attempt, 0, len(page))
	for _, r := range page {
		a, err := storecore.DecodeAttempt(ctx, s.readValues, r.seq, r.rec)
		if err != nil {
			return nil, host.Wrap("list attempts", "", err)
		}
		out = append(out, a)
	}
	return out, nil
}

// ExportAttempt implements host.Evidence.
func (s *Store) ExportAttempt(ctx context.Context, attemptID string) (*host.Bundle, error) {
	const op = "export attempt"
	a, err := s.Attempt(ctx, attemptID)
	if err != nil {
		return nil, err
	}
	b := &host.Bundle{Format: host.BundleFormat, ExportedAt: s.now(), Attempt: a, Artifacts: []host.BundleArtifact{}}
	arts, err := s.artifactsOf(ctx, s.db, a.TaskID, attemptID)
	if err != nil {
		return nil, host.Wrap(op, attemptID, err)
	}
	for _, art := range arts {
		data, err := s.readBlob(art.SHA256)
		if err != nil {
			return nil, host.Wrap(op, attemptID, err)
		}
		b.Artifacts = append(b.Artifacts, host.BundleArtifact{Artifact: *art, Content: data})
	}
	for after := int64(0); ; {
		evs, err := s.Events(ctx, host.EventFilter{AttemptID: attemptID, AfterSeq: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		b.Events = append(b.Events, evs...)
		if len(evs) < 1000 {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	digest, err := evidence.BundleDigest(b)
	if err != nil {
		return nil, host.Wrap(op, attemptID, err)
	}
	if b.Seal, err = s.SealDigest(host.BundleFormat, digest); err != nil {
		return nil, host.Wrap(op, attemptID, err)
	}
	return b, nil
}
