package storecore

import (
	"context"
	"fmt"
	"time"

	"github.com/packrun/packrun/host"
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
