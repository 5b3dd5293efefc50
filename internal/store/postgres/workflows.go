package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

const workflowRecordColumns = `workflow_id, tenant, workflow_type, instance_key, current_state, context, status, created_at, updated_at, completed_at, transitions`

func scanWorkflowRecord(row pgx.Row) (*host.WorkflowRecord, error) {
	var r host.WorkflowRecord
	var ctxJSON, status, created, updated string
	var completed *string
	if err := row.Scan(&r.WorkflowID, &r.Tenant, &r.WorkflowType, &r.InstanceKey, &r.CurrentState, &ctxJSON, &status,
		&created, &updated, &completed, &r.Transitions); err != nil {
		return nil, err
	}
	if ctxJSON != "" {
		r.Context = json.RawMessage(ctxJSON)
	}
	r.Status, r.CreatedAt, r.UpdatedAt, r.CompletedAt = host.WorkflowStatus(status), parseTS(created), parseTS(updated), parseNullTS(completed)
	return &r, nil
}

// loadRecord reads the record workflowID names; a record of a tenant
// other than tenant ("": any) is pgx.ErrNoRows, as a missing one.
// forUpdate locks its row until the transaction ends.
func loadRecord(ctx context.Context, q queryRower, tenant, workflowID string, forUpdate bool) (*host.WorkflowRecord, error) {
	lock := ""
	if forUpdate {
		lock = ` FOR UPDATE`
	}
	r, err := scanWorkflowRecord(q.QueryRow(ctx, `SELECT `+workflowRecordColumns+` FROM workflow_records WHERE workflow_id = $1`+lock, workflowID))
	if err == nil && tenant != "" && r.Tenant != tenant {
		return nil, pgx.ErrNoRows
	}
	return r, err
}

// PutWorkflow implements host.Workflows. Two nodes putting a new type at
// once: the second insert waits for the first (ON CONFLICT), then
// replaces it.
func (s *Store) PutWorkflow(ctx context.Context, def *host.WorkflowDefinition) (bool, error) {
	const op = "put workflow"
	if err := host.ValidateWorkflowDefinition(def); err != nil {
		return false, err
	}
	b, err := json.Marshal(def)
	if err != nil {
		return false, err
	}
	var replaced bool
	err = s.write(ctx, func(x *tx) error {
		now := ts(s.now())
		tag, err := x.Exec(ctx, `INSERT INTO workflows (workflow_type, definition, updated_at) VALUES ($1, $2, $3)
			ON CONFLICT (workflow_type) DO NOTHING`, def.WorkflowType, string(b), now)
		if err != nil {
			return err
		}
		if replaced = tag.RowsAffected() == 0; replaced {
			if _, err := x.Exec(ctx, `UPDATE workflows SET definition = $2, updated_at = $3 WHERE workflow_type = $1`, def.WorkflowType, string(b), now); err != nil {
				return err
			}
		}
		_, err = x.event(host.EventWorkflowUpserted, "", "", map[string]any{"workflow_type": def.WorkflowType,
			"replaced": replaced, "states": len(def.States)})
		return err
	})
	return replaced, host.Wrap(op, def.WorkflowType, err)
}

// Workflow implements host.Workflows.
func (s *Store) Workflow(ctx context.Context, workflowType string) (*host.WorkflowDefinition, error) {
	const op = "workflow"
	d, err := storecore.ScanWorkflowDefinition(s.pool.QueryRow(ctx, `SELECT definition FROM workflows WHERE workflow_type = $1`, workflowType))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Errorf(op, workflowType, host.ErrNotFound, "")
	}
	return d, host.Wrap(op, workflowType, err)
}

// ListWorkflows implements host.Workflows.
func (s *Store) ListWorkflows(ctx context.Context) ([]*host.WorkflowDefinition, error) {
	rows, err := s.pool.Query(ctx, `SELECT definition FROM workflows ORDER BY workflow_type`)
	if err != nil {
		return nil, host.Wrap("list workflows", "", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*host.WorkflowDefinition, error) {
		return storecore.ScanWorkflowDefinition(r)
	})
	return out, host.Wrap("list workflows", "", err)
}

// workflowDef reads a definition in the transaction; a missing one is a
// validation error naming field.
func (x *tx) workflowDef(ctx context.Context, op, field, workflowType string) (*host.WorkflowDefinition, error) {
	d, err := storecore.ScanWorkflowDefinition(x.QueryRow(ctx, `SELECT definition FROM workflows WHERE workflow_type = $1`, workflowType))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Invalid(op, field, "no workflow %q is registered", workflowType)
	}
	return d, err
}

// StartWorkflow implements host.Workflows. Two nodes starting one
// instance at once: one creates it, the other finds it (created false).
func (s *Store) StartWorkflow(ctx context.Context, st host.WorkflowStart) (*host.WorkflowRecord, bool, error) {
	const op = "start workflow"
	if err := host.ValidateWorkflowStart(op, &st); err != nil {
		return nil, false, err
	}
	st.Tenant = storecore.TenantOr(st.Tenant)
	var out *host.WorkflowRecord
	var created bool
	err := s.write(ctx, func(x *tx) error {
		now := s.now()
		r, isNew, err := x.findOrNewRecord(ctx, op, "workflow_type", &st, now)
		if err != nil {
			return err
		}
		if out, created, err = x.claimRecord(ctx, r, isNew); err != nil || !created {
			return err
		}
		if _, err := x.event(host.EventWorkflowCreated, "", "", storecore.WorkflowData(out, nil)); err != nil {
			return err
		}
		return x.enterState(ctx, out, "", now)
	})
	if err != nil {
		return nil, false, host.Wrap(op, st.WorkflowType, err)
	}
	return out, created, nil
}

// selectInstance reads the tenant's record of a type and instance key.
const selectInstance = `SELECT ` + workflowRecordColumns + ` FROM workflow_records WHERE tenant = $1 AND workflow_type = $2 AND instance_key = $3`

// findOrNewRecord finds the tenant's record of st's type and instance
// key (isNew false), or builds a new one, checked against its definition
// but not inserted (claimRecord does), so that a caller with more to
// check can still refuse without having written anything. typeField names
// the field that gave the workflow type in errors.
func (x *tx) findOrNewRecord(ctx context.Context, op, typeField string, st *host.WorkflowStart, now time.Time) (*host.WorkflowRecord, bool, error) {
	r, err := scanWorkflowRecord(x.QueryRow(ctx, selectInstance, st.Tenant, st.WorkflowType, st.InstanceKey))
	if err == nil {
		return r, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, err
	}
	def, err := x.workflowDef(ctx, op, typeField, st.WorkflowType)
	if err != nil {
		return nil, false, err
	}
	r, err = storecore.NewWorkflowRecord(op, host.NewID("wf"), st, def, now)
	return r, true, err
}

// claimRecord inserts the new record r (isNew), or locks the existing
// record of its tenant, type and instance key: the one r is, or the one
// another node inserted since findOrNewRecord looked (the insert waits
// for that node's transaction, then does nothing). It returns the record
// and whether this call created it.
func (x *tx) claimRecord(ctx context.Context, r *host.WorkflowRecord, isNew bool) (*host.WorkflowRecord, bool, error) {
	if isNew {
		tag, err := x.Exec(ctx, `INSERT INTO workflow_records (`+workflowRecordColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, 0)
			ON CONFLICT (tenant, workflow_type, instance_key) DO NOTHING`,
			r.WorkflowID, r.Tenant, r.WorkflowType, r.InstanceKey, r.CurrentState, string(r.Context), string(r.Status), ts(r.CreatedAt), ts(r.UpdatedAt))
		if err != nil || tag.RowsAffected() == 1 {
			return r, err == nil, err
		}
	}
	cur, err := scanWorkflowRecord(x.QueryRow(ctx, selectInstance+` FOR UPDATE`, r.Tenant, r.WorkflowType, r.InstanceKey))
	return cur, false, err
}

// enterState enqueues the task of r's current state if it emits a task
// intent (event workflow_task_created; see storecore.StateIntent).
func (x *tx) enterState(ctx context.Context, r *host.WorkflowRecord, attemptID string, now time.Time) error {
	const op = "workflow task"
	def, err := x.workflowDef(ctx, op, "workflow_type", r.WorkflowType)
	if err != nil {
		return err
	}
	intent := storecore.StateIntent(r, def)
	if intent == nil {
		return nil
	}
	t, err := storecore.NewTask(op, intent, 0, now)
	if err != nil {
		return err
	}
	t.Tenant = r.Tenant
	if err := x.insertTask(ctx, t, attemptID); err != nil {
		return err
	}
	_, err = x.event(host.EventWorkflowTaskCreated, t.TaskID, attemptID, storecore.WorkflowData(r, map[string]any{"task_type": t.TaskType}))
	return err
}

// WorkflowRecord implements host.Workflows.
func (s *Store) WorkflowRecord(ctx context.Context, tenant, id string) (*host.WorkflowRecord, error) {
	const op = "workflow record"
	r, err := loadRecord(ctx, s.pool, tenant, id, false)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Errorf(op, id, host.ErrNotFound, "")
	}
	return r, host.Wrap(op, id, err)
}

// ListWorkflowRecords implements host.Workflows.
func (s *Store) ListWorkflowRecords(ctx context.Context, f host.WorkflowRecordFilter) ([]*host.WorkflowRecord, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT `+workflowRecordColumns+` FROM workflow_records
		WHERE ($1 = '' OR tenant = $1) AND ($2 = '' OR workflow_type = $2) AND ($4 = '' OR instance_key = $4) ORDER BY seq DESC LIMIT $3`,
		f.Tenant, f.WorkflowType, limit, f.InstanceKey)
	if err != nil {
		return nil, host.Wrap("list workflow records", "", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*host.WorkflowRecord, error) { return scanWorkflowRecord(r) })
	return out, host.Wrap("list workflow records", "", err)
}

// CancelWorkflowRecord implements host.Workflows.
func (s *Store) CancelWorkflowRecord(ctx context.Context, tenant, id string) (*host.WorkflowRecord, error) {
	const op = "cancel workflow record"
	var out *host.WorkflowRecord
	err := s.write(ctx, func(x *tx) error {
		r, err := loadRecord(ctx, x, tenant, id, true)
		if errors.Is(err, pgx.ErrNoRows) {
			return host.Errorf(op, id, host.ErrNotFound, "")
		}
		if err != nil {
			return err
		}
		if r.Status != host.WorkflowActive && r.Status != host.WorkflowBlocked {
			return host.Errorf(op, id, host.ErrConflict, "the record is %s", r.Status)
		}
		from := r.Status
		r.Status = host.WorkflowCanceled
		if err := x.saveRecord(ctx, r, s.now()); err != nil {
			return err
		}
		out = r
		_, err = x.event(host.EventWorkflowCanceled, "", "", storecore.WorkflowData(r, map[string]any{"from": from}))
		return err
	})
	return out, host.Wrap(op, id, err)
}

// saveRecord writes r's state, status and completed_at, updated at now.
func (x *tx) saveRecord(ctx context.Context, r *host.WorkflowRecord, now time.Time) error {
	r.UpdatedAt = storecore.Stored(now)
	var completed *string
	if r.CompletedAt != nil {
		c := ts(*r.CompletedAt)
		completed = &c
	}
	_, err := x.Exec(ctx, `UPDATE workflow_records SET current_state = $1, status = $2, updated_at = $3, completed_at = $4, transitions = $5 WHERE workflow_id = $6`,
		r.CurrentState, string(r.Status), ts(now), completed, r.Transitions, r.WorkflowID)
	return err
}

// checkWorkflowRef checks that an intent's workflow_ref names a record of
// tenant with that instance_key and a state of its definition.
func (x *tx) checkWorkflowRef(ctx context.Context, op, tenant string, ref *host.WorkflowRef) error {
	r, err := loadRecord(ctx, x, tenant, ref.WorkflowID, false)
	if errors.Is(err, pgx.ErrNoRows) {
		return host.Invalid(op, "workflow_ref.workflow_id", "no workflow record %s (start it first)", ref.WorkflowID)
	}
	if err != nil {
		return err
	}
	if r.InstanceKey != ref.InstanceKey {
		return host.Invalid(op, "workflow_ref.instance_key", "record %s has instance_key %q", r.WorkflowID, r.InstanceKey)
	}
	def, err := x.workflowDef(ctx, op, "workflow_ref.workflow_id", r.WorkflowType)
	if err != nil {
		return err
	}
	if def.State(ref.StateID) == nil {
		return host.Invalid(op, "workflow_ref.state_id", "%q is not a state of workflow %s", ref.StateID, r.WorkflowType)
	}
	return nil
}

// applyWorkflowSignal applies the verified signal of completed task t to
// the record its workflow_ref names, locked (two nodes settling tasks of
// one record take turns), and says what it did (see host.Workflows for
// the rules).
func (x *tx) applyWorkflowSignal(ctx context.Context, t *host.TaskRecord, signal, attemptID string, now time.Time) (string, error) {
	const op = "workflow signal"
	r, err := loadRecord(ctx, x, t.Tenant, t.WorkflowRef.WorkflowID, true)
	if errors.Is(err, pgx.ErrNoRows) {
		return storecore.SignalStale, nil
	}
	if err != nil {
		return "", err
	}
	if r.Status != host.WorkflowActive || r.CurrentState != t.WorkflowRef.StateID {
		return storecore.SignalStale, nil
	}
	def, err := x.workflowDef(ctx, op, "workflow_type", r.WorkflowType)
	if err != nil {
		return "", err
	}
	next, completes := "", false
	if st := def.State(r.CurrentState); st != nil {
		next, completes = st.Next(signal), st.Completes(signal)
	}
	base := map[string]any{"signal": signal, "from_task_id": t.TaskID}
	if data, blocked := storecore.SignalBlocks(x.s.opts.Quotas, r, next, completes, base); blocked {
		r.Status = host.WorkflowBlocked
		if err := x.saveRecord(ctx, r, now); err != nil {
			return "", err
		}
		_, err := x.event(host.EventWorkflowBlocked, t.TaskID, attemptID, storecore.WorkflowData(r, data))
		return storecore.SignalBlocked, err
	}
	if next != "" {
		from := r.CurrentState
		r.CurrentState = next
		r.Transitions++
		if err := x.saveRecord(ctx, r, now); err != nil {
			return "", err
		}
		if _, err := x.event(host.EventWorkflowTransitioned, t.TaskID, attemptID,
			storecore.WorkflowData(r, map[string]any{"signal": signal, "from_task_id": t.TaskID, "from_state": from, "to_state": next})); err != nil {
			return "", err
		}
	}
	if completes {
		done := storecore.Stored(now)
		r.Status, r.CompletedAt = host.WorkflowCompleted, &done
		if err := x.saveRecord(ctx, r, now); err != nil {
			return "", err
		}
		_, err := x.event(host.EventWorkflowCompleted, t.TaskID, attemptID, storecore.WorkflowData(r, base))
		return storecore.SignalCompleted, err
	}
	return storecore.SignalTransitioned, x.enterState(ctx, r, attemptID, now)
}

// sensorWorkflow finds, or builds without inserting, the record an
// accepted sensor event's proposed_workflow names: the tenant's record of
// that template (workflow_type) and instance_key.
func (x *tx) sensorWorkflow(ctx context.Context, ev *host.SensorEvent, tenant string, now time.Time) (*host.WorkflowRecord, bool, error) {
	w := ev.ProposedWorkflow
	st := host.WorkflowStart{WorkflowType: w.Template, InstanceKey: w.InstanceKey, State: w.State, Context: w.Context, Tenant: tenant}
	r, created, err := x.findOrNewRecord(ctx, "sensor event", "proposed_workflow.template", &st, now)
	var he *host.Error
	if errors.As(err, &he) && he.Field == "state" {
		he.Field = "proposed_workflow.state"
	}
	return r, created, err
}

// sensorWorkflowEvents appends sensor_workflow_created (and enqueues the
// task of its first state) for the record r the sensor event created
// (claimRecord inserted it), or sensor_workflow_deduped for an existing
// record (locked by claimRecord): nothing of it changes, except that a
// blocked record is woken (active again, its current state entered again,
// data.woken true).
func (x *tx) sensorWorkflowEvents(ctx context.Context, r *host.WorkflowRecord, created bool, sev *host.SensorEventRecord, attemptID string, now time.Time) error {
	evType, woken := host.EventSensorWorkflowDeduped, false
	switch {
	case created:
		evType = host.EventSensorWorkflowCreated
	case r.Status == host.WorkflowBlocked:
		r.Status, woken = host.WorkflowActive, true
		if err := x.saveRecord(ctx, r, now); err != nil {
			return err
		}
	}
	if _, err := x.event(evType, "", attemptID, storecore.WorkflowData(r, map[string]any{"record_id": sev.RecordID, "sensor_id": sev.Event.SensorID,
		"woken": woken})); err != nil {
		return err
	}
	if !created && !woken {
		return nil
	}
	return x.enterState(ctx, r, attemptID, now)
}

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
	return x.applyWorkflowSignal(ctx, t, in.Outcome.WorkflowSignal, in.AttemptID, now)
}
