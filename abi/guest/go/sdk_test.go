// Package gosdk_test checks the Go guest SDK (./packrun): the committed
// example builds reproducibly from source, and the packs it produces run
// under the packrun runtime with every host service.
package gosdk_test

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
	"github.com/packrun/packrun/abi/guest/go/packrun"
	"github.com/packrun/packrun/runtime"
)

const exampleWasm = "example/counter.wasm"

// build compiles the pack in dir exactly like build.sh.
func build(t *testing.T, dir, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-buildmode=c-shared", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, b)
	}
}

func TestExampleIsReproducible(t *testing.T) {
	t.Parallel()
	committed, err := os.ReadFile(exampleWasm)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "counter.wasm")
	build(t, "example", out)
	rebuilt, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(rebuilt, committed) {
		return
	}
	ver, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	// The Go runtime embeds its version; another toolchain builds other bytes.
	if v := bytes.TrimSpace(ver); !bytes.Contains(committed, v) {
		t.Skipf("%s was built by another Go toolchain than %s; rerun build.sh to compare", exampleWasm, v)
	}
	t.Fatalf("%s is stale: rebuilding it from source gives different bytes (%d vs %d); run ./build.sh", exampleWasm, len(rebuilt), len(committed))
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
	if info.PackName != "local.counter.go" || strings.Join(info.Nodes, ",") != "example.counter,example.fail,example.suspend,example.approve" || info.ABIVersion != 1 {
		t.Fatalf("info %+v", info)
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
		puts := svc.callsOf(abi.HostMemoryPut)
		if len(puts) != 3 {
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
		if gets := svc.callsOf(abi.HostMemoryGet); len(gets) != 3 || gets[0]["key"] != "a" {
			t.Errorf("memory_get calls %v", gets)
		}
	})

	t.Run("input that does not decode", func(t *testing.T) {
		res := invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":5}`), Services: newFakeServices()})
		if res.Outcome != abi.Failed || res.Error.Code != "invalid_input" {
			t.Fatalf("%s %v", res.Outcome, res.Error)
		}
	})

	t.Run("host call refused", func(t *testing.T) {
		// Without services nothing is granted: the handler's error is the
		// *StatusError of memory_get.
		res := invoke(t, m, runtime.Invocation{Node: "example.counter"})
		if res.Outcome != abi.Failed || res.Error.Code != "host_call_failed" || !jsonEqual(res.Error.Details, `{"function":"packrun:host/v1.memory_get","status":1}`) {
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
		for i := 1; i <= 200; i++ {
			res := invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"r"}`), Services: svc})
			if res.Outcome != abi.Completed {
				t.Fatalf("invocation %d: %s %v", i, res.Outcome, res.Error)
			}
		}
		if string(svc.mem["counters/r"]) != "200" {
			t.Fatalf("count %s", svc.mem["counters/r"])
		}
	})
}

// TestServices builds testdata/services, which calls every host function
// through the SDK, and checks what each call sent and got.
func TestServices(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "services.wasm")
	build(t, "testdata/services", path)
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
	if r, _ := out["random"].(string); len(r) != 16 || out["randomErr"] != nil {
		t.Errorf("random %v %v", out["random"], out["randomErr"])
	}
	delete(out, "now")
	delete(out, "random")
	want := `{"randomErr":null,
		"unsetVar":true,"setVar":null,"var":{"n":1},"varErr":null,
		"write1":null,"write2":null,"channel":[1,"two"],"channelErr":null,
		"put1":null,"put2":null,"keys":["k1","k2"],"keysErr":null,"delete":null,"deleted":true,
		"staged":1,"stagedErr":null,
		"adapter":{"output":{"x":1},"exit_status":"ok","exit_code":0},"adapterErr":null,
		"evidence":null,
		"artifact":{"artifact_id":"art-a.txt","sha256":"00"},"artifactErr":null,
		"artifact2":{"artifact_id":"art-b.bin","sha256":"00"},"artifact2Err":null,
		"config":"hi","configErr":null,"configMissing":true,"configMissingFunc":"packrun:host/v1.config_get"}`
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

	for _, c := range []struct{ node, code, msg string }{
		{"test.panic", "panic", "boom"},
		{"test.error", "node_error", "plain error"},
		{"test.unhandled", "host_call_failed", "packrun:host/v1.config_get: not_found"},
	} {
		res := invoke(t, m, runtime.Invocation{Node: c.node, Services: svc})
		if res.Outcome != abi.Failed || res.Error.Code != c.code || res.Error.Message != c.msg {
			t.Errorf("%s: %s %+v", c.node, res.Outcome, res.Error)
		}
	}
	res = invoke(t, m, runtime.Invocation{Node: "test.raw", Input: json.RawMessage(` [1, 2] `), RunID: "r<&>", TenantID: "t"})
	completed(t, res, `{"raw":true,"in":[1,2],"run":"r<&>","tenant":"t"}`)
	// Host buffers larger than the request reserve and than a page.
	res = invoke(t, m, runtime.Invocation{Node: "test.big", Input: json.RawMessage(`{"n":300000}`), Services: svc})
	completed(t, res, `300000`)
}

// The SDK's status codes are the ABI's.
func TestStatusCodes(t *testing.T) {
	for _, c := range []struct {
		sdk packrun.Status
		abi abi.Status
	}{
		{packrun.StatusOK, abi.StatusOK},
		{packrun.StatusAccessDenied, abi.StatusAccessDenied},
		{packrun.StatusValidation, abi.StatusValidation},
		{packrun.StatusNotFound, abi.StatusNotFound},
		{packrun.StatusCapabilityBreach, abi.StatusCapabilityBreach},
		{packrun.StatusHostError, abi.StatusHostError},
	} {
		if int32(c.sdk) != int32(c.abi) || c.sdk.String() != c.abi.String() {
			t.Errorf("%v (%d) != %v (%d)", c.sdk, c.sdk, c.abi, c.abi)
		}
	}
	for lvl := packrun.LevelTrace; lvl <= packrun.LevelError; lvl++ {
		if abi.LogLevelName(int32(lvl)) == "" {
			t.Fatal(lvl)
		}
	}
	if packrun.LevelWarn != abi.LogWarn || packrun.LevelError != abi.LogError || packrun.LevelTrace != abi.LogTrace {
		t.Error("log levels differ from the ABI's")
	}
}
