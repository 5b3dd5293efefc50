// Package assdk_test checks the AssemblyScript guest SDK (./assembly): the
// committed example builds reproducibly from source (when the pinned
// compiler is installed: `npm ci` in this directory), and the packs run under
// the packrun runtime with every host service.
package assdk_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/internal/testing/guesttest"
	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/runtime"
)

const exampleWasm = "example/counter.wasm"

// asc returns a build of entry exactly like build.sh; it skips the test
// when the compiler is not installed.
func asc(t *testing.T, entry string) func(out string) error {
	return func(out string) error {
		if _, err := os.Stat("node_modules/.bin/asc"); err != nil {
			t.Skip("node_modules/.bin/asc is missing: run `npm ci` in abi/guest/assemblyscript to build AssemblyScript")
		}
		if _, err := exec.LookPath("node"); err != nil {
			t.Skip("node is not installed: cannot run the AssemblyScript compiler")
		}
		return hosttest.Run(exec.Command("node_modules/.bin/asc", entry, "-O3", "--use", "abort=", "-o", out))
	}
}

func TestExampleIsReproducible(t *testing.T) {
	t.Parallel()
	hosttest.CheckReproducible(t, exampleWasm, "run ./build.sh", asc(t, "example/counter.ts"))
}

// newServices serves every host call; config has greeting "hi".
func newServices() *hosttest.Services {
	return hosttest.NewServices(hosttest.WithConfig("greeting", `"hi"`))
}

func TestExample(t *testing.T) {
	m := hosttest.LoadFile(t, exampleWasm, runtime.LoadOptions{Name: exampleWasm})
	info := m.Info()
	if info.PackName != "local.counter.as" || strings.Join(info.Nodes, ",") != "example.counter,example.fail,example.suspend,example.approve" || info.ABIVersion != 1 {
		t.Fatalf("info %+v", info)
	}
	for _, imp := range info.Imports {
		if strings.HasPrefix(imp, "env.") || strings.HasPrefix(imp, abi.ModuleWASI+".") {
			t.Errorf("unexpected import %s", imp)
		}
	}
	// The SDK has Context.sensorEmit (ABI 1.1) and Context.messagePublish
	// (ABI 1.2); the compiler leaves out their imports from a module that
	// does not call them, so its pack may declare ABI 1.0.
	guesttest.CheckNoImport(t, exampleWasm)

	t.Run("counter", func(t *testing.T) {
		svc := newServices()
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"a"}`), Services: svc})
		hosttest.Completed(t, res, `{"key":"a","count":1}`)
		if !hosttest.HasLog(res, "info", "counter a = 1") {
			t.Errorf("logs %+v", res.Logs)
		}
		res = hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"a","by":5}`), Services: svc})
		hosttest.Completed(t, res, `{"key":"a","count":6}`)
		hosttest.Completed(t, hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Services: svc}), `{"key":"default","count":1}`)
		hosttest.Completed(t, hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"Ünï\"cødé😀"}`), Services: svc}), `{"key":"Ünï\"cødé😀","count":1}`)
		puts := svc.CallsOf(abi.HostMemoryPut)
		if len(puts) != 4 {
			t.Fatalf("memory_put calls %v", puts)
		}
		for _, p := range puts {
			if p.Value("namespace") != "counters" || p.Value("ttlSeconds") != 86400.0 {
				t.Errorf("memory_put %v: want namespace counters and ttlSeconds 86400", p)
			}
		}
		if v, _ := svc.Memory("counters", "a"); string(v) != "6" {
			t.Errorf("stored %s", v)
		}
		if gets := svc.CallsOf(abi.HostMemoryGet); len(gets) != 4 || gets[0].Value("key") != "a" {
			t.Errorf("memory_get calls %v", gets)
		}
	})

	t.Run("input that is not an object", func(t *testing.T) {
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`[1]`), Services: newServices()})
		if res.Outcome != abi.Failed || res.Error.Code != "invalid_input" {
			t.Fatalf("%s %v", res.Outcome, res.Error)
		}
	})

	t.Run("host call refused", func(t *testing.T) {
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter"})
		if res.Outcome != abi.Failed || res.Error.Code != "host_call_failed" || res.Error.Message != "packrun:host/v1.memory_get: access_denied" ||
			!hosttest.JSONEqual(res.Error.Details, `{"function":"packrun:host/v1.memory_get","status":1}`) {
			t.Fatalf("%s %+v %s", res.Outcome, res.Error, res.Error.Details)
		}
	})

	t.Run("fail", func(t *testing.T) {
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.fail", Input: json.RawMessage(`{"x":1}`)})
		if res.Outcome != abi.Failed || res.Error.Code != "not_allowed" || res.Error.Message != "this node always fails" || !hosttest.JSONEqual(res.Error.Details, `{"input":{"x":1}}`) {
			t.Fatalf("%s %+v", res.Outcome, res.Error)
		}
		if !hosttest.HasLog(res, "warn", "about to fail") {
			t.Errorf("logs %+v", res.Logs)
		}
	})

	t.Run("suspend", func(t *testing.T) {
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.suspend"})
		if res.Outcome != abi.Suspended || string(res.Interrupt) != `{"question":"approve?"}` {
			t.Fatalf("%s %s %v", res.Outcome, res.Interrupt, res.Error)
		}
	})

	t.Run("interrupt and resume", func(t *testing.T) {
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.approve"})
		if res.Outcome != abi.Suspended || string(res.Interrupt) != `{"question":"approve?"}` {
			t.Fatalf("%s %s %v", res.Outcome, res.Interrupt, res.Error)
		}
		res = hosttest.Invoke(t, m, runtime.Invocation{Node: "example.approve", Resume: []json.RawMessage{json.RawMessage(`true`)}})
		hosttest.Completed(t, res, `{"approved":true}`)
	})

	t.Run("reused instance", func(t *testing.T) {
		// With reuse the host frees every response through openwop_free
		// and keeps its request buffer: many invocations on one instance.
		m := hosttest.LoadFile(t, exampleWasm, runtime.LoadOptions{ReuseInstances: true})
		svc := newServices()
		for i := 1; i <= 500; i++ {
			res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"r"}`), Services: svc})
			if res.Outcome != abi.Completed {
				t.Fatalf("invocation %d: %s %v", i, res.Outcome, res.Error)
			}
		}
		if v, _ := svc.Memory("counters", "r"); string(v) != "500" {
			t.Fatalf("count %s", v)
		}
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"r"}`), Services: svc})
		if res.MemoryBytes > 1<<20 {
			t.Errorf("memory grew to %d bytes over 500 invocations", res.MemoryBytes)
		}
	})
}

// TestServices builds testdata/services.ts, which calls every host function
// through the SDK, and checks what each call sent and got.
func TestServices(t *testing.T) {
	t.Parallel()
	wasm := hosttest.Build(t, "services.wasm", asc(t, "testdata/services.ts"))
	guesttest.CheckNeedsABI12(t, wasm) // it calls sensorEmit and messagePublish
	m := hosttest.Load(t, wasm, runtime.LoadOptions{ABI: guesttest.ABI12})
	svc := guesttest.NewServices(hosttest.WithConfig("greeting", `"hi"`))
	state := runtime.NewMemoryRunState()
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "test.services", RunID: "run-1", Services: svc, State: state})
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
	if p, ok := out["published"].(map[string]any); !ok || p["status"] != 0.0 {
		t.Errorf("published %v", out["published"])
	} else {
		j, _ := p["json"].(map[string]any)
		id, _ := json.Marshal(j["message_id"])
		hash, _ := json.Marshal(j["hash"])
		staged, _ := json.Marshal(j["staged"])
		guesttest.CheckStaged(t, svc, string(id), string(hash), string(staged))
		if j["status"] != "staged" {
			t.Errorf("published %v: status is not staged", j)
		}
	}
	if e, ok := out["emitted"].(map[string]any); !ok || e["status"] != 0.0 {
		t.Errorf("emitted %v", out["emitted"])
	} else {
		j, _ := e["json"].(map[string]any)
		id, _ := json.Marshal(j["event_id"])
		staged, _ := json.Marshal(j["staged"])
		guesttest.CheckSensorStaged(t, svc, string(id), string(staged))
		if j["status"] != "staged" {
			t.Errorf("emitted %v: status is not staged", j)
		}
	}
	delete(out, "now")
	delete(out, "published")
	delete(out, "emitted")
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
		"configMissingText":"packrun:host/v1.config_get: not_found",
		"pubDenied":{"status":1,"json":null},"pubDeniedText":"packrun:host/v1.message_publish: access_denied",
		"pubInvalid":{"status":10,"json":null},
		"sensorInvalid":{"status":10,"json":null},"sensorInvalidText":"packrun:host/v1.sensor_emit: validation_error"}`
	if b, _ := json.Marshal(out); !hosttest.JSONEqual(b, want) {
		t.Errorf("output %s\nwant   %s", b, want)
	}
	if !hosttest.HasLog(res, "debug", "debug line") {
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
		calls := svc.CallsOf(fn)
		if len(calls) == 0 {
			t.Errorf("no %s call", fn)
			continue
		}
		if b := calls[0].Raw; !hosttest.JSONEqual(b, want) {
			t.Errorf("%s request %s, want %s", fn, b, want)
		}
	}
	guesttest.CheckRequests(t, svc)
	guesttest.CheckSensorRequests(t, svc)
	if b := svc.CallsOf(abi.HostArtifactPut)[1].Raw; !hosttest.JSONEqual(b, `{"role":"log","name":"b.bin","content_type":"application/octet-stream","base64":"AAEC"}`) {
		t.Errorf("artifact_put (binary) %s", b)
	}

	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "test.raw", Input: json.RawMessage(` [1, {"a" : "é"}] `), RunID: "r<&>\"", TenantID: "t", Attempt: 3})
	hosttest.Completed(t, res, `{"raw":true,"in":[1,{"a":"é"}],"run":"r<&>\"","tenant":"t","attempt":3,"node":"test.raw","type":"test.raw"}`)
	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "test.badoutput"})
	if res.Outcome != abi.Failed || res.Error.Code != "invalid_output" {
		t.Errorf("bad output: %s %+v", res.Outcome, res.Error)
	}
	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "test.trap"})
	if res.Outcome != abi.Failed || res.Error.Code != abi.CodeTrap {
		t.Errorf("throw: %s %+v", res.Outcome, res.Error)
	}
	// Host buffers larger than the request reserve and than a page.
	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "test.big", Input: json.RawMessage(`{"n":300000}`), Services: svc})
	hosttest.Completed(t, res, `300000`)
	// The JSON helpers: escapes, surrogate pairs, lone surrogates, control
	// characters, big integers, fractions.
	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "test.json", Input: json.RawMessage(
		`{"strings":["plain","q\"b\\s/\u0001\n\t","😀\ud83d\ude00","lone \ud800 x","\u00e9é"],"big":9007199254740993,"half":0.5}`)})
	hosttest.Completed(t, res, `{"strings":["plain","q\"b\\s/\u0001\n\t","😀😀","lone \ud800 x","éé"],"big":9007199254740993,"half":0.5,"nan":null,"invalid":true}`)
}

// TestHTTP builds testdata/http.ts, which makes the requests of
// guesttest.HTTPRequests through Context.httpRequest, and checks the JSON
// each request sent (method, URL, header order, body or body_base64) and
// what each canned answer or refusal decoded to; responses that do not
// decode are Status.HostError.
func TestHTTP(t *testing.T) {
	t.Parallel()
	wasm := hosttest.Build(t, "http.wasm", asc(t, "testdata/http.ts"))
	m := hosttest.Load(t, wasm, runtime.LoadOptions{ABI: guesttest.ABI13})
	svc := guesttest.NewServices()
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "test.http", Services: svc})
	if res.Outcome != abi.Completed {
		t.Fatalf("%s %v", res.Outcome, res.Error)
	}
	guesttest.CheckHTTP(t, svc, res.Output)
	hosttest.Completed(t, hosttest.Invoke(t, m, runtime.Invocation{Node: "test.http_decode"}), `[99,99,99,99,99,99,99,500,2,1,"1"]`)
}

// TestFetchExample checks example/fetch.ts, the outbound HTTP example
// skill: it rebuilds byte-identically and behaves as
// guesttest.CheckFetchExample says against the http_request fake.
func TestFetchExample(t *testing.T) {
	t.Parallel()
	hosttest.CheckReproducible(t, "example/fetch/fetch.wasm", "run ./build.sh, update example/fetch/pack.json", asc(t, "example/fetch.ts"))
	guesttest.CheckFetchExample(t, "example/fetch")
}
