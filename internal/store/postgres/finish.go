package postgres

import (
	"context"
	"errors"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// EventTaskSettleRefused: see storecore.EventTaskSettleRefused.
const EventTaskSettleRefused = storecore.EventTaskSettleRefused

// Finish implements host.Queue: storecore.Settle, fenced (the task must
// still be running on the caller's claim). Unlike on internal/store/sqlite
// a claim holds a lease: if the caller's claim was taken from it (its
// lease reclaimed, the task claimed again) the attempt it brought in
// Record is recorded anyway, followed by EventTaskSettleRefused: a node
// paused past its lease cannot settle the task another node has since
// taken, and what it did is still evidence.
func (s *Store) Finish(ctx context.Context, taskID string, in host.FinishInput) (*host.TaskRecord, error) {
	const op = "finish"
	f, err := storecore.CheckFinish(op, taskID, in, func(a *host.Attempt) (any, error) { return s.prepareAttempt(a) })
	if err != nil {
		return nil, err
	}
	var out *host.TaskRecord
	var fenced error
	err = s.write(ctx, func(x *tx) error {
		var err error
		out, fenced, err = storecore.Settle(ctx, coreTx{x}, op, f)
		return err
	})
	if errors.Is(err, errAttemptExists) {
		// Recorded before (a retried call): settle with the recorded
		// one if it is the same attempt.
		if err := s.sameAttempt(ctx, in.Record); err != nil {
			return nil, host.Wrap(op, taskID, err)
		}
		in.Record = nil
		in.AttemptID = f.AttemptID
		return s.Finish(ctx, taskID, in)
	}
	if err == nil {
		err = fenced
	}
	if err != nil {
		return nil, host.Wrap(op, taskID, err)
	}
	if row, ok := f.Prepared.(*attemptRow); ok {
		s.values.Stored(row.values)
	}
	return out, nil
}
