package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/packrun/packrun/host/schema"
)

// Sensor events (the agent runtime schema §14), and packrun's own for an expired or
// refused one.
const (
	// EventSensorEventRecorded: an event was accepted (data.record_id,
	// sensor_id, dedupe_key, status).
	EventSensorEventRecorded = "sensor_event_recorded"
	// EventSensorEventDeduped: an event repeated an accepted one's
	// (sensor_id, dedupe_key) and created nothing (data.duplicate_of).
	EventSensorEventDeduped = "sensor_event_deduped"
	// EventSensorTaskCreated: an accepted event's proposed_task was
	// enqueued (the event's task_id is the task).
	EventSensorTaskCreated = "sensor_task_created"
	// EventSensorEventExpired: an event arrived past its
	// freshness_deadline and created nothing.
	EventSensorEventExpired = "sensor_event_expired"
	// EventSensorEventRefused: an event an attempt staged could not be
	// applied when the task completed (data.detail says why).
	EventSensorEventRefused = "sensor_event_refused"
)

// SensorEventSchema is the id of the SensorEvent schema.
const SensorEventSchema = "agent-runtime/sensor.event/v1"

// MaxSensorEventBytes caps one encoded SensorEvent.
const MaxSensorEventBytes = MaxPayloadBytes + 128<<10

// MaxSensorEvents caps the events one attempt may stage (sensor_emit
// calls and its output's sensor_events together).
const MaxSensorEvents = 100

// WorkflowsNotSupported is the detail of events recorded before workflows
// existed (status workflow_unsupported); no new event gets it.
const WorkflowsNotSupported = "proposed_workflow not supported yet: workflows arrive with issue 17"

// SensorEvent is what a sensor reports (the agent runtime schema §5, field names as
// written there): grounded work pushed into the queue. Times are RFC 3339.
type SensorEvent struct {
	SensorID          string            `json:"sensor_id"`
	EventID           string            `json:"event_id"`
	ObservedAt        string            `json:"observed_at"`
	SourceRef         string            `json:"source_ref"`
	DedupeKey         string            `json:"dedupe_key"`
	FreshnessDeadline string            `json:"freshness_deadline,omitempty"`
	Payload           json.RawMessage   `json:"payload"`
	ProposedTask      *TaskIntent       `json:"proposed_task,omitempty"`
	ProposedWorkflow  *ProposedWorkflow `json:"proposed_workflow,omitempty"`
}

// ProposedWorkflow is SensorEvent.proposed_workflow.
type ProposedWorkflow struct {
	Template    string          `json:"template"`
	InstanceKey string          `json:"instance_key"`
	State       string          `json:"state,omitempty"`
	Context     json.RawMessage `json:"context,omitempty"`
}

// SensorEventStatus is what the host did with an event.
type SensorEventStatus string

const (
	// Accepted (they hold the dedupe key):
	SensorRecorded            SensorEventStatus = "recorded"             // nothing proposed
	SensorTaskCreated         SensorEventStatus = "task_created"         // proposed_task enqueued
	SensorWorkflowCreated     SensorEventStatus = "workflow_created"     // proposed_workflow created its record (and no proposed_task)
	SensorWorkflowDeduped     SensorEventStatus = "workflow_deduped"     // proposed_workflow's record existed (and no proposed_task)
	SensorWorkflowUnsupported SensorEventStatus = "workflow_unsupported" // recorded before workflows existed: see WorkflowsNotSupported
	// Not accepted:
	SensorDeduped SensorEventStatus = "deduped" // same (sensor_id, dedupe_key) as an accepted one
	SensorExpired SensorEventStatus = "expired" // past freshness_deadline
	SensorRefused SensorEventStatus = "refused" // a guest's invalid event, recorded when its attempt completed
)

// SensorEventRecord is one event as the host recorded it.
type SensorEventRecord struct {
	RecordID string            `json:"record_id"`
	Status   SensorEventStatus `json:"status"`
	// Detail says why an event was not applied, or what of it was not.
	Detail string `json:"detail,omitempty"`
	// TaskID is the task its proposed_task became.
	TaskID string `json:"task_id,omitempty"`
	// WorkflowID is the workflow record its proposed_workflow created or
	// found.
	WorkflowID string `json:"workflow_id,omitempty"`
	// DuplicateOf is the record a deduped event repeated.
	DuplicateOf string `json:"duplicate_of,omitempty"`
	// Origin is who reported it: "api", "task:<id>" or "attempt:<id>".
	Origin     string      `json:"origin"`
	Tenant     string      `json:"tenant"`
	ReceivedAt time.Time   `json:"received_at"`
	Event      SensorEvent `json:"event"`
}

// SensorEventOptions say whose event RecordSensorEvent records.
type SensorEventOptions struct {
	Tenant string // "" is DefaultTenant
	Origin string // "" is "api"
}

// SensorEventFilter selects recorded events, newest first.
type SensorEventFilter struct {
	SensorID string // "": every sensor
	Tenant   string // "": every tenant
	Origin   string // "": any origin
	Limit    int    // 0 means 100
}

// Sensors records sensor events. Each event is one write: the record, its
// runtime events, and the task its proposed_task becomes. Dedupe is
// durable: among accepted events, (tenant, sensor_id, dedupe_key) is
// unique in the store.
type Sensors interface {
	// RecordSensorEvent applies a decoded event (DecodeSensorEvent): an
	// event past its freshness_deadline is recorded as expired; one
	// repeating an accepted event's dedupe key as deduped (event
	// sensor_event_deduped); otherwise it is accepted (event
	// sensor_event_recorded) and its proposed_task enqueued with source
	// "sensor:<sensor_id>" (events task_enqueued, sensor_task_created).
	// A proposed_task whose task type nothing serves is refused
	// (validation error, nothing stored).
	RecordSensorEvent(ctx context.Context, ev SensorEvent, opts SensorEventOptions) (*SensorEventRecord, error)
	// ApplySensorEvents applies the events a direct invocation (no task)
	// reported, once it completed, in one write: each as
	// RecordSensorEvent does, except that one that cannot be applied is
	// recorded as refused (event sensor_event_refused). Origin defaults
	// to "attempt:<attemptID>".
	ApplySensorEvents(ctx context.Context, evs []SensorEvent, opts SensorEventOptions, attemptID string) ([]*SensorEventRecord, error)
	// ListSensorEvents returns recorded events, newest first.
	ListSensorEvents(ctx context.Context, f SensorEventFilter) ([]*SensorEventRecord, error)
}

// SensorSource is the source of the tasks a sensor's events create.
func SensorSource(sensorID string) string { return "sensor:" + sensorID }

// DecodeSensorEvent decodes and validates a SensorEvent from untrusted JSON
// (an API body, a guest's sensor_emit request, a sensor's output). It
// checks the published schema first (the error names the JSON path at
// fault as its field), then packrun's rules: times are RFC 3339,
// proposed_task is a valid intent whose source, if given, is
// "sensor:<sensor_id>" (it is set when left out). defaultSensor, when not
// empty, is the sensor_id of an event that names none.
func DecodeSensorEvent(b []byte, defaultSensor string) (SensorEvent, error) {
	const op = "sensor event"
	var ev SensorEvent
	if len(b) > MaxSensorEventBytes {
		return ev, &Error{Op: op, Err: &reason{fmt.Sprintf("is %d bytes; the limit is %d", len(b), MaxSensorEventBytes), ErrTooLarge}}
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return ev, Invalid(op, "", "must be a JSON object")
	}
	if dec.More() {
		return ev, Invalid(op, "", "trailing data after the object")
	}
	if _, ok := doc["sensor_id"]; !ok && defaultSensor != "" {
		doc["sensor_id"] = defaultSensor
	}
	if _, ok := doc["sensor_id"].(string); !ok {
		return ev, Invalid(op, "sensor_id", "required: a string")
	}
	if pt, ok := doc["proposed_task"].(map[string]any); ok {
		if _, has := pt["source"]; !has {
			if id, ok := doc["sensor_id"].(string); ok {
				pt["source"] = SensorSource(id)
			}
		}
	}
	if err := schema.ValidateValue(SensorEventSchema, nil, jsonValue(doc)); err != nil {
		if se, ok := err.(*schema.Error); ok {
			return ev, Invalid(op, se.Path, "%s", se.Reason)
		}
		return ev, err
	}
	norm, err := json.Marshal(doc)
	if err != nil {
		return ev, Invalid(op, "", "%v", err)
	}
	strict := json.NewDecoder(bytes.NewReader(norm))
	strict.DisallowUnknownFields()
	if err := strict.Decode(&ev); err != nil {
		return ev, Invalid(op, "", "%v", err)
	}
	return ev, ValidateSensorEvent(&ev)
}

// jsonValue turns json.Number values back into float64 for the schema
// validator (integers stay exact up to 2^53, beyond what any field needs).
func jsonValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonValue(e)
		}
	case []any:
		for i, e := range x {
			x[i] = jsonValue(e)
		}
	case json.Number:
		f, _ := x.Float64()
		return f
	}
	return v
}

// ValidateSensorEvent checks an event's Go rules (DecodeSensorEvent has
// checked the schema): the ids are names, the times RFC 3339, the payload
// an object, proposed_task a valid intent with source
// "sensor:<sensor_id>".
func ValidateSensorEvent(ev *SensorEvent) error {
	const op = "sensor event"
	for _, f := range []struct{ name, v string }{
		{"sensor_id", ev.SensorID}, {"event_id", ev.EventID}, {"source_ref", ev.SourceRef}, {"dedupe_key", ev.DedupeKey},
	} {
		if err := checkName(op, f.name, f.v, maxShortText, false); err != nil {
			return err
		}
	}
	if err := checkTime(op, "observed_at", ev.ObservedAt); err != nil {
		return err
	}
	if ev.FreshnessDeadline != "" {
		if err := checkTime(op, "freshness_deadline", ev.FreshnessDeadline); err != nil {
			return err
		}
	}
	if err := checkObject(op, "payload", ev.Payload); err != nil {
		return err
	}
	if pt := ev.ProposedTask; pt != nil {
		if pt.Source == "" {
			pt.Source = SensorSource(ev.SensorID)
		}
		if pt.Source != SensorSource(ev.SensorID) {
			return Invalid(op, "proposed_task.source", "must be %q (or left out)", SensorSource(ev.SensorID))
		}
		if err := ValidateIntent(pt); err != nil {
			if he, ok := err.(*Error); ok {
				c := *he
				c.Op, c.Field = op, "proposed_task."+c.Field
				return &c
			}
			return err
		}
	}
	if w := ev.ProposedWorkflow; w != nil {
		if err := checkName(op, "proposed_workflow.template", w.Template, maxShortText, false); err != nil {
			return err
		}
		if err := checkName(op, "proposed_workflow.instance_key", w.InstanceKey, maxShortText, false); err != nil {
			return err
		}
		if len(w.Context) > 0 {
			if err := checkObject(op, "proposed_workflow.context", w.Context); err != nil {
				return err
			}
		}
	}
	return nil
}

// Expired reports whether ev is past its freshness_deadline at now.
func (ev *SensorEvent) Expired(now time.Time) bool {
	if ev.FreshnessDeadline == "" {
		return false
	}
	d, err := time.Parse(time.RFC3339, ev.FreshnessDeadline)
	return err == nil && now.After(d)
}

// SensorTaskType is the task type routed to a sensor node: the tasks of
// its schedule run it like any node.
func SensorTaskType(typeID string) string { return "sensor:" + typeID }

// SensorScheduleName is the name of the recurring schedule that runs a
// sensor node on its cadence (packrun schedules pause it to disable the
// sensor).
func SensorScheduleName(typeID string) string { return "sensor:" + typeID }
