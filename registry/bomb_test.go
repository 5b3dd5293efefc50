package registry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/packrun/packrun/packs"
)

// bombEntry is the size of each file of zeros in the bomb: the most one
// file may hold under packs.DefaultLimits(), so that only the total and the
// compression ratio can stop it.
const (
	bombEntry   = 256 << 20
	bombEntries = 3
)

// gzipBomb is a .pack of 768 MiB of zeros in three assets (plus a valid
// manifest and module), gzip-compressed as it is generated to about 1 MB. It
// is built once per test binary, in memory, never committed.
var gzipBomb = sync.OnceValues(func() ([]byte, error) {
	wasm, err := os.ReadFile("../examples/hello-c/hello.wasm")
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(wasm)
	manifest := fmt.Sprintf(`{"name":"vendor.acme.bomb","version":"1.0.0","runtime":{"language":"wasm","abi":{"version":1,"minor":0},
		"modules":[{"path":"hello.wasm","sha256":%q}]},"nodes":[{"typeId":"example.hello","kind":"node"}]}`, hex.EncodeToString(sum[:]))
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	write := func(name string, size int64, data io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
			return err
		}
		_, err := io.CopyN(tw, data, size)
		return err
	}
	for i := range bombEntries {
		if err := write(fmt.Sprintf("assets/zeros%d", i), bombEntry, zeroReader{}); err != nil {
			return nil, err
		}
	}
	if err := write("hello.wasm", int64(len(wasm)), bytes.NewReader(wasm)); err != nil {
		return nil, err
	}
	if err := write("pack.json", int64(len(manifest)), bytes.NewReader([]byte(manifest))); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
})

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func bomb(t *testing.T) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a 768 MiB gzip bomb")
	}
	b, err := gzipBomb()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// allocated runs f and returns the bytes the Go heap allocated meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// countReads counts the archives VerifyRequest opens while the test runs.
func countReads(t *testing.T) *int {
	n := new(int)
	orig := readArchive
	readArchive = func(r io.Reader, lim packs.Limits) (*packs.Archive, error) {
		*n++
		return orig(r, lim)
	}
	t.Cleanup(func() { readArchive = orig })
	return n
}

// A gzip bomb signed by a key the policy does not trust is refused by its
// signature before anything is decompressed: memory stays at the size of
// the archive, not of its content. (That a refused install stores nothing
// is the root package's TestInstallRefusesBombs.)
func TestUntrustedBombIsNotOpened(t *testing.T) {
	archive := bomb(t)
	t.Logf("bomb: %d KiB compressed, %d MiB of content", len(archive)>>10, bombEntries*bombEntry>>20)
	ctx := context.Background()
	f := newTrusted(t)
	stranger := newTestKey(t)
	bundle, prov := signPack(t, stranger, archive, "vendor.acme.bomb")

	_, regPriv, _ := ed25519.GenerateKey(rand.Reader)
	trustedPub, _, _ := ed25519.GenerateKey(rand.Reader)
	withRegistry := NewPolicy()
	if err := withRegistry.AddRegistryKey("openwop", []byte(base64.StdEncoding.EncodeToString(trustedPub)), []string{"vendor.*"}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		policy *Policy
		req    Signed
		check  string
	}{
		{"Sigstore bundle by an untrusted key", f.policy, Signed{Archive: archive, Bundle: bundle, Provenance: prov}, CheckSignature},
		{"Ed25519 signature by an untrusted registry key", withRegistry, Signed{Archive: archive, Signature: ed25519.Sign(regPriv, archive)}, CheckSignature},
		{"unsigned", f.policy, Signed{Archive: archive}, CheckUnsigned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads := countReads(t)
			var (
				v    *Verdict
				arch *packs.Archive
				err  error
			)
			n := allocated(func() {
				v, arch, err = VerifyRequest(ctx, tc.policy, tc.req, VerifyOptions{})
			})
			t.Logf("allocated %d KiB", n>>10)
			checkRefusal(t, err, tc.check)
			if *reads != 0 {
				t.Errorf("the archive was opened %d times before the signature was refused", *reads)
			}
			if n > 64<<20 {
				t.Errorf("refusing it allocated %d MiB", n>>20)
			}
			assertNothing(t, v, arch)
		})
	}
}

// The same bomb signed by a trusted key, or unsigned and let through by
// AllowUnsignedUnsafe, is opened, and stopped by the compression ratio
// limit after a few MiB instead of at the 512 MiB total.
func TestTrustedBombStopsAtTheRatio(t *testing.T) {
	archive := bomb(t)
	ctx := context.Background()
	f := newTrusted(t)
	bundle, prov := signPack(t, f.key, archive, "vendor.acme.bomb")
	regPub, regPriv, _ := ed25519.GenerateKey(rand.Reader)
	withRegistry := NewPolicy()
	if err := withRegistry.AddRegistryKey("openwop", []byte(base64.StdEncoding.EncodeToString(regPub)), []string{"vendor.*"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		policy *Policy
		req    Signed
		opts   VerifyOptions
	}{
		{"Sigstore bundle by a trusted key", f.policy, Signed{Archive: archive, Bundle: bundle, Provenance: prov}, VerifyOptions{}},
		{"Ed25519 signature by a trusted registry key", withRegistry, Signed{Archive: archive, Signature: ed25519.Sign(regPriv, archive)}, VerifyOptions{}},
		{"unsigned, AllowUnsignedUnsafe", f.policy, Signed{Archive: archive}, VerifyOptions{AllowUnsignedUnsafe: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads := countReads(t)
			var (
				v    *Verdict
				arch *packs.Archive
				err  error
			)
			n := allocated(func() {
				v, arch, err = VerifyRequest(ctx, tc.policy, tc.req, tc.opts)
			})
			t.Logf("allocated %.1f MiB: %v", float64(n)/(1<<20), err)
			if !errors.Is(err, packs.ErrTooLarge) || !strings.Contains(err.Error(), "compression ratio limit") {
				t.Fatalf("err = %v, want the compression ratio limit", err)
			}
			if *reads != 1 {
				t.Errorf("the archive was opened %d times", *reads)
			}
			if n > 64<<20 {
				t.Errorf("refusing it allocated %d MiB", n>>20)
			}
			assertNothing(t, v, arch)
		})
	}
}

// assertNothing checks a refusal handed back neither a verdict nor an
// archive: nothing a caller could go on to install or run.
func assertNothing(t *testing.T, v *Verdict, arch *packs.Archive) {
	t.Helper()
	if v != nil || arch != nil {
		t.Errorf("refused, yet returned verdict %+v and archive %v", v, arch != nil)
	}
}

// A trusted signer's pack is opened to learn its name, then refused if the
// signer is not trusted for that name; the refusal names the pack.
func TestVerifyRequestNamespaceAfterOpening(t *testing.T) {
	ctx := context.Background()
	f := newTrusted(t)
	archive := buildPack(t, "vendor.other.tool", "1.0.0")
	bundle, prov := signPack(t, f.key, archive, "vendor.other.tool")
	regPub, regPriv, _ := ed25519.GenerateKey(rand.Reader)
	withRegistry := NewPolicy()
	if err := withRegistry.AddRegistryKey("openwop", []byte(base64.StdEncoding.EncodeToString(regPub)), []string{"community.*"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		policy *Policy
		req    Signed
	}{
		{"Sigstore key", f.policy, Signed{Archive: archive, Bundle: bundle, Provenance: prov}},
		{"registry key", withRegistry, Signed{Archive: archive, Signature: ed25519.Sign(regPriv, archive)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads := countReads(t)
			_, _, err := VerifyRequest(ctx, tc.policy, tc.req, VerifyOptions{})
			checkRefusal(t, err, CheckNamespace)
			var ve *VerifyError
			if errors.As(err, &ve); ve.Pack != "vendor.other.tool" || *reads != 1 {
				t.Errorf("pack %q, opened %d times", ve.Pack, *reads)
			}
		})
	}
}
