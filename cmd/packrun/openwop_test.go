package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"

	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/registry"
)

// TestInstallOpenwopPack: an operator trusts an openwop registry key by its
// keyId for a namespace, installs a v2 pack as published (VERSION.tgz with
// "./" entries, VERSION.sig over its canonical pack.json) with its
// integrity pin, sees the translation (the module found under dist/) in
// the install output and in inspect, and runs its node; the wrong pin is
// refused (exit 5, openwop's code) and stores nothing.
func TestInstallOpenwopPack(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pj := `{"name":"core.ow_t.helloPack","version":"1.0.0", "engines":{"openwop":">=2.0.0 <3.0.0"},
  "signing":{"keyId":"registry-test-1","scheme":"ed25519-canonical-json"},
  "nodes":[{"typeId":"core.ow_t.greet","version":"1.0.0","category":"data","role":"pure"}],
  "runtime":{"language":"wasm","entry":"target/wasm32-unknown-unknown/release/openwop_hello.wasm","format":"wasm"}}`
	canon, err := jsoncanonicalizer.Transform([]byte(pj))
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile("../../testdata/modules/openwop_hello.wasm")
	if err != nil {
		t.Fatal(err)
	}
	tgz := hosttest.OpenwopTarball(t, map[string][]byte{"pack.json": []byte(pj), "dist/openwop_hello.wasm": wasm})
	path := filepath.Join(dir, "1.0.0.tgz")
	for p, b := range map[string][]byte{path: tgz, filepath.Join(dir, "1.0.0.sig"): []byte(base64.StdEncoding.EncodeToString(ed25519.Sign(priv, canon)))} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.ok("trust", "add-registry-key", "registry-test-1", base64.StdEncoding.EncodeToString(pub), "--namespace", "core.ow_t.*")

	code, _, errs := h.run("install", path, "--integrity", registry.Integrity(wasm))
	if code != exitRefused || !strings.Contains(errs, "pack_integrity_failure") {
		t.Fatalf("wrong pin: exit %d %s", code, errs)
	}
	if out := h.ok("list"); strings.Contains(out, "core.ow_t") {
		t.Fatalf("refused, yet listed: %s", out)
	}
	out := h.ok("install", path, "--integrity", registry.Integrity(tgz))
	for _, want := range []string{"installed core.ow_t.helloPack@1.0.0", "signed by registry-key:registry-test-1", "openwop-v2", "using dist/openwop_hello.wasm"} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}
	if out := h.ok("verify", path, "--integrity", registry.Integrity(tgz)); !strings.Contains(out, "verified core.ow_t.helloPack@1.0.0") || !strings.Contains(out, "using dist/openwop_hello.wasm") {
		t.Errorf("verify:\n%s", out)
	}
	if out := h.ok("inspect", "core.ow_t.helloPack"); !strings.Contains(out, "entry:    target/wasm32-unknown-unknown/release/openwop_hello.wasm -> module dist/openwop_hello.wasm") {
		t.Errorf("inspect:\n%s", out)
	}
	if out := h.ok("invoke", "core.ow_t.helloPack", "--input", `{"name":"cli"}`); out != `{"greeting":"Hello, cli!"}`+"\n" {
		t.Errorf("invoke: %q", out)
	}
}
