package packrun

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
	"github.com/packrun/packrun/runtime"
)

// Installing, listing, resolving, opening, exporting and uninstalling
// packs through the Host, end to end: what was installed comes back out
// byte for byte, installs under another home, and uninstalling everything
// leaves no blob behind.
func TestInstallListResolveExportUninstall(t *testing.T) {
	f := newFixture(t)
	var first registry.Signed // what was installed as 1.0.0
	for _, v := range []string{"1.0.0", "1.2.0", "2.0.0-rc.1", "2.0.0"} {
		req := f.install(t, hello(v))
		if v == "1.0.0" {
			first = req
		}
	}
	// Packing is deterministic, so this is the identical pack (signed
	// again, so with other bundle bytes): a no-op that keeps the first
	// bundles.
	again := f.signed(t, hello("1.0.0"))
	if bytes.Equal(again.Bundle, first.Bundle) {
		t.Fatal("signing again gave the same bundle: the test cannot tell which was kept")
	}
	if p, already, err := f.Install(ctx, again, InstallOptions{}); err != nil || !already || p.Version != "1.0.0" {
		t.Fatalf("reinstall: %v %v already=%v", p, err, already)
	}
	if got := refs(t, f.Host); !slices.Equal(got, []string{"local.hello.c@2.0.0", "local.hello.c@2.0.0-rc.1", "local.hello.c@1.2.0", "local.hello.c@1.0.0"}) {
		t.Fatalf("packs: %v", got)
	}
	for ref, want := range map[string]string{
		"local.hello.c": "2.0.0", "local.hello.c@1.2.0": "1.2.0", "local.hello.c@^1": "1.2.0",
		"local.hello.c@~1.0": "1.0.0", "local.hello.c@>=1.1 <2": "1.2.0", "local.hello.c@2.0.0-rc.1": "2.0.0-rc.1",
	} {
		p, m, err := f.Pack(ctx, ref)
		if err != nil || p.Version != want || m.Version != want {
			t.Errorf("pack %s: %v %v, want %s", ref, p, err, want)
		}
	}
	for _, ref := range []string{"local.other", "local.hello.c@3", "local.hello.c@1.0.1"} {
		if _, _, err := f.Pack(ctx, ref); !errors.Is(err, host.ErrPackNotInstalled) {
			t.Errorf("pack %s: %v", ref, err)
		}
	}
	p, _, _ := f.Pack(ctx, "local.hello.c@1.0.0")
	if p.Signer != "key:test" || p.KeyID == "" || p.Provenance == nil || p.Provenance.BuilderID != testBuilder {
		t.Fatalf("recorded verdict: %+v", p)
	}
	arch, err := f.OpenPack(ctx, "local.hello.c@1.0.0")
	if err != nil || arch.Manifest.Version != "1.0.0" || arch.SHA256 != p.SHA256 {
		t.Fatalf("open: %v", err)
	}
	out := t.TempDir()
	paths, err := f.Export(ctx, "local.hello.c@1.0.0", out)
	if err != nil || len(paths) != 3 {
		t.Fatalf("export: %v %v", paths, err)
	}
	base := filepath.Join(out, "local.hello.c-1.0.0.pack")
	if want := []string{base, base + ".sigstore.json", base + ".provenance.sigstore.json"}; !slices.Equal(paths, want) {
		t.Fatalf("export wrote %v, want %v", paths, want)
	}
	for i, want := range [][]byte{first.Archive, first.Bundle, first.Provenance} {
		if got := mustRead(t, paths[i]); !bytes.Equal(got, want) {
			t.Errorf("export %s differs from what was installed", paths[i])
		}
	}
	// The export installs under another home, as a file with its
	// signatures beside it.
	home2 := filepath.Join(t.TempDir(), "home2")
	savePolicy(t, home2, trustKey(t, f.key, "local.*"))
	g := openHost(t, home2)
	if p2, already, err := g.InstallFile(ctx, paths[0], PackFiles{}); err != nil || already || p2.SHA256 != p.SHA256 || p2.Provenance == nil {
		t.Fatalf("install export elsewhere: %+v %v", p2, err)
	}
	removed, err := f.Uninstall(ctx, "local.hello.c@^1")
	if err != nil || len(removed) != 2 {
		t.Fatalf("uninstall ^1: %v %v", removed, err)
	}
	if got := refs(t, f.Host); !slices.Equal(got, []string{"local.hello.c@2.0.0", "local.hello.c@2.0.0-rc.1"}) {
		t.Fatalf("after uninstall ^1: %v", got)
	}
	if _, err := f.Uninstall(ctx, "local.hello.c"); err != nil {
		t.Fatal(err)
	}
	if got := refs(t, f.Host); len(got) != 0 {
		t.Fatalf("after uninstalling everything: %v", got)
	}
	if n := blobCount(t, f.home); n != 0 {
		t.Fatalf("%d blobs left after uninstalling everything", n)
	}
	if _, err := f.Uninstall(ctx, "local.hello.c"); !errors.Is(err, host.ErrPackNotInstalled) {
		t.Fatalf("uninstall of nothing: %v", err)
	}
}

// Every refusal, whether of the signatures, the archive, the modules or
// the store, leaves the store as it was: no pack, no blob.
func TestInstallRefusals(t *testing.T) {
	f := newFixture(t)
	good := f.install(t, hello("1.0.0"))
	other := f.signed(t, packSpec{name: "local.other", version: "1.0.0", module: "examples/hello-c/hello.wasm", nodes: `[{"typeId":"example.hello","kind":"node"}]`})
	tampered := bytes.Clone(good.Archive)
	tampered[len(tampered)/2] ^= 1
	// A different archive under the same name@version (it differs by its
	// description).
	diff := hello("1.0.0")
	diff.extra = `"description":"different",`
	outside := newTestKey(t)
	garbage := []byte("not a gzip stream")
	foreign := hello("1.0.0")
	foreign.name = "vendor.other.tool"
	newer := hello("1.1.0")
	newer.abiMinor = abi.Newest().Minor + 1
	missingNode := hello("1.3.0")
	missingNode.nodes = `[{"typeId":"example.hello","kind":"node"},{"typeId":"example.absent","kind":"node"}]`
	cases := []struct {
		name string
		req  registry.Signed
		want error
	}{
		// The signature is checked before the archive is opened.
		{"tampered archive", registry.Signed{Archive: tampered, Bundle: good.Bundle, Provenance: good.Provenance}, registry.ErrUntrusted},
		{"untrusted key", outside.sign(t, other.Archive, "local.other"), registry.ErrUntrusted},
		{"not a pack, untrusted key", outside.sign(t, garbage, "local.other"), registry.ErrUntrusted},
		{"not a pack, trusted key", f.key.sign(t, garbage, "local.other"), packs.ErrInvalidPack},
		{"trusted key outside its namespace", f.key.sign(t, foreign.build(t), foreign.name), registry.ErrUntrusted},
		{"unsigned", registry.Signed{Archive: good.Archive}, registry.ErrUntrusted},
		{"swapped bundles", registry.Signed{Archive: good.Archive, Bundle: good.Provenance, Provenance: good.Bundle}, registry.ErrUntrusted},
		{"other pack's provenance", registry.Signed{Archive: good.Archive, Bundle: good.Bundle, Provenance: other.Provenance}, registry.ErrUntrusted},
		{"same name@version, different pack", f.signed(t, diff), host.ErrPackConflict},
		// The modules are loaded before anything is stored.
		{"module says another pack", other, ErrRefusedPack},
		{"manifest node the module does not serve", f.signed(t, missingNode), ErrRefusedPack},
		{"ABI minor newer than served", f.signed(t, newer), runtime.ErrRefused},
	}
	before := refs(t, f.Host)
	blobsBefore := blobCount(t, f.home)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, _, err := f.Install(ctx, c.req, InstallOptions{})
			if !errors.Is(err, c.want) || p != nil {
				t.Fatalf("err = %v (pack %v), want %v", err, p, c.want)
			}
		})
	}
	if after := refs(t, f.Host); !slices.Equal(after, before) {
		t.Fatalf("refused installs changed the store: %v -> %v", before, after)
	}
	if n := blobCount(t, f.home); n != blobsBefore {
		t.Fatalf("refused installs changed the blobs: %d -> %d", blobsBefore, n)
	}
	if err := f.store.CheckPackIntegrity(ctx); err != nil {
		t.Fatal(err)
	}
	// The refused ABI: it names what the pack needs and what is served.
	_, _, err := f.Install(ctx, f.signed(t, newer), InstallOptions{})
	if want := fmt.Sprintf("needs host ABI 1.%d", newer.abiMinor); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("ABI refusal %q does not say %q", err, want)
	}
}

// zeroBomb is a pack of size bytes of zeros in one asset (plus a valid
// manifest and module), gzip-compressed as it is generated.
func zeroBomb(t testing.TB, size int64) []byte {
	t.Helper()
	spec := hello("1.0.0")
	wasm := mustRead(t, spec.module)
	// The manifest as build writes it.
	arch, err := packs.Read(bytes.NewReader(spec.build(t)), packs.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	write := func(name string, size int64, data io.Reader) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(tw, data, size); err != nil {
			t.Fatal(err)
		}
	}
	write("assets/zeros", size, zeros{})
	write("hello.wasm", int64(len(wasm)), bytes.NewReader(wasm))
	write("pack.json", int64(len(arch.ManifestBytes)), bytes.NewReader(arch.ManifestBytes))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// A gzip bomb is refused at Install, signed by a stranger (before it is
// opened: registry's TestUntrustedBombIsNotOpened) or by a trusted key (at
// the compression ratio: TestTrustedBombStopsAtTheRatio), and leaves
// nothing in the store.
func TestInstallRefusesBombs(t *testing.T) {
	f := newFixture(t)
	bomb := zeroBomb(t, 128<<20)
	stranger := newTestKey(t)
	for _, tc := range []struct {
		name string
		req  registry.Signed
		opts InstallOptions
		want error
	}{
		{"untrusted key", stranger.sign(t, bomb, "local.hello.c"), InstallOptions{}, registry.ErrUntrusted},
		{"unsigned", registry.Signed{Archive: bomb}, InstallOptions{}, registry.ErrUntrusted},
		{"trusted key", f.key.sign(t, bomb, "local.hello.c"), InstallOptions{}, packs.ErrTooLarge},
		{"unsigned, AllowUnsignedUnsafe", registry.Signed{Archive: bomb}, InstallOptions{AllowUnsignedUnsafe: true}, packs.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := f.Install(ctx, tc.req, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if got := refs(t, f.Host); len(got) != 0 {
				t.Errorf("store lists %v", got)
			}
			if n := blobCount(t, f.home); n != 0 {
				t.Errorf("%d blobs stored", n)
			}
		})
	}
}

// TestInstallSurvivesKill kills a process that is installing packs at
// random moments in the middle of its installs; after each kill the store
// must be whole (every listed pack complete and intact: the old state or
// the new one), and the installs must then complete.
func TestInstallSurvivesKill(t *testing.T) {
	if os.Getenv("PACKRUN_TEST_INSTALL_CHILD") != "" {
		installChild(t)
		return
	}
	home := t.TempDir()
	const versions = 60
	// run starts the child; with kill set, it waits until the child has
	// installed 1 to 8 more packs and kills it (SIGKILL) at a random moment
	// of the next install.
	run := func(kill bool) error {
		cmd := exec.Command(os.Args[0], "-test.run=^TestInstallSurvivesKill$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PACKRUN_TEST_INSTALL_CHILD="+home, "PACKRUN_TEST_VERSIONS="+strconv.Itoa(versions))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		if kill {
			wait, seen := 1+mrand.IntN(8), 0
			last := time.Now()
			var each time.Duration
			for seen < wait && lines.Scan() {
				if strings.HasPrefix(lines.Text(), "installed ") {
					seen++
					each, last = time.Since(last), time.Now()
				}
			}
			time.Sleep(time.Duration(mrand.Int64N(int64(each) + 1)))
			cmd.Process.Kill()
		}
		io.Copy(io.Discard, stdout)
		return cmd.Wait()
	}
	installed, interrupted := 0, false
	for i := 0; i < 6; i++ {
		run(true)
		h, err := Open(ctx, home, Config{MustExist: true})
		if err != nil {
			t.Fatalf("after kill %d: %v", i, err)
		}
		if err := h.store.CheckPackIntegrity(ctx); err != nil {
			t.Fatalf("after kill %d: %v", i, err)
		}
		all, err := h.Packs(ctx)
		if err != nil {
			t.Fatalf("after kill %d: %v", i, err)
		}
		for _, p := range all {
			if _, err := h.OpenPack(ctx, p.Ref()); err != nil {
				t.Fatalf("after kill %d: %v", i, err)
			}
		}
		if len(all) < installed {
			t.Fatalf("after kill %d: %d packs installed, %d before", i, len(all), installed)
		}
		installed = len(all)
		interrupted = interrupted || installed < versions
		t.Logf("after kill %d: %d of %d packs installed", i, installed, versions)
		h.Close(ctx)
	}
	if !interrupted {
		t.Fatal("every kill came after the last install: nothing was interrupted")
	}
	if err := run(false); err != nil {
		t.Fatalf("install after kills: %v", err)
	}
	h, err := Open(ctx, home, Config{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	if err := h.store.CheckPackIntegrity(ctx); err != nil {
		t.Fatal(err)
	}
	if all, _ := h.Packs(ctx); len(all) != versions {
		t.Fatalf("%d packs installed, want %d", len(all), versions)
	}
}

// installChild installs local.hello.c@1.0.0..N into the home, signed with
// a key stored there and trusted by the home's policy (both created on
// first run).
func installChild(t *testing.T) {
	home := os.Getenv("PACKRUN_TEST_INSTALL_CHILD")
	n, _ := strconv.Atoi(os.Getenv("PACKRUN_TEST_VERSIONS"))
	keyPath := filepath.Join(home, "test")
	if _, err := os.Stat(keyPath + ".key"); err != nil {
		if err := registry.GenerateKey(keyPath); err != nil {
			t.Fatal(err)
		}
		p := registry.NewPolicy()
		if err := p.AddKey("crash", mustRead(t, keyPath+".pub"), []string{"local.*"}); err != nil {
			t.Fatal(err)
		}
		if err := p.Save(filepath.Join(home, "trust.json")); err != nil {
			t.Fatal(err)
		}
	}
	key, err := registry.LoadPrivateKey(keyPath + ".key")
	if err != nil {
		t.Fatal(err)
	}
	h := openHost(t, home)
	for v := 0; v < n; v++ {
		archive := hello(fmt.Sprintf("1.0.%d", v)).build(t)
		b, prov, err := registry.Sign(ctx, archive, "local.hello.c", key, testSignOptions())
		if err != nil {
			t.Fatal(err)
		}
		p, already, err := h.Install(ctx, registry.Signed{Archive: archive, Bundle: b, Provenance: prov}, InstallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !already {
			fmt.Println("installed", p.Ref())
		}
	}
}

// BenchmarkVerifyInstall2MB: verify (signature + provenance + archive +
// digests), load the module and install a 2 MB pack (the C hello module
// plus 2 MB of incompressible assets) into a store, uninstalled again
// between iterations (untimed). Verification alone is registry's
// BenchmarkVerify2MB.
func BenchmarkVerifyInstall2MB(b *testing.B) {
	dir := b.TempDir()
	spec := hello("1.0.0")
	wasm := mustRead(b, spec.module)
	if err := os.MkdirAll(filepath.Join(dir, "assets"), 0o755); err != nil {
		b.Fatal(err)
	}
	blob := make([]byte, 2<<20)
	rand.Read(blob)
	os.WriteFile(filepath.Join(dir, "assets", "data.bin"), blob, 0o644)
	os.WriteFile(filepath.Join(dir, "hello.wasm"), wasm, 0o644)
	arch, err := packs.Read(bytes.NewReader(spec.build(b)), packs.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "pack.json"), arch.ManifestBytes, 0o644)
	archive, err := packs.Pack(dir)
	if err != nil {
		b.Fatal(err)
	}
	f := newFixture(b)
	req := f.key.sign(b, archive, spec.name)
	// The runtime starts on first use: not part of what is measured.
	if _, err := f.Runtime(ctx); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(archive)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, already, err := f.Install(ctx, req, InstallOptions{}); err != nil || already {
			b.Fatalf("install: %v (already %v)", err, already)
		}
		b.StopTimer()
		if _, err := f.Uninstall(ctx, spec.name); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
