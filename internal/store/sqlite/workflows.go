package sqlite

import (
	"context"
	"errors"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// The workflow rules are storecore's (storecore/workflows.go): these
// run them in the writer's transaction, or read through the pool.

// PutWorkflow implements host.Workflows.
func (s *Store) PutWorkflow(ctx context.Context, def *host.WorkflowDefinition) (bool, error) {
	if err := host.ValidateWorkflowDefinition(def); err != nil {
		return false, err
	}
	var replaced bool
	err := s.w.do(ctx, func(tx *wtx) (err error) {
		replaced, err = storecore.PutWorkflow(ctx, coreTx{s, tx}, def, s.now())
		return err
	})
	return replaced, host.Wrap("put workflow", def.WorkflowType, err)
}

// Workflow implements host.Workflows.
func (s *Store) Workflow(ctx context.Context, workflowType string) (*host.WorkflowDefinition, error) {
	d, err := storecore.Workflow(ctx, coreDB{s}, workflowType)
	return d, host.Wrap("workflow", workflowType, err)
}

// ListWorkflows implements host.Workflows.
func (s *Store) ListWorkflows(ctx context.Context) ([]*host.WorkflowDefinition, error) {
	out, err := storecore.ListWorkflows(ctx, coreDB{s})
	return out, host.Wrap("list workflows", "", err)
}

// StartWorkflow implements host.Workflows.
func (s *Store) StartWorkflow(ctx context.Context, st host.WorkflowStart) (*host.WorkflowRecord, bool, error) {
	const op = "start workflow"
	if err := host.ValidateWorkflowStart(op, &st); err != nil {
		return nil, false, err
	}
	st.Tenant = storecore.TenantOr(st.Tenant)
	var out *host.WorkflowRecord
	var created bool
	err := s.w.do(ctx, func(tx *wtx) (err error) {
		out, created, err = storecore.StartWorkflow(ctx, coreTx{s, tx}, &st, s.now())
		return err
	})
	if err != nil {
		return nil, false, host.Wrap(op, st.WorkflowType, err)
	}
	return out, created, nil
}

// WorkflowRecord implements host.Workflows.
func (s *Store) WorkflowRecord(ctx context.Context, tenant, id string) (*host.WorkflowRecord, error) {
	const op = "workflow record"
	r, err := storecore.LoadWorkflowRecord(ctx, coreDB{s}, "", tenant, id)
	if errors.Is(err, storecore.ErrNoRows) {
		return nil, host.Errorf(op, id, host.ErrNotFound, "")
	}
	return r, host.Wrap(op, id, err)
}

// ListWorkflowRecords implements host.Workflows.
func (s *Store) ListWorkflowRecords(ctx context.Context, f host.WorkflowRecordFilter) ([]*host.WorkflowRecord, error) {
	out, err := storecore.ListWorkflowRecords(ctx, coreDB{s}, f)
	return out, host.Wrap("list workflow records", "", err)
}

// CancelWorkflowRecord implements host.Workflows.
func (s *Store) CancelWorkflowRecord(ctx context.Context, tenant, id string) (*host.WorkflowRecord, error) {
	var out *host.WorkflowRecord
	err := s.w.do(ctx, func(tx *wtx) (err error) {
		out, err = storecore.CancelWorkflowRecord(ctx, coreTx{s, tx}, tenant, id, s.now())
		return err
	})
	return out, host.Wrap("cancel workflow record", id, err)
}
