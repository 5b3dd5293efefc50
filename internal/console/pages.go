package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// page is one page's template set: the layout and the page's body.
type page struct{ t *template.Template }

var funcs = template.FuncMap{
	"pretty": pretty,
	"text":   func(b []byte) string { return string(b) },
	"time": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return ""
			}
			return v.UTC().Format("2006-01-02 15:04:05.000Z")
		case *time.Time:
			if v == nil || v.IsZero() {
				return ""
			}
			return v.UTC().Format("2006-01-02 15:04:05.000Z")
		}
		return ""
	},
	"transition": transition,
	"flag": func(b bool) string {
		if b {
			return "1"
		}
		return ""
	},
	"short": func(s string) string {
		if len(s) > 16 {
			return s[:16] + "…"
		}
		return s
	},
	// query is a query string of the non-empty values: already encoded,
	// so it is not escaped again after the "?" of an href.
	"query": func(kv ...string) template.URL {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				v.Set(kv[i], kv[i+1])
			}
		}
		return template.URL(v.Encode())
	},
}

// pageNames are the templates/<name>.html bodies, each rendered inside
// templates/layout.html.
var pageNames = []string{"login", "error", "packs", "tasks", "task", "attempts", "attempt", "chain", "messages", "message",
	"events", "schedules", "workflows", "workflow"}

func parsePages() map[string]*page {
	out := make(map[string]*page, len(pageNames))
	for _, name := range pageNames {
		t := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html"))
		out[name] = &page{t}
	}
	return out
}

// pretty indents a JSON value for a <pre>; what is not JSON is shown as
// it is.
func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// prettyValue is pretty of v marshalled.
func prettyValue(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// view is what every page's template sees.
type view struct {
	Page      string
	Principal *auth.Principal
	CSRF      string
	// Messages: the console has the Messages pages (its Backend is a
	// MessageReader).
	Messages bool
	// Refresh is how often, in milliseconds, static/live.js polls the
	// page for its live parts (data-live); 0: the page is not live.
	Refresh int64
	Data    map[string]any
}

func (v view) Can(scope string) bool { return v.Principal.Has(auth.Scope(scope)) }

func (s *server) render(w http.ResponseWriter, r *http.Request, status int, name string, ss *session, data map[string]any) {
	v := view{Page: name, Data: data, Messages: s.messages != nil}
	if ss != nil {
		v.Principal, v.CSRF = ss.p, ss.formToken()
	}
	if live, _ := data["Live"].(bool); live && s.cfg.Refresh > 0 && status == http.StatusOK {
		v.Refresh = s.cfg.Refresh.Milliseconds()
	}
	var b bytes.Buffer
	if err := s.pages[name].t.Execute(&b, v); err != nil {
		s.cfg.Log("console template failed", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// limit reads the limit parameter: 1 to 1000, default 50.
func limit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 50, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, fmt.Errorf("limit %q is not a number from 1 to 1000", host.ShortName(v))
	}
	return n, nil
}

func (s *server) packs(w http.ResponseWriter, r *http.Request, ss *session) {
	ps, err := s.cfg.Backend.Packs(r.Context())
	if err != nil {
		s.failErr(w, r, ss, "list packs", err)
		return
	}
	s.render(w, r, http.StatusOK, "packs", ss, map[string]any{"Packs": ps})
}

var statuses = []host.TaskStatus{host.TaskPending, host.TaskRunning, host.TaskCompleted, host.TaskRetryableFailure,
	host.TaskPermanentFailure, host.TaskBlocked, host.TaskOperatorCanceled}

func (s *server) tasks(w http.ResponseWriter, r *http.Request, ss *session) {
	q := r.URL.Query()
	f := host.TaskFilter{Status: host.TaskStatus(q.Get("status")), TaskType: q.Get("task_type")}
	if f.Status != "" && !f.Status.Valid() {
		s.fail(w, r, ss, http.StatusBadRequest, fmt.Sprintf("status %q is not a task status.", host.ShortName(string(f.Status))))
		return
	}
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		http.Redirect(w, r, Prefix+"tasks/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	n, err := limit(r)
	if err != nil {
		s.fail(w, r, ss, http.StatusBadRequest, err.Error()+".")
		return
	}
	pg, err := pageParam(r, n)
	if err != nil {
		s.fail(w, r, ss, http.StatusBadRequest, err.Error()+".")
		return
	}
	// The stores list the newest tasks first from the top: a page is
	// the window after the pages before it, and one more task says
	// whether a next page exists.
	skip := (pg - 1) * n
	f.Limit = skip + n + 1
	ts, err := s.cfg.Backend.Tasks(r.Context(), ss.p.Tenant, f)
	if err != nil {
		s.failErr(w, r, ss, "list tasks", err)
		return
	}
	c, ok := s.counts(w, r, ss)
	if !ok {
		return
	}
	f.Limit = n
	data := map[string]any{"Filter": f, "Statuses": statuses, "Page": pg, "Live": true}
	data["Counts"], data["Total"] = taskCounts(c)
	ts = ts[min(skip, len(ts)):]
	if len(ts) > n {
		ts = ts[:n]
		data["Next"] = href(Prefix+"tasks", "status", string(f.Status), "task_type", f.TaskType, "limit", strconv.Itoa(n), "page", strconv.Itoa(pg+1))
	}
	if pg > 1 {
		data["Prev"] = href(Prefix+"tasks", "status", string(f.Status), "task_type", f.TaskType, "limit", strconv.Itoa(n), "page", strconv.Itoa(pg-1))
	}
	data["Tasks"] = ts
	s.render(w, r, http.StatusOK, "tasks", ss, data)
}

func (s *server) task(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	t, err := s.cfg.Backend.Task(r.Context(), ss.p.Tenant, id)
	if err != nil {
		s.failErr(w, r, ss, "task "+host.ShortName(id), err)
		return
	}
	// Each action is offered only where the store would take it: cancel
	// a task that is not finished (nor asked to be already), retry one
	// host.TaskStatus.Retriable, resume a blocked one whose last attempt
	// suspended.
	data := map[string]any{"Task": t, "Payload": pretty(t.Payload), "Message": r.URL.Query().Get("done"), "Live": true,
		"Cancel": !t.Status.Terminal() && !t.CancelRequested,
		"Retry":  s.retrier != nil && t.Status.Retriable()}
	if t.Outcome != nil {
		data["Outcome"] = prettyValue(t.Outcome)
	}
	if ss.p.Has(auth.ScopeEvidenceRead) || s.resumer != nil && t.Status == host.TaskBlocked {
		as, err := s.cfg.Backend.Attempts(r.Context(), ss.p.Tenant, host.AttemptFilter{TaskID: t.TaskID, Limit: 100})
		if err != nil {
			s.failErr(w, r, ss, "attempts of task "+host.ShortName(id), err)
			return
		}
		if ss.p.Has(auth.ScopeEvidenceRead) {
			data["Attempts"] = as
		}
		data["Resume"] = s.resumer != nil && t.Status == host.TaskBlocked && lastSuspended(t, as)
	}
	s.render(w, r, http.StatusOK, "task", ss, data)
}

// lastSuspended reports whether t's latest attempt (as, newest first)
// suspended: what Queue.Resume asks of a blocked task.
func lastSuspended(t *host.TaskRecord, as []*host.Attempt) bool {
	for _, a := range as {
		if a.Attempt == t.AttemptCount {
			return a.Outcome == abi.Suspended
		}
	}
	return false
}

func (s *server) taskAction(w http.ResponseWriter, r *http.Request, ss *session) {
	id, action := r.PathValue("id"), r.PathValue("action")
	// The backend may name who asks in what it records.
	r = r.WithContext(auth.With(r.Context(), ss.p))
	var op func() (*host.TaskRecord, error)
	switch {
	case action == "cancel":
		op = func() (*host.TaskRecord, error) { return s.cfg.Backend.CancelTask(r.Context(), ss.p.Tenant, id) }
	case action == "retry" && s.retrier != nil:
		op = func() (*host.TaskRecord, error) { return s.retrier.RetryTask(r.Context(), ss.p.Tenant, id) }
	case action == "resume" && s.resumer != nil:
		v := strings.TrimSpace(r.PostFormValue("value"))
		if v == "" {
			v = "null"
		}
		if !json.Valid([]byte(v)) {
			s.fail(w, r, ss, http.StatusBadRequest, "The resume value is not valid JSON (leave it empty for null).")
			return
		}
		op = func() (*host.TaskRecord, error) {
			return s.resumer.ResumeTask(r.Context(), ss.p.Tenant, id, json.RawMessage(v))
		}
	default:
		s.fail(w, r, ss, http.StatusNotFound, fmt.Sprintf("A task cannot be %q here.", host.ShortName(action)))
		return
	}
	t, err := op()
	if err != nil {
		s.failErr(w, r, ss, action+" task "+host.ShortName(id), err)
		return
	}
	http.Redirect(w, r, Prefix+"tasks/"+url.PathEscape(t.TaskID)+"?"+url.Values{"done": {action}}.Encode(), http.StatusSeeOther)
}

func (s *server) attempts(w http.ResponseWriter, r *http.Request, ss *session) {
	q := r.URL.Query()
	f := host.AttemptFilter{TaskID: q.Get("task_id"), Pack: q.Get("pack"), TaskType: q.Get("task_type")}
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		http.Redirect(w, r, Prefix+"attempts/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	n, err := limit(r)
	if err != nil {
		s.fail(w, r, ss, http.StatusBadRequest, err.Error()+".")
		return
	}
	if f.BeforeSeq, err = seqParam(r, "before", "an attempt cursor (the event seq of the last attempt seen)"); err != nil {
		s.fail(w, r, ss, http.StatusBadRequest, err.Error()+".")
		return
	}
	// Keyset paging on the attempts' event seq (newest first): one more
	// attempt says whether a next page exists.
	f.Limit = n + 1
	as, err := s.cfg.Backend.Attempts(r.Context(), ss.p.Tenant, f)
	if err != nil {
		s.failErr(w, r, ss, "list attempts", err)
		return
	}
	c, ok := s.counts(w, r, ss)
	if !ok {
		return
	}
	f.Limit = n
	data := map[string]any{"Filter": f, "Total": c.Attempts, "Live": f.BeforeSeq == 0}
	if len(as) > n {
		as = as[:n]
		data["Next"] = href(Prefix+"attempts", "task_id", f.TaskID, "pack", f.Pack, "task_type", f.TaskType, "limit", strconv.Itoa(n),
			"before", strconv.FormatInt(as[n-1].EventSeq, 10))
	}
	data["Attempts"] = as
	s.render(w, r, http.StatusOK, "attempts", ss, data)
}

// fieldLabels name an attempt's JSON fields for people.
var fieldLabels = map[string]string{
	"input": "Input", "output": "Output", "interrupt": "Interrupt", "logs": "Logs",
	"events": "Cap events", "trace": "Host-call trace", "limits": "Limits",
	"adapter_calls": "Adapter calls", "diagnostics": "Diagnostics",
}

// attemptData is what the attempt page shows of a.
func attemptData(a *host.Attempt) map[string]any {
	type field struct{ Name, Label, Value string }
	var fields []field
	for _, f := range a.JSONFields() {
		if v := pretty(*f.Value); v != "" {
			label := fieldLabels[f.Name]
			if label == "" {
				label = f.Name
			}
			fields = append(fields, field{f.Name, label, v})
		}
	}
	data := map[string]any{"Attempt": a, "Fields": fields}
	if a.Error != nil {
		data["Error"] = prettyValue(a.Error)
	}
	return data
}

func (s *server) attempt(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	a, err := s.cfg.Backend.Attempt(r.Context(), ss.p.Tenant, id)
	if err != nil {
		s.failErr(w, r, ss, "attempt "+host.ShortName(id), err)
		return
	}
	s.render(w, r, http.StatusOK, "attempt", ss, attemptData(a))
}

func (s *server) replay(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	a, err := s.cfg.Backend.Attempt(r.Context(), ss.p.Tenant, id)
	if err != nil {
		s.failErr(w, r, ss, "attempt "+host.ShortName(id), err)
		return
	}
	data := attemptData(a)
	v, err := s.cfg.Backend.Replay(r.Context(), ss.p.Tenant, a.AttemptID)
	if err != nil {
		// A replay that cannot run (module gone, evidence tampered) is
		// the answer the operator asked for, not a failed page.
		data["ReplayError"] = err.Error()
	} else {
		data["Verdict"] = v
		data["Expected"], data["Got"] = prettyValue(v.Expected), prettyValue(v.Got)
		if v.Divergence != nil {
			data["Divergence"] = prettyValue(v.Divergence)
		}
	}
	s.render(w, r, http.StatusOK, "attempt", ss, data)
}

func (s *server) chain(w http.ResponseWriter, r *http.Request, ss *session) {
	rep, err := s.cfg.Backend.Chain(r.Context())
	if err != nil {
		s.failErr(w, r, ss, "verify the evidence chain", err)
		return
	}
	data := map[string]any{"Report": rep}
	// The chain is every tenant's: where it breaks (which names another
	// tenant's attempt) is for admins.
	if rep.Broken != nil && ss.p.Has(auth.ScopeAdmin) {
		data["Broken"] = prettyValue(rep.Broken)
	}
	s.render(w, r, http.StatusOK, "chain", ss, data)
}

// transitionData is what a workflow_transitioned event's data says.
type transitionData struct {
	Signal    string `json:"signal"`
	FromState string `json:"from_state"`
	ToState   string `json:"to_state"`
}

func transition(raw json.RawMessage) transitionData {
	var d transitionData
	_ = json.Unmarshal(raw, &d) // what does not decode shows as empty cells
	return d
}
