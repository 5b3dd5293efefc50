package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/internal/message/messagetest"
)

// The tenants of SeedTenantEvents, and the events of theirs that belong to
// no task: each tenant's must be listed for it and for no other (issue 29).
var (
	seededTenants   = []string{"acme", "other"}
	untiedOfATenant = []string{host.EventScheduleUpserted, host.EventWorkflowCreated, host.EventSensorEventRecorded,
		host.EventMessageAccepted, "api_call", "custom.attempt_note", host.EventArtifactRecorded}
	// hostWide are the events SeedTenantEvents leaves that belong to no
	// tenant: listed only without a tenant.
	hostWide = []string{host.EventDispatchLocked, host.EventTaskTypesUpdated, host.EventDispatchIdle, "custom.host_note"}
)

// SeedTenantEvents fills b with events of tenants acme and other and of
// the whole host, the mix CheckTenantEvents checks. For each tenant: a
// schedule (schedule_upserted), a goal-loop workflow record
// (workflow_created, and its first task), a sensor event proposing
// nothing (sensor_event_recorded), a message no one subscribes to
// (message_accepted), an api_call as internal/api appends it (the tenant
// in its data), a task run to completion, an event of that task whose
// data names the other tenant (the task's tenant wins), and an attempt
// with no task, an artifact it stored before it was recorded, and an
// event naming only the attempt. For the host: the dispatch
// lock, a task type route (task_types_updated), dispatch_idle and an
// event whose data's tenant is not a string.
func SeedTenantEvents(t *testing.T, b host.Backend, clock *Clock) {
	t.Helper()
	f := &fixture{t: t, b: b, clock: clock}
	f.seedTenantEvents()
}

func (f *fixture) seedTenantEvents() {
	t := f.t
	t.Helper()
	if _, err := f.b.AcquireDispatchLock(ctx, "runner-1", time.Hour); err != nil {
		t.Fatal(err)
	}
	f.route("local.demo", "demo", "demo.node")
	for i, tenant := range seededTenants {
		task := f.enqueue(intent("demo", nil), host.EnqueueOptions{Tenant: tenant})
		c := f.claim()
		if c.TaskID != task.TaskID {
			t.Fatalf("claimed %s, want %s", c.TaskID, task.TaskID)
		}
		f.finish(c, host.FinishInput{Outcome: okOutcome()})
		f.appendEvent(host.Event{Type: "custom.task_note", TaskID: task.TaskID, Data: json.RawMessage(fmt.Sprintf(`{"tenant":%q}`, seededTenants[1-i]))})

		// A direct invocation's attempt stores an artifact while it
		// runs, before the attempt is recorded.
		a := &host.Attempt{AttemptID: host.NewID("att"), Pack: "local.demo@1.0.0", ModuleSHA256: "ab12", Node: "demo.node", RunID: "run-" + tenant, Tenant: tenant,
			ABIVersion: "1.0", Input: json.RawMessage(`{}`), Output: json.RawMessage(`{}`), Outcome: abi.Completed}
		if _, err := f.b.PutArtifact(ctx, host.ArtifactInput{AttemptID: a.AttemptID, Tenant: tenant, Role: host.RoleOutput, Name: "out.txt", Data: []byte(tenant)}); err != nil {
			t.Fatal(err)
		}
		if err := f.b.RecordAttempt(ctx, a); err != nil {
			t.Fatal(err)
		}
		f.appendEvent(host.Event{Type: "custom.attempt_note", AttemptID: a.AttemptID, Data: json.RawMessage(`{"n":1}`)})
	}
	for i, tenant := range seededTenants {
		spec := scheduleSpec("tick", 60)
		spec.Tenant = tenant
		f.createSchedule(spec)
		f.startGoalLoop("g", tenant)
		f.recordSensor(sensorEvent(t, `{"sensor_id":"demo.watch","event_id":"e1","observed_at":"2026-03-01T11:59:00Z","source_ref":"file:a","dedupe_key":"a","payload":{"x":1}}`),
			host.SensorEventOptions{Tenant: tenant})
		f.publish(prepare(t, message.FormatBus, messagetest.Crisis(messagetest.BusID(i+1), "emotion_recognition"), tenant))
		f.appendEvent(host.Event{Type: "api_call", Data: json.RawMessage(fmt.Sprintf(`{"method":"POST","route":"POST /v1/schedules","tenant":%q,"token_id":"tok-%s","token_name":"%s-admin"}`, tenant, tenant, tenant))})
	}
	f.appendEvent(host.Event{Type: host.EventDispatchIdle, Data: json.RawMessage(`{"idle_ms":5}`)})
	f.appendEvent(host.Event{Type: "custom.host_note", Data: json.RawMessage(`{"tenant":7}`)})
}

func (f *fixture) appendEvent(e host.Event) {
	f.t.Helper()
	if _, err := f.b.AppendEvent(ctx, e); err != nil {
		f.t.Fatalf("append %s: %v", e.Type, err)
	}
}

// CheckTenantEvents checks the events SeedTenantEvents left, as
// EventFilter.Tenant selects them: each tenant's listing holds exactly
// the events that are its own (those of its tasks, of its attempts, and
// those tied to no task whose data names it), its schedule_upserted,
// workflow_created, sensor_event_recorded, message_accepted and api_call
// among them, and nothing the other tenant did; an event of the whole
// host is in no tenant's listing, only in the one without a tenant. It
// returns the seqs each tenant lists, for a caller to compare.
func CheckTenantEvents(t *testing.T, b host.Backend) map[string][]int64 {
	t.Helper()
	f := &fixture{t: t, b: b}
	return f.checkTenantEvents()
}

// ownerOf is whose an event is, by the rule storecore.DataTenant states,
// worked out here from the task, the attempt and the data.
func (f *fixture) ownerOf(e *host.Event) string {
	f.t.Helper()
	if e.TaskID != "" {
		if task, err := f.b.Task(ctx, e.TaskID); err == nil {
			return task.Tenant
		}
	}
	if e.AttemptID != "" {
		if a, err := f.b.Attempt(ctx, e.AttemptID); err == nil {
			return a.Tenant
		}
	}
	var d struct {
		Tenant any `json:"tenant"`
	}
	_ = json.Unmarshal(e.Data, &d) // not JSON: no tenant named
	s, _ := d.Tenant.(string)
	return s
}

func (f *fixture) checkTenantEvents() map[string][]int64 {
	t := f.t
	t.Helper()
	all := f.events(host.EventFilter{Limit: 100000})
	want := map[string][]int64{}
	var hostTypes []string
	for _, e := range all {
		o := f.ownerOf(e)
		want[o] = append(want[o], e.Seq)
		if o == "" {
			hostTypes = append(hostTypes, e.Type)
		}
	}
	slices.Sort(hostTypes)
	wantHost := slices.Clone(hostWide)
	slices.Sort(wantHost)
	if !reflect.DeepEqual(hostTypes, wantHost) {
		t.Errorf("events of no tenant: %v, want %v", hostTypes, wantHost)
	}
	got := map[string][]int64{}
	for i, tenant := range seededTenants {
		other := seededTenants[1-i]
		evs := f.events(host.EventFilter{Tenant: tenant, Limit: 100000})
		untied := map[string]int{}
		for _, e := range evs {
			got[tenant] = append(got[tenant], e.Seq)
			if e.TaskID == "" {
				untied[e.Type]++
			}
			if e.TaskID == "" && e.AttemptID == "" && strings.Contains(string(e.Data), `"`+other+`"`) {
				t.Errorf("tenant %s lists %s %s", tenant, e.Type, e.Data)
			}
		}
		for _, typ := range untiedOfATenant {
			if untied[typ] != 1 {
				t.Errorf("tenant %s lists %d %s events tied to no task, want 1 (all: %v)", tenant, untied[typ], typ, untied)
			}
		}
		if !reflect.DeepEqual(got[tenant], want[tenant]) {
			t.Errorf("tenant %s lists seqs %v, want %v", tenant, got[tenant], want[tenant])
		}
		// A page at a time, and by type, the same rule.
		if evs := f.events(host.EventFilter{Tenant: tenant, Type: host.EventScheduleUpserted}); len(evs) != 1 || f.ownerOf(evs[0]) != tenant {
			t.Errorf("tenant %s, type schedule_upserted: %d events", tenant, len(evs))
		}
		if page := f.events(host.EventFilter{Tenant: tenant, AfterSeq: want[tenant][1], Limit: 2}); len(page) != 2 || page[0].Seq != want[tenant][2] || page[1].Seq != want[tenant][3] {
			t.Errorf("tenant %s, a page after %d: %v", tenant, want[tenant][1], page)
		}
	}
	if evs := f.events(host.EventFilter{Tenant: "nobody"}); len(evs) != 0 {
		t.Errorf("tenant nobody lists %d events", len(evs))
	}
	return got
}

func evidenceEventsOfTenantsTiedToNoTask(f *fixture) {
	f.seedTenantEvents()
	f.checkTenantEvents()
}
