package storecore

import (
	"encoding/json"
	"time"

	"github.com/packrun/packrun/host"
)

// Row is one result row, as database/sql's *sql.Row and *sql.Rows and
// pgx's Row and Rows offer it. The scan functions below read the columns
// both stores keep in the same types (TEXT times and JSON, record bytes),
// in the order of each store's column list for that table.
type Row = interface{ Scan(dest ...any) error }

// ParseTime reads a stored time (host.FormatTime's form); a malformed
// value is the zero time.
func ParseTime(v string) time.Time {
	t, _ := host.ParseTime(v)
	return t
}

// ScanEvent reads a runtime event row.
func ScanEvent(row Row) (*host.Event, error) {
	var e host.Event
	var t, data string
	if err := row.Scan(&e.Seq, &t, &e.Type, &e.TaskID, &e.AttemptID, &data, &e.PrevHash, &e.Hash); err != nil {
		return nil, err
	}
	e.Time = ParseTime(t)
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	return &e, nil
}

// ScanMessage reads an accepted message row.
func ScanMessage(row Row) (*host.MessageRecord, error) {
	var m host.MessageRecord
	var doc, model, expires, accepted string
	if err := row.Scan(&m.Seq, &m.Tenant, &m.MessageID, &m.Format, &doc, &model, &m.Hash, &m.Sender, &m.To, &m.Topic, &m.Kind,
		&m.ReplyTo, &m.Priority, &expires, &m.PrevHash, &m.SignedBy, &m.Origin, &accepted, &m.EventSeq); err != nil {
		return nil, err
	}
	m.Document, m.Model, m.AcceptedAt = json.RawMessage(doc), json.RawMessage(model), ParseTime(accepted)
	if expires != "" {
		t := ParseTime(expires)
		m.ExpiresAt = &t
	}
	return &m, nil
}

// ScanSensorEvent reads a sensor event record row.
func ScanSensorEvent(row Row) (*host.SensorEventRecord, error) {
	var r host.SensorEventRecord
	var sensorID, eventID, dedupe, status, event, received string
	if err := row.Scan(&r.RecordID, &r.Tenant, &sensorID, &eventID, &dedupe, &status, &r.Detail, &r.TaskID, &r.DuplicateOf,
		&r.Origin, &event, &received, &r.WorkflowID); err != nil {
		return nil, err
	}
	r.Status, r.ReceivedAt = host.SensorEventStatus(status), ParseTime(received)
	if err := json.Unmarshal([]byte(event), &r.Event); err != nil {
		return nil, err
	}
	return &r, nil
}

// ScanWorkflowDefinition reads a workflow definition row (its JSON).
func ScanWorkflowDefinition(row Row) (*host.WorkflowDefinition, error) {
	var def string
	if err := row.Scan(&def); err != nil {
		return nil, err
	}
	d := &host.WorkflowDefinition{}
	return d, json.Unmarshal([]byte(def), d)
}
