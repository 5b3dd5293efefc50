package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// The schedules, workflow and events pages show the viewer's tenant's
// rows only, asking the backend as the API does.
func TestLivePagesTenancy(t *testing.T) {
	b := newFake()
	srv := newServer(t, b)
	cases := []struct {
		name   string
		r      req
		status int
		has    []string
		not    []string
	}{
		{"schedules", req{path: "/console/schedules", token: "tok-read"}, http.StatusOK,
			[]string{"acme-nightly"}, []string{"other-secret-schedule"}},
		{"schedules of other", req{path: "/console/schedules", token: "tok-other"}, http.StatusOK,
			[]string{"other-secret-schedule"}, []string{"acme-nightly"}},
		{"workflows", req{path: "/console/workflows", token: "tok-read"}, http.StatusOK,
			[]string{"wf-acme-1"}, []string{"wf-other-1", "secret-key"}},
		{"workflow record", req{path: "/console/workflows/wf-acme-1", token: "tok-read"}, http.StatusOK,
			[]string{`id="workflow-current">act`, `<code>planned</code></td><td><code>plan</code></td><td><code>act</code>`, "(current)", "&#34;goal&#34;"}, nil},
		{"another tenant's workflow record", req{path: "/console/workflows/wf-other-1", token: "tok-read"}, http.StatusNotFound,
			[]string{"not found"}, []string{"secret-key"}},
		{"events", req{path: "/console/events", token: "tok-evidence"}, http.StatusOK,
			[]string{"task-acme-1", "task-acme-2"}, []string{"other-secret-event", "host-event"}},
		{"events of an admin are still its tenant's", req{path: "/console/events", token: "tok-other"}, http.StatusOK,
			[]string{"other-secret-event"}, []string{"task-acme-1", "host-event"}},
		{"events of an operator are every tenant's", req{path: "/console/events", token: "tok-operator"}, http.StatusOK,
			[]string{"task-acme-1", "other-secret-event", "host-event", "every tenant"}, nil},
		{"events filtered by type", req{path: "/console/events?type=task_finished", token: "tok-evidence"}, http.StatusOK,
			[]string{"task-acme-2"}, []string{"task-acme-1"}},
		{"events need evidence:read", req{path: "/console/events", token: "tok-read"}, http.StatusForbidden, []string{"evidence:read"}, nil},
		{"schedules need tasks:read", req{path: "/console/schedules", token: "tok-evidence"}, http.StatusForbidden, []string{"tasks:read"}, nil},
		{"workflows need tasks:read", req{path: "/console/workflows", token: "tok-evidence"}, http.StatusForbidden, []string{"tasks:read"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, srv, c.r)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d\n%s", resp.StatusCode, c.status, body)
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
	for _, tn := range b.tenants {
		if tn != "acme" && tn != "other" {
			t.Errorf("backend asked for tenant %q", tn)
		}
	}
}

// Without authentication (--insecure-no-auth) schedules and workflow
// records are every tenant's, as through the API.
func TestLivePagesInsecure(t *testing.T) {
	b := newFake()
	mux := http.NewServeMux()
	mux.Handle(Prefix, New(Config{Backend: b, Authenticate: func(context.Context, string) (*auth.Principal, error) {
		return &auth.Principal{Insecure: true, Tenant: host.DefaultTenant}, nil
	}}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	_, body := do(t, srv, req{path: "/console/schedules", token: "any"})
	if !strings.Contains(body, "acme-nightly") || !strings.Contains(body, "other-secret-schedule") {
		t.Errorf("insecure schedules:\n%s", body)
	}
	_, body = do(t, srv, req{path: "/console/workflows", token: "any"})
	if !strings.Contains(body, "wf-acme-1") || !strings.Contains(body, "wf-other-1") {
		t.Errorf("insecure workflows:\n%s", body)
	}
}

// A bad page number, cursor, filter or limit is a 400 page naming it,
// and the backend is not asked.
func TestLivePagesBadInput(t *testing.T) {
	b := newFake()
	srv := newServer(t, b)
	cases := []struct{ path, want string }{
		{"/console/tasks?page=0", `page &#34;0&#34; is not a page number`},
		{"/console/tasks?page=two", `page &#34;two&#34; is not a page number`},
		{"/console/tasks?page=-3", `is not a page number`},
		{"/console/tasks?page=99999999", "is too deep"},
		{"/console/tasks?limit=0", "is not a number from 1 to 1000"},
		{"/console/tasks?status=bogus", "not a task status"},
		{"/console/attempts?before=-1", `before &#34;-1&#34; is not an attempt cursor`},
		{"/console/attempts?before=x", "is not an attempt cursor"},
		{"/console/events?after=x", `after &#34;x&#34; is not an event cursor`},
		{"/console/events?type=Task%20Finished", "is not an event type"},
		{"/console/events?limit=5000", "is not a number from 1 to 1000"},
		{"/console/workflows?limit=abc", "is not a number from 1 to 1000"},
	}
	before := len(b.tenants) + len(b.eventAsks)
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			resp, body := do(t, srv, req{path: c.path, token: "tok-all"})
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, c.want) || !strings.Contains(body, `id="error"`) {
				t.Fatalf("status %d, want 400 with %q:\n%s", resp.StatusCode, c.want, body)
			}
			if strings.Contains(body, "data-refresh") {
				t.Errorf("an error page refreshes itself")
			}
		})
	}
	if after := len(b.tenants) + len(b.eventAsks); after != before {
		t.Errorf("the backend was asked %d times for refused requests", after-before)
	}
}

// The tasks page counts the tenant's tasks per status and pages through
// them; the attempts page pages by its cursor.
func TestCountsAndPaging(t *testing.T) {
	b := newFake()
	srv := newServer(t, b)
	_, body := do(t, srv, req{path: "/console/tasks", token: "tok-all"})
	for _, s := range []string{`id="count-all">4<`, `id="count-pending">1<`, `id="count-completed">1<`, `id="count-blocked">1<`,
		`id="count-permanent_failure">1<`, `id="count-running">0<`} {
		if !strings.Contains(body, s) {
			t.Errorf("counts lack %q:\n%s", s, body)
		}
	}
	// Four tasks, two a page, in the backend's order (newest first).
	pages := map[string][2]string{
		"/console/tasks?limit=2":        {"task-acme-1", "task-acme-2"},
		"/console/tasks?limit=2&page=2": {"task-acme-3", "task-acme-4"},
	}
	for path, want := range pages {
		_, body := do(t, srv, req{path: path, token: "tok-all"})
		for _, id := range []string{"task-acme-1", "task-acme-2", "task-acme-3", "task-acme-4"} {
			shown := strings.Contains(body, `href="/console/tasks/`+id+`"`)
			if shown != (id == want[0] || id == want[1]) {
				t.Errorf("%s shows %s: %v", path, id, shown)
			}
		}
	}
	_, body = do(t, srv, req{path: "/console/tasks?limit=2", token: "tok-all"})
	if !strings.Contains(body, `id="next" href="/console/tasks?limit=2&amp;page=2"`) || strings.Contains(body, `id="prev"`) {
		t.Errorf("first page's links:\n%s", body)
	}
	_, body = do(t, srv, req{path: "/console/tasks?limit=2&page=2", token: "tok-all"})
	if strings.Contains(body, `id="next"`) || !strings.Contains(body, `id="prev" href="/console/tasks?limit=2&amp;page=1"`) {
		t.Errorf("last page's links:\n%s", body)
	}
	_, body = do(t, srv, req{path: "/console/tasks?limit=2&page=3", token: "tok-all"})
	if !strings.Contains(body, "No task matches") {
		t.Errorf("past the last page:\n%s", body)
	}
	// Open a task by its id.
	resp, _ := do(t, srv, req{path: "/console/tasks?id=task-acme-2", token: "tok-all"})
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/console/tasks/task-acme-2" {
		t.Errorf("open by id: %d %q", resp.StatusCode, loc)
	}
	_, body = do(t, srv, req{path: "/console/attempts?limit=1", token: "tok-all"})
	if !strings.Contains(body, `id="count-attempts">2<`) || !strings.Contains(body, `id="next" href="/console/attempts?before=5&amp;limit=1"`) {
		t.Errorf("attempts page:\n%s", body)
	}
}

// allActions retries and resumes.
type allActions struct{ *resumeBackend }

func (b allActions) RetryTask(ctx context.Context, tenant, id string) (*host.TaskRecord, error) {
	return b.Task(ctx, tenant, id)
}

// Each task action is offered only in a status the store takes it in.
func TestActionsOffered(t *testing.T) {
	b := newFake()
	running := *b.tasks["acme"][0]
	running.TaskID, running.Status, running.CancelRequested = "task-acme-run", host.TaskRunning, true
	b.tasks["acme"] = append(b.tasks["acme"], &running)
	srv := newServer(t, allActions{&resumeBackend{fakeBackend: b}})
	cases := []struct {
		task  string
		offer []string
	}{
		{"task-acme-1", []string{"cancel"}},                    // pending
		{"task-acme-2", nil},                                   // completed
		{"task-acme-3", []string{"cancel", "retry", "resume"}}, // blocked, suspended
		{"task-acme-4", []string{"retry"}},                     // permanent_failure
		{"task-acme-run", nil},                                 // running, cancel requested already
	}
	for _, c := range cases {
		_, body := do(t, srv, req{path: "/console/tasks/" + c.task, token: "tok-all"})
		for _, a := range []string{"cancel", "retry", "resume"} {
			want := strings.Contains(strings.Join(c.offer, ","), a)
			if got := strings.Contains(body, `id="`+a+`"`); got != want {
				t.Errorf("%s: %s offered %v, want %v", c.task, a, got, want)
			}
		}
	}
	// A blocked task whose last attempt did not suspend: retry, not resume.
	b.attempts["acme"][1].Outcome = "failed"
	_, body := do(t, srv, req{path: "/console/tasks/task-acme-3", token: "tok-all"})
	if strings.Contains(body, `id="resume"`) || !strings.Contains(body, `id="retry"`) {
		t.Errorf("blocked, not suspended:\n%s", body)
	}
	// Without the scope to read attempts, the Resume button still
	// follows the attempt, and the attempts stay hidden.
	_, body = do(t, srv, req{path: "/console/tasks/task-acme-3", token: "tok-write"})
	if strings.Contains(body, "att-acme-3") {
		t.Errorf("attempts shown without evidence:read")
	}
}

// List pages load static/live.js and say how often to refresh; the
// script is served under the CSP that lets it run and fetch; a console
// configured not to refresh loads no script.
func TestLiveRefreshMarkup(t *testing.T) {
	srv := newServer(t, newFake())
	for _, p := range []string{"/console/tasks", "/console/attempts", "/console/events", "/console/schedules", "/console/workflows", "/console/tasks/task-acme-1"} {
		resp, body := do(t, srv, req{path: p, token: "tok-all"})
		if !strings.Contains(body, `data-refresh="3000"`) || !strings.Contains(body, `<script src="/console/static/live.js" defer></script>`) ||
			!strings.Contains(body, "data-live") {
			t.Errorf("%s is not live:\n%s", p, body)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") ||
			strings.Contains(csp, "unsafe") {
			t.Errorf("CSP %q", csp)
		}
	}
	_, body := do(t, srv, req{path: "/console/packs", token: "tok-all"})
	if strings.Contains(body, "live.js") {
		t.Errorf("the packs page polls")
	}
	resp, body := do(t, srv, req{path: "/console/static/live.js"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "data-live") || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
		t.Errorf("live.js: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	mux := http.NewServeMux()
	mux.Handle(Prefix, New(Config{Backend: newFake(), Authenticate: authenticate, Refresh: -time.Second}))
	off := httptest.NewServer(mux)
	defer off.Close()
	_, body = do(t, off, req{path: "/console/tasks", token: "tok-all"})
	if strings.Contains(body, "live.js") || strings.Contains(body, "data-refresh") {
		t.Errorf("Refresh < 0 still polls")
	}
}
