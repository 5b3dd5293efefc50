package api

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// DefaultSource is the source of an enqueued intent that names none.
const DefaultSource = "api"

// enqueue is POST /v1/tasks. Everything is checked before Enqueue, which
// is the only write: a refused request stores nothing.
func (s *server) enqueue(w http.ResponseWriter, r *http.Request) error {
	var opts host.EnqueueOptions
	if v := r.URL.Query().Get("max_attempts"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > host.MaxMaxAttempts {
			return refuse(http.StatusBadRequest, CodeInvalid, "max_attempts", fmt.Sprintf("max_attempts: must be an integer from 1 to %d", host.MaxMaxAttempts))
		}
		opts.MaxAttempts = n
	}
	b, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	// An intent from the API that names no source gets DefaultSource; one
	// that names it wrongly (empty, not a string) is refused.
	in, err := host.DecodeIntent(host.WithSource(b, DefaultSource))
	if err != nil {
		return err
	}
	// Refused here with the API's own answer (422, the command that
	// routes it); what else the intent names, Enqueue checks.
	if err := s.routable(r, "task_type", in.TaskType); err != nil {
		return err
	}
	opts.Tenant = tenantOf(r, "")
	r = withAudit(r, host.AuditTask) // the api_call event rides with the task: one commit
	rec, err := s.enqueueTask(r, in, opts)
	if err != nil {
		return err
	}
	s.recordCall(r, rec.TaskID, "")
	w.Header().Set("Location", "/v1/tasks/"+url.PathEscape(rec.TaskID))
	reply(w, http.StatusCreated, rec)
	return nil
}

// enqueueTask adds the task: through Config.Enqueue (Host.Enqueue), or,
// without one, the same steps on the bare Backend.
func (s *server) enqueueTask(r *http.Request, in host.TaskIntent, opts host.EnqueueOptions) (*host.TaskRecord, error) {
	if s.cfg.Enqueue != nil {
		return s.cfg.Enqueue(r.Context(), in, opts)
	}
	if s.cfg.CheckIntent != nil {
		if err := s.cfg.CheckIntent(r.Context(), &in); err != nil {
			return nil, err
		}
	}
	rec, err := s.cfg.Backend.Enqueue(r.Context(), in, opts)
	if err == nil && s.cfg.Dispatcher != nil {
		s.cfg.Dispatcher.Wake()
	}
	return rec, err
}

type taskList struct {
	Tasks      []*host.TaskRecord `json:"tasks"`
	NextCursor string             `json:"next_cursor,omitempty"`
}

// listTasks is GET /v1/tasks.
func (s *server) listTasks(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := host.TaskFilter{Status: host.TaskStatus(q.Get("status")), TaskType: q.Get("task_type")}
	if f.Status != "" && !f.Status.Valid() {
		return refuse(http.StatusBadRequest, CodeInvalid, "status",
			"status: must be one of pending, running, completed, retryable_failure, permanent_failure, blocked, operator_canceled")
	}
	limit, err := listLimit(q)
	if err != nil {
		return err
	}
	f.Limit = limit
	if p := auth.From(r.Context()); !p.Insecure {
		f.Tenant = p.Tenant
	}
	cur, _, _ := cursorParam(q, "")
	if f.After, err = taskCursor(cur); err != nil {
		return err
	}
	tasks, err := s.cfg.Backend.ListTasks(r.Context(), f)
	if err != nil {
		return err
	}
	if len(tasks) == 0 && f.After != "" {
		// An empty page after a cursor: the end, or a cursor that names
		// no task of the caller's (refused as one that does not exist).
		if t, err := s.cfg.Backend.Task(r.Context(), f.After); err != nil || !owns(r, t.Tenant) {
			return badTaskCursor()
		}
	}
	page := taskList{Tasks: tasks}
	if tasks == nil {
		page.Tasks = []*host.TaskRecord{}
	}
	if len(tasks) > 0 && len(tasks) == cmp.Or(limit, host.DefaultListLimit) {
		page.NextCursor = tasks[len(tasks)-1].TaskID
	}
	reply(w, http.StatusOK, page)
	return nil
}

// sinceParam reads the since query parameter (zero when absent): an RFC
// 3339 time or a duration back from now, as the CLI's --since.
func sinceParam(q url.Values) (time.Time, error) {
	v := q.Get("since")
	if v == "" {
		return time.Time{}, nil
	}
	t, err := host.ParseSince(v, time.Now())
	if err != nil {
		return t, refuse(http.StatusBadRequest, CodeInvalid, "since", "since: must be an RFC 3339 time such as 2026-01-02T15:04:05Z or a duration back from now such as 1h or 7d")
	}
	return t, nil
}

func listLimit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxListLimit {
		return 0, refuse(http.StatusBadRequest, CodeInvalid, "limit", fmt.Sprintf("limit: must be an integer from 1 to %d", MaxListLimit))
	}
	return n, nil
}

// getTask is GET /v1/tasks/{id}.
func (s *server) getTask(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if i := strings.LastIndexByte(id, ':'); i >= 0 && slices.Contains([]string{"cancel", "resume", "retry"}, id[i+1:]) {
		w.Header().Set("Allow", http.MethodPost)
		return refuse(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "", id[i+1:]+" with POST")
	}
	t, err := s.ownTask(r, id)
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, t)
	return nil
}

// ownTask returns a task of the caller's tenant. Another tenant's task is
// refused exactly as one that does not exist.
func (s *server) ownTask(r *http.Request, id string) (*host.TaskRecord, error) {
	t, err := s.cfg.Backend.Task(r.Context(), id)
	if err == nil && !owns(r, t.Tenant) || errors.Is(err, host.ErrNotFound) {
		return nil, refuse(http.StatusNotFound, CodeNotFound, "", fmt.Sprintf("no task %s", host.ShortName(id)))
	}
	return t, err
}

// owns reports whether the caller may see what belongs to tenant ("" is
// the default tenant).
func owns(r *http.Request, tenant string) bool {
	p := auth.From(r.Context())
	if tenant == "" {
		tenant = host.DefaultTenant
	}
	return p.Insecure || p.Tenant == tenant
}

// taskAction is POST /v1/tasks/{id}:<action> (cancel, resume, retry);
// ServeMux cannot match a literal suffix inside a segment, so the action is
// split off here.
func (s *server) taskAction(w http.ResponseWriter, r *http.Request) error {
	seg := r.PathValue("id")
	i := strings.LastIndexByte(seg, ':')
	if i < 0 {
		w.Header().Set("Allow", "GET, HEAD")
		return refuse(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "", "POST to a task needs an action: POST /v1/tasks/{id}:cancel, :resume or :retry")
	}
	id, action := seg[:i], seg[i+1:]
	var do func() (*host.TaskRecord, error)
	switch action {
	case "cancel":
		do = func() (*host.TaskRecord, error) { return s.cfg.Backend.Cancel(r.Context(), id) }
	case "retry":
		do = func() (*host.TaskRecord, error) { return s.cfg.Backend.Retry(r.Context(), id, askedBy(r)) }
	case "resume":
		b, err := s.readObject(w, r)
		if err != nil {
			return err
		}
		var body resumeBody
		if err := decodeStrict(b, &body); err != nil {
			return err
		}
		if len(body.Value) == 0 {
			return refuse(http.StatusBadRequest, CodeInvalid, "value", "value: required (the JSON value the node's openwop_interrupt returns; null is one)")
		}
		do = func() (*host.TaskRecord, error) { return s.cfg.Backend.Resume(r.Context(), id, body.Value, askedBy(r)) }
	default:
		return refuse(http.StatusNotFound, CodeNotFound, "", fmt.Sprintf("unknown task action %q; the actions are cancel, resume and retry", host.ShortName(action)))
	}
	if _, err := s.ownTask(r, id); err != nil {
		return err
	}
	t, err := do()
	if err != nil {
		return err
	}
	s.recordCall(r, t.TaskID, "")
	if action != "cancel" && s.cfg.Dispatcher != nil {
		s.cfg.Dispatcher.Wake()
	}
	reply(w, http.StatusOK, t)
	return nil
}

// askedBy names the caller in the events of an operator control:
// "token:<id> (<name>)", or "api:no-auth" without authentication.
func askedBy(r *http.Request) string {
	p := auth.From(r.Context())
	if p.Insecure {
		return "api:no-auth"
	}
	return fmt.Sprintf("token:%s (%s)", p.TokenID, p.Name)
}

// resumeBody is the body of POST /v1/tasks/{id}:resume.
type resumeBody struct {
	Value json.RawMessage `json:"value"`
}

type attemptList struct {
	Attempts   []*host.Attempt `json:"attempts"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// listAttempts is GET /v1/attempts.
func (s *server) listAttempts(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := refuseTenantField(r, "tenant", q.Get("tenant")); err != nil {
		return err
	}
	// Without authentication, no tenant named lists every tenant's.
	f := host.AttemptFilter{TaskID: q.Get("task_id"), Pack: q.Get("pack"), Tenant: q.Get("tenant")}
	if p := auth.From(r.Context()); !p.Insecure {
		f.Tenant = p.Tenant
	}
	since, err := sinceParam(q)
	if err != nil {
		return err
	}
	f.Since = since
	if f.Limit, err = listLimit(q); err != nil {
		return err
	}
	cur, name, _ := cursorParam(q, "")
	if f.BeforeSeq, err = seqCursor(cur, name, 1, "an integer from 1"); err != nil {
		return err
	}
	atts, err := s.cfg.Backend.ListAttempts(r.Context(), f)
	if err != nil {
		return err
	}
	page := attemptList{Attempts: make([]*host.Attempt, len(atts))}
	for i, a := range atts {
		page.Attempts[i] = a.Document()
	}
	if len(atts) > 0 && len(atts) == cmp.Or(f.Limit, host.DefaultListLimit) {
		page.NextCursor = strconv.FormatInt(atts[len(atts)-1].EventSeq, 10)
	}
	reply(w, http.StatusOK, page)
	return nil
}

// getAttempt is GET /v1/attempts/{id}.
func (s *server) getAttempt(w http.ResponseWriter, r *http.Request) error {
	a, err := s.ownAttempt(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, a.Document())
	return nil
}

// ownAttempt returns an attempt of the caller's tenant; another tenant's
// is refused exactly as one that does not exist.
func (s *server) ownAttempt(r *http.Request, id string) (*host.Attempt, error) {
	a, err := s.cfg.Backend.Attempt(r.Context(), id)
	if err == nil && !owns(r, a.Tenant) || errors.Is(err, host.ErrNotFound) {
		return nil, refuse(http.StatusNotFound, CodeNotFound, "", fmt.Sprintf("no attempt %s", host.ShortName(id)))
	}
	return a, err
}
