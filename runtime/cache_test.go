package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
)

// TestCompilationCacheSharedByProcesses starts two processes that compile the
// same module into one empty cache directory at the same time; both must
// succeed, and a third runtime must find the compiled code there.
func TestCompilationCacheSharedByProcesses(t *testing.T) {
	if dir := os.Getenv("PACKRUN_TEST_CACHE_CHILD"); dir != "" {
		cacheChild(t, dir)
		return
	}
	dir := t.TempDir()
	var cmds []*exec.Cmd
	for i := 0; i < 2; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCompilationCacheSharedByProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PACKRUN_TEST_CACHE_CHILD="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	var files int
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if filepath.Ext(p) == ".tmp" {
				t.Errorf("leftover temporary file %s", p)
			}
			files++
		}
		return nil
	})
	if files == 0 {
		t.Fatal("cache directory is empty after two compilations")
	}
	cacheChild(t, dir) // a third runtime reads what the others wrote
}

func cacheChild(t *testing.T, dir string) {
	r := newTestRuntime(t, NewConfig().WithCacheDir(dir))
	for _, p := range []string{"examples/hello-go/hello.wasm", "examples/hello-c/hello.wasm"} {
		m, err := r.Load(context.Background(), fixture(t, p), LoadOptions{Name: p})
		if err != nil {
			t.Fatal(err)
		}
		res, err := m.Invoke(context.Background(), Invocation{Input: json.RawMessage(`{"name":"cache"}`)})
		if err != nil || res.Outcome != abi.Completed || string(res.Output) != `{"greeting":"Hello, cache!"}` {
			t.Fatalf("%s: %v %+v", p, err, res)
		}
		m.Close(context.Background())
	}
}

func TestModuleInfoCache(t *testing.T) {
	dir := t.TempDir()
	wasm := fixture(t, "examples/hello-c/hello.wasm")
	load := func() ModuleInfo {
		r := newTestRuntime(t, NewConfig().WithCacheDir(dir))
		m, err := r.Load(context.Background(), wasm, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(context.Background())
		return m.Info()
	}
	first := load()
	paths, _ := filepath.Glob(filepath.Join(dir, "packrun-info-v1", "*", first.SHA256+".json"))
	if len(paths) != 1 {
		t.Fatalf("no info cache entry for %s", first.SHA256)
	}
	// A cache entry is used instead of probing (shown by editing it)...
	os.WriteFile(paths[0], []byte(`{"abiVersion":1,"packName":"local.from-cache","nodes":["example.hello"]}`), 0o644)
	if got := load(); got.PackName != "local.from-cache" {
		t.Fatalf("cache entry not used: %s", got.PackName)
	}
	// ...and a damaged one is ignored.
	os.WriteFile(paths[0], []byte(`{"nodes":[]`), 0o644)
	if got := load(); got.PackName != first.PackName {
		t.Fatalf("damaged cache entry: %s", got.PackName)
	}
}

func TestRuntimeCloseStopsModules(t *testing.T) {
	wasm := fixture(t, "examples/hello-c/hello.wasm")
	before := goruntime.NumGoroutine()
	for i := 0; i < 10; i++ {
		r, err := New(context.Background(), NewConfig())
		if err != nil {
			t.Fatal(err)
		}
		m, err := r.Load(context.Background(), wasm, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Invoke(context.Background(), Invocation{}); err != nil { // starts the pool filler
			t.Fatal(err)
		}
		r.Close(context.Background()) // without closing m
		if _, err := m.Invoke(context.Background(), Invocation{}); !errors.Is(err, ErrClosed) {
			t.Fatalf("invoke after runtime close: %v", err)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for goruntime.NumGoroutine() > before+1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := goruntime.NumGoroutine(); n > before+1 {
		t.Fatalf("goroutines: %d before, %d after closing 10 runtimes", before, n)
	}
}

// TestConcurrentLoadsFromCache: several loads of the same module at once,
// on a runtime whose compilation cache already holds it, all invoke
// cleanly. wazero publishes a module read from its file cache before it has
// finished preparing it, so a second compile of the same bytes could hand
// out a half-prepared module and the next instantiation panicked (seen as
// a crash of `packrun serve` when two workers loaded one pack at once).
func TestConcurrentLoadsFromCache(t *testing.T) {
	dir := t.TempDir()
	wasm := fixture(t, "examples/hello-c/hello.wasm")
	ctx := context.Background()
	warm := newTestRuntime(t, NewConfig().WithCacheDir(dir))
	if _, err := warm.Load(ctx, wasm, LoadOptions{Name: "warm"}); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		r := newTestRuntime(t, NewConfig().WithCacheDir(dir).WithPoolSize(0))
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, err := r.Load(ctx, wasm, LoadOptions{Name: "hello"})
				if err != nil {
					errs <- err
					return
				}
				res, err := m.Invoke(ctx, Invocation{Input: json.RawMessage(`{"name":"x"}`)})
				if err != nil || res.Outcome != abi.Completed {
					errs <- fmt.Errorf("round %d: %v %+v", round, err, res)
				}
				m.Close(ctx)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		r.Close(ctx)
	}
}

// TestCloseDuringInvocations: closing a module while invocations run waits
// for them; none panics, and those that start later get ErrClosed.
func TestCloseDuringInvocations(t *testing.T) {
	ctx := context.Background()
	r := newTestRuntime(t, NewConfig().WithPoolSize(0))
	wasm := fixture(t, "examples/hello-c/hello.wasm")
	for range 10 {
		m, err := r.Load(ctx, wasm, LoadOptions{Name: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var ok, closed atomic.Int64
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					res, err := m.Invoke(ctx, Invocation{Input: json.RawMessage(`{"name":"x"}`)})
					switch {
					case errors.Is(err, ErrClosed):
						closed.Add(1)
					case err != nil || res.Outcome != abi.Completed:
						t.Errorf("%v %+v", err, res)
					default:
						ok.Add(1)
					}
				}
			}()
		}
		time.Sleep(time.Millisecond)
		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if ok.Load()+closed.Load() != 160 {
			t.Fatalf("%d completed, %d refused", ok.Load(), closed.Load())
		}
	}
}
