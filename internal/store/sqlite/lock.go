package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
)

const dispatchLock = "dispatch"

// AcquireDispatchLock implements host.Locker.
func (s *Store) AcquireDispatchLock(ctx context.Context, holder string, ttl time.Duration) (*host.DispatchLock, error) {
	const op = "acquire dispatch lock"
	if err := host.CheckID(op, "holder", holder); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, host.Invalid(op, "ttl", "must be positive")
	}
	var l host.DispatchLock
	err := s.w.do(ctx, func(tx *wtx) error {
		now := s.now()
		var cur host.DispatchLock
		var acq, exp string
		err := tx.QueryRow(`SELECT holder, acquired_at, expires_at FROM dispatch_locks WHERE name = ?`, dispatchLock).Scan(&cur.Holder, &acq, &exp)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case cur.Holder == holder:
			l = host.DispatchLock{Holder: holder, AcquiredAt: parseTS(acq), ExpiresAt: now.Add(ttl)}
			_, err := tx.Exec(`UPDATE dispatch_locks SET expires_at = ? WHERE name = ?`, ts(l.ExpiresAt), dispatchLock)
			return err
		case exp > ts(now):
			return host.Errorf(op, "", host.ErrLocked, "held by %s until %s", cur.Holder, exp)
		default:
			if _, err := tx.Exec(`DELETE FROM dispatch_locks WHERE name = ?`, dispatchLock); err != nil {
				return err
			}
			if _, err := s.event(tx, host.EventDispatchLockStale, "", "", map[string]any{"holder": cur.Holder, "acquired_at": acq, "expired_at": exp}); err != nil {
				return err
			}
		}
		l = host.DispatchLock{Holder: holder, AcquiredAt: now, ExpiresAt: now.Add(ttl)}
		if _, err := tx.Exec(`INSERT INTO dispatch_locks (name, holder, acquired_at, expires_at) VALUES (?, ?, ?, ?)`,
			dispatchLock, holder, ts(l.AcquiredAt), ts(l.ExpiresAt)); err != nil {
			return err
		}
		_, err = s.event(tx, host.EventDispatchLocked, "", "", map[string]any{"holder": holder, "expires_at": ts(l.ExpiresAt)})
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	return &l, nil
}

// ReleaseDispatchLock implements host.Locker.
func (s *Store) ReleaseDispatchLock(ctx context.Context, holder string) error {
	const op = "release dispatch lock"
	err := s.w.do(ctx, func(tx *wtx) error {
		res, err := tx.Exec(`DELETE FROM dispatch_locks WHERE name = ? AND holder = ?`, dispatchLock, holder)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return host.Errorf(op, "", host.ErrNotFound, "%s does not hold the dispatch lock", holder)
		}
		_, err = s.event(tx, host.EventDispatchLockReleased, "", "", map[string]any{"holder": holder})
		return err
	})
	return host.Wrap(op, "", err)
}
