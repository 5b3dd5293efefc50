package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

// The operator's controls (Cancel, Resume, Retry) are storecore's
// (controls.go).

// Cancel implements host.Queue.
func (s *Store) Cancel(ctx context.Context, taskID string) (*host.TaskRecord, error) {
	const op = "cancel"
	return s.control(ctx, op, taskID, func(x coreTx) (*host.TaskRecord, error) {
		return storecore.Cancel(ctx, x, op, taskID, s.now())
	})
}

// Resume implements host.Queue.
func (s *Store) Resume(ctx context.Context, taskID string, value json.RawMessage, by string) (*host.TaskRecord, error) {
	const op = "resume"
	value, err := storecore.ResumeValue(op, value)
	if err != nil {
		return nil, err
	}
	return s.control(ctx, op, taskID, func(x coreTx) (*host.TaskRecord, error) {
		return storecore.Resume(ctx, x, op, taskID, value, by, s.now())
	})
}

// Retry implements host.Queue.
func (s *Store) Retry(ctx context.Context, taskID string, by string) (*host.TaskRecord, error) {
	const op = "retry"
	return s.control(ctx, op, taskID, func(x coreTx) (*host.TaskRecord, error) {
		return storecore.Retry(ctx, x, op, taskID, by, s.now())
	})
}

// control runs an operator's control in one transaction.
func (s *Store) control(ctx context.Context, op, taskID string, fn func(coreTx) (*host.TaskRecord, error)) (*host.TaskRecord, error) {
	var out *host.TaskRecord
	err := s.write(ctx, func(x *tx) error {
		var err error
		out, err = fn(coreTx{x})
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, taskID, err)
	}
	return out, nil
}

// queueMessages puts a completed task's external messages in the outbox,
// pending.
func (x *tx) queueMessages(ctx context.Context, t *host.TaskRecord, attemptID string, msgs []json.RawMessage, now time.Time) error {
	for _, m := range msgs {
		if _, err := x.Exec(ctx, `INSERT INTO outbox_messages (message_id, task_id, attempt_id, tenant, message, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			host.NewID("msg"), t.TaskID, attemptID, t.Tenant, string(evidence.CompactJSON(m)), host.OutboxPending, ts(now)); err != nil {
			return err
		}
	}
	return nil
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
