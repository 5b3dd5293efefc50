package packs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// wasmStub stands in for a module: packs never looks inside modules.
var wasmStub = []byte("\x00asm\x01\x00\x00\x00")

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// manifestJSON is a valid manifest for modules path -> content, one skill
// node per module.
func manifestJSON(t testing.TB, modules map[string][]byte) []byte {
	t.Helper()
	var mods []map[string]any
	var nodes []map[string]any
	for _, p := range sortedKeys(modules) {
		mods = append(mods, map[string]any{"path": p, "sha256": sha(modules[p])})
		nodes = append(nodes, map[string]any{
			"typeId": "t." + sanitize(p), "kind": "skill", "module": p,
			"taskTypes":   []string{"task." + sanitize(p)},
			"inputSchema": map[string]any{"type": "object"},
		})
	}
	b, err := json.MarshalIndent(map[string]any{
		"name": "local.test", "version": "1.0.0",
		"runtime": map[string]any{"language": "wasm", "abi": map[string]any{"version": 1, "minor": 0}, "modules": mods},
		"nodes":   nodes,
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sanitize(p string) string {
	b := []byte(p)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// writeDir creates a directory with the given files.
func writeDir(t testing.TB, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for p, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// validDir is a pack directory with one module, an asset and a source file.
func validDir(t testing.TB) string {
	return writeDir(t, map[string][]byte{
		"pack.json":       manifestJSON(t, map[string][]byte{"m.wasm": wasmStub}),
		"m.wasm":          wasmStub,
		"assets/a.txt":    []byte("asset"),
		"assets/d/b.json": []byte("{}"),
		"src/main.c":      []byte("int main(){}"),
		"README.md":       []byte("# test"),
	})
}

// entry is one crafted tar entry; a zero Typeflag means a regular file.
type entry struct {
	hdr  tar.Header
	data []byte
}

func reg(name string, data []byte) entry {
	return entry{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}, data}
}

// craft builds a gzip'd tar from entries without any of Pack's checks.
func craft(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// validEntries are the entries of a valid one-module pack.
func validEntries(t testing.TB) []entry {
	return []entry{
		reg("pack.json", manifestJSON(t, map[string][]byte{"m.wasm": wasmStub})),
		reg("m.wasm", wasmStub),
	}
}

// stream produces an archive through a pipe as the reader consumes it, so a
// test can offer gigabytes without storing them. produced counts the
// uncompressed bytes generated so far.
type stream struct {
	r        *io.PipeReader
	produced atomic.Int64
	done     chan struct{}
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func newStream(gen func(w io.Writer) error) *stream {
	pr, pw := io.Pipe()
	s := &stream{r: pr, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		zw, _ := gzip.NewWriterLevel(pw, gzip.BestCompression)
		err := gen(countingWriter{zw, &s.produced})
		if err == nil {
			err = zw.Close()
		}
		pw.CloseWithError(err)
	}()
	return s
}

// stop ends the producer and waits for it.
func (s *stream) stop() {
	s.r.CloseWithError(io.ErrClosedPipe)
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		panic("producer did not stop")
	}
}

var zeros = make([]byte, 1<<20)

func writeZeros(w io.Writer, n int64) error {
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
