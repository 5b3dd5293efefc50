package sqlite

import (
	"context"
	"encoding/json"

	"github.com/packrun/packrun/host"
)

// Outbox implements host.Queue.
func (s *Store) Outbox(ctx context.Context, taskID string) ([]*host.OutboxMessage, error) {
	const op = "list outbox"
	rows, err := s.query(ctx, `SELECT message_id, task_id, attempt_id, tenant, message, status, created_at FROM outbox_messages WHERE task_id = ? ORDER BY seq`, taskID)
	if err != nil {
		return nil, host.Wrap(op, taskID, err)
	}
	defer rows.Close()
	var out []*host.OutboxMessage
	for rows.Next() {
		var m host.OutboxMessage
		var msg, created string
		if err := rows.Scan(&m.MessageID, &m.TaskID, &m.AttemptID, &m.Tenant, &msg, &m.Status, &created); err != nil {
			return nil, host.Wrap(op, taskID, err)
		}
		m.Message, m.CreatedAt = json.RawMessage(msg), parseTS(created)
		out = append(out, &m)
	}
	return out, host.Wrap(op, taskID, rows.Err())
}
