package packrun

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// The console's schedules, workflow and events pages, served by
// Host.Handler over a real store, show a tenant its own rows only; a
// record's page lists the transitions it made, read from the event log.
func TestConsoleLivePagesTenancy(t *testing.T) {
	e := newAuthEnv(t, HandlerOptions{})
	e.install(t, goalLoopPack(t))
	recs := map[string]*host.WorkflowRecord{}
	for _, tenant := range []string{"acme", "beta"} {
		if _, err := e.Store().CreateSchedule(ctx, host.ScheduleSpec{Name: tenant + "-hourly", IntervalSeconds: 3600, Tenant: tenant,
			Task: host.TaskIntent{TaskType: "hello.c", Payload: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		rec, _, err := e.Store().StartWorkflow(ctx, host.WorkflowStart{WorkflowType: host.GoalLoop, InstanceKey: tenant + "-key",
			Context: json.RawMessage(`{"goal":"g"}`), Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		recs[tenant] = rec
	}
	// Run acme's record to its end: three transitions.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := e.Store().WorkflowRecord(ctx, "acme", recs["acme"].WorkflowID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != host.WorkflowActive {
			recs["acme"] = got
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acme's record did not finish: %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if recs["acme"].Status != host.WorkflowCompleted || recs["acme"].Transitions != 3 {
		t.Fatalf("acme's record %+v", recs["acme"])
	}
	acme, _ := e.token(t, "acme", "tasks:read,evidence:read")
	operator, _ := e.token(t, "acme", "evidence:read,operator")
	page := func(tok, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", e.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(&http.Cookie{Name: "packrun_console", Value: tok})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	a, b := recs["acme"].WorkflowID, recs["beta"].WorkflowID
	cases := []struct {
		name, tok, path string
		status          int
		has, not        []string
	}{
		{"schedules", acme, "/console/schedules", 200, []string{"acme-hourly"}, []string{"beta-hourly"}},
		{"workflows", acme, "/console/workflows", 200, []string{a}, []string{b, "beta-key"}},
		{"another tenant's record", acme, "/console/workflows/" + b, 404, nil, []string{"beta-key"}},
		{"own record", acme, "/console/workflows/" + a, 200, []string{`id="workflow-status">completed`,
			"<td><code>plan</code></td><td><code>execute</code></td>", "<td><code>execute</code></td><td><code>verify</code></td>",
			"<td><code>verify</code></td><td><code>complete</code></td>"}, nil},
		{"events", acme, "/console/events", 200, []string{a, "workflow_transitioned"}, []string{b}},
		{"events as operator", operator, "/console/events", 200, []string{a, b}, nil},
		{"tasks counts", acme, "/console/tasks", 200, []string{`id="count-completed">3<`, `id="count-all">3<`}, []string{"beta"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := page(c.tok, c.path)
			if code != c.status {
				t.Fatalf("status %d, want %d\n%s", code, c.status, body)
			}
			for _, s := range c.has {
				if !strings.Contains(body, s) {
					t.Errorf("body lacks %q:\n%s", s, body)
				}
			}
			for _, s := range c.not {
				if strings.Contains(body, s) {
					t.Errorf("body has %q", s)
				}
			}
		})
	}
	_, body := page(acme, "/console/workflows/"+a)
	table, _, _ := strings.Cut(body[strings.Index(body, `id="transitions"`)+1:], "</table>")
	if n := strings.Count(table, "<tr>"); n != 1+3 {
		t.Errorf("%d rows in the transitions table, want a header and 3:\n%s", n, table)
	}
}
