//go:build unix

package sqlite

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/packrun/packrun/host"
)

// After a secret is stored, the database, its WAL and shared-memory files
// and the key file are the owner's alone, and so is the artifact
// directory, under the usual umask 022.
func TestMemorySecretFileModes(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	f := newFixture(t, Options{})
	dir := filepath.Dir(f.path)
	sc := host.Scope{Tenant: "acme", Namespace: "creds"}
	if err := f.Put(ctx, sc, "token", json.RawMessage(plainSecret), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want os.FileMode
	}{
		{f.path, 0o600},
		{f.path + "-wal", 0o600},
		{f.path + "-shm", 0o600},
		{filepath.Join(dir, "secret.key"), 0o600},
		{filepath.Join(dir, "artifacts"), 0o700},
		{filepath.Join(dir, "artifacts", "sha256"), 0o700},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != c.want {
			t.Errorf("%s: mode %o, want %o", filepath.Base(c.path), m, c.want)
		}
	}
	// No temporary file of the key's creation is left behind.
	if m, _ := filepath.Glob(filepath.Join(dir, ".secret.key-*")); len(m) != 0 {
		t.Fatalf("left behind: %v", m)
	}
}
