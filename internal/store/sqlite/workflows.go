package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

const workflowRecordColumns = `workflow_id, tenant, workflow_type, instance_key, current_state, context, status, created_at, updated_at, completed_at, transitions`

func scanWorkflowRecord(row interface{ Scan(...any) error }) (*host.WorkflowRecord, error) {
	var r host.WorkflowRecord
	var ctxJSON, status, created, updated string
	var completed sql.NullString
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

// selectRecord is the query of one record by workflow_id (?1).
const selectRecord = `SELECT ` + workflowRecordColumns + ` FROM workflow_records WHERE workflow_id = ?1`

// recordOf scans a selectRecord row; a record of a tenant other than
// tenant ("": any) is sql.ErrNoRows, as a missing one.
func recordOf(row *sql.Row, tenant string) (*host.WorkflowRecord, error) {
	r, err := scanWorkflowRecord(row)
	if err == nil && tenant != "" && r.Tenant != tenant {
		return nil, sql.ErrNoRows
	}
	return r, err
}

// PutWorkflow implements host.Workflows.
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
	err = s.w.do(ctx, func(tx *wtx) error {
		var one int
		err := tx.QueryRow(`SELECT 1 FROM workflows WHERE workflow_type = ?`, def.WorkflowType).Scan(&one)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		replaced = err == nil
		if _, err := tx.Exec(`INSERT INTO workflows (workflow_type, definition, updated_at) VALUES (?1, ?2, ?3)
			ON CONFLICT (workflow_type) DO UPDATE SET definition = ?2, updated_at = ?3`, def.WorkflowType, string(b), ts(s.now())); err != nil {
			return err
		}
		_, err = s.event(tx, host.EventWorkflowUpserted, "", "", map[string]any{"workflow_type": def.WorkflowType,
			"replaced": replaced, "states": len(def.States)})
		return err
	})
	return replaced, host.Wrap(op, def.WorkflowType, err)
}

// Workflow implements host.Workflows.
func (s *Store) Workflow(ctx context.Context, workflowType string) (*host.WorkflowDefinition, error) {
	const op = "workflow"
	d, err := storecore.ScanWorkflowDefinition(s.queryRow(ctx, `SELECT definition FROM workflows WHERE workflow_type = ?`, workflowType))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, host.Errorf(op, workflowType, host.ErrNotFound, "")
	}
	return d, host.Wrap(op, workflowType, err)
}

// ListWorkflows implements host.Workflows.
func (s *Store) ListWorkflows(ctx context.Context) ([]*host.WorkflowDefinition, error) {
	out, err := queryAll(s, ctx, storecore.ScanWorkflowDefinition, `SELECT definition FROM workflows ORDER BY workflow_type`)
	return out, host.Wrap("list workflows", "", err)
}

// txWorkflow reads a definition in tx; ErrNotFound names field.
func txWorkflow(tx *wtx, op, field, workflowType string) (*host.WorkflowDefinition, error) {
	d, err := storecore.ScanWorkflowDefinition(tx.QueryRow(`SELECT definition FROM workflows WHERE workflow_type = ?`, workflowType))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, host.Invalid(op, field, "no workflow %q is registered", workflowType)
	}
	return d, err
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
	err := s.w.do(ctx, func(tx *wtx) error {
		var err error
		out, created, err = s.findOrNewRecord(tx, op, "workflow_type", &st, s.now())
		if err != nil || !created {
			return err
		}
		if err := insertRecord(tx, out); err != nil {
			return err
		}
		if _, err := s.event(tx, host.EventWorkflowCreated, "", "", storecore.WorkflowData(out, nil)); err != nil {
			return err
		}
		return s.enterState(tx, out, "", s.now())
	})
	if err != nil {
		return nil, false, host.Wrap(op, st.WorkflowType, err)
	}
	return out, created, nil
}

// findOrNewRecord finds the tenant's record of st's type and instance
// key (created false), or builds a new one, checked against its
// definition but not yet inserted (insertRecord), so that a caller with
// more to check can still refuse without having written anything.
// typeField names the field that gave the workflow type in errors.
func (s *Store) findOrNewRecord(tx *wtx, op, typeField string, st *host.WorkflowStart, now time.Time) (*host.WorkflowRecord, bool, error) {
	r, err := scanWorkflowRecord(tx.QueryRow(`SELECT `+workflowRecordColumns+` FROM workflow_records
		WHERE tenant = ? AND workflow_type = ? AND instance_key = ?`, st.Tenant, st.WorkflowType, st.InstanceKey))
	if err == nil {
		return r, false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, false, err
	}
	def, err := txWorkflow(tx, op, typeField, st.WorkflowType)
	if err != nil {
		return nil, false, err
	}
	if r, err = storecore.NewWorkflowRecord(op, host.NewID("wf"), st, def, now); err != nil {
		return nil, false, err
	}
	return r, true, nil
}

// insertRecord stores a new record built by findOrNewRecord.
func insertRecord(tx *wtx, r *host.WorkflowRecord) error {
	_, err := tx.Exec(`INSERT INTO workflow_records (`+workflowRecordColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, 0)`,
		r.WorkflowID, r.Tenant, r.WorkflowType, r.InstanceKey, r.CurrentState, string(r.Context), string(r.Status), ts(r.CreatedAt), ts(r.UpdatedAt))
	return err
}

// enterState enqueues the task of r's current state if it emits a task
// intent (event workflow_task_created): its task_type, default profile
// and skills, the record's context as payload ({} for null), source
// host.WorkflowSource and a workflow_ref naming the record and state.
func (s *Store) enterState(tx *wtx, r *host.WorkflowRecord, attemptID string, now time.Time) error {
	const op = "workflow task"
	def, err := txWorkflow(tx, op, "workflow_type", r.WorkflowType)
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
	if err := s.insertTask(tx, t, attemptID); err != nil {
		return err
	}
	_, err = s.event(tx, host.EventWorkflowTaskCreated, t.TaskID, attemptID, storecore.WorkflowData(r, map[string]any{"task_type": t.TaskType}))
	return err
}

// WorkflowRecord implements host.Workflows.
func (s *Store) WorkflowRecord(ctx context.Context, tenant, id string) (*host.WorkflowRecord, error) {
	const op = "workflow record"
	r, err := recordOf(s.queryRow(ctx, selectRecord, id), tenant)
	if errors.Is(err, sql.ErrNoRows) {
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
	out, err := queryAll(s, ctx, scanWorkflowRecord, `SELECT `+workflowRecordColumns+` FROM workflow_records
		WHERE (?1 = '' OR tenant = ?1) AND (?2 = '' OR workflow_type = ?2) AND (?4 = '' OR instance_key = ?4) ORDER BY seq DESC LIMIT ?3`,
		f.Tenant, f.WorkflowType, limit, f.InstanceKey)
	return out, host.Wrap("list workflow records", "", err)
}

// CancelWorkflowRecord implements host.Workflows.
func (s *Store) CancelWorkflowRecord(ctx context.Context, tenant, id string) (*host.WorkflowRecord, error) {
	const op = "cancel workflow record"
	var out *host.WorkflowRecord
	err := s.w.do(ctx, func(tx *wtx) error {
		r, err := recordOf(tx.QueryRow(selectRecord, id), tenant)
		if errors.Is(err, sql.ErrNoRows) {
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
		if err := s.saveRecord(tx, r, s.now()); err != nil {
			return err
		}
		out = r
		_, err = s.event(tx, host.EventWorkflowCanceled, "", "", storecore.WorkflowData(r, map[string]any{"from": from}))
		return err
	})
	return out, host.Wrap(op, id, err)
}

// saveRecord writes r's state, status and completed_at, updated at now.
func (s *Store) saveRecord(tx *wtx, r *host.WorkflowRecord, now time.Time) error {
	r.UpdatedAt = storecore.Stored(now)
	var completed any
	if r.CompletedAt != nil {
		completed = ts(*r.CompletedAt)
	}
	_, err := tx.Exec(`UPDATE workflow_records SET current_state = ?, status = ?, updated_at = ?, completed_at = ?, transitions = ? WHERE workflow_id = ?`,
		r.CurrentState, string(r.Status), ts(now), completed, r.Transitions, r.WorkflowID)
	return err
}

// checkWorkflowRef checks, in tx, that an intent's workflow_ref names a
// record of tenant with that instance_key and a state of its definition.
func checkWorkflowRef(tx *wtx, op, tenant string, ref *host.WorkflowRef) error {
	r, err := recordOf(tx.QueryRow(selectRecord, ref.WorkflowID), tenant)
	if errors.Is(err, sql.ErrNoRows) {
		return host.Invalid(op, "workflow_ref.workflow_id", "no workflow record %s (start it first)", ref.WorkflowID)
	}
	if err != nil {
		return err
	}
	if r.InstanceKey != ref.InstanceKey {
		return host.Invalid(op, "workflow_ref.instance_key", "record %s has instance_key %q", r.WorkflowID, r.InstanceKey)
	}
	def, err := txWorkflow(tx, op, "workflow_ref.workflow_id", r.WorkflowType)
	if err != nil {
		return err
	}
	if def.State(ref.StateID) == nil {
		return host.Invalid(op, "workflow_ref.state_id", "%q is not a state of workflow %s", ref.StateID, r.WorkflowType)
	}
	return nil
}

// applyWorkflowSignal applies the verified signal of completed task t to
// the record its workflow_ref names, in tx (see host.Workflows for the
// rules), and says what it did.
func (s *Store) applyWorkflowSignal(tx *wtx, t *host.TaskRecord, signal, attemptID string, now time.Time) (string, error) {
	const op = "workflow signal"
	ref := t.WorkflowRef
	r, err := recordOf(tx.QueryRow(selectRecord, ref.WorkflowID), t.Tenant)
	if errors.Is(err, sql.ErrNoRows) {
		return storecore.SignalStale, nil
	}
	if err != nil {
		return "", err
	}
	if r.Status != host.WorkflowActive || r.CurrentState != ref.StateID {
		return storecore.SignalStale, nil
	}
	def, err := txWorkflow(tx, op, "workflow_type", r.WorkflowType)
	if err != nil {
		return "", err
	}
	st := def.State(r.CurrentState)
	next, completes := "", false
	if st != nil {
		next, completes = st.Next(signal), st.Completes(signal)
	}
	base := map[string]any{"signal": signal, "from_task_id": t.TaskID}
	if data, blocked := storecore.SignalBlocks(s.opts.Quotas, r, next, completes, base); blocked {
		r.Status = host.WorkflowBlocked
		if err := s.saveRecord(tx, r, now); err != nil {
			return "", err
		}
		_, err := s.event(tx, host.EventWorkflowBlocked, t.TaskID, attemptID, storecore.WorkflowData(r, data))
		return storecore.SignalBlocked, err
	}
	if next != "" {
		from := r.CurrentState
		r.CurrentState = next
		r.Transitions++
		if err := s.saveRecord(tx, r, now); err != nil {
			return "", err
		}
		if _, err := s.event(tx, host.EventWorkflowTransitioned, t.TaskID, attemptID,
			storecore.WorkflowData(r, map[string]any{"signal": signal, "from_task_id": t.TaskID, "from_state": from, "to_state": next})); err != nil {
			return "", err
		}
	}
	if completes {
		done := storecore.Stored(now)
		r.Status, r.CompletedAt = host.WorkflowCompleted, &done
		if err := s.saveRecord(tx, r, now); err != nil {
			return "", err
		}
		_, err := s.event(tx, host.EventWorkflowCompleted, t.TaskID, attemptID, storecore.WorkflowData(r, base))
		return storecore.SignalCompleted, err
	}
	return storecore.SignalTransitioned, s.enterState(tx, r, attemptID, now)
}

// sensorWorkflow finds, or builds without inserting, the record an
// accepted sensor event's proposed_workflow names: the tenant's record of
// that template (workflow_type) and instance_key. sensorWorkflowEvents
// inserts a new one, once the whole event is known to apply.
func (s *Store) sensorWorkflow(tx *wtx, ev *host.SensorEvent, tenant string, now time.Time) (*host.WorkflowRecord, bool, error) {
	w := ev.ProposedWorkflow
	st := host.WorkflowStart{WorkflowType: w.Template, InstanceKey: w.InstanceKey, State: w.State, Context: w.Context, Tenant: tenant}
	r, created, err := s.findOrNewRecord(tx, "sensor event", "proposed_workflow.template", &st, now)
	var he *host.Error
	if errors.As(err, &he) && he.Field == "state" {
		he.Field = "proposed_workflow.state"
	}
	return r, created, err
}

// sensorWorkflowEvents appends sensor_workflow_created for a new record
// (coreTx.ClaimWorkflow inserted it) and enqueues the task of its first
// state, or
// appends sensor_workflow_deduped for an existing record: nothing of it
// changes, except that a blocked record is woken (active again, its
// current state entered again, data.woken true).
func (s *Store) sensorWorkflowEvents(tx *wtx, r *host.WorkflowRecord, created bool, sev *host.SensorEventRecord, attemptID string, now time.Time) error {
	evType, woken := host.EventSensorWorkflowDeduped, false
	switch {
	case created:
		evType = host.EventSensorWorkflowCreated
	case r.Status == host.WorkflowBlocked:
		r.Status, woken = host.WorkflowActive, true
		if err := s.saveRecord(tx, r, now); err != nil {
			return err
		}
	}
	if _, err := s.event(tx, evType, "", attemptID, storecore.WorkflowData(r, map[string]any{"record_id": sev.RecordID, "sensor_id": sev.Event.SensorID,
		"woken": woken})); err != nil {
		return err
	}
	if !created && !woken {
		return nil
	}
	return s.enterState(tx, r, attemptID, now)
}
