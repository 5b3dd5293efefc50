package rust_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/internal/testing/guesttest"
	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/runtime"
)

const committed = "example/counter.wasm"

// Debian's rustc has the wasm32 std; rustup toolchains often do not.
func rustc() string { return hosttest.Getenv("RUSTC", "/usr/bin/rustc") }

// probeRustc skips the test unless rustc can build for target.
func probeRustc(t *testing.T, target string) {
	t.Helper()
	rc := rustc()
	hosttest.NeedCommand(t, rc, "Rust toolchain not available (apt-get install rustc libstd-rust-dev-wasm32, or set RUSTC)")
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
	hosttest.NeedCommand(t, "bash", "bash not available")
	hosttest.CheckReproducible(t, committed, "run example/build.sh and commit the result", func(out string) error {
		cmd := exec.Command("bash", "example/build.sh", out)
		cmd.Env = append(os.Environ(), "RUSTC="+rustc())
		return hosttest.Run(cmd)
	})
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

// newServices serves every host call; adapter_invoke answers only the
// fields the SDK reads, and artifact_put's answer has an escape to decode.
func newServices() *hosttest.Services {
	return hosttest.NewServices(hosttest.WithConfig("greeting", `"hi"`), hosttest.WithAdapterResult(`"exit_status":"ok"`),
		hosttest.WithResponse(abi.HostArtifactPut, abi.StatusOK, `{"artifact_id":"art-1","sha256":"5e\u0063"}`))
}

func load(t *testing.T) *runtime.Module {
	return hosttest.LoadFile(t, committed, runtime.LoadOptions{Name: "counter.wasm"})
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
	// The SDK has sensor_emit (ABI 1.1) and message_publish (ABI 1.2); a
	// module that does not call them does not import them, so its pack may
	// declare ABI 1.0.
	guesttest.CheckNoImport(t, committed)
}

func TestCounter(t *testing.T) {
	m := load(t)
	svc := newServices()
	for i, want := range []string{`{"key":"visits","count":1}`, `{"key":"visits","count":3}`} {
		in := `{"key":"visits"}`
		if i == 1 {
			in = `{"key":"visits","by":2}`
		}
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(in), RunID: "run-1", Services: svc})
		if res.Outcome != abi.Completed || string(res.Output) != want {
			t.Fatalf("call %d: %s %s %v, want %s", i, res.Outcome, res.Output, res.Error, want)
		}
		put := svc.Last(abi.HostMemoryPut).Req
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
	if v, _ := svc.Memory("counters", "visits"); string(v) != "3" {
		t.Fatalf("stored value %s", v)
	}
	// Keys with escapes and non-ASCII text survive the JSON helpers.
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"a\"b\u00e9\u2603"}`), Services: svc})
	if res.Outcome != abi.Completed || string(res.Output) != `{"key":"a\"bé☃","count":1}` {
		t.Fatalf("escaped key: %s %s %v", res.Outcome, res.Output, res.Error)
	}
	if k := svc.Last(abi.HostMemoryPut).Req["key"]; string(k) != `"a\"bé☃"` {
		t.Fatalf("escaped key in memory_put: %s", k)
	}
}

func TestFailures(t *testing.T) {
	m := load(t)
	for in, code := range map[string]string{`{}`: "invalid_input", `{"key":7}`: "invalid_input", `{"key":"k","by":1.5}`: "invalid_input"} {
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(in), Services: newServices()})
		if res.Outcome != abi.Failed || res.Error == nil || res.Error.Code != code {
			t.Errorf("%s: %s %s %+v, want failed %s", in, res.Outcome, res.Output, res.Error, code)
		}
	}
	// Without services nothing is granted: the host status becomes the code.
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"k"}`)})
	if res.Outcome != abi.Failed || res.Error.Code != "access_denied" {
		t.Fatalf("no services: %s %+v", res.Outcome, res.Error)
	}
}

func TestSuspend(t *testing.T) {
	m := load(t)
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.gate"})
	if res.Outcome != abi.Suspended || string(res.Interrupt) != `{"question":"approve?"}` {
		t.Fatalf("gate: %s %s %v", res.Outcome, res.Interrupt, res.Error)
	}
	if len(res.Logs) != 1 || res.Logs[0].Level != "warn" {
		t.Fatalf("gate logs %+v", res.Logs)
	}
	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "example.gate", Input: json.RawMessage(`{"approved":true}`)})
	if res.Outcome != abi.Completed || string(res.Output) != `{"approved":true}` {
		t.Fatalf("approved gate: %s %s %v", res.Outcome, res.Output, res.Error)
	}
}

func TestInterrupt(t *testing.T) {
	m := load(t)
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.ask"})
	if res.Outcome != abi.Suspended || string(res.Interrupt) != `{"question":"name?"}` {
		t.Fatalf("ask: %s %s %v", res.Outcome, res.Interrupt, res.Error)
	}
	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "example.ask", Resume: []json.RawMessage{json.RawMessage(`"Ada"`)}})
	if res.Outcome != abi.Completed || string(res.Output) != `{"answer":"Ada"}` {
		t.Fatalf("resumed ask: %s %s %v", res.Outcome, res.Output, res.Error)
	}
}

// TestReuse runs many invocations on one reused instance: the SDK must
// release what each invocation allocated.
func TestReuse(t *testing.T) {
	m := hosttest.LoadFile(t, committed, runtime.LoadOptions{ReuseInstances: true})
	svc := newServices()
	var first uint64
	for i := 1; i <= 2000; i++ {
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"k"}`), Services: svc})
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
	return hosttest.Build(t, name+".wasm", func(out string) error {
		flags := []string{"--edition", "2021", "--target", "wasm32-unknown-unknown", "-C", "opt-level=s"}
		rlib := filepath.Join(filepath.Dir(out), "libpackrun.rlib")
		for _, args := range [][]string{
			append(flags, "--crate-type", "rlib", "--crate-name", "packrun", "-o", rlib, "packrun/src/lib.rs"),
			append(flags, "--crate-type", "cdylib", "--extern", "packrun="+rlib, "-o", out, "testdata/"+name+".rs"),
		} {
			if err := hosttest.Run(exec.Command(rustc(), args...)); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestAllHostCalls drives every host call of the SDK through
// testdata/all.rs; it calls sensor_emit (ABI 1.1) and message_publish, so
// its pack declares ABI 1.2.
func TestAllHostCalls(t *testing.T) {
	wasm := buildTestModule(t, "all")
	guesttest.CheckNeedsABI12(t, wasm)
	m := hosttest.Load(t, wasm, runtime.LoadOptions{ABI: guesttest.ABI12})
	svc := guesttest.NewServices(hosttest.WithConfig("greeting", `"hi"`), hosttest.WithAdapterResult(`"exit_status":"ok"`),
		hosttest.WithResponse(abi.HostArtifactPut, abi.StatusOK, `{"artifact_id":"art-1","sha256":"5e\u0063"}`))
	res := hosttest.Invoke(t, m, runtime.Invocation{
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
		"pubStaged":    "1", "pubDenied": "1", "pubInvalid": "10", "pubBadJson": "-2",
		"sensorInvalid": "10", "sensorBadJson": "-2",
	}
	for k, w := range want {
		if string(got[k]) != w {
			t.Errorf("%s = %s, want %s", k, got[k], w)
		}
	}
	guesttest.CheckStaged(t, svc, string(got["pubId"]), string(got["pubHash"]), string(got["pubStaged"]))
	guesttest.CheckSensorStaged(t, svc, string(got["sensorId"]), string(got["sensorStaged"]))
	if len(got) != len(want)+5 { // + "now", "pubId", "pubHash", "sensorId", "sensorStaged"
		t.Errorf("output has %d fields, want %d: %s", len(got), len(want)+5, res.Output)
	}
	var logs []string
	for _, l := range res.Logs {
		logs = append(logs, l.Level+":"+l.Message)
	}
	if strings.Join(logs, ",") != `trace:level 0,debug:level 1,info:level 2,warn:level 3,error:level 4,info:formatted 1 "x"` {
		t.Errorf("logs %v", logs)
	}
	reqs := map[string]string{}
	for _, c := range svc.Calls() {
		b, _ := json.Marshal(c.Req)
		reqs[c.Fn] += string(b) + ";"
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
	guesttest.CheckRequests(t, svc)
	guesttest.CheckSensorRequests(t, svc)
}

// TestHandlerMistakes: invalid output JSON, failure details, a panic.
func TestHandlerMistakes(t *testing.T) {
	m := hosttest.Load(t, buildTestModule(t, "all"), runtime.LoadOptions{})
	for node, code := range map[string]string{"test.bad_output": "invalid_output", "test.details": "quota", "test.panic": abi.CodeTrap} {
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: node})
		if res.Outcome != abi.Failed || res.Error.Code != code {
			t.Errorf("%s: %s %+v, want failed %s", node, res.Outcome, res.Error, code)
		}
	}
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "test.details"})
	if res.Error.Message != `too "many"` || string(res.Error.Details) != `{"limit":3}` {
		t.Errorf("details: %+v", res.Error)
	}
	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "test.panic"})
	if len(res.Logs) != 1 || res.Logs[0].Level != "error" || !strings.Contains(res.Logs[0].Message, "boom 42") {
		t.Errorf("panic logs %+v", res.Logs)
	}
}

// TestCargoBuildsTheExample: the SDK is a Cargo package, and the example
// depends on it as one: Debian's cargo builds the example offline (no
// crates.io) into a module with the same exports as the committed one.
func TestCargoBuildsTheExample(t *testing.T) {
	probeRustc(t, "wasm32-unknown-unknown")
	cargo := hosttest.Getenv("CARGO", "/usr/bin/cargo")
	hosttest.NeedCommand(t, cargo, "cargo not available (apt-get install cargo, or set CARGO)")
	target := t.TempDir()
	env := append(os.Environ(), "RUSTC="+rustc(), "CARGO_TARGET_DIR="+target, "CARGO_HOME="+filepath.Join(target, "home"))
	build := exec.Command(cargo, "build", "--offline", "--locked", "--release", "--target", "wasm32-unknown-unknown")
	build.Dir, build.Env = "example", env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cargo build: %v\n%s", err, out)
	}
	built := hosttest.LoadFile(t, filepath.Join(target, "wasm32-unknown-unknown", "release", "counter.wasm"), runtime.LoadOptions{Name: "counter.wasm"}).Info()
	want := load(t).Info()
	if built.PackName != want.PackName || strings.Join(built.Nodes, ",") != strings.Join(want.Nodes, ",") || built.ABIVersion != want.ABIVersion {
		t.Fatalf("cargo-built module: %+v, committed: %+v", built, want)
	}
	list := exec.Command(cargo, "package", "--list", "--offline", "--allow-dirty")
	list.Dir, list.Env = "packrun", env
	out, err := list.Output()
	if err != nil {
		t.Fatalf("cargo package --list: %v\n%s", err, out)
	}
	for _, f := range []string{"Cargo.toml", "LICENSE", "README.md", "src/lib.rs"} {
		if !strings.Contains("\n"+string(out), "\n"+f+"\n") {
			t.Errorf("the crate leaves out %s:\n%s", f, out)
		}
	}
}

// TestHTTP builds testdata/http.rs, which makes the requests of
// guesttest.HTTPRequests through packrun::http::request, and checks the
// JSON each request sent (method, URL, header order, body or body_base64)
// and what each canned answer or refusal decoded to.
func TestHTTP(t *testing.T) {
	wasm := buildTestModule(t, "http")
	m := hosttest.Load(t, wasm, runtime.LoadOptions{ABI: guesttest.ABI13})
	svc := guesttest.NewServices()
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "test.http", Services: svc})
	if res.Outcome != abi.Completed {
		t.Fatalf("%s %v", res.Outcome, res.Error)
	}
	guesttest.CheckHTTP(t, svc, res.Output)
}

// TestFetchExample checks example/fetch, the outbound HTTP example skill:
// it rebuilds byte-identically (as example/build.sh builds it, with the
// same relative source paths) and behaves as guesttest.CheckFetchExample
// says against the http_request fake.
func TestFetchExample(t *testing.T) {
	probeRustc(t, "wasm32-unknown-unknown")
	hosttest.CheckReproducible(t, "example/fetch/fetch.wasm", "run example/build.sh, update example/fetch/pack.json and commit", func(out string) error {
		out, err := filepath.Abs(out)
		if err != nil {
			return err
		}
		rlib := filepath.Join(filepath.Dir(out), "libpackrun.rlib")
		flags := []string{"--edition", "2021", "--target", "wasm32-unknown-unknown", "-C", "opt-level=s", "-C", "codegen-units=1"}
		for _, args := range [][]string{
			append(flags, "--crate-type", "rlib", "--crate-name", "packrun", "-o", rlib, "../packrun/src/lib.rs"),
			append(flags, "--crate-type", "cdylib", "--crate-name", "fetch", "-C", "strip=symbols", "--extern", "packrun="+rlib, "-o", out, "fetch/fetch.rs"),
		} {
			cmd := exec.Command(rustc(), args...)
			cmd.Dir = "example"
			if err := hosttest.Run(cmd); err != nil {
				return err
			}
		}
		return nil
	})
	guesttest.CheckFetchExample(t, "example/fetch")
}
