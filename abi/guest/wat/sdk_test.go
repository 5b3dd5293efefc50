package wat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/runtime"
)

const committed = "template.wasm"

// TestRebuildIsByteIdentical rebuilds the template with wat2wasm and
// compares it with the committed module; skipped without wabt (CI has it).
func TestRebuildIsByteIdentical(t *testing.T) {
	w := os.Getenv("WAT2WASM")
	if w == "" {
		w = "wat2wasm"
	}
	if _, err := exec.LookPath(w); err != nil {
		t.Skipf("wabt not available (apt-get install wabt, or set WAT2WASM): %v", err)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skipf("bash not available: %v", err)
	}
	out := filepath.Join(t.TempDir(), "template.wasm")
	if b, err := exec.Command("bash", "build.sh", out).CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("rebuilt module (%d bytes) differs from the committed %s (%d bytes): run ./build.sh and commit the result", len(got), committed, len(want))
	}
}

// services is a runtime.Services fake serving memory from a map and
// recording every request.
type services struct {
	mu    sync.Mutex
	mem   map[string]json.RawMessage
	calls []call
}

type call struct {
	fn  string
	req map[string]json.RawMessage
}

func newServices() *services { return &services{mem: map[string]json.RawMessage{}} }

func (s *services) Serve(_ context.Context, fn string, req []byte) (abi.Status, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var r map[string]json.RawMessage
	if err := json.Unmarshal(req, &r); err != nil {
		return abi.StatusValidation, nil
	}
	s.calls = append(s.calls, call{fn, r})
	var ns, key string
	json.Unmarshal(r["namespace"], &ns)
	json.Unmarshal(r["key"], &key)
	switch fn {
	case abi.HostMemoryGet:
		v, ok := s.mem[ns+"/"+key]
		if !ok {
			return abi.StatusNotFound, nil
		}
		return abi.StatusOK, []byte(`{"value":` + string(v) + `}`)
	case abi.HostMemoryPut:
		s.mem[ns+"/"+key] = r["value"]
		return abi.StatusOK, nil
	}
	return abi.StatusAccessDenied, nil
}

func (s *services) last(fn string) map[string]json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.calls) - 1; i >= 0; i-- {
		if s.calls[i].fn == fn {
			return s.calls[i].req
		}
	}
	return nil
}

func load(t *testing.T, opts runtime.LoadOptions) *runtime.Module {
	t.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	wasm, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.Load(ctx, wasm, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(ctx) })
	return m
}

func invoke(t *testing.T, m *runtime.Module, inv runtime.Invocation) *runtime.Result {
	t.Helper()
	res, err := m.Invoke(context.Background(), inv)
	if err != nil {
		t.Fatal(err)
	}
	return res
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
		res := invoke(t, m, runtime.Invocation{Node: "example.visits", Services: svc})
		if res.Outcome != abi.Completed || string(res.Output) != want {
			t.Fatalf("call %d: %s %s %v, want %s", i, res.Outcome, res.Output, res.Error, want)
		}
		put := svc.last(abi.HostMemoryPut)
		if string(put["ttlSeconds"]) != "3600" || string(put["namespace"]) != `"counters"` || string(put["key"]) != `"visits"` {
			t.Fatalf("memory_put request %v: want namespace counters, key visits, ttlSeconds 3600", put)
		}
		if len(res.Logs) != 1 || res.Logs[0].Level != "info" || res.Logs[0].Message != "visits invoked" {
			t.Fatalf("logs %+v", res.Logs)
		}
	}
	// A larger stored value round-trips through the decimal helpers.
	svc.mem["counters/visits"] = json.RawMessage(`4294967294`)
	if res := invoke(t, m, runtime.Invocation{Node: "example.visits", Services: svc}); string(res.Output) != `{"count":4294967295}` {
		t.Fatalf("large value: %s %s %v", res.Outcome, res.Output, res.Error)
	}
}

func TestFailure(t *testing.T) {
	m := load(t, runtime.LoadOptions{})
	// Without services nothing is granted: memory_get returns access_denied.
	res := invoke(t, m, runtime.Invocation{Node: "example.visits"})
	if res.Outcome != abi.Failed || res.Error == nil || res.Error.Code != "host_call_failed" {
		t.Fatalf("no services: %s %s %+v", res.Outcome, res.Output, res.Error)
	}
	if len(res.Logs) != 1 {
		t.Fatalf("logs %+v", res.Logs)
	}
}

func TestSuspendAndResume(t *testing.T) {
	m := load(t, runtime.LoadOptions{})
	res := invoke(t, m, runtime.Invocation{Node: "example.approve"})
	if res.Outcome != abi.Suspended || string(res.Interrupt) != `{"question":"approve?"}` {
		t.Fatalf("approve: %s %s %v", res.Outcome, res.Interrupt, res.Error)
	}
	res = invoke(t, m, runtime.Invocation{Node: "example.approve", Resume: []json.RawMessage{json.RawMessage(`{"by":"ada","ok":true}`)}})
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
		res := invoke(t, m, runtime.Invocation{Node: "example.visits", Services: svc})
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
