package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// Sensors checks host.Sensors: an accepted event and the task its
// proposed_task becomes, dedupe on (tenant, sensor_id, dedupe_key) among
// accepted events (also when recordings race), expiry against the
// store's clock, refusals, events applied after a direct invocation or
// staged by a task's attempt (applied only when it completes), listing,
// and the runtime events of each.
func Sensors(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"DedupeAndTask", sensorsDedupeAndTask},
		{"ExpiredRecordedAndRefused", sensorsExpiredRecordedAndRefused},
		{"ApplySensorEvents", sensorsApplySensorEvents},
		{"FinishAppliesStagedEvents", sensorsFinishAppliesStagedEvents},
		{"List", sensorsList},
		{"DedupeRace", sensorsDedupeRace},
	})
}

func sensorEvent(t testing.TB, doc string) host.SensorEvent {
	t.Helper()
	ev, err := host.DecodeSensorEvent([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// withTask is an event of sensor demo.watch proposing a demo.fix task;
// the clock's Epoch is 2026-03-01T12:00:00Z.
const withTask = `{"sensor_id":"demo.watch","event_id":"e1","observed_at":"2026-03-01T11:59:00Z","source_ref":"file:a",
	"dedupe_key":"a","payload":{"x":1},"proposed_task":{"task_type":"demo.fix","payload":{"file":"a"}}}`

func (f *fixture) routeDemo() { f.route("local.demo", "demo.fix", "demo.fix") }

func (f *fixture) recordSensor(ev host.SensorEvent, opts host.SensorEventOptions) *host.SensorEventRecord {
	f.t.Helper()
	r, err := f.b.RecordSensorEvent(ctx, ev, opts)
	if err != nil {
		f.t.Fatalf("record sensor event: %v", err)
	}
	return r
}

func sensorsDedupeAndTask(f *fixture) {
	t := f.t
	f.routeDemo()
	r := f.recordSensor(sensorEvent(t, withTask), host.SensorEventOptions{})
	if r.RecordID == "" || r.Status != host.SensorTaskCreated || r.TaskID == "" || r.Origin != "api" || r.Tenant != host.DefaultTenant ||
		!r.ReceivedAt.Equal(f.clock.Now()) || r.Event.EventID != "e1" || r.Event.DedupeKey != "a" {
		t.Fatalf("first: %+v", r)
	}
	task := f.task(r.TaskID)
	if task.Source != host.SensorSource("demo.watch") || task.TaskType != "demo.fix" || string(task.Payload) != `{"file":"a"}` ||
		task.Status != host.TaskPending || task.Tenant != host.DefaultTenant {
		t.Fatalf("task %+v", task)
	}
	f.wantTypes("the sensor's task", f.eventTypes(r.TaskID), host.EventTaskEnqueued, host.EventSensorEventRecorded, host.EventSensorTaskCreated)
	rec := f.events(host.EventFilter{Type: host.EventSensorEventRecorded})
	if d := eventData(t, rec[0]); d["record_id"] != r.RecordID || d["sensor_id"] != "demo.watch" || d["dedupe_key"] != "a" || d["status"] != string(host.SensorTaskCreated) {
		t.Fatalf("sensor_event_recorded %s", rec[0].Data)
	}
	// The same dedupe key again (another event id): nothing created.
	again := sensorEvent(t, withTask)
	again.EventID = "e2"
	f.clock.Add(time.Second)
	d := f.recordSensor(again, host.SensorEventOptions{})
	if d.Status != host.SensorDeduped || d.DuplicateOf != r.RecordID || d.TaskID != "" || d.RecordID == r.RecordID {
		t.Fatalf("duplicate: %+v", d)
	}
	dd := f.events(host.EventFilter{Type: host.EventSensorEventDeduped})
	if len(dd) != 1 || eventData(t, dd[0])["duplicate_of"] != r.RecordID {
		t.Fatalf("sensor_event_deduped events %+v", dd)
	}
	// Another sensor with the same key, and another tenant, have their own keys.
	other := sensorEvent(t, withTask)
	other.SensorID, other.ProposedTask.Source = "demo.other", ""
	if o := f.recordSensor(other, host.SensorEventOptions{}); o.Status != host.SensorTaskCreated {
		t.Fatalf("other sensor: %+v", o)
	}
	o := f.recordSensor(again, host.SensorEventOptions{Tenant: "acme"})
	if o.Status != host.SensorTaskCreated || o.Tenant != "acme" || f.task(o.TaskID).Tenant != "acme" {
		t.Fatalf("other tenant: %+v", o)
	}
	if n := len(f.tasks(host.TaskFilter{})); n != 3 {
		t.Fatalf("%d tasks, want 3", n)
	}
}

func sensorsExpiredRecordedAndRefused(f *fixture) {
	t := f.t
	f.routeDemo()
	ev := sensorEvent(t, `{"sensor_id":"s","event_id":"e","observed_at":"2026-03-01T10:00:00Z","source_ref":"r","dedupe_key":"k",
		"freshness_deadline":"2026-03-01T12:30:00Z","payload":{},"proposed_task":{"task_type":"demo.fix","payload":{}}}`)
	// Past its deadline on the store's clock: recorded as expired, nothing created.
	f.clock.Set(Epoch.Add(31 * time.Minute))
	r := f.recordSensor(ev, host.SensorEventOptions{})
	if r.Status != host.SensorExpired || r.TaskID != "" || r.Detail == "" {
		t.Fatalf("expired: %+v", r)
	}
	if n := len(f.events(host.EventFilter{Type: host.EventSensorEventExpired})); n != 1 {
		t.Fatalf("%d sensor_event_expired events", n)
	}
	// An expired event holds no key: the same key, fresh, is accepted.
	f.clock.Set(Epoch)
	if fresh := f.recordSensor(ev, host.SensorEventOptions{}); fresh.Status != host.SensorTaskCreated {
		t.Fatalf("fresh after expired: %+v", fresh)
	}
	// Nothing proposed: recorded, and it holds its key.
	plain := sensorEvent(t, `{"sensor_id":"s","event_id":"e","observed_at":"2026-03-01T10:00:00Z","source_ref":"r","dedupe_key":"p","payload":{}}`)
	if p := f.recordSensor(plain, host.SensorEventOptions{}); p.Status != host.SensorRecorded || p.TaskID != "" {
		t.Fatalf("plain: %+v", p)
	}
	if p := f.recordSensor(plain, host.SensorEventOptions{}); p.Status != host.SensorDeduped {
		t.Fatalf("plain again: %+v", p)
	}
	// A proposed_task nothing serves: refused, nothing stored.
	before := len(f.events(host.EventFilter{}))
	unrouted := ev
	unrouted.DedupeKey, unrouted.FreshnessDeadline = "u", ""
	unrouted.ProposedTask = &host.TaskIntent{TaskType: "no.route", Source: "sensor:s", Payload: []byte(`{}`)}
	_, err := f.b.RecordSensorEvent(ctx, unrouted, host.SensorEventOptions{})
	wantField(t, err, "proposed_task.task_type")
	// An invalid event or tenant: refused, nothing stored.
	bad := plain
	bad.DedupeKey = ""
	_, err = f.b.RecordSensorEvent(ctx, bad, host.SensorEventOptions{})
	wantField(t, err, "dedupe_key")
	_, err = f.b.RecordSensorEvent(ctx, plain, host.SensorEventOptions{Tenant: "Bad Tenant"})
	wantField(t, err, "tenant")
	if after := len(f.events(host.EventFilter{})); after != before {
		t.Fatalf("refused events appended %d runtime events", after-before)
	}
	if evs, _ := f.b.ListSensorEvents(ctx, host.SensorEventFilter{}); len(evs) != 4 {
		t.Fatalf("%d records, want 4", len(evs))
	}
}

func sensorsApplySensorEvents(f *fixture) {
	t := f.t
	f.routeDemo()
	good := sensorEvent(t, withTask)
	unrouted := sensorEvent(t, withTask)
	unrouted.DedupeKey, unrouted.ProposedTask.TaskType = "b", "no.route"
	dup := sensorEvent(t, withTask)
	dup.EventID = "e3"
	got, err := f.b.ApplySensorEvents(ctx, []host.SensorEvent{good, unrouted, dup}, host.SensorEventOptions{Tenant: "acme"}, "att-1")
	if err != nil || len(got) != 3 {
		t.Fatalf("apply: %+v %v", got, err)
	}
	want := []host.SensorEventStatus{host.SensorTaskCreated, host.SensorRefused, host.SensorDeduped}
	for i, r := range got {
		if r.Status != want[i] || r.Origin != "attempt:att-1" || r.Tenant != "acme" {
			t.Fatalf("record %d: %+v, want status %s", i, r, want[i])
		}
	}
	if got[1].Detail == "" || got[2].DuplicateOf != got[0].RecordID {
		t.Fatalf("refused %+v, deduped %+v", got[1], got[2])
	}
	refused := f.events(host.EventFilter{Type: host.EventSensorEventRefused})
	if len(refused) != 1 || refused[0].AttemptID != "att-1" {
		t.Fatalf("sensor_event_refused events %+v", refused)
	}
	if task := f.task(got[0].TaskID); task.Tenant != "acme" {
		t.Fatalf("task %+v", task)
	}
	// A given origin is kept.
	more := sensorEvent(t, withTask)
	more.DedupeKey = "c"
	if got, err := f.b.ApplySensorEvents(ctx, []host.SensorEvent{more}, host.SensorEventOptions{Origin: "api"}, "att-2"); err != nil || got[0].Origin != "api" {
		t.Fatalf("origin: %+v %v", got, err)
	}
}

// Staged events are applied by the Finish that completes the task, in
// its write, and dropped when it does not complete.
func sensorsFinishAppliesStagedEvents(f *fixture) {
	t := f.t
	f.routeDemo()
	for _, ok := range []bool{false, true} {
		f.enqueue(intent("demo.fix", nil), host.EnqueueOptions{MaxAttempts: 1, Tenant: "acme"})
		task := f.claim()
		ev := sensorEvent(t, withTask)
		bad := sensorEvent(t, withTask)
		bad.DedupeKey, bad.ProposedTask.TaskType = "b", "no.route"
		out := okOutcome()
		if !ok {
			out.MachineStatus = host.MachineFailed
		}
		f.finish(task, host.FinishInput{Outcome: out, SensorEvents: []host.SensorEvent{ev, bad}})
		evs, err := f.b.ListSensorEvents(ctx, host.SensorEventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if !ok && len(evs) != 0 {
			t.Fatalf("a failed attempt's events applied: %d", len(evs))
		}
		if ok {
			if len(evs) != 2 || evs[1].Status != host.SensorTaskCreated || evs[1].Origin != "task:"+task.TaskID || evs[1].Tenant != "acme" ||
				evs[0].Status != host.SensorRefused {
				t.Fatalf("applied: %+v", evs)
			}
			if child := f.task(evs[1].TaskID); child.Tenant != "acme" || child.Source != host.SensorSource("demo.watch") {
				t.Fatalf("the event's task %+v", child)
			}
		}
	}
}

func sensorsList(f *fixture) {
	t := f.t
	for i, c := range []struct{ sensor, tenant, origin string }{
		{"s1", "", ""}, {"s2", "", "task:t1"}, {"s1", "acme", ""}, {"s1", "", "task:t1"},
	} {
		ev := sensorEvent(t, fmt.Sprintf(`{"sensor_id":%q,"event_id":"e","observed_at":"2026-03-01T10:00:00Z","source_ref":"r","dedupe_key":"k%d","payload":{}}`, c.sensor, i))
		f.recordSensor(ev, host.SensorEventOptions{Tenant: c.tenant, Origin: c.origin})
		f.clock.Add(time.Second)
	}
	for _, tt := range []struct {
		filter host.SensorEventFilter
		keys   string
	}{
		{host.SensorEventFilter{}, "k3,k2,k1,k0"},
		{host.SensorEventFilter{SensorID: "s1"}, "k3,k2,k0"},
		{host.SensorEventFilter{Tenant: "acme"}, "k2"},
		{host.SensorEventFilter{Tenant: host.DefaultTenant}, "k3,k1,k0"},
		{host.SensorEventFilter{Origin: "task:t1"}, "k3,k1"},
		{host.SensorEventFilter{Origin: "api", SensorID: "s1", Tenant: host.DefaultTenant}, "k0"},
		{host.SensorEventFilter{Limit: 2}, "k3,k2"},
		{host.SensorEventFilter{SensorID: "nope"}, ""},
	} {
		evs, err := f.b.ListSensorEvents(ctx, tt.filter)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, e := range evs {
			keys = append(keys, e.Event.DedupeKey)
		}
		if got := strings.Join(keys, ","); got != tt.keys {
			t.Fatalf("%+v: %v, want %s (newest first)", tt.filter, keys, tt.keys)
		}
	}
}

// Recordings of one dedupe key racing on one store: one accepted, one task.
func sensorsDedupeRace(f *fixture) { raceSensorDedupe(f, repeat(f.b, 3)) }
