//go:build unix

package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// withUmask runs the test under umask 022, the usual one, so that a file
// created with the default 0644 would show it whatever umask the tests
// were started with.
func withUmask(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
}

func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// A new database, its -wal and its -shm are readable by the owner only; an
// older database (and WAL) created 0644 is narrowed when opened.
func TestOpenOwnerOnly(t *testing.T) {
	withUmask(t)
	ctx := context.Background()
	dir := t.TempDir()

	path := filepath.Join(dir, "new.db")
	d, err := openDB(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Exec(`CREATE TABLE t (x)`); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if m := modeOf(t, p); m != 0o600 {
			t.Errorf("%s: mode %o, want 600", filepath.Base(p), m)
		}
	}

	old := filepath.Join(dir, "old.db")
	for _, p := range []string{old, old + "-wal"} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d2, err := openDB(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	for _, p := range []string{old, old + "-wal", old + "-shm"} {
		if m := modeOf(t, p); m != 0o600 {
			t.Errorf("%s: mode %o, want 600", filepath.Base(p), m)
		}
	}
}
