package runtime

// Benchmarks for BENCHMARKS.md. Subject: the C hello node
// (examples/hello-c/hello.wasm, typeId example.hello) with a 100-byte input,
// default limits (128 MiB memory, 30 s timeout, ...).
//
//	go test ./runtime -run '^$' -bench . -benchtime 2s -count 1

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/packrun/packrun/abi"
)

const (
	benchHelloC  = "examples/hello-c/hello.wasm"
	benchHelloGo = "examples/hello-go/hello.wasm"
	benchExtism  = "testdata/bench/hello-extism.wasm"
	benchRunID   = "r1"
	benchNode    = "example.hello"
)

// benchName pads the name so that benchInput is exactly 100 bytes.
var benchName = strings.Repeat("x", 100-len(`{"name":""}`))

var (
	benchInput  = json.RawMessage(`{"name":"` + benchName + `"}`)
	benchOutput = `{"greeting":"Hello, ` + benchName + `!"}`
)

func benchCheckInput(b *testing.B) {
	b.Helper()
	if len(benchInput) != 100 {
		b.Fatalf("input is %d bytes, want 100", len(benchInput))
	}
}

// benchLoad loads a fixture on a runtime closed at the end of the benchmark.
func benchLoad(b *testing.B, cfg Config, path string, opts LoadOptions) *Module {
	b.Helper()
	ctx := context.Background()
	r := newTestRuntime(b, cfg)
	opts.Name = path
	m, err := r.Load(ctx, fixture(b, path), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close(ctx) })
	return m
}

func benchInvoke(b *testing.B, m *Module) *Result {
	res, err := m.Invoke(context.Background(), Invocation{Input: benchInput, RunID: benchRunID})
	if err != nil {
		b.Fatal(err)
	}
	if res.Outcome != abi.Completed {
		b.Fatalf("outcome %s: %v", res.Outcome, res.Error)
	}
	return res
}

func benchCheckOutput(b *testing.B, res *Result) {
	b.Helper()
	if string(res.Output) != benchOutput {
		b.Fatalf("output %s, want %s", res.Output, benchOutput)
	}
	if len(res.Logs) != 1 {
		b.Fatalf("logs %v, want one entry", res.Logs)
	}
}

// BenchmarkWarmPackrun: one instance reused by every invocation.
func BenchmarkWarmPackrun(b *testing.B) {
	benchCheckInput(b)
	m := benchLoad(b, NewConfig(), benchHelloC, LoadOptions{ReuseInstances: true})
	benchCheckOutput(b, benchInvoke(b, m))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchInvoke(b, m)
	}
}

// BenchmarkWarmRawWazero is the floor: the export calls packrun makes in
// reuse mode, straight on one wazero instance, with close-on-context-done and
// a per-call timeout context, and a no-op openwop_log.
func BenchmarkWarmRawWazero(b *testing.B) {
	benchCheckInput(b)
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(uint32(DefaultLimits().MemoryBytes/wasmPage)))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	i32 := api.ValueTypeI32
	_, err := rt.NewHostModuleBuilder(abi.ModuleOpenwop).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}), []api.ValueType{i32, i32, i32}, nil).
		Export(abi.ImportLog).
		Instantiate(ctx)
	if err != nil {
		b.Fatal(err)
	}
	mod, err := rt.InstantiateWithConfig(ctx, fixture(b, benchHelloC), wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := mod.ExportedFunction(abi.ExportInitialize).Call(ctx); err != nil {
		b.Fatal(err)
	}
	alloc := mod.ExportedFunction(abi.ExportAlloc)
	free := mod.ExportedFunction(abi.ExportFree)
	invoke := mod.ExportedFunction(abi.ExportNodeInvoke)
	mem := mod.Memory()
	req := abi.AppendRequest(nil, &abi.Request{
		ABIVersion:  1,
		NodeContext: abi.NodeContext{RunID: benchRunID, NodeID: benchNode, TenantID: "default", Attempt: 1},
		Inputs:      benchInput,
	})
	// The same guest calls packrun makes on a reused instance: the request
	// buffer is allocated once (packrun reserves it when preparing the
	// instance), then per invocation: write the request, invoke, read the
	// response, free it.
	out, err := alloc.Call(ctx, 4096)
	if err != nil || uint32(out[0]) == 0 {
		b.Fatalf("alloc: %v", err)
	}
	reqPtr := uint32(out[0])
	var resp []byte
	call := func() {
		cctx, cancel := context.WithTimeout(ctx, DefaultLimits().Timeout)
		defer cancel()
		if !mem.Write(reqPtr, req) {
			b.Fatal("request out of bounds")
		}
		out, err := invoke.Call(cctx, 0, uint64(reqPtr), uint64(len(req)))
		if err != nil {
			b.Fatal(err)
		}
		ptr, n := abi.UnpackPtrLen(out[0])
		body, ok := mem.Read(ptr, n)
		if !ok {
			b.Fatal("response out of bounds")
		}
		resp = append(resp[:0], body...)
		if _, err := free.Call(cctx, uint64(ptr), uint64(n)); err != nil {
			b.Fatal(err)
		}
	}
	call()
	if want := `{"outcome":"completed","output":` + benchOutput + `}`; !bytes.Equal(bytes.TrimSpace(resp), []byte(want)) {
		b.Fatalf("response %s, want %s", resp, want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		call()
	}
}

// BenchmarkWarmExtism: the same hello logic as an Extism plugin, one plugin
// instance called repeatedly, with the same limits (timeout, memory pages).
func BenchmarkWarmExtism(b *testing.B) {
	benchCheckInput(b)
	ctx := context.Background()
	manifest := extism.Manifest{
		Wasm:    []extism.Wasm{extism.WasmData{Data: fixture(b, benchExtism)}},
		Timeout: uint64(DefaultLimits().Timeout.Milliseconds()),
		Memory:  &extism.ManifestMemory{MaxPages: uint32(DefaultLimits().MemoryBytes / wasmPage)},
	}
	p, err := extism.NewPlugin(ctx, manifest, extism.PluginConfig{EnableWasi: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(ctx)
	rc, out, err := p.Call("hello", benchInput)
	if err != nil || rc != 0 || string(out) != benchOutput {
		b.Fatalf("rc %d output %s err %v, want %s", rc, out, err, benchOutput)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if rc, _, err := p.Call("hello", benchInput); err != nil || rc != 0 {
			b.Fatalf("rc %d err %v", rc, err)
		}
	}
}

// BenchmarkFreshPackrun: default mode, a never-used instance per invocation
// from the prepared-instance pool (default size), sequential caller.
func BenchmarkFreshPackrun(b *testing.B) {
	benchCheckInput(b)
	m := benchLoad(b, NewConfig(), benchHelloC, LoadOptions{})
	benchCheckOutput(b, benchInvoke(b, m))
	time.Sleep(10 * time.Millisecond) // let the pool fill
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchInvoke(b, m)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inv/s")
}

// BenchmarkFreshPackrunLatency: fresh-state latency seen by a caller whose
// invocations arrive while the pool has an instance ready (the pool refills
// between invocations, outside the timer) — the case the pool is for.
// BenchmarkFreshPackrun above is the saturated case, where the caller
// outruns preparation and pays for instantiation itself.
func BenchmarkFreshPackrunLatency(b *testing.B) {
	benchCheckInput(b)
	m := benchLoad(b, NewConfig(), benchHelloC, LoadOptions{})
	benchCheckOutput(b, benchInvoke(b, m))
	// Each invocation is timed on its own (b.StopTimer would stop the world
	// to read memory statistics and disturb what is measured); ns/op
	// includes the waits, latency-ns is the figure.
	var total time.Duration
	for i := 0; i < b.N; i++ {
		for len(m.pool.ready) < cap(m.pool.ready) {
			time.Sleep(20 * time.Microsecond)
		}
		t0 := time.Now()
		benchInvoke(b, m)
		total += time.Since(t0)
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "latency-ns")
}

// BenchmarkFreshPackrunParallel: fresh-state throughput with GOMAXPROCS
// callers.
func BenchmarkFreshPackrunParallel(b *testing.B) {
	benchCheckInput(b)
	m := benchLoad(b, NewConfig(), benchHelloC, LoadOptions{})
	benchCheckOutput(b, benchInvoke(b, m))
	time.Sleep(10 * time.Millisecond)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := m.Invoke(context.Background(), Invocation{Input: benchInput, RunID: benchRunID})
			if err != nil || res.Outcome != abi.Completed {
				b.Errorf("invoke: %v", err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inv/s")
}

// BenchmarkColdStart: runtime.New + Load + first Invoke, as a one-shot
// process does (the CLI uses pool size 0). nocache starts from an empty cache
// directory; cachehit reuses a directory populated before the timer, like a
// second process.
func BenchmarkColdStart(b *testing.B) {
	benchCheckInput(b)
	for _, mod := range []struct{ name, path string }{{"c", benchHelloC}, {"go", benchHelloGo}} {
		wasm := fixture(b, mod.path)
		once := func(b *testing.B, dir string) {
			ctx := context.Background()
			r, err := New(ctx, NewConfig().WithCacheDir(dir).WithPoolSize(0))
			if err != nil {
				b.Fatal(err)
			}
			m, err := r.Load(ctx, wasm, LoadOptions{Name: mod.path})
			if err != nil {
				b.Fatal(err)
			}
			res := benchInvoke(b, m)
			b.StopTimer()
			benchCheckOutput(b, res)
			m.Close(ctx)
			r.Close(ctx)
			b.StartTimer()
		}
		b.Run(mod.name+"/nocache", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir, err := os.MkdirTemp("", "packrun-bench-cache-")
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				once(b, dir)
				b.StopTimer()
				os.RemoveAll(dir)
				b.StartTimer()
			}
		})
		b.Run(mod.name+"/cachehit", func(b *testing.B) {
			dir := b.TempDir()
			once(b, dir) // populate
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				once(b, dir)
			}
		})
	}
}

// BenchmarkPreparedInstanceMemory: Go heap held per prepared (instantiated
// and initialised, never invoked) instance, measured in batches; ns/op is the
// time to prepare one instance.
func BenchmarkPreparedInstanceMemory(b *testing.B) {
	for _, mod := range []struct{ name, path string }{{"c", benchHelloC}, {"go", benchHelloGo}} {
		b.Run(mod.name, func(b *testing.B) {
			const batch = 32
			ctx := context.Background()
			m := benchLoad(b, NewConfig().WithPoolSize(0), mod.path, LoadOptions{})
			var (
				insts                   []*instance
				ms                      goruntime.MemStats
				before                  uint64
				heapSum, linSum, capSum uint64
				count                   uint64
			)
			measure := func() uint64 {
				// Count what an instance really holds: empty the pool of
				// recycled linear memories, or instances made from it would
				// look free and the pooled buffers would count as theirs.
				// (sync.Pool lets go of its contents over two collections.)
				freeBuffers = bufferPools{}
				goruntime.GC()
				goruntime.GC()
				goruntime.ReadMemStats(&ms)
				return ms.HeapAlloc
			}
			flush := func() {
				after := measure()
				heapSum += after - min(after, before) // HeapAlloc is noisy at the margin; never wrap
				for _, inst := range insts {
					linSum += uint64(len(inst.st.mem.buf))
					capSum += uint64(cap(inst.st.mem.buf))
					inst.close()
				}
				count += uint64(len(insts))
				// Drop the closed instances: a closed wazero module still
				// references its memory, and a reused backing array would
				// keep the previous batch reachable.
				insts = nil
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if len(insts) == 0 {
					b.StopTimer()
					before = measure()
					b.StartTimer()
				}
				inst, err := m.newInstance(ctx)
				if err != nil {
					b.Fatal(err)
				}
				insts = append(insts, inst)
				if len(insts) == batch || i == b.N-1 {
					b.StopTimer()
					flush()
					b.StartTimer()
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(heapSum)/float64(count), "heapB/inst")
			b.ReportMetric(float64(linSum)/float64(count), "linearB/inst")
			b.ReportMetric(float64(capSum)/float64(count), "linearCapB/inst")
		})
	}
}

// BenchmarkFreshExtismPlugin: the same hello logic as an Extism plugin
// (testdata/bench/hello-extism.wasm) run through packrun: a fresh Extism
// plugin instance per invocation, limits on. Compare with
// BenchmarkFreshPackrun (the native C hello node).
func BenchmarkFreshExtismPlugin(b *testing.B) {
	benchCheckInput(b)
	m := benchLoad(b, NewConfig(), benchExtism, LoadOptions{})
	res, err := m.Invoke(context.Background(), Invocation{Input: benchInput})
	if err != nil || string(res.Output) != benchOutput {
		b.Fatalf("%v %+v", err, res)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Invoke(context.Background(), Invocation{Input: benchInput}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrecheck is the cost of walking a module's structure and every
// instruction of every body before compiling it (the Go hello node: 3.3 MB,
// the largest module here), beside compiling it with no cache.
func BenchmarkPrecheck(b *testing.B) {
	wasm := fixture(b, "examples/hello-go/hello.wasm")
	b.Run("precheck", func(b *testing.B) {
		b.SetBytes(int64(len(wasm)))
		for b.Loop() {
			if _, err := precheck(wasm, DefaultModuleLimits()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compile", func(b *testing.B) {
		b.SetBytes(int64(len(wasm)))
		for b.Loop() {
			r, err := New(context.Background(), NewConfig().WithPoolSize(0))
			if err != nil {
				b.Fatal(err)
			}
			e, _ := r.engineFor(context.Background(), 0)
			cm, err := r.compile(context.Background(), e, wasm)
			if err != nil {
				b.Fatal(err)
			}
			cm.Close(context.Background())
			r.Close(context.Background())
		}
	})
}
