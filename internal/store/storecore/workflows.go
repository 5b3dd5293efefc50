package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
)

// The workflow rules of host.Workflows written once against Tx: the
// definitions, the records' state machine (start, cancel, signal, enter a
// state) and the workflow steps of a sensor event.

// WorkflowTx is a Tx that inserts the tasks workflow states emit (the
// queue's rule, not yet written once: see RATIONALE.md).
type WorkflowTx interface {
	Tx
	// InsertTaskFor inserts t, enqueued by attemptID's signal ("" if
	// none), with its task_enqueued event.
	InsertTaskFor(ctx context.Context, t *host.TaskRecord, attemptID string) error
}

// WorkflowRecordColumns are workflow_records' columns, in ScanWorkflowRecord's order.
const WorkflowRecordColumns = `workflow_id, tenant, workflow_type, instance_key, current_state, context, status, created_at, updated_at, completed_at, transitions`

const selectInstance = `SELECT ` + WorkflowRecordColumns + ` FROM workflow_records WHERE tenant = $1 AND workflow_type = $2 AND instance_key = $3`

// ScanWorkflowRecord reads a workflow_records row.
func ScanWorkflowRecord(row Row) (*host.WorkflowRecord, error) {
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
	r.Status, r.CreatedAt, r.UpdatedAt = host.WorkflowStatus(status), ParseTime(created), ParseTime(updated)
	if completed != nil {
		t := ParseTime(*completed)
		r.CompletedAt = &t
	}
	return &r, nil
}

// LoadWorkflowRecord reads the record id names; a record of a tenant
// other than tenant ("": any) is ErrNoRows, as a missing one. lock
// (Dialect.LockRows, or "" for a read) ends the query.
func LoadWorkflowRecord(ctx context.Context, q Querier, lock, tenant, id string) (*host.WorkflowRecord, error) {
	r, err := ScanWorkflowRecord(q.QueryRow(ctx, `SELECT `+WorkflowRecordColumns+` FROM workflow_records WHERE workflow_id = $1`+lock, id))
	if err == nil && tenant != "" && r.Tenant != tenant {
		return nil, ErrNoRows
	}
	return r, err
}

// PutWorkflow stores the valid definition def (see host.Workflows).
// Two writers putting a new type at once: the second insert waits for
// the first (ON CONFLICT), then replaces it.
func PutWorkflow(ctx context.Context, tx Tx, def *host.WorkflowDefinition, now time.Time) (replaced bool, err error) {
	b, err := json.Marshal(def)
	if err != nil {
		return false, err
	}
	n, err := tx.Exec(ctx, `INSERT INTO workflows (workflow_type, definition, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (workflow_type) DO NOTHING`, def.WorkflowType, string(b), host.FormatTime(now))
	if err != nil {
		return false, err
	}
	if replaced = n == 0; replaced {
		if _, err := tx.Exec(ctx, `UPDATE workflows SET definition = $2, updated_at = $3 WHERE workflow_type = $1`,
			def.WorkflowType, string(b), host.FormatTime(now)); err != nil {
			return false, err
		}
	}
	return replaced, tx.Event(host.EventWorkflowUpserted, "", "", map[string]any{"workflow_type": def.WorkflowType,
		"replaced": replaced, "states": len(def.States)})
}

// Workflow reads a definition (host.ErrNotFound if none).
func Workflow(ctx context.Context, q Querier, workflowType string) (*host.WorkflowDefinition, error) {
	d, err := ScanWorkflowDefinition(q.QueryRow(ctx, `SELECT definition FROM workflows WHERE workflow_type = $1`, workflowType))
	if errors.Is(err, ErrNoRows) {
		return nil, host.Errorf("workflow", workflowType, host.ErrNotFound, "")
	}
	return d, err
}

// ListWorkflows lists the definitions by type.
func ListWorkflows(ctx context.Context, q Querier) ([]*host.WorkflowDefinition, error) {
	rows, err := q.Query(ctx, `SELECT definition FROM workflows ORDER BY workflow_type`)
	if err != nil {
		return nil, err
	}
	return CollectRows(rows, ScanWorkflowDefinition)
}

// workflowDef reads a definition in the transaction; a missing one is a
// validation error naming field.
func workflowDef(ctx context.Context, q Querier, op, field, workflowType string) (*host.WorkflowDefinition, error) {
	d, err := ScanWorkflowDefinition(q.QueryRow(ctx, `SELECT definition FROM workflows WHERE workflow_type = $1`, workflowType))
	if errors.Is(err, ErrNoRows) {
		return nil, host.Invalid(op, field, "no workflow %q is registered", workflowType)
	}
	return d, err
}

// StartWorkflow finds or creates the record st names (st validated, its
// tenant set; see host.Workflows). Two writers starting one instance at
// once: one creates it, the other finds it (created false).
func StartWorkflow(ctx context.Context, tx WorkflowTx, st *host.WorkflowStart, now time.Time) (*host.WorkflowRecord, bool, error) {
	r, isNew, err := findOrNewRecord(ctx, tx, "start workflow", "workflow_type", st, now)
	if err != nil {
		return nil, false, err
	}
	r, created, err := ClaimWorkflow(ctx, tx, r, isNew)
	if err != nil || !created {
		return r, false, err
	}
	if err := tx.Event(host.EventWorkflowCreated, "", "", WorkflowData(r, nil)); err != nil {
		return nil, false, err
	}
	return r, true, enterState(ctx, tx, r, "", now)
}

// findOrNewRecord finds the tenant's record of st's type and instance
// key (isNew false), or builds a new one, checked against its definition
// but not inserted (ClaimWorkflow does), so that a caller with more to
// check can still refuse without having written anything. typeField names
// the field that gave the workflow type in errors.
func findOrNewRecord(ctx context.Context, q Querier, op, typeField string, st *host.WorkflowStart, now time.Time) (*host.WorkflowRecord, bool, error) {
	r, err := ScanWorkflowRecord(q.QueryRow(ctx, selectInstance, st.Tenant, st.WorkflowType, st.InstanceKey))
	if err == nil {
		return r, false, nil
	}
	if !errors.Is(err, ErrNoRows) {
		return nil, false, err
	}
	def, err := workflowDef(ctx, q, op, typeField, st.WorkflowType)
	if err != nil {
		return nil, false, err
	}
	r, err = NewWorkflowRecord(op, host.NewID("wf"), st, def, now)
	return r, true, err
}

// ClaimWorkflow inserts the new record r (isNew), or locks the existing
// record of its tenant, type and instance key: the one r is, or the one
// another writer inserted since findOrNewRecord looked (the insert waits
// for that writer's transaction, then does nothing; under SQLite's single
// writer it always inserts). It returns the record and whether this call
// created it.
func ClaimWorkflow(ctx context.Context, tx Tx, r *host.WorkflowRecord, isNew bool) (*host.WorkflowRecord, bool, error) {
	if isNew {
		n, err := tx.Exec(ctx, `INSERT INTO workflow_records (`+WorkflowRecordColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, 0)
			ON CONFLICT (tenant, workflow_type, instance_key) DO NOTHING`,
			r.WorkflowID, r.Tenant, r.WorkflowType, r.InstanceKey, r.CurrentState, string(r.Context), string(r.Status),
			host.FormatTime(r.CreatedAt), host.FormatTime(r.UpdatedAt))
		if err != nil || n == 1 {
			return r, err == nil, err
		}
	}
	cur, err := ScanWorkflowRecord(tx.QueryRow(ctx, selectInstance+tx.Dialect().LockRows, r.Tenant, r.WorkflowType, r.InstanceKey))
	return cur, false, err
}

// enterState enqueues the task of r's current state if it emits a task
// intent (event workflow_task_created; see StateIntent).
func enterState(ctx context.Context, tx WorkflowTx, r *host.WorkflowRecord, attemptID string, now time.Time) error {
	const op = "workflow task"
	def, err := workflowDef(ctx, tx, op, "workflow_type", r.WorkflowType)
	if err != nil {
		return err
	}
	intent := StateIntent(r, def)
	if intent == nil {
		return nil
	}
	t, err := NewTask(op, intent, 0, now)
	if err != nil {
		return err
	}
	t.Tenant = r.Tenant
	if err := tx.InsertTaskFor(ctx, t, attemptID); err != nil {
		return err
	}
	return tx.Event(host.EventWorkflowTaskCreated, t.TaskID, attemptID, WorkflowData(r, map[string]any{"task_type": t.TaskType}))
}

// ListWorkflowRecords lists records, newest first (see host.Workflows).
func ListWorkflowRecords(ctx context.Context, q Querier, f host.WorkflowRecordFilter) ([]*host.WorkflowRecord, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := q.Query(ctx, `SELECT `+WorkflowRecordColumns+` FROM workflow_records
		WHERE ($1 = '' OR tenant = $1) AND ($2 = '' OR workflow_type = $2) AND ($4 = '' OR instance_key = $4) ORDER BY seq DESC LIMIT $3`,
		f.Tenant, f.WorkflowType, limit, f.InstanceKey)
	if err != nil {
		return nil, err
	}
	return CollectRows(rows, ScanWorkflowRecord)
}

// CancelWorkflowRecord cancels the tenant's active or blocked record id.
func CancelWorkflowRecord(ctx context.Context, tx Tx, tenant, id string, now time.Time) (*host.WorkflowRecord, error) {
	const op = "cancel workflow record"
	r, err := LoadWorkflowRecord(ctx, tx, tx.Dialect().LockRows, tenant, id)
	if errors.Is(err, ErrNoRows) {
		return nil, host.Errorf(op, id, host.ErrNotFound, "")
	}
	if err != nil {
		return nil, err
	}
	if r.Status != host.WorkflowActive && r.Status != host.WorkflowBlocked {
		return nil, host.Errorf(op, id, host.ErrConflict, "the record is %s", r.Status)
	}
	from := r.Status
	r.Status = host.WorkflowCanceled
	if err := saveRecord(ctx, tx, r, now); err != nil {
		return nil, err
	}
	return r, tx.Event(host.EventWorkflowCanceled, "", "", WorkflowData(r, map[string]any{"from": from}))
}

// saveRecord writes r's state, status and completed_at, updated at now.
func saveRecord(ctx context.Context, tx Tx, r *host.WorkflowRecord, now time.Time) error {
	r.UpdatedAt = Stored(now)
	var completed *string
	if r.CompletedAt != nil {
		c := host.FormatTime(*r.CompletedAt)
		completed = &c
	}
	_, err := tx.Exec(ctx, `UPDATE workflow_records SET current_state = $1, status = $2, updated_at = $3, completed_at = $4, transitions = $5 WHERE workflow_id = $6`,
		r.CurrentState, string(r.Status), host.FormatTime(now), completed, r.Transitions, r.WorkflowID)
	return err
}

// CheckWorkflowRef checks that an intent's workflow_ref names a record of
// tenant with that instance_key and a state of its definition.
func CheckWorkflowRef(ctx context.Context, q Querier, op, tenant string, ref *host.WorkflowRef) error {
	r, err := LoadWorkflowRecord(ctx, q, "", tenant, ref.WorkflowID)
	if errors.Is(err, ErrNoRows) {
		return host.Invalid(op, "workflow_ref.workflow_id", "no workflow record %s (start it first)", ref.WorkflowID)
	}
	if err != nil {
		return err
	}
	if r.InstanceKey != ref.InstanceKey {
		return host.Invalid(op, "workflow_ref.instance_key", "record %s has instance_key %q", r.WorkflowID, r.InstanceKey)
	}
	def, err := workflowDef(ctx, q, op, "workflow_ref.workflow_id", r.WorkflowType)
	if err != nil {
		return err
	}
	if def.State(ref.StateID) == nil {
		return host.Invalid(op, "workflow_ref.state_id", "%q is not a state of workflow %s", ref.StateID, r.WorkflowType)
	}
	return nil
}

// ApplyWorkflowSignal applies the verified signal of completed task t to
// the record its workflow_ref names, locked (writers settling tasks of
// one record take turns), and says what it did (see host.Workflows for
// the rules).
func ApplyWorkflowSignal(ctx context.Context, tx WorkflowTx, quotas host.StoreQuotas, t *host.TaskRecord, signal, attemptID string, now time.Time) (string, error) {
	r, err := LoadWorkflowRecord(ctx, tx, tx.Dialect().LockRows, t.Tenant, t.WorkflowRef.WorkflowID)
	if errors.Is(err, ErrNoRows) {
		return SignalStale, nil
	}
	if err != nil {
		return "", err
	}
	if r.Status != host.WorkflowActive || r.CurrentState != t.WorkflowRef.StateID {
		return SignalStale, nil
	}
	def, err := workflowDef(ctx, tx, "workflow signal", "workflow_type", r.WorkflowType)
	if err != nil {
		return "", err
	}
	next, completes := "", false
	if st := def.State(r.CurrentState); st != nil {
		next, completes = st.Next(signal), st.Completes(signal)
	}
	base := map[string]any{"signal": signal, "from_task_id": t.TaskID}
	if data, blocked := SignalBlocks(quotas, r, next, completes, base); blocked {
		r.Status = host.WorkflowBlocked
		if err := saveRecord(ctx, tx, r, now); err != nil {
			return "", err
		}
		return SignalBlocked, tx.Event(host.EventWorkflowBlocked, t.TaskID, attemptID, WorkflowData(r, data))
	}
	if next != "" {
		from := r.CurrentState
		r.CurrentState = next
		r.Transitions++
		if err := saveRecord(ctx, tx, r, now); err != nil {
			return "", err
		}
		if err := tx.Event(host.EventWorkflowTransitioned, t.TaskID, attemptID,
			WorkflowData(r, map[string]any{"signal": signal, "from_task_id": t.TaskID, "from_state": from, "to_state": next})); err != nil {
			return "", err
		}
	}
	if completes {
		done := Stored(now)
		r.Status, r.CompletedAt = host.WorkflowCompleted, &done
		if err := saveRecord(ctx, tx, r, now); err != nil {
			return "", err
		}
		return SignalCompleted, tx.Event(host.EventWorkflowCompleted, t.TaskID, attemptID, WorkflowData(r, base))
	}
	return SignalTransitioned, enterState(ctx, tx, r, attemptID, now)
}

// SensorWorkflow finds, or builds without inserting, the record an
// accepted sensor event's proposed_workflow names: the tenant's record of
// that template (workflow_type) and instance_key (created true if new;
// ClaimWorkflow inserts it once the whole event is known to apply).
func SensorWorkflow(ctx context.Context, q Querier, ev *host.SensorEvent, tenant string, now time.Time) (*host.WorkflowRecord, bool, error) {
	w := ev.ProposedWorkflow
	st := host.WorkflowStart{WorkflowType: w.Template, InstanceKey: w.InstanceKey, State: w.State, Context: w.Context, Tenant: tenant}
	r, created, err := findOrNewRecord(ctx, q, "sensor event", "proposed_workflow.template", &st, now)
	var he *host.Error
	if errors.As(err, &he) && he.Field == "state" {
		he.Field = "proposed_workflow.state"
	}
	return r, created, err
}

// SensorWorkflowEvents appends sensor_workflow_created (and enqueues the
// task of its first state) for the record r the sensor event created
// (ClaimWorkflow inserted it), or sensor_workflow_deduped for an existing
// record (locked by ClaimWorkflow): nothing of it changes, except that a
// blocked record is woken (active again, its current state entered again,
// data.woken true).
func SensorWorkflowEvents(ctx context.Context, tx WorkflowTx, r *host.WorkflowRecord, created bool, sev *host.SensorEventRecord, attemptID string, now time.Time) error {
	evType, woken := host.EventSensorWorkflowDeduped, false
	switch {
	case created:
		evType = host.EventSensorWorkflowCreated
	case r.Status == host.WorkflowBlocked:
		r.Status, woken = host.WorkflowActive, true
		if err := saveRecord(ctx, tx, r, now); err != nil {
			return err
		}
	}
	if err := tx.Event(evType, "", attemptID, WorkflowData(r, map[string]any{"record_id": sev.RecordID, "sensor_id": sev.Event.SensorID,
		"woken": woken})); err != nil {
		return err
	}
	if !created && !woken {
		return nil
	}
	return enterState(ctx, tx, r, attemptID, now)
}
