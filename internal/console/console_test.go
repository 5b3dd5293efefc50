package console

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/replay"
	"github.com/packrun/packrun/packs"
)

// fakeBackend holds tasks and attempts per tenant and records every
// tenant it was asked for.
type fakeBackend struct {
	mu       sync.Mutex
	tasks    map[string][]*host.TaskRecord // by tenant
	attempts map[string][]*host.Attempt
	tenants  []string // every tenant argument, in order
	canceled []string
	// schedules, records and events are every tenant's (each names its
	// own).
	schedules []*host.RecurringSchedule
	records   []*host.WorkflowRecord
	events    []*host.Event
	eventAsks []host.EventFilter
}

func (b *fakeBackend) Counts(ctx context.Context, tenant string) (*host.TenantCounts, error) {
	b.saw(tenant)
	c := &host.TenantCounts{Tasks: map[host.TaskStatus]int{}, Attempts: len(b.attempts[tenant]), Deliveries: map[host.DeliveryStatus]int{}}
	for _, t := range b.tasks[tenant] {
		c.Tasks[t.Status]++
	}
	return c, nil
}

func (b *fakeBackend) Schedules(ctx context.Context, tenant string) ([]*host.RecurringSchedule, error) {
	b.saw(tenant)
	var out []*host.RecurringSchedule
	for _, sc := range b.schedules {
		if tenant == "" || sc.Tenant == tenant {
			out = append(out, sc)
		}
	}
	return out, nil
}

func (b *fakeBackend) WorkflowRecords(ctx context.Context, f host.WorkflowRecordFilter) ([]*host.WorkflowRecord, error) {
	b.saw(f.Tenant)
	var out []*host.WorkflowRecord
	for _, r := range b.records {
		if (f.Tenant == "" || r.Tenant == f.Tenant) && (f.WorkflowType == "" || r.WorkflowType == f.WorkflowType) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (b *fakeBackend) WorkflowRecord(ctx context.Context, tenant, id string) (*WorkflowView, error) {
	b.saw(tenant)
	for _, r := range b.records {
		if r.WorkflowID == id && r.Tenant == tenant {
			return &WorkflowView{Record: r, Definition: &host.WorkflowDefinition{WorkflowType: r.WorkflowType, InitialState: "plan",
				States: []host.WorkflowState{{StateID: "plan", Transitions: []host.WorkflowTransition{{Signal: "planned", NextState: "act"}}}, {StateID: "act"}}},
				Transitions: []*host.Event{{Seq: 9, Type: host.EventWorkflowTransitioned, TaskID: "task-acme-2",
					Data: json.RawMessage(`{"workflow_id":"` + id + `","signal":"planned","from_state":"plan","to_state":"act"}`)}}}, nil
		}
	}
	return nil, host.Errorf("workflow record", id, host.ErrNotFound, "no such record")
}

func (b *fakeBackend) Events(ctx context.Context, f host.EventFilter) ([]*host.Event, error) {
	b.mu.Lock()
	b.eventAsks = append(b.eventAsks, f)
	b.mu.Unlock()
	var out []*host.Event
	for _, e := range b.events {
		var d struct {
			Tenant string `json:"tenant"`
		}
		_ = json.Unmarshal(e.Data, &d)
		if e.Seq > f.AfterSeq && (f.Tenant == "" || d.Tenant == f.Tenant) && (f.Type == "" || e.Type == f.Type) {
			out = append(out, e)
		}
	}
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func (b *fakeBackend) saw(tenant string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tenants = append(b.tenants, tenant)
}

// consoleHTTPGrant is the http grant of the fake backend's pack.
var consoleHTTPGrant = packs.HTTPGrant{Host: "api.example.com", PathPrefix: "/v1/", Methods: []string{"GET", "POST"},
	Secrets: []packs.HTTPSecret{{Name: "api_token", Bearer: true}}}

func (b *fakeBackend) Packs(ctx context.Context) ([]PackView, error) {
	return []PackView{{
		Pack: &host.InstalledPack{Name: "local.hello.c", Version: "1.0.0", SHA256: "ab12", Signer: "test",
			Provenance: &host.PackProvenance{BuilderID: "https://ci.example/builder"}},
		Manifest: &packs.Manifest{Name: "local.hello.c", Version: "1.0.0",
			Nodes:  []packs.Node{{TypeID: "example.hello", Kind: packs.KindSkill, TaskTypes: []string{"hello.c"}}},
			Grants: packs.Grants{Services: []packs.Service{packs.ServiceConfig}, HTTP: []packs.HTTPGrant{consoleHTTPGrant}}},
	}}, nil
}

func (b *fakeBackend) Tasks(ctx context.Context, tenant string, f host.TaskFilter) ([]*host.TaskRecord, error) {
	b.saw(tenant)
	var out []*host.TaskRecord
	for _, t := range b.tasks[tenant] {
		if f.Status == "" || t.Status == f.Status {
			out = append(out, t)
		}
	}
	return out, nil
}

func (b *fakeBackend) Task(ctx context.Context, tenant, id string) (*host.TaskRecord, error) {
	b.saw(tenant)
	for _, t := range b.tasks[tenant] {
		if t.TaskID == id {
			return t, nil
		}
	}
	return nil, host.Errorf("task", id, host.ErrNotFound, "no such task")
}

func (b *fakeBackend) CancelTask(ctx context.Context, tenant, id string) (*host.TaskRecord, error) {
	t, err := b.Task(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if t.Status.Terminal() {
		return nil, host.Errorf("cancel", id, host.ErrConflict, "task is %s", t.Status)
	}
	b.mu.Lock()
	b.canceled = append(b.canceled, id)
	b.mu.Unlock()
	c := *t
	c.Status = host.TaskOperatorCanceled
	return &c, nil
}

func (b *fakeBackend) Attempts(ctx context.Context, tenant string, f host.AttemptFilter) ([]*host.Attempt, error) {
	b.saw(tenant)
	var out []*host.Attempt
	for _, a := range b.attempts[tenant] {
		if f.TaskID == "" || a.TaskID == f.TaskID {
			out = append(out, a)
		}
	}
	return out, nil
}

func (b *fakeBackend) Attempt(ctx context.Context, tenant, id string) (*host.Attempt, error) {
	b.saw(tenant)
	for _, a := range b.attempts[tenant] {
		if a.AttemptID == id {
			return a, nil
		}
	}
	return nil, host.Errorf("attempt", id, host.ErrNotFound, "no such attempt")
}

func (b *fakeBackend) Replay(ctx context.Context, tenant, id string) (*replay.Verdict, error) {
	if _, err := b.Attempt(ctx, tenant, id); err != nil {
		return nil, err
	}
	return &replay.Verdict{AttemptID: id, Identical: true}, nil
}

func (b *fakeBackend) Chain(ctx context.Context) (*host.ChainReport, error) {
	return &host.ChainReport{OK: true, Events: 7, HeadSeq: 7, Head: "feed"}, nil
}

// retryBackend also retries.
type retryBackend struct{ *fakeBackend }

func (b retryBackend) RetryTask(ctx context.Context, tenant, id string) (*host.TaskRecord, error) {
	return b.Task(ctx, tenant, id)
}

func newFake() *fakeBackend {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	task := func(id, subject string, st host.TaskStatus) *host.TaskRecord {
		return &host.TaskRecord{TaskID: id, TaskType: "hello.c", Subject: subject, Status: st, MaxAttempts: 3,
			Payload: json.RawMessage(`{"name":"x"}`), CreatedAt: now, UpdatedAt: now}
	}
	// task-acme-3 is blocked: its one attempt suspended.
	blocked := task("task-acme-3", "acme waits", host.TaskBlocked)
	blocked.AttemptCount = 1
	return &fakeBackend{
		tasks: map[string][]*host.TaskRecord{
			"acme": {task("task-acme-1", "acme's <b>subject</b>", host.TaskPending), task("task-acme-2", "acme done", host.TaskCompleted),
				blocked, task("task-acme-4", "acme failed", host.TaskPermanentFailure)},
			"other": {task("task-other-1", "other's secret", host.TaskPending)},
		},
		attempts: map[string][]*host.Attempt{
			"acme": {{AttemptID: "att-acme-1", TaskID: "task-acme-2", Tenant: "acme", Outcome: abi.Completed, EventSeq: 5,
				Input: json.RawMessage(`{"name":"x"}`), Output: json.RawMessage(`{"greeting":"Hello, <x>!"}`),
				Trace: json.RawMessage(`[{"fn":"log","args":[1]}]`), Events: json.RawMessage(`[{"type":"cap.breached"}]`)},
				{AttemptID: "att-acme-3", TaskID: "task-acme-3", Tenant: "acme", Attempt: 1, Outcome: abi.Suspended}},
			"other": {{AttemptID: "att-other-1", TaskID: "task-other-1", Tenant: "other", Outcome: abi.Completed}},
		},
		schedules: []*host.RecurringSchedule{
			{ScheduleID: "s1", Name: "acme-nightly", Enabled: true, IntervalSeconds: 60, Task: host.TaskIntent{TaskType: "hello.c"}, Tenant: "acme", NextRunAt: now},
			{ScheduleID: "s2", Name: "other-secret-schedule", IntervalSeconds: 60, Task: host.TaskIntent{TaskType: "hello.c"}, Tenant: "other", NextRunAt: now},
		},
		records: []*host.WorkflowRecord{
			{WorkflowID: "wf-acme-1", WorkflowType: "goal_loop", InstanceKey: "k1", CurrentState: "act", Status: host.WorkflowActive, Tenant: "acme", Transitions: 1, Context: json.RawMessage(`{"goal":"x"}`)},
			{WorkflowID: "wf-other-1", WorkflowType: "goal_loop", InstanceKey: "secret-key", CurrentState: "plan", Status: host.WorkflowActive, Tenant: "other"},
		},
		events: []*host.Event{
			{Seq: 1, Type: "task_enqueued", TaskID: "task-acme-1", Data: json.RawMessage(`{"tenant":"acme"}`)},
			{Seq: 2, Type: "task_enqueued", TaskID: "task-other-1", Data: json.RawMessage(`{"tenant":"other","note":"other-secret-event"}`)},
			{Seq: 3, Type: "dispatch_idle", Data: json.RawMessage(`{"note":"host-event"}`)},
			{Seq: 4, Type: "task_finished", TaskID: "task-acme-2", Data: json.RawMessage(`{"tenant":"acme"}`)},
		},
	}
}

// tokens are the tokens the test's Authenticate accepts.
var tokens = map[string]*auth.Principal{
	"tok-all":      {TokenID: "all", Tenant: "acme", Scopes: []auth.Scope{auth.ScopeTasksRead, auth.ScopeTasksWrite, auth.ScopeEvidenceRead}},
	"tok-read":     {TokenID: "read", Tenant: "acme", Scopes: []auth.Scope{auth.ScopeTasksRead}},
	"tok-invoke":   {TokenID: "invoke", Tenant: "acme", Scopes: []auth.Scope{auth.ScopeInvoke}},
	"tok-other":    {TokenID: "oth", Tenant: "other", Scopes: []auth.Scope{auth.ScopeAdmin}},
	"tok-evidence": {TokenID: "ev", Tenant: "acme", Scopes: []auth.Scope{auth.ScopeEvidenceRead}},
	"tok-operator": {TokenID: "op", Tenant: "acme", Scopes: []auth.Scope{auth.ScopeEvidenceRead, auth.ScopeOperator}},
	"tok-write":    {TokenID: "write", Tenant: "acme", Scopes: []auth.Scope{auth.ScopeTasksRead, auth.ScopeTasksWrite}},
}

func authenticate(ctx context.Context, token string) (*auth.Principal, error) {
	if p, ok := tokens[token]; ok {
		return p, nil
	}
	return nil, errors.New("unknown token")
}

func newServer(t *testing.T, b Backend) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(Prefix, New(Config{Backend: b, Authenticate: authenticate}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// client does not follow redirects, so a test sees them.
var client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

type req struct {
	method, path, token string
	form                url.Values
	header              map[string]string
}

func do(t *testing.T, srv *httptest.Server, r req) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if r.form != nil {
		body = strings.NewReader(r.form.Encode())
	}
	method := r.method
	if method == "" {
		method = http.MethodGet
	}
	hr, err := http.NewRequest(method, srv.URL+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.form != nil {
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if r.token != "" {
		hr.AddCookie(&http.Cookie{Name: CookieName, Value: r.token})
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	resp, err := client.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// csrf is the form value of a session of token.
func csrf(token string) string { return (&session{token: token}).formToken() }

func TestLogin(t *testing.T) {
	srv := newServer(t, newFake())
	cases := []struct {
		name       string
		r          req
		status     int
		location   string
		cookie     string // the cookie's value set, "-" for none
		bodyHas    string
		bodyHasNot string
	}{
		{"root without cookie goes to login", req{path: "/console/"}, http.StatusSeeOther, "/console/login", "-", "", ""},
		{"root with a valid cookie goes to tasks", req{path: "/console/", token: "tok-read"}, http.StatusSeeOther, "/console/tasks", "-", "", ""},
		{"login form", req{path: "/console/login"}, http.StatusOK, "", "-", `name="token"`, ""},
		{"bad token refused", req{method: "POST", path: "/console/login", form: url.Values{"token": {"nope"}}}, http.StatusUnauthorized, "", "-", "was not accepted", ""},
		{"empty token refused", req{method: "POST", path: "/console/login", form: url.Values{"token": {""}}}, http.StatusUnauthorized, "", "-", "was not accepted", ""},
		{"good token sets the cookie", req{method: "POST", path: "/console/login", form: url.Values{"token": {"tok-read"}}}, http.StatusSeeOther, "/console/tasks", "tok-read", "", ""},
		{"login goes back to next", req{method: "POST", path: "/console/login", form: url.Values{"token": {"tok-read"}, "next": {"/console/tasks/task-acme-1"}}},
			http.StatusSeeOther, "/console/tasks/task-acme-1", "tok-read", "", ""},
		{"next off the console is ignored", req{method: "POST", path: "/console/login", form: url.Values{"token": {"tok-read"}, "next": {"//evil.example/x"}}},
			http.StatusSeeOther, "/console/tasks", "tok-read", "", ""},
		{"login from another site refused", req{method: "POST", path: "/console/login", form: url.Values{"token": {"tok-read"}}, header: map[string]string{"Origin": "http://evil.example"}},
			http.StatusForbidden, "", "-", "cross-site", ""},
		{"page without cookie redirects to login", req{path: "/console/tasks?status=pending"}, http.StatusSeeOther, "/console/login?next=%2Fconsole%2Ftasks%3Fstatus%3Dpending", "", "", ""},
		{"page with a bad cookie redirects and clears it", req{path: "/console/packs", token: "stale"}, http.StatusSeeOther, "/console/login?next=%2Fconsole%2Fpacks", "", "", ""},
		{"logout clears the cookie", req{method: "POST", path: "/console/logout", token: "tok-read", form: url.Values{}}, http.StatusSeeOther, "/console/login", "", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, srv, c.r)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d\n%s", resp.StatusCode, c.status, body)
			}
			if got := resp.Header.Get("Location"); got != c.location {
				t.Errorf("Location %q, want %q", got, c.location)
			}
			var ck *http.Cookie
			for _, k := range resp.Cookies() {
				if k.Name == CookieName {
					ck = k
				}
			}
			switch {
			case c.cookie == "-" && ck != nil:
				t.Errorf("set cookie %v", ck)
			case c.cookie != "-" && ck == nil:
				t.Errorf("no cookie set")
			case c.cookie != "-":
				if ck.Value != c.cookie {
					t.Errorf("cookie value %q, want %q", ck.Value, c.cookie)
				}
				if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != Prefix || ck.Secure {
					t.Errorf("cookie attributes %+v", ck)
				}
				if c.cookie == "" && ck.MaxAge >= 0 {
					t.Errorf("cookie not cleared: %+v", ck)
				}
			}
			if !strings.Contains(body, c.bodyHas) {
				t.Errorf("body lacks %q:\n%s", c.bodyHas, body)
			}
			if c.bodyHasNot != "" && strings.Contains(body, c.bodyHasNot) {
				t.Errorf("body has %q", c.bodyHasNot)
			}
		})
	}
}

func TestSecureCookieOverTLS(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(Prefix, New(Config{Backend: newFake(), Authenticate: authenticate}))
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	c := srv.Client()
	c.CheckRedirect = client.CheckRedirect
	resp, err := c.PostForm(srv.URL+"/console/login", url.Values{"token": {"tok-read"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cs := resp.Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Fatalf("cookies over TLS: %+v", cs)
	}
}

func TestScopes(t *testing.T) {
	srv := newServer(t, newFake())
	cases := []struct {
		name   string
		r      req
		status int
	}{
		{"packs with any valid token", req{path: "/console/packs", token: "tok-invoke"}, http.StatusOK},
		{"tasks without tasks:read", req{path: "/console/tasks", token: "tok-invoke"}, http.StatusForbidden},
		{"tasks with tasks:read", req{path: "/console/tasks", token: "tok-read"}, http.StatusOK},
		{"task with tasks:read", req{path: "/console/tasks/task-acme-1", token: "tok-read"}, http.StatusOK},
		{"attempts without evidence:read", req{path: "/console/attempts", token: "tok-read"}, http.StatusForbidden},
		{"attempt without evidence:read", req{path: "/console/attempts/att-acme-1", token: "tok-read"}, http.StatusForbidden},
		{"chain without evidence:read", req{path: "/console/chain", token: "tok-read"}, http.StatusForbidden},
		{"chain with evidence:read", req{path: "/console/chain", token: "tok-evidence"}, http.StatusOK},
		{"replay without evidence:read", req{method: "POST", path: "/console/attempts/att-acme-1/replay", token: "tok-read",
			form: url.Values{"csrf": {csrf("tok-read")}}}, http.StatusForbidden},
		{"cancel without tasks:write", req{method: "POST", path: "/console/tasks/task-acme-1/cancel", token: "tok-read",
			form: url.Values{"csrf": {csrf("tok-read")}}}, http.StatusForbidden},
		{"cancel with tasks:write", req{method: "POST", path: "/console/tasks/task-acme-1/cancel", token: "tok-all",
			form: url.Values{"csrf": {csrf("tok-all")}}}, http.StatusSeeOther},
		{"admin has every scope", req{path: "/console/attempts", token: "tok-other"}, http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, srv, c.r)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d\n%s", resp.StatusCode, c.status, body)
			}
			if c.status == http.StatusForbidden && !strings.Contains(body, "scope") {
				t.Errorf("refusal does not name the scope:\n%s", body)
			}
		})
	}
}

func TestTenantFiltering(t *testing.T) {
	b := newFake()
	srv := newServer(t, b)
	_, body := do(t, srv, req{path: "/console/tasks", token: "tok-all"})
	if !strings.Contains(body, "task-acme-1") || !strings.Contains(body, "task-acme-2") || strings.Contains(body, "task-other-1") {
		t.Errorf("acme's task list:\n%s", body)
	}
	// Another tenant's task and attempt are not found, not shown.
	for _, p := range []string{"/console/tasks/task-other-1", "/console/attempts/att-other-1"} {
		resp, body := do(t, srv, req{path: p, token: "tok-all"})
		if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "secret") {
			t.Errorf("%s as acme: %d\n%s", p, resp.StatusCode, body)
		}
	}
	resp, _ := do(t, srv, req{method: "POST", path: "/console/tasks/task-other-1/cancel", token: "tok-all", form: url.Values{"csrf": {csrf("tok-all")}}})
	if resp.StatusCode != http.StatusNotFound || len(b.canceled) != 0 {
		t.Errorf("cancel of another tenant's task: %d, canceled %v", resp.StatusCode, b.canceled)
	}
	resp, _ = do(t, srv, req{method: "POST", path: "/console/attempts/att-other-1/replay", token: "tok-all", form: url.Values{"csrf": {csrf("tok-all")}}})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("replay of another tenant's attempt: %d", resp.StatusCode)
	}
	_, body = do(t, srv, req{path: "/console/attempts", token: "tok-other"})
	if !strings.Contains(body, "att-other-1") || strings.Contains(body, "att-acme-1") {
		t.Errorf("other's attempt list:\n%s", body)
	}
	for _, tn := range b.tenants {
		if tn != "acme" && tn != "other" {
			t.Errorf("backend asked for tenant %q", tn)
		}
	}
	if b.tenants[0] != "acme" || b.tenants[len(b.tenants)-1] != "other" {
		t.Errorf("tenants asked: %v", b.tenants)
	}
}

func TestCrossSiteRefused(t *testing.T) {
	b := newFake()
	srv := newServer(t, b)
	good := url.Values{"csrf": {csrf("tok-all")}}
	cases := []struct {
		name   string
		r      req
		status int
	}{
		{"no form token", req{method: "POST", path: "/console/tasks/task-acme-1/cancel", token: "tok-all", form: url.Values{}}, http.StatusForbidden},
		{"another session's form token", req{method: "POST", path: "/console/tasks/task-acme-1/cancel", token: "tok-all", form: url.Values{"csrf": {csrf("tok-read")}}}, http.StatusForbidden},
		{"foreign Origin", req{method: "POST", path: "/console/tasks/task-acme-1/cancel", token: "tok-all", form: good,
			header: map[string]string{"Origin": "http://evil.example"}}, http.StatusForbidden},
		{"null Origin", req{method: "POST", path: "/console/tasks/task-acme-1/cancel", token: "tok-all", form: good,
			header: map[string]string{"Origin": "null"}}, http.StatusForbidden},
		{"foreign Referer", req{method: "POST", path: "/console/attempts/att-acme-1/replay", token: "tok-all", form: good,
			header: map[string]string{"Referer": "http://evil.example/page"}}, http.StatusForbidden},
		{"GET cannot cancel", req{path: "/console/tasks/task-acme-1/cancel", token: "tok-all"}, http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, srv, c.r)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d\n%s", resp.StatusCode, c.status, body)
			}
		})
	}
	if len(b.canceled) != 0 {
		t.Fatalf("a refused request canceled %v", b.canceled)
	}
	// The same request from the console itself goes through.
	resp, body := do(t, srv, req{method: "POST", path: "/console/tasks/task-acme-1/cancel", token: "tok-all", form: good,
		header: map[string]string{"Origin": srv.URL}})
	if resp.StatusCode != http.StatusSeeOther || len(b.canceled) != 1 {
		t.Fatalf("same-origin cancel: %d %s, canceled %v", resp.StatusCode, body, b.canceled)
	}
}

func TestPages(t *testing.T) {
	srv := newServer(t, retryBackend{newFake()})
	cases := []struct {
		name string
		r    req
		has  []string
		not  []string
	}{
		{"packs", req{path: "/console/packs", token: "tok-invoke"},
			[]string{"local.hello.c", "1.0.0", "example.hello", "hello.c", "https://ci.example/builder", "<code>config</code>",
				"; http:<ul class=\"http-grants\"><li>" + template.HTMLEscapeString(consoleHTTPGrant.Describe()) + "</li></ul>"}, nil},
		{"tasks escape", req{path: "/console/tasks", token: "tok-all"},
			[]string{"acme&#39;s &lt;b&gt;subject&lt;/b&gt;"}, []string{"<b>subject"}},
		{"tasks filtered", req{path: "/console/tasks?status=completed", token: "tok-all"}, []string{"task-acme-2"}, []string{"task-acme-1"}},
		{"task with write scope", req{path: "/console/tasks/task-acme-1", token: "tok-all"},
			[]string{`id="cancel"`, `name="csrf" value="` + csrf("tok-all") + `"`}, []string{`id="resume"`, `id="retry"`}},
		{"failed task with write scope", req{path: "/console/tasks/task-acme-4", token: "tok-all"},
			[]string{`id="retry"`}, []string{`id="resume"`, `id="cancel"`}},
		{"task read-only", req{path: "/console/tasks/task-acme-1", token: "tok-read"}, []string{"evidence:read"}, []string{`id="cancel"`, `id="retry"`}},
		{"completed task lists its attempt", req{path: "/console/tasks/task-acme-2", token: "tok-all"}, []string{"att-acme-1"}, []string{`id="cancel"`}},
		{"attempt", req{path: "/console/attempts/att-acme-1", token: "tok-evidence"},
			[]string{"Host-call trace", "Cap events", "cap.breached", "&#34;greeting&#34;: &#34;Hello, &lt;x&gt;!&#34;", `id="replay"`}, []string{`id="verdict"`}},
		{"replay", req{method: "POST", path: "/console/attempts/att-acme-1/replay", token: "tok-evidence", form: url.Values{"csrf": {csrf("tok-evidence")}}},
			[]string{`<p class="ok" id="verdict">identical</p>`}, nil},
		{"chain", req{path: "/console/chain", token: "tok-evidence"}, []string{`id="chain-status">intact`, "feed"}, nil},
		{"bad filter", req{path: "/console/tasks?status=bogus", token: "tok-all"}, []string{"not a task status"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, srv, c.r)
			if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("CSP %q", csp)
			}
			for _, s := range c.has {
				if !strings.Contains(body, s) {
					t.Errorf("body lacks %q:\n%s", s, body)
				}
			}
			for _, s := range c.not {
				if strings.Contains(body, s) {
					t.Errorf("body has %q:\n%s", s, body)
				}
			}
		})
	}
	resp, body := do(t, srv, req{path: "/console/static/console.css"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "packrun console") {
		t.Errorf("stylesheet: %d", resp.StatusCode)
	}
}
