package packrun

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// waitStatus waits until a task reaches want (failing the test past a
// generous deadline, or on another settled status).
func waitStatus(t *testing.T, f *fixture, taskID string, want host.TaskStatus) *host.TaskRecord {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tr, err := f.Store().Task(ctx, taskID)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Status == want {
			return tr
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s stays %s (%s), want %s", taskID, tr.Status, tr.LastError, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// GET /v1/events shows a token its tenant's task events only; the events
// tied to no task (dispatch_*) only to an admin token.
func TestAPIEventsTenancy(t *testing.T) {
	e := newAuthEnv(t, HandlerOptions{})
	acme, _ := e.token(t, "acme", "tasks:write,evidence:read")
	admin, _ := e.token(t, "acme", "admin")
	globex, _ := e.token(t, "globex", "tasks:write,evidence:read")
	ids := map[string]string{}
	for name, tok := range map[string]string{"acme": acme, "globex": globex} {
		r := e.call(t, tok, "POST", "/v1/tasks", `{"task_type":"hello.c","payload":{"name":"x"}}`)
		if r.code != http.StatusCreated {
			t.Fatalf("enqueue: %d %s", r.code, r.body)
		}
		var task host.TaskRecord
		json.Unmarshal([]byte(r.body), &task)
		ids[name] = task.TaskID
		waitStatus(t, e.fixture, task.TaskID, host.TaskCompleted)
	}
	list := func(tok, query string) map[string][]string {
		t.Helper()
		r := e.call(t, tok, "GET", "/v1/events"+query, "")
		if r.code != http.StatusOK {
			t.Fatalf("events: %d %s", r.code, r.body)
		}
		var p struct {
			Events    []host.Event `json:"events"`
			NextAfter int64        `json:"next_after"`
		}
		if err := json.Unmarshal([]byte(r.body), &p); err != nil {
			t.Fatal(err)
		}
		byTask := map[string][]string{}
		for _, ev := range p.Events {
			byTask[ev.TaskID] = append(byTask[ev.TaskID], ev.Type)
		}
		return byTask
	}
	got := list(acme, "")
	if len(got) != 1 || len(got[ids["acme"]]) == 0 {
		t.Fatalf("acme sees events of %v", got)
	}
	seen := map[string]bool{}
	for _, typ := range got[ids["acme"]] {
		seen[typ] = true
	}
	for _, typ := range []string{"task_enqueued", "task_claimed", "task_started", "attempt_recorded", "task_attempt_finished", "task_finished", "api_call"} {
		if !seen[typ] {
			t.Errorf("acme's task has no %s event: %v", typ, got[ids["acme"]])
		}
	}
	if got := list(globex, "?task_id="+ids["acme"]); len(got) != 0 {
		t.Fatalf("globex sees acme's task events: %v", got)
	}
	got = list(admin, "")
	if _, ok := got[ids["globex"]]; ok || len(got[""]) == 0 || len(got[ids["acme"]]) == 0 {
		t.Fatalf("acme's admin token sees %v", got)
	}
	if got := list(admin, "?type=dispatch_locked"); len(got[""]) == 0 {
		t.Fatalf("dispatch_locked: %v", got)
	}
	if r := e.call(t, acme, "GET", "/v1/events", ""); r.code != http.StatusOK {
		t.Fatal(r.body)
	}
	// Resume and retry are bound to the tenant as cancel is: another
	// tenant's task is not found; the caller's own, in the wrong status, is
	// a conflict that names the status.
	for _, action := range []string{":retry", ":resume"} {
		if r := e.call(t, globex, "POST", "/v1/tasks/"+ids["acme"]+action, `{"value":1}`); r.code != http.StatusNotFound {
			t.Fatalf("globex %s of acme's task: %d %s", action, r.code, r.body)
		}
		if r := e.call(t, acme, "POST", "/v1/tasks/"+ids["acme"]+action, `{"value":1}`); r.code != http.StatusConflict || !strings.Contains(r.errMessage(), "task is completed") {
			t.Fatalf("acme %s of its completed task: %d %s", action, r.code, r.body)
		}
	}
	reader, _ := e.token(t, "acme", "tasks:read")
	if r := e.call(t, reader, "GET", "/v1/events", ""); r.code != http.StatusForbidden {
		t.Fatalf("without evidence:read: %d %s", r.code, r.body)
	}
}
