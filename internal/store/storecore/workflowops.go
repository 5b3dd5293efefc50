package storecore

import (
	"context"
	"errors"

	"github.com/packrun/packrun/host"
)

// The host.Workflows methods of Ops: the workflow rules of workflows.go
// run in the driver's write transaction (Queue.Write; on PostgreSQL
// retried on a deadlock or serialization failure) or read on its pool.

// PutWorkflow implements host.Workflows.
func (o Ops) PutWorkflow(ctx context.Context, def *host.WorkflowDefinition) (bool, error) {
	if err := host.ValidateWorkflowDefinition(def); err != nil {
		return false, err
	}
	q := o.queue()
	var replaced bool
	err := q.Write(ctx, func(tx SettleTx) (err error) {
		replaced, err = PutWorkflow(ctx, tx, def, q.Now())
		return err
	})
	return replaced, host.Wrap("put workflow", def.WorkflowType, err)
}

// Workflow implements host.Workflows.
func (o Ops) Workflow(ctx context.Context, workflowType string) (*host.WorkflowDefinition, error) {
	d, err := Workflow(ctx, o.queue().Read, workflowType)
	return d, host.Wrap("workflow", workflowType, err)
}

// ListWorkflows implements host.Workflows.
func (o Ops) ListWorkflows(ctx context.Context) ([]*host.WorkflowDefinition, error) {
	out, err := ListWorkflows(ctx, o.queue().Read)
	return out, host.Wrap("list workflows", "", err)
}

// StartWorkflow implements host.Workflows.
func (o Ops) StartWorkflow(ctx context.Context, st host.WorkflowStart) (*host.WorkflowRecord, bool, error) {
	const op = "start workflow"
	if err := host.ValidateWorkflowStart(op, &st); err != nil {
		return nil, false, err
	}
	st.Tenant = TenantOr(st.Tenant)
	q := o.queue()
	var out *host.WorkflowRecord
	var created bool
	err := q.Write(ctx, func(tx SettleTx) (err error) {
		out, created, err = StartWorkflow(ctx, tx.(WorkflowTx), &st, q.Now())
		return err
	})
	if err != nil {
		return nil, false, host.Wrap(op, st.WorkflowType, err)
	}
	return out, created, nil
}

// WorkflowRecord implements host.Workflows.
func (o Ops) WorkflowRecord(ctx context.Context, tenant, id string) (*host.WorkflowRecord, error) {
	const op = "workflow record"
	r, err := LoadWorkflowRecord(ctx, o.queue().Read, "", tenant, id)
	if errors.Is(err, ErrNoRows) {
		return nil, host.Errorf(op, id, host.ErrNotFound, "")
	}
	return r, host.Wrap(op, id, err)
}

// ListWorkflowRecords implements host.Workflows.
func (o Ops) ListWorkflowRecords(ctx context.Context, f host.WorkflowRecordFilter) ([]*host.WorkflowRecord, error) {
	out, err := ListWorkflowRecords(ctx, o.queue().Read, f)
	return out, host.Wrap("list workflow records", "", err)
}

// CancelWorkflowRecord implements host.Workflows.
func (o Ops) CancelWorkflowRecord(ctx context.Context, tenant, id string) (*host.WorkflowRecord, error) {
	q := o.queue()
	var out *host.WorkflowRecord
	err := q.Write(ctx, func(tx SettleTx) (err error) {
		out, err = CancelWorkflowRecord(ctx, tx, tenant, id, q.Now())
		return err
	})
	return out, host.Wrap("cancel workflow record", id, err)
}
