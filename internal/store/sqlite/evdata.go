package sqlite

import (
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// eventData appends an event whose data is already encoded
// (storecore.EventData: appended in sorted key order, the bytes of
// json.Marshal of the same map, without marshalling a map inside the
// writer).
func (s *Store) eventData(tx *wtx, typ, taskID, attemptID string, d *storecore.EventData) (*host.Event, error) {
	e := &host.Event{Type: typ, TaskID: taskID, AttemptID: attemptID, Data: d.Bytes()}
	return e, s.appendEvent(tx, e, d.Tenant())
}
