package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// maxOffset bounds how deep the tasks pages go: a page reads every task
// before it (the store lists tasks newest first, from the top), so past
// this an operator narrows the search instead.
const maxOffset = 10000

// pageParam reads the page parameter: 1 (the default) or more, with
// (page-1)*limit at most maxOffset.
func pageParam(r *http.Request, limit int) (int, error) {
	v := r.URL.Query().Get("page")
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("page %q is not a page number (1, 2, ...)", host.ShortName(v))
	}
	if (n-1)*limit > maxOffset {
		return 0, fmt.Errorf("page %d is too deep: the console pages through the newest %d tasks; narrow the search (status, task type)", n, maxOffset)
	}
	return n, nil
}

// seqParam reads a cursor parameter: an event seq, 0 or more (0 when
// absent).
func seqParam(r *http.Request, name, what string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q is not %s", name, host.ShortName(v), what)
	}
	return n, nil
}

// listTenant is the tenant a list of schedules or workflow records is
// scoped to, as the API scopes it: the token's, or every tenant's ("")
// on a server without authentication.
func listTenant(p *auth.Principal) string {
	if p.Insecure {
		return ""
	}
	return p.Tenant
}

// validEventType is the API's rule for GET /v1/events?type=.
func validEventType(t string) bool {
	return len(t) <= 64 && strings.Trim(t, "abcdefghijklmnopqrstuvwxyz0123456789_.") == ""
}

// eventTypes are offered in the events page's type list (any type may be
// typed in).
var eventTypes = []string{"task_enqueued", "task_claimed", "task_started", "task_attempt_finished", "task_finished",
	"task_retry_scheduled", "task_cancel_requested", "task_retry_requested", "task_resumed", "attempt_recorded",
	"schedule_upserted", "schedule_task_created", "workflow_created", "workflow_transitioned", "workflow_task_created",
	"workflow_completed", "workflow_blocked", "workflow_canceled", "message_accepted", "message_delivered",
	"message_dead_lettered", "sensor_event_recorded", "api_call"}

// statusCount is one status and how many rows are in it.
type statusCount struct {
	Status string
	N      int
}

// taskCounts are counts' tasks in the order of statuses, with the total.
func taskCounts(c *host.TenantCounts) ([]statusCount, int) {
	out, total := make([]statusCount, 0, len(statuses)), 0
	for _, st := range statuses {
		n := c.Tasks[st]
		out = append(out, statusCount{string(st), n})
		total += n
	}
	return out, total
}

func (s *server) counts(w http.ResponseWriter, r *http.Request, ss *session) (*host.TenantCounts, bool) {
	c, err := s.cfg.Backend.Counts(r.Context(), ss.p.Tenant)
	if err != nil {
		s.failErr(w, r, ss, "count", err)
		return nil, false
	}
	return c, true
}

func (s *server) events(w http.ResponseWriter, r *http.Request, ss *session) {
	q := r.URL.Query()
	f := host.EventFilter{Type: q.Get("type"), TaskID: q.Get("task_id")}
	if !validEventType(f.Type) {
		s.fail(w, r, ss, http.StatusBadRequest, fmt.Sprintf("type %q is not an event type such as task_finished (lower-case letters, digits, '_' or '.').", host.ShortName(f.Type)))
		return
	}
	var err error
	if f.AfterSeq, err = seqParam(r, "after", "an event cursor (the seq of the last event seen)"); err != nil {
		s.fail(w, r, ss, http.StatusBadRequest, err.Error()+".")
		return
	}
	if f.Limit, err = limit(r); err != nil {
		s.fail(w, r, ss, http.StatusBadRequest, err.Error()+".")
		return
	}
	// As GET /v1/events: a token sees its tenant's events; the operator
	// scope (which admin does not imply) every tenant's and the host's.
	if !ss.p.Has(auth.ScopeOperator) {
		f.Tenant = ss.p.Tenant
	}
	evs, err := s.cfg.Backend.Events(r.Context(), f)
	if err != nil {
		s.failErr(w, r, ss, "list events", err)
		return
	}
	data := map[string]any{"Events": evs, "Filter": f, "Types": eventTypes, "Live": true, "AllTenants": f.Tenant == ""}
	if len(evs) == f.Limit {
		data["Next"] = evs[len(evs)-1].Seq
	}
	s.render(w, r, http.StatusOK, "events", ss, data)
}

func (s *server) schedules(w http.ResponseWriter, r *http.Request, ss *session) {
	l, err := s.cfg.Backend.Schedules(r.Context(), listTenant(ss.p))
	if err != nil {
		s.failErr(w, r, ss, "list schedules", err)
		return
	}
	s.render(w, r, http.StatusOK, "schedules", ss, map[string]any{"Schedules": l, "Live": true})
}

func (s *server) workflows(w http.ResponseWriter, r *http.Request, ss *session) {
	f := host.WorkflowRecordFilter{WorkflowType: r.URL.Query().Get("type"), Tenant: listTenant(ss.p)}
	n, err := limit(r)
	if err != nil {
		s.fail(w, r, ss, http.StatusBadRequest, err.Error()+".")
		return
	}
	f.Limit = n
	l, err := s.cfg.Backend.WorkflowRecords(r.Context(), f)
	if err != nil {
		s.failErr(w, r, ss, "list workflow records", err)
		return
	}
	s.render(w, r, http.StatusOK, "workflows", ss, map[string]any{"Records": l, "Filter": f, "Live": true})
}

func (s *server) workflow(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	v, err := s.cfg.Backend.WorkflowRecord(r.Context(), ss.p.Tenant, id)
	if err != nil {
		s.failErr(w, r, ss, "workflow record "+host.ShortName(id), err)
		return
	}
	data := map[string]any{"View": v, "Context": pretty(v.Record.Context), "Live": true}
	s.render(w, r, http.StatusOK, "workflow", ss, data)
}

// href is a console path with the query's non-empty values.
func href(path string, kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}
