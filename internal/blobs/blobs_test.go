package blobs

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestPutGet(t *testing.T) {
	d := Dir{Path: t.TempDir(), TmpPrefix: ".tmp-"}
	digest, err := d.Put([]byte("hello"))
	if err != nil || digest != Digest([]byte("hello")) {
		t.Fatalf("put: %s %v", digest, err)
	}
	if again, err := d.Put([]byte("hello")); err != nil || again != digest {
		t.Fatalf("second put: %v", err)
	}
	if b, err := d.Get(digest); err != nil || string(b) != "hello" {
		t.Fatalf("get: %q %v", b, err)
	}
	os.WriteFile(d.File(digest), []byte("jello"), 0o644)
	if _, err := d.Get(digest); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Fatalf("corrupted blob: %v", err)
	}
	if _, err := d.Get("../etc/passwd"); err == nil {
		t.Fatal("path accepted as a digest")
	}
	entries, _ := os.ReadDir(d.Path)
	if len(entries) != 1 {
		t.Fatalf("%d files, want 1 (no temp files left)", len(entries))
	}
}

// A blob whose directory cannot be synced is not reported stored: the
// transaction naming it must not commit before the rename is durable.
func TestPutDirSyncFails(t *testing.T) {
	old := syncDir
	t.Cleanup(func() { syncDir = old })
	syncDir = func(string) error { return errors.New("input/output error") }
	d := Dir{Path: t.TempDir(), TmpPrefix: ".tmp-"}
	digest, err := d.Put([]byte("hello"))
	if err == nil || digest != "" || !strings.Contains(err.Error(), "store blob "+Digest([]byte("hello"))[:12]+": sync ") || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("put: %q %v", digest, err)
	}
}
