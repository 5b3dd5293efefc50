package extismas_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

func TestCounter(t *testing.T) {
	m := hosttest.LoadFile(t, "counter.wasm", runtime.LoadOptions{Name: "counter.wasm", PackName: "local.extism.as", Exports: map[string]string{"extism.count": "count"}})
	if info := m.Info(); !info.Extism || info.PackName != "local.extism.as" || len(info.Nodes) != 1 || info.Nodes[0] != "extism.count" {
		t.Fatalf("info %+v", info)
	}

	// A map-backed packrun:host/v1 memory service that records every call.
	mem := hosttest.NewServices(hosttest.Grant(abi.HostMemoryGet, abi.HostMemoryPut), hosttest.RequireMemoryKeys())
	invoke := func(input string) *runtime.Result {
		t.Helper()
		return hosttest.Invoke(t, m, runtime.Invocation{Node: "extism.count", Input: json.RawMessage(input), Services: mem})
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
	puts := mem.CallsOf(abi.HostMemoryPut)
	if len(puts) != 2 {
		t.Fatalf("%d memory_put calls, want 2", len(puts))
	}
	for i, c := range puts {
		if p := c.Req; string(p["namespace"]) != `"counters"` || string(p["key"]) != `"x"` || string(p["value"]) != []string{"1", "2"}[i] || string(p["ttlSeconds"]) != "3600" {
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
	if _, ok := mem.Memory("counters", name); !ok {
		t.Errorf("no memory entry for %q: memory_put calls %v", name, mem.CallsOf(abi.HostMemoryPut))
	}

	// Without services every host call is refused; the plugin reports it.
	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "extism.count", Input: json.RawMessage(`{"name":"x"}`)})
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
	hosttest.CheckReproducible(t, "counter.wasm", "run ./build.sh and update pack.json's sha256", func(out string) error {
		return hosttest.Run(exec.Command("bash", "build.sh", out))
	})
}
