package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi/guest"
	"github.com/packrun/packrun/packs"
)

var initTestLangs = []string{"c", "go", "rust", "assemblyscript", "wat", "extism-go"}

// needToolchain skips the test when lang's toolchain is missing (CI installs
// them all) and returns extra setup for the project, if any.
func needToolchain(t *testing.T, lang string) (setup func(proj string)) {
	t.Helper()
	need := func(tools ...string) {
		for _, tool := range tools {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("%s not found: needed to build %s packs", tool, lang)
			}
		}
	}
	switch lang {
	case "c":
		need("clang", "wasm-ld")
	case "go", "extism-go":
		need("go")
	case "rust":
		if rustcWithWasm32() == "" {
			t.Skip("no rustc with the wasm32-unknown-unknown std (apt-get install rustc libstd-rust-dev-wasm32)")
		}
	case "wat":
		need("wat2wasm")
	case "assemblyscript":
		need("node", "npm")
		// Reuse the SDK's pinned compiler (CI runs npm ci there) instead of
		// downloading it: build.sh runs npm install only without node_modules.
		sdkModules, err := filepath.Abs("../../abi/guest/assemblyscript/node_modules")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(sdkModules, ".bin", "asc")); err != nil {
			t.Skip("abi/guest/assemblyscript/node_modules/.bin/asc not found: run npm ci in abi/guest/assemblyscript")
		}
		// node_modules as npm install would leave it: the compiler (and
		// what it needs) from the SDK's, and @packrun/as-sdk linked to the
		// project's sdk/assemblyscript, as a file: dependency is.
		return func(proj string) {
			nm := filepath.Join(proj, "node_modules")
			entries, err := os.ReadDir(sdkModules)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(nm, "@packrun"), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if err := os.Symlink(filepath.Join(sdkModules, e.Name()), filepath.Join(nm, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(filepath.Join("..", "..", "sdk", "assemblyscript"), filepath.Join(nm, "@packrun", "as-sdk")); err != nil {
				t.Fatal(err)
			}
		}
	}
	return func(string) {}
}

// rustcWithWasm32 finds a rustc whose sysroot has the wasm32 std, the way
// the generated build.sh does.
func rustcWithWasm32() string {
	for _, c := range []string{"rustc", "/usr/bin/rustc"} {
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		out, err := exec.Command(p, "--print", "sysroot").Output()
		if err != nil {
			continue
		}
		if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(out)), "lib", "rustlib", "wasm32-unknown-unknown")); err == nil && fi.IsDir() {
			return p
		}
	}
	return ""
}

// TestInitBuildInstallInvoke scaffolds a project in every language, builds,
// signs, trusts, installs and invokes it twice: the count kept in memory
// (granted by the manifest) goes up.
func TestInitBuildInstallInvoke(t *testing.T) {
	for _, lang := range initTestLangs {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			setup := needToolchain(t, lang)
			dir := t.TempDir()
			h := homeCLI{t, filepath.Join(dir, "home")}
			proj := filepath.Join(dir, "counter-"+lang)
			name := "local.counter-" + lang

			out := h.ok("init", proj, "--lang", lang)
			if !strings.Contains(out, name) {
				t.Fatalf("init output: %s", out)
			}
			setup(proj)
			code, out, errs := h.run("build", proj)
			if code != 0 {
				t.Fatalf("build: exit %d\n%s%s", code, out, errs)
			}
			pack := strings.TrimSpace(out)
			if want := filepath.Join(proj, "dist", name+"-0.1.0.pack"); pack != want {
				t.Fatalf("build printed %q, want %q (stderr %s)", pack, want, errs)
			}
			mb, _ := os.ReadFile(filepath.Join(proj, "pack.json"))
			m, err := packs.DecodeManifest(mb)
			if err != nil {
				t.Fatal(err)
			}
			wasm, err := os.ReadFile(filepath.Join(proj, "node.wasm"))
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(wasm); m.Runtime.Modules[0].SHA256 != hex.EncodeToString(sum[:]) {
				t.Fatalf("pack.json sha256 %s does not match node.wasm", m.Runtime.Modules[0].SHA256)
			}

			key := filepath.Join(dir, "acme")
			h.ok("keys", "generate", "--out", key)
			h.ok("sign", pack, "--key", key+".key")
			h.ok("trust", "add-key", "acme", key+".pub", "--namespace", "local.*")
			h.ok("install", pack)

			want := []string{`{"name":"x","count":1}`, `{"name":"x","count":2}`}
			switch lang {
			case "wat": // the WAT node ignores its input
				want = []string{`{"count":1}`, `{"count":2}`}
			case "extism-go": // encoding/json sorts map keys
				want = []string{`{"count":1,"name":"x"}`, `{"count":2,"name":"x"}`}
			}
			for _, w := range want {
				if got := strings.TrimSpace(h.ok("invoke", name, "--input", `{"name":"x"}`)); got != w {
					t.Fatalf("invoke: got %s, want %s", got, w)
				}
			}
			// The module built by init, and the project directory, run
			// unsigned with pack.json's grants (memory is shared with the
			// installed pack: same tenant and namespace), and say so.
			third, fourth := `{"name":"x","count":3}`, `{"name":"x","count":4}`
			switch lang {
			case "wat":
				third, fourth = `{"count":3}`, `{"count":4}`
			case "extism-go":
				third, fourth = `{"count":3,"name":"x"}`, `{"count":4,"name":"x"}`
			}
			for _, c := range []struct{ target, want string }{{filepath.Join(proj, "node.wasm"), third}, {proj, fourth}} {
				code, out, errs := h.run("invoke", c.target, "--input", `{"name":"x"}`)
				if code != 0 || strings.TrimSpace(out) != c.want || !strings.Contains(errs, "unsigned") {
					t.Fatalf("invoke %s: exit %d, got %s, want %s; stderr %s", c.target, code, out, c.want, errs)
				}
			}
			// Building again changes nothing.
			h.ok("build", proj)
			if again, _ := os.ReadFile(filepath.Join(proj, "pack.json")); string(again) != string(mb) {
				t.Fatalf("second build changed pack.json:\n%s", again)
			}
		})
	}
}

func TestInitRefuses(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	full := filepath.Join(dir, "full")
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "keep.txt"), []byte("x"), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"init", full, "--lang", "c"}, "not empty"},
		{[]string{"init", filepath.Join(dir, "a"), "--lang", "cobol"}, `unknown language`},
		{[]string{"init", filepath.Join(dir, "b"), "--lang", "extism-rust"}, "only with the Go PDK"},
		{[]string{"init", filepath.Join(dir, "c")}, "needs --lang"},
		{[]string{"init", filepath.Join(dir, "d"), "--lang", "go", "--name", "Not A Name"}, "not a pack name"},
		{[]string{"init", filepath.Join(dir, "full", "keep.txt"), "--lang", "wat"}, "not a directory"},
	}
	for _, c := range cases {
		code, out, errs := h.run(c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) || out != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 64 and %q", strings.Join(c.args, " "), code, out, errs, c.want)
		}
		if strings.Count(errs, "packrun: ") != 1 {
			t.Errorf("%s: want one error line, got %q", strings.Join(c.args, " "), errs)
		}
	}
	for _, d := range []string{"a", "b", "c", "d"} {
		if _, err := os.Stat(filepath.Join(dir, d)); err == nil {
			t.Errorf("refused init created %s", d)
		}
	}
	if entries, _ := os.ReadDir(full); len(entries) != 1 {
		t.Errorf("refused init wrote into the non-empty directory: %v", entries)
	}
}

// TestInitNames checks the pack name (default and --name) reaches the
// manifest, the node, the task type and every language's source.
func TestInitNames(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	if got := defaultPackName("My Project_2.x..Y"); got != "local.my-project-2.x.y" {
		t.Errorf("defaultPackName: %s", got)
	}
	if got := defaultPackName("__"); got != "local.pack" {
		t.Errorf("defaultPackName: %s", got)
	}
	source := map[string]string{"c": "node.c", "go": "main.go", "rust": "node.rs", "assemblyscript": "assembly/index.ts", "wat": "node.wat", "extism-go": "main.go"}
	for _, lang := range initTestLangs {
		proj := filepath.Join(dir, lang, "Odd Dir_Name")
		h.ok("init", proj, "--lang", lang)
		checkProject(t, proj, "local.odd-dir-name", "odd-dir-name", source[lang])

		named := filepath.Join(dir, lang, "named")
		os.MkdirAll(named, 0o755) // an empty directory is fine
		h.ok("init", named, "--lang", lang, "--name", "vendor.acme.thing")
		checkProject(t, named, "vendor.acme.thing", "thing", source[lang])
		readme, _ := os.ReadFile(filepath.Join(named, "README.md"))
		for _, s := range []string{"packrun build .", "--namespace 'vendor.acme.*'", "packrun install dist/vendor.acme.thing-0.1.0.pack", "packrun invoke vendor.acme.thing"} {
			if !strings.Contains(string(readme), s) {
				t.Errorf("%s README lacks %q", lang, s)
			}
		}
		if fi, err := os.Stat(filepath.Join(named, "build.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
			t.Errorf("%s build.sh not executable: %v", lang, err)
		}
		if gi, _ := os.ReadFile(filepath.Join(named, ".gitignore")); !strings.Contains(string(gi), "dist/") || !strings.Contains(string(gi), "node_modules/") {
			t.Errorf("%s .gitignore: %q", lang, gi)
		}
	}
	gomod, _ := os.ReadFile(filepath.Join(dir, "go", "named", "go.mod"))
	for _, want := range []string{"module vendor.acme.thing\n", "require github.com/packrun/packrun v" + guest.Version + "\n", "replace github.com/packrun/packrun => ./sdk/go\n"} {
		if !strings.Contains(string(gomod), want) {
			t.Errorf("go.mod lacks %q:\n%s", want, gomod)
		}
	}
	if main, _ := os.ReadFile(filepath.Join(dir, "go", "named", "main.go")); !strings.Contains(string(main), `"github.com/packrun/packrun/abi/guest/go/packrun"`) {
		t.Error("main.go does not import the SDK by its module path")
	}
	// Each SDK is a package in sdk/<lang>, with its licence and version.
	for lang, f := range map[string]string{"c": "sdk/c/packrun.h", "go": "sdk/go/abi/guest/go/packrun/node.go", "rust": "sdk/rust/src/lib.rs", "assemblyscript": "sdk/assemblyscript/assembly/exports.ts"} {
		if _, err := os.Stat(filepath.Join(dir, lang, "named", f)); err != nil {
			t.Errorf("%s: no SDK package: %v", lang, err)
		}
		if v, _ := os.ReadFile(filepath.Join(dir, lang, "named", "sdk", lang, "SDK-VERSION")); strings.TrimSpace(string(v)) != guest.Version {
			t.Errorf("%s: SDK-VERSION %q, want %s", lang, v, guest.Version)
		}
		if _, err := os.Stat(filepath.Join(dir, lang, "named", "sdk", lang, "LICENSE")); err != nil {
			t.Errorf("%s: the SDK package has no LICENSE: %v", lang, err)
		}
	}
	for _, f := range []string{"sdk/go/go.mod", "sdk/rust/Cargo.toml", "sdk/assemblyscript/package.json"} {
		lang := strings.Split(f, "/")[1]
		if _, err := os.Stat(filepath.Join(dir, lang, "named", f)); err != nil {
			t.Errorf("%s: the SDK package has no manifest: %v", lang, err)
		}
	}
	if cargo, _ := os.ReadFile(filepath.Join(dir, "rust", "named", "Cargo.toml")); !strings.Contains(string(cargo), `packrun = { path = "sdk/rust" }`) {
		t.Errorf("the Rust project does not depend on the SDK crate:\n%s", cargo)
	}
	var pkg struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "assemblyscript", "named", "package.json"))
	if err := json.Unmarshal(b, &pkg); err != nil || pkg.DevDependencies["assemblyscript"] != "0.28.20" || pkg.DevDependencies["@packrun/as-sdk"] != "file:sdk/assemblyscript" {
		t.Errorf("package.json: %v %s", err, b)
	}
}

func checkProject(t *testing.T, proj, name, short, source string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(proj, "pack.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := packs.DecodeManifest(b)
	if err != nil {
		t.Fatalf("%s: %v", proj, err)
	}
	n := m.Nodes[0]
	if m.Name != name || m.Version != "0.1.0" || len(m.Runtime.Modules) != 1 || m.Runtime.Modules[0].Path != "node.wasm" ||
		n.TypeID != short+".counter" || n.Kind != packs.KindSkill || len(n.TaskTypes) != 1 || n.TaskTypes[0] != short+".count" ||
		!m.Grants.AllowsMemoryNamespace(name) || n.InputSchema == nil || n.OutputSchema == nil {
		t.Errorf("%s: manifest %+v", proj, m)
	}
	src, err := os.ReadFile(filepath.Join(proj, source))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), `"`+name+`"`) || !strings.Contains(string(src), `"`+n.TypeID+`"`) {
		t.Errorf("%s does not name pack %s and node %s", source, name, n.TypeID)
	}
}

func TestBuildReportsFailure(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	proj := filepath.Join(dir, "broken")
	h.ok("init", proj, "--lang", "wat")
	os.WriteFile(filepath.Join(proj, "build.sh"), []byte("echo 'node.wat:3: syntax error' >&2\nexit 3\n"), 0o755)
	code, out, errs := h.run("build", proj)
	if code != exitOther || out != "" || !strings.Contains(errs, "node.wat:3: syntax error") ||
		!strings.Contains(errs, "packrun: build: "+filepath.Join(proj, "build.sh")+" failed with exit status 3") || strings.Count(errs, "packrun: ") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// A build that does not produce the module.
	os.WriteFile(filepath.Join(proj, "build.sh"), []byte("true\n"), 0o755)
	if code, _, errs := h.run("build", proj); code != exitOther || !strings.Contains(errs, "did not produce") {
		t.Fatalf("no module: exit %d %s", code, errs)
	}
	// Not a project.
	if code, _, errs := h.run("build", dir); code != exitUsage || !strings.Contains(errs, "no build.sh") {
		t.Fatalf("no build.sh: exit %d %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(proj, "dist")); err == nil {
		t.Fatal("a failed build wrote dist/")
	}
}

// TestBuildPatchesManifest: only the sha256 values change (one is added
// where missing); key order and formatting stay as written.
func TestBuildPatchesManifest(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	zeros := strings.Repeat("0", 64)
	manifest := `{"version": "1.2.3", "name": "local.patch",
  "nodes": [{"typeId": "a.run", "kind": "node", "module": "a.wasm"},
            {"typeId": "b.run", "kind": "node", "module": "wasm/b.wasm", "inputSchema": {"sha256": "not a module"}}],
  "runtime": {"modules": [
      {"sha256": "` + zeros + `", "path": "a.wasm"},
      {"path": "wasm/b.wasm"}
    ], "abi": {"minor": 0, "version": 1}, "language": "wasm"}
}
`
	os.WriteFile(filepath.Join(dir, "pack.json"), []byte(manifest), 0o600)
	os.WriteFile(filepath.Join(dir, "build.sh"), []byte("mkdir -p wasm\nprintf 'a' > a.wasm\nprintf 'b' > wasm/b.wasm\n"), 0o644)
	out := h.ok("build", dir)
	if strings.TrimSpace(out) != filepath.Join(dir, "dist", "local.patch-1.2.3.pack") {
		t.Fatalf("build printed %q", out)
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	want := strings.Replace(manifest, zeros, sum("a"), 1)
	want = strings.Replace(want, `{"path": "wasm/b.wasm"}`, `{"path": "wasm/b.wasm", "sha256": "`+sum("b")+`"}`, 1)
	got, _ := os.ReadFile(filepath.Join(dir, "pack.json"))
	if string(got) != want {
		t.Fatalf("pack.json:\n%s\nwant:\n%s", got, want)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "pack.json")); fi.Mode().Perm() != 0o600 {
		t.Errorf("pack.json mode changed to %v", fi.Mode())
	}
	if _, err := packs.Collect(dir); err != nil {
		t.Fatal(err)
	}
	// Invalid JSON is refused before anything is rewritten.
	os.WriteFile(filepath.Join(dir, "pack.json"), []byte(`{"runtime": {"modules": [}`), 0o644)
	if code, _, errs := h.run("build", dir); code != exitRefused || !strings.Contains(errs, "not valid JSON") {
		t.Fatalf("invalid pack.json: exit %d %s", code, errs)
	}
}
