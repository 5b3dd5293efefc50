package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

// attemptRow is a normalized attempt with its record encoded and hashed,
// so that the chain lock is held only to link it and insert it.
type attemptRow struct {
	a      *host.Attempt
	record []byte
	values []evidence.Value // named by record, not known to be stored
}

// insertValue stores a value a record keeps out of line, in the
// transaction that appends the record (flush); one stored already is left
// as it is: its key is its content's digest.
const insertValue = `INSERT INTO evidence_values (digest, value) VALUES ($1, $2) ON CONFLICT DO NOTHING`

// readValues is the store's storecore.ValueReader.
func (s *Store) readValues(ctx context.Context, keys []string) (map[string][]byte, error) {
	rows, err := s.pool.Query(ctx, `SELECT digest, value FROM evidence_values WHERE digest = ANY($1)`, keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string][]byte, len(keys))
	for rows.Next() {
		var k string
		var v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

// errAttemptExists: the attempt id is taken (the unique index refused
// the insert).
var errAttemptExists = storecore.ErrAttemptExists

// prepareAttempt normalizes a (storecore.NormalizeAttempt), encodes its record and sets its content
// hash.
func (s *Store) prepareAttempt(a *host.Attempt) (*attemptRow, error) {
	if err := storecore.NormalizeAttempt(a, s.now()); err != nil {
		return nil, err
	}
	rec, vals := s.values.AppendRecord(make([]byte, 0, evidence.RecordSize(a)), a, nil)
	a.ContentHash = evidence.HashRecord(rec)
	return &attemptRow{a: a, record: rec, values: vals}, nil
}

// RecordAttempt implements host.Evidence (storecore.Queue.RecordAttempt).
func (s *Store) RecordAttempt(ctx context.Context, a *host.Attempt) error {
	return s.queue().RecordAttempt(ctx, a)
}

// Attempt implements host.Evidence.
func (s *Store) Attempt(ctx context.Context, attemptID string) (*host.Attempt, error) {
	var seq int64
	var rec []byte
	err := s.pool.QueryRow(ctx, `SELECT seq, record FROM attempt_records WHERE attempt_id = $1`, attemptID).Scan(&seq, &rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Errorf("get attempt", attemptID, host.ErrNotFound, "")
	}
	if err != nil {
		return nil, host.Wrap("get attempt", attemptID, err)
	}
	a, err := storecore.DecodeAttempt(ctx, s.readValues, seq, rec)
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
	type row struct {
		seq int64
		rec []byte
	}
	page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.seq, &x.rec)
	})
	if err != nil {
		return nil, host.Wrap("list attempts", "", err)
	}
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
