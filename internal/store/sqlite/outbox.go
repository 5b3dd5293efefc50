package sqlite

import (
	"context"
	"encoding/json"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// queueMessages puts a completed task's external messages in the outbox,
// pending.
func queueMessages(tx *wtx, t *host.TaskRecord, attemptID string, msgs []json.RawMessage, now time.Time) error {
	for _, m := range msgs {
		if _, err := tx.Exec(`INSERT INTO outbox_messages (message_id, task_id, attempt_id, tenant, message, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			host.NewID("msg"), t.TaskID, attemptID, t.Tenant, string(evidence.CompactJSON(m)), host.OutboxPending, ts(now)); err != nil {
			return err
		}
	}
	return nil
}

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
