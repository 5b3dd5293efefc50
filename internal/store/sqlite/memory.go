package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// Every statement here is keyed by (tenant, namespace): that is the
// structural tenant isolation. Error subjects are "<namespace>/<key>", the
// caller's own names.

func subject(sc host.Scope, key string) string { return storecore.MemorySubject(sc, key) }

// Get implements host.Memory.
func (s *Store) Get(ctx context.Context, sc host.Scope, key string) (*host.Entry, error) {
	const op = "memory get"
	if err := storecore.CheckEntry(op, sc, key); err != nil {
		return nil, err
	}
	k := memKey{sc.Tenant, sc.Namespace, key}
	e, cached, g := s.mc.lookup(k, time.Now())
	if !cached {
		var expires sql.NullString
		var updated string
		e = &cachedEntry{}
		err := s.queryRow(ctx, `SELECT value, secret, expires_at, updated_at FROM memory_entries
			WHERE tenant = ? AND namespace = ? AND key = ?`, sc.Tenant, sc.Namespace, key).Scan(&e.value, &e.secret, &expires, &updated)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			e.missing = true
		case err != nil:
			return nil, host.Wrap(op, subject(sc, key), err)
		default:
			e.expires, e.expiresAt, e.updatedAt = expires.String, parseNullTS(expires), parseTS(updated)
			if sealed(e.value) {
				// The cache keeps the plaintext, in memory only. A
				// sealed value is a secret whatever its flag says.
				if e.value, err = s.keys.open(ctx, sc, key, e.value); err != nil {
					return nil, host.Wrap(op, subject(sc, key), err)
				}
				e.secret = true
			}
		}
		s.mc.store(k, e, g, time.Now())
	}
	// Expiry is decided here, as the SQL of the other reads decides it
	// (stored text against the current time in the same form).
	if e.missing || e.expires != "" && e.expires <= ts(s.now()) {
		return nil, host.Errorf(op, subject(sc, key), host.ErrNotFound, "")
	}
	return e.entry(key), nil
}

// memWrite marks a write transaction as changing memory entries (see
// wtx.touch and memCache).
func (s *Store) memWrite(tx *wtx) { tx.touch(s.gens.memory) }

// Put implements host.Memory. A namespace's usage (bytes of keys plus
// values) is kept in memory_usage in the same transaction; when a Put
// would exceed the limit, the namespace's expired entries are purged first.
func (s *Store) Put(ctx context.Context, sc host.Scope, key string, value json.RawMessage, opts host.PutOptions) error {
	const op = "memory put"
	size, err := storecore.CheckPut(op, sc, key, value, opts, s.opts.MaxValueBytes)
	if err != nil {
		return err
	}
	subj := subject(sc, key)
	stored := []byte(value)
	if opts.Secret {
		if stored, err = s.keys.seal(ctx, sc, key, value); err != nil {
			return host.Wrap(op, subj, err)
		}
	}
	err = s.w.do(ctx, func(tx *wtx) error {
		s.memWrite(tx)
		now := s.now()
		var old int64
		err := tx.QueryRow(`SELECT size FROM memory_entries WHERE tenant = ? AND namespace = ? AND key = ?`, sc.Tenant, sc.Namespace, key).Scan(&old)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		used, err := usage(tx, sc)
		if err != nil {
			return err
		}
		if used-old+size > s.opts.MaxNamespaceBytes {
			if _, err := s.purgeExpired(tx, sc, now); err != nil {
				return err
			}
			old = 0
			err := tx.QueryRow(`SELECT size FROM memory_entries WHERE tenant = ? AND namespace = ? AND key = ?`, sc.Tenant, sc.Namespace, key).Scan(&old)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if used, err = usage(tx, sc); err != nil {
				return err
			}
			if used-old+size > s.opts.MaxNamespaceBytes {
				return host.Errorf(op, subj, host.ErrTooLarge, "namespace %s would hold %d bytes; the limit is %d", sc.Namespace, used-old+size, s.opts.MaxNamespaceBytes)
			}
		}
		var expires any
		if opts.TTL > 0 {
			expires = ts(now.Add(opts.TTL))
		}
		if _, err := tx.Exec(`INSERT INTO memory_entries (tenant, namespace, key, value, secret, size, expires_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant, namespace, key) DO UPDATE SET value = excluded.value, secret = excluded.secret, size = excluded.size,
			expires_at = excluded.expires_at, updated_at = excluded.updated_at`,
			sc.Tenant, sc.Namespace, key, stored, opts.Secret, size, expires, ts(now)); err != nil {
			return err
		}
		return addUsage(tx, sc, size-old)
	})
	return host.Wrap(op, subj, err)
}

func usage(tx *wtx, sc host.Scope) (int64, error) {
	var n int64
	err := tx.QueryRow(`SELECT bytes FROM memory_usage WHERE tenant = ? AND namespace = ?`, sc.Tenant, sc.Namespace).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

func addUsage(tx *wtx, sc host.Scope, delta int64) error {
	if delta == 0 {
		return nil
	}
	_, err := tx.Exec(`INSERT INTO memory_usage (tenant, namespace, bytes) VALUES (?, ?, ?)
		ON CONFLICT (tenant, namespace) DO UPDATE SET bytes = bytes + excluded.bytes`, sc.Tenant, sc.Namespace, delta)
	return err
}

// purgeExpired deletes a namespace's expired entries and returns how many.
func (s *Store) purgeExpired(tx *wtx, sc host.Scope, now time.Time) (int64, error) {
	rows, err := tx.WriteQuery(`DELETE FROM memory_entries WHERE tenant = ? AND namespace = ? AND expires_at IS NOT NULL AND expires_at <= ? RETURNING size`,
		sc.Tenant, sc.Namespace, ts(now))
	if err != nil {
		return 0, err
	}
	var n, freed int64
	for rows.Next() {
		var size int64
		if err := rows.Scan(&size); err != nil {
			rows.Close()
			return 0, err
		}
		n, freed = n+1, freed+size
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return n, addUsage(tx, sc, -freed)
}

// Delete implements host.Memory.
func (s *Store) Delete(ctx context.Context, sc host.Scope, key string) error {
	const op = "memory delete"
	if err := storecore.CheckEntry(op, sc, key); err != nil {
		return err
	}
	subj := subject(sc, key)
	found := false
	err := s.w.do(ctx, func(tx *wtx) error {
		s.memWrite(tx)
		found = false
		var size int64
		var expires sql.NullString
		err := tx.WriteRow(`DELETE FROM memory_entries WHERE tenant = ? AND namespace = ? AND key = ? RETURNING size, expires_at`,
			sc.Tenant, sc.Namespace, key).Scan(&size, &expires)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		// An expired entry is deleted too, but reported as absent.
		found = !expires.Valid || expires.String > ts(s.now())
		return addUsage(tx, sc, -size)
	})
	if err == nil && !found {
		return host.Errorf(op, subj, host.ErrNotFound, "")
	}
	return host.Wrap(op, subj, err)
}

// List implements host.Memory.
func (s *Store) List(ctx context.Context, sc host.Scope, prefix string) ([]string, error) {
	const op = "memory list"
	if err := host.CheckScope(op, sc); err != nil {
		return nil, err
	}
	if err := host.CheckKey(op, prefix, true); err != nil {
		return nil, err
	}
	q := `SELECT key FROM memory_entries WHERE tenant = ? AND namespace = ? AND (expires_at IS NULL OR expires_at > ?) AND key >= ?`
	args := []any{sc.Tenant, sc.Namespace, ts(s.now()), prefix}
	if end, ok := prefixEnd(prefix); ok {
		q += ` AND key < ?`
		args = append(args, end)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY key`, args...)
	if err != nil {
		return nil, host.Wrap(op, sc.Namespace, err)
	}
	defer rows.Close()
	keys := []string{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, host.Wrap(op, sc.Namespace, err)
		}
		keys = append(keys, k)
	}
	return keys, host.Wrap(op, sc.Namespace, rows.Err())
}

// prefixEnd returns the smallest string greater than every string with the
// given prefix (bytewise, as SQLite's BINARY collation compares), or false
// if there is none (empty prefix, or all 0xff bytes).
func prefixEnd(prefix string) (string, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// Sweep deletes every expired memory entry and returns how many it deleted.
// Expired entries are never returned whether or not they were swept.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	var n int64
	err := s.w.do(ctx, func(tx *wtx) error {
		s.memWrite(tx)
		n = 0
		rows, err := tx.WriteQuery(`DELETE FROM memory_entries WHERE expires_at IS NOT NULL AND expires_at <= ? RETURNING tenant, namespace, size`, ts(s.now()))
		if err != nil {
			return err
		}
		freed := map[host.Scope]int64{}
		for rows.Next() {
			var sc host.Scope
			var size int64
			if err := rows.Scan(&sc.Tenant, &sc.Namespace, &size); err != nil {
				rows.Close()
				return err
			}
			freed[sc] += size
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for sc, size := range freed {
			if err := addUsage(tx, sc, -size); err != nil {
				return err
			}
		}
		return nil
	})
	return n, host.Wrap("memory sweep", "", err)
}
