package runtime

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

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
