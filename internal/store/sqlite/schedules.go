package sqlite

import (
	"context"
)

// The schedule rules are storecore's (schedules.go), run in the writer's
// transaction (coreTx).

// queryAll runs a query on the pool and scans every row with scan.
func queryAll[T any](s *Store, ctx context.Context, scan func(interface{ Scan(...any) error }) (T, error), query string, args ...any) ([]T, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
