package registry

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/packrun/packrun/packs"
)

// BenchmarkVerifyInstall2MB: verify (signature + provenance + archive +
// digests) and install a 2 MB pack (the C hello module plus 2 MB of
// incompressible assets) into an empty store.
func BenchmarkVerifyInstall2MB(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	wasm, err := os.ReadFile("../examples/hello-c/hello.wasm")
	if err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(wasm)
	os.WriteFile(filepath.Join(dir, "hello.wasm"), wasm, 0o644)
	os.MkdirAll(filepath.Join(dir, "assets"), 0o755)
	blob := make([]byte, 2<<20)
	rand.Read(blob)
	os.WriteFile(filepath.Join(dir, "assets", "data.bin"), blob, 0o644)
	os.WriteFile(filepath.Join(dir, "pack.json"), []byte(fmt.Sprintf(`{"name":"vendor.acme.big","version":"1.0.0","runtime":{"language":"wasm","abi":{"version":1,"minor":0},
		"modules":[{"path":"hello.wasm","sha256":%q}]},"nodes":[{"typeId":"example.hello","kind":"node"}]}`, hex.EncodeToString(sum[:]))), 0o644)
	archive, err := packs.Pack(dir)
	if err != nil {
		b.Fatal(err)
	}
	k := newTestKey(b)
	bundle, prov := signPack(b, k, archive, "vendor.acme.big")
	p := NewPolicy()
	p.AddKey("k", k.pubPEM, []string{"vendor.acme.*"})
	homes := b.TempDir()
	b.SetBytes(int64(len(archive)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, err := OpenStore(ctx, filepath.Join(homes, fmt.Sprint(i)))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, _, err := s.Install(ctx, p, Signed{Archive: archive, Bundle: bundle, Provenance: prov}, InstallOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}
