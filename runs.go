package packrun

import (
	"context"
	"encoding/json"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/runs"
)

// openwop runs: `packrun serve`'s /v1/runs, executed by the run scheduler
// (internal/runs); these methods are its public face.

// Run error codes (internal/runs).
const (
	// RunErrSuspendNotImplemented: a node suspended (openwop_interrupt or
	// outcome "suspended"); runs cannot be resumed yet, so the run fails
	// with the code openwop's suspend scenario recognises.
	RunErrSuspendNotImplemented = runs.RunErrSuspendNotImplemented
	RunErrNodeFailed            = runs.RunErrNodeFailed
	// RunErrReplayFailed: a fork could not replay a recorded attempt (its
	// module or trace is gone).
	RunErrReplayFailed = runs.RunErrReplayFailed
)

// ResumeReason is the reason a run.resumed event gives: the process that
// executed the run stopped before the run ended.
const ResumeReason = runs.ResumeReason

// PutOpenwopWorkflow registers (or replaces) a tenant's openwop workflow
// definition. A built-in fixture's id cannot be taken.
func (h *Host) PutOpenwopWorkflow(ctx context.Context, w *host.OpenwopWorkflow) error {
	return h.runs.PutOpenwopWorkflow(ctx, w)
}

// OpenwopFixtures lists the built-in conformance fixtures whose nodes are
// all runnable here: core types, or provided by installed packs
// (discovery's "fixtures").
func (h *Host) OpenwopFixtures(ctx context.Context) ([]string, error) {
	return h.runs.OpenwopFixtures(ctx)
}

// OpenwopRegistered lists the ids of the tenant's registered openwop
// workflow definitions whose nodes are all runnable here (discovery's
// "fixtures" to a caller of the tenant).
func (h *Host) OpenwopRegistered(ctx context.Context, tenant string) ([]string, error) {
	return h.runs.OpenwopRegistered(ctx, tenant)
}

// StartRun creates a run of workflowID with inputs (a JSON object; left
// out or null is {}) and executes it in the background. A workflow whose
// nodes are not all provided by installed packs is refused
// (host.ErrInvalid).
func (h *Host) StartRun(ctx context.Context, tenant, workflowID string, inputs json.RawMessage) (*host.Run, error) {
	return h.runs.StartRun(ctx, tenant, workflowID, inputs)
}

// StartRunOnce is StartRun under the tenant's Idempotency-Key key: the
// same key and request within host.RunIdempotencyTTL (24 h) answer the
// run it started and false; another request, host.ErrIdempotencyMismatch.
func (h *Host) StartRunOnce(ctx context.Context, tenant, workflowID string, inputs json.RawMessage, key string) (*host.Run, bool, error) {
	return h.runs.StartRunOnce(ctx, tenant, workflowID, inputs, key)
}

// StartRunWith is StartRunOnce with a run's options (its recursionLimit).
func (h *Host) StartRunWith(ctx context.Context, tenant, workflowID string, inputs json.RawMessage, key string, opts host.RunOptions) (*host.Run, bool, error) {
	return h.runs.StartRunWith(ctx, tenant, workflowID, inputs, key, opts)
}

// GetRun returns a tenant's run.
func (h *Host) GetRun(ctx context.Context, tenant, runID string) (*host.Run, error) {
	return h.runs.GetRun(ctx, tenant, runID)
}

// RunEvents returns a tenant's run's event log.
func (h *Host) RunEvents(ctx context.Context, tenant, runID string) ([]host.RunEvent, error) {
	return h.runs.RunEvents(ctx, tenant, runID)
}

// CancelRun cancels a running run (ErrConflict once it is terminal) and
// stops the node it is executing.
func (h *Host) CancelRun(ctx context.Context, tenant, runID, reason string) (*host.Run, error) {
	return h.runs.CancelRun(ctx, tenant, runID, reason)
}

// ForkRun forks a terminal run as openwop's replay spec (spec/v1/replay.md)
// describes mode "replay" (internal/runs): the new run re-executes each
// node completed at or after fromSeq by replaying its recorded attempt.
// Mode "branch" is not served.
func (h *Host) ForkRun(ctx context.Context, tenant, runID, mode string, fromSeq int) (*host.Run, error) {
	return h.runs.ForkRun(ctx, tenant, runID, mode, fromSeq)
}

// OpenwopLoadedPacks lists the installed packs' names, sorted, once
// each (discovery's loadedPacks).
func (h *Host) OpenwopLoadedPacks(ctx context.Context) ([]string, error) {
	return h.runs.OpenwopLoadedPacks(ctx)
}

// chores are the host's singleton chores, run by the process holding the
// dispatch lock (dispatch.Config.Chores): expired memory entries are
// deleted (they are never read; this gives their space back).
func (h *Host) chores(ctx context.Context) {
	n, err := h.store.Sweep(ctx)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		h.log.Error("sweeping expired memory", "err", err)
	case n > 0:
		h.log.Info("swept expired memory entries", "count", n)
	}
}

// ResolveInterrupt resolves the interrupt a tenant's run waits on
// (status waiting-approval) at node nodeID with value, openwop's
// resumeValue, decided by by: the run continues, the node run again with
// it (internal/runs, interrupts.go). A node with no interrupt waiting is
// host.ErrNotFound, a run not waiting host.ErrConflict, a value the
// interrupt does not accept host.ErrValidation.
func (h *Host) ResolveInterrupt(ctx context.Context, tenant, runID, nodeID string, value json.RawMessage, by string) (*host.Run, error) {
	return h.runs.ResolveInterrupt(ctx, tenant, runID, nodeID, value, by)
}
