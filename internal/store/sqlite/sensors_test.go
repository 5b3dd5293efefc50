package sqlite

import (
	"fmt"
	"sync"
	"testing"

	"github.com/packrun/packrun/host"
)

func sensorEvent(t testing.TB, doc string) host.SensorEvent {
	t.Helper()
	ev, err := host.DecodeSensorEvent([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func routeDemo(t testing.TB, f *fixture) {
	t.Helper()
	if err := f.SetPackTaskTypes(ctx, "local.demo", []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: "demo.fix"}, Pack: "local.demo", Node: "demo.fix"}}); err != nil {
		t.Fatal(err)
	}
}

const withTask = `{"sensor_id":"demo.watch","event_id":"e1","observed_at":"2026-03-01T11:59:00Z","source_ref":"file:a",
	"dedupe_key":"a","payload":{"x":1},"proposed_task":{"task_type":"demo.fix","payload":{"file":"a"}}}`

func TestSensorEventDedupeAndTask(t *testing.T) {
	f := newFixture(t, Options{})
	routeDemo(t, f)
	r, err := f.RecordSensorEvent(ctx, sensorEvent(t, withTask), host.SensorEventOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != host.SensorTaskCreated || r.TaskID == "" || r.Origin != "api" {
		t.Fatalf("first: %+v", r)
	}
	task, err := f.Task(ctx, r.TaskID)
	if err != nil || task.Source != "sensor:demo.watch" || string(task.Payload) != `{"file":"a"}` {
		t.Fatalf("task %+v %v", task, err)
	}
	if got := eventTypes(t, f.Store, r.TaskID); fmt.Sprint(got) != "[task_enqueued sensor_event_recorded sensor_task_created]" {
		t.Fatalf("events %v", got)
	}
	// The same dedupe key again (another event id): nothing created.
	again := sensorEvent(t, withTask)
	again.EventID = "e2"
	d, err := f.RecordSensorEvent(ctx, again, host.SensorEventOptions{})
	if err != nil || d.Status != host.SensorDeduped || d.DuplicateOf != r.RecordID || d.TaskID != "" {
		t.Fatalf("duplicate: %+v %v", d, err)
	}
	// Another tenant has its own keys.
	if o, err := f.RecordSensorEvent(ctx, again, host.SensorEventOptions{Tenant: "acme"}); err != nil || o.Status != host.SensorTaskCreated {
		t.Fatalf("other tenant: %+v %v", o, err)
	}
	tasks, _ := f.ListTasks(ctx, host.TaskFilter{})
	if len(tasks) != 2 {
		t.Fatalf("%d tasks", len(tasks))
	}
	evs, err := f.ListSensorEvents(ctx, host.SensorEventFilter{SensorID: "demo.watch", Tenant: "default"})
	if err != nil || len(evs) != 2 || evs[0].Status != host.SensorDeduped {
		t.Fatalf("list: %v %v", evs, err)
	}
	all, _ := f.Events(ctx, host.EventFilter{Type: host.EventSensorEventDeduped})
	if len(all) != 1 {
		t.Fatalf("%d sensor_event_deduped events", len(all))
	}
}

func TestSensorEventExpiredWorkflowAndRefused(t *testing.T) {
	f := newFixture(t, Options{})
	// The fixture's clock is 2026-03-01T12:00:00Z.
	ev := sensorEvent(t, `{"sensor_id":"s","event_id":"e","observed_at":"2026-03-01T10:00:00Z","source_ref":"r","dedupe_key":"k",
		"freshness_deadline":"2026-03-01T11:00:00Z","payload":{},"proposed_task":{"task_type":"demo.fix","payload":{}}}`)
	r, err := f.RecordSensorEvent(ctx, ev, host.SensorEventOptions{})
	if err != nil || r.Status != host.SensorExpired || r.TaskID != "" {
		t.Fatalf("expired: %+v %v", r, err)
	}
	// An expired event holds no key: a fresh one with it is accepted,
	// but its task type routes nowhere: refused, nothing stored.
	ev.FreshnessDeadline = ""
	_, err = f.RecordSensorEvent(ctx, ev, host.SensorEventOptions{})
	if he, ok := err.(*host.Error); !ok || he.Field != "proposed_task.task_type" {
		t.Fatalf("unrouted: %v", err)
	}
	if evs, _ := f.ListSensorEvents(ctx, host.SensorEventFilter{}); len(evs) != 1 {
		t.Fatalf("a refused event was stored: %d records", len(evs))
	}
	wf := sensorEvent(t, `{"sensor_id":"s","event_id":"e","observed_at":"2026-03-01T10:00:00Z","source_ref":"r","dedupe_key":"w",
		"payload":{},"proposed_workflow":{"template":"triage","instance_key":"i1"}}`)
	_, err = f.RecordSensorEvent(ctx, wf, host.SensorEventOptions{})
	if he, ok := err.(*host.Error); !ok || he.Field != "proposed_workflow.template" {
		t.Fatalf("unregistered workflow: %v", err)
	}
	wf.ProposedWorkflow.Template = host.GoalLoop
	r, err = f.RecordSensorEvent(ctx, wf, host.SensorEventOptions{})
	if err != nil || r.Status != host.SensorWorkflowCreated || r.WorkflowID == "" {
		t.Fatalf("workflow: %+v %v", r, err)
	}
}

// Staged events are applied by the Finish that completes the task, in
// its transaction, and dropped when it does not complete.
func TestFinishAppliesStagedSensorEvents(t *testing.T) {
	f := newFixture(t, Options{})
	routeDemo(t, f)
	for _, ok := range []bool{false, true} {
		mustEnqueue(t, f.Store, intent("demo.fix", nil), host.EnqueueOptions{MaxAttempts: 1})
		task := mustClaim(t, f.Store, f.clock.Now())
		a := attemptFor(t, f.Store, task)
		ev := sensorEvent(t, withTask)
		bad := sensorEvent(t, withTask)
		bad.DedupeKey, bad.ProposedTask.TaskType = "b", "no.route"
		in := host.FinishInput{AttemptID: a.AttemptID, Outcome: okOutcome(), SensorEvents: []host.SensorEvent{ev, bad}}
		if !ok {
			in.Outcome.MachineStatus = host.MachineFailed
		}
		if _, err := f.Finish(ctx, task.TaskID, in); err != nil {
			t.Fatal(err)
		}
		evs, _ := f.ListSensorEvents(ctx, host.SensorEventFilter{})
		if !ok && len(evs) != 0 {
			t.Fatalf("a failed attempt's events applied: %d", len(evs))
		}
		if ok {
			if len(evs) != 2 || evs[1].Status != host.SensorTaskCreated || evs[1].Origin != "task:"+task.TaskID || evs[0].Status != host.SensorRefused {
				t.Fatalf("applied: %+v", evs)
			}
		}
	}
}

// Two stores on one file record the same dedupe key at once, many times:
// one event is accepted and one task created per key.
func TestSensorDedupeAcrossStores(t *testing.T) {
	f := newFixture(t, Options{})
	routeDemo(t, f)
	other := f.another(t)
	for i := range 20 {
		ev := sensorEvent(t, withTask)
		ev.DedupeKey = fmt.Sprint("k", i)
		var wg sync.WaitGroup
		for _, s := range []*Store{f.Store, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.RecordSensorEvent(ctx, ev, host.SensorEventOptions{}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	tasks, _ := f.ListTasks(ctx, host.TaskFilter{Limit: 1000})
	evs, _ := f.ListSensorEvents(ctx, host.SensorEventFilter{Limit: 1000})
	if len(tasks) != 20 || len(evs) != 40 {
		t.Fatalf("%d tasks, %d records; want 20 and 40", len(tasks), len(evs))
	}
}
