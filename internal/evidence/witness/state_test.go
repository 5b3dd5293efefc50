package witness

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyCreatedOnceAndKept: a key is created 0600 once and then read
// back, never replaced; a second creator keeps the first's key; a key
// file others may read is refused.
func TestKeyCreatedOnceAndKept(t *testing.T) {
	p := filepath.Join(t.TempDir(), "key")
	k1, created, err := LoadOrCreateKey(p, "w1")
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", fi, err)
	}
	k2, created, err := LoadOrCreateKey(p, "w2")
	if err != nil || created || k2.VKey() != k1.VKey() {
		t.Fatalf("reload: %v %v %q != %q", created, err, k2.VKey(), k1.VKey())
	}
	if err := createFileDurably(p, []byte("other"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("createFileDurably over an existing key: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) == "other" {
		t.Fatal("the key was replaced")
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateKey(p, "w1"); err == nil {
		t.Fatal("a group-readable key was accepted")
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".*tmp*"))
	if len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
}

// TestCorruptStateStopsStart: a damaged state file stops New with an
// error naming it, rather than restarting the log from nothing.
func TestCorruptStateStopsStart(t *testing.T) {
	l := newTestLog(t, "example.com/log").grow(4, "a")
	w, state := newTestWitness(t, l)
	if _, err := w.Add(l.body(0, 4)); err != nil {
		t.Fatal(err)
	}
	p := stateDir(state).path(l.origin)
	if err := os.WriteFile(p, []byte("example.com/log\n4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(w.Key(), []Log{l.logConfig()}, state); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("New on a damaged state: %v", err)
	}
}
