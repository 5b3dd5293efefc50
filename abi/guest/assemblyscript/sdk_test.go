// Package assdk_test checks the AssemblyScript guest SDK (./assembly): the
// committed example builds reproducibly from source (when the pinned
// compiler is installed: `npm ci` in this directory), and the packs run under
// the packrun runtime with every host service.
package assdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/runtime"
)

const exampleWasm = "example/counter.wasm"

// asc compiles entry exactly like build.sh, or skips the test when the
// compiler is not installed.
func asc(t *testing.T, entry, out string) {
	t.Helper()
	if _, err := os.Stat("node_modules/.bin/asc"); err != nil {
		t.Skip("node_modules/.bin/asc is missing: run `npm ci` in abi/guest/assemblyscript to build AssemblyScript")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: cannot run the AssemblyScript compiler")
	}
	cmd := exec.Command("node_modules/.bin/asc", entry, "-O3", "--use", "abort=", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("asc %s: %v\n%s", entry, err, b)
	}
}

func TestExampleIsReproducible(t *testing.T) {
	t.Parallel()
	committed, err := os.ReadFile(exampleWasm)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "counter.wasm")
	asc(t, "example/counter.ts", out)
	rebuilt, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rebuilt, committed) {
		t.Fatalf("%s is stale: rebuilding it from source gives different bytes (%d vs %d); run ./build.sh", exampleWasm, len(rebuilt), len(committed))
	}
}

// fakeServices serves packrun:host/v1 from memory and records every call.
type fakeServices struct {
	mu     sync.Mutex
	mem    map[string]json.RawMessage
	config map[string]json.RawMessage
	calls  []call
	staged int
}

type call struct {
	fn  string
	req map[string]any
}

func newFakeServices() *fakeServices {
	return &fakeServices{mem: map[string]json.RawMessage{}, config: map[string]json.RawMessage{"greeting": json.RawMessage(`"hi"`)}}
}

func (f *fakeServices) Serve(_ context.Context, fn string, req []byte) (abi.Status, []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var m map[string]any
	if err := json.Unmarshal(req, &m); err != nil {
		return abi.StatusValidation, nil
	}
	f.calls = append(f.calls, call{fn, m})
	var r struct {
		Namespace, Key, Prefix string
		Value, Input           json.RawMessage
	}
	json.Unmarshal(req, &r)
	switch fn {
	case abi.HostMemoryPut:
		f.mem[r.Namespace+"/"+r.Key] = r.Value
		return abi.StatusOK, nil
	case abi.HostMemoryGet:
		v, ok := f.mem[r.Namespace+"/"+r.Key]
		if !ok {
			return abi.StatusNotFound, nil
		}
		return abi.StatusOK, []byte(`{"value":` + string(v) + `}`)
	case abi.HostMemoryDelete:
		delete(f.mem, r.Namespace+"/"+r.Key)
		return abi.StatusOK, nil
	case abi.HostMemoryList:
		keys := []string{}
		for k := range f.mem {
			if rest, ok := strings.CutPrefix(k, r.Namespace+"/"); ok && strings.HasPrefix(rest, r.Prefix) {
				keys = append(keys, rest)
			}
		}
		slices.Sort(keys)
		b, _ := json.Marshal(map[string]any{"keys": keys})
		return abi.StatusOK, b
	case abi.HostQueueEnqueue:
		f.staged++
		b, _ := json.Marshal(map[string]int{"staged": f.staged})
		return abi.StatusOK, b
	case abi.HostAdapterInvoke:
		return abi.StatusOK, []byte(`{"output":` + string(r.Input) + `,"exit_status":"ok","exit_code":0,"error":""}`)
	case abi.HostEvidenceRecord:
		return abi.StatusOK, nil
	case abi.HostArtifactPut:
		return abi.StatusOK, []byte(`{"artifact_id":"art-` + m["name"].(string) + `","sha256":"00"}`)
	case abi.HostConfigGet:
		v, ok := f.config[r.Key]
		if !ok {
			return abi.StatusNotFound, nil
		}
		return abi.StatusOK, []byte(`{"value":` + string(v) + `}`)
	}
	return abi.StatusAccessDenied, nil
}

func (f *fakeServices) callsOf(fn string) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]any
	for _, c := range f.calls {
		if c.fn == fn {
			out = append(out, c.req)
		}
	}
	return out
}

func load(t *testing.T, wasm []byte, opts runtime.LoadOptions) *runtime.Module {
	t.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
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

func completed(t *testing.T, res *runtime.Result, want string) {
	t.Helper()
	if res.Outcome != abi.Completed {
		t.Fatalf("%s: outcome %s, error %v", res.Node, res.Outcome, res.Error)
	}
	if !jsonEqual(res.Output, want) {
		t.Fatalf("%s: output %s\nwant %s", res.Node, res.Output, want)
	}
}

func jsonEqual(got []byte, want string) bool {
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

func hasLog(res *runtime.Result, level, msg string) bool {
	for _, l := range res.Logs {
		if l.Level == level && l.Message == msg {
			return true
		}
	}
	return false
}

func TestExample(t *testing.T) {
	wasm, err := os.ReadFile(exampleWasm)
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, wasm, runtime.LoadOptions{Name: exampleWasm})
	info := m.Info()
	if info.PackName != "local.counter.as" || strings.Join(info.Nodes, ",") != "example.counter,example.fail,example.suspend,example.approve" || info.ABIVersion != 1 {
		t.Fatalf("info %+v", info)
	}
	for _, imp := range info.Imports {
		if strings.HasPrefix(imp, "env.") || strings.HasPrefix(imp, abi.ModuleWASI+".") {
			t.Errorf("unexpected import %s", imp)
		}
	}

	t.Run("counter", func(t *testing.T) {
		svc := newFakeServices()
		res := invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"a"}`), Services: svc})
		completed(t, res, `{"key":"a","count":1}`)
		if !hasLog(res, "info", "counter a = 1") {
			t.Errorf("logs %+v", res.Logs)
		}
		res = invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"a","by":5}`), Services: svc})
		completed(t, res, `{"key":"a","count":6}`)
		completed(t, invoke(t, m, runtime.Invocation{Node: "example.counter", Services: svc}), `{"key":"default","count":1}`)
		completed(t, invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"Ünï\"cødé😀"}`), Services: svc}), `{"key":"Ünï\"cødé😀","count":1}`)
		puts := svc.callsOf(abi.HostMemoryPut)
		if len(puts) != 4 {
			t.Fatalf("memory_put calls %v", puts)
		}
		for _, p := range puts {
			if p["namespace"] != "counters" || p["ttlSeconds"] != 86400.0 {
				t.Errorf("memory_put %v: want namespace counters and ttlSeconds 86400", p)
			}
		}
		if string(svc.mem["counters/a"]) != "6" {
			t.Errorf("stored %s", svc.mem["counters/a"])
		}
		if gets := svc.callsOf(abi.HostMemoryGet); len(gets) != 4 || gets[0]["key"] != "a" {
			t.Errorf("memory_get calls %v", gets)
		}
	})

	t.Run("input that is not an object", func(t *testing.T) {
		res := invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`[1]`), Services: newFakeServices()})
		if res.Outcome != abi.Failed || res.Error.Code != "invalid_input" {
			t.Fatalf("%s %v", res.Outcome, res.Error)
		}
	})

	t.Run("host call refused", func(t *testing.T) {
		res := invoke(t, m, runtime.Invocation{Node: "example.counter"})
		if res.Outcome != abi.Failed || res.Error.Code != "host_call_failed" || res.Error.Message != "packrun:host/v1.memory_get: access_denied" ||
			!jsonEqual(res.Error.Details, `{"function":"packrun:host/v1.memory_get","status":1}`) {
			t.Fatalf("%s %+v %s", res.Outcome, res.Error, res.Error.Details)
		}
	})

	t.Run("fail", func(t *testing.T) {
		res := invoke(t, m, runtime.Invocation{Node: "example.fail", Input: json.RawMessage(`{"x":1}`)})
		if res.Outcome != abi.Failed || res.Error.Code != "not_allowed" || res.Error.Message != "this node always fails" || !jsonEqual(res.Error.Details, `{"input":{"x":1}}`) {
			t.Fatalf("%s %+v", res.Outcome, res.Error)
		}
		if !hasLog(res, "warn", "about to fail") {
			t.Errorf("logs %+v", res.Logs)
		}
	})

	t.Run("suspend", func(t *testing.T) {
		res := invoke(t, m, runtime.Invocation{Node: "example.suspend"})
		if res.Outcome != abi.Suspended || string(res.Interrupt) != `{"question":"approve?"}` {
			t.Fatalf("%s %s %v", res.Outcome, res.Interrupt, res.Error)
		}
	})

	t.Run("interrupt and resume", func(t *testing.T) {
		res := invoke(t, m, runtime.Invocation{Node: "example.approve"})
		if res.Outcome != abi.Suspended || string(res.Interrupt) != `{"question":"approve?"}` {
			t.Fatalf("%s %s %v", res.Outcome, res.Interrupt, res.Error)
		}
		res = invoke(t, m, runtime.Invocation{Node: "example.approve", Resume: []json.RawMessage{json.RawMessage(`true`)}})
		completed(t, res, `{"approved":true}`)
	})

	t.Run("reused instance", func(t *testing.T) {
		// With reuse the host frees every response through openwop_free
		// and keeps its request buffer: many invocations on one instance.
		m := load(t, wasm, runtime.LoadOptions{ReuseInstances: true})
		svc := newFakeServices()
		for i := 1; i <= 500; i++ {
			res := invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"r"}`), Services: svc})
			if res.Outcome != abi.Completed {
				t.Fatalf("invocation %d: %s %v", i, res.Outcome, res.Error)
			}
		}
		if string(svc.mem["counters/r"]) != "500" {
			t.Fatalf("count %s", svc.mem["counters/r"])
		}
		res := invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"r"}`), Services: svc})
		if res.MemoryBytes > 1<<20 {
			t.Errorf("memory grew to %d bytes over 500 invocations", res.MemoryBytes)
		}
	})
}

// TestServices builds testdata/services.ts, which calls every host function
// through the SDK, and checks what each call sent and got.
func TestServices(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "services.wasm")
	asc(t, "testdata/services.ts", path)
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, wasm, runtime.LoadOptions{})
	svc := newFakeServices()
	state := runtime.NewMemoryRunState()
	res := invoke(t, m, runtime.Invocation{Node: "test.services", RunID: "run-1", Services: svc, State: state})
	if res.Outcome != abi.Completed {
		t.Fatalf("%s %v", res.Outcome, res.Error)
	}
	var out map[string]any
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatal(err)
	}
	if now, ok := out["now"].(float64); !ok || now <= 0 {
		t.Errorf("now %v", out["now"])
	}
	delete(out, "now")
	want := `{"randomStatus":0,"randomNonZero":true,
		"unsetVar":true,"setVar":0,"var":{"n":1},
		"write1":0,"write2":0,"channel":[1,"two"],
		"put1":0,"put2":0,"list":{"status":0,"json":["k1","k2"]},"keys":["k1","k2"],"delete":0,"deleted":true,
		"enqueue":{"status":0,"json":1},
		"adapter":{"status":0,"json":{"output":{"x":1},"exit_status":"ok","exit_code":0,"error":""}},
		"evidence":0,
		"artifact":{"status":0,"json":{"artifact_id":"art-a.txt","sha256":"00"}},
		"artifact2":{"status":0,"json":{"artifact_id":"art-b.bin","sha256":"00"}},
		"config":{"status":0,"json":"hi"},"configMissing":{"status":11,"json":null},
		"configMissingText":"packrun:host/v1.config_get: not_found"}`
	if b, _ := json.Marshal(out); !jsonEqual(b, want) {
		t.Errorf("output %s\nwant   %s", b, want)
	}
	if !hasLog(res, "debug", "debug line") {
		t.Errorf("logs %+v", res.Logs)
	}
	if v, _ := state.Variable("v"); string(v) != `{"n":1}` {
		t.Errorf("variable %s", v)
	}
	for fn, want := range map[string]string{
		abi.HostMemoryPut:      `{"namespace":"ns","key":"k1","value":"v1","secret":true}`,
		abi.HostMemoryList:     `{"namespace":"ns","prefix":"k"}`,
		abi.HostMemoryDelete:   `{"namespace":"ns","key":"k1"}`,
		abi.HostQueueEnqueue:   `{"task_type":"next","payload":{"from":"sdk"}}`,
		abi.HostAdapterInvoke:  `{"adapter":"echo","input":{"x":1}}`,
		abi.HostEvidenceRecord: `{"kind":"note","data":{"a":"b"}}`,
		abi.HostArtifactPut:    `{"name":"a.txt","text":"hello"}`,
		abi.HostConfigGet:      `{"key":"greeting"}`,
	} {
		calls := svc.callsOf(fn)
		if len(calls) == 0 {
			t.Errorf("no %s call", fn)
			continue
		}
		if b, _ := json.Marshal(calls[0]); !jsonEqual(b, want) {
			t.Errorf("%s request %s, want %s", fn, b, want)
		}
	}
	if b, _ := json.Marshal(svc.callsOf(abi.HostArtifactPut)[1]); !jsonEqual(b, `{"role":"log","name":"b.bin","content_type":"application/octet-stream","base64":"AAEC"}`) {
		t.Errorf("artifact_put (binary) %s", b)
	}

	res = invoke(t, m, runtime.Invocation{Node: "test.raw", Input: json.RawMessage(` [1, {"a" : "é"}] `), RunID: "r<&>\"", TenantID: "t", Attempt: 3})
	completed(t, res, `{"raw":true,"in":[1,{"a":"é"}],"run":"r<&>\"","tenant":"t","attempt":3,"node":"test.raw","type":"test.raw"}`)
	res = invoke(t, m, runtime.Invocation{Node: "test.badoutput"})
	if res.Outcome != abi.Failed || res.Error.Code != "invalid_output" {
		t.Errorf("bad output: %s %+v", res.Outcome, res.Error)
	}
	res = invoke(t, m, runtime.Invocation{Node: "test.trap"})
	if res.Outcome != abi.Failed || res.Error.Code != abi.CodeTrap {
		t.Errorf("throw: %s %+v", res.Outcome, res.Error)
	}
	// Host buffers larger than the request reserve and than a page.
	res = invoke(t, m, runtime.Invocation{Node: "test.big", Input: json.RawMessage(`{"n":300000}`), Services: svc})
	completed(t, res, `300000`)
	// The JSON helpers: escapes, surrogate pairs, lone surrogates, control
	// characters, big integers, fractions.
	res = invoke(t, m, runtime.Invocation{Node: "test.json", Input: json.RawMessage(
		`{"strings":["plain","q\"b\\s/\u0001\n\t","😀\ud83d\ude00","lone \ud800 x","\u00e9é"],"big":9007199254740993,"half":0.5}`)})
	completed(t, res, `{"strings":["plain","q\"b\\s/\u0001\n\t","😀😀","lone \ud800 x","éé"],"big":9007199254740993,"half":0.5,"nan":null,"invalid":true}`)
}
