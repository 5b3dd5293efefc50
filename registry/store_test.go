package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/packrun/packrun/packs"
)

// buildPack packs the C hello example under name@version in a temp dir.
func buildPack(t testing.TB, name, version string) []byte {
	t.Helper()
	wasm, err := os.ReadFile("../examples/hello-c/hello.wasm")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum := sha256.Sum256(wasm)
	manifest := fmt.Sprintf(`{"name":%q,"version":%q,"runtime":{"language":"wasm","abi":{"version":1,"minor":0},
		"modules":[{"path":"hello.wasm","sha256":%q}]},"nodes":[{"typeId":"example.hello","kind":"node"}]}`, name, version, hex.EncodeToString(sum[:]))
	os.WriteFile(filepath.Join(dir, "pack.json"), []byte(manifest), 0o644)
	os.WriteFile(filepath.Join(dir, "hello.wasm"), wasm, 0o644)
	b, err := packs.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type storeFixture struct {
	store  *Store
	home   string
	policy *Policy
	key    testKey
}

func newStore(t testing.TB) *storeFixture {
	t.Helper()
	home := t.TempDir()
	s, err := OpenStore(context.Background(), home)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	k := newTestKey(t)
	p := NewPolicy()
	if err := p.AddKey("test", k.pubPEM, []string{"vendor.acme.*"}); err != nil {
		t.Fatal(err)
	}
	return &storeFixture{store: s, home: home, policy: p, key: k}
}

func (f *storeFixture) signed(t testing.TB, name, version string) Signed {
	archive := buildPack(t, name, version)
	b, p := signPack(t, f.key, archive, name)
	return Signed{Archive: archive, Bundle: b, Provenance: p}
}

func TestInstallListResolveExportUninstall(t *testing.T) {
	ctx := context.Background()
	f := newStore(t)
	var req Signed // what was installed as 1.0.0
	for _, v := range []string{"1.0.0", "1.2.0", "2.0.0-rc.1", "2.0.0"} {
		r := f.signed(t, "vendor.acme.hello", v)
		if v == "1.0.0" {
			req = r
		}
		if _, already, err := f.store.Install(ctx, f.policy, r, InstallOptions{}); err != nil || already {
			t.Fatalf("install %s: %v (already %v)", v, err, already)
		}
	}
	// Packing is deterministic, so this is the identical pack (signed
	// again): a no-op that keeps the first bundles.
	if _, already, err := f.store.Install(ctx, f.policy, f.signed(t, "vendor.acme.hello", "1.0.0"), InstallOptions{}); err != nil || !already {
		t.Fatalf("reinstall: %v already=%v", err, already)
	}
	all, _ := f.store.List(ctx)
	if len(all) != 4 || all[0].Version != "2.0.0" {
		t.Fatalf("list: %d packs, first %s", len(all), all[0].Ref())
	}
	for ref, want := range map[string]string{
		"vendor.acme.hello": "2.0.0", "vendor.acme.hello@1.2.0": "1.2.0", "vendor.acme.hello@^1": "1.2.0",
		"vendor.acme.hello@~1.0": "1.0.0", "vendor.acme.hello@>=1.1 <2": "1.2.0", "vendor.acme.hello@2.0.0-rc.1": "2.0.0-rc.1",
	} {
		p, err := f.store.Resolve(ctx, ref)
		if err != nil || p.Version != want {
			t.Errorf("resolve %s: %v %v, want %s", ref, p, err, want)
		}
	}
	for _, ref := range []string{"vendor.acme.other", "vendor.acme.hello@3", "vendor.acme.hello@1.0.1"} {
		if _, err := f.store.Resolve(ctx, ref); !errors.Is(err, ErrNotInstalled) {
			t.Errorf("resolve %s: %v", ref, err)
		}
	}
	p, _ := f.store.Resolve(ctx, "vendor.acme.hello@1.0.0")
	if p.Signer != "key:test" || p.Provenance == nil || p.Provenance.BuilderID != testBuilder {
		t.Fatalf("recorded verdict: %+v", p)
	}
	arch, err := f.store.Open(ctx, p)
	if err != nil || arch.Manifest.Version != "1.0.0" {
		t.Fatalf("open: %v", err)
	}
	out := t.TempDir()
	paths, err := f.store.Export(ctx, "vendor.acme.hello@1.0.0", out)
	if err != nil || len(paths) != 3 {
		t.Fatalf("export: %v %v", paths, err)
	}
	for i, want := range [][]byte{req.Archive, req.Bundle, req.Provenance} {
		if got, _ := os.ReadFile(paths[i]); !bytes.Equal(got, want) {
			t.Errorf("export %s differs from what was installed", paths[i])
		}
	}
	// The export installs under another home.
	g := newStore(t)
	g.policy = f.policy
	if _, _, err := g.store.Install(ctx, g.policy, Signed{Archive: mustRead(t, paths[0]), Bundle: mustRead(t, paths[1]), Provenance: mustRead(t, paths[2])}, InstallOptions{}); err != nil {
		t.Fatalf("install export elsewhere: %v", err)
	}
	removed, err := f.store.Uninstall(ctx, "vendor.acme.hello@^1")
	if err != nil || len(removed) != 2 {
		t.Fatalf("uninstall ^1: %v %v", removed, err)
	}
	if _, err := f.store.Uninstall(ctx, "vendor.acme.hello"); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(f.home, "blobs", "sha256")); len(entries) != 0 {
		t.Fatalf("%d blobs left after uninstalling everything", len(entries))
	}
}

func mustRead(t testing.TB, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestInstallRefusals(t *testing.T) {
	ctx := context.Background()
	f := newStore(t)
	good := f.signed(t, "vendor.acme.hello", "1.0.0")
	if _, _, err := f.store.Install(ctx, f.policy, good, InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	other := f.signed(t, "vendor.acme.other", "1.0.0")
	tampered := bytes.Clone(good.Archive)
	tampered[len(tampered)/2] ^= 1
	// A different archive under the same name@version (it differs by its
	// description).
	diffReq := f.signedWith(t, "vendor.acme.hello", "1.0.0", `"description":"different",`)
	outside := newTestKey(t)
	ob, op := signPack(t, outside, other.Archive, "vendor.acme.other")
	garbage := []byte("not a gzip stream")
	gb, gp := signPack(t, outside, garbage, "vendor.acme.other")
	tb, tp := signPack(t, f.key, garbage, "vendor.acme.other")
	foreign := buildPack(t, "vendor.other.tool", "1.0.0")
	fb, fp := signPack(t, f.key, foreign, "vendor.other.tool")
	cases := []struct {
		name string
		req  Signed
		want error
	}{
		// The signature is checked before the archive is opened.
		{"tampered archive", Signed{Archive: tampered, Bundle: good.Bundle, Provenance: good.Provenance}, ErrUntrusted},
		{"untrusted key", Signed{Archive: other.Archive, Bundle: ob, Provenance: op}, ErrUntrusted},
		{"not a pack, untrusted key", Signed{Archive: garbage, Bundle: gb, Provenance: gp}, ErrUntrusted},
		{"not a pack, trusted key", Signed{Archive: garbage, Bundle: tb, Provenance: tp}, packs.ErrInvalidPack},
		{"trusted key outside its namespace", Signed{Archive: foreign, Bundle: fb, Provenance: fp}, ErrUntrusted},
		{"unsigned", Signed{Archive: good.Archive}, ErrUntrusted},
		{"swapped bundles", Signed{Archive: good.Archive, Bundle: good.Provenance, Provenance: good.Bundle}, ErrUntrusted},
		{"other pack's provenance", Signed{Archive: good.Archive, Bundle: good.Bundle, Provenance: other.Provenance}, ErrUntrusted},
		{"same name@version, different pack", diffReq, ErrConflict},
		{"check refuses", f.signed(t, "vendor.acme.checked", "1.0.0"), errChecked},
	}
	before, _ := f.store.List(ctx)
	blobs := func() int {
		entries, _ := os.ReadDir(filepath.Join(f.home, "blobs", "sha256"))
		return len(entries)
	}
	blobsBefore := blobs()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := InstallOptions{Check: func(context.Context, *packs.Archive) error { return nil }}
			if c.want == errChecked {
				opts.Check = func(context.Context, *packs.Archive) error { return errChecked }
			}
			_, _, err := f.store.Install(ctx, f.policy, c.req, opts)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	after, _ := f.store.List(ctx)
	if len(after) != len(before) {
		t.Fatalf("refused installs changed the store: %d -> %d packs", len(before), len(after))
	}
	if n := blobs(); n != blobsBefore {
		t.Fatalf("refused installs changed the blobs: %d -> %d", blobsBefore, n)
	}
	if err := f.store.CheckIntegrity(ctx); err != nil {
		t.Fatal(err)
	}
}

var errChecked = errors.New("check refused")

func (f *storeFixture) signedWith(t testing.TB, name, version, extra string) Signed {
	wasm, _ := os.ReadFile("../examples/hello-c/hello.wasm")
	dir := t.TempDir()
	sum := sha256.Sum256(wasm)
	manifest := fmt.Sprintf(`{"name":%q,"version":%q,%s"runtime":{"language":"wasm","abi":{"version":1,"minor":0},
		"modules":[{"path":"hello.wasm","sha256":%q}]},"nodes":[{"typeId":"example.hello","kind":"node"}]}`, name, version, extra, hex.EncodeToString(sum[:]))
	os.WriteFile(filepath.Join(dir, "pack.json"), []byte(manifest), 0o644)
	os.WriteFile(filepath.Join(dir, "hello.wasm"), wasm, 0o644)
	archive, err := packs.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, p := signPack(t, f.key, archive, name)
	return Signed{Archive: archive, Bundle: b, Provenance: p}
}

// TestInstallSurvivesKill kills a process that is installing packs at random
// moments; after each kill the store must be consistent (every listed pack
// complete and intact), and the installs must then complete.
func TestInstallSurvivesKill(t *testing.T) {
	if os.Getenv("PACKRUN_TEST_INSTALL_CHILD") != "" {
		installChild(t)
		return
	}
	home := t.TempDir()
	const versions = 60
	run := func(kill time.Duration) error {
		cmd := exec.Command(os.Args[0], "-test.run=^TestInstallSurvivesKill$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PACKRUN_TEST_INSTALL_CHILD="+home, "PACKRUN_TEST_VERSIONS="+strconv.Itoa(versions))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if kill > 0 {
			time.Sleep(kill)
			cmd.Process.Kill() // SIGKILL
		}
		return cmd.Wait()
	}
	ctx := context.Background()
	for i := 0; i < 6; i++ {
		run(time.Duration(30+rand.IntN(300)) * time.Millisecond)
		s, err := OpenStore(ctx, home)
		if err != nil {
			t.Fatalf("after kill %d: %v", i, err)
		}
		if err := s.CheckIntegrity(ctx); err != nil {
			t.Fatalf("after kill %d: %v", i, err)
		}
		all, _ := s.List(ctx)
		for _, p := range all {
			if _, err := s.Open(ctx, p); err != nil {
				t.Fatalf("after kill %d: %v", i, err)
			}
		}
		t.Logf("after kill %d: %d of %d packs installed", i, len(all), versions)
		s.Close()
	}
	if err := run(0); err != nil {
		t.Fatalf("install after kills: %v", err)
	}
	s, _ := OpenStore(ctx, home)
	defer s.Close()
	all, _ := s.List(ctx)
	if len(all) != versions {
		t.Fatalf("%d packs installed, want %d", len(all), versions)
	}
}

// installChild installs vendor.acme.crash@1.0.0..N into the home, signed
// with a key stored there (created on first run).
func installChild(t *testing.T) {
	home := os.Getenv("PACKRUN_TEST_INSTALL_CHILD")
	n, _ := strconv.Atoi(os.Getenv("PACKRUN_TEST_VERSIONS"))
	ctx := context.Background()
	keyPath := filepath.Join(home, "test")
	if _, err := os.Stat(keyPath + ".key"); err != nil {
		if err := GenerateKey(keyPath); err != nil {
			t.Fatal(err)
		}
	}
	key, err := LoadPrivateKey(keyPath + ".key")
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := os.ReadFile(keyPath + ".pub")
	p := NewPolicy()
	p.AddKey("crash", pub, []string{"vendor.acme.*"})
	s, err := OpenStore(ctx, home)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for v := 0; v < n; v++ {
		archive := buildPack(t, "vendor.acme.crash", fmt.Sprintf("1.0.%d", v))
		b, prov, err := Sign(ctx, archive, "vendor.acme.crash", key, testSignOptions())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Install(ctx, p, Signed{Archive: archive, Bundle: b, Provenance: prov}, InstallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
