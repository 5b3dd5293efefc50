package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi/guest"
)

// TestSDKUpgrade: packrun sdk upgrade puts back the SDK package this
// binary carries (edited files restored, stray files gone, the version
// recorded), says what it did, and refuses a directory that is no project.
func TestSDKUpgrade(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	proj := filepath.Join(dir, "hello")
	h.ok("init", proj, "--lang", "c")
	if out := h.ok("sdk", "version"); !strings.HasPrefix(out, guest.Version+" (") {
		t.Fatalf("sdk version: %q", out)
	}
	if out := h.ok("sdk", "version", "--output", "json"); !strings.Contains(out, `"version":"`+guest.Version+`"`) || !strings.Contains(out, `"languages":["assemblyscript","c","go","rust"]`) {
		t.Fatalf("sdk version --output json: %q", out)
	}
	if out := h.ok("sdk", "upgrade", proj); strings.TrimSpace(out) != "sdk/c: "+guest.Version+", up to date" {
		t.Fatalf("upgrade of a fresh project: %q", out)
	}
	header := filepath.Join(proj, "sdk", "c", "packrun.h")
	for f, data := range map[string]string{header: "/* edited */\n", filepath.Join(proj, "sdk", "c", "SDK-VERSION"): "0.0.9\n", filepath.Join(proj, "sdk", "c", "stray.c"): "int x;\n"} {
		if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out := h.ok("sdk", "upgrade", proj); strings.TrimSpace(out) != "sdk/c: 0.0.9 -> "+guest.Version {
		t.Fatalf("upgrade: %q", out)
	}
	want, err := fs.ReadFile(guest.SDK, "c/packrun.h")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(header); string(got) != string(want) {
		t.Error("packrun.h was not put back")
	}
	if _, err := os.Stat(filepath.Join(proj, "sdk", "c", "stray.c")); !os.IsNotExist(err) {
		t.Errorf("a stray file survived the upgrade: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(proj, "sdk", ".*")); len(left) != 0 {
		t.Errorf("the upgrade left %v", left)
	}
	code, _, errs := h.run("sdk", "upgrade", dir)
	if code != exitUsage || !strings.Contains(errs, "has no SDK package") {
		t.Fatalf("upgrade of a non-project: exit %d %s", code, errs)
	}
}

// TestInitRustIsACargoPackage: a Rust project made by init builds with
// Debian's cargo, offline, through its path dependency on the SDK crate.
func TestInitRustIsACargoPackage(t *testing.T) {
	cargo := "/usr/bin/cargo"
	if _, err := os.Stat(cargo); err != nil {
		t.Skip("cargo not installed (apt-get install cargo)")
	}
	if _, err := os.Stat("/usr/lib/rustlib/wasm32-unknown-unknown"); err != nil {
		t.Skip("Debian's wasm32 std not installed (apt-get install libstd-rust-dev-wasm32)")
	}
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	proj := filepath.Join(dir, "crab")
	h.ok("init", proj, "--lang", "rust")
	target := filepath.Join(dir, "target")
	build := exec.Command(cargo, "build", "--offline", "--release", "--target", "wasm32-unknown-unknown")
	build.Dir = proj
	build.Env = append(os.Environ(), "RUSTC=/usr/bin/rustc", "CARGO_TARGET_DIR="+target, "CARGO_HOME="+filepath.Join(dir, "cargo-home"))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cargo build: %v\n%s", err, out)
	}
	wasm := filepath.Join(target, "wasm32-unknown-unknown", "release", "node.wasm")
	out := h.ok("inspect", wasm)
	if !strings.Contains(out, "local.crab") || !strings.Contains(out, "crab.counter") {
		t.Fatalf("inspect of the cargo-built module:\n%s", out)
	}
}
