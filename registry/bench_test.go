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

// BenchmarkVerify2MB: verify a 2 MB pack (the C hello module plus 2 MB of
// incompressible assets): signature and provenance over the archive, then
// the archive opened and every digest checked. Installing it too is the
// root package's BenchmarkVerifyInstall2MB.
func BenchmarkVerify2MB(b *testing.B) {
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
	req := Signed{Archive: archive, Bundle: bundle, Provenance: prov}
	b.SetBytes(int64(len(archive)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, arch, err := VerifyRequest(ctx, p, req, VerifyOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if v.Provenance == nil || arch.Manifest.Name != "vendor.acme.big" {
			b.Fatalf("verdict %+v", v)
		}
	}
}
