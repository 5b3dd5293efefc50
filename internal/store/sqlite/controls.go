package sqlite

import (
	"context"
	"encoding/json"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// The operator's controls (Cancel, Resume, Retry) are storecore's
// (controls.go), run in the writer's transaction (coreTx).

// Resume implements host.Queue.
func (s *Store) Resume(ctx context.Context, taskID string, value json.RawMessage, by string) (*host.TaskRecord, error) {
	const op = "resume"
	value, err := storecore.ResumeValue(op, value)
	if err != nil {
		return nil, err
	}
	return s.control(ctx, op, taskID, func(tx coreTx) (*host.TaskRecord, error) {
		return storecore.Resume(ctx, tx, op, taskID, value, by, s.now())
	})
}

// Retry implements host.Queue.
func (s *Store) Retry(ctx context.Context, taskID string, by string) (*host.TaskRecord, error) {
	const op = "retry"
	return s.control(ctx, op, taskID, func(tx coreTx) (*host.TaskRecord, error) {
		return storecore.Retry(ctx, tx, op, taskID, by, s.now())
	})
}

// Cancel implements host.Queue.
func (s *Store) Cancel(ctx context.Context, taskID string) (*host.TaskRecord, error) {
	const op = "cancel"
	return s.control(ctx, op, taskID, func(tx coreTx) (*host.TaskRecord, error) {
		return storecore.Cancel(ctx, tx, op, taskID, s.now())
	})
}

// control runs an operator's control in one write.
func (s *Store) control(ctx context.Context, op, taskID string, fn func(coreTx) (*host.TaskRecord, error)) (*host.TaskRecord, error) {
	var out *host.TaskRecord
	err := s.w.do(ctx, func(tx *wtx) error {
		var err error
		out, err = fn(coreTx{s, tx})
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, taskID, err)
	}
	return out, nil
}
