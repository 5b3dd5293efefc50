package postgres

import (
	"context"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// The host.Workflows methods are storecore.Ops's (storecore/workflowops.go).

// applyStaged applies, in Finish's transaction, what the completed task
// t's attempt staged: its sensor events (origin task:<id>, t's tenant),
// its published messages, and its workflow signal (what the signal did
// is returned, "" if none applied).
func (x *tx) applyStaged(ctx context.Context, t *host.TaskRecord, in *host.FinishInput, now time.Time) (string, error) {
	opts := host.SensorEventOptions{Tenant: t.Tenant, Origin: "task:" + t.TaskID}
	if _, err := storecore.ApplyReported(ctx, coreTx{x}, in.SensorEvents, opts, t.TaskID, in.AttemptID, now); err != nil {
		return "", err
	}
	if err := x.applyPublished(ctx, in.Messages, t.Tenant, t.TaskID, in.AttemptID, now); err != nil {
		return "", err
	}
	if t.WorkflowRef == nil || in.Outcome.WorkflowSignal == "" {
		return "", nil
	}
	return storecore.ApplyWorkflowSignal(ctx, coreTx{x}, x.s.opts.Quotas, t, in.Outcome.WorkflowSignal, in.AttemptID, now)
}
