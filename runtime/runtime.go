package runtime

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"sort"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/packrun/packrun/abi"
)

// Runtime compiles and runs node-pack modules. It is safe for concurrent use.
// Close it to release compiled code and instances.
type Runtime struct {
	cfg    Config
	cache  wazero.CompilationCache
	engine string

	mu      sync.Mutex
	engines map[variant]*engine
	modules map[*Module]struct{}
	closed  bool

	// compiling holds a mutex per module digest: see lockCompile.
	compiling sync.Map
}

// lockCompile serialises the compilations of one module's bytes. wazero
// publishes a module it reads from its file cache to its other compiles
// before it has finished preparing it (its entry preambles), so a second
// compile of the same bytes at that moment returns a module whose first
// instantiation panics. Compiles of different modules still run at once.
func (r *Runtime) lockCompile(digest [32]byte) (unlock func()) {
	mu, _ := r.compiling.LoadOrStore(digest, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

// variant selects the encoding of the host's (ptr,len)-returning openwop
// imports: bit i set means ptrLenImports[i] is served as multi-value instead
// of packed i64. A wazero runtime can serve one signature per import name,
// so each variant a module needs gets its own wazero runtime; they all share
// one compilation cache. Bit randomNoResult serves openwop_random with no
// result, as RFC 0008 §C declares it, instead of packrun's (i32) status.
type variant uint8

var ptrLenImports = []string{abi.ImportVariableGet, abi.ImportChannelRead, abi.ImportInterrupt}

const randomNoResult variant = 1 << 3

type engine struct {
	rt       wazero.Runtime
	wasiDefs map[string]api.FunctionDefinition
	v        variant
}

// New creates a Runtime. With a cache directory configured, compiled code is
// stored there (created if missing) and reused by later processes.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.clock == nil {
		return nil, fmt.Errorf("runtime: config not created with NewConfig")
	}
	if err := cfg.defaults.validate(); err != nil {
		return nil, fmt.Errorf("runtime: default limits: %w", err)
	}
	r := &Runtime{cfg: cfg, engines: map[variant]*engine{}, modules: map[*Module]struct{}{}}
	if cfg.cacheDir != "" {
		if err := os.MkdirAll(cfg.cacheDir, 0o700); err != nil {
			return nil, fmt.Errorf("runtime: compilation cache: %w", err)
		}
		c, err := wazero.NewCompilationCacheWithDir(cfg.cacheDir)
		if err != nil {
			return nil, fmt.Errorf("runtime: compilation cache %s: %w", cfg.cacheDir, err)
		}
		r.cache = c
	} else {
		r.cache = wazero.NewCompilationCache()
	}
	r.engine = "wazero " + wazeroVersion() + " " + engineKind()
	if _, err := r.engineFor(ctx, 0); err != nil {
		r.cache.Close(ctx)
		return nil, err
	}
	return r, nil
}

func engineKind() string {
	switch goruntime.GOARCH {
	case "amd64", "arm64":
		return "compiler"
	}
	return "interpreter"
}

func wazeroVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				return d.Version
			}
		}
	}
	return "(unknown version)"
}

func (r *Runtime) engineFor(ctx context.Context, v variant) (*engine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if e, ok := r.engines[v]; ok {
		return e, nil
	}
	var rc wazero.RuntimeConfig
	if engineKind() == "compiler" {
		rc = wazero.NewRuntimeConfigCompiler()
	} else {
		rc = wazero.NewRuntimeConfigInterpreter()
	}
	// The memory limit here is the wasm32 maximum: real limits are enforced
	// per instance by the memory allocator (see memory.go), which lets a
	// breach be observed and reported instead of silently failing a grow.
	rc = rc.WithCompilationCache(r.cache).WithCloseOnContextDone(true).WithMemoryLimitPages(65536)
	// DWARF sections would be parsed from untrusted bytes to decorate trap
	// stack traces, which packrun trims to their first line anyway.
	rc = rc.WithDebugInfoEnabled(false)
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	e := &engine{rt: rt, v: v, wasiDefs: map[string]api.FunctionDefinition{}}
	wasi, err := wasi_snapshot_preview1.NewBuilder(rt).Compile(ctx)
	if err == nil {
		for name, d := range wasi.ExportedFunctions() {
			e.wasiDefs[name] = d
		}
		_, err = rt.InstantiateModule(ctx, wasi, wazero.NewModuleConfig())
	}
	if err == nil {
		_, err = openwopHostModule(rt, v).Instantiate(ctx)
	}
	if err == nil {
		_, err = hostV1Module(rt).Instantiate(ctx)
	}
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("runtime: start engine: %w", err)
	}
	r.engines[v] = e
	return e, nil
}

// Host describes what this runtime serves: ABI versions, import namespaces
// and their functions, limits and engine.
func (r *Runtime) Host() HostInfo {
	h := HostInfo{
		Limits:       r.cfg.defaults.info(),
		MaxLimits:    r.cfg.max.info(),
		ModuleLimits: r.cfg.modules,
		Engine:       r.engine,
		CacheDir:     r.cfg.cacheDir,
	}
	for _, v := range abi.Served() {
		h.ABIVersions = append(h.ABIVersions, v.String())
	}
	ow := NamespaceInfo{Name: abi.ModuleOpenwop}
	for _, f := range abi.OpenwopImports() {
		ow.Functions = append(ow.Functions, f.Name+" "+f.Signature())
	}
	hv1 := NamespaceInfo{Name: abi.ModuleHostV1}
	for _, f := range abi.HostV1Imports() {
		hv1.Functions = append(hv1.Functions, f.Name+" "+f.Signature())
	}
	wasi := NamespaceInfo{Name: abi.ModuleWASI + " (sandboxed shim)"}
	r.mu.Lock()
	if e := r.engines[0]; e != nil {
		for name := range e.wasiDefs {
			wasi.Functions = append(wasi.Functions, name)
		}
	}
	r.mu.Unlock()
	sort.Strings(wasi.Functions)
	h.Namespaces = []NamespaceInfo{ow, hv1, wasi}
	return h
}

func (r *Runtime) track(m *Module) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.modules[m] = struct{}{}
	return nil
}

func (r *Runtime) untrack(m *Module) {
	r.mu.Lock()
	delete(r.modules, m)
	r.mu.Unlock()
}

// Close closes every module loaded from this runtime (stopping their
// instance preparation), then releases every engine and the in-memory
// compilation cache.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	mods := make([]*Module, 0, len(r.modules))
	for m := range r.modules {
		mods = append(mods, m)
	}
	r.mu.Unlock()
	for _, m := range mods {
		m.Close(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	for _, e := range r.engines {
		if err := e.rt.Close(ctx); err != nil && first == nil {
			first = err
		}
	}
	if err := r.cache.Close(ctx); err != nil && first == nil {
		first = err
	}
	return first
}
