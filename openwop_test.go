package packrun

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"

	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/registry"
)

// owName and owNode are what testdata/modules/openwop_hello.wasm declares:
// names only openwop's grammar admits.
const (
	owName = "core.ow_t.helloPack"
	owNode = "core.ow_t.greet"
)

// owManifest is an openwop pack.json as published (rust-hello's shape:
// runtime.entry naming a build path, the module shipped under dist/),
// with signing (a JSON member followed by a comma, or "") and
// deliberately not canonical: spaces, keys out of order, an escaped
// character and extension keys.
func owManifest(signing string) string {
	return fmt.Sprintf(`{ "version": "1.0.0", "name": %q, %s
  "description": "openwop test pack \u2014 greets",
  "engines": {"openwop": ">=1.1 <2.0.0"},
  "nodes": [{"typeId": %q, "version": "1.0.0", "category": "data", "role": "pure", "label": "Greet", "x-ui": {"icon": "wave"}}],
  "runtime": {"language": "wasm", "entry": "target/wasm32-unknown-unknown/release/openwop_hello.wasm", "format": "wasm",
    "minRuntimeVersion": "1", "wasm": {"abiVersion": 1, "memoryPagesInitial": 1, "memoryPagesMax": 64}},
  "openwop-build": {"tool": "test"}, "author": "packrun tests", "keywords": ["test"]
}`, owName, signing, owNode)
}

// owFiles are the files of an openwop pack with manifest pj.
func owFiles(t testing.TB, pj string) map[string][]byte {
	return map[string][]byte{
		"pack.json":                 []byte(pj),
		"README.md":                 []byte("# test\n"),
		"dist/openwop_hello.wasm":   mustRead(t, "testdata/modules/openwop_hello.wasm"),
		"schemas/greet.input.json":  []byte(`{"type":"object"}`),
		"keys/registry-test-1.pem":  []byte("not used: trust comes from the policy\n"),
		"README-extra/notes.txt":    []byte("kept, never run\n"),
		"dist/unrelated/other.data": []byte("x"),
	}
}

// owKey is an openwop registry key, trusted as keyID for namespaces.
type owKey struct {
	keyID string
	priv  ed25519.PrivateKey
	pub   ed25519.PublicKey
}

func newOwKey(t testing.TB, keyID string) owKey {
	k := newRegistryKey(t)
	return owKey{keyID: keyID, priv: k.priv, pub: k.pub}
}

func (k owKey) trust(t testing.TB, home string, namespaces ...string) {
	t.Helper()
	p := registry.NewPolicy()
	if err := p.AddRegistryKey(k.keyID, []byte(base64.StdEncoding.EncodeToString(k.pub)), namespaces); err != nil {
		t.Fatal(err)
	}
	savePolicy(t, home, p)
}

// sign is the base64 Ed25519 signature of msg, as openwop registries serve it.
func (k owKey) sign(msg []byte) []byte {
	return []byte(base64.StdEncoding.EncodeToString(ed25519.Sign(k.priv, msg)) + "\n")
}

// canonicalSig is the v2 signature of pack.json: over its JCS form.
func (k owKey) canonicalSig(t testing.TB, pj string) []byte {
	t.Helper()
	canon, err := jsoncanonicalizer.Transform([]byte(pj))
	if err != nil {
		t.Fatal(err)
	}
	if string(canon) == pj {
		t.Fatal("the test manifest is already canonical: the test would not tell the forms apart")
	}
	return k.sign(canon)
}

func v2Signing(keyID string) string {
	return fmt.Sprintf(`"signing": {"scheme": "ed25519-canonical-json", "keyId": %q},`, keyID)
}

// owHost is a host whose home trusts k for namespaces.
func owHost(t testing.TB, k owKey, namespaces ...string) (*Host, string) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	k.trust(t, home, namespaces...)
	return openHost(t, home), home
}

// greet invokes the installed openwop pack's node.
func greet(t testing.TB, h *Host) {
	t.Helper()
	inv, err := h.Invoke(ctx, owName, InvokeRequest{Input: json.RawMessage(`{"name":"wop"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(inv.Result.Output); got != `{"greeting":"Hello, wop!"}` {
		t.Fatalf("output %s", got)
	}
}

// owRefusal is an install that must be refused with an openwop code ("":
// none) under a policy trusting the key for namespaces (nil: core.ow_t.*).
type owRefusal struct {
	name       string
	req        registry.Signed
	namespaces []string
	code       string
}

// checkRefusals installs each case into a fresh home: each is refused with
// its code, named in the message, and nothing is stored.
func checkRefusals(t *testing.T, k owKey, cases []owRefusal) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := c.namespaces
			if ns == nil {
				ns = []string{"core.ow_t.*"}
			}
			h, home := owHost(t, k, ns...)
			_, _, err := h.Install(ctx, c.req, InstallOptions{})
			var ve *registry.VerifyError
			if !errors.As(err, &ve) || ve.Code != c.code || !strings.Contains(err.Error(), c.code) {
				t.Fatalf("err %v, want code %q", err, c.code)
			}
			if n := blobCount(t, home); n != 0 || len(refs(t, h)) != 0 {
				t.Fatalf("refused, yet %d blobs and packs %v stored", n, refs(t, h))
			}
		})
	}
}

// TestOpenwopTarballSignature: an openwop registry's v1 tree as published
// (VERSION.tgz with "./" entries, VERSION.sig over the tarball beside it)
// installs from its file; the module runtime.entry names is missing and
// dist/<base> is used, and the installed manifest says so; the node runs.
func TestOpenwopTarballSignature(t *testing.T) {
	k := newOwKey(t, "registry-test-1")
	h, _ := owHost(t, k, "core.ow_t.*")
	tgz := hosttest.OpenwopTarball(t, owFiles(t, owManifest("")))
	dir := t.TempDir()
	path := filepath.Join(dir, "1.0.0.tgz")
	if err := os.WriteFile(path, tgz, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "1.0.0.sig"), k.sign(tgz), 0o644); err != nil {
		t.Fatal(err)
	}
	p, _, err := h.InstallFile(ctx, path, PackFiles{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Ref() != owName+"@1.0.0" || p.Signer != "registry-key:registry-test-1" {
		t.Fatalf("installed %s signed by %s", p.Ref(), p.Signer)
	}
	_, m, err := h.Pack(ctx, p.Ref())
	if err != nil {
		t.Fatal(err)
	}
	ow := m.Openwop
	if ow == nil || ow.Module != "dist/openwop_hello.wasm" || !strings.Contains(ow.EntryNote, "using dist/openwop_hello.wasm") {
		t.Fatalf("translation: %+v", ow)
	}
	if ow.Format != "openwop-v1" || ow.Nodes[0].Category != "data" || ow.Nodes[0].Role != "pure" || m.Nodes[0].Kind != "node" {
		t.Fatalf("translation: %+v nodes %+v", ow, m.Nodes)
	}
	if strings.Join(ow.Ignored, " ") != `$["openwop-build"] $.nodes[0]["x-ui"]` {
		t.Fatalf("ignored %q", ow.Ignored)
	}
	greet(t, h)
}

// TestOpenwopCanonicalSignature: a v2 pack (signing {keyId, scheme}), its
// detached signature over the JCS form of pack.json and its integrity pin
// installs; each way of getting it wrong is refused with openwop's code and
// stores nothing.
func TestOpenwopCanonicalSignature(t *testing.T) {
	k := newOwKey(t, "registry-test-1")
	pj := owManifest(v2Signing(k.keyID))
	tgz := hosttest.OpenwopTarball(t, owFiles(t, pj))
	good := registry.Signed{Archive: tgz, Signature: k.canonicalSig(t, pj), Integrity: registry.Integrity(tgz)}

	other := newOwKey(t, "registry-test-1") // same keyId, another key
	otherPJ := owManifest(v2Signing("registry-test-2"))
	otherTgz := hosttest.OpenwopTarball(t, owFiles(t, otherPJ))
	tamperedFiles := owFiles(t, pj)
	tamperedFiles["dist/openwop_hello.wasm"] = append(tamperedFiles["dist/openwop_hello.wasm"], 0)
	tampered := hosttest.OpenwopTarball(t, tamperedFiles)
	checkRefusals(t, k, []owRefusal{
		{"no integrity pin", registry.Signed{Archive: tgz, Signature: good.Signature}, nil, registry.CodeSignatureInvalid},
		{"wrong pin", registry.Signed{Archive: tgz, Signature: good.Signature, Integrity: registry.Integrity(tampered)}, nil, registry.CodeIntegrityFailure},
		{"malformed pin", registry.Signed{Archive: tgz, Signature: good.Signature, Integrity: "sha256-nope"}, nil, registry.CodeIntegrityFailure},
		{"module tampered", registry.Signed{Archive: tampered, Signature: good.Signature, Integrity: registry.Integrity(tgz)}, nil, registry.CodeIntegrityFailure},
		{"signed by another key", registry.Signed{Archive: tgz, Signature: other.canonicalSig(t, pj), Integrity: good.Integrity}, nil, registry.CodeSignatureInvalid},
		{"signed over the bytes, not the canonical form", registry.Signed{Archive: tgz, Signature: k.sign([]byte(pj)), Integrity: good.Integrity}, nil, registry.CodeSignatureInvalid},
		{"signature over the tarball", registry.Signed{Archive: tgz, Signature: k.sign(tgz), Integrity: good.Integrity}, nil, registry.CodeSignatureInvalid},
		{"keyId not in the policy", registry.Signed{Archive: otherTgz, Signature: k.canonicalSig(t, otherPJ), Integrity: registry.Integrity(otherTgz)}, nil, registry.CodeSignatureInvalid},
		{"key not permitted for the namespace", good, []string{"vendor.acme.*"}, registry.CodeNamespaceUnauthorized},
		{"no signature", registry.Signed{Archive: tgz, Integrity: good.Integrity}, nil, registry.CodeSignatureInvalid},
	})
	h, _ := owHost(t, k, "core.ow_t.*")
	if _, _, err := h.Install(ctx, good, InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	_, m, err := h.Pack(ctx, owName)
	if err != nil {
		t.Fatal(err)
	}
	if m.Openwop.Format != "openwop-v2" || m.Openwop.Signing.KeyID != k.keyID {
		t.Fatalf("translation %+v", m.Openwop)
	}
	greet(t, h)
}

// TestOpenwopManifestSignature: a v1 pack.json.sig (Ed25519 over pack.json
// as stored) inside the archive, with the archive pinned, installs;
// unpinned, tampered or mis-namespaced it is refused and nothing is stored.
func TestOpenwopManifestSignature(t *testing.T) {
	k := newOwKey(t, "registry-test-1")
	pj := owManifest(`"signing": {"publicKeyRef": "keys/registry-test-1.pem", "signatureRef": "pack.json.sig"},`)
	files := owFiles(t, pj)
	files["pack.json.sig"] = k.sign([]byte(pj))
	tgz := hosttest.OpenwopTarball(t, files)
	files["pack.json.sig"] = k.sign([]byte(pj + " "))
	badSig := hosttest.OpenwopTarball(t, files)
	delete(files, "pack.json.sig")
	unsigned := hosttest.OpenwopTarball(t, files)
	checkRefusals(t, k, []owRefusal{
		{"unpinned", registry.Signed{Archive: tgz}, nil, ""},
		{"signature of other bytes", registry.Signed{Archive: badSig, Integrity: registry.Integrity(badSig)}, nil, registry.CodeSignatureInvalid},
		{"no pack.json.sig", registry.Signed{Archive: unsigned, Integrity: registry.Integrity(unsigned)}, nil, registry.CodeSignatureInvalid},
		{"not permitted", registry.Signed{Archive: tgz, Integrity: registry.Integrity(tgz)}, []string{"core.other.*"}, registry.CodeNamespaceUnauthorized},
	})
	h, _ := owHost(t, k, "core.ow_t.*")
	p, _, err := h.Install(ctx, registry.Signed{Archive: tgz, Integrity: registry.Integrity(tgz)}, InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Signer != "registry-key:registry-test-1" {
		t.Fatalf("signer %s", p.Signer)
	}
	greet(t, h) // opened from its blob: translated again, equal to the manifest recorded
}

// TestOpenwopSigstoreSigned: an openwop tarball signed with a Sigstore
// bundle is judged as any packrun pack: under a policy requiring
// provenance it installs with its provenance and is refused without it
// (an openwop manifest does not waive provenance).
func TestOpenwopSigstoreSigned(t *testing.T) {
	k := newTestKey(t)
	home := filepath.Join(t.TempDir(), "home")
	savePolicy(t, home, trustKey(t, k, "core.ow_t.*"))
	h := openHost(t, home)
	req := k.sign(t, hosttest.OpenwopTarball(t, owFiles(t, owManifest(""))), owName)
	noProv := req
	noProv.Provenance = nil
	if _, _, err := h.Install(ctx, noProv, InstallOptions{}); !errors.Is(err, registry.ErrUntrusted) || !strings.Contains(err.Error(), "provenance") {
		t.Fatalf("without provenance: %v", err)
	}
	if n := blobCount(t, home); n != 0 {
		t.Fatalf("refused, yet %d blobs stored", n)
	}
	p, _, err := h.Install(ctx, req, InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Provenance == nil || p.Signer != "key:test" {
		t.Fatalf("installed %+v", p)
	}
	greet(t, h)
}

// TestOpenwopUnsignedUnsafe: openwop's conformance fixture packs are
// published unsigned; --allow-unsigned-unsafe installs one as "unsigned",
// and without it the pack is refused and nothing stored.
func TestOpenwopUnsignedUnsafe(t *testing.T) {
	k := newOwKey(t, "registry-test-1")
	tgz := hosttest.OpenwopTarball(t, owFiles(t, strings.Replace(owManifest(""), `"version"`, `"kind": "node", "version"`, 1)))
	checkRefusals(t, k, []owRefusal{{"unsigned", registry.Signed{Archive: tgz}, nil, ""}})
	h, _ := owHost(t, k, "core.ow_t.*")
	p, _, err := h.Install(ctx, registry.Signed{Archive: tgz}, InstallOptions{AllowUnsignedUnsafe: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Signer != "unsigned" {
		t.Fatalf("signer %s", p.Signer)
	}
	greet(t, h)
}
