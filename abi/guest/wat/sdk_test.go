package wat_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/runtime"
)

const committed = "template.wasm"

// TestRebuildIsByteIdentical rebuilds the template with wat2wasm and
// compares it with the committed module; skipped without wabt (CI has it).
func TestRebuildIsByteIdentical(t *testing.T) {
	w := hosttest.Getenv("WAT2WASM", "wat2wasm")
	hosttest.NeedCommand(t, w, "wabt not available (apt-get install wabt, or set WAT2WASM)")
	hosttest.NeedCommand(t, "bash", "bash not available")
	hosttest.CheckReproducible(t, committed, "run ./build.sh and commit the result", func(out string) error {
		return hosttest.Run(exec.Command("bash", "build.sh", out))
	})
}

// newServices serves memory_get and memory_put (all the template calls)
// and refuses the rest.
func newServices() *hosttest.Services {
	return hosttest.NewServices(hosttest.Grant(abi.HostMemoryGet, abi.HostMemoryPut))
}

func load(t *testing.T, opts runtime.LoadOptions) *runtime.Module {
	return hosttest.LoadFile(t, committed, opts)
}

func TestModuleInfo(t *testing.T) {
	info := load(t, runtime.LoadOptions{}).Info()
	if info.PackName != "local.template.wat" || strings.Join(info.Nodes, ",") != "example.visits,example.approve" || info.ABIVersion != 1 {
		t.Fatalf("info %+v", info)
	}
	for _, fn := range []string{abi.ExportPackName, abi.ExportNodeIDAt, abi.ExportNodeInvoke} {
		if info.Encoding[fn] != "packed-i64" {
			t.Errorf("%s encoding %s", fn, info.Encoding[fn])
		}
	}
}

func TestVisits(t *testing.T) {
	m := load(t, runtime.LoadOptions{})
	svc := newServices()
	for i, want := range []string{`{"count":1}`, `{"count":2}`} {
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.visits", Services: svc})
		if res.Outcome != abi.Completed || string(res.Output) != want {
			t.Fatalf("call %d: %s %s %v, want %s", i, res.Outcome, res.Output, res.Error, want)
		}
		put := svc.Last(abi.HostMemoryPut).Req
		if string(put["ttlSeconds"]) != "3600" || string(put["namespace"]) != `"counters"` || string(put["key"]) != `"visits"` {
			t.Fatalf("memory_put request %v: want namespace counters, key visits, ttlSeconds 3600", put)
		}
		if len(res.Logs) != 1 || res.Logs[0].Level != "info" || res.Logs[0].Message != "visits invoked" {
			t.Fatalf("logs %+v", res.Logs)
		}
	}
	// A larger stored value round-trips through the decimal helpers.
	svc.SetMemory("counters", "visits", `4294967294`)
	if res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.visits", Services: svc}); string(res.Output) != `{"count":4294967295}` {
		t.Fatalf("large value: %s %s %v", res.Outcome, res.Output, res.Error)
	}
}

func TestFailure(t *testing.T) {
	m := load(t, runtime.LoadOptions{})
	// Without services nothing is granted: memory_get returns access_denied.
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.visits"})
	if res.Outcome != abi.Failed || res.Error == nil || res.Error.Code != "host_call_failed" {
		t.Fatalf("no services: %s %s %+v", res.Outcome, res.Output, res.Error)
	}
	if len(res.Logs) != 1 {
		t.Fatalf("logs %+v", res.Logs)
	}
}

func TestSuspendAndResume(t *testing.T) {
	m := load(t, runtime.LoadOptions{})
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.approve"})
	if res.Outcome != abi.Suspended || string(res.Interrupt) != `{"question":"approve?"}` {
		t.Fatalf("approve: %s %s %v", res.Outcome, res.Interrupt, res.Error)
	}
	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "example.approve", Resume: []json.RawMessage{json.RawMessage(`{"by":"ada","ok":true}`)}})
	if res.Outcome != abi.Completed || string(res.Output) != `{"approved":{"by":"ada","ok":true}}` {
		t.Fatalf("resumed: %s %s %v", res.Outcome, res.Output, res.Error)
	}
}

// TestReuse: on a reused instance the bump allocator must not grow.
func TestReuse(t *testing.T) {
	m := load(t, runtime.LoadOptions{ReuseInstances: true})
	svc := newServices()
	var first uint64
	for i := 1; i <= 2000; i++ {
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.visits", Services: svc})
		if res.Outcome != abi.Completed {
			t.Fatalf("call %d: %s %v", i, res.Outcome, res.Error)
		}
		if i == 1 {
			first = res.MemoryBytes
		}
		if i == 2000 && (res.MemoryBytes != first || string(res.Output) != `{"count":2000}`) {
			t.Fatalf("after 2000 reused invocations: memory %d bytes (first %d), output %s", res.MemoryBytes, first, res.Output)
		}
	}
}
