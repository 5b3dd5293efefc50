package c_test

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

// TestRebuildIsByteIdentical rebuilds the example from source and compares
// it with the committed module. It needs clang, lld, wasi-libc and the
// wasm32 compiler-rt builtins; without them it is skipped (CI has them).
func TestRebuildIsByteIdentical(t *testing.T) {
	cc := hosttest.Getenv("CC", "clang")
	hosttest.NeedCommand(t, cc, "C toolchain not available")
	hosttest.NeedCommand(t, "bash", "bash not available")
	dir := t.TempDir()
	// Probe the wasm32-wasi sysroot and builtins with an empty reactor.
	probe := filepath.Join(dir, "probe.c")
	if err := os.WriteFile(probe, []byte("int packrun_probe;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "--target=wasm32-wasi", "-mexec-model=reactor", "-o", filepath.Join(dir, "probe.wasm"), probe).CombinedOutput(); err != nil {
		t.Skipf("%s cannot build wasm32-wasi reactors here (needs lld, wasi-libc, libclang-rt-dev-wasm32): %v\n%s", cc, err, out)
	}
	hosttest.CheckReproducible(t, committed, "run example/build.sh and commit the result", func(out string) error {
		return hosttest.Run(exec.Command("bash", "example/build.sh", out))
	})
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
	if info.PackName != "local.counter.c" || strings.Join(info.Nodes, ",") != "example.counter,example.gate,example.ask" || info.ABIVersion != 1 {
		t.Fatalf("info %+v", info)
	}
	for _, imp := range info.Imports {
		if strings.HasPrefix(imp, abi.ModuleWASI+".") {
			t.Errorf("the SDK pulled in a WASI import: %s", imp)
		}
	}
	// The SDK has packrun_sensor_emit (ABI 1.1) and packrun_message_publish
	// (ABI 1.2); wasm-ld drops them and their imports from a module that
	// does not call them, so its pack may declare ABI 1.0.
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
	if res.Outcome != abi.Failed || res.Error.Code != "access_denied" || res.Error.Message != "memory_get failed" {
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

// buildTestModule compiles testdata/<name>.c with the SDK into a temporary
// module, or skips when the toolchain is missing.
func buildTestModule(t *testing.T, name string) []byte {
	t.Helper()
	cc := hosttest.Getenv("CC", "clang")
	hosttest.NeedCommand(t, cc, "C toolchain not available")
	return hosttest.Build(t, name+".wasm", func(out string) error {
		if b, err := exec.Command(cc, "--target=wasm32-wasi", "-O2", "-mexec-model=reactor", "-Wl,--strip-all", "-I.", "-o", out, "testdata/"+name+".c", "packrun.c").CombinedOutput(); err != nil {
			t.Skipf("%s cannot build wasm32-wasi reactors here: %v\n%s", cc, err, b)
		}
		return nil
	})
}

// TestAllHostCalls drives every host call and JSON helper of the SDK
// through testdata/all.c; it calls sensor_emit (ABI 1.1) and
// message_publish, so its pack declares ABI 1.2.
func TestAllHostCalls(t *testing.T) {
	wasm := buildTestModule(t, "all")
	guesttest.CheckNeedsABI12(t, wasm)
	m := hosttest.Load(t, wasm, runtime.LoadOptions{ABI: guesttest.ABI12})
	svc := guesttest.NewServices(hosttest.WithConfig("greeting", `"hi"`), hosttest.WithAdapterResult(`"exit_status":"ok"`),
		hosttest.WithResponse(abi.HostArtifactPut, abi.StatusOK, `{"artifact_id":"art-1","sha256":"5e\u0063"}`))
	res := hosttest.Invoke(t, m, runtime.Invocation{
		Node: "test.all", Services: svc, RunID: "r\"1", TenantID: "t", Attempt: 2,
		Configurable: json.RawMessage(`{"k":[1]}`),
		Input:        json.RawMessage(`{"s":"h\u00e9llo w","n":-42,"big":9223372036854775808,"b":true,"z":null}`),
	})
	if res.Outcome != abi.Completed {
		t.Fatalf("%s %v", res.Outcome, res.Error)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(res.Output, &got); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	want := map[string]string{
		"random": "0", "varUnset": "11", "varSet": "0", "varBad": "-2", "var": `{"a":[1,2]}`,
		"chanEmpty": "[]", "chan": `[1,"two"]`,
		"putA": "0", "putB": "0", "memA": `{"x":1}`, "memMissing": "11", "list": `["a","b"]`, "listB": `["b"]`,
		"del": "0", "memAfterDel": "11", "queue": "0", "staged": "1",
		"adapter": "0", "adapterOut": `{"q":"hi"}`, "adapterResp": `{"output":{"q":"hi"},"exit_status":"ok"}`,
		"evidence": "0", "artifact": "0", "artifactId": `"art-1"`, "sha256": `"5ec"`, "artifact64": "0",
		"config": `"hi"`, "configMissing": "11", "rawCall": "0", "rawResp": `{"value":"hi"}`, "rawBad": "-5",
		"getStr": "-4", "strPrefix": `"héllo "`, "strFull": "8", "getInt": "0", "int": "-42", "getBig": "-3",
		"getBool": "0", "bool": "1", "getNull": "11", "getMissing": "11", "getType": "-3", "notObject": "-3",
		"badJson": "-2", "dupLast": "2", "valid": "1", "escLen": "17", "esc": `"\"a\\\"\\u0001\\ufffd\""`,
		"typeId": `"test.all"`, "runId": `"r\"1"`, "nodeId": `"test.all"`, "tenantId": `"t"`, "attempt": "2",
		"configurable": `{"k":[1]}`,
		"rawPublish":   "-5", "publish": "0", "pubStaged": "1", "pubDenied": "1", "pubInvalid": "10", "pubAfterRefusal": "0",
		"pubBadJson": "-2", "pubBadFormat": "-5",
		"rawSensor": "-5", "sensor": "0", "sensorInvalid": "10", "sensorAfterRefusal": "0", "sensorBadJson": "-2",
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
	if len(res.Logs) != 5 || res.Logs[0].Level != "trace" || res.Logs[4].Level != "error" || res.Logs[3].Message != "level 3 s ab 7 8 ff -9 z% %q" {
		t.Errorf("logs %+v", res.Logs)
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

// TestHandlerMistakes: invalid output JSON, no outcome, failure details.
func TestHandlerMistakes(t *testing.T) {
	m := hosttest.Load(t, buildTestModule(t, "all"), runtime.LoadOptions{})
	for node, code := range map[string]string{"test.bad_output": "invalid_output", "test.bad_utf8": "invalid_output", "test.no_outcome": "no_outcome", "test.details": "quota"} {
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: node})
		if res.Outcome != abi.Failed || res.Error.Code != code {
			t.Errorf("%s: %s %+v, want failed %s", node, res.Outcome, res.Error, code)
		}
	}
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "test.details"})
	if res.Error.Message != `too "many"` || string(res.Error.Details) != `{"limit":3}` {
		t.Errorf("details: %+v", res.Error)
	}
}

// TestHTTP builds testdata/http.c, which makes the requests of
// guesttest.HTTPRequests through packrun_http_send, and checks the JSON
// each request sent (method, URL, header order, body or body_base64) and
// what each canned answer or refusal decoded to; packrun_http_send
// refuses missing arguments without calling the host.
func TestHTTP(t *testing.T) {
	wasm := buildTestModule(t, "http")
	m := hosttest.Load(t, wasm, runtime.LoadOptions{ABI: guesttest.ABI13})
	svc := guesttest.NewServices()
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "test.http", Services: svc})
	if res.Outcome != abi.Completed {
		t.Fatalf("%s %v", res.Outcome, res.Error)
	}
	guesttest.CheckHTTP(t, svc, res.Output)
	svc = guesttest.NewServices()
	hosttest.Completed(t, hosttest.Invoke(t, m, runtime.Invocation{Node: "test.http_args", Services: svc}), `true`)
	if calls := svc.CallsOf(abi.HostHTTPRequest); len(calls) != 0 {
		t.Errorf("invalid arguments were sent: %v", calls)
	}
}

// TestFetchExample checks example/fetch, the outbound HTTP example skill:
// it rebuilds byte-identically and behaves as guesttest.CheckFetchExample
// says against the http_request fake (the run through the real host and a
// loopback server comes with the host side of issue 34).
func TestFetchExample(t *testing.T) {
	cc := hosttest.Getenv("CC", "clang")
	hosttest.NeedCommand(t, cc, "C toolchain not available")
	hosttest.CheckReproducible(t, "example/fetch/fetch.wasm", "run example/build.sh, update example/fetch/pack.json and commit", func(out string) error {
		return hosttest.Run(exec.Command(cc, "--target=wasm32-wasi", "-O2", "-mexec-model=reactor", "-Wl,--strip-all", "-I.", "-o", out, "example/fetch/fetch.c", "packrun.c"))
	})
	guesttest.CheckFetchExample(t, "example/fetch")
}
