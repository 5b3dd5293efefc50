package dispatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/packrun/packrun/host"
)

// runShared is Run on a store that several nodes share (the Backend
// implements host.Leases): every node claims, without the dispatch lock,
// each claim holding its task under a lease. The dispatcher
//
//   - reclaims the tasks whose lease expired (their node died or stalled),
//     and has the host reclaim its own such work (Config.Reclaim), at
//     start and then every LeaseTTL/2, as any node may;
//   - renews the lease of each task it runs every LeaseTTL/3 (heartbeats);
//   - runs the singleton chores (Config.Chores) only while it holds the
//     dispatch lock, which it tries to take without waiting, and again
//     every LockTTL in the background. The Observer's DispatchLock says
//     whether it holds it.
//
// It is dispatching (HoldsLock) from the boot sweep until it returns.
func (d *Dispatcher) runShared(ctx context.Context, l host.Leases) error {
	if swept, err := d.bootSweep(ctx, l.ReclaimExpired, "boot sweep reclaimed tasks whose lease expired"); !swept {
		return err
	}
	if d.cfg.Reclaim != nil {
		d.cfg.Reclaim(ctx, false)
	}
	d.haveLock.Store(true)
	defer d.haveLock.Store(false)

	bg, stop := context.WithCancel(context.Background())
	var bgDone sync.WaitGroup
	ch := &choreLock{d: d}
	ch.try(ctx)
	bgDone.Add(4)
	go func() { defer bgDone.Done(); ch.keepTrying(ctx, bg) }()
	go func() { defer bgDone.Done(); d.chores(bg, ch.held.Load) }()
	go func() { defer bgDone.Done(); d.sweepExpired(bg, l) }()
	go func() { defer bgDone.Done(); d.heartbeats(bg, l) }()

	d.runWorkers(ctx)
	stop()
	bgDone.Wait()
	ch.release()
	return nil
}

// choreLock is the dispatch lock as the election of the node that runs the
// singleton chores, on a store with leases.
type choreLock struct {
	d    *Dispatcher
	held atomic.Bool
}

// try takes or renews the lock without waiting, and says when that
// changes (the log, the Observer).
func (c *choreLock) try(ctx context.Context) {
	d := c.d
	_, err := d.cfg.Backend.AcquireDispatchLock(ctx, d.cfg.RunnerID, d.cfg.LockTTL)
	if ctx.Err() != nil {
		return
	}
	switch {
	case err == nil && !c.held.Load():
		c.held.Store(true)
		d.cfg.Log("dispatch lock taken: this node runs the singleton chores")
		d.cfg.Observer.DispatchLock(true)
	case err != nil && c.held.Load():
		c.held.Store(false)
		d.cfg.Log("lost the dispatch lock: another node runs the singleton chores", "error", err)
		d.cfg.Observer.DispatchLock(false)
	case err != nil && !errors.Is(err, host.ErrLocked) && !host.Retryable(err):
		d.cfg.Log("dispatch lock", "error", err)
	}
}

// keepTrying renews the lock every LockTTL/3 while it is held, and tries
// to take it every LockTTL while it is not, until stop is done.
func (c *choreLock) keepTrying(ctx, stop context.Context) {
	for {
		wait := c.d.cfg.LockTTL
		if c.held.Load() {
			wait /= 3
		}
		select {
		case <-stop.Done():
			return
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		c.try(ctx)
	}
}

// release gives the lock up, if held.
func (c *choreLock) release() {
	if c.held.Swap(false) {
		c.d.releaseLock(c.d.cfg.Backend)
		c.d.cfg.Observer.DispatchLock(false)
	}
}

// releaseLock gives the dispatch lock up. A failed release is logged: the
// lock then expires after LockTTL (it is short and renewed), so another
// node only waits longer, but an operator should know why it waited.
func (d *Dispatcher) releaseLock(b host.Backend) {
	if err := b.ReleaseDispatchLock(context.Background(), d.cfg.RunnerID); err != nil {
		d.cfg.Log("releasing the dispatch lock failed; it expires on its own", "error", err)
	}
}

// sweepExpired reclaims the tasks whose lease expired, and has the host
// reclaim its own expired work, every LeaseTTL/2 until ctx is done.
func (d *Dispatcher) sweepExpired(ctx context.Context, l host.Leases) {
	failing := false
	every(ctx, l.LeaseTTL()/2, func() {
		if d.cfg.Reclaim != nil {
			d.cfg.Reclaim(ctx, false)
		}
		n, err := l.ReclaimExpired(ctx, time.Now())
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				d.cfg.Log("reclaiming expired leases failed; trying again", "error", err)
			}
			failing = true
			return
		case n > 0:
			d.cfg.Log("reclaimed tasks whose lease expired", "count", n)
			d.Wake()
		}
		failing = false
	})
}

// every calls fn every period (at least a millisecond) until ctx is done.
func every(ctx context.Context, period time.Duration, fn func()) {
	t := time.NewTicker(max(period, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// lease is a task this node runs under a lease.
type lease struct {
	taskID  string
	attempt int
}

// leaseSet is the leases this node holds (the tasks it runs).
type leaseSet struct {
	mu   sync.Mutex
	held map[lease]struct{}
}

// hold notes that this node runs t, for heartbeats, if the store has
// leases; the returned func lets it go (calling it again does nothing).
func (d *Dispatcher) hold(t *host.TaskRecord) func() {
	if _, ok := d.cfg.Backend.(host.Leases); !ok {
		return func() {}
	}
	k := lease{t.TaskID, t.AttemptCount}
	d.leases.mu.Lock()
	if d.leases.held == nil {
		d.leases.held = map[lease]struct{}{}
	}
	d.leases.held[k] = struct{}{}
	d.leases.mu.Unlock()
	return func() {
		d.leases.mu.Lock()
		delete(d.leases.held, k)
		d.leases.mu.Unlock()
	}
}

// heartbeats renews the lease of every task this node runs every
// LeaseTTL/3 until ctx is done. A task whose lease was lost (another node
// reclaimed it while this one stalled) is said once and renewed no more:
// its attempt runs out, and its settlement will be refused (the attempt
// is kept as evidence).
func (d *Dispatcher) heartbeats(ctx context.Context, l host.Leases) {
	failing := false
	every(ctx, l.LeaseTTL()/3, func() {
		d.leases.mu.Lock()
		held := make([]lease, 0, len(d.leases.held))
		for k := range d.leases.held {
			held = append(held, k)
		}
		d.leases.mu.Unlock()
		for _, k := range held {
			if ctx.Err() != nil {
				return
			}
			failing = d.renew(ctx, l, k, failing)
		}
	})
}

// renew renews one lease; failing says whether the last renewal failed
// (said once until one works), and renew returns whether this one did.
func (d *Dispatcher) renew(ctx context.Context, l host.Leases, k lease, failing bool) bool {
	_, err := l.Heartbeat(ctx, k.taskID, d.cfg.RunnerID, k.attempt)
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, host.ErrConflict):
		// Unless the task was settled here meanwhile (its lease is let go
		// before its settlement starts).
		d.leases.mu.Lock()
		_, lost := d.leases.held[k]
		delete(d.leases.held, k)
		d.leases.mu.Unlock()
		if lost {
			d.cfg.Log("lost the lease of a running task: another node reclaimed it; its settlement will be refused", "task", k.taskID, "attempt", k.attempt)
		}
	case err != nil:
		if !failing {
			d.cfg.Log("renewing a lease failed; trying again", "task", k.taskID, "error", err)
		}
		return true
	}
	return false
}
