package host

import (
	"context"
	"time"
)

// Leases is implemented by a store that several dispatchers on separate
// nodes share (internal/store/postgres): each claim holds its task under a
// lease that lasts LeaseTTL unless renewed, instead of the one dispatch
// lock guarding all claims. A dispatcher whose Backend implements it
// claims without the dispatch lock, renews the lease of each task it runs
// with Heartbeat, and reclaims the tasks of dead nodes with
// ReclaimExpired. The embedded store (internal/store/sqlite) does not implement
// it: one dispatcher claims at a time.
type Leases interface {
	// Heartbeat extends the lease of a running task held by runnerID on
	// attempt attempt, and returns its new expiry. A task that runner no
	// longer holds (reclaimed, settled, claimed again) gives ErrConflict:
	// the runner lost it, and its settlement will be refused.
	Heartbeat(ctx context.Context, taskID, runnerID string, attempt int) (time.Time, error)
	// ReclaimExpired is the boot sweep for many nodes: every running task
	// whose lease expired before now (a zero now: the store's clock) is
	// settled as ReclaimRunning settles one. Any node may call it at any
	// time; it returns how many tasks it reclaimed.
	ReclaimExpired(ctx context.Context, now time.Time) (int, error)
	// LeaseTTL is how long a claim holds its task without a heartbeat.
	LeaseTTL() time.Duration
}
