package host

import "time"

// Observer watches what a host does, for metrics and logs. Its methods are
// called on the goroutine doing the work, so they must return quickly and
// must not block; internal/observe implements it. Stats are passed by value
// and carry no tenant: tenants never become metric labels.
type Observer interface {
	// AttemptDone is called after every attempt the dispatcher ran, queued
	// or invoked directly.
	AttemptDone(AttemptStats)
	// TaskStarted is called when a claimed task starts; TaskFinished once
	// it is settled (or settling it failed).
	TaskStarted(TaskStats)
	TaskFinished(TaskStats)
	// DispatchLock is called when the dispatcher finds the dispatch lock
	// held by another (held false, once while it waits), takes it (true),
	// loses it or regains it. On a store with leases, where every node
	// dispatches, the lock only elects the node running the singleton
	// chores: held says whether this node is that one.
	DispatchLock(held bool)
	// WriterCommit is called after each group commit of the store's
	// single writer, with the operations it carried and how long the
	// transaction took (not counting the WAL sync).
	WriterCommit(ops int, took time.Duration)
}

// AttemptStats describes one attempt.
type AttemptStats struct {
	// Pack is the pack's name ("" for a bare module), without its version
	// so that upgrades do not multiply metric series.
	Pack     string
	Outcome  string // completed, failed, suspended
	Duration time.Duration
	// Breaches are the kinds of the attempt's cap.breached events
	// (abi.CapTime...); nil when no limit was hit.
	Breaches []string
}

// TaskStats describes a claimed task.
type TaskStats struct {
	TaskID   string
	TaskType string
	Pack     string // the pack its task type routes to; "" when unresolved
	Attempt  int
	// Lag is how long the task waited between becoming available and
	// being claimed (TaskStarted only).
	Lag time.Duration
	// Outcome is the attempt's outcome, or "error" when its node could not
	// be started; Status is the task's status after settling; Duration is
	// from start to settled (TaskFinished only).
	Outcome  string
	Status   TaskStatus
	Duration time.Duration
}
