//go:build rawwazero

// Command rawwazero is the floor BenchmarkInvokeProcess (bench_test.go at
// the module root) compares `packrun invoke` with: the least a CLI must do
// to run one node of a packrun module with wazero as a new process. It
// loads the module with a compilation cache directory, instantiates it
// with WASI and a no-op openwop_log, finds the node by its typeId through
// the openwop exports, invokes it with the same request envelope packrun
// builds (abi/doc.go) and prints the node's output. It records nothing and
// checks no signature, no manifest and no limit beyond wazero's own.
//
// It is behind the rawwazero build tag so that it is not part of the
// normal build:
//
//	go build -tags rawwazero -o rawwazero ./internal/benchcli/rawwazero
//	rawwazero MODULE.wasm CACHE_DIR TYPE_ID INPUT_JSON
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: rawwazero MODULE.wasm CACHE_DIR TYPE_ID INPUT_JSON")
		os.Exit(64)
	}
	out, err := run(os.Args[1], os.Args[2], os.Args[3], os.Args[4])
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawwazero:", err)
		os.Exit(1)
	}
	os.Stdout.Write(append(out, '\n'))
}

func run(path, cacheDir, typeID, input string) ([]byte, error) {
	ctx := context.Background()
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
	if err != nil {
		return nil, err
	}
	// The same engine settings as packrun's runtime: compiler, interrupted
	// when the context is done, 128 MiB of linear memory at most.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(cache).WithCloseOnContextDone(true).WithMemoryLimitPages(2048))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	i32 := api.ValueTypeI32
	if _, err := rt.NewHostModuleBuilder("openwop").NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}), []api.ValueType{i32, i32, i32}, nil).
		Export("openwop_log").Instantiate(ctx); err != nil {
		return nil, err
	}
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, err
	}
	mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, err
	}
	call := func(name string, args ...uint64) (uint64, error) {
		f := mod.ExportedFunction(name)
		if f == nil {
			return 0, fmt.Errorf("no export %s", name)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := f.Call(cctx, args...)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		if len(res) == 0 {
			return 0, nil
		}
		return res[0], nil
	}
	read := func(packed uint64) ([]byte, error) {
		b, ok := mod.Memory().Read(uint32(packed), uint32(packed>>32))
		if !ok {
			return nil, fmt.Errorf("buffer out of bounds")
		}
		return b, nil
	}
	if _, err := call("_initialize"); err != nil {
		return nil, err
	}
	if v, err := call("openwop_abi_version"); err != nil || v != 1 {
		return nil, fmt.Errorf("ABI version %d (%v), want 1", v, err)
	}
	n, err := call("openwop_node_count")
	if err != nil {
		return nil, err
	}
	node := -1
	for i := range int(uint32(n)) {
		pl, err := call("openwop_node_id_at", uint64(i))
		if err != nil {
			return nil, err
		}
		id, err := read(pl)
		if err != nil {
			return nil, err
		}
		if string(id) == typeID {
			node = i
			break
		}
	}
	if node < 0 {
		return nil, fmt.Errorf("no node %s", typeID)
	}
	if !json.Valid([]byte(input)) {
		return nil, fmt.Errorf("input is not valid JSON")
	}
	ids, _ := json.Marshal(typeID)
	req := []byte(`{"abiVersion":1,"nodeContext":{"runId":"r1","nodeId":` + string(ids) +
		`,"tenantId":"default","attempt":1},"inputs":` + input + `}`)
	ptr, err := call("openwop_alloc", uint64(len(req)))
	if err != nil || uint32(ptr) == 0 {
		return nil, fmt.Errorf("openwop_alloc: %v", err)
	}
	if !mod.Memory().Write(uint32(ptr), req) {
		return nil, fmt.Errorf("request out of bounds")
	}
	pl, err := call("openwop_node_invoke", uint64(node), uint64(uint32(ptr)), uint64(len(req)))
	if err != nil {
		return nil, err
	}
	body, err := read(pl)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Outcome string          `json:"outcome"`
		Output  json.RawMessage `json:"output"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("response: %w", err)
	}
	if resp.Outcome != "completed" {
		return nil, fmt.Errorf("outcome %s: %s", resp.Outcome, resp.Error)
	}
	return resp.Output, nil
}
