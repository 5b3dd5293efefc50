package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// The operator's controls of host.Queue (Cancel, Resume, Retry) written
// once against ControlTx.

// ControlTx is a Tx that reads a task record by id.
type ControlTx interface {
	Tx
	// LoadTask reads the task (ErrNotFound naming op if none); lock
	// locks its row for the rest of the transaction where writers run
	// at once (PostgreSQL).
	LoadTask(ctx context.Context, op, taskID string, lock bool) (*host.TaskRecord, error)
}

// Cancel cancels a task not started (it finishes operator_canceled) or
// asks the runner of a running one to stop, and returns the record.
func Cancel(ctx context.Context, tx ControlTx, op, taskID string, now time.Time) (*host.TaskRecord, error) {
	t, err := tx.LoadTask(ctx, op, taskID, true)
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
	return tx.LoadTask(ctx, op, taskID, false)
}

// ResumeValue checks and compacts the value a Resume hands the task.
func ResumeValue(op string, value json.RawMessage) (json.RawMessage, error) {
	if len(value) == 0 || !json.Valid(value) {
		return nil, host.Invalid(op, "value", "must be a JSON value (null included)")
	}
	return evidence.CompactJSON(value), nil
}

// Resume requeues a blocked task whose last attempt suspended, with value
// (checked by ResumeValue) added to its resume values.
func Resume(ctx context.Context, tx ControlTx, op, taskID string, value json.RawMessage, by string, now time.Time) (*host.TaskRecord, error) {
	return requeue(ctx, tx, op, taskID, host.EventTaskResumed, now, func(t *host.TaskRecord) (map[string]any, error) {
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
		return map[string]any{"by": by, "max_attempts": t.MaxAttempts, "resume_values": len(t.ResumeValues), "value": value}, nil
	})
}

// Retry requeues a failed or blocked task.
func Retry(ctx context.Context, tx ControlTx, op, taskID, by string, now time.Time) (*host.TaskRecord, error) {
	return requeue(ctx, tx, op, taskID, host.EventTaskRetryRequested, now, func(t *host.TaskRecord) (map[string]any, error) {
		if !t.Status.Retriable() {
			return nil, host.Errorf(op, taskID, host.ErrConflict, "task is %s; only a permanent_failure, retryable_failure or blocked task can be retried", t.Status)
		}
		return map[string]any{"by": by, "from": t.Status, "max_attempts": t.MaxAttempts}, nil
	})
}

// requeue is Resume and Retry: check (which may change the record's
// resume values, and returns the event's data) decides, then the task
// goes back to pending, available now, with one more attempt allowed if
// it had none left.
func requeue(ctx context.Context, tx ControlTx, op, taskID, event string, now time.Time, check func(*host.TaskRecord) (map[string]any, error)) (*host.TaskRecord, error) {
	if err := host.CheckID(op, "task_id", taskID); err != nil {
		return nil, err
	}
	t, err := tx.LoadTask(ctx, op, taskID, true)
	if err != nil {
		return nil, err
	}
	if t.AttemptCount >= t.MaxAttempts {
		t.MaxAttempts = t.AttemptCount + 1
	}
	d, err := check(t)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'pending', available_at = $1, updated_at = $1, finished_at = NULL,
		max_attempts = $2, resume_values = $3 WHERE task_id = $4`,
		host.FormatTime(now), t.MaxAttempts, JSONOrEmpty(t.ResumeValues, len(t.ResumeValues) == 0), taskID); err != nil {
		return nil, err
	}
	if err := tx.Event(event, taskID, "", d); err != nil {
		return nil, err
	}
	return tx.LoadTask(ctx, op, taskID, false)
}

// lastAttemptSuspended reports whether t's latest attempt suspended.
func lastAttemptSuspended(ctx context.Context, tx Tx, t *host.TaskRecord) (bool, error) {
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
