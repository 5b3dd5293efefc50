package packrun

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/internal/testing/runstest"
)

// laterPack is examples/hello-wat renamed local.later.wat, its node
// example.later; with spin its node loops until the invocation is stopped
// (its host closing, or its 30 s time limit).
func laterPack(t *testing.T, version string, spin bool) packSpec {
	t.Helper()
	hosttest.NeedCommand(t, hosttest.Getenv("WAT2WASM", "wat2wasm"), "wabt not available (apt-get install wabt, or set WAT2WASM)")
	src := string(mustRead(t, "examples/hello-wat/hello.wat"))
	src = strings.Replace(src, `"local.hello.wat")`, `"local.later.wat")`, 1) // same lengths: the offsets hold
	src = strings.Replace(src, `"example.hello")`, `"example.later")`, 1)
	if spin {
		const locals = "(local $out i32) (local $total i32)\n"
		src = strings.Replace(src, locals, locals+"    (loop $spin (br $spin))\n", 1)
	}
	dir := t.TempDir()
	wat, wasm := filepath.Join(dir, "later.wat"), filepath.Join(dir, "later.wasm")
	if err := os.WriteFile(wat, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	b := hosttest.Build(t, "later.wasm", func(out string) error {
		return hosttest.Run(exec.Command(hosttest.Getenv("WAT2WASM", "wat2wasm"), wat, "-o", out))
	})
	if err := os.WriteFile(wasm, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return packSpec{name: "local.later.wat", version: version, module: wasm, nodes: `[{"typeId":"example.later","kind":"node"}]`}
}

// stoppedRun starts a run of greet (hello-c, completes) then later (spins)
// and closes the host while later runs: it returns the run, left running.
func stoppedRun(t *testing.T) (*fixture, *host.Run) {
	t.Helper()
	f := newFixture(t)
	f.install(t, hello("1.0.0"))
	f.install(t, laterPack(t, "1.0.0", true))
	w := &host.OpenwopWorkflow{WorkflowID: "two", Nodes: []host.OpenwopNode{{ID: "greet", TypeID: "example.hello"}, {ID: "later", TypeID: "example.later"}}}
	if err := f.PutOpenwopWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	r, err := f.StartRun(ctx, host.DefaultTenant, "two", json.RawMessage(`{"name":"ada"}`))
	if err != nil {
		t.Fatal(err)
	}
	runstest.Wait(t, f.store, r.RunID, func(_ *host.Run, evs []host.RunEvent) bool {
		return runstest.Count(evs, host.RunEventNodeStarted, "later") == 1
	})
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return f, r
}

// reopen opens f's home again, as a restarted process would.
func (f *fixture) reopen(t *testing.T) *fixture {
	t.Helper()
	return &fixture{Host: openHost(t, f.home), home: f.home, key: f.key}
}

// runHost runs h's dispatcher until the test ends.
func runHost(t *testing.T, h *Host) {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// TestRunContinuedAfterRestart: a run whose host closed while its second
// node ran stays running; the next host to run its dispatcher continues
// it: the completed node is not run again, the interrupted one is run
// again as attempt 1 after a run.resumed event, and the run completes with
// both outputs.
func TestRunContinuedAfterRestart(t *testing.T) {
	f, r := stoppedRun(t)
	g := f.reopen(t)
	if got, err := g.GetRun(ctx, host.DefaultTenant, r.RunID); err != nil || got.Status != host.RunRunning {
		t.Fatalf("run after a clean close: %+v %v", got, err)
	}
	g.install(t, laterPack(t, "1.0.1", false)) // the newest version runs: this one completes
	runHost(t, g.Host)
	got, evs := runstest.Wait(t, g.store, r.RunID, func(r *host.Run, _ []host.RunEvent) bool { return host.RunTerminal(r.Status) })
	if got.Status != host.RunCompleted {
		t.Fatalf("run %s: %+v, events %s", got.Status, got.Error, runstest.Types(evs))
	}
	if n, m := runstest.Count(evs, host.RunEventNodeStarted, "greet"), runstest.Count(evs, host.RunEventNodeDone, "greet"); n != 1 || m != 1 {
		t.Fatalf("greet started %d and completed %d times: %s", n, m, runstest.Types(evs))
	}
	if n, m := runstest.Count(evs, host.RunEventNodeStarted, "later"), runstest.Count(evs, host.RunEventNodeDone, "later"); n != 2 || m != 1 {
		t.Fatalf("later started %d and completed %d times: %s", n, m, runstest.Types(evs))
	}
	var resumed, started, completed struct {
		NodeID      string          `json:"nodeId"`
		Attempt     int             `json:"attempt"`
		AttemptID   string          `json:"attemptId"`
		Interrupted bool            `json:"interrupted"`
		Reason      string          `json:"reason"`
		Outputs     json.RawMessage `json:"outputs"`
	}
	for _, e := range evs {
		switch {
		case e.Type == host.RunEventResumed:
			json.Unmarshal(e.Payload, &resumed)
		case e.Type == host.RunEventNodeStarted && e.NodeID == "later":
			json.Unmarshal(e.Payload, &started) // the last one
		case e.Type == host.RunEventNodeDone && e.NodeID == "later":
			json.Unmarshal(e.Payload, &completed)
		}
	}
	if resumed.NodeID != "later" || resumed.Attempt != 1 || !resumed.Interrupted || resumed.Reason != ResumeReason || started.Attempt != 1 {
		t.Fatalf("run.resumed %+v, last node.started %+v", resumed, started)
	}
	a, err := g.store.Attempt(ctx, completed.AttemptID)
	if err != nil || a.Attempt != 1 || a.RunID != r.RunID {
		t.Fatalf("later's completing attempt: %+v %v", a, err)
	}
	last := evs[len(evs)-1]
	if last.Type != host.RunEventCompleted || !strings.Contains(string(last.Payload), `"greet":{"greeting":"Hello, ada!"}`) ||
		!strings.Contains(string(last.Payload), `"later":{"greeting":"Hello, ada!"}`) {
		t.Fatalf("last event %s %s", last.Type, last.Payload)
	}
}

// TestRunCancelledWhileStopped: a run cancelled while no process executes
// it ends cancelled, and the next dispatcher does not continue it.
func TestRunCancelledWhileStopped(t *testing.T) {
	f, r := stoppedRun(t)
	g := f.reopen(t)
	if got, err := g.CancelRun(ctx, host.DefaultTenant, r.RunID, "no longer wanted"); err != nil || got.Status != host.RunCancelled {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	runHost(t, g.Host)
	deadline := time.Now().Add(time.Minute)
	for !g.Dispatching() { // it holds the lock once it has continued what it continues
		if time.Now().After(deadline) {
			t.Fatal("no dispatch lock after a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, err := g.GetRun(ctx, host.DefaultTenant, r.RunID)
	if err != nil || got.Status != host.RunCancelled {
		t.Fatalf("run: %+v %v", got, err)
	}
	evs, err := g.RunEvents(ctx, host.DefaultTenant, r.RunID)
	if err != nil || runstest.Count(evs, host.RunEventResumed, "") != 0 || runstest.Count(evs, host.RunEventResumed, "later") != 0 || evs[len(evs)-1].Type != host.RunEventCancelled {
		t.Fatalf("events %s %v", runstest.Types(evs), err)
	}
}

// TestRunContinuedFromItsLog: what a run's log recorded before its process
// stopped decides how the next dispatcher ends it: a node already failed
// or suspended fails the run as it would have; every node completed
// completes it with their outputs, running nothing again.
func TestRunContinuedFromItsLog(t *testing.T) {
	f := newFixture(t)
	f.install(t, hello("1.0.0"))
	w := &host.OpenwopWorkflow{WorkflowID: "one", Nodes: []host.OpenwopNode{{ID: "greet", TypeID: "example.hello"}}}
	if err := f.PutOpenwopWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	ev := func(typ, payload string) host.RunEvent {
		return host.RunEvent{Type: typ, NodeID: "greet", Payload: json.RawMessage(payload)}
	}
	cases := map[string]struct {
		last       host.RunEvent
		status     string
		code, tail string
	}{
		"failed":    {ev(host.RunEventNodeFailed, `{}`), host.RunFailed, RunErrNodeFailed, host.RunEventFailed},
		"suspended": {ev(host.RunEventNodeSuspend, `{}`), host.RunFailed, RunErrSuspendNotImplemented, host.RunEventFailed},
		"completed": {ev(host.RunEventNodeDone, `{"output":{"greeting":"kept"}}`), host.RunCompleted, "", host.RunEventCompleted},
	}
	ids := map[string]string{}
	for name, c := range cases {
		r := &host.Run{RunID: host.NewID("run"), WorkflowID: "one", Status: host.RunRunning, Inputs: json.RawMessage(`{}`)}
		if err := f.store.CreateRun(ctx, r, []host.RunEvent{{Type: host.RunEventStarted}, ev(host.RunEventNodeStarted, `{"attempt":0}`), c.last}); err != nil {
			t.Fatal(err)
		}
		ids[name] = r.RunID
	}
	runHost(t, f.Host)
	for name, c := range cases {
		got, evs := runstest.Wait(t, f.store, ids[name], func(r *host.Run, _ []host.RunEvent) bool { return host.RunTerminal(r.Status) })
		code := ""
		if got.Error != nil {
			code = got.Error.Code
		}
		last := evs[len(evs)-1]
		if got.Status != c.status || code != c.code || last.Type != c.tail || runstest.Count(evs, host.RunEventNodeStarted, "greet") != 1 {
			t.Errorf("%s: run %s %s, events %s", name, got.Status, code, runstest.Types(evs))
		}
		if name == "completed" && !strings.Contains(string(last.Payload), `"greet":{"greeting":"kept"}`) {
			t.Errorf("completed: %s", last.Payload)
		}
	}
}

// The dispatcher holding the dispatch lock runs the host's singleton
// chores as it starts: expired memory is swept (said in the log), live
// entries kept.
func TestChoresSweepExpiredMemory(t *testing.T) {
	var logs hosttest.SyncBuffer
	h, err := Open(ctx, t.TempDir(), Config{Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	sc := host.Scope{Tenant: host.DefaultTenant, Namespace: "cache"}
	for _, k := range []string{"a", "b"} {
		if err := h.store.Put(ctx, sc, k, json.RawMessage(`1`), host.PutOptions{TTL: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.store.Put(ctx, sc, "live", json.RawMessage(`2`), host.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	runHost(t, h)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "swept expired memory entries: count=2") {
		if time.Now().After(deadline) {
			t.Fatalf("no sweep in the log:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := h.store.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("a sweep after the chores': %d %v", n, err)
	}
	if keys, err := h.store.List(ctx, sc, ""); err != nil || len(keys) != 1 || keys[0] != "live" {
		t.Fatalf("keys: %v %v", keys, err)
	}
}

// However many runs are started, a host executes at most Config.Workers of
// their nodes at once: with one worker and three runs of a node that spins
// until stopped, one node runs and the other runs wait (still running,
// nothing recorded for them); cancelling the one running lets the next in.
func TestRunNodesBoundedByWorkers(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	k := newTestKey(t)
	savePolicy(t, home, trustKey(t, k, "local.*"))
	h, err := Open(ctx, home, Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	f := &fixture{Host: h, home: home, key: k}
	f.install(t, laterPack(t, "1.0.0", true))
	if err := h.PutOpenwopWorkflow(ctx, &host.OpenwopWorkflow{WorkflowID: "spin", Nodes: []host.OpenwopNode{{ID: "later", TypeID: "example.later"}}}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		r, err := h.StartRun(ctx, host.DefaultTenant, "spin", nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.RunID)
	}
	started := func() (running []string) {
		t.Helper()
		for _, id := range ids {
			evs, err := h.RunEvents(ctx, host.DefaultTenant, id)
			if err != nil {
				t.Fatal(err)
			}
			if runstest.Count(evs, host.RunEventNodeStarted, "later") > 0 {
				running = append(running, id)
			}
		}
		return running
	}
	deadline := time.Now().Add(time.Minute)
	for len(started()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no run's node started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // room for a second node to start, were it allowed
	first := started()
	if len(first) != 1 {
		t.Fatalf("%d runs' nodes started with one worker", len(first))
	}
	if _, err := h.CancelRun(ctx, host.DefaultTenant, first[0], "test"); err != nil {
		t.Fatal(err)
	}
	for len(started()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the next run's node did not start once the first was cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
