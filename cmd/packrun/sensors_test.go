package main

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

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
)

// sensorHome is a home with the signed fixture sensor pack installed
// (testdata/modules/sensor.wasm as local.sensor: node test.sensor, kind
// sensor, cadence 1s, the sensors grant; a skill of the C hello pack
// serves task type test.fix, which the sensor proposes).
func sensorHome(t *testing.T) homeCLI {
	t.Helper()
	h := helloHome(t)
	wasm, err := os.ReadFile("../../testdata/modules/sensor.wasm")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	sum := sha256.Sum256(wasm)
	manifest := fmt.Sprintf(`{"name":"local.sensor","version":"1.0.0","runtime":{"language":"wasm","abi":{"version":1,"minor":1},
		"modules":[{"path":"sensor.wasm","sha256":%q}]},
		"nodes":[{"typeId":"test.sensor","kind":"sensor","cadence":"1s","description":"fixture sensor"}],
		"grants":{"services":["sensors"]}}`, hex.EncodeToString(sum[:]))
	os.WriteFile(filepath.Join(src, "pack.json"), []byte(manifest), 0o644)
	os.WriteFile(filepath.Join(src, "sensor.wasm"), wasm, 0o644)
	key, pack := filepath.Join(dir, "k"), filepath.Join(dir, "sensor.pack")
	h.ok("keys", "generate", "--out", key)
	h.ok("pack", src, "-o", pack)
	h.ok("sign", pack, "--key", key+".key")
	h.ok("trust", "add-key", "k2", key+".pub", "--namespace", "local.sensor")
	h.ok("install", pack)
	// test.fix: served by the hello pack's node through an operator
	// override, so the sensor's proposed task routes.
	b := homeStore(t, h.home)
	if err := b.SetTaskTypeOverride(context.Background(), host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "test.fix"}, Pack: "local.hello.c", Node: "example.hello"}); err != nil {
		t.Fatal(err)
	}
	return h
}

// The sensors commands over an installed sensor: list shows its cadence
// and schedule, run applies its events (then dedupes them), events lists
// them; pausing its schedule disables it; uninstalling removes it.
func TestSensorsCommands(t *testing.T) {
	h := sensorHome(t)
	var sensors []packrun.Sensor
	if err := json.Unmarshal([]byte(h.ok("sensors", "list", "--json")), &sensors); err != nil {
		t.Fatal(err)
	}
	if len(sensors) != 1 || sensors[0].SensorID != "test.sensor" || sensors[0].Cadence != "1s" || !sensors[0].Enabled || sensors[0].Schedule == nil {
		t.Fatalf("sensors %+v", sensors)
	}
	if out := h.ok("schedules", "show", "sensor:test.sensor"); !strings.Contains(out, `"interval_seconds":1,`) {
		t.Fatalf("schedule: %s", out)
	}
	out := h.ok("sensors", "run", "test.sensor")
	if !strings.Contains(out, "event a1 (dedupe_key a): task_created, task ") || !strings.Contains(out, "event b1 (dedupe_key b): recorded") {
		t.Fatalf("run:\n%s", out)
	}
	if out := h.ok("sensors", "run", "test.sensor"); strings.Count(out, ": deduped") != 2 {
		t.Fatalf("second run:\n%s", out)
	}
	var recs []host.SensorEventRecord
	if err := json.Unmarshal([]byte(h.ok("sensors", "events", "--sensor", "test.sensor", "--json")), &recs); err != nil || len(recs) != 4 {
		t.Fatalf("events: %d %v", len(recs), err)
	}
	if code, _, errs := h.run("sensors", "run", "no.such"); code != exitNotFound || !strings.Contains(errs, "no.such") {
		t.Fatalf("unknown sensor: exit %d %q", code, errs)
	}
	h.ok("schedules", "pause", "sensor:test.sensor")
	if out := h.ok("sensors", "list"); !strings.Contains(out, "false") {
		t.Fatalf("paused:\n%s", out)
	}
	h.ok("uninstall", "local.sensor")
	if out := h.ok("schedules", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("schedules after uninstall: %s", out)
	}
}

// packrun serve runs an installed sensor on its cadence: its scheduled
// tasks complete, and its events are applied once and then deduped.
func TestServeRunsSensorOnCadence(t *testing.T) {
	h := sensorHome(t)
	bin := packrunBinary(t)
	s := startServe(t, bin, h.home)
	s.waitUp(t)
	b := homeStore(t, h.home)
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for {
		evs, err := b.ListSensorEvents(ctx, host.SensorEventFilter{SensorID: "test.sensor", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		created, deduped := 0, 0
		for _, e := range evs {
			if !strings.HasPrefix(e.Origin, "task:") {
				t.Fatalf("event applied outside a task: %+v", e)
			}
			switch e.Status {
			case host.SensorTaskCreated:
				created++
			case host.SensorDeduped:
				deduped++
			}
		}
		if created > 1 {
			t.Fatalf("%d tasks created for one dedupe key", created)
		}
		if created == 1 && deduped >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: %d created, %d deduped", created, deduped)
		}
		time.Sleep(50 * time.Millisecond)
	}
	tasks, err := b.ListTasks(ctx, host.TaskFilter{TaskType: host.SensorTaskType("test.sensor"), Status: host.TaskCompleted})
	if err != nil || len(tasks) < 2 || !strings.HasPrefix(tasks[0].Source, "schedule:") {
		t.Fatalf("sensor tasks %d %v", len(tasks), err)
	}
}
