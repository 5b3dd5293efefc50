package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

var _ host.Memory = (*Store)(nil)

// host.Memory, as internal/store/sqlite's: every statement is keyed by (tenant,
// namespace), which is the structural tenant isolation; error subjects are
// "<namespace>/<key>", the caller's own names; expiry is decided against
// the store's clock, the stored time's text against now's (text order is
// time order), so an entry is gone at its expires_at on every node.
//
// A namespace's usage (bytes of keys plus values) is memory_usage's row,
// kept in the transaction of every write. Every write to a namespace locks
// that row first, so that writes of several nodes to one namespace are
// serial and each reads the sizes the one before it left. There is no read
// cache, unlike internal/store/sqlite's: a read is one indexed query, and with
// nothing cached, nothing can be stale on another node.

// errNoSecretKey: a secret value without Options.SecretKey.
var errNoSecretKey = fmt.Errorf("%w: this store has none (postgres.Options.SecretKey): secret values can be neither stored nor read", storecore.ErrSecretKey)

// Get implements host.Memory.
func (s *Store) Get(ctx context.Context, sc host.Scope, key string) (*host.Entry, error) {
	const op = "memory get"
	if err := storecore.CheckEntry(op, sc, key); err != nil {
		return nil, err
	}
	e, err := storecore.ReadEntry(ctx, corePool{s.pool}, sc, key)
	if errors.Is(err, storecore.ErrNoRows) || err == nil && e.Expired(s.now()) {
		return nil, host.Errorf(op, storecore.MemorySubject(sc, key), host.ErrNotFound, "")
	}
	if err != nil {
		return nil, host.Wrap(op, storecore.MemorySubject(sc, key), err)
	}
	if storecore.Sealed(e.Value) {
		// A sealed value is a secret whatever its flag says.
		if s.secret == nil {
			return nil, host.Wrap(op, storecore.MemorySubject(sc, key), errNoSecretKey)
		}
		if e.Value, err = s.secret.Open(sc, key, e.Value); err != nil {
			return nil, host.Wrap(op, storecore.MemorySubject(sc, key), err)
		}
		e.Secret = true
	}
	return e.Entry(key), nil
}

// Put implements host.Memory. When a Put would exceed the namespace's
// limit, the namespace's expired entries are purged first.
func (s *Store) Put(ctx context.Context, sc host.Scope, key string, value json.RawMessage, opts host.PutOptions) error {
	const op = "memory put"
	size, err := storecore.CheckPut(op, sc, key, value, opts, s.opts.MaxValueBytes)
	if err != nil {
		return err
	}
	subj := storecore.MemorySubject(sc, key)
	stored := []byte(value)
	if opts.Secret {
		if s.secret == nil {
			return host.Wrap(op, subj, errNoSecretKey)
		}
		stored = s.secret.Seal(sc, key, value)
	}
	err = s.write(ctx, func(x *tx) error {
		return storecore.PutEntry(ctx, coreTx{x}, op, sc, key, stored, size, opts, s.opts.MaxNamespaceBytes, s.now())
	})
	return host.Wrap(op, subj, err)
}

// Delete implements host.Memory. An expired entry is deleted too, but
// reported as absent.
func (s *Store) Delete(ctx context.Context, sc host.Scope, key string) error {
	const op = "memory delete"
	if err := storecore.CheckEntry(op, sc, key); err != nil {
		return err
	}
	subj := storecore.MemorySubject(sc, key)
	found := false
	err := s.write(ctx, func(x *tx) error {
		var err error
		found, err = storecore.DeleteEntry(ctx, coreTx{x}, sc, key, s.now())
		return err
	})
	if err == nil && !found {
		return host.Errorf(op, subj, host.ErrNotFound, "")
	}
	return host.Wrap(op, subj, err)
}

// List implements host.Memory: the live keys starting with prefix, in
// byte order (the column is COLLATE "C").
func (s *Store) List(ctx context.Context, sc host.Scope, prefix string) ([]string, error) {
	const op = "memory list"
	if err := host.CheckScope(op, sc); err != nil {
		return nil, err
	}
	if err := host.CheckKey(op, prefix, true); err != nil {
		return nil, err
	}
	// key >= prefix lets the primary key's index find the first; starts_with
	// decides (no LIKE: its wildcards are the caller's characters here).
	rows, err := s.pool.Query(ctx, `SELECT key FROM memory_entries WHERE tenant = $1 AND namespace = $2
		AND (expires_at IS NULL OR expires_at > $3) AND key >= $4 AND starts_with(key, $4) ORDER BY key`,
		sc.Tenant, sc.Namespace, ts(s.now()), prefix)
	if err != nil {
		return nil, host.Wrap(op, sc.Namespace, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, host.Wrap(op, sc.Namespace, err)
	}
	if keys == nil {
		keys = []string{}
	}
	return keys, nil
}

// Sweep deletes every expired memory entry and returns how many it
// deleted, namespace by namespace, each under its usage row's lock (see
// storecore.SweepMemory). Expired entries are never returned whether or
// not they were swept.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	var n int64
	err := s.write(ctx, func(x *tx) error {
		var err error
		n, err = storecore.SweepMemory(ctx, coreTx{x}, s.now())
		return err
	})
	return n, host.Wrap("memory sweep", "", err)
}
