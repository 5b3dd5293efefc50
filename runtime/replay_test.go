package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
)

// replayOf re-runs a recorded result's trace on module m.
func replayOf(t *testing.T, m *Module, inv Invocation, rec *Result) *Result {
	t.Helper()
	inv.Replay = &Replay{Calls: rec.Trace}
	inv.Services = nil // a replay must not need live services
	inv.State = nil
	inv.Resume = nil
	return mustInvoke(t, m, inv)
}

func TestReplayIsIdentical(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m := loadProbe(t, r, LoadOptions{})
	svc := &fakeServices{mem: map[string]json.RawMessage{}}
	for _, inv := range []Invocation{
		{Node: "probe.random", RunID: "r1"},
		{Node: "probe.now"},
		{Node: "probe.wasi"},
		{Node: "probe.state"},
		{Node: "probe.log"},
		{Node: "probe.host", Services: svc},
		{Node: "probe.interrupt2"}, // suspends at the first interrupt
		{Node: "probe.interrupt2", Resume: []json.RawMessage{[]byte(`"a"`)}}, // suspends at the second
		{Node: "probe.interrupt2", Resume: []json.RawMessage{[]byte(`"a"`), []byte(`{"b":2}`)}},
	} {
		t.Run(inv.Node, func(t *testing.T) {
			for i := 0; i < 100; i++ {
				rec := mustInvoke(t, m, inv)
				calls := len(svc.calls)
				rep := replayOf(t, m, inv, rec)
				if rep.Divergence != nil {
					t.Fatalf("run %d diverged: %+v", i, rep.Divergence)
				}
				if rep.Outcome != rec.Outcome || string(rep.Output) != string(rec.Output) || string(rep.Interrupt) != string(rec.Interrupt) || string(rep.Stdout) != string(rec.Stdout) {
					t.Fatalf("run %d: replay %s %s, recorded %s %s", i, rep.Outcome, rep.Output, rec.Outcome, rec.Output)
				}
				if len(svc.calls) != calls {
					t.Fatal("replay reached the live services")
				}
				if i == 0 && inv.Node == "probe.now" && len(rec.Trace) == 0 {
					t.Fatal("nothing recorded")
				}
			}
		})
	}
}

func TestReplayGoModule(t *testing.T) {
	// The Go runtime reads the clock and random bytes at start-up and during
	// the call; preparation is deterministic and the rest is in the trace.
	r := newTestRuntime(t, NewConfig())
	m, err := r.Load(context.Background(), fixture(t, "examples/hello-go/hello.wasm"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	for i := 0; i < 10; i++ {
		inv := Invocation{Input: json.RawMessage(`{"name":"go"}`), RunID: "run"}
		rec := mustInvoke(t, m, inv)
		rep := replayOf(t, m, inv, rec)
		if rep.Divergence != nil || string(rep.Output) != string(rec.Output) {
			t.Fatalf("Go module replay: %+v %s vs %s", rep.Divergence, rep.Output, rec.Output)
		}
	}
}

func TestReplayDivergence(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m := loadProbe(t, r, LoadOptions{})
	rec := mustInvoke(t, m, Invocation{Node: "probe.state"})

	// Another node calls host functions in another order.
	rep := replayOf(t, m, Invocation{Node: "probe.log"}, rec)
	d := rep.Divergence
	if d == nil || d.Index != 0 || d.Expected.Fn != "openwop.openwop_variable_get" || d.Got.Fn != "openwop.openwop_log" {
		t.Fatalf("divergence %+v", d)
	}
	if rep.Outcome != abi.Failed || rep.Error.Code != abi.CodeReplayDiverged {
		t.Fatalf("outcome %s %+v", rep.Outcome, rep.Error)
	}

	// Different arguments at a later call.
	edited := append([]Call(nil), rec.Trace...)
	edited[1].Args = []byte("k\x00{\"v\":43}")
	rep = mustInvoke(t, m, Invocation{Node: "probe.state", Replay: &Replay{Calls: edited}})
	if d := rep.Divergence; d == nil || d.Index != 1 || !strings.Contains(d.Reason, "different arguments") {
		t.Fatalf("argument divergence %+v", rep.Divergence)
	}

	// A recorded value changed: the module sees it (and its output shows it).
	now := mustInvoke(t, m, Invocation{Node: "probe.now"})
	edited = append([]Call(nil), now.Trace...)
	edited[0].Result = []byte{1, 0, 0, 0, 0, 0, 0, 0}
	rep = mustInvoke(t, m, Invocation{Node: "probe.now", Replay: &Replay{Calls: edited}})
	if string(rep.Output) != `{"nowMs":1}` {
		t.Fatalf("edited value not served: %s", rep.Output)
	}

	// Fewer calls than recorded, and more.
	rep = mustInvoke(t, m, Invocation{Node: "probe.now", Replay: &Replay{Calls: append(now.Trace, now.Trace...)}})
	if d := rep.Divergence; d == nil || d.Index != 1 || d.Got != nil {
		t.Fatalf("missing calls: %+v", rep.Divergence)
	}
	rep = mustInvoke(t, m, Invocation{Node: "probe.now", Replay: &Replay{}})
	if d := rep.Divergence; d == nil || d.Index != 0 || d.Expected != nil {
		t.Fatalf("extra calls: %+v", rep.Divergence)
	}
	// A malformed recorded value is a divergence, not a crash.
	edited[0].Result = []byte{1}
	rep = mustInvoke(t, m, Invocation{Node: "probe.now", Replay: &Replay{Calls: edited}})
	if rep.Divergence == nil || !strings.Contains(rep.Divergence.Reason, "has 1 bytes") {
		t.Fatalf("malformed value: %+v", rep.Divergence)
	}
}
