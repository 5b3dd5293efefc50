package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

// Cancel implements host.Queue (storecore.Queue.Cancel).
func (s *Store) Cancel(ctx context.Context, taskID string) (*host.TaskRecord, error) {
	return s.queue().Cancel(ctx, taskID)
}

// Resume implements host.Queue.
func (s *Store) Resume(ctx context.Context, taskID string, value json.RawMessage, by string) (*host.TaskRecord, error) {
	const op = "resume"
	if len(value) == 0 || !json.Valid(value) {
		return nil, host.Invalid(op, "value", "must be a JSON value (null included)")
	}
	value = evidence.CompactJSON(value)
	return s.requeue(ctx, op, taskID, host.EventTaskResumed, func(x *tx, t *host.TaskRecord) (map[string]any, error) {
		if t.Status != host.TaskBlocked {
			return nil, host.Errorf(op, taskID, host.ErrConflict, "task is %s; only a blocked task whose node suspended can be resumed", t.Status)
		}
		suspended, err := x.lastAttemptSuspended(ctx, t)
		if err != nil {
			return nil, err
		}
		if !suspended {
			return nil, host.Errorf(op, taskID, host.ErrConflict, "task is blocked but its last attempt did not suspend; retry it instead")
		}
		if err := storecore.AddResumeValue(op, t, value); err != nil {
			return nil, err
		}
		return map[string]any{"by": by, "max_attempts": t.MaxAttempts, "resume_values": len(t.ResumeValues), "value": value}, nil
	})
}

// Retry implements host.Queue.
func (s *Store) Retry(ctx context.Context, taskID string, by string) (*host.TaskRecord, error) {
	const op = "retry"
	return s.requeue(ctx, op, taskID, host.EventTaskRetryRequested, func(_ *tx, t *host.TaskRecord) (map[string]any, error) {
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
func (s *Store) requeue(ctx context.Context, op, taskID, event string, check func(*tx, *host.TaskRecord) (map[string]any, error)) (*host.TaskRecord, error) {
	if err := host.CheckID(op, "task_id", taskID); err != nil {
		return nil, err
	}
	var out *host.TaskRecord
	err := s.write(ctx, func(x *tx) error {
		now := s.now()
		t, err := loadTask(ctx, x, op, taskID, true)
		if err != nil {
			return err
		}
		if t.AttemptCount >= t.MaxAttempts {
			t.MaxAttempts = t.AttemptCount + 1
		}
		d, err := check(x, t)
		if err != nil {
			return err
		}
		if _, err := x.Exec(ctx, `UPDATE tasks SET status = 'pending', available_at = $1, updated_at = $1, finished_at = NULL,
			max_attempts = $2, resume_values = $3 WHERE task_id = $4`,
			ts(now), t.MaxAttempts, storecore.JSONOrEmpty(t.ResumeValues, len(t.ResumeValues) == 0), taskID); err != nil {
			return err
		}
		if _, err := x.event(event, taskID, "", d); err != nil {
			return err
		}
		out, err = loadTask(ctx, x, op, taskID, false)
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, taskID, err)
	}
	return out, nil
}

// lastAttemptSuspended reports whether t's latest attempt suspended.
func (x *tx) lastAttemptSuspended(ctx context.Context, t *host.TaskRecord) (bool, error) {
	var rec []byte
	err := x.QueryRow(ctx, `SELECT record FROM attempt_records WHERE task_id = $1 AND attempt = $2 ORDER BY seq DESC LIMIT 1`, t.TaskID, t.AttemptCount).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
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

// Outbox implements host.Queue.
func (s *Store) Outbox(ctx context.Context, taskID string) ([]*host.OutboxMessage, error) {
	const op = "list outbox"
	rows, err := s.pool.Query(ctx, `SELECT message_id, task_id, attempt_id, tenant, message, status, created_at FROM outbox_messages WHERE task_id = $1 ORDER BY seq`, taskID)
	if err != nil {
		return nil, host.Wrap(op, taskID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*host.OutboxMessage, error) {
		var m host.OutboxMessage
		var msg, created string
		if err := r.Scan(&m.MessageID, &m.TaskID, &m.AttemptID, &m.Tenant, &msg, &m.Status, &created); err != nil {
			return nil, err
		}
		m.Message, m.CreatedAt = json.RawMessage(msg), parseTS(created)
		return &m, nil
	})
	return out, host.Wrap(op, taskID, err)
}
