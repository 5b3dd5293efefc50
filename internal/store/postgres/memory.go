package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
	var value []byte
	var secret bool
	var expires *string
	var updated string
	err := s.pool.QueryRow(ctx, `SELECT value, secret, expires_at, updated_at FROM memory_entries
		WHERE tenant = $1 AND namespace = $2 AND key = $3`, sc.Tenant, sc.Namespace, key).Scan(&value, &secret, &expires, &updated)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && expires != nil && *expires <= ts(s.now()) {
		return nil, host.Errorf(op, storecore.MemorySubject(sc, key), host.ErrNotFound, "")
	}
	if err != nil {
		return nil, host.Wrap(op, storecore.MemorySubject(sc, key), err)
	}
	if storecore.Sealed(value) {
		// A sealed value is a secret whatever its flag says.
		if s.secret == nil {
			return nil, host.Wrap(op, storecore.MemorySubject(sc, key), errNoSecretKey)
		}
		if value, err = s.secret.Open(sc, key, value); err != nil {
			return nil, host.Wrap(op, storecore.MemorySubject(sc, key), err)
		}
		secret = true
	}
	return &host.Entry{Key: key, Value: value, Secret: secret, ExpiresAt: parseNullTS(expires), UpdatedAt: parseTS(updated)}, nil
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
		now := s.now()
		used, err := x.lockUsage(sc)
		if err != nil {
			return err
		}
		old, err := x.entrySize(sc, key)
		if err != nil {
			return err
		}
		if used-old+size > s.opts.MaxNamespaceBytes {
			_, freed, err := x.purgeExpired(sc, now)
			if err != nil {
				return err
			}
			if old, err = x.entrySize(sc, key); err != nil {
				return err
			}
			if used -= freed; used-old+size > s.opts.MaxNamespaceBytes {
				return host.Errorf(op, subj, host.ErrTooLarge, "namespace %s would hold %d bytes; the limit is %d", sc.Namespace, used-old+size, s.opts.MaxNamespaceBytes)
			}
		}
		var expires *string
		if opts.TTL > 0 {
			e := ts(now.Add(opts.TTL))
			expires = &e
		}
		if _, err := x.Exec(ctx, `INSERT INTO memory_entries (tenant, namespace, key, value, secret, size, expires_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (tenant, namespace, key) DO UPDATE SET value = excluded.value, secret = excluded.secret, size = excluded.size,
			expires_at = excluded.expires_at, updated_at = excluded.updated_at`,
			sc.Tenant, sc.Namespace, key, stored, opts.Secret, size, expires, ts(now)); err != nil {
			return err
		}
		return x.addUsage(sc, size-old)
	})
	return host.Wrap(op, subj, err)
}

// lockUsage locks the namespace's usage row, creating it if need be, and
// returns its bytes. Under READ COMMITTED, the statements after it see
// what the previous holder of the lock committed.
func (x *tx) lockUsage(sc host.Scope) (int64, error) {
	var n int64
	err := x.QueryRow(x.ctx, `INSERT INTO memory_usage (tenant, namespace, bytes) VALUES ($1, $2, 0)
		ON CONFLICT (tenant, namespace) DO UPDATE SET bytes = memory_usage.bytes RETURNING bytes`, sc.Tenant, sc.Namespace).Scan(&n)
	return n, err
}

// lockUsageIfAny locks the namespace's usage row if there is one. There is
// none only when the namespace never held an entry: a Put creates it in
// the transaction that stores the entry.
func (x *tx) lockUsageIfAny(sc host.Scope) (bool, error) {
	var n int64
	err := x.QueryRow(x.ctx, `SELECT bytes FROM memory_usage WHERE tenant = $1 AND namespace = $2 FOR UPDATE`, sc.Tenant, sc.Namespace).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// entrySize is the size of the entry under key, 0 if none.
func (x *tx) entrySize(sc host.Scope, key string) (int64, error) {
	var n int64
	err := x.QueryRow(x.ctx, `SELECT size FROM memory_entries WHERE tenant = $1 AND namespace = $2 AND key = $3`, sc.Tenant, sc.Namespace, key).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

func (x *tx) addUsage(sc host.Scope, delta int64) error {
	if delta == 0 {
		return nil
	}
	_, err := x.Exec(x.ctx, `UPDATE memory_usage SET bytes = bytes + $3 WHERE tenant = $1 AND namespace = $2`, sc.Tenant, sc.Namespace, delta)
	return err
}

// purgeExpired deletes the namespace's expired entries (its usage row
// locked) and returns how many, and the bytes freed.
func (x *tx) purgeExpired(sc host.Scope, now time.Time) (n, freed int64, err error) {
	rows, err := x.Query(x.ctx, `DELETE FROM memory_entries WHERE tenant = $1 AND namespace = $2 AND expires_at IS NOT NULL AND expires_at <= $3 RETURNING size`,
		sc.Tenant, sc.Namespace, ts(now))
	if err != nil {
		return 0, 0, err
	}
	sizes, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, 0, err
	}
	for _, size := range sizes {
		freed += size
	}
	return int64(len(sizes)), freed, x.addUsage(sc, -freed)
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
		found = false
		if has, err := x.lockUsageIfAny(sc); err != nil || !has {
			return err
		}
		var size int64
		var expires *string
		err := x.QueryRow(ctx, `DELETE FROM memory_entries WHERE tenant = $1 AND namespace = $2 AND key = $3 RETURNING size, expires_at`,
			sc.Tenant, sc.Namespace, key).Scan(&size, &expires)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found = expires == nil || *expires > ts(s.now())
		return x.addUsage(sc, -size)
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
// deleted, namespace by namespace, each under its usage row's lock (in
// one order, so that two nodes sweeping at once do not deadlock). Expired
// entries are never returned whether or not they were swept.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	const op = "memory sweep"
	now := s.now()
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT tenant, namespace FROM memory_entries
		WHERE expires_at IS NOT NULL AND expires_at <= $1 ORDER BY tenant, namespace`, ts(now))
	if err != nil {
		return 0, host.Wrap(op, "", err)
	}
	scopes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (host.Scope, error) {
		var sc host.Scope
		return sc, r.Scan(&sc.Tenant, &sc.Namespace)
	})
	if err != nil {
		return 0, host.Wrap(op, "", err)
	}
	var n int64
	err = s.write(ctx, func(x *tx) error {
		n = 0
		for _, sc := range scopes {
			has, err := x.lockUsageIfAny(sc)
			if err != nil {
				return err
			}
			if !has {
				continue
			}
			k, _, err := x.purgeExpired(sc, now)
			if err != nil {
				return err
			}
			n += k
		}
		return nil
	})
	return n, host.Wrap(op, "", err)
}
