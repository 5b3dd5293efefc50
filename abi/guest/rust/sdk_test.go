package rust_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/runtime"
)

const committed = "example/counter.wasm"

func rustc() string {
	if r := os.Getenv("RUSTC"); r != "" {
		return r
	}
	return "/usr/bin/rustc" // Debian's rustc has the wasm32 std; rustup toolchains often do not
}

// probeRustc skips the test unless rustc can build for target.
func probeRustc(t *testing.T, target string) {
	t.Helper()
	rc := rustc()
	if _, err := exec.LookPath(rc); err != nil {
		t.Skipf("Rust toolchain not available (apt-get install rustc libstd-rust-dev-wasm32, or set RUSTC): %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "probe.rs")
	if err := os.WriteFile(src, []byte("pub fn probe() -> String { String::new() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--edition", "2021", "--crate-type", "rlib", "-o", filepath.Join(dir, "libprobe.rlib"), src}
	if target != "" {
		args = append(args, "--target", target)
	}
	if out, err := exec.Command(rc, args...).CombinedOutput(); err != nil {
		t.Skipf("%s cannot build for %q here (apt-get install libstd-rust-dev-wasm32): %v\n%s", rc, target, err, out)
	}
}

// TestRebuildIsByteIdentical rebuilds the example from source and compares
// it with the committed module. It needs rustc with the
// wasm32-unknown-unknown std; without it it is skipped (CI has it).
func TestRebuildIsByteIdentical(t *testing.T) {
	probeRustc(t, "wasm32-unknown-unknown")
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skipf("bash not available: %v", err)
	}
	out := filepath.Join(t.TempDir(), "counter.wasm")
	cmd := exec.Command("bash", "example/build.sh", out)
	cmd.Env = append(os.Environ(), "RUSTC="+rustc())
	if b, err := cmd.CombinedOutput(); err != nil {
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
		t.Fatalf("rebuilt module (%d bytes) differs from the committed %s (%d bytes): run example/build.sh and commit the result", len(got), committed, len(want))
	}
}

// TestCrateUnitTests runs the crate's own #[test]s (JSON helpers,
// envelopes) natively.
func TestCrateUnitTests(t *testing.T) {
	probeRustc(t, "")
	bin := filepath.Join(t.TempDir(), "packrun-tests")
	if out, err := exec.Command(rustc(), "--edition", "2021", "--test", "--crate-name", "packrun", "-o", bin, "packrun/src/lib.rs").CombinedOutput(); err != nil {
		t.Fatalf("rustc --test: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin).CombinedOutput(); err != nil {
		t.Fatalf("crate tests: %v\n%s", err, out)
	}
}

// services is a runtime.Services fake: an in-memory store that records
// every call.
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
	var ns, key, prefix string
	json.Unmarshal(r["namespace"], &ns)
	json.Unmarshal(r["key"], &key)
	json.Unmarshal(r["prefix"], &prefix)
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
	case abi.HostMemoryDelete:
		delete(s.mem, ns+"/"+key)
		return abi.StatusOK, nil
	case abi.HostMemoryList:
		keys := []string{}
		for k := range s.mem {
			if rest, ok := strings.CutPrefix(k, ns+"/"); ok && strings.HasPrefix(rest, prefix) {
				keys = append(keys, rest)
			}
		}
		slices.Sort(keys)
		b, _ := json.Marshal(map[string]any{"keys": keys})
		return abi.StatusOK, b
	case abi.HostQueueEnqueue:
		return abi.StatusOK, []byte(`{"staged":1}`)
	case abi.HostAdapterInvoke:
		return abi.StatusOK, []byte(`{"output":` + string(r["input"]) + `,"exit_status":"ok"}`)
	case abi.HostEvidenceRecord:
		return abi.StatusOK, nil
	case abi.HostArtifactPut:
		return abi.StatusOK, []byte(`{"artifact_id":"art-1","sha256":"5e\u0063"}`)
	case abi.HostConfigGet:
		if key == "greeting" {
			return abi.StatusOK, []byte(`{"value":"hi"}`)
		}
		return abi.StatusNotFound, nil
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

func load(t *testing.T) *runtime.Module {
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
	m, err := rt.Load(ctx, wasm, runtime.LoadOptions{Name: "counter.wasm"})
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
	info := load(t).Info()
	if info.PackName != "local.counter.rust" || strings.Join(info.Nodes, ",") != "example.counter,example.gate,example.ask" || info.ABIVersion != 1 {
		t.Fatalf("info %+v", info)
	}
	for _, imp := range info.Imports {
		if !strings.HasPrefix(imp, abi.ModuleOpenwop+".") && !strings.HasPrefix(imp, abi.ModuleHostV1+".") {
			t.Errorf("unexpected import %s", imp)
		}
	}
}

func TestCounter(t *testing.T) {
	m := load(t)
	svc := newServices()
	for i, want := range []string{`{"key":"visits","count":1}`, `{"key":"visits","count":3}`} {
		in := `{"key":"visits"}`
		if i == 1 {
			in = `{"key":"visits","by":2}`
		}
		res := invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(in), RunID: "run-1", Services: svc})
		if res.Outcome != abi.Completed || string(res.Output) != want {
			t.Fatalf("call %d: %s %s %v, want %s", i, res.Outcome, res.Output, res.Error, want)
		}
		put := svc.last(abi.HostMemoryPut)
		if string(put["ttlSeconds"]) != "3600" || string(put["namespace"]) != `"counters"` || string(put["key"]) != `"visits"` {
			t.Fatalf("memory_put request %v: want namespace counters, key visits, ttlSeconds 3600", put)
		}
		wantLog := "counter visits = 1 (run run-1, attempt 1)"
		if i == 1 {
			wantLog = "counter visits = 3 (run run-1, attempt 1)"
		}
		if len(res.Logs) != 1 || res.Logs[0].Level != "info" || res.Logs[0].Message != wantLog {
			t.Fatalf("logs %+v, want info %q", res.Logs, wantLog)
		}
	}
	if v := string(svc.mem["counters/visits"]); v != "3" {
		t.Fatalf("stored value %s", v)
	}
	// Keys with escapes and non-ASCII text survive the JSON helpers.
	res := invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"a\"b\u00e9\u2603"}`), Services: svc})
	if res.Outcome != abi.Completed || string(res.Output) != `{"key":"a\"bé☃","count":1}` {
		t.Fatalf("escaped key: %s %s %v", res.Outcome, res.Output, res.Error)
	}
	if string(svc.last(abi.HostMemoryPut)["key"]) != `"a\"bé☃"` {
		t.Fatalf("escaped key in memory_put: %s", svc.last(abi.HostMemoryPut)["key"])
	}
}

func TestFailures(t *testing.T) {
	m := load(t)
	for in, code := range map[string]string{`{}`: "invalid_input", `{"key":7}`: "invalid_input", `{"key":"k","by":1.5}`: "invalid_input"} {
		res := invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(in), Services: newServices()})
		if res.Outcome != abi.Failed || res.Error == nil || res.Error.Code != code {
			t.Errorf("%s: %s %s %+v, want failed %s", in, res.Outcome, res.Output, res.Error, code)
		}
	}
	// Without services nothing is granted: the host status becomes the code.
	res := invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"k"}`)})
	if res.Outcome != abi.Failed || res.Error.Code != "access_denied" {
		t.Fatalf("no services: %s %+v", res.Outcome, res.Error)
	}
}

func TestSuspend(t *testing.T) {
	m := load(t)
	res := invoke(t, m, runtime.Invocation{Node: "example.gate"})
	if res.Outcome != abi.Suspended || string(res.Interrupt) != `{"question":"approve?"}` {
		t.Fatalf("gate: %s %s %v", res.Outcome, res.Interrupt, res.Error)
	}
	if len(res.Logs) != 1 || res.Logs[0].Level != "warn" {
		t.Fatalf("gate logs %+v", res.Logs)
	}
	res = invoke(t, m, runtime.Invocation{Node: "example.gate", Input: json.RawMessage(`{"approved":true}`)})
	if res.Outcome != abi.Completed || string(res.Output) != `{"approved":true}` {
		t.Fatalf("approved gate: %s %s %v", res.Outcome, res.Output, res.Error)
	}
}

func TestInterrupt(t *testing.T) {
	m := load(t)
	res := invoke(t, m, runtime.Invocation{Node: "example.ask"})
	if res.Outcome != abi.Suspended || string(res.Interrupt) != `{"question":"name?"}` {
		t.Fatalf("ask: %s %s %v", res.Outcome, res.Interrupt, res.Error)
	}
	res = invoke(t, m, runtime.Invocation{Node: "example.ask", Resume: []json.RawMessage{json.RawMessage(`"Ada"`)}})
	if res.Outcome != abi.Completed || string(res.Output) != `{"answer":"Ada"}` {
		t.Fatalf("resumed ask: %s %s %v", res.Outcome, res.Output, res.Error)
	}
}

// TestReuse runs many invocations on one reused instance: the SDK must
// release what each invocation allocated.
func TestReuse(t *testing.T) {
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	wasm, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.Load(ctx, wasm, runtime.LoadOptions{ReuseInstances: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	svc := newServices()
	var first uint64
	for i := 1; i <= 2000; i++ {
		res := invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"k"}`), Services: svc})
		if res.Outcome != abi.Completed {
			t.Fatalf("call %d: %s %v", i, res.Outcome, res.Error)
		}
		if i == 10 {
			first = res.MemoryBytes
		}
		if i == 2000 && res.MemoryBytes != first {
			t.Fatalf("memory grew from %d to %d bytes over 2000 reused invocations", first, res.MemoryBytes)
		}
	}
}

// buildTestModule compiles testdata/<name>.rs against the SDK crate into a
// temporary module, or skips when the toolchain is missing.
func buildTestModule(t *testing.T, name string) []byte {
	t.Helper()
	probeRustc(t, "wasm32-unknown-unknown")
	dir := t.TempDir()
	flags := []string{"--edition", "2021", "--target", "wasm32-unknown-unknown", "-C", "opt-level=s"}
	rlib := filepath.Join(dir, "libpackrun.rlib")
	out := filepath.Join(dir, name+".wasm")
	for _, args := range [][]string{
		append(flags, "--crate-type", "rlib", "--crate-name", "packrun", "-o", rlib, "packrun/src/lib.rs"),
		append(flags, "--crate-type", "cdylib", "--extern", "packrun="+rlib, "-o", out, "testdata/"+name+".rs"),
	} {
		if b, err := exec.Command(rustc(), args...).CombinedOutput(); err != nil {
			t.Fatalf("rustc %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

func loadBytes(t *testing.T, wasm []byte) *runtime.Module {
	t.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	m, err := rt.Load(ctx, wasm, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(ctx) })
	return m
}

// TestAllHostCalls drives every host call of the SDK through
// testdata/all.rs.
func TestAllHostCalls(t *testing.T) {
	m := loadBytes(t, buildTestModule(t, "all"))
	svc := newServices()
	res := invoke(t, m, runtime.Invocation{
		Node: "test.all", Services: svc, RunID: "r\"1", TenantID: "t", Attempt: 2,
		Configurable: json.RawMessage(`{"k":[1]}`),
	})
	if res.Outcome != abi.Completed {
		t.Fatalf("%s %v", res.Outcome, res.Error)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(res.Output, &got); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	want := map[string]string{
		"random": "0", "varUnset": "true", "varSet": "0", "varBad": "-2", "var": `{"a":[1,2]}`,
		"chanEmpty": "[]", "chan": `[1,"two"]`,
		"putA": "0", "putB": "0", "memA": `{"x":1}`, "memMissing": "true", "list": `["a","b"]`, "listB": `["b"]`,
		"del": "0", "memAfterDel": "true", "staged": "1",
		"adapterOut": `{"q":"hi"}`, "adapterExit": `"ok"`,
		"evidence": "0", "artifactId": `"art-1"`, "sha256": `"5ec"`, "artifact64": "0",
		"config": `"hi"`, "configMissing": "true", "rawResp": `{"value":"hi"}`, "rawMissing": "11", "badArg": "-2",
		"typeId": `"test.all"`, "runId": `"r\"1"`, "nodeId": `"test.all"`, "tenantId": `"t"`, "attempt": "2",
		"configurable": `{"k":[1]}`,
	}
	for k, w := range want {
		if string(got[k]) != w {
			t.Errorf("%s = %s, want %s", k, got[k], w)
		}
	}
	if len(got) != len(want)+1 { // + "now"
		t.Errorf("output has %d fields, want %d: %s", len(got), len(want)+1, res.Output)
	}
	var logs []string
	for _, l := range res.Logs {
		logs = append(logs, l.Level+":"+l.Message)
	}
	if strings.Join(logs, ",") != `trace:level 0,debug:level 1,info:level 2,warn:level 3,error:level 4,info:formatted 1 "x"` {
		t.Errorf("logs %v", logs)
	}
	reqs := map[string]string{}
	for _, c := range svc.calls {
		b, _ := json.Marshal(c.req)
		reqs[c.fn] += string(b) + ";"
	}
	for fn, w := range map[string]string{
		abi.HostMemoryPut:      `{"key":"a","namespace":"ns","secret":true,"value":{"x":1}};{"key":"b","namespace":"ns","ttlSeconds":60,"value":2};`,
		abi.HostEvidenceRecord: `{"data":{"n":1},"kind":"note"};`,
		abi.HostArtifactPut:    `{"content_type":"text/plain","name":"a.txt","role":"output","text":"hello \"x\"\n"};{"base64":"AAE=","name":"b.bin","role":"output"};`,
		abi.HostQueueEnqueue:   `{"payload":{},"task_type":"t"};`,
		abi.HostMemoryList:     `{"namespace":"ns"};{"namespace":"ns","prefix":"b"};`,
	} {
		if reqs[fn] != w {
			t.Errorf("%s requests %s\nwant %s", fn, reqs[fn], w)
		}
	}
}

// TestHandlerMistakes: invalid output JSON, failure details, a panic.
func TestHandlerMistakes(t *testing.T) {
	m := loadBytes(t, buildTestModule(t, "all"))
	for node, code := range map[string]string{"test.bad_output": "invalid_output", "test.details": "quota", "test.panic": abi.CodeTrap} {
		res := invoke(t, m, runtime.Invocation{Node: node})
		if res.Outcome != abi.Failed || res.Error.Code != code {
			t.Errorf("%s: %s %+v, want failed %s", node, res.Outcome, res.Error, code)
		}
	}
	res := invoke(t, m, runtime.Invocation{Node: "test.details"})
	if res.Error.Message != `too "many"` || string(res.Error.Details) != `{"limit":3}` {
		t.Errorf("details: %+v", res.Error)
	}
	res = invoke(t, m, runtime.Invocation{Node: "test.panic"})
	if len(res.Logs) != 1 || res.Logs[0].Level != "error" || !strings.Contains(res.Logs[0].Message, "boom 42") {
		t.Errorf("panic logs %+v", res.Logs)
	}
}
