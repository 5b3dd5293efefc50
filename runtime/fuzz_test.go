package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
	f.Fuzz(func(t *testing.T, wasm []byte) {
		// A runtime per input: each input is judged on its own.
		r, err := New(context.Background(), NewConfig().WithPoolSize(0))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(context.Background())
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

// TestPrecheckRefusesInflatedCounts: a section declaring more entries than it
// has bytes is refused before wazero allocates for them (FuzzLoad found a
// 600-byte module declaring 68 million function bodies).
func TestPrecheckRefusesInflatedCounts(t *testing.T) {
	r := newTestRuntime(t, NewConfig().WithPoolSize(0))
	hello := fixture(t, "examples/hello-wat/hello.wasm")
	if err := pre(hello); err != nil {
		t.Fatalf("good module refused: %v", err)
	}
	// A code section (id 10) of 5 bytes declaring 68,380,365 bodies.
	bad := append([]byte("\x00asm\x01\x00\x00\x00"), 10, 5, 0xcd, 0xcd, 0xcd, 0x20, 0x00)
	_, err := r.Load(context.Background(), bad, LoadOptions{Name: "inflated"})
	if le, ok := errors.AsType[*LoadError](err); !ok || le.Code != CodeInvalidModule || !strings.Contains(err.Error(), "declares 68380365 entries in 1 bytes") {
		t.Fatalf("err = %v", err)
	}
	// A type declaring 834,897,678 parameters in a 6-byte section.
	if err := pre(append([]byte("\x00asm\x01\x00\x00\x00"), 1, 7, 1, 0x60, 0x8e, 0xe0, 0x8e, 0x8e, 0x03)); err == nil || !strings.Contains(err.Error(), "parameters") {
		t.Fatalf("inflated parameter count: %v", err)
	}
	// A function declaring 2^32-1 locals in 7 bytes.
	if err := pre(append([]byte("\x00asm\x01\x00\x00\x00"), 10, 9, 1, 7, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x7f)); err == nil || !strings.Contains(err.Error(), "locals") {
		t.Fatalf("inflated locals: %v", err)
	}
	// An element segment (flags 0, offset i32.const 0) declaring 2^32-1
	// function indices: wazero would allocate 4 billion expressions.
	if err := pre(append([]byte("\x00asm\x01\x00\x00\x00"), 9, 10, 1, 0, 0x41, 0, 0x0b, 0xff, 0xff, 0xff, 0xff, 0x0f)); err == nil || !strings.Contains(err.Error(), "element indices") {
		t.Fatalf("inflated element segment: %v", err)
	}
	// The same through expressions (flags 5, funcref).
	if err := pre(append([]byte("\x00asm\x01\x00\x00\x00"), 9, 8, 1, 5, 0x70, 0xff, 0xff, 0xff, 0xff, 0x0f)); err == nil || !strings.Contains(err.Error(), "element expressions") {
		t.Fatalf("inflated element expressions: %v", err)
	}
	// A "name" section whose function-name map declares 2^32-1 entries,
	// and one whose single name claims 2^32-1 bytes.
	nameSec := func(sub ...byte) []byte {
		body := append([]byte{4, 'n', 'a', 'm', 'e', 1, byte(len(sub))}, sub...)
		return append(append([]byte("\x00asm\x01\x00\x00\x00"), 0, byte(len(body))), body...)
	}
	if err := pre(nameSec(0xff, 0xff, 0xff, 0xff, 0x0f)); err == nil || !strings.Contains(err.Error(), "function names") {
		t.Fatalf("inflated name map: %v", err)
	}
	if err := pre(nameSec(1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f)); err == nil || !strings.Contains(err.Error(), "bytes of a name") {
		t.Fatalf("inflated name: %v", err)
	}
	for _, bad := range [][]byte{
		append([]byte("\x00asm\x01\x00\x00\x00"), 9, 10, 1, 0, 0x41, 0, 0x0b, 0xff, 0xff, 0xff, 0xff, 0x0f),
		nameSec(0xff, 0xff, 0xff, 0xff, 0x0f),
	} {
		if _, err := r.Load(context.Background(), bad, LoadOptions{Name: "inflated"}); err == nil {
			t.Fatal("inflated module loaded")
		}
	}
	// Every module this repository builds passes.
	paths, _ := filepath.Glob("../examples/*/*.wasm")
	more, _ := filepath.Glob("../abi/guest/*/example/*.wasm")
	more2, _ := filepath.Glob("../testdata/*/*.wasm")
	for _, p := range append(append(paths, more...), more2...) {
		b, _ := os.ReadFile(p)
		if strings.HasSuffix(p, "table_max_huge.wasm") {
			continue // refused for its shape, on purpose (TestContainLoad)
		}
		if err := pre(b); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	// A section running past the end of the module.
	if err := pre(append([]byte("\x00asm\x01\x00\x00\x00"), 1, 0x7f, 0)); err == nil {
		t.Fatal("truncated section accepted")
	}
}

// pre runs precheck with the default module limits.
func pre(b []byte) error {
	_, err := precheck(b, DefaultModuleLimits())
	return err
}
