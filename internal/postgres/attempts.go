package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/storecore"
)

// attemptRow is a normalized attempt with its record encoded and hashed,
// so that the chain lock is held only to link it and insert it.
type attemptRow struct {
	a      *host.Attempt
	record []byte
}

// errAttemptExists: the attempt id is taken (the unique index refused
// the insert).
var errAttemptExists = errors.New("attempt already recorded")

// prepareAttempt normalizes a (storecore.NormalizeAttempt), encodes its record and sets its content
// hash.
func (s *Store) prepareAttempt(a *host.Attempt) (*attemptRow, error) {
	if err := storecore.NormalizeAttempt(a, s.now()); err != nil {
		return nil, err
	}
	rec := evidence.AppendRecord(make([]byte, 0, evidence.RecordSize(a)), a)
	a.ContentHash = evidence.HashRecord(rec)
	return &attemptRow{a: a, record: rec}, nil
}

// RecordAttempt implements host.Evidence.
func (s *Store) RecordAttempt(ctx context.Context, a *host.Attempt) error {
	const op = "record attempt"
	row, err := s.prepareAttempt(a)
	if err != nil {
		return err
	}
	au := host.AuditFor(ctx, host.AuditAttempt)
	err = s.write(ctx, func(x *tx) error {
		x.attempt(row)
		if au != nil {
			_, err := x.event(au.Type, row.a.TaskID, row.a.AttemptID, au.Data)
			return err
		}
		return nil
	})
	if err == nil && au != nil {
		au.MarkWritten()
	}
	if errors.Is(err, errAttemptExists) {
		err = s.sameAttempt(ctx, a)
	}
	return host.Wrap(op, a.AttemptID, err)
}

// sameAttempt decides a record of an attempt id that is already taken:
// the same content recorded again is a no-op, anything else a conflict.
func (s *Store) sameAttempt(ctx context.Context, a *host.Attempt) error {
	var rec []byte
	var seq int64
	if err := s.pool.QueryRow(ctx, `SELECT record, seq FROM attempt_records WHERE attempt_id = $1`, a.AttemptID).Scan(&rec, &seq); err != nil {
		return err
	}
	if len(rec) == 0 || rec[0] != evidence.RecordV2 || evidence.HashRecord(rec) != a.ContentHash {
		return host.Errorf("record attempt", a.AttemptID, host.ErrConflict, "already recorded with different content; attempts are immutable")
	}
	a.EventSeq = seq
	return nil
}

// Attempt implements host.Evidence.
func (s *Store) Attempt(ctx context.Context, attemptID string) (*host.Attempt, error) {
	a, err := storecore.ScanAttempt(s.pool.QueryRow(ctx, `SELECT seq, record FROM attempt_records WHERE attempt_id = $1`, attemptID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Errorf("get attempt", attemptID, host.ErrNotFound, "")
	}
	return a, host.Wrap("get attempt", attemptID, err)
}

// attemptWhere is the WHERE clause of f, its arguments added to a.
func attemptWhere(f host.AttemptFilter, a *args) string {
	q := ` WHERE true`
	if f.TaskID != "" {
		q += ` AND task_id = ` + a.add(f.TaskID)
	}
	if f.TaskType != "" {
		q += ` AND task_id IN (SELECT task_id FROM tasks WHERE task_type = ` + a.add(f.TaskType) + `)`
	}
	if f.BeforeSeq != 0 {
		q += ` AND seq < ` + a.add(f.BeforeSeq)
	}
	if f.Pack != "" {
		if strings.Contains(f.Pack, "@") {
			q += ` AND pack = ` + a.add(f.Pack)
		} else {
			q += ` AND starts_with(pack, ` + a.add(f.Pack+"@") + `)`
		}
	}
	if f.Tenant != "" {
		q += ` AND tenant = ` + a.add(f.Tenant)
	}
	if !f.Since.IsZero() {
		q += ` AND started_at >= ` + a.add(ts(f.Since))
	}
	return q
}

// CountAttempts implements host.Evidence.
func (s *Store) CountAttempts(ctx context.Context, f host.AttemptFilter) (int, error) {
	var a args
	where := attemptWhere(f, &a)
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM attempt_records`+where, a...).Scan(&n); err != nil {
		return 0, host.Wrap("count attempts", "", err)
	}
	return n, nil
}

// ListAttempts implements host.Evidence.
func (s *Store) ListAttempts(ctx context.Context, f host.AttemptFilter) ([]*host.Attempt, error) {
	var a args
	where := attemptWhere(f, &a)
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, record FROM attempt_records`+where+` ORDER BY seq DESC LIMIT `+strconv.Itoa(limit), a...)
	if err != nil {
		return nil, host.Wrap("list attempts", "", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*host.Attempt, error) { return storecore.ScanAttempt(r) })
	return out, host.Wrap("list attempts", "", err)
}
