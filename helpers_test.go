package packrun

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
)

var ctx = context.Background()

// testKey is an in-memory ECDSA P-256 signing key and its PEM public key.
type testKey struct {
	priv   *ecdsa.PrivateKey
	pubPEM []byte
}

func newTestKey(t testing.TB) testKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return testKey{priv: priv, pubPEM: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})}
}

const testBuilder = "https://ci.example/builders/packs@v1"

func testSignOptions() registry.SignOptions {
	return registry.SignOptions{BuilderID: testBuilder, SourceDigest: strings.Repeat("0123456789abcdef", 4),
		BuiltAt: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
}

// sign signs archive as the pack name with k: a Signed with a bundle and
// a provenance bundle.
func (k testKey) sign(t testing.TB, archive []byte, name string) registry.Signed {
	t.Helper()
	b, p, err := registry.Sign(ctx, archive, name, k.priv, testSignOptions())
	if err != nil {
		t.Fatal(err)
	}
	return registry.Signed{Archive: archive, Bundle: b, Provenance: p}
}

// trustKey returns a policy trusting k (as "test") for namespaces.
func trustKey(t testing.TB, k testKey, namespaces ...string) *registry.Policy {
	t.Helper()
	p := registry.NewPolicy()
	if err := p.AddKey("test", k.pubPEM, namespaces); err != nil {
		t.Fatal(err)
	}
	return p
}

// savePolicy writes p as the trust policy of home (the default TrustFile).
func savePolicy(t testing.TB, home string, p *registry.Policy) {
	t.Helper()
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := p.Save(filepath.Join(home, "trust.json")); err != nil {
		t.Fatal(err)
	}
}

// registryKey is an Ed25519 openwop registry key, and the policy entry
// trusting it for namespaces.
type registryKey struct {
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
}

func newRegistryKey(t testing.TB) registryKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return registryKey{pub, priv}
}

func (k registryKey) trust(t testing.TB, p *registry.Policy, namespaces ...string) {
	t.Helper()
	if err := p.AddRegistryKey("openwop", []byte(base64.StdEncoding.EncodeToString(k.pub)), namespaces); err != nil {
		t.Fatal(err)
	}
}

// sign is an openwop registry pack: the archive and its detached Ed25519
// signature (base64, as the registry serves it).
func (k registryKey) sign(archive []byte) registry.Signed {
	return registry.Signed{Archive: archive, Signature: []byte(base64.StdEncoding.EncodeToString(ed25519.Sign(k.priv, archive)) + "\n")}
}

// packSpec is a pack to build from a module in the tree.
type packSpec struct {
	name, version string
	module        string // path from the repository root
	abiMinor      int
	extra         string            // more manifest members, each followed by a comma
	nodes         string            // the manifest's nodes array
	assets        map[string]string // path under assets/ -> content
}

// hello is the C hello example's module (its pack name is local.hello.c)
// with one node.
func hello(version string) packSpec {
	return packSpec{name: "local.hello.c", version: version, module: "examples/hello-c/hello.wasm",
		nodes: `[{"typeId":"example.hello","kind":"node"}]`}
}

// probe is testdata/modules/probe.wasm (pack name local.probe) serving
// probe.host (every host service, config_get among them) and probe.echo,
// granted the config service only.
func probe() packSpec {
	return packSpec{name: "local.probe", version: "1.0.0", module: "testdata/modules/probe.wasm",
		extra: `"grants":{"services":["config"]},`,
		nodes: `[{"typeId":"probe.host","kind":"node"},{"typeId":"probe.echo","kind":"node"}]`}
}

// build packs s (deterministically: the same spec gives the same bytes).
func (s packSpec) build(t testing.TB) []byte {
	t.Helper()
	wasm, err := os.ReadFile(s.module)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum := sha256.Sum256(wasm)
	base := filepath.Base(s.module)
	manifest := fmt.Sprintf(`{"name":%q,"version":%q,%s"runtime":{"language":"wasm","abi":{"version":1,"minor":%d},
		"modules":[{"path":%q,"sha256":%q}]},"nodes":%s}`, s.name, s.version, s.extra, s.abiMinor, base, hex.EncodeToString(sum[:]), s.nodes)
	if err := os.WriteFile(filepath.Join(dir, "pack.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, base), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	for p, content := range s.assets {
		full := filepath.Join(dir, packs.AssetsDir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := packs.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openHost opens home, closing it when the test ends.
func openHost(t testing.TB, home string) *Host {
	t.Helper()
	h, err := Open(ctx, home, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	return h
}

// fixture is a host whose trust policy (its home's trust.json) trusts key
// for local.* and vendor.acme.*.
type fixture struct {
	*Host
	home string
	key  testKey
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	k := newTestKey(t)
	savePolicy(t, home, trustKey(t, k, "local.*", "vendor.acme.*"))
	return &fixture{Host: openHost(t, home), home: home, key: k}
}

// signed builds s and signs it with the fixture's key.
func (f *fixture) signed(t testing.TB, s packSpec) registry.Signed {
	t.Helper()
	return f.key.sign(t, s.build(t), s.name)
}

// install installs s signed by the fixture's key, under the host's policy.
func (f *fixture) install(t testing.TB, s packSpec) registry.Signed {
	t.Helper()
	req := f.signed(t, s)
	if _, already, err := f.Install(ctx, req, InstallOptions{}); err != nil || already {
		t.Fatalf("install %s@%s: %v (already %v)", s.name, s.version, err, already)
	}
	return req
}

// writeSigned writes a signed pack as path and its signatures beside it,
// where ReadSigned looks for them.
func writeSigned(t testing.TB, path string, s registry.Signed) {
	t.Helper()
	for suffix, b := range map[string][]byte{"": s.Archive, ".sigstore.json": s.Bundle, ".provenance.sigstore.json": s.Provenance, ".sig": s.Signature} {
		if b == nil {
			continue
		}
		if err := os.WriteFile(path+suffix, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// blobCount is the number of files in home's pack blob directory.
func blobCount(t testing.TB, home string) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(home, "blobs", "sha256"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(entries)
}

// refs lists the installed packs as name@version.
func refs(t testing.TB, h *Host) []string {
	t.Helper()
	all, err := h.Packs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, p := range all {
		out = append(out, p.Ref())
	}
	return out
}
