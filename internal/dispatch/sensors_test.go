package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/packs"
)

// sensorEnv is a dispatcher serving testdata/modules/sensor.wasm as
// local.sensor, its node of the given kind, with the given grants, and
// its routes: sensor:test.sensor and test.fix both to the node.
func sensorEnv(t *testing.T, kind, grants string) env {
	t.Helper()
	arch, _ := wasmPack(t, "sensor.wasm", `"name":"local.sensor","version":"1.0.0","runtime":{"language":"wasm","abi":{"version":1,"minor":1},
		"modules":[{"path":"sensor.wasm","sha256":%q}]},"nodes":[{"typeId":"test.sensor","kind":"`+kind+`"}]`+grants)
	e := newEnv(t, "")
	e.d.cfg.Packs = onePack{arch}
	routes := []host.TaskTypeRoute{
		{TaskTypeSpec: host.TaskTypeSpec{TaskType: host.SensorTaskType("test.sensor")}, Pack: "local.sensor", Node: "test.sensor"},
		{TaskTypeSpec: host.TaskTypeSpec{TaskType: "test.fix"}, Pack: "local.sensor", Node: "test.sensor"},
	}
	if err := e.backend.SetPackTaskTypes(context.Background(), "local.sensor", routes); err != nil {
		t.Fatal(err)
	}
	return e
}

// wasmPack packs testdata/modules/<module> with the manifest members
// members (a format whose one %q is the module's sha256), and returns the
// archive and the module's bytes.
func wasmPack(t testing.TB, module, members string) (*packs.Archive, []byte) {
	t.Helper()
	wasm, err := os.ReadFile("../../testdata/modules/" + module)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum := sha256.Sum256(wasm)
	os.WriteFile(filepath.Join(dir, "pack.json"), []byte("{"+fmt.Sprintf(members, hex.EncodeToString(sum[:]))+"}"), 0o644)
	os.WriteFile(filepath.Join(dir, module), wasm, 0o644)
	b, err := packs.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	arch, err := packs.Read(strings.NewReader(string(b)), packs.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return arch, wasm
}

// runSensorTask enqueues and runs one task of the sensor's task type.
func runSensorTask(t *testing.T, e env) *host.TaskRecord {
	t.Helper()
	return runTaskOf(t, e, host.SensorTaskType("test.sensor"))
}

// runTaskOf enqueues and runs one task of taskType.
func runTaskOf(t *testing.T, e env, taskType string) *host.TaskRecord {
	t.Helper()
	ctx := context.Background()
	if _, err := e.backend.Enqueue(ctx, host.TaskIntent{TaskType: taskType, Source: "test", Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	task, err := e.backend.Claim(ctx, "r", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.d.RunTask(ctx, task)
	done, err := e.backend.Task(ctx, task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	return done
}

func sensorRecords(t *testing.T, e env) map[string]*host.SensorEventRecord {
	t.Helper()
	evs, err := e.backend.ListSensorEvents(context.Background(), host.SensorEventFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*host.SensorEventRecord{}
	for _, r := range evs {
		out[r.Event.EventID+"/"+string(r.Status)] = r
	}
	return out
}

// A scheduled sensor's events (one by sensor_emit, one in its output) are
// applied when its task completes: the first run creates the proposed
// task, the second is deduped.
func TestSensorTaskAppliesEvents(t *testing.T) {
	e := sensorEnv(t, "sensor", `,"grants":{"services":["sensors"]}`)
	task := runSensorTask(t, e)
	if task.Status != host.TaskCompleted {
		t.Fatalf("sensor task %s: %s", task.Status, task.LastError)
	}
	recs := sensorRecords(t, e)
	a, b := recs["a1/task_created"], recs["b1/recorded"]
	if a == nil || b == nil || len(recs) != 2 || a.Origin != "task:"+task.TaskID || a.Event.SensorID != "test.sensor" {
		t.Fatalf("records %v", recs)
	}
	fix, err := e.backend.Task(context.Background(), a.TaskID)
	if err != nil || fix.TaskType != "test.fix" || fix.Source != "sensor:test.sensor" {
		t.Fatalf("created task %+v %v", fix, err)
	}
	runSensorTask(t, e)
	recs = sensorRecords(t, e)
	if recs["a1/deduped"] == nil || recs["b1/deduped"] == nil || len(recs) != 4 {
		t.Fatalf("second run: %v", recs)
	}
}

// Without the sensors grant sensor_emit is denied (the output's events,
// the sensor's own report, still count), as is an event proposing a task
// nothing serves; a node that is not a sensor has
// its output's sensor_events ignored.
func TestSensorEmitNeedsGrant(t *testing.T) {
	e := sensorEnv(t, "sensor", "")
	if task := runSensorTask(t, e); task.Status != host.TaskCompleted || !strings.Contains(task.Outcome.RawOutput, `"emitted":false`) {
		t.Fatalf("without the grant: %+v", task.Outcome)
	}
	if recs := sensorRecords(t, e); len(recs) != 1 || recs["b1/recorded"] == nil {
		t.Fatalf("records %v", recs)
	}
	// A proposed task nothing serves: sensor_emit refuses the event.
	u := sensorEnv(t, "sensor", `,"grants":{"services":["sensors"]}`)
	if err := u.backend.SetPackTaskTypes(context.Background(), "local.sensor", []host.TaskTypeRoute{
		{TaskTypeSpec: host.TaskTypeSpec{TaskType: host.SensorTaskType("test.sensor")}, Pack: "local.sensor", Node: "test.sensor"}}); err != nil {
		t.Fatal(err)
	}
	if task := runSensorTask(t, u); !strings.Contains(task.Outcome.RawOutput, `"emitted":false`) {
		t.Fatalf("unrouted proposed task: %+v", task.Outcome)
	}
	n := sensorEnv(t, "node", `,"grants":{"services":["sensors"]}`)
	runSensorTask(t, n)
	if recs := sensorRecords(t, n); len(recs) != 1 || recs["a1/task_created"] == nil {
		t.Fatalf("a plain node: %v", recs)
	}
}

// A direct invocation applies its events once it completes.
func TestSensorInvokeAppliesEvents(t *testing.T) {
	e := sensorEnv(t, "sensor", `,"grants":{"services":["sensors"]}`)
	att, _, err := e.d.Invoke(context.Background(), InvokeRequest{Pack: "local.sensor", Node: "test.sensor", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	recs := sensorRecords(t, e)
	if a := recs["a1/task_created"]; a == nil || a.Origin != "attempt:"+att.AttemptID || a.Tenant != "acme" || len(recs) != 2 {
		t.Fatalf("records %v", recs)
	}
}

// A sensor's output events are decoded as sensor_emit's are; an invalid
// one (or one naming another sensor) is an error that fails the attempt.
func TestReportedEventsFromOutput(t *testing.T) {
	l := &loaded{manifest: &packs.Manifest{Nodes: []packs.Node{{TypeID: "s.one", Kind: packs.KindSensor}, {TypeID: "n.one", Kind: packs.KindNode}}}}
	const ev = `{"event_id":"e","observed_at":"2026-01-02T15:04:05Z","source_ref":"r","dedupe_key":"k","payload":{}}`
	for out, want := range map[string]string{
		`{"sensor_events":[` + ev + `]}`:       "",
		`{"other":1}`:                          "",
		`"text"`:                               "",
		`{"sensor_events":{}}`:                 "must be an array",
		`{"sensor_events":[{"event_id":"e"}]}`: "sensor_events[0]",
		`{"sensor_events":[` + strings.Replace(ev, `{`, `{"sensor_id":"s.two",`, 1) + `]}`: "not this node's",
	} {
		evs, err := reportedEvents(l, "s.one", json.RawMessage(out), newServices(binding{}))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", out, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: error %v, want %q", out, err, want)
		case want == "" && strings.Contains(out, "sensor_events") && (len(evs) != 1 || evs[0].SensorID != "s.one"):
			t.Errorf("%s: events %+v", out, evs)
		}
	}
	// A node that is not a sensor: its output is not read.
	if evs, err := reportedEvents(l, "n.one", json.RawMessage(`{"sensor_events":{}}`), newServices(binding{})); err != nil || len(evs) != 0 {
		t.Fatalf("plain node: %v %v", evs, err)
	}
}
