package storecore

import (
	"context"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
)

// The memory rules of host.Memory, written once against Tx. Every
// statement is keyed by (tenant, namespace): that is the structural tenant
// isolation. Expiry is decided against the store's clock, the stored
// time's text against now's (text order is time order).
//
// A namespace's usage (bytes of keys plus values) is memory_usage's row,
// kept in the transaction of every write. Every write to a namespace locks
// that row first (Dialect.LockRows; an upsert when it may not exist yet),
// so that writes of several nodes to one namespace are serial and each
// reads the sizes the one before it left.

// MemoryTx is a write transaction that can run a statement with RETURNING
// (SQLite's writer must know that it wrote).
type MemoryTx interface {
	Tx
	WriteQuery(ctx context.Context, query string, args ...any) (Rows, error)
}

// StoredEntry is a memory_entries row as ReadEntry reads it.
type StoredEntry struct {
	Value   []byte
	Secret  bool
	Expires *string // stored expiry (host.FormatTime), nil: none
	Updated string
}

// Expired reports whether the entry is gone at now.
func (e *StoredEntry) Expired(now time.Time) bool {
	return e.Expires != nil && *e.Expires <= host.FormatTime(now)
}

// Entry is the entry under key, its value as stored or opened.
func (e *StoredEntry) Entry(key string) *host.Entry {
	return &host.Entry{Key: key, Value: e.Value, Secret: e.Secret, ExpiresAt: parseNullTime(e.Expires), UpdatedAt: ParseTime(e.Updated)}
}

// ReadEntry reads the entry under key, expired or not (ErrNoRows: none).
func ReadEntry(ctx context.Context, q Querier, sc host.Scope, key string) (*StoredEntry, error) {
	var e StoredEntry
	err := q.QueryRow(ctx, `SELECT value, secret, expires_at, updated_at FROM memory_entries
		WHERE tenant = $1 AND namespace = $2 AND key = $3`, sc.Tenant, sc.Namespace, key).Scan(&e.Value, &e.Secret, &e.Expires, &e.Updated)
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// writeRow runs a write statement with RETURNING of at most one row into
// dest, and reports whether there was one.
func writeRow(ctx context.Context, tx MemoryTx, dest []any, query string, args ...any) (bool, error) {
	rows, err := tx.WriteQuery(ctx, query, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return false, err
		}
		found = true
	}
	return found, rows.Err()
}

// lockUsage locks the namespace's usage row, creating it if need be, and
// returns its bytes. Under READ COMMITTED, the statements after it see
// what the previous holder of the lock committed.
func lockUsage(ctx context.Context, tx MemoryTx, sc host.Scope) (int64, error) {
	var n int64
	_, err := writeRow(ctx, tx, []any{&n}, `INSERT INTO memory_usage (tenant, namespace, bytes) VALUES ($1, $2, 0)
		ON CONFLICT (tenant, namespace) DO UPDATE SET bytes = memory_usage.bytes RETURNING bytes`, sc.Tenant, sc.Namespace)
	return n, err
}

// lockUsageIfAny locks the namespace's usage row if there is one (there
// is none only when the namespace never held an entry).
func lockUsageIfAny(ctx context.Context, tx Tx, sc host.Scope) error {
	var n int64
	err := tx.QueryRow(ctx, `SELECT bytes FROM memory_usage WHERE tenant = $1 AND namespace = $2`+tx.Dialect().LockRows, sc.Tenant, sc.Namespace).Scan(&n)
	if errors.Is(err, ErrNoRows) {
		return nil
	}
	return err
}

// entrySize is the size of the entry under key, 0 if none.
func entrySize(ctx context.Context, tx Tx, sc host.Scope, key string) (int64, error) {
	var n int64
	err := tx.QueryRow(ctx, `SELECT size FROM memory_entries WHERE tenant = $1 AND namespace = $2 AND key = $3`, sc.Tenant, sc.Namespace, key).Scan(&n)
	if errors.Is(err, ErrNoRows) {
		return 0, nil
	}
	return n, err
}

func addUsage(ctx context.Context, tx Tx, sc host.Scope, delta int64) error {
	if delta == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO memory_usage (tenant, namespace, bytes) VALUES ($1, $2, $3)
		ON CONFLICT (tenant, namespace) DO UPDATE SET bytes = memory_usage.bytes + excluded.bytes`, sc.Tenant, sc.Namespace, delta)
	return err
}

// purgeExpired deletes the namespace's expired entries (its usage row
// locked) and returns how many, and the bytes freed.
func purgeExpired(ctx context.Context, tx MemoryTx, sc host.Scope, now time.Time) (n, freed int64, err error) {
	rows, err := tx.WriteQuery(ctx, `DELETE FROM memory_entries WHERE tenant = $1 AND namespace = $2 AND expires_at IS NOT NULL AND expires_at <= $3 RETURNING size`,
		sc.Tenant, sc.Namespace, host.FormatTime(now))
	if err != nil {
		return 0, 0, err
	}
	sizes, err := CollectRows(rows, func(r Row) (int64, error) {
		var size int64
		return size, r.Scan(&size)
	})
	if err != nil {
		return 0, 0, err
	}
	for _, size := range sizes {
		freed += size
	}
	return int64(len(sizes)), freed, addUsage(ctx, tx, sc, -freed)
}

// PutEntry stores value (as stored: sealed if secret) under key, its size
// checked by CheckPut (errors under op). When the namespace would exceed
// maxBytes, its expired entries are purged first; if it still would, the
// Put is refused (ErrTooLarge).
func PutEntry(ctx context.Context, tx MemoryTx, op string, sc host.Scope, key string, stored []byte, size int64, opts host.PutOptions, maxBytes int64, now time.Time) error {
	used, err := lockUsage(ctx, tx, sc)
	if err != nil {
		return err
	}
	old, err := entrySize(ctx, tx, sc, key)
	if err != nil {
		return err
	}
	if used-old+size > maxBytes {
		_, freed, err := purgeExpired(ctx, tx, sc, now)
		if err != nil {
			return err
		}
		if old, err = entrySize(ctx, tx, sc, key); err != nil {
			return err
		}
		if used -= freed; used-old+size > maxBytes {
			return host.Errorf(op, MemorySubject(sc, key), host.ErrTooLarge, "namespace %s would hold %d bytes; the limit is %d", sc.Namespace, used-old+size, maxBytes)
		}
	}
	var expires *string
	if opts.TTL > 0 {
		e := host.FormatTime(now.Add(opts.TTL))
		expires = &e
	}
	if _, err := tx.Exec(ctx, `INSERT INTO memory_entries (tenant, namespace, key, value, secret, size, expires_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (tenant, namespace, key) DO UPDATE SET value = excluded.value, secret = excluded.secret, size = excluded.size,
		expires_at = excluded.expires_at, updated_at = excluded.updated_at`,
		sc.Tenant, sc.Namespace, key, stored, opts.Secret, size, expires, host.FormatTime(now)); err != nil {
		return err
	}
	return addUsage(ctx, tx, sc, size-old)
}

// DeleteEntry deletes the entry under key and reports whether it was
// there: an expired entry is deleted too, but reported as absent.
func DeleteEntry(ctx context.Context, tx MemoryTx, sc host.Scope, key string, now time.Time) (bool, error) {
	if err := lockUsageIfAny(ctx, tx, sc); err != nil {
		return false, err
	}
	var size int64
	var expires *string
	found, err := writeRow(ctx, tx, []any{&size, &expires}, `DELETE FROM memory_entries WHERE tenant = $1 AND namespace = $2 AND key = $3 RETURNING size, expires_at`,
		sc.Tenant, sc.Namespace, key)
	if err != nil || !found {
		return false, err
	}
	return expires == nil || *expires > host.FormatTime(now), addUsage(ctx, tx, sc, -size)
}

// SweepMemory deletes every expired entry and returns how many, namespace
// by namespace, each under its usage row's lock (in one order, so that two
// nodes sweeping at once do not deadlock).
func SweepMemory(ctx context.Context, tx MemoryTx, now time.Time) (int64, error) {
	rows, err := tx.Query(ctx, `SELECT DISTINCT tenant, namespace FROM memory_entries
		WHERE expires_at IS NOT NULL AND expires_at <= $1 ORDER BY tenant, namespace`, host.FormatTime(now))
	if err != nil {
		return 0, err
	}
	scopes, err := CollectRows(rows, func(r Row) (host.Scope, error) {
		var sc host.Scope
		return sc, r.Scan(&sc.Tenant, &sc.Namespace)
	})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, sc := range scopes {
		if err := lockUsageIfAny(ctx, tx, sc); err != nil {
			return 0, err
		}
		k, _, err := purgeExpired(ctx, tx, sc, now)
		if err != nil {
			return 0, err
		}
		n += k
	}
	return n, nil
}
