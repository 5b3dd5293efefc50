package evidence

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// Two stores opened at once on a new home agree on one host key: the
// checkpoint either writes verifies.
func TestHostKeyCreatedOnce(t *testing.T) {
	dir := t.TempDir()
	keys := make([]ed25519.PrivateKey, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k := NewHostKey(filepath.Join(dir, "host.key"))
			keys[i], _ = k.Signing()
		})
	}
	wg.Wait()
	for i, k := range keys {
		if k == nil || !k.Equal(keys[0]) {
			t.Fatalf("key %d differs from key 0", i)
		}
	}
}

// FuzzCheckpointFile: a checkpoint file is bytes on disk anyone with
// access may edit. Whatever they hold, Check does not panic, names the file
// in a one-line report, and anchors nothing but what the host key signed:
// a head it returns is the signed one, however the rest of the file was
// changed.
func FuzzCheckpointFile(f *testing.F) {
	seed := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	dir := f.TempDir()
	signed := filepath.Join(dir, "signed.json")
	a := NewAnchor(signed, GivenKey(seed, "test key"), func() time.Time { return time.Unix(1700000000, 0) })
	if err := a.Seed(42, strings.Repeat("ab", 32)); err != nil {
		f.Fatal(err)
	}
	a.Close()
	good, err := os.ReadFile(signed)
	if err != nil {
		f.Fatal(err)
	}
	if head, brk := a.Check(); head == nil || brk != nil {
		f.Fatalf("the signed checkpoint: %+v %+v", head, brk)
	}
	forged := bytes.Replace(good, []byte(`"seq":42`), []byte(`"seq":43`), 1)
	if bytes.Equal(forged, good) {
		f.Fatalf("no seq in %s", good)
	}
	f.Add(good)
	f.Add(forged)
	f.Add([]byte(`{"format":"packrun.evidence-head/v1","seq":1,"hash":"x","signature":"!!"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "evidence-head.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		head, brk := NewAnchor(path, GivenKey(seed, "test key"), time.Now).Check()
		if brk != nil && (strings.ContainsAny(brk.Detail, "\n\r") || !strings.Contains(brk.Detail, path) || brk.Problem != host.BreakCheckpoint) {
			t.Fatalf("report: %+v", brk)
		}
		if head != nil && (head.Seq != 42 || head.Hash != strings.Repeat("ab", 32) || brk != nil) {
			t.Fatalf("anchored %+v, which the key did not sign", head)
		}
	})
}
