package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

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
	tx.appendedEntry(eventHead{seq: seq, hash: link})
	a.EventSeq = seq
	return nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Attempt implements host.Evidence (storecore.GetAttempt).
func (s *Store) Attempt(ctx context.Context, attemptID string) (*host.Attempt, error) {
	return storecore.GetAttempt(ctx, coreDB{s}, s.readValues, attemptID)
}

// CountAttempts implements host.Evidence (storecore.CountAttempts).
func (s *Store) CountAttempts(ctx context.Context, f host.AttemptFilter) (int, error) {
	return storecore.CountAttempts(ctx, coreDB{s}, storecore.SQLiteDialect, f)
}

// ListAttempts implements host.Evidence (storecore.ListAttempts).
func (s *Store) ListAttempts(ctx context.Context, f host.AttemptFilter) ([]*host.Attempt, error) {
	return storecore.ListAttempts(ctx, coreDB{s}, storecore.SQLiteDialect, s.readValues, f)
}

// ExportAttempt implements host.Evidence (storecore.Exporter).
func (s *Store) ExportAttempt(ctx context.Context, attemptID string) (*host.Bundle, error) {
	return storecore.Exporter{Evidence: s, Seal: s.SealDigest, Now: s.now,
		Artifacts: func(ctx context.Context, a *host.Attempt) ([]host.BundleArtifact, error) {
			arts, err := s.artifactsOf(ctx, s.db, a.TaskID, a.AttemptID)
			if err != nil {
				return nil, host.Wrap("export attempt", a.AttemptID, err)
			}
			out := make([]host.BundleArtifact, 0, len(arts))
			for _, art := range arts {
				data, err := s.readBlob(art.SHA256)
				if err != nil {
					return nil, host.Wrap("export attempt", a.AttemptID, err)
				}
				out = append(out, host.BundleArtifact{Artifact: *art, Content: data})
			}
			return out, nil
		}}.ExportAttempt(ctx, attemptID)
}
