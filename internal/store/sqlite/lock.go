package sqlite

import (
	"context"
	"time"

	"github.com/packrun/packrun/host"
)

// AcquireDispatchLock implements host.Locker (storecore.Queue).
func (s *Store) AcquireDispatchLock(ctx context.Context, holder string, ttl time.Duration) (*host.DispatchLock, error) {
	return s.queue().AcquireDispatchLock(ctx, holder, ttl)
}

// ReleaseDispatchLock implements host.Locker (storecore.Queue).
func (s *Store) ReleaseDispatchLock(ctx context.Context, holder string) error {
	return s.queue().ReleaseDispatchLock(ctx, holder)
}
