package storecore

import (
	"context"
	"errors"
	"fmt"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// ErrNoCheckpointFile: the store was opened without a checkpoint file.
var ErrNoCheckpointFile = errors.New("this store keeps no head checkpoint (Options.CheckpointFile)")

// Anchoring is host.Anchoring over a store's evidence.Anchor (nil: the
// store keeps no head checkpoint). State reads what evidence.Anchor.Open
// needs of the database (which key the database records as anchoring the
// chain differs: one row per node key on PostgreSQL, the newest row on
// SQLite); Append is the store's AppendEvent.
type Anchoring struct {
	Anchor *evidence.Anchor
	State  func(ctx context.Context) (evidence.OpenState, error)
	Append func(ctx context.Context, e host.Event) (*host.Event, error)
}

// Open checks the evidence anchor as the store opens (refusing a lost one
// unless reanchor) and anchors a chain never anchored.
func (a Anchoring) Open(ctx context.Context, reanchor bool) error {
	st, err := a.State(ctx)
	if err != nil {
		return fmt.Errorf("read the evidence anchor: %w", err)
	}
	return a.Anchor.Open(st, reanchor)
}

// AnchorState implements host.Anchoring.
func (a Anchoring) AnchorState(ctx context.Context) (*host.AnchorState, error) {
	if a.Anchor == nil {
		return nil, host.Wrap("anchor state", "", ErrNoCheckpointFile)
	}
	st, err := a.State(ctx)
	if err != nil {
		return nil, host.Wrap("anchor state", "", err)
	}
	return a.Anchor.State(st), nil
}

// Reanchor implements host.Anchoring.
func (a Anchoring) Reanchor(ctx context.Context, e host.Event) (*host.Event, error) {
	if a.Anchor == nil {
		return nil, host.Wrap("reanchor", "", ErrNoCheckpointFile)
	}
	return a.Anchor.Reanchor(ctx, e, a.Append)
}
