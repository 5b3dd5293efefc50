package packrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message/messagetest"
	"github.com/packrun/packrun/internal/quota"
)

// newQuotaEnv is newAuthEnv on a host with quotas q; the dispatcher runs
// only if run, so that tasks otherwise stay queued.
func newQuotaEnv(t *testing.T, q Quotas, run bool, packs ...packSpec) *authEnv {
	t.Helper()
	return newConfigEnv(t, Config{Quotas: q}, run, packs...)
}

// newConfigEnv is newAuthEnv on a host opened with cfg; the dispatcher
// runs only if run.
func newConfigEnv(t *testing.T, cfg Config, run bool, packs ...packSpec) *authEnv {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	k := newTestKey(t)
	savePolicy(t, home, trustKey(t, k, "local.*", "vendor.acme.*"))
	h, err := Open(ctx, home, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	f := &fixture{Host: h, home: home, key: k}
	s := hello("1.0.0")
	s.nodes = `[{"typeId":"example.hello","kind":"skill","taskTypes":["hello.c"]}]`
	f.install(t, s)
	for _, p := range packs {
		f.install(t, p)
	}
	hd, err := f.Handler(ctx, HandlerOptions{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	hd = apiSpec(t).Handler(t, hd) // every API response checked against the OpenAPI document
	srv := httptest.NewServer(hd)
	t.Cleanup(srv.Close)
	if run {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- f.Run(rctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return &authEnv{f, srv.URL}
}

// wantQuota fails unless r refuses quota name with status, in the error
// envelope, naming the quota, its limit and its flag.
func wantQuota(t *testing.T, r apiReply, status int, name string, limit int64) {
	t.Helper()
	msg := r.errMessage()
	if r.code != status || r.errCode() != "quota_exceeded" || !strings.Contains(msg, "quota "+name) ||
		!strings.Contains(msg, fmt.Sprint(limit)) || !strings.Contains(msg, quota.Flag(name)) {
		t.Fatalf("got %d %s, want %d quota_exceeded naming %s, %d and its flag", r.code, r.body, status, name, limit)
	}
}

func (e *authEnv) count(t *testing.T, token, path, key string) int {
	t.Helper()
	r := e.call(t, token, "GET", path, "")
	var m map[string][]json.RawMessage
	if err := json.Unmarshal([]byte(r.body), &m); err != nil || r.code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.code, r.body)
	}
	return len(m[key])
}

// A tenant's schedules are capped in number and interval: past either,
// 409 quota_exceeded naming the quota, nothing stored; another tenant is
// not affected; a deleted schedule frees its place; the library path
// (Host.Store, which the CLI uses) is bound the same.
func TestQuotaSchedules(t *testing.T) {
	e := newQuotaEnv(t, Quotas{Schedules: 2, ScheduleMinInterval: time.Minute}, false)
	acme, _ := e.token(t, "acme", "tasks:write,tasks:read")
	globex, _ := e.token(t, "globex", "tasks:write,tasks:read")
	body := func(name string, every int) string {
		return fmt.Sprintf(`{"name":%q,"interval_seconds":%d,"task":{"task_type":"hello.c","payload":{}}}`, name, every)
	}
	var first host.RecurringSchedule
	for i, name := range []string{"a", "b"} {
		r := e.call(t, acme, "POST", "/v1/schedules", body(name, 3600))
		if r.code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.code, r.body)
		}
		if i == 0 {
			json.Unmarshal([]byte(r.body), &first)
		}
	}
	wantQuota(t, e.call(t, acme, "POST", "/v1/schedules", body("c", 3600)), http.StatusConflict, quota.Schedules, 2)
	if n := e.count(t, acme, "/v1/schedules", "schedules"); n != 2 {
		t.Fatalf("%d schedules stored, want 2", n)
	}
	r := e.call(t, globex, "POST", "/v1/schedules", body("fast", 1))
	wantQuota(t, r, http.StatusConflict, quota.ScheduleMinInterval, 60)
	if !strings.Contains(r.body, `"field":"interval_seconds"`) {
		t.Fatalf("interval refusal names no field: %s", r.body)
	}
	if n := e.count(t, globex, "/v1/schedules", "schedules"); n != 0 {
		t.Fatalf("%d schedules stored for globex, want 0", n)
	}
	wantQuota(t, e.call(t, acme, "PATCH", "/v1/schedules/a", `{"interval_seconds":30}`), http.StatusConflict, quota.ScheduleMinInterval, 60)
	if r := e.call(t, globex, "POST", "/v1/schedules", body("slow", 60)); r.code != http.StatusCreated {
		t.Fatalf("globex: %d %s", r.code, r.body)
	}
	if r := e.call(t, acme, "DELETE", "/v1/schedules/"+first.ScheduleID, ""); r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	if r := e.call(t, acme, "POST", "/v1/schedules", body("c", 3600)); r.code != http.StatusCreated {
		t.Fatalf("create after a delete: %d %s", r.code, r.body)
	}
	// The library's (and the CLI's) path.
	spec := host.ScheduleSpec{Name: "tick", IntervalSeconds: 1, Task: host.TaskIntent{TaskType: "hello.c", Payload: json.RawMessage(`{}`)}}
	_, err := e.Store().CreateSchedule(ctx, spec)
	var qe *quota.Error
	if !errors.As(err, &qe) || qe.Quota != quota.ScheduleMinInterval || !errors.Is(err, host.ErrConflict) {
		t.Fatalf("Store().CreateSchedule every 1s: %v", err)
	}
	if l, _ := e.Store().ListSchedules(ctx, host.DefaultTenant); len(l) != 0 {
		t.Fatalf("stored %d schedules", len(l))
	}
}

// Unfinished tasks are capped per tenant: POST /v1/tasks past the cap is
// 409 quota_exceeded and enqueues nothing; Host.Enqueue is bound the
// same; another tenant is not affected; a sensor event proposing a task
// is refused too.
func TestQuotaQueuedTasks(t *testing.T) {
	e := newQuotaEnv(t, Quotas{QueuedTasks: 3}, false)
	acme, _ := e.token(t, "acme", "tasks:write,tasks:read")
	globex, _ := e.token(t, "globex", "tasks:write,tasks:read")
	task := `{"task_type":"hello.c","payload":{"name":"q"}}`
	for i := range 3 {
		if r := e.call(t, acme, "POST", "/v1/tasks", task); r.code != http.StatusCreated {
			t.Fatalf("task %d: %d %s", i, r.code, r.body)
		}
	}
	wantQuota(t, e.call(t, acme, "POST", "/v1/tasks", task), http.StatusConflict, quota.QueuedTasks, 3)
	ev := `{"sensor_id":"ext","event_id":"e","observed_at":"2026-01-02T15:04:05Z","source_ref":"r","dedupe_key":"k",
		"payload":{},"proposed_task":{"task_type":"hello.c","payload":{"name":"s"}}}`
	wantQuota(t, e.call(t, acme, "POST", "/v1/sensor-events", ev), http.StatusConflict, quota.QueuedTasks, 3)
	if n := e.count(t, acme, "/v1/tasks", "tasks"); n != 3 {
		t.Fatalf("%d tasks stored, want 3", n)
	}
	if _, err := e.Enqueue(ctx, host.TaskIntent{TaskType: "hello.c", Source: "test", Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{Tenant: "acme"}); !errors.Is(err, quota.ErrExceeded) {
		t.Fatalf("Host.Enqueue past the cap: %v", err)
	}
	if r := e.call(t, globex, "POST", "/v1/tasks", task); r.code != http.StatusCreated {
		t.Fatalf("globex: %d %s", r.code, r.body)
	}
	// A sensor event of a tenant with room: recorded, its task made.
	if r := e.call(t, globex, "POST", "/v1/sensor-events", ev); r.code != http.StatusCreated {
		t.Fatalf("globex sensor event: %d %s", r.code, r.body)
	}
}

// A schedule firing into a full queue makes no task: the slot is
// skipped with the quota in its schedule_task_created event, not an
// error, and firing goes on once the queue drains.
func TestQuotaScheduleIntoFullQueue(t *testing.T) {
	e := newQuotaEnv(t, Quotas{QueuedTasks: 1, ScheduleMinInterval: -1}, false)
	st := e.Store()
	if _, err := st.Enqueue(ctx, host.TaskIntent{TaskType: "hello.c", Source: "test", Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := st.CreateSchedule(ctx, host.ScheduleSpec{Name: "tick", IntervalSeconds: 1, Task: host.TaskIntent{TaskType: "hello.c", Payload: json.RawMessage(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	// As the dispatcher does: the counts read, then the due schedules
	// fired.
	e.quotas.Refresh(ctx)
	tasks, err := e.store.FireDueSchedules(ctx, time.Now().Add(2*time.Second))
	if err != nil || len(tasks) != 0 {
		t.Fatalf("fired into a full queue: %d tasks, %v", len(tasks), err)
	}
	evs, err := st.Events(ctx, host.EventFilter{Type: host.EventScheduleTaskCreated})
	if err != nil || len(evs) != 1 || evs[0].TaskID != "" || !strings.Contains(string(evs[0].Data), "quota queued_tasks") ||
		!strings.Contains(string(evs[0].Data), s.ScheduleID) {
		t.Fatalf("events %v %v: want one skipped slot naming the quota", evs, err)
	}
	if n, _ := st.CountTasks(ctx); n[host.TaskPending] != 1 {
		t.Fatalf("tasks %v, want the one enqueued", n)
	}
	if u := e.QuotaUsage(ctx); u[4].Quota != quota.QueuedTasks || u[4].Refusals != 1 || u[4].Ratio != 1 {
		t.Fatalf("usage %+v: want queued_tasks full, one refusal", u)
	}
}

// Active workflow records are capped per tenant (409, nothing stored); a
// canceled record frees its place.
func TestQuotaActiveWorkflows(t *testing.T) {
	e := newQuotaEnv(t, Quotas{ActiveWorkflows: 2}, false)
	acme, _ := e.token(t, "acme", "tasks:write,tasks:read")
	start := func(key string) apiReply {
		return e.call(t, acme, "POST", "/v1/workflows/goal-loop/records", fmt.Sprintf(`{"instance_key":%q,"context":{"goal":"g"}}`, key))
	}
	var first host.WorkflowRecord
	for i, k := range []string{"k1", "k2"} {
		r := start(k)
		if r.code != http.StatusCreated {
			t.Fatalf("start %s: %d %s", k, r.code, r.body)
		}
		if i == 0 {
			json.Unmarshal([]byte(r.body), &first)
		}
	}
	if r := start("k1"); r.code != http.StatusOK {
		t.Fatalf("an existing record's start: %d %s", r.code, r.body)
	}
	wantQuota(t, start("k3"), http.StatusConflict, quota.ActiveWorkflows, 2)
	if n := e.count(t, acme, "/v1/workflow-records", "workflow_records"); n != 2 {
		t.Fatalf("%d records stored, want 2", n)
	}
	if r := e.call(t, acme, "POST", "/v1/workflow-records/"+first.WorkflowID+":cancel", ""); r.code != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.code, r.body)
	}
	if r := start("k3"); r.code != http.StatusCreated {
		t.Fatalf("start after a cancel: %d %s", r.code, r.body)
	}
}

// Sensor events and messages are rated per tenant and minute: past the
// rate, 429 quota_exceeded with Retry-After, nothing stored.
func TestQuotaRates(t *testing.T) {
	e := newQuotaEnv(t, Quotas{SensorEventsPerMinute: 2, MessagesPerMinute: 2}, false)
	acme, _ := e.token(t, "acme", "tasks:write,tasks:read,messages:write,messages:read")
	globex, _ := e.token(t, "globex", "tasks:write")
	ev := func(key string) string {
		return fmt.Sprintf(`{"sensor_id":"ext","event_id":%q,"observed_at":"2026-01-02T15:04:05Z","source_ref":"r","dedupe_key":%q,"payload":{}}`, key, key)
	}
	for _, k := range []string{"a", "b"} {
		if r := e.call(t, acme, "POST", "/v1/sensor-events", ev(k)); r.code != http.StatusCreated {
			t.Fatalf("event %s: %d %s", k, r.code, r.body)
		}
	}
	r := e.call(t, acme, "POST", "/v1/sensor-events", ev("c"))
	wantQuota(t, r, http.StatusTooManyRequests, quota.SensorEvents, 2)
	if r.header.Get("Retry-After") == "" {
		t.Fatalf("no Retry-After: %v", r.header)
	}
	if l, err := e.Store().ListSensorEvents(ctx, host.SensorEventFilter{Tenant: "acme", Limit: 10}); err != nil || len(l) != 2 {
		t.Fatalf("%d sensor events stored (%v), want 2", len(l), err)
	}
	if r := e.call(t, globex, "POST", "/v1/sensor-events", ev("c")); r.code != http.StatusCreated {
		t.Fatalf("globex: %d %s", r.code, r.body)
	}
	post := func(n int) apiReply {
		req, _ := http.NewRequest("POST", e.url+"/v1/messages", bytes.NewReader(messagetest.Crisis(messagetest.BusID(n), "emotion_recognition")))
		req.Header.Set("Content-Type", "application/json; profile=bus-envelope")
		req.Header.Set("Authorization", "Bearer "+acme)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return apiReply{resp.StatusCode, resp.Header, b.String(), req.URL.Path}
	}
	for n := 1; n <= 2; n++ {
		if r := post(n); r.code != http.StatusCreated {
			t.Fatalf("message %d: %d %s", n, r.code, r.body)
		}
	}
	wantQuota(t, post(3), http.StatusTooManyRequests, quota.Messages, 2)
	if n := e.count(t, acme, "/v1/messages", "messages"); n != 2 {
		t.Fatalf("%d messages stored, want 2", n)
	}
}

// A definition whose state transitions to itself (the example goal.plan
// skill always signals planned) cycles until the step cap blocks the
// record: workflow_blocked's reason names the quota, and the record made
// no more tasks than the cap allows. Without the cap it never ends
// (issue 29, finding 5).
func TestQuotaWorkflowStepCap(t *testing.T) {
	const steps = 5
	e := newQuotaEnv(t, Quotas{WorkflowSteps: steps}, true, goalLoopPack(t))
	admin, _ := e.token(t, "acme", "admin")
	acme, _ := e.token(t, "acme", "tasks:write,tasks:read")
	def := `{"workflow_type":"spin","initial_state":"p","states":[{"state_id":"p","task_type":"goal.plan","emits_task_intent":true,
		"transitions":[{"signal":"planned","next_state":"p"}]}]}`
	if r := e.call(t, admin, "POST", "/v1/workflows", def); r.code != http.StatusCreated {
		t.Fatalf("define: %d %s", r.code, r.body)
	}
	r := e.call(t, acme, "POST", "/v1/workflows/spin/records", `{"instance_key":"k"}`)
	var rec host.WorkflowRecord
	if err := json.Unmarshal([]byte(r.body), &rec); err != nil || r.code != http.StatusCreated {
		t.Fatalf("start: %d %s", r.code, r.body)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := e.call(t, acme, "GET", "/v1/workflow-records/"+rec.WorkflowID, "")
		var got host.WorkflowRecord
		json.Unmarshal([]byte(r.body), &got)
		if got.Status == host.WorkflowBlocked {
			if got.Transitions != steps {
				t.Fatalf("blocked after %d transitions, want %d", got.Transitions, steps)
			}
			break
		}
		if got.Status != host.WorkflowActive || time.Now().After(deadline) {
			t.Fatalf("record %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	evs, err := e.Store().Events(ctx, host.EventFilter{Type: host.EventWorkflowBlocked})
	if err != nil || len(evs) != 1 {
		t.Fatalf("workflow_blocked events %v %v", evs, err)
	}
	var d struct{ Reason string }
	json.Unmarshal(evs[0].Data, &d)
	if !strings.Contains(d.Reason, "quota workflow_steps") || !strings.Contains(d.Reason, fmt.Sprint(steps)) || !strings.Contains(d.Reason, "--quota-workflow-steps") {
		t.Fatalf("reason %q: want the quota, its limit and its flag", d.Reason)
	}
	// The first task and one per transition; none after the block.
	time.Sleep(200 * time.Millisecond)
	if n := e.count(t, acme, "/v1/tasks?task_type=goal.plan", "tasks"); n != steps+1 {
		t.Fatalf("%d tasks, want %d", n, steps+1)
	}
}
