package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
)

func loadProbe(t testing.TB, r *Runtime, opts LoadOptions) *Module {
	t.Helper()
	m, err := r.Load(context.Background(), fixture(t, "testdata/modules/probe.wasm"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func mustInvoke(t testing.TB, m *Module, inv Invocation) *Result {
	t.Helper()
	res, err := m.Invoke(context.Background(), inv)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func outputOf(t testing.TB, res *Result) map[string]any {
	t.Helper()
	if res.Outcome != abi.Completed {
		t.Fatalf("outcome %s error %v", res.Outcome, res.Error)
	}
	var v map[string]any
	if err := json.Unmarshal(res.Output, &v); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	return v
}

func TestRandomIsSeededByRunNodeAttempt(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m := loadProbe(t, r, LoadOptions{})
	draw := func(run, node string, attempt int) string {
		v := outputOf(t, mustInvoke(t, m, Invocation{Node: "probe.random", RunID: run, NodeID: node, Attempt: attempt}))
		if v["status"] != 0.0 {
			t.Fatalf("status %v", v["status"])
		}
		return v["random"].(string)
	}
	a := draw("run-1", "n", 1)
	if b := draw("run-1", "n", 1); a != b {
		t.Fatalf("same triple gave %s and %s", a, b)
	}
	for _, other := range []string{draw("run-2", "n", 1), draw("run-1", "m", 1), draw("run-1", "n", 2)} {
		if other == a {
			t.Fatalf("different triple gave the same bytes %s", a)
		}
	}
}

func TestClockComesFromHost(t *testing.T) {
	fixed := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	r := newTestRuntime(t, NewConfig().WithClock(func() time.Time { return fixed }))
	m := loadProbe(t, r, LoadOptions{})
	if v := outputOf(t, mustInvoke(t, m, Invocation{Node: "probe.now"})); v["nowMs"] != float64(fixed.UnixMilli()) {
		t.Fatalf("now_ms = %v, want %d", v["nowMs"], fixed.UnixMilli())
	}
	if v := outputOf(t, mustInvoke(t, m, Invocation{Node: "probe.wasi"})); v["sec"] != float64(fixed.Unix()) {
		t.Fatalf("WASI clock = %v, want %d", v["sec"], fixed.Unix())
	}
}

func TestVariablesAndChannels(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m := loadProbe(t, r, LoadOptions{})
	state := NewMemoryRunState()
	res := mustInvoke(t, m, Invocation{Node: "probe.state", State: state})
	want := `{"unsetLen":0,"set":0,"badSet":10,"k":{"v":42},"c":[1,"two"]}`
	if string(res.Output) != want {
		t.Fatalf("output %s, want %s", res.Output, want)
	}
	if v, ok := state.Variable("k"); !ok || string(v) != `{"v":42}` {
		t.Fatalf("run state variable k = %s %v", v, ok)
	}
	// The run state is shared by invocations of the same run.
	res = mustInvoke(t, m, Invocation{Node: "probe.state", State: state})
	if !strings.Contains(string(res.Output), `"c":[1,"two",1,"two"]`) {
		t.Fatalf("second invocation of the run: %s", res.Output)
	}
}

func TestWASIShim(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m := loadProbe(t, r, LoadOptions{})
	res := mustInvoke(t, m, Invocation{Node: "probe.wasi"})
	v := outputOf(t, res)
	if v["env"] != false || v["file"] != false {
		t.Fatalf("module saw environment or filesystem: %v", v)
	}
	if string(res.Stdout) != "to stdout\n" || string(res.Stderr) != "to stderr\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	// WASI random comes from the same seeded stream.
	again := outputOf(t, mustInvoke(t, m, Invocation{Node: "probe.wasi"}))
	if again["rand"] != v["rand"] {
		t.Fatalf("WASI random differs for the same (run, node, attempt): %v vs %v", again["rand"], v["rand"])
	}
}

func TestLogLevels(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m := loadProbe(t, r, LoadOptions{})
	res := mustInvoke(t, m, Invocation{Node: "probe.log"})
	var got []string
	for _, l := range res.Logs {
		got = append(got, l.Level+":"+l.Message)
	}
	want := "trace:level 0,debug:level 1,info:level 2,warn:level 3,error:level 4"
	if strings.Join(got, ",") != want {
		t.Fatalf("logs %v", got)
	}
}

func TestRequestEnvelope(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m := loadProbe(t, r, LoadOptions{})
	res := mustInvoke(t, m, Invocation{Node: "probe.echo", Input: json.RawMessage(`{"x":1}`), RunID: "r", TenantID: "t", Attempt: 3})
	want := `{"abiVersion":1,"nodeContext":{"runId":"r","nodeId":"probe.echo","tenantId":"t","attempt":3},"inputs":{"x":1}}`
	if string(res.Output) != want {
		t.Fatalf("envelope %s\nwant %s", res.Output, want)
	}
}

func TestSuspendAndResume(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	for _, name := range []string{"interrupt", "hostcalls_multivalue"} {
		t.Run(name, func(t *testing.T) {
			m, err := r.Load(context.Background(), fixture(t, "testdata/hostile/"+name+".wasm"), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			res := mustInvoke(t, m, Invocation{})
			if res.Outcome != abi.Suspended || string(res.Interrupt) != `{"question":"approve?"}` {
				t.Fatalf("first call: %s %s %v", res.Outcome, res.Interrupt, res.Error)
			}
			res = mustInvoke(t, m, Invocation{Resume: []json.RawMessage{json.RawMessage(`{"approved":true}`)}})
			if res.Outcome != abi.Completed || !strings.Contains(string(res.Output), `"resumed":{"approved":true}`) {
				t.Fatalf("resumed: %s %s %v", res.Outcome, res.Output, res.Error)
			}
		})
	}
	// Two interrupts: each resume value answers one call, in order.
	m := loadProbe(t, r, LoadOptions{})
	res := mustInvoke(t, m, Invocation{Node: "probe.interrupt2", Resume: []json.RawMessage{json.RawMessage(`"first"`)}})
	if res.Outcome != abi.Suspended || string(res.Interrupt) != `{"step":2}` {
		t.Fatalf("one resume value: %s %s", res.Outcome, res.Interrupt)
	}
	res = mustInvoke(t, m, Invocation{Node: "probe.interrupt2", Resume: []json.RawMessage{json.RawMessage(`"first"`), json.RawMessage(`2`)}})
	if string(res.Output) != `{"a":"first","b":2}` {
		t.Fatalf("two resume values: %s %s", res.Outcome, res.Output)
	}
}

func TestFreshStatePerInvocation(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	fresh := loadProbe(t, r, LoadOptions{})
	for i := 0; i < 5; i++ {
		if v := outputOf(t, mustInvoke(t, fresh, Invocation{Node: "probe.counter"})); v["count"] != 1.0 {
			t.Fatalf("invocation %d saw count %v: state leaked between invocations", i, v["count"])
		}
	}
	reuse := loadProbe(t, r, LoadOptions{ReuseInstances: true})
	var last float64
	for i := 0; i < 5; i++ {
		last = outputOf(t, mustInvoke(t, reuse, Invocation{Node: "probe.counter"}))["count"].(float64)
	}
	if last != 5 {
		t.Fatalf("reuse opt-in: count %v after 5 invocations, want 5", last)
	}
}

func TestConcurrentInvocations(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m := loadProbe(t, r, LoadOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				res, err := m.Invoke(context.Background(), Invocation{Node: "probe.counter"})
				if err != nil {
					errs <- err
					return
				}
				if string(res.Output) != `{"count":1}` {
					errs <- fmt.Errorf("goroutine %d call %d: %s", g, i, res.Output)
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestInvokeErrors(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m := loadProbe(t, r, LoadOptions{})
	if _, err := m.Invoke(context.Background(), Invocation{}); err == nil || !strings.Contains(err.Error(), "11 nodes") {
		t.Fatalf("no typeId on a multi-node module: %v", err)
	}
	if _, err := m.Invoke(context.Background(), Invocation{Node: "nope"}); err == nil || !strings.Contains(err.Error(), `"nope" is not a node of local.probe`) {
		t.Fatalf("unknown node: %v", err)
	}
	if _, err := m.Invoke(context.Background(), Invocation{Node: "probe.echo", Input: json.RawMessage(`{`)}); err == nil {
		t.Fatal("invalid input JSON accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Invoke(ctx, Invocation{Node: "probe.echo"}); err == nil {
		t.Fatal("cancelled context: no error")
	}
	m.Close(context.Background())
	if _, err := m.Invoke(context.Background(), Invocation{Node: "probe.echo"}); err == nil {
		t.Fatal("closed module: no error")
	}
}

func TestModuleInfo(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m := loadProbe(t, r, LoadOptions{Limits: Limits{MemoryBytes: 8 << 40}})
	info := m.Info()
	if info.PackName != "local.probe" || len(info.Nodes) != 11 || info.ABIVersion != 1 || !info.Reactor {
		t.Fatalf("info %+v", info)
	}
	if info.Limits.MemoryBytes != MaxLimits().MemoryBytes {
		t.Fatalf("memory limit %d not clamped to the host maximum", info.Limits.MemoryBytes)
	}
	mv, err := r.Load(context.Background(), fixture(t, "testdata/hostile/hostcalls_multivalue.wasm"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer mv.Close(context.Background())
	if mv.Info().Encoding[abi.ExportNodeInvoke] != "multi-value" || m.Info().Encoding[abi.ExportNodeInvoke] != "packed-i64" {
		t.Fatalf("encodings %v / %v", mv.Info().Encoding, m.Info().Encoding)
	}
}

// fakeServices answers packrun:host/v1 from a map, like a host would.
type fakeServices struct {
	mem   map[string]json.RawMessage
	calls []string
}

func (f *fakeServices) Serve(_ context.Context, fn string, req []byte) (abi.Status, []byte) {
	f.calls = append(f.calls, fn)
	var r struct {
		Namespace, Key string
		Value          json.RawMessage
		Input          json.RawMessage
	}
	if err := json.Unmarshal(req, &r); err != nil {
		return abi.StatusValidation, nil
	}
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
	case abi.HostAdapterInvoke:
		return abi.StatusOK, []byte(`{"output":` + string(r.Input) + `,"exit_status":"ok"}`)
	}
	return abi.StatusNotFound, nil
}

func TestHostV1Services(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m := loadProbe(t, r, LoadOptions{})
	svc := &fakeServices{mem: map[string]json.RawMessage{}}
	res := mustInvoke(t, m, Invocation{Node: "probe.host", Services: svc})
	want := `{"put":0,"get":0,"got":{"value":{"n":1}},"adapter":0,"adapterOut":{"output":"hi","exit_status":"ok"},"config":11,"configLen":0}`
	if string(res.Output) != want {
		t.Fatalf("output %s\nwant   %s", res.Output, want)
	}
	var fns []string
	for _, c := range res.Trace {
		fns = append(fns, c.Fn)
	}
	if got := strings.Join(fns, ","); got != "packrun:host/v1.memory_put,packrun:host/v1.memory_get,packrun:host/v1.adapter_invoke,packrun:host/v1.config_get" {
		t.Fatalf("trace %s", got)
	}
	if string(res.Trace[1].Result) != `{"value":{"n":1}}` || res.Trace[3].Status != int32(abi.StatusNotFound) {
		t.Fatalf("trace entries %+v", res.Trace)
	}
	// Without services nothing is granted.
	res = mustInvoke(t, m, Invocation{Node: "probe.host"})
	if !strings.Contains(string(res.Output), `"put":1,"get":1`) {
		t.Fatalf("no services: %s", res.Output)
	}
}

// keptServices remembers the responses it returned.
type keptServices struct {
	fakeServices
	returned map[string][]byte
}

func (k *keptServices) Serve(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	s, resp := k.fakeServices.Serve(ctx, fn, req)
	k.returned[fn] = resp
	return s, resp
}

// The runtime owns a Services response once Serve returns: the trace keeps
// that slice (no copy per host call), with the same bytes.
func TestHostV1TraceKeepsTheServeResponse(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m := loadProbe(t, r, LoadOptions{})
	svc := &keptServices{fakeServices: fakeServices{mem: map[string]json.RawMessage{}}, returned: map[string][]byte{}}
	res := mustInvoke(t, m, Invocation{Node: "probe.host", Services: svc})
	got, sent := res.Trace[1].Result, svc.returned[abi.HostMemoryGet]
	if string(got) != `{"value":{"n":1}}` || len(sent) == 0 || &got[0] != &sent[0] {
		t.Fatalf("trace result %q is not the response Serve returned (%q)", got, sent)
	}
}

func TestTraceRecordsEveryInput(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m := loadProbe(t, r, LoadOptions{})
	res := mustInvoke(t, m, Invocation{Node: "probe.wasi", RunID: "r"})
	var fns []string
	for _, c := range res.Trace {
		fns = append(fns, c.Fn)
	}
	got := strings.Join(fns, ",")
	for _, want := range []string{"wasi.stdout", "wasi.stderr", "wasi.walltime", "wasi.random"} {
		if !strings.Contains(got, want) {
			t.Fatalf("trace %s lacks %s", got, want)
		}
	}
	res = mustInvoke(t, m, Invocation{Node: "probe.random", RunID: "r"})
	if len(res.Trace) != 1 || res.Trace[0].Fn != "openwop.openwop_random" || len(res.Trace[0].Result) != 16 {
		t.Fatalf("random trace %+v", res.Trace)
	}
}

// TestRandomAsRFC0008Declares loads a module importing openwop_random with
// no result (RFC 0008 §C): it is served, seeded per (run, node, attempt)
// with attempts 0 and 1 distinct, replayed from the trace, and a buffer it
// cannot have stops the guest since there is no status to return.
func TestRandomAsRFC0008Declares(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	m, err := r.Load(context.Background(), fixture(t, "testdata/hostile/random_rfc.wasm"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	draw := func(attempt int) *Result {
		res := mustInvoke(t, m, Invocation{Node: "rfc.random", RunID: "run-1", NodeID: "n", Attempt: attempt, AttemptGiven: true})
		if res.Outcome != abi.Completed || len(res.Output) != 34 {
			t.Fatalf("attempt %d: %s %s %v", attempt, res.Outcome, res.Output, res.Error)
		}
		return res
	}
	a0, a1 := draw(0), draw(1)
	if string(a0.Output) == string(a1.Output) {
		t.Fatalf("attempts 0 and 1 drew the same bytes %s", a0.Output)
	}
	if again := draw(0); string(again.Output) != string(a0.Output) {
		t.Fatalf("attempt 0 drew %s then %s", a0.Output, again.Output)
	}
	// Replay serves the recorded bytes, whatever the seed.
	rep := mustInvoke(t, m, Invocation{Node: "rfc.random", RunID: "other", NodeID: "n", Attempt: 7, Replay: &Replay{Calls: a0.Trace}})
	if string(rep.Output) != string(a0.Output) {
		t.Fatalf("replay gave %s, recorded %s", rep.Output, a0.Output)
	}
	res := mustInvoke(t, m, Invocation{Node: "rfc.random_oob", RunID: "run-1"})
	if res.Outcome != abi.Failed || res.Error == nil || res.Error.Code != abi.CodeHostCallBounds {
		t.Fatalf("out of bounds: %s %+v", res.Outcome, res.Error)
	}
}
