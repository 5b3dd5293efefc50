package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

// Resume implements host.Queue.
func (s *Store) Resume(ctx context.Context, taskID string, value json.RawMessage, by string) (*host.TaskRecord, error) {
	const op = "resume"
	if len(value) == 0 || !json.Valid(value) {
		return nil, host.Invalid(op, "value", "must be a JSON value (null included)")
	}
	value = evidence.CompactJSON(value)
	return s.requeue(ctx, op, taskID, func(tx *wtx, t *host.TaskRecord) (*evData, error) {
		if t.Status != host.TaskBlocked {
			return nil, host.Errorf(op, taskID, host.ErrConflict, "task is %s; only a blocked task whose node suspended can be resumed", t.Status)
		}
		suspended, err := lastAttemptSuspended(tx, t)
		if err != nil {
			return nil, err
		}
		if !suspended {
			return nil, host.Errorf(op, taskID, host.ErrConflict, "task is blocked but its last attempt did not suspend; retry it instead")
		}
		if err := storecore.AddResumeValue(op, t, value); err != nil {
			return nil, err
		}
		return (&evData{}).str("by", by).int("max_attempts", int64(t.MaxAttempts)).int("resume_values", int64(len(t.ResumeValues))).value("value", value), nil
	}, host.EventTaskResumed)
}

// Retry implements host.Queue.
func (s *Store) Retry(ctx context.Context, taskID string, by string) (*host.TaskRecord, error) {
	const op = "retry"
	return s.requeue(ctx, op, taskID, func(tx *wtx, t *host.TaskRecord) (*evData, error) {
		if !t.Status.Retriable() {
			return nil, host.Errorf(op, taskID, host.ErrConflict, "task is %s; only a permanent_failure, retryable_failure or blocked task can be retried", t.Status)
		}
		return (&evData{}).str("by", by).str("from", string(t.Status)).int("max_attempts", int64(t.MaxAttempts)), nil
	}, host.EventTaskRetryRequested)
}

// requeue is Resume and Retry: check (which may change the record's
// resume values, and returns the event's data) decides, then the task goes
// back to pending, available now, with one more attempt allowed if it had
// none left.
func (s *Store) requeue(ctx context.Context, op, taskID string, check func(tx *wtx, t *host.TaskRecord) (*evData, error), event string) (*host.TaskRecord, error) {
	if err := host.CheckID(op, "task_id", taskID); err != nil {
		return nil, err
	}
	var out *host.TaskRecord
	err := s.w.do(ctx, func(tx *wtx) error {
		now := s.now()
		t, err := s.loadTask(txq{tx}, ctx, op, taskID)
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
		if _, err := tx.Exec(`UPDATE OR FAIL tasks SET status = 'pending', available_at = ?1, updated_at = ?1, finished_at = NULL,
			max_attempts = ?2, resume_values = ?3 WHERE task_id = ?4`,
			ts(now), t.MaxAttempts, storecore.JSONOrEmpty(t.ResumeValues, len(t.ResumeValues) == 0), taskID); err != nil {
			return err
		}
		if _, err := s.eventData(tx, event, taskID, "", d); err != nil {
			return err
		}
		out, err = s.loadTask(txq{tx}, ctx, op, taskID)
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, taskID, err)
	}
	return out, nil
}

// lastAttemptSuspended reports whether t's latest attempt suspended.
func lastAttemptSuspended(tx *wtx, t *host.TaskRecord) (bool, error) {
	var rec []byte
	err := tx.QueryRow(`SELECT record FROM attempt_records WHERE task_id = ? AND attempt = ? ORDER BY seq DESC LIMIT 1`, t.TaskID, t.AttemptCount).Scan(&rec)
	if errors.Is(err, sql.ErrNoRows) {
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
