package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// eventPage is the answer of GET /v1/events: NextAfter is the seq to pass
// as after for the next page (the last event's, or the after given when
// there is none yet), so a client polling for new events keeps it.
// NextCursor is the same seq as a string, the name every paged route
// uses (next_after stays, deprecated).
type eventPage struct {
	Events     []*host.Event `json:"events"`
	NextCursor string        `json:"next_cursor"`
	NextAfter  int64         `json:"next_after"`
}

// listEvents is GET /v1/events: runtime events in chain order. A token
// sees its tenant's events only (those of its tasks and attempts, and
// those it caused tied to no task: schedule_upserted, api_call, ...),
// admin included. The operator scope, which admin does not imply, sees
// every tenant's and the host's own (dispatch_*, task types, ...), as
// does a server without authentication.
func (s *server) listEvents(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := host.EventFilter{Type: q.Get("type"), TaskID: q.Get("task_id")}
	if f.Type != "" && (len(f.Type) > 64 || strings.Trim(f.Type, "abcdefghijklmnopqrstuvwxyz0123456789_.") != "") {
		return refuse(http.StatusBadRequest, CodeInvalid, "type", "type: must be an event type such as task_finished (lower-case letters, digits, '_' or '.')")
	}
	since, err := sinceParam(q)
	if err != nil {
		return err
	}
	f.Since = since
	cur, name, err := cursorParam(q, "after")
	if err != nil {
		return err
	}
	if f.AfterSeq, err = seqCursor(cur, name, 0, "the seq of the last event seen, an integer from 0"); err != nil {
		return err
	}
	if f.Limit, err = listLimit(q); err != nil {
		return err
	}
	if p := auth.From(r.Context()); !p.Has(auth.ScopeOperator) {
		f.Tenant = p.Tenant
	}
	evs, err := s.cfg.Backend.Events(r.Context(), f)
	if err != nil {
		return err
	}
	page := eventPage{Events: evs, NextAfter: f.AfterSeq}
	if len(evs) > 0 {
		page.NextAfter = evs[len(evs)-1].Seq
	} else {
		page.Events = []*host.Event{}
	}
	page.NextCursor = strconv.FormatInt(page.NextAfter, 10)
	reply(w, http.StatusOK, page)
	return nil
}
