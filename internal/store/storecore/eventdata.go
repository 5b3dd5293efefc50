package storecore

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/packrun/packrun/host"
)

// EventData builds an event's data object by appending, for the events
// every task writes (several per task; marshalling maps through
// reflection was a tenth of SQLite's writer's time). Keys must be added in
// sorted order, so the bytes are exactly what json.Marshal of the
// equivalent map produces: the event is the one a map would have made.
type EventData struct {
	b []byte
	// tenant is the value of a "tenant" key (EventTenant).
	tenant string
}

func (d *EventData) key(k string) {
	if len(d.b) == 0 {
		d.b = append(d.b, '{')
	} else {
		d.b = append(d.b, ',')
	}
	d.b = appendJSONString(d.b, k)
	d.b = append(d.b, ':')
}

// Str adds a string.
func (d *EventData) Str(k, v string) *EventData {
	if k == "tenant" {
		d.tenant = v
	}
	d.key(k)
	d.b = appendJSONString(d.b, v)
	return d
}

// Int adds an integer.
func (d *EventData) Int(k string, v int64) *EventData {
	d.key(k)
	d.b = strconv.AppendInt(d.b, v, 10)
	return d
}

// Value adds anything else, marshalled as json.Marshal would inside a map
// (not a tenant: Str).
func (d *EventData) Value(k string, v any) *EventData {
	d.key(k)
	raw, err := json.Marshal(v)
	if err != nil {
		raw = []byte("null") // event data is built from the store's own values
	}
	d.b = append(d.b, raw...)
	return d
}

// Bytes is the object built.
func (d *EventData) Bytes() []byte {
	if len(d.b) == 0 {
		return []byte("{}")
	}
	return append(d.b, '}')
}

// Tenant is the value of the "tenant" key added, if any.
func (d *EventData) Tenant() string { return d.tenant }

// StringsData is the data of an event whose data is a map of strings (an
// API call's audit event, host.Audit), exactly as json.Marshal writes m
// (keys sorted), and its tenant, the "tenant" key's value. It is built by
// the caller before the write, so that the single writer does not
// marshal the map by reflection inside its transaction; nil for a nil m
// (json.Marshal writes null, not an object).
func StringsData(m map[string]string) *EventData {
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	d := &EventData{b: make([]byte, 0, 128)}
	for _, k := range keys {
		d.Str(k, m[k])
	}
	return d
}

// appendAudit appends the audit event au (its data built beforehand by
// StringsData, or nil) through tx.
func appendAudit(tx Tx, au *host.Audit, d *EventData, taskID, attemptID string) error {
	if d == nil {
		return tx.Event(au.Type, taskID, attemptID, au.Data)
	}
	return AppendEventData(tx, au.Type, taskID, attemptID, d)
}

// appendJSONString appends s quoted as encoding/json does; strings with
// nothing to escape (the common case: ids, names, statuses) skip it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			raw, _ := json.Marshal(s)
			return append(b, raw...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// EventDataTx is a Tx that appends an event whose data is built already
// (without marshalling it again).
type EventDataTx interface {
	EventData(typ, taskID, attemptID string, d *EventData) error
}

// AppendEventData appends an event with data d through tx: its
// EventData if it has one, Event otherwise.
func AppendEventData(tx Tx, typ, taskID, attemptID string, d *EventData) error {
	if e, ok := tx.(EventDataTx); ok {
		return e.EventData(typ, taskID, attemptID, d)
	}
	return tx.Event(typ, taskID, attemptID, json.RawMessage(d.Bytes()))
}
