package storecore

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/message"
)

// The rules of schedules, sensors, workflows, runs and messages that do
// not depend on the database, as both backends apply them.

// TenantOr is t, or host.DefaultTenant for "".
func TenantOr(t string) string {
	if t == "" {
		return host.DefaultTenant
	}
	return t
}

// Stored is t as a store reads it back (host.FormatTime's precision).
func Stored(t time.Time) time.Time {
	s, _ := host.ParseTime(host.FormatTime(t))
	return s
}

// NewSchedule is the schedule spec (validated) creates at now, with id.
func NewSchedule(id string, spec *host.ScheduleSpec, now time.Time) *host.RecurringSchedule {
	return &host.RecurringSchedule{
		ScheduleID: id, Name: spec.Name, Enabled: spec.Enabled == nil || *spec.Enabled,
		IntervalSeconds: spec.IntervalSeconds, NextRunAt: now.Add(time.Duration(spec.IntervalSeconds) * time.Second),
		Task: spec.Task, CreatedAt: now, UpdatedAt: now, Tenant: spec.Tenant,
	}
}

// UpdateSchedule applies u to r at now: the schedule as it becomes, the
// change's name for schedule_upserted (updated, paused or resumed), and
// whether anything changed (if not, nothing is to be written).
func UpdateSchedule(r *host.RecurringSchedule, u host.ScheduleUpdate, now time.Time) (*host.RecurringSchedule, string, bool) {
	c := *r
	change := "updated"
	if u.IntervalSeconds != nil && *u.IntervalSeconds != c.IntervalSeconds {
		c.IntervalSeconds = *u.IntervalSeconds
		c.NextRunAt = now.Add(time.Duration(c.IntervalSeconds) * time.Second)
	}
	if u.Task != nil {
		// As stored, so that the same task compares equal.
		c.Task = *u.Task
		c.Task.Source = host.ScheduleTaskSource(c.ScheduleID)
	}
	if u.Enabled != nil && *u.Enabled != c.Enabled {
		c.Enabled = *u.Enabled
		change = "paused"
		if c.Enabled {
			change = "resumed"
			c.NextRunAt = now.Add(time.Duration(c.IntervalSeconds) * time.Second)
		}
	}
	a, _ := json.Marshal(r.Task)
	b, _ := json.Marshal(c.Task)
	if c.IntervalSeconds == r.IntervalSeconds && c.Enabled == r.Enabled && string(a) == string(b) {
		return r, "", false
	}
	c.UpdatedAt = now
	return &c, change, true
}

// ScheduleEventData is the data of schedule_upserted.
func ScheduleEventData(change string, r *host.RecurringSchedule) map[string]any {
	return map[string]any{
		"change": change, "schedule_id": r.ScheduleID, "name": r.Name, "tenant": r.Tenant, "enabled": r.Enabled,
		"interval_seconds": r.IntervalSeconds, "next_run_at": host.FormatTime(r.NextRunAt), "task_type": r.Task.TaskType,
	}
}

// ScheduleSlotIntent is the intent of r's due slot (its next_run_at) and
// the data of its schedule_task_created event so far.
func ScheduleSlotIntent(r *host.RecurringSchedule) (host.TaskIntent, map[string]any) {
	slot := r.NextRunAt
	intent := r.Task
	intent.Source = host.ScheduleSource(r.ScheduleID, slot)
	intent.AvailableAt = slot.Format(time.RFC3339)
	return intent, map[string]any{"schedule_id": r.ScheduleID, "name": r.Name, "slot": slot.Unix(), "source": intent.Source}
}

// SensorEventData is the data of the event recording r (origin and
// tenant as applied).
func SensorEventData(r *host.SensorEventRecord) map[string]any {
	ev := &r.Event
	data := map[string]any{"record_id": r.RecordID, "sensor_id": ev.SensorID, "event_id": ev.EventID, "dedupe_key": ev.DedupeKey,
		"status": r.Status, "origin": r.Origin, "tenant": r.Tenant}
	if r.DuplicateOf != "" {
		data["duplicate_of"] = r.DuplicateOf
	}
	if r.WorkflowID != "" {
		data["workflow_id"] = r.WorkflowID
	}
	if r.Detail != "" {
		data["detail"] = r.Detail
	}
	return data
}

// SensorEventColumns are sensor_events' columns, in the order both stores
// write and ScanSensorEvent reads them.
const SensorEventColumns = `record_id, tenant, sensor_id, event_id, dedupe_key, status, detail, task_id, duplicate_of, origin, event, received_at, workflow_id`

// AcceptedSensorStatuses are the statuses that hold an event's dedupe key
// (the partial unique index sensor_events_dedupe says the same), as an SQL
// list.
const AcceptedSensorStatuses = `('recorded', 'task_created', 'workflow_unsupported', 'workflow_created', 'workflow_deduped')`

// CheckSensorEvent validates ev and says under which tenant (the default
// if none) and origin ("api" if none) it is recorded.
func CheckSensorEvent(op string, ev *host.SensorEvent, opts host.SensorEventOptions) (tenant, origin string, err error) {
	if err := host.ValidateSensorEvent(ev); err != nil {
		return "", "", err
	}
	tenant = TenantOr(opts.Tenant)
	if err := host.CheckTenant(op, tenant); err != nil {
		return "", "", err
	}
	origin = opts.Origin
	if origin == "" {
		origin = "api"
	}
	return tenant, origin, nil
}

// ErrNoRoute refuses a sensor event's proposed_task whose task type
// nothing serves.
func ErrNoRoute(taskType string) error {
	return host.Invalid("sensor event", "proposed_task.task_type", "no installed pack serves %q", taskType)
}

// NewWorkflowRecord builds the record st starts (validated, of def), at
// now; op and the errors' fields as the caller's.
func NewWorkflowRecord(op, id string, st *host.WorkflowStart, def *host.WorkflowDefinition, now time.Time) (*host.WorkflowRecord, error) {
	state := st.State
	if state == "" {
		state = def.InitialState
	} else if def.State(state) == nil {
		return nil, host.Invalid(op, "state", "%q is not a state of workflow %s", state, def.WorkflowType)
	}
	now = Stored(now)
	r := &host.WorkflowRecord{WorkflowID: id, WorkflowType: st.WorkflowType, InstanceKey: st.InstanceKey,
		CurrentState: state, Status: host.WorkflowActive, CreatedAt: now, UpdatedAt: now, Tenant: st.Tenant}
	if len(st.Context) > 0 && string(st.Context) != "null" {
		r.Context = evidence.CompactJSON(st.Context)
	}
	return r, nil
}

// WorkflowData is the data of a workflow event about r, with extra.
func WorkflowData(r *host.WorkflowRecord, extra map[string]any) map[string]any {
	d := map[string]any{"workflow_id": r.WorkflowID, "workflow_type": r.WorkflowType, "instance_key": r.InstanceKey,
		"state": r.CurrentState, "status": r.Status, "tenant": r.Tenant}
	for k, v := range extra {
		d[k] = v
	}
	return d
}

// StateIntent is the task intent of r's current state of def, nil if the
// state emits none: its task_type, default profile and skills, the
// record's context as payload ({} for null), source host.WorkflowSource
// and a workflow_ref naming the record and state.
func StateIntent(r *host.WorkflowRecord, def *host.WorkflowDefinition) *host.TaskIntent {
	st := def.State(r.CurrentState)
	if st == nil || !st.EmitsTaskIntent {
		return nil
	}
	payload := r.Context
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	return &host.TaskIntent{TaskType: st.TaskType, Source: host.WorkflowSource(r.WorkflowID), Subject: r.InstanceKey,
		RequestedProfileID: st.DefaultProfileID, SkillIDs: st.DefaultSkillIDs, Payload: payload,
		WorkflowRef: &host.WorkflowRef{WorkflowID: r.WorkflowID, StateID: st.StateID, InstanceKey: r.InstanceKey}}
}

// What a completing task's workflow signal did, in task_attempt_finished's
// data.workflow.
const (
	SignalTransitioned = "transitioned"
	SignalCompleted    = "completed"
	SignalBlocked      = "blocked"
	SignalStale        = "stale"
)

// NumberRunEvents numbers evs from next for run runID at now; payload
// and data carry the same detail.
func NumberRunEvents(runID string, next int, evs []host.RunEvent, now time.Time) {
	for i := range evs {
		e := &evs[i]
		e.Seq, e.RunID, e.At = next+i+1, runID, now
		if len(e.Payload) == 0 {
			e.Payload = json.RawMessage(`{}`)
		}
		e.Data = e.Payload
	}
}

// LeaseMillis is a run lease's end as stored (Unix milliseconds; 0 for
// none), and LeaseTime reads it back.
func LeaseMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// LeaseTime is LeaseMillis read back.
func LeaseTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// CheckRunAdvance refuses an advance of r (held by holder now) that the
// run's state does not allow: a terminal run, or one that another runner
// holds when the caller names itself (fenced).
func CheckRunAdvance(r *host.Run, holder string) error {
	if host.RunTerminal(r.Status) {
		return host.Errorf("advance run", r.RunID, host.ErrConflict, "the run is already %s", r.Status)
	}
	if holder != "" && r.Holder != holder {
		return host.Errorf("advance run", r.RunID, host.ErrConflict, "the run is held by runner %q now, not %q: its lease ran out and another runner continues it", r.Holder, holder)
	}
	return nil
}

// CheckMessageInput checks what the bus hands over (the codecs checked
// the document itself).
func CheckMessageInput(op string, in *host.MessageInput) error {
	switch {
	case in.MessageID == "" || len(in.MessageID) > 256:
		return host.Invalid(op, "message_id", "must be 1 to 256 bytes")
	case len(in.Hash) != 64:
		return host.Invalid(op, "hash", "must be the 64 hex digits of the message's SHA-256")
	case in.Sender == "":
		return host.Invalid(op, "sender", "required")
	case len(in.Document) > host.MaxMessageBytes:
		return host.Errorf(op, in.MessageID, host.ErrTooLarge, "message is %d bytes; the limit is %d", len(in.Document), host.MaxMessageBytes)
	}
	if err := abi.CheckTopic(in.Topic); err != nil {
		return host.Invalid(op, "topic", "%v", err)
	}
	return host.CheckTenant(op, TenantOr(in.Tenant))
}

// CheckChainHead checks in against its sender's chain head (hash, of
// message headID; found false if the sender has none yet): a message with
// a prev_truth_state must name the head (the first one packrun sees starts
// the chain); once a sender has sent one (chained), every later message
// must carry one.
func CheckChainHead(in *host.MessageInput, found bool, head, headID string, chained bool) error {
	const op = "publish message"
	switch {
	case found && in.PrevHash != "" && in.PrevHash != head:
		return host.Invalid(op, "prev_truth_state", "is %s, but sender %s's previous accepted message %s has hash %s: a gap or a fork in its chain",
			in.PrevHash, in.Sender, headID, head)
	case found && in.PrevHash == "" && chained:
		return host.Invalid(op, "prev_truth_state", "is missing, but sender %s chains its messages: it must be %s, the hash of its previous accepted message %s",
			in.Sender, head, headID)
	}
	return nil
}

// MessageConflict refuses a message whose id was accepted with another
// hash.
func MessageConflict(in *host.MessageInput, hash string) error {
	return host.Errorf("publish message", in.MessageID, host.ErrConflict, "message id %s was accepted with hash %s; this message's hash is %s", in.MessageID, hash, in.Hash)
}

// DuplicateData is the data of message_duplicate.
func DuplicateData(in *host.MessageInput, tenant, hash string) map[string]any {
	d := map[string]any{"message_id": in.MessageID, "hash": hash, "origin": in.Origin, "tenant": tenant}
	if in.By != "" {
		d["by"] = in.By
	}
	return d
}

// AcceptedData is the data of message_accepted.
func AcceptedData(in *host.MessageInput, tenant string, deliveries int) map[string]any {
	data := map[string]any{"message_id": in.MessageID, "hash": in.Hash, "model_hash": host.ContentHash(in.Model), "format": in.Format,
		"topic": in.Topic, "sender": in.Sender, "origin": in.Origin, "tenant": tenant, "deliveries": deliveries,
		"direction": in.Log.Direction, "status": in.Log.Status, "latency_ms": in.Log.LatencyMs, "evidence_count": in.Log.EvidenceCount}
	for k, v := range map[string]string{"reply_to": in.ReplyTo, "signed_by": in.SignedBy, "prev_hash": in.PrevHash, "to": in.To, "by": in.By} {
		if v != "" {
			data[k] = v
		}
	}
	if in.Log.Confidence != nil {
		data["confidence"] = *in.Log.Confidence
	}
	return data
}

// AcceptedRecord is the record of in, accepted for tenant at now
// (without its seqs and deliveries).
func AcceptedRecord(in *host.MessageInput, tenant string, now time.Time) *host.MessageRecord {
	rec := &host.MessageRecord{Tenant: tenant, MessageID: in.MessageID, Format: in.Format, Document: in.Document, Model: in.Model,
		Hash: in.Hash, Sender: in.Sender, To: in.To, Topic: in.Topic, Kind: in.Kind, ReplyTo: in.ReplyTo, Priority: in.Priority,
		PrevHash: in.PrevHash, SignedBy: in.SignedBy, Origin: in.Origin, AcceptedAt: now, Deliveries: []host.Delivery{}}
	if !in.ExpiresAt.IsZero() {
		rec.ExpiresAt = &in.ExpiresAt
	}
	return rec
}

// deliveryPayload is the payload of a subscriber's task
// (host.DeliveryPayload's fields): the message as accepted.
type deliveryPayload struct {
	MessageID string          `json:"message_id"`
	Topic     string          `json:"topic"`
	Sender    string          `json:"sender"`
	ReplyTo   string          `json:"reply_to,omitempty"`
	Format    string          `json:"format"`
	Document  json.RawMessage `json:"document"`
}

// DeliveryIntent is the intent of sub's task for message in.
func DeliveryIntent(in *host.MessageInput, sub host.Subscription) (*host.TaskIntent, error) {
	payload, err := json.Marshal(deliveryPayload{MessageID: in.MessageID, Topic: in.Topic, Sender: in.Sender, ReplyTo: in.ReplyTo, Format: in.Format, Document: in.Document})
	if err != nil {
		return nil, err
	}
	return &host.TaskIntent{TaskType: sub.TaskType, Source: "message:" + in.MessageID, Subject: in.Topic, Payload: payload,
		Priority: host.Priority(host.MessageQueuePriority(in.Topic, in.Priority))}, nil
}

// TopicBounds says which topics a pattern selects: every one ("*": all
// true), those in [lo, hi) in byte order (topics are letters, digits, '_',
// '-' and '.', so "p.*" is ["p.", "p/")), or exact.
func TopicBounds(pattern string) (all bool, lo, hi, exact string) {
	switch prefix, ok := strings.CutSuffix(pattern, ".*"); {
	case pattern == "*":
		return true, "", "", ""
	case ok:
		return false, prefix + ".", prefix + "/", ""
	}
	return false, "", "", pattern
}

// CheckSubscriptions checks the subscriptions SetPackSubscriptions is
// given for pack.
func CheckSubscriptions(op, pack string, subs []host.Subscription) error {
	for i, sub := range subs {
		if sub.Pack != pack || sub.Node == "" || sub.TaskType == "" || len(sub.Topics) == 0 || len(sub.Topics) > host.MaxSubscriptions {
			return host.Invalid(op, fmt.Sprintf("subscriptions[%d]", i), "must name pack %s, a node, a task type and 1 to %d topic patterns", pack, host.MaxSubscriptions)
		}
		for _, p := range sub.Topics {
			if err := abi.CheckTopicPattern(p); err != nil {
				return host.Invalid(op, fmt.Sprintf("subscriptions[%d].topics", i), "%v", err)
			}
		}
	}
	return nil
}

// AcceptedRef is what a message_accepted event says of its message.
type AcceptedRef struct {
	MessageID string `json:"message_id"`
	Hash      string `json:"hash"`
	ModelHash string `json:"model_hash"`
	Tenant    string `json:"tenant"`
}

// CheckAcceptedMessage checks the message a message_accepted event e
// chained (m, nil if no longer stored): it points back at the event, and
// its document still has the hash the event recorded (its canonical form
// re-hashed) and its model the model hash.
func CheckAcceptedMessage(e *host.Event, m *host.MessageRecord) *host.ChainBreak {
	var d AcceptedRef
	_ = json.Unmarshal(e.Data, &d) // not JSON: d stays empty and the checks below fail
	brk := &host.ChainBreak{Seq: e.Seq, Type: e.Type, MessageID: d.MessageID}
	if m == nil {
		brk.Problem, brk.Detail = host.BreakMessageMissing, fmt.Sprintf("message %s, accepted at event %d, is no longer stored", d.MessageID, e.Seq)
		return brk
	}
	canon, err := message.Canonical(m.Document)
	if err != nil || message.Hash(canon) != d.Hash || m.Hash != d.Hash || host.ContentHash(m.Model) != d.ModelHash || m.EventSeq != e.Seq {
		brk.Problem, brk.Detail = host.BreakMessageHash, fmt.Sprintf("message %s no longer matches what event %d recorded", d.MessageID, e.Seq)
		return brk
	}
	return nil
}

// UnchainedMessage is the break of a message no message_accepted event
// chains.
func UnchainedMessage(id string) *host.ChainBreak {
	return &host.ChainBreak{MessageID: id, Problem: host.BreakMessageUnchain, Detail: fmt.Sprintf("message %s is stored but no message_accepted event chains it", id)}
}

// SignalBlocks says whether a verified signal blocks record r, and the
// data of its workflow_blocked event (base and, for a quota, the reason):
// r's state has neither a transition (next "") nor a completion for it,
// or the transition would pass a quota of q (nil: none). A signal that
// completes the record is never held back.
func SignalBlocks(q host.StoreQuotas, r *host.WorkflowRecord, next string, completes bool, base map[string]any) (map[string]any, bool) {
	switch {
	case completes:
		return nil, false
	case next == "":
		return base, true
	case q == nil:
		return nil, false
	}
	if err := q.WorkflowStep(r); err != nil {
		d := map[string]any{"reason": err.Error()}
		for k, v := range base {
			d[k] = v
		}
		return d, true
	}
	return nil, false
}

// ScheduleSlotRefused is why a due schedule of tenant makes no task for
// its slot under q (nil: none), or "" if it may.
func ScheduleSlotRefused(q host.StoreQuotas, tenant string) string {
	if q == nil {
		return ""
	}
	if err := q.ScheduleSlot(tenant); err != nil {
		return err.Error()
	}
	return ""
}

// OpenTaskStatuses are the statuses of the tasks the queued_tasks quota
// counts (host.TenantUsage.QueuedTasks), as an SQL list.
const OpenTaskStatuses = `('pending', 'running', 'retryable_failure', 'blocked')`

// TenantUsageQuery counts what the quotas bound, per tenant, in one read
// (host.UsageCounter): rows of (kind, tenant, count), kind one of s
// (schedules), w (active workflow records) and t (unfinished tasks); see
// AddUsage.
const TenantUsageQuery = `SELECT 's', tenant, count(*) FROM schedules GROUP BY tenant
UNION ALL SELECT 'w', tenant, count(*) FROM workflow_records WHERE status = 'active' GROUP BY tenant
UNION ALL SELECT 't', tenant, count(*) FROM tasks WHERE status IN ` + OpenTaskStatuses + ` GROUP BY tenant`

// UsageRows is what ScanUsage reads: *sql.Rows and pgx.Rows alike.
type UsageRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ScanUsage reads the rows of TenantUsageQuery into each tenant's usage.
func ScanUsage(rows UsageRows) (map[string]host.TenantUsage, error) {
	out := map[string]host.TenantUsage{}
	for rows.Next() {
		var kind, tenant string
		var n int
		if err := rows.Scan(&kind, &tenant, &n); err != nil {
			return nil, err
		}
		AddUsage(out, kind, tenant, n)
	}
	return out, rows.Err()
}

// AddUsage adds one row of TenantUsageQuery to m.
func AddUsage(m map[string]host.TenantUsage, kind, tenant string, n int) {
	u := m[tenant]
	switch kind {
	case "s":
		u.Schedules = n
	case "w":
		u.ActiveWorkflows = n
	case "t":
		u.QueuedTasks = n
	}
	m[tenant] = u
}

// TenantCountsQuery counts one tenant's rows by status in one read
// (host.TenantCounter): rows of (kind, status, count), kind one of t
// (tasks by status), a (attempts), m (messages) and d (deliveries by
// status); p is the driver's placeholder for the tenant ("?1", "$1").
func TenantCountsQuery(p string) string {
	return `SELECT 't', status, count(*) FROM tasks WHERE tenant = ` + p + ` GROUP BY status
UNION ALL SELECT 'a', '', count(*) FROM attempt_records WHERE tenant = ` + p + `
UNION ALL SELECT 'm', '', count(*) FROM messages WHERE tenant = ` + p + `
UNION ALL SELECT 'd', status, count(*) FROM message_deliveries WHERE tenant = ` + p + ` GROUP BY status`
}

// ScanTenantCounts reads the rows of TenantCountsQuery.
func ScanTenantCounts(rows UsageRows) (*host.TenantCounts, error) {
	out := &host.TenantCounts{Tasks: map[host.TaskStatus]int{}, Deliveries: map[host.DeliveryStatus]int{}}
	for rows.Next() {
		var kind, status string
		var n int
		if err := rows.Scan(&kind, &status, &n); err != nil {
			return nil, err
		}
		switch kind {
		case "t":
			out.Tasks[host.TaskStatus(status)] = n
		case "a":
			out.Attempts = n
		case "m":
			out.Messages = n
		case "d":
			out.Deliveries[host.DeliveryStatus(status)] = n
		}
	}
	return out, rows.Err()
}
