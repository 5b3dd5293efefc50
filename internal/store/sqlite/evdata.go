package sqlite

import (
	"encoding/json"
	"strconv"

	"github.com/packrun/packrun/host"
)

// evData builds an event's data object by appending, for the events every
// task writes (several per task, all inside the single writer, where
// marshalling maps through reflection was a tenth of the writer's time).
// Keys must be added in sorted order, so the bytes are exactly what
// json.Marshal of the equivalent map would produce (TestEvDataMatchesMarshal).
type evData struct {
	b []byte
	// tenant is the value of a "tenant" key (storecore.EventTenant).
	tenant string
}

func (d *evData) key(k string) {
	if len(d.b) == 0 {
		d.b = append(d.b, '{')
	} else {
		d.b = append(d.b, ',')
	}
	d.b = appendJSONString(d.b, k)
	d.b = append(d.b, ':')
}

func (d *evData) str(k, v string) *evData {
	if k == "tenant" {
		d.tenant = v
	}
	d.key(k)
	d.b = appendJSONString(d.b, v)
	return d
}

func (d *evData) int(k string, v int64) *evData {
	d.key(k)
	d.b = strconv.AppendInt(d.b, v, 10)
	return d
}

// value adds anything else, marshalled as json.Marshal would inside a map
// (not a tenant: str).
func (d *evData) value(k string, v any) *evData {
	d.key(k)
	raw, err := json.Marshal(v)
	if err != nil {
		raw = []byte("null") // event data is built from the store's own values
	}
	d.b = append(d.b, raw...)
	return d
}

func (d *evData) bytes() []byte {
	if len(d.b) == 0 {
		return []byte("{}")
	}
	return append(d.b, '}')
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

// eventData appends an event whose data is already encoded.
func (s *Store) eventData(tx *wtx, typ, taskID, attemptID string, d *evData) (*host.Event, error) {
	e := &host.Event{Type: typ, TaskID: taskID, AttemptID: attemptID, Data: d.bytes()}
	return e, s.appendEvent(tx, e, d.tenant)
}
