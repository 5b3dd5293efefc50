package sqlite

import (
	"context"
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
		e = &cachedEntry{}
		st, err := storecore.ReadEntry(ctx, coreDB{s}, sc, key)
		switch {
		case errors.Is(err, storecore.ErrNoRows):
			e.missing = true
		case err != nil:
			return nil, host.Wrap(op, subject(sc, key), err)
		default:
			e.value, e.secret, e.updatedAt = st.Value, st.Secret, parseTS(st.Updated)
			if st.Expires != nil {
				t := parseTS(*st.Expires)
				e.expires, e.expiresAt = *st.Expires, &t
			}
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
		return storecore.PutEntry(ctx, coreTx{s, tx}, op, sc, key, stored, size, opts, s.opts.MaxNamespaceBytes, s.now())
	})
	return host.Wrap(op, subj, err)
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
		var err error
		found, err = storecore.DeleteEntry(ctx, coreTx{s, tx}, sc, key, s.now())
		return err
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
		var err error
		n, err = storecore.SweepMemory(ctx, coreTx{s, tx}, s.now())
		return err
	})
	return n, host.Wrap("memory sweep", "", err)
}
