package sqlite

import (
	"context"
	"encoding/json"

	"github.com/packrun/packrun/host"
)

// Resume implements host.Queue (storecore.Queue.Resume).
func (s *Store) Resume(ctx context.Context, taskID string, value json.RawMessage, by string) (*host.TaskRecord, error) {
	return s.queue().Resume(ctx, taskID, value, by)
}

// Retry implements host.Queue (storecore.Queue.Retry).
func (s *Store) Retry(ctx context.Context, taskID string, by string) (*host.TaskRecord, error) {
	return s.queue().Retry(ctx, taskID, by)
}
