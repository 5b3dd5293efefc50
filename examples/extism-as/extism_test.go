package extismas_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// memory is a map-backed packrun:host/v1 memory service; it records every
// memory_put request.
type memory struct {
	mu   sync.Mutex
	data map[string]json.RawMessage
	puts []map[string]json.RawMessage
}

func (m *memory) Serve(_ context.Context, fn string, req []byte) (abi.Status, []byte) {
	var r struct {
		Namespace string          `json:"namespace"`
		Key       string          `json:"key"`
		Value     json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(req, &r); err != nil || r.Namespace == "" || r.Key == "" {
		return abi.StatusValidation, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := r.Namespace + "/" + r.Key
	switch fn {
	case abi.HostMemoryGet:
		v, ok := m.data[k]
		if !ok {
			return abi.StatusNotFound, nil
		}
		b, _ := json.Marshal(map[string]json.RawMessage{"value": v})
		return abi.StatusOK, b
	case abi.HostMemoryPut:
		var all map[string]json.RawMessage
		_ = json.Unmarshal(req, &all)
		m.puts = append(m.puts, all)
		m.data[k] = r.Value
		return abi.StatusOK, nil
	}
	return abi.StatusAccessDenied, nil
}

func TestCounter(t *testing.T) {
	ctx := context.Background()
	wasm, err := os.ReadFile("counter.wasm")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	m, err := rt.Load(ctx, wasm, runtime.LoadOptions{Name: "counter.wasm", PackName: "local.extism.as", Exports: map[string]string{"extism.count": "count"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	if info := m.Info(); !info.Extism || info.PackName != "local.extism.as" || len(info.Nodes) != 1 || info.Nodes[0] != "extism.count" {
		t.Fatalf("info %+v", info)
	}

	mem := &memory{data: map[string]json.RawMessage{}}
	invoke := func(input string) *runtime.Result {
		t.Helper()
		res, err := m.Invoke(ctx, runtime.Invocation{Node: "extism.count", Input: json.RawMessage(input), Services: mem})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for i, want := range []string{`{"name":"x","count":1}`, `{"name":"x","count":2}`} {
		res := invoke(`{"name":"x"}`)
		if res.Outcome != abi.Completed || string(res.Output) != want {
			t.Fatalf("call %d: %s %s %+v, want %s", i+1, res.Outcome, res.Output, res.Error, want)
		}
		if res.HostCalls != 2 {
			t.Errorf("call %d: %d host calls, want 2 (memory_get, memory_put)", i+1, res.HostCalls)
		}
	}
	if len(mem.puts) != 2 {
		t.Fatalf("%d memory_put calls, want 2", len(mem.puts))
	}
	for i, p := range mem.puts {
		if string(p["namespace"]) != `"counters"` || string(p["key"]) != `"x"` || string(p["value"]) != []string{"1", "2"}[i] || string(p["ttlSeconds"]) != "3600" {
			t.Errorf("memory_put %d: %v", i+1, p)
		}
	}

	// Non-ASCII and escaped names survive the round trip (the output is
	// written as UTF-8 bytes).
	name := "Ünïcødé \"q\" \\ 😀"
	in, _ := json.Marshal(map[string]string{"name": name})
	res := invoke(string(in))
	var out struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	if res.Outcome != abi.Completed || json.Unmarshal(res.Output, &out) != nil || out.Name != name || out.Count != 1 {
		t.Fatalf("%s -> %s %s %+v", in, res.Outcome, res.Output, res.Error)
	}
	if _, ok := mem.data["counters/"+name]; !ok {
		t.Errorf("no memory entry for %q: %v", name, mem.data)
	}

	// Without services every host call is refused; the plugin reports it.
	res, err = m.Invoke(ctx, runtime.Invocation{Node: "extism.count", Input: json.RawMessage(`{"name":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != abi.Failed || res.Error == nil {
		t.Fatalf("without services: %s %s %+v", res.Outcome, res.Output, res.Error)
	}
}

// TestPackManifest checks that pack.json is valid and names counter.wasm
// with its current sha256.
func TestPackManifest(t *testing.T) {
	s, err := packs.Collect(".")
	if err != nil {
		t.Fatal(err)
	}
	if s.Manifest.Name != "local.extism.as" || len(s.Manifest.Nodes) != 1 || s.Manifest.Nodes[0].Export != "count" {
		t.Fatalf("manifest %+v", s.Manifest)
	}
}

// TestReproducibleBuild rebuilds counter.wasm and compares it with the
// committed one. It needs the pinned toolchain (npm ci in this directory).
func TestReproducibleBuild(t *testing.T) {
	if _, err := os.Stat(filepath.Join("node_modules", ".bin", "asc")); err != nil {
		t.Skip("node_modules/.bin/asc not found (run npm ci in examples/extism-as to rebuild and compare counter.wasm)")
	}
	out := filepath.Join(t.TempDir(), "counter.wasm")
	cmd := exec.Command("bash", "build.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, b)
	}
	built, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("counter.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, committed) {
		t.Fatalf("rebuilt counter.wasm (%d bytes) differs from the committed one (%d bytes); run ./build.sh and update pack.json's sha256", len(built), len(committed))
	}
}
