package packrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/registry"
	"github.com/packrun/packrun/runtime"
)

const helloModule = "examples/hello-c/hello.wasm"

// attempts is every attempt h's store has recorded.
func attempts(t testing.TB, h *Host) []*host.Attempt {
	t.Helper()
	all, err := h.Store().ListAttempts(ctx, host.AttemptFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// greeted checks inv is the hello node greeting name, recorded as pack
// (name@version; "" for a bare module).
func greeted(t testing.TB, inv *Invocation, name, pack string) {
	t.Helper()
	if inv.Result.Outcome != abi.Completed || string(inv.Result.Output) != `{"greeting":"Hello, `+name+`!"}` {
		t.Fatalf("outcome %s, output %s", inv.Result.Outcome, inv.Result.Output)
	}
	if inv.Attempt == nil || inv.Attempt.AttemptID == "" || inv.Attempt.Pack != pack || inv.Attempt.Node != "example.hello" {
		t.Fatalf("attempt %+v, want one of pack %q", inv.Attempt, pack)
	}
}

func TestOpenMustExist(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "a", "home")
	_, err := Open(ctx, missing, Config{MustExist: true})
	if !errors.Is(err, ErrNoHome) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("MustExist on a missing home: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("MustExist created something: %v", err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := Open(ctx, file, Config{MustExist: true}); !errors.Is(err, ErrNoHome) {
		t.Fatalf("MustExist on a file: %v", err)
	}

	h, err := Open(ctx, missing, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	fi, err := os.Stat(missing)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created home: %v %v, want a directory with mode 0700", fi.Mode(), err)
	}
	// Now it exists, MustExist opens it.
	h2, err := Open(ctx, missing, Config{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	h2.Close(ctx)
}

// probeHost runs the probe's probe.host node (which calls config_get for
// key "missing") and returns config_get's status and the length of what
// it returned.
func probeHost(t testing.TB, h *Host) (status, length int) {
	t.Helper()
	inv, err := h.Invoke(ctx, "local.probe", InvokeRequest{Node: "probe.host"})
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Config, ConfigLen int }
	if err := json.Unmarshal(inv.Result.Output, &out); err != nil {
		t.Fatalf("probe output %s: %v", inv.Result.Output, err)
	}
	return out.Config, out.ConfigLen
}

func TestOpenPackConfig(t *testing.T) {
	t.Run("malformed", func(t *testing.T) {
		home := t.TempDir()
		path := filepath.Join(home, PackConfigFile)
		for _, bad := range []string{`{"local.probe":`, `["not", "an", "object"]`} {
			os.WriteFile(path, []byte(bad), 0o600)
			_, err := Open(ctx, home, Config{})
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), path) {
				t.Fatalf("config.json %s: %v, want ErrConfig naming %s", bad, err, path)
			}
		}
	})

	// A valid configuration reaches the pack's config_get; it is read once,
	// at Open.
	f := newFixture(t)
	f.install(t, probe())
	if st, n := probeHost(t, f.Host); st == 0 || n != 0 {
		t.Fatalf("no config.json: config_get status %d, %d bytes; want a miss", st, n)
	}
	path := filepath.Join(f.home, PackConfigFile)
	os.WriteFile(path, []byte(`{"local.probe":{"missing":"now present"}}`), 0o600)
	// Written after Open: this host does not see it.
	if st, n := probeHost(t, f.Host); st == 0 || n != 0 {
		t.Fatalf("config.json written after Open: config_get status %d, %d bytes; want a miss still", st, n)
	}
	h2 := openHost(t, f.home)
	st, n := probeHost(t, h2)
	if want := len(`{"value":"now present"}`); st != 0 || n != want {
		t.Fatalf("config.json read at Open: config_get status %d, %d bytes; want 0, %d", st, n, want)
	}
	// Another pack's configuration is not this one's; and editing the file
	// after Open changes nothing for h2.
	os.WriteFile(path, []byte(`{"local.other":{"missing":"x"}}`), 0o600)
	if st2, n2 := probeHost(t, h2); st2 != st || n2 != n {
		t.Fatalf("config.json edited after Open: config_get status %d, %d bytes; want %d, %d as read at Open", st2, n2, st, n)
	}
	if st, n := probeHost(t, openHost(t, f.home)); st == 0 || n != 0 {
		t.Fatalf("another pack's configuration: config_get status %d, %d bytes; want a miss", st, n)
	}
}

func TestInvokeTargets(t *testing.T) {
	f := newFixture(t)
	in := InvokeRequest{Input: []byte(`{"name":"Ada"}`)}

	inv, err := f.Invoke(ctx, helloModule, in)
	if err != nil {
		t.Fatal(err)
	}
	greeted(t, inv, "Ada", "")

	// A pack file, verified against the home's trust policy first.
	dir := t.TempDir()
	packFile := filepath.Join(dir, "hello.pack")
	writeSigned(t, packFile, f.signed(t, hello("1.0.0")))
	if inv, err = f.Invoke(ctx, packFile, in); err != nil {
		t.Fatal(err)
	}
	greeted(t, inv, "Ada", "local.hello.c@1.0.0")
	if got := refs(t, f.Host); len(got) != 0 {
		t.Fatalf("invoking a pack file installed it: %v", got)
	}

	// An untrusted one is refused, and nothing is recorded.
	recorded := len(attempts(t, f.Host))
	untrusted := filepath.Join(dir, "untrusted.pack")
	writeSigned(t, untrusted, newTestKey(t).sign(t, hello("1.0.0").build(t), "local.hello.c"))
	if _, err := f.Invoke(ctx, untrusted, in); !errors.Is(err, registry.ErrUntrusted) {
		t.Fatalf("untrusted pack file: %v", err)
	}
	if n := len(attempts(t, f.Host)); n != recorded {
		t.Fatalf("the refused pack file recorded %d attempts", n-recorded)
	}

	// Installed packs, by name, version and range.
	f.install(t, hello("1.0.0"))
	f.install(t, probe())
	for _, ref := range []string{"local.hello.c", "local.hello.c@1.0.0", "local.hello.c@^1"} {
		inv, err := f.Invoke(ctx, ref, in)
		if err != nil {
			t.Fatalf("invoke %s: %v", ref, err)
		}
		greeted(t, inv, "Ada", "local.hello.c@1.0.0")
	}

	recorded = len(attempts(t, f.Host))
	for _, tc := range []struct {
		target string
		node   string
		want   error
		says   []string
	}{
		{target: dir, want: ErrUsage, says: []string{dir + " is a directory", "pack it", "packrun pack " + dir}},
		{target: filepath.Join(dir, "missing.wasm"), want: ErrNotFound, says: []string{"missing.wasm"}},
		{target: filepath.Join(dir, "sub", "missing"), want: ErrNotFound},
		{target: filepath.Join(dir, "missing.pack"), want: ErrNotFound},
		{target: "local.nothing", want: host.ErrPackNotInstalled, says: []string{"local.nothing"}},
		{target: "local.hello.c@2", want: host.ErrPackNotInstalled, says: []string{"installed: 1.0.0"}},
		{target: "local.probe", node: "probe.nope", want: runtime.ErrUnknownNode, says: []string{"probe.nope", "probe.host", "probe.echo"}},
	} {
		_, err := f.Invoke(ctx, tc.target, InvokeRequest{Node: tc.node})
		if !errors.Is(err, tc.want) {
			t.Errorf("invoke %s (node %q): %v, want %v", tc.target, tc.node, err, tc.want)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("invoke %s (node %q): %q does not say %q", tc.target, tc.node, err, s)
			}
		}
	}
	if n := len(attempts(t, f.Host)); n != recorded {
		t.Fatalf("invocations that could not run recorded %d attempts", n-recorded)
	}
}

// A request is checked before anything runs, whatever the target: the
// runtime is not even started, and no attempt is recorded.
func TestInvokeRequestCheckedFirst(t *testing.T) {
	f := newFixture(t)
	packFile := filepath.Join(t.TempDir(), "hello.pack")
	writeSigned(t, packFile, f.signed(t, hello("1.0.0")))
	for _, tc := range []struct {
		name string
		req  InvokeRequest
		says string
	}{
		{"negative attempt", InvokeRequest{Attempt: -1}, "attempt -1"},
		{"memory above the host maximum", InvokeRequest{Limits: runtime.Limits{MemoryBytes: 64 << 30}}, ""},
		{"timeout above the host maximum", InvokeRequest{Limits: runtime.Limits{Timeout: time.Hour}}, ""},
		{"memory below a page", InvokeRequest{Limits: runtime.Limits{MemoryBytes: 1 << 10}}, "64 KiB page"},
	} {
		// The pack target is not installed: the request is refused for
		// itself, before the pack is looked up.
		for _, target := range []string{helloModule, packFile, "local.hello.c"} {
			_, err := f.Invoke(ctx, target, tc.req)
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s, %s: %v, want ErrUsage", tc.name, target, err)
			}
		}
	}
	// The host maxima themselves are accepted.
	if _, err := f.Invoke(ctx, helloModule, InvokeRequest{Limits: runtime.Limits{MemoryBytes: runtime.MaxLimits().MemoryBytes, Timeout: runtime.MaxLimits().Timeout}}); err != nil {
		t.Fatalf("limits at the host maxima: %v", err)
	}
	if n := len(attempts(t, f.Host)); n != 1 {
		t.Fatalf("%d attempts recorded, want only the valid one", n)
	}
}

// The runtime is started by nothing that refuses a request.
func TestInvokeRequestRefusedWithoutRuntime(t *testing.T) {
	f := newFixture(t)
	if _, err := f.Invoke(ctx, helloModule, InvokeRequest{Attempt: -1}); !errors.Is(err, ErrUsage) {
		t.Fatal(err)
	}
	if f.started.Load() != nil || f.rt != nil {
		t.Fatal("a refused request started the runtime")
	}
	if n := len(attempts(t, f.Host)); n != 0 {
		t.Fatalf("%d attempts recorded", n)
	}
}

// A second Host on the same home sees what the first installs and
// uninstalls, without being reopened.
func TestPackIndexSharedAcrossHosts(t *testing.T) {
	f := newFixture(t)
	other := openHost(t, f.home)
	if got := refs(t, other); len(got) != 0 { // its index is built, empty
		t.Fatalf("packs: %v", got)
	}
	if _, err := other.Invoke(ctx, "local.hello.c", InvokeRequest{}); !errors.Is(err, host.ErrPackNotInstalled) {
		t.Fatalf("before install: %v", err)
	}
	f.install(t, hello("1.0.0"))
	if got := refs(t, other); !slices.Equal(got, []string{"local.hello.c@1.0.0"}) {
		t.Fatalf("after install, the other host lists %v", got)
	}
	inv, err := other.Invoke(ctx, "local.hello.c", InvokeRequest{Input: []byte(`{"name":"B"}`)})
	if err != nil {
		t.Fatal(err)
	}
	greeted(t, inv, "B", "local.hello.c@1.0.0")
	f.install(t, hello("1.1.0"))
	if p, _, err := other.Pack(ctx, "local.hello.c"); err != nil || p.Version != "1.1.0" {
		t.Fatalf("after a second install, the other host resolves %v %v", p, err)
	}
	if _, err := f.Uninstall(ctx, "local.hello.c"); err != nil {
		t.Fatal(err)
	}
	if got := refs(t, other); len(got) != 0 {
		t.Fatalf("after uninstall, the other host lists %v", got)
	}
	if _, err := other.Invoke(ctx, "local.hello.c", InvokeRequest{}); !errors.Is(err, host.ErrPackNotInstalled) {
		t.Fatalf("after uninstall, the other host: %v", err)
	}
	if _, err := other.OpenPack(ctx, "local.hello.c@1.0.0"); !errors.Is(err, host.ErrPackNotInstalled) {
		t.Fatalf("after uninstall, the other host opens: %v", err)
	}
}

func TestResolveVersions(t *testing.T) {
	f := newFixture(t)
	for _, v := range []string{"1.0.0", "2.0.0", "1.1.0"} {
		f.install(t, hello(v))
	}
	for ref, want := range map[string]string{
		"local.hello.c@^1": "1.1.0", "local.hello.c@1.1.0": "1.1.0", "local.hello.c": "2.0.0",
		"local.hello.c@1.0.0": "1.0.0", "local.hello.c@~1.0": "1.0.0", "local.hello.c@2.x": "2.0.0",
	} {
		p, m, err := f.Pack(ctx, ref)
		if err != nil || p.Version != want || m.Version != want {
			t.Errorf("pack %s: %v %v, want %s", ref, p, err, want)
			continue
		}
		inv, err := f.Invoke(ctx, ref, InvokeRequest{Input: []byte(`{"name":"v"}`)})
		if err != nil {
			t.Fatalf("invoke %s: %v", ref, err)
		}
		greeted(t, inv, "v", "local.hello.c@"+want)
	}
	for _, ref := range []string{"local.hello.c@^3", "local.hello.c@1.2.0", "local.hello.c@>2.0.0"} {
		_, err := f.Invoke(ctx, ref, InvokeRequest{})
		if !errors.Is(err, host.ErrPackNotInstalled) || !strings.Contains(err.Error(), "installed: 2.0.0, 1.1.0, 1.0.0") {
			t.Errorf("invoke %s: %v, want not installed naming the installed versions", ref, err)
		}
		if _, _, err := f.Pack(ctx, ref); !errors.Is(err, host.ErrPackNotInstalled) || !strings.Contains(err.Error(), "installed: 2.0.0, 1.1.0, 1.0.0") {
			t.Errorf("pack %s: %v", ref, err)
		}
	}
	if _, _, err := f.Pack(ctx, "local.hello.c@not a range"); !errors.Is(err, ErrUsage) {
		t.Errorf("malformed range: %v", err)
	}
}

// A pack needing an ABI minor newer than this host serves is refused at
// Install (by file too), and nothing is stored.
func TestInstallRefusesNewerABIMinor(t *testing.T) {
	f := newFixture(t)
	s := hello("1.0.0")
	s.abiMinor = abi.Newest().Minor + 1
	req := f.signed(t, s)
	if _, _, err := f.Install(ctx, req, InstallOptions{}); !errors.Is(err, runtime.ErrRefused) {
		t.Fatalf("install: %v, want runtime.ErrRefused", err)
	}
	file := filepath.Join(t.TempDir(), "newer.pack")
	writeSigned(t, file, req)
	if _, _, err := f.InstallFile(ctx, file, PackFiles{}); !errors.Is(err, runtime.ErrRefused) {
		t.Fatalf("install file: %v, want runtime.ErrRefused", err)
	}
	if got := refs(t, f.Host); len(got) != 0 {
		t.Fatalf("installed %v", got)
	}
	if n := blobCount(t, f.home); n != 0 {
		t.Fatalf("%d blobs stored", n)
	}
	// The served minor itself installs.
	f.install(t, hello("1.0.0"))
}

// An openwop registry pack (a .tgz and its detached Ed25519 signature)
// exports with its signature beside it, byte for byte, and the export
// installs in another home trusting the same registry key.
func TestExportOpenwopSignature(t *testing.T) {
	rk := newRegistryKey(t)
	home := filepath.Join(t.TempDir(), "home")
	p := registry.NewPolicy()
	rk.trust(t, p, "local.*")
	savePolicy(t, home, p)
	h := openHost(t, home)

	req := rk.sign(hello("1.0.0").build(t))
	tgz := filepath.Join(t.TempDir(), "local.hello.c-1.0.0.tgz")
	writeSigned(t, tgz, req)
	inst, _, err := h.InstallFile(ctx, tgz, PackFiles{})
	if err != nil {
		t.Fatal(err)
	}
	if inst.Signer != "registry-key:openwop" || inst.SignatureSHA256 == "" || inst.BundleSHA256 != "" {
		t.Fatalf("installed %+v", inst)
	}

	out := t.TempDir()
	paths, err := h.Export(ctx, "local.hello.c", out)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(out, "local.hello.c-1.0.0.pack")
	if !slices.Equal(paths, []string{base, base + ".sig"}) {
		t.Fatalf("export wrote %v", paths)
	}
	if !bytes.Equal(mustRead(t, base), req.Archive) || !bytes.Equal(mustRead(t, base+".sig"), req.Signature) {
		t.Fatal("export differs from what was installed")
	}

	home2 := filepath.Join(t.TempDir(), "home2")
	savePolicy(t, home2, p)
	h2 := openHost(t, home2)
	inst2, already, err := h2.InstallFile(ctx, base, PackFiles{})
	if err != nil || already {
		t.Fatalf("install the export in another home: %v", err)
	}
	if inst2.SHA256 != inst.SHA256 || inst2.SignatureSHA256 != inst.SignatureSHA256 || inst2.Signer != inst.Signer {
		t.Fatalf("installed elsewhere as %+v, want %+v", inst2, inst)
	}
	inv, err := h2.Invoke(ctx, "local.hello.c@1.0.0", InvokeRequest{Input: []byte(`{"name":"wop"}`)})
	if err != nil {
		t.Fatal(err)
	}
	greeted(t, inv, "wop", "local.hello.c@1.0.0")
	// Without its signature, the export is not trusted.
	os.Remove(base + ".sig")
	if _, _, err := openHost(t, filepath.Join(t.TempDir(), "home3")).InstallFile(ctx, base, PackFiles{TrustFile: filepath.Join(home2, "trust.json")}); !errors.Is(err, registry.ErrUntrusted) {
		t.Fatalf("export without its signature: %v", err)
	}
}
