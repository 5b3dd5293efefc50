package evidence

import (
	"crypto/ed25519"
	"path/filepath"
	"sync"
	"testing"
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
