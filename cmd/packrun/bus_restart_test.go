package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// busMessageID is the id of the message testdata/modules/bus.wat publishes.
const busMessageID = "0badcafe-0000-4000-8000-000000000001"

// busHome is a home with testdata/modules/bus.wasm installed as local.bus:
// test.publish (task type test.publish) publishes one ops.alert message,
// test.listen subscribes to ops.*.
func busHome(t *testing.T) homeCLI {
	t.Helper()
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	wasm, err := os.ReadFile("../../testdata/modules/bus.wasm")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	sum := sha256.Sum256(wasm)
	manifest := fmt.Sprintf(`{"name":"local.bus","version":"1.0.0","runtime":{"language":"wasm","abi":{"version":1,"minor":2},
		"modules":[{"path":"bus.wasm","sha256":%q}]},
		"nodes":[{"typeId":"test.publish","kind":"skill","taskTypes":["test.publish"]},
		         {"typeId":"test.listen","kind":"skill","subscribes":["ops.*"]}],
		"grants":{"services":["messages"],"topics":["ops.*"]}}`, hex.EncodeToString(sum[:]))
	os.WriteFile(filepath.Join(src, "pack.json"), []byte(manifest), 0o644)
	os.WriteFile(filepath.Join(src, "bus.wasm"), wasm, 0o644)
	key, pack := filepath.Join(dir, "k"), filepath.Join(dir, "bus.pack")
	h.ok("keys", "generate", "--out", key)
	h.ok("pack", src, "-o", pack)
	h.ok("sign", pack, "--key", key+".key")
	h.ok("trust", "add-key", "k", key+".pub", "--namespace", "local.bus")
	h.ok("install", pack)
	return h
}

// A message one pack publishes reaches the subscribed pack as a task
// exactly once across a serve killed (SIGKILL) as soon as the message is
// accepted: the next serve delivers it (the listener's task completes),
// and neither the publisher run again nor the same message sent through
// the API creates a second task.
func TestBusDeliversOnceAcrossServeRestart(t *testing.T) {
	h := busHome(t)
	bin := packrunBinary(t)
	ctx := context.Background()
	b := homeStore(t, h.home)
	s := startServe(t, bin, h.home)
	s.waitUp(t)
	if _, err := b.Enqueue(ctx, host.TaskIntent{TaskType: "test.publish", Source: "test", Payload: []byte(`{}`)}, host.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message to be accepted", func() bool {
		_, err := b.Message(ctx, "", busMessageID)
		return err == nil
	})
	s.Process.Kill()
	s.Wait()

	s = startServe(t, bin, h.home)
	s.waitUp(t)
	listen := host.SubscriberTaskType("test.listen")
	waitFor(t, "the listener's task to complete", func() bool {
		ts, err := b.ListTasks(ctx, host.TaskFilter{TaskType: listen, Status: host.TaskCompleted})
		return err == nil && len(ts) == 1
	})
	// The publisher again: its message is a duplicate when it completes.
	again, err := b.Enqueue(ctx, host.TaskIntent{TaskType: "test.publish", Source: "test", Payload: []byte(`{}`)}, host.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second publisher task to complete", func() bool {
		tk, err := b.Task(ctx, again.TaskID)
		return err == nil && tk.Status == host.TaskCompleted
	})
	// The same message through the API: 200, a duplicate.
	base := s.baseURL(t)
	m, err := b.Message(ctx, "", busMessageID)
	if err != nil {
		t.Fatal(err)
	}
	code, body := get(t, "POST", base+"/v1/messages", "", `{"format":"bus-envelope","message":`+string(m.Document)+`}`)
	if code != http.StatusOK {
		t.Fatalf("resent through the API: %d %s", code, body)
	}
	s.Process.Signal(syscall.SIGTERM)
	s.Wait()

	tasks, err := b.ListTasks(ctx, host.TaskFilter{TaskType: listen})
	if err != nil || len(tasks) != 1 || tasks[0].Status != host.TaskCompleted {
		t.Fatalf("listener tasks: %d %v (%+v)", len(tasks), err, tasks)
	}
	m, err = b.Message(ctx, "", busMessageID)
	if err != nil || len(m.Deliveries) != 1 || m.Deliveries[0].TaskID != tasks[0].TaskID || m.Origin == "api" {
		t.Fatalf("message: %+v %v", m, err)
	}
	dups, err := b.Events(ctx, host.EventFilter{Type: host.EventMessageDuplicate})
	if err != nil || len(dups) != 2 {
		t.Fatalf("duplicates recorded: %d %v", len(dups), err)
	}
	rep, err := b.VerifyChain(ctx)
	if err != nil || !rep.OK || rep.Messages != 1 {
		t.Fatalf("chain: %+v %v", rep, err)
	}
}

// waitFor polls cond every 20ms for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
