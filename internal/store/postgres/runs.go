package postgres

import (
	"context"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// The openwop runs store is storecore's (storecore/runs.go): these run
// its rules in a write transaction (retried on deadlock or serialization failure), or read through the pool.

// PutOpenwopWorkflow implements host.Runs.
func (s *Store) PutOpenwopWorkflow(ctx context.Context, w *host.OpenwopWorkflow) error {
	c, def, err := storecore.OpenwopDefinition("put openwop workflow", w)
	if err != nil {
		return err
	}
	return s.write(ctx, func(x *tx) error {
		return storecore.PutOpenwopWorkflow(ctx, coreTx{x}, c, def, s.now())
	})
}

// OpenwopWorkflow implements host.Runs.
func (s *Store) OpenwopWorkflow(ctx context.Context, tenant, id string) (*host.OpenwopWorkflow, error) {
	return storecore.OpenwopWorkflow(ctx, corePool{s.pool}, tenant, id)
}

// OpenwopWorkflows implements host.Runs.
func (s *Store) OpenwopWorkflows(ctx context.Context, tenant string) ([]*host.OpenwopWorkflow, error) {
	return storecore.OpenwopWorkflows(ctx, corePool{s.pool}, tenant)
}

// CreateRun implements host.Runs.
func (s *Store) CreateRun(ctx context.Context, r *host.Run, evs []host.RunEvent) error {
	now := s.now()
	return s.write(ctx, func(x *tx) error {
		return storecore.CreateRun(ctx, coreTx{x}, r, evs, now)
	})
}

// CreateRunOnce implements host.Runs.
func (s *Store) CreateRunOnce(ctx context.Context, r *host.Run, evs []host.RunEvent, k host.RunIdempotency) (*host.Run, bool, error) {
	now := s.now()
	var out *host.Run
	var created bool
	err := s.write(ctx, func(x *tx) (err error) {
		out, created, err = storecore.CreateRunOnce(ctx, coreTx{x}, r, evs, k, now)
		return err
	})
	return out, created, err
}

// Run implements host.Runs.
func (s *Store) Run(ctx context.Context, tenant, runID string) (*host.Run, error) {
	return storecore.LoadRun(ctx, corePool{s.pool}, "", tenant, runID)
}

// AdvanceRun implements host.Runs.
func (s *Store) AdvanceRun(ctx context.Context, tenant, runID, holder, status string, rerr *host.RunError, evs []host.RunEvent) (*host.Run, error) {
	var out *host.Run
	err := s.write(ctx, func(x *tx) (err error) {
		out, err = storecore.AdvanceRun(ctx, coreTx{x}, tenant, runID, holder, status, rerr, evs, s.now())
		return err
	})
	return out, err
}

// RunEvents implements host.Runs.
func (s *Store) RunEvents(ctx context.Context, tenant, runID string) ([]host.RunEvent, error) {
	return storecore.RunEvents(ctx, corePool{s.pool}, tenant, runID)
}

// ClaimRuns implements host.Runs.
func (s *Store) ClaimRuns(ctx context.Context, holder string, expired, until time.Time) ([]*host.Run, error) {
	var out []*host.Run
	err := s.write(ctx, func(x *tx) (err error) {
		out, err = storecore.ClaimRuns(ctx, coreTx{x}, holder, expired, until)
		return err
	})
	return out, err
}

// RenewRuns implements host.Runs.
func (s *Store) RenewRuns(ctx context.Context, holder string, until time.Time) (int, error) {
	var n int
	err := s.write(ctx, func(x *tx) (err error) {
		n, err = storecore.RenewRuns(ctx, coreTx{x}, holder, until)
		return err
	})
	return n, err
}

// ResumeRun implements host.Runs.
func (s *Store) ResumeRun(ctx context.Context, tenant, runID, holder string, until time.Time, evs []host.RunEvent) (*host.Run, error) {
	var out *host.Run
	err := s.write(ctx, func(x *tx) (err error) {
		out, err = storecore.ResumeRun(ctx, coreTx{x}, tenant, runID, holder, until, evs, s.now())
		return err
	})
	return out, err
}
