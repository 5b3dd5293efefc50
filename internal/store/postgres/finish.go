package postgres

import (
	"context"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// EventTaskSettleRefused: see storecore.EventTaskSettleRefused.
const EventTaskSettleRefused = storecore.EventTaskSettleRefused

// Finish implements host.Queue (storecore.Queue.Finish), fenced: the task
// must still be running on the caller's claim. Unlike on
// internal/store/sqlite a claim holds a lease: if the caller's claim was
// taken from it (its lease reclaimed, the task claimed again) the attempt
// it brought in Record is recorded anyway, followed by
// EventTaskSettleRefused: a node paused past its lease cannot settle the
// task another node has since taken, and what it did is still evidence.
func (s *Store) Finish(ctx context.Context, taskID string, in host.FinishInput) (*host.TaskRecord, error) {
	return s.queue().Finish(ctx, taskID, in)
}
