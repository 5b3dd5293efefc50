package storecore

import (
	"context"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
)

const dispatchLock = "dispatch"

// AcquireDispatchLock implements host.Locker. With several nodes on one
// database the lock does not guard claiming (each claim holds its own
// lease): it elects the node that runs singleton chores. The row,
// present or not, is decided under a lock of its own (LockName: an
// advisory lock on PostgreSQL; SQLite's single writer on SQLite).
func (o Ops) AcquireDispatchLock(ctx context.Context, holder string, ttl time.Duration) (*host.DispatchLock, error) {
	q := o.queue()
	const op = "acquire dispatch lock"
	if err := host.CheckID(op, "holder", holder); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, host.Invalid(op, "ttl", "must be positive")
	}
	var l host.DispatchLock
	err := q.Write(ctx, func(tx SettleTx) error {
		now := q.Now()
		if err := tx.(LockTx).LockName(ctx, 0, "packrun.dispatch_lock."+dispatchLock); err != nil {
			return err
		}
		var cur host.DispatchLock
		var acq, exp string
		err := tx.QueryRow(ctx, `SELECT holder, acquired_at, expires_at FROM dispatch_locks WHERE name = $1`, dispatchLock).Scan(&cur.Holder, &acq, &exp)
		switch {
		case errors.Is(err, ErrNoRows):
		case err != nil:
			return err
		case cur.Holder == holder:
			l = host.DispatchLock{Holder: holder, AcquiredAt: ParseTime(acq), ExpiresAt: now.Add(ttl)}
			_, err := tx.Exec(ctx, `UPDATE dispatch_locks SET expires_at = $1 WHERE name = $2`, host.FormatTime(l.ExpiresAt), dispatchLock)
			return err
		case exp > host.FormatTime(now):
			return host.Errorf(op, "", host.ErrLocked, "held by %s until %s", cur.Holder, exp)
		default:
			if _, err := tx.Exec(ctx, `DELETE FROM dispatch_locks WHERE name = $1`, dispatchLock); err != nil {
				return err
			}
			if err := tx.Event(host.EventDispatchLockStale, "", "", map[string]any{"holder": cur.Holder, "acquired_at": acq, "expired_at": exp}); err != nil {
				return err
			}
		}
		l = host.DispatchLock{Holder: holder, AcquiredAt: now, ExpiresAt: now.Add(ttl)}
		if _, err := tx.Exec(ctx, `INSERT INTO dispatch_locks (name, holder, acquired_at, expires_at) VALUES ($1, $2, $3, $4)`,
			dispatchLock, holder, host.FormatTime(l.AcquiredAt), host.FormatTime(l.ExpiresAt)); err != nil {
			return err
		}
		return tx.Event(host.EventDispatchLocked, "", "", map[string]any{"holder": holder, "expires_at": host.FormatTime(l.ExpiresAt)})
	})
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	return &l, nil
}

// ReleaseDispatchLock implements host.Locker.
func (o Ops) ReleaseDispatchLock(ctx context.Context, holder string) error {
	q := o.queue()
	const op = "release dispatch lock"
	err := q.Write(ctx, func(tx SettleTx) error {
		n, err := tx.Exec(ctx, `DELETE FROM dispatch_locks WHERE name = $1 AND holder = $2`, dispatchLock, holder)
		if err != nil {
			return err
		}
		if n == 0 {
			return host.Errorf(op, "", host.ErrNotFound, "%s does not hold the dispatch lock", holder)
		}
		return tx.Event(host.EventDispatchLockReleased, "", "", map[string]any{"holder": holder})
	})
	return host.Wrap(op, "", err)
}
