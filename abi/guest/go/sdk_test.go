// Package gosdk_test checks the Go guest SDK (./packrun): the committed
// example builds reproducibly from source, and the packs it produces run
// under the packrun runtime with every host service.
package gosdk_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/abi/guest/go/packrun"
	"github.com/packrun/packrun/internal/testing/guesttest"
	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/runtime"
)

const exampleWasm = "example/counter.wasm"

// build returns a build of the pack in dir exactly like build.sh.
func build(dir string) func(out string) error {
	return func(out string) error {
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-buildmode=c-shared", "-o", out, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		return hosttest.Run(cmd)
	}
}

func TestExampleIsReproducible(t *testing.T) {
	t.Parallel()
	rebuilt, committed := hosttest.Rebuild(t, exampleWasm, build("example"))
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

// newServices serves every host call; config has greeting "hi".
func newServices() *hosttest.Services {
	return hosttest.NewServices(hosttest.WithConfig("greeting", `"hi"`))
}

func TestExample(t *testing.T) {
	m := hosttest.LoadFile(t, exampleWasm, runtime.LoadOptions{Name: exampleWasm})
	info := m.Info()
	if info.PackName != "local.counter.go" || strings.Join(info.Nodes, ",") != "example.counter,example.fail,example.suspend,example.approve" || info.ABIVersion != 1 {
		t.Fatalf("info %+v", info)
	}
	// The SDK has Context.SensorEmit (ABI 1.1) and Context.MessagePublish
	// (ABI 1.2); the linker drops their imports from a module that does not
	// call them, so its pack may declare ABI 1.0.
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
		puts := svc.CallsOf(abi.HostMemoryPut)
		if len(puts) != 3 {
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
		if gets := svc.CallsOf(abi.HostMemoryGet); len(gets) != 3 || gets[0].Value("key") != "a" {
			t.Errorf("memory_get calls %v", gets)
		}
	})

	t.Run("input that does not decode", func(t *testing.T) {
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":5}`), Services: newServices()})
		if res.Outcome != abi.Failed || res.Error.Code != "invalid_input" {
			t.Fatalf("%s %v", res.Outcome, res.Error)
		}
	})

	t.Run("host call refused", func(t *testing.T) {
		// Without services nothing is granted: the handler's error is the
		// *StatusError of memory_get.
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter"})
		if res.Outcome != abi.Failed || res.Error.Code != "host_call_failed" || !hosttest.JSONEqual(res.Error.Details, `{"function":"packrun:host/v1.memory_get","status":1}`) {
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
		for i := 1; i <= 200; i++ {
			res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.counter", Input: json.RawMessage(`{"key":"r"}`), Services: svc})
			if res.Outcome != abi.Completed {
				t.Fatalf("invocation %d: %s %v", i, res.Outcome, res.Error)
			}
		}
		if v, _ := svc.Memory("counters", "r"); string(v) != "200" {
			t.Fatalf("count %s", v)
		}
	})
}

// TestServices builds testdata/services, which calls every host function
// through the SDK, and checks what each call sent and got.
func TestServices(t *testing.T) {
	t.Parallel()
	wasm := hosttest.Build(t, "services.wasm", build("testdata/services"))
	guesttest.CheckNeedsABI12(t, wasm) // it calls SensorEmit and MessagePublish
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
	if r, _ := out["random"].(string); len(r) != 16 || out["randomErr"] != nil {
		t.Errorf("random %v %v", out["random"], out["randomErr"])
	}
	if p, ok := out["published"].(map[string]any); !ok {
		t.Errorf("published %v", out["published"])
	} else {
		id, _ := json.Marshal(p["message_id"])
		hash, _ := json.Marshal(p["hash"])
		staged, _ := json.Marshal(p["staged"])
		guesttest.CheckStaged(t, svc, string(id), string(hash), string(staged))
	}
	delete(out, "now")
	delete(out, "random")
	if em, ok := out["emitted"].(map[string]any); !ok {
		t.Errorf("emitted %v", out["emitted"])
	} else {
		id, _ := json.Marshal(em["event_id"])
		staged, _ := json.Marshal(em["staged"])
		guesttest.CheckSensorStaged(t, svc, string(id), string(staged))
	}
	delete(out, "published")
	delete(out, "emitted")
	want := `{"randomErr":null,
		"unsetVar":true,"setVar":null,"var":{"n":1},"varErr":null,
		"write1":null,"write2":null,"channel":[1,"two"],"channelErr":null,
		"put1":null,"put2":null,"keys":["k1","k2"],"keysErr":null,"delete":null,"deleted":true,
		"staged":1,"stagedErr":null,
		"adapter":{"output":{"x":1},"exit_status":"ok","exit_code":0},"adapterErr":null,
		"evidence":null,
		"artifact":{"artifact_id":"art-a.txt","sha256":"00"},"artifactErr":null,
		"artifact2":{"artifact_id":"art-b.bin","sha256":"00"},"artifact2Err":null,
		"config":"hi","configErr":null,"configMissing":true,"configMissingFunc":"packrun:host/v1.config_get",
		"publishedErr":null,"pubDenied":"packrun:host/v1.message_publish: access_denied","pubDeniedStatus":1,
		"pubInvalid":"packrun:host/v1.message_publish: validation_error",
		"emittedErr":null,"sensorInvalid":"packrun:host/v1.sensor_emit: validation_error","sensorInvalidStatus":10}`
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

	for _, c := range []struct{ node, code, msg string }{
		{"test.panic", "panic", "boom"},
		{"test.error", "node_error", "plain error"},
		{"test.unhandled", "host_call_failed", "packrun:host/v1.config_get: not_found"},
	} {
		res := hosttest.Invoke(t, m, runtime.Invocation{Node: c.node, Services: svc})
		if res.Outcome != abi.Failed || res.Error.Code != c.code || res.Error.Message != c.msg {
			t.Errorf("%s: %s %+v", c.node, res.Outcome, res.Error)
		}
	}
	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "test.raw", Input: json.RawMessage(` [1, 2] `), RunID: "r<&>", TenantID: "t"})
	hosttest.Completed(t, res, `{"raw":true,"in":[1,2],"run":"r<&>","tenant":"t"}`)
	// Host buffers larger than the request reserve and than a page.
	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "test.big", Input: json.RawMessage(`{"n":300000}`), Services: svc})
	hosttest.Completed(t, res, `300000`)
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

// TestHTTP builds testdata/http, which makes the requests of
// guesttest.HTTPRequests through Context.HTTPRequest, and checks the JSON
// each request sent (method, URL, header order, body or body_base64) and
// what each canned answer or refusal decoded to.
func TestHTTP(t *testing.T) {
	t.Parallel()
	wasm := hosttest.Build(t, "http.wasm", build("testdata/http"))
	m := hosttest.Load(t, wasm, runtime.LoadOptions{ABI: guesttest.ABI13})
	svc := guesttest.NewServices()
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "test.http", Services: svc})
	if res.Outcome != abi.Completed {
		t.Fatalf("%s %v", res.Outcome, res.Error)
	}
	guesttest.CheckHTTP(t, svc, res.Output)
}

// TestFetchExample checks fetch/, the outbound HTTP example skill, against
// the http_request fake (the run through the real host and a loopback
// server comes with the host side of issue 34).
func TestFetchExample(t *testing.T) {
	t.Parallel()
	rebuilt, committed := hosttest.Rebuild(t, "fetch/fetch.wasm", build("fetch"))
	if !bytes.Equal(rebuilt, committed) {
		t.Errorf("fetch/fetch.wasm is stale: rebuilding it from source gives different bytes; run ./build.sh and update pack.json")
	}
	guesttest.CheckFetchExample(t, "fetch")
}
