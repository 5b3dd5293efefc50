package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
)

func TestExtismPlugin(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	ctx := context.Background()

	// A C plugin using only the Extism kernel: every () -> i32 export is a node.
	hello, err := r.Load(ctx, fixture(t, "testdata/bench/hello-extism.wasm"), LoadOptions{Name: "hello-extism"})
	if err != nil {
		t.Fatal(err)
	}
	defer hello.Close(ctx)
	if info := hello.Info(); !info.Extism || strings.Join(info.Nodes, ",") != "hello" {
		t.Fatalf("info %+v", info)
	}
	res := mustInvoke(t, hello, Invocation{Input: json.RawMessage(`{"name":"plugin"}`)})
	if res.Outcome != abi.Completed || string(res.Output) != `{"greeting":"Hello, plugin!"}` {
		t.Fatalf("hello: %s %s %v", res.Outcome, res.Output, res.Error)
	}

	// A Go PDK plugin calling packrun:host/v1, with the manifest's node mapping.
	counter, err := r.Load(ctx, fixture(t, "examples/extism-go/counter.wasm"), LoadOptions{
		Name: "extism-go", PackName: "local.extism.go", Exports: map[string]string{"extism.count": "count"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer counter.Close(ctx)
	if info := counter.Info(); info.PackName != "local.extism.go" || info.Nodes[0] != "extism.count" {
		t.Fatalf("info %+v", info)
	}
	svc := &fakeServices{mem: map[string]json.RawMessage{}}
	var last *Result
	for want := 1; want <= 2; want++ {
		last = mustInvoke(t, counter, Invocation{Input: json.RawMessage(`{"name":"go"}`), Services: svc, RunID: "r"})
		if last.Outcome != abi.Completed || !strings.Contains(string(last.Output), `"count":`+string(rune('0'+want))) {
			t.Fatalf("count %d: %s %s %v", want, last.Outcome, last.Output, last.Error)
		}
	}
	// Recorded like any invocation, and replayed without the services.
	calls := len(svc.calls)
	rep := mustInvoke(t, counter, Invocation{Input: json.RawMessage(`{"name":"go"}`), RunID: "r", Replay: &Replay{Calls: last.Trace}})
	if rep.Divergence != nil || string(rep.Output) != string(last.Output) || len(svc.calls) != calls {
		t.Fatalf("replay: %+v %s vs %s", rep.Divergence, rep.Output, last.Output)
	}
	// Without services, a plugin error is a failed outcome, not a crash.
	res = mustInvoke(t, counter, Invocation{Input: json.RawMessage(`{"name":"go"}`)})
	if res.Outcome != abi.Failed || res.Error.Code != "plugin_error" || !strings.Contains(res.Error.Message, "status 1") {
		t.Fatalf("no services: %s %+v", res.Outcome, res.Error)
	}
	// Limits apply: the Go plugin's initial memory exceeds 1 MiB.
	if _, err := r.Load(ctx, fixture(t, "examples/extism-go/counter.wasm"), LoadOptions{Limits: Limits{MemoryBytes: 1 << 20}}); err == nil || !strings.Contains(err.Error(), CodeMemoryTooLarge) {
		t.Fatalf("memory limit: %v", err)
	}
	// A mapping to a function the plugin does not export is refused.
	if _, err := r.Load(ctx, fixture(t, "testdata/bench/hello-extism.wasm"), LoadOptions{Exports: map[string]string{"x": "nope"}}); err == nil || !strings.Contains(err.Error(), "does not export nope") {
		t.Fatalf("bad mapping: %v", err)
	}
}
