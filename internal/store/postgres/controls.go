package postgres

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
)

// Cancel implements host.Queue (storecore.Queue.Cancel).
func (s *Store) Cancel(ctx context.Context, taskID string) (*host.TaskRecord, error) {
	return s.queue().Cancel(ctx, taskID)
}

// Resume implements host.Queue (storecore.Queue.Resume).
func (s *Store) Resume(ctx context.Context, taskID string, value json.RawMessage, by string) (*host.TaskRecord, error) {
	return s.queue().Resume(ctx, taskID, value, by)
}

// Retry implements host.Queue (storecore.Queue.Retry).
func (s *Store) Retry(ctx context.Context, taskID string, by string) (*host.TaskRecord, error) {
	return s.queue().Retry(ctx, taskID, by)
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
