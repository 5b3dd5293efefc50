package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader: it must refuse them with a
// *LoadError (or load them) and never panic or hang.
func FuzzLoad(f *testing.F) {
	for _, dir := range []string{"../testdata/hostile", "../examples/hello-wat"} {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.wasm"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && len(b) < 4096 {
				f.Add(b)
			}
		}
	}
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	r, err := New(context.Background(), NewConfig().WithPoolSize(0))
	if err != nil {
		f.Fatal(err)
	}
	defer r.Close(context.Background())
	f.Fuzz(func(t *testing.T, wasm []byte) {
		m, err := r.Load(context.Background(), wasm, LoadOptions{Limits: testLimits})
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("untyped load error: %v", err)
			}
			return
		}
		res, err := m.Invoke(context.Background(), Invocation{Node: m.Info().Nodes[0]})
		if err != nil || res.Outcome == "" {
			t.Fatalf("invoke: %v %+v", err, res)
		}
		m.Close(context.Background())
	})
}
