package postgres

import (
	"context"

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

// Attempt implements host.Evidence (storecore.GetAttempt).
func (s *Store) Attempt(ctx context.Context, attemptID string) (*host.Attempt, error) {
	return storecore.GetAttempt(ctx, corePool{s.pool}, s.readValues, attemptID)
}

// CountAttempts implements host.Evidence (storecore.CountAttempts).
func (s *Store) CountAttempts(ctx context.Context, f host.AttemptFilter) (int, error) {
	return storecore.CountAttempts(ctx, corePool{s.pool}, storecore.PostgresDialect, f)
}

// ListAttempts implements host.Evidence (storecore.ListAttempts).
func (s *Store) ListAttempts(ctx context.Context, f host.AttemptFilter) ([]*host.Attempt, error) {
	return storecore.ListAttempts(ctx, corePool{s.pool}, storecore.PostgresDialect, s.readValues, f)
}
