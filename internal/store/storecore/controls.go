package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// CancelTask cancels a task: a pending, retryable or blocked one at once
// (operator_canceled, task_finished), a running one by asking its runner
// (cancel_requested, task_cancel_requested; Settle cancels it); it
// returns the task as it is then.
func CancelTask(ctx context.Context, tx SettleTx, op, taskID string) (*host.TaskRecord, error) {
	now := tx.Now()
	t, err := tx.LockTask(ctx, op, taskID, nil)
	if err != nil {
		return nil, err
	}
	switch t.Status {
	case host.TaskPending, host.TaskRetryableFailure, host.TaskBlocked:
		if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'operator_canceled', last_error = 'canceled by the operator', finished_at = $1, updated_at = $1 WHERE task_id = $2`,
			host.FormatTime(now), taskID); err != nil {
			return nil, err
		}
		if err := tx.Event(host.EventTaskFinished, taskID, "", map[string]any{"status": host.TaskOperatorCanceled, "from": t.Status}); err != nil {
			return nil, err
		}
	case host.TaskRunning:
		if !t.CancelRequested {
			if _, err := tx.Exec(ctx, `UPDATE tasks SET cancel_requested = `+tx.Dialect().True+`, updated_at = $1 WHERE task_id = $2`, host.FormatTime(now), taskID); err != nil {
				return nil, err
			}
			if err := tx.Event(host.EventTaskCancelRequested, taskID, "", map[string]any{"runner_id": t.RunnerID, "attempt": t.AttemptCount}); err != nil {
				return nil, err
			}
		}
	default:
		return nil, host.Errorf(op, taskID, host.ErrConflict, "task is %s; only pending, retryable_failure, blocked or running tasks can be canceled", t.Status)
	}
	return tx.LockTask(ctx, op, taskID, nil)
}

// ReclaimLeaseExpired is the reason ReclaimTask is given for a task whose
// lease expired (the holder stopped heartbeating).
const ReclaimLeaseExpired = "lease_expired"

// ReclaimTask settles one interrupted running task t (its runner stopped:
// the boot sweep, or its lease expired at lease: reason
// ReclaimLeaseExpired): the interrupted attempt counts, so the task is
// retried if attempts are left, failed for good if not, canceled if the
// operator asked; with event boot_sweep_reclaimed.
func ReclaimTask(ctx context.Context, tx SettleTx, t *host.TaskRecord, now time.Time, reason, lease string) error {
	status := host.TaskRetryableFailure
	msg := fmt.Sprintf("attempt %d was interrupted: runner %s stopped before finishing it", t.AttemptCount, t.RunnerID)
	if reason == ReclaimLeaseExpired {
		msg = fmt.Sprintf("attempt %d was interrupted: runner %s's lease expired at %s", t.AttemptCount, t.RunnerID, lease)
	}
	switch {
	case t.CancelRequested:
		status, msg = host.TaskOperatorCanceled, "canceled by the operator"
	case t.AttemptCount >= t.MaxAttempts:
		status = host.TaskPermanentFailure
		msg += fmt.Sprintf("; no attempts left (%d of %d)", t.AttemptCount, t.MaxAttempts)
	}
	var finished any
	avail := host.FormatTime(now)
	if status != host.TaskRetryableFailure {
		finished, avail = host.FormatTime(now), host.FormatTime(t.AvailableAt)
	}
	if _, err := tx.Exec(ctx, reclaimUpdate[tx.Leases()], string(status), msg, avail, finished, host.FormatTime(now), t.TaskID); err != nil {
		return err
	}
	d := map[string]any{"runner_id": t.RunnerID, "attempt": t.AttemptCount, "status": status}
	if reason == ReclaimLeaseExpired {
		d["reason"], d["lease_expires_at"] = reason, lease
	}
	return tx.Event(host.EventBootSweepReclaimed, t.TaskID, "", d)
}

// reclaimUpdate is ReclaimTask's UPDATE, by SettleTx.Leases.
var reclaimUpdate = map[bool]string{
	false: `UPDATE tasks SET status = $1, last_error = $2, available_at = $3, finished_at = $4, updated_at = $5 WHERE task_id = $6`,
	true: `UPDATE tasks SET status = $1, last_error = $2, available_at = $3, finished_at = $4, updated_at = $5,
		lease_expires_at = NULL WHERE task_id = $6`,
}

// Resume implements host.Queue: a blocked task whose last attempt
// suspended goes back to pending with value added to its resume values.
func (q Queue) Resume(ctx context.Context, taskID string, value json.RawMessage, by string) (*host.TaskRecord, error) {
	const op = "resume"
	if len(value) == 0 || !json.Valid(value) {
		return nil, host.Invalid(op, "value", "must be a JSON value (null included)")
	}
	value = evidence.CompactJSON(value)
	return q.requeue(ctx, op, taskID, host.EventTaskResumed, func(tx SettleTx, t *host.TaskRecord) (*EventData, error) {
		if t.Status != host.TaskBlocked {
			return nil, host.Errorf(op, taskID, host.ErrConflict, "task is %s; only a blocked task whose node suspended can be resumed", t.Status)
		}
		suspended, err := lastAttemptSuspended(ctx, tx, t)
		if err != nil {
			return nil, err
		}
		if !suspended {
			return nil, host.Errorf(op, taskID, host.ErrConflict, "task is blocked but its last attempt did not suspend; retry it instead")
		}
		if err := AddResumeValue(op, t, value); err != nil {
			return nil, err
		}
		return (&EventData{}).Str("by", by).Int("max_attempts", int64(t.MaxAttempts)).Int("resume_values", int64(len(t.ResumeValues))).Value("value", value), nil
	})
}

// Retry implements host.Queue.
func (q Queue) Retry(ctx context.Context, taskID string, by string) (*host.TaskRecord, error) {
	const op = "retry"
	return q.requeue(ctx, op, taskID, host.EventTaskRetryRequested, func(_ SettleTx, t *host.TaskRecord) (*EventData, error) {
		if !t.Status.Retriable() {
			return nil, host.Errorf(op, taskID, host.ErrConflict, "task is %s; only a permanent_failure, retryable_failure or blocked task can be retried", t.Status)
		}
		return (&EventData{}).Str("by", by).Str("from", string(t.Status)).Int("max_attempts", int64(t.MaxAttempts)), nil
	})
}

// requeue is Resume and Retry: check (which may change the record's
// resume values, and returns the event's data) decides, then the task
// goes back to pending, available now, with one more attempt allowed if
// it had none left.
func (q Queue) requeue(ctx context.Context, op, taskID, event string, check func(SettleTx, *host.TaskRecord) (*EventData, error)) (*host.TaskRecord, error) {
	if err := host.CheckID(op, "task_id", taskID); err != nil {
		return nil, err
	}
	var out *host.TaskRecord
	err := q.Write(ctx, func(tx SettleTx) error {
		now := tx.Now()
		t, err := tx.LockTask(ctx, op, taskID, nil)
		if err != nil {
			return err
		}
		if t.AttemptCount >= t.MaxAttempts {
			t.MaxAttempts = t.AttemptCount + 1
		}
		d, err := check(tx, t)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'pending', available_at = $1, updated_at = $1, finished_at = NULL,
			max_attempts = $2, resume_values = $3 WHERE task_id = $4`,
			host.FormatTime(now), t.MaxAttempts, JSONOrEmpty(t.ResumeValues, len(t.ResumeValues) == 0), taskID); err != nil {
			return err
		}
		if err := AppendEventData(tx, event, taskID, "", d); err != nil {
			return err
		}
		out, err = tx.LockTask(ctx, op, taskID, nil)
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, taskID, err)
	}
	return out, nil
}

// lastAttemptSuspended reports whether t's latest attempt suspended.
func lastAttemptSuspended(ctx context.Context, tx SettleTx, t *host.TaskRecord) (bool, error) {
	var rec []byte
	err := tx.QueryRow(ctx, `SELECT record FROM attempt_records WHERE task_id = $1 AND attempt = $2 ORDER BY seq DESC LIMIT 1`, t.TaskID, t.AttemptCount).Scan(&rec)
	if errors.Is(err, ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	a, _, err := evidence.DecodeRecord(rec)
	if err != nil {
		return false, err
	}
	return a.Outcome == abi.Suspended, nil
}
