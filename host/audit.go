package host

import (
	"context"
	"sync/atomic"
)

// Audit is the audit record of one request (the API's api_call event),
// carried by the request's context down to the store, so that the write
// making the request's change appends it in the same transaction: one
// durable commit per request instead of two in a row, and no crash can
// leave the change without its record.
//
// Only the write named by Of takes it (RecordAttempt for AuditAttempt,
// Enqueue for AuditTask), once; the caller appends it separately when no
// such write took it (Written false): the change went another way, or
// failed.
type Audit struct {
	Type string            // the event type, api_call
	Data map[string]string // the event's data; "tenant" is its tenant
	Of   string            // AuditAttempt or AuditTask
	done atomic.Bool
}

// The writes an Audit may ride with.
const (
	AuditAttempt = "attempt" // RecordAttempt: the event names the attempt and its task
	AuditTask    = "task"    // Enqueue: the event names the task
)

type auditKey struct{}

// WithAudit returns ctx carrying a.
func WithAudit(ctx context.Context, a *Audit) context.Context {
	return context.WithValue(ctx, auditKey{}, a)
}

// AuditOf returns the audit ctx carries, nil if none.
func AuditOf(ctx context.Context) *Audit {
	a, _ := ctx.Value(auditKey{}).(*Audit)
	return a
}

// AuditFor returns the audit a write of kind of must append with its
// change: ctx's, if it is for that kind of write and not written yet.
func AuditFor(ctx context.Context, of string) *Audit {
	if a := AuditOf(ctx); a != nil && a.Of == of && !a.done.Load() {
		return a
	}
	return nil
}

// Written reports whether a store appended the audit with its change.
func (a *Audit) Written() bool { return a != nil && a.done.Load() }

// MarkWritten records that the audit was committed with its change: the
// store calls it once the transaction that appended it committed.
func (a *Audit) MarkWritten() { a.done.Store(true) }
