package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// homeCLI runs commands against one fixed home.
type homeCLI struct {
	t    *testing.T
	home string
}

func (h homeCLI) run(args ...string) (int, string, string) {
	h.t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"--home", h.home}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func (h homeCLI) ok(args ...string) string {
	h.t.Helper()
	code, out, errs := h.run(args...)
	if code != 0 {
		h.t.Fatalf("packrun %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func TestSignedPackFlow(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	key := filepath.Join(dir, "acme")
	pack := filepath.Join(dir, "hello.pack")
	h.ok("keys", "generate", "--out", key)
	if fi, err := os.Stat(key + ".key"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode: %v %v", fi.Mode(), err)
	}
	h.ok("pack", "../../examples/hello-c", "-o", pack)
	first, _ := os.ReadFile(pack)
	h.ok("pack", "../../examples/hello-c", "-o", pack)
	if again, _ := os.ReadFile(pack); !bytes.Equal(first, again) {
		t.Fatal("packing twice gave different bytes")
	}
	h.ok("sign", pack, "--key", key+".key", "--builder-id", "https://ci.example/b")

	// Not trusted yet: refused, nothing installed.
	if code, _, errs := h.run("install", pack); code != 5 || !strings.Contains(errs, "refused") {
		t.Fatalf("untrusted install: exit %d %s", code, errs)
	}
	// Trusted, but only for another namespace.
	h.ok("trust", "add-key", "acme", key+".pub", "--namespace", "vendor.acme.*")
	if code, _, errs := h.run("verify", pack); code != 5 || !strings.Contains(errs, "local.hello.c") {
		t.Fatalf("outside namespace: exit %d %s", code, errs)
	}
	h.ok("trust", "remove", "acme")
	h.ok("trust", "add-key", "acme", key+".pub", "--namespace", "local.*")
	if out := h.ok("trust", "list"); !strings.Contains(out, "acme") || !strings.Contains(out, "local.*") {
		t.Fatalf("trust list: %s", out)
	}
	if out := h.ok("verify", pack); !strings.Contains(out, "signed by key:acme") || !strings.Contains(out, "builder https://ci.example/b") {
		t.Fatalf("verify: %s", out)
	}
	h.ok("install", pack)
	if out := h.ok("install", pack); !strings.Contains(out, "already installed") {
		t.Fatalf("second install: %s", out)
	}
	var list []struct{ Name, Version, Signer string }
	if err := json.Unmarshal([]byte(h.ok("list", "--json")), &list); err != nil || len(list) != 1 || list[0].Name != "local.hello.c" || list[0].Signer != "key:acme" {
		t.Fatalf("list: %v %+v", err, list)
	}
	if out := h.ok("inspect", "local.hello.c@1.0.0"); !strings.Contains(out, "node:       example.hello (skill)") {
		t.Fatalf("inspect: %s", out)
	}
	for _, target := range []string{"local.hello.c", "local.hello.c@1.0.0", "local.hello.c@^1", pack} {
		if out := h.ok("invoke", target, "--input", `{"name":"pack"}`); out != `{"greeting":"Hello, pack!"}`+"\n" {
			t.Fatalf("invoke %s: %q", target, out)
		}
	}
	if code, _, errs := h.run("invoke", "local.hello.c@2"); code != 66 || !strings.Contains(errs, "not installed (installed: 1.0.0)") {
		t.Fatalf("invoke missing version: exit %d %s", code, errs)
	}

	// Export, then install the export under another home.
	out := filepath.Join(dir, "export")
	h.ok("export", "local.hello.c", "-o", out)
	exported := filepath.Join(out, "local.hello.c-1.0.0.pack")
	if b, _ := os.ReadFile(exported); !bytes.Equal(b, first) {
		t.Fatal("exported pack differs from the installed one")
	}
	other := homeCLI{t, filepath.Join(dir, "home2")}
	other.ok("trust", "add-key", "acme", key+".pub", "--namespace", "local.*")
	other.ok("install", exported)
	other.ok("invoke", "local.hello.c")

	// Tampered archive: refused with exit 5.
	tampered := filepath.Join(dir, "tampered.pack")
	b := bytes.Clone(first)
	b[len(b)/2] ^= 0xff
	os.WriteFile(tampered, b, 0o644)
	for _, suffix := range []string{".sigstore.json", ".provenance.sigstore.json"} {
		s, _ := os.ReadFile(pack + suffix)
		os.WriteFile(tampered+suffix, s, 0o644)
	}
	if code, _, errs := h.run("install", tampered); code != 5 {
		t.Fatalf("tampered: exit %d %s", code, errs)
	}

	// Unsigned: refused unless the unsafe option is named.
	unsigned := filepath.Join(dir, "unsigned.pack")
	os.WriteFile(unsigned, first, 0o644)
	if code, _, errs := h.run("verify", unsigned); code != 5 {
		t.Fatalf("unsigned: exit %d %s", code, errs)
	}
	if out := h.ok("verify", unsigned, "--allow-unsigned-unsafe"); !strings.Contains(out, "UNSIGNED") {
		t.Fatalf("unsigned unsafe: %s", out)
	}

	h.ok("uninstall", "local.hello.c")
	if code, _, _ := h.run("invoke", "local.hello.c"); code != 66 {
		t.Fatalf("invoke after uninstall: exit %d", code)
	}
}

func TestPackRefusesBadDirectory(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pack.json"), []byte(`{"name":"Bad Name","version":"1"}`), 0o644)
	code, _, errs := runCLI(t, "pack", dir)
	if code != 5 || !strings.Contains(errs, "$.name") || !strings.Contains(errs, "$.version") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}
