package storecore

import (
	"context"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// ErrAttemptExists is what a driver's SettleTx.RecordAttempt returns when
// the attempt id is taken (the unique index refused the insert): the
// operation is undone, and SameAttempt decides.
var ErrAttemptExists = errors.New("attempt already recorded")

// Queue is a driver's store as the queue's operations written once see
// it: its write transaction, its reads and how it prepares an attempt's
// record (the evidence encoding, which stays the driver's).
type Queue struct {
	// Write runs fn in one write transaction (SQLite's writer may run it
	// more than once), committed if fn returns nil.
	Write func(ctx context.Context, fn func(SettleTx) error) error
	Read  Querier
	Now   func() time.Time
	// Prepare normalizes, encodes and hashes an attempt's record (for
	// SettleTx.RecordAttempt); Stored is told its values were stored,
	// once the transaction that recorded it committed.
	Prepare func(a *host.Attempt) (any, error)
	Stored  func(prepared any)
}

// Enqueue implements host.Queue: an intent's workflow_ref must name a
// record of the tenant (CheckWorkflowRef).
func (q Queue) Enqueue(ctx context.Context, intent host.TaskIntent, opts host.EnqueueOptions) (*host.TaskRecord, error) {
	const op = "enqueue"
	t, err := NewTask(op, &intent, opts.MaxAttempts, q.Now())
	if err != nil {
		return nil, err
	}
	t.Tenant = host.DefaultTenant
	if opts.Tenant != "" {
		if err := host.CheckTenant(op, opts.Tenant); err != nil {
			return nil, err
		}
		t.Tenant = opts.Tenant
	}
	au := host.AuditFor(ctx, host.AuditTask)
	var auData *EventData
	if au != nil {
		auData = StringsData(au.Data) // before the writer is taken
	}
	if err := q.Write(ctx, func(tx SettleTx) error {
		if t.WorkflowRef != nil {
			if err := CheckWorkflowRef(ctx, tx, op, t.Tenant, t.WorkflowRef); err != nil {
				return err
			}
		}
		if err := InsertTask(ctx, tx, t, ""); err != nil {
			return err
		}
		if au != nil {
			return appendAudit(tx, au, auData, t.TaskID, "")
		}
		return nil
	}); err != nil {
		return nil, host.Wrap(op, intent.TaskType, err)
	}
	if au != nil {
		au.MarkWritten()
	}
	return t, nil
}

// Finish implements host.Queue: Settle, fenced, in one write transaction.
// A Record recorded before (a retried call) settles with the recorded
// attempt if it is the same one (SameAttempt).
func (q Queue) Finish(ctx context.Context, taskID string, in host.FinishInput) (*host.TaskRecord, error) {
	const op = "finish"
	f, err := CheckFinish(op, taskID, in, q.Prepare)
	if err != nil {
		return nil, err
	}
	var out *host.TaskRecord
	var fenced error
	err = q.Write(ctx, func(tx SettleTx) error {
		var err error
		out, fenced, err = Settle(ctx, tx, op, f)
		return err
	})
	if errors.Is(err, ErrAttemptExists) {
		if err := SameAttempt(ctx, q.Read, in.Record); err != nil {
			return nil, host.Wrap(op, taskID, err)
		}
		in.Record = nil
		in.AttemptID = f.AttemptID
		return q.Finish(ctx, taskID, in)
	}
	if err == nil {
		err = fenced
	}
	if err != nil {
		return nil, host.Wrap(op, taskID, err)
	}
	if f.Prepared != nil {
		q.Stored(f.Prepared)
	}
	return out, nil
}

// RecordAttempt implements host.Evidence: the attempt, and the audit
// event that rides with it, in one write transaction; the same content
// recorded again is a no-op (SameAttempt).
func (q Queue) RecordAttempt(ctx context.Context, a *host.Attempt) error {
	const op = "record attempt"
	prepared, err := q.Prepare(a)
	if err != nil {
		return err
	}
	au := host.AuditFor(ctx, host.AuditAttempt)
	var auData *EventData
	if au != nil {
		auData = StringsData(au.Data) // before the writer is taken
	}
	err = q.Write(ctx, func(tx SettleTx) error {
		if err := tx.RecordAttempt(ctx, prepared); err != nil {
			return err
		}
		if au != nil {
			return appendAudit(tx, au, auData, a.TaskID, a.AttemptID)
		}
		return nil
	})
	if err == nil {
		q.Stored(prepared)
		if au != nil {
			au.MarkWritten()
		}
	}
	if errors.Is(err, ErrAttemptExists) {
		err = SameAttempt(ctx, q.Read, a)
	}
	return host.Wrap(op, a.AttemptID, err)
}

// Cancel implements host.Queue (CancelTask).
func (q Queue) Cancel(ctx context.Context, taskID string) (*host.TaskRecord, error) {
	const op = "cancel"
	var out *host.TaskRecord
	err := q.Write(ctx, func(tx SettleTx) error {
		var err error
		out, err = CancelTask(ctx, tx, op, taskID)
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, taskID, err)
	}
	return out, nil
}

// SameAttempt decides a record of an attempt id that is already taken:
// the same content recorded again is a no-op (a's EventSeq set),
// anything else a conflict.
func SameAttempt(ctx context.Context, q Querier, a *host.Attempt) error {
	var rec []byte
	var seq int64
	if err := q.QueryRow(ctx, `SELECT record, seq FROM attempt_records WHERE attempt_id = $1`, a.AttemptID).Scan(&rec, &seq); err != nil {
		return err
	}
	if len(rec) == 0 || rec[0] == evidence.RecordV1 || evidence.HashRecord(rec) != a.ContentHash {
		return host.Errorf("record attempt", a.AttemptID, host.ErrConflict, "already recorded with different content; attempts are immutable")
	}
	a.EventSeq = max(seq, 0) // 0: pending, not linked yet (Dialect.Pending)
	return nil
}

// ScanTaskCounts reads the rows of a `SELECT status, count(*) FROM tasks
// GROUP BY status` (host.Queue.CountTasks).
func ScanTaskCounts(rows UsageRows) (map[host.TaskStatus]int, error) {
	out := map[host.TaskStatus]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[host.TaskStatus(st)] = n
	}
	return out, rows.Err()
}
